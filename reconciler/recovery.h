/*
 * Disaster recovery after quorum loss (reconciler/recovery.c).
 *
 * gitcd never recovers on its own: a recovery is asked for, by a commit
 * (spec.recovery with a token, acted on once) or by `gitcd recover`, and
 * both become the same recovery record (state/recovery.h), which the
 * reconciler drives to its end one phase per pass. While a recovery runs,
 * the normal lifecycle (decide.c) waits; once it succeeded, the lifecycle
 * grows the cluster back with learners.
 *
 * While quorum is lost (and no recovery runs) every pass records what
 * gitcd knows for `gitcd status`: each member's reachability, raft index
 * and revision, the latest snapshot, and the safest source to recover from.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "reconciler/decide.h"
#include "reconciler/etcd-ops.h"
#include "reconciler/reconcile.h"
#include "state/recovery.h"
#include "state/state.h"
#include "targets/target.h"

/* What one pass gives the recovery: the world as observed, and the means to act. */
typedef struct recovery_env {
        state_db *db;
        target *target;
        const etcd_membership_ops *etcd;
        etcd_conn *conn; /* NULL when no member has a client URL */
        const etcd_cluster *c;
        const char *cluster; /* "namespace/name" */
        const state_member_list *records;
        const observation *obs; /* obs->members: the recorded members first, by record order */
        bool quorum;            /* a quorum of voters is healthy */
        /* the latched spec (NULL: its text was not read) and its hash, to restart its deadline */
        const char *latched_json;
        const char *latched_hash;
        const char *commit; /* the commit and author behind the latched spec */
        const char *author;
        const char *etcd_dir; /* etcd's tools by version (restore_find_tool); NULL: the default */
        int64_t now_ms;       /* wall clock */
} recovery_env;

/*
 * The recovery's share of a pass: take spec.recovery (a new token) as a
 * request, then take one step of the running recovery, or record the
 * quorum-loss assessment, or delete the data a finished recovery set
 * aside once the cluster is healthy with every member it wants.
 * 1: this pass belongs to the recovery (res filled); 0: go on with the
 * normal lifecycle; -errno when the state store failed.
 */
int recovery_pass(const recovery_env *env, pass_result *res);

/*
 * Ask for a recovery of cluster from member NAME or snapshot ID (exactly one
 * of member and snapshot_id > 0), for `gitcd recover`; from a snapshot, bump
 * is the revision bump asked for (NULL: the spec's): the request is
 * checked by the reconciler's next pass (refused there when quorum is not
 * lost, ...). Ends a terminal state, so the next pass acts. *ret_id is the
 * record's id. -EBUSY when a recovery is running, -ENOENT for an unknown
 * cluster; state_last_error() says why.
 */
int recovery_request(state_db *db, const char *cluster, const char *member, int64_t snapshot_id,
                     const revision_bump *bump, const char *requested_by, int64_t now_ms,
                     int64_t *ret_id);
