/*
 * The Kubernetes target: members are the rendered Pods and PVCs, applied
 * to a kube-apiserver through kube/client.h (layout on disk and the
 * operations' specifics: targets/kubernetes.h).
 *
 * Decisions a reader needs:
 * - Every write is a server-side apply with field manager "gitcd", never
 *   forced, of an object fitted to the server (kube_adapt_object: PDB
 *   policy/v1beta1 on 1.20). gitcd never deletes or changes an object that
 *   lacks app.kubernetes.io/managed-by=gitcd: a GET precedes every apply,
 *   and a name held by a foreign object is an error naming it.
 * - Nothing half-applied: before the first write for a spec (per rendered
 *   spec hash, per process) every object of render_cluster() for the
 *   steady plan (Services, PDB, TLS objects, each member's PVC and Pod) is
 *   dry-run applied; a live Pod whose spec will change is dry-run deleted
 *   instead, as Pod specs are immutable. The first failure (an RBAC 403
 *   names verb, resource and namespace) is returned and nothing is written.
 * - Shared objects come from the steady plan of the spec, not from the
 *   partial plan the reconciler passes when it starts one member: Services
 *   and certificates then never change with the members (certificates cover
 *   every member through the headless-Service wildcard). Only the PDB's
 *   maxUnavailable follows the voters of the passed plan (fit_pdb).
 * - Pod specs are immutable, so a Pod carries gitcd.io/pod-hash, a hash of
 *   its rendered spec. A live Pod with another hash is deleted and awaited
 *   (terminationGracePeriodSeconds + 15 s) before the new one is applied.
 *   Labels and annotations (the role label on promotion) change in place.
 * - Data identity: the PVC's UID, reported by member_status (none for a
 *   terminating PVC). The reconciler records it in the member record once
 *   the member joined etcd and calls a missing or different one data loss;
 *   ensure_member refuses a plan entry whose data_identity is not the live
 *   PVC's (-ESTALE): it must be replaced, not restarted on an empty volume.
 *   With storage.medium Memory there is no identity: a member without a
 *   Pod is ABSENT (its data died with it).
 * - Two clients: one for calls, one for watches (a client is
 *   single-threaded and a watch holds its connection). wait_event watches
 *   gitcd's Pods in the namespaces this target has touched (one: that one;
 *   several: all) from the last resourceVersion and returns on the first
 *   change; -ESTALE relists (and reports a change); on -EACCES/-EIO it
 *   sleeps out the timeout and returns 0, as the reconciler observes the
 *   world on every pass anyway.
 * - Threads (targets/locked.h): the call client, the tables and the event
 *   list are shared state, used under the wrapper's shared lock. Waits let
 *   go of it: the sleeps between GETs while a deleted Pod or PVC goes away
 *   (a grace period of one cluster then holds up no other cluster), and
 *   wait_event's list and watch, which use only the watch client and the
 *   watch position; those have a mutex of their own (watch_lock), held for
 *   the whole wait, as a client serves one thread at a time. The watch
 *   callback takes the shared lock back to record an event.
 * - Restores (restore_member): etcd's tool runs on gitcd's host, as on the
 *   other targets, and a short-lived receiver Pod (`gitcd snapshot receive`,
 *   snapstore/receiver.h) only puts the files into the member's PVC, each
 *   checked by SHA-256 on both ends. The PVC annotation
 *   gitcd.io/restore=pending is the marker (as the local target's
 *   data.restore/ and the hosts target's member.restore/): while it is
 *   there the member is ABSENT and ensure_member refuses to start it.
 * - Snapshots in a PersistentVolumeClaim (writer_start/writer_stop): the
 *   same receiver, in store mode, in a Pod that mounts the operator's claim
 *   at subPath; gitcd only ever creates and deletes the Pod and its Secret,
 *   never the claim. One writer per cluster at a time, across processes
 *   sharing the state folder and across threads of one: a lock file per
 *   cluster (kubernetes_writer_lock) is held from before the leftover
 *   clean-up until the writer is deleted. The lock dies with its process,
 *   so a writer Pod of the cluster found while holding it is what a killed
 *   gitcd left, and is deleted by label; a writer in use is never deleted.
 *   Taking the lock never waits (a wait would hold the cluster's operations
 *   in this process, among them the stop that frees it): a held lock is
 *   -EAGAIN naming the holder, and the caller decides how long to try again
 *   (snapshots/snapshot.c). Restore receivers need no such lock: they are
 *   started only by restore_member, one call that runs whole under the
 *   cluster's lock, and only by a reconciler, which holds the state
 *   folder's own lock (gitcd.lock: apply, run, recover).
 * - tls.provider auto: gitcd is the CA (pki/), keeps it under state_dir,
 *   issues one certificate per surface whose names are exactly those render
 *   gives cert-manager, and applies them as kubernetes.io/tls Secrets.
 */
#include <assert.h>
#include <pthread.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/adapt.h"
#include "kube/client.h"
#include "pki/auto.h"
#include "pki/pki.h"
#include "snapstore/receiver.h"
#include "snapstore/restore.h"
#include "targets/locked.h"
#include "render/layout.h"
#include "render/render.h"
#include "targets/kubernetes.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define LABEL_KEY_COMPONENT "app.kubernetes.io/component"
#define ANNOTATION_POD_HASH "gitcd.io/pod-hash"
/* On a member's PVC while a snapshot restore fills it ("pending"): no member starts on it. */
#define ANNOTATION_RESTORE   "gitcd.io/restore"
#define RESTORE_PENDING      "pending"
#define COMPONENT_RECEIVER   "snapshot-receiver"
#define COMPONENT_WRITER     "snapshot-writer"
#define WRITER_MOUNT         "/snapshots"
#define WRITER_LOCK_FILE     "snapshot-writer.lock"
#define LABEL_RESTORE_MEMBER "gitcd.io/restore-member"
#define RECEIVER_PORT        8443
#define RECEIVER_SECRET_DIR  "/etc/gitcd/receive"
#define RECEIVER_READY_MS    (180 * 1000)
#define RECEIVER_DEADLINE_S  3600
/* member_plan.config_hash the Pod was created with: what member_status reports. */
#define ANNOTATION_CONFIG_HASH "gitcd.io/config-hash"
#define ANNOTATION_REMOVED     "gitcd.io/removed-from"
#define RECORD_MAX             65536
#define SECRET_MAX             (1024 * 1024)
#define DEFAULT_GRACE_SECONDS  30
#define DELETE_EXTRA_MS        15000
#define POLL_MS                250
#define WATCH_MIN_MS           50          /* shorter waits just sleep */
#define SHARED_RECHECK_MS      (60 * 1000) /* re-check unchanged shared objects this often */

static const target_ops kubernetes_ops;

static const kube_gvr GVR_PODS = {"", "v1", "pods", true};
static const kube_gvr GVR_PVCS = {"", "v1", "persistentvolumeclaims", true};
static const kube_gvr GVR_SERVICES = {"", "v1", "services", true};
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
        char **events; /* "ns/cluster" of Pods with a watch event not taken yet (take_events) */
        size_t n_events;
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

static kubernetes_target *KT(target *t)
{
        return (kubernetes_target *)t;
}

/* --- small helpers ----------------------------------------------------- */

static const char *ns_of(const etcd_cluster *c)
{
        return isempty(c->namespace_) ? "default" : c->namespace_;
}

static json_t *metadata(const json_t *obj)
{
        return json_object_get(obj, "metadata");
}

static const char *obj_name(const json_t *obj)
{
        return json_string_value(json_object_get(metadata(obj), "name"));
}

static const char *obj_kind(const json_t *obj)
{
        return json_string_value(json_object_get(obj, "kind"));
}

static const char *obj_label(const json_t *obj, const char *key)
{
        return json_string_value(json_object_get(json_object_get(metadata(obj), "labels"), key));
}

static const char *obj_annotation(const json_t *obj, const char *key)
{
        return json_string_value(
            json_object_get(json_object_get(metadata(obj), "annotations"), key));
}

static const char *obj_uid(const json_t *obj)
{
        return json_string_value(json_object_get(metadata(obj), "uid"));
}

static bool obj_terminating(const json_t *obj)
{
        json_t *ts = json_object_get(metadata(obj), "deletionTimestamp");
        return ts && !json_is_null(ts);
}

static bool managed_by_gitcd(const json_t *obj)
{
        return streq_ptr(obj_label(obj, LABEL_APP_MANAGED_BY), LABEL_MANAGED_BY_VALUE);
}

static char *pvc_name(const char *member)
{
        return xasprintf("data-%s", member);
}

static void note_namespace(kubernetes_target *kt, const char *ns)
{
        for (size_t i = 0; i < kt->n_namespaces; i++)
                if (streq(kt->namespaces[i], ns))
                        return;
        kt->namespaces =
            xgrow(kt->namespaces, &kt->alloc_namespaces, kt->n_namespaces + 1, sizeof(char *));
        kt->namespaces[kt->n_namespaces++] = xstrdup(ns);
}

/* FNV-1a 64 of the object dumped with sorted keys, as 16 hex digits. */
static char *json_hash(const json_t *o)
{
        char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = text ? text : ""; *p; p++) {
                h ^= (unsigned char)*p;
                h *= 1099511628211ULL;
        }
        free(text);
        return xasprintf("%016llx", (unsigned long long)h);
}

/* "Service db/x", for messages. */
static char *describe(const json_t *obj)
{
        const char *ns = json_string_value(json_object_get(metadata(obj), "namespace"));
        return xasprintf("%s %s/%s", obj_kind(obj) ?: "object", ns ?: "?", obj_name(obj) ?: "?");
}

/* --- member records ---------------------------------------------------- */

/*
 * What this target notes of a member: only that it saw it run (for the
 * message about an in-memory member whose Pod is gone). Whether it ran and
 * the identity of its data are the member record's (state/); files of an
 * older gitcd also held "initialized" and "pvcUID", which are ignored: the
 * reconciler records the PVC UID the first pass after the upgrade sees.
 */
typedef struct member_record {
        bool exists;
} member_record;

static char *cluster_dir_in(const char *state_dir, const char *ns, const char *cluster)
{
        return xasprintf("%s/kubernetes/%s/%s", state_dir, ns, cluster);
}

static char *cluster_dir(kubernetes_target *kt, const char *ns, const char *cluster)
{
        return cluster_dir_in(kt->state_dir, ns, cluster);
}

static int record_path(kubernetes_target *kt, const char *ns, const char *cluster,
                       const char *member, char **ret)
{
        if (!target_name_is_component(ns) || !target_name_is_component(cluster) ||
            !target_name_is_component(member))
                return target_fail(&kt->base, -EINVAL, "invalid member name \"%s/%s/%s\"", ns,
                                   cluster, member);
        *ret = xasprintf("%s/kubernetes/%s/%s/%s.json", kt->state_dir, ns, cluster, member);
        return 0;
}

/* The record of a member; an empty one (exists false) when there is none. */
static int record_load(kubernetes_target *kt, const char *ns, const char *cluster,
                       const char *member, member_record *ret)
{
        _cleanup_free_ char *path = NULL;
        int r = record_path(kt, ns, cluster, member, &path);
        if (r < 0)
                return r;
        *ret = (member_record){0};
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        r = read_file(path, RECORD_MAX, &data, &len);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return target_fail(&kt->base, r, "cannot read %s: %s", path, strerror(-r));
        json_t *o = json_loadb(data, len, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return target_fail(&kt->base, -EBADMSG, "cannot read %s: not a JSON object", path);
        }
        ret->exists = true;
        json_decref(o);
        return 0;
}

static int record_save(kubernetes_target *kt, const char *ns, const char *cluster,
                       const char *member)
{
        _cleanup_free_ char *path = NULL;
        int r = record_path(kt, ns, cluster, member, &path);
        if (r < 0)
                return r;
        _cleanup_free_ char *dir = cluster_dir(kt, ns, cluster);
        r = mkdir_p(dir, 0700);
        if (r < 0)
                return target_fail(&kt->base, r, "cannot create %s: %s", dir, strerror(-r));
        json_t *o = json_pack("{s:s}", "member", member);
        char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(o);
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, text ? text : "{}");
        sb_appendc(&sb, '\n');
        free(text);
        r = write_file_atomic(path, sb.buf, sb.len, 0644);
        sb_release(&sb);
        if (r < 0)
                return target_fail(&kt->base, r, "cannot write %s: %s", path, strerror(-r));
        return 0;
}

static void record_remove(kubernetes_target *kt, const char *ns, const char *cluster,
                          const char *member)
{
        _cleanup_free_ char *path = NULL;
        if (record_path(kt, ns, cluster, member, &path) == 0)
                (void)unlink(path);
}

/* --- API calls ----------------------------------------------------------- */

/* Fail with the kube client's message, which names verb, resource and namespace. */
static int kube_fail(kubernetes_target *kt, int r)
{
        const char *msg = kube_client_last_error(kt->kc);
        return target_fail(&kt->base, r, "%s", isempty(msg) ? strerror(-r) : msg);
}

