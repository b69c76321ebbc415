/*
 * A live takeover on the Kubernetes target (spec.adopt, docs/migration.md):
 * a 3-member etcd 3.5.16 cluster laid out as the coreos etcd-operator lays
 * one out (its EtcdCluster resource, bare Pods labelled app=etcd,
 * etcd_cluster=old with hostname and subdomain, the Services old and
 * old-client), made by this test through the real kube-apiserver and run
 * by the node simulator (tests/harness/kubeapi.h: it plays kubelet; no
 * operator runs, as it would be paused). The real `gitcd` binary, as the
 * ServiceAccount deploy/rbac.yaml binds, under a writer:
 *   - refuses while the resource is not paused (nothing created, the
 *     reason audited);
 *   - once paused, takes the cluster over: killed -9 right after its first
 *     removal of an old member; refused and nothing changed while spec.adopt
 *     is taken out of the spec; started again, and it finishes: the same
 *     cluster ID, only gitcd's members, every acknowledged write there,
 *     the old client Service selecting gitcd's voters (its selector before
 *     kept), the old Pods and Services left in place;
 *   - then scales the cluster 3 → 5 → 3 as usual.
 * With an argument, the same for a layout of tests/harness/layouts.h kept
 * by a real StatefulSet ("etcdio") or ReplicaSet ("improbable")
 * controller: refused until the operator stops (etcd-io: its Deployment
 * scaled to 0, the test writing its status as no deployment controller
 * runs; improbable: its EtcdCluster deleted with --cascade=orphan), no
 * client Service to point, and a removed member's Pod deleted and
 * recreated by its controller never comes back into the cluster.
 * "cozystack": the legacy aenix-io operator's StatefulSet, whose members
 * speak peer https with etcd's own certificates (--peer-auto-tls): gitcd's
 * members join with spec.tls.peer.selfSigned, the operator is stopped by
 * its Deployment scaled to 0, and its client Service (NAME) is pointed at
 * gitcd's voters as coreos' is.
 * With "coreos-tls", the coreos layout of layouts.h with static TLS on both
 * surfaces from a CA of this test, taken over with tls.provider auto and
 * that CA handed to gitcd (spec.adopt.ca): a wrong CA refused with nothing
 * created; the writer speaks TLS to the members by the names their
 * certificates carry, with one CA file that never changes; after the move
 * gitcd's members serve leaves of that CA (verified with the CA file alone)
 * that also name the old client Service.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "pki/pki.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "tests/harness/layouts.h"
#include "tests/harness/writer.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NS      "default"
#define OLD     "old"
#define CLUSTER "kc"
#define VERSION "3.5.16"
#define KILLED  (128 + SIGKILL)

static kube_lab *lab;
static const char *const coreos_pods[] = {"old-aaaa0001", "old-aaaa0002", "old-aaaa0003"};
static const char *const sts_pods[] = {"old-0", "old-1", "old-2"};
static char *rs_pods[3]; /* improbable's: ReplicaSet Pods of random names, read once running */
static const char *const *old_pods = coreos_pods;
#define N_OLD 3
/* the layout taken over: coreos (made here) or one of layouts.h's */
static layout_kind kind = LAYOUT_COREOS;
static const char *from = "coreos";
static layout_opts lopts = {.name = OLD, .ns = NS, .size = 3, .operator_replicas = 1};
static const kube_gvr deployments = {"apps", "v1", "deployments", true};
static const kube_gvr pods = {"", "v1", "pods", true};
static const kube_gvr services = {"", "v1", "services", true};
static const kube_gvr crds = {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
static const kube_gvr coreos = {"etcd.database.coreos.com", "v1beta2", "etcdclusters", true};
static const kube_gvr secrets = {"", "v1", "secrets", true};
/* coreos-tls: the old cluster's CA, and the writer's files from it (written once) */
static bool tls_mode;
static pki_cert *ca;
static pki_key *ca_key;
static char *tls_dir, *ca_file, *cert_file, *key_file, *ca_pem;

/* POST obj to gvr's collection (kinds kube_apply does not know: a definition, a resource). */
static void create(const kube_gvr *gvr, const char *ns, json_t *o)
{
        _cleanup_free_ char *path = NULL;
        assert_int_equal(kube_resource_path(gvr, ns, NULL, &path), 0);
        if (kube_request(lab->admin, "POST", path, NULL, o, "create", gvr->resource, ns, NULL) < 0)
                fail_msg("create: %s", kube_client_last_error(lab->admin));
        json_decref(o);
}

/* The coreos EtcdCluster resource: created unpaused, then paused. */
static void coreos_resource(bool paused)
{
        if (paused) {
                _cleanup_free_ char *path = NULL;
                assert_int_equal(kube_resource_path(&coreos, NS, OLD, &path), 0);
                json_t *patch = json_pack("{s:{s:b}}", "spec", "paused", true);
                int k = kube_request(lab->admin, "PATCH", path, "application/merge-patch+json",
                                     patch, "patch", "etcdclusters", NS, NULL);
                json_decref(patch);
                if (k < 0)
                        fail_msg("pause: %s", kube_client_last_error(lab->admin));
                return;
        }
        create(&coreos, NS,
               json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i, s:s, s:b}}", "apiVersion",
                         "etcd.database.coreos.com/v1beta2", "kind", "EtcdCluster", "metadata",
                         "name", OLD, "namespace", NS, "spec", "size", 3, "version", VERSION,
                         "paused", paused));
}

