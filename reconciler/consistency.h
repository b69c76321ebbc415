/*
 * Members proven to hold the same data (docs/consistency.md): gitcd's
 * cross-member check, the freeze a disagreement puts on the cluster, and
 * the repair a person asks for to lift it.
 *
 * The check: on a settled cluster (every voter ready, no learner) every
 * voter is asked for its applied revision, then for etcd's HashKV at the
 * smallest of them, followers first and the leader last (a member's
 * HashKV holds its writes while it reads the whole keyspace), and the
 * answers are judged by majority (reconciler/proof.h). It runs every
 * spec.consistency.checkInterval on a converged cluster, at the next
 * chance after gitcd (re)started a member, and before a step that makes a
 * new member copy data (a learner added, a member removed to be replaced)
 * unless a check agreed within the last minute.
 *
 * The freeze: a disagreement, or etcd's CORRUPT alarm (as maintenance/
 * lists it), freezes the cluster in the state store: DataConsistent False,
 * Degraded True, phase Frozen, audited, logged, and every voluntary change
 * held (proof_gate) until a person acts.
 *
 * The repair (`gitcd repair`, spec.repair with a token acted on once): a
 * member of the minority replaced from the majority through the ordinary
 * replacement (its removal, its data deleted, a learner added and promoted
 * while a majority member leads), or a recheck; either way the freeze
 * lifts only when a check afterwards finds every member agreeing, and then
 * gitcd disarms etcd's CORRUPT alarms. A repair is a state machine whose
 * journal is its record (state/consistency.h):
 *
 *   replace:  requested ─▶ replacing ─▶ rechecking ─▶ succeeded
 *   recheck:  requested ─────────────▶ rechecking ─▶ succeeded
 *             (refused at requested; failed when the members still differ)
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "reconciler/decide.h"
#include "reconciler/etcd-ops.h"
#include "state/consistency.h"
#include "state/state.h"

/* What one pass gives the consistency check: the world as observed, and the means to act. */
typedef struct consistency_env {
        state_db *db;
        const etcd_membership_ops *etcd;
        etcd_conn *conn; /* NULL when no member has a client URL */
        const etcd_cluster *c;
        const char *cluster;              /* "namespace/name" */
        const state_cluster *sc;          /* the row: conditions (CorruptAlarm), TLS switch */
        const state_member_list *records; /* the members' client URLs */
        observation *obs;                 /* prepare marks the member being replaced */
        const char *commit;               /* the commit and author behind the latched spec */
        const char *author;
        int64_t now_ms;      /* wall clock */
        int hash_timeout_ms; /* one member's HashKV; 0: 5 minutes */
} consistency_env;

/* What the consistency check carries through one pass. */
typedef struct consistency_pass {
        state_consistency *row; /* the cluster's row (blank before the first check) */
        state_repair *repair;   /* the repair running, or NULL */
        bool frozen;            /* voluntary changes are held */
        bool held;              /* this pass's step was held (frozen, or waiting for a proof) */
        int64_t next_check_ms;  /* when a check is due next (wall ms) */
        char *message;          /* frozen: why; held for a proof: what waits; or NULL */
} consistency_pass;

/*
 * Before decide(): the row and the running repair; spec.repair taken as a
 * request (a token not seen before); a requested repair judged (refused,
 * with the reason, or started); the member being replaced marked in the
 * observation (obs_member.replace); etcd's CORRUPT alarm freezes.
 * 0, or -errno when the state store failed. *cp is written whole: release it
 * with consistency_pass_release(), also after an error.
 */
int consistency_prepare(const consistency_env *env, consistency_pass *cp);

/*
 * After decide(): a check when due, the repair's next phase, and the
 * freeze over decide's step *s (rewritten when held: cp->held). converged:
 * decide() has nothing to do (a periodic check runs only then, or while
 * frozen). 0, or -errno when the state store failed.
 */
int consistency_after_decide(const consistency_env *env, consistency_pass *cp, step *s,
                             bool converged);

/* Maintenance listed an active CORRUPT alarm this pass: freeze (once). 1: newly frozen. */
int consistency_alarm(const consistency_env *env, consistency_pass *cp);

/* Store the DataConsistent condition (its checker: proof_check_condition). 1: it changed. */
int consistency_record_condition(const consistency_env *env, const consistency_pass *cp);

/* Frees what the pass holds (the row, the repair, the message). */
void consistency_pass_release(consistency_pass *cp);

/*
 * Ask for a repair of cluster, for `gitcd repair`: replace member (NULL:
 * recheck). The request is judged by the reconciler's next pass (refused
 * there when member is not in the minority, ...). *ret_id is the record's
 * id. -EBUSY when a repair runs, -ENOENT for an unknown cluster;
 * state_last_error() says why. Audited (repair.requested).
 */
int consistency_repair_request(state_db *db, const char *cluster, const char *member,
                               const char *requested_by, int64_t now_ms, int64_t *ret_id);