static int gvr_of(kubernetes_target *kt, const json_t *obj, kube_gvr *ret)
{
        const char *av = json_string_value(json_object_get(obj, "apiVersion"));
        const char *kind = obj_kind(obj);
        if (!av || !kind || kube_gvr_for_kind(av, kind, ret) < 0)
                return target_fail(&kt->base, -EINVAL, "kind %s %s is not one gitcd knows",
                                   av ?: "?", kind ?: "?");
        return 0;
}

static int adapt(kubernetes_target *kt, json_t *obj)
{
        _cleanup_free_ char *err = NULL;
        int r = kube_adapt_object(kt->kc, obj, &err);
        if (r < 0)
                return target_fail(&kt->base, r, "%s", err ? err : strerror(-r));
        return 0;
}

/*
 * GET the live object for a rendered one. *ret_live is NULL when it does not
 * exist. -EEXIST (with a message naming it) when it exists without gitcd's
 * managed-by label: gitcd never touches such an object.
 */
static int get_owned(kubernetes_target *kt, const json_t *obj, json_t **ret_live)
{
        kube_gvr gvr;
        int r = gvr_of(kt, obj, &gvr);
        if (r < 0)
                return r;
        const char *ns = json_string_value(json_object_get(metadata(obj), "namespace"));
        json_t *live = NULL;
        r = kube_get(kt->kc, &gvr, ns, obj_name(obj), &live);
        if (r == -ENOENT) {
                *ret_live = NULL;
                return 0;
        }
        if (r < 0)
                return kube_fail(kt, r);
        if (!managed_by_gitcd(live)) {
                json_decref(live);
                _cleanup_free_ char *d = describe(obj);
                return target_fail(&kt->base, -EEXIST, "%s exists and is not managed by gitcd", d);
        }
        *ret_live = live;
        return 0;
}

static int apply(kubernetes_target *kt, const json_t *obj, bool dry_run)
{
        int r = kube_apply(kt->kc, obj, "gitcd", false, dry_run, NULL);
        if (r < 0)
                return kube_fail(kt, r);
        return 0;
}

/*
 * Wait until the object is gone, polling GET, for at most timeout_ms.
 * -ETIMEDOUT with a message when it is still there.
 */
static int wait_gone(kubernetes_target *kt, const kube_gvr *gvr, const char *ns, const char *name,
                     int64_t timeout_ms)
{
        int64_t deadline = now_mono_ms() + timeout_ms;
        for (;;) {
                json_t *live = NULL;
                int r = kube_get(kt->kc, gvr, ns, name, &live);
                json_decref(live);
                if (r == -ENOENT)
                        return 0;
                if (r < 0)
                        return kube_fail(kt, r);
                if (now_mono_ms() >= deadline)
                        return target_fail(&kt->base, -ETIMEDOUT,
                                           "%s %s/%s is still there %lld s after its deletion",
                                           gvr->resource, ns, name, (long long)(timeout_ms / 1000));
                target_blocking_begin();
                msleep(POLL_MS);
                target_blocking_end();
        }
}

static int64_t pod_delete_timeout_ms(const json_t *live)
{
        json_t *g = json_object_get(json_object_get(live, "spec"), "terminationGracePeriodSeconds");
        int64_t secs = json_is_integer(g) ? json_integer_value(g) : DEFAULT_GRACE_SECONDS;
        if (secs < 0)
                secs = DEFAULT_GRACE_SECONDS;
        return secs * 1000 + DELETE_EXTRA_MS;
}

/* Delete a Pod (Background) and wait until it is gone. A missing Pod is fine. */
static int delete_pod(kubernetes_target *kt, const char *ns, const char *name)
{
        json_t *live = NULL;
        int r = kube_get(kt->kc, &GVR_PODS, ns, name, &live);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return kube_fail(kt, r);
        int64_t timeout = pod_delete_timeout_ms(live);
        bool managed = managed_by_gitcd(live);
        bool terminating = obj_terminating(live);
        json_decref(live);
        if (!managed)
                return target_fail(&kt->base, -EEXIST,
                                   "Pod %s/%s exists and is not managed by gitcd", ns, name);
        if (!terminating) {
                r = kube_delete(kt->kc, &GVR_PODS, ns, name, "Background");
                if (r < 0 && r != -ENOENT)
                        return kube_fail(kt, r);
        }
        return wait_gone(kt, &GVR_PODS, ns, name, timeout);
}

/* --- TLS (provider auto) -------------------------------------------------- */

static int pki_fail(kubernetes_target *kt, int r, const char *what, const char *where)
{
        return target_fail(&kt->base, r, "%s in %s: %s", what, where, pki_last_error());
}

/* A JSON array of strings as a NULL-terminated vector of borrowed strings. */
static const char **borrow_strv(const json_t *arr)
{
        size_t n = json_array_size(arr);
        const char **v = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                v[i] = json_string_value(json_array_get(arr, i));
        return v;
}

/*
 * The names server certificates carry: exactly those render gives the
 * cert-manager Certificates (rendered here for a copy of the spec with that
 * provider; render reads the spec and never keeps it).
 */
static void server_names(const etcd_cluster *c, const membership_plan *steady, json_t **ret_dns,
                         json_t **ret_ips)
{
        etcd_cluster tmp = *c;
        tmp.tls.provider = TLS_PROVIDER_CERT_MANAGER;
        json_t *objs = render_shared_objects(&tmp, steady);
        *ret_dns = json_array();
        *ret_ips = json_array();
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                if (!streq_ptr(obj_kind(o), "Certificate"))
                        continue;
                json_t *spec = json_object_get(o, "spec");
                json_t *dns = json_object_get(spec, "dnsNames");
                if (json_array_size(dns) > 0) {
                        json_array_extend(*ret_dns, dns);
                        json_array_extend(*ret_ips, json_object_get(spec, "ipAddresses"));
                        break;
                }
        }
        json_decref(objs);
}

static int write_secret_file(kubernetes_target *kt, const char *dir, const char *file,
                             const char *data, size_t len)
{
        _cleanup_free_ char *path = path_join(dir, file);
        int r = mkdir_p(dir, 0700);
        if (r >= 0)
                r = write_file_atomic(path, data, len, 0600);
        if (r < 0)
                return target_fail(&kt->base, r, "cannot write %s: %s", path, strerror(-r));
        return 0;
}

/* A kubernetes.io/tls Secret from the files in dir, labelled like the cluster's objects. */
static int tls_secret(kubernetes_target *kt, const char *dir, const char *name,
                      const json_t *labels, json_t **ret)
{
        static const char *const files[] = {"tls.crt", "tls.key", "ca.crt"};
        json_t *data = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_free_ char *path = path_join(dir, files[i]);
                char *content = NULL;
                size_t len = 0;
                int r = read_file(path, SECRET_MAX, &content, &len);
                if (r < 0) {
                        json_decref(data);
                        return target_fail(&kt->base, r, "cannot read %s: %s", path, strerror(-r));
                }
                char *b64 = kube_base64_encode(content, len);
                explicit_bzero(content, len);
                free(content);
                json_object_set_new(data, files[i], json_string(b64));
                free(b64);
        }
        json_t *lab = json_deep_copy(labels);
        json_object_set_new(lab, LABEL_KEY_COMPONENT, json_string("tls"));
        json_t *md = json_pack("{s:s, s:o}", "name", name, "labels", lab);
        json_t *s = json_pack("{s:s, s:s, s:o, s:s, s:o}", "apiVersion", "v1", "kind", "Secret",
                              "metadata", md, "type", "kubernetes.io/tls", "data", data);
        *ret = s;
        return 0;
}

/* Members hold leaves the cluster CA signed: half a CA must not be silently replaced. */
static bool tls_leaves_exist(const char *tls)
{
        static const char *const subdirs[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER,
                                              TLS_SUBDIR_OPERATOR};
        for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
                _cleanup_free_ char *dir = path_join(tls, subdirs[i]);
                if (pki_auto_leaf_exists(dir))
                        return true;
        }
        return false;
}

/* The certificate folders of tls.provider auto: the surfaces c has on. */
typedef struct tls_leaf {
        const char *sub;
        bool on;
        bool server;
} tls_leaf;

static bool tls_leaves(const etcd_cluster *c, tls_leaf ret[3])
{
        bool client = render_client_tls(c), peer = render_peer_tls(c);
        ret[0] = (tls_leaf){TLS_SUBDIR_CLIENT, client, true};
        ret[1] = (tls_leaf){TLS_SUBDIR_PEER, peer, true};
        ret[2] = (tls_leaf){TLS_SUBDIR_OPERATOR, client, false};
        return c->tls.provider == TLS_PROVIDER_AUTO && (client || peer);
}

/*
 * tls.provider auto: the Secrets that carry the certificates issued under
 * <cluster dir>/tls, appended to out; a surface not issued yet has none.
 * Only reads files.
 */
static int tls_secrets(kubernetes_target *kt, const etcd_cluster *c, const json_t *labels,
                       json_t *out)
{
        tls_leaf leaves[3];
        if (!tls_leaves(c, leaves))
                return 0;
        _cleanup_free_ char *cdir = cluster_dir(kt, ns_of(c), c->name);
        _cleanup_free_ char *tls = path_join(cdir, "tls");
        for (size_t i = 0; i < ARRAY_SIZE(leaves); i++) {
                _cleanup_free_ char *dir = path_join(tls, leaves[i].sub);
                if (!leaves[i].on || !pki_auto_leaf_exists(dir))
                        continue;
                _cleanup_free_ char *name = render_tls_secret_name(c, leaves[i].sub);
                json_t *secret = NULL;
                int r = tls_secret(kt, dir, name, labels, &secret);
                if (r < 0)
                        return r;
                json_object_set_new(metadata(secret), "namespace", json_string(ns_of(c)));
                json_array_append_new(out, secret);
        }
        return 0;
}

/*
 * tls.provider auto: the CA and one certificate per surface under
 * <cluster dir>, (re)issued when missing, stale or naming other hosts.
 */
static int tls_issue(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *steady)
{
        tls_leaf leaves[3];
        if (!tls_leaves(c, leaves))
                return 0;
        _cleanup_free_ char *cdir = cluster_dir(kt, ns_of(c), c->name);
        _cleanup_free_ char *tls = path_join(cdir, "tls");
        _cleanup_(pki_auto_freep) pki_auto *a = NULL;
        int r = pki_auto_open(cdir, c, tls_leaves_exist(tls), &a);
        if (r < 0)
                return pki_fail(kt, r, "the cluster CA", cdir);

        json_t *dns_j = NULL, *ips_j = NULL;
        server_names(c, steady, &dns_j, &ips_j);
        _cleanup_free_ const char **dns = borrow_strv(dns_j);
        _cleanup_free_ const char **ips = borrow_strv(ips_j);
        r = 0;
        for (size_t i = 0; i < ARRAY_SIZE(leaves) && r >= 0; i++) {
                if (!leaves[i].on)
                        continue;
                _cleanup_free_ char *dir = path_join(tls, leaves[i].sub);
                const char *const *want_dns = leaves[i].server ? dns : NULL;
                const char *const *want_ips = leaves[i].server ? ips : NULL;
                r = pki_auto_leaf(a, dir, leaves[i].server ? c->name : "root", want_dns, want_ips,
                                  leaves[i].server, kt->tls_renew,
                                  kt->tls_renew ? kt->tls_now_ms : (int64_t)time(NULL) * 1000);
                if (r < 0) {
                        r = pki_fail(kt, r, "cannot issue the certificate", dir);
                        break;
                }
                if (r > 0) {
                        kt->tls_issued++;
                        log_debug("kubernetes target: issued %s/%s %s certificate", ns_of(c),
                                  c->name, leaves[i].sub);
                }
        }
        json_decref(dns_j);
        json_decref(ips_j);
        return r < 0 ? r : 0;
}

/* --- preflight and prune ---------------------------------------------------- */

static bool is_member_kind(const json_t *obj)
{
        const char *k = obj_kind(obj);
        return streq_ptr(k, "Pod") || streq_ptr(k, "PersistentVolumeClaim");
}

static void set_annotation(json_t *obj, const char *key, const char *value)
{
        json_t *md = metadata(obj);
        json_t *ann = json_object_get(md, "annotations");
        if (!json_is_object(ann)) {
                ann = json_object();
                json_object_set_new(md, "annotations", ann);
        }
        json_object_set_new(ann, key, json_string(value));
}

static void set_pod_hash(json_t *pod)
{
        _cleanup_free_ char *hash = json_hash(json_object_get(pod, "spec"));
        set_annotation(pod, ANNOTATION_POD_HASH, hash);
}

