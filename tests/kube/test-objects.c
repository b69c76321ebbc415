/*
 * What gitcd writes to Kubernetes is accepted by a real kube-apiserver
 * v1.20.2: every object `gitcd render` produces for every file in
 * examples/ (all dialects), fitted with kube_adapt_object and applied for
 * real with server-side apply, and every object in the deploy/ YAML files. Then the
 * RBAC of deploy/rbac.yaml is checked as the ServiceAccount it binds
 * (context "gitcd"): a dry-run apply of a whole rendered cluster succeeds,
 * in a namespace where the objects exist and in one where they do not
 * (create); objects outside the rules are refused. A user with no
 * permissions (context "limited") is refused with a message naming the
 * verb and the resource.
 *
 * Without cert-manager the server does not serve cert-manager.io, so a
 * Certificate is expected to be refused by the adapt step with a clear
 * message. One apiserver serves every case; the test is skipped (77)
 * without the kube-apiserver binary.
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
#include "render/render.h"
#include "api/spec.h"
#include "api/yaml.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "util/xalloc.h"

static kubeapi *api;
static kube_client *admin;

static char *source_path(const char *rel)
{
        const char *root = getenv("GITCD_SOURCE_ROOT");
        return xasprintf("%s/%s", root ? root : ".", rel);
}

static const char *obj_name(const json_t *o)
{
        return json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
}

static const char *obj_kind(const json_t *o)
{
        return json_string_value(json_object_get(o, "kind"));
}

/* Apply for real (or dry-run) as c; fail with the server's message. */
static void apply_ok(kube_client *c, json_t *obj, bool dry_run)
{
        int k = kube_apply(c, obj, NULL, false, dry_run, NULL);
        if (k < 0)
                fail_msg("%s %s: %s", obj_kind(obj), obj_name(obj), kube_client_last_error(c));
}

/* Every EtcdCluster in examples/ (examples/ci holds CI jobs, not clusters). */
static void load_examples(cluster_set *set)
{
        static const char *const dirs[] = {"examples/quickstart", "examples/full",
                                           "examples/dialects"};
        char *paths[ARRAY_SIZE(dirs)];
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                paths[i] = source_path(dirs[i]);
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_paths(paths, ARRAY_SIZE(dirs), set, &diags), 0);
        diag_list_release(&diags);
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                free(paths[i]);
}

static void test_examples_accepted(void **state)
{
        (void)state;
        cluster_set set = {0};
        int applied = 0, refused = 0;

        load_examples(&set);
        assert_true(set.n >= 6); /* quickstart, full, four dialects */
        for (size_t i = 0; i < set.n; i++) {
                const etcd_cluster *c = set.items[i];
                assert_int_equal(kubeapi_create_namespace(api, c->namespace_), 0);
                _cleanup_(membership_plan_freep) membership_plan *mp =
                    membership_plan_steady(c, "cluster.local");
                json_t *objs = render_cluster(c, mp);
                size_t j;
                json_t *o;
                json_array_foreach(objs, j, o)
                {
                        _cleanup_free_ char *err = NULL;
                        int k = kube_adapt_object(admin, o, &err);
                        if (streq(obj_kind(o), "Certificate")) {
                                /* No cert-manager on this server: a clear refusal. */
                                assert_int_equal(k, -ENOENT);
                                assert_non_null(strstr(err, "does not serve certificates"));
                                assert_non_null(strstr(err, "cert-manager.io"));
                                refused++;
                                continue;
                        }
                        if (k < 0)
                                fail_msg("adapt %s %s: %s", obj_kind(o), obj_name(o), err);
                        apply_ok(admin, o, false);
                        applied++;
                }
                json_decref(objs);
        }
        /* The PDB went in as the version 1.20 serves. */
        json_t *pdb = NULL;
        const kube_gvr v1beta1 = {"policy", "v1beta1", "poddisruptionbudgets", true};
        assert_int_equal(kube_get(admin, &v1beta1, "default", "quickstart", &pdb), 0);
        json_decref(pdb);
        assert_true(applied > 20);
        assert_true(refused > 0);
        cluster_set_release(&set);
}

/* Every document of the deploy/ YAML files, in the order of kustomization.yaml. */
static void load_deploy(json_t *out)
{
        static const char *const files[] = {"namespace.yaml", "serviceaccount.yaml", "rbac.yaml",
                                            "pvc.yaml", "deployment.yaml"};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_free_ char *rel = xasprintf("deploy/%s", files[i]);
                _cleanup_free_ char *path = source_path(rel);
                ydoc_list docs = {0};
                diag_list diags = DIAG_LIST_INIT;
                if (yaml_load_file(path, NULL, &docs, &diags) < 0)
                        fail_msg("cannot load %s", path);
                for (size_t j = 0; j < docs.n; j++)
                        if (docs.docs[j].root)
                                json_array_append_new(out, ynode_to_json(docs.docs[j].root));
                ydoc_list_release(&docs);
                diag_list_release(&diags);
        }
}

