/*
 * The driver's cadence and its workers, on a fleet of fake worlds
 * (tests/fake/fleet.h) with the fleet's clock: a converged cluster is
 * observed again only when its timer runs out or something wakes it, and
 * a cluster whose etcd calls hang (a stopped member) never holds up
 * another cluster's scale-up.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ops/config.h"
#include "reconciler/driver.h"
#include "snapshots/scheduler.h"
#include "state/snapshots.h"
#include "targets/locked.h"
#include "tests/fake/fleet.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/xalloc.h"

typedef struct fx {
        char *dir;
        char *src_dir;
        state_db *db;
        fake_fleet *fleet;
        target *t;
        source *src;
        ops_config *cfg; /* its policy: local snapshot folders under dir */
        driver *d;
        /* What the callbacks saw. */
        int passes[4];
        pass_outcome last[4];
} fx;

static const char *const names[] = {"stuck", "scaling", "idle", "other"};

static int cluster_index(const char *cluster)
{
        for (int i = 0; i < 4; i++)
                if (streq(strchr(cluster, '/') + 1, names[i]))
                        return i;
        return -1;
}

static void on_progress(const char *cluster, const pass_result *res, void *userdata)
{
        fx *f = userdata;
        int i = cluster_index(cluster);
        if (i >= 0)
                f->last[i] = res->outcome;
}

static void on_pass(const char *cluster, const pass_result *res, int64_t ms, void *userdata)
{
        (void)res;
        (void)ms;
        fx *f = userdata;
        int i = cluster_index(cluster);
        if (i >= 0)
                f->passes[i]++;
}

static void write_spec(fx *f, const char *name, int replicas)
{
        _cleanup_free_ char *path = xasprintf("%s/%s.yaml", f->src_dir, name);
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: %s\nspec:\n  replicas: %d\n"
                                              "  version: \"3.5.16\"\n",
                                              name, replicas);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
}

static void fx_open(fx *f, int workers)
{
        char tmpl[] = "/tmp/gitcd-driver-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        f->dir = xstrdup(tmpl);
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
        _cleanup_free_ char *conf = xasprintf("policy: {localSnapshotRoots: [%s]}\n", f->dir);
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(ops_config_load_buffer("gitcd.yaml", conf, strlen(conf), &f->cfg, &diags),
                         0);
        diag_list_release(&diags);
        driver_opts o = {.db = f->db,
                         .target = f->t,
                         .src = f->src,
                         .progress = on_progress,
                         .userdata = f,
                         .pass_done = on_pass,
                         .pass_done_userdata = f,
                         .idle_interval_ms = 30000,
                         .workers = workers,
                         .etcd = &fake_fleet_etcd_ops,
                         .etcd_userdata = f->fleet,
                         .wall_ms = fake_fleet_clock_ms,
                         .mono_ms = fake_fleet_clock_ms,
                         .policy = f->cfg->policy};
        assert_int_equal(driver_new(&o, &f->d), 0);
}

static void fx_close(fx *f)
{
        driver_free(f->d);
        ops_config_free(f->cfg);
        source_free(f->src);
        target_free(f->t);
        fake_fleet_free(f->fleet);
        state_close(f->db);
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", f->dir);
        assert_int_equal(system(cmd), 0);
        free(f->src_dir);
        free(f->dir);
}

static void sync_source(fx *f)
{
        diag_list diags = DIAG_LIST_INIT;
        if (driver_sync(f->d, &diags) < 0) {
                diag_print(&diags, stderr);
                fail_msg("driver_sync failed");
        }
        diag_list_release(&diags);
}

/*
 * One step, then the wait a daemon would do: a moment for a pass in flight,
 * and the fleet's clock moved on by the time the driver asks for, a second
 * at most (etcd's health interval passes in no real time, the progress
 * deadline of a hung cluster does not).
 */
