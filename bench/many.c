/*
 * bench-many: one daemon, many clusters. Prints figures and ratios against
 * the targets (1,000 clusters idle under 3% of a core and under 150 MB);
 * never fails on timing.
 *
 *   real       `gitcd run` with N single-member clusters on the local target
 *              (real etcd): time until all converge, then the daemon's own CPU
 *              over an idle period (utime + stime from /proc/<pid>/stat; the
 *              members are processes of their own) and its resident memory
 *              (VmRSS), once with the old cadence (every cluster observed about
 *              once a second: --observe-interval 1s) and once with the default;
 *              each also as the CPU of one idle pass and what that comes to for
 *              1,000 clusters at the default cadence (from the ~1 s cadence: many
 *              passes over few members, on a machine their etcd processes do not
 *              load as a thousand would).
 *   simulated  the driver in this process with its worker threads, over a fleet
 *              of fake worlds (tests/fake/fleet.h: an in-memory target and etcd,
 *              no processes or sockets): M clusters, the same figures; the fake
 *              worlds' own resident pages are subtracted from the memory; and what
 *              one idle pass cost: CPU, SQL statements (prepared afresh), write
 *              transactions and those that wrote, rows changed (state_counters_get).
 *
 *   connection what one etcd connection costs the process (etcd/pool.h), over
 *              plain HTTP/2 and over TLS against one real member: the heap
 *              bytes of --conns idle connections (each a TLS identity of its
 *              own, so none is shared), and the CPU of a call on a kept
 *              connection against a call that opens a new one (what an idle
 *              time shorter than the observe interval would cost every pass),
 *              alternating, medians of rounds.
 *
 * usage: bench-many [--real N] [--simulated M[,M...]] [--idle S] [--version V]
 *                   [--conns C] [--baseline GITCD] [--gitcd GITCD] [--rounds R]
 *                   [--fast 0|1] [--options QUOTA,SNAPSHOTCOUNT] [--tls 0|1]
 *        (defaults: --real 100 --simulated 1000,10000 --idle 60 --version 3.5.16
 *        --conns 200; --real 0 skips the real part, --conns 0 the connection part;
 *        --baseline runs an earlier gitcd binary in turn with this one on the same
 *        members and prints the ratios; --gitcd measures that binary instead of
 *        the one built beside the bench (a copy, so a rebuild during a long run
 *        changes nothing); --rounds R runs the two in turn R times (at most 16),
 *        the order alternating, and prints the median ratios; --fast 0 measures
 *        the default cadence only, not the ~1 s one; --options sets each real member's
 *        quotaBackendBytes and snapshotCount; --tls 1 makes every real cluster serve
 *        clients and peers over TLS, tls.provider auto)
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd/client.h"
#include "etcd/pool.h"
#include "reconciler/driver.h"
#include "targets/local.h"
#include "targets/locked.h"
#include "tests/fake/fleet.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define TARGET_CLUSTERS 1000
#define TARGET_CPU      0.03 /* of a core, for TARGET_CLUSTERS idle */
#define TARGET_RSS_MB   150.0

static char root[] = "/tmp/gitcd-bench-many-XXXXXX";
static pid_t daemon_pid;

/*
 * --options: each real member's etcd options, "QUOTA,SNAPSHOTCOUNT"
 * (spec.options.quotaBackendBytes and snapshotCount; "" leaves etcd's).
 */
static const char *spec_options = "";

/* --tls 1: each real cluster serves clients and peers over TLS (tls.provider auto). */
static bool spec_tls;

static void write_spec(const char *dir, const char *name, const char *version)
{
        _cleanup_free_ char *path = xasprintf("%s/%s.yaml", dir, name);
        long long quota = 0, snapcount = 0;
        _cleanup_free_ char *options = NULL;
        if (sscanf(spec_options, "%lld,%lld", &quota, &snapcount) == 2 && quota > 0 &&
            snapcount > 0)
                options = xasprintf("  options:\n    quotaBackendBytes: %lld\n"
                                    "    snapshotCount: %lld\n",
                                    quota, snapcount);
        const char *tls = spec_tls
                              ? "  tls:\n    provider: auto\n    client:\n      enabled: true\n"
                                "    peer:\n      enabled: true\n"
                              : "";
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                              "metadata:\n  name: %s\nspec:\n  replicas: 1\n"
                                              "  version: \"%s\"\n%s%s",
                                              name, version, options ? options : "", tls);
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
                   double base_mb, int cadence_s)
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
        /*
         * The same from the CPU of one idle pass: each cluster is observed about
         * once per cadence, so a fast cadence measures many passes on few members
         * (a machine not loaded by a thousand etcd processes) for the default one.
         */
        if (cadence_s > 0) {
                double pass_ms = cpu_core * 1000.0 * cadence_s / (double)n;
                double at_default = pass_ms / 1000.0 * TARGET_CLUSTERS / 30.0;
                printf("%-36s %6s           an idle pass: %.3f ms of CPU; at %d clusters observed "
                       "every 30 s: %.2f%% of a core (%.2fx the target)\n",
                       "", "", pass_ms, TARGET_CLUSTERS, at_default * 100, at_default / TARGET_CPU);
        }
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
typedef struct daemon_figures {
        bool ok;
        double cpu_core; /* idle, of a core */
        double rss_mb;
} daemon_figures;

