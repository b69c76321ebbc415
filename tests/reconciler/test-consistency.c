/*
 * Members proven to hold the same data, through whole reconciler passes on
 * the fake world (tests/fake/fake.h, whose members answer HashKV with the
 * cluster's hash unless a test garbles one's data; a joining member copies
 * the leader's): the periodic check, a minority found and the cluster
 * frozen (a scale-up held, a crashed member still restarted, audited once
 * per held step), refusals of a repair, the repair that replaces the
 * minority from the majority and lifts the freeze, with gitcd restarted in
 * the middle; no majority; a leader in the minority never copied; a
 * crash-looping member never replaced on the word of a minority; etcd's
 * CORRUPT alarm; a spec.repair token acted on once; gitcd killed at each
 * point of a repair.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reconciler/consistency.h"
#include "reconciler/reconcile.h"
#include "state/consistency.h"
#include "tests/fake/fixture.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"
#define MINUTE  (60 * 1000)

static void prepare(fx *f)
{
        f->w->now_ms = 1700000000000;
}

static const fx_config config = {.name = "consistency", .cluster = CLUSTER, .prepare = prepare};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

static void offer(fx *f, int replicas, const char *extra)
{
        fx_offer(f, NULL, "  replicas: %d\n  version: 3.5.16\n%s", replicas, extra ? extra : "");
}

static state_consistency *row(fx *f)
{
        state_consistency *v = NULL;
        assert_int_equal(state_consistency_get(f->db, CLUSTER, &v), 0);
        return v;
}

static const state_condition *condition(const state_cluster *sc, const char *type)
{
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, type))
                        return &sc->conditions[i];
        return NULL;
}

static void assert_condition(fx *f, const char *type, const char *status, const char *reason)
{
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        const state_condition *c = condition(sc, type);
        if (!c || !streq(c->status, status) || (reason && !streq(c->reason, reason)))
                fail_msg("%s: %s %s (%s), not %s %s", type, c ? c->status : "absent",
                         c ? c->reason : "", c ? c->message : "", status, reason ? reason : "");
        state_cluster_free(sc);
}

static char *phase(fx *f)
{
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        char *p = xstrdup(sc->phase);
        state_cluster_free(sc);
        return p;
}

/* Passes until one ends blocked by the freeze (asserted within max passes). */
static pass_result until_frozen(fx *f, int max)
{
        pass_result res = {0};
        for (int i = 0; i < max; i++) {
                res = fx_pass(f);
                if (res.frozen)
                        return res;
        }
        fail_msg("not frozen: %s %s", pass_outcome_name(res.outcome), res.message);
        return res;
}

static int64_t repair(fx *f, const char *member)
{
        int64_t id = 0;
        assert_int_equal(consistency_repair_request(f->db, CLUSTER, member, "ops@host (test)",
                                                    f->w->now_ms, &id),
                         0);
        return id;
}

static state_repair *last_repair(fx *f)
{
        state_repair_list l = {0};
        assert_int_equal(state_repair_list_for(f->db, CLUSTER, 1, &l), 0);
        assert_int_equal(l.n, 1);
        state_repair *r = l.items[0];
        free(l.items);
        return r;
}

static bool member_exists(fx *f, const char *name)
{
        return fake_etcd_find(f->w, name) != NULL;
}

/* A converged cluster is compared at once, then every checkInterval: one HashKV per member. */
static void test_periodic_check(void **state)
{
        fx *f = *state;
        offer(f, 3, "  consistency: {checkInterval: 5m}\n");
        fx_converge(f, NULL);
        state_consistency *v = row(f);
        assert_string_equal(v->verdict, "agree");
        assert_true(v->revision > 0);
        assert_null(v->minority);
        state_consistency_free(v);
        assert_condition(f, "DataConsistent", "True", "Agree");
        int hashes = f->w->hashes;
        assert_true(hashes >= 3);
        fake_world_advance(f->w, MINUTE);
        fx_converge(f, NULL);
        assert_int_equal(f->w->hashes, hashes); /* not due yet */
        fake_world_advance(f->w, 5 * MINUTE);
        pass_result res;
        fx_converge(f, &res);
        assert_int_equal(f->w->hashes, hashes + 3);
        /* a converged pass comes back in time for the next check */
        assert_true(res.poll_ms > 0 && res.poll_ms <= 5 * MINUTE);
        assert_int_equal(fx_audit_count(f, "consistency.diverged"), 0);
}

