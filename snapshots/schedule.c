/*
 * Snapshot and drill schedules, the SnapshotsHealthy checker and the restore
 * candidate (snapshots/schedule.h).
 *
 * Design: the schedule keeps no memory of its own. What was done is in the
 * snapshot records (each scheduled attempt carries the cron slot it was
 * taken for), so after a restart the next due slot follows from the
 * records alone: the latest slot at or before now, if no attempt covers it.
 * That is what makes a long outage cost one catch-up snapshot, not one per
 * missed slot, and a failed attempt wait for the next slot instead of
 * retrying in a loop. Drills keep no memory either: each drill record
 * carries the cron slot of spec.snapshots.verify it ran for, and each
 * snapshot record its latest drill.
 */
#include <errno.h>
#include <stdio.h>

#include "snapshots/schedule.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

int64_t snapshot_last_slot(const state_snapshot_list *records)
{
        int64_t last = 0;
        for (size_t i = 0; records && i < records->n; i++) {
                const state_snapshot *s = records->items[i];
                if (streq_ptr(s->trigger, "schedule") && s->slot_ms > last)
                        last = s->slot_ms;
        }
        return last;
}

int64_t snapshot_drill_pending_ms(const cron_expr *schedule, int64_t now_ms)
{
        int64_t interval = 0;
        if (!schedule || cron_interval(schedule, now_ms, &interval) < 0)
                interval = 0;
        return 2 * interval > SNAPSHOT_DRILL_PENDING_MIN_MS ? 2 * interval
                                                            : SNAPSHOT_DRILL_PENDING_MIN_MS;
}

int snapshot_verify_policy_of(const snapshot_spec *spec, snapshot_verify_policy *ret)
{
        *ret = (snapshot_verify_policy){.mode = spec->verify};
        if (spec->verify == VERIFY_SCHEDULE)
                return cron_parse(spec->verify_schedule ? spec->verify_schedule : "",
                                  &ret->schedule);
        return 0;
}

static bool kept(const state_snapshot *s)
{
        return streq_ptr(s->result, "succeeded") && !s->deleted_ms && !s->expired_ms;
}

const state_snapshot *snapshot_restore_candidate(const state_snapshot_list *records)
{
        const state_snapshot *unproven = NULL;
        for (size_t i = 0; records && i < records->n; i++) {
                const state_snapshot *s = records->items[i];
                if (!kept(s) || streq_ptr(s->verify_result, "verify-failed"))
                        continue;
                if (streq_ptr(s->verify_result, "verified"))
                        return s;
                if (!unproven)
                        unproven = s;
        }
        return unproven;
}

int snapshot_drill_due(const snapshot_verify_policy *verify, const state_snapshot_list *records,
                       const char *dest_id, int64_t last_slot_ms, int64_t now_ms, int64_t *ret_id,
                       int64_t *ret_slot_ms, int64_t *ret_next_ms)
{
        if (ret_next_ms)
                *ret_next_ms = 0;
        if (!verify || verify->mode == VERIFY_OFF)
                return 0;
        const state_snapshot *newest = NULL;
        for (size_t i = 0; records && i < records->n; i++) {
                const state_snapshot *s = records->items[i];
                if (!kept(s) || !streq_ptr(s->destination, dest_id))
                        continue;
                if (verify->mode == VERIFY_SCHEDULE) {
                        newest = s;
                        break;
                }
                if (!s->verify_result) {
                        *ret_id = s->id;
                        *ret_slot_ms = 0;
                        return 1;
                }
                if (!newest)
                        newest = s;
        }
        if (!newest)
                return 0;
        if (verify->mode == VERIFY_EVERY) {
                /* the newest, when its drill could not run: again after a while */
                if (!streq_ptr(newest->verify_result, "unverified"))
                        return 0;
                int64_t again = newest->verify_ms + SNAPSHOT_DRILL_RETRY_MS;
                if (now_ms < again) {
                        if (ret_next_ms)
                                *ret_next_ms = again;
                        return 0;
                }
                *ret_id = newest->id;
                *ret_slot_ms = 0;
                return 1;
        }
        int64_t slot = 0;
        int r = cron_due(&verify->schedule, last_slot_ms, now_ms, &slot, ret_next_ms);
        if (r <= 0)
                return r;
        *ret_id = newest->id;
        *ret_slot_ms = slot;
        return 1;
}

/* "restored in 2.1 s (48 MB/s)" */
static void restore_figures(const state_snapshot *s, char *buf, size_t size)
{
        if (s->verify_restore_ms <= 0) {
                snprintf(buf, size, "restored");
                return;
        }
        double secs = (double)s->verify_restore_ms / 1000.0;
        double mb = (double)(s->db_size > 0 ? s->db_size : s->size) / 1e6;
        snprintf(buf, size, "restored in %.1f s (%.1f MB/s)", secs, mb / secs);
}

