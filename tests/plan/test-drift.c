/*
 * `gitcd plan --target kubernetes` against a real kube-apiserver v1.20.2:
 * the real gitcd binary compares a cluster's objects, applied for real
 * with gitcd's field manager, with what it would apply. Each case changes
 * the live objects the way a person would (another field manager, a
 * deleted PodDisruptionBudget, an unlabelled Service holding a rendered
 * name, an extra labelled Service, an old etcd image), checks the report
 * and the exit status, and puts things back. The plan never writes: after
 * every run the objects are still as the case left them. One case runs the
 * real Kubernetes target for a member record (tls.provider auto), so the
 * TLS Secrets and the member's Pod are compared exactly as it applies them.
 *
 * One apiserver serves every case; skipped (77) without the binary, after
 * the pure cases of the comparison itself (drift_diff), which always run.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kube/adapt.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "plan/drift.h"
#include "reconciler/membership.h"
#include "state/state.h"
#include "targets/kubernetes.h"
#include "render/render.h"
#include "api/spec.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "tests/plan/plan-fixture.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define NS      KUBEAPI_NAMESPACE
#define CLUSTER "drift"

static const char cluster_yaml[] = "apiVersion: gitcd.io/v1alpha1\n"
                                   "kind: EtcdCluster\n"
                                   "metadata:\n"
                                   "  name: " CLUSTER "\n"
                                   "  namespace: " NS "\n"
                                   "spec:\n"
                                   "  replicas: %d\n"
                                   "  version: \"3.5.16\"\n";

static kubeapi *api;
static kube_client *admin;
static char *src, *db;
static const kube_gvr services = {"", "v1", "services", true};

static void write_source(int replicas)
{
        _cleanup_free_ char *text = xasprintf(cluster_yaml, replicas);
        pf_write(src, "etcd.yaml", text);
}

/* Every rendered object of the cluster, fitted to the server. */
static json_t *rendered(void)
{
        _cleanup_free_ char *text = xasprintf(cluster_yaml, 1);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("etcd.yaml", text, strlen(text), &set, &diags), 0);
        diag_list_release(&diags);
        _cleanup_(membership_plan_freep) membership_plan *mp =
            membership_plan_steady(set.items[0], "cluster.local");
        json_t *objs = render_cluster(set.items[0], mp);
        cluster_set_release(&set);
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o) assert_int_equal(kube_adapt_object(admin, o, NULL), 0);
        return objs;
}

/* Apply (as gitcd would) the rendered object of that kind and name. */
static void apply_rendered(const char *kind, const char *name)
{
        json_t *objs = rendered();
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                const char *n =
                    json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
                if (kind && (!streq(json_string_value(json_object_get(o, "kind")), kind) ||
                             !streq(n, name)))
                        continue;
                if (kube_apply(admin, o, NULL, false, false, NULL) < 0)
                        fail_msg("apply %s: %s", n, kube_client_last_error(admin));
        }
        json_decref(objs);
}

static int plan(char **ret_out, char **ret_err, const char *context, const char *extra)
{
        return pf_plan(ret_out, ret_err,
                       "--source '%s' --state '%s' --target kubernetes --kubeconfig '%s' "
                       "--context %s --detailed-exitcode %s",
                       src, db, kubeapi_kubeconfig(api), context, extra);
}

static void assert_contains(const char *haystack, const char *needle)
{
        if (!strstr(haystack, needle))
                fail_msg("expected \"%s\" in:\n%s", needle, haystack);
}

/* A request by another field manager, as kubectl would make it. */
static void patch_by_hand(const char *path, const char *content_type, const char *body_json)
{
        json_t *body = json_loads(body_json, 0, NULL);
        assert_non_null(body);
        _cleanup_free_ char *url = xasprintf("%s?fieldManager=by-hand", path);
        if (kube_request(admin, "PATCH", url, content_type, body, "patch", "object", NS, NULL) < 0)
                fail_msg("%s", kube_client_last_error(admin));
        json_decref(body);
}

