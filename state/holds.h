/*
 * The holds on a cluster's steps in the state store (reconciler/hold.h
 * judges them): a suspension a person asked for with `gitcd suspend`
 * (who, when, why) until `gitcd resume`; the held state the reconciler
 * last audited, so a hold is audited once when it begins or changes and
 * not on every pass; and the spec.maintenance.override tokens spent, each
 * acted on once per cluster, whatever later commits say.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_hold {
        char *cluster;
        char *suspended_by; /* the person who ran `gitcd suspend`; NULL: not suspended by one */
        int64_t suspended_ms;
        char *suspend_reason; /* --reason, or NULL */
        char *held;           /* the held state last audited (a reason word), NULL: none */
        int64_t held_ms;
} state_hold;

void state_hold_free(state_hold *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_hold *, state_hold_free);

/* The cluster's holds; -ENOENT when nothing was ever recorded for it. */
int state_hold_get(state_db *db, const char *cluster, state_hold **ret);
/*
 * Record a suspension by `by` (reason may be NULL). -ENOENT when the store
 * does not know the cluster; 1 when it was not suspended by a person
 * before, 0 when the suspension was already recorded (by, reason replaced).
 */
int state_hold_suspend(state_db *db, const char *cluster, const char *by, const char *reason,
                       int64_t now_ms);
/* Lift a person's suspension: 1 when there was one, 0 when not; -ENOENT: unknown cluster. */
int state_hold_resume(state_db *db, const char *cluster);
/*
 * Record the held state (a reason word, NULL: nothing held) as audited: 1
 * when it differs from the one recorded (audit the change), 0 when not.
 */
int state_hold_set_held(state_db *db, const char *cluster, const char *held, int64_t now_ms);

/* 1 with *ret_spent_ms set when the token was spent for the cluster, 0 when not; -errno. */
int state_override_spent(state_db *db, const char *cluster, const char *token,
                         int64_t *ret_spent_ms);
/* Record the token as spent (by the commit that carried it): 1, or 0 when it already was. */
int state_override_spend(state_db *db, const char *cluster, const char *token, const char *commit,
                         int64_t now_ms);
