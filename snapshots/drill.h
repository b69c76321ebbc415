/*
 * Restore drills: proving that a recorded snapshot restores.
 *
 * A drill does with a stored snapshot what a restore would, on the gitcd
 * host and away from the cluster: it fetches the file back from its
 * destination (snapshot_fetch: size and SHA-256 against the record),
 * unpacks it (etcd's sha256 trailer), restores it with etcd's own tool for
 * the cluster's version into a scratch folder, starts a throwaway
 * single-member etcd of that version on it (127.0.0.1, ports from the
 * operating system, niced, killed with the thread that started it), and
 * compares what it serves with the live cluster through read-only calls:
 * the HashKV at the snapshot's revision while a member still has that
 * revision, else the revision and the key count recorded with the
 * snapshot. The verdict goes into the drill records (state/snapshots.h)
 * and the audit log (snapshot.verified, snapshot.verify_failed,
 * snapshot.unverified).
 *
 * One drill at a time per state folder: a lock file in the scratch folder
 * (<state dir>/drills/lock) is held for the whole drill, by whichever
 * process runs it (gitcd run's scheduler, gitcd snapshot verify, gitcd
 * snapshot save --verify). Whoever takes the lock first removes what a
 * killed drill left there (its folder, its etcd if it still runs) and
 * closes its record as unverified.
 */
#pragma once

#include <stdint.h>

#include "snapshots/snapshot.h"
#include "state/snapshots.h"

/* The scratch folder under the state folder, and the lock in it. */
#define SNAPSHOT_DRILL_DIR  "drills"
#define SNAPSHOT_DRILL_LOCK "lock"

/* What a drill needs besides the cluster's job; zero values are the defaults. */
typedef struct snapshot_drill_opts {
        const char *trigger; /* "snapshot" (the default), "schedule" or "manual" */
        int64_t slot_ms;     /* schedule: the cron time of spec.snapshots.verify */
        /* Another drill of the state folder in use: wait this long for it (0: not at all). */
        int64_t lock_wait_ms;
} snapshot_drill_opts;

/*
 * The disk a drill of rec needs in its scratch folder: the fetched file,
 * its unpacked copy when compressed, the restored database and etcd's
 * 64 MiB write-ahead log segment, plus a margin (a tenth, at least 64 MiB).
 */
int64_t snapshot_drill_bytes_needed(const state_snapshot *rec);

/*
 * Run one drill of the snapshot record id of job's cluster. job is what
 * snapshot_job_from_state() makes: the live members and gitcd's client
 * identity, the S3 credentials and the target's writer of the cluster's
 * destination, etcd_dir, cancel (a drill stops between steps and while it
 * waits, recorded unverified: "aborted: gitcd is stopping").
 *
 * Returns 0 with *ret the finished drill record (result verified,
 * verify-failed or unverified, and why). Without a record: -EBUSY when
 * another drill of the state folder ran through opts->lock_wait_ms (its
 * holder named in *ret_error); -ENOENT when id is no succeeded snapshot of
 * the cluster, or was deleted by retention; or the state store's error.
 */
int snapshot_drill(state_db *db, const snapshot_job *job, int64_t id,
                   const snapshot_drill_opts *opts, state_snapshot_drill **ret, char **ret_error);

/*
 * What killed drills left in state_dir's scratch folder, removed when no
 * drill runs (the lock is free): their folders, their etcd still running,
 * their records (unverified). For gitcd run's start; every drill does the
 * same once it holds the lock. Returns how many folders were removed.
 */
int snapshot_drill_cleanup(state_db *db, const char *state_dir);
