/*
 * The holds on a cluster's steps (reconciler/hold.h): the class of each
 * kind of step, the maintenance windows' arithmetic, and the judgement.
 *
 * Pure: the caller reads the state store and the clock. A window is open
 * at t when some start s of its schedule has s <= t < s + duration; as
 * every start of one window has the same duration, the latest start at or
 * before t decides (cron_prev), which also covers a duration longer than
 * the schedule's interval (windows of one schedule that overlap) and a
 * window that spans midnight or a month's end.
 */
#include <assert.h>
#include <errno.h>
#include <time.h>

#include "api/cron.h"
#include "reconciler/hold.h"
#include "state/holds.h"
#include "util/xalloc.h"

hold_class hold_step_class(const step *s)
{
        switch (s->kind) {
        case STEP_CONVERGED:
        case STEP_WAIT:
        case STEP_RENEW_CERTS:
                return HOLD_SAFETY;
        case STEP_RESTART_MEMBER:
                return HOLD_DISRUPTIVE;
        case STEP_MOVE_LEADER:
                /*
                 * With Upgrading it would be part of a roll; rule 13 no longer
                 * sends one (etcd hands leadership over as the leader stops),
                 * but one would be held as the roll is.
                 */
                return streq_ptr(s->reason, REASON_UPGRADING) ? HOLD_DISRUPTIVE : HOLD_VOLUNTARY;
        case STEP_START_SEED:
        case STEP_ADD_LEARNER:
        case STEP_START_MEMBER:
        case STEP_PROMOTE:
        case STEP_REMOVE_MEMBER:
        case STEP_DELETE_MEMBER:
        case STEP_STOP_MEMBER:
        case STEP_BOOTSTRAP:
                return HOLD_VOLUNTARY;
        }
        return HOLD_VOLUNTARY;
}

hold_class hold_work_class(hold_work w)
{
        switch (w) {
        case HOLD_WORK_SNAPSHOT:
                return HOLD_SAFETY;
        case HOLD_WORK_RECOVERY:
        case HOLD_WORK_AUTH:
        case HOLD_WORK_NOSPACE_DEFRAG:
        /* an election is cheap (one round trip); no member stops, no client reconnects */
        case HOLD_WORK_SLOW_LEADER:
                return HOLD_VOLUNTARY;
        case HOLD_WORK_CA_ROTATION:
        case HOLD_WORK_TLS_SWITCH:
        case HOLD_WORK_DEFRAG:
                return HOLD_DISRUPTIVE;
        }
        return HOLD_DISRUPTIVE;
}

int maint_windows_at(const maintenance_spec *ms, int64_t now_ms, int64_t *ret_end_ms,
                     int64_t *ret_next_ms)
{
        if (!ms || ms->n_windows == 0)
                return -ENOENT;
        int64_t end = 0, next = 0;
        for (size_t i = 0; i < ms->n_windows; i++) {
                const maint_window *w = &ms->windows[i];
                cron_expr e;
                if (!w->schedule || w->duration_ms <= 0 || cron_parse(w->schedule, &e) < 0)
                        continue;
                int64_t start = 0, after = 0;
                if (cron_prev(&e, now_ms, &start) == 0 && now_ms < start + w->duration_ms)
                        end = MAX(end, start + w->duration_ms);
                if (cron_next(&e, now_ms, &after) == 0 && (next == 0 || after < next))
                        next = after;
        }
        if (end > 0) {
                if (ret_end_ms)
                        *ret_end_ms = end;
                return 1;
        }
        if (ret_next_ms)
                *ret_next_ms = next;
        return 0;
}

void hold_format_minute(int64_t ms, char *buf, size_t size)
{
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%MZ", &tm) == 0)
                snprintf(buf, size, "?");
}

void hold_assess(const hold_input *in, hold_state *ret)
{
        assert(in && in->c && ret);
        const etcd_cluster *c = in->c;
        *ret = (hold_state){.in_window = true, .override_spent_ms = in->override_spent_ms};
        char when[32];
        if (c->suspend) {
                ret->suspended = true;
                ret->suspended_message = xstrdup("suspended (by spec)");
        } else if (in->suspended_by) {
                ret->suspended = true;
                hold_format_minute(in->suspended_ms, when, sizeof(when));
                ret->suspended_message =
                    in->suspend_reason
                        ? xasprintf("suspended (by %s at %s: %s)", in->suspended_by, when,
                                    in->suspend_reason)
                        : xasprintf("suspended (by %s at %s)", in->suspended_by, when);
        }
        int64_t end = 0, next = 0;
        int k = maint_windows_at(&c->maintenance, in->now_ms, &end, &next);
        if (k < 0)
                return;
        ret->windows = true;
        ret->in_window = k > 0;
        ret->window_end_ms = k > 0 ? end : 0;
        ret->next_window_ms = k > 0 ? 0 : next;
        ret->override_active = c->maintenance.override && in->override_spent_ms == 0;
        if (ret->in_window)
                return;
        if (next) {
                hold_format_minute(next, when, sizeof(when));
                ret->window_message = xasprintf("waits for the window at %s", when);
        } else {
                ret->window_message = xstrdup("waits for a maintenance window (none opens "
                                              "within five years)");
        }
}

void hold_state_release(hold_state *hs)
{
        if (!hs)
                return;
        free(hs->suspended_message);
        free(hs->window_message);
        free(hs->held_recorded);
        hs->suspended_message = hs->window_message = hs->held_recorded = NULL;
}

const char *hold_judge(const hold_state *hs, hold_class cls, const char **ret_message)
{
        const char *word = NULL, *msg = NULL;
        if (cls == HOLD_SAFETY)
                return NULL;
        if (hs->suspended) {
                word = REASON_SUSPENDED;
                msg = hs->suspended_message;
        } else if (cls == HOLD_DISRUPTIVE && !hs->in_window && !hs->override_active) {
                word = REASON_MAINTENANCE_WINDOW;
                msg = hs->window_message;
        }
        if (word && ret_message)
                *ret_message = msg;
        return word;
}

int hold_read(state_db *db, const char *cluster, const etcd_cluster *c, int64_t now_ms,
              hold_state *ret)
{
        _cleanup_(state_hold_freep) state_hold *h = NULL;
        int k = state_hold_get(db, cluster, &h);
        if (k < 0 && k != -ENOENT)
                return k;
        int64_t spent = 0;
        const char *token = c->maintenance.override;
        if (token && (k = state_override_spent(db, cluster, token, &spent)) < 0)
                return k;
        hold_input in = {.c = c,
                         .suspended_by = h ? h->suspended_by : NULL,
                         .suspended_ms = h ? h->suspended_ms : 0,
                         .suspend_reason = h ? h->suspend_reason : NULL,
                         .override_spent_ms = spent,
                         .now_ms = now_ms};
        hold_assess(&in, ret);
        ret->held_recorded = h && h->held ? xstrdup(h->held) : NULL;
        return 0;
}
