/*
 * CA rotation (tls.auto.rotateCA) through reconciler_pass on the fake
 * world, whose target models the CA folders by generation (fake_world
 * ca_model). What an operator would watch:
 *  - a new token rolls the cluster through the three phases in order:
 *    every member restarted once to trust old+new, every leaf reissued from
 *    the new CA with no restart, every member restarted once more onto the
 *    new CA alone; never a member started trusting less than a present
 *    leaf needs, never a leaf issued from a CA a running member does not
 *    trust;
 *  - the same token read again (another pass, a gitcd restart) rotates
 *    nothing;
 *  - gitcd killed at each phase boundary, and between a reissue and its
 *    record, resumes the phase and finishes with the same result;
 *  - a token present when the cluster is created rotates nothing;
 *  - a CA with less than a year left is rotated by itself, once;
 *  - phase 2 reissues every member's leaves in the pass that ends phase 1
 *    (every member already trusts both CAs) and phase 3 begins in the pass
 *    after it, with no restart in between; a reissue that fails leaves the members done
 *    before it recorded, and the next pass goes on from there;
 *  - gitcd closes its etcd connections before each restart (etcd's graceful
 *    stop waits for idle HTTP/2 connections to close).
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

#include "reconciler/reconcile.h"
#include "state/carotate.h"
#include "tests/fake/fixture.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"

static void prepare(fx *f)
{
        f->w->ca_model = true;
}

static const fx_config config = {.name = "carotate", .cluster = CLUSTER, .prepare = prepare};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

static void offer(fx *f, const char *token)
{
        _cleanup_free_ char *rot = token ? xasprintf("\n      rotateCA: \"%s\"", token) : NULL;
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n"
                 "  progressDeadlineSeconds: 3600\n"
                 "  tls:\n    provider: auto\n"
                 "    client:\n      enabled: true\n"
                 "    peer:\n      enabled: true\n"
                 "    auto:\n      validityDays: 90%s\n",
                 rot ? rot : "");
}

/* Every present member: leaf from generation gen, trusting it alone, started `starts` times. */
static void assert_members(fx *f, int gen, int starts)
{
        char want[16];
        snprintf(want, sizeof(want), "%d", gen);
        int n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                const fake_proc *p = &f->w->procs[i];
                if (!p->present)
                        continue;
                n++;
                assert_true(p->running);
                assert_int_equal(p->cert_ca, gen);
                assert_string_equal(p->trusts, want);
                assert_int_equal(p->starts, starts);
        }
        assert_int_equal(n, 3);
        assert_int_equal(f->w->ca_signer, gen);
        assert_int_equal(f->w->ca_next, 0);
        assert_int_equal(f->w->ca_old, 0);
        assert_int_equal(f->w->ca_violations, 0);
}

static bool rotation_running(fx *f)
{
        state_ca_rotation *rot = NULL;
        int k = state_ca_rotation_running(f->db, CLUSTER, &rot);
        state_ca_rotation_free(rot);
        assert_true(k == 0 || k == -ENOENT);
        return k == 0;
}

static void test_phases_in_order_once_per_token(void **state)
{
        fx *f = *state;
        offer(f, NULL);
        fx_converge(f, NULL);
        assert_members(f, 1, 1);

        offer(f, "r1");
        fx_converge(f, NULL);
        assert_members(f, 2, 3); /* restarted in phases 1 and 3 only */
        assert_int_equal(f->w->ca_reissues, 3);
        assert_int_equal(fx_audit_count(f, "member.restart"), 6);
        /* Phase 1 started, 3 members and the shared leaves reissued, 3 phases done, 2 begun. */
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 1 + 4 + 3 + 2);
        assert_false(rotation_running(f));
        assert_int_equal(state_ca_rotation_token_used(f->db, CLUSTER, "r1"), 1);

        /* The same token again, and after a restart of gitcd: nothing. */
        pass_result res;
        assert_int_equal(fx_converge_n(f, 3, &res), PASS_CONVERGED);
        fx_close(f);
        fx_open(f);
        fx_converge(f, NULL);
        assert_members(f, 2, 3);
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 10);

        /* A new token rotates again. */
        offer(f, "r2");
        fx_converge(f, NULL);
        assert_members(f, 3, 5);
}

