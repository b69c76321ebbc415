/*
 * The Kubernetes target against a real kube-apiserver v1.20.2 (with its
 * own etcd) on loopback: no kubelet, so the test plays the kubelet's part
 * where a case needs it (marking a Pod Ready through the status
 * subresource). A Pod without a node is deleted at once, which is what lets
 * the recreate and remove cases run without a node.
 *
 * One apiserver serves every case; each case uses its own cluster name so
 * the cases do not see each other's objects. Without the kube-apiserver
 * binary the test is skipped (exit 77).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd/client.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "pki/pki.h"
#include "render/layout.h"
#include "render/render.h"
#include "api/spec.h"
#include "reconciler/membership.h"
#include "snapstore/destination.h"
#include "snapstore/receiver.h"
#include "snapshots/snapshot.h"
#include "snapstore/tool.h"
#include "targets/kubernetes.h"
#include "targets/locked.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "tests/harness/s3rver.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define NS KUBEAPI_NAMESPACE

static kubeapi *api;
static kube_client *admin;
static char *state_dir;
static target *kt;

static const kube_gvr GVR_PODS = {"", "v1", "pods", true};
static const kube_gvr GVR_PVCS = {"", "v1", "persistentvolumeclaims", true};
static const kube_gvr GVR_SERVICES = {"", "v1", "services", true};
static const kube_gvr GVR_PDB = {"policy", "v1beta1", "poddisruptionbudgets", true};

static target *new_target(const char *context)
{
        kube_config *cfg = NULL;
        char *err = NULL;
        int r = kube_config_load(kubeapi_kubeconfig(api), context, &cfg, &err);
        if (r < 0)
                fail_msg("kubeconfig: %s", err);
        /* No controller lifts the PVC protection finalizer here: do not wait for it. */
        kubernetes_target_opts o = {
            .config = cfg, .state_dir = state_dir, .volume_delete_wait_ms = 500};
        target *t = NULL;
        assert_int_equal(kubernetes_target_new(&o, &t), 0);
        kube_config_free(cfg);
        return t;
}

static etcd_cluster *load_cluster(const char *name, int replicas, const char *extra)
{
        _cleanup_free_ char *yaml = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "  namespace: " NS "\n"
                                              "spec:\n"
                                              "  replicas: %d\n"
                                              "  version: \"3.5.16\"\n"
                                              "%s",
                                              name, replicas, extra);
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

/* The steady plan with each member's target fields filled by the target. */
static membership_plan *plan_for(const etcd_cluster *c)
{
        membership_plan *p = membership_plan_steady(c, NULL);
        for (size_t i = 0; i < p->n; i++)
                assert_int_equal(kt->ops->place_member(kt, c, &p->members[i]), 0);
        return p;
}

static json_t *get(const kube_gvr *gvr, const char *name)
{
        json_t *o = NULL;
        int r = kube_get(admin, gvr, NS, name, &o);
        if (r == -ENOENT)
                return NULL;
        if (r < 0)
                fail_msg("get %s %s: %s", gvr->resource, name, kube_client_last_error(admin));
        return o;
}

static const char *md_str(const json_t *o, const char *key)
{
        return json_string_value(json_object_get(json_object_get(o, "metadata"), key));
}

static char *rv(const kube_gvr *gvr, const char *name)
{
        json_t *o = get(gvr, name);
        assert_non_null(o);
        char *v = xstrdup(md_str(o, "resourceVersion"));
        json_decref(o);
        return v;
}

static char *uid(const kube_gvr *gvr, const char *name)
{
        json_t *o = get(gvr, name);
        if (!o)
                return NULL;
        char *v = xstrdup(md_str(o, "uid"));
        json_decref(o);
        return v;
}

/* Gone, or on its way out (the PVC protection finalizer has no controller here). */
static bool gone(const kube_gvr *gvr, const char *name)
{
        json_t *o = get(gvr, name);
        bool g = !o || json_object_get(json_object_get(o, "metadata"), "deletionTimestamp");
        json_decref(o);
        return g;
}

static void mark_ready(const char *pod)
{
        _cleanup_free_ char *path = xasprintf("/api/v1/namespaces/%s/pods/%s/status", NS, pod);
        json_t *body = json_pack("{s:{s:s, s:[{s:s, s:s}]}}", "status", "phase", "Running",
                                 "conditions", "type", "Ready", "status", "True");
        int r = kube_request(admin, "PATCH", path, "application/merge-patch+json", body, "patch",
                             "pods/status", NS, NULL);
        json_decref(body);
        if (r < 0)
                fail_msg("mark ready: %s", kube_client_last_error(admin));
}

static bool listed(const etcd_cluster *c, const char *member);

/*
 * The data identities the member records would hold: the reconciler
 * records the one the target reports once the member ran (here: was
 * Ready) and drops it with the removed member.
 */
static struct {
        char *member;
        char *identity;
} records[16];

static char **recorded_identity(const char *member)
{
        for (size_t i = 0; i < ARRAY_SIZE(records); i++)
                if (records[i].member && streq(records[i].member, member))
                        return &records[i].identity;
        for (size_t i = 0; i < ARRAY_SIZE(records); i++)
                if (!records[i].member) {
                        records[i].member = xstrdup(member);
                        return &records[i].identity;
                }
        fail_msg("too many members");
        return NULL;
}

/* The member's state as the reconciler sees it (membership_check_identity() judges data loss). */
static member_runtime_state status_of(const etcd_cluster *c, const char *member)
{
        target_member_status st = {0};
        int r = kt->ops->member_status(kt, c, member, &st);
        if (r < 0)
                fail_msg("member_status: %s", target_last_error(kt));
        char **recorded = recorded_identity(member);
        if (!listed(c, member))
                str_assign(recorded, NULL);
        else if (!*recorded && st.state == MEMBER_READY)
                *recorded = xstrdup_null(st.data_identity);
        (void)membership_check_identity(*recorded, &st);
        member_runtime_state s = st.state;
        target_member_status_release(&st);
        return s;
}