/* What etcd-operator creates for a 3-member cluster (v0.9.4's layout, plain HTTP). */
static void coreos_layout(void)
{
        create(&crds, NULL,
               json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:[{s:s, s:b, "
                         "s:b, s:{s:{s:s, s:b}}}]}}",
                         "apiVersion", "apiextensions.k8s.io/v1", "kind",
                         "CustomResourceDefinition", "metadata", "name",
                         "etcdclusters.etcd.database.coreos.com", "spec", "group",
                         "etcd.database.coreos.com", "scope", "Namespaced", "names", "plural",
                         "etcdclusters", "singular", "etcdcluster", "kind", "EtcdCluster",
                         "listKind", "EtcdClusterList", "versions", "name", "v1beta2", "served",
                         true, "storage", true, "schema", "openAPIV3Schema", "type", "object",
                         "x-kubernetes-preserve-unknown-fields", true));
        /* the resource type is served a moment after the definition is accepted */
        int64_t end = now_mono_ms() + 30000;
        json_t *l = NULL;
        while (kube_list(lab->admin, &coreos, NS, NULL, &l, NULL) < 0 && now_mono_ms() < end)
                usleep(200 * 1000);
        json_decref(l);
        coreos_resource(false);

        json_t *sel = json_pack("{s:s, s:s}", "app", "etcd", "etcd_cluster", OLD);
        create(&services, NS,
               json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:b, s:O, s:[{s:s, s:i}, {s:s, "
                         "s:i}]}}",
                         "apiVersion", "v1", "kind", "Service", "metadata", "name", OLD,
                         "namespace", NS, "spec", "clusterIP", "None", "publishNotReadyAddresses",
                         true, "selector", sel, "ports", "name", "client", "port", 2379, "name",
                         "peer", "port", 2380));
        create(&services, NS,
               json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:O, s:[{s:s, s:i}]}}", "apiVersion", "v1",
                         "kind", "Service", "metadata", "name", OLD "-client", "namespace", NS,
                         "spec", "selector", sel, "ports", "name", "client", "port", 2379));
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < N_OLD; i++)
                sb_printf(&ic, "%s%s=http://%s.%s.%s.svc:2380", i ? "," : "", old_pods[i],
                          old_pods[i], OLD, NS);
        for (size_t i = 0; i < N_OLD; i++) {
                const char *p = old_pods[i];
                _cleanup_free_ char *peer = xasprintf("http://%s.%s.%s.svc:2380", p, OLD, NS);
                _cleanup_free_ char *client = xasprintf("http://%s.%s.%s.svc:2379", p, OLD, NS);
                _cleanup_free_ char *name = xasprintf("--name=%s", p);
                _cleanup_free_ char *adv_peer = xasprintf("--initial-advertise-peer-urls=%s", peer);
                _cleanup_free_ char *adv_client = xasprintf("--advertise-client-urls=%s", client);
                _cleanup_free_ char *initial = xasprintf("--initial-cluster=%s", sb_str(&ic));
                json_t *cmd =
                    json_pack("[s, s, s, s, s, s, s, s, s, s]", "etcd", "--data-dir=/var/etcd/data",
                              name, adv_peer, "--listen-peer-urls=http://0.0.0.0:2380",
                              "--listen-client-urls=http://0.0.0.0:2379", adv_client, initial,
                              "--initial-cluster-state=new", "--initial-cluster-token=coreos-old");
                create(
                    &pods, NS,
                    json_pack("{s:s, s:s, s:{s:s, s:s, s:O}, s:{s:s, s:s, s:s, s:[{s:s, s:s, s:o, "
                              "s:[{s:s, s:s}]}], s:[{s:s, s:{}}]}}",
                              "apiVersion", "v1", "kind", "Pod", "metadata", "name", p, "namespace",
                              NS, "labels", sel, "spec", "hostname", p, "subdomain", OLD,
                              "restartPolicy", "Never", "containers", "name", "etcd", "image",
                              "quay.io/coreos/etcd:v" VERSION, "command", cmd, "volumeMounts",
                              "name", "etcd-data", "mountPath", "/var/etcd", "volumes", "name",
                              "etcd-data", "emptyDir"));
        }
        sb_release(&ic);
        json_decref(sel);
        /* the simulator runs them: each has its address */
        for (size_t i = 0; i < N_OLD; i++) {
                end = now_mono_ms() + 60000;
                char *a = NULL;
                while (!(a = nodesim_pod_address(lab->sim, NS, old_pods[i])) && now_mono_ms() < end)
                        usleep(200 * 1000);
                if (!a)
                        fail_msg("the old Pod %s does not run", old_pods[i]);
                free(a);
        }
}

