/*
 * Benchmark: planning a repository of many clusters.
 *
 * Builds a Git repository with N EtcdCluster files in one commit with the
 * git command, a state database that has accepted all of them, and a
 * second commit that changes one in ten. Then it times what `gitcd
 * validate` does with the folder (load and check every file), the first
 * fetch into a mirror, the plan against an empty state and against the
 * full one (with peak memory from getrusage), the text and JSON output,
 * and a no-change poll: source_fetch again (the ref has not moved, nothing
 * is downloaded) against `git fetch` into the same mirror, 50 of each, with
 * the CPU of the processes each starts (a fetch's own process; git's).
 *
 *   bench-plan [N...]      (default: 1000 10000)
 *
 * With several sizes, the ratio of each one's validate and plan times to
 * the first size's follows (linear: the ratio of the sizes). Times are
 * wall clock and CPU (user + system) of this process: on a busy machine
 * the CPU figure is the steadier one. Prints figures; never fails on
 * timing. Everything lives in a temporary folder removed at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "plan/plan.h"
#include "sources/source.h"
#include "api/spec.h"
#include "state/state.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static char *root;

static int sh(const char *fmt, ...) _printf_(1, 2);
static int sh(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *cmd = xvasprintf(fmt, ap);
        va_end(ap);
        int st = system(cmd);
        return st == 0 ? 0 : -EIO;
}

static double since(int64_t t0)
{
        return (double)(now_mono_ms() - t0);
}

/* CPU time of this process so far (user + system), in ms. */
static double cpu_ms(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

/* CPU time of this process and of the children it waited for (a fetch's own process, git), in ms. */
static double cpu_all_ms(void)
{
        struct rusage self, kids;
        getrusage(RUSAGE_SELF, &self);
        getrusage(RUSAGE_CHILDREN, &kids);
        return (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
                        kids.ru_stime.tv_sec) *
                   1000.0 +
               (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec + kids.ru_utime.tv_usec +
                        kids.ru_stime.tv_usec) /
                   1000.0;
}

/* The figures compared between sizes: wall and CPU ms. */
typedef struct figures {
        int n;
        double validate_ms, validate_cpu;
        double plan_empty_ms, plan_empty_cpu;
        double plan_applied_ms, plan_applied_cpu;
} figures;

static long peak_kib(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return ru.ru_maxrss;
}

static void write_clusters(const char *repo, int n, int generation)
{
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *rel = xasprintf("clusters/team-%02d/c-%04d.yaml", i % 20, i);
                _cleanup_free_ char *path = path_join(repo, rel);
                _cleanup_free_ char *dir = xstrdup(path);
                *strrchr(dir, '/') = '\0';
                (void)mkdir_p(dir, 0755);
                int replicas = generation > 0 && i % 10 == 0 ? 5 : 3;
                _cleanup_free_ char *y =
                    xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                              "  name: c-%04d\n  namespace: team-%02d\n  labels:\n"
                              "    team: t%02d\nspec:\n  replicas: %d\n  version: \"3.5.16\"\n"
                              "  storage:\n    size: 2Gi\n  options:\n"
                              "    autoCompactionMode: periodic\n"
                              "    autoCompactionRetention: 1h\n",
                              i, i % 20, i % 20, replicas);
                FILE *f = fopen(path, "w"); /* no fsync: this is scratch data */
                if (!f || fputs(y, f) < 0 || fclose(f) != 0) {
                        fprintf(stderr, "cannot write %s\n", path);
                        exit(1);
                }
        }
}

static source_revision *fetch(source *s, double *ret_ms)
{
        source_revision *rev = NULL;
        int64_t t0 = now_mono_ms();
        if (source_fetch(s, &rev) < 0) {
                fprintf(stderr, "fetch failed: %s\n", source_last_error(s));
                exit(1);
        }
        *ret_ms = since(t0);
        return rev;
}

