/*
 * The holds on a cluster's steps (reconciler/hold.h), pure: which class
 * each kind of step is, the maintenance windows' arithmetic at their edges
 * (a window spanning midnight, a duration longer than the schedule's
 * interval, windows that overlap, the next start), and the judgement a
 * person reads in `gitcd plan` and `gitcd status`.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "reconciler/hold.h"
#include "util/macro.h"
#include "util/xalloc.h"

/* 2026-11-28T00:00:00Z, a Saturday. */
#define SAT   INT64_C(1795824000000)
#define MIN_  (INT64_C(60) * 1000)
#define HOUR_ (60 * MIN_)
#define DAY_  (24 * HOUR_)

static void windows_of(maintenance_spec *ms, const char *const *sched, const int64_t *dur, size_t n)
{
        *ms = (maintenance_spec){.windows = xcalloc(n, sizeof(maint_window)), .n_windows = n};
        for (size_t i = 0; i < n; i++) {
                ms->windows[i].schedule = xstrdup(sched[i]);
                ms->windows[i].duration_ms = dur[i];
        }
}

static void windows_release(maintenance_spec *ms)
{
        for (size_t i = 0; i < ms->n_windows; i++)
                free(ms->windows[i].schedule);
        free(ms->windows);
}

static void test_classes(void **state)
{
        (void)state;
        struct {
                step_kind kind;
                const char *reason;
                hold_class want;
        } cases[] = {
            {STEP_CONVERGED, NULL, HOLD_SAFETY},
            {STEP_WAIT, REASON_QUORUM_LOST, HOLD_SAFETY},
            {STEP_RENEW_CERTS, REASON_RENEWING_CERTS, HOLD_SAFETY},
            {STEP_RESTART_MEMBER, REASON_UPGRADING, HOLD_DISRUPTIVE},
            {STEP_MOVE_LEADER, REASON_UPGRADING, HOLD_DISRUPTIVE},
            {STEP_MOVE_LEADER, REASON_SCALING_DOWN, HOLD_VOLUNTARY},
            {STEP_ADD_LEARNER, REASON_SCALING_UP, HOLD_VOLUNTARY},
            {STEP_ADD_LEARNER, REASON_REPLACING_MEMBER, HOLD_VOLUNTARY},
            {STEP_REMOVE_MEMBER, REASON_REPLACING_MEMBER, HOLD_VOLUNTARY},
            {STEP_START_MEMBER, REASON_RECOVERING, HOLD_VOLUNTARY},
            {STEP_PROMOTE, REASON_SCALING_UP, HOLD_VOLUNTARY},
            {STEP_DELETE_MEMBER, REASON_SCALING_DOWN, HOLD_VOLUNTARY},
            {STEP_STOP_MEMBER, REASON_PAUSED, HOLD_VOLUNTARY},
            {STEP_START_SEED, REASON_WAITING_FOR_SEED, HOLD_VOLUNTARY},
            {STEP_BOOTSTRAP, REASON_BOOTSTRAPPING, HOLD_VOLUNTARY},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                step s = {.kind = cases[i].kind, .reason = cases[i].reason};
                assert_int_equal(hold_step_class(&s), cases[i].want);
        }
        assert_int_equal(hold_work_class(HOLD_WORK_SNAPSHOT), HOLD_SAFETY);
        assert_int_equal(hold_work_class(HOLD_WORK_RECOVERY), HOLD_VOLUNTARY);
        assert_int_equal(hold_work_class(HOLD_WORK_AUTH), HOLD_VOLUNTARY);
        assert_int_equal(hold_work_class(HOLD_WORK_NOSPACE_DEFRAG), HOLD_VOLUNTARY);
        assert_int_equal(hold_work_class(HOLD_WORK_CA_ROTATION), HOLD_DISRUPTIVE);
        assert_int_equal(hold_work_class(HOLD_WORK_TLS_SWITCH), HOLD_DISRUPTIVE);
        assert_int_equal(hold_work_class(HOLD_WORK_DEFRAG), HOLD_DISRUPTIVE);
}

static void test_window_simple(void **state)
{
        (void)state;
        maintenance_spec ms;
        const char *s[] = {"0 2 * * 6"}; /* Saturdays 02:00 */
        int64_t d[] = {4 * HOUR_};
        windows_of(&ms, s, d, 1);
        int64_t end = 0, next = 0;
        /* before it opens: the next start is today 02:00 */
        assert_int_equal(maint_windows_at(&ms, SAT + HOUR_, &end, &next), 0);
        assert_true(next == SAT + 2 * HOUR_);
        /* the opening minute is inside, the closing one is not */
        assert_int_equal(maint_windows_at(&ms, SAT + 2 * HOUR_, &end, &next), 1);
        assert_true(end == SAT + 6 * HOUR_);
        assert_int_equal(maint_windows_at(&ms, SAT + 6 * HOUR_ - 1, &end, &next), 1);
        assert_int_equal(maint_windows_at(&ms, SAT + 6 * HOUR_, &end, &next), 0);
        assert_true(next == SAT + 7 * DAY_ + 2 * HOUR_);
        windows_release(&ms);

        maintenance_spec none = {0};
        assert_int_equal(maint_windows_at(&none, SAT, &end, &next), -ENOENT);
}

static void test_window_spans_midnight(void **state)
{
        (void)state;
        maintenance_spec ms;
        const char *s[] = {"0 22 * * 5"}; /* Fridays 22:00, for 4h: into Saturday */
        int64_t d[] = {4 * HOUR_};
        windows_of(&ms, s, d, 1);
        int64_t end = 0, next = 0;
        assert_int_equal(maint_windows_at(&ms, SAT + HOUR_, &end, &next), 1);
        assert_true(end == SAT + 2 * HOUR_);
        assert_int_equal(maint_windows_at(&ms, SAT + 2 * HOUR_, &end, &next), 0);
        assert_true(next == SAT + 6 * DAY_ + 22 * HOUR_);
        windows_release(&ms);
}

