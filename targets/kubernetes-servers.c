/*
 * Several API servers behind one Kubernetes target (targets/kubernetes.h,
 * kubernetes_servers_new): what the kind "kubernetes" opens. Each cluster
 * runs on the API server of its kubeconfig context: spec.kubernetes.context
 * (the intake writes the source's there when the spec names none), else
 * the context the target was opened with, else the kubeconfig's current
 * one (docs/kubernetes.md, "Several API servers").
 *
 * Decisions a reader needs:
 * - One server per distinct API server and credentials (the server URL and
 *   a digest of the CA, client certificate, key and token they name), opened
 *   on the first operation of a cluster on it: a kubernetes target of its
 *   own (its call and watch clients, its RBAC preflight of each spec, its
 *   tables) inside a locked wrapper of its own (targets/locked.h). Two
 *   contexts on one server share it. Every server shares the state folder:
 *   a cluster's files are under its namespace and name, which are unique in
 *   gitcd whatever the server.
 * - No lock is shared between servers. This target forwards each
 *   operation without a lock of its own held (target_forward_begin lets go
 *   of the wrapper's shared lock around it; the cluster's lock stays held);
 *   its own table is under a mutex held only to look a server up or add
 *   one. So a server that does not answer holds up only the threads calling
 *   it, never the operations of clusters on another server.
 * - A server that fails a call as unreachable (the client's -EIO: connection
 *   refused, reset, timed out, or 5xx and 429, after its retries; not a
 *   Pod deletion that took too long, -ETIMEDOUT) is marked down for
 *   DOWN_MS: the operations of its clusters then fail at once with
 *   -EHOSTUNREACH, saying which server and context, rather than each
 *   taking a driver worker through the client's timeouts. After DOWN_MS one
 *   call tries the server again (it stays marked meanwhile, so the others
 *   still fail at once); its answer clears the mark or renews it. A server
 *   that accepts connections and never answers still holds the first calls
 *   to it (before the mark) for the client's timeouts, each on a worker of
 *   its own clusters; no other server's.
 * - Events: each server's Pods are watched by a thread of its own
 *   (started with the first wait_event) calling the server's wait_event
 *   in slices; wait_event here waits on any of them, so a stalled watch
 *   delays no other server's events. The watch threads ignore
 *   target_wake(), which is the daemon's wait's. take_events is the union
 *   of every server's.
 * - list_members names no spec: it goes to the server its cluster's
 *   operations last went to (every pass observes member_status first),
 *   else to the default context's.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kubeconfig.h"
#include "targets/kubernetes.h"
#include "targets/locked.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define DOWN_MS        15000 /* a server that failed as unreachable is left alone this long */
#define WATCH_SLICE_MS 2000  /* each watch thread's wait_event call (and the most a free waits) */
#define JOIN_WAIT_MS   3000  /* at free, how long a watch thread may take to end */
#define EVENT_POLL_MS  20    /* wait_event looks at the watch threads' flag this often */

typedef struct kserver kserver;
typedef struct kservers kservers;

struct kserver {
        kservers *owner;
        char *key;               /* server URL + credentials digest */
        char *server;            /* URL, for messages */
        target *raw;             /* the kubernetes target (gitcd plan uses it as is) */
        target *t;               /* raw in its locked wrapper */
        atomic_llong down_until; /* monotonic ms; 0: not marked down */
        char *down_why;          /* under owner->lock */
        pthread_t watcher;
        bool watching;
        atomic_bool watcher_done;
};

typedef struct kcontext {
        char *name; /* "" for the default */
        kserver *srv;
} kcontext;

struct kservers {
        target base;
        char *kubeconfig;
        char *context; /* the default; NULL: the kubeconfig's current one */
        char *state_dir, *domain, *snapshot_image;
        void (*warn)(void *userdata, const char *message);
        void *warn_userdata;

        pthread_mutex_t lock; /* the tables below */
        kcontext *contexts;
        size_t n_contexts, alloc_contexts;
        kserver **servers;
        size_t n_servers, alloc_servers;
        strmap cluster_context; /* "ns/name" → index in contexts */

        atomic_bool ev_pending; /* set by the watch threads, taken by wait_event */
        atomic_bool stopping;
};

