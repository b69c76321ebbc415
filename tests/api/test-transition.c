/*
 * Transition rules between an accepted spec and a new one: each rule is
 * exercised both ways (allowed and refused), and refusals are checked word
 * for word, including where they point (the field in the new spec).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/spec.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* A native cluster named t with the given spec body (YAML lines under spec:). */
static etcd_cluster *load(const char *file, const char *spec)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata:\n  name: t\nspec:\n%s",
                               spec);
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        int r = spec_load_buffer(file, text, strlen(text), &set, &diags);
        for (size_t i = 0; i < diags.n; i++) {
                char *s = diag_format(&diags.items[i]);
                print_message("%s\n", s);
                free(s);
        }
        assert_int_equal(r, 0);
        assert_int_equal(set.n, 1);
        etcd_cluster *c = set.items[0];
        free(set.items);
        diag_list_release(&diags);
        free(text);
        return c;
}

/* Check prev -> next; `want` is NULL (allowed) or the exact diagnostic lines. */
static void check(const char *prev_spec, const char *next_spec, const char *want)
{
        etcd_cluster *prev = load("prev.yaml", prev_spec);
        etcd_cluster *next = load("next.yaml", next_spec);
        diag_list diags = DIAG_LIST_INIT;
        int r = spec_check_transition(prev, next, &diags);
        strbuf got = STRBUF_INIT;
        for (size_t i = 0; i < diags.n; i++) {
                char *s = diag_format(&diags.items[i]);
                sb_printf(&got, "%s\n", s);
                free(s);
        }
        if (!want) {
                assert_string_equal(sb_str(&got), "");
                assert_int_equal(r, 0);
        } else {
                assert_string_equal(sb_str(&got), want);
                assert_int_equal(r, -EPERM);
        }
        sb_release(&got);
        diag_list_release(&diags);
        etcd_cluster_free(prev);
        etcd_cluster_free(next);
}

static void test_version_patch_and_minor(void **state)
{
        check("  version: 3.5.15\n", "  version: 3.5.16\n", NULL);
        check("  version: 3.5.16\n", "  version: 3.5.15\n", NULL); /* patch downgrade */
        check("  version: 3.4.23\n", "  version: 3.5.16\n", NULL);
        check("  version: 3.5.26\n", "  version: 3.6.0\n", NULL);
        check("  version: 3.5.30\n", "  version: 3.6.1\n", NULL);
        check("  version: 3.5.16\n", "  replicas: 5\n  version: 3.5.16\n", NULL);
}

static void test_version_refused(void **state)
{
        check("  version: 3.4.23\n", "  version: 3.6.0\n",
              "next.yaml:6:12: error: spec.version: 3.4.23 → 3.6.0 skips minor 3.5; upgrade to "
              "3.5.x first, then to 3.6.x\n");
        check("  version: 3.5.16\n", "  version: 3.4.23\n",
              "next.yaml:6:12: error: spec.version: 3.5.16 → 3.4.23 is a downgrade etcd does not "
              "support; keep 3.5.x, or create a new 3.4 cluster and restore a snapshot into it\n");
        check("  version: 3.6.0\n", "  version: 3.4.23\n",
              "next.yaml:6:12: error: spec.version: 3.6.0 → 3.4.23 downgrades more than one minor "
              "version; etcd downgrades one minor at a time\n");
        /* The minimum patch before the next minor (etcd's 3.5 → 3.6 upgrade guide). */
        check("  version: 3.5.16\n", "  version: 3.6.0\n",
              "next.yaml:6:12: error: spec.version: 3.5.16 → 3.6.0: etcd's upgrade guide asks "
              "every 3.5 member to run 3.5.26 or later before 3.6 (3.5.24 to 3.5.26 fix upgrade "
              "blockers); upgrade to 3.5.26 or a later 3.5 patch first\n");
        /* 3.6 → 3.5 goes through etcd's downgrade API, which gitcd does not drive. */
        check("  version: 3.6.1\n", "  version: 3.5.30\n",
              "next.yaml:6:12: error: spec.version: 3.6.1 → 3.5.30 is a downgrade: etcd "
              "downgrades 3.6 to 3.5 only through its downgrade API (etcdctl downgrade "
              "validate/enable 3.5) before the binaries change, which gitcd does not drive; keep "
              "3.6.x, or create a new 3.5 cluster and restore a snapshot into it\n");
}

