/*
 * The Kubernetes target end to end: the real `gitcd` binary against a real
 * kube-apiserver v1.20.2 (beside its own etcd), with the test suite's node
 * simulator playing kubelet and scheduler (tests/harness/kubeapi.h), so
 * member Pods really run etcd 3.5.16 on their own loopback addresses and
 * their DNS names resolve. gitcd runs as the ServiceAccount deploy/rbac.yaml
 * binds, with exactly those permissions.
 *
 * In order, on one cluster: bootstrap 3 (all at once, a static initial
 * cluster; Pods, PVCs, Services and a policy/v1beta1 PodDisruptionBudget,
 * all accepted by the server; every member labelled a voter); scale to
 * 5 (learners, promoted members relabelled as voters) and back to 3 with every written key read back and the PDB following
 * the voter count; a member Pod deleted (recreated, same member ID); a
 * member's PVC lost (member replaced, quorum kept); the API server stopped
 * and restarted while `gitcd run` scales up (gitcd resumes and converges).
 * Then a cluster with tls.provider auto (gitcd's CA, certificates in
 * Secrets, members reached over TLS by their DNS names) and, on a third
 * cluster, gitcd without permissions: a clear error naming
 * what is forbidden, nothing half-applied, and the same apply going through
 * once a RoleBinding grants what deploy/rbac.yaml grants.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube/client.h"
#include "api/yaml.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NS      "default"
#define CLUSTER "kc"
#define VERSION "3.5.16"
#define NODE    "node-1"

static kubeapi *api;
static nodesim *sim;
static kube_client *admin;
static kube_lab *lab; /* api, sim, admin and root are its */
static e2e *env;
static char *root;

static const kube_gvr pods = {"", "v1", "pods", true};
static const kube_gvr pvcs = {"", "v1", "persistentvolumeclaims", true};
static const kube_gvr services = {"", "v1", "services", true};
static const kube_gvr pdbs = {"policy", "v1beta1", "poddisruptionbudgets", true};

/* ---- helpers ------------------------------------------------------------ */

static void write_cluster(e2e *e, const char *name, int replicas)
{
        e2e_write_cluster(e, "cluster.yaml", name, replicas, VERSION);
}

/* `gitcd apply --target kubernetes` as the given kubeconfig context. */
static int kube_apply_as(e2e *e, const char *context, char **ret_stderr)
{
        const char *args[] = {
            "apply",     "-q",       "--source",   e->source,      "--timeout",
            "240s",      "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(api),
            "--context", context,    NULL};
        return e2e_runv(e, NULL, ret_stderr, args);
}

static void apply_ok(e2e *e)
{
        char *err = NULL;
        int k = kube_apply_as(e, "gitcd", &err);
        if (k != 0)
                fail_msg("gitcd apply exited %d: %s", k, err);
        free(err);
}

static json_t *list(const kube_gvr *gvr, const char *cluster)
{
        json_t *items = NULL;
        _cleanup_free_ char *sel = xasprintf("gitcd.io/cluster=%s", cluster);
        if (kube_list(admin, gvr, NS, sel, &items, NULL) < 0)
                fail_msg("list %s: %s", gvr->resource, kube_client_last_error(admin));
        return items;
}

static size_t count(const kube_gvr *gvr, const char *cluster)
{
        json_t *items = list(gvr, cluster);
        size_t n = json_array_size(items);
        json_decref(items);
        return n;
}

/* A deleted PVC lingers until the node lets go of it (pvc-protection): wait for the count. */
static void assert_count_soon(const kube_gvr *gvr, const char *cluster, size_t n)
{
        int64_t end = now_mono_ms() + 30 * 1000;
        size_t got;
        while ((got = count(gvr, cluster)) != n && now_mono_ms() < end)
                usleep(200 * 1000);
        if (got != n)
                fail_msg("%zu %s for %s, want %zu", got, gvr->resource, cluster, n);
}