static void test_deploy_accepted(void **state)
{
        (void)state;
        json_t *objs = json_array();
        load_deploy(objs);
        assert_int_equal(json_array_size(objs), 6);
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                _cleanup_free_ char *err = NULL;
                if (kube_adapt_object(admin, o, &err) < 0)
                        fail_msg("adapt %s: %s", obj_name(o), err);
                apply_ok(admin, o, false);
        }
        json_decref(objs);

        /* What the server stored is what the files say. */
        json_t *dep = NULL;
        const kube_gvr deployments = {"apps", "v1", "deployments", true};
        assert_int_equal(kube_get(admin, &deployments, "gitcd", "gitcd", &dep), 0);
        json_t *spec = json_object_get(dep, "spec");
        assert_int_equal(json_integer_value(json_object_get(spec, "replicas")), 1);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(spec, "strategy"), "type")),
            "Recreate");
        json_t *pod = json_object_get(json_object_get(spec, "template"), "spec");
        json_t *ct = json_array_get(json_object_get(pod, "containers"), 0);
        assert_true(json_is_true(
            json_object_get(json_object_get(ct, "securityContext"), "readOnlyRootFilesystem")));
        json_t *vols = json_object_get(pod, "volumes");
        bool have_state = false;
        json_array_foreach(vols, i, o)
        {
                json_t *pvc = json_object_get(o, "persistentVolumeClaim");
                if (pvc &&
                    streq_ptr(json_string_value(json_object_get(pvc, "claimName")), "gitcd-state"))
                        have_state = true;
                json_t *secret = json_object_get(o, "secret");
                if (secret)
                        assert_int_equal(json_integer_value(json_object_get(secret, "defaultMode")),
                                         0440);
        }
        assert_true(have_state);
        json_decref(dep);
}

/* The quickstart cluster, moved to namespace ns. */
static json_t *quickstart_in(const char *ns)
{
        _cleanup_free_ char *path = source_path("examples/quickstart/etcd.yaml");
        char *paths[] = {path};
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_paths(paths, 1, &set, &diags), 0);
        diag_list_release(&diags);
        assert_int_equal(set.n, 1);
        etcd_cluster *c = set.items[0];
        free(c->namespace_);
        c->namespace_ = xstrdup(ns);
        _cleanup_(membership_plan_freep) membership_plan *mp =
            membership_plan_steady(c, "cluster.local");
        json_t *objs = render_cluster(c, mp);
        cluster_set_release(&set);
        return objs;
}

/*
 * The authorizer learns of a new ClusterRoleBinding through a watch: wait
 * until the binding is in force (bounded; no fixed sleep decides).
 */
static void wait_rbac_in_force(kube_client *c)
{
        const kube_gvr pods = {"", "v1", "pods", true};
        for (int i = 0; i < 300; i++) {
                json_t *items = NULL;
                int k = kube_list(c, &pods, "default", NULL, &items, NULL);
                json_decref(items);
                if (k != -EACCES)
                        return;
                usleep(100 * 1000);
        }
        fail_msg("the gitcd ServiceAccount was never granted deploy/rbac.yaml's rules");
}

static void test_rbac_grants_gitcd(void **state)
{
        (void)state;
        kube_client *gitcd = kubeapi_client(api, "gitcd");
        wait_rbac_in_force(gitcd);
        assert_int_equal(kubeapi_create_namespace(api, "rbac-fresh"), 0);
        /* default: the objects exist (patch); rbac-fresh: they do not (create). */
        static const char *const namespaces[] = {"default", "rbac-fresh"};
        for (size_t n = 0; n < ARRAY_SIZE(namespaces); n++) {
                json_t *objs = quickstart_in(namespaces[n]);
                size_t i;
                json_t *o;
                json_array_foreach(objs, i, o)
                {
                        _cleanup_free_ char *err = NULL;
                        if (kube_adapt_object(gitcd, o, &err) < 0)
                                fail_msg("adapt as gitcd: %s", err);
                        apply_ok(gitcd, o, true);
                }
                json_decref(objs);
        }
        /* Nothing was written by the dry runs. */
        json_t *svc = NULL;
        const kube_gvr services = {"", "v1", "services", true};
        assert_int_equal(kube_get(admin, &services, "rbac-fresh", "quickstart", &svc), -ENOENT);

        /* What gitcd reads and deletes. */
        const kube_gvr pods = {"", "v1", "pods", true};
        json_t *items = NULL;
        assert_int_equal(
            kube_list(gitcd, &pods, "default", LABEL_CLUSTER "=quickstart", &items, NULL), 0);
        assert_int_equal(json_array_size(items), 3);
        json_decref(items);

        /* Outside the rules: refused. */
        const kube_gvr configmaps = {"", "v1", "configmaps", true};
        assert_int_equal(kube_list(gitcd, &configmaps, "default", NULL, &items, NULL), -EACCES);
        json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", "gitcd-may-not");
        assert_int_equal(kube_apply(gitcd, ns, NULL, false, true, NULL), -EACCES);
        json_decref(ns);
        kube_client_free(gitcd);
}

static void test_rbac_limited_refused(void **state)
{
        (void)state;
        kube_client *limited = kubeapi_client(api, "limited");
        json_t *objs = quickstart_in("default");
        json_t *svc = json_array_get(objs, 0);
        assert_string_equal(obj_kind(svc), "Service");
        assert_int_equal(kube_apply(limited, svc, NULL, false, true, NULL), -EACCES);
        const char *msg = kube_client_last_error(limited);
        assert_non_null(strstr(msg, "patch"));
        assert_non_null(strstr(msg, "services"));
        json_decref(objs);
        kube_client_free(limited);
}

static int setup(void **state)
{
        (void)state;
        if (kubeapi_start(&api) < 0)
                return -1;
        admin = kubeapi_client(api, "admin");
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        kube_client_free(admin);
        kubeapi_free(api);
        return 0;
}

int main(void)
{
        _cleanup_free_ char *bin = kubeapi_find_binary();
        if (!bin) {
                fprintf(stderr, "kube-apiserver not found: run scripts/build-kube-apiserver\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_examples_accepted),
            cmocka_unit_test(test_deploy_accepted),
            cmocka_unit_test(test_rbac_grants_gitcd),
            cmocka_unit_test(test_rbac_limited_refused),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
