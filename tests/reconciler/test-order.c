/*
 * Ordered rollouts through the driver (spec.dependsOn, intake/order.h) on a
 * fleet of fake worlds (tests/fake/fleet.h) with the fleet's clock, so a
 * soak passes in no real time and runs under the sanitizers: a dependent
 * is created, then changed, only after its upstream converged on the same
 * revision and stayed healthy for soakSeconds (checked at every step
 * against the upstream's own record), waits and releases are audited once
 * each, and an upstream whose change was refused holds the dependent with
 * the reason while the dependent keeps its accepted spec.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "intake/order.h"
#include "reconciler/driver.h"
#include "state/verdicts.h"
#include "targets/locked.h"
#include "tests/fake/fleet.h"
#include "util/fs.h"
#include "util/xalloc.h"

typedef struct fx {
        char *dir;
        char *src_dir;
        state_db *db;
        fake_fleet *fleet;
        target *t;
        source *src;
        driver *d;
} fx;

static void write_spec(fx *f, const char *name, int replicas, const char *version,
                       const char *extra)
{
        _cleanup_free_ char *path = xasprintf("%s/%s.yaml", f->src_dir, name);
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: %s\nspec:\n  replicas: %d\n"
                                              "  version: \"%s\"\n%s",
                                              name, replicas, version, extra);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
}

#define PROD_EXTRA "  dependsOn: [staging]\n  rollout:\n    soakSeconds: 5\n"

static void fx_open(fx *f, int workers)
{
        const char *base = getenv("TMPDIR");
        char *tmpl = xasprintf("%s/gitcd-order-XXXXXX", isempty(base) ? "/tmp" : base);
        assert_non_null(mkdtemp(tmpl));
        f->dir = tmpl;
        f->src_dir = path_join(f->dir, "source");
        assert_int_equal(mkdir_p(f->src_dir, 0755), 0);
        _cleanup_free_ char *db_path = path_join(f->dir, "state.db");
        assert_int_equal(state_open(db_path, STATE_OPEN_READ_WRITE, &f->db), 0);
        target *inner = NULL;
        assert_int_equal(fake_fleet_new(&f->fleet, &inner), 0);
        assert_int_equal(target_locked_new(inner, &f->t), 0);
        source_opts so = {.url_or_path = f->src_dir, .plain_directory = true};
        char *err = NULL;
        assert_int_equal(source_open(&so, &f->src, &err), 0);
        driver_opts o = {.db = f->db,
                         .target = f->t,
                         .src = f->src,
                         .idle_interval_ms = 30000,
                         .workers = workers,
                         .etcd = &fake_fleet_etcd_ops,
                         .etcd_userdata = f->fleet,
                         .wall_ms = fake_fleet_clock_ms,
                         .mono_ms = fake_fleet_clock_ms};
        assert_int_equal(driver_new(&o, &f->d), 0);
}

static void fx_close(fx *f)
{
        driver_free(f->d);
        source_free(f->src);
        target_free(f->t);
        fake_fleet_free(f->fleet);
        state_close(f->db);
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", f->dir);
        assert_int_equal(system(cmd), 0);
        free(f->src_dir);
        free(f->dir);
}

static void sync_source(fx *f, diag_list *diags)
{
        int k = driver_sync(f->d, diags);
        if (k < 0) {
                diag_print(diags, stderr);
                fail_msg("driver_sync failed: %d", k);
        }
}

/* A step, then the fleet's clock moved on by the driver's wait (a second at most). */
static driver_summary drive(fx *f)
{
        driver_summary sum = {0};
        assert_int_equal(driver_step(f->d, &sum), 0);
        /* every cluster counted once, one released in this very step included (apply's exit) */
        assert_int_equal(sum.converged + sum.failed + sum.waiting, sum.clusters);
        if (sum.busy)
                (void)driver_wait(5);
        fake_fleet_advance(MIN(MAX(sum.wait_ms, 1), 1000));
        return sum;
}

