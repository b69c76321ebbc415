/*
 * Drift between the objects gitcd would apply on Kubernetes and the live
 * ones, for `gitcd plan --target kubernetes`.
 *
 * Design decision: the server says what an apply would store. Comparing
 * the rendered object with the live one directly would report every field
 * the server defaults (sessionAffinity, ipFamilies, ...) and miss fields
 * gitcd set before and no longer renders. A server-side apply with
 * dryRun=All answers both: its result is exactly the object the real apply
 * would store, so the drift is the difference between that result and the
 * live object, minus status and the metadata the server maintains. Only
 * when the server refuses the apply (a field owned by another manager:
 * gitcd never forces) do we fall back to comparing the rendered fields
 * with the live values, to still name the paths.
 *
 * The objects compared are exactly those the Kubernetes target applies:
 * its kind's kube_objects (target_plan_ops, targets/registry.h) produces
 * them for both, from the member records through the one membership plan
 * builder, the TLS Secrets from the target's state folder.
 *
 * Nothing here writes: GET, LIST and dry-run PATCH only.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/domains.h"
#include "kube/adapt.h"
#include "plan/drift.h"
#include "reconciler/membership.h"
#include "render/render.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

const char *drift_state_name(drift_state s)
{
        switch (s) {
        case DRIFT_IN_SYNC:
                return "in-sync";
        case DRIFT_MISSING:
                return "missing";
        case DRIFT_CHANGED:
                return "drift";
        case DRIFT_CONFLICT:
                return "conflict";
        case DRIFT_UNMANAGED:
                return "not-managed";
        case DRIFT_PRUNE:
                return "prune";
        case DRIFT_UNSUPPORTED:
                return "unsupported";
        }
        return "unknown";
}

/* ---- pure comparison ------------------------------------------------------ */

typedef struct path_list {
        char **v;
        size_t n, alloc;
} path_list;

static void path_add(path_list *l, const char *path)
{
        l->v = xgrow(l->v, &l->alloc, l->n + 1, sizeof(*l->v));
        l->v[l->n++] = xstrdup(path);
}

static char *path_key(const char *prefix, const char *key)
{
        bool plain = key[strcspn(key, "./[]\"")] == '\0' && *key;
        if (plain)
                return isempty(prefix) ? xstrdup(key) : xasprintf("%s.%s", prefix, key);
        return xasprintf("%s[\"%s\"]", prefix ? prefix : "", key);
}

static bool ignored(const char *path)
{
        static const char *const skip[] = {
            "status",
            "metadata.managedFields",
            "metadata.resourceVersion",
            "metadata.generation",
            "metadata.creationTimestamp",
            "metadata.uid",
            "metadata.selfLink",
        };
        for (size_t i = 0; i < ARRAY_SIZE(skip); i++)
                if (streq(path, skip[i]))
                        return true;
        return false;
}

static void diff_rec(const json_t *a, const json_t *b, const char *path, bool subset,
                     path_list *out)
{
        if (path && ignored(path))
                return;
        if (json_is_object(a) && json_is_object(b)) {
                const char *key;
                json_t *va;
                json_object_foreach((json_t *)a, key, va)
                {
                        _cleanup_free_ char *p = path_key(path, key);
                        json_t *vb = json_object_get(b, key);
                        if (!vb) {
                                if (!ignored(p))
                                        path_add(out, p);
                                continue;
                        }
                        diff_rec(va, vb, p, subset, out);
                }
                if (subset)
                        return;
                json_t *vb;
                json_object_foreach((json_t *)b, key, vb)
                {
                        if (json_object_get(a, key))
                                continue;
                        _cleanup_free_ char *p = path_key(path, key);
                        if (!ignored(p))
                                path_add(out, p);
                }
                return;
        }
        if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
                for (size_t i = 0; i < json_array_size(a); i++) {
                        _cleanup_free_ char *p = xasprintf("%s[%zu]", path ? path : "", i);
                        diff_rec(json_array_get(a, i), json_array_get(b, i), p, subset, out);
                }
                return;
        }
        if (!json_equal((json_t *)a, (json_t *)b))
                path_add(out, path ? path : "(object)");
}