static const target_ops kservers_ops;

static kservers *KS(target *t)
{
        return (kservers *)t;
}

/* The calling thread's message (the target is shared by threads). */
static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;

static void error_key_make(void)
{
        int k = pthread_key_create(&error_key, free);
        assert(k == 0);
        (void)k;
}

static int fail(int err, const char *fmt, ...) _printf_(2, 3);
static int fail(int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        pthread_once(&error_once, error_key_make);
        free(pthread_getspecific(error_key));
        (void)pthread_setspecific(error_key, msg);
        return err;
}

static const char *ks_last_error(const target *t)
{
        (void)t;
        pthread_once(&error_once, error_key_make);
        const char *e = pthread_getspecific(error_key);
        return e ? e : "";
}

/* What tells two servers apart: the URL and the credentials (a digest: no secret kept). */
static char *server_key(const kube_config *cfg)
{
        _cleanup_(hash_freep) hash_ctx *h = hash_sha256_new();
        const char *parts[] = {cfg->server,
                               cfg->ca_file,
                               cfg->cert_file,
                               cfg->key_file,
                               cfg->token,
                               cfg->token_file,
                               cfg->insecure_skip_tls_verify ? "insecure" : "verify"};
        for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
                hash_update(h, parts[i] ? parts[i] : "", parts[i] ? strlen(parts[i]) + 1 : 1);
        hash_update(h, cfg->ca_data ? cfg->ca_data : "", cfg->ca_data ? cfg->ca_len : 0);
        hash_update(h, cfg->cert_data ? cfg->cert_data : "", cfg->cert_data ? cfg->cert_len : 0);
        hash_update(h, cfg->key_data ? cfg->key_data : "", cfg->key_data ? cfg->key_len : 0);
        uint8_t d[HASH_SHA256_LEN];
        hash_final(h, d);
        _cleanup_free_ char *hex = hex_encode_new(d, sizeof(d));
        return xasprintf("%s %s", cfg->server, hex);
}

/* Open the server of cfg, or find the one already open. With ks->lock held. */
static int server_of(kservers *ks, const kube_config *cfg, kserver **ret, char **ret_error)
{
        _cleanup_free_ char *key = server_key(cfg);
        for (size_t i = 0; i < ks->n_servers; i++)
                if (streq(ks->servers[i]->key, key)) {
                        *ret = ks->servers[i];
                        return 0;
                }
        if (cfg->insecure_skip_tls_verify) {
                _cleanup_free_ char *w =
                    xasprintf("insecure-skip-tls-verify is set for %s (%s): the API server's "
                              "certificate is not checked",
                              cfg->server, cfg->source);
                if (ks->warn)
                        ks->warn(ks->warn_userdata, w);
                else
                        log_warn("%s", w);
        }
        kubernetes_target_opts ko = {.config = cfg,
                                     .state_dir = ks->state_dir,
                                     .cluster_domain = ks->domain,
                                     .snapshot_image = ks->snapshot_image};
        target *raw = NULL;
        int k = kubernetes_target_new(&ko, &raw);
        if (k < 0) {
                *ret_error = xasprintf("cannot set up the kubernetes target for %s: %s",
                                       cfg->server, strerror(-k));
                return k;
        }
        kserver *srv = XNEW(kserver);
        srv->owner = ks;
        srv->key = TAKE_PTR(key);
        srv->server = xstrdup(cfg->server);
        srv->raw = raw;
        (void)target_locked_new(raw, &srv->t);
        ks->servers = xgrow(ks->servers, &ks->alloc_servers, ks->n_servers + 1, sizeof(kserver *));
        ks->servers[ks->n_servers++] = srv;
        *ret = srv;
        return 0;
}