/* With the versions members were last started on: rollbacks and stragglers. */
static void test_version_running(void **state)
{
        (void)state;
        etcd_cluster *prev = load("prev.yaml", "  version: 3.5.16\n");
        etcd_cluster *next = load("next.yaml", "  version: 3.4.23\n");
        diag_list diags = DIAG_LIST_INIT;
        const char *unfinished[] = {"3.4.23", NULL, "3.5.16"};
        assert_int_equal(spec_check_transition_running(prev, next, unfinished, 3, &diags), 0);
        assert_int_equal(diags.n, 0);
        const char *finished[] = {"3.5.16", "3.5.16"};
        assert_int_equal(spec_check_transition_running(prev, next, finished, 2, &diags), -EPERM);
        assert_int_equal(diags.n, 1);
        /* No member ever held data (the cluster never formed): any version starts afresh. */
        assert_int_equal(spec_check_transition_running(prev, next, finished, 0, &diags), 0);
        assert_int_equal(diags.n, 1);
        diag_list_release(&diags);
        etcd_cluster_free(prev);
        etcd_cluster_free(next);
}

static void test_version_major(void **state)
{
        /* Major changes cannot be written in a valid spec; check the rule on the model. */
        etcd_cluster *prev = load("prev.yaml", "  version: 3.5.16\n");
        etcd_cluster *next = load("next.yaml", "  version: 3.5.16\n");
        free(next->version);
        next->version = xstrdup("4.0.0");
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_check_transition(prev, next, &diags), -EPERM);
        assert_int_equal(diags.n, 1);
        assert_string_equal(diags.items[0].message,
                            "spec.version: 3.5.16 → 4.0.0 changes the major version; etcd has no "
                            "in-place path between major versions (create a new cluster and "
                            "restore a snapshot into it)");
        diag_list_release(&diags);
        etcd_cluster_free(prev);
        etcd_cluster_free(next);
}

static void test_storage(void **state)
{
        check("  storage: {size: 1Gi}\n", "  storage: {size: 2Gi}\n", NULL);
        check("  storage: {size: 1Gi}\n", "  storage: {size: 1073741824}\n", NULL);
        check("  storage:\n    size: 10Gi\n", "  storage:\n    size: 5Gi\n",
              "next.yaml:7:11: error: spec.storage.size: 10Gi → 5Gi shrinks the volumes; volumes "
              "can only grow (keep 10Gi or more)\n");
        check("  storage:\n    medium: Disk\n", "  storage:\n    medium: Memory\n",
              "next.yaml:7:13: error: spec.storage.medium: Disk → Memory: the storage medium is "
              "fixed when a cluster is created; create a new cluster and restore a snapshot into "
              "it\n");
        check("  storage: {storageClassName: a}\n", "  storage: {storageClassName: a}\n", NULL);
}

#define FIXED                                                                                      \
        "TLS settings are fixed when a cluster is created, except that plain http may be "         \
        "switched to tls.provider auto and tls.provider auto back to plain http; create a new "    \
        "cluster with the new settings and restore a snapshot into it\n"