void drift_diff(const json_t *before, const json_t *after, char ***ret_paths, size_t *ret_n)
{
        path_list l = {0};
        diff_rec(after, before, NULL, false, &l);
        *ret_paths = l.v;
        *ret_n = l.n;
}

void drift_diff_subset(const json_t *want, const json_t *live, char ***ret_paths, size_t *ret_n)
{
        path_list l = {0};
        diff_rec(want, live, NULL, true, &l);
        *ret_paths = l.v;
        *ret_n = l.n;
}

/* ---- the report ----------------------------------------------------------- */

/* A counted vector of strings (not NULL-terminated). */
static void strvn_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void drift_report_free(drift_report *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n; i++) {
                drift_cluster *dc = &r->items[i];
                for (size_t j = 0; j < dc->n_objects; j++) {
                        drift_object *o = &dc->objects[j];
                        free(o->api_version);
                        free(o->kind);
                        free(o->name);
                        free(o->message);
                        strvn_free(o->paths, o->n_paths);
                }
                free(dc->objects);
                free(dc->name);
                free(dc->version);
                strvn_free(dc->stale, dc->n_stale);
                strvn_free(dc->domain_risks, dc->n_domain_risks);
        }
        free(r->items);
        free(r);
}

static bool members_differ(const drift_cluster *dc)
{
        return dc->pods != dc->want_pods || dc->pvcs != dc->want_pvcs || dc->n_stale > 0;
}

bool drift_has_changes(const drift_report *r)
{
        return r->n_missing + r->n_changed + r->n_prune + r->n_members > 0;
}

bool drift_has_errors(const drift_report *r)
{
        return r->n_unmanaged + r->n_unsupported > 0;
}

static drift_object *object_add(drift_cluster *dc, const json_t *obj, drift_state state)
{
        dc->objects =
            xgrow(dc->objects, &dc->alloc_objects, dc->n_objects + 1, sizeof(*dc->objects));
        drift_object *o = &dc->objects[dc->n_objects++];
        o->api_version = xstrdup_null(json_string_value(json_object_get(obj, "apiVersion")));
        o->kind = xstrdup_null(json_string_value(json_object_get(obj, "kind")));
        o->name = xstrdup_null(
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")));
        o->state = state;
        return o;
}

static const char *label_of(const json_t *obj, const char *key)
{
        json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
        return json_string_value(json_object_get(labels, key));
}

static int fail(kube_client *kc, int k, char **ret_error)
{
        if (ret_error)
                *ret_error = xstrdup(kube_client_last_error(kc));
        return k;
}

/* One shared object: adapt, GET, dry-run apply, compare. Fatal errors only are returned. */
static int check_object(kube_client *kc, drift_cluster *dc, json_t *obj, char **ret_error)
{
        _cleanup_free_ char *why = NULL;
        int k = kube_adapt_object(kc, obj, &why);
        if (k == -ENOENT) {
                drift_object *o = object_add(dc, obj, DRIFT_UNSUPPORTED);
                o->message = TAKE_PTR(why);
                return 0;
        }
        if (k < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(why);
                return k;
        }

        const char *ns =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
        const char *name =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        kube_gvr gvr;
        k = kube_gvr_for_kind(json_string_value(json_object_get(obj, "apiVersion")),
                              json_string_value(json_object_get(obj, "kind")), &gvr);
        if (k < 0) {
                if (ret_error)
                        *ret_error = xasprintf("unknown kind in rendered object \"%s\"", name);
                return k;
        }

        json_t *live = NULL;
        k = kube_get(kc, &gvr, ns, name, &live);
        if (k == -ENOENT) {
                /* A dry-run create still tells whether the server would take the object. */
                k = kube_apply(kc, obj, NULL, false, true, NULL);
                if (k == -EACCES || k == -EIO)
                        return fail(kc, k, ret_error);
                drift_object *o = object_add(dc, obj, DRIFT_MISSING);
                if (k < 0)
                        o->message = xstrdup(kube_client_last_error(kc));
                return 0;
        }
        if (k < 0)
                return fail(kc, k, ret_error);

        const char *owner = label_of(live, LABEL_APP_MANAGED_BY);
        if (!streq_ptr(owner, LABEL_MANAGED_BY_VALUE)) {
                object_add(dc, obj, DRIFT_UNMANAGED);
                json_decref(live);
                return 0;
        }

        json_t *result = NULL;
        k = kube_apply(kc, obj, NULL, false, true, &result);
        if (k == -EBUSY || k == -EINVAL) {
                drift_object *o = object_add(dc, obj, DRIFT_CONFLICT);
                o->message = xstrdup(kube_client_last_error(kc));
                drift_diff_subset(obj, live, &o->paths, &o->n_paths);
                json_decref(live);
                return 0;
        }
        if (k < 0) {
                json_decref(live);
                return fail(kc, k, ret_error);
        }
        char **paths = NULL;
        size_t n = 0;
        drift_diff(live, result, &paths, &n);
        drift_object *o = object_add(dc, obj, n > 0 ? DRIFT_CHANGED : DRIFT_IN_SYNC);
        o->paths = paths;
        o->n_paths = n;
        json_decref(result);
        json_decref(live);
        return 0;
}

static bool rendered_has(const json_t *objs, const char *kind, const char *name)
{
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                if (streq_ptr(json_string_value(json_object_get(o, "kind")), kind) &&
                    streq_ptr(
                        json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                        name))
                        return true;
        }
        return false;
}

