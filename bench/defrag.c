/*
 * Benchmark: defragmenting a fragmented database on a local 3-member
 * cluster (test harness), gitcd's way against `etcdctl defrag` run by
 * hand on the same data. Prints, for each: the time per member, each
 * member's file before and after, and the latency a client writing all
 * along sees (median, 99th percentile, worst, failed writes).
 *
 * gitcd's way is maintenance_pass() as the reconciler calls it (a
 * freeSpaceAbove threshold, followers first, the leader last after moving
 * leadership, each member's health checked). By hand is what a person
 * types: `etcdctl --endpoints=URL defrag`, one member after the other in
 * list order, the leader wherever it falls. Before each round the
 * database is fragmented the same way: MB megabytes written in 64 KiB
 * values, every other key deleted, the history compacted.
 *
 *   bench-defrag [MB (default 500)] [VERSION (default 3.5.16)]
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

#include "etcd/client.h"
#include "maintenance/maintenance.h"
#include "state/maintenance.h"
#include "tests/harness/harness.h"
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
        int64_t *lat_us;
        size_t n, alloc;
        int failed;
} writer;

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
                int k = etcd_put(c, key, "v", 1, NULL);
                clock_gettime(CLOCK_MONOTONIC, &b);
                if (k < 0) {
                        w->failed++;
                        continue;
                }
                w->lat_us = xgrow(w->lat_us, &w->alloc, w->n + 1, sizeof(int64_t));
                w->lat_us[w->n++] =
                    (b.tv_sec - a.tv_sec) * 1000000LL + (b.tv_nsec - a.tv_nsec) / 1000;
        }
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

static void writer_report(writer *w)
{
        atomic_store(&w->stop, true);
        pthread_join(w->thread, NULL);
        if (w->n == 0) {
                printf("  client writes: none acknowledged, %d failed\n", w->failed);
                return;
        }
        qsort(w->lat_us, w->n, sizeof(int64_t), cmp64);
        printf("  client writes: %zu acknowledged, %d failed; latency median %.1f ms, p99 "
               "%.1f ms, worst %.1f ms\n",
               w->n, w->failed, w->lat_us[w->n / 2] / 1000.0, w->lat_us[(w->n * 99) / 100] / 1000.0,
               w->lat_us[w->n - 1] / 1000.0);
        free(w->lat_us);
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

static void round_gitcd(harness_cluster *hc, etcd_client *c, const char *dir)
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

        writer w;
        writer_start(&w, hc->endpoints);
        int64_t t0 = now_mono_ms();
        for (int guard = 0; guard < 1000; guard++) {
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
        printf("gitcd (followers first, leader last after MoveLeader; %.1f s in all):\n",
               total / 1000.0);
        state_audit_list l = {0};
        state_audit_filter f = {.cluster = "default/bench", .action = "defrag.member"};
        (void)state_audit_query(db, &f, &l);
        for (size_t i = l.n; i-- > 0;)
                printf("    %s: %.2f s\n", l.items[i]->reason, l.items[i]->duration_ms / 1000.0);
        state_audit_list_release(&l);
        writer_report(&w);
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

static void round_etcdctl(harness_cluster *hc, etcd_client *c)
{
        int64_t before[8];
        for (size_t i = 0; i < hc->n; i++)
                before[i] = db_size(c, hc->members[i].client_url);
        writer w;
        writer_start(&w, hc->endpoints);
        printf("etcdctl defrag by hand (one member after the other, in list order):\n");
        int64_t t0 = now_mono_ms();
        for (size_t i = 0; i < hc->n; i++) {
                _cleanup_free_ char *ep = xasprintf("--endpoints=%s", hc->members[i].client_url);
                char *argv[] = {hc->etcdctl_bin, ep, (char *)"--command-timeout=600s",
                                (char *)"defrag", NULL};
                int64_t a = now_mono_ms();
                int k = spawn_wait(argv);
                printf("    %s: %.2f s%s\n", hc->members[i].name, (now_mono_ms() - a) / 1000.0,
                       k == 0 ? "" : " (etcdctl failed)");
        }
        printf("  %.1f s in all\n", (now_mono_ms() - t0) / 1000.0);
        writer_report(&w);
        print_sizes(hc, c, before);
}

int main(int argc, char **argv)
{
        int mb = argc > 1 ? atoi(argv[1]) : 500;
        const char *version = argc > 2 ? argv[2] : "3.5.16";
        if (mb <= 0 || !harness_have_etcd(version)) {
                fprintf(stderr, "usage: bench-defrag [MB] [VERSION] (etcd %s installed?)\n",
                        version);
                return 2;
        }
        harness_opts ho = {
            .version = version, .members = 3, .quota_backend_bytes = (int64_t)(mb * 4 + 256) << 20};
        harness_cluster *hc = NULL;
        if (harness_cluster_start(&ho, &hc) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return 1;
        }
        etcd_client *c = NULL;
        etcd_client_opts o = {.endpoints = hc->endpoints, .call_timeout_ms = 60000};
        if (etcd_client_new(&o, &c) < 0)
                return 1;
        printf("etcd %s, 3 members on loopback, %d MB\n\n", version, mb);
        char *dir = harness_tmpdir("gitcd-bench-defrag");
        fragment(c, mb);
        round_gitcd(hc, c, dir);
        printf("\n");
        fragment(c, mb);
        round_etcdctl(hc, c);
        etcd_client_free(c);
        harness_cluster_free(hc);
        free(dir);
        return 0;
}