static void test_tls(void **state)
{
        const char *auto_tls = "  tls:\n    provider: auto\n";
        check(auto_tls, auto_tls, NULL);
        /* Switched on for a running cluster: plain http to auto, both surfaces or one. */
        check("  replicas: 3\n", auto_tls, NULL);
        check("  replicas: 3\n", "  tls:\n    provider: auto\n    client:\n      enabled: false\n",
              NULL);
        check("  tls:\n    provider: auto\n    peer:\n      enabled: false\n", auto_tls, NULL);
        check("  tls:\n    provider: auto\n    client:\n      enabled: false\n"
              "    peer:\n      enabled: false\n",
              auto_tls, NULL);
        /* Not on etcd 3.4: it cannot serve gRPC in plain and TLS on one port reliably. */
        check("  version: \"3.4.23\"\n", "  version: \"3.4.23\"\n  tls:\n    provider: auto\n",
              "next.yaml:8:15: error: spec.tls.provider: none → auto on a running cluster needs "
              "etcd 3.5 or later (the cluster runs 3.4.23): etcd 3.4 cannot reliably serve gRPC "
              "in plain http and https on one port, which the switch on needs; upgrade to 3.5 "
              "first\n");
        /* Not together with a change of the member count. */
        check("  replicas: 3\n", "  replicas: 5\n  tls:\n    provider: auto\n",
              "next.yaml:6:13: error: spec.replicas: 3 → 5 in the commit that switches TLS on: "
              "change the number of members in a commit of its own, before or after\n");
        /* Plain http beside https may come and go. */
        check(auto_tls, "  tls:\n    provider: auto\n    client:\n      allowPlainHTTP: true\n",
              NULL);
        /* Switched off again: auto to none, both surfaces or one (auto keeps the other). */
        check(auto_tls, "  tls:\n    provider: auto\n    peer:\n      enabled: false\n", NULL);
        check(auto_tls, "  tls:\n    provider: auto\n    client:\n      enabled: false\n", NULL);
        check(auto_tls, "  replicas: 3\n", NULL);
        check("  tls:\n    provider: auto\n    peer:\n      enabled: false\n", "  replicas: 3\n",
              NULL);
        /* ... with the same limits as the switch on. */
        check("  version: \"3.4.23\"\n  tls:\n    provider: auto\n", "  version: \"3.4.23\"\n",
              "next.yaml:5:1: error: spec.tls.provider: auto → none on a running cluster needs "
              "etcd 3.5 or later (the cluster runs 3.4.23): etcd 3.4 cannot reliably serve gRPC "
              "in plain http and https on one port, which the switch off needs; upgrade to 3.5 "
              "first\n");
        check("  replicas: 3\n  tls:\n    provider: auto\n", "  replicas: 5\n",
              "next.yaml:6:13: error: spec.replicas: 3 → 5 in the commit that switches TLS off: "
              "change the number of members in a commit of its own, before or after\n");
        /* Never one surface off and the other on in one commit, nor onto another provider. */
        check("  tls:\n    provider: auto\n    peer:\n      enabled: false\n",
              "  tls:\n    provider: auto\n    client:\n      enabled: false\n",
              "next.yaml:9:16: error: spec.tls.client.enabled: true → false: " FIXED
              "next.yaml:6:3: error: spec.tls.peer.enabled: false → true: " FIXED);
        check("  replicas: 3\n",
              "  tls:\n    provider: secrets\n    client:\n      secretRef: {name: s1}\n"
              "    peer:\n      secretRef: {name: p1}\n    operatorClient:\n"
              "      secretRef: {name: c1}\n",
              "next.yaml:7:15: error: spec.tls.provider: none → secrets: " FIXED);
        const char *cm = "  tls:\n    provider: cert-manager\n    client:\n"
                         "      issuerRef: {name: a}\n    peer:\n      issuerRef: {name: a}\n";
        const char *cm2 = "  tls:\n    provider: cert-manager\n    client:\n"
                          "      issuerRef: {name: a}\n    peer:\n"
                          "      issuerRef: {name: b, kind: ClusterIssuer}\n";
        check(cm, cm, NULL);
        check(
            cm, cm2,
            "next.yaml:11:25: error: spec.tls.peer.issuerRef: Issuer a → ClusterIssuer b: " FIXED);
        /* A pure auto-renewal setting is not part of the identity: validity may change. */
        check(auto_tls, "  tls:\n    provider: auto\n    auto: {validityDays: 60}\n", NULL);
}

