/*
 * The locked target (targets/locked.h).
 *
 * Design: two kinds of lock. A per-cluster mutex (keyed by
 * "namespace/name", created on first use and kept until the wrapper is
 * freed) is held around every operation that names a cluster, so the
 * operations of one cluster stay serialized, as the reconciler expects,
 * while those of different clusters run side by side. Inside it, the
 * shared lock guards the inner target's own tables (the local process
 * table, the Kubernetes call client, the SSH connection pool): it is held
 * around every forwarded operation too, but the inner target lets go of
 * it around its slow waits (target_blocking_begin/end: a stop waiting for
 * a process to exit, a Pod deletion waiting on its grace period, a health
 * probe of a member that does not answer, the event wait itself), where it
 * touches none of that shared state. Lock order: cluster, then shared.
 *
 * The operations that name no cluster (tick, wait_event, take_events) take
 * only the shared lock, so wait_event blocks no other operation while it
 * waits, and several threads may wait at once (the inner target makes that
 * safe: targets/local.c looks at its processes again after the wait,
 * targets/kubernetes.c has a lock of its own for its watch client).
 *
 * The wrapper has its own copy of the operation table (and of the optional
 * adopt table, forwarded under the cluster's lock like every operation
 * that names a cluster), with an operation left NULL where the inner
 * target has none, so callers that test for an optional operation see the
 * same thing. An inner target used without the
 * wrapper (one thread) finds target_blocking_begin/end do nothing.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "targets/locked.h"
#include "util/xalloc.h"

#define CLUSTER_BUCKETS 256

/* One cluster's mutex; never freed while the wrapper lives, so a pointer to it stays good. */
typedef struct cluster_lock {
        char *key; /* "namespace/name" */
        pthread_mutex_t lock;
        struct cluster_lock *next;
} cluster_lock;

typedef struct locked_target {
        target base;
        target_ops ops;
        target_adopt_ops adopt;       /* ops.adopt when the inner target has adopt ops */
        target_debug_ops debug;       /* ops.debug when the inner target has debug ops */
        target_machine_ops machines;  /* ops.machines when the inner target has them */
        target_takeover_ops takeover; /* ops.takeover when the inner target has them */
        target *inner;
        pthread_mutex_t shared; /* the inner target's own state */
        pthread_mutex_t map;    /* buckets */
        cluster_lock *buckets[CLUSTER_BUCKETS];
} locked_target;

/* The shared lock the calling thread holds inside a forwarded operation, for target_blocking_*. */
static __thread pthread_mutex_t *held_shared;

void target_blocking_begin(void)
{
        if (held_shared)
                pthread_mutex_unlock(held_shared);
}

void target_blocking_end(void)
{
        if (held_shared)
                pthread_mutex_lock(held_shared);
}

void *target_forward_begin(void)
{
        pthread_mutex_t *h = held_shared;
        if (h)
                pthread_mutex_unlock(h);
        held_shared = NULL;
        return h;
}

void target_forward_end(void *token)
{
        pthread_mutex_t *h = token;
        if (h)
                pthread_mutex_lock(h);
        held_shared = h;
}