/* The context entry named name ("" the default), opened on first use. With ks->lock held. */
static int context_of(kservers *ks, const char *name, size_t *ret, char **ret_error)
{
        for (size_t i = 0; i < ks->n_contexts; i++)
                if (streq(ks->contexts[i].name, name)) {
                        *ret = i;
                        return 0;
                }
        kube_config *cfg = NULL;
        _cleanup_free_ char *err = NULL;
        int k = kube_config_resolve(ks->kubeconfig, *name ? name : ks->context, &cfg, &err);
        if (k < 0) {
                *ret_error = xasprintf("cannot load the Kubernetes configuration: %s",
                                       err ? err : strerror(-k));
                return k;
        }
        kserver *srv = NULL;
        k = server_of(ks, cfg, &srv, ret_error);
        kube_config_free(cfg);
        if (k < 0)
                return k;
        ks->contexts =
            xgrow(ks->contexts, &ks->alloc_contexts, ks->n_contexts + 1, sizeof(kcontext));
        ks->contexts[ks->n_contexts] = (kcontext){.name = xstrdup(name), .srv = srv};
        *ret = ks->n_contexts++;
        return 0;
}

/* "context x (https://...)" or "the default context (https://...)". */
static char *where(const char *context, const kserver *srv)
{
        return *context ? xasprintf("context \"%s\" (%s)", context, srv->server)
                        : xasprintf("the default context (%s)", srv->server);
}

/*
 * The server of cluster ns/name with context (NULL: the default): opened
 * when needed, remembered for list_members. -EHOSTUNREACH while it is
 * marked down; the message says which.
 */
static int route(kservers *ks, const char *ns, const char *name, const char *context,
                 bool known_only, kserver **ret)
{
        _cleanup_free_ char *id = xasprintf("%s/%s", ns ? ns : "default", name ? name : "");
        _cleanup_free_ char *err = NULL;
        pthread_mutex_lock(&ks->lock);
        size_t at = 0;
        int k = 0;
        if (known_only && strmap_get(&ks->cluster_context, id, &at))
                ;
        else
                k = context_of(ks, context ? context : "", &at, &err);
        if (k < 0) {
                pthread_mutex_unlock(&ks->lock);
                (void)fail(k, "cluster %s: %s", id, err);
                return k;
        }
        if (!known_only)
                (void)strmap_put(&ks->cluster_context, id, at);
        kcontext *kc = &ks->contexts[at];
        kserver *srv = kc->srv;
        long long until = atomic_load(&srv->down_until);
        /* past the wait, one call tries the server again: the others wait for its answer */
        if (until && now_mono_ms() >= until &&
            atomic_compare_exchange_strong(&srv->down_until, &until, now_mono_ms() + DOWN_MS))
                until = 0;
        if (until) {
                if (now_mono_ms() >= until) /* another call is trying it */
                        until = now_mono_ms() + 1;
                _cleanup_free_ char *w = where(kc->name, srv);
                k = -EHOSTUNREACH;
                (void)fail(k,
                           "the Kubernetes API server of %s is unreachable (%s); trying again in "
                           "%llds",
                           w, srv->down_why ? srv->down_why : "no answer",
                           (long long)((until - now_mono_ms()) / 1000 + 1));
        }
        pthread_mutex_unlock(&ks->lock);
        if (k < 0)
                return k;
        *ret = srv;
        return 0;
}

/* After a forwarded call: the message, and the server marked down when it did not answer. */
static int after(kservers *ks, kserver *srv, int r)
{
        if (r >= 0) {
                atomic_store(&srv->down_until, 0);
                return r;
        }
        const char *msg = target_last_error(srv->t);
        /* the client's -EIO: transport failures and 5xx after its retries, which name the server */
        if (r == -EIO && strstr(msg, "Kubernetes API server")) {
                pthread_mutex_lock(&ks->lock);
                str_assign(&srv->down_why, xstrdup(msg));
                atomic_store(&srv->down_until, now_mono_ms() + DOWN_MS);
                pthread_mutex_unlock(&ks->lock);
                log_debug("kubernetes target: %s marked unreachable for %ds: %s", srv->server,
                          DOWN_MS / 1000, msg);
        } else {
                atomic_store(&srv->down_until, 0); /* it answered (a refusal is an answer) */
        }
        return fail(r, "%s", msg);
}

#define FORWARD_TO(ks_, srv_, call)                                                                \
        ({                                                                                         \
                void *tok_ = target_forward_begin();                                               \
                int r_ = (srv_)->t->ops->call;                                                     \
                r_ = after((ks_), (srv_), r_);                                                     \
                target_forward_end(tok_);                                                          \
                r_;                                                                                \
        })

