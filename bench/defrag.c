/*
 * Benchmark: what a client feels while a fragmented database is
 * defragmented on a local 3-member cluster (test harness): gitcd's run
 * against `etcdctl defrag --cluster` typed by hand, on the same cluster and
 * the same amount of data, in one run.
 *
 * gitcd's way is maintenance_pass() as the reconciler calls it (a
 * freeSpaceAbove threshold; the most fragmented follower first, the leader
 * last after moving leadership away; a pause between members until every
 * member applied what was committed; each member's health checked). By
 * hand is `etcdctl --endpoints=ALL defrag --cluster`: every member, one
 * after the other, the leader wherever it falls. The members run with
 * --experimental-stop-grpc-service-on-defrag=true when their version has
 * it (api/flags.c decides, as for the members gitcd starts): etcd then
 * reports NOT_SERVING on its gRPC health while it defragments.
 *
 * Before each round the database is fragmented the same way: MB megabytes
 * written in 64 KiB values, every other key deleted, the history compacted
 * (each member's file is then about MB, half of it free). A writer with all
 * three endpoints (the project's etcd client) puts small keys all along,
 * reading each one back after its write; for each round it prints the
 * median, 99th percentile and worst latency of a write and of a read
 * (retries included: what the application waits), the attempts that failed,
 * the writes that needed a retry, and how many times the client found a
 * member not serving (etcd_client_not_serving: a read cut short asked the
 * member's gRPC health, and the member was tried last for a while). A baseline of a few
 * seconds without defragmentation comes first. The writer runs in the
 * bench's process, as gitcd's own clients run in gitcd's: during gitcd's
 * round it knows which member gitcd is defragmenting (etcd/marks.h), which
 * an application's client in another process does not; during the etcdctl
 * round it knows only what the members' gRPC health tells it.
 *
 *   bench-defrag [MB] [VERSION]
 *
 * MB defaults to $GITCD_BENCH_DEFRAG_MB, else 1024 (about 1 GB per member;
 * writing it takes about a minute per round here, see docs/performance.md;
 * 64 for a quick run); VERSION to the newest etcd 3.5 in the cache. Without
 * a VERSION, the newest 3.4 in the cache is measured after it the same way
 * (it has no such flag), unless $GITCD_BENCH_DEFRAG_NO_34 is set.
 *
 * Prints figures only; it never fails on timing.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/flags.h"
#include "api/model.h"
#include "etcd/client.h"
#include "maintenance/maintenance.h"
#include "state/maintenance.h"
#include "tests/harness/harness.h"
#include "util/http.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VALUE_SIZE (64 * 1024)

static int64_t clock_offset_ms;
static int64_t bench_wall(void)
{
        return now_wall_ms() + clock_offset_ms;
}

/* ---- a writer measuring each put's latency ---- */

typedef struct writer {
        const char *endpoints;
        pthread_t thread;
        atomic_bool stop;
        int64_t *lat_us; /* per acknowledged write, its retries included */
        size_t n, alloc;
        int failed;  /* attempts that failed */
        int retried; /* writes that needed more than one attempt */
        bool joined;
        char *first_error; /* the first failed attempt's error */
        /* after each write, a read of the key through the same client */
        int64_t *rlat_us;
        size_t rn, ralloc;
        int rfailed;
        uint64_t not_serving; /* etcd_client_not_serving() at the end */
} writer;

static int64_t elapsed_us(const struct timespec *a, const struct timespec *b)
{
        return (b->tv_sec - a->tv_sec) * 1000000LL + (b->tv_nsec - a->tv_nsec) / 1000;
}