static bool listed(const etcd_cluster *c, const char *member)
{
        char **names = NULL;
        size_t n = 0;
        assert_int_equal(kt->ops->list_members(kt, c->namespace_, c->name, &names, &n), 0);
        bool found = false;
        for (size_t i = 0; i < n; i++) {
                found = found || streq(names[i], member);
                free(names[i]);
        }
        free(names);
        return found;
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
        kt = new_target("admin");
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

static void test_place_member(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("plan", 3, "");
        member_plan mp = {0};
        mp.name = xstrdup("plan-1");
        mp.ordinal = 1;
        assert_int_equal(kt->ops->place_member(kt, c, &mp), 0);
        assert_string_equal(mp.peer_url,
                            "http://plan-1.plan-headless." NS ".svc.cluster.local:2380");
        assert_string_equal(mp.client_url,
                            "http://plan-1.plan-headless." NS ".svc.cluster.local:2379");
        assert_string_equal(mp.listen_peer_url, "http://0.0.0.0:2380");
        assert_string_equal(mp.listen_client_url, "http://0.0.0.0:2379");
        assert_string_equal(mp.listen_metrics_url, "http://0.0.0.0:2381");
        assert_string_equal(mp.data_dir, RENDER_STEADY_DATA_DIR);
        assert_string_equal(mp.tls_dir, RENDER_STEADY_TLS_DIR);

        /* The same as render's steady plan, and the same again on a second call. */
        membership_plan *steady = membership_plan_steady(c, NULL);
        assert_string_equal(mp.peer_url, steady->members[1].peer_url);
        assert_string_equal(mp.client_url, steady->members[1].client_url);
        _cleanup_free_ char *before = xstrdup(mp.peer_url);
        assert_int_equal(kt->ops->place_member(kt, c, &mp), 0);
        assert_string_equal(mp.peer_url, before);
        membership_plan_free(steady);

        free(mp.name);
        free(mp.peer_url);
        free(mp.client_url);
        free(mp.listen_peer_url);
        free(mp.listen_client_url);
        free(mp.listen_metrics_url);
        free(mp.data_dir);
        free(mp.tls_dir);
        etcd_cluster_free(c);
}

static void test_shared_idempotent(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("shared", 3, "");
        membership_plan *p = plan_for(c);
        int r = kt->ops->ensure_shared(kt, c, p);
        if (r < 0)
                fail_msg("ensure_shared: %s", target_last_error(kt));

        json_t *pdb = get(&GVR_PDB, "shared");
        assert_non_null(pdb);
        assert_string_equal(json_string_value(json_object_get(pdb, "apiVersion")),
                            "policy/v1beta1");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(pdb, "spec"), "maxUnavailable")), 1);
        json_decref(pdb);
        _cleanup_free_ char *rv_headless = rv(&GVR_SERVICES, "shared-headless");
        _cleanup_free_ char *rv_client = rv(&GVR_SERVICES, "shared");
        _cleanup_free_ char *rv_pdb = rv(&GVR_PDB, "shared");

        assert_int_equal(kt->ops->ensure_shared(kt, c, p), 0);
        _cleanup_free_ char *rv_headless2 = rv(&GVR_SERVICES, "shared-headless");
        _cleanup_free_ char *rv_client2 = rv(&GVR_SERVICES, "shared");
        _cleanup_free_ char *rv_pdb2 = rv(&GVR_PDB, "shared");
        assert_string_equal(rv_headless, rv_headless2);
        assert_string_equal(rv_client, rv_client2);
        assert_string_equal(rv_pdb, rv_pdb2);

        /* A plan with one voter (a step starting a member): the budget allows no eviction. */
        p->n = 1;
        assert_int_equal(kt->ops->ensure_shared(kt, c, p), 0);
        p->n = 3;
        pdb = get(&GVR_PDB, "shared");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(pdb, "spec"), "maxUnavailable")), 0);
        json_decref(pdb);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

static void test_member_lifecycle(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("life", 3, "");
        membership_plan *p = plan_for(c);
        assert_int_equal(status_of(c, "life-0"), MEMBER_ABSENT);
        assert_false(listed(c, "life-0"));
        /* Start watching now, so the changes below are events. */
        assert_int_equal(kt->ops->wait_event(kt, 1000), 0);

        int r = kt->ops->ensure_shared(kt, c, p);
        if (r >= 0)
                r = kt->ops->ensure_member(kt, c, p, 0);
        if (r < 0)
                fail_msg("ensure: %s", target_last_error(kt));
        json_t *pod = get(&GVR_PODS, "life-0");
        assert_non_null(pod);
        const char *hash = json_string_value(json_object_get(
            json_object_get(json_object_get(pod, "metadata"), "annotations"), "gitcd.io/pod-hash"));
        assert_non_null(hash);
        assert_int_equal(strlen(hash), 16);
        json_decref(pod);
        json_t *pvc = get(&GVR_PVCS, "data-life-0");
        assert_non_null(pvc);
        json_decref(pvc);
        assert_true(listed(c, "life-0"));
        assert_int_equal(status_of(c, "life-0"), MEMBER_STARTING);
        assert_int_equal(kt->ops->wait_event(kt, 5000), 1);
        /* The event names its cluster, so a daemon observes just that one. */
        char **events = NULL;
        size_t n_events = 0;
        assert_int_equal(kt->ops->take_events(kt, &events, &n_events), 0);
        assert_int_equal(n_events, 1);
        assert_string_equal(events[0], NS "/life");
        free(events[0]);
        free(events);

        /* Ready through the status subresource, as a kubelet would report it. */
        mark_ready("life-0");
        assert_int_equal(status_of(c, "life-0"), MEMBER_READY);
        _cleanup_free_ char *record = xasprintf("%s/kubernetes/" NS "/life/life-0.json", state_dir);
        assert_true(path_exists(record));

        /* Same spec: the Pod stays. */
        _cleanup_free_ char *uid1 = uid(&GVR_PODS, "life-0");
        assert_int_equal(kt->ops->ensure_member(kt, c, p, 0), 0);
        _cleanup_free_ char *uid2 = uid(&GVR_PODS, "life-0");
        assert_string_equal(uid1, uid2);
        assert_int_equal(status_of(c, "life-0"), MEMBER_READY);

        /* Another spec: the Pod is recreated (no node: the delete is immediate). */
        etcd_cluster *c2 = load_cluster("life", 3,
                                        "  resources:\n"
                                        "    limits:\n"
                                        "      cpu: \"2\"\n");
        r = kt->ops->ensure_member(kt, c2, p, 0);
        if (r < 0)
                fail_msg("ensure changed: %s", target_last_error(kt));
        _cleanup_free_ char *uid3 = uid(&GVR_PODS, "life-0");
        assert_non_null(uid3);
        assert_string_not_equal(uid1, uid3);
        assert_int_equal(status_of(c2, "life-0"), MEMBER_STARTING);

        /* Stopped: the Pod goes, the volume stays. */
        assert_int_equal(kt->ops->stop_member(kt, c2, "life-0"), 0);
        assert_null(get(&GVR_PODS, "life-0"));
        assert_int_equal(status_of(c2, "life-0"), MEMBER_STOPPED);
        assert_true(listed(c2, "life-0"));

        /* Removed: Pod, then PVC, then the record. */
        assert_int_equal(kt->ops->ensure_member(kt, c2, p, 0), 0);
        json_t *again = get(&GVR_PODS, "life-0");
        assert_non_null(again);
        json_decref(again);
        assert_int_equal(kt->ops->remove_member(kt, c2, "life-0", false), 0);
        assert_null(get(&GVR_PODS, "life-0"));
        assert_true(gone(&GVR_PVCS, "data-life-0"));
        assert_false(path_exists(record));

        membership_plan_free(p);
        etcd_cluster_free(c);
        etcd_cluster_free(c2);
}