#define FORWARD(t, c, call)                                                                        \
        ({                                                                                         \
                kservers *ks_ = KS(t);                                                             \
                kserver *srv_ = NULL;                                                              \
                int rr_ = route(ks_, (c)->namespace_, (c)->name, (c)->kube_context, false, &srv_); \
                rr_ >= 0 ? FORWARD_TO(ks_, srv_, call) : rr_;                                      \
        })

static int ks_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        return FORWARD(t, c, place_member(srv_->t, c, mp));
}

static int ks_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        return FORWARD(t, c, ensure_shared(srv_->t, c, p));
}

static int ks_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        return FORWARD(t, c, ensure_member(srv_->t, c, p, idx));
}

static int ks_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        return FORWARD(t, c, stop_member(srv_->t, c, member));
}

static int ks_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        return FORWARD(t, c, remove_member(srv_->t, c, member, keep_data));
}

static int ks_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        return FORWARD(t, c, drop_kept_data(srv_->t, c, member));
}

static int ks_member_status(target *t, const etcd_cluster *c, const char *member,
                            target_member_status *ret_status)
{
        return FORWARD(t, c, member_status(srv_->t, c, member, ret_status));
}

static int ks_list_members(target *t, const char *namespace_, const char *cluster,
                           char ***ret_names, size_t *ret_n)
{
        kservers *ks = KS(t);
        kserver *srv = NULL;
        int r = route(ks, namespace_, cluster, NULL, true, &srv);
        if (r < 0)
                return r;
        return FORWARD_TO(ks, srv, list_members(srv->t, namespace_, cluster, ret_names, ret_n));
}

static int ks_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                         char **ret_key)
{
        return FORWARD(t, c, client_tls(srv_->t, c, ret_ca, ret_cert, ret_key));
}

static int ks_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                               target_cert **ret_certs, size_t *ret_n)
{
        return FORWARD(t, c, tls_certificates(srv_->t, c, p, ret_certs, ret_n));
}

static int ks_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                        const char *member, int64_t now_ms)
{
        return FORWARD(t, c, renew_tls(srv_->t, c, p, member, now_ms));
}

static int ks_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                             const target_restore *rs)
{
        return FORWARD(t, c, restore_member(srv_->t, c, p, idx, rs));
}

static int ks_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                            int64_t *ret_revision)
{
        return FORWARD(t, c, data_revision(srv_->t, c, member, tool, ret_revision));
}

static int ks_secret_folder(target *t, const etcd_cluster *c, const char *name, char **ret_dir)
{
        return FORWARD(t, c, secret_folder(srv_->t, c, name, ret_dir));
}

static int ks_writer_start(target *t, const etcd_cluster *c, const char *claim, const char *folder,
                           void **ret_handle, struct receiver_peer *ret_peer)
{
        return FORWARD(t, c, writer_start(srv_->t, c, claim, folder, ret_handle, ret_peer));
}

static int ks_writer_stop(target *t, const etcd_cluster *c, void *handle)
{
        return FORWARD(t, c, writer_stop(srv_->t, c, handle));
}

static int ks_member_logs(target *t, const etcd_cluster *c, const char *member, size_t max_bytes,
                          char **ret_text, char **ret_source)
{
        return FORWARD(t, c,
                       debug->member_logs(srv_->t, c, member, max_bytes, ret_text, ret_source));
}

static const target_debug_ops kservers_debug_ops = {.member_logs = ks_member_logs};

/* A takeover (spec.adopt) reads and points Services on the cluster's own API server. */
static int ks_takeover_survey(target *t, const etcd_cluster *c, takeover_survey *ret,
                              char **ret_why)
{
        return FORWARD(t, c, takeover->survey(srv_->t, c, ret, ret_why));
}

static int ks_takeover_point_service(target *t, const etcd_cluster *c, const char *service,
                                     char **ret_before)
{
        return FORWARD(t, c, takeover->point_service(srv_->t, c, service, ret_before));
}

static const target_takeover_ops kservers_takeover_ops = {
    .survey = ks_takeover_survey,
    .point_service = ks_takeover_point_service,
};

/* --- events ---------------------------------------------------------------- */

