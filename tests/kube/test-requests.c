/*
 * The pure half of the Kubernetes client: kind -> resource URL mapping,
 * server-side apply request construction, and the messages made from
 * failed responses (RBAC denials, apply conflicts, stale versions), using
 * Status bodies as kube-apiserver sends them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/client.h"
#include "util/xalloc.h"

static void assert_path(const char *api_version, const char *kind, const char *ns, const char *name,
                        const char *want)
{
        _cleanup_free_ char *path = NULL;
        kube_gvr gvr;

        assert_int_equal(kube_gvr_for_kind(api_version, kind, &gvr), 0);
        assert_int_equal(kube_resource_path(&gvr, ns, name, &path), 0);
        assert_string_equal(path, want);
}

static void test_url_mapping(void **state)
{
        kube_gvr gvr;
        char *path = NULL;

        assert_path("v1", "Pod", "db", "etcd-0", "/api/v1/namespaces/db/pods/etcd-0");
        assert_path("v1", "PersistentVolumeClaim", "db", "data-etcd-0",
                    "/api/v1/namespaces/db/persistentvolumeclaims/data-etcd-0");
        assert_path("v1", "Service", "db", "etcd", "/api/v1/namespaces/db/services/etcd");
        assert_path("v1", "Secret", "db", "etcd-tls", "/api/v1/namespaces/db/secrets/etcd-tls");
        assert_path("v1", "Namespace", "ignored", "db", "/api/v1/namespaces/db");
        assert_path("v1", "Namespace", NULL, NULL, "/api/v1/namespaces");
        assert_path("policy/v1", "PodDisruptionBudget", "db", "etcd",
                    "/apis/policy/v1/namespaces/db/poddisruptionbudgets/etcd");
        assert_path("policy/v1beta1", "PodDisruptionBudget", "db", "etcd",
                    "/apis/policy/v1beta1/namespaces/db/poddisruptionbudgets/etcd");
        assert_path("cert-manager.io/v1", "Certificate", "db", "etcd-peer",
                    "/apis/cert-manager.io/v1/namespaces/db/certificates/etcd-peer");
        assert_path("v1", "Pod", NULL, NULL, "/api/v1/pods");

        assert_path("apps/v1", "Deployment", "gitcd", "gitcd",
                    "/apis/apps/v1/namespaces/gitcd/deployments/gitcd");
        assert_path("rbac.authorization.k8s.io/v1", "ClusterRole", NULL, "gitcd",
                    "/apis/rbac.authorization.k8s.io/v1/clusterroles/gitcd");
        assert_int_equal(kube_gvr_for_kind("apps/v1", "StatefulSet", &gvr), -ENOENT);
        assert_int_equal(kube_gvr_for_kind("v1", "pod", &gvr), -ENOENT);
        assert_int_equal(kube_gvr_for_kind("v1", "Pod", &gvr), 0);
        assert_int_equal(kube_resource_path(&gvr, "db", "Bad_Name", &path), -EINVAL);
        assert_int_equal(kube_resource_path(&gvr, "../x", "a", &path), -EINVAL);
        assert_int_equal(kube_resource_path(&gvr, "db", "a?b", &path), -EINVAL);
        assert_null(path);
}

static void test_apply_request(void **state)
{
        json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:i}}", "apiVersion", "policy/v1",
                                "kind", "PodDisruptionBudget", "metadata", "name", "etcd", "labels",
                                "app", "etcd", "spec", "minAvailable", 2);
        char *path = NULL, *body = NULL, *err = NULL;
        json_t *back;

        assert_int_equal(kube_apply_request(obj, "db", NULL, false, false, &path, &body, &err), 0);
        assert_string_equal(path, "/apis/policy/v1/namespaces/db/poddisruptionbudgets/etcd"
                                  "?fieldManager=gitcd");
        back = json_loads(body, 0, NULL);
        assert_true(json_equal(back, obj));
        assert_null(strchr(body, '\n'));
        json_decref(back);
        free(path);
        free(body);

        /* metadata.namespace wins; dry-run and force are query parameters. */
        json_object_set_new(json_object_get(obj, "metadata"), "namespace", json_string("prod"));
        assert_int_equal(
            kube_apply_request(obj, "db", "gitcd test", true, true, &path, &body, &err), 0);
        assert_string_equal(path, "/apis/policy/v1/namespaces/prod/poddisruptionbudgets/etcd"
                                  "?fieldManager=gitcd%20test&force=true&dryRun=All");
        free(path);
        free(body);

        /* A cluster-scoped kind ignores the default namespace. */
        json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", "db");
        assert_int_equal(kube_apply_request(ns, "x", NULL, false, false, &path, &body, &err), 0);
        assert_string_equal(path, "/api/v1/namespaces/db?fieldManager=gitcd");
        free(path);
        free(body);
        json_decref(ns);

        json_object_del(obj, "kind");
        assert_int_equal(kube_apply_request(obj, "db", NULL, false, false, &path, &body, &err),
                         -EINVAL);
        assert_non_null(strstr(err, "kind"));
        free(err);
        json_object_set_new(obj, "kind", json_string("Deployment"));
        assert_int_equal(kube_apply_request(obj, "db", NULL, false, false, &path, &body, &err),
                         -EINVAL);
        assert_non_null(strstr(err, "unknown kind"));
        free(err);
        json_object_set_new(obj, "kind", json_string("PodDisruptionBudget"));
        json_object_del(json_object_get(obj, "metadata"), "namespace");
        assert_int_equal(kube_apply_request(obj, NULL, NULL, false, false, &path, &body, &err),
                         -EINVAL);
        assert_non_null(strstr(err, "no namespace"));
        free(err);
        json_decref(obj);
}