static uint64_t key_hash(const char *ns, const char *name)
{
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (const char *p = ns ? ns : ""; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ '/') * 1099511628211ULL;
        for (const char *p = name ? name : ""; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        return h;
}

static pthread_mutex_t *cluster_mutex(locked_target *lk, const char *ns, const char *name)
{
        _cleanup_free_ char *key = xasprintf("%s/%s", ns ? ns : "", name ? name : "");
        size_t b = key_hash(ns, name) % CLUSTER_BUCKETS;
        pthread_mutex_lock(&lk->map);
        cluster_lock *cl = lk->buckets[b];
        while (cl && strcmp(cl->key, key) != 0)
                cl = cl->next;
        if (!cl) {
                cl = XNEW(cluster_lock);
                cl->key = TAKE_PTR(key);
                pthread_mutex_init(&cl->lock, NULL);
                cl->next = lk->buckets[b];
                lk->buckets[b] = cl;
        }
        pthread_mutex_unlock(&lk->map);
        return &cl->lock;
}
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

/*
 * Forward an operation under the shared lock (and, with a cluster, under
 * that cluster's lock first); the wrapper's message mirrors the inner
 * target's, read before the shared lock goes.
 */
static pthread_mutex_t *shared_enter(locked_target *lk)
{
        assert(!held_shared); /* no forwarded operation calls another */
        pthread_mutex_lock(&lk->shared);
        held_shared = &lk->shared;
        return &lk->shared;
}

static void shared_leave(locked_target *lk, int r)
{
        assert(held_shared == &lk->shared);
        if (r < 0)
                thread_error_set(target_last_error(lk->inner));
        held_shared = NULL;
        pthread_mutex_unlock(&lk->shared);
}

#define FORWARD_CLUSTER(t, ns, name, call)                                                         \
        ({                                                                                         \
                locked_target *lk_ = LK(t);                                                        \
                pthread_mutex_t *cm_ = cluster_mutex(lk_, (ns), (name));                           \
                pthread_mutex_lock(cm_);                                                           \
                (void)shared_enter(lk_);                                                           \
                int r_ = lk_->inner->ops->call;                                                    \
                shared_leave(lk_, r_);                                                             \
                pthread_mutex_unlock(cm_);                                                         \
                r_;                                                                                \
        })

#define FORWARD(t, c, call) FORWARD_CLUSTER(t, (c)->namespace_, (c)->name, call)

#define FORWARD_SHARED(t, call)                                                                    \
        ({                                                                                         \
                locked_target *lk_ = LK(t);                                                        \
                (void)shared_enter(lk_);                                                           \
                int r_ = lk_->inner->ops->call;                                                    \
                shared_leave(lk_, r_);                                                             \
                r_;                                                                                \
        })

static int lk_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        return FORWARD(t, c, place_member(LK(t)->inner, c, mp));
}

static int lk_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        return FORWARD(t, c, ensure_shared(LK(t)->inner, c, p));
}

static int lk_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        return FORWARD(t, c, ensure_member(LK(t)->inner, c, p, idx));
}

static int lk_ensure_members(target *t, const etcd_cluster *c, const membership_plan *p,
                             int *ret_results)
{
        return FORWARD(t, c, ensure_members(LK(t)->inner, c, p, ret_results));
}

static int lk_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        return FORWARD(t, c, stop_member(LK(t)->inner, c, member));
}

static int lk_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        return FORWARD(t, c, remove_member(LK(t)->inner, c, member, keep_data));
}

static int lk_member_status(target *t, const etcd_cluster *c, const char *member,
                            target_member_status *ret_status)
{
        return FORWARD(t, c, member_status(LK(t)->inner, c, member, ret_status));
}

static int lk_list_members(target *t, const char *namespace_, const char *cluster,
                           char ***ret_names, size_t *ret_n)
{
        return FORWARD_CLUSTER(t, namespace_, cluster,
                               list_members(LK(t)->inner, namespace_, cluster, ret_names, ret_n));
}

static int lk_tick(target *t)
{
        return FORWARD_SHARED(t, tick(LK(t)->inner));
}

static int lk_wait_event(target *t, int timeout_ms)
{
        return FORWARD_SHARED(t, wait_event(LK(t)->inner, timeout_ms));
}

static int lk_take_events(target *t, char ***ret_clusters, size_t *ret_n)
{
        return FORWARD_SHARED(t, take_events(LK(t)->inner, ret_clusters, ret_n));
}

static int lk_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                         char **ret_key)
{
        return FORWARD(t, c, client_tls(LK(t)->inner, c, ret_ca, ret_cert, ret_key));
}

