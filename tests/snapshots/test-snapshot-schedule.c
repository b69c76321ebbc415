/*
 * Schedules with a fake clock: the cron evaluator (api/cron.h), when a
 * scheduled snapshot is due and how a schedule missed while gitcd was down
 * is caught up (once), and the SnapshotsHealthy checker. Pure functions:
 * every time is passed in.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "api/cron.h"
#include "snapshots/schedule.h"
#include "util/xalloc.h"

#define MIN_MS  (60 * 1000LL)
#define HOUR_MS (60 * MIN_MS)
#define DAY_MS  (24 * HOUR_MS)

/* "2026-11-23 14:05" UTC -> ms */
static int64_t at(int y, int mo, int d, int h, int mi)
{
        struct tm tm = {
            .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi};
        return (int64_t)timegm(&tm) * 1000;
}

static cron_expr parse(const char *s)
{
        cron_expr e;
        assert_int_equal(cron_parse(s, &e), 0);
        return e;
}

static void test_cron_next_prev(void **unused)
{
        (void)unused;
        int64_t t = at(2026, 11, 23, 14, 5); /* a Monday */
        int64_t r;
        cron_expr e = parse("* * * * *");
        assert_int_equal(cron_next(&e, t, &r), 0);
        assert_int_equal(r, t + MIN_MS);
        assert_int_equal(cron_prev(&e, t + 30000, &r), 0);
        assert_int_equal(r, t);

        e = parse("0 */6 * * *");
        assert_int_equal(cron_next(&e, t, &r), 0);
        assert_int_equal(r, at(2026, 11, 23, 18, 0));
        assert_int_equal(cron_prev(&e, t, &r), 0);
        assert_int_equal(r, at(2026, 11, 23, 12, 0));

        e = parse("30 2 * * sun"); /* weekly, Sunday 02:30 */
        assert_int_equal(cron_next(&e, t, &r), 0);
        assert_int_equal(r, at(2026, 11, 29, 2, 30));
        assert_int_equal(cron_prev(&e, t, &r), 0);
        assert_int_equal(r, at(2026, 11, 22, 2, 30));
        cron_expr seven = parse("30 2 * * 7");
        assert_int_equal(cron_next(&seven, t, &r), 0);
        assert_int_equal(r, at(2026, 11, 29, 2, 30));

        e = parse("0 0 1 jan,jul *"); /* across a year */
        assert_int_equal(cron_next(&e, t, &r), 0);
        assert_int_equal(r, at(2027, 1, 1, 0, 0));
        assert_int_equal(cron_prev(&e, t, &r), 0);
        assert_int_equal(r, at(2026, 7, 1, 0, 0));

        /* both day fields restricted: either matches (the 1st, or a Friday) */
        e = parse("0 12 1 * fri");
        assert_int_equal(cron_next(&e, t, &r), 0);
        assert_int_equal(r, at(2026, 11, 27, 12, 0)); /* Friday */
        assert_int_equal(cron_next(&e, at(2026, 11, 28, 0, 0), &r), 0);
        assert_int_equal(r, at(2026, 12, 1, 12, 0)); /* the 1st, a Tuesday */

        e = parse("15-45/15 9-17 * * mon-fri");
        assert_int_equal(cron_next(&e, at(2026, 11, 27, 17, 45), &r), 0);
        assert_int_equal(r, at(2026, 11, 30, 9, 15)); /* after the weekend */
        assert_true(cron_matches(&e, at(2026, 11, 30, 9, 30)));
        assert_false(cron_matches(&e, at(2026, 11, 29, 9, 30)));

        e = parse("0 0 30 feb *"); /* never */
        assert_int_equal(cron_next(&e, t, &r), -ERANGE);
        assert_int_equal(cron_parse("61 * * * *", &e), -EINVAL);
}