static void test_data_lost(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("lost", 1, "");
        membership_plan *p = plan_for(c);
        int r = kt->ops->ensure_shared(kt, c, p);
        if (r >= 0)
                r = kt->ops->ensure_member(kt, c, p, 0);
        if (r < 0)
                fail_msg("ensure: %s", target_last_error(kt));
        mark_ready("lost-0");
        assert_int_equal(status_of(c, "lost-0"), MEMBER_READY);

        /* The volume goes (terminating, or gone): the member's data is lost. */
        assert_int_equal(kube_delete(admin, &GVR_PVCS, NS, "data-lost-0", NULL), 0);
        assert_int_equal(status_of(c, "lost-0"), MEMBER_DATA_LOST);
        /* The plan carries the recorded identity, as the reconciler builds it from the record. */
        p->members[0].data_identity = xstrdup_null(*recorded_identity("lost-0"));
        assert_int_equal(kt->ops->ensure_member(kt, c, p, 0), -ESTALE);
        assert_non_null(strstr(target_last_error(kt), "must be replaced"));

        assert_int_equal(kt->ops->remove_member(kt, c, "lost-0", false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/* keep_data: the Pod goes, the volume stays but leaves the cluster (nothing lists it). */
static void test_remove_keep_data(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("keep", 1, "");
        membership_plan *p = plan_for(c);
        int r = kt->ops->ensure_member(kt, c, p, 0);
        if (r < 0)
                fail_msg("ensure: %s", target_last_error(kt));
        assert_true(listed(c, "keep-0"));
        assert_int_equal(kt->ops->remove_member(kt, c, "keep-0", true), 0);
        assert_null(get(&GVR_PODS, "keep-0"));
        json_t *pvc = get(&GVR_PVCS, "data-keep-0");
        assert_non_null(pvc);
        json_t *md = json_object_get(pvc, "metadata");
        assert_null(json_object_get(json_object_get(md, "labels"), "gitcd.io/cluster"));
        assert_string_equal(json_string_value(json_object_get(json_object_get(md, "annotations"),
                                                              "gitcd.io/removed-from")),
                            "keep/keep-0");
        json_decref(pvc);
        assert_false(listed(c, "keep-0"));
        assert_int_equal(status_of(c, "keep-0"), MEMBER_ABSENT);
        /* drop_kept_data deletes the kept volume (a recovery, once the cluster is healthy). */
        assert_int_equal(kt->ops->drop_kept_data(kt, c, "keep-0"), 0);
        pvc = get(&GVR_PVCS, "data-keep-0");
        assert_true(!pvc || json_object_get(json_object_get(pvc, "metadata"), "deletionTimestamp"));
        json_decref(pvc);
        assert_int_equal(kt->ops->drop_kept_data(kt, c, "keep-0"), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

static void apply_service(const char *name, bool managed)
{
        json_t *labels = json_pack("{s:s}", "gitcd.io/cluster", "prune");
        if (managed)
                json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string("gitcd"));
        json_t *svc = json_pack("{s:s, s:s, s:{s:s, s:s, s:o}, s:{s:[{s:i, s:s}]}}", "apiVersion",
                                "v1", "kind", "Service", "metadata", "name", name, "namespace", NS,
                                "labels", labels, "spec", "ports", "port", 80, "protocol", "TCP");
        int r = kube_apply(admin, svc, "test", false, false, NULL);
        json_decref(svc);
        if (r < 0)
                fail_msg("apply service: %s", kube_client_last_error(admin));
}

static void test_prune(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("prune", 1, "");
        membership_plan *p = plan_for(c);
        apply_service("prune-old", true);
        apply_service("prune-mine", false);
        int r = kt->ops->ensure_shared(kt, c, p);
        if (r < 0)
                fail_msg("ensure_shared: %s", target_last_error(kt));
        assert_true(gone(&GVR_SERVICES, "prune-old"));
        json_t *mine = get(&GVR_SERVICES, "prune-mine");
        assert_non_null(mine);
        json_decref(mine);
        json_t *headless = get(&GVR_SERVICES, "prune-headless");
        assert_non_null(headless);
        json_decref(headless);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

static void test_name_taken(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("taken", 1, "");
        membership_plan *p = plan_for(c);
        json_t *svc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[{s:i, s:s}]}}", "apiVersion", "v1",
                                "kind", "Service", "metadata", "name", "taken-headless",
                                "namespace", NS, "spec", "ports", "port", 80, "protocol", "TCP");
        assert_int_equal(kube_apply(admin, svc, "someone", false, false, NULL), 0);
        json_decref(svc);

        assert_int_equal(kt->ops->ensure_shared(kt, c, p), -EEXIST);
        const char *msg = target_last_error(kt);
        assert_non_null(strstr(msg, "Service " NS "/taken-headless exists and is not managed by "
                                    "gitcd"));
        /* Nothing else was written. */
        assert_null(get(&GVR_SERVICES, "taken"));
        json_t *still = get(&GVR_SERVICES, "taken-headless");
        assert_non_null(still);
        assert_null(json_object_get(json_object_get(json_object_get(still, "metadata"), "labels"),
                                    "app.kubernetes.io/managed-by"));
        json_decref(still);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

static const kube_gvr GVR_SECRETS = {"", "v1", "secrets", true};

/* tls.provider auto: gitcd's CA and certificates in kubernetes.io/tls Secrets, applied once. */
static void test_tls_auto(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("secure", 3,
                                       "  tls:\n"
                                       "    provider: auto\n"
                                       "    client:\n"
                                       "      enabled: true\n"
                                       "    peer:\n"
                                       "      enabled: true\n");
        membership_plan *p = plan_for(c);
        assert_true(strneq(p->members[0].client_url, "https://", 8));
        int r = kt->ops->ensure_shared(kt, c, p);
        if (r < 0)
                fail_msg("ensure_shared: %s", target_last_error(kt));
        static const char *const names[] = {"secure-client-tls", "secure-peer-tls",
                                            "secure-operator-tls"};
        char *rvs[3];
        for (size_t i = 0; i < 3; i++) {
                json_t *s = get(&GVR_SECRETS, names[i]);
                assert_non_null(s);
                assert_string_equal(json_string_value(json_object_get(s, "type")),
                                    "kubernetes.io/tls");
                json_t *data = json_object_get(s, "data");
                assert_non_null(json_object_get(data, "tls.crt"));
                assert_non_null(json_object_get(data, "tls.key"));
                assert_non_null(json_object_get(data, "ca.crt"));
                assert_string_equal(md_str(s, "name"), names[i]);
                rvs[i] = xstrdup(md_str(s, "resourceVersion"));
                json_decref(s);
        }

        /* Unchanged certificates: the Secrets are not written again. */
        assert_int_equal(kt->ops->ensure_shared(kt, c, p), 0);
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *again = rv(&GVR_SECRETS, names[i]);
                assert_string_equal(rvs[i], again);
                free(rvs[i]);
        }

        /* gitcd's own client files. */
        char *ca = NULL, *cert = NULL, *key = NULL;
        assert_non_null(kt->ops->client_tls);
        assert_int_equal(kt->ops->client_tls(kt, c, &ca, &cert, &key), 0);
        assert_true(path_exists(ca));
        assert_true(path_exists(cert));
        assert_true(path_exists(key));
        free(ca);
        free(cert);
        free(key);

        /* TLS off: the Secrets gitcd made are pruned. */
        etcd_cluster *plain = load_cluster("secure", 3, "");
        assert_int_equal(kt->ops->ensure_shared(kt, plain, p), 0);
        for (size_t i = 0; i < 3; i++)
                assert_true(gone(&GVR_SECRETS, names[i]));
        etcd_cluster_free(plain);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/* tls.provider secrets: the operator identity is read from the user's Secret. */
static void test_tls_secrets_client(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("usersec", 1,
                                       "  tls:\n"
                                       "    provider: secrets\n"
                                       "    client:\n"
                                       "      secretRef:\n"
                                       "        name: usersec-server\n"
                                       "    peer:\n"
                                       "      secretRef:\n"
                                       "        name: usersec-peer\n"
                                       "    operatorClient:\n"
                                       "      secretRef:\n"
                                       "        name: usersec-op\n");
        json_t *secret = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s}}", "apiVersion",
                                   "v1", "kind", "Secret", "type", "kubernetes.io/tls", "metadata",
                                   "name", "usersec-op", "namespace", NS, "data", "tls.crt",
                                   "Y2VydA==", "tls.key", "a2V5", "ca.crt", "Y2E=");
        assert_int_equal(kube_apply(admin, secret, "test", false, false, NULL), 0);
        json_decref(secret);
        char *ca = NULL, *cert = NULL, *key = NULL;
        int r = kt->ops->client_tls(kt, c, &ca, &cert, &key);
        if (r < 0)
                fail_msg("client_tls: %s", target_last_error(kt));
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(cert, 1024, &data, &len), 0);
        assert_string_equal(data, "cert");
        free(data);
        assert_int_equal(read_file(key, 1024, &data, &len), 0);
        assert_string_equal(data, "key");
        free(data);
        struct stat st;
        assert_int_equal(stat(key, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        free(ca);
        free(cert);
        free(key);
        etcd_cluster_free(c);
}

/* A kubernetes.io/tls Secret with these contents (ca may be NULL: no ca.crt key). */
static void put_tls_secret(const char *name, const char *crt, const char *ca)
{
        _cleanup_free_ char *crt64 = kube_base64_encode(crt, strlen(crt));
        json_t *data = json_pack("{s:s, s:s}", "tls.crt", crt64, "tls.key", "a2V5");
        if (ca) {
                _cleanup_free_ char *ca64 = kube_base64_encode(ca, strlen(ca));
                json_object_set_new(data, "ca.crt", json_string(ca64));
        }
        json_t *secret = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "v1", "kind",
                                   "Secret", "type", "kubernetes.io/tls", "metadata", "name", name,
                                   "namespace", NS, "data", data);
        assert_int_equal(kube_apply(admin, secret, "test", false, false, NULL), 0);
        json_decref(secret);
}

