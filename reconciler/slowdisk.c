/*
 * A leader with a slow disk: etcd's disk histograms, their p99 over a
 * window, and the judgement (slowdisk.h). Pure functions.
 *
 * Why these thresholds. etcd's tuning guide asks for a wal fsync p99 under
 * 10 ms and a backend commit p99 under 25 ms; a leader whose p99 is five
 * (wal) or four (commit) times that delays every proposal enough for
 * followers' heartbeats to slip and leases to be revoked (the field reports
 * behind this step). A floor alone would move leadership off a cluster
 * whose disks are all slow, where no member does better: hence also
 * SLOWDISK_FACTOR times the median of the other voters, so only an outlier
 * is moved from. SLOWDISK_MIN_SAMPLES keeps an idle window's handful of
 * fsyncs (one slow one is its p99) from deciding anything.
 *
 * The reader is strict about the two histograms' lines only: etcd's
 * /metrics has hundreds of other series, which it passes over unread.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reconciler/slowdisk.h"
#include "util/xalloc.h"

static const char WAL[] = "etcd_disk_wal_fsync_duration_seconds_bucket";
static const char COMMIT[] = "etcd_disk_backend_commit_duration_seconds_bucket";

/* A number as Prometheus writes it: a decimal or +Inf; the whole of [p, end). */
static bool read_number(const char *p, const char *end, bool allow_inf, double *ret)
{
        size_t n = (size_t)(end - p);
        if (n == 0 || n > 63)
                return false;
        char buf[64];
        memcpy(buf, p, n);
        buf[n] = '\0';
        if (allow_inf && streq(buf, "+Inf")) {
                *ret = INFINITY;
                return true;
        }
        if (strchr(buf, 'n') || strchr(buf, 'N') || strchr(buf, 'i') || strchr(buf, 'I'))
                return false; /* no nan, inf, 0x... spelled another way */
        char *e = NULL;
        errno = 0;
        double v = strtod(buf, &e);
        if (e != buf + n || errno || !isfinite(v) || v < 0)
                return false;
        *ret = v;
        return true;
}

/* One bucket line's rest after NAME: `{le="X"} V`; appended to h. NULL or why not. */
static const char *read_bucket(const char *p, const char *end, disk_histogram *h)
{
        static const char open[] = "{le=\"";
        if ((size_t)(end - p) < sizeof(open) || memcmp(p, open, sizeof(open) - 1) != 0)
                return "a bucket line is NAME_bucket{le=\"BOUND\"} COUNT";
        p += sizeof(open) - 1;
        const char *q = memchr(p, '"', (size_t)(end - p));
        if (!q || q + 2 >= end || q[1] != '}' || q[2] != ' ')
                return "a bucket line is NAME_bucket{le=\"BOUND\"} COUNT";
        double le, count;
        if (!read_number(p, q, true, &le))
                return "the bucket's bound is not a number";
        const char *v = q + 3;
        const char *ve = memchr(v, ' ', (size_t)(end - v)); /* a timestamp may follow */
        if (!read_number(v, ve ? ve : end, false, &count))
                return "the bucket's count is not a number";
        if (h->n > 0 && isinf(h->le[h->n - 1]))
                return "a bucket after +Inf";
        if (h->n > 0 && le <= h->le[h->n - 1])
                return "bucket bounds do not increase";
        if (h->n > 0 && count < h->count[h->n - 1])
                return "a cumulative bucket count decreases";
        if (h->n == SLOWDISK_MAX_BUCKETS)
                return "too many buckets";
        h->le[h->n] = le;
        h->count[h->n++] = count;
        return NULL;
}

int slowdisk_parse(const char *text, size_t len, disk_scrape *ret, char **ret_error)
{
        disk_scrape s = {0};
        const char *p = text, *end = text + len;
        for (size_t line = 1; p < end; line++) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *le = nl ? nl : end;
                disk_histogram *h = NULL;
                size_t skip = 0;
                if ((size_t)(le - p) > sizeof(WAL) - 1 && memcmp(p, WAL, sizeof(WAL) - 1) == 0 &&
                    p[sizeof(WAL) - 1] == '{')
                        h = &s.wal, skip = sizeof(WAL) - 1;
                else if ((size_t)(le - p) > sizeof(COMMIT) - 1 &&
                         memcmp(p, COMMIT, sizeof(COMMIT) - 1) == 0 && p[sizeof(COMMIT) - 1] == '{')
                        h = &s.commit, skip = sizeof(COMMIT) - 1;
                if (h) {
                        const char *why = read_bucket(p + skip, le, h);
                        if (why) {
                                *ret_error = xasprintf("line %zu: %s", line, why);
                                return -EBADMSG;
                        }
                }
                p = nl ? nl + 1 : end;
        }
        const char *missing = NULL;
        if (s.wal.n == 0 || !isinf(s.wal.le[s.wal.n - 1]))
                missing = "etcd_disk_wal_fsync_duration_seconds";
        else if (s.commit.n == 0 || !isinf(s.commit.le[s.commit.n - 1]))
                missing = "etcd_disk_backend_commit_duration_seconds";
        if (missing) {
                *ret_error = xasprintf("no histogram %s (its buckets up to +Inf)", missing);
                return -EBADMSG;
        }
        *ret = s;
        return 0;
}

