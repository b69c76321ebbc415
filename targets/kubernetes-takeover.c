/*
 * The Kubernetes target's half of a takeover (spec.adopt,
 * reconciler/takeover.h): finding the cluster another operator runs, by
 * that operator's own names and labels, and pointing its client Service at
 * gitcd's members. Reads only, but for that one Service.
 *
 * Decisions a reader needs:
 * - Per operator, a row of facts (the custom resource, its Pods' labels,
 *   its Services, how gitcd knows its operator stopped acting).
 *   coreos (etcd-operator, etcd.database.coreos.com/v1beta2): bare Pods
 *   labelled app=etcd, etcd_cluster=NAME, owned by the EtcdCluster,
 *   behind the Services NAME (headless) and NAME-client; spec.paused: true
 *   stops its operator (nothing else does: it would replace a member it
 *   sees gone); its Pods have restartPolicy Never: a member gitcd removed
 *   ends, its Pod Failed, which is no refusal (the survey runs on every
 *   pass of the move).
 *   etcd-io (operator.etcd.io/v1alpha1): a StatefulSet NAME, Pods NAME-i
 *   labelled app=NAME, controller=NAME, the headless Service NAME and no
 *   client Service; no pause field. Its operator no longer acts when the
 *   EtcdCluster is gone (deleted with --cascade=orphan: the StatefulSet
 *   keeps running, owned by nothing that acts) or when every Deployment
 *   labelled as its operator is scaled to 0 with no replica left; with
 *   the resource there and no such Deployment found, gitcd cannot tell
 *   and refuses. Its Pods restart (restartPolicy Always): a removed
 *   member's etcd restarts or its Pod is recreated on its claim, and etcd
 *   refuses the removed member's ID, so it crash-loops and never comes
 *   back; the old members are the recorded IDs, never the Pods.
 *   improbable (etcd.improbable.io/v1alpha1): a ReplicaSet NAME-i per
 *   EtcdPeer, Pods NAME-i-<random> labelled app.kubernetes.io/name=etcd,
 *   etcd.improbable.io/cluster-name=NAME, the headless Service NAME only;
 *   no pause field, judged as etcd-io's, but its operator's labels
 *   (control-plane=controller-manager) are every kubebuilder operator's:
 *   only its Deployment eco-controller-manager counts.
 *   cozystack, the legacy aenix-io/etcd-operator (etcd.aenix.io/v1alpha1):
 *   a StatefulSet NAME, Pods NAME-i labelled app.kubernetes.io/name=etcd,
 *   app.kubernetes.io/instance=NAME, app.kubernetes.io/managed-by=
 *   etcd-operator, the client Service NAME (ClusterIP) and the headless
 *   Service NAME-headless; no pause field, judged as etcd-io's (its
 *   Deployment etcd-operator-controller-manager, labelled
 *   control-plane=controller-manager and part of etcd-operator, scaled to
 *   0, or the resource gone). Its members speak https to their peers with
 *   the certificates etcd makes for itself (--peer-auto-tls: no CA, a peer
 *   client skips verifying a self-signed certificate, no peer client
 *   certificate asked for); a member with CA-issued peer certificates
 *   could neither trust them nor be trusted, so gitcd's members must run
 *   with spec.tls.peer.selfSigned (required at intake, api/validate.c's
 *   check_adopt), and every old Pod must run etcd with
 *   --peer-auto-tls (the operator's CA-issued peer TLS,
 *   spec.security.tls, is not taken over). The newer Cozystack operator
 *   (etcd-operator.cozystack.io/v1alpha2) is refused by name.
 * - The old operator must have stopped: gitcd reads, never changes, what
 *   says so, and refuses (every pass) while it acts, naming the kubectl
 *   command that stops it.
 * - gitcd's own objects must not meet the old ones: none of gitcd's names
 *   (the Services NAME and NAME-headless, the Pods NAME-<n> and their
 *   claims) may be held by an object gitcd does not manage, and gitcd's
 *   Pod labels must not satisfy the old selector (the old operator would
 *   count gitcd's Pods as its own, the old Services would route to
 *   learners). Both are refusals: the user renames gitcd's cluster.
 * - The members are reached at their Pods' IPs (the client port 2379):
 *   a Service needs a proxy, and gitcd asks each member anyway (with
 *   client TLS by name, below).
 * - TLS (coreos' spec.TLS.static only, kubernetes-takeover-tls.c): the
 *   old CA is kept, checked to be one CA and the one gitcd was given (or
 *   its Secrets carry), and with client TLS the members are reached by the
 *   names their certificates carry (Pod hostname.subdomain.NS.svc) instead
 *   of their IPs, which coreos' certificates do not name.
 * - The old client Service keeps working: once gitcd has a voter, its
 *   selector becomes gitcd's voters (merge patch), the selector before
 *   kept on it as an annotation and in the takeover record. It is the one
 *   object of another operator gitcd changes; it never deletes any.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "targets/kubernetes-internal.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define ANNOTATION_SELECTOR_BEFORE "gitcd.io/selector-before"
#define ETCD_CLIENT_PORT_OLD       2379

static const kube_gvr GVR_SERVICES = {"", "v1", "services", true};

/* What gitcd knows of one operator's objects ("{}" in a name stands for the old cluster's name). */
typedef struct old_layout {
        adopt_from from;
        kube_gvr resource; /* its custom resource */
        const char *kind;
        const char *pod_selector;     /* its Pods' labels */
        const char *client_service;   /* its client Service; NULL: none */
        const char *headless_service; /* its headless Service; NULL: none */
        const char *paused_field;     /* the spec field that stops its operator; NULL: none */
        /* no pause field: the operator's Deployment, found by these labels in any namespace */
        const char *operator_labels;
        const char *operator_name; /* its usual name and namespace, for the message */
        const char *operator_ns;
        bool operator_by_name;     /* its labels are too common: only the Deployment of that name */
        const char *workload_kind; /* the controller of its Pods, left for the user; NULL: none */
        const char *workload;
        /* its members speak peer https with etcd's own certificates (--peer-auto-tls) */
        bool peer_self_signed;
        /* another operator's resource of the same kind that this row must not take: NULL none */
        const kube_gvr *not_this;
        const char *not_this_why;
} old_layout;

