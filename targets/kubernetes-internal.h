/*
 * What the files of the Kubernetes target share and nothing else does: the
 * target's state (kubernetes_target), its label and annotation names, the
 * object accessors, the member records, and the calls one concern makes into
 * another. kubernetes.c is the member lifecycle; kubernetes-objects.c applies,
 * checks ownership and produces the objects; kubernetes-tls.c the TLS Secrets;
 * kubernetes-events.c the Pod watches; kubernetes-restore.c the receiver Pod;
 * kubernetes-writer.c the snapshot writer Pod.
 */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "pki/pki.h"
#include "render/render.h"
#include "snapstore/receiver.h"
#include "targets/kubernetes.h"
#include "util/xalloc.h"

#define LABEL_KEY_COMPONENT "app.kubernetes.io/component"
#define ANNOTATION_POD_HASH "gitcd.io/pod-hash"
/* On a member's PVC while a snapshot restore fills it ("pending"): no member starts on it. */
#define ANNOTATION_RESTORE "gitcd.io/restore"
#define RESTORE_PENDING    "pending"
#define RECEIVER_PORT      8443
/* member_plan.config_hash the Pod was created with: what member_status reports. */
#define ANNOTATION_CONFIG_HASH "gitcd.io/config-hash"
#define POLL_MS                250

static const kube_gvr GVR_PODS = {"", "v1", "pods", true};
static const kube_gvr GVR_PVCS = {"", "v1", "persistentvolumeclaims", true};
static const kube_gvr GVR_SECRETS = {"", "v1", "secrets", true};

typedef struct state_seen {
        char *key; /* ns/cluster/member */
        member_runtime_state state;
        int64_t since_mono;
} state_seen;

/* A cluster's shared objects as last applied and checked, so converged passes cost no calls. */
typedef struct shared_mark {
        char *key;  /* ns/cluster */
        char *hash; /* of the objects applied and the member roles */
        int64_t at_mono;
} shared_mark;

typedef struct kubernetes_target {
        target base;
        kube_client *kc; /* calls */
        kube_client *wc; /* watches */
        char *state_dir;
        char *domain;
        char *snapshot_image; /* what receiver Pods run */
        int volume_delete_wait_ms;
        /* tls.provider auto: renew leaves in their window on this ensure_shared (renew_tls). */
        bool tls_renew;
        int64_t tls_now_ms;
        int tls_issued; /* leaves (re)issued by the last tls_auto() */

        char **namespaces; /* touched so far, for wait_event */
        size_t n_namespaces;
        size_t alloc_namespaces;
        /* The watch client, watch_scope and watch_rv: one waiting thread at a time. */
        pthread_mutex_t watch_lock;
        char *watch_scope; /* the namespace watched, "" for all */
        char *watch_rv;
        target_event_set
            events;          /* clusters whose Pods had a watch event not taken yet (take_events) */
        bool events_unknown; /* the watch started over: any cluster may have changed */

        char **preflighted; /* "ns/cluster/hash" of specs dry-run already */
        size_t n_preflighted;
        size_t alloc_preflighted;

        state_seen *seen;
        size_t n_seen;
        size_t alloc_seen;

        shared_mark *marks; /* what ensure_shared last applied, per cluster */
        size_t n_marks;
        size_t alloc_marks;
} kubernetes_target;

static inline kubernetes_target *KT(target *t)
{
        return (kubernetes_target *)t;
}

/* --- small helpers ----------------------------------------------------- */

static inline const char *ns_of(const etcd_cluster *c)
{
        return isempty(c->namespace_) ? "default" : c->namespace_;
}

static inline json_t *metadata(const json_t *obj)
{
        return json_object_get(obj, "metadata");
}

static inline const char *obj_name(const json_t *obj)
{
        return json_string_value(json_object_get(metadata(obj), "name"));
}

static inline const char *obj_kind(const json_t *obj)
{
        return json_string_value(json_object_get(obj, "kind"));
}

static inline const char *obj_label(const json_t *obj, const char *key)
{
        return json_string_value(json_object_get(json_object_get(metadata(obj), "labels"), key));
}

static inline const char *obj_annotation(const json_t *obj, const char *key)
{
        return json_string_value(
            json_object_get(json_object_get(metadata(obj), "annotations"), key));
}

static inline bool obj_terminating(const json_t *obj)
{
        json_t *ts = json_object_get(metadata(obj), "deletionTimestamp");
        return ts && !json_is_null(ts);
}

static inline bool managed_by_gitcd(const json_t *obj)
{
        return streq_ptr(obj_label(obj, LABEL_APP_MANAGED_BY), LABEL_MANAGED_BY_VALUE);
}

static inline char *pvc_name(const char *member)
{
        return xasprintf("data-%s", member);
}

/* "Service db/x", for messages. */
static inline char *describe(const json_t *obj)
{
        const char *ns = json_string_value(json_object_get(metadata(obj), "namespace"));
        return xasprintf("%s %s/%s", obj_kind(obj) ?: "object", ns ?: "?", obj_name(obj) ?: "?");
}

static inline char *cluster_dir_in(const char *state_dir, const char *ns, const char *cluster)
{
        return xasprintf("%s/kubernetes/%s/%s", state_dir, ns, cluster);
}