/* The old cluster, running: coreos made here, the others by layouts.h. */
static void old_layout_start(void)
{
        if (kind == LAYOUT_COREOS && !tls_mode) {
                coreos_layout();
                return;
        }
        if (layout_create(lab->admin, kind, &lopts) < 0)
                fail_msg("the %s layout was not created", layout_kind_name(kind));
        if (layout_wait_healthy(lab->admin, kind, &lopts, 180) < 0)
                fail_msg("the %s layout is not healthy", layout_kind_name(kind));
        if (kind == LAYOUT_ETCDIO)
                return;
        /* Pods of random names: read once running */
        _cleanup_free_ char *sel = layout_member_selector(kind, &lopts);
        json_t *items = NULL;
        assert_int_equal(kube_list(lab->admin, &pods, NS, sel, &items, NULL), 0);
        assert_int_equal(json_array_size(items), N_OLD);
        for (size_t i = 0; i < N_OLD; i++)
                rs_pods[i] = xstrdup(json_string_value(json_object_get(
                    json_object_get(json_array_get(items, i), "metadata"), "name")));
        json_decref(items);
        old_pods = (const char *const *)rs_pods;
}

/* A kubernetes.io/tls Secret holding a CA and its key, as `kubectl create secret tls` makes it. */
static void ca_secret(const char *name, const pki_cert *cert, const pki_key *key)
{
        _cleanup_free_ char *crt = NULL, *k = NULL;
        assert_int_equal(pki_cert_to_pem(cert, &crt), 0);
        assert_int_equal(pki_key_to_pem(key, &k), 0);
        _cleanup_free_ char *crt64 = kube_base64_encode(crt, strlen(crt));
        _cleanup_free_ char *k64 = kube_base64_encode(k, strlen(k));
        create(&secrets, NS,
               json_pack("{s:s, s:s, s:{s:s, s:s}, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind",
                         "Secret", "metadata", "name", name, "namespace", NS, "type",
                         "kubernetes.io/tls", "data", "tls.crt", crt64, "tls.key", k64));
}

/* coreos-tls: the test's CA, the writer's files from it, and the CA's Secret for gitcd. */
static void tls_setup(void)
{
        assert_int_equal(pki_ca_create("coreos-old etcd CA", 2, &ca_key, &ca), 0);
        lopts.ca = ca;
        lopts.ca_key = ca_key;
        tls_dir = harness_tmpdir("takeover-tls");
        ca_file = path_join(tls_dir, "ca.crt");
        cert_file = path_join(tls_dir, "client.crt");
        key_file = path_join(tls_dir, "client.key");
        const char *const none[] = {NULL};
        pki_cert_request req = {.cn = "root", .dns_names = none, .days = 1, .client = true};
        pki_key *k = NULL;
        pki_cert *c = NULL;
        assert_int_equal(pki_cert_issue(ca, ca_key, &req, &k, &c), 0);
        assert_int_equal(pki_write_pem(ca_file, NULL, ca, NULL), 0);
        assert_int_equal(pki_write_pem(cert_file, key_file, c, k), 0);
        assert_int_equal(pki_cert_to_pem(ca, &ca_pem), 0);
        pki_key_free(k);
        pki_cert_free(c);
}

/* The operator's Deployment of a layout (no deployment controller runs: its status as written). */
static const char *operator_deployment(const char **ret_ns)
{
        switch (kind) {
        case LAYOUT_ETCDIO:
                *ret_ns = "etcd-operator-system";
                return "etcd-operator-controller-manager";
        case LAYOUT_IMPROBABLE:
                *ret_ns = "eco-system";
                return "eco-controller-manager";
        case LAYOUT_COZYSTACK:
                *ret_ns = "etcd-operator-system";
                return "etcd-operator-controller-manager";
        default:
                fail_msg("no operator Deployment for %s", layout_kind_name(kind));
        }
        return NULL;
}

