/*
 * The holds on a cluster's steps (reconciler/hold.h) through whole passes
 * on the fake world, with its clock (1970-01-01T00:16:40Z at the start, a
 * Thursday):
 *  - suspended by the spec or by a person (state store): a spec change is
 *    taken in but no voluntary step runs (no learner added, no member
 *    restarted or replaced), the pass ends blocked with reason Suspended,
 *    audited once and not every pass; resumed, the change is acted on;
 *  - maintenance windows: an upgrade outside its window waits, and the
 *    pass's requeue time is the window's start; a lost member is replaced
 *    at once; inside the window the roll starts, the window closing mid-roll
 *    lets the member in flight finish and holds the next until the next
 *    window;
 *  - an override token runs the held upgrade now, is spent when the
 *    cluster converges (audited maintenance.override) and then does nothing.
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

#include "reconciler/hold.h"
#include "reconciler/reconcile.h"
#include "state/carotate.h"
#include "state/holds.h"
#include "tests/fake/fixture.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"
#define MIN_    (INT64_C(60) * 1000)
#define HOUR_   (60 * MIN_)
#define DAY_    (24 * HOUR_)

static const fx_config config = {.name = "holds", .cluster = CLUSTER};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

/* One pass without advancing the clock on a hold; the message is the fixture's. */
static pass_result pass_once(fx *f)
{
        pass_result_release(&f->last);
        pass_result res = {0};
        assert_int_equal(reconciler_pass(f->r, f->cluster, &res), 0);
        if ((res.outcome == PASS_WAITING || res.outcome == PASS_BLOCKED) && !res.held)
                fx_wait(f, &res);
        f->last = res;
        return res;
}

/* Passes until the cluster converged or a step is held (at most n). */
static pass_result settle(fx *f, int n)
{
        pass_result res = {0};
        for (int i = 0; i < n; i++) {
                res = pass_once(f);
                if (res.outcome == PASS_CONVERGED || res.held)
                        break;
                assert_int_not_equal(res.outcome, PASS_FAILED);
        }
        return res;
}

static int on_version(fx *f, const char *version)
{
        int n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                n += f->w->procs[i].present && streq(f->w->procs[i].version, version);
        return n;
}

static void test_suspended_by_spec(void **state)
{
        fx *f = *state;
        fx_offer(f, NULL, "  replicas: 1\n  version: \"3.5.16\"\n");
        fx_converge(f, NULL);
        int adds = f->w->adds;

        /* 1 → 3 while suspended: taken in, not acted on, however many passes */
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n  suspend: true\n");
        pass_result res = settle(f, 50);
        assert_true(res.held);
        assert_int_equal(res.outcome, PASS_BLOCKED);
        assert_string_equal(res.reason, REASON_SUSPENDED);
        assert_non_null(strstr(res.message, "suspended (by spec)"));
        for (int i = 0; i < 20; i++) {
                fake_world_advance(f->w, 30 * 1000);
                res = pass_once(f);
                assert_true(res.held);
        }
        assert_int_equal(f->w->adds, adds);
        assert_int_equal(fake_etcd_count(f->w, NULL), 1);
        assert_int_equal(fx_audit_count(f, "cluster.held"), 1);
        /* no progress deadline runs out while held */
        fake_world_advance(f->w, 3600 * 1000);
        res = pass_once(f);
        assert_true(res.held);

        /* a member that dies while suspended is not started by gitcd either */
        fake_proc *p = &f->w->procs[0];
        int starts = fx_audit_count(f, "member.start");
        fake_kill(f->w, p->name, true);
        for (int i = 0; i < 20; i++)
                (void)pass_once(f);
        assert_int_equal(fx_audit_count(f, "member.start"), starts);
        fake_heal(f->w, p->name);

        /* resumed by the next commit: acted on */
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n");
        fx_converge(f, NULL);
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);
        assert_int_equal(fx_audit_count(f, "cluster.released"), 1);
        assert_int_equal(fx_audit_count(f, "cluster.held"), 1);
}

