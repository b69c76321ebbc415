/*
 * Benchmark: what gitcd's consistency check costs (docs/consistency.md).
 * On a local 3-member cluster (test harness) holding MB megabytes of keys,
 * the check's calls exactly as reconciler/consistency.c makes them through
 * the reconciler's etcd seam: every member's Status, then its HashKV at the
 * smallest revision, one member after the other, followers first and the
 * leader last. Prints the time of each member's HashKV and of the whole
 * check, and the latency a client writing all along sees with no check
 * running and while checks run back to back (median, 99th percentile,
 * worst, failed writes). etcd holds a member's writes while its HashKV
 * reads the whole keyspace, which is what the second window shows.
 *
 *   bench-consistency [MB ...] [VERSION]    (default: 100 1024 3.5.16)
 *
 * Prints figures only; it never fails on timing.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd/client.h"
#include "reconciler/etcd-ops.h"
#include "tests/harness/harness.h"
#include "util/http.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VALUE_SIZE (16 * 1024)
#define WINDOW_MS  10000

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
                usleep(2000);
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

static void writer_report(writer *w, const char *label)
{
        atomic_store(&w->stop, true);
        pthread_join(w->thread, NULL);
        if (w->n == 0) {
                printf("  %-22s none acknowledged, %d failed\n", label, w->failed);
                return;
        }
        qsort(w->lat_us, w->n, sizeof(int64_t), cmp64);
        printf("  %-22s %6zu writes, %d failed; median %6.1f ms, p99 %7.1f ms, worst %7.1f ms\n",
               label, w->n, w->failed, w->lat_us[w->n / 2] / 1000.0,
               w->lat_us[(w->n * 99) / 100] / 1000.0, w->lat_us[w->n - 1] / 1000.0);
        free(w->lat_us);
}

/* ---- data ---- */

static void fill(etcd_client *c, int mb)
{
        static char blob[VALUE_SIZE];
        memset(blob, 'x', sizeof(blob));
        int n = mb * (1024 * 1024 / VALUE_SIZE);
        int64_t t0 = now_mono_ms();
        for (int i = 0; i < n; i++) {
                char key[32];
                snprintf(key, sizeof(key), "data/%08d", i);
                blob[i % VALUE_SIZE] = (char)('a' + i % 26);
                if (etcd_put(c, key, blob, sizeof(blob), NULL) < 0) {
                        fprintf(stderr, "put: %s\n", etcd_client_last_error(c));
                        exit(1);
                }
        }
        printf("  filled: %d MB in %d keys of 16 KiB (%.1f s)\n", mb, n,
               (now_mono_ms() - t0) / 1000.0);
}

/* ---- the check, as reconciler/consistency.c makes it ---- */

typedef struct check_run {
        int64_t total_ms;
        int64_t member_ms[8];
        int64_t db_size[8];
        bool agree;
        int64_t revision;
} check_run;

static int leader_index(harness_cluster *hc, etcd_client *c)
{
        etcd_endpoint_status *st = NULL;
        if (etcd_status(c, NULL, &st) < 0)
                return -1;
        uint64_t leader = st->leader;
        etcd_endpoint_status_free(st);
        for (size_t i = 0; i < hc->n; i++) {
                etcd_endpoint_status *s = NULL;
                if (etcd_status(c, hc->members[i].client_url, &s) < 0)
                        continue;
                bool is = s->member_id == leader;
                etcd_endpoint_status_free(s);
                if (is)
                        return (int)i;
        }
        return -1;
}

static int one_check(harness_cluster *hc, etcd_conn *conn, int leader, check_run *ret)
{
        const etcd_membership_ops *ops = &etcd_membership_real;
        size_t order[8], n = 0;
        for (size_t i = 0; i < hc->n; i++)
                if ((int)i != leader)
                        order[n++] = i;
        if (leader >= 0)
                order[n++] = (size_t)leader;
        int64_t t0 = now_mono_ms();
        int64_t rev = 0;
        for (size_t j = 0; j < n; j++) {
                etcd_endpoint_status *st = NULL;
                if (ops->status_at(conn, hc->members[order[j]].client_url, &st) < 0)
                        return -1;
                if (rev == 0 || st->revision < rev)
                        rev = st->revision;
                ret->db_size[order[j]] = st->db_size;
                etcd_endpoint_status_free(st);
        }
        uint32_t first = 0;
        ret->agree = true;
        for (size_t j = 0; j < n; j++) {
                uint32_t h = 0;
                int64_t compact = 0;
                int64_t a = now_mono_ms();
                if (ops->hash_kv_at(conn, hc->members[order[j]].client_url, rev, 300000, &h,
                                    &compact) < 0) {
                        fprintf(stderr, "HashKV: %s\n", ops->last_error(conn));
                        return -1;
                }
                ret->member_ms[order[j]] = now_mono_ms() - a;
                if (j == 0)
                        first = h;
                ret->agree = ret->agree && h == first;
        }
        ret->total_ms = now_mono_ms() - t0;
        ret->revision = rev;
        return 0;
}