/* Stop the old operator as docs/migration.md says: pause it, or scale its Deployment to 0. */
static void stop_operator(void)
{
        if (kind == LAYOUT_COREOS) {
                coreos_resource(true);
                return;
        }
        if (kind == LAYOUT_IMPROBABLE) {
                /* the other way: the resource deleted, its objects orphaned (they keep running) */
                static const kube_gvr improbable = {"etcd.improbable.io", "v1alpha1",
                                                    "etcdclusters", true};
                if (kube_delete(lab->admin, &improbable, NS, OLD, "Orphan") < 0)
                        fail_msg("orphaning delete: %s", kube_client_last_error(lab->admin));
                int64_t end = now_mono_ms() + 60000;
                json_t *o = NULL;
                while (kube_get(lab->admin, &improbable, NS, OLD, &o) == 0 && now_mono_ms() < end) {
                        json_decref(o);
                        o = NULL;
                        usleep(200 * 1000);
                }
                return;
        }
        const char *ns = NULL;
        const char *name = operator_deployment(&ns);
        _cleanup_free_ char *path = NULL;
        assert_int_equal(kube_resource_path(&deployments, ns, name, &path), 0);
        json_t *spec = json_pack("{s:{s:i}}", "spec", "replicas", 0);
        int k = kube_request(lab->admin, "PATCH", path, "application/merge-patch+json", spec,
                             "patch", "deployments", ns, NULL);
        json_decref(spec);
        if (k < 0)
                fail_msg("scale: %s", kube_client_last_error(lab->admin));
        /* what the deployment controller would write once its Pods are gone */
        _cleanup_free_ char *status_path = xasprintf("%s/status", path);
        json_t *st = json_pack("{s:{s:i, s:i, s:i, s:i}}", "status", "replicas", 0, "readyReplicas",
                               0, "availableReplicas", 0, "updatedReplicas", 0);
        k = kube_request(lab->admin, "PATCH", status_path, "application/merge-patch+json", st,
                         "patch", "deployments/status", ns, NULL);
        json_decref(st);
        if (k < 0)
                fail_msg("scale status: %s", kube_client_last_error(lab->admin));
}

/*
 * The client URLs of every Pod, old (from first_old) or gitcd's, the
 * simulator runs now: with TLS by the names their certificates carry
 * (coreos: *.old.NS.svc; gitcd's: NAME-n.NAME-headless.NS.svc.cluster.local).
 */
static char *endpoints_from(size_t first_old)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = first_old; i < N_OLD + 10; i++) {
                _cleanup_free_ char *name =
                    i < N_OLD ? xstrdup(old_pods[i]) : xasprintf("%s-%zu", CLUSTER, i - N_OLD);
                _cleanup_free_ char *a = nodesim_pod_address(lab->sim, NS, name);
                if (!a)
                        continue;
                if (!tls_mode)
                        sb_printf(&sb, "%shttp://%s:2379", sb.len ? "," : "", a);
                else if (i < N_OLD)
                        sb_printf(&sb, "%shttps://%s.%s.%s.svc:2379", sb.len ? "," : "", name, OLD,
                                  NS);
                else
                        sb_printf(&sb, "%shttps://%s.%s-headless.%s.svc.cluster.local:2379",
                                  sb.len ? "," : "", name, CLUSTER, NS);
        }
        return sb_detach(&sb);
}

static char *all_endpoints(void)
{
        return endpoints_from(0);
}

/* A client of eps, with the writer's CA file and client certificate under TLS. */
static etcd_client *connect_to(const char *eps)
{
        etcd_client_opts o = {.endpoints = eps,
                              .cacert = ca_file,
                              .cert = cert_file,
                              .key = key_file,
                              .call_timeout_ms = 3000,
                              .dial_timeout_ms = 1000};
        etcd_client *c = NULL;
        return etcd_client_new(&o, &c) < 0 ? NULL : c;
}

static etcd_client *connect_all(void *data)
{
        (void)data;
        _cleanup_free_ char *eps = all_endpoints();
        return connect_to(eps);
}

static bool reconnect_always(int error)
{
        (void)error;
        return true;
}

static etcd_members *members_now(void)
{
        etcd_client *c = connect_all(NULL);
        assert_non_null(c);
        etcd_members *l = NULL;
        int64_t end = now_mono_ms() + 60000;
        while (etcd_member_list(c, &l) < 0 && now_mono_ms() < end)
                usleep(300 * 1000);
        etcd_client_free(c);
        if (!l)
                fail_msg("no member answers");
        return l;
}

