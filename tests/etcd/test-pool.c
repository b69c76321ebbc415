/*
 * The process's etcd connections (etcd/pool.h) against a real single-member
 * etcd 3.5.16 with TLS: callers share one connection per endpoint and TLS
 * identity, an idle connection is closed and a call after it opens a new
 * one, and callers at the same moment each get a connection of their own.
 *
 * A stress case drives the pool from many threads at once: callers of two
 * TLS identities borrowing and handing back, calls cut off mid-answer (a
 * connection closed by its borrower), clients made and freed, while other
 * threads close the endpoint's idle connections, sweep with a 1 ms idle
 * time and read the counts; meant to be run under ASan and TSan too.
 *
 * Connections are counted twice: by the client's own count of the TCP
 * connections libcurl opened (etcd_pool_stats.opened) and by the sockets
 * this process holds (/proc/self/fd), so a connection the pool says it
 * closed is really gone.
 */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "etcd/errors.h"
#include "etcd/pool.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static harness_cluster *cluster;

/* A client of the cluster with the harness's CA and, when mtls, its client certificate. */
static etcd_client *client(const char *cacert, bool mtls)
{
        etcd_client_opts o = {
            .endpoints = cluster->endpoints,
            .cacert = cacert ? cacert : cluster->tls->ca_cert,
            .cert = mtls ? cluster->tls->client_cert : NULL,
            .key = mtls ? cluster->tls->client_key : NULL,
            .call_timeout_ms = 20000,
        };
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

static void list_ok(etcd_client *c)
{
        etcd_members *l = NULL;
        int r = etcd_member_list(c, &l);
        if (r != 0)
                fail_msg("member list: %s", etcd_client_last_error(c));
        assert_int_equal(l->n, 1);
        etcd_members_free(l);
}

/*
 * The TCP connections this process holds to the member: its sockets
 * (/proc/self/fd) that /proc/self/net/tcp shows established to the member's
 * client port. (libcurl keeps a socket pair of its own beside each
 * connection, which this leaves out.)
 */
static size_t sockets(void)
{
        DIR *d = opendir("/proc/self/fd");
        assert_non_null(d);
        unsigned long inodes[256];
        size_t n_inodes = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                char target[64];
                ssize_t k = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
                if (k <= 0)
                        continue;
                target[k] = '\0';
                unsigned long ino = 0;
                if (sscanf(target, "socket:[%lu]", &ino) == 1 && n_inodes < ARRAY_SIZE(inodes))
                        inodes[n_inodes++] = ino;
        }
        closedir(d);
        FILE *f = fopen("/proc/self/net/tcp", "re");
        assert_non_null(f);
        char line[512];
        size_t n = 0;
        while (fgets(line, sizeof(line), f)) {
                unsigned rem_port = 0, st = 0;
                unsigned long ino = 0;
                if (sscanf(line, " %*d: %*x:%*x %*x:%x %x %*x:%*x %*x:%*x %*x %*u %*u %lu",
                           &rem_port, &st, &ino) != 3)
                        continue;
                for (size_t i = 0; i < n_inodes; i++)
                        n += inodes[i] == ino && st == 1 &&
                             (int)rem_port == cluster->members[0].client_port;
        }
        fclose(f);
        return n;
}

static etcd_pool_stats stats(void)
{
        etcd_pool_stats s;
        etcd_pool_stats_get(&s);
        return s;
}

static int setup(void **state)
{
        (void)state;
        harness_opts o = {.version = "3.5.16", .members = 1, .tls = true};
        if (harness_cluster_start(&o, &cluster) < 0) {
                fprintf(stderr, "cannot start etcd 3.5.16\n");
                return -1;
        }
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        etcd_pool_close_idle();
        harness_cluster_free(cluster);
        return 0;
}

/* Each test starts with no connection and the default idle time. */
static int fresh(void **state)
{
        (void)state;
        etcd_pool_close_idle();
        etcd_pool_set_idle_ms(0);
        return 0;
}