static char *new_ca_pem(const char *cn)
{
        pki_key *k = NULL;
        pki_cert *c = NULL;
        char *pem = NULL;
        assert_int_equal(pki_ca_create(cn, 1, &k, &c), 0);
        assert_int_equal(pki_cert_to_pem(c, &pem), 0);
        pki_key_free(k);
        pki_cert_free(c);
        return pem;
}

/* The trust version of a member placed now; NULL when it has none. */
static char *placed_trust(const etcd_cluster *c)
{
        membership_plan *p = membership_plan_steady(c, NULL);
        int r = kt->ops->place_member(kt, c, &p->members[0]);
        if (r < 0)
                fail_msg("place_member: %s", target_last_error(kt));
        char *v = xstrdup_null(p->members[0].tls_version);
        membership_plan_free(p);
        return v;
}

/*
 * tls.provider secrets: a new CA in the Secrets the Pods mount changes the
 * members' trust version (so they are restarted one at a time onto it); a
 * renewed leaf alone does not (the kubelet and etcd take it in place).
 */
static void test_tls_secrets_trust(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("trust", 3,
                                       "  tls:\n"
                                       "    provider: secrets\n"
                                       "    client:\n"
                                       "      secretRef:\n"
                                       "        name: trust-server\n"
                                       "    peer:\n"
                                       "      secretRef:\n"
                                       "        name: trust-peer\n"
                                       "    operatorClient:\n"
                                       "      secretRef:\n"
                                       "        name: trust-op\n");
        /* No Secret yet: nothing to trust, no Pod can start before they exist. */
        _cleanup_free_ char *none = placed_trust(c);
        assert_null(none);

        _cleanup_free_ char *ca1 = new_ca_pem("trust CA one");
        _cleanup_free_ char *ca2 = new_ca_pem("trust CA two");
        put_tls_secret("trust-server", "leaf one", ca1);
        put_tls_secret("trust-peer", "peer one", ca1);
        _cleanup_free_ char *v1 = placed_trust(c);
        assert_non_null(v1);

        /* A renewed leaf under the same CA: the same trust. */
        put_tls_secret("trust-server", "leaf two", ca1);
        _cleanup_free_ char *v1b = placed_trust(c);
        assert_string_equal(v1, v1b);

        /* A bundle of the old and the new CA, then the new CA alone: each a new trust. */
        _cleanup_free_ char *both = xasprintf("%s%s", ca1, ca2);
        put_tls_secret("trust-server", "leaf two", both);
        put_tls_secret("trust-peer", "peer one", both);
        _cleanup_free_ char *v2 = placed_trust(c);
        assert_string_not_equal(v1, v2);
        put_tls_secret("trust-server", "leaf three", ca2);
        put_tls_secret("trust-peer", "peer three", ca2);
        _cleanup_free_ char *v3 = placed_trust(c);
        assert_string_not_equal(v2, v3);
        assert_string_not_equal(v1, v3);

        /* A ca.crt that holds no certificate: refused, with the cluster named. */
        put_tls_secret("trust-peer", "peer three", "not a certificate");
        membership_plan *p = membership_plan_steady(c, NULL);
        assert_true(kt->ops->place_member(kt, c, &p->members[0]) < 0);
        assert_non_null(strstr(target_last_error(kt), "trust"));
        assert_non_null(strstr(target_last_error(kt), "ca.crt"));
        membership_plan_free(p);
        etcd_cluster_free(c);
}

static void apply_s3_secret(const char *name, const char *access_key_b64)
{
        /* "S3RVER" is the secret key s3rver knows; it checks the access key ID only */
        json_t *secret =
            json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind",
                      "Secret", "metadata", "name", name, "namespace", NS, "data", "accessKeyID",
                      access_key_b64, "secretAccessKey", "UzNSVkVS");
        assert_int_equal(kube_apply(admin, secret, "test", false, false, NULL), 0);
        json_decref(secret);
}

/*
 * S3 credentials from a Kubernetes Secret: read through
 * the locked target (as `gitcd run` holds it), written as a folder, and used
 * against a real S3 server; a changed Secret is read again, a missing one is
 * named.
 */
