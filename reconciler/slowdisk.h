/*
 * A leader with a slow disk (spec.leadership.avoidSlowMembers): etcd's two
 * disk histograms read from a member's /metrics, the p99 of the window
 * between two scrapes, and the judgement whether the leader is an outlier
 * and which voter should lead instead. Pure: no I/O, no clock; the pass
 * (reconciler/pass.c, "slow-leader") scrapes, keeps the previous scrape per
 * member in the cluster's context, and acts on the verdict.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bucket bounds etcd exports (0.001 s to 8.192 s, doubling) fit with room. */
#define SLOWDISK_MAX_BUCKETS 40

/* One cumulative histogram as read: buckets in increasing le, +Inf last. */
typedef struct disk_histogram {
        size_t n;
        double le[SLOWDISK_MAX_BUCKETS];    /* +Inf (INFINITY) last */
        double count[SLOWDISK_MAX_BUCKETS]; /* cumulative */
} disk_histogram;

typedef struct disk_scrape {
        disk_histogram wal;    /* etcd_disk_wal_fsync_duration_seconds */
        disk_histogram commit; /* etcd_disk_backend_commit_duration_seconds */
} disk_scrape;

/*
 * Read both histograms out of Prometheus text (etcd's /metrics). Strict
 * about their lines: `NAME_bucket{le="X"} V`, X a number or +Inf, bounds
 * increasing, counts not decreasing, +Inf last; every other metric is
 * passed over. 0 with *ret; -EBADMSG with why in *ret_error (allocated,
 * "line N: ...") on a malformed bucket line or a histogram missing.
 */
int slowdisk_parse(const char *text, size_t len, disk_scrape *ret, char **ret_error);

/*
 * The p99 (seconds) of what was observed between two scrapes of one
 * histogram, interpolated in its bucket as Prometheus's histogram_quantile
 * does (in the +Inf bucket: the largest finite bound). *ret_samples is how
 * many observations the window holds. -ERANGE when the two do not fit
 * (other bounds, a count gone down: etcd restarted): no figure this window.
 */
int slowdisk_p99(const disk_histogram *before, const disk_histogram *now, double *ret_p99,
                 uint64_t *ret_samples);

/* The judgement's thresholds, with their reasons in slowdisk.c. */
#define SLOWDISK_WAL_FLOOR_S    0.050 /* wal fsync p99 */
#define SLOWDISK_COMMIT_FLOOR_S 0.100 /* backend commit p99 */
#define SLOWDISK_FACTOR         3.0   /* times the median of the other voters */
#define SLOWDISK_MIN_SAMPLES    20    /* observations in the window, per histogram */

/* One member as the judgement sees it. */
typedef struct slow_member {
        const char *name;
        uint64_t id;
        bool voter;    /* not a learner */
        bool healthy;  /* started and answering etcd's /health */
        bool measured; /* both figures below hold (two scrapes that fit) */
        double wal_p99, commit_p99;
        uint64_t wal_samples, commit_samples;
} slow_member;

typedef enum slow_kind {
        SLOW_NONE,      /* the leader is not an outlier (or cannot be judged) */
        SLOW_NO_TARGET, /* it is, but no voter may take over */
        SLOW_MOVE,      /* move leadership from `from` to `to` */
} slow_kind;

typedef struct slow_verdict {
        slow_kind kind;
        const slow_member *from, *to; /* point into the members judged */
        const char *metric;           /* "wal fsync" or "backend commit": what is slow */
        double p99, median;           /* the leader's p99 and the others' median of it */
        uint64_t samples;             /* the leader's observations of it */
        char message[320];            /* a sentence for the audit log and the pass */
} slow_verdict;

/*
 * Whether the leader (the member with leader_id) has a slow disk, and where
 * leadership should go. The leader is an outlier on a histogram when it has
 * SLOWDISK_MIN_SAMPLES in the window, its p99 is over the floor and over
 * SLOWDISK_FACTOR times the median of the other measured voters' p99 (each
 * with enough samples; at least one). A target is a healthy voter, measured,
 * not itself over either floor; the one with the lowest wal fsync p99 (then
 * commit p99, then name). A slow follower is never judged: only the leader's
 * disk slows every write. Pure.
 */
void slowdisk_judge(const slow_member *members, size_t n, uint64_t leader_id, slow_verdict *ret);