/* Two callers of one endpoint with one TLS identity: one connection, kept after both are gone. */
static void test_callers_share(void **state)
{
        (void)state;
        size_t sock0 = sockets();
        uint64_t opened0 = stats().opened;
        etcd_client *a = client(NULL, true), *b = client(NULL, true);
        list_ok(a);
        list_ok(b);
        etcd_endpoint_status *st = NULL;
        assert_int_equal(etcd_status(a, NULL, &st), 0);
        etcd_endpoint_status_free(st);
        list_ok(b);
        assert_int_equal(stats().opened - opened0, 1);
        assert_int_equal(stats().open, 1);
        assert_int_equal(sockets(), sock0 + 1);
        etcd_client_free(a);
        etcd_client_free(b);
        /* a client made later (one step of a pass) reuses it */
        etcd_client *c = client(NULL, true);
        list_ok(c);
        etcd_client_free(c);
        assert_int_equal(stats().opened - opened0, 1);
        assert_int_equal(stats().idle, 1);
}

/* Another TLS identity (no client certificate; a CA file replaced in place) never shares. */
static void test_identities_apart(void **state)
{
        (void)state;
        uint64_t opened0 = stats().opened;
        _cleanup_free_ char *ca = xasprintf("%s/ca-copy.crt", cluster->tls->dir);
        char *pem = NULL;
        size_t len = 0;
        assert_int_equal(read_file(cluster->tls->ca_cert, 1 << 20, &pem, &len), 0);
        assert_int_equal(write_file_atomic(ca, pem, len, 0644), 0);

        etcd_client *mtls = client(NULL, true), *plain = client(NULL, false);
        etcd_client *copy = client(ca, true);
        list_ok(mtls);
        list_ok(plain);
        list_ok(copy);
        assert_int_equal(stats().opened - opened0, 3);
        list_ok(copy);
        assert_int_equal(stats().opened - opened0, 3);
        /* the CA file replaced (a rotation writes a new file over it): a new connection */
        assert_int_equal(write_file_atomic(ca, pem, len, 0644), 0);
        list_ok(copy);
        assert_int_equal(stats().opened - opened0, 4);
        assert_int_equal(stats().open, 4);
        etcd_client_free(mtls);
        etcd_client_free(plain);
        etcd_client_free(copy);
        free(pem);
}

/* An idle connection is closed (its socket too); the next call opens another. */
static void test_idle_close_and_reopen(void **state)
{
        (void)state;
        etcd_pool_set_idle_ms(200);
        size_t sock0 = sockets();
        uint64_t opened0 = stats().opened, closed0 = stats().closed_idle;
        etcd_client *c = client(NULL, true);
        list_ok(c);
        assert_int_equal(sockets(), sock0 + 1);
        int64_t deadline = now_mono_ms() + 30000;
        while (stats().open > 0 && now_mono_ms() < deadline) {
                msleep(50);
                etcd_pool_sweep();
        }
        assert_int_equal(stats().open, 0);
        assert_int_equal(stats().closed_idle - closed0, 1);
        assert_int_equal(sockets(), sock0);
        /* the same client, on demand */
        list_ok(c);
        assert_int_equal(stats().opened - opened0, 2);
        assert_int_equal(sockets(), sock0 + 1);
        etcd_client_free(c);
}

static int refuse_chunk(const void *data, size_t len, void *userdata)
{
        (void)data;
        (void)len;
        (void)userdata;
        return -ECANCELED;
}

/* A call cut off in the middle of its answer closes its connection; the next caller opens one. */
static void test_cut_call_not_kept(void **state)
{
        (void)state;
        uint64_t opened0 = stats().opened;
        etcd_client *c = client(NULL, true);
        list_ok(c);
        assert_int_equal(stats().idle, 1);
        /* the snapshot's stream is abandoned at its first chunk */
        assert_true(etcd_snapshot(c, NULL, refuse_chunk, NULL, NULL) < 0);
        assert_int_equal(stats().open, 0);
        list_ok(c);
        assert_int_equal(stats().opened - opened0, 2);
        etcd_client_free(c);
}

#define THREADS 4
#define CALLS   40

static void *caller(void *arg)
{
        (void)arg;
        etcd_client *c = client(NULL, true);
        long failed = 0;
        for (int i = 0; i < CALLS; i++) {
                etcd_members *l = NULL;
                failed += etcd_member_list(c, &l) != 0;
                etcd_members_free(l);
        }
        etcd_client_free(c);
        return (void *)failed;
}

