/*
 * The Kubernetes client against a real kube-apiserver v1.20.2 on loopback,
 * beside a real etcd: discovery (policy/v1beta1 is the PodDisruptionBudget
 * version of 1.20), server-side apply twice (the second changes nothing),
 * dry run, a field owned by another manager, list by label, watch from a
 * list's resourceVersion, delete, an RBAC denial with a token that has
 * no permissions, the identity of the "gitcd" context, and objects and
 * clients surviving an apiserver restart (kubeapi_pause/kubeapi_resume).
 *
 * The client is configured from a real kubeconfig file (CA as
 * certificate-authority-data, a bearer token). One apiserver, started by
 * tests/harness/kubeapi.c, serves every case. Without the kube-apiserver
 * binary ($GITCD_KUBE_APISERVER or ~/.cache/gitcd/kube/v1.20.2/kube-apiserver,
 * built by scripts/build-kube-apiserver) the test is skipped (exit 77).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "kube/adapt.h"
#include "kube/client.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define NS KUBEAPI_NAMESPACE

static kubeapi *api;
static kube_client *admin, *limited;

static int setup(void **state)
{
        int r = kubeapi_start(&api);

        if (r == -ENOENT) {
                /* Checked in main(); only a race with a removed binary gets here. */
                fail_msg("kube-apiserver or etcd 3.5.16 missing");
        }
        assert_int_equal(r, 0);
        admin = kubeapi_client(api, "admin");
        limited = kubeapi_client(api, "limited");
        return 0;
}

static int teardown(void **state)
{
        kube_client_free(admin);
        kube_client_free(limited);
        kubeapi_free(api);
        return 0;
}

static json_t *config_map(const char *name, const char *label, const char *value)
{
        json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s, s:{}}, s:{s:s}}", "apiVersion", "v1",
                               "kind", "ConfigMap", "metadata", "name", name, "namespace", NS,
                               "labels", "data", "key", value);
        if (label)
                json_object_set_new(json_object_get(json_object_get(cm, "metadata"), "labels"),
                                    "app", json_string(label));
        return cm;
}

static const char *rv_of(const json_t *obj)
{
        return json_string_value(
            json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

static void test_discovery(void **state)
{
        char *v = NULL;

        assert_int_equal(kube_preferred_version(admin, "policy", "poddisruptionbudgets", &v), 0);
        assert_string_equal(v, "v1beta1");
        free(v);
        assert_int_equal(kube_preferred_version(admin, "", "pods", &v), 0);
        assert_string_equal(v, "v1");
        free(v);
        assert_int_equal(kube_has_resource(admin, "policy", "v1beta1", "poddisruptionbudgets"), 1);
        assert_int_equal(kube_has_resource(admin, "cert-manager.io", "v1", "certificates"), 0);
        /* a rendered policy/v1 PodDisruptionBudget becomes policy/v1beta1 here */
        json_t *pdb = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "policy/v1", "kind",
                                "PodDisruptionBudget", "metadata", "name", "etcd");
        char *err = NULL;
        assert_int_equal(kube_adapt_object(admin, pdb, &err), 0);
        assert_string_equal(json_string_value(json_object_get(pdb, "apiVersion")),
                            "policy/v1beta1");
        json_object_set_new(pdb, "apiVersion", json_string("cert-manager.io/v1"));
        json_object_set_new(pdb, "kind", json_string("Certificate"));
        assert_int_equal(kube_adapt_object(admin, pdb, &err), -ENOENT);
        assert_non_null(strstr(err, "does not serve certificates in group cert-manager.io"));
        free(err);
        json_decref(pdb);
        /* kube-apiserver offers HTTP/2 over TLS (ALPN). */
        assert_int_equal(kube_client_http_version(admin), 2);
}

static void test_apply_idempotent(void **state)
{
        json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", NS);
        json_t *svc =
            json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:i, s:s}], s:{s:s}}}",
                      "apiVersion", "v1", "kind", "Service", "metadata", "name", "etcd", "labels",
                      "app", "etcd", "spec", "clusterIP", "None", "ports", "name", "client", "port",
                      2379, "protocol", "TCP", "selector", "app", "etcd");
        json_t *pdb =
            json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:{s:{s:s}}}}", "apiVersion", "policy/v1beta1",
                      "kind", "PodDisruptionBudget", "metadata", "name", "etcd", "spec",
                      "minAvailable", 2, "selector", "matchLabels", "app", "etcd");
        json_t *first = NULL, *second = NULL, *dry = NULL;
        _cleanup_free_ char *rv1 = NULL;

        assert_int_equal(kube_apply(admin, ns, NULL, false, false, NULL), 0);
        if (kube_apply(admin, svc, NULL, false, false, &first) < 0)
                fail_msg("%s", kube_client_last_error(admin));
        rv1 = xstrdup(rv_of(first));
        assert_int_equal(kube_apply(admin, svc, NULL, false, false, &second), 0);
        /* Nothing changed: the server kept the same resourceVersion. */
        assert_string_equal(rv_of(second), rv1);
        json_decref(second);

        /* A dry run of a change returns the changed object without storing it. */
        json_object_set_new(json_object_get(json_object_get(svc, "metadata"), "labels"), "tier",
                            json_string("db"));
        assert_int_equal(kube_apply(admin, svc, NULL, false, true, &dry), 0);
        assert_string_equal(
            json_string_value(json_object_get(
                json_object_get(json_object_get(dry, "metadata"), "labels"), "tier")),
            "db");
        assert_int_equal(kube_apply(admin, svc, NULL, false, false, NULL), 0);
        json_decref(dry);

        if (kube_apply(admin, pdb, NULL, false, false, NULL) < 0)
                fail_msg("%s", kube_client_last_error(admin));
        json_decref(first);
        json_decref(ns);
        json_decref(svc);
        json_decref(pdb);
}