static void test_minority_frozen_and_repaired(void **state)
{
        fx *f = *state;
        offer(f, 3, "  consistency: {checkInterval: 1m}\n");
        fx_converge(f, NULL);
        fake_proc_find(f->w, "demo-1")->garble = 0x51;
        fake_world_advance(f->w, 2 * MINUTE);
        pass_result res = until_frozen(f, 5);
        assert_int_equal(res.outcome, PASS_BLOCKED);
        assert_non_null(strstr(res.message, "data of demo-1 differs from demo-0, demo-2"));
        assert_non_null(strstr(res.message, "gitcd repair default/demo --replace demo-1"));
        state_consistency *v = row(f);
        assert_string_equal(v->verdict, "minority");
        assert_string_equal(v->minority, "demo-1");
        assert_string_equal(v->frozen_cause, "hashes");
        assert_true(v->frozen_ms > 0);
        state_consistency_free(v);
        assert_condition(f, "DataConsistent", "False", "Mismatch");
        assert_condition(f, "Degraded", "True", "DataInconsistent");
        _cleanup_free_ char *ph = phase(f);
        assert_string_equal(ph, "Frozen");
        assert_int_equal(fx_audit_count(f, "consistency.diverged"), 1);
        assert_int_equal(fx_audit_count(f, "consistency.frozen"), 1);

        /* a scale-up committed meanwhile waits, audited once */
        offer(f, 4, "  consistency: {checkInterval: 1m}\n");
        for (int i = 0; i < 5; i++) {
                res = fx_pass(f);
                assert_int_equal(res.outcome, PASS_BLOCKED);
        }
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);
        assert_int_equal(fx_audit_count(f, "consistency.held"), 1);
        assert_condition(f, "Progressing", "False", "Frozen");
        /* still compared on its interval, audited only when the result changes */
        fake_world_advance(f->w, 2 * MINUTE);
        (void)fx_pass(f);
        assert_int_equal(fx_audit_count(f, "consistency.diverged"), 1);

        /* a crashed member is not a person's choice: it is started again on its data */
        fake_kill(f->w, "demo-2", false);
        f->w->procs[2].crashed = false; /* the target does not restart it by itself */
        fake_proc_find(f->w, "demo-2")->stopped = true;
        int starts = fake_proc_find(f->w, "demo-2")->starts;
        for (int i = 0; i < 10 && !fake_proc_find(f->w, "demo-2")->running; i++)
                (void)fx_pass(f);
        assert_true(fake_proc_find(f->w, "demo-2")->running);
        assert_true(fake_proc_find(f->w, "demo-2")->starts > starts);

        /* a repair that names a member of the majority is refused */
        repair(f, "demo-0");
        (void)fx_pass(f);
        state_repair *r = last_repair(f);
        assert_string_equal(r->result, "refused");
        assert_non_null(strstr(r->error, "not in the minority (demo-1)"));
        state_repair_free(r);
        assert_int_equal(fx_audit_count(f, "repair.refused"), 1);

        /* the repair: demo-1 replaced from the majority, gitcd restarted midway */
        repair(f, "demo-1");
        for (int i = 0; i < 200 && member_exists(f, "demo-1"); i++)
                (void)fx_pass(f);
        assert_false(member_exists(f, "demo-1"));
        fx_close(f);
        fx_open(f);
        fx_converge(f, &res);
        assert_false(res.frozen);
        r = last_repair(f);
        assert_string_equal(r->result, "succeeded");
        assert_string_equal(r->replacement, "demo-3");
        state_repair_free(r);
        /* then the scale-up that waited: four members, none with the minority's data */
        assert_int_equal(fake_etcd_count(f->w, NULL), 4);
        assert_true(member_exists(f, "demo-3") && member_exists(f, "demo-4"));
        assert_int_equal(f->w->garbled_copies, 0);
        v = row(f);
        assert_int_equal(v->frozen_ms, 0);
        assert_string_equal(v->verdict, "agree");
        state_consistency_free(v);
        assert_condition(f, "DataConsistent", "True", "Agree");
        assert_condition(f, "Degraded", "False", NULL);
        assert_int_equal(fx_audit_count(f, "consistency.unfrozen"), 1);
        assert_int_equal(fx_audit_count(f, "repair.succeeded"), 1);
        assert_int_equal(fx_audit_count_by(f, "repair.requested", "ops@host (test)"), 2);
        fx_assert_no_pending_ops(f);
}

