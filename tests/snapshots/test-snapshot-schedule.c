/*
 * Schedules with a fake clock: the cron evaluator (api/cron.h), when a
 * scheduled snapshot is due and how a schedule missed while gitcd was down
 * is caught up (once), the SnapshotsHealthy checker with restore drills
 * off and on, when a drill is due and which snapshot a restore takes when
 * none is named (the restore candidate). Pure functions:
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
        assert_int_equal(cron_due(&e, 0, t, &slot, &next), 1);
        assert_int_equal(slot, at(2026, 11, 23, 14, 0));
        int64_t last = slot;
        /* taken: nothing due until 15:00 */
        assert_int_equal(cron_due(&e, last, t + MIN_MS, &slot, &next), 0);
        assert_int_equal(next, at(2026, 11, 23, 15, 0));
        assert_int_equal(cron_due(&e, last, at(2026, 11, 23, 15, 0), &slot, &next), 1);
        assert_int_equal(slot, at(2026, 11, 23, 15, 0));
        last = slot;

        /* gitcd is down from 15:10 to 20:30: five slots missed, one snapshot at 20:30 */
        int taken = 0;
        for (int64_t now = at(2026, 11, 23, 20, 30); now < at(2026, 11, 23, 20, 59);
             now += 10 * 1000) {
                if (cron_due(&e, last, now, &slot, &next) == 1) {
                        taken++;
                        assert_int_equal(slot, at(2026, 11, 23, 20, 0));
                        last = slot; /* the record of the attempt carries its slot */
                }
        }
        assert_int_equal(taken, 1);
        /* a failed attempt also carries its slot: no retry loop, the next slot decides */
        assert_int_equal(cron_due(&e, last, at(2026, 11, 23, 20, 59), &slot, &next), 0);
        assert_int_equal(next, at(2026, 11, 23, 21, 0));

        /* a whole day of an every-minute schedule driven by a fake clock: one per minute */
        e = parse("* * * * *");
        last = 0;
        taken = 0;
        for (int64_t now = t; now < t + DAY_MS; now += 7 * 1000)
                if (cron_due(&e, last, now, &slot, &next) == 1) {
                        taken++;
                        last = slot;
                }
        assert_int_equal(taken, 24 * 60);

        int64_t iv;
        assert_int_equal(cron_interval(&e, t, &iv), 0);
        assert_int_equal(iv, MIN_MS);
        cron_expr daily = parse("30 3 * * *");
        assert_int_equal(cron_interval(&daily, t, &iv), 0);
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

        snapshot_check_health(&l, &e, NULL, t, &c);
        assert_string_equal(c.type, "SnapshotsHealthy");
        assert_string_equal(c.status, "Unknown");
        assert_string_equal(c.reason, "NoSnapshotYet");
        free(c.message);

        /* newest first */
        list_add(&l,
                 rec("schedule", "succeeded", at(2026, 11, 23, 14, 0), at(2026, 11, 23, 14, 0)));
        snapshot_check_health(&l, &e, NULL, t, &c);
        assert_string_equal(c.status, "True");
        assert_string_equal(c.reason, "SnapshotSucceeded");
        free(c.message);

        /* older than twice the interval (2 h): too old */
        snapshot_check_health(&l, &e, NULL, at(2026, 11, 23, 16, 30), &c);
        assert_string_equal(c.status, "False");
        assert_string_equal(c.reason, "SnapshotTooOld");
        free(c.message);
        snapshot_check_health(&l, &e, NULL, at(2026, 11, 23, 15, 59), &c);
        assert_string_equal(c.status, "True");
        free(c.message);

        /* the last scheduled one failed: false, even with a recent success before it */
        state_snapshot_list l2 = {0};
        list_add(&l2, rec("schedule", "running", at(2026, 11, 23, 16, 0), at(2026, 11, 23, 16, 0)));
        list_add(&l2, rec("schedule", "failed", at(2026, 11, 23, 15, 0), at(2026, 11, 23, 15, 0)));
        for (size_t i = 0; i < l.n; i++)
                list_add(&l2, l.items[i]);
        snapshot_check_health(&l2, &e, NULL, at(2026, 11, 23, 16, 0), &c);
        assert_string_equal(c.status, "False");
        assert_string_equal(c.reason, "SnapshotFailed");
        assert_non_null(strstr(c.message, "no healthy voter answered"));
        free(c.message);

        /* a manual snapshot afterwards does not hide the failed schedule */
        state_snapshot_list l3 = {0};
        list_add(&l3, rec("manual", "succeeded", at(2026, 11, 23, 15, 30), 0));
        list_add(&l3, l2.items[1]);
        snapshot_check_health(&l3, &e, NULL, at(2026, 11, 23, 15, 40), &c);
        assert_string_equal(c.status, "False");
        free(c.message);
        state_snapshot_free(l3.items[0]);
        free(l3.items);

        state_snapshot_free(l2.items[0]);
        state_snapshot_free(l2.items[1]);
        free(l2.items);
        state_snapshot_list_release(&l);
}