static void *write_loop(void *userdata)
{
        writer *w = userdata;
        etcd_client *c = NULL;
        etcd_client_opts o = {.endpoints = w->endpoints, .call_timeout_ms = 10000};
        if (etcd_client_new(&o, &c) < 0)
                return NULL;
        for (long i = 0; !atomic_load(&w->stop); i++) {
                char key[32];
                snprintf(key, sizeof(key), "writer/%08ld", i % 1000);
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                int attempts = 0, k;
                do {
                        k = etcd_put(c, key, "v", 1, NULL);
                        attempts++;
                        if (k < 0 && w->failed++ == 0)
                                w->first_error = xstrdup(etcd_client_last_error(c));
                } while (k < 0 && !atomic_load(&w->stop));
                clock_gettime(CLOCK_MONOTONIC, &b);
                if (k < 0)
                        break;
                if (attempts > 1)
                        w->retried++;
                w->lat_us = xgrow(w->lat_us, &w->alloc, w->n + 1, sizeof(int64_t));
                w->lat_us[w->n++] = elapsed_us(&a, &b);
                clock_gettime(CLOCK_MONOTONIC, &a);
                do {
                        etcd_kv_list *l = NULL;
                        k = etcd_get(c, key, false, &l);
                        etcd_kv_list_free(l);
                        if (k < 0)
                                w->rfailed++;
                } while (k < 0 && !atomic_load(&w->stop));
                clock_gettime(CLOCK_MONOTONIC, &b);
                if (k < 0)
                        break;
                w->rlat_us = xgrow(w->rlat_us, &w->ralloc, w->rn + 1, sizeof(int64_t));
                w->rlat_us[w->rn++] = elapsed_us(&a, &b);
        }
        w->not_serving = etcd_client_not_serving(c);
        etcd_client_free(c);
        return NULL;
}

static int cmp64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

static void writer_start(writer *w, const char *endpoints)
{
        *w = (writer){.endpoints = endpoints};
        if (pthread_create(&w->thread, NULL, write_loop, w) != 0) {
                perror("pthread_create");
                exit(1);
        }
}

static void writer_stop(writer *w)
{
        if (w->joined)
                return;
        atomic_store(&w->stop, true);
        pthread_join(w->thread, NULL);
        w->joined = true;
}

/* One row of the summary: p50, p99, max, failed attempts, retried writes. */
static void writer_report(writer *w, const char *label)
{
        writer_stop(w);
        if (w->n == 0) {
                printf("  %-34s none acknowledged, %d attempts failed\n", label, w->failed);
                return;
        }
        qsort(w->lat_us, w->n, sizeof(int64_t), cmp64);
        printf("  %-34s %7zu %9.1f %9.1f %9.1f %7d %7d\n", label, w->n,
               w->lat_us[w->n / 2] / 1000.0, w->lat_us[(w->n * 99) / 100] / 1000.0,
               w->lat_us[w->n - 1] / 1000.0, w->failed, w->retried);
        free(w->lat_us);
        if (w->rn > 0) {
                qsort(w->rlat_us, w->rn, sizeof(int64_t), cmp64);
                printf("  %-34s %7zu %9.1f %9.1f %9.1f %7d %7s\n", "  its reads", w->rn,
                       w->rlat_us[w->rn / 2] / 1000.0, w->rlat_us[(w->rn * 99) / 100] / 1000.0,
                       w->rlat_us[w->rn - 1] / 1000.0, w->rfailed, "-");
        }
        free(w->rlat_us);
        printf("  %-34s members found not serving: %llu\n", "", (unsigned long long)w->not_serving);
        if (w->first_error)
                printf("  %-34s first failure: %s\n", "", w->first_error);
        free(w->first_error);
}

static void report_header(void)
{
        printf("  %-34s %7s %9s %9s %9s %7s %7s\n", "client writes during", "writes", "p50 ms",
               "p99 ms", "max ms", "failed", "retried");
}

/* ---- data ---- */

static int64_t db_size(etcd_client *c, const char *url)
{
        etcd_endpoint_status *s = NULL;
        if (etcd_status(c, url, &s) < 0)
                return -1;
        int64_t n = s->db_size;
        etcd_endpoint_status_free(s);
        return n;
}