static void test_s3_credentials_secret(void **state)
{
        (void)state;
        _cleanup_free_ char *s3bin = harness_s3rver_path();
        if (!s3bin)
                skip();
        harness_s3rver *s3 = NULL;
        assert_int_equal(harness_s3rver_start(&(harness_s3rver_opts){0}, &s3), 0);
        unsetenv("AWS_ACCESS_KEY_ID");
        unsetenv("AWS_SECRET_ACCESS_KEY");
        _cleanup_free_ char *extra = xasprintf("  snapshots:\n"
                                               "    schedule: \"0 * * * *\"\n"
                                               "    destination:\n"
                                               "      s3:\n"
                                               "        endpoint: %s\n"
                                               "        bucket: %s\n"
                                               "        key: backups\n"
                                               "        forcePathStyle: true\n"
                                               "        credentialsSecretRef:\n"
                                               "          name: s3sec-creds\n",
                                               s3->endpoint_ip, s3->bucket);
        etcd_cluster *c = load_cluster("s3sec", 1, extra);
        target *locked = NULL;
        assert_int_equal(target_locked_new(new_target("admin"), &locked), 0);
        const storage_location *loc = &c->snapshots.destination;

        /* no Secret yet: named, nothing written */
        char *dir = NULL, *err = NULL;
        assert_int_equal(snapshot_secret_folder(locked, c, loc, &dir, &err), -ENOENT);
        assert_null(dir);
        assert_string_equal(err, "S3 credentials Secret " NS "/s3sec-creds: not found");
        free(err);
        err = NULL;

        apply_s3_secret("s3sec-creds", "UzNSVkVS"); /* S3RVER */
        assert_int_equal(snapshot_secret_folder(locked, c, loc, &dir, &err), 0);
        assert_non_null(dir);
        _cleanup_free_ char *idf = path_join(dir, "accessKeyID");
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(idf, 1024, &data, &len), 0);
        assert_string_equal(data, "S3RVER");
        free(data);
        struct stat st;
        assert_int_equal(stat(idf, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(stat(dir, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);

        /* the snapshot destination signs with them: the server takes the upload */
        _cleanup_free_ char *src = path_join(kubeapi_dir(api), "s3sec.db");
        assert_int_equal(write_file_atomic(src, "snapshot", 8, 0600), 0);
        snapshot_dest_context ctx = {.state_dir = state_dir, .namespace_ = NS, .secret_dir = dir};
        snapshot_dest *d = NULL;
        assert_int_equal(snapshot_dest_open(loc, &ctx, &d, &err), 0);
        assert_int_equal(snapshot_dest_put_file(d, "s1.db", src, NULL, &err), 0);
        dest_object o = {0};
        assert_int_equal(snapshot_dest_stat(d, "s1.db", &o, &err), 0);
        assert_int_equal(o.size, 8);
        dest_object_release(&o);
        snapshot_dest_free(d);
        free(dir);

        /* the Secret changed: read again, and the server refuses the other key */
        apply_s3_secret("s3sec-creds", "V1JPTkc="); /* WRONG */
        assert_int_equal(snapshot_secret_folder(locked, c, loc, &dir, &err), 0);
        ctx.secret_dir = dir;
        assert_int_equal(snapshot_dest_open(loc, &ctx, &d, &err), 0);
        assert_int_equal(snapshot_dest_put_file(d, "s2.db", src, NULL, &err), -EACCES);
        assert_null(strstr(err, "S3RVER"));
        free(err);
        err = NULL;
        snapshot_dest_free(d);
        free(dir);

        /* a Secret without the keys: a clear refusal, never the environment */
        setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
        setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
        json_t *empty =
            json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "Secret",
                      "metadata", "name", "s3sec-other", "namespace", NS, "data", "token", "eA==");
        assert_int_equal(kube_apply(admin, empty, "test", false, false, NULL), 0);
        json_decref(empty);
        free(c->snapshots.destination.s3.credentials_secret);
        c->snapshots.destination.s3.credentials_secret = xstrdup("s3sec-other");
        assert_int_equal(snapshot_secret_folder(locked, c, loc, &dir, &err), 0);
        ctx.secret_dir = dir;
        assert_int_equal(snapshot_dest_open(loc, &ctx, &d, &err), -ENOKEY);
        assert_non_null(strstr(err, "accessKeyID"));
        free(err);
        free(dir);
        unsetenv("AWS_ACCESS_KEY_ID");
        unsetenv("AWS_SECRET_ACCESS_KEY");

        target_free(locked);
        etcd_cluster_free(c);
        harness_s3rver_free(s3);
}

/*
 * A PVC a restore has not filled (gitcd.io/restore=pending, what
 * restore_member applies before it delivers anything): the member is
 * ABSENT, and ensure_member refuses to start it on that volume. Removing
 * the member also deletes a receiver a killed gitcd left for it.
 */
static void test_restore_pending(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("rp", 1, "");
        membership_plan *p = plan_for(c);
        if (kt->ops->ensure_shared(kt, c, p) < 0)
                fail_msg("ensure_shared: %s", target_last_error(kt));
        json_t *pvc = render_member_pvc(c, p, 0);
        json_t *ann = json_pack("{s:s}", "gitcd.io/restore", "pending");
        json_object_set_new(json_object_get(pvc, "metadata"), "annotations", ann);
        json_object_set_new(json_object_get(pvc, "metadata"), "namespace", json_string(NS));
        assert_int_equal(kube_apply(admin, pvc, "gitcd", false, false, NULL), 0);
        assert_int_equal(status_of(c, "rp-0"), MEMBER_ABSENT);
        assert_int_equal(kt->ops->ensure_member(kt, c, p, 0), -EBUSY);
        assert_non_null(strstr(target_last_error(kt), "waits for a snapshot restore"));
        assert_null(get(&GVR_PODS, "rp-0"));

        /* what a killed restore left: its Secret, found and deleted with the member */
        json_t *secret =
            json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s}}, s:{s:s}}", "apiVersion", "v1",
                      "kind", "Secret", "metadata", "name", "rp-0-restore", "namespace", NS,
                      "labels", "app.kubernetes.io/managed-by", "gitcd", "gitcd.io/cluster", "rp",
                      "app.kubernetes.io/component", "snapshot-receiver", "data", "token", "eA==");
        assert_int_equal(kube_apply(admin, secret, "gitcd", false, false, NULL), 0);
        json_decref(secret);
        assert_int_equal(kt->ops->remove_member(kt, c, "rp-0", false), 0);
        assert_null(get(&GVR_SECRETS, "rp-0-restore"));
        assert_true(gone(&GVR_PVCS, "data-rp-0"));
        json_decref(pvc);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/* Plays the kubelet for the writer Pod of cluster "wl": Ready, with an address. */
static void *ready_writer(void *unused)
{
        (void)unused;
        for (int i = 0; i < 400; i++) {
                json_t *items = NULL;
                if (kube_list(admin, &GVR_PODS, NS,
                              "gitcd.io/cluster=wl,app.kubernetes.io/component=snapshot-writer",
                              &items, NULL) == 0 &&
                    json_array_size(items) > 0) {
                        const char *name = md_str(json_array_get(items, 0), "name");
                        _cleanup_free_ char *path =
                            xasprintf("/api/v1/namespaces/%s/pods/%s/status", NS, name);
                        json_t *body = json_pack("{s:{s:s, s:s, s:[{s:s, s:s}]}}", "status",
                                                 "phase", "Running", "podIP", "127.0.0.1",
                                                 "conditions", "type", "Ready", "status", "True");
                        (void)kube_request(admin, "PATCH", path, "application/merge-patch+json",
                                           body, "patch", "pods/status", NS, NULL);
                        json_decref(body);
                        json_decref(items);
                        return NULL;
                }
                json_decref(items);
                usleep(50 * 1000);
        }
        return NULL;
}

/*
 * One snapshot writer per cluster across processes: while another process
 * holds the cluster's writer lock, writer_start fails at once (-EAGAIN,
 * naming that process) and deletes nothing of the writer in use; once that
 * process is killed, the lock is free, the next writer deletes the leftover
 * and holds the lock until it is stopped.
 */