static void *watch_main(void *userdata)
{
        kserver *srv = userdata;
        kservers *ks = srv->owner;
        target_wake_ignore();
        while (!atomic_load(&ks->stopping)) {
                int64_t until = atomic_load(&srv->down_until);
                int r;
                if (until && now_mono_ms() < until) {
                        msleep(MIN(until - now_mono_ms(), EVENT_POLL_MS * 5));
                        continue;
                }
                r = srv->t->ops->wait_event(srv->t, WATCH_SLICE_MS);
                if (r > 0)
                        atomic_store(&ks->ev_pending, true);
        }
        atomic_store(&srv->watcher_done, true);
        return NULL;
}

/* A watch thread for every server that has none yet. */
static void start_watches(kservers *ks)
{
        pthread_mutex_lock(&ks->lock);
        for (size_t i = 0; i < ks->n_servers; i++) {
                kserver *srv = ks->servers[i];
                if (srv->watching)
                        continue;
                if (pthread_create(&srv->watcher, NULL, watch_main, srv) == 0)
                        srv->watching = true;
                else
                        log_warn("kubernetes target: cannot start the watch of %s", srv->server);
        }
        pthread_mutex_unlock(&ks->lock);
}

static int ks_wait_event(target *t, int timeout_ms)
{
        kservers *ks = KS(t);
        void *tok = target_forward_begin();
        start_watches(ks);
        int64_t deadline = now_mono_ms() + (timeout_ms < 0 ? 60000 : timeout_ms);
        int r = 0;
        for (;;) {
                if (atomic_exchange(&ks->ev_pending, false)) {
                        r = 1;
                        break;
                }
                int64_t left = deadline - now_mono_ms();
                if (left <= 0 || target_sleep(MIN(left, EVENT_POLL_MS)) > 0)
                        break;
        }
        target_forward_end(tok);
        return r;
}

static int ks_take_events(target *t, char ***ret_clusters, size_t *ret_n)
{
        kservers *ks = KS(t);
        void *tok = target_forward_begin();
        pthread_mutex_lock(&ks->lock);
        size_t n_servers = ks->n_servers;
        kserver **servers = xcalloc(n_servers + 1, sizeof(kserver *));
        memcpy(servers, ks->servers, n_servers * sizeof(kserver *));
        pthread_mutex_unlock(&ks->lock);
        target_event_set all = {0};
        int r = 0;
        for (size_t i = 0; i < n_servers; i++) {
                char **ids = NULL;
                size_t n = 0;
                int k = servers[i]->t->ops->take_events(servers[i]->t, &ids, &n);
                if (k == -ESTALE)
                        r = -ESTALE;
                for (size_t j = 0; j < n; j++)
                        target_event_set_add(&all, ids[j]);
                free(ids);
        }
        free(servers);
        target_forward_end(tok);
        target_event_set_take(&all, ret_clusters, ret_n);
        return r;
}

static int ks_tick(target *t)
{
        (void)t;
        return 0;
}

static void ks_free(target *t)
{
        kservers *ks = KS(t);
        atomic_store(&ks->stopping, true);
        bool leak = false;
        for (size_t i = 0; i < ks->n_servers; i++) {
                kserver *srv = ks->servers[i];
                if (!srv->watching)
                        continue;
                int64_t end = now_mono_ms() + JOIN_WAIT_MS + WATCH_SLICE_MS;
                while (!atomic_load(&srv->watcher_done) && now_mono_ms() < end)
                        msleep(20);
                if (atomic_load(&srv->watcher_done)) {
                        pthread_join(srv->watcher, NULL);
                } else {
                        /* stuck in a call to a server that does not answer: left to the exit */
                        pthread_detach(srv->watcher);
                        leak = true;
                }
        }
        if (leak)
                return;
        for (size_t i = 0; i < ks->n_servers; i++) {
                kserver *srv = ks->servers[i];
                target_free(srv->t);
                free(srv->key);
                free(srv->server);
                free(srv->down_why);
                free(srv);
        }
        free(ks->servers);
        for (size_t i = 0; i < ks->n_contexts; i++)
                free(ks->contexts[i].name);
        free(ks->contexts);
        strmap_release(&ks->cluster_context);
        pthread_mutex_destroy(&ks->lock);
        free(ks->kubeconfig);
        free(ks->context);
        free(ks->state_dir);
        free(ks->domain);
        free(ks->snapshot_image);
        free(ks);
}