static const char *meta_str(const json_t *o, const char *key)
{
        return json_string_value(json_object_get(json_object_get(o, "metadata"), key));
}

static json_t *get(const kube_gvr *gvr, const char *name)
{
        json_t *o = NULL;
        return kube_get(admin, gvr, NS, name, &o) == 0 ? o : NULL;
}

static uint64_t member_id(e2e *e, const char *member)
{
        etcd_members *l = e2e_members(e, CLUSTER);
        uint64_t id = 0;
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->members[i].name, member))
                        id = l->members[i].id;
        etcd_members_free(l);
        return id;
}

static long pdb_max_unavailable(void)
{
        json_t *pdb = get(&pdbs, CLUSTER);
        assert_non_null(pdb);
        long v = (long)json_integer_value(
            json_object_get(json_object_get(pdb, "spec"), "maxUnavailable"));
        json_decref(pdb);
        return v;
}

/* Every Pod of the cluster runs on the simulated node, Ready. */
static void assert_pods_ready(size_t n)
{
        json_t *items = list(&pods, CLUSTER);
        size_t i;
        json_t *p;
        assert_int_equal(json_array_size(items), n);
        json_array_foreach(items, i, p)
        {
                const char *node =
                    json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName"));
                assert_string_equal(node ? node : "", NODE);
                bool ready = false;
                size_t j;
                json_t *cond;
                json_array_foreach(json_object_get(json_object_get(p, "status"), "conditions"), j,
                                   cond)
                {
                        if (streq_ptr(json_string_value(json_object_get(cond, "type")), "Ready"))
                                ready = streq_ptr(
                                    json_string_value(json_object_get(cond, "status")), "True");
                }
                if (!ready)
                        fail_msg("Pod %s is not Ready", meta_str(p, "name"));
                /* promoted learners are relabelled: the client Service and PDB select voters */
                const char *role = json_string_value(json_object_get(
                    json_object_get(json_object_get(p, "metadata"), "labels"), "gitcd.io/role"));
                if (!streq_ptr(role, "voter"))
                        fail_msg("Pod %s has role %s", meta_str(p, "name"), role ? role : "(none)");
        }
        json_decref(items);
}

static void put_keys(e2e *e, const char *prefix, int n)
{
        etcd_client *c = e2e_client(e, CLUSTER);
        for (int i = 0; i < n; i++) {
                char key[64];
                snprintf(key, sizeof(key), "%s/%03d", prefix, i);
                assert_int_equal(etcd_put(c, key, key, strlen(key), NULL), 0);
        }
        etcd_client_free(c);
}

static void check_keys(e2e *e, const char *prefix, int n)
{
        etcd_client *c = e2e_client(e, CLUSTER);
        etcd_kv_list *l = NULL;
        _cleanup_free_ char *p = xasprintf("%s/", prefix);
        assert_int_equal(etcd_get(c, p, true, &l), 0);
        assert_int_equal(l->n, (size_t)n);
        etcd_kv_list_free(l);
        etcd_client_free(c);
}

static bool wait_gone(const kube_gvr *gvr, const char *name, int timeout_s)
{
        int64_t end = now_mono_ms() + timeout_s * 1000;
        while (now_mono_ms() < end) {
                json_t *o = get(gvr, name);
                if (!o)
                        return true;
                json_decref(o);
                usleep(200 * 1000);
        }
        return false;
}

/* ---- the cases ---------------------------------------------------------- */

