/*
 * Rolling version changes through reconciler_pass on the fake world
 * (tests/fake/fake.h), with its clock: the order members roll in, the
 * health gates between them (serving the new version, caught up with the
 * leader, healthy for the settle time), a member that does not come back
 * (UpgradeFailed, the others untouched) and the one spec change that rolls
 * it back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/spec.h"
#include "reconciler/reconcile.h"
#include "tests/fake/fixture.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"

static const fx_config config = {.name = "upgrade", .cluster = CLUSTER};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

static void offer_extra(fx *f, const char *version, const char *extra)
{
        fx_offer(f, NULL, "  replicas: 3\n  version: \"%s\"\n%s", version, extra);
}

static void offer(fx *f, const char *version)
{
        offer_extra(f, version, "");
}

/* One pass; a pass that waits, is blocked or failed advances the clock by what it asked for. */
static pass_result pass(fx *f)
{
        pass_result res = fx_pass(f);
        if (res.outcome == PASS_FAILED)
                fx_wait(f, &res);
        return res;
}

static pass_result converge(fx *f)
{
        pass_result res;
        if (fx_converge_n(f, 2000, &res) == PASS_FAILED)
                fx_wait(f, &res);
        return res;
}

static const char *leader_name(fx *f)
{
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->members[i].used && f->w->members[i].id == f->w->leader)
                        return f->w->members[i].name;
        return NULL;
}

static int on_version(fx *f, const char *version)
{
        int n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                n += f->w->procs[i].present && streq(f->w->procs[i].version, version);
        return n;
}

static void bootstrap(fx *f, const char *version)
{
        offer(f, version);
        assert_int_equal(converge(f).outcome, PASS_CONVERGED);
        assert_int_equal(on_version(f, version), 3);
}

/*
 * 3.5.16 → 3.5.30: followers first, the leader last after one leadership
 * move; the next member waits while the one rolled before lags behind the
 * leader's raft index, and goes once it caught up.
 */
static void test_rolling_order_and_gates(void **state)
{
        fx *f = *state;
        f->w->raft_index = 100000;
        bootstrap(f, "3.5.16");
        char leader[FAKE_NAME_MAX];
        snprintf(leader, sizeof(leader), "%s", leader_name(f));
        int moves = f->w->leader_moves;
        offer(f, "3.5.30");

        char order[3][FAKE_NAME_MAX] = {{0}};
        int rolled = 0;
        bool lag_seen = false;
        pass_result res = {.outcome = PASS_PROGRESSED};
        for (int i = 0; i < 4000 && res.outcome != PASS_CONVERGED; i++) {
                res = pass(f);
                if (getenv("DEBUG_UPGRADE"))
                        fprintf(stderr, "pass: %s %s %s\n", pass_outcome_name(res.outcome),
                                res.member, res.message);
                assert_int_not_equal(res.outcome, PASS_FAILED);
                if (res.step == STEP_RESTART_MEMBER && res.outcome == PASS_PROGRESSED) {
                        assert_true(rolled < 3);
                        snprintf(order[rolled++], FAKE_NAME_MAX, "%s", res.member);
                        /* The first member rolled falls behind: the rollout must wait. */
                        if (rolled == 1)
                                fake_proc_find(f->w, res.member)->raft_lag = 5000;
                }
                if (rolled == 1 && strstr(res.message, "to catch up: 5000 raft entries")) {
                        lag_seen = true;
                        /* A long while behind: nobody else rolls meanwhile. */
                        fake_world_advance(f->w, 60 * 1000);
                        res = pass(f);
                        assert_int_equal(rolled, 1);
                        assert_int_equal(on_version(f, "3.5.30"), 1);
                        fake_proc_find(f->w, order[0])->raft_lag = 0;
                }
        }
        assert_int_equal(res.outcome, PASS_CONVERGED);
        assert_true(lag_seen);
        assert_int_equal(rolled, 3);
        assert_int_equal(on_version(f, "3.5.30"), 3);
        /*
         * Followers first, highest ordinal first; the old leader last, with
         * no MoveLeader of gitcd's: etcd hands leadership over inside its
         * graceful stop (the fake elects among the members up).
         */
        assert_string_not_equal(order[0], leader);
        assert_string_not_equal(order[1], leader);
        assert_string_equal(order[2], leader);
        assert_int_equal(f->w->leader_moves - moves, 0);
        assert_int_equal(fx_audit_count(f, "member.move-leader"), 0);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(fx_audit_count(f, "member.restart"), 3);
        assert_int_equal(fx_audit_count(f, "upgrade.failed"), 0);
        /* What etcd reports the members run, for `gitcd status`. */
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->version, "3.5.30");
        state_cluster_free(sc);
}

