/*
 * Benchmark: calls per second of gitcd's etcd client against etcdctl for
 * MemberList and Status on a local 3-member cluster started with the test
 * harness. etcdctl is spawned once per call, as a person or a script uses
 * it; gitcd's client is measured twice: one client reused (the connection
 * stays open, as the reconciler uses it) and a new client per call (a new
 * connection every time).
 *
 * Then the latency of single calls, each beside etcdctl on the same
 * cluster (etcdctl's figure includes starting the process, as a script
 * pays it): unary Range and Put (median and 90th percentile of
 * LATENCY_CALLS calls on a reused client), and a server-streaming Snapshot
 * of member 0 with about 1 KB, 1 MB and 100 MB of data in the database
 * (gitcd's client streaming to a file, fsynced, against `etcdctl snapshot
 * save`; median of SNAPSHOT_RUNS). A stall in the transport shows here as
 * a call that takes a second longer than etcdctl; the count of waits that
 * ended on the fallback timer with bytes in hand (etcd_client_timer_wakeups)
 * is printed too and should read 0. Watch has no row: gitcd's client has no
 * Watch call (gitcd never watches etcd). Prints figures only; it never fails
 * on timing.
 *
 *   bench-etcd-client [VERSION] [SECONDS-PER-MEASUREMENT] [MAX-SNAPSHOT-MB]
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd/client.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

enum call { CALL_MEMBER_LIST, CALL_STATUS };

static double seconds = 2.0;

#define LATENCY_CALLS    200 /* unary calls per figure (etcdctl: a tenth of it) */
#define SNAPSHOT_RUNS    5   /* snapshots per figure; the median is printed */
#define SNAP_VALUE_BYTES (512 * 1024)

static int one_call(etcd_client *c, enum call what, const char *endpoint)
{
        if (what == CALL_MEMBER_LIST) {
                etcd_members *l = NULL;
                int r = etcd_member_list(c, &l);
                etcd_members_free(l);
                return r;
        }
        etcd_endpoint_status *s = NULL;
        int r = etcd_status(c, endpoint, &s);
        etcd_endpoint_status_free(s);
        return r;
}

/* Calls per second of one reused client, or of a fresh client per call. */
static double bench_gitcd(const char *endpoints, const char *endpoint, enum call what, bool reuse)
{
        etcd_client_opts o = {.endpoints = endpoints};
        etcd_client *c = NULL;
        if (reuse && etcd_client_new(&o, &c) < 0)
                return 0;
        long n = 0;
        int64_t t0 = now_mono_ms(), end = t0 + (int64_t)(seconds * 1000);
        while (now_mono_ms() < end) {
                if (!reuse && etcd_client_new(&o, &c) < 0)
                        return 0;
                if (one_call(c, what, endpoint) < 0) {
                        fprintf(stderr, "gitcd call failed: %s\n", etcd_client_last_error(c));
                        etcd_client_free(c);
                        return 0;
                }
                if (!reuse) {
                        etcd_client_free(c);
                        c = NULL;
                }
                n++;
        }
        double took = (double)(now_mono_ms() - t0) / 1000.0;
        etcd_client_free(c);
        return (double)n / took;
}

static int spawn_wait(char *const argv[])
{
        pid_t pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                int fd = open("/dev/null", O_WRONLY);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execv(argv[0], argv);
                _exit(127);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid)
                return -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double bench_etcdctl(const char *etcdctl, const char *endpoints, const char *endpoint,
                            enum call what)
{
        char *ep_flag = xasprintf("--endpoints=%s", what == CALL_STATUS ? endpoint : endpoints);
        char *argv_list[] = {(char *)etcdctl, ep_flag, "member", "list", NULL};
        char *argv_status[] = {(char *)etcdctl, ep_flag, "endpoint", "status", NULL};
        char **argv = what == CALL_MEMBER_LIST ? argv_list : argv_status;
        long n = 0;
        int64_t t0 = now_mono_ms(), end = t0 + (int64_t)(seconds * 1000);
        while (now_mono_ms() < end) {
                if (spawn_wait(argv) != 0) {
                        fprintf(stderr, "etcdctl failed\n");
                        free(ep_flag);
                        return 0;
                }
                n++;
        }
        double took = (double)(now_mono_ms() - t0) / 1000.0;
        free(ep_flag);
        return (double)n / took;
}