static const kube_gvr GVR_COZYSTACK_V1ALPHA2 = {"etcd-operator.cozystack.io", "v1alpha2",
                                                "etcdclusters", true};

static const old_layout layouts[] = {
    {ADOPT_FROM_COREOS,
     {"etcd.database.coreos.com", "v1beta2", "etcdclusters", true},
     "EtcdCluster",
     "app=etcd,etcd_cluster={}",
     "{}-client",
     "{}",
     "paused",
     NULL,
     NULL,
     NULL,
     false,
     NULL,
     NULL},
    /* no client Service, a headless Service without ports; StatefulSet {} */
    {ADOPT_FROM_ETCDIO,
     {"operator.etcd.io", "v1alpha1", "etcdclusters", true},
     "EtcdCluster",
     "app={},controller={}",
     NULL,
     "{}",
     NULL,
     "control-plane=controller-manager,app.kubernetes.io/name=etcd-operator",
     "etcd-operator-controller-manager",
     "etcd-operator-system",
     false,
     "StatefulSet",
     "{}"},
    /* a ReplicaSet {}-i per EtcdPeer, Pods {}-i-<random>; the headless Service {}, no other */
    {ADOPT_FROM_IMPROBABLE,
     {"etcd.improbable.io", "v1alpha1", "etcdclusters", true},
     "EtcdCluster",
     "app.kubernetes.io/name=etcd,etcd.improbable.io/cluster-name={}",
     NULL,
     "{}",
     NULL,
     "control-plane=controller-manager",
     "eco-controller-manager",
     "eco-system",
     true,
     "ReplicaSet",
     NULL},
    /* the legacy aenix-io/etcd-operator v0.4.2: StatefulSet {}, Services {} and {}-headless */
    {ADOPT_FROM_COZYSTACK,
     {"etcd.aenix.io", "v1alpha1", "etcdclusters", true},
     "EtcdCluster",
     "app.kubernetes.io/name=etcd,app.kubernetes.io/instance={},"
     "app.kubernetes.io/managed-by=etcd-operator",
     "{}",
     "{}-headless",
     NULL,
     "control-plane=controller-manager,app.kubernetes.io/part-of=etcd-operator",
     "etcd-operator-controller-manager",
     "etcd-operator-system",
     true,
     "StatefulSet",
     "{}",
     true,
     &GVR_COZYSTACK_V1ALPHA2,
     "a cluster of the newer Cozystack operator (etcd-operator.cozystack.io/v1alpha2, one "
     "EtcdMember and a Pod of a random name per member), which gitcd does not take over: "
     "spec.adopt.from: cozystack takes over the legacy aenix-io operator's clusters "
     "(etcd.aenix.io/v1alpha1)"},
};