/* The condition while drills are on, once snapshots are taken as they should be. */
/* The latest drill failed: the condition says so, and names the restore candidate if any. */
static void drill_failed(const state_snapshot *last, const state_snapshot *proven,
                         snapshot_condition *ret)
{
        char when[40];
        format_rfc3339(last->verify_ms, when, sizeof(when));
        ret->status = "False";
        ret->reason = "VerifyFailed";
        if (proven) {
                char pwhen[40];
                format_rfc3339(proven->verify_ms, pwhen, sizeof(pwhen));
                ret->message =
                    xasprintf("the restore drill of snapshot %lld on %s failed: %s; the restore "
                              "candidate is snapshot %lld (revision %lld, proven on %s)",
                              (long long)last->id, when, last->verify_message,
                              (long long)proven->id, (long long)proven->revision, pwhen);
        } else {
                ret->message = xasprintf("the restore drill of snapshot %lld on %s "
                                         "failed: %s; no snapshot is proven to restore",
                                         (long long)last->id, when, last->verify_message);
        }
}

/* Where the drills stand against their window (check_drills). */
typedef struct drill_view {
        const state_snapshot *proven; /* proven within the window, or NULL */
        const state_snapshot *wait;   /* the snapshot a drill is awaited for */
        const char *could_not;        /* why the last drill could not run */
        int64_t window;
        bool in_time; /* the drill awaited is not late yet */
} drill_view;

/*
 * verify: every. Each snapshot within the window: the oldest one kept
 * since the newest proven one (all kept ones when none was proven)
 * decides; before any drill finished, the newest (a new cluster, or gitcd
 * just upgraded: the drills of what is there are under way).
 */
static void drill_window_every(const state_snapshot_list *records, const cron_expr *schedule,
                               const state_snapshot *newest, const state_snapshot *last,
                               int64_t now_ms, drill_view *v)
{
        v->window = snapshot_drill_pending_ms(schedule, now_ms);
        if (streq_ptr(newest->verify_result, "verified")) {
                v->proven = newest;
                v->could_not = NULL;
                return;
        }
        v->wait = newest;
        const state_snapshot *oldest = newest;
        for (size_t i = 0; last && records && i < records->n; i++) {
                const state_snapshot *x = records->items[i];
                if (x == v->proven)
                        break;
                if (kept(x))
                        oldest = x;
        }
        int64_t taken = oldest->finished_ms ? oldest->finished_ms : oldest->started_ms;
        v->in_time = now_ms - taken <= v->window;
        if (!v->in_time) {
                v->proven = NULL;
                v->wait = oldest;
        }
        if (!streq_ptr(newest->verify_result, "unverified") &&
            !streq_ptr(v->wait->verify_result, "unverified"))
                v->could_not = NULL;
}

/* verify: a schedule. A proof holds for twice its interval. */
static void drill_window_schedule(const snapshot_verify_policy *verify,
                                  const state_snapshot *newest, int64_t now_ms, drill_view *v)
{
        int64_t interval = 0;
        if (cron_interval(&verify->schedule, now_ms, &interval) < 0)
                interval = 0;
        v->window = 2 * interval;
        bool ever = v->proven != NULL;
        if (v->proven && now_ms - v->proven->verify_ms > v->window)
                v->proven = NULL;
        if (!v->proven) {
                /* pending only before any snapshot was proven, for a while */
                v->wait = newest;
                int64_t taken = newest->finished_ms ? newest->finished_ms : newest->started_ms;
                int64_t w = v->window > SNAPSHOT_DRILL_PENDING_MIN_MS
                                ? v->window
                                : SNAPSHOT_DRILL_PENDING_MIN_MS;
                v->in_time = !ever && now_ms - taken <= w;
        }
}

/* The condition for v: proven, pending or overdue. */
static void drill_report(const drill_view *v, const snapshot_verify_policy *verify, int64_t now_ms,
                         snapshot_condition *ret)
{
        char age[32], figures[64];
        const char *could_not = v->could_not;
        if (v->proven) {
                const state_snapshot *proven = v->proven;
                format_age(now_ms - proven->verify_ms, age, sizeof(age));
                restore_figures(proven, figures, sizeof(figures));
                ret->status = "True";
                ret->reason = "SnapshotVerified";
                ret->message = xasprintf(
                    "snapshot %lld (revision %lld, %s) was proven to restore %s ago: %s%s%s%s",
                    (long long)proven->id, (long long)proven->revision,
                    proven->location ? proven->location : "", age, figures,
                    v->wait ? "; the newest snapshot awaits its drill" : "",
                    could_not ? ", the last one could not run: " : "", could_not ? could_not : "");
                return;
        }
        format_age(v->window, age, sizeof(age));
        if (v->in_time) {
                ret->status = "Unknown";
                ret->reason = "VerifyPending";
                ret->message = xasprintf(
                    "snapshot %lld awaits its restore drill%s%s", (long long)v->wait->id,
                    could_not ? "; the last one could not run: " : "", could_not ? could_not : "");
                return;
        }
        ret->status = "False";
        ret->reason = "VerifyOverdue";
        if (verify->mode == VERIFY_EVERY)
                ret->message = xasprintf("snapshot %lld was not proven to restore within %s of "
                                         "being taken%s%s",
                                         (long long)v->wait->id, age,
                                         could_not ? "; the last drill could not run: " : "",
                                         could_not ? could_not : "");
        else
                ret->message = xasprintf("no restore drill proved a snapshot within %s (twice "
                                         "the interval of spec.snapshots.verify)%s%s",
                                         age, could_not ? "; the last one could not run: " : "",
                                         could_not ? could_not : "");
}