/* Dry-run DELETE of a Pod: may gitcd delete it? */
static int dry_run_delete_pod(kubernetes_target *kt, const char *ns, const char *name)
{
        _cleanup_free_ char *path = NULL;
        int r = kube_resource_path(&GVR_PODS, ns, name, &path);
        if (r < 0)
                return target_fail(&kt->base, r, "invalid Pod name %s/%s", ns, name);
        _cleanup_free_ char *full = xasprintf("%s?dryRun=All", path);
        _cleanup_free_ char *what = xasprintf("pods \"%s\"", name);
        r = kube_request(kt->kc, "DELETE", full, NULL, NULL, "delete", what, ns, NULL);
        if (r < 0 && r != -ENOENT)
                return kube_fail(kt, r);
        return 0;
}

/*
 * Dry-run every object (adapted, Pods with their hash). The first failure
 * is returned; nothing is written.
 */
static int preflight(kubernetes_target *kt, json_t *objs)
{
        size_t i;
        json_t *obj;
        json_array_foreach(objs, i, obj)
        {
                json_t *live = NULL;
                int r;
                if (streq_ptr(obj_kind(obj), "Pod")) {
                        r = get_owned(kt, obj, &live);
                        if (r < 0)
                                return r;
                        if (live && obj_terminating(live)) {
                                r = 0;
                        } else if (live && !streq_ptr(obj_annotation(live, ANNOTATION_POD_HASH),
                                                      obj_annotation(obj, ANNOTATION_POD_HASH))) {
                                const char *ns =
                                    json_string_value(json_object_get(metadata(obj), "namespace"));
                                r = dry_run_delete_pod(kt, ns, obj_name(obj));
                        } else {
                                r = apply(kt, obj, true);
                        }
                        json_decref(live);
                        if (r < 0)
                                return r;
                        continue;
                }
                r = apply(kt, obj, true);
                if (r < 0 && r != -EACCES) {
                        /* A foreign object of that name explains more than the apply error. */
                        _cleanup_free_ char *msg = xstrdup(target_last_error(&kt->base));
                        int o = get_owned(kt, obj, &live);
                        json_decref(live);
                        if (o < 0)
                                return o;
                        return target_fail(&kt->base, r, "%s", msg);
                }
                if (r < 0)
                        return r;
                r = get_owned(kt, obj, &live);
                json_decref(live);
                if (r < 0)
                        return r;
        }
        return 0;
}

static bool in_set(const json_t *keep, const char *kind, const char *name)
{
        size_t i;
        json_t *o;
        json_array_foreach(keep, i, o) if (streq_ptr(obj_kind(o), kind) &&
                                           streq_ptr(obj_name(o), name)) return true;
        return false;
}

/* Is name one of the Secret names gitcd creates for a cluster (tls.provider auto)? */
static bool is_gitcd_secret_name(const etcd_cluster *c, const char *name)
{
        static const char *const subs[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER, TLS_SUBDIR_OPERATOR};
        for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
                _cleanup_free_ char *n = xasprintf("%s-%s-tls", c->name, subs[i]);
                if (streq(n, name))
                        return true;
        }
        return false;
}

static int prune_kind(kubernetes_target *kt, const etcd_cluster *c, const kube_gvr *gvr,
                      const char *kind, const json_t *keep)
{
        const char *ns = ns_of(c);
        _cleanup_free_ char *sel = xasprintf("%s=%s,%s=%s", LABEL_APP_MANAGED_BY,
                                             LABEL_MANAGED_BY_VALUE, LABEL_CLUSTER, c->name);
        json_t *items = NULL;
        int r = kube_list(kt->kc, gvr, ns, sel, &items, NULL);
        if (r < 0)
                return kube_fail(kt, r);
        size_t i;
        json_t *o;
        json_array_foreach(items, i, o)
        {
                const char *name = obj_name(o);
                if (!name || !managed_by_gitcd(o) ||
                    !streq_ptr(obj_label(o, LABEL_CLUSTER), c->name))
                        continue;
                if (in_set(keep, kind, name))
                        continue;
                if (streq(kind, "Secret") && !is_gitcd_secret_name(c, name))
                        continue;
                log_debug("kubernetes target: pruning %s %s/%s", kind, ns, name);
                r = kube_delete(kt->kc, gvr, ns, name, "Background");
                if (r < 0 && r != -ENOENT) {
                        json_decref(items);
                        return kube_fail(kt, r);
                }
        }
        json_decref(items);
        return 0;
}

/* Delete gitcd's shared objects of the cluster that keep does not hold. */
static int prune(kubernetes_target *kt, const etcd_cluster *c, const json_t *keep)
{
        int r = prune_kind(kt, c, &GVR_SERVICES, "Service", keep);
        if (r < 0)
                return r;
        r = prune_kind(kt, c, &GVR_SECRETS, "Secret", keep);
        if (r < 0)
                return r;
        /* Kinds whose group version the server chooses (or does not serve at all). */
        static const struct {
                const char *group, *resource, *kind;
        } served[] = {
            {"policy", "poddisruptionbudgets", "PodDisruptionBudget"},
            {"cert-manager.io", "certificates", "Certificate"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(served); i++) {
                _cleanup_free_ char *version = NULL;
                r = kube_preferred_version(kt->kc, served[i].group, served[i].resource, &version);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return kube_fail(kt, r);
                kube_gvr gvr = {served[i].group, version, served[i].resource, true};
                r = prune_kind(kt, c, &gvr, served[i].kind, keep);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * tls.provider secrets and cert-manager: the version of the trust the
 * members start with (member_plan.tls_version, as pki/auto.h's for auto),
 * from the ca.crt of the Secrets their Pods mount. The kubelet brings
 * renewed leaves into running Pods by itself and etcd reads leaves again
 * on each new connection; a CA is read only at start, so a changed ca.crt
 * changes the members' config hash and the reconciler restarts them one
 * at a time, as for any other change of their command. A Secret not there
 * yet (cert-manager has not issued it) adds nothing: no Pod can start
 * before it exists. Read on every pass: a Secret's change is seen within
 * the observation interval.
 */
static int secrets_trust_version(kubernetes_target *kt, const etcd_cluster *c, char **ret)
{
        *ret = NULL;
        if (c->tls.provider != TLS_PROVIDER_SECRETS && c->tls.provider != TLS_PROVIDER_CERT_MANAGER)
                return 0;
        static const char *const surfaces[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER};
        static const char *const bundle[] = {TLS_SUBDIR_CA_BUNDLE};
        bool use_bundle = !isempty(c->tls.ca_bundle_secret);
        const char *const *which = use_bundle ? bundle : surfaces;
        size_t n = use_bundle ? ARRAY_SIZE(bundle) : ARRAY_SIZE(surfaces);
        _cleanup_(sb_release) strbuf pem = STRBUF_INIT;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = render_tls_secret_name(c, which[i]);
                if (!name)
                        continue;
                json_t *secret = NULL;
                int r = kube_get(kt->kc, &GVR_SECRETS, ns_of(c), name, &secret);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return kube_fail(kt, r);
                const char *b64 =
                    json_string_value(json_object_get(json_object_get(secret, "data"), "ca.crt"));
                char *data = NULL;
                size_t len = 0;
                r = b64 ? kube_base64_decode(b64, &data, &len) : 0;
                json_decref(secret);
                if (r < 0)
                        return target_fail(&kt->base, r,
                                           "Secret %s/%s: key ca.crt is not valid base64", ns_of(c),
                                           name);
                if (!data)
                        continue;
                _cleanup_free_ char *one = NULL;
                r = pki_bundle_fingerprint(data, len, &one);
                if (r >= 0) {
                        sb_append_len(&pem, data, len);
                        sb_appendc(&pem, '\n');
                }
                free(data);
                if (r < 0)
                        return target_fail(&kt->base, r,
                                           "cluster %s/%s: the ca.crt of Secret %s, the CA its "
                                           "members trust, holds no certificate in PEM",
                                           ns_of(c), c->name, name);
        }
        return pem.len ? pki_bundle_fingerprint(sb_str(&pem), pem.len, ret) : 0;
}

/* --- operations -------------------------------------------------------------- */

static int kt_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        kubernetes_target *kt = KT(t);
        if (isempty(mp->name))
                return target_fail(t, -EINVAL, "member plan without a name");
        const char *ns = ns_of(c);
        const char *peer_scheme = render_peer_tls(c) ? "https" : "http";
        const char *client_scheme = render_client_tls(c) ? "https" : "http";
        _cleanup_free_ char *headless = render_headless_service_name(c);
        /* The format of membership_plan_steady (render/plan.c). */
        _cleanup_free_ char *host =
            xasprintf("%s.%s.%s.svc.%s", mp->name, headless, ns, kt->domain);
        str_assign(&mp->peer_url, xasprintf("%s://%s:%d", peer_scheme, host, ETCD_PEER_PORT));
        str_assign(&mp->client_url, xasprintf("%s://%s:%d", client_scheme, host, ETCD_CLIENT_PORT));
        str_assign(&mp->listen_peer_url, xasprintf("%s://0.0.0.0:%d", peer_scheme, ETCD_PEER_PORT));
        str_assign(&mp->listen_client_url,
                   xasprintf("%s://0.0.0.0:%d", client_scheme, ETCD_CLIENT_PORT));
        str_assign(&mp->listen_metrics_url, xasprintf("http://0.0.0.0:%d", ETCD_METRICS_PORT));
        str_assign(&mp->data_dir, xstrdup(RENDER_STEADY_DATA_DIR));
        str_assign(&mp->tls_dir, xstrdup(RENDER_STEADY_TLS_DIR));
        /* The CA the member trusts: part of its config hash (pki/auto.h). */
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *tls = path_join(cdir, "tls");
        char *tls_version = NULL;
        int r = pki_auto_trust_version(cdir, c, tls_leaves_exist(tls), &tls_version);
        if (r < 0)
                return pki_fail(kt, r, "the cluster CA", cdir);
        if (!tls_version) {
                r = secrets_trust_version(kt, c, &tls_version);
                if (r < 0)
                        return r;
        }
        str_assign(&mp->tls_version, tls_version);
        return 0;
}

/* Adapt every object of an array, setting the pod hash on Pods. */
static int adapt_all(kubernetes_target *kt, json_t *objs)
{
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                int r = adapt(kt, o);
                if (r < 0)
                        return r;
                if (streq_ptr(obj_kind(o), "Pod"))
                        set_pod_hash(o);
        }
        return 0;
}

static bool preflight_done(kubernetes_target *kt, const char *key)
{
        for (size_t i = 0; i < kt->n_preflighted; i++)
                if (streq(kt->preflighted[i], key))
                        return true;
        return false;
}

/*
 * The PodDisruptionBudget counts the voters of the plan the reconciler
 * passes (every recorded member with its role on each pass; only the
 * member being started within a step, which tightens the budget until the
 * pass ends), never more than a quorum of them can lose: during a scale-up
 * the spec's replicas would allow evicting more voters than the running
 * cluster survives.
 */

static void fit_pdb(json_t *shared, const membership_plan *p)
{
        size_t voters = 0;
        for (size_t i = 0; p && i < p->n; i++)
                if (!p->members[i].learner)
                        voters++;
        json_int_t max = voters > 0 ? (json_int_t)((voters - 1) / 2) : 0;
        size_t i;
        json_t *o;
        json_array_foreach(shared, i, o) if (streq_ptr(obj_kind(o), "PodDisruptionBudget"))
            json_object_set_new(json_object_get(o, "spec"), "maxUnavailable", json_integer(max));
}

json_t *kubernetes_shared_objects(const etcd_cluster *c, const membership_plan *steady,
                                  const membership_plan *members)
{
        json_t *shared = render_shared_objects(c, steady);
        if (shared)
                fit_pdb(shared, members ? members : steady);
        return shared;
}

/* A member's PVC (none with storage.medium Memory) and Pod, as ensure_member applies them. */
static int member_objects(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *p,
                          size_t idx, json_t **ret_pvc, json_t **ret_pod)
{
        const member_plan *mp = &p->members[idx];
        json_t *pod = render_member_pod(c, p, idx);
        if (!pod)
                return target_fail(&kt->base, -EINVAL, "member %s: no Pod rendered", mp->name);
        /* Before adaptation, which changes no Pod: the hash is the one applied. */
        set_pod_hash(pod);
        if (mp->config_hash)
                set_annotation(pod, ANNOTATION_CONFIG_HASH, mp->config_hash);
        *ret_pvc = render_member_pvc(c, p, idx);
        *ret_pod = pod;
        return 0;
}

/*
 * What this target applies for c (kubernetes_target_objects()); with
 * with_members false only the shared objects and Secrets.
 */
static int applied_objects(kubernetes_target *kt, const etcd_cluster *c,
                           const membership_plan *steady, const membership_plan *members,
                           bool with_members, json_t **ret)
{
        _cleanup_(json_decrefp) json_t *objs = kubernetes_shared_objects(c, steady, members);
        if (!objs)
                return target_fail(&kt->base, -EINVAL, "cluster %s/%s: nothing rendered", ns_of(c),
                                   c->name);
        _cleanup_(json_decrefp) json_t *labels =
            json_deep_copy(json_object_get(metadata(json_array_get(objs, 0)), "labels"));
        int r = tls_secrets(kt, c, labels, objs);
        if (r < 0)
                return r;
        for (size_t i = 0; with_members && members && i < members->n; i++) {
                json_t *pvc = NULL, *pod = NULL;
                r = member_objects(kt, c, members, i, &pvc, &pod);
                if (r < 0)
                        return r;
                if (pvc)
                        json_array_append_new(objs, pvc);
                json_array_append_new(objs, pod);
        }
        *ret = TAKE_PTR(objs);
        return 0;
}

int kubernetes_target_objects(target *t, const etcd_cluster *c, const membership_plan *members,
                              json_t **ret)
{
        assert(t && t->ops == &kubernetes_ops);
        kubernetes_target *kt = KT(t);
        _cleanup_(membership_plan_freep) membership_plan *steady =
            membership_plan_steady(c, kt->domain);
        return applied_objects(kt, c, steady, members, true, ret);
}

static int plan_kube_objects(target *t, const etcd_cluster *c, const membership_plan *steady,
                             const membership_plan *members, json_t **ret)
{
        if (!t) {
                *ret = kubernetes_shared_objects(c, steady, NULL);
                return 0;
        }
        return kubernetes_target_objects(t, c, members, ret);
}

const target_plan_ops kubernetes_plan_ops = {.kube_objects = plan_kube_objects};

/* The first write for a spec: dry-run everything the cluster needs, TLS Secrets included. */
static int preflight_cluster(kubernetes_target *kt, const json_t *shared, const json_t *all)
{
        json_t *check = json_array();
        size_t i;
        json_t *o;
        json_array_foreach(shared, i, o) json_array_append(check, o);
        json_array_foreach(all, i, o) if (is_member_kind(o)) json_array_append(check, o);
        int r = preflight(kt, check);
        json_decref(check);
        return r;
}

static shared_mark *find_mark(kubernetes_target *kt, const char *key)
{
        for (size_t i = 0; i < kt->n_marks; i++)
                if (streq(kt->marks[i].key, key))
                        return &kt->marks[i];
        kt->marks = xgrow(kt->marks, &kt->alloc_marks, kt->n_marks + 1, sizeof(shared_mark));
        shared_mark *m = &kt->marks[kt->n_marks++];
        *m = (shared_mark){.key = xstrdup(key)};
        return m;
}

/* The roles of the plan's members, "a-0=voter,a-1=learner", for the shared mark. */
static char *plan_roles(const membership_plan *p)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; p && i < p->n; i++)
                sb_printf(&sb, "%s=%s,", p->members[i].name,
                          p->members[i].learner ? "learner" : "voter");
        return sb_detach(&sb);
}