/* fmt with every "{}" replaced by name. */
static char *layout_name(const char *fmt, const char *name)
{
        strbuf sb = STRBUF_INIT;
        for (const char *p = fmt; *p;) {
                const char *m = strstr(p, "{}");
                if (!m) {
                        sb_printf(&sb, "%s", p);
                        break;
                }
                sb_printf(&sb, "%.*s%s", (int)(m - p), p, name);
                p = m + 2;
        }
        return sb_detach(&sb);
}

static const old_layout *layout_of(adopt_from f)
{
        for (size_t i = 0; i < ARRAY_SIZE(layouts); i++)
                if (layouts[i].from == f)
                        return &layouts[i];
        return NULL;
}

static void add_object(takeover_survey *s, const char *kind, const char *ns, const char *name)
{
        s->objects = xrealloc(s->objects, (s->n_objects + 2) * sizeof(char *));
        s->objects[s->n_objects++] = xasprintf("%s %s/%s", kind, ns, name);
        s->objects[s->n_objects] = NULL;
}

/* Does name have the form "<cluster>-<digits>" (a name gitcd gives its members)? */
static bool gitcd_member_name(const char *cluster, const char *name)
{
        size_t n = strlen(cluster);
        if (strncmp(name, cluster, n) != 0 || name[n] != '-' || !name[n + 1])
                return false;
        return strspn(name + n + 1, "0123456789") == strlen(name + n + 1);
}

/* Would gitcd's member Pods carry every label of selector "k=v,k=v"? */
static bool labels_match(const etcd_cluster *c, const char *selector)
{
        _cleanup_free_ char *dup = xstrdup(selector);
        char *save = NULL;
        for (char *l = strtok_r(dup, ",", &save); l; l = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(l, '=');
                if (!eq)
                        return false;
                *eq = '\0';
                const char *v = kv_get(&c->pod_labels, l);
                if (!v)
                        v = kv_get(&c->additional_labels, l);
                if (!streq_ptr(v, eq + 1))
                        return false;
        }
        return true;
}

/* A Service of one of gitcd's names held by another owner: the refusal, else NULL. */
static char *service_collision(kubernetes_target *kt, const etcd_cluster *c, const char *name,
                               int *ret_k)
{
        json_t *svc = NULL;
        int k = kube_get(kt->kc, &GVR_SERVICES, ns_of(c), name, &svc);
        *ret_k = k == -ENOENT ? 0 : k;
        if (k < 0)
                return NULL;
        char *why = managed_by_gitcd(svc)
                        ? NULL
                        : xasprintf("gitcd's Service %s/%s is already there, not gitcd's (another "
                                    "operator's); name the gitcd cluster differently from the "
                                    "old one (spec.adopt.name keeps pointing at it)",
                                    ns_of(c), name);
        json_decref(svc);
        return why;
}

static const kube_gvr GVR_DEPLOYMENTS = {"apps", "v1", "deployments", true};
static const kube_gvr GVR_STATEFULSETS = {"apps", "v1", "statefulsets", true};
static const kube_gvr GVR_REPLICASETS = {"apps", "v1", "replicasets", true};