/* Objects of one kind labelled for the cluster and managed by gitcd but not rendered. */
static int check_prune(kube_client *kc, drift_cluster *dc, const kube_gvr *gvr, const char *kind,
                       const char *ns, const char *selector, const json_t *rendered,
                       char **ret_error)
{
        json_t *items = NULL;
        int k = kube_list(kc, gvr, ns, selector, &items, NULL);
        if (k < 0)
                return fail(kc, k, ret_error);
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it)
        {
                const char *name =
                    json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
                if (!name || rendered_has(rendered, kind, name))
                        continue;
                drift_object *o = object_add(dc, it, DRIFT_PRUNE);
                /* List items carry no apiVersion/kind: take them from the query. */
                free(o->kind);
                o->kind = xstrdup(kind);
                free(o->api_version);
                o->api_version = isempty(gvr->group) ? xstrdup(gvr->version)
                                                     : xasprintf("%s/%s", gvr->group, gvr->version);
        }
        json_decref(items);
        return 0;
}

/* "quay.io/coreos/etcd:v3.5.16" -> does its tag name version? */
static bool image_matches(const char *image, const char *version)
{
        const char *colon = image ? strrchr(image, ':') : NULL;
        if (!colon || strchr(colon, '/'))
                return false;
        semver a, b;
        if (semver_parse(colon + 1, &a) < 0 || semver_parse(version, &b) < 0)
                return false;
        return semver_cmp(&a, &b) == 0;
}

static const char *etcd_image(const json_t *pod)
{
        json_t *containers = json_object_get(json_object_get(pod, "spec"), "containers");
        size_t i;
        json_t *ct;
        json_array_foreach(containers, i, ct)
        {
                if (streq_ptr(json_string_value(json_object_get(ct, "name")), "etcd"))
                        return json_string_value(json_object_get(ct, "image"));
        }
        return json_string_value(json_object_get(json_array_get(containers, 0), "image"));
}

