/*
 * May this step run now? The one place that says, for every kind of step
 * gitcd takes, whether a hold keeps it back: pure (but for hold_read), so
 * plan, status and the pass judge alike, and target-agnostic.
 *
 * Every step has one class:
 *
 *   safety      never held: certificate renewal (it swaps files and
 *               restarts nothing on any target; an expired certificate is
 *               an outage), scheduled snapshots (read-only, the safety net
 *               during an incident), observation, conditions, metrics,
 *               consistency checks. A held step decided before a due
 *               renewal never keeps it waiting (the pass renews instead,
 *               decide_renewal)
 *   voluntary   held while the cluster is suspended: every membership change
 *               (bootstrap, adding, promoting, removing, deleting, stopping,
 *               starting a stopped member, replacing a lost one), a
 *               recovery, etcd auth changes, the target's upkeep (shared
 *               objects, strays), a NOSPACE alarm's defragmentation
 *               (not held by the windows: it ends an outage), and moving
 *               leadership off a slow disk (an election: no member restarts)
 *   disruptive  held while suspended, and outside the maintenance windows
 *               when spec.maintenance.windows is set: restarting a member
 *               onto a new command (minor and patch upgrades, a rolling
 *               restart for a configuration change; moving leadership away
 *               before one), CA rotation, the TLS switch, defragmentation on
 *               a schedule or a threshold
 *
 * Scaling (adding a learner, removing a surplus member) is voluntary, not
 * disruptive: it restarts no serving member, and a person who scales out
 * under load should not wait for a window.
 *
 * Suspended: spec.suspend (coreos: spec.paused), or `gitcd suspend` (state
 * store, state/holds.h) until `gitcd resume`; either is enough.
 *
 * Windows: each opens at its cron schedule's times (UTC) for its duration;
 * the cluster is inside one when any is open. A roll decides one member at
 * a time: the member restarted inside a window finishes (its restart and
 * the health gates after it), the next member waits for the next window.
 *
 * Override: a spec.maintenance.override token gitcd has not seen spent for
 * the cluster lets disruptive steps run outside the windows (not while
 * suspended); the token is spent when the cluster next converges.
 *
 * A rotateCA token committed while CA rotation is held starts nothing (and
 * is not used up); a CA rotation gitcd starts by itself before the CA
 * expires is recorded at once, its restarts held like any other.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "reconciler/decide.h"
#include "state/state.h"

typedef enum hold_class {
        HOLD_SAFETY,
        HOLD_VOLUNTARY,
        HOLD_DISRUPTIVE,
} hold_class;

/* Work outside decide()'s steps, each with its class (hold_work_class). */
typedef enum hold_work {
        HOLD_WORK_RECOVERY,       /* voluntary */
        HOLD_WORK_AUTH,           /* voluntary */
        HOLD_WORK_CA_ROTATION,    /* disruptive */
        HOLD_WORK_TLS_SWITCH,     /* disruptive */
        HOLD_WORK_DEFRAG,         /* disruptive: a schedule or a threshold */
        HOLD_WORK_NOSPACE_DEFRAG, /* voluntary: a NOSPACE alarm's */
        HOLD_WORK_SNAPSHOT,       /* safety */
        HOLD_WORK_SLOW_LEADER,    /* voluntary: leadership moved off a slow disk */
} hold_work;

/* The class of one of decide()'s steps (its kind, and why for moving leadership). */
hold_class hold_step_class(const step *s);
hold_class hold_work_class(hold_work w);

/* Reason words (conditions, status, plan, pass_result.reason). */
#define REASON_SUSPENDED          "Suspended"
#define REASON_MAINTENANCE_WINDOW "MaintenanceWindow"

/*
 * Whether spec.maintenance's windows are open at now_ms: 1 when one is
 * (*ret_end_ms: when the open window that lasts longest closes), 0 when
 * none is (*ret_next_ms: the next start, 0 when no window opens within
 * five years), -ENOENT when no window is set. An invalid schedule is
 * skipped (validation refuses it first).
 */
int maint_windows_at(const maintenance_spec *ms, int64_t now_ms, int64_t *ret_end_ms,
                     int64_t *ret_next_ms);

/* Everything the judgement needs, gathered by the caller. */
typedef struct hold_input {
        const etcd_cluster *c;      /* the spec gitcd works toward */
        const char *suspended_by;   /* `gitcd suspend`: who, or NULL */
        int64_t suspended_ms;       /* when */
        const char *suspend_reason; /* why, or NULL */
        int64_t override_spent_ms;  /* spec.maintenance.override was spent then; 0: not */
        int64_t now_ms;             /* wall clock */
} hold_input;

/* The holds on one cluster at one time. */
typedef struct hold_state {
        bool suspended;
        bool windows;           /* spec.maintenance.windows is set */
        bool in_window;         /* inside one (or no windows) */
        int64_t window_end_ms;  /* in_window with windows: when it closes */
        int64_t next_window_ms; /* outside: the next start, 0 when none */
        bool override_active;   /* a token not spent: disruptive steps run now */
        int64_t override_spent_ms;
        char *suspended_message; /* "suspended (by spec)", "suspended (by USER at TIME: REASON)" */
        char *window_message;    /* "waits for the window at 2026-12-01T02:00Z", ... */
        char *held_recorded; /* hold_read: the held state last audited (state/holds.h), or NULL */
} hold_state;

void hold_assess(const hold_input *in, hold_state *ret);
void hold_state_release(hold_state *hs);

/*
 * Whether work of class cls may run now: NULL when it may, else its reason
 * word (REASON_SUSPENDED, REASON_MAINTENANCE_WINDOW) with *ret_message
 * (when not NULL) pointing at the sentence in hs.
 */
const char *hold_judge(const hold_state *hs, hold_class cls, const char **ret_message);

/*
 * The one reader of the holds' records (the only function here that does
 * I/O: the state store, never the clock): the suspension and whether c's
 * override token was spent, assessed at now_ms for c. What the pass,
 * `gitcd status` and `gitcd plan` share. 0, or the store's -errno.
 */
int hold_read(state_db *db, const char *cluster, const etcd_cluster *c, int64_t now_ms,
              hold_state *ret);

/* "2026-12-01T02:00Z" (UTC, to the minute) into buf (>= 24 bytes). */
void hold_format_minute(int64_t ms, char *buf, size_t size);