/*
 * An operator without a pause field no longer acts when its Deployment
 * (found by its labels in any namespace) is scaled to 0 with no replica
 * left: 0, or -EPERM with what to do in *ret_why.
 */
static int operator_stopped(kubernetes_target *kt, const etcd_cluster *c, const old_layout *L,
                            const char *ns, char **ret_why)
{
        const adopt_spec *a = &c->adopt;
        json_t *deps = NULL;
        int k = kube_list(kt->kc, &GVR_DEPLOYMENTS, NULL, L->operator_labels, &deps, NULL);
        if (k < 0)
                return kube_fail(kt, k);
        const char *running = NULL, *running_ns = NULL;
        size_t i;
        json_t *d;
        size_t n = 0;
        json_array_foreach(deps, i, d)
        {
                if (L->operator_by_name && !streq_ptr(obj_name(d), L->operator_name))
                        continue;
                n++;
                json_t *spec_replicas = json_object_get(json_object_get(d, "spec"), "replicas");
                json_t *st = json_object_get(d, "status");
                /* spec.replicas left out means 1 */
                bool scaled =
                    json_is_integer(spec_replicas) && json_integer_value(spec_replicas) == 0;
                bool left = json_integer_value(json_object_get(st, "replicas")) > 0 ||
                            json_integer_value(json_object_get(st, "readyReplicas")) > 0;
                if (!running && (!scaled || left)) {
                        running = obj_name(d);
                        running_ns = json_string_value(
                            json_object_get(json_object_get(d, "metadata"), "namespace"));
                }
        }
        if (!running && n > 0) {
                json_decref(deps);
                return 0;
        }
        _cleanup_free_ char *scale =
            xasprintf("kubectl -n %s scale deployment %s --replicas=0",
                      running ? running_ns : L->operator_ns, running ? running : L->operator_name);
        _cleanup_free_ char *orphan =
            xasprintf("kubectl -n %s delete %s.%s %s --cascade=orphan", ns, L->resource.resource,
                      L->resource.group, a->name);
        if (running)
                *ret_why = xasprintf("the %s operator still runs (Deployment %s/%s is not scaled "
                                     "to 0): stop it first (%s), or delete %s %s/%s and leave its "
                                     "objects running (%s); gitcd changes neither",
                                     adopt_from_name(a->from), running_ns, running, scale, L->kind,
                                     ns, a->name, orphan);
        else
                *ret_why = xasprintf("gitcd cannot tell that the %s operator no longer acts on %s "
                                     "%s/%s: no Deployment %s%slabelled %s is there; scale the "
                                     "operator's Deployment to 0 (%s), or delete %s %s/%s and "
                                     "leave its objects running (%s)",
                                     adopt_from_name(a->from), L->kind, ns, a->name,
                                     L->operator_by_name ? L->operator_name : "",
                                     L->operator_by_name ? " " : "", L->operator_labels, scale,
                                     L->kind, ns, a->name, orphan);
        json_decref(deps);
        return -EPERM;
}

/*
 * 1. the old operator's resource, and that its operator acts no more:
 * paused (coreos), or, for operators without a pause field, the resource
 * gone (deleted with --cascade=orphan: its StatefulSet or ReplicaSets have
 * no owner to act for) or the operator's Deployment scaled to 0.
 * *ret_cr is the resource when it is there (the caller's to release).
 */