static void test_window_longer_than_interval(void **state)
{
        (void)state;
        maintenance_spec ms;
        const char *s[] = {"0 * * * *"}; /* every hour, for 90 minutes: always open */
        int64_t d[] = {90 * MIN_};
        windows_of(&ms, s, d, 1);
        int64_t end = 0, next = 0;
        for (int64_t t = SAT; t < SAT + DAY_; t += 7 * MIN_) {
                assert_int_equal(maint_windows_at(&ms, t, &end, &next), 1);
                /* the latest start reaches furthest */
                int64_t start = t - t % HOUR_;
                assert_true(end == start + 90 * MIN_);
        }
        windows_release(&ms);
}

static void test_windows_overlap(void **state)
{
        (void)state;
        maintenance_spec ms;
        /* Saturdays 01:00 for 2h and 02:00 for 3h; Sundays 03:00 for 1h */
        const char *s[] = {"0 1 * * 6", "0 2 * * 6", "0 3 * * 0"};
        int64_t d[] = {2 * HOUR_, 3 * HOUR_, HOUR_};
        windows_of(&ms, s, d, 3);
        int64_t end = 0, next = 0;
        assert_int_equal(maint_windows_at(&ms, SAT + 30 * MIN_, &end, &next), 0);
        assert_true(next == SAT + HOUR_); /* the earliest next start */
        assert_int_equal(maint_windows_at(&ms, SAT + 90 * MIN_, &end, &next), 1);
        assert_true(end == SAT + 3 * HOUR_);
        /* both open: the one that lasts longest says when it closes */
        assert_int_equal(maint_windows_at(&ms, SAT + 150 * MIN_, &end, &next), 1);
        assert_true(end == SAT + 5 * HOUR_);
        assert_int_equal(maint_windows_at(&ms, SAT + 5 * HOUR_, &end, &next), 0);
        assert_true(next == SAT + DAY_ + 3 * HOUR_);
        windows_release(&ms);
}

static void test_judge(void **state)
{
        (void)state;
        etcd_cluster c = {0};
        const char *s[] = {"0 2 1 12 *"}; /* 2026-12-01T02:00Z */
        int64_t d[] = {4 * HOUR_};
        windows_of(&c.maintenance, s, d, 1);
        hold_state hs;
        const char *msg = NULL;

        /* outside the window: disruptive waits, voluntary and safety do not */
        hold_input in = {.c = &c, .now_ms = SAT};
        hold_assess(&in, &hs);
        assert_false(hs.suspended);
        assert_false(hs.in_window);
        assert_null(hold_judge(&hs, HOLD_SAFETY, &msg));
        assert_null(hold_judge(&hs, HOLD_VOLUNTARY, &msg));
        assert_string_equal(hold_judge(&hs, HOLD_DISRUPTIVE, &msg), REASON_MAINTENANCE_WINDOW);
        assert_string_equal(msg, "waits for the window at 2026-12-01T02:00Z");
        hold_state_release(&hs);

        /* a fresh override token lets it run; a spent one does not */
        c.maintenance.override = xstrdup("incident-42");
        hold_assess(&in, &hs);
        assert_true(hs.override_active);
        assert_null(hold_judge(&hs, HOLD_DISRUPTIVE, &msg));
        hold_state_release(&hs);
        in.override_spent_ms = SAT - HOUR_;
        hold_assess(&in, &hs);
        assert_false(hs.override_active);
        assert_non_null(hold_judge(&hs, HOLD_DISRUPTIVE, &msg));
        hold_state_release(&hs);

        /* suspended by a person: every voluntary step waits, the override lifts nothing */
        in = (hold_input){.c = &c,
                          .suspended_by = "alice",
                          .suspended_ms = SAT,
                          .suspend_reason = "incident",
                          .now_ms = SAT + 3 * DAY_ + 3 * HOUR_}; /* inside the window */
        hold_assess(&in, &hs);
        assert_true(hs.in_window);
        assert_null(hold_judge(&hs, HOLD_SAFETY, &msg));
        assert_string_equal(hold_judge(&hs, HOLD_VOLUNTARY, &msg), REASON_SUSPENDED);
        assert_string_equal(msg, "suspended (by alice at 2026-11-28T00:00Z: incident)");
        assert_string_equal(hold_judge(&hs, HOLD_DISRUPTIVE, &msg), REASON_SUSPENDED);
        hold_state_release(&hs);

        /* suspended by the spec */
        c.suspend = true;
        in = (hold_input){.c = &c, .now_ms = SAT};
        hold_assess(&in, &hs);
        assert_string_equal(hold_judge(&hs, HOLD_VOLUNTARY, &msg), REASON_SUSPENDED);
        assert_string_equal(msg, "suspended (by spec)");
        hold_state_release(&hs);

        /* no windows, not suspended: nothing is held */
        c.suspend = false;
        windows_release(&c.maintenance);
        c.maintenance.windows = NULL;
        c.maintenance.n_windows = 0;
        hold_assess(&in, &hs);
        assert_null(hold_judge(&hs, HOLD_DISRUPTIVE, &msg));
        hold_state_release(&hs);
        free(c.maintenance.override);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_classes),
            cmocka_unit_test(test_window_simple),
            cmocka_unit_test(test_window_spans_midnight),
            cmocka_unit_test(test_window_longer_than_interval),
            cmocka_unit_test(test_windows_overlap),
            cmocka_unit_test(test_judge),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