static void test_suspended_by_person(void **state)
{
        fx *f = *state;
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n");
        fx_converge(f, NULL);
        assert_int_equal(state_hold_suspend(f->db, CLUSTER, "alice@ops (gitcd suspend)",
                                            "incident 7", f->w->now_ms),
                         1);
        /* nothing to do: converged, nothing held */
        pass_result res = settle(f, 20);
        assert_int_equal(res.outcome, PASS_CONVERGED);
        assert_int_equal(fx_audit_count(f, "cluster.held"), 0);

        int starts = fx_total_starts(f);
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.30\"\n");
        res = settle(f, 50);
        assert_true(res.held);
        assert_string_equal(res.reason, REASON_SUSPENDED);
        assert_non_null(strstr(res.message, "suspended (by alice@ops (gitcd suspend) at "
                                            "1970-01-01T00:"));
        assert_non_null(strstr(res.message, ": incident 7)"));
        assert_int_equal(fx_total_starts(f), starts);
        assert_int_equal(on_version(f, "3.5.30"), 0);

        /* the same suspension again changes nothing; resume acts */
        assert_int_equal(
            state_hold_suspend(f->db, CLUSTER, "alice@ops (gitcd suspend)", NULL, f->w->now_ms), 0);
        assert_int_equal(state_hold_resume(f->db, CLUSTER), 1);
        assert_int_equal(state_hold_resume(f->db, CLUSTER), 0);
        fx_converge(f, NULL);
        assert_int_equal(on_version(f, "3.5.30"), 3);
        assert_int_equal(fx_audit_count(f, "cluster.held"), 1);
        assert_int_equal(fx_audit_count(f, "cluster.released"), 1);
        /* an unknown cluster is refused */
        assert_int_equal(state_hold_suspend(f->db, "default/nope", "bob", NULL, 0), -ENOENT);
}

static const char windows[] = "  maintenance:\n"
                              "    windows:\n"
                              "      - schedule: \"0 2 * * *\"\n"
                              "        duration: 1h\n";

static void test_window(void **state)
{
        fx *f = *state;
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n%s", windows);
        fx_converge(f, NULL);

        /* 00:16: the upgrade waits for 02:00, and asks to be woken then */
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.30\"\n%s", windows);
        pass_result res = settle(f, 50);
        assert_true(res.held);
        assert_string_equal(res.reason, REASON_MAINTENANCE_WINDOW);
        assert_non_null(strstr(res.message, "waits for the window at 1970-01-01T02:00Z"));
        assert_true(f->w->now_ms + res.poll_ms <= 2 * HOUR_);
        assert_true(f->w->now_ms + res.poll_ms > 2 * HOUR_ - 5000 || res.poll_ms == 3600 * 1000);
        assert_int_equal(on_version(f, "3.5.30"), 0);

        /* a member lost meanwhile is replaced at once (safety is never held) */
        const char *lost = f->w->procs[0].name;
        char lost_name[FAKE_NAME_MAX];
        snprintf(lost_name, sizeof(lost_name), "%s", lost);
        int removes = f->w->removes;
        fake_lose_data(f->w, lost_name);
        for (int i = 0; i < 400 && f->w->removes == removes; i++)
                res = pass_once(f);
        assert_int_equal(f->w->removes, removes + 1);
        assert_true(f->w->now_ms < 2 * HOUR_);
        /* the replacement joins on the latched spec's command: it is new, not rolled */
        res = settle(f, 400);
        assert_true(res.held);
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);

        /* 02:59: the roll starts; after the first member, the window closes */
        f->w->now_ms = 3 * HOUR_ - MIN_;
        int restarts = fx_audit_count(f, "member.restart");
        for (int i = 0; i < 400 && fx_audit_count(f, "member.restart") == restarts; i++)
                res = pass_once(f);
        assert_int_equal(fx_audit_count(f, "member.restart"), restarts + 1);
        assert_true(f->w->now_ms < 3 * HOUR_);
        f->w->now_ms = 3 * HOUR_ + 1000;
        res = settle(f, 400);
        assert_true(res.held);
        assert_string_equal(res.reason, REASON_MAINTENANCE_WINDOW);
        assert_non_null(strstr(res.message, "waits for the window at 1970-01-02T02:00Z"));
        assert_int_equal(fx_audit_count(f, "member.restart"), restarts + 1);

        /* the next window: the roll goes on to the end */
        f->w->now_ms = DAY_ + 2 * HOUR_;
        fx_converge(f, NULL);
        assert_int_equal(on_version(f, "3.5.30"), 3);
}

