/*
 * What an idle pass asks of the state store, on the fake world: once a
 * cluster has converged, its passes at the idle cadence write nothing (no
 * write transaction at all) and prepare no statement afresh, yet a change
 * in the observed cluster is recorded by the pass that sees it, and a
 * member that turns unknown is recorded as last seen by the last pass that
 * saw it, not by the last write of that time.
 *
 * state_counters_get() counts every connection of the process; this test
 * runs one reconciler in one thread, so the counts are its passes'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/fake/fixture.h"

#define IDLE_MS (30 * 1000) /* the daemon's default idle interval */

static const fx_config config = {.name = "idle-store"};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

/* Converged, then idle until the records stopped changing. */
static void converge_and_settle(fx *f)
{
        /* the data check every 5 minutes records each verdict (a write it must make): not here */
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  consistency:\n    checkInterval: 24h\n");
        fx_converge(f, NULL);
        for (int i = 0; i < 3; i++) {
                fake_world_advance(f->w, IDLE_MS);
                assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        }
}

static void test_idle_passes_write_nothing(void **state)
{
        fx *f = *state;
        converge_and_settle(f);
        state_counters k0, k1;
        state_counters_get(&k0);
        /* 8 minutes at the idle cadence, across the full pass every 5 minutes (quiet.h) */
        for (int i = 0; i < 16; i++) {
                fake_world_advance(f->w, IDLE_MS);
                assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        }
        state_counters_get(&k1);
        assert_int_equal(k1.transactions - k0.transactions, 0);
        assert_int_equal(k1.writes - k0.writes, 0);
        assert_int_equal(k1.changes - k0.changes, 0);
        assert_int_equal(k1.prepared - k0.prepared, 0);
        assert_true(k1.statements > k0.statements); /* it did read */
}

static void test_a_dead_member_is_recorded_by_the_pass_that_sees_it(void **state)
{
        fx *f = *state;
        converge_and_settle(f);
        fake_world_advance(f->w, IDLE_MS);
        assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        state_counters k0, k1;
        state_counters_get(&k0);
        fake_kill(f->w, "demo-1", false);
        assert_int_not_equal(fx_pass(f).outcome, PASS_CONVERGED);
        state_counters_get(&k1);
        assert_true(k1.writes > k0.writes);
        state_member *m = NULL;
        assert_int_equal(state_member_get(f->db, f->cluster, "demo-1", &m), 0);
        assert_string_not_equal(m->state, "ready");
        state_member_free(m);
        fx_converge(f, NULL);
}

static void test_unknown_member_last_seen_by_the_last_pass(void **state)
{
        fx *f = *state;
        converge_and_settle(f);
        for (int i = 0; i < 6; i++) {
                fake_world_advance(f->w, IDLE_MS);
                assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        }
        int64_t last_seen = f->w->now_ms;
        state_member *m = NULL;
        assert_int_equal(state_member_get(f->db, f->cluster, "demo-1", &m), 0);
        assert_true(m->seen_ms < last_seen); /* not written by the idle passes */
        state_member_free(m);

        fake_proc_find(f->w, "demo-1")->silent = true;
        fake_world_advance(f->w, IDLE_MS);
        _cleanup_(pass_result_release) pass_result res = {0};
        assert_true(reconciler_pass(f->r, f->cluster, &res) < 0);
        assert_int_equal(state_member_get(f->db, f->cluster, "demo-1", &m), 0);
        assert_string_equal(m->state, "unknown");
        assert_string_equal(m->seen_state, "ready");
        assert_int_equal(m->seen_ms, last_seen);
        state_member_free(m);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_idle_passes_write_nothing, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_dead_member_is_recorded_by_the_pass_that_sees_it,
                                            setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_unknown_member_last_seen_by_the_last_pass, setup,
                                            fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
