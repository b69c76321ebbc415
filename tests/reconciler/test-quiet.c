/*
 * Quiet passes (reconciler/quiet.h) on the fake world: once a cluster has
 * converged, its idle passes leave the upkeep out (the target's shared
 * objects are not synced again), yet every pass still observes the world,
 * so a member that dies, a new spec, or the time limit make the next pass
 * a full one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "reconciler/quiet.h"
#include "tests/fake/fixture.h"

static const fx_config config = {.name = "quiet"};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

static void offer(fx *f, int replicas)
{
        fx_offer(f, NULL, "  replicas: %d\n  version: \"3.5.16\"\n", replicas);
}

/* Converged, then idle until the records stopped changing: the next passes are quiet. */
static void converge_and_settle(fx *f, int replicas)
{
        offer(f, replicas);
        fx_converge(f, NULL);
        for (int i = 0; i < 3; i++)
                assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
}

static void test_idle_passes_skip_upkeep_but_notice_a_dead_member(void **state)
{
        fx *f = *state;
        converge_and_settle(f, 3);
        int syncs = f->w->shared_syncs;
        for (int i = 0; i < 5; i++)
                assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->shared_syncs, syncs);

        /* A member dies: the very next pass sees it and acts. */
        fake_kill(f->w, "demo-1", false);
        pass_result res = fx_pass(f);
        assert_int_not_equal(res.outcome, PASS_CONVERGED);
        fx_converge(f, NULL);
        assert_int_equal(fake_procs_running(f->w), 3);
        assert_int_equal(fake_proc_find(f->w, "demo-1")->starts, 2);
        assert_true(f->w->shared_syncs > syncs);
}

static void test_a_new_spec_is_never_quiet(void **state)
{
        fx *f = *state;
        converge_and_settle(f, 3);
        int syncs = f->w->shared_syncs;
        offer(f, 4);
        assert_int_not_equal(fx_pass(f).outcome, PASS_CONVERGED);
        fx_converge(f, NULL);
        size_t learners = 0;
        assert_int_equal(fake_etcd_count(f->w, &learners), 4);
        assert_int_equal(learners, 0);
        assert_true(f->w->shared_syncs > syncs);
}

static void test_a_full_pass_at_least_every_few_minutes(void **state)
{
        fx *f = *state;
        converge_and_settle(f, 3);
        int syncs = f->w->shared_syncs;
        assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->shared_syncs, syncs);
        fake_world_advance(f->w, QUIET_FULL_PASS_MS);
        assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->shared_syncs, syncs + 1);
        assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->shared_syncs, syncs + 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_idle_passes_skip_upkeep_but_notice_a_dead_member,
                                            setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_new_spec_is_never_quiet, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_full_pass_at_least_every_few_minutes, setup,
                                            fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