static driver_summary drive(fx *f)
{
        driver_summary sum = {0};
        assert_int_equal(driver_step(f->d, &sum), 0);
        if (sum.busy)
                (void)driver_wait(5);
        fake_fleet_advance(MIN(MAX(sum.wait_ms, 1), 1000));
        return sum;
}

/* Steps without moving the clock until no pass is in flight. */
static void settle(fx *f)
{
        for (int n = 0; n < 10000; n++) {
                driver_summary sum = {0};
                assert_int_equal(driver_step(f->d, &sum), 0);
                if (!sum.busy)
                        return;
                (void)driver_wait(20);
        }
        fail_msg("passes still in flight");
}

static bool voters(fx *f, const char *name, size_t want)
{
        fake_world *w = fake_fleet_world(f->fleet, name);
        size_t learners = 0;
        return w && fake_etcd_count(w, &learners) == want && learners == 0;
}

/* Step until a cluster converged with `want` voters; a bounded number of steps. */
static void converge(fx *f, int i, size_t want)
{
        for (int n = 0; n < 20000; n++) {
                if (f->last[i] == PASS_CONVERGED && voters(f, names[i], want))
                        return;
                (void)drive(f);
        }
        fail_msg("%s did not converge to %zu voters", names[i], want);
}

/*
 * A cluster whose every etcd call hangs (a SIGSTOPped member, until the
 * client's deadline) while another scales 1 → 3: the second converges
 * while the first's pass is still blocked, and the first converges once
 * its member answers again.
 */
static void test_hung_cluster_does_not_hold_up_another(void **state)
{
        (void)state;
        fx f = {0};
        for (int i = 0; i < 4; i++)
                f.last[i] = PASS_WAITING;
        fx_open(&f, 4);
        write_spec(&f, "stuck", 1);
        write_spec(&f, "scaling", 1);
        sync_source(&f);
        converge(&f, 0, 1);
        converge(&f, 1, 1);

        fake_fleet_hang(f.fleet, "stuck", true);
        write_spec(&f, "stuck", 3);
        write_spec(&f, "scaling", 3);
        sync_source(&f);
        f.last[0] = f.last[1] = PASS_WAITING;
        for (int n = 0; n < 20000 && !fake_fleet_hung(f.fleet, "stuck"); n++)
                (void)drive(&f);
        assert_true(fake_fleet_hung(f.fleet, "stuck"));
        converge(&f, 1, 3);
        /* Its pass is still blocked in an etcd call, and has not moved on. */
        assert_true(fake_fleet_hung(f.fleet, "stuck"));
        assert_true(voters(&f, "stuck", 1));
        assert_int_not_equal(f.last[0], PASS_CONVERGED);

        /* A new revision while the hung pass is in flight: taken in by the others at
         * once; the hung cluster's new spec waits for its pass to end. */
        write_spec(&f, "other", 1);
        write_spec(&f, "stuck", 5);
        sync_source(&f);
        converge(&f, 3, 1);
        assert_true(fake_fleet_hung(f.fleet, "stuck"));

        fake_fleet_hang(f.fleet, "stuck", false);
        converge(&f, 0, 5);
        fx_close(&f);
}

/*
 * A cluster whose target operations hang (a stop waiting for a process
 * that does not exit, a Pod deletion waiting on its grace period) while
 * another scales 1 -> 3: the second converges while the first's target
 * operation is still blocked (targets/locked.h lets other clusters'
 * operations in), and the first converges once it is released.
 */