int slowdisk_p99(const disk_histogram *before, const disk_histogram *now, double *ret_p99,
                 uint64_t *ret_samples)
{
        if (before->n != now->n || now->n == 0)
                return -ERANGE;
        double delta[SLOWDISK_MAX_BUCKETS];
        for (size_t i = 0; i < now->n; i++) {
                if (before->le[i] != now->le[i] || now->count[i] < before->count[i])
                        return -ERANGE;
                delta[i] = now->count[i] - before->count[i];
        }
        double total = delta[now->n - 1];
        double p99 = 0;
        if (total > 0) {
                double rank = 0.99 * total;
                size_t i = 0;
                while (i < now->n && delta[i] < rank)
                        i++;
                if (i >= now->n - 1) /* the +Inf bucket: its lower bound */
                        p99 = now->n >= 2 ? now->le[now->n - 2] : 0;
                else {
                        double lo = i ? now->le[i - 1] : 0, below = i ? delta[i - 1] : 0;
                        double in = delta[i] - below;
                        p99 = in > 0 ? lo + (now->le[i] - lo) * (rank - below) / in : now->le[i];
                }
        }
        *ret_p99 = p99;
        *ret_samples = (uint64_t)total;
        return 0;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* The median of the other measured voters' p99 on one histogram; -1: none measured. */
static double others_median(const slow_member *m, size_t n, const slow_member *leader, bool wal)
{
        double v[n ? n : 1];
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                const slow_member *o = &m[i];
                if (o == leader || !o->voter || !o->measured)
                        continue;
                if ((wal ? o->wal_samples : o->commit_samples) < SLOWDISK_MIN_SAMPLES)
                        continue;
                v[k++] = wal ? o->wal_p99 : o->commit_p99;
        }
        if (k == 0)
                return -1;
        qsort(v, k, sizeof(double), cmp_double);
        return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

static bool over_floor(const slow_member *m)
{
        return m->wal_p99 > SLOWDISK_WAL_FLOOR_S || m->commit_p99 > SLOWDISK_COMMIT_FLOOR_S;
}

/* Whether leader is an outlier on one histogram; fills the figures of ret when it is. */
static bool outlier(const slow_member *m, size_t n, const slow_member *leader, bool wal,
                    slow_verdict *ret)
{
        double p99 = wal ? leader->wal_p99 : leader->commit_p99;
        uint64_t samples = wal ? leader->wal_samples : leader->commit_samples;
        double floor_s = wal ? SLOWDISK_WAL_FLOOR_S : SLOWDISK_COMMIT_FLOOR_S;
        if (samples < SLOWDISK_MIN_SAMPLES || p99 <= floor_s)
                return false;
        double median = others_median(m, n, leader, wal);
        if (median < 0 || p99 <= SLOWDISK_FACTOR * median)
                return false;
        ret->metric = wal ? "wal fsync" : "backend commit";
        ret->p99 = p99;
        ret->median = median;
        ret->samples = samples;
        return true;
}

static bool better_target(const slow_member *a, const slow_member *b)
{
        if (a->wal_p99 != b->wal_p99)
                return a->wal_p99 < b->wal_p99;
        if (a->commit_p99 != b->commit_p99)
                return a->commit_p99 < b->commit_p99;
        return strcmp(a->name, b->name) < 0;
}

void slowdisk_judge(const slow_member *members, size_t n, uint64_t leader_id, slow_verdict *ret)
{
        *ret = (slow_verdict){.kind = SLOW_NONE};
        const slow_member *leader = NULL;
        for (size_t i = 0; i < n && leader_id; i++)
                if (members[i].id == leader_id)
                        leader = &members[i];
        if (!leader || !leader->measured) {
                snprintf(ret->message, sizeof(ret->message), "the leader is not measured");
                return;
        }
        if (!outlier(members, n, leader, true, ret) && !outlier(members, n, leader, false, ret)) {
                snprintf(ret->message, sizeof(ret->message),
                         "the leader %s's disk is not an outlier (wal fsync p99 %.1f ms, "
                         "backend commit p99 %.1f ms)",
                         leader->name, leader->wal_p99 * 1000, leader->commit_p99 * 1000);
                return;
        }
        ret->from = leader;
        const slow_member *to = NULL;
        for (size_t i = 0; i < n; i++) {
                const slow_member *m = &members[i];
                if (m == leader || !m->voter || !m->healthy || !m->measured || over_floor(m))
                        continue;
                if (!to || better_target(m, to))
                        to = m;
        }
        if (!to) {
                ret->kind = SLOW_NO_TARGET;
                snprintf(ret->message, sizeof(ret->message),
                         "the leader %s's %s p99 is %.1f ms (%.0fx the other voters' median "
                         "%.1f ms, %llu samples) but no healthy voter with a fast disk can "
                         "take over",
                         leader->name, ret->metric, ret->p99 * 1000,
                         ret->median > 0 ? ret->p99 / ret->median : 0, ret->median * 1000,
                         (unsigned long long)ret->samples);
                return;
        }
        ret->kind = SLOW_MOVE;
        ret->to = to;
        snprintf(ret->message, sizeof(ret->message),
                 "move leadership from %s to %s (SlowDisk): %s's %s p99 is %.1f ms over "
                 "%llu samples, the other voters' median %.1f ms; %s's wal fsync p99 %.1f ms",
                 leader->name, to->name, leader->name, ret->metric, ret->p99 * 1000,
                 (unsigned long long)ret->samples, ret->median * 1000, to->name,
                 to->wal_p99 * 1000);
}