/*
 * A member Pod's role label follows etcd: a learner promoted to voter is
 * relabelled in place (a merge patch of that one label; labels are
 * mutable), so the client Service and the PodDisruptionBudget, which select
 * voters, cover it from then on.
 */
static int sync_roles(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *p)
{
        const char *ns = ns_of(c);
        _cleanup_free_ char *sel = xasprintf("%s=%s,%s=%s", LABEL_APP_MANAGED_BY,
                                             LABEL_MANAGED_BY_VALUE, LABEL_CLUSTER, c->name);
        json_t *items = NULL;
        int r = kube_list(kt->kc, &GVR_PODS, ns, sel, &items, NULL);
        if (r < 0)
                return kube_fail(kt, r);
        size_t i;
        json_t *o;
        json_array_foreach(items, i, o)
        {
                const char *member = obj_label(o, LABEL_MEMBER);
                const member_plan *mp = NULL;
                for (size_t j = 0; member && j < p->n && !mp; j++)
                        if (streq(p->members[j].name, member))
                                mp = &p->members[j];
                if (!mp || obj_terminating(o) || !managed_by_gitcd(o))
                        continue;
                const char *want = mp->learner ? "learner" : "voter";
                if (streq_ptr(obj_label(o, LABEL_ROLE), want))
                        continue;
                _cleanup_free_ char *path =
                    xasprintf("/api/v1/namespaces/%s/pods/%s?fieldManager=gitcd", ns, obj_name(o));
                _cleanup_free_ char *what = xasprintf("pods \"%s\"", obj_name(o));
                json_t *body = json_pack("{s:{s:{s:s}}}", "metadata", "labels", LABEL_ROLE, want);
                r = kube_request(kt->kc, "PATCH", path, "application/merge-patch+json", body,
                                 "patch", what, ns, NULL);
                json_decref(body);
                if (r < 0 && r != -ENOENT) {
                        json_decref(items);
                        return kube_fail(kt, r);
                }
                log_debug("kubernetes target: %s/%s is now a %s", ns, obj_name(o), want);
        }
        json_decref(items);
        return 0;
}

static int kt_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        note_namespace(kt, ns);
        _cleanup_(membership_plan_freep) membership_plan *steady =
            membership_plan_steady(c, kt->domain);
        _cleanup_(json_decrefp) json_t *all = render_cluster(c, steady);
        _cleanup_free_ char *hash = json_hash(all);
        kt->tls_issued = 0;
        int r = tls_issue(kt, c, steady);
        _cleanup_(json_decrefp) json_t *shared = NULL;
        if (r >= 0)
                r = applied_objects(kt, c, steady, p, false, &shared);
        if (r >= 0)
                r = adapt_all(kt, shared);
        if (r >= 0)
                r = adapt_all(kt, all);
        if (r < 0)
                return r;

        _cleanup_free_ char *key = xasprintf("%s/%s/%s", ns, c->name, hash);
        if (!preflight_done(kt, key)) {
                r = preflight_cluster(kt, shared, all);
                if (r < 0) {
                        _cleanup_free_ char *msg = xstrdup(target_last_error(t));
                        return target_fail(t, r, "cluster %s/%s: nothing applied: %s", ns, c->name,
                                           msg);
                }
                kt->preflighted = xgrow(kt->preflighted, &kt->alloc_preflighted,
                                        kt->n_preflighted + 1, sizeof(char *));
                kt->preflighted[kt->n_preflighted++] = TAKE_PTR(key);
        }

        /* Nothing changed since the last full check, and it is recent: no calls at all. */
        _cleanup_free_ char *roles = plan_roles(p);
        _cleanup_free_ char *shared_hash = json_hash(shared);
        _cleanup_free_ char *mark_hash = xasprintf("%s/%s", shared_hash, roles);
        _cleanup_free_ char *mark_key = xasprintf("%s/%s", ns, c->name);
        shared_mark *mark = find_mark(kt, mark_key);
        int64_t now = now_mono_ms();
        if (streq_ptr(mark->hash, mark_hash) && now - mark->at_mono < SHARED_RECHECK_MS)
                return 0;

        size_t i;
        json_t *o;
        json_array_foreach(shared, i, o)
        {
                json_t *live = NULL;
                r = get_owned(kt, o, &live);
                json_decref(live);
                if (r >= 0)
                        r = apply(kt, o, false);
                if (r < 0)
                        return r;
        }
        r = prune(kt, c, shared);
        if (r >= 0)
                r = sync_roles(kt, c, p);
        if (r < 0)
                return r;
        str_assign(&mark->hash, TAKE_PTR(mark_hash));
        mark->at_mono = now;
        return 0;
}

/* A PVC made for a restore and not filled yet: no member may start on it. */
static bool restore_pending(const json_t *pvc)
{
        return streq_ptr(obj_annotation(pvc, ANNOTATION_RESTORE), RESTORE_PENDING);
}

static int kt_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        kubernetes_target *kt = KT(t);
        if (idx >= p->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        const char *ns = ns_of(c);
        if (isempty(mp->name))
                return target_fail(t, -EINVAL, "member plan without a name");
        note_namespace(kt, ns);
        _cleanup_free_ char *rpath = NULL; /* the names must make a path (checked here) */
        int r = record_path(kt, ns, c->name, mp->name, &rpath);
        if (r < 0)
                return r;
        json_t *pvc = NULL, *pod = NULL, *live = NULL;
        r = member_objects(kt, c, p, idx, &pvc, &pod);
        if (r < 0)
                return r;
        if (pvc) {
                r = adapt(kt, pvc);
                if (r >= 0)
                        r = get_owned(kt, pvc, &live);
                if (r < 0)
                        goto out;
                /* A restore into it has not finished: the member never starts on part of it. */
                if (live && !obj_terminating(live) && restore_pending(live)) {
                        r = target_fail(t, -EBUSY,
                                        "member %s: its PersistentVolumeClaim %s waits for a "
                                        "snapshot restore to finish; it does not start before",
                                        mp->name, obj_name(pvc));
                        goto out;
                }
                /* The record's data identity: a member that ran never starts on another volume. */
                if (mp->data_identity && (!live || obj_terminating(live) ||
                                          !streq_ptr(obj_uid(live), mp->data_identity))) {
                        r = target_fail(t, -ESTALE,
                                        "member %s: its PersistentVolumeClaim %s is %s; it cannot "
                                        "rejoin with the same identity and must be replaced",
                                        mp->name, obj_name(pvc),
                                        !live                   ? "gone"
                                        : obj_terminating(live) ? "being deleted"
                                                                : "a new one");
                        goto out;
                }
                json_decref(live);
                live = NULL;
                r = apply(kt, pvc, false);
                if (r < 0)
                        goto out;
        }

        r = adapt(kt, pod);
        if (r < 0)
                goto out;
        r = get_owned(kt, pod, &live);
        if (r < 0)
                goto out;
        /* A Pod that ended (evicted, node lost: phase Failed) never runs again: replace it. */
        const char *phase =
            json_string_value(json_object_get(json_object_get(live, "status"), "phase"));
        bool ended = streq_ptr(phase, "Failed") || streq_ptr(phase, "Succeeded");
        /* Same spec, other config hash: what it mounts changed (a new CA). No hash: older gitcd. */
        const char *live_config = live ? obj_annotation(live, ANNOTATION_CONFIG_HASH) : NULL;
        bool other_config = mp->config_hash && live_config && !streq(live_config, mp->config_hash);
        if (live && (obj_terminating(live) || ended || other_config ||
                     !streq_ptr(obj_annotation(live, ANNOTATION_POD_HASH),
                                obj_annotation(pod, ANNOTATION_POD_HASH)))) {
                if (!obj_terminating(live))
                        log_debug("kubernetes target: member %s/%s/%s %s; recreating its Pod", ns,
                                  c->name, mp->name, ended ? "ended" : "has another spec");
                r = delete_pod(kt, ns, mp->name);
                if (r < 0)
                        goto out;
        }
        r = apply(kt, pod, false);
out:
        json_decref(live);
        json_decref(pvc);
        json_decref(pod);
        return r < 0 ? r : 0;
}

static int kt_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        /* Whether it is stopped on purpose is the member record's (state/: dormant). */
        _cleanup_free_ char *path = NULL;
        int r = record_path(kt, ns, c->name, member, &path);
        if (r < 0)
                return r;
        note_namespace(kt, ns);
        r = delete_pod(kt, ns, member);
        return r < 0 ? r : 0;
}

/* Keep a removed member's volume: take it out of the cluster's labels so nothing lists it. */
static int detach_pvc(kubernetes_target *kt, const char *ns, const char *cluster,
                      const char *member, const char *name)
{
        _cleanup_free_ char *path = NULL;
        int r = kube_resource_path(&GVR_PVCS, ns, name, &path);
        if (r < 0)
                return target_fail(&kt->base, r, "invalid name %s/%s", ns, name);
        _cleanup_free_ char *from = xasprintf("%s/%s", cluster, member);
        json_t *patch =
            json_pack("{s:{s:{s:n, s:n}, s:{s:s}}}", "metadata", "labels", LABEL_CLUSTER,
                      LABEL_MEMBER, "annotations", ANNOTATION_REMOVED, from);
        _cleanup_free_ char *what = xasprintf("persistentvolumeclaims \"%s\"", name);
        r = kube_request(kt->kc, "PATCH", path, "application/merge-patch+json", patch, "patch",
                         what, ns, NULL);
        json_decref(patch);
        if (r < 0 && r != -ENOENT)
                return kube_fail(kt, r);
        return 0;
}

/*
 * Delete a member's PVC and wait (bounded) until it is gone, so a removed
 * member is really gone when the call returns. One still held by its
 * protection finalizer after the wait is left to finish on its own.
 */
static int delete_pvc(kubernetes_target *kt, const char *ns, const char *name)
{
        int r = kube_delete(kt->kc, &GVR_PVCS, ns, name, "Background");
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return kube_fail(kt, r);
        int64_t deadline = now_mono_ms() + kt->volume_delete_wait_ms;
        while (now_mono_ms() < deadline) {
                json_t *live = NULL;
                r = kube_get(kt->kc, &GVR_PVCS, ns, name, &live);
                json_decref(live);
                if (r == -ENOENT)
                        return 0;
                if (r < 0)
                        return kube_fail(kt, r);
                target_blocking_begin();
                msleep(POLL_MS);
                target_blocking_end();
        }
        log_debug("kubernetes target: PersistentVolumeClaim %s/%s is still being deleted", ns,
                  name);
        return 0;
}