static void test_slow_target_op_holds_up_no_other(void **state)
{
        (void)state;
        fx f = {0};
        for (int i = 0; i < 4; i++)
                f.last[i] = PASS_WAITING;
        fx_open(&f, 4);
        write_spec(&f, "stuck", 1);
        write_spec(&f, "scaling", 1);
        sync_source(&f);
        converge(&f, 0, 1);
        converge(&f, 1, 1);

        fake_fleet_hang_target(f.fleet, "stuck", true);
        write_spec(&f, "stuck", 3);
        write_spec(&f, "scaling", 3);
        sync_source(&f);
        f.last[0] = f.last[1] = PASS_WAITING;
        for (int n = 0; n < 20000 && !fake_fleet_target_hung(f.fleet, "stuck"); n++)
                (void)drive(&f);
        assert_true(fake_fleet_target_hung(f.fleet, "stuck"));
        converge(&f, 1, 3);
        assert_true(fake_fleet_target_hung(f.fleet, "stuck"));
        assert_int_not_equal(f.last[0], PASS_CONVERGED);

        fake_fleet_hang_target(f.fleet, "stuck", false);
        converge(&f, 0, 3);
        fx_close(&f);
}

/*
 * A converged cluster is not observed again at every step: only when its
 * timer (the idle interval, jittered) runs out, when it is woken (a member
 * event), or when its spec changes. Inline and with workers.
 */
static void idle_cadence(int workers)
{
        fx f = {0};
        for (int i = 0; i < 4; i++)
                f.last[i] = PASS_WAITING;
        fx_open(&f, workers);
        write_spec(&f, "idle", 1);
        sync_source(&f);
        converge(&f, 2, 1);
        settle(&f);

        int before = f.passes[2];
        driver_summary sum = {0};
        for (int n = 0; n < 50; n++)
                assert_int_equal(driver_step(f.d, &sum), 0);
        assert_int_equal(sum.converged, 1);
        assert_int_equal(sum.busy, 0);
        assert_int_equal(f.passes[2], before);
        /* The driver asks to be called back about when the timer runs out (+-25%). */
        assert_true(sum.wait_ms > 30000 / 2 && sum.wait_ms <= 30000 * 5 / 4);

        /* A member event: observed at the next step. */
        driver_wake(f.d, "default/idle");
        for (int n = 0; n < 100 && f.passes[2] == before; n++)
                (void)drive(&f);
        assert_true(f.passes[2] > before);
        settle(&f);

        /* Its timer: once the clock passed the longest jittered interval. */
        before = f.passes[2];
        fake_fleet_advance(30000 * 5 / 4 + 1);
        for (int n = 0; n < 100 && f.passes[2] == before; n++)
                (void)drive(&f);
        assert_true(f.passes[2] > before);
        fx_close(&f);
}

static void test_idle_cadence_inline(void **state)
{
        (void)state;
        idle_cadence(0);
}

static void test_idle_cadence_workers(void **state)
{
        (void)state;
        idle_cadence(3);
}

static void write_file(fx *f, const char *name, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", f->src_dir, name);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
}

static void write_declared(fx *f, const char *name)
{
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        _cleanup_free_ char *text =
            xasprintf("apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                      "metadata:\n  name: %s\nspec:\n  clusterRef:\n    name: idle\n",
                      name);
        write_file(f, file, text);
}

static size_t pending_requests(fx *f)
{
        state_snapshot_request_list l = {0};
        assert_int_equal(state_snapshot_requests_list(f->db, "default/idle", true, &l), 0);
        size_t n = l.n;
        state_snapshot_request_list_release(&l);
        return n;
}

/* Tick a scheduler until its worker finished and was reaped; returns how many it started. */
static int run_scheduler(snapshot_scheduler *s, fx *f)
{
        const char *const clusters[] = {"default/idle"};
        int started = 0;
        for (int n = 0; n < 2000; n++) {
                started += snapshot_scheduler_tick(s, f->db, f->t, clusters, 1);
                if (snapshot_scheduler_tick(s, f->db, f->t, clusters, 1) == 0 && n > 1)
                        break;
                usleep(20 * 1000);
        }
        return started;
}

/*
 * A declared one-off snapshot (a cozystack EtcdSnapshot next to the
 * cluster) is attempted exactly once: not again at the next tick, not after
 * a restart of the scheduler, not when the document is read again; another
 * document is another snapshot, and a document removed before its snapshot
 * was taken is withdrawn. (The fake world has no real etcd: the attempt
 * fails, and a failed attempt is still the one attempt.)
 */