/* Every namespaced core kind gitcd renders round-trips through its URL mapping. */
static void test_rendered_kinds(void **state)
{
        json_t *objs[] = {
            json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod",
                      "metadata", "name", "etcd-0", "spec", "containers", "name", "etcd", "image",
                      "quay.io/coreos/etcd:v3.5.16"),
            json_pack("{s:s, s:s, s:{s:s}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion", "v1", "kind",
                      "PersistentVolumeClaim", "metadata", "name", "data-etcd-0", "spec",
                      "accessModes", "ReadWriteOnce", "resources", "requests", "storage", "1Gi"),
            json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "Secret",
                      "metadata", "name", "etcd-tls", "stringData", "ca.crt", "x"),
        };

        for (size_t i = 0; i < ARRAY_SIZE(objs); i++) {
                const char *kind = json_string_value(json_object_get(objs[i], "kind"));
                const char *name = json_string_value(
                    json_object_get(json_object_get(objs[i], "metadata"), "name"));
                json_t *got = NULL;
                kube_gvr gvr;

                if (kube_apply(admin, objs[i], NULL, false, false, NULL) < 0)
                        fail_msg("%s: %s", kind, kube_client_last_error(admin));
                assert_int_equal(kube_gvr_for_kind("v1", kind, &gvr), 0);
                assert_int_equal(kube_get(admin, &gvr, NS, name, &got), 0);
                assert_string_equal(json_string_value(json_object_get(got, "kind")), kind);
                json_decref(got);
                json_decref(objs[i]);
        }
}

static void test_conflict(void **state)
{
        json_t *theirs = config_map("shared", NULL, "theirs");
        json_t *ours = config_map("shared", NULL, "ours");
        const char *msg;

        assert_int_equal(kube_apply(admin, theirs, "other-tool", false, false, NULL), 0);
        assert_int_equal(kube_apply(admin, ours, NULL, false, false, NULL), -EBUSY);
        msg = kube_client_last_error(admin);
        if (!strstr(msg, "\"other-tool\"") || !strstr(msg, ".data.key") ||
            !strstr(msg, "in namespace \"" NS "\""))
                fail_msg("unclear conflict message: %s", msg);
        printf("# %s\n", msg);
        json_decref(theirs);
        json_decref(ours);
}

struct seen {
        char *name;
        char *type;
};

static bool always(void)
{
        return true;
}

static int on_event(const char *type, const json_t *object, void *userdata)
{
        struct seen *s = userdata;
        const char *name =
            json_string_value(json_object_get(json_object_get(object, "metadata"), "name"));

        if (streq(type, "BOOKMARK") || !streq_ptr(name, "watched"))
                return 0;
        s->type = xstrdup(type);
        return 1;
}

