/*
 * bench-many: one daemon, many clusters. Prints figures and ratios against
 * the targets (1,000 clusters idle under 5% of a core and under 200 MB);
 * never fails on timing.
 *
 *   real       `gitcd run` with N single-member clusters on the local target
 *              (real etcd): time until all converge, then the daemon's own CPU
 *              over an idle period (utime + stime from /proc/<pid>/stat; the
 *              members are processes of their own) and its resident memory
 *              (VmRSS), once with the old cadence (every cluster observed about
 *              once a second: --observe-interval 1s) and once with the default.
 *   simulated  the driver in this process with its worker threads, over a fleet
 *              of fake worlds (tests/fake/fleet.h: an in-memory target and etcd,
 *              no processes or sockets): M clusters, the same figures; the fake
 *              worlds' own resident pages are subtracted from the memory; and what
 *              one idle pass cost: CPU, SQL statements (prepared afresh), write
 *              transactions and those that wrote, rows changed (state_counters_get).
 *
 * usage: bench-many [--real N] [--simulated M[,M...]] [--idle S] [--version V]
 *        (defaults: --real 100 --simulated 1000,10000 --idle 60 --version 3.5.16;
 *        --real 0 skips the real part)
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reconciler/driver.h"
#include "targets/local.h"
#include "targets/locked.h"
#include "tests/fake/fleet.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define TARGET_CLUSTERS 1000
#define TARGET_CPU      0.05 /* of a core, for TARGET_CLUSTERS idle */
#define TARGET_RSS_MB   200.0

static char root[] = "/tmp/gitcd-bench-many-XXXXXX";
static pid_t daemon_pid;

static void write_spec(const char *dir, const char *name, const char *version)
{
        _cleanup_free_ char *path = xasprintf("%s/%s.yaml", dir, name);
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: %s\nspec:\n  replicas: 1\n"
                                              "  version: \"%s\"\n",
                                              name, version);
        if (write_file_atomic(path, text, strlen(text), 0644) < 0) {
                fprintf(stderr, "cannot write %s\n", path);
                exit(1);
        }
}

/* utime + stime of a process, in seconds. */
static double proc_cpu_s(pid_t pid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%d/stat", (int)pid);
        char *text = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &text, &len) < 0)
                return -1;
        const char *p = strrchr(text, ')');
        unsigned long long ut = 0, st = 0;
        /* after the command: state and 10 fields, then utime and stime */
        if (!p ||
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
                ut = st = 0;
        free(text);
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* VmRSS of a process, in MB. */
static double proc_rss_mb(pid_t pid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%d/status", (int)pid);
        char *text = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &text, &len) < 0)
                return -1;
        const char *p = strstr(text, "VmRSS:");
        long kb = p ? strtol(p + 6, NULL, 10) : 0;
        free(text);
        return (double)kb / 1024.0;
}

/*
 * Figures, and the same scaled to TARGET_CLUSTERS: CPU in proportion to the
 * clusters; memory as the base (the process with no cluster) plus the
 * clusters' share.
 */
static void report(const char *what, size_t n, double converge_s, double cpu_core, double rss_mb,
                   double base_mb)
{
        double per_cluster = cpu_core / (double)n;
        double at_target = per_cluster * TARGET_CLUSTERS;
        double rss_per = (rss_mb - base_mb) / (double)n;
        double rss_at = base_mb + rss_per * TARGET_CLUSTERS;
        printf("%-36s %6zu clusters: converged in %7.1f s; idle %6.2f%% of a core (%.4f%% per "
               "cluster); RSS %7.1f MB (%.1f MB with no cluster, %.3f MB per cluster)\n",
               what, n, converge_s, cpu_core * 100, per_cluster * 100, rss_mb, base_mb, rss_per);
        printf("%-36s %6s           at %d clusters: %6.2f%% of a core (%.2fx the %.0f%% "
               "target), %6.1f MB (%.2fx the %.0f MB target)\n",
               "", "", TARGET_CLUSTERS, at_target * 100, at_target / TARGET_CPU, TARGET_CPU * 100,
               rss_at, rss_at / TARGET_RSS_MB, TARGET_RSS_MB);
        fflush(stdout);
}

/* ---- real clusters through `gitcd run` ---------------------------------- */

/* Count the clusters the daemon's log reports converged (each once). */
static size_t converged_in_log(const char *log_path, size_t n)
{
        char *text = NULL;
        size_t len = 0;
        if (read_file(log_path, 1 << 30, &text, &len) < 0)
                return 0;
        bool *seen = xcalloc(n + 1, sizeof(bool));
        size_t count = 0;
        for (const char *p = text; (p = strstr(p, "default/c")); p++) {
                char *end = NULL;
                long i = strtol(p + 9, &end, 10);
                if (end && strncmp(end, ": converged", 11) == 0 && i >= 0 && (size_t)i < n &&
                    !seen[i]) {
                        seen[i] = true;
                        count++;
                }
        }
        free(seen);
        free(text);
        return count;
}