/* 1-1 of two members: no side is trusted; a replacement is refused. */
static void test_no_majority(void **state)
{
        fx *f = *state;
        offer(f, 2, "  consistency: {checkInterval: 1m}\n");
        fx_converge(f, NULL);
        fake_proc_find(f->w, "demo-0")->garble = 7;
        fake_world_advance(f->w, 2 * MINUTE);
        pass_result res = until_frozen(f, 5);
        assert_non_null(strstr(res.message, "no side holds a quorum"));
        assert_condition(f, "DataConsistent", "False", "NoMajority");
        repair(f, "demo-0");
        (void)fx_pass(f);
        state_repair *r = last_repair(f);
        assert_string_equal(r->result, "refused");
        assert_non_null(strstr(r->error, "no side holds a quorum"));
        state_repair_free(r);
        assert_int_equal(f->w->removes, 0);
        /* a recheck that still finds them differing fails, and the freeze stays */
        repair(f, NULL);
        for (int i = 0; i < 5; i++)
                (void)fx_pass(f);
        r = last_repair(f);
        assert_string_equal(r->result, "failed");
        state_repair_free(r);
        res = fx_pass(f);
        assert_true(res.frozen);
}

/* The leader holds the minority's data: leadership moves before anyone copies. */
static void test_leader_in_minority(void **state)
{
        fx *f = *state;
        offer(f, 3, "  consistency: {checkInterval: 1m}\n");
        fx_converge(f, NULL);
        fake_proc *lead = NULL;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present && f->w->procs[i].etcd_id == f->w->leader)
                        lead = &f->w->procs[i];
        assert_non_null(lead);
        _cleanup_free_ char *name = xstrdup(lead->name);
        lead->garble = 0xdead;
        fake_world_advance(f->w, 2 * MINUTE);
        (void)until_frozen(f, 5);
        repair(f, name);
        pass_result res;
        fx_converge(f, &res);
        assert_false(member_exists(f, name));
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);
        assert_int_equal(f->w->garbled_copies, 0);
        assert_true(f->w->leader_moves >= 1);
        assert_condition(f, "DataConsistent", "True", "Agree");
}

/*
 * A member that crash-loops is replaced only once the running members
 * agree (a new member copies the leader's data); when they do not, the
 * cluster freezes and nothing is removed.
 */
static void test_replacement_needs_proof(void **state)
{
        fx *f = *state;
        offer(f, 3, "  consistency: {checkInterval: 1h}\n");
        fx_converge(f, NULL);
        /* the running two agree: demo-2 is replaced as before, after a check */
        int hashes = f->w->hashes;
        fake_kill(f->w, "demo-2", true);
        fx_converge(f, NULL);
        assert_false(member_exists(f, "demo-2"));
        assert_true(f->w->hashes > hashes);
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);

        /* the running two differ: a crash-looping member is never removed on their word */
        fake_world_advance(f->w, 2 * MINUTE);
        fake_proc_find(f->w, "demo-0")->garble = 3;
        int removes = f->w->removes;
        fake_kill(f->w, "demo-1", true);
        pass_result res = until_frozen(f, 200);
        assert_non_null(strstr(res.message, "no side holds a quorum"));
        assert_int_equal(f->w->removes, removes);
        assert_true(member_exists(f, "demo-1"));
        for (int i = 0; i < 20; i++)
                (void)fx_pass(f);
        assert_int_equal(f->w->removes, removes);
}

