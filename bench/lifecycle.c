/*
 * bench/lifecycle: how fast gitcd drives real etcd on the local target,
 * each figure beside what etcd itself needs for the same change, measured
 * right before it with the same etcd binary (one etcd version, default
 * 3.5.16):
 *
 *   - bootstrap of 3 and of 5 members: `apply` to every member healthy,
 *     against the static-bootstrap limit: N etcd processes started by hand
 *     together with one static --initial-cluster (the test harness), until
 *     every one answers /health;
 *   - one scale-up step on an idle cluster, against the same step by hand
 *     (3 → 4): MemberAdd as a learner, start it, promote it once etcd lets;
 *   - a replaced member after data loss on an idle cluster (no by-hand
 *     figure: by hand it is a remove plus the step above).
 *
 * "Idle" means every voter has been connected for etcd's 5 s health
 * interval, which etcd waits for before it accepts a membership change.
 * Each figure is the median of 3 runs, by hand and gitcd alternating.
 * Ratios are gitcd / by hand (the target for bootstrap: 1.3x).
 * Prints figures only; never fails on timing, and is not part of the test
 * suite (it needs the harness, so it is built with the tests).
 *
 *   bench-lifecycle [VERSION]
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd/client.h"
#include "reconciler/driver.h"
#include "targets/local.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define IDLE_MS 5500 /* etcd's health interval, and a little */
#define RUNS    3    /* each figure is the median of this many runs */

static char root[] = "/tmp/gitcd-bench-XXXXXX";
static target *tgt;

static void write_spec(const char *dir, const char *name, int replicas, const char *version)
{
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        _cleanup_free_ char *path = path_join(dir, file);
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: %s\nspec:\n  replicas: %d\n"
                                              "  version: \"%s\"\n",
                                              name, replicas, version);
        if (write_file_atomic(path, text, strlen(text), 0644) < 0) {
                fprintf(stderr, "cannot write %s\n", path);
                exit(1);
        }
}

/* Sync the source and step until converged; returns elapsed ms, or -1 on failure. */
static int64_t converge(driver *d, target *t)
{
        int64_t start = now_mono_ms();
        diag_list diags = DIAG_LIST_INIT;
        (void)driver_sync(d, &diags);
        diag_list_release(&diags);
        for (;;) {
                driver_summary s = {0};
                (void)driver_step(d, &s);
                if (s.waiting == 0)
                        return s.failed ? -1 : now_mono_ms() - start;
                if (now_mono_ms() - start > 120000)
                        return -1;
                if (s.wait_ms > 0)
                        (void)t->ops->wait_event(t, s.wait_ms);
        }
}

static void remove_spec(const char *dir, const char *name)
{
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        _cleanup_free_ char *path = path_join(dir, file);
        (void)unlink(path);
}

/* The median of RUNS figures; -1 when any run failed. */
static int64_t median(int64_t v[RUNS])
{
        for (int i = 0; i < RUNS; i++)
                if (v[i] < 0)
                        return -1;
        for (int i = 1; i < RUNS; i++)
                for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
                        int64_t x = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = x;
                }
        return v[RUNS / 2];
}

static void remove_cluster(const char *name)
{
        etcd_cluster fake = {0};
        fake.name = (char *)name;
        fake.namespace_ = (char *)"default";
        char **names = NULL;
        size_t n = 0;
        if (tgt->ops->list_members(tgt, "default", name, &names, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        (void)tgt->ops->remove_member(tgt, &fake, names[i], false);
                        free(names[i]);
                }
                free(names);
        }
}

static void cleanup(void)
{
        if (!tgt)
                return;
        remove_cluster("boot3-0");
        target_free(tgt);
        tgt = NULL;
        (void)rm_rf(root);
}

static void on_signal(int sig)
{
        cleanup();
        signal(sig, SIG_DFL);
        raise(sig);
}

static double sec(int64_t ms)
{
        return (double)ms / 1000.0;
}

static void print_row(const char *what, int64_t by_hand, int64_t gitcd)
{
        if (by_hand > 0 && gitcd > 0)
                printf("  %-34s by hand %6.2f s   gitcd %6.2f s   %5.2fx\n", what, sec(by_hand),
                       sec(gitcd), (double)gitcd / (double)by_hand);
        else if (gitcd > 0)
                printf("  %-34s %25s gitcd %6.2f s\n", what, "", sec(gitcd));
        else
                printf("  %-34s failed (by hand %lld ms, gitcd %lld ms)\n", what,
                       (long long)by_hand, (long long)gitcd);
}

/* The static-bootstrap limit: n members started together, until every one is healthy. */
static int64_t by_hand_bootstrap(const char *version, size_t n)
{
        harness_opts o = {.version = version, .members = n};
        harness_cluster *c = NULL;
        int64_t t0 = now_mono_ms();
        if (harness_cluster_start(&o, &c) < 0)
                return -1;
        int64_t ms = now_mono_ms() - t0;
        harness_cluster_free(c);
        return ms;
}