static void test_no_drift(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL, *err = NULL;
        int rc = plan(&out, &err, "admin", "");
        if (rc != 0)
                fail_msg("exit %d\n%s\n%s", rc, out, err);
        assert_contains(out, "= " NS "/" CLUSTER ": no drift");
        assert_contains(out, "Drift: 0 to create, 0 to change, 0 to prune");

        _cleanup_free_ char *json = NULL;
        assert_int_equal(plan(&json, NULL, "admin", "-o json"), 0);
        json_t *j = json_loads(json, 0, NULL);
        assert_non_null(j);
        json_t *c =
            json_array_get(json_object_get(json_object_get(j, "kubernetes"), "clusters"), 0);
        assert_false(json_is_true(json_object_get(c, "drift")));
        assert_int_equal(json_array_size(json_object_get(c, "objects")), 3);
        assert_false(json_is_true(json_object_get(json_object_get(j, "summary"), "drift")));
        json_decref(j);

        /* Without --target kubernetes the server is not contacted at all. */
        _cleanup_free_ char *plain = NULL;
        assert_int_equal(pf_plan(&plain, NULL,
                                 "--source '%s' --state '%s' --kubeconfig /nonexistent "
                                 "--detailed-exitcode",
                                 src, db),
                         0);
        assert_null(strstr(plain, "Kubernetes"));
}

static void test_service_port_changed_by_hand(void **state)
{
        (void)state;
        patch_by_hand("/api/v1/namespaces/" NS "/services/" CLUSTER, "application/merge-patch+json",
                      "{\"spec\":{\"ports\":[{\"name\":\"client\",\"port\":2479,"
                      "\"targetPort\":2379,\"protocol\":\"TCP\"}]}}");
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 2);
        assert_contains(out, "Service " CLUSTER ": drift: spec.ports[0].port");

        _cleanup_free_ char *json = NULL;
        assert_int_equal(plan(&json, NULL, "admin", "-o json"), 2);
        json_t *j = json_loads(json, 0, NULL);
        json_t *objs = json_object_get(
            json_array_get(json_object_get(json_object_get(j, "kubernetes"), "clusters"), 0),
            "objects");
        json_t *svc = json_array_get(objs, 1);
        assert_string_equal(json_string_value(json_object_get(svc, "name")), CLUSTER);
        assert_string_equal(json_string_value(json_object_get(svc, "state")), "conflict");
        assert_string_equal(json_string_value(json_array_get(json_object_get(svc, "paths"), 0)),
                            "spec.ports[0].port");
        assert_true(json_is_true(json_object_get(json_object_get(j, "summary"), "drift")));
        json_decref(j);

        /* The plan wrote nothing: the port is still the one set by hand. */
        json_t *live = NULL;
        assert_int_equal(kube_get(admin, &services, NS, CLUSTER, &live), 0);
        json_t *port = json_array_get(json_object_get(json_object_get(live, "spec"), "ports"), 0);
        assert_int_equal(json_integer_value(json_object_get(port, "port")), 2479);
        json_decref(live);

        assert_int_equal(kube_delete(admin, &services, NS, CLUSTER, NULL), 0);
        apply_rendered("Service", CLUSTER);
}

static void test_spec_change_is_drift(void **state)
{
        (void)state;
        write_source(3);
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 2);
        /* A third of three may be down, none of one. */
        assert_contains(out, "PodDisruptionBudget " CLUSTER ": drift: spec.maxUnavailable");
        assert_contains(out, "members: 1 Pods, 1 PVCs live; spec.replicas 3 wants 3 Pods, 3 PVCs");
        write_source(1);
}

static void test_pdb_deleted(void **state)
{
        (void)state;
        _cleanup_free_ char *version = NULL;
        assert_int_equal(kube_preferred_version(admin, "policy", "poddisruptionbudgets", &version),
                         0);
        const kube_gvr pdbs = {"policy", version, "poddisruptionbudgets", true};
        assert_int_equal(kube_delete(admin, &pdbs, NS, CLUSTER, NULL), 0);
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 2);
        assert_contains(out, "PodDisruptionBudget " CLUSTER ": missing (would be created)");
        assert_contains(out, "Drift: 1 to create");
        json_t *live = NULL;
        assert_int_equal(kube_get(admin, &pdbs, NS, CLUSTER, &live), -ENOENT);
        apply_rendered("PodDisruptionBudget", CLUSTER);
}

static void test_unmanaged_service(void **state)
{
        (void)state;
        assert_int_equal(kube_delete(admin, &services, NS, CLUSTER "-headless", NULL), 0);
        json_t *svc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[{s:i}]}}", "apiVersion", "v1",
                                "kind", "Service", "metadata", "name", CLUSTER "-headless",
                                "namespace", NS, "spec", "ports", "port", 80);
        const char *path = "/api/v1/namespaces/" NS "/services";
        if (kube_request(admin, "POST", path, NULL, svc, "create", "services", NS, NULL) < 0)
                fail_msg("%s", kube_client_last_error(admin));
        json_decref(svc);

        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 1);
        assert_contains(out, "Service " CLUSTER "-headless: not managed by gitcd");

        assert_int_equal(kube_delete(admin, &services, NS, CLUSTER "-headless", NULL), 0);
        apply_rendered("Service", CLUSTER "-headless");
}