static int cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

/* The q-th quantile (0..1) of n figures in microseconds, as ms; sorts v. */
static double quantile_ms(int64_t *v, size_t n, double q)
{
        qsort(v, n, sizeof(*v), cmp_i64);
        size_t i = (size_t)(q * (double)(n - 1) + 0.5);
        return (double)v[MIN(i, n - 1)] / 1000.0;
}

static int64_t now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One etcdctl command line, timed in microseconds; -1 when it failed. */
static int64_t etcdctl_us(char *const argv[])
{
        int64_t t0 = now_us();
        return spawn_wait(argv) == 0 ? now_us() - t0 : -1;
}

static void print_latency(const char *what, int64_t *g, size_t ng, int64_t *e, size_t ne)
{
        double gm = quantile_ms(g, ng, 0.5), g90 = quantile_ms(g, ng, 0.9);
        double em = quantile_ms(e, ne, 0.5), e90 = quantile_ms(e, ne, 0.9);
        printf("%-22s %9.2f ms %9.2f ms %11.2f ms %9.2f ms\n", what, gm, g90, em, e90);
        fflush(stdout);
}

/* Unary Range and Put: a reused gitcd client against one etcdctl process per call. */
static void unary_latency(const harness_cluster *c)
{
        etcd_client_opts o = {.endpoints = c->members[0].client_url};
        etcd_client *cl = NULL;
        if (etcd_client_new(&o, &cl) < 0)
                return;
        static int64_t g[LATENCY_CALLS], e[LATENCY_CALLS / 10];
        _cleanup_free_ char *ep = xasprintf("--endpoints=%s", c->members[0].client_url);
        (void)etcd_put(cl, "bench/key", "value", 5, NULL);
        for (int w = 0; w < 2; w++) {
                for (size_t i = 0; i < LATENCY_CALLS; i++) {
                        int64_t t0 = now_us();
                        etcd_kv_list *l = NULL;
                        int r = w == 0 ? etcd_get(cl, "bench/key", false, &l)
                                       : etcd_put(cl, "bench/key", "value", 5, NULL);
                        etcd_kv_list_free(l);
                        g[i] = r == 0 ? now_us() - t0 : -1;
                }
                char *get[] = {(char *)c->etcdctl_bin, ep, "get", "bench/key", NULL};
                char *put[] = {(char *)c->etcdctl_bin, ep, "put", "bench/key", "value", NULL};
                for (size_t i = 0; i < ARRAY_SIZE(e); i++)
                        e[i] = etcdctl_us(w == 0 ? get : put);
                print_latency(w == 0 ? "Range (unary)" : "Put (unary)", g, ARRAY_SIZE(g), e,
                              ARRAY_SIZE(e));
        }
        printf("%-22s %" PRIu64 "\n", "  timer wake-ups", etcd_client_timer_wakeups(cl));
        etcd_client_free(cl);
}

/* Grow the database to about mb MiB of values (one client, 512 KiB values). */
static int fill_to(etcd_client *cl, size_t *have_mb, size_t mb)
{
        _cleanup_free_ char *value = xmalloc(SNAP_VALUE_BYTES);
        memset(value, 'v', SNAP_VALUE_BYTES);
        for (size_t i = *have_mb * 2; i < mb * 2; i++) {
                char key[32];
                snprintf(key, sizeof(key), "bench/snap/%06zu", i);
                if (etcd_put(cl, key, value, SNAP_VALUE_BYTES, NULL) < 0)
                        return -1;
        }
        *have_mb = MAX(*have_mb, mb);
        return 0;
}

