/*
 * Snapshot schedules and the SnapshotsHealthy checker (snapshots/schedule.h).
 *
 * Design: the schedule keeps no memory of its own. What was done is in the
 * snapshot records (each scheduled attempt carries the cron slot it was
 * taken for), so after a restart the next due slot follows from the
 * records alone: the latest slot at or before now, if no attempt covers it.
 * That is what makes a long outage cost one catch-up snapshot, not one per
 * missed slot, and a failed attempt wait for the next slot instead of
 * retrying in a loop.
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

int snapshot_schedule_due(const cron_expr *e, int64_t last_slot_ms, int64_t now_ms,
                          int64_t *ret_slot_ms, int64_t *ret_next_ms)
{
        int64_t prev = 0, next = 0;
        int r = cron_prev(e, now_ms, &prev);
        if (r == -ERANGE)
                prev = 0; /* no slot in the past five years; maybe one ahead */
        else if (r < 0)
                return r;
        r = cron_next(e, now_ms, &next);
        if (r < 0 && prev == 0)
                return -ERANGE;
        if (ret_next_ms)
                *ret_next_ms = r < 0 ? 0 : next;
        if (prev > 0 && prev > last_slot_ms) {
                *ret_slot_ms = prev;
                return 1;
        }
        return 0;
}

int snapshot_schedule_interval(const cron_expr *e, int64_t now_ms, int64_t *ret_ms)
{
        int64_t prev, next;
        int r = cron_prev(e, now_ms, &prev);
        if (r < 0)
                r = cron_next(e, now_ms, &prev);
        if (r < 0)
                return r;
        r = cron_next(e, prev, &next);
        if (r < 0)
                return r;
        *ret_ms = next - prev;
        return 0;
}

void snapshot_check_health(const state_snapshot_list *records, const cron_expr *schedule,
                           int64_t now_ms, snapshot_condition *ret)
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
        if (snapshot_schedule_interval(schedule, now_ms, &interval) == 0 &&
            now_ms - taken > 2 * interval) {
                char iv[32];
                format_age(interval, iv, sizeof(iv));
                ret->status = "False";
                ret->reason = "SnapshotTooOld";
                ret->message = xasprintf("the newest snapshot is %s old, more than twice the "
                                         "schedule's interval (%s)",
                                         age, iv);
                return;
        }
        ret->status = "True";
        ret->reason = "SnapshotSucceeded";
        ret->message = xasprintf("the newest snapshot is %s old (revision %lld, %s)", age,
                                 (long long)newest_ok->revision,
                                 newest_ok->location ? newest_ok->location : "");
}