static state_cluster *cluster(fx *f, const char *name)
{
        state_cluster *sc = NULL;
        _cleanup_free_ char *id = xasprintf("default/%s", name);
        int k = state_cluster_get(f->db, id, &sc);
        return k < 0 ? NULL : sc;
}

/* Whether the cluster's desired spec has that many replicas (taken in). */
static bool desired_at(fx *f, const char *name, int replicas)
{
        state_cluster *sc = cluster(f, name);
        bool on = sc && sc->desired_replicas == replicas;
        state_cluster_free(sc);
        return on;
}

/* Converged on its desired spec, with that many replicas. */
static bool running_at(fx *f, const char *name, int replicas)
{
        state_cluster *sc = cluster(f, name);
        bool on = sc && streq_ptr(sc->phase, "Running") && sc->desired_replicas == replicas &&
                  streq_ptr(sc->observed_hash, sc->desired_hash);
        state_cluster_free(sc);
        return on;
}

/*
 * The invariant checked at every step: prod holds the new spec only once
 * staging converged on its own and has been healthy for 5 s by its record.
 */
static void check_order(fx *f, int replicas)
{
        if (!desired_at(f, "prod", replicas))
                return;
        state_cluster *st = cluster(f, "staging");
        assert_non_null(st);
        order_upstream u;
        order_upstream_from_state("default/staging", st, NULL, NULL, st->desired_hash, &u);
        assert_true(u.converged);
        assert_int_equal(st->desired_replicas, replicas);
        assert_true(u.healthy_since_ms > 0);
        assert_true(fake_fleet_clock_ms() - u.healthy_since_ms >= 5000);
        state_cluster_free(st);
}

/* Steps until both run with that many replicas, the order checked at each. */
static void run_until(fx *f, int replicas)
{
        for (int n = 0; n < 20000; n++) {
                check_order(f, replicas);
                if (running_at(f, "prod", replicas) && running_at(f, "staging", replicas))
                        return;
                (void)drive(f);
        }
        fail_msg("prod did not reach %d replicas", replicas);
}

static size_t audits(fx *f, const char *cluster, const char *action)
{
        state_audit_filter filter = {.cluster = cluster, .action = action};
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(f->db, &filter, &l), 0);
        size_t n = l.n;
        state_audit_list_release(&l);
        return n;
}

static const state_verdict *verdict_of(const state_verdict_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                if (streq_ptr(l->items[i]->verdict, ORDER_VERDICT))
                        return l->items[i];
        return NULL;
}

/* Created, then upgraded, staging first and prod after the soak; with and without workers. */
static void order_and_soak(int workers)
{
        fx f = {0};
        fx_open(&f, workers);
        write_spec(&f, "staging", 1, "3.5.16", "");
        write_spec(&f, "prod", 1, "3.5.16", PROD_EXTRA);
        diag_list diags = DIAG_LIST_INIT;
        sync_source(&f, &diags);
        /* prod is not created before staging converged: said as a warning */
        assert_true(diag_count(&diags, DIAG_WARNING) >= 1);
        diag_list_release(&diags);
        assert_null(fake_fleet_world(f.fleet, "prod"));
        run_until(&f, 1);
        assert_int_equal(audits(&f, "default/prod", "rollout.wait"), 1);
        assert_int_equal(audits(&f, "default/prod", "rollout.release"), 1);

        /* one change of both (1 -> 3 members): staging first, prod after its soak */
        write_spec(&f, "staging", 3, "3.5.16", "");
        write_spec(&f, "prod", 3, "3.5.16", PROD_EXTRA);
        /* a cluster whose pass is in flight is judged at the next step, not at the sync:
         * the workers' passes finished first, so that the sync judges prod itself */
        assert_int_equal(driver_quiesce(f.d, 120000), 0);
        sync_source(&f, &diags);
        diag_list_release(&diags);
        assert_false(desired_at(&f, "prod", 3));
        state_verdict_list vl = {0};
        assert_int_equal(state_verdict_list_get(f.db, "default/prod", &vl), 0);
        const state_verdict *v = verdict_of(&vl);
        assert_non_null(v);
        assert_non_null(strstr(v->message,
                               ORDER_REASON_WAITING ": waits for staging to converge "
                                                    "on the same revision and soak 5 s"));
        state_verdict_list_release(&vl);
        run_until(&f, 3);
        assert_int_equal(audits(&f, "default/prod", "rollout.wait"), 2);
        assert_int_equal(audits(&f, "default/prod", "rollout.release"), 2);
        /* released: the wait is forgotten */
        assert_int_equal(state_verdict_list_get(f.db, "default/prod", &vl), 0);
        assert_null(verdict_of(&vl));
        state_verdict_list_release(&vl);
        fx_close(&f);
}