/* The gitcd binary measured ("before" with --baseline). */
static const char *gitcd_bin = GITCD_BIN;

static daemon_figures run_daemon(const char *label, const char *bin, const char *state_dir,
                                 const char *src, size_t n, const char *observe, int idle_s,
                                 double base_mb)
{
        _cleanup_free_ char *state = path_join(state_dir, "state.db");
        _cleanup_free_ char *log_path =
            xasprintf("%s/daemon-%s%s.log", root, observe, bin == gitcd_bin ? "" : "-before");
        /* an earlier round's log must not be read as this daemon's convergence */
        (void)unlink(log_path);
        int64_t t0 = now_mono_ms();
        daemon_pid = fork();
        if (daemon_pid == 0) {
                FILE *f = freopen(log_path, "w", stderr);
                (void)f;
                execl(bin, "gitcd", "run", "--source", src, "--state", state, "--interval", "1h",
                      "--observe-interval", observe, (char *)NULL);
                _exit(127);
        }
        while (converged_in_log(log_path, n) < n) {
                if (now_mono_ms() - t0 > 30 * 60 * 1000 || waitpid(daemon_pid, NULL, WNOHANG)) {
                        fprintf(stderr, "%s: not every cluster converged (see %s)\n",
                                label ? label : "settle", log_path);
                        stop_daemon();
                        return (daemon_figures){0};
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
        if (label)
                report(label, n, converge_s, cpu, rss, base_mb, atoi(observe));
        return (daemon_figures){.ok = true, .cpu_core = cpu, .rss_mb = rss};
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
                execl(gitcd_bin, "gitcd", "run", "--source", src, "--state", state, "--interval",
                      "1h", (char *)NULL);
                _exit(127);
        }
        sleep(3);
        double rss = proc_rss_mb(daemon_pid);
        stop_daemon();
        return rss;
}

static const char *baseline_bin; /* --baseline: an earlier gitcd, run in turn with this one */
static int rounds = 1;           /* --rounds: before and after in turn this many times */
static bool fast_cadence = true; /* --fast 0: the default cadence only */

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
        qsort(v, n, sizeof(double), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * What one member takes on disk: etcd preallocates its WAL segment (64 MB)
 * and the next one beside it, whatever the quota.
 */
#define MEMBER_DISK_MB 130
/* What the bench leaves free on the disk for everything else on the machine. */
#define DISK_MARGIN_MB (8 * 1024)

static void bench_real(size_t n, int idle_s, const char *version)
{
        struct statvfs vfs;
        if (statvfs(root, &vfs) == 0) {
                double free_mb = (double)vfs.f_bavail * (double)vfs.f_frsize / (1024.0 * 1024.0);
                double need_mb = (double)n * MEMBER_DISK_MB + DISK_MARGIN_MB;
                if (free_mb < need_mb) {
                        fprintf(stderr,
                                "%zu members need about %.0f GB on %s (%d MB each) and the bench "
                                "leaves %d GB free: %.0f GB is free; run fewer\n",
                                n, (double)n * MEMBER_DISK_MB / 1024.0, root, MEMBER_DISK_MB,
                                DISK_MARGIN_MB / 1024, free_mb / 1024.0);
                        return;
                }
        }
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
        static const struct {
                const char *label, *observe;
        } cadences[] = {{"observed every ~1 s (old cadence)", "1s"},
                        {"default cadence (30 s, jittered)", "30s"}};
        for (size_t k = 0; k < ARRAY_SIZE(cadences); k++) {
                if (k == 0 && !fast_cadence)
                        continue;
                _cleanup_free_ char *label = xasprintf("  %s", cadences[k].label);
                if (!baseline_bin) {
                        (void)run_daemon(label, gitcd_bin, state_dir, src, n, cadences[k].observe,
                                         idle_s, base);
                        continue;
                }
                /* before and after in turn on the same members, the order alternating by round */
                _cleanup_free_ char *before_label = xasprintf("  before, %s", cadences[k].label);
                /*
                 * The first daemon on members just made also pays for their first minute
                 * (etcd settling, every first pass): with rounds, one such run is not counted.
                 */
                if (rounds > 1)
                        (void)run_daemon(NULL, baseline_bin, state_dir, src, n, cadences[k].observe,
                                         MIN(idle_s, 20), base);
                double cpu_ratio[16], mem_ratio[16];
                size_t got = 0;
                for (int round = 0; round < rounds; round++) {
                        daemon_figures a = {0}, b = {0};
                        if (round % 2 == 0) {
                                b = run_daemon(before_label, baseline_bin, state_dir, src, n,
                                               cadences[k].observe, idle_s, base);
                                a = run_daemon(label, gitcd_bin, state_dir, src, n,
                                               cadences[k].observe, idle_s, base);
                        } else {
                                a = run_daemon(label, gitcd_bin, state_dir, src, n,
                                               cadences[k].observe, idle_s, base);
                                b = run_daemon(before_label, baseline_bin, state_dir, src, n,
                                               cadences[k].observe, idle_s, base);
                        }
                        if (!a.ok || !b.ok || b.cpu_core <= 0)
                                continue;
                        cpu_ratio[got] = a.cpu_core / b.cpu_core;
                        mem_ratio[got] = (a.rss_mb - base) / (b.rss_mb - base);
                        printf("  %-36s after/before: CPU %.2fx, memory per cluster %.2fx\n", "",
                               cpu_ratio[got], mem_ratio[got]);
                        got++;
                }
                if (got > 1)
                        printf("  %-36s median of %zu rounds: CPU %.2fx, memory per cluster "
                               "%.2fx\n",
                               "", got, median(cpu_ratio, got), median(mem_ratio, got));
        }
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
        report("  driver + fake target and etcd", n, converge_s, cpu, rss, rss0, 0);
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

/* ---- one etcd connection: memory, and CPU kept against reopened --------- */

static etcd_client *bench_client(harness_cluster *hc, const char *cacert)
{
        etcd_client_opts o = {.endpoints = hc->members[0].client_url,
                              .cacert = cacert,
                              .cert = hc->tls ? hc->tls->client_cert : NULL,
                              .key = hc->tls ? hc->tls->client_key : NULL,
                              .call_timeout_ms = 20000};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) < 0) {
                fprintf(stderr, "etcd client: bad options\n");
                exit(1);
        }
        return c;
}

static bool call_ok(etcd_client *c)
{
        etcd_members *l = NULL;
        int r = etcd_member_list(c, &l);
        etcd_members_free(l);
        if (r < 0)
                fprintf(stderr, "member list: %s\n", etcd_client_last_error(c));
        return r == 0;
}

#define ROUNDS          9
#define CALLS_PER_ROUND 40

static void bench_connection_kind(const char *version, bool tls, size_t n_conns)
{
        harness_opts ho = {.version = version, .members = 1, .tls = tls};
        harness_cluster *hc = NULL;
        if (harness_cluster_start(&ho, &hc) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return;
        }
        /* The CA bundle's copies: one TLS identity per connection, so none is shared. */
        char *pem = NULL;
        size_t pem_len = 0;
        const char *ca0 = hc->tls ? hc->tls->ca_cert : NULL;
        if (ca0 && read_file(ca0, 1 << 20, &pem, &pem_len) < 0)
                exit(1);
        char **cas = xcalloc(n_conns + 1, sizeof(char *));
        for (size_t i = 0; i < n_conns; i++) {
                cas[i] = xasprintf("%s/ca-%zu.crt", root, i);
                if (pem)
                        (void)write_file_atomic(cas[i], pem, pem_len, 0644);
                else
                        (void)write_file_atomic(cas[i], "", 0, 0644);
        }
        etcd_pool_close_idle();
        malloc_trim(0);
        struct mallinfo2 m0 = mallinfo2();
        double rss0 = proc_rss_mb(getpid());
        for (size_t i = 0; i < n_conns; i++) {
                /* over plain http the CA file is no part of the call, only of the identity */
                etcd_client *c = bench_client(hc, cas[i]);
                if (!call_ok(c))
                        exit(1);
                etcd_client_free(c);
        }
        etcd_pool_stats ps;
        etcd_pool_stats_get(&ps);
        struct mallinfo2 m1 = mallinfo2();
        double rss1 = proc_rss_mb(getpid());
        size_t closed = etcd_pool_close_idle();
        malloc_trim(0);
        struct mallinfo2 m2 = mallinfo2();
        double rss2 = proc_rss_mb(getpid());
        double per_kb = ((double)m1.uordblks - (double)m0.uordblks) / (double)n_conns / 1024.0;
        printf("  %-5s %zu idle connections (%zu kept by the pool): heap %.1f KB each, RSS "
               "+%.1f MB (%.1f KB each); all %zu closed: heap back to +%.1f KB, RSS +%.1f MB\n",
               tls ? "TLS" : "plain", n_conns, ps.idle, per_kb, rss1 - rss0,
               (rss1 - rss0) * 1024.0 / (double)n_conns, closed,
               ((double)m2.uordblks - (double)m0.uordblks) / 1024.0, rss2 - rss0);

        /* CPU of a call: on the kept connection, against after closing it (alternating). */
        etcd_client *c = bench_client(hc, ca0);
        double kept[ROUNDS], fresh[ROUNDS];
        (void)call_ok(c);
        for (int r = 0; r < ROUNDS; r++) {
                double t0 = self_cpu_s();
                for (int i = 0; i < CALLS_PER_ROUND; i++)
                        (void)call_ok(c);
                kept[r] = (self_cpu_s() - t0) / CALLS_PER_ROUND * 1e3;
                t0 = self_cpu_s();
                for (int i = 0; i < CALLS_PER_ROUND; i++) {
                        etcd_pool_close_idle();
                        (void)call_ok(c);
                }
                fresh[r] = (self_cpu_s() - t0) / CALLS_PER_ROUND * 1e3;
        }
        etcd_client_free(c);
        etcd_pool_close_idle();
        double mk = median(kept, ROUNDS), mf = median(fresh, ROUNDS);
        printf("  %-5s CPU of a member list, median of %d rounds of %d: %.3f ms on the kept "
               "connection, %.3f ms opening one (%.2fx); at 1,000 clusters observed every 30 s "
               "a reconnect per pass costs %.2f%% of a core more\n",
               tls ? "TLS" : "plain", ROUNDS, CALLS_PER_ROUND, mk, mf, mf / mk,
               (mf - mk) / 1e3 * (1000.0 / 30.0) * 100);
        fflush(stdout);
        for (size_t i = 0; i < n_conns; i++) {
                (void)unlink(cas[i]);
                free(cas[i]);
        }
        free(cas);
        free(pem);
        harness_cluster_free(hc);
}

static void bench_connection(const char *version, size_t n_conns)
{
        printf("one etcd connection (etcd %s, one member; the pool closes idle ones after %lld s "
               "over plain HTTP/2, %lld s over TLS):\n",
               version, (long long)(etcd_pool_idle_ms(false) / 1000),
               (long long)(etcd_pool_idle_ms(true) / 1000));
        bench_connection_kind(version, false, n_conns);
        bench_connection_kind(version, true, n_conns);
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        size_t real = 100;
        const char *simulated = "1000,10000";
        int idle_s = 60;
        const char *version = "3.5.16";
        size_t conns = 200;
        for (int i = 1; i + 1 < argc; i += 2) {
                if (streq(argv[i], "--real"))
                        real = strtoul(argv[i + 1], NULL, 10);
                else if (streq(argv[i], "--simulated"))
                        simulated = argv[i + 1];
                else if (streq(argv[i], "--idle"))
                        idle_s = atoi(argv[i + 1]);
                else if (streq(argv[i], "--version"))
                        version = argv[i + 1];
                else if (streq(argv[i], "--conns"))
                        conns = strtoul(argv[i + 1], NULL, 10);
                else if (streq(argv[i], "--baseline"))
                        baseline_bin = argv[i + 1];
                else if (streq(argv[i], "--gitcd"))
                        gitcd_bin = argv[i + 1];
                else if (streq(argv[i], "--rounds"))
                        rounds = MAX(1, MIN(16, atoi(argv[i + 1])));
                else if (streq(argv[i], "--fast"))
                        fast_cadence = atoi(argv[i + 1]) != 0;
                else if (streq(argv[i], "--options"))
                        spec_options = argv[i + 1];
                else if (streq(argv[i], "--tls"))
                        spec_tls = atoi(argv[i + 1]) != 0;
        }
        if (!mkdtemp(root))
                return 1;
        /* hundreds of members: the daemon's descriptors (inherited) up to the hard limit */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
        atexit(cleanup);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        log_set_level(LOG_ERROR);

        if (conns > 0)
                bench_connection(version, conns);
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
