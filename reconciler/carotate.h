/*
 * CA rotation for tls.provider auto (tls.auto.rotateCA): a new token
 * replaces the cluster CA in three phases, each rolled one member at a
 * time, recorded in the state store (state/carotate.h) so gitcd killed
 * at any point resumes the phase it was in. See carotate.c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "reconciler/reconcile.h"
#include "state/state.h"
#include "targets/target.h"

typedef struct carotate_env {
        state_db *db;
        target *target;
        etcd_cluster *c;     /* the latched spec; its tls.ca_rotation_phase is set here */
        const char *cluster; /* "namespace/name" */
        bool bootstrapped;   /* the cluster formed once (a cluster ID is recorded) */
        const state_member_list *records;
        const char *commit; /* the commit and author behind the latched spec */
        const char *author;
        int64_t now_ms; /* wall clock */
        /*
         * A hold keeps CA rotation back (reconciler/hold.h): a rotateCA token
         * not seen before starts nothing (it is not used up either), and
         * *ret_start_waits (when not NULL) says one waits. A rotation that
         * runs keeps its phase; its restarts are held as restarts.
         */
        bool start_held;
        bool *ret_start_waits;
} carotate_env;

/*
 * Before the pass observes: a rotateCA token not seen before starts a
 * rotation (phase 1; a cluster that never formed only consumes the
 * token), and the running rotation's phase is set on env->c, so that the
 * target's CA folders follow it and the members' trust version (their
 * config hash) says what they must run: the old+new bundle in phases 1
 * and 2, the new CA alone in phase 3. 0, or -errno from the state store.
 */
int carotate_prepare(const carotate_env *env);

/*
 * A converged pass (every member healthy and running its wanted config,
 * so the phase's restarts are done): take the rotation's next step —
 * reissue one more member's leaves from the new CA in phase 2, or move
 * to the next phase, or finish. 1: a step was taken (res filled, look
 * again soon); *ret_new_identity is true when gitcd's own client
 * certificate was switched (the caller reconnects); 0: no rotation runs.
 */
int carotate_converged(const carotate_env *env, pass_result *res, bool *ret_new_identity);