/* etcd's CORRUPT alarm (as maintenance/ records it) freezes; a recheck that agrees lifts it. */
static void test_corrupt_alarm(void **state)
{
        fx *f = *state;
        offer(f, 3, "  consistency: {checkInterval: 1h}\n");
        fx_converge(f, NULL);
        f->w->corrupt_alarm = true;
        fake_world_advance(f->w, 1000);
        assert_int_equal(state_cluster_set_condition(f->db, CLUSTER, "CorruptAlarm", "True",
                                                     "AlarmRaised", "CORRUPT on member 0",
                                                     f->w->now_ms),
                         1);
        pass_result res = until_frozen(f, 3);
        assert_non_null(strstr(res.message, "etcd raised a CORRUPT alarm"));
        assert_non_null(strstr(res.message, "gitcd repair default/demo --recheck"));
        assert_condition(f, "DataConsistent", "False", "CorruptAlarm");
        /* no minority known: a replacement is refused */
        repair(f, "demo-1");
        (void)fx_pass(f);
        state_repair *r = last_repair(f);
        assert_string_equal(r->result, "refused");
        state_repair_free(r);
        repair(f, NULL);
        fx_converge(f, &res);
        r = last_repair(f);
        assert_string_equal(r->result, "succeeded");
        state_repair_free(r);
        assert_false(f->w->corrupt_alarm); /* disarmed at the end of the person's repair */
        assert_int_equal(fx_audit_count(f, "alarm.disarmed"), 1);
        /* the condition maintenance keeps still says True until it looks again: no new freeze */
        for (int i = 0; i < 3; i++)
                assert_false(fx_pass(f).frozen);
        assert_condition(f, "DataConsistent", "True", "Agree");
}

/* spec.repair: the commit's token acts once, even read again after a restart. */
static void test_spec_repair_token(void **state)
{
        fx *f = *state;
        offer(f, 3, "  consistency: {checkInterval: 1m}\n");
        fx_converge(f, NULL);
        fake_proc_find(f->w, "demo-2")->garble = 9;
        fake_world_advance(f->w, 2 * MINUTE);
        (void)until_frozen(f, 5);
        offer(f, 3,
              "  consistency: {checkInterval: 1m}\n  repair: {replace: demo-2, token: t-1}\n");
        fx_converge(f, NULL);
        assert_false(member_exists(f, "demo-2"));
        assert_int_equal(fx_audit_count(f, "repair.succeeded"), 1);
        fx_close(f);
        fx_open(f);
        fx_converge(f, NULL);
        state_repair_list l = {0};
        assert_int_equal(state_repair_list_for(f->db, CLUSTER, 0, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->token, "t-1");
        state_repair_list_release(&l);
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);
}

/* gitcd killed at each point of a repair finishes it on its next run. */
static void test_repair_crash_points(void **state)
{
        (void)state;
        static const struct {
                const char *failpoint;
                bool alarm;
        } points[] = {
            {"repair.after-start", false},     {"repair.after-replacement", false},
            {"add-learner.after-etcd", false}, {"repair.after-unfreeze", false},
            {"repair.after-disarm", true},
        };
        for (size_t i = 0; i < ARRAY_SIZE(points); i++) {
                void *st = NULL;
                setup(&st);
                fx *f = st;
                offer(f, 3, "  consistency: {checkInterval: 1m}\n");
                fx_converge(f, NULL);
                if (points[i].alarm) {
                        f->w->corrupt_alarm = true;
                        fake_world_advance(f->w, 1000);
                        assert_int_equal(state_cluster_set_condition(f->db, CLUSTER, "CorruptAlarm",
                                                                     "True", "AlarmRaised", "x",
                                                                     f->w->now_ms),
                                         1);
                        fake_proc_find(f->w, "demo-1")->garble = 5;
                } else {
                        fake_proc_find(f->w, "demo-1")->garble = 5;
                        fake_world_advance(f->w, 2 * MINUTE);
                }
                (void)until_frozen(f, 5);
                fake_world_advance(f->w, 2 * MINUTE); /* a check that names the minority */
                (void)fx_pass(f);
                repair(f, "demo-1");
                fx_run_until_killed(f, points[i].failpoint);
                pass_result res;
                fx_converge(f, &res);
                assert_false(res.frozen);
                state_repair *r = last_repair(f);
                assert_string_equal(r->result, "succeeded");
                state_repair_free(r);
                assert_false(member_exists(f, "demo-1"));
                assert_int_equal(fake_etcd_count(f->w, NULL), 3);
                assert_int_equal(f->w->garbled_copies, 0);
                assert_false(f->w->corrupt_alarm);
                assert_int_equal(fx_audit_count(f, "repair.succeeded"), 1);
                assert_int_equal(fx_audit_count(f, "consistency.unfrozen"), 1);
                fx_assert_no_pending_ops(f);
                fx_teardown(&st);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_periodic_check, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_minority_frozen_and_repaired, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_no_majority, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_leader_in_minority, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_replacement_needs_proof, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_corrupt_alarm, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_spec_repair_token, setup, fx_teardown),
            cmocka_unit_test(test_repair_crash_points),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
