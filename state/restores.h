/*
 * Restore records in the state store: every snapshot restored into a
 * cluster, by spec.bootstrap.restore or by a recovery from a snapshot, with
 * the revision bump it was made with and the revision its data starts at.
 *
 * The record is written before the first member is restored and read back
 * for every other member (and after a crash), so every member of one
 * restore gets the same bump: members of one cluster whose revisions
 * differed would not hold the same data. It also says, for as long as the
 * cluster lives (the rows go with its clusters row), which members a
 * restore was for and at which revision their data starts, so that one of
 * them is never started on data from before the restore
 * (reconciler/restore.h, restore_check_data). A cluster has at most one
 * bootstrap restore and a recovery at most one restore (unique indexes).
 */
#pragma once

#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_restore {
        int64_t id;
        char *cluster;             /* "namespace/name" */
        char *origin;              /* "bootstrap" or "recovery" */
        int64_t recovery_id;       /* origin recovery: its record (state/recovery.h); else 0 */
        char *source;              /* where the snapshot came from, as messages say it */
        int64_t snapshot_revision; /* the snapshot's store revision */
        int64_t bump;              /* revisions added (--bump-revision); 0: none */
        char *sizing;              /* how the bump was decided, for people */
        int64_t revision;          /* snapshot_revision + bump: the restored data's revision */
        char *members;             /* comma-separated: the members the restore is for */
        int64_t recorded_ms;
} state_restore;

typedef struct state_restore_list {
        state_restore **items;
        size_t n;
} state_restore_list;

/*
 * Record a restore before its first member is restored (every field but id
 * and recorded_ms). The cluster's bootstrap restore, and a recovery's, are
 * recorded once: when one is there already nothing is written and *ret is
 * that one (1); else *ret is the new record (0). -EINVAL for a bad record
 * (or a cluster the store does not know).
 */
int state_restore_record(state_db *db, const state_restore *rec, int64_t now_ms,
                         state_restore **ret);
/* The cluster's newest restore record; -ENOENT when it has none. */
int state_restore_latest(state_db *db, const char *cluster, state_restore **ret);
/* Newest first; limit 0: all. */
int state_restore_list_for(state_db *db, const char *cluster, size_t limit,
                           state_restore_list *ret_list);
/* Whether member is one of the comma-separated names of rec->members. */
bool state_restore_is_for(const state_restore *rec, const char *member);
void state_restore_free(state_restore *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_restore *, state_restore_free);
void state_restore_list_release(state_restore_list *l);