/* Snapshot of member 0, gitcd's client against etcdctl, at ~1 KB, 1 MB and max_mb MB. */
static void snapshot_latency(const harness_cluster *c, size_t max_mb)
{
        const char *url = c->members[0].client_url;
        etcd_client_opts o = {.endpoints = url, .call_timeout_ms = 600000};
        etcd_client *cl = NULL;
        if (etcd_client_new(&o, &cl) < 0)
                return;
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-bench-snap");
        _cleanup_free_ char *file = path_join(dir, "s.db");
        _cleanup_free_ char *ep = xasprintf("--endpoints=%s", url);
        char *ctl[] = {(char *)c->etcdctl_bin, ep, "snapshot", "save", file, NULL};
        size_t have = 0;
        char data[1024];
        memset(data, 'd', sizeof(data));
        (void)etcd_put(cl, "bench/small", data, sizeof(data), NULL);
        const size_t sizes[] = {0, 1, max_mb};
        for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
                if (fill_to(cl, &have, sizes[k]) < 0) {
                        fprintf(stderr, "fill: %s\n", etcd_client_last_error(cl));
                        break;
                }
                int64_t g[SNAPSHOT_RUNS], e[SNAPSHOT_RUNS];
                for (int r = 0; r < SNAPSHOT_RUNS; r++) {
                        int64_t t0 = now_us();
                        g[r] = etcd_snapshot_save(cl, url, file, NULL) == 0 ? now_us() - t0 : -1;
                        e[r] = etcdctl_us(ctl);
                }
                struct stat st = {0};
                (void)stat(file, &st);
                _cleanup_free_ char *what = xasprintf("Snapshot %.1f MB", (double)st.st_size / 1e6);
                print_latency(what, g, SNAPSHOT_RUNS, e, SNAPSHOT_RUNS);
        }
        printf("%-22s %" PRIu64 "\n", "  timer wake-ups", etcd_client_timer_wakeups(cl));
        etcd_client_free(cl);
        (void)rm_rf(dir);
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        const char *version = argc > 1 ? argv[1] : "3.5.16";
        if (argc > 2)
                seconds = atof(argv[2]) > 0 ? atof(argv[2]) : seconds;
        size_t max_mb = argc > 3 && atoi(argv[3]) > 1 ? (size_t)atoi(argv[3]) : 100;
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed\n", version);
                return 1;
        }
        harness_opts o = {.version = version, .members = 3};
        harness_cluster *c = NULL;
        if (harness_cluster_start(&o, &c) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return 1;
        }
        setenv("ETCDCTL_API", "3", 1);
        const char *ep = c->members[0].client_url;
        printf("etcd %s, 3 members on 127.0.0.1, %.1f s per measurement\n\n", version, seconds);
        printf("%-11s %14s %16s %16s %10s\n", "call", "gitcd reused", "gitcd new/call",
               "etcdctl spawn", "ratio");
        const char *names[] = {"MemberList", "Status"};
        for (int w = CALL_MEMBER_LIST; w <= CALL_STATUS; w++) {
                double reused = bench_gitcd(c->endpoints, ep, (enum call)w, true);
                double fresh = bench_gitcd(c->endpoints, ep, (enum call)w, false);
                double ctl = bench_etcdctl(c->etcdctl_bin, c->endpoints, ep, (enum call)w);
                printf("%-11s %12.0f/s %14.0f/s %14.1f/s %9.0fx\n", names[w], reused, fresh, ctl,
                       ctl > 0 ? reused / ctl : 0.0);
                fflush(stdout);
        }
        printf("\nratio = gitcd (reused client) / etcdctl (one process per call)\n\n");
        printf("%-22s %12s %12s %14s %12s\n", "one call", "gitcd median", "gitcd p90",
               "etcdctl median", "etcdctl p90");
        unary_latency(c);
        snapshot_latency(c, max_mb);
        printf("Watch                  no row: gitcd's client has no Watch call\n");
        harness_cluster_free(c);
        return 0;
}