/* One learner by hand on an idle 3-member cluster: MemberAdd, start, promote. */
static int64_t by_hand_scale_step(const char *version)
{
        harness_opts o = {.version = version, .members = 3};
        harness_cluster *c = NULL;
        if (harness_cluster_start(&o, &c) < 0)
                return -1;
        etcd_client_opts co = {.endpoints = c->endpoints};
        etcd_client *cl = NULL;
        if (etcd_client_new(&co, &cl) < 0) {
                harness_cluster_free(c);
                return -1;
        }
        usleep(IDLE_MS * 1000);

        int peer_port = harness_free_port(), client_port = harness_free_port();
        char *peer = xasprintf("http://127.0.0.1:%d", peer_port);
        const char *urls[] = {peer};
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < c->n; i++)
                sb_printf(&ic, "%s=%s,", c->members[i].name, c->members[i].peer_url);
        sb_printf(&ic, "m3=%s", peer);

        int64_t t0 = now_mono_ms(), ms = -1;
        uint64_t id = 0;
        size_t idx;
        int k = etcd_member_add(cl, urls, 1, true, &id, NULL);
        if (k >= 0)
                k = harness_member_start_joining(c, "m3", peer_port, client_port, sb_str(&ic),
                                                 &idx);
        while (k >= 0) {
                k = etcd_member_promote(cl, id);
                if (k == 0) {
                        ms = now_mono_ms() - t0;
                        break;
                }
                if (k == ETCD_ERR_MEMBER_NOT_IN_SYNC && now_mono_ms() - t0 < 60000) {
                        k = 0;
                        usleep(50 * 1000);
                }
        }
        sb_release(&ic);
        free(peer);
        etcd_client_free(cl);
        harness_cluster_free(c);
        return ms;
}

/* Kill the newest member of a cluster and delete its data (its host lost the disk). */
static const char *lose_newest(const char *name)
{
        static char victim[128];
        char **names = NULL;
        size_t n = 0;
        victim[0] = '\0';
        if (tgt->ops->list_members(tgt, "default", name, &names, &n) < 0 || n == 0)
                return NULL;
        snprintf(victim, sizeof(victim), "%s", names[n - 1]);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        _cleanup_free_ char *dir = xasprintf("%s/clusters/default/%s/%s", root, name, victim);
        _cleanup_free_ char *pidf = path_join(dir, "pid");
        char *data = NULL;
        size_t len;
        if (read_file(pidf, 64, &data, &len) == 0) {
                kill((pid_t)atoi(data), SIGKILL);
                free(data);
        }
        usleep(100 * 1000);
        _cleanup_free_ char *ddir = path_join(dir, "data");
        (void)rm_rf(ddir);
        return victim;
}

int main(int argc, char **argv)
{
        const char *version = argc > 1 ? argv[1] : "3.5.16";
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", version);
                return 1;
        }
        if (!mkdtemp(root))
                return 1;
        atexit(cleanup);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        log_set_level(LOG_ERROR);

        _cleanup_free_ char *src_dir = path_join(root, "source");
        _cleanup_free_ char *db_path = path_join(root, "state.db");
        (void)mkdir_p(src_dir, 0755);
        state_db *db = NULL;
        if (state_open(db_path, STATE_OPEN_READ_WRITE, &db) < 0) {
                fprintf(stderr, "state: %s\n", state_last_error());
                return 1;
        }
        local_target_opts lo = {.state_dir = root};
        if (local_target_new(&lo, &tgt) < 0)
                return 1;
        source_opts so = {.url_or_path = src_dir, .plain_directory = true};
        source *src = NULL;
        char *err = NULL;
        if (source_open(&so, &src, &err) < 0) {
                fprintf(stderr, "source: %s\n", err);
                return 1;
        }
        driver_opts dopts = {.db = db, .target = tgt, .src = src};
        driver *d = NULL;
        if (driver_new(&dopts, &d) < 0)
                return 1;

        printf("gitcd lifecycle benchmark, etcd %s on the local target (loopback)\n", version);
        printf("each gitcd figure beside the same change by hand, measured right before it\n\n");

        /*
         * Bootstrap: the static limit, then gitcd (a static bootstrap, the
         * default), alternating, RUNS times each; every gitcd run is a new
         * cluster, removed once measured.
         */
        static const int sizes[] = {3, 5};
        for (size_t i = 0; i < 2; i++) {
                int n = sizes[i];
                int64_t limit[RUNS], t[RUNS];
                for (int r = 0; r < RUNS; r++) {
                        limit[r] = by_hand_bootstrap(version, (size_t)n);
                        _cleanup_free_ char *name = xasprintf("boot%d-%d", n, r);
                        write_spec(src_dir, name, n, version);
                        t[r] = converge(d, tgt);
                        if (n != 3 || r != 0) {
                                remove_spec(src_dir, name);
                                remove_cluster(name);
                        }
                }
                _cleanup_free_ char *what = xasprintf("bootstrap of %d members", n);
                print_row(what, median(limit), median(t));
        }

        /* Scale-up steps on an idle cluster (boot3-0: 3 → 4 → 5 → 6). */
        int64_t hand_step[RUNS], t_step[RUNS];
        for (int r = 0; r < RUNS; r++) {
                hand_step[r] = by_hand_scale_step(version);
                usleep(IDLE_MS * 1000);
                write_spec(src_dir, "boot3-0", 4 + r, version);
                t_step[r] = converge(d, tgt);
        }
        print_row("scale-up step (idle)", median(hand_step), median(t_step));

        /* Replaced members after data loss, on an idle cluster. */
        int64_t t_rep[RUNS];
        for (int r = 0; r < RUNS; r++) {
                usleep(IDLE_MS * 1000);
                const char *victim = lose_newest("boot3-0");
                t_rep[r] = victim ? converge(d, tgt) : -1;
        }
        print_row("data loss → replaced (idle)", 0, median(t_rep));

        driver_free(d);
        source_free(src);
        cleanup();
        state_close(db);
        free(err);
        return 0;
}