static void test_bootstrap(void **state)
{
        (void)state;
        write_cluster(env, CLUSTER, 3);
        apply_ok(env);
        e2e_assert_voters(env, CLUSTER, 3);
        assert_pods_ready(3);
        assert_int_equal(count(&pvcs, CLUSTER), 3);
        json_t *headless = get(&services, CLUSTER "-headless");
        json_t *client = get(&services, CLUSTER);
        assert_non_null(headless);
        assert_non_null(client);
        json_decref(headless);
        json_decref(client);
        /* policy/v1 is rendered; a 1.20 server gets policy/v1beta1 */
        assert_int_equal(pdb_max_unavailable(), 1);
        put_keys(env, "boot", 20);
        /* one static initial cluster: no MemberAdd, no promotion */
        assert_int_equal(e2e_audit_count(env, CLUSTER, "member.bootstrap"), 1);
        assert_int_equal(e2e_audit_count(env, CLUSTER, "member.add-learner"), 0);
        assert_int_equal(e2e_audit_count(env, CLUSTER, "member.promote"), 0);
        /* a second apply changes nothing */
        apply_ok(env);
        assert_int_equal(e2e_audit_count(env, CLUSTER, "member.remove"), 0);
        check_keys(env, "boot", 20);
}

/*
 * gitcd debug bundle of a cluster on Kubernetes: each member's status and
 * metrics through etcd, and its log from the API server's pods/log (what
 * the RBAC file grants), nothing asked of a machine.
 */
static void test_bundle(void **state)
{
        (void)state;
        _cleanup_free_ char *out = xasprintf("%s/kc.tar.gz", env->root);
        const char *args[] = {
            "debug",      "bundle",       NS "/" CLUSTER,          "-o",        out,     "--target",
            "kubernetes", "--kubeconfig", kubeapi_kubeconfig(api), "--context", "gitcd", NULL};
        char *printed = NULL, *err = NULL;
        int k = e2e_runv(env, &printed, &err, args);
        if (k != 0)
                fail_msg("gitcd debug bundle exited %d: %s", k, err);
        assert_non_null(strstr(printed, out));
        free(printed);
        free(err);
        _cleanup_free_ char *list = e2e_sh("tar -tzf '%s'", out);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *st = xasprintf("/members/" CLUSTER "-%d/status.json\n", i);
                _cleanup_free_ char *log = xasprintf("/members/" CLUSTER "-%d/log.txt\n", i);
                if (!strstr(list, st) || !strstr(list, log)) {
                        fprintf(stderr, "the bundle holds:\n%s", list);
                        fail_msg("member %d's status or log is not in the bundle", i);
                }
        }
        assert_non_null(strstr(list, "/README.txt\n"));
        assert_null(strstr(list, "/error.txt\n"));
        /* the Pod's log, as the node simulator keeps it for pods/log: etcd's own lines */
        _cleanup_free_ char *log =
            e2e_sh("tar -xzOf '%s' --wildcards '*/members/" CLUSTER "-0/log.txt'", out);
        assert_non_null(strstr(log, "\"msg\""));
        _cleanup_free_ char *status =
            e2e_sh("tar -xzOf '%s' --wildcards '*/members/" CLUSTER "-0/status.json'", out);
        assert_non_null(strstr(status, "\"raftIndex\""));
}

static void test_scale(void **state)
{
        (void)state;
        write_cluster(env, CLUSTER, 5);
        apply_ok(env);
        e2e_assert_voters(env, CLUSTER, 5);
        assert_pods_ready(5);
        assert_int_equal(count(&pvcs, CLUSTER), 5);
        /* later changes are learners */
        assert_int_equal(e2e_audit_count(env, CLUSTER, "member.add-learner"), 2);
        assert_int_equal(pdb_max_unavailable(), 2);
        put_keys(env, "five", 20);

        write_cluster(env, CLUSTER, 3);
        apply_ok(env);
        e2e_assert_voters(env, CLUSTER, 3);
        assert_pods_ready(3);
        /* removed members lose their PVCs too */
        assert_count_soon(&pvcs, CLUSTER, 3);
        assert_int_equal(pdb_max_unavailable(), 1);
        check_keys(env, "boot", 20);
        check_keys(env, "five", 20);
}