static void check_drills(const state_snapshot_list *records, const cron_expr *schedule,
                         const snapshot_verify_policy *verify, const state_snapshot *newest,
                         int64_t now_ms, snapshot_condition *ret)
{
        const state_snapshot *last = NULL; /* the most recent drill's snapshot */
        for (size_t i = 0; records && i < records->n; i++) {
                const state_snapshot *s = records->items[i];
                if (s->verify_result && (!last || s->verify_ms > last->verify_ms))
                        last = s;
        }
        drill_view v = {0};
        /* newest verified and kept */
        for (size_t i = 0; records && i < records->n && !v.proven; i++)
                if (kept(records->items[i]) &&
                    streq_ptr(records->items[i]->verify_result, "verified"))
                        v.proven = records->items[i];
        /* the latest drill failed; with every, the newest snapshot's too (it is not drilled
         * again, whatever drills of older ones said since) */
        const state_snapshot *failed =
            last && streq(last->verify_result, "verify-failed") ? last
            : verify->mode == VERIFY_EVERY && streq_ptr(newest->verify_result, "verify-failed")
                ? newest
                : NULL;
        if (failed) {
                drill_failed(failed, v.proven, ret);
                return;
        }
        v.could_not =
            last && streq(last->verify_result, "unverified") ? last->verify_message : NULL;
        if (verify->mode == VERIFY_EVERY)
                drill_window_every(records, schedule, newest, last, now_ms, &v);
        else
                drill_window_schedule(verify, newest, now_ms, &v);
        drill_report(&v, verify, now_ms, ret);
}

void snapshot_check_health(const state_snapshot_list *records, const cron_expr *schedule,
                           const snapshot_verify_policy *verify, int64_t now_ms,
                           snapshot_condition *ret)
{
        const state_snapshot *last_sched = NULL, *newest_ok = NULL;
        for (size_t i = 0; records && i < records->n; i++) {
                const state_snapshot *s = records->items[i];
                if (streq_ptr(s->result, "running"))
                        continue;
                if (!last_sched && streq_ptr(s->trigger, "schedule"))
                        last_sched = s;
                if (!newest_ok && streq_ptr(s->result, "succeeded"))
                        newest_ok = s;
        }
        *ret = (snapshot_condition){.type = "SnapshotsHealthy"};
        if (last_sched && streq_ptr(last_sched->result, "failed")) {
                char when[40];
                format_rfc3339(last_sched->started_ms, when, sizeof(when));
                ret->status = "False";
                ret->reason = "SnapshotFailed";
                ret->message = xasprintf("the scheduled snapshot of %s failed: %s", when,
                                         last_sched->error ? last_sched->error : "unknown error");
                return;
        }
        if (!newest_ok) {
                ret->status = "Unknown";
                ret->reason = "NoSnapshotYet";
                ret->message = xstrdup("no snapshot has been taken yet");
                return;
        }
        int64_t interval = 0;
        char age[32];
        int64_t taken = newest_ok->finished_ms ? newest_ok->finished_ms : newest_ok->started_ms;
        format_age(now_ms - taken, age, sizeof(age));
        if (cron_interval(schedule, now_ms, &interval) == 0 && now_ms - taken > 2 * interval) {
                char iv[32];
                format_age(interval, iv, sizeof(iv));
                ret->status = "False";
                ret->reason = "SnapshotTooOld";
                ret->message = xasprintf("the newest snapshot is %s old, more than twice the "
                                         "schedule's interval (%s)",
                                         age, iv);
                return;
        }
        if (verify && verify->mode != VERIFY_OFF) {
                check_drills(records, schedule, verify, newest_ok, now_ms, ret);
                return;
        }
        ret->status = "True";
        ret->reason = "SnapshotSucceeded";
        ret->message = xasprintf("the newest snapshot is %s old (revision %lld, %s)", age,
                                 (long long)newest_ok->revision,
                                 newest_ok->location ? newest_ok->location : "");
}