static int survey_resource(kubernetes_target *kt, const etcd_cluster *c, const old_layout *L,
                           const char *ns, json_t **ret_cr, char **ret_why)
{
        const adopt_spec *a = &c->adopt;
        json_t *cr = NULL;
        *ret_cr = NULL;
        int k;
        if (L->not_this) {
                /* a 404 (its kind not installed, or no such resource) is what is hoped for */
                k = kube_get(kt->kc, L->not_this, ns, a->name, &cr);
                json_decref(cr);
                cr = NULL;
                if (k >= 0) {
                        *ret_why = xasprintf("%s/%s is %s", ns, a->name, L->not_this_why);
                        return -EPERM;
                }
                if (k != -ENOENT)
                        return kube_fail(kt, k);
        }
        k = kube_get(kt->kc, &L->resource, ns, a->name, &cr);
        if (k == -ENOENT && !L->paused_field)
                return 0;
        if (k == -ENOENT) {
                *ret_why = xasprintf("there is no %s %s/%s (%s/%s) to take over", L->kind, ns,
                                     a->name, L->resource.group, L->resource.version);
                return -EPERM;
        }
        if (k < 0)
                return kube_fail(kt, k);
        *ret_cr = cr;
        if (!L->paused_field)
                return operator_stopped(kt, c, L, ns, ret_why);
        json_t *paused = json_object_get(json_object_get(cr, "spec"), L->paused_field);
        if (json_is_true(paused))
                return 0;
        *ret_why = xasprintf("the %s operator still acts on %s %s/%s: set spec.%s: true "
                             "on it first (kubectl -n %s patch %s.%s %s --type merge -p "
                             "'{\"spec\":{\"%s\":true}}'); gitcd does not change it",
                             adopt_from_name(a->from), L->kind, ns, a->name, L->paused_field, ns,
                             L->resource.resource, L->resource.group, a->name, L->paused_field);
        return -EPERM;
}

/* Does one of the Pod's containers run etcd with --peer-auto-tls (its command or args)? */
static bool pod_peer_auto_tls(const json_t *pod)
{
        json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers");
        size_t i, j;
        json_t *ctr, *arg;
        json_array_foreach(cs, i, ctr)
        {
                const char *keys[] = {"command", "args"};
                for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
                        json_array_foreach(json_object_get(ctr, keys[k]), j, arg)
                        {
                                const char *s = json_string_value(arg);
                                if (streq_ptr(s, "--peer-auto-tls") ||
                                    streq_ptr(s, "--peer-auto-tls=true"))
                                        return true;
                        }
        }
        return false;
}

/* 2. its Pods: the members, reached at their IPs (into *eps); a refusal into *why */
static int survey_pods(kubernetes_target *kt, const etcd_cluster *c, const old_layout *L,
                       const char *ns, takeover_survey *s, strbuf *eps, char **why)
{
        const adopt_spec *a = &c->adopt;
        _cleanup_free_ char *selector = layout_name(L->pod_selector, a->name);
        json_t *pods = NULL;
        int k = kube_list(kt->kc, &GVR_PODS, ns, selector, &pods, NULL);
        if (k < 0)
                return kube_fail(kt, k);
        size_t i;
        json_t *pod;
        const char *scheme = c->tls.client.enabled ? "https" : "http";
        json_array_foreach(pods, i, pod)
        {
                const char *name = obj_name(pod);
                add_object(s, "Pod", ns, name);
                json_t *st = json_object_get(pod, "status");
                const char *ip = json_string_value(json_object_get(st, "podIP"));
                const char *phase = json_string_value(json_object_get(st, "phase"));
                if (!*why && gitcd_member_name(c->name, name))
                        *why = xasprintf("the old Pod %s/%s has a name gitcd gives its own "
                                         "members; name the gitcd cluster differently",
                                         ns, name);
                if (!*why && L->peer_self_signed && !pod_peer_auto_tls(pod))
                        *why = xasprintf("the old Pod %s/%s does not run etcd with "
                                         "--peer-auto-tls: its members use CA-issued peer "
                                         "certificates (the operator's spec.security.tls), "
                                         "which gitcd does not take over yet",
                                         ns, name);
                /*
                 * A Pod that does not run is no endpoint, and no refusal here: before the
                 * takeover is recorded every member must answer etcd (takeover_judge), and
                 * after it a removed member's Pod ends (coreos: restartPolicy Never).
                 */
                if (isempty(ip) || obj_terminating(pod) || streq_ptr(phase, "Failed") ||
                    streq_ptr(phase, "Succeeded"))
                        continue;
                /*
                 * With client TLS, by the name its certificate carries (coreos:
                 * *.NAME.NS.svc, the Pod's hostname and subdomain), not its IP.
                 */
                json_t *ps = json_object_get(pod, "spec");
                const char *host = json_string_value(json_object_get(ps, "hostname"));
                const char *sub = json_string_value(json_object_get(ps, "subdomain"));
                if (c->tls.client.enabled && !isempty(host) && !isempty(sub))
                        sb_printf(eps, "%shttps://%s.%s.%s.svc:%d", eps->len ? "," : "", host, sub,
                                  ns, ETCD_CLIENT_PORT_OLD);
                else
                        sb_printf(eps, "%s%s://%s:%d", eps->len ? "," : "", scheme, ip,
                                  ETCD_CLIENT_PORT_OLD);
        }
        size_t n_pods = json_array_size(pods);
        json_decref(pods);
        if (!*why && n_pods == 0)
                *why = xasprintf("no Pod of %s %s/%s runs (selector %s)", L->kind, ns, a->name,
                                 selector);
        if (!*why && labels_match(c, selector))
                *why = xasprintf("gitcd's Pods would carry the labels %s that select the old "
                                 "members (spec.podTemplate.metadata.labels or "
                                 "additionalMetadata.labels): the old operator and its Services "
                                 "would take them for its own; remove those labels",
                                 selector);
        return 0;
}