static int delete_receiver(kubernetes_target *kt, const char *ns, const char *member);

static int kt_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        _cleanup_free_ char *rpath = NULL;
        int r = record_path(kt, ns, c->name, member, &rpath);
        if (r < 0)
                return r;
        note_namespace(kt, ns);
        r = delete_pod(kt, ns, member);
        /* a restore's receiver that a killed gitcd left would hold the volume */
        if (r >= 0)
                r = delete_receiver(kt, ns, member);
        if (r < 0)
                return r;
        _cleanup_free_ char *claim = pvc_name(member);
        json_t *live = NULL;
        r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &live);
        if (r >= 0) {
                bool managed = managed_by_gitcd(live);
                json_decref(live);
                if (!managed)
                        return target_fail(t, -EEXIST,
                                           "PersistentVolumeClaim %s/%s exists and is not "
                                           "managed by gitcd",
                                           ns, claim);
                if (keep_data)
                        r = detach_pvc(kt, ns, c->name, member, claim);
                else
                        r = delete_pvc(kt, ns, claim);
                if (r < 0)
                        return r;
        } else if (r != -ENOENT) {
                return kube_fail(kt, r);
        }
        record_remove(kt, ns, c->name, member);
        return 0;
}

/*
 * The volume remove_member(keep_data) detached from member: deleted only
 * when its removed-from annotation still names this cluster's member, so
 * a claim someone took over since is never touched.
 */
static int kt_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        _cleanup_free_ char *claim = pvc_name(member);
        json_t *live = NULL;
        int r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &live);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return kube_fail(kt, r);
        _cleanup_free_ char *from = xasprintf("%s/%s", c->name, member);
        bool kept = managed_by_gitcd(live) && !obj_label(live, LABEL_MEMBER) &&
                    streq_ptr(obj_annotation(live, ANNOTATION_REMOVED), from);
        json_decref(live);
        if (!kept)
                return 0;
        note_namespace(kt, ns);
        return delete_pvc(kt, ns, claim);
}

/* Container facts of a Pod: restarts, CrashLoopBackOff, the first waiting reason. */
static void container_facts(const json_t *pod, int *ret_restarts, bool *ret_crash_loop,
                            const char **ret_waiting)
{
        json_t *statuses = json_object_get(json_object_get(pod, "status"), "containerStatuses");
        size_t i;
        json_t *cs;
        *ret_restarts = 0;
        *ret_crash_loop = false;
        *ret_waiting = NULL;
        json_array_foreach(statuses, i, cs)
        {
                *ret_restarts += (int)json_integer_value(json_object_get(cs, "restartCount"));
                const char *reason = json_string_value(json_object_get(
                    json_object_get(json_object_get(cs, "state"), "waiting"), "reason"));
                if (streq_ptr(reason, "CrashLoopBackOff"))
                        *ret_crash_loop = true;
                if (reason && !*ret_waiting)
                        *ret_waiting = reason;
        }
}

static bool pod_ready(const json_t *pod)
{
        json_t *conds = json_object_get(json_object_get(pod, "status"), "conditions");
        size_t i;
        json_t *cd;
        json_array_foreach(conds, i, cd)
        {
                if (streq_ptr(json_string_value(json_object_get(cd, "type")), "Ready"))
                        return streq_ptr(json_string_value(json_object_get(cd, "status")), "True");
        }
        return false;
}

static int64_t state_since(kubernetes_target *kt, const char *ns, const char *cluster,
                           const char *member, member_runtime_state s)
{
        _cleanup_free_ char *key = xasprintf("%s/%s/%s", ns, cluster, member);
        int64_t now = now_mono_ms();
        for (size_t i = 0; i < kt->n_seen; i++) {
                state_seen *e = &kt->seen[i];
                if (!streq(e->key, key))
                        continue;
                if (e->state != s) {
                        e->state = s;
                        e->since_mono = now;
                }
                return e->since_mono;
        }
        kt->seen = xgrow(kt->seen, &kt->alloc_seen, kt->n_seen + 1, sizeof(state_seen));
        kt->seen[kt->n_seen++] = (state_seen){.key = TAKE_PTR(key), .state = s, .since_mono = now};
        return now;
}

static int kt_member_status(target *t, const etcd_cluster *c, const char *member,
                            target_member_status *ret_status)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        member_record rec = {0};
        int r = record_load(kt, ns, c->name, member, &rec);
        if (r < 0)
                return r;
        note_namespace(kt, ns);
        bool memory = c->storage.medium == MEDIUM_MEMORY;
        json_t *pod = NULL, *pvc = NULL;
        r = kube_get(kt->kc, &GVR_PODS, ns, member, &pod);
        if (r < 0 && r != -ENOENT) {
                r = kube_fail(kt, r);
                goto out;
        }
        if (!memory) {
                char *claim = pvc_name(member);
                r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &pvc);
                free(claim);
                if (r < 0 && r != -ENOENT) {
                        r = kube_fail(kt, r);
                        goto out;
                }
                /* A volume kept by remove_member(keep_data) belongs to no member. */
                if (pvc && !streq_ptr(obj_label(pvc, LABEL_MEMBER), member)) {
                        json_decref(pvc);
                        pvc = NULL;
                }
        }
        r = 0;

        member_runtime_state state;
        char *detail = NULL;
        int restarts = 0;
        if (!pod) {
                if (memory) {
                        state = MEMBER_ABSENT;
                        detail =
                            xstrdup(rec.exists ? "Pod gone; its in-memory data too" : "no Pod");
                } else if (pvc && !obj_terminating(pvc) && restore_pending(pvc)) {
                        /* what it holds is not the member's until the restore finished */
                        state = MEMBER_ABSENT;
                        detail = xstrdup("no Pod; its PersistentVolumeClaim waits for a "
                                         "snapshot restore");
                } else if (pvc && !obj_terminating(pvc)) {
                        state = MEMBER_STOPPED;
                        detail = xstrdup("no Pod; its PersistentVolumeClaim is kept");
                } else {
                        state = MEMBER_ABSENT;
                        detail = xstrdup("no Pod and no PersistentVolumeClaim");
                }
        } else {
                bool crash_loop;
                const char *waiting;
                container_facts(pod, &restarts, &crash_loop, &waiting);
                const char *phase =
                    json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
                if (obj_terminating(pod)) {
                        state = MEMBER_STARTING;
                        detail = xstrdup("terminating");
                } else if (streq_ptr(phase, "Failed")) {
                        state = MEMBER_CRASHED;
                        const char *reason = json_string_value(
                            json_object_get(json_object_get(pod, "status"), "reason"));
                        detail = xasprintf("Pod failed%s%s", reason ? ": " : "", reason ?: "");
                } else if (crash_loop) {
                        state = MEMBER_CRASH_LOOP;
                        detail = xasprintf("CrashLoopBackOff after %d restarts", restarts);
                } else if (streq_ptr(phase, "Running") && pod_ready(pod)) {
                        state = MEMBER_READY;
                        detail = xstrdup("Running and Ready");
                        if (!rec.exists && record_save(kt, ns, c->name, member) < 0)
                                log_warn("kubernetes target: %s", target_last_error(t));
                } else {
                        state = MEMBER_STARTING;
                        detail = xasprintf(
                            "%s%s%s", phase ? phase : "Pending",
                            waiting ? ": " : (streq_ptr(phase, "Running") ? ", not Ready" : ""),
                            waiting ?: "");
                }
        }
        *ret_status = (target_member_status){
            .state = state,
            .restarts = restarts,
            .state_since_ms = state_since(kt, ns, c->name, member, state),
            .config_hash = pod ? xstrdup_null(obj_annotation(pod, ANNOTATION_CONFIG_HASH)) : NULL,
            /* The PVC is the member's data: a terminating one holds none any more. */
            .data_identity = pvc && !obj_terminating(pvc) && !restore_pending(pvc)
                                 ? xstrdup_null(obj_uid(pvc))
                                 : NULL,
            .detail = detail,
        };
out:
        json_decref(pod);
        json_decref(pvc);
        return r;
}

static void add_name(char ***v, size_t *n, size_t *alloc, const char *name)
{
        if (isempty(name))
                return;
        for (size_t i = 0; i < *n; i++)
                if (streq((*v)[i], name))
                        return;
        *v = xgrow(*v, alloc, *n + 2, sizeof(char *));
        (*v)[(*n)++] = xstrdup(name);
        (*v)[*n] = NULL;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int kt_list_members(target *t, const char *namespace_, const char *cluster,
                           char ***ret_names, size_t *ret_n)
{
        kubernetes_target *kt = KT(t);
        if (!target_name_is_component(namespace_) || !target_name_is_component(cluster))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", namespace_,
                                   cluster);
        note_namespace(kt, namespace_);
        _cleanup_free_ char *sel = xasprintf("%s=%s,%s=%s", LABEL_APP_MANAGED_BY,
                                             LABEL_MANAGED_BY_VALUE, LABEL_CLUSTER, cluster);
        char **names = NULL;
        size_t n = 0, alloc = 0;
        const kube_gvr *kinds[] = {&GVR_PODS, &GVR_PVCS};
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                json_t *items = NULL;
                int r = kube_list(kt->kc, kinds[k], namespace_, sel, &items, NULL);
                if (r < 0) {
                        strv_free(names);
                        return kube_fail(kt, r);
                }
                size_t i;
                json_t *o;
                json_array_foreach(items, i, o)
                {
                        /* A volume on its way out (its member removed) holds no member. */
                        if (kinds[k] == &GVR_PVCS && obj_terminating(o))
                                continue;
                        add_name(&names, &n, &alloc, obj_label(o, LABEL_MEMBER));
                }
                json_decref(items);
        }
        _cleanup_free_ char *dir = cluster_dir(kt, namespace_, cluster);
        DIR *d = opendir(dir);
        if (d) {
                struct dirent *e;
                while ((e = readdir(d))) {
                        size_t l = strlen(e->d_name);
                        if (e->d_name[0] == '.' || l <= 5 || !streq(e->d_name + l - 5, ".json"))
                                continue;
                        _cleanup_free_ char *name = xstrndup(e->d_name, l - 5);
                        add_name(&names, &n, &alloc, name);
                }
                closedir(d);
        }
        if (!names)
                names = xcalloc(1, sizeof(char *));
        qsort(names, n, sizeof(char *), cmp_str);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

static int kt_tick(target *t)
{
        (void)t;
        return 0;
}

/* The events list is shared: record under the shared lock (let go of around the watch). */
static void record_event(kubernetes_target *kt, char *id)
{
        target_blocking_end();
        bool seen = false;
        if (!id)
                kt->events_unknown = true;
        for (size_t i = 0; id && i < kt->n_events && !seen; i++)
                seen = streq(kt->events[i], id);
        if (id && !seen) {
                kt->events = xrealloc(kt->events, (kt->n_events + 1) * sizeof(char *));
                kt->events[kt->n_events++] = TAKE_PTR(id);
        }
        free(id);
        target_blocking_begin();
}

static int on_watch_event(const char *type, const json_t *object, void *userdata)
{
        kubernetes_target *kt = userdata;
        const char *rv = json_string_value(json_object_get(metadata(object), "resourceVersion"));
        if (rv)
                str_assign(&kt->watch_rv, xstrdup(rv));
        if (streq_ptr(type, "BOOKMARK"))
                return 0;
        const char *ns = json_string_value(json_object_get(metadata(object), "namespace"));
        const char *cluster = json_string_value(
            json_object_get(json_object_get(metadata(object), "labels"), LABEL_CLUSTER));
        record_event(kt, ns && cluster ? xasprintf("%s/%s", ns, cluster) : NULL);
        return 1;
}

/* The clusters whose Pods had watch events; -ESTALE when the watch started over (all). */
static int kt_take_events(target *t, char ***ret_clusters, size_t *ret_n)
{
        kubernetes_target *kt = KT(t);
        *ret_clusters = kt->events;
        *ret_n = kt->n_events;
        kt->events = NULL;
        kt->n_events = 0;
        if (kt->events_unknown) {
                kt->events_unknown = false;
                return -ESTALE;
        }
        return 0;
}

/* Sleep out a wait outside the shared lock. */
static void wait_sleep(int64_t ms)
{
        target_blocking_begin();
        msleep(ms);
        target_blocking_end();
}