static void add_domain_risk(drift_cluster *dc, char *text)
{
        dc->domain_risks =
            xrealloc(dc->domain_risks, (dc->n_domain_risks + 1) * sizeof(*dc->domain_risks));
        dc->domain_risks[dc->n_domain_risks++] = text;
}

/*
 * The live member Pods' failure domains: each scheduled Pod's node (the
 * node itself and its topology.kubernetes.io/zone label, read from the
 * Node object) judged as the hosts target's machines are (api/domains.h):
 * a domain value whose loss loses quorum is named. A Node that cannot be
 * read is said, and nothing is judged.
 */
static void check_domains(kube_client *kc, drift_cluster *dc, json_t *pods)
{
        static const char *const zone_key = "topology.kubernetes.io/zone";
        const kube_gvr nodes = {"", "v1", "nodes", false};
        size_t n = json_array_size(pods);
        if (n < 3)
                return;
        hosts_spec hs = {.items = xcalloc(n, sizeof(host_spec)), .n = n};
        char **names = xcalloc(n, sizeof(char *));
        size_t *placement = xcalloc(n, sizeof(size_t));
        bool judged = true;
        for (size_t i = 0; i < n; i++) {
                json_t *pod = json_array_get(pods, i);
                placement[i] = i;
                names[i] = xstrdup_null(
                    json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")));
                const char *node =
                    json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
                if (!names[i] || isempty(node))
                        continue; /* not scheduled: on no node, it shares none */
                kv_set(&hs.items[i].domains, "kubernetes.io/hostname", node);
                json_t *obj = NULL;
                if (kube_get(kc, &nodes, NULL, node, &obj) < 0) {
                        add_domain_risk(dc, xasprintf("failure domains not judged: cannot read "
                                                      "Node %s: %s",
                                                      node, kube_client_last_error(kc)));
                        judged = false;
                        break;
                }
                const char *zone = json_string_value(json_object_get(
                    json_object_get(json_object_get(obj, "metadata"), "labels"), zone_key));
                if (!isempty(zone))
                        kv_set(&hs.items[i].domains, zone_key, zone);
                json_decref(obj);
        }
        domain_risk *risks = NULL;
        size_t n_risks = judged ? domains_risks(&hs, placement, n, &risks) : 0;
        for (size_t i = 0; i < n_risks; i++)
                add_domain_risk(dc, domain_risk_summary(&risks[i], names));
        domain_risks_free(risks, n_risks);
        for (size_t i = 0; i < n; i++) {
                free(names[i]);
                kv_list_release(&hs.items[i].domains);
        }
        free(names);
        free(placement);
        free(hs.items);
}

static int check_members(kube_client *kc, drift_cluster *dc, const etcd_cluster *c, const char *ns,
                         const char *selector, char **ret_error)
{
        const kube_gvr pods = {"", "v1", "pods", true};
        const kube_gvr pvcs = {"", "v1", "persistentvolumeclaims", true};
        json_t *items = NULL;
        int k = kube_list(kc, &pods, ns, selector, &items, NULL);
        if (k < 0)
                return fail(kc, k, ret_error);
        dc->pods = (int)json_array_size(items);
        size_t i;
        json_t *pod;
        size_t alloc = 0;
        json_array_foreach(items, i, pod)
        {
                const char *image = etcd_image(pod);
                if (image_matches(image, c->version))
                        continue;
                dc->stale = xgrow(dc->stale, &alloc, dc->n_stale + 1, sizeof(*dc->stale));
                dc->stale[dc->n_stale++] = xasprintf(
                    "%s: %s",
                    json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")),
                    image ? image : "(no image)");
        }
        check_domains(kc, dc, items);
        json_decref(items);

        k = kube_list(kc, &pvcs, ns, selector, &items, NULL);
        if (k < 0)
                return fail(kc, k, ret_error);
        dc->pvcs = (int)json_array_size(items);
        json_decref(items);
        return 0;
}

/* Is obj the Pod of a dormant member (stopped on purpose: it has none)? */
static bool dormant_pod(const json_t *obj, const state_member_list *recs)
{
        if (!streq_ptr(json_string_value(json_object_get(obj, "kind")), "Pod"))
                return false;
        const char *name =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        for (size_t i = 0; i < recs->n; i++)
                if (recs->items[i]->dormant && streq_ptr(recs->items[i]->name, name))
                        return true;
        return false;
}

/*
 * Exactly the set the Kubernetes target applies: with the target and the
 * member records, the plan of every recorded member (the one builder, as
 * the reconciler passes it), minus the Pods of dormant members.
 */
static int applied_set(const etcd_cluster *c, const drift_opts *o, const membership_plan *steady,
                       json_t **ret, char **ret_error)
{
        if (!o->target || !o->db)
                return o->plan->kube_objects(NULL, c, steady, NULL, ret);
        _cleanup_free_ char *id = etcd_cluster_id(c);
        _cleanup_(state_member_list_release) state_member_list recs = {0};
        int k = state_member_list_for(o->db, id, false, &recs);
        if (k < 0) {
                *ret_error = xstrdup(state_last_error());
                return k;
        }
        _cleanup_(membership_plan_freep) membership_plan *members = NULL;
        if (recs.n > 0)
                k = membership_plan_for_records(o->target, c, recs.items, recs.n, &members);
        json_t *objs = NULL;
        if (k >= 0)
                k = o->plan->kube_objects(o->target, c, steady, members, &objs);
        if (k < 0) {
                *ret_error = xstrdup(target_last_error(o->target));
                return k;
        }
        for (size_t i = json_array_size(objs); i > 0; i--)
                if (dormant_pod(json_array_get(objs, i - 1), &recs))
                        json_array_remove(objs, i - 1);
        *ret = objs;
        return 0;
}

static int check_cluster(kube_client *kc, const etcd_cluster *c, const drift_opts *opts,
                         drift_cluster *dc, char **ret_error)
{
        _cleanup_(membership_plan_freep) membership_plan *mp = membership_plan_steady(
            c, opts->cluster_domain ? opts->cluster_domain : "cluster.local");
        _cleanup_(json_decrefp) json_t *shared = NULL;
        int k = applied_set(c, opts, mp, &shared, ret_error);
        if (k < 0)
                return k;
        _cleanup_(json_decrefp) json_t *all = render_cluster(c, mp);
        const char *ns = isempty(c->namespace_) ? "default" : c->namespace_;
        _cleanup_free_ char *selector = xasprintf(LABEL_CLUSTER "=%s," LABEL_APP_MANAGED_BY "=%s",
                                                  c->name, LABEL_MANAGED_BY_VALUE);

        dc->name = etcd_cluster_id(c);
        dc->replicas = c->replicas;
        dc->version = xstrdup_null(c->version);
        size_t i;
        json_t *o;
        json_array_foreach(all, i, o)
        {
                const char *kind = json_string_value(json_object_get(o, "kind"));
                if (streq_ptr(kind, "Pod"))
                        dc->want_pods++;
                else if (streq_ptr(kind, "PersistentVolumeClaim"))
                        dc->want_pvcs++;
        }

        json_array_foreach(shared, i, o)
        {
                k = check_object(kc, dc, o, ret_error);
                if (k < 0)
                        return k;
        }

        /* What is labelled for the cluster but no longer rendered. */
        const kube_gvr services = {"", "v1", "services", true};
        k = check_prune(kc, dc, &services, "Service", ns, selector, shared, ret_error);
        if (k < 0)
                return k;
        static const struct {
                const char *group, *resource, *kind;
        } groups[] = {
            {"policy", "poddisruptionbudgets", "PodDisruptionBudget"},
            {"cert-manager.io", "certificates", "Certificate"},
        };
        for (size_t g = 0; g < ARRAY_SIZE(groups); g++) {
                _cleanup_free_ char *version = NULL;
                k = kube_preferred_version(kc, groups[g].group, groups[g].resource, &version);
                if (k == -ENOENT)
                        continue; /* not served: nothing of that kind can exist */
                if (k < 0)
                        return fail(kc, k, ret_error);
                const kube_gvr gvr = {groups[g].group, version, groups[g].resource, true};
                k = check_prune(kc, dc, &gvr, groups[g].kind, ns, selector, shared, ret_error);
                if (k < 0)
                        return k;
        }

        return check_members(kc, dc, c, ns, selector, ret_error);
}

int drift_compute(kube_client *kc, etcd_cluster *const *clusters, size_t n, const drift_opts *o,
                  drift_report **ret, char **ret_error)
{
        assert(o && o->plan && o->plan->kube_objects);
        _cleanup_(drift_report_freep) drift_report *r = XNEW(drift_report);
        r->items = xcalloc(n ? n : 1, sizeof(*r->items));
        for (size_t i = 0; i < n; i++) {
                drift_cluster *dc = &r->items[r->n++];
                int k = check_cluster(kc, clusters[i], o, dc, ret_error);
                if (k < 0)
                        return k;
                for (size_t j = 0; j < dc->n_objects; j++) {
                        switch (dc->objects[j].state) {
                        case DRIFT_MISSING:
                                r->n_missing++;
                                break;
                        case DRIFT_CHANGED:
                        case DRIFT_CONFLICT:
                                r->n_changed++;
                                break;
                        case DRIFT_UNMANAGED:
                                r->n_unmanaged++;
                                break;
                        case DRIFT_PRUNE:
                                r->n_prune++;
                                break;
                        case DRIFT_UNSUPPORTED:
                                r->n_unsupported++;
                                break;
                        case DRIFT_IN_SYNC:
                                break;
                        }
                }
                if (members_differ(dc))
                        r->n_members++;
        }
        *ret = TAKE_PTR(r);
        return 0;
}

/* ---- printing ------------------------------------------------------------- */

static void join_paths(const drift_object *o, strbuf *sb)
{
        for (size_t i = 0; i < o->n_paths; i++)
                sb_printf(sb, "%s%s", i ? ", " : "", o->paths[i]);
}

static bool cluster_clean(const drift_cluster *dc)
{
        for (size_t i = 0; i < dc->n_objects; i++)
                if (dc->objects[i].state != DRIFT_IN_SYNC)
                        return false;
        return !members_differ(dc);
}

void drift_print_text(const drift_report *r, const char *server, bool color, FILE *out)
{
        const char *red = color ? "\033[31m" : "", *yellow = color ? "\033[33m" : "",
                   *green = color ? "\033[32m" : "", *reset = color ? "\033[0m" : "";

        fprintf(out, "\nKubernetes drift (%s):\n", server ? server : "?");
        for (size_t i = 0; i < r->n; i++) {
                const drift_cluster *dc = &r->items[i];
                if (cluster_clean(dc)) {
                        fprintf(out, "%s= %s: no drift%s\n", green, dc->name, reset);
                        for (size_t j = 0; j < dc->n_domain_risks; j++)
                                fprintf(out, "    warning: %s\n", dc->domain_risks[j]);
                        continue;
                }
                fprintf(out, "%s~ %s%s\n", yellow, dc->name, reset);
                for (size_t j = 0; j < dc->n_objects; j++) {
                        const drift_object *o = &dc->objects[j];
                        _cleanup_(sb_release) strbuf sb = STRBUF_INIT;
                        switch (o->state) {
                        case DRIFT_IN_SYNC:
                                continue;
                        case DRIFT_MISSING:
                                sb_append(&sb, "missing (would be created)");
                                break;
                        case DRIFT_CHANGED:
                                sb_append(&sb, "drift: ");
                                join_paths(o, &sb);
                                break;
                        case DRIFT_CONFLICT:
                                sb_append(&sb, "drift: ");
                                join_paths(o, &sb);
                                sb_append(&sb, " (the server refuses gitcd's apply)");
                                break;
                        case DRIFT_UNMANAGED:
                                sb_printf(&sb,
                                          "%snot managed by gitcd%s (no %s=gitcd label: "
                                          "gitcd will refuse to change it)",
                                          red, reset, LABEL_APP_MANAGED_BY);
                                break;
                        case DRIFT_PRUNE:
                                sb_append(&sb, "would prune (labelled for the cluster, "
                                               "no longer rendered)");
                                break;
                        case DRIFT_UNSUPPORTED:
                                sb_printf(&sb, "%scannot be applied%s", red, reset);
                                break;
                        }
                        fprintf(out, "    %s %s: %s\n", o->kind, o->name, sb_str(&sb));
                        if (o->message)
                                fprintf(out, "      %s\n", o->message);
                }
                if (dc->pods != dc->want_pods || dc->pvcs != dc->want_pvcs)
                        fprintf(out,
                                "    members: %d Pods, %d PVCs live; spec.replicas %d wants "
                                "%d Pods, %d PVCs\n",
                                dc->pods, dc->pvcs, dc->replicas, dc->want_pods, dc->want_pvcs);
                for (size_t j = 0; j < dc->n_stale; j++)
                        fprintf(out, "    Pod %s, not spec.version %s\n", dc->stale[j],
                                dc->version ? dc->version : "?");
                for (size_t j = 0; j < dc->n_domain_risks; j++)
                        fprintf(out, "    warning: %s\n", dc->domain_risks[j]);
        }
        fprintf(out,
                "Drift: %d to create, %d to change, %d to prune, %d not managed by gitcd, "
                "%d with other members.\n",
                r->n_missing, r->n_changed, r->n_prune, r->n_unmanaged, r->n_members);
}

static json_t *strv_json(char **v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

json_t *drift_to_json(const drift_report *r, const char *server, const char *context)
{
        json_t *clusters = json_array();
        for (size_t i = 0; i < r->n; i++) {
                const drift_cluster *dc = &r->items[i];
                json_t *objs = json_array();
                for (size_t j = 0; j < dc->n_objects; j++) {
                        const drift_object *o = &dc->objects[j];
                        json_array_append_new(objs, json_pack("{s:s?, s:s?, s:s?, s:s, s:o, s:s?}",
                                                              "apiVersion", o->api_version, "kind",
                                                              o->kind, "name", o->name, "state",
                                                              drift_state_name(o->state), "paths",
                                                              strv_json(o->paths, o->n_paths),
                                                              "message", o->message));
                }
                json_t *members = json_pack(
                    "{s:i, s:s?, s:i, s:i, s:i, s:i, s:o}", "replicas", dc->replicas, "version",
                    dc->version, "pods", dc->pods, "pvcs", dc->pvcs, "wantPods", dc->want_pods,
                    "wantPvcs", dc->want_pvcs, "otherVersion", strv_json(dc->stale, dc->n_stale));
                json_object_set_new(members, "domainRisks",
                                    strv_json(dc->domain_risks, dc->n_domain_risks));
                json_array_append_new(clusters, json_pack("{s:s, s:b, s:o, s:o}", "name", dc->name,
                                                          "drift", !cluster_clean(dc), "objects",
                                                          objs, "members", members));
        }
        json_t *summary = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "create", r->n_missing,
                                    "change", r->n_changed, "prune", r->n_prune, "notManaged",
                                    r->n_unmanaged, "unsupported", r->n_unsupported, "members",
                                    r->n_members, "drift", drift_has_changes(r));
        return json_pack("{s:s?, s:s?, s:o, s:o}", "server", server, "context", context, "clusters",
                         clusters, "summary", summary);
}
