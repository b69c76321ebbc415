/*
 * etcd's timeouts derived from the peer RTT (reconciler/timeouts.h): the
 * derivation table (etcd's defaults as the floor, 10 ms steps, ten
 * heartbeats per election, etcd's 50 s cap) and the hysteresis (a value
 * in force moves only past a factor of two, never back and forth on a
 * figure that wanders within it).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>

#include "reconciler/timeouts.h"
#include "util/macro.h"

static void test_derive(void **state)
{
        (void)state;
        struct {
                int64_t rtt_us;
                int hb, el;
        } cases[] = {
            {0, 100, 1000},              /* nothing to wait for: etcd's defaults */
            {250, 100, 1000},            /* loopback */
            {100000, 100, 1000},         /* exactly the default heartbeat */
            {100001, 110, 1100},         /* rounded up to 10 ms */
            {153200, 160, 1600},         /* a transatlantic link */
            {250000, 250, 2500},         /* etcd's guide: a cross-region cluster */
            {4999000, 5000, 50000},      /* the cap reached exactly */
            {7000000, 5000, 50000},      /* past the cap: election at etcd's limit */
            {INT64_MAX / 2, 5000, 50000} /* absurd: still the cap, no overflow */
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                int hb = 0, el = 0;
                timeouts_derive(cases[i].rtt_us, &hb, &el);
                if (hb != cases[i].hb || el != cases[i].el)
                        fail_msg("case %zu: %d/%d, not %d/%d", i, hb, el, cases[i].hb, cases[i].el);
                /* etcd's own rules hold for every derived pair */
                assert_true(el >= 5 * hb && el <= TIMEOUTS_MAX_ELECTION_MS);
        }
}

static void test_hysteresis(void **state)
{
        (void)state;
        struct {
                int in_force, derived;
                bool moved;
        } cases[] = {
            {0, 100, false},   /* nothing derived, defaults derived: nothing to do */
            {0, 200, false},   /* twice the default: not past it */
            {0, 210, true},    /* past twice the default */
            {300, 600, false}, /* up to twice stays */
            {300, 610, true},  {300, 150, false}, /* down to half stays */
            {300, 140, true},  {5000, 5000, false},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                if (timeouts_moved(cases[i].in_force, cases[i].derived) != cases[i].moved)
                        fail_msg("case %zu: moved should be %d", i, cases[i].moved);

        /* a measurement wandering between 140 and 290 ms from 250 ms in force never moves it */
        int in_force = 250;
        const int64_t wander[] = {140000, 290000, 180000, 260000, 130000, 300000, 200000};
        for (size_t i = 0; i < ARRAY_SIZE(wander); i++) {
                int hb, el;
                timeouts_derive(wander[i], &hb, &el);
                if (timeouts_moved(in_force, hb))
                        in_force = hb;
        }
        assert_int_equal(in_force, 250);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_derive),
            cmocka_unit_test(test_hysteresis),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