/* Accept every cluster of the revision in a fresh state database, in one transaction. */
static void accept_all(const char *db_path, const source_revision *rev)
{
        state_db *db = NULL;
        if (state_open(db_path, STATE_OPEN_READ_WRITE, &db) < 0) {
                fprintf(stderr, "%s\n", state_last_error());
                exit(1);
        }
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        for (size_t i = 0; i < rev->n_files; i++)
                (void)spec_load_buffer(rev->files[i].path, rev->files[i].content, rev->files[i].len,
                                       &set, &d);
        (void)state_begin(db);
        for (size_t i = 0; i < set.n; i++) {
                _cleanup_free_ char *id = etcd_cluster_id(set.items[i]);
                _cleanup_free_ char *hash = spec_hash(set.items[i]);
                json_t *j = spec_to_json(set.items[i]);
                _cleanup_free_ char *json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
                json_decref(j);
                (void)state_cluster_set_desired(db, id, json, hash, rev->commit_id, 1000);
                (void)state_cluster_latch(db, id, json, hash, 0, 1000);
        }
        (void)state_commit(db);
        state_close(db);
        diag_list_release(&d);
        cluster_set_release(&set);
}

static plan *time_plan(const source_revision *rev, const state_cluster_list *applied,
                       double *ret_ms, double *ret_cpu)
{
        plan *p = NULL;
        plan_input in = {.rev = rev, .applied = applied};
        int64_t t0 = now_mono_ms();
        double c0 = cpu_ms();
        if (plan_compute(&in, &p) < 0)
                exit(1);
        *ret_ms = since(t0);
        *ret_cpu = cpu_ms() - c0;
        return p;
}

/* What `gitcd validate <folder>` does: load and check every file. */
static void time_validate(const char *repo, figures *f)
{
        _cleanup_free_ char *dir = path_join(repo, "clusters");
        char *paths[] = {dir};
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        int64_t t0 = now_mono_ms();
        double c0 = cpu_ms();
        int k = spec_load_paths(paths, 1, &set, &d);
        f->validate_ms = since(t0);
        f->validate_cpu = cpu_ms() - c0;
        if (k < 0 || set.n != (size_t)f->n) {
                fprintf(stderr, "validate: %zu clusters, %zu diagnostics\n", set.n, d.n);
                exit(1);
        }
        printf("  validate the folder (%5zu clusters)   %8.0f ms  (cpu %.0f ms)\n", set.n,
               f->validate_ms, f->validate_cpu);
        cluster_set_release(&set);
        diag_list_release(&d);
}