static void test_extra_labelled_service(void **state)
{
        (void)state;
        json_t *svc =
            json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}}, s:{s:[{s:i, s:s}]}}", "apiVersion",
                      "v1", "kind", "Service", "metadata", "name", CLUSTER "-extra", "namespace",
                      NS, "labels", LABEL_CLUSTER, CLUSTER, "app.kubernetes.io/managed-by", "gitcd",
                      "spec", "ports", "port", 80, "protocol", "TCP");
        assert_int_equal(kube_apply(admin, svc, NULL, false, false, NULL), 0);
        json_decref(svc);

        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 2);
        assert_contains(out, "Service " CLUSTER "-extra: would prune");
        assert_contains(out, "1 to prune");
        assert_int_equal(kube_delete(admin, &services, NS, CLUSTER "-extra", NULL), 0);
}

static void test_member_on_other_version(void **state)
{
        (void)state;
        const char *path = "/api/v1/namespaces/" NS "/pods/" CLUSTER "-0";
        patch_by_hand(path, "application/strategic-merge-patch+json",
                      "{\"spec\":{\"containers\":[{\"name\":\"etcd\","
                      "\"image\":\"quay.io/coreos/etcd:v3.4.23\"}]}}");
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 2);
        assert_contains(out, "Pod " CLUSTER "-0: quay.io/coreos/etcd:v3.4.23, not spec.version "
                             "3.5.16");
        patch_by_hand(path, "application/strategic-merge-patch+json",
                      "{\"spec\":{\"containers\":[{\"name\":\"etcd\","
                      "\"image\":\"quay.io/coreos/etcd:v3.5.16\"}]}}");
        _cleanup_free_ char *again = NULL;
        assert_int_equal(plan(&again, NULL, "admin", ""), 0);
}

/* POST (or DELETE at once, with path naming the object) as an administrator would. */
static void by_hand(const char *method, const char *path, const char *resource, const char *ns,
                    json_t *body)
{
        if (kube_request(admin, method, path, "application/json", body, "create", resource, ns,
                         NULL) < 0)
                fail_msg("%s %s: %s", method, path, kube_client_last_error(admin));
        json_decref(body);
}

/*
 * Member Pods scheduled on nodes that share a zone: plan warns, naming the
 * zone, its value and the Pods (the live Pods' nodes, read from the Node
 * objects). Three Pods of the cluster's labels are added by hand on nodes
 * in zones z1, z1 and z2 beside the unscheduled drift-0: four members, of
 * which losing z1's two loses quorum.
 */
static void test_pods_sharing_a_zone(void **state)
{
        (void)state;
        static const char *const zones[] = {"z1", "z1", "z2"};
        json_t *live = NULL;
        assert_int_equal(kube_request(admin, "GET", "/api/v1/namespaces/" NS "/pods/" CLUSTER "-0",
                                      NULL, NULL, "get", "pods", NS, &live),
                         0);
        json_t *labels = json_object_get(json_object_get(live, "metadata"), "labels");
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *node = xasprintf("drift-node-%zu", i);
                _cleanup_free_ char *pod = xasprintf("drift-zoned-%zu", i);
                by_hand("POST", "/api/v1/nodes", "nodes", NULL,
                        json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind",
                                  "Node", "metadata", "name", node, "labels",
                                  "topology.kubernetes.io/zone", zones[i]));
                by_hand("POST", "/api/v1/namespaces/" NS "/pods", "pods", NS,
                        json_pack("{s:s, s:s, s:{s:s, s:O}, s:{s:s, s:[{s:s, s:s}]}}", "apiVersion",
                                  "v1", "kind", "Pod", "metadata", "name", pod, "labels", labels,
                                  "spec", "nodeName", node, "containers", "name", "etcd", "image",
                                  "quay.io/coreos/etcd:v3.5.16"));
        }
        json_decref(live);

        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 2);
        assert_contains(out, "warning: topology.kubernetes.io/zone=z1 holds drift-zoned-0, "
                             "drift-zoned-1 of 4 members: losing z1 loses quorum");
        assert_null(strstr(out, "zone=z2 holds"));
        _cleanup_free_ char *json = NULL;
        assert_int_equal(plan(&json, NULL, "admin", "-o json"), 2);
        assert_contains(json, "\"domainRisks\"");

        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *pod =
                    xasprintf("/api/v1/namespaces/" NS "/pods/drift-zoned-%zu", i);
                _cleanup_free_ char *node = xasprintf("/api/v1/nodes/drift-node-%zu", i);
                by_hand("DELETE", pod, "pods", NS, json_pack("{s:i}", "gracePeriodSeconds", 0));
                by_hand("DELETE", node, "nodes", NULL, NULL);
        }
        /* the Pods are gone at once (no grace period): no drift again */
        _cleanup_free_ char *again = NULL;
        assert_int_equal(plan(&again, NULL, "admin", ""), 0);
        assert_null(strstr(again, "warning:"));
}

