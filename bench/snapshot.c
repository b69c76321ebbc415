/*
 * Benchmark: snapshot and restore throughput of gitcd against etcd's own
 * tools on the same data in the same run, and gitcd's peak memory while
 * it streams.
 *
 *   bench-snapshot [SIZE-MIB] [VERSION]      (default 1024 MiB, 3.5.16)
 *   bench-snapshot cli [VERSION]
 *
 * `cli` measures the command a person runs instead: `gitcd snapshot save
 * NS/NAME --to DIR` (the binary, exec to exit: it opens the state, picks a
 * healthy follower, streams, checks the file, stores and records)
 * of a small database (a 3-member cluster made by `gitcd apply`, with
 * about 30 KB of keys) beside `etcdctl snapshot save` of one of its members
 * to the same disk, CLI_RUNS times alternating, with each run's times,
 * throughput and ratio, then the medians and the largest ratio. With
 * GITCD_BENCH_BEFORE naming another gitcd binary (the build before a
 * change), that one is run in each round too, alternately before and after
 * the current one. A stall in the client shows as runs a second longer
 * than etcdctl.
 *
 * A one-member cluster (test harness) is filled with SIZE MiB of values
 * (512 KiB each, written by 8 clients at once). Then:
 *   save     gitcd's client streaming the snapshot to a file (etcd's
 *            sha256 trailer checked on the way), against `etcdctl
 *            snapshot save` of the same member;
 *   restore  gitcd's restore of that file (etcd's trailer checked again,
 *            `snapshot status`, then etcd's tool into a new data folder, as
 *            spec.bootstrap.restore does), against `etcdutl snapshot
 *            restore` alone (`etcdctl` for 3.4);
 * and gitcd's peak resident memory (VmHWM, reset before each step through
 * /proc/self/clear_refs) while it streams. Last, a new 3-member cluster is
 * created from the snapshot through the reconciler on the local target
 * both ways spec.bootstrap.restore knows: every member restored and all
 * started at once (bootstrap.mode: static) against the seed restored and
 * the others joining as learners (learners), each timed until every member
 * is a healthy voter. Prints figures only; it never
 * fails on timing. Needs SIZE MiB free twice over in $TMPDIR, plus the
 * data folder.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "etcd/client.h"
#include "bench/world.h"
#include "snapstore/restore.h"
#include "snapstore/tool.h"
#include "util/http.h"
#include "util/log.h"
#include "snapshots/snapshot.h"
#include "util/process.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VALUE_SIZE (512 * 1024)
#define WRITERS    8

typedef struct fill {
        pthread_t thread;
        const char *endpoints;
        int from, to;
        int failed;
} fill;

static void *fill_main(void *arg)
{
        fill *f = arg;
        etcd_client_opts o = {.endpoints = f->endpoints, .call_timeout_ms = 30000};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) < 0) {
                f->failed = 1;
                return NULL;
        }
        char *value = xmalloc(VALUE_SIZE);
        for (int i = f->from; i < f->to && !f->failed; i++) {
                for (size_t j = 0; j < VALUE_SIZE; j += 8)
                        snprintf(value + j, 9, "%07x", (unsigned)(i * 131 + (int)j) & 0xfffffff);
                char key[32];
                snprintf(key, sizeof(key), "bench/%08d", i);
                if (etcd_put(c, key, value, VALUE_SIZE, NULL) < 0) {
                        fprintf(stderr, "put %s: %s\n", key, etcd_client_last_error(c));
                        f->failed = 1;
                }
        }
        free(value);
        etcd_client_free(c);
        return NULL;
}

static long vm_hwm_kib(void)
{
        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return -1;
        char line[256];
        long v = -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmHWM: %ld kB", &v) == 1)
                        break;
        fclose(f);
        return v;
}

/* Reset the peak (Linux 4.0+); the next VmHWM is the peak from now on. */
static void reset_hwm(void)
{
        int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
                (void)!write(fd, "5", 1);
                close(fd);
        }
}

