/*
 * Fuzz target for the reader of what the hosts target's preflight script
 * printed on a machine (targets/hosts-preflight.c): the input is that
 * output. Each read ends with 0 and ordered percentiles, or with -EINVAL
 * and a message and nothing filled in; never a crash or a leak. A result
 * read is judged too.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "targets/hosts-preflight.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        preflight_result r = {0};
        char *why = NULL;
        int k = preflight_parse((const char *)data, size, &r, &why);
        if (k < 0) {
                if (k != -EINVAL || !why || r.kernel || r.fstype || r.error)
                        abort();
                free(why);
                return 0;
        }
        if (why || !r.kernel || !r.fstype || r.n_sync > PREFLIGHT_MAX_SAMPLES ||
            r.sync_p50_us > r.sync_p99_us || r.sync_p99_us > r.sync_max_us)
                abort();
        preflight_limits l = {PREFLIGHT_SYNC_P99_MAX_US, PREFLIGHT_OFFSET_MAX_MS, 1LL << 31};
        char *reason = NULL;
        if (preflight_judge(&r, 0, 0, &l, &reason) == 1 && !reason)
                abort();
        free(reason);
        preflight_result_release(&r);
        return 0;
}