/* Callers at the same moment: each call has a connection to itself; no more than callers. */
static void test_concurrent_callers(void **state)
{
        (void)state;
        uint64_t opened0 = stats().opened;
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++)
                assert_int_equal(pthread_create(&t[i], NULL, caller, NULL), 0);
        for (int i = 0; i < THREADS; i++) {
                void *failed = NULL;
                assert_int_equal(pthread_join(t[i], &failed), 0);
                assert_int_equal((long)failed, 0);
        }
        uint64_t opened = stats().opened - opened0;
        assert_true(opened >= 1 && opened <= THREADS);
        assert_int_equal(stats().open, opened);
        assert_int_equal(stats().idle, opened);
        printf("%d threads x %d calls: %llu connections\n", THREADS, CALLS,
               (unsigned long long)opened);
}

/*
 * The pool from many threads at once. Every caller's calls must succeed
 * (closing an endpoint's connections touches only idle ones, never one a
 * call holds), and afterwards the counts must add up and every socket be
 * gone once the idle ones are closed.
 */
#define STRESS_THREADS 12
#define STRESS_MS      3000

static atomic_bool stress_stop;

static void *stress_caller(void *arg)
{
        long i = (long)arg;
        etcd_client *c = client(NULL, i % 3 != 0); /* two TLS identities */
        long failed = 0;
        for (unsigned n = 0; !atomic_load(&stress_stop); n++) {
                if (n % 16 == 15) { /* a short-lived client: one step of a pass */
                        etcd_client_free(c);
                        c = client(NULL, (i + n) % 3 != 0);
                }
                if (n % 7 == 3) { /* cut off mid-answer: its connection is closed, not kept */
                        failed += etcd_snapshot(c, NULL, refuse_chunk, NULL, NULL) >= 0;
                } else if (n % 2) {
                        etcd_endpoint_status *st = NULL;
                        failed += etcd_status(c, NULL, &st) != 0;
                        etcd_endpoint_status_free(st);
                } else {
                        etcd_members *l = NULL;
                        failed += etcd_member_list(c, &l) != 0;
                        etcd_members_free(l);
                }
        }
        etcd_client_free(c);
        return (void *)failed;
}

static void *stress_closer(void *arg)
{
        long i = (long)arg;
        etcd_client *c = client(NULL, true);
        for (unsigned n = 0; !atomic_load(&stress_stop); n++) {
                etcd_pool_stats s = stats();
                assert_true(s.idle <= s.open);
                if (i == 0)
                        etcd_client_close_idle(c); /* before a member stops */
                else if (n % 50 == 0)
                        etcd_pool_close_idle();
                else
                        etcd_pool_sweep();
                msleep(n % 3);
        }
        etcd_client_free(c);
        return NULL;
}

static void test_threads_take_give_close(void **state)
{
        (void)state;
        size_t sock0 = sockets();
        etcd_pool_set_idle_ms(1);
        atomic_store(&stress_stop, false);
        pthread_t callers[STRESS_THREADS], closers[2];
        for (long i = 0; i < STRESS_THREADS; i++)
                assert_int_equal(pthread_create(&callers[i], NULL, stress_caller, (void *)i), 0);
        for (long i = 0; i < 2; i++)
                assert_int_equal(pthread_create(&closers[i], NULL, stress_closer, (void *)i), 0);
        msleep(STRESS_MS);
        atomic_store(&stress_stop, true);
        long failed = 0;
        for (int i = 0; i < STRESS_THREADS; i++) {
                void *f = NULL;
                assert_int_equal(pthread_join(callers[i], &f), 0);
                failed += (long)f;
        }
        for (int i = 0; i < 2; i++)
                assert_int_equal(pthread_join(closers[i], NULL), 0);
        assert_int_equal(failed, 0);
        etcd_pool_stats s = stats();
        assert_int_equal(s.open, s.idle); /* no call holds one */
        printf("%d threads for %d ms: %llu connections opened, %llu closed after idle\n",
               STRESS_THREADS, STRESS_MS, (unsigned long long)s.opened,
               (unsigned long long)s.closed_idle);
        etcd_pool_close_idle();
        assert_int_equal(stats().open, 0);
        /* every socket closed (etcd may take a moment to see the last ones go) */
        int64_t deadline = now_mono_ms() + 30000;
        while (sockets() > sock0 && now_mono_ms() < deadline)
                msleep(50);
        assert_int_equal(sockets(), sock0);
}