static int run(int n, figures *f)
{
        f->n = n;
        char tmpl[] = "/tmp/gitcd-bench-plan-XXXXXX";
        if (!mkdtemp(tmpl))
                return 1;
        root = tmpl;
        _cleanup_free_ char *repo = path_join(root, "repo");
        _cleanup_free_ char *cache = path_join(root, "cache");
        _cleanup_free_ char *db_path = path_join(root, "state.db");
        setenv("GIT_AUTHOR_NAME", "Bench", 1);
        setenv("GIT_AUTHOR_EMAIL", "bench@example.com", 1);
        setenv("GIT_COMMITTER_NAME", "Bench", 1);
        setenv("GIT_COMMITTER_EMAIL", "bench@example.com", 1);

        printf("gitcd plan benchmark: %d clusters\n", n);
        int64_t t0 = now_mono_ms();
        write_clusters(repo, n, 0);
        if (sh("cd '%s' && git init -q -b main && git add -A && git commit -q -m first", repo) < 0)
                return 1;
        printf("  repository (files + git commit)        %8.0f ms\n", since(t0));
        time_validate(repo, f);

        source_opts so = {.url_or_path = repo, .ref = "main", .cache_dir = cache};
        source *s = NULL;
        char *err = NULL;
        if (source_open(&so, &s, &err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        double ms;
        source_revision *rev = fetch(s, &ms);
        printf("  first fetch into the mirror            %8.0f ms  (%zu files)\n", ms,
               rev->n_files);

        plan *p = time_plan(rev, NULL, &f->plan_empty_ms, &f->plan_empty_cpu);
        printf("  plan, nothing applied (%5d creates)  %8.0f ms  (cpu %.0f ms)\n", p->n_create,
               f->plan_empty_ms, f->plan_empty_cpu);
        plan_free(p);

        accept_all(db_path, rev);
        state_db *db = NULL;
        state_cluster_list applied = {0};
        t0 = now_mono_ms();
        if (state_open(db_path, STATE_OPEN_READ_ONLY, &db) < 0 ||
            state_cluster_list_all(db, &applied) < 0) {
                fprintf(stderr, "%s\n", state_last_error());
                return 1;
        }
        state_close(db);
        printf("  read the state (%5zu clusters)        %8.0f ms\n", applied.n, since(t0));
        source_revision_free(rev);

        write_clusters(repo, n, 1);
        if (sh("cd '%s' && git commit -q -a -m 'grow one in ten'", repo) < 0)
                return 1;
        rev = fetch(s, &ms);
        printf("  incremental fetch of the change        %8.0f ms  (%u objects)\n", ms,
               rev->received_objects);
        p = time_plan(rev, &applied, &f->plan_applied_ms, &f->plan_applied_cpu);
        printf("  plan, all applied (%5d to change)    %8.0f ms  (cpu %.0f ms)\n", p->n_update,
               f->plan_applied_ms, f->plan_applied_cpu);

        FILE *devnull = fopen("/dev/null", "w");
        plan_print_opts po = {0};
        t0 = now_mono_ms();
        plan_print_text(p, rev, &po, devnull);
        printf("  text output                            %8.0f ms\n", since(t0));
        t0 = now_mono_ms();
        json_t *j = plan_to_json(p, rev);
        json_dumpf(j, devnull, JSON_INDENT(2));
        json_decref(j);
        printf("  JSON output                            %8.0f ms\n", since(t0));
        fclose(devnull);
        printf("  peak memory (ru_maxrss)                %8ld KiB\n", peak_kib());
        plan_free(p);
        state_cluster_list_release(&applied);
        source_revision_free(rev);

        /* The no-change poll: the ref has not moved. Averaged over POLLS of each. */
        enum { POLLS = 50 };
        bool skipped = true;
        double c0 = cpu_all_ms();
        t0 = now_mono_ms();
        for (int i = 0; i < POLLS; i++) {
                rev = fetch(s, &ms);
                skipped = skipped && rev->fetch_skipped;
                source_revision_free(rev);
        }
        double poll_ms = since(t0) / POLLS, poll_cpu = (cpu_all_ms() - c0) / POLLS;
        printf("  no-change poll: source_fetch           %8.1f ms  (cpu %.1f ms with its fetch "
               "process; mean of %d; skipped: %s)\n",
               poll_ms, poll_cpu, POLLS, skipped ? "yes" : "no");
        c0 = cpu_all_ms();
        t0 = now_mono_ms();
        for (int i = 0; i < POLLS; i++)
                if (sh("git -C '%s' fetch -q '%s' '+refs/heads/*:refs/heads/*'",
                       source_mirror_path(s), repo) < 0)
                        fprintf(stderr, "git fetch failed\n");
        double git_ms = since(t0) / POLLS, git_cpu = (cpu_all_ms() - c0) / POLLS;
        printf("  no-change poll: git fetch, same mirror %8.1f ms  (cpu %.1f ms; mean of %d)\n",
               git_ms, git_cpu, POLLS);
        printf("  no-change poll, source_fetch / git fetch: %.2fx wall, %.2fx cpu\n",
               poll_ms / git_ms, poll_cpu / git_cpu);

        source_free(s);
        (void)rm_rf(root);
        return 0;
}

static void ratio(const char *what, double a, double b, double ca, double cb)
{
        printf("  %-28s %6.1fx wall  %6.1fx cpu\n", what, a > 0 ? b / a : 0, ca > 0 ? cb / ca : 0);
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        int sizes[8] = {1000, 10000};
        int n_sizes = 2;
        if (argc > 1) {
                n_sizes = 0;
                for (int i = 1; i < argc && n_sizes < 8; i++) {
                        int n = atoi(argv[i]);
                        if (n <= 0 || n > 100000) {
                                fprintf(stderr, "usage: bench-plan [N (1..100000)]...\n");
                                return 64;
                        }
                        sizes[n_sizes++] = n;
                }
        }
        figures f[8] = {0};
        for (int i = 0; i < n_sizes; i++) {
                if (i)
                        printf("\n");
                if (run(sizes[i], &f[i]) < 0)
                        return 1;
        }
        for (int i = 1; i < n_sizes; i++) {
                printf("\n%d clusters against %d (%.1fx the clusters; linear is the same ratio):\n",
                       f[i].n, f[0].n, (double)f[i].n / f[0].n);
                ratio("validate", f[0].validate_ms, f[i].validate_ms, f[0].validate_cpu,
                      f[i].validate_cpu);
                ratio("plan, nothing applied", f[0].plan_empty_ms, f[i].plan_empty_ms,
                      f[0].plan_empty_cpu, f[i].plan_empty_cpu);
                ratio("plan, all applied", f[0].plan_applied_ms, f[i].plan_applied_ms,
                      f[0].plan_applied_cpu, f[i].plan_applied_cpu);
        }
        return 0;
}