static inline char *cluster_dir(kubernetes_target *kt, const char *ns, const char *cluster)
{
        return cluster_dir_in(kt->state_dir, ns, cluster);
}

/* --- API calls ----------------------------------------------------------- */

/* Fail with the kube client's message, which names verb, resource and namespace. */
static inline int kube_fail(kubernetes_target *kt, int r)
{
        const char *msg = kube_client_last_error(kt->kc);
        return target_fail(&kt->base, r, "%s", isempty(msg) ? strerror(-r) : msg);
}

/* --- TLS (provider auto) -------------------------------------------------- */

static inline int pki_fail(kubernetes_target *kt, int r, const char *what, const char *where)
{
        return target_fail(&kt->base, r, "%s in %s: %s", what, where, pki_last_error());
}

/* A PVC made for a restore and not filled yet: no member may start on it. */
static inline bool restore_pending(const json_t *pvc)
{
        return streq_ptr(obj_annotation(pvc, ANNOTATION_RESTORE), RESTORE_PENDING);
}

/* kubernetes.c */
void kt_note_namespace(kubernetes_target *kt, const char *ns);
char *kt_json_hash(const json_t *o);
int kt_record_path(kubernetes_target *kt, const char *ns, const char *cluster, const char *member,
                   char **ret);
int kt_gvr_of(kubernetes_target *kt, const json_t *obj, kube_gvr *ret);
int kt_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p);
void kt_container_facts(const json_t *pod, int *ret_restarts, bool *ret_crash_loop,
                        const char **ret_waiting);
bool kt_pod_ready(const json_t *pod);

/* kubernetes-objects.c */
int kt_adapt(kubernetes_target *kt, json_t *obj);
int kt_get_owned(kubernetes_target *kt, const json_t *obj, json_t **ret_live);
int kt_apply(kubernetes_target *kt, const json_t *obj, bool dry_run);
int kt_delete_pod(kubernetes_target *kt, const char *ns, const char *name);
void kt_set_annotation(json_t *obj, const char *key, const char *value);
int kt_prune(kubernetes_target *kt, const etcd_cluster *c, const json_t *keep);
int kt_adapt_all(kubernetes_target *kt, json_t *objs);
bool kt_preflight_done(kubernetes_target *kt, const char *key);
int kt_member_objects(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *p,
                      size_t idx, json_t **ret_pvc, json_t **ret_pod);
int kt_applied_objects(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *steady,
                       const membership_plan *members, bool with_members, json_t **ret);
int kt_plan_kube_objects(target *t, const etcd_cluster *c, const membership_plan *steady,
                         const membership_plan *members, json_t **ret);
int kt_preflight_cluster(kubernetes_target *kt, const json_t *shared, const json_t *all);
shared_mark *kt_find_mark(kubernetes_target *kt, const char *key);
char *kt_plan_roles(const membership_plan *p);
int kt_sync_roles(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *p);

/* kubernetes-tls.c */
bool kt_tls_leaves_exist(const char *tls);
int kt_tls_secrets(kubernetes_target *kt, const etcd_cluster *c, const json_t *labels, json_t *out);
int kt_tls_issue(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *steady);
int kt_secrets_trust_version(kubernetes_target *kt, const etcd_cluster *c, char **ret);
int kt_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert, char **ret_key);
int kt_secret_folder(target *t, const etcd_cluster *c, const char *name, char **ret_dir);
int kt_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                        target_cert **ret_certs, size_t *ret_n);
int kt_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p, const char *member,
                 int64_t now_ms);

/* kubernetes-events.c */
int kt_tick(target *t);
int kt_take_events(target *t, char ***ret_clusters, size_t *ret_n);
int kt_wait_event(target *t, int timeout_ms);

/* kubernetes-restore.c */
int kt_sweep_receivers(kubernetes_target *kt, const etcd_cluster *c, const char *component);
int kt_delete_receiver(kubernetes_target *kt, const char *ns, const char *member);
json_t *kt_receiver_secret_object(const json_t *labels, const char *ns, const char *name,
                                  const receiver_secret *s);
json_t *kt_receiver_pod(kubernetes_target *kt, const json_t *labels, const char *ns,
                        const char *name, const char *secret, const char *mode, json_t *volume,
                        const char *mount, const char *sub_path, int64_t max_bytes,
                        const json_t *placement);
int kt_wait_receiver(kubernetes_target *kt, const char *ns, const char *name, char **ret_address);
int kt_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                      const target_restore *rs);

/* kubernetes-writer.c */
int kt_writer_start(target *t, const etcd_cluster *c, const char *claim, const char *folder,
                    void **ret_handle, receiver_peer *ret_peer);
int kt_writer_stop(target *t, const etcd_cluster *c, void *handle);
int kt_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                     int64_t *ret_revision);

/* kubernetes-debug.c */
extern const target_debug_ops kt_debug_ops;
/* kubernetes-takeover.c */
extern const target_takeover_ops kt_takeover_ops;
/*
 * kubernetes-takeover-tls.c: a coreos takeover's TLS checks against the
 * old EtcdCluster cr and the Pods of selector, and the old CA imported
 * (tls.provider auto): 0, -EPERM with why in *ret_why, or another -errno.
 */
int kt_takeover_tls(kubernetes_target *kt, const etcd_cluster *c, const json_t *cr,
                    const char *selector, char **ret_why);
