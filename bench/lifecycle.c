/*
 * bench/lifecycle: how fast gitcd drives real etcd on the local target.
 * Prints, for one etcd version (default 3.5.16):
 *   - time from apply to a healthy 3-member cluster (seed, then learners);
 *   - time per scale-up step (3 → 5) and per scale-down step (5 → 3);
 *   - time from a member's data loss to a healthy replacement.
 * etcd itself refuses a membership change until every voter has been
 * connected for its 5 s health interval; the figures say how much of each
 * number that is. Prints figures only; it never fails on timing.
 *
 *   bench-lifecycle [VERSION]
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reconciler/driver.h"
#include "targets/local.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static char root[] = "/tmp/gitcd-bench-XXXXXX";
static target *tgt;

static void write_spec(const char *dir, int replicas, const char *version)
{
        char *path = path_join(dir, "bench.yaml");
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata:\n  name: bench\nspec:\n  replicas: %d\n"
                               "  version: \"%s\"\n",
                               replicas, version);
        if (write_file_atomic(path, text, strlen(text), 0644) < 0) {
                fprintf(stderr, "cannot write %s\n", path);
                exit(1);
        }
        free(text);
        free(path);
}

/* Sync the source and step until converged; returns elapsed ms, or -1 on timeout. */
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

static void cleanup(void)
{
        if (!tgt)
                return;
        etcd_cluster fake = {0};
        fake.name = "bench";
        fake.namespace_ = "default";
        char **names = NULL;
        size_t n = 0;
        if (tgt->ops->list_members(tgt, "default", "bench", &names, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        (void)tgt->ops->remove_member(tgt, &fake, names[i], false);
                        free(names[i]);
                }
                free(names);
        }
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

int main(int argc, char **argv)
{
        const char *version = argc > 1 ? argv[1] : "3.5.16";
        if (!mkdtemp(root))
                return 1;
        atexit(cleanup);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        log_set_level(LOG_ERROR);

        char *src_dir = path_join(root, "source");
        char *db_path = path_join(root, "state.db");
        mkdir_p(src_dir, 0755);
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
        printf("etcd accepts a membership change only after every voter has been connected for "
               "5 s (its health interval)\n\n");

        write_spec(src_dir, 3, version);
        int64_t t_boot = converge(d, tgt);
        printf("apply → healthy 3-member cluster:        %8.2f s  (the third member waits for "
               "the 5 s interval)\n",
               (double)t_boot / 1000);

        write_spec(src_dir, 5, version);
        int64_t t_up = converge(d, tgt);
        printf("scale up 3 → 5, per step:                %8.2f s\n", (double)t_up / 2000);

        write_spec(src_dir, 3, version);
        int64_t t_down = converge(d, tgt);
        printf("scale down 5 → 3, per step:              %8.2f s\n", (double)t_down / 2000);

        /* Data loss of the newest member: kill it, delete its data. */
        char **names = NULL;
        size_t n = 0;
        tgt->ops->list_members(tgt, "default", "bench", &names, &n);
        const char *victim = n ? names[n - 1] : NULL;
        if (victim) {
                char *dir = xasprintf("%s/clusters/default/bench/%s", root, victim);
                char *pidf = path_join(dir, "pid");
                char *data = NULL;
                size_t len;
                if (read_file(pidf, 64, &data, &len) == 0) {
                        kill((pid_t)atoi(data), SIGKILL);
                        free(data);
                }
                usleep(100 * 1000);
                char *ddir = path_join(dir, "data");
                rm_rf(ddir);
                int64_t t_rep = converge(d, tgt);
                printf("data loss of %s → healthy replacement: %6.2f s\n", victim,
                       (double)t_rep / 1000);
                free(ddir);
                free(pidf);
                free(dir);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);

        driver_free(d);
        source_free(src);
        cleanup();
        state_close(db);
        free(src_dir);
        free(db_path);
        return 0;
}