/* spec.tls.peer.selfSigned is fixed: no rolling path between its members and others. */
static void test_tls_peer_self_signed(void **state)
{
        (void)state;
        const char *self = "  tls:\n    provider: none\n    peer:\n      selfSigned: true\n";
        check(self, self, NULL);
        check(self,
              "  replicas: 5\n  tls:\n    provider: none\n    peer:\n      selfSigned: true\n",
              NULL);
        check("  replicas: 3\n", self,
              "next.yaml:9:19: error: spec.tls.peer.selfSigned: false → true: etcd's self-signed "
              "peer certificates are fixed when a cluster is created (members with them and "
              "members without them cannot talk to each other); create a new cluster and restore "
              "a snapshot into it\n");
        check(self, "  tls:\n    provider: none\n",
              "next.yaml:6:3: error: spec.tls.peer.selfSigned: true → false: etcd's self-signed "
              "peer certificates are fixed when a cluster is created (members with them and "
              "members without them cannot talk to each other); create a new cluster and restore "
              "a snapshot into it\n");
}

static void test_tls_secrets(void **state)
{
        const char *a = "  tls:\n    provider: secrets\n    client:\n      secretRef: {name: s1}\n"
                        "    peer:\n      secretRef: {name: p1}\n    operatorClient:\n"
                        "      secretRef: {name: c1}\n";
        const char *b = "  tls:\n    provider: secrets\n    client:\n      secretRef: {name: s2}\n"
                        "    peer:\n      secretRef: {name: p1}\n    operatorClient:\n"
                        "      secretRef: {name: c2}\n    caBundleSecretRef: {name: bundle}\n";
        check(a, a, NULL);
        check(a, b,
              "next.yaml:9:25: error: spec.tls.client.secretRef: s1 → s2: " FIXED
              "next.yaml:13:25: error: spec.tls.operatorClient.secretRef: c1 → c2: " FIXED
              "next.yaml:14:31: error: spec.tls.caBundleSecretRef: (none) → bundle: " FIXED);
}

static void test_other_changes_allowed(void **state)
{
        check("  replicas: 3\n  resources: {requests: {cpu: 100m}}\n",
              "  replicas: 0\n  resources: {requests: {cpu: 2}}\n  options:\n"
              "    quotaBackendBytes: 4Gi\n  snapshots:\n    schedule: '0 * * * *'\n"
              "    destination: {local: {path: /backups}}\n  progressDeadlineSeconds: 60\n",
              NULL);
}

static void test_auth(void **state)
{
        check("  auth: {enabled: false}\n", "  auth: {enabled: false}\n", NULL);
        /* auth is switched on and off on a running cluster */
        check("  auth:\n    enabled: false\n", "  auth:\n    enabled: true\n", NULL);
        check("  auth:\n    enabled: true\n", "  auth:\n    enabled: false\n", NULL);
        check("  auth:\n    enabled: true\n", "", NULL);
        /* the root password's Secret may change: its password becomes the wanted one */
        check("  auth: {enabled: true, rootCredentialsSecretRef: {name: a}}\n",
              "  auth: {enabled: true, rootCredentialsSecretRef: {name: b}}\n", NULL);
        check("  auth: {enabled: true}\n",
              "  auth: {enabled: true, rootCredentialsSecretRef: {name: b}}\n", NULL);
}

static void test_several_refusals_at_once(void **state)
{
        check("  version: 3.4.23\n  storage:\n    size: 2Gi\n",
              "  version: 3.6.0\n  storage:\n    size: 1Gi\n",
              "next.yaml:8:11: error: spec.storage.size: 2Gi → 1Gi shrinks the volumes; volumes "
              "can only grow (keep 2Gi or more)\n"
              "next.yaml:6:12: error: spec.version: 3.4.23 → 3.6.0 skips minor 3.5; upgrade to "
              "3.5.x first, then to 3.6.x\n");
}