static void expect_status(long status, const char *body, const char *verb, const char *res,
                          const char *ns, int want, const char *needle1, const char *needle2)
{
        _cleanup_free_ char *msg = NULL;

        assert_int_equal(kube_status_error(status, body, verb, res, ns, &msg), want);
        if (!strstr(msg, needle1))
                fail_msg("\"%s\" lacks \"%s\"", msg, needle1);
        if (needle2 && !strstr(msg, needle2))
                fail_msg("\"%s\" lacks \"%s\"", msg, needle2);
}

static void test_status_errors(void **state)
{
        const char *forbidden =
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
            "\"Failure\",\"message\":\"pods \\\"etcd-0\\\" is forbidden: User "
            "\\\"system:serviceaccount:db:gitcd\\\" cannot patch resource \\\"pods\\\" in "
            "API group \\\"\\\" in the namespace \\\"db\\\"\",\"reason\":\"Forbidden\","
            "\"details\":{\"name\":\"etcd-0\",\"kind\":\"pods\"},\"code\":403}";
        const char *conflict =
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
            "\"Failure\",\"message\":\"Apply failed with 1 conflict: conflict with "
            "\\\"kubectl\\\" using v1: .spec.replicas\",\"reason\":\"Conflict\","
            "\"details\":{\"causes\":[{\"reason\":\"FieldManagerConflict\",\"message\":"
            "\"conflict with \\\"kubectl\\\" using v1\",\"field\":\".spec.replicas\"}]},"
            "\"code\":409}";
        const char *exists = "{\"kind\":\"Status\",\"message\":\"pods \\\"x\\\" already "
                             "exists\",\"reason\":\"AlreadyExists\",\"code\":409}";
        const char *gone = "{\"kind\":\"Status\",\"message\":\"too old resource version: 1 "
                           "(42)\",\"reason\":\"Expired\",\"code\":410}";
        const char *invalid = "{\"kind\":\"Status\",\"message\":\"Pod \\\"x\\\" is invalid: "
                              "spec.containers: Required value\",\"reason\":\"Invalid\","
                              "\"code\":422}";

        expect_status(403, forbidden, "patch", "pods", "db", -EACCES,
                      "forbidden: gitcd cannot patch pods in namespace \"db\" (pods \"etcd-0\" "
                      "is forbidden: User \"system:serviceaccount:db:gitcd\"",
                      "); grant it in the Role");
        expect_status(403, forbidden, "list", "namespaces", NULL, -EACCES,
                      "gitcd cannot list namespaces (", "grant it in the ClusterRole");
        expect_status(401, "{\"message\":\"Unauthorized\",\"code\":401}", "get", "pods", "db",
                      -EACCES, "unauthorized", "check the token");
        expect_status(409, conflict, "patch", "pods \"etcd-0\"", "db", -EBUSY,
                      "conflict with \"kubectl\" using v1 at .spec.replicas",
                      "never takes over fields");
        expect_status(409, exists, "create", "pods", "db", -EEXIST, "already exists", NULL);
        expect_status(410, gone, "watch", "pods", "db", -ESTALE, "too old resource version",
                      "list again");
        expect_status(422, invalid, "patch", "pods", "db", -EINVAL, "rejected patch pods",
                      "spec.containers: Required value");
        expect_status(404, "{\"message\":\"pods \\\"x\\\" not found\"}", "get", "pods", "db",
                      -ENOENT, "not found", NULL);
        expect_status(503, "upstream connect error", "get", "pods", "db", -EIO, "HTTP 503",
                      "upstream connect error");
        expect_status(418, NULL, "get", "pods", NULL, -EPROTO, "HTTP 418", NULL);
        /* the server's text is escaped: no terminal control, no forged line */
        expect_status(404, "{\"message\":\"pods \\\"x\\u001b[2J\\nerror: forged\\\" not found\"}",
                      "get", "pods", "db", -ENOENT, "x\\x1b[2J\\nerror: forged", NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_url_mapping),
            cmocka_unit_test(test_apply_request),
            cmocka_unit_test(test_status_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