static void fragment(etcd_client *c, int mb)
{
        static char blob[VALUE_SIZE];
        memset(blob, 'x', sizeof(blob));
        int n = mb * (1024 * 1024 / VALUE_SIZE);
        int64_t t0 = now_mono_ms();
        for (int i = 0; i < n; i++) {
                char key[32];
                snprintf(key, sizeof(key), "data/%08d", i);
                if (etcd_put(c, key, blob, sizeof(blob), NULL) < 0) {
                        fprintf(stderr, "put: %s\n", etcd_client_last_error(c));
                        exit(1);
                }
        }
        for (int i = 0; i < n; i += 2) {
                char key[32];
                snprintf(key, sizeof(key), "data/%08d", i);
                (void)etcd_delete(c, key, false, NULL);
        }
        int64_t rev = 0;
        if (etcd_put(c, "marker", "1", 1, &rev) < 0 || etcd_compact(c, rev, true) < 0) {
                fprintf(stderr, "compact: %s\n", etcd_client_last_error(c));
                exit(1);
        }
        printf("  fragmented: %d MB written in 64 KiB values, half deleted, compacted (%.1f s)\n",
               mb, (now_mono_ms() - t0) / 1000.0);
}

static void print_sizes(harness_cluster *hc, etcd_client *c, const int64_t *before)
{
        for (size_t i = 0; i < hc->n; i++)
                printf("    %-4s %8.1f MB -> %8.1f MB\n", hc->members[i].name,
                       before[i] / 1048576.0, db_size(c, hc->members[i].client_url) / 1048576.0);
}

/* ---- gitcd ---- */

/* gitcd's run; the writer running all along is left running for the caller to report. */
static void round_gitcd(harness_cluster *hc, etcd_client *c, const char *dir, writer *w)
{
        _cleanup_free_ char *path = xasprintf("%s/state.db", dir);
        state_db *db = NULL;
        if (state_open(path, STATE_OPEN_READ_WRITE, &db) < 0 ||
            state_cluster_set_desired(db, "default/bench", "{}", NULL, NULL, bench_wall()) < 0) {
                fprintf(stderr, "%s\n", state_last_error());
                exit(1);
        }
        maintenance *m = NULL;
        maintenance_opts mo = {.db = db, .wall_ms = bench_wall};
        (void)maintenance_new(&mo, &m);
        etcd_cluster *spec = etcd_cluster_new();
        spec->defrag.enabled = true;
        spec->defrag.free_space_above = xstrdup("1Mi");
        spec->defrag.free_space_above_bytes = 1 << 20;
        const char *names[8], *urls[8];
        for (size_t i = 0; i < hc->n; i++) {
                names[i] = hc->members[i].name;
                urls[i] = hc->members[i].client_url;
        }
        int64_t before[8];
        for (size_t i = 0; i < hc->n; i++)
                before[i] = db_size(c, urls[i]);

        writer_start(w, hc->endpoints);
        int64_t t0 = now_mono_ms();
        for (int guard = 0; guard < 2000; guard++) {
                state_cluster *sc = NULL;
                (void)state_cluster_get(db, "default/bench", &sc);
                maint_cluster mc = {.cluster = "default/bench",
                                    .spec = spec,
                                    .sc = sc,
                                    .names = names,
                                    .client_urls = urls,
                                    .n = hc->n};
                maint_result r = {0};
                int k = maintenance_pass(m, &mc, &r);
                state_cluster_free(sc);
                maint_result_release(&r);
                if (k < 0 || r.outcome == MAINT_OUT_IDLE)
                        break;
                if (r.outcome == MAINT_OUT_WAITING)
                        usleep(200 * 1000);
        }
        int64_t total = now_mono_ms() - t0;
        printf("gitcd (most fragmented follower first, leader last after MoveLeader, a pause "
               "for apply lag between members; %.1f s in all):\n",
               total / 1000.0);
        state_audit_list l = {0};
        state_audit_filter f = {.cluster = "default/bench", .action = "defrag.member"};
        (void)state_audit_query(db, &f, &l);
        for (size_t i = l.n; i-- > 0;)
                printf("    %s: %.2f s\n", l.items[i]->reason, l.items[i]->duration_ms / 1000.0);
        state_audit_list_release(&l);
        print_sizes(hc, c, before);
        maintenance_free(m);
        etcd_cluster_free(spec);
        state_close(db);
}