/*
 * A cluster stays on the API server it was created on: a context named
 * before may not change or go; one accepted without a context may take one.
 */
static void test_kube_context_fixed(void **state)
{
        (void)state;
        const char *east = "  version: 3.5.16\n  kubernetes:\n    context: east\n";
        check(east, east, NULL);
        check("  version: 3.5.16\n", east, NULL);
        check(east, "  version: 3.5.16\n  kubernetes:\n    context: west\n",
              "next.yaml:8:14: error: spec.kubernetes.context: east → west: a cluster stays on the "
              "API server it was created on (its Pods and volumes are there); to move it, create a "
              "new cluster on the other context and restore a snapshot into it\n");
        check(east, "  version: 3.5.16\n",
              "next.yaml:5:1: error: spec.kubernetes.context: east → (none): a cluster stays on "
              "the API server it was created on (its Pods and volumes are there); to move it, "
              "create a new cluster on the other context and restore a snapshot into it\n");
}

/* The field's own rules: a name of one line, of bounded length; written back as it was read. */
static void test_kube_context_field(void **state)
{
        (void)state;
        etcd_cluster *c = load("k.yaml", "  version: 3.5.16\n  kubernetes:\n    context: "
                                         "\"arn:aws:eks:eu-west-1:1:cluster/a b\"\n");
        assert_string_equal(c->kube_context, "arn:aws:eks:eu-west-1:1:cluster/a b");
        json_t *j = spec_to_json(c);
        assert_string_equal(
            json_string_value(json_object_get(
                json_object_get(json_object_get(j, "spec"), "kubernetes"), "context")),
            "arn:aws:eks:eu-west-1:1:cluster/a b");
        json_decref(j);
        etcd_cluster_free(c);
        /* no context: none in the normalized form, so earlier specs keep their hash */
        c = load("k.yaml", "  version: 3.5.16\n");
        j = spec_to_json(c);
        assert_null(json_object_get(json_object_get(j, "spec"), "kubernetes"));
        json_decref(j);
        etcd_cluster_free(c);

        const char *bad[][2] = {
            {"    context: \"\"\n", "k.yaml:8:14: error: spec.kubernetes.context: empty"},
            {"    context: \"a\\nb\"\n", "k.yaml:8:14: error: spec.kubernetes.context: a control "
                                         "character (0x0a) is not allowed"},
            {"    namespace: x\n", "k.yaml:8:5: error: unknown field \"namespace\" in "
                                   "spec.kubernetes"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_free_ char *text =
                    xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                              "metadata:\n  name: t\nspec:\n  version: 3.5.16\n  kubernetes:\n%s",
                              bad[i][0]);
                cluster_set set = {0};
                diag_list diags = DIAG_LIST_INIT;
                assert_true(spec_load_buffer("k.yaml", text, strlen(text), &set, &diags) < 0);
                bool found = false;
                for (size_t k = 0; k < diags.n; k++) {
                        _cleanup_free_ char *d = diag_format(&diags.items[k]);
                        found |= strncmp(d, bad[i][1], strlen(bad[i][1])) == 0;
                        if (!found)
                                print_message("%s\n", d);
                }
                assert_true(found);
                cluster_set_release(&set);
                diag_list_release(&diags);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_kube_context_fixed),
            cmocka_unit_test(test_kube_context_field),
            cmocka_unit_test(test_version_patch_and_minor),
            cmocka_unit_test(test_version_refused),
            cmocka_unit_test(test_version_running),
            cmocka_unit_test(test_version_major),
            cmocka_unit_test(test_storage),
            cmocka_unit_test(test_tls),
            cmocka_unit_test(test_tls_secrets),
            cmocka_unit_test(test_tls_peer_self_signed),
            cmocka_unit_test(test_other_changes_allowed),
            cmocka_unit_test(test_auth),
            cmocka_unit_test(test_several_refusals_at_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