/* With watch_lock held and the shared lock let go; the scope is a copy. */
static int watch_pods(kubernetes_target *kt, const char *scope, int64_t deadline)
{
        if (!streq_ptr(kt->watch_scope, scope)) {
                str_assign(&kt->watch_scope, xstrdup(scope));
                str_assign(&kt->watch_rv, NULL);
        }
        const char *ns = *scope ? scope : NULL;
        _cleanup_free_ char *sel = xasprintf("%s=%s", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE);
        int r = 0;
        if (!kt->watch_rv) {
                json_t *items = NULL;
                char *rv = NULL;
                r = kube_list(kt->wc, &GVR_PODS, ns, sel, &items, &rv);
                json_decref(items);
                if (r >= 0)
                        kt->watch_rv = rv;
        }
        while (r >= 0) {
                int64_t left = deadline - now_mono_ms();
                if (left < WATCH_MIN_MS) {
                        msleep(left);
                        return 0;
                }
                r = kube_watch_for(kt->wc, &GVR_PODS, ns, sel, kt->watch_rv, (int)left,
                                   on_watch_event, kt);
                if (r > 0)
                        return 1;
                if (r == -ESTALE) {
                        /* Too old: list again; something may have changed meanwhile. */
                        str_assign(&kt->watch_rv, NULL);
                        record_event(kt, NULL);
                        return 1;
                }
        }
        /* -EACCES, -EIO: the next reconciler pass observes the world anyway. */
        log_debug("kubernetes target: cannot watch Pods: %s", kube_client_last_error(kt->wc));
        msleep(deadline - now_mono_ms());
        return 0;
}

static int kt_wait_event(target *t, int timeout_ms)
{
        kubernetes_target *kt = KT(t);
        int64_t deadline = now_mono_ms() + (timeout_ms < 0 ? 60000 : timeout_ms);
        if (kt->n_namespaces == 0 || timeout_ms < WATCH_MIN_MS) {
                wait_sleep(timeout_ms < 0 ? 1000 : timeout_ms);
                return 0;
        }
        _cleanup_free_ char *scope = xstrdup(kt->n_namespaces == 1 ? kt->namespaces[0] : "");
        target_blocking_begin();
        pthread_mutex_lock(&kt->watch_lock);
        int r = watch_pods(kt, scope, deadline);
        pthread_mutex_unlock(&kt->watch_lock);
        target_blocking_end();
        return r;
}

/* Read one key of a Secret's data into <dir>/<file> (0600). */
static int secret_key_to_file(kubernetes_target *kt, const json_t *secret, const char *key,
                              const char *dir, const char *file)
{
        const char *b64 = json_string_value(json_object_get(json_object_get(secret, "data"), key));
        if (!b64)
                return target_fail(&kt->base, -ENOENT, "Secret %s has no key %s",
                                   obj_name(secret) ?: "?", key);
        char *data = NULL;
        size_t len = 0;
        int r = kube_base64_decode(b64, &data, &len);
        if (r < 0)
                return target_fail(&kt->base, r, "Secret %s: key %s is not valid base64",
                                   obj_name(secret) ?: "?", key);
        r = write_secret_file(kt, dir, file, data, len);
        explicit_bzero(data, len);
        free(data);
        return r;
}

static int read_secret(kubernetes_target *kt, const char *ns, const char *name, json_t **ret)
{
        int r = kube_get(kt->kc, &GVR_SECRETS, ns, name, ret);
        if (r < 0)
                return kube_fail(kt, r);
        return 0;
}

static int kt_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                         char **ret_key)
{
        kubernetes_target *kt = KT(t);
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!render_client_tls(c))
                return 0;
        const char *ns = ns_of(c);
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *dir = NULL;
        int r = 0;
        if (c->tls.provider == TLS_PROVIDER_AUTO) {
                dir = xasprintf("%s/tls/%s", cdir, TLS_SUBDIR_OPERATOR);
        } else {
                dir = path_join(cdir, TLS_SUBDIR_OPERATOR);
                _cleanup_free_ char *name = render_tls_secret_name(c, TLS_SUBDIR_OPERATOR);
                if (!name)
                        return target_fail(t, -EINVAL,
                                           "cluster %s/%s: no operator client Secret is named", ns,
                                           c->name);
                json_t *secret = NULL;
                r = read_secret(kt, ns, name, &secret);
                if (r >= 0)
                        r = secret_key_to_file(kt, secret, "tls.crt", dir, "tls.crt");
                if (r >= 0)
                        r = secret_key_to_file(kt, secret, "tls.key", dir, "tls.key");
                if (r >= 0 && isempty(c->tls.ca_bundle_secret))
                        r = secret_key_to_file(kt, secret, "ca.crt", dir, "ca.crt");
                json_decref(secret);
                if (r >= 0 && !isempty(c->tls.ca_bundle_secret)) {
                        r = read_secret(kt, ns, c->tls.ca_bundle_secret, &secret);
                        if (r >= 0)
                                r = secret_key_to_file(kt, secret, "ca.crt", dir, "ca.crt");
                        json_decref(secret);
                }
                if (r < 0)
                        return r;
        }
        *ret_ca = path_join(dir, "ca.crt");
        *ret_cert = path_join(dir, "tls.crt");
        *ret_key = path_join(dir, "tls.key");
        return 0;
}

/*
 * A Secret gitcd itself reads (S3 credentials), as the files of a mounted
 * Secret under <cluster dir>/secrets/<name>/: written beside it as a hidden
 * folder, then swapped in, so the folder never mixes two versions of the
 * Secret. Keys that cannot be a file name (starting with '.') are left out.
 */
static int kt_secret_folder(target *t, const etcd_cluster *c, const char *name, char **ret_dir)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        if (!target_name_is_component(name))
                return target_fail(t, -EINVAL, "invalid Secret name \"%s\"", name ? name : "");
        json_t *secret = NULL;
        int r = read_secret(kt, ns, name, &secret);
        if (r < 0)
                return r;
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *parent = path_join(cdir, "secrets");
        _cleanup_free_ char *dir = path_join(parent, name);
        _cleanup_free_ char *tmp = xasprintf("%s/.%s.new", parent, name);
        (void)rm_rf(tmp);
        r = mkdir_p(tmp, 0700);
        if (r < 0)
                r = target_fail(t, r, "cannot create %s: %s", tmp, strerror(-r));
        const char *key;
        json_t *value;
        json_object_foreach(json_object_get(secret, "data"), key, value)
        {
                if (r < 0)
                        break;
                if (!target_name_is_component(key) || !json_is_string(value))
                        continue;
                r = secret_key_to_file(kt, secret, key, tmp, key);
        }
        json_decref(secret);
        if (r >= 0) {
                (void)rm_rf(dir);
                if (rename(tmp, dir) < 0) {
                        int e = errno;
                        r = target_fail(t, -e, "cannot rename %s to %s: %s", tmp, dir, strerror(e));
                }
        }
        if (r < 0) {
                (void)rm_rf(tmp);
                return r;
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/* tls.provider auto: one leaf per surface for the whole cluster, under <cluster dir>/tls. */
static int kt_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                               target_cert **ret_certs, size_t *ret_n)
{
        (void)p;
        kubernetes_target *kt = KT(t);
        *ret_certs = NULL;
        *ret_n = 0;
        const char *ns = ns_of(c);
        if (c->tls.provider != TLS_PROVIDER_AUTO)
                return 0;
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        static const char *const subdirs[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER,
                                              TLS_SUBDIR_OPERATOR};
        target_cert *v = xcalloc(ARRAY_SIZE(subdirs), sizeof(*v));
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
                _cleanup_free_ char *dir = xasprintf("%s/tls/%s", cdir, subdirs[i]);
                int64_t not_after;
                char *serial = NULL;
                if (pki_leaf_info(dir, &not_after, &serial) < 0)
                        continue;
                v[n++] = (target_cert){
                    .surface = xstrdup(subdirs[i]), .not_after_ms = not_after, .serial = serial};
        }
        _cleanup_free_ char *pki = path_join(cdir, "pki");
        target_certs_add_ca(&v, &n, pki);
        *ret_certs = v;
        *ret_n = n;
        return 0;
}

/*
 * Renewal: the leaves are shared by every member (one Secret per surface),
 * so they are renewed once, for member NULL, and the Secrets updated; the
 * kubelet swaps the mounted files of each Pod atomically (its ..data link).
 */
static int kt_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                        const char *member, int64_t now_ms)
{
        kubernetes_target *kt = KT(t);
        if (member)
                return 0;
        kt->tls_renew = true;
        kt->tls_now_ms = now_ms;
        int r = kt_ensure_shared(t, c, p);
        kt->tls_renew = false;
        return r < 0 ? r : kt->tls_issued;
}

/* --- Restore into a member's PVC (restore_member) ------------------------- */

static char *receiver_selector(const etcd_cluster *c, const char *component)
{
        return xasprintf("%s=%s,%s=%s,%s=%s", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE,
                         LABEL_CLUSTER, c->name, LABEL_KEY_COMPONENT, component);
}

/*
 * The receivers (Pods and Secrets) of the cluster's restores
 * (COMPONENT_RECEIVER) or snapshot writers (COMPONENT_WRITER): what a gitcd
 * killed mid-way left. Found by label, deleted, and the Pods awaited.
 */
static int sweep_receivers(kubernetes_target *kt, const etcd_cluster *c, const char *component)
{
        const char *ns = ns_of(c);
        _cleanup_free_ char *sel = receiver_selector(c, component);
        const kube_gvr *kinds[] = {&GVR_PODS, &GVR_SECRETS};
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                json_t *items = NULL;
                int r = kube_list(kt->kc, kinds[k], ns, sel, &items, NULL);
                if (r < 0)
                        return kube_fail(kt, r);
                size_t i;
                json_t *o;
                json_array_foreach(items, i, o)
                {
                        if (!managed_by_gitcd(o) ||
                            !streq_ptr(obj_label(o, LABEL_CLUSTER), c->name))
                                continue;
                        log_debug("kubernetes target: removing the snapshot receiver %s %s/%s",
                                  kinds[k]->resource, ns, obj_name(o));
                        r = kinds[k] == &GVR_PODS
                                ? delete_pod(kt, ns, obj_name(o))
                                : kube_delete(kt->kc, kinds[k], ns, obj_name(o), "Background");
                        if (r < 0 && r != -ENOENT) {
                                json_decref(items);
                                return kinds[k] == &GVR_PODS ? r : kube_fail(kt, r);
                        }
                }
                json_decref(items);
        }
        return 0;
}

static char *receiver_name(const char *member)
{
        return xasprintf("%s-restore", member);
}

/* Delete member's receiver Pod (awaited) and Secret; either may be gone already. */
static int delete_receiver(kubernetes_target *kt, const char *ns, const char *member)
{
        _cleanup_free_ char *name = receiver_name(member);
        int d = delete_pod(kt, ns, name);
        int s = kube_delete(kt->kc, &GVR_SECRETS, ns, name, "Background");
        if (s < 0 && s != -ENOENT && d >= 0)
                d = kube_fail(kt, s);
        return d;
}

/* The receiver's Secret: its certificate, key and bearer token. */
static json_t *receiver_secret_object(const json_t *labels, const char *ns, const char *name,
                                      const receiver_secret *s)
{
        json_t *data = json_object();
        const char *keys[] = {"tls.crt", "tls.key", "token"};
        const char *values[] = {s->cert_pem, s->key_pem, s->token};
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                char *b64 = kube_base64_encode(values[i], strlen(values[i]));
                json_object_set_new(data, keys[i], json_string(b64));
                explicit_bzero(b64, strlen(b64));
                free(b64);
        }
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:O}, s:s, s:o}", "apiVersion", "v1", "kind",
                         "Secret", "metadata", "name", name, "namespace", ns, "labels", labels,
                         "type", "Opaque", "data", data);
}

/*
 * A receiver's Pod: `gitcd snapshot receive` with mode ("--data-dir=..." or
 * "--store-dir=..."), its Secret mounted read-only, volume (taken) mounted
 * at mount (sub_path: the folder of the volume mounted; NULL: its root),
 * max_bytes (0: no limit), placed as placement (a Pod spec whose
 * nodeSelector, tolerations and affinity are copied; NULL: anywhere).
 */