/* ---- a member removed while the process keeps a connection to it ---- */

static harness_cluster *trio; /* three plain members */

static int trio_setup(void **state)
{
        (void)state;
        harness_opts o = {.version = "3.5.16", .members = 3};
        if (harness_cluster_start(&o, &trio) < 0) {
                fprintf(stderr, "cannot start three members of etcd 3.5.16\n");
                return -1;
        }
        return 0;
}

static int trio_teardown(void **state)
{
        (void)state;
        etcd_pool_close_idle();
        harness_cluster_free(trio);
        return 0;
}

static etcd_client *trio_client(const char *endpoints)
{
        etcd_client_opts o = {
            .endpoints = endpoints, .call_timeout_ms = 5000, .dial_timeout_ms = 500};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

/*
 * A member that answers "server stopped" (removed from its cluster, its
 * raft stopped while its process still serves the connections it has)
 * never serves on that connection again: the connection is not kept for
 * the next client, nor is any other idle one to that member. A writer that
 * makes a new client after a failed put would otherwise be handed the same
 * connection and fail a second time (a write retried twice for one member
 * removed).
 */
static void test_stopped_member_not_kept(void **state)
{
        (void)state;
        const char *url = trio->members[2].client_url;
        etcd_client *w = trio_client(url);
        int64_t rev = 0;
        assert_int_equal(etcd_put(w, "k", "v", 1, &rev), 0);
        etcd_client_free(w); /* its connection stays in the pool, idle */

        _cleanup_free_ char *others =
            xasprintf("%s,%s", trio->members[0].client_url, trio->members[1].client_url);
        etcd_client *admin = trio_client(others);
        etcd_members *l = NULL;
        assert_int_equal(etcd_member_list(admin, &l), 0);
        uint64_t id = 0;
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->members[i].name, trio->members[2].name))
                        id = l->members[i].id;
        etcd_members_free(l);
        assert_true(id != 0);
        /* etcd refuses while its members have been connected for less than 5 s */
        int64_t until = now_mono_ms() + 60000;
        int k;
        while ((k = etcd_member_remove(admin, id)) == ETCD_ERR_UNHEALTHY && now_mono_ms() < until)
                msleep(200);
        assert_int_equal(k, 0);
        etcd_client_free(admin);

        /* the removed member's answers over the kept connection, until one says it stopped */
        int r = 0;
        int64_t deadline = now_mono_ms() + 30000;
        do {
                w = trio_client(url);
                r = etcd_put(w, "k", "v", 1, &rev);
                if (r != 0)
                        printf("the removed member: %s\n", etcd_client_last_error(w));
                etcd_client_free(w);
                if (r == 0)
                        msleep(20);
        } while (r == 0 && now_mono_ms() < deadline);
        if (r != ETCD_ERR_SERVER_STOPPED)
                skip(); /* the member went away before it answered "server stopped" (no
                           connection left to keep): nothing to check */
        /* nothing kept to it: the next client dials afresh */
        assert_int_equal(etcd_pool_close_url(url), 0);
}

int main(void)
{
        if (!harness_have_etcd("3.5.16")) {
                fprintf(stderr, "etcd 3.5.16 is not installed (scripts/setup)\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_callers_share, fresh),
            cmocka_unit_test_setup(test_identities_apart, fresh),
            cmocka_unit_test_setup(test_idle_close_and_reopen, fresh),
            cmocka_unit_test_setup(test_cut_call_not_kept, fresh),
            cmocka_unit_test_setup(test_concurrent_callers, fresh),
            cmocka_unit_test_setup(test_threads_take_give_close, fresh),
        };
        const struct CMUnitTest removal[] = {
            cmocka_unit_test_setup(test_stopped_member_not_kept, fresh),
        };
        int failed = cmocka_run_group_tests(tests, setup, teardown);
        return failed + cmocka_run_group_tests(removal, trio_setup, trio_teardown);
}
