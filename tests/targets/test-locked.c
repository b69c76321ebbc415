/*
 * The locked target (targets/locked.h) with an inner target of its own
 * here whose operations block on condition variables, the way a stop
 * waits for a process or a Pod deletion for its grace period: another
 * cluster's operations go through meanwhile, one cluster's operations
 * never overlap, and a thread waiting for events holds up no operation.
 * No timing: every "meanwhile" is an operation that returns while the
 * blocked one is provably still inside its wait.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "targets/locked.h"
#include "targets/target.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

typedef struct gate_target {
        target base;
        pthread_mutex_t m;
        pthread_cond_t cv;
        bool inside;  /* a stop is inside its wait */
        bool open;    /* the wait may end */
        int active_a; /* operations of cluster a inside the inner target */
        int max_active_a;
        int shared_counter; /* shared state: only ever touched under the shared lock */
} gate_target;

static gate_target *GT(target *t)
{
        return (gate_target *)t;
}

static void count_in(gate_target *g, const etcd_cluster *c, int d)
{
        pthread_mutex_lock(&g->m);
        if (streq(c->name, "a")) {
                g->active_a += d;
                if (g->active_a > g->max_active_a)
                        g->max_active_a = g->active_a;
        }
        pthread_mutex_unlock(&g->m);
}

/* Blocks, outside the shared lock, until the test opens the gate. */
static int g_stop(target *t, const etcd_cluster *c, const char *member)
{
        (void)member;
        gate_target *g = GT(t);
        count_in(g, c, 1);
        g->shared_counter++;
        target_blocking_begin();
        pthread_mutex_lock(&g->m);
        g->inside = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
                pthread_cond_wait(&g->cv, &g->m);
        g->inside = false;
        pthread_mutex_unlock(&g->m);
        target_blocking_end();
        g->shared_counter++;
        count_in(g, c, -1);
        return 0;
}

static int g_status(target *t, const etcd_cluster *c, const char *member, target_member_status *ret)
{
        (void)member;
        gate_target *g = GT(t);
        count_in(g, c, 1);
        g->shared_counter++;
        *ret = (target_member_status){.state = MEMBER_READY};
        count_in(g, c, -1);
        return streq(c->name, "fail") ? target_fail(t, -EIO, "cluster %s fails", c->name) : 0;
}

/* Waits like stop, for the event wait. */
static int g_wait_event(target *t, int timeout_ms)
{
        (void)timeout_ms;
        gate_target *g = GT(t);
        target_blocking_begin();
        pthread_mutex_lock(&g->m);
        g->inside = true;
        pthread_cond_broadcast(&g->cv);
        while (!g->open)
                pthread_cond_wait(&g->cv, &g->m);
        g->inside = false;
        pthread_mutex_unlock(&g->m);
        target_blocking_end();
        return 1;
}

static void g_free(target *t)
{
        gate_target *g = GT(t);
        pthread_mutex_destroy(&g->m);
        pthread_cond_destroy(&g->cv);
        free(t->last_error);
        free(g);
}

static const target_ops gate_ops = {
    .name = "gate",
    .stop_member = g_stop,
    .member_status = g_status,
    .wait_event = g_wait_event,
    .free = g_free,
};

static target *gate_new(gate_target **ret_inner)
{
        gate_target *g = XNEW(gate_target);
        g->base.ops = &gate_ops;
        pthread_mutex_init(&g->m, NULL);
        pthread_cond_init(&g->cv, NULL);
        target *t = NULL;
        assert_int_equal(target_locked_new(&g->base, &t), 0);
        *ret_inner = g;
        return t;
}

static etcd_cluster cluster_a = {.namespace_ = "default", .name = "a"};
static etcd_cluster cluster_b = {.namespace_ = "default", .name = "b"};

static void *stop_a(void *arg)
{
        target *t = arg;
        return (void *)(intptr_t)t->ops->stop_member(t, &cluster_a, "a-0");
}

static void *wait_events(void *arg)
{
        target *t = arg;
        return (void *)(intptr_t)t->ops->wait_event(t, -1);
}