static void test_writer_lock(void **state)
{
        (void)state;
        etcd_cluster *c = load_cluster("wl", 1, "");
        json_t *pvc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion",
                                "v1", "kind", "PersistentVolumeClaim", "metadata", "name",
                                "wl-backups", "namespace", NS, "spec", "accessModes",
                                "ReadWriteOnce", "resources", "requests", "storage", "1Gi");
        assert_int_equal(kube_apply(admin, pvc, "test", false, false, NULL), 0);
        json_decref(pvc);
        /* the Secret of a writer in use (or left by a killed gitcd: only the lock tells) */
        json_t *secret =
            json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s}}, s:{s:s}}", "apiVersion", "v1",
                      "kind", "Secret", "metadata", "name", "wl-snapshot-0badcafe", "namespace", NS,
                      "labels", "app.kubernetes.io/managed-by", "gitcd", "gitcd.io/cluster", "wl",
                      "app.kubernetes.io/component", "snapshot-writer", "data", "token", "eA==");
        assert_int_equal(kube_apply(admin, secret, "gitcd", false, false, NULL), 0);
        json_decref(secret);

        int pipefd[2];
        assert_int_equal(pipe(pipefd), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                int fd = -1;
                char ok = kubernetes_writer_lock(state_dir, NS, "wl", &fd, NULL) == 0 ? 'y' : 'n';
                if (write(pipefd[1], &ok, 1) != 1)
                        _exit(1);
                for (;;)
                        pause();
        }
        char ok = 0;
        assert_int_equal(read(pipefd[0], &ok, 1), 1);
        assert_int_equal(ok, 'y');
        close(pipefd[0]);
        close(pipefd[1]);

        /* the other holder cannot proceed: neither through the lock nor the writer */
        int fd = -1;
        pid_t holder = 0;
        assert_int_equal(kubernetes_writer_lock(state_dir, NS, "wl", &fd, &holder), -EAGAIN);
        assert_int_equal(holder, child);
        void *handle = NULL;
        receiver_peer peer = {0};
        assert_int_equal(kt->ops->writer_start(kt, c, "wl-backups", "", &handle, &peer), -EAGAIN);
        _cleanup_free_ char *want = xasprintf("in use by gitcd pid %ld", (long)child);
        assert_non_null(strstr(target_last_error(kt), want));
        assert_null(handle);
        json_t *live = get(&GVR_SECRETS, "wl-snapshot-0badcafe");
        assert_non_null(live); /* the writer in use is left alone */
        json_decref(live);

        /* killed: its lock went with it, and what it left is a leftover */
        assert_int_equal(kill(child, SIGKILL), 0);
        int st = 0;
        assert_int_equal(waitpid(child, &st, 0), child);
        pthread_t kubelet;
        assert_int_equal(pthread_create(&kubelet, NULL, ready_writer, NULL), 0);
        int r = kt->ops->writer_start(kt, c, "wl-backups", "", &handle, &peer);
        pthread_join(kubelet, NULL);
        if (r < 0)
                fail_msg("writer_start: %s", target_last_error(kt));
        assert_non_null(peer.url);
        assert_null(get(&GVR_SECRETS, "wl-snapshot-0badcafe"));
        /* held while the writer is in use, also against this process */
        assert_int_equal(kubernetes_writer_lock(state_dir, NS, "wl", &fd, &holder), -EAGAIN);
        assert_int_equal(holder, getpid());
        assert_int_equal(kt->ops->writer_stop(kt, c, handle), 0);
        assert_int_equal(kubernetes_writer_lock(state_dir, NS, "wl", &fd, &holder), 0);
        close(fd);
        etcd_cluster_free(c);
}

/*
 * Plays the kubelet for the writer Pod that reads a member's PVC
 * (data_revision): the Pod's Secret becomes the files of a real store-mode
 * receiver (`gitcd snapshot receive --store-dir`) serving `store` (what the
 * claim holds) on its own loopback address, port 8443 as the Pod's; the Pod
 * is then marked Ready with that address.
 */
typedef struct writer_play {
        const char *cluster;
        const char *store;
        const char *secret_dir;
        char address[32];
        receiver *rcv;
        char *error;
} writer_play;

static void write_secret_key(const json_t *secret, const char *key, const char *dir)
{
        const char *b64 = json_string_value(json_object_get(json_object_get(secret, "data"), key));
        assert_non_null(b64);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(kube_base64_decode(b64, &data, &len), 0);
        _cleanup_free_ char *path = path_join(dir, key);
        assert_int_equal(write_file_atomic(path, data, len, 0600), 0);
        free(data);
}

static void *serve_writer(void *arg)
{
        writer_play *w = arg;
        _cleanup_free_ char *selector = xasprintf(
            "gitcd.io/cluster=%s,app.kubernetes.io/component=snapshot-writer", w->cluster);
        for (int i = 0; i < 600; i++) {
                json_t *items = NULL;
                json_t *secret = NULL;
                const char *name = NULL;
                if (kube_list(admin, &GVR_PODS, NS, selector, &items, NULL) == 0 &&
                    json_array_size(items) > 0)
                        name = md_str(json_array_get(items, 0), "name");
                if (name && kube_get(admin, &GVR_SECRETS, NS, name, &secret) == 0) {
                        write_secret_key(secret, "tls.crt", w->secret_dir);
                        write_secret_key(secret, "tls.key", w->secret_dir);
                        write_secret_key(secret, "token", w->secret_dir);
                        json_decref(secret);
                        _cleanup_free_ char *cert = path_join(w->secret_dir, "tls.crt");
                        _cleanup_free_ char *key = path_join(w->secret_dir, "tls.key");
                        _cleanup_free_ char *token = path_join(w->secret_dir, "token");
                        _cleanup_free_ char *listen = xasprintf("%s:8443", w->address);
                        receiver_opts o = {.store_dir = w->store,
                                           .listen = listen,
                                           .cert_file = cert,
                                           .key_file = key,
                                           .token_file = token};
                        if (receiver_start(&o, &w->rcv, &w->error) == 0) {
                                _cleanup_free_ char *path =
                                    xasprintf("/api/v1/namespaces/%s/pods/%s/status", NS, name);
                                json_t *body =
                                    json_pack("{s:{s:s, s:s, s:[{s:s, s:s}]}}", "status", "phase",
                                              "Running", "podIP", w->address, "conditions", "type",
                                              "Ready", "status", "True");
                                (void)kube_request(admin, "PATCH", path,
                                                   "application/merge-patch+json", body, "patch",
                                                   "pods/status", NS, NULL);
                                json_decref(body);
                        }
                        json_decref(items);
                        return NULL;
                }
                json_decref(items);
                usleep(50 * 1000);
        }
        return NULL;
}

/*
 * data_revision: refused while the member has a Pod; with none, the member's
 * PVC is read through a writer Pod (its member/snap/db fetched over HTTPS,
 * its SHA-256 checked) and etcd's tool on gitcd's host reads the revision
 * of a real etcd database; no writer is left; a member without a PVC of its
 * own holds no data.
 */
