/*
 * gitcd's etcd client moves off a member that is defragmenting, against a
 * real 3-member cluster of the newest etcd 3.5 in the cache, its members
 * started with --experimental-stop-grpc-service-on-defrag=true (etcd then
 * answers NOT_SERVING on grpc.health.v1.Health/Check while it defragments).
 *
 * About 48 MB of live data make each defragmentation last a moment. A
 * follower is defragmented over and over by a second client (one per
 * thread) while a client with all three endpoints, that follower first,
 * reads and writes: no call may fail, and the client must have found the
 * member not serving (etcd_client_not_serving) and served calls from the
 * others meanwhile (rounds of a write and a read that began and ended
 * within one defragmentation). Its reads' first try is cut to 100 ms so a short
 * defragmentation is caught; the default (1 s) behaves the same on a
 * longer one. Skips cleanly when no etcd 3.5 is cached.
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

#include "etcd/client.h"
#include "tests/harness/harness.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VALUE_SIZE (64 * 1024)
#define N_VALUES   768 /* 48 MB */

static harness_cluster *cluster;
static size_t victim;
static atomic_bool stop;
static atomic_int defrags;
static atomic_int in_defrag; /* which defragmentation runs (its number), 0: none */

static void *defrag_loop(void *arg)
{
        (void)arg;
        etcd_client_opts o = {.endpoints = cluster->members[victim].client_url,
                              .call_timeout_ms = 60000};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) < 0)
                return NULL;
        while (!atomic_load(&stop)) {
                atomic_store(&in_defrag, atomic_load(&defrags) + 1);
                if (etcd_defragment(c, cluster->members[victim].client_url) == 0)
                        atomic_fetch_add(&defrags, 1);
                atomic_store(&in_defrag, 0);
        }
        etcd_client_free(c);
        return NULL;
}

static void test_reads_and_writes_move_off_a_defragmenting_member(void **state)
{
        (void)state;
        _cleanup_free_ char *version = harness_etcd_newest("3.5");
        if (!version)
                skip();
        harness_opts ho = {.version = version,
                           .members = 3,
                           .extra_arg = "--experimental-stop-grpc-service-on-defrag=true"};
        assert_int_equal(harness_cluster_start(&ho, &cluster), 0);

        /* the victim: a follower (a leader's defragmentation stalls raft too) */
        etcd_client_opts all = {.endpoints = cluster->endpoints};
        etcd_client *setup = NULL;
        assert_int_equal(etcd_client_new(&all, &setup), 0);
        etcd_endpoint_status *st = NULL;
        assert_int_equal(etcd_status(setup, cluster->members[0].client_url, &st), 0);
        victim = st->leader == st->member_id ? 1 : 0;
        etcd_endpoint_status_free(st);
        static char blob[VALUE_SIZE];
        memset(blob, 'x', sizeof(blob));
        for (int i = 0; i < N_VALUES; i++) {
                char key[32];
                snprintf(key, sizeof(key), "data/%06d", i);
                assert_int_equal(etcd_put(setup, key, blob, sizeof(blob), NULL), 0);
        }
        etcd_client_free(setup);

        /* the client under test: the victim first */
        _cleanup_free_ char *eps = xasprintf("%s,%s,%s", cluster->members[victim].client_url,
                                             cluster->members[(victim + 1) % 3].client_url,
                                             cluster->members[(victim + 2) % 3].client_url);
        etcd_client_opts co = {.endpoints = eps, .read_first_try_ms = 100};
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
        harness_cluster_free(cluster);
        cluster = NULL;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_reads_and_writes_move_off_a_defragmenting_member),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