static void test_order_and_soak(void **state)
{
        (void)state;
        order_and_soak(0);
}

static void test_order_and_soak_workers(void **state)
{
        (void)state;
        order_and_soak(4);
}

/*
 * staging's change is refused (a downgrade across a minor): prod's change
 * is held with the reason, prod keeps running its accepted spec, and the
 * hold is audited once however many steps pass.
 */
static void test_failed_upstream_holds(void **state)
{
        (void)state;
        fx f = {0};
        fx_open(&f, 0);
        write_spec(&f, "staging", 1, "3.5.16", "");
        write_spec(&f, "prod", 1, "3.5.16", PROD_EXTRA);
        diag_list diags = DIAG_LIST_INIT;
        sync_source(&f, &diags);
        diag_list_release(&diags);
        run_until(&f, 1);

        write_spec(&f, "staging", 1, "3.4.23", "");
        write_spec(&f, "prod", 3, "3.5.16", PROD_EXTRA);
        sync_source(&f, &diags);
        diag_list_release(&diags);
        for (int n = 0; n < 200; n++)
                (void)drive(&f);
        assert_false(desired_at(&f, "prod", 3));
        assert_true(running_at(&f, "prod", 1));
        state_verdict_list vl = {0};
        assert_int_equal(state_verdict_list_get(f.db, "default/prod", &vl), 0);
        const state_verdict *v = verdict_of(&vl);
        assert_non_null(v);
        assert_non_null(strstr(v->message, ORDER_REASON_FAILED ": held: staging SpecRejected"));
        state_verdict_list_release(&vl);
        /* waiting (staging's pass had not judged its change yet), then held: once each */
        assert_int_equal(audits(&f, "default/prod", "rollout.wait"), 3);
        driver_summary sum = drive(&f);
        assert_true(sum.failed >= 1);
        fx_close(&f);
}

/* An upstream the intake refuses (on a cycle of its own): prod is held, not dropped. */
static void test_refused_upstream_holds(void **state)
{
        (void)state;
        fx f = {0};
        fx_open(&f, 0);
        write_spec(&f, "staging", 1, "3.5.16", "  dependsOn: [qa]\n");
        write_spec(&f, "qa", 1, "3.5.16", "  dependsOn: [staging]\n");
        write_spec(&f, "prod", 1, "3.5.16", PROD_EXTRA);
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(driver_sync(f.d, &diags), -EINVAL); /* staging and qa refused */
        diag_list_release(&diags);
        for (int n = 0; n < 20; n++)
                (void)drive(&f);
        assert_null(fake_fleet_world(f.fleet, "prod"));
        state_verdict_list vl = {0};
        assert_int_equal(state_verdict_list_get(f.db, "default/prod", &vl), 0);
        const state_verdict *v = verdict_of(&vl);
        assert_non_null(v);
        assert_non_null(strstr(v->message, ORDER_REASON_FAILED ": held: staging refused: "));
        state_verdict_list_release(&vl);
        assert_int_equal(audits(&f, "default/prod", "rollout.wait"), 1);
        fx_close(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_order_and_soak),
            cmocka_unit_test(test_order_and_soak_workers),
            cmocka_unit_test(test_failed_upstream_holds),
            cmocka_unit_test(test_refused_upstream_holds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