static void test_data_revision(void **state)
{
        (void)state;
        _cleanup_free_ char *tool = harness_etcd_path("3.5.16", "etcdutl");
        if (!tool || !harness_have_etcd("3.5.16"))
                skip();
        /* a real etcd database with a few writes: what the member's claim holds */
        harness_opts ho = {.version = "3.5.16", .members = 1};
        harness_cluster *hc = NULL;
        assert_int_equal(harness_cluster_start(&ho, &hc), 0);
        etcd_client_opts eo = {.endpoints = hc->endpoints};
        etcd_client *ec = NULL;
        assert_int_equal(etcd_client_new(&eo, &ec), 0);
        for (int i = 0; i < 5; i++)
                assert_int_equal(etcd_put(ec, "k", "v", 1, NULL), 0);
        etcd_client_free(ec);
        assert_int_equal(harness_member_stop(hc, 0), 0);
        _cleanup_free_ char *root = harness_tmpdir("gitcd-kt-revision");
        _cleanup_free_ char *store = path_join(root, "claim");
        _cleanup_free_ char *snap = xasprintf("%s/data/member/snap", store);
        _cleanup_free_ char *secrets = path_join(root, "secret");
        assert_int_equal(mkdir_p(snap, 0700), 0);
        assert_int_equal(mkdir_p(secrets, 0700), 0);
        _cleanup_free_ char *from = xasprintf("%s/member/snap/db", hc->members[0].data_dir);
        _cleanup_free_ char *db = path_join(snap, "db");
        char *bytes = NULL;
        size_t len = 0;
        assert_int_equal(read_file(from, 1 << 28, &bytes, &len), 0);
        assert_int_equal(write_file_atomic(db, bytes, len, 0600), 0);
        free(bytes);
        harness_cluster_free(hc);
        snapshot_status want;
        char *why = NULL;
        assert_int_equal(snapshot_file_status(tool, db, &want, &why), 0);
        assert_true(want.revision >= 6);

        etcd_cluster *c = load_cluster("dr", 1, "");
        membership_plan *p = plan_for(c);
        int64_t rev = -1;
        assert_int_equal(kt->ops->data_revision(kt, c, "dr-0", tool, &rev), -ENOENT);
        assert_non_null(strstr(target_last_error(kt), "no PersistentVolumeClaim"));
        if (kt->ops->ensure_shared(kt, c, p) < 0 || kt->ops->ensure_member(kt, c, p, 0) < 0)
                fail_msg("ensure: %s", target_last_error(kt));
        assert_int_equal(kt->ops->data_revision(kt, c, "dr-0", tool, &rev), -EBUSY);
        assert_non_null(strstr(target_last_error(kt), "has a Pod"));
        assert_int_equal(kt->ops->stop_member(kt, c, "dr-0"), 0);

        writer_play w = {.cluster = "dr", .store = store, .secret_dir = secrets};
        snprintf(w.address, sizeof(w.address), "127.0.%d.%d", 40 + (int)(getpid() % 200),
                 2 + (int)(getpid() / 200 % 250));
        pthread_t kubelet;
        assert_int_equal(pthread_create(&kubelet, NULL, serve_writer, &w), 0);
        int r = kt->ops->data_revision(kt, c, "dr-0", tool, &rev);
        pthread_join(kubelet, NULL);
        receiver_stop(w.rcv);
        if (w.error)
                fail_msg("the played writer could not serve: %s", w.error);
        if (r < 0)
                fail_msg("data_revision: %s", target_last_error(kt));
        assert_int_equal(rev, want.revision);
        /* the writer and its Secret went; the claim's data is as it was */
        json_t *items = NULL;
        assert_int_equal(
            kube_list(admin, &GVR_PODS, NS,
                      "gitcd.io/cluster=dr,app.kubernetes.io/component=snapshot-writer", &items,
                      NULL),
            0);
        assert_int_equal(json_array_size(items), 0);
        json_decref(items);
        snapshot_status after;
        assert_int_equal(snapshot_file_status(tool, db, &after, &why), 0);
        assert_int_equal(after.revision, want.revision);

        assert_int_equal(kt->ops->remove_member(kt, c, "dr-0", false), 0);
        (void)rm_rf(root);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

/*
 * A kubelet's log endpoint and nothing else, for test_member_logs: HTTPS on
 * 127.0.0.1 (kube-apiserver does not verify a kubelet's serving
 * certificate when it is given no --kubelet-certificate-authority, as
 * here), answering every request with the same text and keeping the
 * request line of the last one.
 */
typedef struct fake_kubelet {
        int lfd;
        int port;
        SSL_CTX *ctx;
        const char *text;
        char last[1024];
        volatile bool stop;
        pthread_t thread;
} fake_kubelet;

static void *kubelet_serve(void *userdata)
{
        fake_kubelet *k = userdata;
        while (!k->stop) {
                struct pollfd pfd = {.fd = k->lfd, .events = POLLIN};
                if (poll(&pfd, 1, 100) <= 0)
                        continue;
                int fd = accept(k->lfd, NULL, NULL);
                if (fd < 0)
                        continue;
                SSL *ssl = SSL_new(k->ctx);
                SSL_set_fd(ssl, fd);
                char in[4096];
                size_t got = 0;
                if (SSL_accept(ssl) == 1) {
                        while (got < sizeof(in) - 1) {
                                int n = SSL_read(ssl, in + got, (int)(sizeof(in) - 1 - got));
                                if (n <= 0)
                                        break;
                                got += (size_t)n;
                                in[got] = '\0';
                                if (strstr(in, "\r\n\r\n"))
                                        break;
                        }
                        in[got] = '\0';
                        char *eol = strstr(in, "\r\n");
                        if (eol)
                                snprintf(k->last, sizeof(k->last), "%.*s", (int)(eol - in), in);
                        _cleanup_free_ char *resp =
                            xasprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                      "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                      strlen(k->text), k->text);
                        SSL_write(ssl, resp, (int)strlen(resp));
                        SSL_shutdown(ssl);
                }
                SSL_free(ssl);
                close(fd);
        }
        return NULL;
}

static void kubelet_start(fake_kubelet *k, const char *dir, const char *text)
{
        const char *const ips[] = {"127.0.0.1", NULL};
        pki_cert_request rq = {.cn = "kubelet", .ip_addresses = ips, .days = 1, .server = true};
        pki_key *ca_key = NULL, *key = NULL;
        pki_cert *ca = NULL, *cert = NULL;
        assert_int_equal(pki_ca_create("kubelet-ca", 1, &ca_key, &ca), 0);
        assert_int_equal(pki_cert_issue(ca, ca_key, &rq, &key, &cert), 0);
        _cleanup_free_ char *crt = path_join(dir, "kubelet.crt");
        _cleanup_free_ char *kf = path_join(dir, "kubelet.key");
        assert_int_equal(pki_write_pem(crt, kf, cert, key), 0);
        pki_key_free(ca_key);
        pki_key_free(key);
        pki_cert_free(ca);
        pki_cert_free(cert);
        k->ctx = SSL_CTX_new(TLS_server_method());
        assert_true(SSL_CTX_use_certificate_file(k->ctx, crt, SSL_FILETYPE_PEM) == 1);
        assert_true(SSL_CTX_use_PrivateKey_file(k->ctx, kf, SSL_FILETYPE_PEM) == 1);
        struct sockaddr_in addr = {.sin_family = AF_INET};
        socklen_t len = sizeof(addr);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        k->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(bind(k->lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
        assert_int_equal(listen(k->lfd, 8), 0);
        assert_int_equal(getsockname(k->lfd, (struct sockaddr *)&addr, &len), 0);
        k->port = ntohs(addr.sin_port);
        k->text = text;
        assert_int_equal(pthread_create(&k->thread, NULL, kubelet_serve, k), 0);
}

static void kubelet_stop(fake_kubelet *k)
{
        k->stop = true;
        pthread_join(k->thread, NULL);
        close(k->lfd);
        SSL_CTX_free(k->ctx);
}

static void set_kubelet_port(const char *node_name, int port)
{
        json_t *status = json_pack("{s:{s:[{s:s, s:s}], s:{s:{s:i}}}}", "status", "addresses",
                                   "type", "InternalIP", "address", "127.0.0.1", "daemonEndpoints",
                                   "kubeletEndpoint", "Port", port);
        _cleanup_free_ char *status_path = xasprintf("/api/v1/nodes/%s/status", node_name);
        assert_int_equal(kube_request(admin, "PATCH", status_path, "application/merge-patch+json",
                                      status, "patch", "nodes/status", NULL, NULL),
                         0);
        json_decref(status);
}

/*
 * member_logs through the real API server. It proxies a Pod's log to the
 * kubelet of the Pod's node, and no kubelet runs here (nodesim.c does not
 * serve the kubelet's log endpoint): the Pod is bound to a Node object
 * whose kubelet port has nothing listening, and the test holds the target
 * to what the API server then answers: the request accepted and proxied
 * to the kubelet's containerLogs endpoint for container etcd, and its
 * failure as an error naming the Pod's log (what an incident bundle writes
 * to the member's error.txt). Then the Node's kubelet port is pointed at
 * fake_kubelet, which plays only the kubelet's log endpoint, and the log
 * comes back through the real API server, cut to the bound asked.
 */
static void test_member_logs(void **state)
{
        (void)state;
        assert_non_null(kt->ops->debug);
        assert_non_null(kt->ops->debug->member_logs);
        etcd_cluster *c = load_cluster("logs", 1, "");
        membership_plan *p = plan_for(c);
        char *text = NULL, *from = NULL;
        assert_int_equal(kt->ops->debug->member_logs(kt, c, "logs-0", 4096, &text, &from), -ENOENT);
        assert_null(text);
        assert_non_null(strstr(target_last_error(kt), "no Pod of member logs-0"));
        assert_int_equal(kt->ops->debug->member_logs(kt, c, "Not/A-Name", 4096, &text, &from),
                         -EINVAL);
        if (kt->ops->ensure_shared(kt, c, p) < 0 || kt->ops->ensure_member(kt, c, p, 0) < 0)
                fail_msg("ensure: %s", target_last_error(kt));
        /* a Pod on no node has no log yet */
        assert_int_equal(kt->ops->debug->member_logs(kt, c, "logs-0", 4096, &text, &from), -ENOENT);
        assert_non_null(strstr(target_last_error(kt), "on no node"));

        /* a node whose kubelet does not answer */
        _cleanup_free_ char *node_name = xasprintf("ghost-%d", (int)getpid());
        json_t *node = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Node",
                                 "metadata", "name", node_name);
        assert_int_equal(
            kube_request(admin, "POST", "/api/v1/nodes", NULL, node, "create", "nodes", NULL, NULL),
            0);
        json_decref(node);
        set_kubelet_port(node_name, harness_free_port());
        json_t *b = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind",
                              "Binding", "metadata", "name", "logs-0", "target", "apiVersion", "v1",
                              "kind", "Node", "name", node_name);
        assert_int_equal(kube_request(admin, "POST",
                                      "/api/v1/namespaces/" NS "/pods/logs-0/binding", NULL, b,
                                      "create", "pods/binding", NS, NULL),
                         0);
        json_decref(b);
        int r = kt->ops->debug->member_logs(kt, c, "logs-0", 4096, &text, &from);
        fprintf(stderr, "member_logs of a Pod whose kubelet does not answer: %d %s\n", r,
                target_last_error(kt));
        assert_int_equal(r, -EIO);
        assert_null(text);
        /* the API server took the request and proxied it: its reason is the kubelet's */
        assert_non_null(strstr(target_last_error(kt), "pods/log \"logs-0\""));
        assert_non_null(strstr(target_last_error(kt), "/containerLogs/" NS "/logs-0/etcd?"));
        assert_non_null(strstr(target_last_error(kt), "connection refused"));

        /* a kubelet that answers: the newest lines, at most the bound, from a line start */
        strbuf lines = STRBUF_INIT;
        for (int i = 0; i < 200; i++)
                sb_printf(&lines, "{\"level\":\"info\",\"msg\":\"line %03d of the log\"}\n", i);
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-kt-kubelet");
        fake_kubelet kubelet = {0};
        kubelet_start(&kubelet, dir, sb_str(&lines));
        set_kubelet_port(node_name, kubelet.port);
        r = kt->ops->debug->member_logs(kt, c, "logs-0", 4096, &text, &from);
        kubelet_stop(&kubelet);
        if (r < 0)
                fail_msg("member_logs: %s", target_last_error(kt));
        fprintf(stderr, "the kubelet was asked: %s\n", kubelet.last);
        assert_non_null(strstr(kubelet.last, "GET /containerLogs/" NS "/logs-0/etcd?"));
        assert_non_null(strstr(kubelet.last, "tailLines=100"));
        assert_non_null(strstr(kubelet.last, "limitBytes=16384"));
        assert_true(strlen(text) > 0 && strlen(text) <= 4096);
        assert_true(strneq(text, "{\"level\"", 8));
        assert_non_null(strstr(text, "line 199 of the log\"}\n"));
        assert_null(strstr(text, "line 000 "));
        assert_non_null(strstr(from, "container etcd of Pod logs-0"));
        free(text);
        free(from);
        text = from = NULL;
        sb_release(&lines);
        (void)rm_rf(dir);

        /* a Pod of that name that gitcd did not make is not read */
        json_t *stray = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1",
                                  "kind", "Pod", "metadata", "name", "stray-0", "spec",
                                  "containers", "name", "etcd", "image", "etcd");
        assert_int_equal(kube_request(admin, "POST", "/api/v1/namespaces/" NS "/pods", NULL, stray,
                                      "create", "pods", NS, NULL),
                         0);
        json_decref(stray);
        etcd_cluster *sc = load_cluster("stray", 1, "");
        assert_int_equal(kt->ops->debug->member_logs(kt, sc, "stray-0", 4096, &text, &from),
                         -ENOENT);
        assert_non_null(strstr(target_last_error(kt), "not gitcd's Pod"));
        etcd_cluster_free(sc);

        /* a bound Pod waits for its kubelet to go: delete it at once */
        (void)kube_request(admin, "DELETE",
                           "/api/v1/namespaces/" NS "/pods/logs-0?gracePeriodSeconds=0", NULL, NULL,
                           "delete", "pods", NS, NULL);
        (void)kube_request(admin, "DELETE",
                           "/api/v1/namespaces/" NS "/pods/stray-0?gracePeriodSeconds=0", NULL,
                           NULL, "delete", "pods", NS, NULL);
        _cleanup_free_ char *node_path = xasprintf("/api/v1/nodes/%s", node_name);
        (void)kube_request(admin, "DELETE", node_path, NULL, NULL, "delete", "nodes", NULL, NULL);
        assert_int_equal(kt->ops->remove_member(kt, c, "logs-0", false), 0);
        membership_plan_free(p);
        etcd_cluster_free(c);
}

