/*
 * Health gates of a rolling version change (upgrade or rollback), as a pure
 * function over what a pass observed, plus the little memory it keeps
 * between passes (upgrade_track, one per cluster, held by the reconciler).
 *
 * decide() picks which member rolls next (followers first, the leader last
 * after moving leadership away); upgrade_gate() may hold that step until
 * the member rolled before it serves the new version, has caught up with the
 * leader's raft index, and the whole cluster has stayed healthy for the
 * settle time. A member that does not come back on the new version stops the
 * rollout (UPGRADE_FAILED); the members not rolled yet are never touched.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reconciler/decide.h"

#define REASON_UPGRADE_FAILED "UpgradeFailed"

typedef struct upgrade_member {
        const char *name;
        uint64_t id;
        bool voter;
        member_runtime_state runtime;
        const char *started_version; /* the version it was last started on (record); NULL */
        /* Its Status answer; answered false when it gave none. */
        bool answered;
        const char *server_version;
        uint64_t raft_index;
} upgrade_member;

typedef struct upgrade_obs {
        const char *version; /* the latched spec's */
        const upgrade_member *members;
        size_t n;
        uint64_t leader_id;
        int64_t now_ms; /* monotonic */
} upgrade_obs;

typedef struct upgrade_policy {
        int64_t settle_ms;        /* the cluster stays healthy this long after each member */
        int64_t start_timeout_ms; /* a rolled member serves the new version within this */
        uint64_t max_raft_lag;    /* raft entries a member may be behind the leader */
} upgrade_policy;

/* The defaults: settle 5 s (etcd's health interval), start timeout 120 s, lag 1000 entries. */
extern const upgrade_policy upgrade_policy_default;

typedef struct upgrade_track {
        char *member;             /* rolled last, its gates not passed yet; NULL: none */
        char *version;            /* the version it was rolled onto */
        int64_t rolled_ms;        /* when (monotonic) */
        int64_t healthy_since_ms; /* the cluster has been healthy since; 0: not now */
} upgrade_track;

void upgrade_track_release(upgrade_track *t);

/* Some member was last started on another version than `version`: a rollout is under way. */
bool upgrade_in_progress(const upgrade_obs *o);

typedef enum upgrade_verdict {
        UPGRADE_PASS,   /* no rollout, or its gates passed: the step stands (maybe rewritten) */
        UPGRADE_WAIT,   /* a gate holds: *s became a STEP_WAIT saying which */
        UPGRADE_FAILED, /* a member did not come back: *s says which, the rollout stops */
} upgrade_verdict;

/*
 * Judge decide()'s step *s for a rollout. May rewrite *s: into a WAIT while
 * a gate holds; into a restart of a member that is down on another version
 * than the spec's (the rollback of a failed member restarts it rather than
 * replacing it). Updates *t (a restart it lets through is tracked from now).
 */
upgrade_verdict upgrade_gate(const upgrade_policy *pol, const upgrade_obs *o, upgrade_track *t,
                             step *s);