/* The spec; with TLS, spec.adopt.ca names the Secret ca_secret. */
static void write_spec_ca(e2e *e, int replicas, bool adopt, const char *ca_secret)
{
        _cleanup_free_ char *a = xasprintf("  adopt:\n    from: %s\n    name: %s\n%s%s%s", from,
                                           OLD, tls_mode ? "    ca:\n      secret: " : "",
                                           tls_mode ? ca_secret : "", tls_mode ? "\n" : "");
        /* cozystack's members speak peer https with etcd's own certificates: gitcd's too */
        const char *tls = tls_mode ? "  tls:\n    provider: auto\n    client: {enabled: true}\n"
                                     "    peer: {enabled: true}\n"
                          : kind == LAYOUT_COZYSTACK
                              ? "  tls:\n    provider: none\n    peer:\n      selfSigned: true\n"
                              : "";
        _cleanup_free_ char *y = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                           "kind: EtcdCluster\n"
                                           "metadata:\n  name: %s\n  namespace: %s\n"
                                           "spec:\n  replicas: %d\n  version: \"%s\"\n%s%s",
                                           CLUSTER, NS, replicas, VERSION, tls, adopt ? a : "");
        e2e_write_file(e, "cluster.yaml", y);
}

static void write_spec_adopt(e2e *e, int replicas, bool adopt)
{
        write_spec_ca(e, replicas, adopt, OLD "-ca");
}

static void write_spec(e2e *e, int replicas)
{
        write_spec_adopt(e, replicas, true);
}

static int apply(e2e *e, const char *failpoint, int timeout_s, char **ret_err)
{
        _cleanup_free_ char *t = xasprintf("%ds", timeout_s);
        const char *args[] = {
            "apply",     "-q",       "--source",   e->source,      "--timeout",
            t,           "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(lab->api),
            "--context", "gitcd",    NULL};
        _cleanup_free_ char *out = NULL;
        int k = e2e_runv_failpoint(e, failpoint, &out, ret_err, args);
        if (k != 0 && out)
                fprintf(stderr, "gitcd apply exited %d, its output:\n%s\n", k, out);
        return k;
}

/* `gitcd plan -v` on the kubernetes target: its text. */
static char *plan_text(e2e *e)
{
        const char *args[] = {"plan",
                              "-v",
                              "--source",
                              e->source,
                              "--target",
                              "kubernetes",
                              "--kubeconfig",
                              kubeapi_kubeconfig(lab->api),
                              "--context",
                              "gitcd",
                              NULL};
        char *out = NULL;
        (void)e2e_runv(e, &out, NULL, args);
        return out ? out : xstrdup("");
}

static const char *label(const json_t *o, const char *key)
{
        return json_string_value(
            json_object_get(json_object_get(json_object_get(o, "metadata"), "labels"), key));
}

/* The label of the old Pods that names the old cluster. */
static const char *old_label(void)
{
        switch (kind) {
        case LAYOUT_COREOS:
                return "etcd_cluster";
        case LAYOUT_ETCDIO:
                return "app";
        case LAYOUT_IMPROBABLE:
                return "etcd.improbable.io/cluster-name";
        case LAYOUT_COZYSTACK:
                return "app.kubernetes.io/instance";
        }
        return NULL;
}

static void check_old_client_service(void)
{
        json_t *svc = NULL;
        const char *name = kind == LAYOUT_COREOS ? OLD "-client" : OLD;
        assert_int_equal(kube_get(lab->admin, &services, NS, name, &svc), 0);
        json_t *sel = json_object_get(json_object_get(svc, "spec"), "selector");
        assert_string_equal(json_string_value(json_object_get(sel, "gitcd.io/cluster")), CLUSTER);
        /* the old cluster's label is gone, or gitcd's own (app.kubernetes.io/instance=CLUSTER) */
        const char *was = json_string_value(json_object_get(sel, old_label()));
        assert_true(!was || streq(was, CLUSTER));
        const char *kept = json_string_value(
            json_object_get(json_object_get(json_object_get(svc, "metadata"), "annotations"),
                            "gitcd.io/selector-before"));
        assert_non_null(kept);
        assert_non_null(strstr(kept, old_label()));
        json_decref(svc);
}

static bool only_gitcd_members(void)
{
        etcd_members *l = members_now();
        bool ok = l->n == 3;
        for (size_t i = 0; i < l->n; i++)
                ok = ok && strncmp(l->members[i].name, CLUSTER "-", 3) == 0;
        etcd_members_free(l);
        return ok;
}

/*
 * The old Pods' controller keeps them (restartPolicy Always): a removed
 * member's etcd restarts on its data, and a Pod deleted is recreated on its
 * claim; etcd refuses the removed member's ID each time, so neither comes
 * back into the cluster. (The removed members' Pods crash-loop, never
 * Ready: an OrderedReady StatefulSet recreates only ordinal 0 then.)
 */