static int lk_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                               target_cert **ret_certs, size_t *ret_n)
{
        return FORWARD(t, c, tls_certificates(LK(t)->inner, c, p, ret_certs, ret_n));
}

static int lk_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                        const char *member, int64_t now_ms)
{
        return FORWARD(t, c, renew_tls(LK(t)->inner, c, p, member, now_ms));
}

static int lk_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        return FORWARD(t, c, drop_kept_data(LK(t)->inner, c, member));
}

static int lk_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                             const target_restore *rs)
{
        return FORWARD(t, c, restore_member(LK(t)->inner, c, p, idx, rs));
}

static int lk_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                            int64_t *ret_revision)
{
        return FORWARD(t, c, data_revision(LK(t)->inner, c, member, tool, ret_revision));
}

static int lk_secret_folder(target *t, const etcd_cluster *c, const char *name, char **ret_dir)
{
        return FORWARD(t, c, secret_folder(LK(t)->inner, c, name, ret_dir));
}

static int lk_writer_start(target *t, const etcd_cluster *c, const char *claim, const char *folder,
                           void **ret_handle, struct receiver_peer *ret_peer)
{
        return FORWARD(t, c, writer_start(LK(t)->inner, c, claim, folder, ret_handle, ret_peer));
}

static int lk_writer_stop(target *t, const etcd_cluster *c, void *handle)
{
        return FORWARD(t, c, writer_stop(LK(t)->inner, c, handle));
}

/* The adopt operations (target_adopt_ops), under the cluster's lock as every operation of it. */
static int lk_adopt_survey(target *t, const etcd_cluster *c, adopt_plan *ret, char **ret_why)
{
        return FORWARD(t, c, adopt->survey(LK(t)->inner, c, ret, ret_why));
}

static int lk_adopt_claim(target *t, const etcd_cluster *c, const adopt_step *s,
                          char **ret_identity)
{
        return FORWARD(t, c, adopt->claim(LK(t)->inner, c, s, ret_identity));
}

static int lk_adopt_retire(target *t, const etcd_cluster *c, const adopt_step *s)
{
        return FORWARD(t, c, adopt->retire(LK(t)->inner, c, s));
}

static int lk_adopt_member_healthy(target *t, const etcd_cluster *c, const char *client_url)
{
        return FORWARD(t, c, adopt->member_healthy(LK(t)->inner, c, client_url));
}

/* The takeover operations (target_takeover_ops), under the cluster's lock as every operation. */
static int lk_takeover_survey(target *t, const etcd_cluster *c, takeover_survey *ret,
                              char **ret_why)
{
        return FORWARD(t, c, takeover->survey(LK(t)->inner, c, ret, ret_why));
}

static int lk_takeover_point_service(target *t, const etcd_cluster *c, const char *service,
                                     char **ret_before)
{
        return FORWARD(t, c, takeover->point_service(LK(t)->inner, c, service, ret_before));
}

/* The debug operations (target_debug_ops), under the cluster's lock as every operation of it. */
static int lk_debug_member_logs(target *t, const etcd_cluster *c, const char *member,
                                size_t max_bytes, char **ret_text, char **ret_source)
{
        return FORWARD(
            t, c, debug->member_logs(LK(t)->inner, c, member, max_bytes, ret_text, ret_source));
}

static int lk_debug_machine_facts(target *t, const etcd_cluster *c, const char *member,
                                  size_t max_bytes, char **ret_text)
{
        return FORWARD(t, c, debug->machine_facts(LK(t)->inner, c, member, max_bytes, ret_text));
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
        pthread_mutex_destroy(&lk->shared);
        pthread_mutex_destroy(&lk->map);
        for (size_t b = 0; b < CLUSTER_BUCKETS; b++)
                while (lk->buckets[b]) {
                        cluster_lock *cl = lk->buckets[b];
                        lk->buckets[b] = cl->next;
                        pthread_mutex_destroy(&cl->lock);
                        free(cl->key);
                        free(cl);
                }
        free(lk);
}