/* ---- exactly what the Kubernetes target applies ---- */

#define TLS_CLUSTER "drift-tls"

static const char tls_yaml[] = "apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: " TLS_CLUSTER "\n"
                               "  namespace: " NS "\n"
                               "spec:\n"
                               "  replicas: 1\n"
                               "  version: \"3.5.16\"\n"
                               "  tls:\n"
                               "    provider: auto\n"
                               "    client:\n"
                               "      enabled: true\n"
                               "    peer:\n"
                               "      enabled: true\n";

/* The state of object kind/name of the cluster in `plan -o json`, or NULL. */
static char *object_state(const char *json, const char *cluster, const char *kind, const char *name)
{
        json_t *j = json_loads(json, 0, NULL);
        assert_non_null(j);
        char *state = NULL;
        size_t i, k;
        json_t *c, *o;
        json_array_foreach(json_object_get(json_object_get(j, "kubernetes"), "clusters"), i, c)
        {
                if (!streq(json_string_value(json_object_get(c, "name")), cluster))
                        continue;
                json_array_foreach(json_object_get(c, "objects"), k, o)
                {
                        if (streq(json_string_value(json_object_get(o, "kind")), kind) &&
                            streq(json_string_value(json_object_get(o, "name")), name))
                                state = xstrdup(json_string_value(json_object_get(o, "state")));
                }
        }
        json_decref(j);
        return state;
}

/*
 * A cluster with tls.provider auto run by the real Kubernetes target for
 * its member record: the target issues the certificates into the state
 * folder next to the state file and applies the Secrets, the member's PVC
 * and its Pod (pod-hash and config-hash annotations). The plan compares
 * exactly these: unchanged, no drift; a Secret edited by hand and a Pod
 * whose annotation changed are drift.
 */