static void stop_daemon(void)
{
        if (daemon_pid > 0) {
                kill(daemon_pid, SIGTERM);
                (void)waitpid(daemon_pid, NULL, 0);
                daemon_pid = 0;
        }
}

/* Stop every member the runs left (the local target keeps them running past gitcd). */
static void stop_members(const char *state_dir, size_t n)
{
        local_target_opts lo = {.state_dir = state_dir};
        target *t = NULL;
        if (local_target_new(&lo, &t) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = xasprintf("c%zu", i);
                etcd_cluster c = {.name = name, .namespace_ = "default"};
                char **names = NULL;
                size_t m = 0;
                if (t->ops->list_members(t, "default", name, &names, &m) < 0)
                        continue;
                for (size_t j = 0; j < m; j++) {
                        (void)t->ops->remove_member(t, &c, names[j], false);
                        free(names[j]);
                }
                free(names);
        }
        target_free(t);
}

static void cleanup(void)
{
        stop_daemon();
}

static void on_signal(int sig)
{
        stop_daemon();
        signal(sig, SIG_DFL);
        raise(sig);
}

/* One daemon over the clusters of src; measured and stopped. */
static void run_daemon(const char *label, const char *state_dir, const char *src, size_t n,
                       const char *observe, int idle_s, double base_mb)
{
        _cleanup_free_ char *state = path_join(state_dir, "state.db");
        _cleanup_free_ char *log_path = xasprintf("%s/daemon-%s.log", root, observe);
        int64_t t0 = now_mono_ms();
        daemon_pid = fork();
        if (daemon_pid == 0) {
                FILE *f = freopen(log_path, "w", stderr);
                (void)f;
                execl(GITCD_BIN, "gitcd", "run", "--source", src, "--state", state, "--interval",
                      "1h", "--observe-interval", observe, (char *)NULL);
                _exit(127);
        }
        while (converged_in_log(log_path, n) < n) {
                if (now_mono_ms() - t0 > 30 * 60 * 1000 || waitpid(daemon_pid, NULL, WNOHANG)) {
                        fprintf(stderr, "%s: not every cluster converged (see %s)\n", label,
                                log_path);
                        stop_daemon();
                        return;
                }
                usleep(200 * 1000);
        }
        double converge_s = (double)(now_mono_ms() - t0) / 1000;
        /* Let the passes that follow convergence settle before measuring idle. */
        sleep(3);
        double c0 = proc_cpu_s(daemon_pid);
        int64_t m0 = now_mono_ms();
        sleep((unsigned)idle_s);
        double cpu = (proc_cpu_s(daemon_pid) - c0) / ((double)(now_mono_ms() - m0) / 1000);
        double rss = proc_rss_mb(daemon_pid);
        stop_daemon();
        report(label, n, converge_s, cpu, rss, base_mb);
}

/* The resident memory of a daemon with no cluster. */
static double empty_daemon_rss(void)
{
        _cleanup_free_ char *src = path_join(root, "empty");
        _cleanup_free_ char *state = path_join(root, "empty/state.db");
        (void)mkdir_p(src, 0755);
        daemon_pid = fork();
        if (daemon_pid == 0) {
                FILE *f = freopen("/dev/null", "w", stderr);
                (void)f;
                execl(GITCD_BIN, "gitcd", "run", "--source", src, "--state", state, "--interval",
                      "1h", (char *)NULL);
                _exit(127);
        }
        sleep(3);
        double rss = proc_rss_mb(daemon_pid);
        stop_daemon();
        return rss;
}

static void bench_real(size_t n, int idle_s, const char *version)
{
        _cleanup_free_ char *src = path_join(root, "source");
        _cleanup_free_ char *state_dir = path_join(root, "state");
        (void)mkdir_p(src, 0755);
        (void)mkdir_p(state_dir, 0755);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = xasprintf("c%zu", i);
                write_spec(src, name, version);
        }
        printf("gitcd run, %zu single-member clusters on the local target (etcd %s), idle "
               "measured over %d s:\n",
               n, version, idle_s);
        double base = empty_daemon_rss();
        run_daemon("  observed every ~1 s (old cadence)", state_dir, src, n, "1s", idle_s, base);
        run_daemon("  default cadence (30 s, jittered)", state_dir, src, n, "30s", idle_s, base);
        stop_members(state_dir, n);
}

/* ---- simulated clusters: the driver over a fleet of fake worlds ---------- */