/* ---- by hand ---- */

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

/* `etcdctl --endpoints=ALL defrag --cluster`, the writer left running for the caller. */
static void round_etcdctl(harness_cluster *hc, etcd_client *c, writer *w)
{
        int64_t before[8];
        for (size_t i = 0; i < hc->n; i++)
                before[i] = db_size(c, hc->members[i].client_url);
        writer_start(w, hc->endpoints);
        _cleanup_free_ char *ep = xasprintf("--endpoints=%s", hc->endpoints);
        char *argv[] = {
            hc->etcdctl_bin,     ep,  (char *)"--command-timeout=600s", (char *)"defrag",
            (char *)"--cluster", NULL};
        int64_t t0 = now_mono_ms();
        int k = spawn_wait(argv);
        printf("etcdctl defrag --cluster by hand (every member in list order, the leader "
               "wherever it falls): %.1f s in all%s\n",
               (now_mono_ms() - t0) / 1000.0, k == 0 ? "" : " (etcdctl failed)");
        print_sizes(hc, c, before);
}

/* Both rounds on one cluster of version; the summary table last. */
static void bench_version(const char *version, int mb)
{
        semver v = {0};
        (void)semver_parse(version, &v);
        const char *flag = "experimental-stop-grpc-service-on-defrag";
        bool stop_grpc = etcd_flag_in_version(flag, &v);
        _cleanup_free_ char *arg = stop_grpc ? xasprintf("--%s=true", flag) : NULL;
        harness_opts ho = {.version = version,
                           .members = 3,
                           .quota_backend_bytes = (int64_t)(mb * 4 + 256) << 20,
                           .extra_arg = arg};
        harness_cluster *hc = NULL;
        if (harness_cluster_start(&ho, &hc) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                exit(1);
        }
        etcd_client *c = NULL;
        etcd_client_opts o = {.endpoints = hc->endpoints, .call_timeout_ms = 60000};
        if (etcd_client_new(&o, &c) < 0)
                exit(1);
        printf("etcd %s, 3 members on loopback, %d MB, %s\n\n", version, mb,
               stop_grpc ? "gRPC service stopped during defrag"
                         : "no --experimental-stop-grpc-service-on-defrag in this version");
        char *dir = harness_tmpdir("gitcd-bench-defrag");

        writer idle;
        writer_start(&idle, hc->endpoints);
        sleep(3);
        writer_stop(&idle);

        writer wg, we;
        fragment(c, mb);
        round_gitcd(hc, c, dir, &wg);
        writer_stop(&wg);
        printf("\n");
        fragment(c, mb);
        round_etcdctl(hc, c, &we);
        writer_stop(&we);

        printf("\netcd %s, %d MB:\n", version, mb);
        report_header();
        writer_report(&idle, "nothing (3 s baseline)");
        writer_report(&wg, "gitcd's defragmentation");
        writer_report(&we, "etcdctl defrag --cluster");
        printf("\n");
        etcd_client_free(c);
        harness_cluster_free(hc);
        free(dir);
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        setvbuf(stdout, NULL, _IOLBF, 0); /* progress as it comes, also into a file */
        const char *env = getenv("GITCD_BENCH_DEFRAG_MB");
        int mb = argc > 1 ? atoi(argv[1]) : env ? atoi(env) : 1024;
        _cleanup_free_ char *newest = harness_etcd_newest("3.5");
        const char *version = argc > 2 ? argv[2] : newest;
        if (mb <= 0 || !version || !harness_have_etcd(version)) {
                fprintf(stderr, "usage: bench-defrag [MB] [VERSION] (etcd %s installed?)\n",
                        version ? version : "3.5");
                return 2;
        }
        bench_version(version, mb);
        _cleanup_free_ char *v34 = harness_etcd_newest("3.4");
        if (argc <= 2 && v34 && !getenv("GITCD_BENCH_DEFRAG_NO_34"))
                bench_version(v34, mb);
        return 0;
}