/*
 * With spec.snapshots, no member moves to a new minor without a snapshot:
 * when it cannot be taken (here: no state folder for it) the rollout is
 * blocked and says why; a patch upgrade needs none.
 */
static void test_snapshot_before_minor(void **state)
{
        fx *f = *state;
        static const char snaps[] = "  snapshots:\n    schedule: \"0 * * * *\"\n"
                                    "    destination:\n      local:\n        path: /nonexistent\n";
        offer_extra(f, "3.4.20", snaps);
        assert_int_equal(converge(f).outcome, PASS_CONVERGED);
        offer_extra(f, "3.4.23", snaps);
        assert_int_equal(converge(f).outcome, PASS_CONVERGED);
        assert_int_equal(on_version(f, "3.4.23"), 3);
        assert_int_equal(fx_audit_count(f, "upgrade.snapshot"), 0);

        offer_extra(f, "3.5.16", snaps);
        pass_result res = {0};
        for (int i = 0; i < 6; i++) /* a few retries, well within the progress deadline */
                res = pass(f);
        assert_true(res.outcome == PASS_BLOCKED || res.outcome == PASS_WAITING);
        assert_non_null(strstr(res.message, "no snapshot before the upgrade to 3.5.16"));
        assert_int_equal(on_version(f, "3.5.16"), 0);
        assert_true(fx_audit_count(f, "upgrade.snapshot") >= 1);
        assert_int_equal(fx_audit_count(f, "member.restart"), 3);
}

/*
 * A member that does not come back on the new version stops the rollout:
 * UpgradeFailed (terminal, audited), the other members untouched and never
 * replaced; setting the old version back is one spec change that restarts
 * the failed member on it (a rollback of a minor, which the policy allows
 * only because the upgrade did not finish).
 */
static void test_failed_member_and_rollback(void **state)
{
        fx *f = *state;
        bootstrap(f, "3.4.23");
        snprintf(f->w->bad_version, sizeof(f->w->bad_version), "3.5.16");
        int starts[FAKE_MAX_MEMBERS];
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                starts[i] = f->w->procs[i].starts;
        int adds = f->w->adds;
        offer(f, "3.5.16");
        pass_result res = converge(f);
        assert_int_equal(res.outcome, PASS_FAILED);
        assert_string_equal(res.reason, "UpgradeFailed");
        assert_non_null(strstr(res.message, "crash-loops on etcd 3.5.16; rollout stopped"));
        assert_non_null(strstr(res.message, "set spec.version back to 3.4.23"));
        assert_int_equal(fx_audit_count(f, "upgrade.failed"), 1);
        /* One member tried 3.5.16; the two others were not restarted at all. */
        assert_int_equal(on_version(f, "3.5.16"), 1);
        assert_int_equal(on_version(f, "3.4.23"), 2);
        int untouched = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present && streq(f->w->procs[i].version, "3.4.23")) {
                        assert_int_equal(f->w->procs[i].starts, starts[i]);
                        untouched++;
                }
        assert_int_equal(untouched, 2);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(f->w->adds, adds); /* the bootstrap's only */
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->terminal_reason, "UpgradeFailed");
        state_cluster_free(sc);
        /* Terminal: another pass does nothing and says so. */
        res = pass(f);
        assert_int_equal(res.outcome, PASS_FAILED);
        assert_int_equal(fx_audit_count(f, "upgrade.failed"), 1);

        /* The rollback: 3.5.16 → 3.4.23 is accepted since two members still run 3.4.23. */
        offer(f, "3.4.23");
        assert_int_equal(fx_audit_count(f, "spec.rejected"), 0);
        res = converge(f);
        assert_int_equal(res.outcome, PASS_CONVERGED);
        assert_int_equal(on_version(f, "3.4.23"), 3);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(f->w->adds, adds);
        assert_int_equal(fake_procs_running(f->w), 3);

        /* Finished on 3.4.23: going to 3.5.16 again works once the build is fixed... */
        f->w->bad_version[0] = '\0';
        offer(f, "3.5.16");
        assert_int_equal(converge(f).outcome, PASS_CONVERGED);
        assert_int_equal(on_version(f, "3.5.16"), 3);
        /* ...and then 3.4.23 is a downgrade again, refused with its reason. */
        offer(f, "3.4.23");
        assert_int_equal(fx_audit_count(f, "spec.rejected"), 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_rolling_order_and_gates, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_failed_member_and_rollback, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_snapshot_before_minor, setup, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