static void test_due_and_catch_up_once(void **unused)
{
        (void)unused;
        cron_expr e = parse("0 * * * *"); /* hourly */
        int64_t slot = 0, next = 0;
        int64_t t = at(2026, 11, 23, 14, 5);

        /* no scheduled snapshot yet: one at once, for the 14:00 slot */
        assert_int_equal(snapshot_schedule_due(&e, 0, t, &slot, &next), 1);
        assert_int_equal(slot, at(2026, 11, 23, 14, 0));
        int64_t last = slot;
        /* taken: nothing due until 15:00 */
        assert_int_equal(snapshot_schedule_due(&e, last, t + MIN_MS, &slot, &next), 0);
        assert_int_equal(next, at(2026, 11, 23, 15, 0));
        assert_int_equal(snapshot_schedule_due(&e, last, at(2026, 11, 23, 15, 0), &slot, &next), 1);
        assert_int_equal(slot, at(2026, 11, 23, 15, 0));
        last = slot;

        /* gitcd is down from 15:10 to 20:30: five slots missed, one snapshot at 20:30 */
        int taken = 0;
        for (int64_t now = at(2026, 11, 23, 20, 30); now < at(2026, 11, 23, 20, 59);
             now += 10 * 1000) {
                if (snapshot_schedule_due(&e, last, now, &slot, &next) == 1) {
                        taken++;
                        assert_int_equal(slot, at(2026, 11, 23, 20, 0));
                        last = slot; /* the record of the attempt carries its slot */
                }
        }
        assert_int_equal(taken, 1);
        /* a failed attempt also carries its slot: no retry loop, the next slot decides */
        assert_int_equal(snapshot_schedule_due(&e, last, at(2026, 11, 23, 20, 59), &slot, &next),
                         0);
        assert_int_equal(next, at(2026, 11, 23, 21, 0));

        /* a whole day of an every-minute schedule driven by a fake clock: one per minute */
        e = parse("* * * * *");
        last = 0;
        taken = 0;
        for (int64_t now = t; now < t + DAY_MS; now += 7 * 1000)
                if (snapshot_schedule_due(&e, last, now, &slot, &next) == 1) {
                        taken++;
                        last = slot;
                }
        assert_int_equal(taken, 24 * 60);

        int64_t iv;
        assert_int_equal(snapshot_schedule_interval(&e, t, &iv), 0);
        assert_int_equal(iv, MIN_MS);
        cron_expr daily = parse("30 3 * * *");
        assert_int_equal(snapshot_schedule_interval(&daily, t, &iv), 0);
        assert_int_equal(iv, DAY_MS);
}

static state_snapshot *rec(const char *trigger, const char *result, int64_t started, int64_t slot)
{
        state_snapshot *s = XNEW(state_snapshot);
        s->trigger = xstrdup(trigger);
        s->result = xstrdup(result);
        s->started_ms = started;
        s->finished_ms = streq(result, "running") ? 0 : started + 1000;
        s->slot_ms = slot;
        if (streq(result, "failed"))
                s->error = xstrdup("no healthy voter answered");
        if (streq(result, "succeeded"))
                s->location = xstrdup("/srv/backups/x.db");
        return s;
}

static void list_add(state_snapshot_list *l, state_snapshot *s)
{
        l->items = xrealloc(l->items, (l->n + 1) * sizeof(*l->items));
        l->items[l->n++] = s;
}

static void test_health(void **unused)
{
        (void)unused;
        cron_expr e = parse("0 * * * *");
        int64_t t = at(2026, 11, 23, 14, 5);
        snapshot_condition c;
        state_snapshot_list l = {0};

        snapshot_check_health(&l, &e, t, &c);
        assert_string_equal(c.type, "SnapshotsHealthy");
        assert_string_equal(c.status, "Unknown");
        assert_string_equal(c.reason, "NoSnapshotYet");
        free(c.message);

        /* newest first */
        list_add(&l,
                 rec("schedule", "succeeded", at(2026, 11, 23, 14, 0), at(2026, 11, 23, 14, 0)));
        snapshot_check_health(&l, &e, t, &c);
        assert_string_equal(c.status, "True");
        assert_string_equal(c.reason, "SnapshotSucceeded");
        free(c.message);

        /* older than twice the interval (2 h): too old */
        snapshot_check_health(&l, &e, at(2026, 11, 23, 16, 30), &c);
        assert_string_equal(c.status, "False");
        assert_string_equal(c.reason, "SnapshotTooOld");
        free(c.message);
        snapshot_check_health(&l, &e, at(2026, 11, 23, 15, 59), &c);
        assert_string_equal(c.status, "True");
        free(c.message);

        /* the last scheduled one failed: false, even with a recent success before it */
        state_snapshot_list l2 = {0};
        list_add(&l2, rec("schedule", "running", at(2026, 11, 23, 16, 0), at(2026, 11, 23, 16, 0)));
        list_add(&l2, rec("schedule", "failed", at(2026, 11, 23, 15, 0), at(2026, 11, 23, 15, 0)));
        for (size_t i = 0; i < l.n; i++)
                list_add(&l2, l.items[i]);
        snapshot_check_health(&l2, &e, at(2026, 11, 23, 16, 0), &c);
        assert_string_equal(c.status, "False");
        assert_string_equal(c.reason, "SnapshotFailed");
        assert_non_null(strstr(c.message, "no healthy voter answered"));
        free(c.message);

        /* a manual snapshot afterwards does not hide the failed schedule */
        state_snapshot_list l3 = {0};
        list_add(&l3, rec("manual", "succeeded", at(2026, 11, 23, 15, 30), 0));
        list_add(&l3, l2.items[1]);
        snapshot_check_health(&l3, &e, at(2026, 11, 23, 15, 40), &c);
        assert_string_equal(c.status, "False");
        free(c.message);
        state_snapshot_free(l3.items[0]);
        free(l3.items);

        state_snapshot_free(l2.items[0]);
        state_snapshot_free(l2.items[1]);
        free(l2.items);
        state_snapshot_list_release(&l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_cron_next_prev),
            cmocka_unit_test(test_due_and_catch_up_once),
            cmocka_unit_test(test_health),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