static void test_pod_deleted(void **state)
{
        (void)state;
        uint64_t id = member_id(env, CLUSTER "-1");
        assert_true(id != 0);
        json_t *old = get(&pods, CLUSTER "-1");
        assert_non_null(old);
        _cleanup_free_ char *old_uid = xstrdup(meta_str(old, "uid"));
        json_decref(old);
        int removes = e2e_audit_count(env, CLUSTER, "member.remove");

        assert_int_equal(kube_delete(admin, &pods, NS, CLUSTER "-1", NULL), 0);
        assert_true(wait_gone(&pods, CLUSTER "-1", 60));
        apply_ok(env);

        json_t *now = get(&pods, CLUSTER "-1");
        assert_non_null(now);
        assert_string_not_equal(meta_str(now, "uid"), old_uid);
        json_decref(now);
        assert_pods_ready(3);
        e2e_assert_voters(env, CLUSTER, 3);
        /* the same member came back with its data: same ID, nothing removed */
        assert_true(member_id(env, CLUSTER "-1") == id);
        assert_int_equal(e2e_audit_count(env, CLUSTER, "member.remove"), removes);
        check_keys(env, "boot", 20);
}

static void test_pvc_lost(void **state)
{
        (void)state;
        uint64_t id = member_id(env, CLUSTER "-2");
        assert_true(id != 0);
        /* the node and its disk are gone: the Pod and the claim both go */
        assert_int_equal(kube_delete(admin, &pvcs, NS, "data-" CLUSTER "-2", NULL), 0);
        assert_int_equal(kube_delete(admin, &pods, NS, CLUSTER "-2", NULL), 0);
        assert_true(wait_gone(&pods, CLUSTER "-2", 60));
        assert_true(wait_gone(&pvcs, "data-" CLUSTER "-2", 60));

        apply_ok(env);
        e2e_assert_voters(env, CLUSTER, 3);
        assert_pods_ready(3);
        assert_int_equal(member_id(env, CLUSTER "-2"), 0);
        json_t *gone = get(&pods, CLUSTER "-2");
        assert_null(gone);
        assert_count_soon(&pvcs, CLUSTER, 3);
        assert_true(e2e_audit_count(env, CLUSTER, "member.remove") >= 1);
        check_keys(env, "boot", 20);
        check_keys(env, "five", 20);
}

static void test_apiserver_restart(void **state)
{
        (void)state;
        write_cluster(env, CLUSTER, 5);
        const char *const args[] = {
            "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(api), "--context",
            "gitcd",    NULL};
        pid_t d = e2e_start_daemon(env, args);
        /* stop the API server as soon as the scale-up has started */
        int64_t end = now_mono_ms() + 120 * 1000;
        while (count(&pods, CLUSTER) < 4 && now_mono_ms() < end)
                usleep(100 * 1000);
        assert_true(count(&pods, CLUSTER) >= 4);
        kubeapi_pause(api);
        sleep(4);
        kubeapi_resume(api);
        assert_true(e2e_wait_ready(env, CLUSTER, 5, 240));
        assert_int_equal(kill(d, SIGTERM), 0);
        int status = 0;
        assert_int_equal(waitpid(d, &status, 0), d);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        e2e_assert_voters(env, CLUSTER, 5);
        assert_pods_ready(5);
        assert_int_equal(pdb_max_unavailable(), 2);
        check_keys(env, "boot", 20);
}

