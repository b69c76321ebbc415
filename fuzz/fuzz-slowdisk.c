/*
 * Fuzz target for the reader of etcd's disk histograms in a member's
 * /metrics (reconciler/slowdisk.c): the input is that text. A read ends
 * with 0 and both histograms ordered up to +Inf, or with -EBADMSG and a
 * message; never a crash or a leak. A histogram read is then measured
 * against itself emptied (its p99 within its finite bounds) and judged.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "reconciler/slowdisk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void measure(const disk_histogram *h, double *ret_p99, uint64_t *ret_n)
{
        disk_histogram zero = *h;
        for (size_t i = 0; i < zero.n; i++)
                zero.count[i] = 0;
        if (slowdisk_p99(&zero, h, ret_p99, ret_n) != 0)
                abort();
        double top = h->n >= 2 ? h->le[h->n - 2] : 0;
        if (!(*ret_p99 >= 0 && *ret_p99 <= top))
                abort();
        if (slowdisk_p99(h, h, ret_p99, ret_n) != 0 || *ret_n != 0)
                abort();
        if (slowdisk_p99(&zero, h, ret_p99, ret_n) != 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        disk_scrape s;
        char *why = NULL;
        int k = slowdisk_parse((const char *)data, size, &s, &why);
        if (k < 0) {
                if (k != -EBADMSG || !why)
                        abort();
                free(why);
                return 0;
        }
        if (why || s.wal.n == 0 || s.commit.n == 0 || !isinf(s.wal.le[s.wal.n - 1]) ||
            !isinf(s.commit.le[s.commit.n - 1]))
                abort();
        slow_member m[2] = {
            {.name = "a", .id = 1, .voter = true, .healthy = true, .measured = true},
            {.name = "b", .id = 2, .voter = true, .healthy = true, .measured = true}};
        measure(&s.wal, &m[0].wal_p99, &m[0].wal_samples);
        measure(&s.commit, &m[0].commit_p99, &m[0].commit_samples);
        slow_verdict v;
        slowdisk_judge(m, 2, 1, &v);
        if (v.kind == SLOW_MOVE && v.to != &m[1])
                abort();
        return 0;
}