static double self_cpu_s(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* One turn of a daemon's loop: step, then wait for a pass in flight or the next due time. */
static driver_summary turn(driver *d)
{
        driver_summary s = {0};
        (void)driver_step(d, &s);
        int w = MIN(s.wait_ms, 10000);
        if (s.busy)
                (void)driver_wait(MIN(w, 250));
        else if (w > 0)
                usleep((useconds_t)w * 1000);
        return s;
}

static _Atomic uint64_t passes;

static void pass_counted(const char *cluster, const pass_result *res, int64_t duration_ms,
                         void *userdata)
{
        (void)cluster, (void)res, (void)duration_ms, (void)userdata;
        atomic_fetch_add_explicit(&passes, 1, memory_order_relaxed);
}

static void bench_simulated(size_t n, int idle_s, const char *version)
{
        _cleanup_free_ char *dir = xasprintf("%s/sim-%zu", root, n);
        _cleanup_free_ char *src = path_join(dir, "source");
        _cleanup_free_ char *db_path = path_join(dir, "state.db");
        (void)mkdir_p(src, 0755);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = xasprintf("c%zu", i);
                write_spec(src, name, version);
        }
        double rss0 = proc_rss_mb(getpid());
        state_db *db = NULL;
        if (state_open(db_path, STATE_OPEN_READ_WRITE, &db) < 0) {
                fprintf(stderr, "state: %s\n", state_last_error());
                exit(1);
        }
        fake_fleet *fleet = NULL;
        target *inner = NULL, *t = NULL;
        (void)fake_fleet_new(&fleet, &inner);
        (void)target_locked_new(inner, &t);
        source_opts so = {.url_or_path = src, .plain_directory = true};
        source *s = NULL;
        char *err = NULL;
        if (source_open(&so, &s, &err) < 0) {
                fprintf(stderr, "source: %s\n", err);
                exit(1);
        }
        driver_opts o = {.db = db,
                         .target = t,
                         .src = s,
                         .workers = DRIVER_WORKERS_DEFAULT,
                         .etcd = &fake_fleet_etcd_ops,
                         .etcd_userdata = fleet,
                         .wall_ms = fake_fleet_clock_ms,
                         .mono_ms = fake_fleet_clock_ms,
                         .pass_done = pass_counted};
        driver *d = NULL;
        if (driver_new(&o, &d) < 0)
                exit(1);
        int64_t t0 = now_mono_ms();
        diag_list diags = DIAG_LIST_INIT;
        (void)driver_sync(d, &diags);
        diag_list_release(&diags);
        driver_summary sum;
        do
                sum = turn(d);
        while (sum.converged < (int)n && now_mono_ms() - t0 < 60 * 60 * 1000);
        double converge_s = (double)(now_mono_ms() - t0) / 1000;
        for (int i = 0; i < 20 && turn(d).busy; i++)
                ;
        state_counters k0, k1;
        state_counters_get(&k0);
        uint64_t p0 = atomic_load(&passes);
        double c0 = self_cpu_s();
        int64_t m0 = now_mono_ms();
        while (now_mono_ms() - m0 < (int64_t)idle_s * 1000)
                (void)turn(d);
        double cpu_s = self_cpu_s() - c0;
        double cpu = cpu_s / ((double)(now_mono_ms() - m0) / 1000);
        state_counters_get(&k1);
        double np = (double)(atomic_load(&passes) - p0);
        size_t worlds_bytes = 0;
        (void)fake_fleet_worlds(fleet, &worlds_bytes);
        double rss = proc_rss_mb(getpid()) - (double)worlds_bytes / (1024.0 * 1024.0);
        report("  driver + fake target and etcd", n, converge_s, cpu, rss, rss0);
        printf("  %36s (fake worlds' own %.1f MB not counted; %d workers)\n", "",
               (double)worlds_bytes / (1024.0 * 1024.0), DRIVER_WORKERS_DEFAULT);
        if (np > 0)
                printf("  %36s an idle pass (%.0f passes): %.3f ms of CPU, %.1f SQL statements "
                       "(%.2f prepared), %.3f write transactions, %.3f that wrote, %.2f rows "
                       "changed\n",
                       "", np, cpu_s * 1000 / np, (double)(k1.statements - k0.statements) / np,
                       (double)(k1.prepared - k0.prepared) / np,
                       (double)(k1.transactions - k0.transactions) / np,
                       (double)(k1.writes - k0.writes) / np,
                       (double)(k1.changes - k0.changes) / np);
        driver_free(d);
        source_free(s);
        target_free(t);
        fake_fleet_free(fleet);
        state_close(db);
}

int main(int argc, char **argv)
{
        size_t real = 100;
        const char *simulated = "1000,10000";
        int idle_s = 60;
        const char *version = "3.5.16";
        for (int i = 1; i + 1 < argc; i += 2) {
                if (streq(argv[i], "--real"))
                        real = strtoul(argv[i + 1], NULL, 10);
                else if (streq(argv[i], "--simulated"))
                        simulated = argv[i + 1];
                else if (streq(argv[i], "--idle"))
                        idle_s = atoi(argv[i + 1]);
                else if (streq(argv[i], "--version"))
                        version = argv[i + 1];
        }
        if (!mkdtemp(root))
                return 1;
        atexit(cleanup);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        log_set_level(LOG_ERROR);

        if (real > 0)
                bench_real(real, idle_s, version);
        printf("the driver over simulated clusters (no processes, no sockets), idle measured over "
               "%d s:\n",
               idle_s);
        _cleanup_free_ char *list = xstrdup(simulated);
        for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save))
                if (strtoul(tok, NULL, 10) > 0)
                        bench_simulated(strtoul(tok, NULL, 10), idle_s, version);
        _cleanup_free_ char *rm = xasprintf("rm -rf '%s'", root);
        (void)system(rm);
        return 0;
}
