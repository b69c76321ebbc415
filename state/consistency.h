/*
 * The proof that a cluster's members hold the same data, in the state
 * store: the last cross-member check of each cluster, the freeze a
 * disagreement (or etcd's CORRUPT alarm) puts on it, and the repairs a
 * person asked for (reconciler/consistency.c decides and acts;
 * docs/consistency.md tells the rules).
 *
 * One row per cluster holds the check and the freeze: the freeze is a
 * fact of the store, not of a process, so a gitcd restarted while a
 * cluster is frozen keeps it frozen. A repair record is the repair's
 * journal, as a recovery's is (state/recovery.h): at most one runs per
 * cluster (a unique index), and a spec token is consumed once, whatever
 * its result.
 *
 * Errors and the last-error message follow state/state.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_consistency {
        char *cluster;            /* "namespace/name" */
        int64_t checked_ms;       /* the last check that concluded; 0: none yet */
        int64_t revision;         /* the revision it compared the members at */
        int64_t compact_revision; /* the members' compact revision then */
        char *verdict;            /* "agree", "minority", "no-majority"; NULL before the first */
        char *hashes;             /* JSON object: member -> hash (8 hex digits) */
        char *minority;           /* comma-separated members whose hash is not the majority's */
        int64_t duration_ms;      /* how long that check took */
        int64_t attempt_ms;       /* the last attempt, concluded or not */
        char *attempt_error;      /* why the last attempt did not conclude; NULL when it did */
        bool due;                 /* a member (re)started since: check at the next chance */
        int64_t frozen_ms;        /* since when voluntary changes are held; 0: not frozen */
        char *frozen_cause;       /* "hashes", "no-majority" or "alarm" */
        char *frozen_message;     /* what `gitcd status` and a blocked pass say */
        char *held;               /* the message of the step held last (audited once each) */
        int64_t lifted_ms;        /* when a freeze was last lifted (an older alarm is answered) */
} state_consistency;

/* The row of cluster; -ENOENT (no message) before the first one was written. */
int state_consistency_get(state_db *db, const char *cluster, state_consistency **ret);
/* Write the whole row (insert or replace). -EINVAL for a bad cluster name. */
int state_consistency_put(state_db *db, const state_consistency *v);
void state_consistency_free(state_consistency *v);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_consistency *, state_consistency_free);

typedef struct state_repair {
        int64_t id;
        char *cluster;      /* "namespace/name" */
        char *kind;         /* "replace" or "recheck" */
        char *member;       /* replace: the member to replace */
        char *token;        /* spec.repair.token; NULL for `gitcd repair` */
        char *requested_by; /* the commit's author "Name <email>" or "user@host (gitcd repair)" */
        char *commit;       /* the commit that asked, or NULL */
        int64_t requested_ms;
        char *phase;       /* reconciler/consistency.c's phases */
        char *replacement; /* replace: the member added in its place, once added */
        char *result;      /* "running", "succeeded", "refused" or "failed" */
        char *error;       /* why it was refused or failed */
        int64_t finished_ms;
} state_repair;

typedef struct state_repair_list {
        state_repair **items;
        size_t n;
} state_repair_list;

/*
 * Record a request (result running, phase "requested") from the fields
 * cluster, kind, member, token, requested_by, commit; ret_id may be NULL.
 * -EBUSY when a repair of the cluster runs, -EALREADY when token was used
 * for the cluster, -EINVAL.
 */
int state_repair_request(state_db *db, const state_repair *req, int64_t now_ms, int64_t *ret_id);
/* 1 when the cluster has a repair with this token (any result), 0 when not. */
int state_repair_token_used(state_db *db, const char *cluster, const char *token);
/* The running repair of the cluster; -ENOENT when none. */
int state_repair_running(state_db *db, const char *cluster, state_repair **ret);
/* Write phase and replacement of a running record. -EALREADY when it is not running. */
int state_repair_update(state_db *db, const state_repair *rep);
/* running -> succeeded | refused | failed. -EALREADY, -EINVAL. */
int state_repair_finish(state_db *db, int64_t id, const char *result, const char *error,
                        int64_t now_ms);
/* Newest first; cluster NULL: every cluster; limit 0: all. */
int state_repair_list_for(state_db *db, const char *cluster, size_t limit,
                          state_repair_list *ret_list);
void state_repair_free(state_repair *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_repair *, state_repair_free);
void state_repair_list_release(state_repair_list *l);
