/*
 * gitcd's etcd client moves off a member that is defragmenting, against a
 * real 3-member cluster of the newest etcd 3.5 in the cache, its members
 * started with --experimental-stop-grpc-service-on-defrag=true (etcd then
 * answers NOT_SERVING on grpc.health.v1.Health/Check while it defragments).
 * One cluster for the three tests; about 48 MB of live data make each
 * defragmentation of a follower (the victim) last a moment.
 *
 * - The victim is defragmented over and over from a bare gRPC connection
 *   (on a thread; as by etcdctl: not through gitcd's client, whose own
 *   defragmentations every client of the process knows of) while a client
 *   with all three endpoints, the victim first,
 *   reads and writes: no call may fail, and the client must have found the
 *   member not serving (etcd_client_not_serving) and served calls from the
 *   others meanwhile (rounds of a write and a read that began and ended
 *   within one defragmentation). Its reads' first try is cut to 100 ms so a
 *   short defragmentation is caught; the default (1 s) behaves the same on
 *   a longer one.
 * - A client that only writes, the victim first and its writes so far
 *   served there, sends none of them to the victim while another client of
 *   the same process defragments it (counted by the victim itself, etcd's
 *   grpc_server_started_total for Put on /metrics).
 * - A read of 100,000 keys (a Range over a prefix, which etcd answers in
 *   one message once it has read them all) is sent to one member only,
 *   although it takes longer than a small read's first try (20 ms here):
 *   counted by the members (Range started, /metrics).
 *
 * Skips cleanly when no etcd 3.5 is cached.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "etcd/client.h"
#include "etcd/grpc.h"
#include "etcd/marks.h"
#include "etcd/rpc.pb-c.h"
#include "tests/harness/harness.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VALUE_SIZE (64 * 1024)
#define N_VALUES   768 /* 48 MB */

static harness_cluster *cluster;
static size_t victim;
static atomic_bool stop;
static atomic_int defrags;
static atomic_int in_defrag; /* which defragmentation runs (its number), 0: none */

static int ignore(const uint8_t *msg, size_t len, void *userdata)
{
        (void)msg, (void)len, (void)userdata;
        return 0;
}

/* One call on a connection of its own, outside gitcd's client (as another process's). */
static int raw_call(grpc_conn *conn, const char *path, const ProtobufCMessage *req)
{
        size_t len = protobuf_c_message_get_packed_size(req);
        _cleanup_free_ uint8_t *buf = xmalloc(len ? len : 1);
        protobuf_c_message_pack(req, buf);
        grpc_call_opts o = {
            .timeout_ms = 60000, .connect_timeout_ms = 5000, .max_message = 1 << 20};
        grpc_result res;
        int r = grpc_call(conn, path, buf, len, &o, ignore, NULL, &res);
        grpc_result_release(&res);
        return r;
}

/*
 * The victim defragmented over and over by someone else (etcdctl, another
 * process): a bare gRPC connection, so that the client under test learns of
 * it only from the member's health, not from this process's marks.
 */
static void *defrag_loop(void *arg)
{
        (void)arg;
        grpc_conn *conn = NULL;
        if (grpc_conn_new(cluster->members[victim].client_url, NULL, &conn) < 0)
                return NULL;
        Etcdserverpb__DefragmentRequest req = ETCDSERVERPB__DEFRAGMENT_REQUEST__INIT;
        while (!atomic_load(&stop)) {
                atomic_store(&in_defrag, atomic_load(&defrags) + 1);
                if (raw_call(conn, "/etcdserverpb.Maintenance/Defragment", &req.base) == 0)
                        atomic_fetch_add(&defrags, 1);
                atomic_store(&in_defrag, 0);
        }
        grpc_conn_free(conn);
        return NULL;
}

static char *version;
static char *victim_first; /* the three endpoints, the victim first */

static int setup(void **state)
{
        (void)state;
        version = harness_etcd_newest("3.5");
        if (!version)
                return 0;
        harness_opts ho = {.version = version,
                           .members = 3,
                           .extra_arg = "--experimental-stop-grpc-service-on-defrag=true"};
        if (harness_cluster_start(&ho, &cluster) < 0)
                return -1;
        /* the victim: a follower (a leader's defragmentation stalls raft too) */
        etcd_client_opts all = {.endpoints = cluster->endpoints};
        etcd_client *c = NULL;
        if (etcd_client_new(&all, &c) < 0)
                return -1;
        etcd_endpoint_status *st = NULL;
        if (etcd_status(c, cluster->members[0].client_url, &st) < 0)
                return -1;
        victim = st->leader == st->member_id ? 1 : 0;
        etcd_endpoint_status_free(st);
        static char blob[VALUE_SIZE];
        memset(blob, 'x', sizeof(blob));
        for (int i = 0; i < N_VALUES; i++) {
                char key[32];
                snprintf(key, sizeof(key), "data/%06d", i);
                if (etcd_put(c, key, blob, sizeof(blob), NULL) < 0)
                        return -1;
        }
        etcd_client_free(c);
        victim_first = xasprintf("%s,%s,%s", cluster->members[victim].client_url,
                                 cluster->members[(victim + 1) % 3].client_url,
                                 cluster->members[(victim + 2) % 3].client_url);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        harness_cluster_free(cluster);
        free(victim_first);
        free(version);
        return 0;
}