typedef struct checker {
        harness_cluster *hc;
        etcd_conn *conn;
        int leader;
        pthread_t thread;
        atomic_bool stop;
        int runs;
} checker;

static void *check_loop(void *userdata)
{
        checker *k = userdata;
        while (!atomic_load(&k->stop)) {
                check_run r = {0};
                if (one_check(k->hc, k->conn, k->leader, &r) < 0)
                        break;
                k->runs++;
        }
        return NULL;
}

static void bench_size(const char *version, int mb)
{
        harness_opts ho = {
            .version = version, .members = 3, .quota_backend_bytes = ((int64_t)mb * 3 + 512) << 20};
        harness_cluster *hc = NULL;
        if (harness_cluster_start(&ho, &hc) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                exit(1);
        }
        etcd_client *c = NULL;
        etcd_client_opts o = {.endpoints = hc->endpoints, .call_timeout_ms = 60000};
        if (etcd_client_new(&o, &c) < 0)
                exit(1);
        printf("etcd %s, 3 members on loopback, %d MB of keys\n", version, mb);
        fill(c, mb);
        etcd_conn *conn = NULL;
        etcd_conn_opts co = {.endpoints = hc->endpoints, .call_timeout_ms = 5000};
        if (etcd_membership_real.connect(NULL, &co, &conn) < 0)
                exit(1);
        int leader = leader_index(hc, c);

        check_run r = {0};
        for (int round = 0; round < 2; round++) { /* the first reads pages in: report both */
                if (one_check(hc, conn, leader, &r) < 0)
                        exit(1);
                printf("  check %d: %.2f s in all at revision %lld, members %s\n", round + 1,
                       r.total_ms / 1000.0, (long long)r.revision, r.agree ? "agree" : "DIFFER");
                for (size_t i = 0; i < hc->n; i++)
                        printf("    %-3s%s db %7.1f MB  HashKV %7.2f s\n", hc->members[i].name,
                               (int)i == leader ? "*" : " ", r.db_size[i] / 1048576.0,
                               r.member_ms[i] / 1000.0);
        }

        writer w;
        writer_start(&w, hc->endpoints);
        usleep(WINDOW_MS * 1000);
        writer_report(&w, "writer, no check:");

        checker k = {.hc = hc, .conn = conn, .leader = leader};
        writer_start(&w, hc->endpoints);
        if (pthread_create(&k.thread, NULL, check_loop, &k) != 0)
                exit(1);
        int64_t until = now_mono_ms() + MAX(WINDOW_MS, 2 * r.total_ms);
        while (now_mono_ms() < until)
                usleep(100 * 1000);
        atomic_store(&k.stop, true);
        pthread_join(k.thread, NULL);
        _cleanup_free_ char *label =
            xasprintf("writer, %d check%s:", k.runs, k.runs == 1 ? "" : "s");
        writer_report(&w, label);
        printf("  (* the leader, hashed last)\n\n");
        etcd_membership_real.disconnect(conn);
        etcd_client_free(c);
        harness_cluster_free(hc);
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        const char *version = "3.5.16";
        int sizes[8], n = 0;
        for (int i = 1; i < argc && n < 8; i++) {
                if (strchr(argv[i], '.'))
                        version = argv[i];
                else if (atoi(argv[i]) > 0)
                        sizes[n++] = atoi(argv[i]);
        }
        if (n == 0) {
                sizes[n++] = 100;
                sizes[n++] = 1024;
        }
        if (!harness_have_etcd(version)) {
                fprintf(stderr,
                        "usage: bench-consistency [MB ...] [VERSION] (etcd %s installed?)\n",
                        version);
                return 2;
        }
        for (int i = 0; i < n; i++)
                bench_size(version, sizes[i]);
        return 0;
}
