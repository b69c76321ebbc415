/*
 * The Kubernetes target's survey of a cluster to take over (spec.adopt,
 * targets/kubernetes-takeover.c), for the legacy aenix-io (cozystack)
 * operator's layout, against a real kube-apiserver with no kubelet and no
 * controllers: the layout's objects are made by tests/harness/layouts.h
 * (its StatefulSet makes no Pods here), and the test writes the member
 * Pods and their status as the StatefulSet controller and the kubelet
 * would. Fast and under the sanitizers, what e2e-kubernetes-takeover-
 * cozystack shows with running members: the operator's Deployment must be
 * scaled to 0 (the refusal says how), the members are found by the
 * operator's labels and reached at their Pods' IPs, its client Service
 * (NAME) is the one gitcd points at its voters, its objects (the resource,
 * the Pods, both Services and the StatefulSet) are listed for the user; a
 * member Pod without --peer-auto-tls (the operator's CA-issued peer TLS)
 * and a resource of the newer Cozystack operator of the same name are
 * refused, each naming why. Without the kube-apiserver binary it is
 * skipped (exit 77).
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

#include "api/spec.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "targets/kubernetes.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "tests/harness/layouts.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NS  "default"
#define OLD "cz"

static kubeapi *api;
static kube_client *admin;
static char *state_dir;
static target *kt;

static const kube_gvr GVR_PODS = {"", "v1", "pods", true};
static const kube_gvr GVR_DEPLOYMENTS = {"apps", "v1", "deployments", true};
static const kube_gvr GVR_CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
static const kube_gvr GVR_V1ALPHA2 = {"etcd-operator.cozystack.io", "v1alpha2", "etcdclusters",
                                      true};

static etcd_cluster *load_cluster(const char *extra)
{
        _cleanup_free_ char *yaml = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n  name: kc\n  namespace: " NS "\n"
                                              "spec:\n  replicas: 3\n  version: \"3.5.16\"\n"
                                              "%s"
                                              "  adopt:\n    from: cozystack\n    name: " OLD "\n",
                                              extra);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        int r = spec_load_buffer("test.yaml", yaml, strlen(yaml), &set, &diags);
        if (r < 0)
                diag_print(&diags, stderr);
        assert_int_equal(r, 0);
        assert_int_equal(set.n, 1);
        etcd_cluster *c = set.items[0];
        set.n = 0;
        cluster_set_release(&set);
        diag_list_release(&diags);
        return c;
}

static void request(const char *method, const char *path, const char *content_type, json_t *body,
                    const char *resource)
{
        int k = kube_request(admin, method, path, content_type, body, method, resource, NS, NULL);
        json_decref(body);
        if (k < 0)
                fail_msg("%s %s: %s", method, path, kube_client_last_error(admin));
}

/* A member Pod as the StatefulSet controller makes it, running as the kubelet reports it. */
static void member_pod(const char *name, const char *ip, bool auto_tls)
{
        json_t *args =
            json_pack("[s, s]", "--name=$(POD_NAME)", "--listen-peer-urls=https://0.0.0.0:2380");
        if (auto_tls)
                json_array_append_new(args, json_string("--peer-auto-tls"));
        else
                json_array_append_new(
                    args, json_string("--peer-cert-file=/etc/etcd/pki/peer/cert/tls.crt"));
        json_t *pod = json_pack(
            "{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s}}, s:{s:s, s:s, s:[{s:s, s:s, s:[s], s:o}]}}",
            "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", NS, "labels",
            "app.kubernetes.io/name", "etcd", "app.kubernetes.io/instance", OLD,
            "app.kubernetes.io/managed-by", "etcd-operator", "spec", "hostname", name, "subdomain",
            OLD "-headless", "containers", "name", "etcd", "image", "quay.io/coreos/etcd:v3.5.16",
            "command", "etcd", "args", args);
        _cleanup_free_ char *path = NULL;
        assert_int_equal(kube_resource_path(&GVR_PODS, NS, NULL, &path), 0);
        request("POST", path, NULL, pod, "pods");
        _cleanup_free_ char *status = xasprintf("/api/v1/namespaces/" NS "/pods/%s/status", name);
        request("PATCH", status, "application/merge-patch+json",
                json_pack("{s:{s:s, s:s}}", "status", "phase", "Running", "podIP", ip),
                "pods/status");
}

static takeover_survey survey(const etcd_cluster *c, int want, char **ret_why)
{
        takeover_survey s = {0};
        char *why = NULL;
        int k = kt->ops->takeover->survey(kt, c, &s, &why);
        if (k != want)
                fail_msg("survey: %d (%s), want %d", k, why ? why : "-", want);
        *ret_why = why;
        return s;
}

static void expect_refusal(const etcd_cluster *c, const char *part)
{
        char *why = NULL;
        (void)survey(c, -EPERM, &why);
        if (!why || !strstr(why, part))
                fail_msg("the refusal does not say \"%s\": %s", part, why ? why : "(none)");
        free(why);
}

static bool listed(const takeover_survey *s, const char *object)
{
        for (size_t i = 0; i < s->n_objects; i++)
                if (streq(s->objects[i], object))
                        return true;
        return false;
}