/* A succeeded snapshot in /srv/backups, taken at t, 100 MB; its latest drill (NULL: none). */
static state_snapshot *snap(int64_t id, int64_t t, const char *verify, int64_t verify_ms)
{
        state_snapshot *s = rec("schedule", "succeeded", t, t);
        s->id = id;
        s->revision = 100 * id;
        s->db_size = 100 * 1000 * 1000;
        s->destination = xstrdup("local:/srv/backups");
        if (verify) {
                s->verify_result = xstrdup(verify);
                s->verify_ms = verify_ms;
                s->verify_restore_ms = 2000;
                s->verify_message =
                    xstrdup(streq(verify, "verified")     ? "HashKV matches"
                            : streq(verify, "unverified") ? "not started: the drill needs 300 MiB"
                                                          : "etcdutl snapshot restore failed");
        }
        return s;
}

static void health_is(const state_snapshot_list *l, const snapshot_verify_policy *v, int64_t now,
                      const char *status, const char *reason, const char *needle)
{
        cron_expr e = parse("0 * * * *");
        snapshot_condition c;
        snapshot_check_health(l, &e, v, now, &c);
        if (!streq(c.status, status) || !streq(c.reason, reason) ||
            (needle && !strstr(c.message, needle)))
                fail_msg("%s %s: %s (wanted %s %s with \"%s\")", c.status, c.reason, c.message,
                         status, reason, needle ? needle : "");
        free(c.message);
}