/* The running rotation's phase (0: none) and, when asked, the members it is done with. */
static int rotation_phase(fx *f, char **ret_done)
{
        state_ca_rotation *rot = NULL;
        int k = state_ca_rotation_running(f->db, CLUSTER, &rot);
        assert_true(k == 0 || k == -ENOENT);
        int phase = k == 0 ? rot->phase : 0;
        if (ret_done)
                *ret_done = k == 0 ? xstrdup_null(rot->members_done) : NULL;
        state_ca_rotation_free(rot);
        return phase;
}

/* Every start of every member so far. */
static int all_starts(fx *f)
{
        int n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                n += f->w->procs[i].present ? f->w->procs[i].starts : 0;
        return n;
}

/*
 * Pass while the rotation is in phase 1 (its restarts); the pass that ends
 * it is returned, with the starts of every member before it.
 */
static pass_result pass_through_phase_1(fx *f, int *ret_starts)
{
        pass_result res = {0};
        for (int i = 0; i < 200 && rotation_phase(f, NULL) == 1; i++) {
                *ret_starts = all_starts(f);
                res = fx_pass(f);
        }
        assert_int_not_equal(rotation_phase(f, NULL), 1);
        return res;
}

static void test_reissue_in_one_pass(void **state)
{
        fx *f = *state;
        offer(f, NULL);
        fx_converge(f, NULL);
        int disconnects = f->w->disconnects;
        offer(f, "r1");
        assert_int_equal(fx_pass(f).outcome, PASS_PROGRESSED); /* phase 1's first restart */
        assert_int_equal(rotation_phase(f, NULL), 1);

        /* The pass that ends phase 1 runs phase 2 too: phase 3 comes next. */
        int starts = 0;
        pass_result res = pass_through_phase_1(f, &starts);
        assert_int_equal(res.outcome, PASS_PROGRESSED); /* phase 3 may begin at once */
        assert_non_null(strstr(res.message, "phases 1/3 (trust old+new CA) and 2/3"));
        assert_int_equal(f->w->ca_reissues, 3);
        assert_int_equal(rotation_phase(f, NULL), 3);
        assert_int_equal(all_starts(f), starts); /* nothing restarted for the reissue */
        assert_int_equal(f->w->ca_violations, 0);
        /* phase 1 started and done, phase 2 started, 3 members and the shared leaves
         * reissued, phase 2 done, phase 3 started */
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 3 + 4 + 2);

        fx_converge(f, NULL);
        assert_members(f, 2, 3);
        /* the connections were closed before each of the six restarts */
        assert_true(f->w->disconnects - disconnects >= 6);
}

static void test_reissue_failure_resumes(void **state)
{
        fx *f = *state;
        offer(f, NULL);
        fx_converge(f, NULL);
        offer(f, "r1");
        f->w->fail_renew = "demo-1";
        assert_int_equal(fx_pass(f).outcome, PASS_PROGRESSED); /* phase 1's first restart */
        assert_int_equal(rotation_phase(f, NULL), 1);

        /* phase 1 ends, phase 2 begins in the same pass and stops at demo-1 */
        int starts = 0;
        pass_result res = pass_through_phase_1(f, &starts);
        assert_int_equal(res.outcome, PASS_WAITING);
        assert_non_null(strstr(res.message, "cannot reissue the certificates of demo-1"));
        _cleanup_free_ char *done = NULL;
        assert_int_equal(rotation_phase(f, &done), 2);
        assert_string_equal(done, "demo-0");
        assert_int_equal(f->w->ca_reissues, 1);

        (void)fx_pass(f); /* demo-0 is not reissued again */
        assert_int_equal(f->w->ca_reissues, 3);
        assert_int_equal(rotation_phase(f, NULL), 3);
        fx_converge(f, NULL);
        assert_members(f, 2, 3);
        assert_false(rotation_running(f));
}

