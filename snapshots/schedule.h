/*
 * When a scheduled snapshot or a restore drill is due, whether a cluster's
 * snapshots are healthy, and which one a restore takes: pure functions of
 * the spec, the records and the time (the clock is passed in, so tests
 * drive it).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/cron.h"
#include "api/model.h"
#include "state/snapshots.h"

/*
 * The slot (cron time) of the last scheduled attempt in records (newest
 * first, any result, running included); 0 when there is none.
 */
int64_t snapshot_last_slot(const state_snapshot_list *records);

/* A condition as a checker returns it (static strings but the message). */
typedef struct snapshot_condition {
        const char *type;   /* "SnapshotsHealthy" */
        const char *status; /* "True", "False" or "Unknown" */
        const char *reason;
        char *message; /* newly allocated */
} snapshot_condition;

/* spec.snapshots.verify as the checkers need it. */
typedef struct snapshot_verify_policy {
        snapshot_verify mode;
        cron_expr schedule; /* VERIFY_SCHEDULE */
} snapshot_verify_policy;

/*
 * How long the newest snapshot may wait for its drill under verify: every
 * (VerifyPending): the larger of an hour and twice the snapshot schedule's
 * interval. A drill that could not run (unverified) is tried again after
 * SNAPSHOT_DRILL_RETRY_MS.
 */
#define SNAPSHOT_DRILL_PENDING_MIN_MS (60 * 60 * 1000LL)
#define SNAPSHOT_DRILL_RETRY_MS       (15 * 60 * 1000LL)
int64_t snapshot_drill_pending_ms(const cron_expr *schedule, int64_t now_ms);

/*
 * The SnapshotsHealthy condition. First what taking snapshots says: False
 * when the last finished scheduled snapshot failed (reason SnapshotFailed)
 * or when the newest succeeded snapshot (scheduled or by hand) is older
 * than twice the schedule's interval (SnapshotTooOld); Unknown before the
 * first scheduled snapshot finished (NoSnapshotYet). Then, with drills off
 * (verify NULL or VERIFY_OFF), True (SnapshotSucceeded). With drills on,
 * whether the newest snapshot was proven to restore within its window:
 *   False VerifyFailed   the most recent drill found its snapshot does not
 *                        restore (until a later drill proves one)
 *   True SnapshotVerified  every: the newest snapshot was proven, or it
 *                        still waits for its drill (snapshot_drill_pending_ms)
 *                        and an earlier one was; schedule: a drill proved a
 *                        snapshot within twice the verify schedule's interval
 *   Unknown VerifyPending  no snapshot was proven yet, the newest waits for
 *                        its drill (within that window)
 *   False VerifyOverdue  the window passed without a proof (why the drill
 *                        could not run, when it tried)
 * records are the cluster's, newest first.
 */
void snapshot_check_health(const state_snapshot_list *records, const cron_expr *schedule,
                           const snapshot_verify_policy *verify, int64_t now_ms,
                           snapshot_condition *ret);

/*
 * The snapshot a restore takes when none is named (gitcd recover
 * --from-snapshot latest, the proposal of gitcd status while quorum is
 * lost): of records (newest first), the newest succeeded snapshot, neither
 * expired nor deleted by retention, whose latest drill proved it restores;
 * else the newest such snapshot no drill found wanting (never drilled, or
 * its drill could not run); never one whose latest drill failed. NULL when
 * there is none.
 */
const state_snapshot *snapshot_restore_candidate(const state_snapshot_list *records);

/*
 * Which snapshot a drill is due for at now_ms, of the records of a cluster
 * (newest first) stored in the destination dest_id (snapshot_destination_id).
 * every: the newest one without a drill, or the newest one when its drill
 * could not run SNAPSHOT_DRILL_RETRY_MS ago or earlier. schedule: at the
 * latest cron time of verify after last_slot_ms (state_snapshot_drill_last_slot),
 * the newest one (*ret_slot_ms: that time; a missed slot is caught up once).
 * Returns 1 with *ret_id, 0 when none is due (*ret_next_ms, when not NULL:
 * when to look again; 0 when only a new snapshot changes that).
 */
int snapshot_drill_due(const snapshot_verify_policy *verify, const state_snapshot_list *records,
                       const char *dest_id, int64_t last_slot_ms, int64_t now_ms, int64_t *ret_id,
                       int64_t *ret_slot_ms, int64_t *ret_next_ms);

/* The policy of spec (0), or -EINVAL when its verify schedule does not parse. */
int snapshot_verify_policy_of(const snapshot_spec *spec, snapshot_verify_policy *ret);