static void test_target_objects(void **state)
{
        (void)state;
        pf_write(src, "tls.yaml", tls_yaml);
        pf_state_from_revision(db, src, NULL, NULL, true);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("tls.yaml", tls_yaml, strlen(tls_yaml), &set, &diags), 0);
        diag_list_release(&diags);
        const etcd_cluster *c = set.items[0];

        /* The seed's record, as the reconciler writes it. */
        state_db *sdb = NULL;
        assert_int_equal(state_open(db, STATE_OPEN_READ_WRITE, &sdb), 0);
        state_member m = {
            .cluster = NS "/" TLS_CLUSTER,
            .name = TLS_CLUSTER "-0",
            .ordinal = 0,
            .seed = true,
            .version = "3.5.16",
            .state = "ready",
            .initialized = true,
            .initial_cluster = TLS_CLUSTER "-0=https://" TLS_CLUSTER "-0." TLS_CLUSTER
                                           "-headless." NS ".svc.cluster.local:2380",
            .initial_cluster_state = "new",
        };
        assert_int_equal(state_member_put(sdb, &m, 1000), 0);

        /* The target on the state folder `gitcd run --state <db>` gives it. */
        kube_config *cfg = NULL;
        char *err = NULL;
        assert_int_equal(kube_config_load(kubeapi_kubeconfig(api), "admin", &cfg, &err), 0);
        _cleanup_free_ char *state_dir = pf_path(".");
        kubernetes_target_opts ko = {.config = cfg, .state_dir = state_dir};
        target *t = NULL;
        assert_int_equal(kubernetes_target_new(&ko, &t), 0);
        kube_config_free(cfg);
        state_member_list recs = {0};
        assert_int_equal(state_member_list_for(sdb, NS "/" TLS_CLUSTER, false, &recs), 0);
        membership_plan *p = NULL;
        assert_int_equal(membership_plan_for_records(t, c, recs.items, recs.n, &p), 0);
        state_member_list_release(&recs);
        int r = t->ops->ensure_shared(t, c, p);
        if (r >= 0)
                r = t->ops->ensure_member(t, c, p, 0);
        if (r < 0)
                fail_msg("target: %s", target_last_error(t));

        _cleanup_free_ char *out = NULL, *err_out = NULL;
        r = plan(&out, &err_out, "admin", "");
        if (r != 0)
                fail_msg("exit %d\n%s\n%s", r, out, err_out);
        assert_contains(out, "= " NS "/" TLS_CLUSTER ": no drift");
        _cleanup_free_ char *json = NULL;
        assert_int_equal(plan(&json, NULL, "admin", "-o json"), 0);
        static const char *const compared[][2] = {
            {"Secret", TLS_CLUSTER "-client-tls"},
            {"Secret", TLS_CLUSTER "-peer-tls"},
            {"Secret", TLS_CLUSTER "-operator-tls"},
            {"PersistentVolumeClaim", "data-" TLS_CLUSTER "-0"},
            {"Pod", TLS_CLUSTER "-0"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(compared); i++) {
                _cleanup_free_ char *st =
                    object_state(json, NS "/" TLS_CLUSTER, compared[i][0], compared[i][1]);
                if (!st)
                        fail_msg("%s %s not compared:\n%s", compared[i][0], compared[i][1], json);
                assert_string_equal(st, "in-sync");
        }

        /* A Secret edited by hand. */
        patch_by_hand("/api/v1/namespaces/" NS "/secrets/" TLS_CLUSTER "-peer-tls",
                      "application/merge-patch+json", "{\"data\":{\"tls.crt\":\"eA==\"}}");
        _cleanup_free_ char *edited = NULL;
        assert_int_equal(plan(&edited, NULL, "admin", ""), 2);
        assert_contains(edited, "Secret " TLS_CLUSTER "-peer-tls: drift: data[\"tls.crt\"]");
        /* Put back as the target applies it. */
        const kube_gvr secrets = {"", "v1", "secrets", true};
        assert_int_equal(kube_delete(admin, &secrets, NS, TLS_CLUSTER "-peer-tls", NULL), 0);
        json_t *objs = NULL;
        assert_int_equal(kubernetes_target_objects(t, c, p, &objs), 0);
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                if (streq(json_string_value(json_object_get(o, "kind")), "Secret") &&
                    streq(
                        json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
                        TLS_CLUSTER "-peer-tls") &&
                    kube_apply(admin, o, NULL, false, false, NULL) < 0)
                        fail_msg("apply: %s", kube_client_last_error(admin));
        }
        json_decref(objs);
        _cleanup_free_ char *back = NULL;
        assert_int_equal(plan(&back, NULL, "admin", ""), 0);

        /* A Pod whose config-hash annotation changed. */
        patch_by_hand("/api/v1/namespaces/" NS "/pods/" TLS_CLUSTER "-0",
                      "application/merge-patch+json",
                      "{\"metadata\":{\"annotations\":{\"gitcd.io/config-hash\":\"0000\"}}}");
        _cleanup_free_ char *annotated = NULL;
        assert_int_equal(plan(&annotated, NULL, "admin", ""), 2);
        assert_contains(annotated, "Pod " TLS_CLUSTER
                                   "-0: drift: metadata.annotations[\"gitcd.io/config-hash\"]");

        /* Gone from the source and the state: the cases after this one see one cluster. */
        assert_int_equal(t->ops->remove_member(t, c, TLS_CLUSTER "-0", false), 0);
        assert_int_equal(state_cluster_delete(sdb, NS "/" TLS_CLUSTER), 0);
        state_close(sdb);
        _cleanup_free_ char *file = xasprintf("%s/tls.yaml", src);
        assert_int_equal(unlink(file), 0);
        membership_plan_free(p);
        target_free(t);
        cluster_set_release(&set);
}

static void test_forbidden(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "limited", ""), 1);
        assert_contains(err, "forbidden");
        assert_contains(err, "get services");
        assert_null(strstr(out, "Kubernetes drift"));
}

/* Last: the apiserver stays down. */
static void test_unreachable(void **state)
{
        (void)state;
        kubeapi_pause(api);
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(plan(&out, &err, "admin", ""), 1);
        assert_contains(err, "gitcd plan: Kubernetes API server https://127.0.0.1:");
        assert_null(strstr(out, "Kubernetes drift"));
}

