/*
 * Scheduled and declared snapshots and restore drills inside `gitcd run`:
 * which cluster is due (snapshots/schedule.h) or has a declared one
 * pending (snapshots/declared.h), and a worker thread that takes one
 * snapshot or runs one drill (snapshots/drill.h) at a time, so neither
 * ever holds up the reconciliation of any cluster, and a drill never
 * competes with a snapshot for the gitcd host's disk and CPU.
 *
 * The daemon calls snapshot_scheduler_tick() from its loop (main thread,
 * with its own state store connection and target); the worker opens its
 * own state store connection and etcd client. snapshot_scheduler_free()
 * aborts a running snapshot (recorded as failed: "aborted: gitcd is
 * stopping") and waits for the worker.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "targets/target.h"

typedef struct snapshot_scheduler snapshot_scheduler;

struct state_snapshot_drill;
typedef struct snapshot_scheduler_opts {
        const char *state_path;   /* the database the worker opens */
        const char *state_dir;    /* temporary files, S3 credential folders */
        const char *etcd_dir;     /* etcd's tools by version; NULL: the default */
        int64_t (*wall_ms)(void); /* the clock; NULL: the real one */
        /*
         * A restore drill the worker ran ended (any result), called from
         * snapshot_scheduler_tick() on the caller's thread with its db; NULL:
         * not told. gitcd run sends its notifications from here.
         */
        void (*drilled)(state_db *db, const char *cluster, const struct state_snapshot_drill *d,
                        void *userdata);
        void *userdata;
} snapshot_scheduler_opts;

/*
 * Closes snapshot records left running by an earlier gitcd (it stopped
 * while they ran) as failed, and removes its temporary files
 * (<state dir>/snapshots-tmp/) and what its restore drills left
 * (snapshot_drill_cleanup).
 */
int snapshot_scheduler_new(const snapshot_scheduler_opts *opts, state_db *db,
                           snapshot_scheduler **ret);
/* Abort a running snapshot, wait for it, release everything. NULL is a no-op. */
void snapshot_scheduler_free(snapshot_scheduler *s);

/*
 * Look at the clusters (names "ns/name"): when the worker is free, start the
 * oldest pending declared snapshot (snapshots/declared.h) of one whose
 * Available condition is True, else the snapshot of the first due one,
 * else the restore drill of the first cluster one is due for
 * (snapshot_drill_due); reap a finished worker. A snapshot stored while
 * spec.snapshots.verify is every is drilled by the same worker right
 * after it (and its retention). Never blocks on a snapshot or a drill.
 * Returns 1 when a snapshot or a drill was started, else 0.
 */
int snapshot_scheduler_tick(snapshot_scheduler *s, state_db *db, target *t,
                            const char *const *clusters, size_t n);

/*
 * Set the SnapshotsHealthy condition of a cluster from its records,
 * schedule and verify setting (snapshot_check_health); audits a status change as
 * condition.changed. A cluster without scheduled snapshots gets no such
 * condition. Returns 1 when the status changed, 0 when not, -errno.
 */
struct snapshot_spec;
int snapshot_record_health(state_db *db, const char *cluster, const struct snapshot_spec *spec,
                           int64_t now_ms);