static void test_survey_cozystack(void **state)
{
        (void)state;
        layout_opts lo = {.name = OLD, .ns = NS, .size = 3, .operator_replicas = 1};
        if (layout_create(admin, LAYOUT_COZYSTACK, &lo) < 0)
                fail_msg("the cozystack layout was not created");
        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
            load_cluster("  tls:\n    provider: none\n    peer:\n      selfSigned: true\n");
        assert_non_null(kt->ops->takeover);

        /* the operator runs: refused, saying how to stop it */
        expect_refusal(c, "kubectl -n etcd-operator-system scale deployment "
                          "etcd-operator-controller-manager --replicas=0");

        /* scaled to 0 (the status as the deployment controller would leave it) */
        _cleanup_free_ char *dep = NULL;
        assert_int_equal(kube_resource_path(&GVR_DEPLOYMENTS, "etcd-operator-system",
                                            "etcd-operator-controller-manager", &dep),
                         0);
        request("PATCH", dep, "application/merge-patch+json",
                json_pack("{s:{s:i}}", "spec", "replicas", 0), "deployments");
        _cleanup_free_ char *dep_status = xasprintf("%s/status", dep);
        request("PATCH", dep_status, "application/merge-patch+json",
                json_pack("{s:{s:i, s:i, s:i, s:i}}", "status", "replicas", 0, "readyReplicas", 0,
                          "availableReplicas", 0, "updatedReplicas", 0),
                "deployments/status");
        expect_refusal(c, "no Pod of EtcdCluster " NS "/" OLD " runs");

        /* its members: found by its labels, reached at their IPs */
        member_pod(OLD "-0", "10.0.0.10", true);
        member_pod(OLD "-1", "10.0.0.11", true);
        member_pod(OLD "-2", "10.0.0.12", true);
        char *why = NULL;
        takeover_survey s = survey(c, 0, &why);
        assert_null(why);
        assert_string_equal(s.endpoints, "http://10.0.0.10:2379,http://10.0.0.11:2379,"
                                         "http://10.0.0.12:2379");
        assert_string_equal(s.service, OLD); /* the client Service, pointed at gitcd's voters */
        assert_int_equal(s.n_objects, 7);
        assert_true(listed(&s, "EtcdCluster " NS "/" OLD));
        assert_true(listed(&s, "Pod " NS "/" OLD "-2"));
        assert_true(listed(&s, "Service " NS "/" OLD));
        assert_true(listed(&s, "Service " NS "/" OLD "-headless"));
        assert_true(listed(&s, "StatefulSet " NS "/" OLD));
        takeover_survey_release(&s);

        /* a member on the operator's CA-issued peer TLS: not taken over */
        member_pod(OLD "-3", "10.0.0.13", false);
        expect_refusal(c, "does not run etcd with --peer-auto-tls");
        assert_int_equal(kube_delete(admin, &GVR_PODS, NS, OLD "-3", NULL), 0);
        int64_t end = now_mono_ms() + 30000;
        json_t *o = NULL;
        while (kube_get(admin, &GVR_PODS, NS, OLD "-3", &o) == 0 && now_mono_ms() < end) {
                json_decref(o);
                o = NULL;
                usleep(200 * 1000);
        }
        s = survey(c, 0, &why);
        takeover_survey_release(&s);

        /* a cluster of the newer Cozystack operator of that name: refused by name */
        _cleanup_free_ char *crds = NULL;
        assert_int_equal(kube_resource_path(&GVR_CRDS, NULL, NULL, &crds), 0);
        request("POST", crds, NULL,
                json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:s, s:s}, s:[{s:s, s:b, "
                          "s:b, s:{s:{s:s, s:b}}}]}}",
                          "apiVersion", "apiextensions.k8s.io/v1", "kind",
                          "CustomResourceDefinition", "metadata", "name",
                          "etcdclusters.etcd-operator.cozystack.io", "spec", "group",
                          "etcd-operator.cozystack.io", "scope", "Namespaced", "names", "plural",
                          "etcdclusters", "singular", "etcdcluster", "kind", "EtcdCluster",
                          "versions", "name", "v1alpha2", "served", true, "storage", true, "schema",
                          "openAPIV3Schema", "type", "object",
                          "x-kubernetes-preserve-unknown-fields", true),
                "customresourcedefinitions");
        _cleanup_free_ char *coll = NULL;
        assert_int_equal(kube_resource_path(&GVR_V1ALPHA2, NS, NULL, &coll), 0);
        end = now_mono_ms() + 60000;
        json_t *l = NULL;
        while (kube_list(admin, &GVR_V1ALPHA2, NS, NULL, &l, NULL) < 0 && now_mono_ms() < end)
                usleep(200 * 1000);
        json_decref(l);
        request("POST", coll, NULL,
                json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i}}", "apiVersion",
                          "etcd-operator.cozystack.io/v1alpha2", "kind", "EtcdCluster", "metadata",
                          "name", OLD, "namespace", NS, "spec", "replicas", 3),
                "etcdclusters");
        expect_refusal(c, "newer Cozystack operator (etcd-operator.cozystack.io/v1alpha2");
}

static int setup(void **state)
{
        (void)state;
        int r = kubeapi_start(&api);
        if (r == -ENOENT) {
                fprintf(stderr, "kube-apiserver not found: skipping\n");
                exit(77);
        }
        assert_int_equal(r, 0);
        admin = kubeapi_client(api, "admin");
        state_dir = xasprintf("%s/gitcd-state", kubeapi_dir(api));
        kube_config *cfg = NULL;
        char *err = NULL;
        if (kube_config_load(kubeapi_kubeconfig(api), "admin", &cfg, &err) < 0)
                fail_msg("kubeconfig: %s", err);
        kubernetes_target_opts o = {.config = cfg, .state_dir = state_dir};
        assert_int_equal(kubernetes_target_new(&o, &kt), 0);
        kube_config_free(cfg);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        target_free(kt);
        kube_client_free(admin);
        kubeapi_free(api);
        free(state_dir);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_survey_cozystack)};
        return cmocka_run_group_tests(tests, setup, teardown);
}