static void test_rbac_nothing_applied(void **state)
{
        (void)state;
        target *limited = new_target("limited");
        etcd_cluster *c = load_cluster("rbac", 3, "");
        membership_plan *p = membership_plan_steady(c, NULL);
        for (size_t i = 0; i < p->n; i++)
                assert_int_equal(limited->ops->place_member(limited, c, &p->members[i]), 0);
        assert_int_equal(limited->ops->ensure_shared(limited, c, p), -EACCES);
        const char *msg = target_last_error(limited);
        assert_non_null(strstr(msg, "forbidden"));
        assert_non_null(strstr(msg, "patch"));
        assert_non_null(strstr(msg, "services"));
        assert_non_null(strstr(msg, "nothing applied"));

        json_t *items = NULL;
        const kube_gvr *kinds[] = {&GVR_SERVICES, &GVR_PDB, &GVR_PODS, &GVR_PVCS};
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                assert_int_equal(
                    kube_list(admin, kinds[i], NS, "gitcd.io/cluster=rbac", &items, NULL), 0);
                assert_int_equal(json_array_size(items), 0);
                json_decref(items);
        }
        membership_plan_free(p);
        etcd_cluster_free(c);
        target_free(limited);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_place_member),       cmocka_unit_test(test_shared_idempotent),
            cmocka_unit_test(test_member_lifecycle),   cmocka_unit_test(test_data_lost),
            cmocka_unit_test(test_remove_keep_data),   cmocka_unit_test(test_prune),
            cmocka_unit_test(test_name_taken),         cmocka_unit_test(test_tls_auto),
            cmocka_unit_test(test_tls_secrets_trust),  cmocka_unit_test(test_s3_credentials_secret),
            cmocka_unit_test(test_tls_secrets_client), cmocka_unit_test(test_rbac_nothing_applied),
            cmocka_unit_test(test_restore_pending),    cmocka_unit_test(test_writer_lock),
            cmocka_unit_test(test_data_revision),      cmocka_unit_test(test_member_logs),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
