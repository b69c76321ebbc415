/*
 * Certificate renewal through reconciler_pass, on the fake world
 * (tests/fake/fake.h) with its injected clock: members get 60 s leaves,
 * renewed 40 s early. What an operator would watch:
 *  - a converged cluster asks to be looked at again when the first leaf is
 *    due, then renews each member's leaves, one member per step, with no
 *    restart and no membership change; CertificatesExpiring goes True and
 *    back, and the audit log says when renewal was due and when it was done;
 *  - gitcd down while every leaf expired (members cut off, no quorum):
 *    started again it renews the expired leaves first, and the cluster
 *    comes back without a member removed or restarted.
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

#include "api/spec.h"
#include "reconciler/reconcile.h"
#include "tests/fake/fixture.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"
#define LIFE_MS 60000

static void prepare(fx *f)
{
        f->w->cert_life_ms = LIFE_MS;
}

static const fx_config config = {.name = "tls", .cluster = CLUSTER, .prepare = prepare};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

/*
 * Bootstrap mode learners: members join one at a time, so each member's
 * leaf is issued (and falls due) at its own time, which the renewal tests
 * count on.
 */
static void offer(fx *f)
{
        fx_offer(f, NULL, "%s",
                 "  replicas: 3\n  version: \"3.5.16\"\n"
                 "  progressDeadlineSeconds: 3600\n"
                 "  bootstrap:\n    mode: learners\n"
                 "  tls:\n    provider: auto\n"
                 "    client:\n      enabled: true\n"
                 "    peer:\n      enabled: true\n"
                 "    auto:\n      validity: 60s\n      renewBefore: 40s\n");
}

/* The stored CertificatesExpiring condition: its status ("True"/"False") and reason. */
static void cert_condition(fx *f, char **ret_status, char **ret_reason)
{
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        *ret_status = *ret_reason = NULL;
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, "CertificatesExpiring")) {
                        *ret_status = xstrdup(sc->conditions[i].status);
                        *ret_reason = xstrdup(sc->conditions[i].reason);
                }
        state_cluster_free(sc);
        assert_non_null(*ret_status);
}

static int64_t soonest_expiry(fx *f)
{
        int64_t t = INT64_MAX;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present && f->w->procs[i].cert_not_after_ms < t)
                        t = f->w->procs[i].cert_not_after_ms;
        return t;
}

static void test_renewal_one_member_at_a_time(void **state)
{
        fx *f = *state;
        offer(f);
        pass_result res;
        fx_converge(f, &res);
        int starts = fx_total_starts(f);
        _cleanup_free_ char *status = NULL, *reason = NULL;
        cert_condition(f, &status, &reason);
        assert_string_equal(status, "False");
        assert_string_equal(reason, "CertificatesValid");

        /* Converged, it asks to look again exactly when the first leaf is due. */
        int64_t due = soonest_expiry(f) - 40000;
        assert_true(res.poll_ms > 0);
        assert_int_equal(f->w->now_ms + res.poll_ms, due);

        /*
         * Each member's leaf falls due on its own (they were issued as the
         * members joined): at each due time one member is renewed, in one
         * step; three rounds of that.
         */
        for (int k = 0; k < 3 * 3; k++) {
                f->w->now_ms = soonest_expiry(f) - 40000;
                int before = f->w->renewals;
                _cleanup_(pass_result_release) pass_result r1 = {0};
                assert_int_equal(reconciler_pass(f->r, CLUSTER, &r1), 0);
                assert_int_equal(r1.step, STEP_RENEW_CERTS);
                assert_int_equal(f->w->renewals, before + 1); /* one member per step */
                free(status);
                free(reason);
                cert_condition(f, &status, &reason);
                assert_string_equal(status, "True");
                assert_string_equal(reason, "RenewalDue");
                fx_converge(f, NULL);
                free(status);
                free(reason);
                cert_condition(f, &status, &reason);
                assert_string_equal(status, "False");
        }
        assert_true(f->w->renewals >= 3 * 3);
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present)
                        assert_true(f->w->procs[i].cert_serial >= 4);
        /* A file swap: nobody restarted, nothing removed. */
        assert_int_equal(fx_total_starts(f), starts);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(fx_audit_count(f, "tls.renew"), f->w->renewals);
        /* What `gitcd status` shows: each member's certificate, as renewed. */
        state_cert_list certs = {0};
        assert_int_equal(state_certs_list(f->db, CLUSTER, &certs), 0);
        assert_int_equal(certs.n, 3);
        for (size_t i = 0; i < certs.n; i++) {
                fake_proc *p = fake_proc_find(f->w, certs.items[i]->member);
                assert_non_null(p);
                assert_int_equal(certs.items[i]->not_after_ms, p->cert_not_after_ms);
                assert_true(strtol(certs.items[i]->serial, NULL, 16) >= 4);
        }
        state_cert_list_release(&certs);
        assert_int_equal(fx_audit_count(f, "tls.renewal-due"), f->w->renewals);
}

static void test_expired_while_gitcd_was_down(void **state)
{
        fx *f = *state;
        offer(f);
        fx_converge(f, NULL);
        int starts = fx_total_starts(f);

        /* gitcd is not running: nothing renews, every leaf expires. */
        fake_world_advance(f->w, LIFE_MS + 5000);
        assert_true(soonest_expiry(f) < f->w->now_ms);

        _cleanup_(pass_result_release) pass_result res = {0};
        assert_int_equal(reconciler_pass(f->r, CLUSTER, &res), 0);
        assert_int_equal(res.step, STEP_RENEW_CERTS);
        assert_string_equal(res.reason, "CertificatesExpired");
        _cleanup_free_ char *status = NULL, *reason = NULL;
        cert_condition(f, &status, &reason);
        assert_string_equal(status, "True");
        assert_string_equal(reason, "CertificatesExpired");

        fx_converge(f, NULL);
        assert_int_equal(f->w->renewals, 3);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(fx_total_starts(f), starts);
        size_t learners = 0;
        assert_int_equal(fake_etcd_count(f->w, &learners), 3);
        assert_int_equal(fake_procs_running(f->w), 3);
}

/* The certificate records change only when the certificates do: a converged pass writes nothing. */
static void test_records_replaced_only_on_change(void **state)
{
        fx *f = *state;
        offer(f);
        fx_converge(f, NULL);
        state_cert_list l = {0};
        assert_int_equal(state_certs_list(f->db, CLUSTER, &l), 0);
        assert_int_equal(l.n, 3);
        state_cert v[3];
        for (size_t i = 0; i < 3; i++)
                v[i] = *l.items[i];
        assert_int_equal(state_certs_replace(f->db, CLUSTER, v, 3), 0);
        v[0].serial = "FF";
        assert_int_equal(state_certs_replace(f->db, CLUSTER, v, 3), 1);
        assert_int_equal(state_certs_replace(f->db, CLUSTER, v, 2), 1);
        state_cert_list after = {0};
        assert_int_equal(state_certs_list(f->db, CLUSTER, &after), 0);
        assert_int_equal(after.n, 2);
        state_cert_list_release(&after);
        state_cert_list_release(&l);
        assert_int_equal(state_certs_replace(f->db, "default/nope", v, 1), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_renewal_one_member_at_a_time, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_expired_while_gitcd_was_down, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_records_replaced_only_on_change, setup,
                                            fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
