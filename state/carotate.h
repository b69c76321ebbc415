/*
 * CA rotations in the state store (tls.auto.rotateCA): one row per token a
 * cluster's spec carried, holding the phase the rotation is in and the
 * members done in that phase. The reconciler (reconciler/carotate.c) writes
 * a phase before acting on it, so gitcd killed at any point resumes the
 * phase the row says; a token has one row for good, so a spec read again
 * (a restart, the same commit) never rotates twice.
 */
#pragma once

#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_ca_rotation {
        char *cluster; /* "namespace/name" */
        char *token;   /* spec.tls.auto.rotateCA */
        int phase;     /* 1: trust old+new, 2: reissue from new, 3: drop old; 0: finished */
        /*
         * Phase 2: comma-separated members whose leaves were reissued ("*":
         * the shared ones), "" for none. Phases 1 and 3 keep none: a
         * member's progress there is the config hash it runs (the target's).
         */
        char *members_done;
        int64_t started_ms;
        int64_t phase_ms;    /* when the phase began */
        int64_t finished_ms; /* 0 while running */
        char *result;        /* "running", "succeeded", "skipped" (nothing to rotate yet) */
} state_ca_rotation;

/*
 * Record a rotation for token in phase 1 (result running), or, with
 * skipped, a token consumed without a rotation (a cluster that never
 * formed: its first CA is new anyway). -EALREADY when the token has a row,
 * -EBUSY when another rotation of the cluster is running, -EINVAL.
 */
int state_ca_rotation_start(state_db *db, const char *cluster, const char *token, bool skipped,
                            int64_t now_ms);
/* The running rotation of the cluster; -ENOENT when none. */
int state_ca_rotation_running(state_db *db, const char *cluster, state_ca_rotation **ret);
/* 1 when the cluster has a row for token (any result), 0 when not. */
int state_ca_rotation_token_used(state_db *db, const char *cluster, const char *token);
/* Record members_done of the running rotation. -ENOENT when none runs. */
int state_ca_rotation_set_done(state_db *db, const char *cluster, const char *members_done);
/*
 * Move the running rotation to phase (2 or 3, members_done emptied), or,
 * with phase 0, finish it (succeeded). -ENOENT when none runs.
 */
int state_ca_rotation_advance(state_db *db, const char *cluster, int phase, int64_t now_ms);
void state_ca_rotation_free(state_ca_rotation *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_ca_rotation *, state_ca_rotation_free);