static void wait_inside(gate_target *g)
{
        pthread_mutex_lock(&g->m);
        while (!g->inside)
                pthread_cond_wait(&g->cv, &g->m);
        pthread_mutex_unlock(&g->m);
}

static void open_gate(gate_target *g)
{
        pthread_mutex_lock(&g->m);
        g->open = true;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->m);
}

static bool still_inside(gate_target *g)
{
        pthread_mutex_lock(&g->m);
        bool in = g->inside;
        pthread_mutex_unlock(&g->m);
        return in;
}

/* Cluster a's stop waits; cluster b's status, and a failure's message, come meanwhile. */
static void test_other_cluster_goes_on(void **state)
{
        (void)state;
        gate_target *g = NULL;
        target *t = gate_new(&g);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, stop_a, t), 0);
        wait_inside(g);

        target_member_status st = {0};
        assert_int_equal(t->ops->member_status(t, &cluster_b, "b-0", &st), 0);
        assert_int_equal(st.state, MEMBER_READY);
        etcd_cluster fail = {.namespace_ = "default", .name = "fail"};
        assert_int_equal(t->ops->member_status(t, &fail, "f-0", &st), -EIO);
        assert_string_equal(target_last_error(t), "cluster fail fails");
        assert_true(still_inside(g)); /* a's stop has not ended: b did not wait for it */

        open_gate(g);
        void *rv = NULL;
        pthread_join(th, &rv);
        assert_int_equal((int)(intptr_t)rv, 0);
        assert_int_equal(g->shared_counter, 4);
        target_free(t);
}

/* A second operation of cluster a waits for the first: they never overlap. */
static void test_one_cluster_serialized(void **state)
{
        (void)state;
        gate_target *g = NULL;
        target *t = gate_new(&g);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, stop_a, t), 0);
        wait_inside(g);
        pthread_t th2;
        assert_int_equal(pthread_create(&th2, NULL, stop_a, t), 0);
        open_gate(g);
        pthread_join(th, NULL);
        pthread_join(th2, NULL);
        assert_int_equal(g->max_active_a, 1);
        target_free(t);
}

/* A thread waiting for events holds up no operation, of any cluster. */
static void test_wait_event_blocks_nothing(void **state)
{
        (void)state;
        gate_target *g = NULL;
        target *t = gate_new(&g);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, wait_events, t), 0);
        wait_inside(g);
        target_member_status st = {0};
        assert_int_equal(t->ops->member_status(t, &cluster_a, "a-0", &st), 0);
        assert_int_equal(t->ops->member_status(t, &cluster_b, "b-0", &st), 0);
        assert_true(still_inside(g));
        open_gate(g);
        void *rv = NULL;
        pthread_join(th, &rv);
        assert_int_equal((int)(intptr_t)rv, 1);
        target_free(t);
}

/* A wake ends the sleep in progress, or the next one, and is taken once. */
static void *wake_soon(void *arg)
{
        (void)arg;
        msleep(50);
        target_wake();
        return NULL;
}

static void test_wake_ends_a_sleep(void **state)
{
        (void)state;
        (void)target_wake_take();
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, wake_soon, NULL), 0);
        assert_int_equal(target_sleep(600000), 1); /* else the test's timeout ends it */
        pthread_join(th, NULL);
        assert_false(target_wake_pending());
        target_wake(); /* before the sleep starts: it ends at once */
        target_wake();
        assert_int_equal(target_sleep(600000), 1);
        assert_int_equal(target_sleep(1), 0); /* taken once */
}

/* Without the wrapper (one thread), the blocking marks do nothing. */
static void test_unwrapped_marks_are_noops(void **state)
{
        (void)state;
        target_blocking_begin();
        target_blocking_end();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_other_cluster_goes_on),
            cmocka_unit_test(test_one_cluster_serialized),
            cmocka_unit_test(test_wait_event_blocks_nothing),
            cmocka_unit_test(test_wake_ends_a_sleep),
            cmocka_unit_test(test_unwrapped_marks_are_noops),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
