/*
 * TLS switched on for a running cluster (tls.provider auto), or off again:
 * the steps that move a cluster between plain http and https, one at a
 * time, each one recorded before it acts. See tlsswitch.c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "reconciler/etcd-ops.h"
#include "reconciler/reconcile.h"
#include "state/state.h"
#include "targets/target.h"

typedef struct tlsswitch_env {
        state_db *db;
        target *target;
        const etcd_cluster *c;
        const char *cluster; /* "namespace/name" */
        const state_member_list *records;
        const etcd_members *etcd; /* the member list this pass read */
        uint64_t leader;
        const etcd_membership_ops *ops;
        etcd_conn *conn;
        const char *commit; /* the commit and author behind the latched spec */
        const char *author;
        int64_t now_ms; /* wall clock */
} tlsswitch_env;

/*
 * Before observing, every pass: the TLS switch-off journal (the cluster's
 * tls_off surfaces) is started when the spec turned off a surface the
 * member records still run with https, narrowed when the spec turned one
 * on again, and applied to c, the reconciler's copy of the spec: the
 * surfaces going off stay on (tls.off_client / off_peer, provider auto)
 * until tlsswitch_converged()'s last step clears the journal. It reads the
 * member records itself; env->c and records are not read (c is), nor
 * target, etcd, ops and conn. 0, or the store's error.
 */
int tlsswitch_prepare(const tlsswitch_env *env, etcd_cluster *c);

/*
 * A converged pass (every member healthy and running its wanted config):
 * take the switch's next step, if one is left. 1: a step was taken (res
 * filled, look again soon); 0: the cluster runs the schemes the spec asks
 * for; negative: the step failed (res says why).
 */
int tlsswitch_converged(const tlsswitch_env *env, pass_result *res);

/*
 * Whether a switch has a step left (what tlsswitch_converged would act
 * on): a surface switched off still recorded https, or one switched on
 * still recorded http. For the holds (reconciler/hold.h).
 */
bool tlsswitch_pending(const tlsswitch_env *env);