static void test_override(void **state)
{
        fx *f = *state;
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n%s", windows);
        fx_converge(f, NULL);
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.30\"\n%s", windows);
        pass_result res = settle(f, 50);
        assert_true(res.held);

        /* the override runs it now and is spent when the cluster converged */
        reconcile_origin o = {.commit = "0123456789abcdef0123456789abcdef01234567",
                              .author = "Ops <ops@example.com>"};
        fx_offer(f, &o, "  replicas: 3\n  version: \"3.5.30\"\n%s    override: incident-42\n",
                 windows);
        fx_converge(f, NULL);
        assert_true(f->w->now_ms < 2 * HOUR_);
        assert_int_equal(on_version(f, "3.5.30"), 3);
        assert_int_equal(fx_audit_count(f, "maintenance.override"), 1);
        int64_t spent = 0;
        assert_int_equal(state_override_spent(f->db, CLUSTER, "incident-42", &spent), 1);
        assert_true(spent > 0);

        /* the same token later lets nothing run */
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n%s    override: incident-42\n",
                 windows);
        res = settle(f, 50);
        assert_true(res.held);
        assert_string_equal(res.reason, REASON_MAINTENANCE_WINDOW);
        assert_int_equal(on_version(f, "3.5.16"), 0);
        res = pass_once(f);
        assert_int_equal(fx_audit_count(f, "maintenance.override"), 1);
}

/*
 * A rotateCA token committed outside the windows starts nothing (it is not
 * used up): the pass says the CA rotation waits; inside the window the
 * rotation runs to its end.
 */
static void ca_offer(fx *f, const char *token)
{
        _cleanup_free_ char *rot = token ? xasprintf("\n      rotateCA: \"%s\"", token) : NULL;
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n"
                 "  progressDeadlineSeconds: 3600\n"
                 "  tls:\n    provider: auto\n"
                 "    client:\n      enabled: true\n"
                 "    peer:\n      enabled: true\n"
                 "    auto:\n      validityDays: 90%s\n%s",
                 rot ? rot : "", windows);
}

static void test_ca_rotation_waits(void **state)
{
        fx *f = *state;
        f->w->ca_model = true;
        ca_offer(f, NULL);
        fx_converge(f, NULL);
        ca_offer(f, "r1");
        pass_result res = settle(f, 50);
        assert_true(res.held);
        assert_string_equal(res.reason, REASON_MAINTENANCE_WINDOW);
        assert_non_null(strstr(res.message, "the CA rotation: waits for the window at "));
        assert_int_equal(state_ca_rotation_token_used(f->db, CLUSTER, "r1"), 0);
        assert_int_equal(f->w->ca_signer, 1);

        f->w->now_ms = 2 * HOUR_;
        fx_converge(f, NULL);
        assert_int_equal(state_ca_rotation_token_used(f->db, CLUSTER, "r1"), 1);
        assert_int_equal(f->w->ca_signer, 2);
        assert_int_equal(f->w->ca_violations, 0);
}

/*
 * Suspended with a scale-up waiting: certificate renewal still runs when
 * a leaf enters its renewal window (it restarts nothing), the held step
 * stays held, and the hold is audited once, not again after each renewal.
 */
static void test_renewal_goes_on(void **state)
{
        fx *f = *state;
        f->w->cert_life_ms = 60000;
        static const char tls[] = "  tls:\n    provider: auto\n"
                                  "    client:\n      enabled: true\n"
                                  "    peer:\n      enabled: true\n"
                                  "    auto:\n      validity: 60s\n      renewBefore: 40s\n";
        fx_offer(f, NULL, "  replicas: 1\n  version: \"3.5.16\"\n%s", tls);
        fx_converge(f, NULL);
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n  suspend: true\n%s", tls);
        int renewals = f->w->renewals;
        int starts = fx_total_starts(f);
        for (int i = 0; i < 40; i++) {
                pass_result res = pass_once(f);
                assert_true(res.held || res.step == STEP_RENEW_CERTS);
                /* renewed ahead of expiry (renewBefore), never once expired */
                assert_string_not_equal(res.reason, REASON_CERTS_EXPIRED);
                fake_world_advance(f->w, 5000);
        }
        assert_true(f->w->renewals > renewals);
        assert_int_equal(fx_total_starts(f), starts);
        assert_int_equal(fake_etcd_count(f->w, NULL), 1);
        assert_int_equal(fx_audit_count(f, "cluster.held"), 1);
        assert_int_equal(fx_audit_count(f, "cluster.released"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_suspended_by_spec, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_suspended_by_person, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_window, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_override, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_ca_rotation_waits, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_renewal_goes_on, setup, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