/* Drills on (verify: every, hourly snapshots): what SnapshotsHealthy says, and when. */
static void test_health_with_drills(void **unused)
{
        (void)unused;
        snapshot_verify_policy every = {.mode = VERIFY_EVERY};
        int64_t t14 = at(2026, 11, 23, 14, 0);
        state_snapshot_list l = {0};
        list_add(&l, snap(1, t14, NULL, 0));
        /* the first snapshot, no drill yet: pending, for twice the schedule's interval */
        health_is(&l, &every, t14 + 5 * MIN_MS, "Unknown", "VerifyPending",
                  "snapshot 1 awaits its restore drill");
        health_is(&l, &every, t14 + 2 * HOUR_MS + 5 * MIN_MS, "False", "SnapshotTooOld", NULL);
        /* off: as before drills existed */
        snapshot_verify_policy off = {.mode = VERIFY_OFF};
        health_is(&l, &off, t14 + 5 * MIN_MS, "True", "SnapshotSucceeded", NULL);
        health_is(&l, NULL, t14 + 5 * MIN_MS, "True", "SnapshotSucceeded", NULL);
        state_snapshot_list_release(&l);

        /* proven: true, with the restore time and throughput */
        list_add(&l, snap(1, t14, "verified", t14 + MIN_MS));
        health_is(&l, &every, t14 + 5 * MIN_MS, "True", "SnapshotVerified",
                  "restored in 2.0 s (50.0 MB/s)");
        /* a newer one waiting for its drill: still true, for a while */
        state_snapshot_list l2 = {0};
        list_add(&l2, snap(2, t14 + HOUR_MS, NULL, 0));
        list_add(&l2, l.items[0]);
        health_is(&l2, &every, t14 + HOUR_MS + 5 * MIN_MS, "True", "SnapshotVerified",
                  "the newest snapshot awaits its drill");
        /* drills that cannot run: the snapshots after the proven one grow old, then overdue */
        state_snapshot_list l3 = {0};
        list_add(&l3, snap(4, t14 + 3 * HOUR_MS, "unverified", t14 + 3 * HOUR_MS + MIN_MS));
        list_add(&l3, snap(3, t14 + 2 * HOUR_MS, "unverified", t14 + 2 * HOUR_MS + MIN_MS));
        list_add(&l3, l2.items[0]);
        list_add(&l3, l.items[0]);
        health_is(&l3, &every, t14 + 3 * HOUR_MS - MIN_MS, "True", "SnapshotVerified",
                  "could not run: not started: the drill needs 300 MiB");
        health_is(&l3, &every, t14 + 3 * HOUR_MS + 5 * MIN_MS, "False", "VerifyOverdue",
                  "snapshot 2 was not proven to restore within 2h");
        /* the newest failed its drill: false, naming the candidate still proven */
        state_snapshot *bad = snap(5, t14 + 4 * HOUR_MS, "verify-failed", t14 + 4 * HOUR_MS + 60);
        state_snapshot_list l4 = {0};
        list_add(&l4, bad);
        list_add(&l4, l.items[0]);
        health_is(&l4, &every, t14 + 4 * HOUR_MS + 5 * MIN_MS, "False", "VerifyFailed",
                  "the restore candidate is snapshot 1");
        /* an older snapshot drilled by hand since does not hide it */
        l.items[0]->verify_ms = t14 + 4 * HOUR_MS + 2 * MIN_MS;
        health_is(&l4, &every, t14 + 4 * HOUR_MS + 5 * MIN_MS, "False", "VerifyFailed",
                  "snapshot 5");
        /* and a newer snapshot proven ends it */
        state_snapshot_list l5 = {0};
        list_add(&l5, snap(6, t14 + 5 * HOUR_MS, "verified", t14 + 5 * HOUR_MS + MIN_MS));
        list_add(&l5, bad);
        health_is(&l5, &every, t14 + 5 * HOUR_MS + 5 * MIN_MS, "True", "SnapshotVerified",
                  "snapshot 6");

        /* verify on its own schedule (daily): the last proof within two days */
        snapshot_verify_policy daily = {.mode = VERIFY_SCHEDULE, .schedule = parse("0 3 * * *")};
        health_is(&l2, &daily, t14 + HOUR_MS + 5 * MIN_MS, "True", "SnapshotVerified", NULL);
        state_snapshot_list l6 = {0};
        list_add(&l6, snap(7, t14 + 49 * HOUR_MS, NULL, 0));
        list_add(&l6, l.items[0]);
        l.items[0]->verify_ms = t14 + MIN_MS;
        health_is(&l6, &daily, t14 + 49 * HOUR_MS + 5 * MIN_MS, "False", "VerifyOverdue",
                  "no restore drill proved a snapshot within 2d");

        state_snapshot_free(l5.items[0]);
        state_snapshot_free(l6.items[0]);
        state_snapshot_free(l3.items[0]);
        state_snapshot_free(l3.items[1]);
        state_snapshot_free(bad);
        state_snapshot_free(l2.items[0]);
        free(l2.items);
        free(l3.items);
        free(l4.items);
        free(l5.items);
        free(l6.items);
        state_snapshot_list_release(&l);
}

/* Which snapshot a restore takes when none is named. */
static void test_restore_candidate(void **unused)
{
        (void)unused;
        int64_t t = at(2026, 11, 23, 14, 0);
        state_snapshot_list l = {0};
        assert_null(snapshot_restore_candidate(&l));
        list_add(&l, snap(4, t + 3 * HOUR_MS, NULL, 0)); /* newest: no drill yet */
        list_add(&l, snap(3, t + 2 * HOUR_MS, "verify-failed", t));
        list_add(&l, snap(2, t + HOUR_MS, "verified", t));
        list_add(&l, snap(1, t, "verified", t));
        /* the newest proven one, not the newer unproven one */
        assert_int_equal(snapshot_restore_candidate(&l)->id, 2);
        /* expired by retention: not a candidate */
        l.items[2]->expired_ms = t;
        assert_int_equal(snapshot_restore_candidate(&l)->id, 1);
        l.items[3]->deleted_ms = t;
        l.items[3]->expired_ms = t;
        /* none proven: the newest no drill found wanting, never the failed one */
        assert_int_equal(snapshot_restore_candidate(&l)->id, 4);
        free(l.items[0]->verify_result);
        l.items[0]->verify_result = xstrdup("verify-failed");
        assert_null(snapshot_restore_candidate(&l));
        free(l.items[0]->verify_result);
        l.items[0]->verify_result = xstrdup("unverified");
        assert_int_equal(snapshot_restore_candidate(&l)->id, 4);
        state_snapshot_list_release(&l);
}