/* tls.provider auto: gitcd is the CA, members get their certificates from Secrets. */
static void test_tls_auto(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        e2e_write_file(e, "tls.yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: kt\n"
                       "  namespace: " NS "\n"
                       "spec:\n"
                       "  replicas: 3\n"
                       "  version: \"" VERSION "\"\n"
                       "  progressDeadlineSeconds: 120\n"
                       "  tls:\n"
                       "    provider: auto\n"
                       "    client:\n"
                       "      enabled: true\n"
                       "    peer:\n"
                       "      enabled: true\n");
        apply_ok(e);
        const kube_gvr secrets = {"", "v1", "secrets", true};
        static const char *const names[] = {"kt-client-tls", "kt-peer-tls", "kt-operator-tls"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                json_t *sec = get(&secrets, names[i]);
                if (!sec)
                        fail_msg("Secret %s missing", names[i]);
                assert_string_equal(json_string_value(json_object_get(sec, "type")),
                                    "kubernetes.io/tls");
                json_decref(sec);
        }
        /* the members answer over TLS, by their DNS names, to gitcd's client identity */
        _cleanup_free_ char *eps = e2e_endpoints(e, "kt");
        assert_true(strneq(eps, "https://", 8));
        _cleanup_free_ char *dir = xasprintf("%s/kubernetes/" NS "/kt/tls/operator", e->state_dir);
        _cleanup_free_ char *ca = path_join(dir, "ca.crt");
        _cleanup_free_ char *crt = path_join(dir, "tls.crt");
        _cleanup_free_ char *key = path_join(dir, "tls.key");
        etcd_client_opts o = {.endpoints = eps, .cacert = ca, .cert = crt, .key = key};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        etcd_members *l = NULL;
        if (etcd_member_list(c, &l) < 0)
                fail_msg("member list over TLS: %s", etcd_client_last_error(c));
        assert_int_equal(l->n, 3);
        for (size_t i = 0; i < l->n; i++) {
                assert_false(l->members[i].is_learner);
                assert_true(strneq(l->members[i].peer_urls[0], "https://", 8));
        }
        etcd_members_free(l);
        assert_int_equal(etcd_put(c, "tls", "yes", 3, NULL), 0);
        etcd_client_free(c);
        e2e_free(e);
}

static void test_rbac_denied(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        write_cluster(e, "kd", 1);
        char *err = NULL;
        int k = kube_apply_as(e, "limited", &err);
        assert_true(k != 0);
        /* the message names what is forbidden, so RBAC can be fixed */
        if (!strstr(err, "forbidden") && !strstr(err, "Forbidden"))
                fail_msg("no clear RBAC error: %s", err);
        free(err);
        /* nothing half-applied */
        assert_int_equal(count(&pods, "kd"), 0);
        assert_int_equal(count(&pvcs, "kd"), 0);
        assert_int_equal(count(&services, "kd"), 0);
        assert_int_equal(count(&pdbs, "kd"), 0);

        /* once RBAC grants what deploy/rbac.yaml grants, the same apply goes through */
        json_t *binding =
            json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}", "apiVersion",
                      "rbac.authorization.k8s.io/v1", "kind", "RoleBinding", "metadata", "name",
                      "limited-gitcd", "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind",
                      "ClusterRole", "name", "gitcd", "subjects", "apiGroup",
                      "rbac.authorization.k8s.io", "kind", "User", "name", "limited");
        json_object_set_new(json_object_get(binding, "metadata"), "namespace", json_string(NS));
        if (kube_apply(admin, binding, "e2e", false, false, NULL) < 0)
                fail_msg("RoleBinding: %s", kube_client_last_error(admin));
        json_decref(binding);
        err = NULL;
        k = kube_apply_as(e, "limited", &err);
        if (k != 0)
                fail_msg("gitcd apply after the RBAC fix exited %d: %s", k, err);
        free(err);
        assert_int_equal(count(&pods, "kd"), 1);
        e2e_free(e);
}

int main(void)
{
        lab = kube_lab_start(NS, VERSION);
        if (!lab)
                return 77;
        api = lab->api;
        sim = lab->sim;
        admin = lab->admin;
        root = lab->root;
        env = e2e_new();

        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bootstrap), cmocka_unit_test(test_bundle),
            cmocka_unit_test(test_scale),     cmocka_unit_test(test_pod_deleted),
            cmocka_unit_test(test_pvc_lost),  cmocka_unit_test(test_apiserver_restart),
            cmocka_unit_test(test_tls_auto),  cmocka_unit_test(test_rbac_denied),
        };
        int failed = cmocka_run_group_tests(tests, NULL, NULL);

        e2e_free(env);
        kube_lab_free(lab);
        return failed;
}