static int64_t file_size(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static int run(char **argv)
{
        _cleanup_free_ char *out = NULL;
        int r = process_run_capture(argv, &out);
        if (r < 0)
                fprintf(stderr, "%s failed: %s\n", argv[0], out ? out : strerror(-r));
        return r;
}

static double mbps(int64_t bytes, int64_t ms)
{
        return ms > 0 ? (double)bytes / (1024.0 * 1024.0) / ((double)ms / 1000.0) : 0;
}

#define RESTORE_MEMBERS 3

/* gitcd's apply of a new cluster restored from snapshot in that bootstrap mode: ms or -1. */
static int64_t restore_cluster(const char *version, const char *snapshot, const char *mode)
{
        bench_world w;
        bench_world_open(&w, "gitcd-bench-restore");
        _cleanup_free_ char *body = xasprintf("  replicas: %d\n  version: \"%s\"\n"
                                              "  progressDeadlineSeconds: 1200\n"
                                              "  storage:\n    size: 8Gi\n"
                                              "  options:\n    quotaBackendBytes: 8Gi\n"
                                              "  bootstrap:\n    mode: %s\n    restore:\n"
                                              "      source:\n        local:\n"
                                              "          path: %s\n",
                                              RESTORE_MEMBERS, version, mode, snapshot);
        bench_world_write_spec(&w, "copy", body);
        int64_t ms = bench_world_converge(&w, 1200000);
        bench_world_close(&w);
        return ms;
}

/* size_mib of values written by WRITERS threads; -1 (printed) when etcd refused them. */
static int fill_cluster(harness_cluster *hc, const char *version, long size_mib)
{
        /* etcd's default quota is 2 GiB: make room for bigger databases. */
        int n = (int)(size_mib * 1024 * 1024 / VALUE_SIZE);
        printf("etcd %s, one member; filling %ld MiB (%d values of %d KiB) ...\n", version,
               size_mib, n, VALUE_SIZE / 1024);
        fflush(stdout);
        int64_t t0 = now_mono_ms();
        fill f[WRITERS];
        for (int i = 0; i < WRITERS; i++) {
                f[i] = (fill){.endpoints = hc->endpoints,
                              .from = (int)((int64_t)n * i / WRITERS),
                              .to = (int)((int64_t)n * (i + 1) / WRITERS)};
                pthread_create(&f[i].thread, NULL, fill_main, &f[i]);
        }
        int failed = 0;
        for (int i = 0; i < WRITERS; i++) {
                pthread_join(f[i].thread, NULL);
                failed |= f[i].failed;
        }
        if (failed) {
                fprintf(stderr, "filling failed (is the quota big enough? etcd's default is "
                                "2 GiB)\n");
                return -1;
        }
        printf("filled in %.1f s\n\n", (double)(now_mono_ms() - t0) / 1000.0);
        return 0;
}

/* What one run measured. */
typedef struct bench_times {
        int64_t bytes;
        int64_t gitcd_save_ms, ctl_save_ms, gitcd_restore_ms, check_ms, status_ms, tool_restore_ms;
        long hwm_before, hwm_save, hwm_unpack; /* peak resident memory, KiB */
} bench_times;

/* The figures of a run: seconds and MB/s of each way, and gitcd's peak memory. */
static void print_times(const bench_times *t, const snapshot_status *st, const char *tool)
{
        double mib = (double)t->bytes / (1024.0 * 1024.0);
        printf("snapshot: %.0f MiB (revision %lld, %lld keys)\n\n", mib, (long long)st->revision,
               (long long)st->total_keys);
        printf("%-44s %9s %9s\n", "", "seconds", "MB/s");
        printf("%-44s %9.2f %9.1f\n", "save     gitcd (stream, trailer checked)",
               (double)t->gitcd_save_ms / 1000.0, mbps(t->bytes, t->gitcd_save_ms));
        printf("%-44s %9.2f %9.1f\n", "save     etcdctl snapshot save",
               (double)t->ctl_save_ms / 1000.0, mbps(t->bytes, t->ctl_save_ms));
        printf("%-44s %9.2f %9.1f\n", "restore  gitcd (all checks + etcd's tool)",
               (double)t->gitcd_restore_ms / 1000.0, mbps(t->bytes, t->gitcd_restore_ms));
        printf("%-44s %9.2f %9.1f\n", "           of which: etcd's trailer checked",
               (double)t->check_ms / 1000.0, mbps(t->bytes, t->check_ms));
        printf("%-44s %9.2f %9.1f\n", "           of which: snapshot status",
               (double)t->status_ms / 1000.0, mbps(t->bytes, t->status_ms));
        printf("%-44s %9.2f %9.1f\n",
               tool[strlen(tool) - 1] == 'l' && strstr(tool, "etcdutl")
                   ? "restore  etcdutl snapshot restore"
                   : "restore  etcdctl snapshot restore",
               (double)t->tool_restore_ms / 1000.0, mbps(t->bytes, t->tool_restore_ms));
        printf("\ngitcd peak resident memory (VmHWM): %ld KiB before, %ld KiB while streaming the "
               "snapshot, %ld KiB while checking it (a %.0f MiB snapshot)\n",
               t->hwm_before, t->hwm_save, t->hwm_unpack, mib);
}

/* etcd's tool alone restores snapshot_file into data_dir: how long it took, or -1. */
static int64_t tool_restore(char *tool, const char *snapshot_file, const char *data_dir)
{
        char *restore_argv[] = {tool,
                                "snapshot",
                                "restore",
                                (char *)snapshot_file,
                                "--data-dir",
                                (char *)data_dir,
                                "--name",
                                "bench-0",
                                "--initial-cluster",
                                "bench-0=http://127.0.0.1:2380",
                                "--initial-advertise-peer-urls",
                                "http://127.0.0.1:2380",
                                NULL};
        int64_t t0 = now_mono_ms();
        if (run(restore_argv) < 0)
                return -1;
        return now_mono_ms() - t0;
}

/* A new 3-member cluster from this snapshot, both ways spec.bootstrap.restore knows. */
static void print_restore_cluster(const char *version, const char *snapshot_file)
{
        printf("\na new cluster of %d members from this snapshot (spec.bootstrap.restore), apply "
               "until every member is a healthy voter:\n",
               RESTORE_MEMBERS);
        int64_t t_static = restore_cluster(version, snapshot_file, "static");
        int64_t t_learners = restore_cluster(version, snapshot_file, "learners");
        printf("%-44s %9.2f\n", "  bootstrap.mode: static (every member)", t_static / 1000.0);
        printf("%-44s %9.2f\n", "  bootstrap.mode: learners (seed + learners)",
               t_learners / 1000.0);
        if (t_static > 0 && t_learners > 0)
                printf("%-44s %9.2fx\n", "  learners / static",
                       (double)t_learners / (double)t_static);
}

#define CLI_RUNS 20
static char *version_etcdctl; /* etcdctl of the version measured */

static int run_quiet(char *const argv[], char *const envp[])
{
        pid_t pid = fork();
        if (pid == 0) {
                int fd = open("/dev/null", O_RDWR);
                if (fd >= 0) {
                        dup2(fd, 0);
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                if (envp)
                        execve(argv[0], argv, envp);
                else
                        execv(argv[0], argv);
                _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid)
                return -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int64_t timed_us(char *const argv[], char *const envp[])
{
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int r = run_quiet(argv, envp);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (r != 0)
                return -1;
        return (int64_t)(b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
}

static int cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

static double median_ms(int64_t *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp_i64);
        return (double)v[n / 2] / 1000.0;
}

/* The newest regular file under dir (recursively), its size; 0 when none. */
static off_t newest_size(const char *dir)
{
        _cleanup_free_ char *cmd =
            xasprintf("find '%s' -type f -printf '%%T@ %%s\\n' | sort -n | tail -1", dir);
        FILE *f = popen(cmd, "r");
        double t = 0;
        long long size = 0;
        if (f) {
                if (fscanf(f, "%lf %lld", &t, &size) != 2)
                        size = 0;
                pclose(f);
        }
        return (off_t)size;
}

/* The medians of the cli runs, the largest ratios and the load they ran under. */
static void print_cli_summary(int64_t *g, int64_t *e, int64_t *b, const double *ratio,
                              const double *ratio_b, bool before)
{
        double gm = median_ms(g, CLI_RUNS), em = median_ms(e, CLI_RUNS);
        double rmax = 0, bmax = 0;
        for (int r = 0; r < CLI_RUNS; r++) {
                rmax = ratio[r] > rmax ? ratio[r] : rmax;
                bmax = ratio_b[r] > bmax ? ratio_b[r] : bmax;
        }
        printf("median %5.1f ms %7.1f ms %27.2fx   (ratio = gitcd / etcdctl)\n", gm, em, gm / em);
        printf("largest per-run ratio %.2fx\n", rmax);
        if (before) {
                double bm = median_ms(b, CLI_RUNS);
                printf("before: median %.1f ms (%.2fx etcdctl), largest per-run ratio %.2fx; "
                       "gitcd / before %.2f\n",
                       bm, bm / em, bmax, gm / bm);
        }
        double load[3] = {0};
        if (getloadavg(load, 3) == 3)
                printf("load average %.2f %.2f %.2f\n", load[0], load[1], load[2]);
        printf("\n");
}

/* gitcd snapshot save against etcdctl snapshot save, CLI_RUNS times, on a small database. */
static int bench_cli(const char *version)
{
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-bench-snapcli");
        _cleanup_free_ char *src = path_join(dir, "src");
        _cleanup_free_ char *state = path_join(dir, "state");
        _cleanup_free_ char *to = path_join(dir, "to");
        _cleanup_free_ char *ctl_file = path_join(dir, "etcdctl.db");
        _cleanup_free_ char *spec_path = path_join(src, "etcd.yaml");
        _cleanup_free_ char *spec = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: snap\n  namespace: default\n"
                                              "spec:\n  replicas: 3\n  version: \"%s\"\n",
                                              version);
        (void)mkdir_p(src, 0755);
        (void)mkdir_p(to, 0755);
        (void)write_file_atomic(spec_path, spec, strlen(spec), 0644);
        _cleanup_free_ char *etcd_dir = harness_etcd_dir();
        _cleanup_free_ char *env_state = xasprintf("GITCD_STATE_DIR=%s", state);
        _cleanup_free_ char *env_etcd = xasprintf("GITCD_ETCD_DIR=%s", etcd_dir);
        char *envp[] = {env_state, env_etcd, "PATH=/usr/bin:/bin", NULL};
        char *apply[] = {GITCD_BIN, "apply", "--source", src, "-q", NULL};
        int rc = 1;
        char *url = NULL, *ep = NULL;
        if (run_quiet(apply, envp) != 0) {
                fprintf(stderr, "gitcd apply failed\n");
                goto out;
        }
        char *mj = xasprintf("%s/clusters/default/snap/snap-0/member.json", state);
        json_t *m = json_load_file(mj, 0, NULL);
        free(mj);
        url = xstrdup_null(json_string_value(json_object_get(m, "clientURL")));
        json_decref(m);
        if (!url)
                goto out;
        etcd_client_opts co = {.endpoints = url};
        etcd_client *c = NULL;
        if (etcd_client_new(&co, &c) < 0)
                goto out;
        char value[1024];
        memset(value, 'x', sizeof(value));
        for (int i = 0; i < 30; i++) {
                char key[32];
                snprintf(key, sizeof(key), "small/%02d", i);
                (void)etcd_put(c, key, value, sizeof(value), NULL);
        }
        etcd_client_free(c);

        ep = xasprintf("--endpoints=%s", url);
        char *save[] = {GITCD_BIN, "snapshot", "save", "default/snap", "--to", to, NULL};
        char *ctl[] = {version_etcdctl, ep, "snapshot", "save", ctl_file, NULL};
        /* GITCD_BENCH_BEFORE: another gitcd binary (the build before a change), run too */
        const char *before = getenv("GITCD_BENCH_BEFORE");
        char *save_before[] = {(char *)before, "snapshot", "save", "default/snap",
                               "--to",         to,         NULL};
        int64_t g[CLI_RUNS], e[CLI_RUNS], b[CLI_RUNS];
        double ratio[CLI_RUNS], ratio_b[CLI_RUNS];
        printf("gitcd snapshot save against etcdctl snapshot save, etcd %s, a small database, "
               "same disk%s\n",
               version, before ? ", and the gitcd of GITCD_BENCH_BEFORE" : "");
        printf("%4s %10s %10s %12s %12s %7s", "run", "gitcd", "etcdctl", "gitcd MB/s",
               "etcdctl MB/s", "ratio");
        if (before)
                printf(" %10s %7s", "before", "ratio");
        printf("\n");
        for (int r = 0; r < CLI_RUNS; r++) {
                /* the order turns each run, so neither binary always follows etcdctl */
                b[r] = before && r % 2 ? timed_us(save_before, envp) : 0;
                g[r] = timed_us(save, envp);
                off_t gsize = newest_size(to);
                if (before && r % 2 == 0)
                        b[r] = timed_us(save_before, envp);
                e[r] = timed_us(ctl, NULL);
                struct stat st = {0};
                (void)stat(ctl_file, &st);
                if (g[r] < 0 || e[r] < 0 || b[r] < 0) {
                        printf("%4d failed (gitcd %lld us, etcdctl %lld us, before %lld us)\n",
                               r + 1, (long long)g[r], (long long)e[r], (long long)b[r]);
                        goto out;
                }
                ratio[r] = (double)g[r] / (double)e[r];
                ratio_b[r] = (double)b[r] / (double)e[r];
                printf("%4d %7.1f ms %7.1f ms %12.2f %12.2f %6.2fx", r + 1, (double)g[r] / 1000.0,
                       (double)e[r] / 1000.0, (double)gsize / (double)g[r],
                       (double)st.st_size / (double)e[r], ratio[r]);
                if (before)
                        printf(" %7.1f ms %6.2fx", (double)b[r] / 1000.0, ratio_b[r]);
                printf("\n");
                fflush(stdout);
        }
        print_cli_summary(g, e, b, ratio, ratio_b, before != NULL);
        rc = 0;
out:
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *pidf =
                    xasprintf("%s/clusters/default/snap/snap-%d/pid", state, i);
                char *data = NULL;
                size_t len;
                if (read_file(pidf, 64, &data, &len) == 0) {
                        kill((pid_t)atoi(data), SIGKILL);
                        free(data);
                }
        }
        usleep(200 * 1000);
        (void)rm_rf(dir);
        free(url);
        free(ep);
        return rc;
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        if (argc > 1 && streq(argv[1], "cli")) {
                const char *v = argc > 2 ? argv[2] : "3.5.16";
                if (!harness_have_etcd(v)) {
                        fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", v);
                        return 77;
                }
                version_etcdctl = harness_etcd_path(v, "etcdctl");
                return bench_cli(v);
        }
        long size_mib = argc > 1 ? strtol(argv[1], NULL, 10) : 1024;
        const char *version = argc > 2 ? argv[2] : "3.5.16";
        if (size_mib <= 0 || size_mib > 7 * 1024) {
                fprintf(stderr, "usage: bench-snapshot [SIZE-MIB (1..7168)] [VERSION]\n");
                return 2;
        }
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", version);
                return 77;
        }
        log_set_level(LOG_ERROR);
        harness_opts o = {.version = version, .members = 1};
        harness_cluster *hc = NULL;
        if (harness_cluster_start(&o, &hc) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return 1;
        }
        if (fill_cluster(hc, version, size_mib) < 0) {
                harness_cluster_free(hc);
                return 1;
        }

        bench_times bt = {0};
        _cleanup_free_ char *dir = xasprintf("%s/bench-snapshot", hc->root_dir);
        (void)mkdir_p(dir, 0700);
        _cleanup_free_ char *gitcd_file = path_join(dir, "gitcd.db");
        _cleanup_free_ char *ctl_file = path_join(dir, "etcdctl.db");

        /* save: gitcd's streaming client */
        etcd_client_opts co = {.endpoints = hc->endpoints};
        etcd_client *c = NULL;
        if (etcd_client_new(&co, &c) < 0)
                return 1;
        reset_hwm();
        bt.hwm_before = vm_hwm_kib();
        etcd_snapshot_info info = {0};
        int64_t t0 = now_mono_ms();
        int r = etcd_snapshot_save(c, NULL, gitcd_file, &info);
        bt.gitcd_save_ms = now_mono_ms() - t0;
        bt.hwm_save = vm_hwm_kib();
        if (r < 0) {
                fprintf(stderr, "gitcd snapshot failed: %s\n", etcd_client_last_error(c));
                return 1;
        }
        etcd_client_free(c);

        /* save: etcdctl */
        _cleanup_free_ char *ep = xasprintf("--endpoints=%s", hc->endpoints);
        char *save_argv[] = {hc->etcdctl_bin, ep, "snapshot", "save", ctl_file, NULL};
        t0 = now_mono_ms();
        if (run(save_argv) < 0)
                return 1;
        bt.ctl_save_ms = now_mono_ms() - t0;
        bt.bytes = file_size(gitcd_file);

        /* restore: gitcd (checks, then etcd's tool) */
        _cleanup_free_ char *tool = NULL;
        if (snapshot_etcd_tool(NULL, version, &tool) < 0) {
                fprintf(stderr, "no etcd tool for %s\n", version);
                return 1;
        }
        _cleanup_free_ char *raw = path_join(dir, "unpacked.db");
        _cleanup_free_ char *data1 = path_join(dir, "restored-gitcd");
        _cleanup_free_ char *data2 = path_join(dir, "restored-tool");
        _cleanup_free_ char *err = NULL;
        reset_hwm();
        t0 = now_mono_ms();
        int64_t unpacked = 0;
        /* as spec.bootstrap.restore does: an uncompressed snapshot is checked in place */
        bool gz = snapshot_is_gzip(gitcd_file);
        r = snapshot_unpack(gitcd_file, gz ? raw : NULL, &unpacked, &err);
        if (!gz) {
                free(raw);
                raw = xstrdup(gitcd_file);
        }
        bt.check_ms = now_mono_ms() - t0;
        bt.hwm_unpack = vm_hwm_kib();
        snapshot_status st = {0};
        if (r >= 0)
                r = snapshot_file_status(tool, raw, &st, &err);
        bt.status_ms = now_mono_ms() - t0 - bt.check_ms;
        snapshot_restore_opts ro = {.tool = tool,
                                    .snapshot = raw,
                                    .data_dir = data1,
                                    .name = "bench-0",
                                    .peer_url = "http://127.0.0.1:2380",
                                    .token = "bench"};
        if (r >= 0)
                r = snapshot_restore_dir(&ro, &err);
        bt.gitcd_restore_ms = now_mono_ms() - t0;
        if (r < 0) {
                fprintf(stderr, "gitcd restore failed: %s\n", err);
                return 1;
        }
        /* restore: etcd's tool alone */
        bt.tool_restore_ms = tool_restore(tool, ctl_file, data2);
        if (bt.tool_restore_ms < 0)
                return 1;

        print_times(&bt, &st, tool);

        print_restore_cluster(version, gitcd_file);
        (void)rm_rf(dir);
        harness_cluster_free(hc);
        return 0;
}