/*
 * A declared snapshot's attempt runs in its own thread: wait (up to 60 s,
 * slow under the sanitizers) until n attempts are recorded and none is
 * still running; *l is what was last read.
 */
static void wait_attempts(fx *f, size_t n, state_snapshot_list *l)
{
        for (int i = 0; i < 1200; i++) {
                assert_int_equal(state_snapshot_list_for(f->db, "default/idle", 0, l), 0);
                bool running = false;
                for (size_t k = 0; k < l->n; k++)
                        running |= streq_ptr(l->items[k]->result, "running");
                if (l->n >= n && !running)
                        return;
                state_snapshot_list_release(l);
                usleep(50 * 1000);
        }
        assert_int_equal(state_snapshot_list_for(f->db, "default/idle", 0, l), 0);
}

static void test_declared_snapshot_taken_once(void **state)
{
        (void)state;
        fx f = {0};
        fx_open(&f, 0);
        _cleanup_free_ char *snaps = path_join(f.dir, "snaps");
        _cleanup_free_ char *cluster = xasprintf(
            "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
            "  name: idle\nspec:\n  replicas: 1\n  version: \"3.5.16\"\n"
            "  snapshots:\n    enabled: false\n    destination:\n      local:\n        path: %s\n",
            snaps);
        write_file(&f, "idle.yaml", cluster);
        write_declared(&f, "snap1");
        sync_source(&f);
        assert_int_equal(pending_requests(&f), 1);
        converge(&f, 2, 1);
        settle(&f);

        _cleanup_free_ char *db_path = path_join(f.dir, "state.db");
        snapshot_scheduler_opts so = {.state_path = db_path, .state_dir = f.dir};
        snapshot_scheduler *s = NULL;
        assert_int_equal(snapshot_scheduler_new(&so, f.db, &s), 0);
        assert_int_equal(run_scheduler(s, &f), 1);
        assert_int_equal(pending_requests(&f), 0);
        state_snapshot_list l = {0};
        wait_attempts(&f, 1, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->trigger, "declared");
        assert_string_equal(l.items[0]->declared_by, "EtcdSnapshot default/snap1");
        assert_string_not_equal(l.items[0]->result, "running");
        state_snapshot_list_release(&l);
        assert_int_equal(run_scheduler(s, &f), 0); /* not again */
        snapshot_scheduler_free(s);
        assert_int_equal(snapshot_scheduler_new(&so, f.db, &s), 0); /* gitcd restarted */
        assert_int_equal(run_scheduler(s, &f), 0);

        /* the same document in a new revision: nothing new; another document: one more */
        write_declared(&f, "snap2");
        sync_source(&f);
        assert_int_equal(pending_requests(&f), 1);
        assert_int_equal(run_scheduler(s, &f), 1);
        wait_attempts(&f, 2, &l);
        assert_int_equal(l.n, 2);
        state_snapshot_list_release(&l);

        /* removed before it was taken: withdrawn, never taken */
        write_declared(&f, "snap3");
        sync_source(&f);
        assert_int_equal(pending_requests(&f), 1);
        _cleanup_free_ char *gone = path_join(f.src_dir, "snap3.yaml");
        assert_int_equal(unlink(gone), 0);
        sync_source(&f);
        assert_int_equal(pending_requests(&f), 0);
        assert_int_equal(run_scheduler(s, &f), 0);
        snapshot_scheduler_free(s);
        fx_close(&f);
}

int main(void)
{
        log_set_level(LOG_ERROR);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hung_cluster_does_not_hold_up_another),
            cmocka_unit_test(test_idle_cadence_inline),
            cmocka_unit_test(test_idle_cadence_workers),
            cmocka_unit_test(test_slow_target_op_holds_up_no_other),
            cmocka_unit_test(test_declared_snapshot_taken_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