static void test_list_watch_delete(void **state)
{
        kube_gvr cms = {"", "v1", "configmaps", true};
        json_t *a = config_map("labelled-a", "listed", "1");
        json_t *b = config_map("labelled-b", "listed", "2");
        json_t *c = config_map("unlabelled", NULL, "3");
        json_t *w = config_map("watched", "listed", "1");
        json_t *items = NULL, *obj = NULL;
        _cleanup_free_ char *rv = NULL;
        struct seen seen = {0};

        assert_int_equal(kube_apply(admin, a, NULL, false, false, NULL), 0);
        assert_int_equal(kube_apply(admin, b, NULL, false, false, NULL), 0);
        assert_int_equal(kube_apply(admin, c, NULL, false, false, NULL), 0);
        assert_int_equal(kube_list(admin, &cms, NS, "app=listed", &items, &rv), 0);
        assert_int_equal(json_array_size(items), 2);
        assert_true(strlen(rv) > 0);
        json_decref(items);

        /* A change after the list arrives through a watch from the list's version. */
        assert_int_equal(kube_apply(admin, w, NULL, false, false, NULL), 0);
        assert_int_equal(kube_watch(admin, &cms, NS, "app=listed", rv, 30, on_event, &seen), 1);
        assert_string_equal(seen.type, "ADDED");
        free(seen.type);
        seen.type = NULL;

        /* kube_watch_for: the same change ends it at once; with nothing new, its time runs out */
        assert_int_equal(kube_watch_for(admin, &cms, NS, "app=listed", rv, 30000, on_event, &seen),
                         1);
        assert_string_equal(seen.type, "ADDED");
        free(seen.type);
        seen.type = NULL;
        json_t *now_items = NULL;
        _cleanup_free_ char *now_rv = NULL;
        assert_int_equal(kube_list(admin, &cms, NS, "app=listed", &now_items, &now_rv), 0);
        json_decref(now_items);
        assert_int_equal(
            kube_watch_for(admin, &cms, NS, "app=listed", now_rv, 300, on_event, &seen), 0);
        assert_null(seen.type);
        assert_string_equal(kube_client_last_error(admin), "");
        /* and the client is usable right after */
        assert_int_equal(kube_get(admin, &cms, NS, "labelled-b", &obj), 0);
        json_decref(obj);
        obj = NULL;
        /* an interrupt ends a long watch_for with nothing new (else the test's
         * timeout would end it), and the client is usable after it too */
        kube_client_set_interrupt(admin, always);
        assert_int_equal(
            kube_watch_for(admin, &cms, NS, "app=listed", now_rv, 600000, on_event, &seen), 0);
        assert_null(seen.type);
        kube_client_set_interrupt(admin, NULL);
        assert_int_equal(kube_get(admin, &cms, NS, "labelled-b", &obj), 0);
        json_decref(obj);
        obj = NULL;

        assert_int_equal(kube_delete(admin, &cms, NS, "labelled-a", "Background"), 0);
        assert_int_equal(kube_get(admin, &cms, NS, "labelled-a", &obj), -ENOENT);
        assert_int_equal(kube_delete(admin, &cms, NS, "labelled-a", "Foreground"), -ENOENT);
        json_decref(a);
        json_decref(b);
        json_decref(c);
        json_decref(w);
}

static void test_rbac_denial(void **state)
{
        json_t *cm = config_map("denied", NULL, "x");
        const char *msg;

        assert_int_equal(kube_apply(limited, cm, NULL, false, false, NULL), -EACCES);
        msg = kube_client_last_error(limited);
        if (!strstr(msg, "forbidden: gitcd cannot patch configmaps \"denied\" in namespace "
                         "\"" NS "\"") ||
            !strstr(msg, "User \"limited\"") || !strstr(msg, "grant it in the Role"))
                fail_msg("unclear RBAC message: %s", msg);
        assert_null(strstr(msg, "limited-token"));
        printf("# %s\n", msg);
        json_decref(cm);
}

/* The gitcd context authenticates as gitcd's ServiceAccount (no RBAC objects here yet). */
static void test_gitcd_identity(void **state)
{
        kube_client *gitcd = kubeapi_client(api, "gitcd");
        kube_gvr pods = {"", "v1", "pods", true};
        json_t *items = NULL;

        assert_int_equal(kube_list(gitcd, &pods, NS, NULL, &items, NULL), -EACCES);
        assert_non_null(
            strstr(kube_client_last_error(gitcd), "User \"system:serviceaccount:gitcd:gitcd\""));
        kube_client_free(gitcd);
}

/* Objects survive an apiserver restart on the same port; clients reconnect. */
static void test_pause_resume(void **state)
{
        kube_gvr cms = {"", "v1", "configmaps", true};
        json_t *cm = config_map("survivor", NULL, "1"), *got = NULL;

        assert_int_equal(kube_apply(admin, cm, NULL, false, false, NULL), 0);
        kubeapi_pause(api);
        assert_int_equal(kube_get(admin, &cms, NS, "survivor", &got), -EIO);
        kubeapi_resume(api);
        assert_int_equal(kube_get(admin, &cms, NS, "survivor", &got), 0);
        json_decref(got);
        json_decref(cm);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_discovery),         cmocka_unit_test(test_apply_idempotent),
            cmocka_unit_test(test_rendered_kinds),    cmocka_unit_test(test_conflict),
            cmocka_unit_test(test_list_watch_delete), cmocka_unit_test(test_rbac_denial),
            cmocka_unit_test(test_gitcd_identity),    cmocka_unit_test(test_pause_resume),
        };

        char *bin = kubeapi_find_binary();

        if (!bin) {
                printf("skipped: no kube-apiserver (set GITCD_KUBE_APISERVER or run "
                       "scripts/build-kube-apiserver to build "
                       "~/.cache/gitcd/kube/v1.20.2/kube-apiserver)\n");
                return 77;
        }
        free(bin);
        if (!harness_have_etcd("3.5.16")) {
                printf("skipped: no etcd 3.5.16 binary\n");
                return 77;
        }
        return cmocka_run_group_tests(tests, setup, teardown);
}