static json_t *receiver_pod(kubernetes_target *kt, const json_t *labels, const char *ns,
                            const char *name, const char *secret, const char *mode, json_t *volume,
                            const char *mount, const char *sub_path, int64_t max_bytes,
                            const json_t *placement)
{
        _cleanup_free_ char *a_secret = xasprintf("--secret-dir=%s", RECEIVER_SECRET_DIR);
        _cleanup_free_ char *a_listen = xasprintf("--listen=0.0.0.0:%d", RECEIVER_PORT);
        json_t *cmd =
            json_pack("[s,s,s,s,s,s]", "gitcd", "snapshot", "receive", mode, a_secret, a_listen);
        if (max_bytes > 0)
                json_array_append_new(cmd, json_sprintf("--max-bytes=%lld", (long long)max_bytes));
        json_t *data_mount = json_pack("{s:s, s:s}", "name", "data", "mountPath", mount);
        if (!isempty(sub_path))
                json_object_set_new(data_mount, "subPath", json_string(sub_path));
        json_t *c = json_pack(
            "{s:s, s:s, s:s, s:o, s:[{s:s, s:i, s:s}], s:{s:{s:s, s:i, s:s}, s:i, "
            "s:i}, s:[o, {s:s, s:s, s:b}]}",
            "name", "receive", "image", kt->snapshot_image, "imagePullPolicy", "IfNotPresent",
            "command", cmd, "ports", "name", "receive", "containerPort", RECEIVER_PORT, "protocol",
            "TCP", "readinessProbe", "httpGet", "path", "/healthz", "port", RECEIVER_PORT, "scheme",
            "HTTPS", "periodSeconds", 1, "timeoutSeconds", 5, "volumeMounts", data_mount, "name",
            "receive", "mountPath", RECEIVER_SECRET_DIR, "readOnly", 1);
        json_object_set_new(volume, "name", json_string("data"));
        json_t *s =
            json_pack("{s:s, s:i, s:i, s:b, s:b, s:[o], s:[o, {s:s, s:{s:s, s:i}}]}",
                      "restartPolicy", "Never", "activeDeadlineSeconds", RECEIVER_DEADLINE_S,
                      "terminationGracePeriodSeconds", 5, "enableServiceLinks", 0,
                      "automountServiceAccountToken", 0, "containers", c, "volumes", volume, "name",
                      "receive", "secret", "secretName", secret, "defaultMode", 0400);
        /*
         * The files must be etcd's: the member's container runs as its etcd
         * image's user (root; render sets no securityContext), while gitcd's
         * image defaults to 65532, which could not even write into a new
         * volume's root folder (nor into a claim whose owner is unknown).
         */
        json_object_set_new(c, "securityContext", json_pack("{s:i}", "runAsUser", 0));
        static const char *const keys[] = {"nodeSelector", "tolerations", "affinity"};
        for (size_t k = 0; placement && k < ARRAY_SIZE(keys); k++) {
                json_t *v = json_object_get(placement, keys[k]);
                if (v)
                        json_object_set_new(s, keys[k], json_deep_copy(v));
        }
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:O}, s:o}", "apiVersion", "v1", "kind", "Pod",
                         "metadata", "name", name, "namespace", ns, "labels", labels, "spec", s);
}

/*
 * The restore receiver's Pod, placed as the member's (its nodeSelector,
 * tolerations and affinity) and mounting the member's data volume where the
 * member mounts it (both read from the rendered member Pod).
 */
static json_t *receiver_pod_object(kubernetes_target *kt, const json_t *member_pod,
                                   const json_t *labels, const char *ns, const char *name,
                                   const char *secret, const char *data_dir, int64_t max_bytes)
{
        const json_t *spec = json_object_get(member_pod, "spec");
        const json_t *ctr = json_array_get(json_object_get(spec, "containers"), 0);
        const char *mount = NULL;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m)
        {
                if (streq_ptr(json_string_value(json_object_get(m, "name")), "data"))
                        mount = json_string_value(json_object_get(m, "mountPath"));
        }
        json_t *data_volume = NULL;
        json_array_foreach(json_object_get(spec, "volumes"), i, m)
        {
                if (streq_ptr(json_string_value(json_object_get(m, "name")), "data"))
                        data_volume = m;
        }
        if (!mount || !data_volume)
                return NULL;
        _cleanup_free_ char *a_data = xasprintf("--data-dir=%s", data_dir);
        return receiver_pod(kt, labels, ns, name, secret, a_data, json_deep_copy(data_volume),
                            mount, NULL, max_bytes, spec);
}

/* Wait until the receiver's Pod is Ready; its address. */
static int wait_receiver(kubernetes_target *kt, const char *ns, const char *name,
                         char **ret_address)
{
        int64_t deadline = now_mono_ms() + RECEIVER_READY_MS;
        _cleanup_free_ char *why = NULL;
        for (;;) {
                json_t *pod = NULL;
                int r = kube_get(kt->kc, &GVR_PODS, ns, name, &pod);
                if (r < 0)
                        return kube_fail(kt, r);
                const json_t *status = json_object_get(pod, "status");
                const char *phase = json_string_value(json_object_get(status, "phase"));
                const char *ip = json_string_value(json_object_get(status, "podIP"));
                int restarts = 0;
                bool crash_loop = false;
                const char *waiting = NULL;
                container_facts(pod, &restarts, &crash_loop, &waiting);
                free(why);
                why = xasprintf("%s%s%s", phase ? phase : "Pending", waiting ? ": " : "",
                                waiting ? waiting : "");
                bool ready = pod_ready(pod) && !isempty(ip);
                bool ended = streq_ptr(phase, "Failed") || streq_ptr(phase, "Succeeded");
                if (ready)
                        *ret_address = strchr(ip, ':') ? xasprintf("[%s]", ip) : xstrdup(ip);
                json_decref(pod); /* phase, ip and waiting point into it */
                if (ready)
                        return 0;
                if (ended)
                        return target_fail(&kt->base, -EIO,
                                           "the snapshot receiver Pod %s/%s ended (%s)", ns, name,
                                           why);
                if (now_mono_ms() >= deadline)
                        return target_fail(&kt->base, -ETIMEDOUT,
                                           "the snapshot receiver Pod %s/%s is not Ready after "
                                           "%d s (%s)",
                                           ns, name, RECEIVER_READY_MS / 1000, why);
                target_blocking_begin();
                msleep(POLL_MS);
                target_blocking_end();
        }
}

/* The sum of the sizes of the files under dir. */
static int64_t tree_bytes(const char *dir)
{
        _cleanup_(path_list_release) path_list files = {0}, dirs = {0};
        if (list_tree(dir, &files, &dirs) < 0)
                return -1;
        int64_t sum = 0;
        for (size_t i = 0; i < files.n; i++) {
                _cleanup_free_ char *p = path_join(dir, files.paths[i]);
                struct stat st;
                if (stat(p, &st) < 0)
                        return -1;
                sum += st.st_size;
        }
        return sum;
}

/*
 * Restore on gitcd's host, then deliver through a receiver Pod that mounts
 * the member's PVC (docs/snapshots.md, "Creating a cluster from a snapshot").
 * Order, each step safe to cut short:
 *   1. receivers a killed gitcd left are deleted (sweep_receivers);
 *   2. the PVC is applied with gitcd.io/restore=pending: from then on the
 *      member is ABSENT for member_status and ensure_member refuses to
 *      start it, whatever the volume holds;
 *   3. etcd's tool restores into <state>/kubernetes/<ns>/<cluster>/restore-<member>/;
 *   4. a Secret (certificate, key, token made for this receiver alone) and
 *      the receiver Pod; gitcd waits until it is Ready;
 *   5. receiver_deliver(): every file with its SHA-256 into <data>.receive
 *      on the volume, then the rename to the data directory;
 *   6. the Pod and the Secret are deleted, then the annotation is lifted.
 * A volume that holds etcd data while still pending was filled by an
 * earlier run whose step 6 did not finish: it counts as restored.
 */
static int kt_restore_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                             const target_restore *rs)
{
        kubernetes_target *kt = KT(t);
        if (idx >= p->n || isempty(p->members[idx].name) || !p->members[idx].peer_url)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        const char *ns = ns_of(c);
        /* refused before anything is created (TARGET_CAP_MEMORY_MEDIUM) */
        if (c->storage.medium == MEDIUM_MEMORY)
                return target_fail(t, -EOPNOTSUPP,
                                   "member %s: storage.medium Memory keeps no data to restore "
                                   "into; a snapshot needs a PersistentVolumeClaim",
                                   mp->name);
        note_namespace(kt, ns);
        _cleanup_free_ char *rpath = NULL; /* the names must make a path (checked here) */
        int r = record_path(kt, ns, c->name, mp->name, &rpath);
        if (r < 0)
                return r;
        _cleanup_(json_decrefp) json_t *pvc = NULL, *pod = NULL, *live = NULL;
        r = member_objects(kt, c, p, idx, &pvc, &pod);
        if (r < 0)
                return r;
        if ((r = get_owned(kt, pod, &live)) < 0)
                return r;
        if (live)
                return target_fail(t, -EEXIST,
                                   "member %s runs already; a snapshot is never restored over it",
                                   mp->name);
        if ((r = adapt(kt, pvc)) < 0 || (r = get_owned(kt, pvc, &live)) < 0)
                return r;
        if (live && obj_terminating(live))
                return target_fail(t, -EBUSY,
                                   "member %s: its PersistentVolumeClaim %s is being "
                                   "deleted; the restore waits",
                                   mp->name, obj_name(pvc));
        if (live && !restore_pending(live))
                return target_fail(t, -EEXIST,
                                   "member %s has data already (its PersistentVolumeClaim %s); a "
                                   "snapshot is never restored over it",
                                   mp->name, obj_name(pvc));
        json_decref(live);
        live = NULL;

        if ((r = sweep_receivers(kt, c, COMPONENT_RECEIVER)) < 0)
                return r;
        _cleanup_(json_decrefp) json_t *pending = json_deep_copy(pvc);
        set_annotation(pending, ANNOTATION_RESTORE, RESTORE_PENDING);
        if ((r = apply(kt, pending, false)) < 0)
                return r;

        _cleanup_free_ char *home = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *local = xasprintf("%s/restore-%s", home, mp->name);
        if ((r = target_restore_into(t, p, idx, rs, local)) < 0)
                return r;

        receiver_secret sec = {0};
        if ((r = receiver_secret_new(&sec)) < 0) {
                (void)rm_rf(local);
                return target_fail(t, r, "member %s: cannot make the receiver's certificate: %s",
                                   mp->name, pki_last_error());
        }
        _cleanup_free_ char *name = receiver_name(mp->name);
        _cleanup_(json_decrefp) json_t *labels = json_pack(
            "{s:s, s:s, s:s, s:s}", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE, LABEL_CLUSTER,
            c->name, LABEL_KEY_COMPONENT, COMPONENT_RECEIVER, LABEL_RESTORE_MEMBER, mp->name);
        _cleanup_(json_decrefp) json_t *secret = receiver_secret_object(labels, ns, name, &sec);
        const char *data_dir = isempty(mp->data_dir) ? RENDER_STEADY_DATA_DIR : mp->data_dir;
        int64_t bytes = tree_bytes(local);
        _cleanup_(json_decrefp) json_t *rpod =
            bytes < 0 ? NULL
                      : receiver_pod_object(kt, pod, labels, ns, name, name, data_dir, bytes);
        if (bytes < 0)
                r = target_fail(t, -EIO, "member %s: cannot read the restored data in %s", mp->name,
                                local);
        else if (!rpod)
                r = target_fail(t, -EINVAL, "member %s: the rendered Pod mounts no data volume",
                                mp->name);
        if (r >= 0 && (r = adapt(kt, rpod)) >= 0 && (r = apply(kt, secret, false)) >= 0)
                r = apply(kt, rpod, false);
        _cleanup_free_ char *address = NULL;
        if (r >= 0)
                r = wait_receiver(kt, ns, name, &address);
        if (r >= 0)
                FAILPOINT("kubernetes.restore.receiver-ready");
        if (r >= 0) {
                _cleanup_free_ char *url = xasprintf("https://%s:%d", address, RECEIVER_PORT);
                receiver_peer peer = {.url = url, .token = sec.token, .pin = sec.pin};
                _cleanup_free_ char *why = NULL;
                target_blocking_begin();
                r = receiver_deliver(&peer, local, &why);
                target_blocking_end();
                if (r >= 0)
                        FAILPOINT("kubernetes.restore.after-delivery");
                if (r == -EEXIST) {
                        /* pending and full: an earlier run delivered it and stopped after */
                        log_info("kubernetes target: member %s/%s/%s: its volume holds the "
                                 "restored data already",
                                 ns, c->name, mp->name);
                        r = 0;
                } else if (r < 0) {
                        (void)target_fail(t, r,
                                          "member %s: delivery into its "
                                          "PersistentVolumeClaim failed: %s",
                                          mp->name, why);
                }
        }
        receiver_secret_release(&sec);
        (void)rm_rf(local);
        /* the receiver goes whatever happened; its failure to go fails the restore */
        _cleanup_free_ char *keep_error = r < 0 ? xstrdup(target_last_error(t)) : NULL;
        int d = delete_receiver(kt, ns, mp->name);
        if (r < 0)
                return target_fail(t, r, "%s", keep_error);
        if (d < 0)
                return d;
        /* filled: the PVC as the member applies it, without the annotation */
        if ((r = apply(kt, pvc, false)) < 0)
                return r;
        log_debug("kubernetes target: restored member %s/%s/%s from %s", ns, c->name, mp->name,
                  rs->snapshot);
        return 0;
}

/* --- Snapshots in a PersistentVolumeClaim (writer_start/writer_stop) ------- */

typedef struct kt_writer {
        char *ns, *name, *url;
        receiver_secret sec;
        int lock_fd; /* kubernetes_writer_lock, held until the writer is deleted */
} kt_writer;

/* Frees the handle and lets go of the cluster's writer lock: delete the writer first. */
static void kt_writer_free(kt_writer *w)
{
        if (!w)
                return;
        if (w->lock_fd >= 0)
                close(w->lock_fd);
        receiver_secret_release(&w->sec);
        free(w->ns);
        free(w->name);
        free(w->url);
        free(w);
}

