/*
 * When a scheduled snapshot is due, and whether a cluster's snapshots are
 * healthy: pure functions of the schedule, the records and the time (the
 * clock is passed in, so tests drive it).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/cron.h"
#include "state/snapshots.h"

/*
 * The slot (cron time) of the last scheduled attempt in records (newest
 * first, any result, running included); 0 when there is none.
 */
int64_t snapshot_last_slot(const state_snapshot_list *records);

/*
 * Whether a scheduled snapshot is due at now_ms. The due slot is the
 * latest cron time at or before now; it is due when no scheduled attempt
 * was made for it or a later one (last_slot_ms). However many slots passed
 * while gitcd was down, only the latest is due: a missed schedule is caught
 * up once. A cluster without any scheduled attempt gets one at once.
 * Returns 1 with *ret_slot_ms set when due, else 0; *ret_next_ms (when not
 * NULL) is the next time to look again. -ERANGE for a schedule that never
 * matches.
 */
int snapshot_schedule_due(const cron_expr *e, int64_t last_slot_ms, int64_t now_ms,
                          int64_t *ret_slot_ms, int64_t *ret_next_ms);

/* The interval of the schedule around now: from the latest slot to the one after it. */
int snapshot_schedule_interval(const cron_expr *e, int64_t now_ms, int64_t *ret_ms);

/* A condition as a checker returns it (static strings but the message). */
typedef struct snapshot_condition {
        const char *type;   /* "SnapshotsHealthy" */
        const char *status; /* "True", "False" or "Unknown" */
        const char *reason;
        char *message; /* newly allocated */
} snapshot_condition;

/*
 * The SnapshotsHealthy condition. False when the last finished scheduled
 * snapshot failed (reason SnapshotFailed) or when the newest succeeded
 * snapshot (scheduled or by hand) is older than twice the schedule's
 * interval (SnapshotTooOld); Unknown before the first scheduled snapshot
 * finished (NoSnapshotYet); else True (SnapshotSucceeded). records are the
 * cluster's, newest first.
 */
void snapshot_check_health(const state_snapshot_list *records, const cron_expr *schedule,
                           int64_t now_ms, snapshot_condition *ret);