/* ---- the comparison itself (pure; runs without an apiserver) ---- */

static char *joined(const char *a_json, const char *b_json, bool subset)
{
        json_t *a = json_loads(a_json, 0, NULL), *b = json_loads(b_json, 0, NULL);
        assert_non_null(a);
        assert_non_null(b);
        char **paths = NULL;
        size_t n = 0;
        if (subset)
                drift_diff_subset(a, b, &paths, &n);
        else
                drift_diff(a, b, &paths, &n);
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < n; i++) {
                sb_printf(&sb, "%s%s", i ? " " : "", paths[i]);
                free(paths[i]);
        }
        free(paths);
        json_decref(a);
        json_decref(b);
        return sb_detach(&sb);
}

static void test_diff_paths(void **state)
{
        (void)state;
        /* What the server maintains is not drift. */
        _cleanup_free_ char *none =
            joined("{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\",\"generation\":1,"
                   "\"uid\":\"u1\",\"managedFields\":[1]},\"status\":{\"x\":1}}",
                   "{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\",\"generation\":2,"
                   "\"uid\":\"u1\",\"managedFields\":[2],\"creationTimestamp\":\"t\"},"
                   "\"status\":{\"x\":2}}",
                   false);
        assert_string_equal(none, "");
        /* Changed, added and removed fields; label keys with dots; array items. */
        _cleanup_free_ char *some =
            joined("{\"metadata\":{\"labels\":{\"app.kubernetes.io/version\":\"3.4.23\"}},"
                   "\"spec\":{\"ports\":[{\"port\":2379},{\"port\":2380}],\"old\":1}}",
                   "{\"metadata\":{\"labels\":{\"app.kubernetes.io/version\":\"3.5.16\"}},"
                   "\"spec\":{\"ports\":[{\"port\":2479},{\"port\":2380}],\"new\":1}}",
                   false);
        assert_string_equal(some, "metadata.labels[\"app.kubernetes.io/version\"] "
                                  "spec.ports[0].port spec.new spec.old");
        /* Arrays of another length are one path. */
        _cleanup_free_ char *len = joined("{\"a\":[1,2]}", "{\"a\":[1]}", false);
        assert_string_equal(len, "a");
        /* Subset: only the rendered fields count; server defaults are not drift. */
        _cleanup_free_ char *sub =
            joined("{\"spec\":{\"ports\":[{\"port\":2379,\"protocol\":\"TCP\"}]}}",
                   "{\"spec\":{\"ports\":[{\"port\":2479,\"protocol\":\"TCP\"}],"
                   "\"sessionAffinity\":\"None\"}}",
                   true);
        assert_string_equal(sub, "spec.ports[0].port");
        assert_string_equal(drift_state_name(DRIFT_UNMANAGED), "not-managed");
}

static int setup(void **state)
{
        (void)state;
        /* Before pf_init: it moves HOME, where the apiserver and etcd binaries are found. */
        if (kubeapi_start(&api) < 0)
                return -1;
        admin = kubeapi_client(api, "admin");
        pf_init();
        src = pf_path("src");
        db = pf_path("state.db");
        write_source(1);
        pf_state_from_revision(db, src, NULL, NULL, true);
        apply_rendered(NULL, NULL);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        kube_client_free(admin);
        kubeapi_free(api);
        pf_cleanup();
        free(src);
        free(db);
        return 0;
}

int main(void)
{
        const struct CMUnitTest pure[] = {
            cmocka_unit_test(test_diff_paths),
        };
        int failed = cmocka_run_group_tests_name("drift-diff", pure, NULL, NULL);
        if (failed)
                return failed;
        _cleanup_free_ char *bin = kubeapi_find_binary();
        if (!bin) {
                fprintf(stderr, "kube-apiserver not found: run scripts/build-kube-apiserver\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_no_drift),
            cmocka_unit_test(test_service_port_changed_by_hand),
            cmocka_unit_test(test_spec_change_is_drift),
            cmocka_unit_test(test_pdb_deleted),
            cmocka_unit_test(test_unmanaged_service),
            cmocka_unit_test(test_extra_labelled_service),
            cmocka_unit_test(test_member_on_other_version),
            cmocka_unit_test(test_pods_sharing_a_zone),
            cmocka_unit_test(test_target_objects),
            cmocka_unit_test(test_forbidden),
            cmocka_unit_test(test_unreachable),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