/* Delete a writer's Pod (awaited) and Secret; either may be gone already. */
static int delete_writer(kubernetes_target *kt, const kt_writer *w)
{
        int d = delete_pod(kt, w->ns, w->name);
        int s = kube_delete(kt->kc, &GVR_SECRETS, w->ns, w->name, "Background");
        if (s < 0 && s != -ENOENT && d >= 0)
                d = kube_fail(kt, s);
        return d;
}

int kubernetes_writer_lock(const char *state_dir, const char *ns, const char *cluster, int *ret_fd,
                           pid_t *ret_holder)
{
        assert(state_dir && ret_fd);
        if (!target_name_is_component(ns) || !target_name_is_component(cluster))
                return -EINVAL;
        _cleanup_free_ char *dir = cluster_dir_in(state_dir, ns, cluster);
        int r = mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = path_join(dir, WRITER_LOCK_FILE);
        return lock_file_try(path, ret_fd, ret_holder);
}

/*
 * Order, each step safe to cut short: the claim must exist (it is the
 * operator's); the cluster's writer lock is taken (-EAGAIN when another
 * writer of the cluster is in use); the cluster's writers a killed gitcd
 * left go; a Secret
 * (certificate, key, token made for this writer alone) and the Pod
 * `<cluster>-snapshot-<random>` (restartPolicy Never, activeDeadlineSeconds)
 * are created; gitcd waits until it is Ready. A failure deletes both.
 */
static int kt_writer_start(target *t, const etcd_cluster *c, const char *claim, const char *folder,
                           void **ret_handle, receiver_peer *ret_peer)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(claim))
                return target_fail(t, -EINVAL, "\"%s\" is not a PersistentVolumeClaim name",
                                   claim ? claim : "");
        note_namespace(kt, ns);
        json_t *live = NULL;
        int r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &live);
        json_decref(live);
        if (r == -ENOENT)
                return target_fail(t, -ENOENT,
                                   "PersistentVolumeClaim %s/%s not found: snapshots go into a "
                                   "claim you create (gitcd never creates, resizes or deletes "
                                   "it)",
                                   ns, claim);
        if (r < 0)
                return kube_fail(kt, r);
        kt_writer *w = XNEW(kt_writer);
        pid_t holder = 0;
        r = kubernetes_writer_lock(kt->state_dir, ns, c->name, &w->lock_fd, &holder);
        if (r < 0) {
                w->lock_fd = -1;
                kt_writer_free(w);
                if (r != -EAGAIN)
                        return target_fail(t, r,
                                           "cannot lock the snapshot writer of %s/%s in %s: %s", ns,
                                           c->name, kt->state_dir, strerror(-r));
                if (holder == getpid())
                        return target_fail(t, -EAGAIN,
                                           "another snapshot writer of %s/%s is in use by this "
                                           "gitcd",
                                           ns, c->name);
                if (holder > 0)
                        return target_fail(t, -EAGAIN,
                                           "another snapshot writer of %s/%s is in use by gitcd "
                                           "pid %ld",
                                           ns, c->name, (long)holder);
                return target_fail(t, -EAGAIN,
                                   "another snapshot writer of %s/%s is in use by another gitcd "
                                   "of %s",
                                   ns, c->name, kt->state_dir);
        }
        /* ours alone now: any writer of the cluster is a leftover */
        if ((r = sweep_receivers(kt, c, COMPONENT_WRITER)) < 0) {
                kt_writer_free(w);
                return r;
        }
        if ((r = receiver_secret_new(&w->sec)) < 0) {
                kt_writer_free(w);
                return target_fail(t, r, "cannot make the snapshot writer's certificate: %s",
                                   pki_last_error());
        }
        unsigned char rnd[4];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                kt_writer_free(w);
                return target_fail(t, -EIO, "no random bytes for the writer's name");
        }
        w->ns = xstrdup(ns);
        w->name =
            xasprintf("%s-snapshot-%02x%02x%02x%02x", c->name, rnd[0], rnd[1], rnd[2], rnd[3]);
        _cleanup_(json_decrefp) json_t *labels =
            json_pack("{s:s, s:s, s:s}", LABEL_APP_MANAGED_BY, LABEL_MANAGED_BY_VALUE,
                      LABEL_CLUSTER, c->name, LABEL_KEY_COMPONENT, COMPONENT_WRITER);
        _cleanup_(json_decrefp) json_t *secret =
            receiver_secret_object(labels, ns, w->name, &w->sec);
        _cleanup_free_ char *mode = xasprintf("--store-dir=%s", WRITER_MOUNT);
        _cleanup_(json_decrefp) json_t *pod =
            receiver_pod(kt, labels, ns, w->name, w->name, mode,
                         json_pack("{s:{s:s}}", "persistentVolumeClaim", "claimName", claim),
                         WRITER_MOUNT, isempty(folder) ? NULL : folder, 0, NULL);
        if ((r = adapt(kt, pod)) >= 0 && (r = apply(kt, secret, false)) >= 0)
                r = apply(kt, pod, false);
        _cleanup_free_ char *address = NULL;
        if (r >= 0)
                r = wait_receiver(kt, ns, w->name, &address);
        if (r < 0) {
                _cleanup_free_ char *keep = xstrdup(target_last_error(t));
                (void)delete_writer(kt, w);
                kt_writer_free(w);
                return target_fail(t, r, "snapshot writer for PersistentVolumeClaim %s/%s: %s", ns,
                                   claim, keep);
        }
        w->url = xasprintf("https://%s:%d", address, RECEIVER_PORT);
        log_debug("kubernetes target: snapshot writer %s/%s serves claim %s", ns, w->name, claim);
        *ret_peer = (receiver_peer){.url = w->url, .token = w->sec.token, .pin = w->sec.pin};
        *ret_handle = w;
        return 0;
}

static int kt_writer_stop(target *t, const etcd_cluster *c, void *handle)
{
        kubernetes_target *kt = KT(t);
        (void)c;
        kt_writer *w = handle;
        if (!w)
                return 0;
        int r = delete_writer(kt, w);
        kt_writer_free(w);
        return r;
}

/*
 * The revision of a stopped member's data (data_revision): its PVC's
 * member/snap/db is read through a writer Pod (the store-mode receiver of
 * snapshots in a claim, writer_start) mounting the member's PVC, fetched
 * into <state>/kubernetes/<ns>/<name>/revision-<member>.db on gitcd's host
 * with its SHA-256 checked end to end, read there with etcd's tool and
 * deleted. Only when the member has no Pod (ReadWriteOnce: the writer would
 * not get the volume, and a running member writes it). The writer takes
 * the cluster's writer turn, as a snapshot into a claim does.
 */
static int kt_data_revision(target *t, const etcd_cluster *c, const char *member, const char *tool,
                            int64_t *ret_revision)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(member) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        if (c->storage.medium == MEDIUM_MEMORY)
                return target_fail(
                    t, -ENOENT, "member %s keeps its data in memory: none without its Pod", member);
        note_namespace(kt, ns);
        _cleanup_(json_decrefp) json_t *pod = NULL;
        int r = kube_get(kt->kc, &GVR_PODS, ns, member, &pod);
        if (r >= 0)
                return target_fail(t, -EBUSY, "member %s has a Pod: its data is in use", member);
        if (r != -ENOENT)
                return kube_fail(kt, r);
        _cleanup_free_ char *claim = pvc_name(member);
        _cleanup_(json_decrefp) json_t *pvc = NULL;
        r = kube_get(kt->kc, &GVR_PVCS, ns, claim, &pvc);
        if (r < 0 && r != -ENOENT)
                return kube_fail(kt, r);
        if (r == -ENOENT || !streq_ptr(obj_label(pvc, LABEL_MEMBER), member) ||
            obj_terminating(pvc) || restore_pending(pvc))
                return target_fail(t, -ENOENT,
                                   "member %s holds no data (no PersistentVolumeClaim "
                                   "%s of its own)",
                                   member, claim);
        _cleanup_free_ char *dir = cluster_dir(kt, ns, c->name);
        if ((r = mkdir_p(dir, 0700)) < 0)
                return target_fail(t, r, "cannot create %s: %s", dir, strerror(-r));
        _cleanup_free_ char *copy = xasprintf("%s/revision-%s.db", dir, member);
        _cleanup_close_ int fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return target_fail(t, -errno, "cannot create %s: %s", copy, strerror(errno));
        void *handle = NULL;
        receiver_peer peer = {0};
        r = kt_writer_start(t, c, claim, NULL, &handle, &peer);
        if (r < 0) {
                (void)unlink(copy);
                return r;
        }
        /* the data folder's name inside the volume, mounted at its parent */
        const char *base = strrchr(RENDER_STEADY_DATA_DIR, '/') + 1;
        _cleanup_free_ char *key = xasprintf("%s/member/snap/db", base);
        _cleanup_free_ char *err = NULL;
        r = receiver_fetch(&peer, key, fd, &err);
        (void)kt_writer_stop(t, c, handle);
        if (r == -ENOENT)
                r = target_fail(t, -ENOENT,
                                "member %s holds no data (its PersistentVolumeClaim %s has no "
                                "%s)",
                                member, claim, key);
        else if (r < 0)
                r = target_fail(t, r,
                                "member %s: cannot read %s of its PersistentVolumeClaim %s: %s",
                                member, key, claim, err);
        else
                r = target_db_revision(t, member, tool, copy, ret_revision);
        (void)unlink(copy);
        return r;
}

static void kt_free(target *t)
{
        kubernetes_target *kt = KT(t);
        for (size_t i = 0; i < kt->n_events; i++)
                free(kt->events[i]);
        free(kt->events);
        kube_client_free(kt->kc);
        kube_client_free(kt->wc);
        free(kt->state_dir);
        free(kt->domain);
        free(kt->snapshot_image);
        for (size_t i = 0; i < kt->n_namespaces; i++)
                free(kt->namespaces[i]);
        free(kt->namespaces);
        free(kt->watch_scope);
        free(kt->watch_rv);
        pthread_mutex_destroy(&kt->watch_lock);
        for (size_t i = 0; i < kt->n_preflighted; i++)
                free(kt->preflighted[i]);
        free(kt->preflighted);
        for (size_t i = 0; i < kt->n_seen; i++)
                free(kt->seen[i].key);
        free(kt->seen);
        for (size_t i = 0; i < kt->n_marks; i++) {
                free(kt->marks[i].key);
                free(kt->marks[i].hash);
        }
        free(kt->marks);
        free(kt);
}

static const target_ops kubernetes_ops = {
    .name = "kubernetes",
    .caps = KUBERNETES_TARGET_CAPS,
    .place_member = kt_place_member,
    .ensure_shared = kt_ensure_shared,
    .ensure_member = kt_ensure_member,
    .stop_member = kt_stop_member,
    .remove_member = kt_remove_member,
    .member_status = kt_member_status,
    .list_members = kt_list_members,
    .drop_kept_data = kt_drop_kept_data,
    .tick = kt_tick,
    .wait_event = kt_wait_event,
    .take_events = kt_take_events,
    .client_tls = kt_client_tls,
    .tls_certificates = kt_tls_certificates,
    .renew_tls = kt_renew_tls,
    .secret_folder = kt_secret_folder,
    .restore_member = kt_restore_member,
    .data_revision = kt_data_revision,
    .writer_start = kt_writer_start,
    .writer_stop = kt_writer_stop,
    .free = kt_free,
};

int kubernetes_target_new(const kubernetes_target_opts *opts, target **ret)
{
        if (!opts || !opts->config || isempty(opts->state_dir))
                return -EINVAL;
        int r = mkdir_p(opts->state_dir, 0700);
        if (r < 0)
                return r;
        char *abs_state = realpath(opts->state_dir, NULL);
        if (!abs_state)
                return -errno;
        kubernetes_target *kt = XNEW(kubernetes_target);
        pthread_mutex_init(&kt->watch_lock, NULL);
        kt->base.ops = &kubernetes_ops;
        kt->state_dir = abs_state;
        kt->volume_delete_wait_ms =
            opts->volume_delete_wait_ms > 0 ? opts->volume_delete_wait_ms : 30000;
        kt->snapshot_image =
            xstrdup(isempty(opts->snapshot_image) ? KUBERNETES_DEFAULT_SNAPSHOT_IMAGE
                                                  : opts->snapshot_image);
        kt->domain = xstrdup(isempty(opts->cluster_domain) ? RENDER_DEFAULT_CLUSTER_DOMAIN
                                                           : opts->cluster_domain);
        char *err = NULL;
        r = kube_client_new(opts->config, &kt->kc, &err);
        if (r >= 0)
                r = kube_client_new(opts->config, &kt->wc, &err);
        if (r < 0) {
                log_error("kubernetes target: %s", err ? err : strerror(-r));
                free(err);
                kt_free(&kt->base);
                return r;
        }
        *ret = &kt->base;
        return 0;
}