/* ---- a member's own count of calls (/metrics) ---- */

static size_t collect(char *data, size_t size, size_t n, void *userdata)
{
        sb_append_len(userdata, data, size * n);
        return size * n;
}

/* grpc_server_started_total of one KV method on member i: calls it received. */
static double started(size_t i, const char *method)
{
        _cleanup_free_ char *url = xasprintf("%s/metrics", cluster->members[i].client_url);
        _cleanup_free_ char *series =
            xasprintf("\ngrpc_server_started_total{grpc_method=\"%s\",grpc_service=\"etcdserverpb."
                      "KV\",grpc_type=\"unary\"} ",
                      method);
        strbuf body = STRBUF_INIT;
        CURL *h = curl_easy_init();
        assert_non_null(h);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        assert_int_equal(curl_easy_perform(h), CURLE_OK);
        curl_easy_cleanup(h);
        const char *p = strstr(sb_str(&body), series);
        if (!p)
                fail_msg("no %s in %s", series + 1, url);
        double v = strtod(p + strlen(series), NULL);
        sb_release(&body);
        return v;
}

static void test_reads_and_writes_move_off_a_defragmenting_member(void **state)
{
        (void)state;
        if (!version)
                skip();
        atomic_store(&stop, false);
        /* the client under test: the victim first */
        etcd_client_opts co = {.endpoints = victim_first, .read_first_try_ms = 100};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&co, &c), 0);

        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, defrag_loop, NULL), 0);
        int64_t deadline = now_mono_ms() + 20000;
        /* rounds begun and ended within one defragmentation, the member known down */
        int served_while_down = 0;
        int n = 0;
        while (now_mono_ms() < deadline && served_while_down < 5) {
                int during = atomic_load(&in_defrag);
                bool known = etcd_client_not_serving(c) > 0;
                char key[32];
                snprintf(key, sizeof(key), "w/%06d", n++);
                int r = etcd_put(c, key, "v", 1, NULL);
                if (r != 0)
                        fail_msg("put %s: %s", key, etcd_client_last_error(c));
                etcd_kv_list *l = NULL;
                r = etcd_get(c, key, false, &l);
                if (r != 0)
                        fail_msg("get %s: %s", key, etcd_client_last_error(c));
                assert_int_equal(l->n, 1);
                etcd_kv_list_free(l);
                if (known && during != 0 && atomic_load(&in_defrag) == during)
                        served_while_down++;
        }
        atomic_store(&stop, true);
        pthread_join(th, NULL);
        printf("# %d rounds, %d defragmentations, not serving seen %llu times, %d rounds "
               "within a defragmentation\n",
               n, atomic_load(&defrags), (unsigned long long)etcd_client_not_serving(c),
               served_while_down);
        assert_true(etcd_client_not_serving(c) > 0);
        assert_true(served_while_down >= 5);
        etcd_client_free(c);
}

/* ---- writes: off the member this process defragments, before they are sent ---- */

static atomic_bool defrags_done;

/* Three defragmentations of the victim, one after the other, as maintenance does. */
static void *defrag_three(void *arg)
{
        (void)arg;
        etcd_client_opts o = {.endpoints = cluster->members[victim].client_url,
                              .call_timeout_ms = 60000};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) == 0) {
                for (int i = 0; i < 3; i++)
                        if (etcd_defragment(c, cluster->members[victim].client_url) == 0)
                                atomic_fetch_add(&defrags, 1);
                etcd_client_free(c);
        }
        atomic_store(&defrags_done, true);
        return NULL;
}

