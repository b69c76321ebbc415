/*
 * The locked target (targets/locked.h).
 *
 * Design: one mutex around every forwarded operation; the wrapper has its
 * own copy of the operation table, with an operation left NULL where the
 * inner target has none, so callers that test for an optional operation
 * see the same thing. wait_event holds the mutex while it blocks: the
 * daemon waits for events only while no pass is in flight, and with
 * passes in flight it looks with a zero timeout. A slow operation (a stop
 * that waits for a process to exit, a Pod deletion that waits on its grace
 * period) thus holds up the target operations of other clusters, never
 * their etcd calls or state records.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "targets/locked.h"
#include "util/xalloc.h"

typedef struct locked_target {
        target base;
        target_ops ops;
        target *inner;
        pthread_mutex_t lock;
} locked_target;

/*
 * The calling thread's last message: one per thread, whichever locked
 * target failed. Thread-specific data rather than __thread, so that the
 * message of a worker thread is freed when the thread ends.
 */
static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;

static void error_key_make(void)
{
        int k = pthread_key_create(&error_key, free);
        assert(k == 0);
        (void)k;
}

static void thread_error_set(const char *message)
{
        pthread_once(&error_once, error_key_make);
        free(pthread_getspecific(error_key));
        (void)pthread_setspecific(error_key, xstrdup(message));
}

static const char *thread_error(void)
{
        pthread_once(&error_once, error_key_make);
        const char *e = pthread_getspecific(error_key);
        return e ? e : "";
}

static locked_target *LK(target *t)
{
        return (locked_target *)t;
}

/* Forward an operation under the lock; the wrapper's message mirrors the inner target's. */
#define FORWARD(t, call)                                                                           \
        ({                                                                                         \
                locked_target *lk_ = LK(t);                                                        \
                pthread_mutex_lock(&lk_->lock);                                                    \
                int r_ = lk_->inner->ops->call;                                                    \
                if (r_ < 0)                                                                        \
                        thread_error_set(target_last_error(lk_->inner));                           \
                pthread_mutex_unlock(&lk_->lock);                                                  \
                r_;                                                                                \
        })

static int lk_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        return FORWARD(t, place_member(LK(t)->inner, c, mp));
}

static int lk_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        return FORWARD(t, ensure_shared(LK(t)->inner, c, p));
}

static int lk_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        return FORWARD(t, ensure_member(LK(t)->inner, c, p, idx));
}

static int lk_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        return FORWARD(t, stop_member(LK(t)->inner, c, member));
}

static int lk_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        return FORWARD(t, remove_member(LK(t)->inner, c, member, keep_data));
}

static int lk_member_status(target *t, const etcd_cluster *c, const char *member,
                            target_member_status *ret_status)
{
        return FORWARD(t, member_status(LK(t)->inner, c, member, ret_status));
}

static int lk_list_members(target *t, const char *namespace_, const char *cluster,
                           char ***ret_names, size_t *ret_n)
{
        return FORWARD(t, list_members(LK(t)->inner, namespace_, cluster, ret_names, ret_n));
}

static int lk_tick(target *t)
{
        return FORWARD(t, tick(LK(t)->inner));
}

static int lk_wait_event(target *t, int timeout_ms)
{
        return FORWARD(t, wait_event(LK(t)->inner, timeout_ms));
}

static int lk_take_events(target *t, char ***ret_clusters, size_t *ret_n)
{
        return FORWARD(t, take_events(LK(t)->inner, ret_clusters, ret_n));
}

static int lk_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                         char **ret_key)
{
        return FORWARD(t, client_tls(LK(t)->inner, c, ret_ca, ret_cert, ret_key));
}

static int lk_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                               target_cert **ret_certs, size_t *ret_n)
{
        return FORWARD(t, tls_certificates(LK(t)->inner, c, p, ret_certs, ret_n));
}

static int lk_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                        const char *member, int64_t now_ms)
{
        return FORWARD(t, renew_tls(LK(t)->inner, c, p, member, now_ms));
}

static int lk_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        return FORWARD(t, drop_kept_data(LK(t)->inner, c, member));
}

static int lk_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                             const target_restore *rs)
{
        return FORWARD(t, restore_member(LK(t)->inner, c, p, idx, rs));
}

static int lk_secret_folder(target *t, const etcd_cluster *c, const char *name, char **ret_dir)
{
        return FORWARD(t, secret_folder(LK(t)->inner, c, name, ret_dir));
}

static const char *lk_last_error(const target *t)
{
        (void)t;
        return thread_error();
}

static void lk_free(target *t)
{
        locked_target *lk = LK(t);
        target_free(lk->inner);
        pthread_mutex_destroy(&lk->lock);
        free(lk);
}

/* A new operation in target_ops must be forwarded here too: this fails to compile until it is. */
_Static_assert(sizeof(target_ops) == 2 * sizeof(void *) + 18 * sizeof(void (*)(void)),
               "target_ops changed: forward the new operation in targets/locked.c");

int target_locked_new(target *inner, target **ret)
{
        if (!inner)
                return -EINVAL;
        const target_ops *in = inner->ops;
        locked_target *lk = XNEW(locked_target);
        lk->inner = inner;
        pthread_mutex_init(&lk->lock, NULL);
        lk->ops = (target_ops){
            .name = in->name,
            .caps = in->caps,
            .place_member = in->place_member ? lk_place_member : NULL,
            .ensure_shared = in->ensure_shared ? lk_ensure_shared : NULL,
            .ensure_member = in->ensure_member ? lk_ensure_member : NULL,
            .stop_member = in->stop_member ? lk_stop_member : NULL,
            .remove_member = in->remove_member ? lk_remove_member : NULL,
            .member_status = in->member_status ? lk_member_status : NULL,
            .list_members = in->list_members ? lk_list_members : NULL,
            .tick = in->tick ? lk_tick : NULL,
            .wait_event = in->wait_event ? lk_wait_event : NULL,
            .take_events = in->take_events ? lk_take_events : NULL,
            .client_tls = in->client_tls ? lk_client_tls : NULL,
            .tls_certificates = in->tls_certificates ? lk_tls_certificates : NULL,
            .renew_tls = in->renew_tls ? lk_renew_tls : NULL,
            .drop_kept_data = in->drop_kept_data ? lk_drop_kept_data : NULL,
            .restore_member = in->restore_member ? lk_restore_member : NULL,
            .secret_folder = in->secret_folder ? lk_secret_folder : NULL,
            .last_error = lk_last_error,
            .free = lk_free,
        };
        lk->base.ops = &lk->ops;
        *ret = &lk->base;
        return 0;
}