/* 3. its Services, kept; gitcd's own Service names must be free (a refusal into *why) */
static int survey_services(kubernetes_target *kt, const etcd_cluster *c, const old_layout *L,
                           const char *ns, takeover_survey *s, char **why)
{
        const char *fmts[] = {L->headless_service, L->client_service};
        int k = 0;
        for (size_t j = 0; j < ARRAY_SIZE(fmts); j++) {
                if (!fmts[j])
                        continue;
                _cleanup_free_ char *name = layout_name(fmts[j], c->adopt.name);
                json_t *svc = NULL;
                k = kube_get(kt->kc, &GVR_SERVICES, ns, name, &svc);
                if (k == -ENOENT)
                        continue;
                if (k < 0)
                        return kube_fail(kt, k);
                json_decref(svc);
                add_object(s, "Service", ns, name);
                if (fmts[j] == L->client_service)
                        s->service = xstrdup(name);
        }
        _cleanup_free_ char *client = render_client_service_name(c);
        _cleanup_free_ char *headless = render_headless_service_name(c);
        const char *mine[] = {client, headless};
        for (size_t j = 0; !*why && j < ARRAY_SIZE(mine); j++) {
                *why = service_collision(kt, c, mine[j], &k);
                if (k < 0)
                        return kube_fail(kt, k);
        }
        return 0;
}

/*
 * 4. the controllers of its Pods (kept running: they restart a Pod, never
 * re-add a member): the one of that name, or every one labelled as its Pods
 */
static int survey_workload(kubernetes_target *kt, const old_layout *L, const char *ns,
                           const char *old, takeover_survey *s)
{
        const kube_gvr *gvr =
            streq(L->workload_kind, "StatefulSet") ? &GVR_STATEFULSETS : &GVR_REPLICASETS;
        if (!L->workload) {
                _cleanup_free_ char *selector = layout_name(L->pod_selector, old);
                json_t *items = NULL;
                int k = kube_list(kt->kc, gvr, ns, selector, &items, NULL);
                if (k < 0)
                        return kube_fail(kt, k);
                size_t i;
                json_t *o;
                json_array_foreach(items, i, o) add_object(s, L->workload_kind, ns, obj_name(o));
                json_decref(items);
                return 0;
        }
        _cleanup_free_ char *name = layout_name(L->workload, old);
        json_t *o = NULL;
        int k = kube_get(kt->kc, gvr, ns, name, &o);
        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return kube_fail(kt, k);
        json_decref(o);
        add_object(s, L->workload_kind, ns, name);
        return 0;
}

