/*
 * Recovery records in the state store: every disaster recovery asked for
 * (a spec.recovery commit or `gitcd recover`), its progress and its result.
 *
 * The row is the recovery's journal. The reconciler (reconciler/recovery.c)
 * moves a running record from phase to phase, writing the phase after each
 * effect, so gitcd killed at any point resumes the recovery where the
 * record says. At most one record per cluster is running (a unique index),
 * and a spec token is consumed once: a token already recorded for the
 * cluster, whatever its result, is never acted on again.
 */
#pragma once

#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_recovery {
        int64_t id;
        char *cluster;      /* "namespace/name" */
        char *source_kind;  /* "member" or "snapshot" */
        char *source;       /* the member's name, or the snapshot id in decimal */
        char *token;        /* spec.recovery.token; NULL for `gitcd recover` */
        char *requested_by; /* commit author "Name <email>" or the CLI user */
        char *commit;       /* the commit that asked, or NULL */
        int64_t requested_ms;
        char *phase;         /* reconciler/recovery.c's phases */
        char *seed;          /* the member the cluster restarts from, once chosen */
        char *aside;         /* comma-separated members whose data was set aside, or NULL */
        int64_t revision;    /* etcd store revision recovered to (0: not known yet) */
        int64_t raft_index;  /* the source member's raft index when it was checked */
        char *result;        /* "running", "succeeded", "refused" or "failed" */
        char *error;         /* why it was refused or failed */
        int64_t finished_ms; /* 0 while running */
        int64_t cleaned_ms;  /* the data set aside was deleted (cluster healthy again) */
        /*
         * From a snapshot: the revision bump asked for (`gitcd recover
         * --bump-revision`, spec.recovery.bumpRevision): "auto" or a number of
         * revisions; NULL: the spec's (the role's default).
         */
        char *bump_revision;
} state_recovery;

typedef struct state_recovery_list {
        state_recovery **items;
        size_t n;
} state_recovery_list;

/*
 * Record a request (result running, phase "requested") from the fields
 * cluster, source_kind, source, token, requested_by, commit, bump_revision; ret_id may be
 * NULL. -EBUSY when a recovery of the cluster is already running,
 * -EALREADY when token was already used for the cluster, -EINVAL.
 */
int state_recovery_request(state_db *db, const state_recovery *req, int64_t now_ms,
                           int64_t *ret_id);
/* 1 when the cluster has a record with this token (any result), 0 when not. */
int state_recovery_token_used(state_db *db, const char *cluster, const char *token);
/* The running recovery of the cluster; -ENOENT when none. */
int state_recovery_running(state_db *db, const char *cluster, state_recovery **ret);
/* Write phase, seed, aside, revision and raft_index of a running record. -ENOENT, -EALREADY. */
int state_recovery_update(state_db *db, const state_recovery *rec);
/* running -> succeeded | refused | failed. -ENOENT, -EALREADY, -EINVAL. */
int state_recovery_finish(state_db *db, int64_t id, const char *result, const char *error,
                          int64_t now_ms);
/* The data set aside by a succeeded recovery is gone. */
int state_recovery_set_cleaned(state_db *db, int64_t id, int64_t now_ms);
/* Newest first; cluster NULL: every cluster; limit 0: all. */
int state_recovery_list_for(state_db *db, const char *cluster, size_t limit,
                            state_recovery_list *ret_list);
/*
 * What the reconciler knew while quorum was lost, for `gitcd status`: a
 * JSON object (members with reachability, raft index and revision, the
 * latest snapshot, the proposed source), one per cluster. put replaces it;
 * clear forgets it (quorum is back). get: -ENOENT when none.
 */
int state_recovery_assessment_put(state_db *db, const char *cluster, const char *json,
                                  int64_t now_ms);
int state_recovery_assessment_get(state_db *db, const char *cluster, char **ret_json,
                                  int64_t *ret_observed_ms);
int state_recovery_assessment_clear(state_db *db, const char *cluster);
void state_recovery_free(state_recovery *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_recovery *, state_recovery_free);
void state_recovery_list_release(state_recovery_list *l);