static void test_writes_go_elsewhere_while_this_process_defragments(void **state)
{
        (void)state;
        if (!version)
                skip();
        const char *url = cluster->members[victim].client_url;
        etcd_client_opts co = {.endpoints = victim_first};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&co, &c), 0);
        /* it serves again: the marks the test before left are the process's */
        etcd_mark *mark = etcd_marks_ref(url);
        etcd_mark_up(mark);
        etcd_marks_unref(mark);
        /* the victim first, and it takes the writes while it serves */
        double p0 = started(victim, "Put");
        assert_int_equal(etcd_put(c, "wo/first", "v", 1, NULL), 0);
        assert_int_equal(started(victim, "Put"), p0 + 1);

        atomic_store(&defrags, 0);
        atomic_store(&defrags_done, false);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, defrag_three, NULL), 0);
        /* the defragmentation has begun (held): from now on writes go elsewhere */
        int64_t deadline = now_mono_ms() + 30000;
        while (etcd_marks_until(url) != INT64_MAX && !atomic_load(&defrags_done) &&
               now_mono_ms() < deadline)
                msleep(1);
        if (etcd_marks_until(url) != INT64_MAX)
                fail_msg("the member was never marked not serving while it was defragmented");
        double p1 = started(victim, "Put");
        int n = 0;
        int64_t worst = 0;
        while (!atomic_load(&defrags_done)) {
                char key[32];
                snprintf(key, sizeof(key), "wo/%06d", n++);
                int64_t t0 = now_mono_ms();
                if (etcd_put(c, key, "v", 1, NULL) != 0)
                        fail_msg("put %s: %s", key, etcd_client_last_error(c));
                worst = MAX(worst, now_mono_ms() - t0);
        }
        pthread_join(th, NULL);
        double p2 = started(victim, "Put");
        printf("# %d writes during %d defragmentations, the worst %lld ms, %.0f sent to the "
               "member defragmented\n",
               n, atomic_load(&defrags), (long long)worst, p2 - p1);
        assert_int_equal(atomic_load(&defrags), 3);
        assert_true(n > 0);
        assert_true(p2 - p1 == 0);
        /* after the defragmentations, the member is tried as before */
        assert_int_equal(etcd_marks_until(url), 0);
        etcd_client_free(c);
}

/* ---- a large read: sent to one member only ---- */

#define N_KEYS 100000
#define BATCH  100 /* puts per Txn, within etcd's --max-txn-ops (128) */

/* N_KEYS keys under "big/", BATCH per transaction (one put each would take minutes). */
static void load_keys(void)
{
        grpc_conn *conn = NULL;
        assert_int_equal(grpc_conn_new(cluster->members[0].client_url, NULL, &conn), 0);
        for (int b = 0; b < N_KEYS / BATCH; b++) {
                char keys[BATCH][16];
                Etcdserverpb__PutRequest puts[BATCH];
                Etcdserverpb__RequestOp ops[BATCH];
                Etcdserverpb__RequestOp *op_ptrs[BATCH];
                for (int i = 0; i < BATCH; i++) {
                        snprintf(keys[i], sizeof(keys[i]), "big/%06d", b * BATCH + i);
                        puts[i] = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
                        puts[i].key.data = (uint8_t *)keys[i];
                        puts[i].key.len = strlen(keys[i]);
                        puts[i].value.data = (uint8_t *)"0123456789abcdef";
                        puts[i].value.len = 16;
                        ops[i] = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
                        ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
                        ops[i].request_put = &puts[i];
                        op_ptrs[i] = &ops[i];
                }
                Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
                txn.n_success = BATCH;
                txn.success = op_ptrs;
                assert_int_equal(raw_call(conn, "/etcdserverpb.KV/Txn", &txn.base), 0);
        }
        grpc_conn_free(conn);
}

static void test_a_large_read_is_not_sent_twice(void **state)
{
        (void)state;
        if (!version)
                skip();
        load_keys();
        /* a small read's first try far shorter than this read takes */
        etcd_client_opts co = {.endpoints = victim_first, .read_first_try_ms = 20};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&co, &c), 0);
        double before = 0, after = 0;
        for (size_t i = 0; i < 3; i++)
                before += started(i, "Range");
        int64_t t0 = now_mono_ms();
        etcd_kv_list *l = NULL;
        if (etcd_get(c, "big/", true, &l) != 0)
                fail_msg("get big/: %s", etcd_client_last_error(c));
        int64_t took = now_mono_ms() - t0;
        for (size_t i = 0; i < 3; i++)
                after += started(i, "Range");
        printf("# a read of %zu keys took %lld ms, sent %.0f times\n", l->n, (long long)took,
               after - before);
        assert_int_equal(l->n, N_KEYS);
        etcd_kv_list_free(l);
        assert_true(took > co.read_first_try_ms); /* else this test says nothing */
        assert_true(after - before == 1);
        assert_int_equal(etcd_client_not_serving(c), 0);
        /* a small read still gets its short first try, and is served */
        assert_int_equal(etcd_get(c, "big/000001", false, &l), 0);
        assert_int_equal(l->n, 1);
        etcd_kv_list_free(l);
        etcd_client_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_reads_and_writes_move_off_a_defragmenting_member),
            cmocka_unit_test(test_writes_go_elsewhere_while_this_process_defragments),
            cmocka_unit_test(test_a_large_read_is_not_sent_twice),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
