/*
 * gitcd's etcd client never waits on a timer for an answer it already has,
 * against a real single-member etcd of the version given as argv[1]
 * (default 3.5.16).
 *
 * libcurl 7.88's HTTP/2 can keep the end of an answer (the last DATA frame,
 * the trailers with END_STREAM) in its own buffer with no timer set, and a
 * client that then waits only on the socket sits out a whole fallback
 * timeout (1 s) before it looks again. etcd/grpc.c drives libcurl so that
 * this cannot happen, and counts each time it would have
 * (etcd_client_timer_wakeups: a wait that ended on the fallback timer,
 * after which libcurl handed over bytes it already held). The check is
 * structural, no clock is read: unary calls, answers of every size around
 * libcurl's buffer, and snapshots of a small, a 1 MB and an 8 MB database
 * must all end with the count at 0, over plain HTTP/2 and over TLS. With
 * the transport driven as curl_easy_perform drives it, the small snapshot
 * alone counts one over plain HTTP/2 (over TLS the old way was not seen to
 * stall; the TLS group guards that it stays so).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "tests/harness/harness.h"
#include "util/macro.h"
#include "util/xalloc.h"

static const char *version = "3.5.16";
static harness_cluster *cluster;
static etcd_client *cl;

#define assert_ok(expr)                                                                            \
        do {                                                                                       \
                int _r = (expr);                                                                   \
                if (_r != 0)                                                                       \
                        fail_msg("%s = %d (%s): %s", #expr, _r, etcd_strerror(_r),                 \
                                 etcd_client_last_error(cl));                                      \
        } while (0)

static int start(bool tls)
{
        harness_opts o = {.version = version, .members = 1, .tls = tls};
        if (harness_cluster_start(&o, &cluster) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return -1;
        }
        etcd_client_opts co = {.endpoints = cluster->endpoints, .call_timeout_ms = 60000};
        if (tls) {
                co.cacert = cluster->tls->ca_cert;
                co.cert = cluster->tls->client_cert;
                co.key = cluster->tls->client_key;
        }
        if (etcd_client_new(&co, &cl) < 0)
                return -1;
        return 0;
}

static int setup(void **state)
{
        (void)state;
        return start(false);
}

static int setup_tls(void **state)
{
        (void)state;
        return start(true);
}

static int teardown(void **state)
{
        (void)state;
        etcd_client_free(cl);
        harness_cluster_free(cluster);
        return 0;
}

/* Put n values of size bytes under prefix. */
static void fill(const char *prefix, int n, size_t size)
{
        char *value = xmalloc(size);
        for (size_t i = 0; i < size; i++)
                value[i] = (char)('a' + i % 26);
        for (int i = 0; i < n; i++) {
                char key[64];
                snprintf(key, sizeof(key), "%s/%06d", prefix, i);
                assert_ok(etcd_put(cl, key, value, size, NULL));
        }
        free(value);
}

static int count_bytes(const void *data, size_t len, void *userdata)
{
        (void)data;
        *(uint64_t *)userdata += len;
        return 0;
}

static uint64_t snapshot_bytes(void)
{
        uint64_t got = 0;
        etcd_snapshot_info info = {0};
        assert_ok(etcd_snapshot(cl, cluster->members[0].client_url, count_bytes, &got, &info));
        assert_true(info.checksum_ok);
        return got;
}

static void unary_calls(void **state)
{
        (void)state;
        for (int i = 0; i < 50; i++) {
                etcd_members *l = NULL;
                assert_ok(etcd_member_list(cl, &l));
                etcd_members_free(l);
                etcd_endpoint_status *s = NULL;
                assert_ok(etcd_status(cl, cluster->members[0].client_url, &s));
                etcd_endpoint_status_free(s);
        }
        fill("/unary", 20, 100);
        etcd_kv_list *kv = NULL;
        assert_ok(etcd_get(cl, "/unary/", true, &kv));
        etcd_kv_list_free(kv);
        assert_int_equal(etcd_client_timer_wakeups(cl), 0);
}

/* Range answers from a few bytes to well past libcurl's 16 KB buffer and its 32 KB read. */
static void answers_of_every_size(void **state)
{
        (void)state;
        static const size_t sizes[] = {1000, 15000, 16384, 17000, 30000, 33000, 70000, 300000};
        for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
                char key[32];
                snprintf(key, sizeof(key), "/sized/%zu", sizes[i]);
                fill(key, 1, sizes[i]);
                etcd_kv_list *kv = NULL;
                assert_ok(etcd_get(cl, key, true, &kv));
                assert_int_equal(kv->n, 1);
                etcd_kv_list_free(kv);
        }
        assert_int_equal(etcd_client_timer_wakeups(cl), 0);
}

/* A snapshot of the small database, of about 1 MB and of about 8 MB. */
static void snapshots(void **state)
{
        (void)state;
        assert_true(snapshot_bytes() > 0);
        assert_int_equal(etcd_client_timer_wakeups(cl), 0);
        fill("/mb", 16, 64 * 1024);
        assert_true(snapshot_bytes() >= 1024 * 1024);
        assert_int_equal(etcd_client_timer_wakeups(cl), 0);
        fill("/mb8", 112, 64 * 1024);
        assert_true(snapshot_bytes() >= 8 * 1024 * 1024);
        assert_int_equal(etcd_client_timer_wakeups(cl), 0);
}

int main(int argc, char **argv)
{
        if (argc > 1)
                version = argv[1];
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup); skipping\n", version);
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(unary_calls),
            cmocka_unit_test(answers_of_every_size),
            cmocka_unit_test(snapshots),
        };
        int failed = cmocka_run_group_tests_name("http", tests, setup, teardown);
        return failed + cmocka_run_group_tests_name("https", tests, setup_tls, teardown);
}
