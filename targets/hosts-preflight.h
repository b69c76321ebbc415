/*
 * The hosts target's preflight of a machine, the pure half: the shell
 * script that measures a machine (fdatasync latency on the data
 * directory's file system, free space there, kernel and file system type),
 * the reader of what it printed, the clock offset from one `date` answer
 * and the judgement against the thresholds. Nothing here touches the
 * network or the clock: the caller runs the commands over the target's SSH
 * pool and passes the times it took.
 *
 * Bounds: the script writes at most PREFLIGHT_SAMPLES blocks of 8 KiB, each
 * with `dd oflag=dsync` under `timeout 2`, and stops sampling after
 * PREFLIGHT_BUDGET_S seconds, whichever comes first; so a preflight costs
 * at most about 12 s on the slowest disk and about 105 process starts on a
 * healthy one. A timed dd includes its process start-up (2 ms on a loaded
 * machine), so five writes without dsync are timed first and the fastest
 * of them (the baseline) is taken off every sample.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PREFLIGHT_SAMPLES     100
#define PREFLIGHT_BUDGET_S    10
#define PREFLIGHT_MAX_SAMPLES 1000 /* the reader refuses more */

/*
 * How long a machine's last preflight stands (docs/hosts.md): a free
 * machine measured less than this ago is not measured again before a
 * member is placed on it (its verdict is reused), and a machine holding a
 * member is measured again once this has passed since its last preflight.
 * Ten minutes: a disk or clock that degrades is seen within that, and a
 * member's machine spends at most about 1 s of dd writes in ten minutes.
 */
#define PREFLIGHT_INTERVAL_MS (10LL * 60 * 1000)

/* The defaults of the thresholds (docs/hosts.md). */
#define PREFLIGHT_SYNC_P99_MAX_US 10000
#define PREFLIGHT_OFFSET_MAX_MS   500

typedef struct preflight_limits {
        int64_t sync_p99_max_us; /* fdatasync p99 above this fails */
        int64_t offset_max_ms;   /* |clock offset| surely above this fails */
        int64_t quota_bytes;     /* the cluster's backend quota: less free space fails */
} preflight_limits;

typedef struct preflight_result {
        char *kernel;        /* uname -r */
        char *fstype;        /* stat -f's type of the data directory's file system */
        int64_t free_bytes;  /* available to an unprivileged writer there */
        size_t n_sync;       /* samples taken */
        int64_t sync_p50_us; /* fdatasync latency, microseconds (nearest rank) */
        int64_t sync_p99_us;
        int64_t sync_max_us;
        int64_t base_us; /* the fastest write without dsync, taken off each sample */
        char *error;     /* the script's own complaint (a write that failed), or NULL */
} preflight_result;

/*
 * The script measuring data_dir's file system, for hosts_command(). dd is
 * the dd binary to time ("dd" from PATH when NULL). The data directory is
 * created when missing (placement would create it anyway); its probe file
 * is removed.
 */
char *preflight_script(const char *data_dir, const char *dd);

/* The command printing the machine's clock, nanoseconds since the epoch. */
#define PREFLIGHT_CLOCK_COMMAND "date +%s%N"

/*
 * Read what preflight_script printed. 0 and *ret filled, or -EINVAL with
 * *ret_why ("line N: ...") and *ret untouched.
 */
int preflight_parse(const char *out, size_t len, preflight_result *ret, char **ret_why);

/*
 * The machine's clock offset from its answer to PREFLIGHT_CLOCK_COMMAND,
 * sent at sent_ms and answered at got_ms by gitcd's clock: the answer is
 * taken as of the middle, so the offset is known within ±(got - sent)/2.
 * 0, or -EINVAL with *ret_why.
 */
int preflight_clock_offset(const char *out, int64_t sent_ms, int64_t got_ms, int64_t *ret_offset_ms,
                           int64_t *ret_bound_ms, char **ret_why);

/*
 * Judge a machine: 0 when it passes, 1 with *ret_reason naming every
 * failed measurement with its value and threshold. The clock fails only
 * when the offset exceeds the threshold even at the edge of its bound.
 */
int preflight_judge(const preflight_result *r, int64_t offset_ms, int64_t bound_ms,
                    const preflight_limits *l, char **ret_reason);

/*
 * Whether a machine last measured at last_ms (0: never) is due for a
 * preflight at now_ms, interval_ms (> 0) after: never measured, or the
 * interval has passed. A last_ms in the future (gitcd's clock stepped
 * back) is due too, so a clock step never keeps a verdict for longer.
 */
bool preflight_due(int64_t last_ms, int64_t now_ms, int64_t interval_ms);

void preflight_result_release(preflight_result *r);

/*
 * What the machines' scripts print, read strictly (shared by the preflight's
 * and the peer RTT's readers): a non-negative decimal integer filling the
 * whole of s (0, or -EINVAL), and qsort's order of int64_t values.
 */
int preflight_count(const char *s, int64_t *ret);
int preflight_cmp_i64(const void *a, const void *b);