static int kt_takeover_survey(target *t, const etcd_cluster *c, takeover_survey *ret,
                              char **ret_why)
{
        kubernetes_target *kt = KT(t);
        const adopt_spec *a = &c->adopt;
        const char *ns = a->namespace_ ? a->namespace_ : ns_of(c);
        const old_layout *L = layout_of(a->from);
        if (!L) {
                *ret_why =
                    xasprintf("taking over from %s is not supported yet", adopt_from_name(a->from));
                return -EPERM;
        }
        takeover_survey s = {0};
        s.source = xasprintf("%s %s/%s", adopt_from_name(a->from), ns, a->name);
        strbuf eps = STRBUF_INIT;
        char *why = NULL;
        json_t *cr = NULL;
        int k = survey_resource(kt, c, L, ns, &cr, &why);
        if (k >= 0) {
                if (cr)
                        add_object(&s, L->kind, ns, a->name);
                k = survey_pods(kt, c, L, ns, &s, &eps, &why);
        }
        if (k >= 0 && !why)
                k = survey_services(kt, c, L, ns, &s, &why);
        if (k >= 0 && !why && L->workload_kind)
                k = survey_workload(kt, L, ns, a->name, &s);
        if (k >= 0 && !why && a->from == ADOPT_FROM_COREOS) {
                /* its static TLS: the same surfaces, one CA, kept (imported for auto) */
                _cleanup_free_ char *selector = layout_name(L->pod_selector, a->name);
                k = kt_takeover_tls(kt, c, cr, selector, &why);
        }
        json_decref(cr);
        if (k >= 0 && why)
                k = -EPERM;
        if (k < 0) {
                if (k == -EPERM)
                        *ret_why = TAKE_PTR(why);
                free(why);
                sb_release(&eps);
                takeover_survey_release(&s);
                return k;
        }
        s.endpoints = sb_detach(&eps);
        *ret = s;
        return 0;
}

static int kt_takeover_point_service(target *t, const etcd_cluster *c, const char *service,
                                     char **ret_before)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        json_t *svc = NULL;
        int k = kube_get(kt->kc, &GVR_SERVICES, ns, service, &svc);
        if (k < 0)
                return k == -ENOENT ? target_fail(t, k, "Service %s/%s is gone", ns, service)
                                    : kube_fail(kt, k);
        json_t *want = render_client_selector(c);
        json_t *before = json_object_get(json_object_get(svc, "spec"), "selector");
        if (json_equal(before, want)) {
                json_decref(want);
                json_decref(svc);
                return 0;
        }
        /* a merge patch: the old keys go (null), gitcd's come */
        json_t *sel = json_deep_copy(want);
        const char *key;
        json_t *v;
        json_object_foreach(before, key, v)
        {
                if (!json_object_get(want, key))
                        json_object_set_new(sel, key, json_null());
        }
        char *before_text =
            before ? json_dumps(before, JSON_COMPACT | JSON_SORT_KEYS) : xstrdup("{}");
        /* a selector gitcd set before (a crash after the patch) is not "before" */
        const char *kept = obj_annotation(svc, ANNOTATION_SELECTOR_BEFORE);
        if (kept)
                str_assign(&before_text, xstrdup(kept));
        json_t *patch = json_pack("{s:{s:{s:s}}, s:{s:o}}", "metadata", "annotations",
                                  ANNOTATION_SELECTOR_BEFORE, before_text, "spec", "selector", sel);
        _cleanup_free_ char *path = NULL;
        k = kube_resource_path(&GVR_SERVICES, ns, service, &path);
        if (k >= 0)
                k = kube_request(kt->kc, "PATCH", path, "application/merge-patch+json", patch,
                                 "patch", "services", ns, NULL);
        json_decref(patch);
        json_decref(want);
        json_decref(svc);
        if (k < 0) {
                free(before_text);
                return kube_fail(kt, k);
        }
        *ret_before = before_text;
        return 1;
}

const target_takeover_ops kt_takeover_ops = {
    .survey = kt_takeover_survey,
    .point_service = kt_takeover_point_service,
};