/*
 * A new operation in target_ops (or in its optional tables the Kubernetes
 * target has) must be routed here too, as targets/locked.c forwards it:
 * this fails to compile until the router was looked at. ensure_members is
 * left out: the Kubernetes target starts a bootstrap's members one by one.
 */
_Static_assert(sizeof(target_ops) == 6 * sizeof(void *) + 22 * sizeof(void (*)(void)),
               "target_ops changed: route the new operation in targets/kubernetes-servers.c");
_Static_assert(sizeof(target_takeover_ops) == 2 * sizeof(void (*)(void)),
               "target_takeover_ops changed: route it in targets/kubernetes-servers.c");
_Static_assert(sizeof(target_debug_ops) == 2 * sizeof(void (*)(void)),
               "target_debug_ops changed: route it in targets/kubernetes-servers.c");

static const target_ops kservers_ops = {
    .name = "kubernetes",
    .caps = KUBERNETES_TARGET_CAPS,
    .place_member = ks_place_member,
    .ensure_shared = ks_ensure_shared,
    .ensure_member = ks_ensure_member,
    .stop_member = ks_stop_member,
    .remove_member = ks_remove_member,
    .member_status = ks_member_status,
    .list_members = ks_list_members,
    .drop_kept_data = ks_drop_kept_data,
    .tick = ks_tick,
    .wait_event = ks_wait_event,
    .take_events = ks_take_events,
    .client_tls = ks_client_tls,
    .tls_certificates = ks_tls_certificates,
    .renew_tls = ks_renew_tls,
    .secret_folder = ks_secret_folder,
    .restore_member = ks_restore_member,
    .data_revision = ks_data_revision,
    .writer_start = ks_writer_start,
    .writer_stop = ks_writer_stop,
    .last_error = ks_last_error,
    .debug = &kservers_debug_ops,
    .takeover = &kservers_takeover_ops,
    .free = ks_free,
};

bool kubernetes_servers_is(const target *t)
{
        return t && t->ops == &kservers_ops;
}

int kubernetes_servers_raw(target *t, const etcd_cluster *c, target **ret)
{
        assert(kubernetes_servers_is(t));
        kservers *ks = KS(t);
        kserver *srv = NULL;
        int r = route(ks, c->namespace_, c->name, c->kube_context, false, &srv);
        if (r < 0)
                return r;
        *ret = srv->raw;
        return 0;
}

int kubernetes_servers_new(const kubernetes_servers_opts *o, target **ret, char **ret_error)
{
        if (!o || isempty(o->state_dir))
                return -EINVAL;
        kservers *ks = XNEW(kservers);
        ks->base.ops = &kservers_ops;
        ks->kubeconfig = xstrdup_null(o->kubeconfig);
        ks->context = xstrdup_null(o->context);
        ks->state_dir = xstrdup(o->state_dir);
        ks->domain = xstrdup_null(o->cluster_domain);
        ks->snapshot_image = xstrdup_null(o->snapshot_image);
        ks->warn = o->warn;
        ks->warn_userdata = o->warn_userdata;
        ks->cluster_context = (strmap)STRMAP_INIT;
        pthread_mutex_init(&ks->lock, NULL);
        /* The default context opens now: a kubeconfig that does not load is said at start. */
        size_t at = 0;
        pthread_mutex_lock(&ks->lock);
        int k = context_of(ks, "", &at, ret_error);
        pthread_mutex_unlock(&ks->lock);
        if (k < 0) {
                ks_free(&ks->base);
                return k;
        }
        *ret = &ks->base;
        return 0;
}

int kubernetes_context_check(const char *kubeconfig, const char *context, char **ret_error)
{
        kube_config *cfg = NULL;
        _cleanup_free_ char *err = NULL;
        int k = kube_config_resolve(kubeconfig, context, &cfg, &err);
        if (k < 0) {
                *ret_error = xstrdup(err ? err : strerror(-k));
                return k;
        }
        kube_config_free(cfg);
        return 0;
}