/* When a drill is due, and of which snapshot. */
static void test_drill_due(void **unused)
{
        (void)unused;
        int64_t t = at(2026, 11, 23, 14, 0);
        snapshot_verify_policy every = {.mode = VERIFY_EVERY};
        const char *dest = "local:/srv/backups";
        state_snapshot_list l = {0};
        list_add(&l, snap(3, t + 2 * HOUR_MS, NULL, 0));
        list_add(&l, snap(2, t + HOUR_MS, NULL, 0));
        list_add(&l, snap(1, t, "verified", t));
        int64_t id = 0, slot = 0, next = 0;
        /* every: newest first, then the older ones without a drill */
        assert_int_equal(
            snapshot_drill_due(&every, &l, dest, 0, t + 3 * HOUR_MS, &id, &slot, &next), 1);
        assert_int_equal(id, 3);
        assert_int_equal(slot, 0);
        l.items[0]->verify_result = xstrdup("verified");
        assert_int_equal(
            snapshot_drill_due(&every, &l, dest, 0, t + 3 * HOUR_MS, &id, &slot, &next), 1);
        assert_int_equal(id, 2);
        /* another destination (the spec's changed): none of its snapshots */
        assert_int_equal(snapshot_drill_due(&every, &l, "s3:aws/b/p", 0, t, &id, &slot, &next), 0);
        l.items[1]->verify_result = xstrdup("verify-failed");
        assert_int_equal(snapshot_drill_due(&every, &l, dest, 0, t, &id, &slot, &next), 0);
        /* a drill of the newest that could not run: again after 15 minutes */
        free(l.items[0]->verify_result);
        l.items[0]->verify_result = xstrdup("unverified");
        l.items[0]->verify_ms = t + 3 * HOUR_MS;
        assert_int_equal(
            snapshot_drill_due(&every, &l, dest, 0, t + 3 * HOUR_MS + MIN_MS, &id, &slot, &next),
            0);
        assert_int_equal(next, t + 3 * HOUR_MS + 15 * MIN_MS);
        assert_int_equal(snapshot_drill_due(&every, &l, dest, 0, t + 3 * HOUR_MS + 15 * MIN_MS, &id,
                                            &slot, &next),
                         1);
        assert_int_equal(id, 3);
        /* a schedule: the newest at each slot, a missed one caught up once */
        snapshot_verify_policy daily = {.mode = VERIFY_SCHEDULE, .schedule = parse("0 3 * * *")};
        int64_t now = at(2026, 11, 25, 9, 0);
        assert_int_equal(snapshot_drill_due(&daily, &l, dest, 0, now, &id, &slot, &next), 1);
        assert_int_equal(id, 3);
        assert_int_equal(slot, at(2026, 11, 25, 3, 0));
        assert_int_equal(snapshot_drill_due(&daily, &l, dest, slot, now, &id, &slot, &next), 0);
        assert_int_equal(next, at(2026, 11, 26, 3, 0));
        snapshot_verify_policy off = {.mode = VERIFY_OFF};
        assert_int_equal(snapshot_drill_due(&off, &l, dest, 0, now, &id, &slot, &next), 0);
        state_snapshot_list_release(&l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_cron_next_prev),
            cmocka_unit_test(test_due_and_catch_up_once),
            cmocka_unit_test(test_health),
            cmocka_unit_test(test_health_with_drills),
            cmocka_unit_test(test_restore_candidate),
            cmocka_unit_test(test_drill_due),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