static void test_killed_at_each_phase(void **state)
{
        fx *f = *state;
        offer(f, NULL);
        fx_converge(f, NULL);
        static const char *const points[] = {"ca-rotate.phase-1", "ca-rotate.phase-2",
                                             "ca-rotate.after-reissue", "ca-rotate.phase-3",
                                             "ca-rotate.phase-0"};
        for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
                _cleanup_free_ char *token = xasprintf("t%zu", i);
                offer(f, token);
                fx_run_until_killed(f, points[i]);
                fx_converge(f, NULL);
                /* Each rotation: one more CA generation, two restarts per member. */
                assert_members(f, (int)i + 2, 1 + 2 * ((int)i + 1));
                assert_false(rotation_running(f));
        }
}

static void test_token_at_creation_rotates_nothing(void **state)
{
        fx *f = *state;
        offer(f, "from-the-start");
        fx_converge(f, NULL);
        assert_members(f, 1, 1);
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 0);
        assert_int_equal(state_ca_rotation_token_used(f->db, CLUSTER, "from-the-start"), 1);
}

#define DAY_MS (24LL * 3600 * 1000)

/* A CA with less than a year left is replaced by the same three phases, by itself, once. */
static void test_ca_near_its_end_rotates_by_itself(void **state)
{
        fx *f = *state;
        f->w->ca_not_after_ms = f->w->now_ms + 3650 * DAY_MS;
        offer(f, NULL);
        fx_converge(f, NULL);
        fx_converge(f, NULL);
        assert_members(f, 1, 1); /* years left: nothing */
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 0);

        f->w->ca_not_after_ms = f->w->now_ms + 200 * DAY_MS;
        fx_converge(f, NULL); /* the pass that records the CA's new date */
        fx_converge(f, NULL);
        assert_false(rotation_running(f));
        assert_members(f, 2, 3);
        assert_int_equal(state_ca_rotation_token_used(f->db, CLUSTER, "ca-expiry-CA1"), 1);
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 10);
        assert_true(f->w->ca_not_after_ms > f->w->now_ms + 3000 * DAY_MS);

        /* the new CA has ten years: nothing more, across a restart of gitcd too */
        fx_converge(f, NULL);
        fx_close(f);
        fx_open(f);
        fx_converge(f, NULL);
        assert_members(f, 2, 3);
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 10);
}

/*
 * A CA taken over with the cluster (adopted from kubeadm) is never rotated: neither by a
 * rotateCA token nor near its end; the refusal is audited once per reason.
 */
static void test_taken_over_ca_is_not_rotated(void **state)
{
        fx *f = *state;
        f->w->ca_imported = true;
        f->w->ca_not_after_ms = f->w->now_ms + 3650 * DAY_MS;
        offer(f, NULL);
        fx_converge(f, NULL);
        offer(f, "r1");
        fx_converge(f, NULL);
        fx_converge(f, NULL);
        assert_false(rotation_running(f));
        assert_members(f, 1, 1);
        assert_int_equal(state_ca_rotation_token_used(f->db, CLUSTER, "r1"), 0);
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 1);

        f->w->ca_not_after_ms = f->w->now_ms + 200 * DAY_MS;
        offer(f, NULL);
        fx_converge(f, NULL);
        fx_converge(f, NULL);
        assert_false(rotation_running(f));
        assert_members(f, 1, 1);
        assert_int_equal(fx_audit_count(f, "tls.ca-rotate"), 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_phases_in_order_once_per_token, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_killed_at_each_phase, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_reissue_in_one_pass, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_reissue_failure_resumes, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_token_at_creation_rotates_nothing, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_taken_over_ca_is_not_rotated, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_ca_near_its_end_rotates_by_itself, setup,
                                            fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