static void check_no_member_readded(void)
{
        /* ordinal 0: OrderedReady recreates no later Pod while an earlier one is not Ready */
        const char *victim = old_pods[0];
        _cleanup_free_ char *sel = layout_member_selector(kind, &lopts);
        json_t *p = NULL;
        assert_int_equal(kube_get(lab->admin, &pods, NS, victim, &p), 0);
        _cleanup_free_ char *uid =
            xstrdup(json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")));
        json_decref(p);
        assert_int_equal(kube_delete(lab->admin, &pods, NS, victim, "Background"), 0);
        /* its controller makes a new Pod (a StatefulSet's of the same name), which runs */
        int64_t end = now_mono_ms() + 120000;
        bool back = false;
        while (!back && now_mono_ms() < end) {
                json_t *items = NULL;
                if (kube_list(lab->admin, &pods, NS, sel, &items, NULL) == 0) {
                        size_t i;
                        json_t *o;
                        json_array_foreach(items, i, o)
                        {
                                json_t *m = json_object_get(o, "metadata");
                                const char *u = json_string_value(json_object_get(m, "uid"));
                                const char *name = json_string_value(json_object_get(m, "name"));
                                bool old = false;
                                for (size_t j = 1; j < N_OLD; j++)
                                        old = old || streq(name, old_pods[j]);
                                _cleanup_free_ char *a = nodesim_pod_address(lab->sim, NS, name);
                                if (!old && u && strcmp(u, uid) != 0 && a)
                                        back = true;
                        }
                        json_decref(items);
                }
                if (!back)
                        usleep(300 * 1000);
        }
        if (!back)
                fail_msg("the controller did not recreate %s", victim);
        /* its etcd started on the removed member's data: give it time to try */
        for (int i = 0; i < 10; i++) {
                if (!only_gitcd_members())
                        fail_msg("a removed member came back after %s was recreated", victim);
                usleep(1000 * 1000);
        }
        assert_int_equal(kube_lab_count(lab, &pods, NS, sel), N_OLD);
}

/*
 * coreos-tls, after the move: the writer's CA file is as it was, and
 * gitcd's members alone, reached with it, serve leaves of the old CA that
 * also name the old client Service (whose clients follow it to them).
 */
static void check_tls_kept(void)
{
        _cleanup_free_ char *now = NULL;
        size_t len = 0;
        assert_int_equal(read_file(ca_file, 1 << 20, &now, &len), 0);
        assert_string_equal(now, ca_pem);
        _cleanup_free_ char *eps = endpoints_from(N_OLD);
        etcd_client *c = connect_to(eps);
        assert_non_null(c);
        etcd_members *l = NULL;
        if (etcd_member_list(c, &l) < 0)
                fail_msg("gitcd's members (%s) do not answer with the old CA: %s", eps,
                         etcd_client_last_error(c));
        assert_int_equal(l->n, 3);
        etcd_members_free(l);
        etcd_client_free(c);

        json_t *sec = NULL;
        assert_int_equal(kube_get(lab->admin, &secrets, NS, CLUSTER "-client-tls", &sec), 0);
        const char *b64 =
            json_string_value(json_object_get(json_object_get(sec, "data"), "tls.crt"));
        assert_non_null(b64);
        char *pem = NULL;
        assert_int_equal(kube_base64_decode(b64, &pem, &len), 0);
        json_decref(sec);
        pki_cert *leaf = NULL;
        assert_int_equal(pki_cert_from_pem(pem, len, "kc-client-tls", &leaf), 0);
        free(pem);
        assert_int_equal(pki_cert_verify(ca, leaf), 0);
        char **dns = NULL, **ips = NULL;
        assert_int_equal(pki_cert_sans(leaf, &dns, &ips), 0);
        bool named = false;
        for (size_t i = 0; dns && dns[i]; i++)
                named = named || streq(dns[i], OLD "-client." NS ".svc");
        assert_true(named);
        strv_free(dns);
        strv_free(ips);
        pki_cert_free(leaf);
}

/* After the move: the old client Service (coreos), the old objects left, the record, the plan. */
static void check_left_behind(e2e *e)
{
        /* the old client Service selects gitcd's voters; the old objects stay */
        if (kind == LAYOUT_COREOS || kind == LAYOUT_COZYSTACK)
                check_old_client_service();
        if (kind != LAYOUT_COREOS)
                check_no_member_readded();
        if (tls_mode)
                check_tls_kept();
        json_t *old_svc = NULL;
        assert_int_equal(kube_get(lab->admin, &services, NS, OLD, &old_svc), 0);
        json_decref(old_svc);
        for (size_t i = kind == LAYOUT_COREOS ? 0 : 1; i < N_OLD; i++) {
                json_t *p = NULL;
                assert_int_equal(kube_get(lab->admin, &pods, NS, old_pods[i], &p), 0);
                assert_string_equal(label(p, old_label()), OLD);
                json_decref(p);
        }
        assert_int_equal(e2e_audit_count(e, CLUSTER, "member.adopt"), 3);

        json_t *st = e2e_status(e, CLUSTER);
        json_t *tk = json_object_get(st, "takeover");
        assert_non_null(json_object_get(tk, "finished"));
        assert_false(json_is_null(json_object_get(tk, "finished")));
        /* the resource (improbable's was deleted), 3 Pods, the Services (cozystack: 2), the
         * StatefulSet or the 3 ReplicaSets */
        assert_int_equal(json_array_size(json_object_get(tk, "objects")),
                         kind == LAYOUT_IMPROBABLE || kind == LAYOUT_COZYSTACK ? 7 : 6);
        json_decref(st);
        char *plan = plan_text(e);
        _cleanup_free_ char *first_pod = xasprintf("Pod %s/%s", NS, old_pods[0]);
        if (!strstr(plan, "left for you to delete") || !strstr(plan, first_pod))
                fail_msg("the plan does not list the old objects:\n%s", plan);
        free(plan);
}

/* coreos-tls: a CA that is not the old one is refused at the survey, nothing created. */
static void refused_wrong_ca(e2e *e)
{
        pki_cert *other = NULL;
        pki_key *other_key = NULL;
        assert_int_equal(pki_ca_create("another CA", 2, &other_key, &other), 0);
        ca_secret("other-ca", other, other_key);
        pki_cert_free(other);
        pki_key_free(other_key);
        write_spec_ca(e, 3, true, "other-ca");
        char *err = NULL;
        int k = apply(e, NULL, 20, &err);
        if (k == 0 || !err || !strstr(err, "is not the old cluster's CA"))
                fail_msg("a wrong CA was not refused (%d): %s", k, err);
        free(err);
        assert_int_equal(kube_lab_count(lab, &pods, NS, "gitcd.io/cluster=" CLUSTER), 0);
        write_spec(e, 3);
}

static void test_takeover(void **state)
{
        (void)state;
        int64_t t0 = now_mono_ms();
        e2e *e = e2e_new();
        old_layout_start();
        etcd_members *before = members_now();
        assert_int_equal(before->n, 3);
        uint64_t cluster_id = before->cluster_id;
        etcd_members_free(before);

        harness_writer_opts wo = {.prefix = "t/",
                                  .interval_ms = 20,
                                  .connect = connect_all,
                                  .reconnect_on = reconnect_always};
        _cleanup_free_ char *eps = all_endpoints();
        wo.endpoints = eps;
        harness_writer *w = harness_writer_start(&wo);
        harness_writer_wait(w, 20);

        /* the operator acts: refused, nothing of gitcd's created */
        write_spec(e, 3);
        char *plan = plan_text(e);
        if (!strstr(plan, "replace the old members") || !strstr(plan, "old leader last"))
                fail_msg("the plan does not show the takeover's steps:\n%s", plan);
        if (tls_mode && !strstr(plan, "keep the old cluster's CA"))
                fail_msg("the plan does not say the CA is kept:\n%s", plan);
        free(plan);
        char *err = NULL;
        int k;
        k = apply(e, NULL, 20, &err);
        if (k == 0)
                fail_msg("gitcd took the cluster over while its operator runs");
        if (!err || !strstr(err, kind == LAYOUT_COREOS ? "paused" : "--replicas=0"))
                fail_msg("the refusal (%d) does not say how to stop the operator: %s", k, err);
        free(err);
        assert_int_equal(kube_lab_count(lab, &pods, NS, "gitcd.io/cluster=" CLUSTER), 0);
        assert_int_equal(e2e_audit_count(e, CLUSTER, "cluster.adopt"), 1);

        /* stopped: taken over, gitcd killed right after it removed the first old member */
        stop_operator();
        if (tls_mode)
                refused_wrong_ca(e);
        err = NULL;
        k = apply(e, "remove.after-etcd", 300, &err);
        if (k != KILLED)
                fail_msg("gitcd was not killed at its first removal (%d): %s", k, err);
        free(err);
        etcd_members *mid = members_now();
        assert_int_equal(mid->n, 3); /* one old member gone, one of gitcd's in */

        /* spec.adopt removed mid-move: refused, the membership left as it is */
        write_spec_adopt(e, 3, false);
        err = NULL;
        k = apply(e, NULL, 20, &err);
        if (k == 0 || !err || !strstr(err, "spec.adopt was removed while the takeover"))
                fail_msg("spec.adopt removed mid-move was not refused (%d): %s", k, err);
        free(err);
        etcd_members *still = members_now();
        assert_int_equal(still->n, mid->n);
        for (size_t i = 0; i < mid->n; i++)
                assert_non_null(etcd_members_find(still, mid->members[i].id));
        etcd_members_free(still);
        etcd_members_free(mid);
        write_spec(e, 3);
        err = NULL;
        k = apply(e, NULL, 300, &err);
        if (k != 0)
                fail_msg("the resumed takeover exited %d: %s", k, err);
        free(err);
        fprintf(stderr, "takeover with one kill: %.1f s\n", (now_mono_ms() - t0) / 1000.0);

        etcd_members *after = members_now();
        assert_int_equal(after->n, 3);
        assert_true(after->cluster_id == cluster_id);
        for (size_t i = 0; i < after->n; i++)
                assert_true(strncmp(after->members[i].name, CLUSTER "-", 3) == 0);
        etcd_members_free(after);

        check_left_behind(e);

        /* every acknowledged write is there */
        harness_writer_wait(w, w->acked + 20);
        etcd_client *c = connect_all(NULL);
        harness_writer_check(w, c, 40);
        /* at most one failed put per old member removed (its client moved on) */
        fprintf(stderr,
                "writer: %d acknowledged, %d failed puts, %d reconnects, %d retries at most\n",
                w->acked, w->failed, w->reconnects, w->max_retries);
        /*
         * and no write needed more than two tries beyond the first: a
         * removed member's etcd still takes a connection for a moment once
         * its raft stopped (the put fails "raft: stopped"), and the
         * writer's new client, dialling the endpoints in order, may land on
         * it once more before its Pod is gone: two failed puts per removal
         * at most. Measured over TLS: 1 to 4 failed puts, 1 or 2 retries,
         * in 6 runs; over plain HTTP the same was seen (2 retries on the
         * last member removed) in about one run in three at load 4 to 6.
         */
        int per_removal = 2;
        assert_true(w->failed <= 3 * per_removal);
        assert_true(w->max_retries <= per_removal);
        etcd_client_free(c);
        harness_writer_free(w);

        /* scaled as usual afterwards */
        write_spec(e, 5);
        assert_int_equal(apply(e, NULL, 300, NULL), 0);
        etcd_members *five = members_now();
        assert_int_equal(five->n, 5);
        etcd_members_free(five);
        write_spec(e, 3);
        assert_int_equal(apply(e, NULL, 300, NULL), 0);
        etcd_members *three = members_now();
        assert_int_equal(three->n, 3);
        assert_true(three->cluster_id == cluster_id);
        etcd_members_free(three);
        fprintf(stderr, "whole test: %.1f s\n", (now_mono_ms() - t0) / 1000.0);
        e2e_free(e);
}

int main(int argc, char **argv)
{
        if (argc > 1 && strcmp(argv[1], "etcdio") == 0) {
                kind = LAYOUT_ETCDIO;
                from = "etcd-io";
                old_pods = sts_pods;
        } else if (argc > 1 && strcmp(argv[1], "cozystack") == 0) {
                kind = LAYOUT_COZYSTACK;
                from = "cozystack";
                old_pods = sts_pods;
        } else if (argc > 1 && strcmp(argv[1], "improbable") == 0) {
                kind = LAYOUT_IMPROBABLE;
                from = "improbable";
        } else if (argc > 1 && strcmp(argv[1], "coreos-tls") == 0) {
                tls_mode = true;
        } else if (argc > 1) {
                fprintf(stderr, "unknown layout %s\n", argv[1]);
                return 1;
        }
        if (kind != LAYOUT_COREOS) {
                char *cm = kubeapi_find_controller_manager();
                free(cm);
                if (!cm) {
                        printf("skipped: needs kube-controller-manager (run scripts/setup)\n");
                        return 77;
                }
        }
        lab = kube_lab_start(NS, VERSION);
        if (!lab)
                return 77;
        if (kind != LAYOUT_COREOS && kubeapi_start_controllers(lab->api) < 0) {
                kube_lab_free(lab);
                fprintf(stderr, "the controllers did not start\n");
                return 1;
        }
        if (tls_mode) {
                tls_setup();
                ca_secret(OLD "-ca", ca, ca_key);
        }
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_takeover)};
        int failed = cmocka_run_group_tests(tests, NULL, NULL);
        kube_lab_free(lab);
        for (size_t i = 0; i < N_OLD; i++)
                free(rs_pods[i]);
        pki_cert_free(ca);
        pki_key_free(ca_key);
        free(ca_file), free(cert_file), free(key_file), free(ca_pem), free(tls_dir);
        return failed;
}