/* A new operation in target_ops must be forwarded here too: this fails to compile until it is. */
_Static_assert(sizeof(target_ops) == 6 * sizeof(void *) + 22 * sizeof(void (*)(void)),
               "target_ops changed: forward the new operation in targets/locked.c");
/* The machine operations (target_machine_ops), under the cluster's lock as every operation of it. */
static int lk_machines_preflights(target *t, const etcd_cluster *c,
                                  const struct state_preflight_list *known, int64_t now_ms,
                                  struct state_preflight_list *ret)
{
        return FORWARD(t, c, machines->preflights(LK(t)->inner, c, known, now_ms, ret));
}

_Static_assert(sizeof(target_machine_ops) == 1 * sizeof(void (*)(void)),
               "target_machine_ops changed: forward the new operation in targets/locked.c");
_Static_assert(sizeof(target_adopt_ops) == 4 * sizeof(void (*)(void)),
               "target_adopt_ops changed: forward the new operation in targets/locked.c");
_Static_assert(sizeof(target_takeover_ops) == 2 * sizeof(void (*)(void)),
               "target_takeover_ops changed: forward the new operation in targets/locked.c");
_Static_assert(sizeof(target_debug_ops) == 2 * sizeof(void (*)(void)),
               "target_debug_ops changed: forward the new operation in targets/locked.c");

int target_locked_new(target *inner, target **ret)
{
        if (!inner)
                return -EINVAL;
        const target_ops *in = inner->ops;
        locked_target *lk = XNEW(locked_target);
        lk->inner = inner;
        pthread_mutex_init(&lk->shared, NULL);
        pthread_mutex_init(&lk->map, NULL);
        lk->ops = (target_ops){
            .name = in->name,
            .caps = in->caps,
            .place_member = in->place_member ? lk_place_member : NULL,
            .ensure_shared = in->ensure_shared ? lk_ensure_shared : NULL,
            .ensure_member = in->ensure_member ? lk_ensure_member : NULL,
            .ensure_members = in->ensure_members ? lk_ensure_members : NULL,
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
            .data_revision = in->data_revision ? lk_data_revision : NULL,
            .secret_folder = in->secret_folder ? lk_secret_folder : NULL,
            .writer_start = in->writer_start ? lk_writer_start : NULL,
            .writer_stop = in->writer_stop ? lk_writer_stop : NULL,
            .adopt = in->adopt ? &lk->adopt : NULL,
            .debug = in->debug ? &lk->debug : NULL,
            .machines = in->machines ? &lk->machines : NULL,
            .takeover = in->takeover ? &lk->takeover : NULL,
            .last_error = lk_last_error,
            .free = lk_free,
        };
        if (in->adopt)
                lk->adopt = (target_adopt_ops){
                    .survey = in->adopt->survey ? lk_adopt_survey : NULL,
                    .claim = in->adopt->claim ? lk_adopt_claim : NULL,
                    .retire = in->adopt->retire ? lk_adopt_retire : NULL,
                    .member_healthy = in->adopt->member_healthy ? lk_adopt_member_healthy : NULL,
                };
        if (in->machines)
                lk->machines = (target_machine_ops){
                    .preflights = in->machines->preflights ? lk_machines_preflights : NULL,
                };
        if (in->takeover)
                lk->takeover = (target_takeover_ops){
                    .survey = in->takeover->survey ? lk_takeover_survey : NULL,
                    .point_service = in->takeover->point_service ? lk_takeover_point_service : NULL,
                };
        if (in->debug)
                lk->debug = (target_debug_ops){
                    .member_logs = in->debug->member_logs ? lk_debug_member_logs : NULL,
                    .machine_facts = in->debug->machine_facts ? lk_debug_machine_facts : NULL,
                };
        lk->base.ops = &lk->ops;
        *ret = &lk->base;
        return 0;
}
