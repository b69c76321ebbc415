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
#include "tests/fake/fake.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CLUSTER    "default/demo"
#define MAX_PASSES 400
#define LIFE_MS    60000

typedef struct fx {
        char *dir;
        fake_world *w;
        state_db *db;
        target *t;
        reconciler *r;
} fx;

static int setup(void **state)
{
        fx *f = XNEW(fx);
        char tmpl[] = "/tmp/gitcd-tls-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        f->dir = xstrdup(tmpl);
        _cleanup_free_ char *db = xasprintf("%s/state.db", f->dir);
        f->w = fake_world_new();
        f->w->cert_life_ms = LIFE_MS;
        assert_int_equal(state_open(db, STATE_OPEN_READ_WRITE, &f->db), 0);
        assert_int_equal(fake_target_new(f->w, &f->t), 0);
        fake_world_make_current(f->w);
        reconciler_opts o = {
            .db = f->db,
            .target = f->t,
            .etcd = &fake_etcd_ops,
            .etcd_userdata = f->w,
            .wall_ms = fake_clock_ms,
            .mono_ms = fake_clock_ms,
        };
        assert_int_equal(reconciler_new(&o, &f->r), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fx *f = *state;
        reconciler_free(f->r);
        target_free(f->t);
        state_close(f->db);
        fake_world_free(f->w);
        (void)rm_rf(f->dir);
        free(f->dir);
        free(f);
        return 0;
}

/*
 * Bootstrap mode learners: members join one at a time, so each member's
 * leaf is issued (and falls due) at its own time, which the renewal tests
 * count on.
 */
static void offer(fx *f)
{
        static const char y[] = "apiVersion: gitcd.io/v1alpha1\n"
                                "kind: EtcdCluster\n"
                                "metadata:\n  name: demo\n  namespace: default\n"
                                "spec:\n  replicas: 3\n  version: \"3.5.16\"\n"
                                "  progressDeadlineSeconds: 3600\n"
                                "  bootstrap:\n    mode: learners\n"
                                "  tls:\n    provider: auto\n"
                                "    client:\n      enabled: true\n"
                                "    peer:\n      enabled: true\n"
                                "    auto:\n      validity: 60s\n      renewBefore: 40s\n";
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("demo.yaml", y, sizeof(y) - 1, &set, &d), 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(reconciler_offer(f->r, set.items[0], NULL), 0);
        cluster_set_release(&set);
        diag_list_release(&d);
}

/* Pass until converged; waiting passes advance the clock by what they ask. */
static void converge(fx *f, pass_result *ret)
{
        pass_result res = {0};
        for (int i = 0; i < MAX_PASSES; i++) {
                assert_int_equal(reconciler_pass(f->r, CLUSTER, &res), 0);
                if (res.outcome == PASS_CONVERGED || res.outcome == PASS_FAILED)
                        break;
                if (res.outcome != PASS_PROGRESSED)
                        fake_world_advance(f->w, res.poll_ms > 0 ? res.poll_ms : 200);
        }
        if (res.outcome != PASS_CONVERGED)
                fail_msg("not converged: %s %s: %s", pass_outcome_name(res.outcome), res.reason,
                         res.message);
        if (ret)
                *ret = res;
}

static int audit_count(fx *f, const char *action)
{
        state_audit_filter flt = {.cluster = CLUSTER, .action = action};
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(f->db, &flt, &l), 0);
        int n = (int)l.n;
        state_audit_list_release(&l);
        return n;
}

static int total_starts(fx *f)
{
        int n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present)
                        n += f->w->procs[i].starts;
        return n;
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
        converge(f, &res);
        int starts = total_starts(f);
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
                pass_result r1;
                assert_int_equal(reconciler_pass(f->r, CLUSTER, &r1), 0);
                assert_int_equal(r1.step, STEP_RENEW_CERTS);
                assert_int_equal(f->w->renewals, before + 1); /* one member per step */
                free(status);
                free(reason);
                cert_condition(f, &status, &reason);
                assert_string_equal(status, "True");
                assert_string_equal(reason, "RenewalDue");
                converge(f, NULL);
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
        assert_int_equal(total_starts(f), starts);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(audit_count(f, "tls.renew"), f->w->renewals);
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
        assert_int_equal(audit_count(f, "tls.renewal-due"), f->w->renewals);
}

static void test_expired_while_gitcd_was_down(void **state)
{
        fx *f = *state;
        offer(f);
        converge(f, NULL);
        int starts = total_starts(f);

        /* gitcd is not running: nothing renews, every leaf expires. */
        fake_world_advance(f->w, LIFE_MS + 5000);
        assert_true(soonest_expiry(f) < f->w->now_ms);

        pass_result res;
        assert_int_equal(reconciler_pass(f->r, CLUSTER, &res), 0);
        assert_int_equal(res.step, STEP_RENEW_CERTS);
        assert_string_equal(res.reason, "CertificatesExpired");
        _cleanup_free_ char *status = NULL, *reason = NULL;
        cert_condition(f, &status, &reason);
        assert_string_equal(status, "True");
        assert_string_equal(reason, "CertificatesExpired");

        converge(f, NULL);
        assert_int_equal(f->w->renewals, 3);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(total_starts(f), starts);
        size_t learners = 0;
        assert_int_equal(fake_etcd_count(f->w, &learners), 3);
        assert_int_equal(fake_procs_running(f->w), 3);
}

/* The certificate records change only when the certificates do: a converged pass writes nothing. */
static void test_records_replaced_only_on_change(void **state)
{
        fx *f = *state;
        offer(f);
        converge(f, NULL);
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
            cmocka_unit_test_setup_teardown(test_renewal_one_member_at_a_time, setup, teardown),
            cmocka_unit_test_setup_teardown(test_expired_while_gitcd_was_down, setup, teardown),
            cmocka_unit_test_setup_teardown(test_records_replaced_only_on_change, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
