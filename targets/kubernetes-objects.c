/*
 * The Kubernetes target's objects: every write is a server-side apply after a
 * GET that checks the object is gitcd's (ownership), a dry-run preflight of
 * everything a spec renders before its first write, the prune of gitcd's
 * objects a spec no longer renders, and kubernetes_target_objects(), the one
 * producer of the objects as applied (ensure_shared, ensure_member and plan's
 * drift all use it). Design: targets/kubernetes.c.
 */

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include "kube/adapt.h"
#include "targets/locked.h"
#include "render/layout.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "pki/auto.h"
#include "targets/kubernetes-internal.h"

#define DEFAULT_GRACE_SECONDS 30
#define DELETE_EXTRA_MS       15000
static const kube_gvr GVR_SERVICES = {"", "v1", "services", true};

int kt_adapt(kubernetes_target *kt, json_t *obj)
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
int kt_get_owned(kubernetes_target *kt, const json_t *obj, json_t **ret_live)
{
        kube_gvr gvr;
        int r = kt_gvr_of(kt, obj, &gvr);
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

int kt_apply(kubernetes_target *kt, const json_t *obj, bool dry_run)
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
int kt_delete_pod(kubernetes_target *kt, const char *ns, const char *name)
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

/* --- preflight and prune ---------------------------------------------------- */

static bool is_member_kind(const json_t *obj)
{
        const char *k = obj_kind(obj);
        return streq_ptr(k, "Pod") || streq_ptr(k, "PersistentVolumeClaim");
}

void kt_set_annotation(json_t *obj, const char *key, const char *value)
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
        _cleanup_free_ char *hash = kt_json_hash(json_object_get(pod, "spec"));
        kt_set_annotation(pod, ANNOTATION_POD_HASH, hash);
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
                        r = kt_get_owned(kt, obj, &live);
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
                                r = kt_apply(kt, obj, true);
                        }
                        json_decref(live);
                        if (r < 0)
                                return r;
                        continue;
                }
                r = kt_apply(kt, obj, true);
                if (r < 0 && r != -EACCES) {
                        /* A foreign object of that name explains more than the apply error. */
                        _cleanup_free_ char *msg = xstrdup(target_last_error(&kt->base));
                        int o = kt_get_owned(kt, obj, &live);
                        json_decref(live);
                        if (o < 0)
                                return o;
                        return target_fail(&kt->base, r, "%s", msg);
                }
                if (r < 0)
                        return r;
                r = kt_get_owned(kt, obj, &live);
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
        const char *const *subs = pki_auto_leaf_dirs;
        for (size_t i = 0; i < PKI_AUTO_LEAVES; i++) {
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
int kt_prune(kubernetes_target *kt, const etcd_cluster *c, const json_t *keep)
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

/* Adapt every object of an array, setting the pod hash on Pods. */
int kt_adapt_all(kubernetes_target *kt, json_t *objs)
{
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                int r = kt_adapt(kt, o);
                if (r < 0)
                        return r;
                if (streq_ptr(obj_kind(o), "Pod"))
                        set_pod_hash(o);
        }
        return 0;
}

bool kt_preflight_done(kubernetes_target *kt, const char *key)
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
int kt_member_objects(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *p,
                      size_t idx, json_t **ret_pvc, json_t **ret_pod)
{
        const member_plan *mp = &p->members[idx];
        json_t *pod = render_member_pod(c, p, idx);
        if (!pod)
                return target_fail(&kt->base, -EINVAL, "member %s: no Pod rendered", mp->name);
        /* Before adaptation, which changes no Pod: the hash is the one applied. */
        set_pod_hash(pod);
        if (mp->config_hash)
                kt_set_annotation(pod, ANNOTATION_CONFIG_HASH, mp->config_hash);
        *ret_pvc = render_member_pvc(c, p, idx);
        *ret_pod = pod;
        return 0;
}

/*
 * What this target applies for c (kubernetes_target_objects()); with
 * with_members false only the shared objects and Secrets.
 */
int kt_applied_objects(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *steady,
                       const membership_plan *members, bool with_members, json_t **ret)
{
        _cleanup_(json_decrefp) json_t *objs = kubernetes_shared_objects(c, steady, members);
        if (!objs)
                return target_fail(&kt->base, -EINVAL, "cluster %s/%s: nothing rendered", ns_of(c),
                                   c->name);
        _cleanup_(json_decrefp) json_t *labels =
            json_deep_copy(json_object_get(metadata(json_array_get(objs, 0)), "labels"));
        int r = kt_tls_secrets(kt, c, labels, objs);
        if (r < 0)
                return r;
        for (size_t i = 0; with_members && members && i < members->n; i++) {
                json_t *pvc = NULL, *pod = NULL;
                r = kt_member_objects(kt, c, members, i, &pvc, &pod);
                if (r < 0)
                        return r;
                if (pvc)
                        json_array_append_new(objs, pvc);
                json_array_append_new(objs, pod);
        }
        *ret = TAKE_PTR(objs);
        return 0;
}

int kt_plan_kube_objects(target *t, const etcd_cluster *c, const membership_plan *steady,
                         const membership_plan *members, json_t **ret)
{
        if (!t) {
                *ret = kubernetes_shared_objects(c, steady, NULL);
                return 0;
        }
        return kubernetes_target_objects(t, c, members, ret);
}

/* The first write for a spec: dry-run everything the cluster needs, TLS Secrets included. */
int kt_preflight_cluster(kubernetes_target *kt, const json_t *shared, const json_t *all)
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

shared_mark *kt_find_mark(kubernetes_target *kt, const char *key)
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
char *kt_plan_roles(const membership_plan *p)
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
int kt_sync_roles(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *p)
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
