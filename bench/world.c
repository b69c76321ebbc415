/*
 * The benchmarks' gitcd world (bench/world.h). One world at a time: the
 * signal handler removes the one open.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/world.h"
#include "state/state.h"
#include "targets/local.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static bench_world *open_world;

static void on_signal(int sig)
{
        if (open_world)
                bench_world_close(open_world);
        signal(sig, SIG_DFL);
        raise(sig);
}

void bench_world_open(bench_world *w, const char *prefix)
{
        *w = (bench_world){0};
        snprintf(w->root, sizeof(w->root), "/tmp/%s-XXXXXX", prefix);
        if (!mkdtemp(w->root)) {
                perror("mkdtemp");
                exit(1);
        }
        w->src_dir = path_join(w->root, "source");
        _cleanup_free_ char *db_path = path_join(w->root, "state.db");
        (void)mkdir_p(w->src_dir, 0755);
        if (state_open(db_path, STATE_OPEN_READ_WRITE, &w->db) < 0) {
                fprintf(stderr, "state: %s\n", state_last_error());
                exit(1);
        }
        local_target_opts lo = {.state_dir = w->root};
        if (local_target_new(&lo, &w->tgt) < 0) {
                fprintf(stderr, "cannot make the local target\n");
                exit(1);
        }
        source_opts so = {.url_or_path = w->src_dir, .plain_directory = true};
        _cleanup_free_ char *err = NULL;
        if (source_open(&so, &w->src, &err) < 0) {
                fprintf(stderr, "source: %s\n", err);
                exit(1);
        }
        driver_opts dopts = {.db = w->db, .target = w->tgt, .src = w->src};
        if (driver_new(&dopts, &w->d) < 0) {
                fprintf(stderr, "cannot make the driver\n");
                exit(1);
        }
        open_world = w;
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
}

void bench_world_remove_cluster(bench_world *w, const char *name)
{
        etcd_cluster fake = {0};
        fake.name = (char *)name;
        fake.namespace_ = (char *)"default";
        char **names = NULL;
        size_t n = 0;
        if (w->tgt->ops->list_members(w->tgt, "default", name, &names, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                (void)w->tgt->ops->remove_member(w->tgt, &fake, names[i], false);
                free(names[i]);
        }
        free(names);
}

void bench_world_close(bench_world *w)
{
        if (!w->tgt)
                return;
        open_world = NULL;
        driver_free(w->d);
        source_free(w->src);
        /* Every cluster the target holds: the specs' names. */
        DIR *dir = opendir(w->src_dir);
        for (struct dirent *e; dir && (e = readdir(dir));) {
                char *dot = strrchr(e->d_name, '.');
                if (e->d_name[0] == '.' || !dot || !streq(dot, ".yaml"))
                        continue;
                _cleanup_free_ char *name = xstrndup(e->d_name, (size_t)(dot - e->d_name));
                bench_world_remove_cluster(w, name);
        }
        if (dir)
                closedir(dir);
        target_free(w->tgt);
        state_close(w->db);
        (void)rm_rf(w->root);
        free(w->src_dir);
        *w = (bench_world){0};
}

void bench_world_write_spec(bench_world *w, const char *name, const char *body)
{
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        _cleanup_free_ char *path = path_join(w->src_dir, file);
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: %s\nspec:\n%s",
                                              name, body);
        if (write_file_atomic(path, text, strlen(text), 0644) < 0) {
                fprintf(stderr, "cannot write %s\n", path);
                exit(1);
        }
}

void bench_world_remove_spec(bench_world *w, const char *name)
{
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        _cleanup_free_ char *path = path_join(w->src_dir, file);
        (void)unlink(path);
}

bool bench_world_step(bench_world *w)
{
        driver_summary s = {0};
        (void)driver_step(w->d, &s);
        if (s.wait_ms > 0)
                (void)w->tgt->ops->wait_event(w->tgt, s.wait_ms < 200 ? s.wait_ms : 200);
        return s.waiting > 0;
}

int64_t bench_world_converge(bench_world *w, int64_t timeout_ms)
{
        int64_t start = now_mono_ms();
        diag_list diags = DIAG_LIST_INIT;
        (void)driver_sync(w->d, &diags);
        diag_list_release(&diags);
        for (;;) {
                driver_summary s = {0};
                (void)driver_step(w->d, &s);
                if (s.waiting == 0)
                        return s.failed ? -1 : now_mono_ms() - start;
                if (now_mono_ms() - start > timeout_ms)
                        return -1;
                if (s.wait_ms > 0)
                        (void)w->tgt->ops->wait_event(w->tgt, s.wait_ms);
        }
}
