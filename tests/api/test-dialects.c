/*
 * Each dialect maps onto the model field by field: the examples in
 * examples/ are loaded and every field they set is checked, and the same
 * cluster written in each dialect normalizes to the same JSON wherever the
 * dialects can say the same thing.
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
#include "util/fs.h"
#include "util/xalloc.h"

static cluster_set set;
static diag_list diags;

static void print_diags(const diag_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                char *s = diag_format(&l->items[i]);
                print_message("%s\n", s);
                free(s);
        }
}

/* Load one example file; exactly one cluster, no errors. */
static etcd_cluster *load_example(const char *rel)
{
        char *root = getenv("GITCD_SOURCE_ROOT");
        assert_non_null(root);
        char *path = path_join(root, rel);
        char *paths[] = {path};
        cluster_set_release(&set);
        diag_list_release(&diags);
        int r = spec_load_paths(paths, 1, &set, &diags);
        free(path);
        if (r != 0)
                print_diags(&diags);
        assert_int_equal(r, 0);
        assert_int_equal(set.n, 1);
        return set.items[0];
}

static etcd_cluster *load_text(const char *text)
{
        cluster_set_release(&set);
        diag_list_release(&diags);
        int r = spec_load_buffer("test.yaml", text, strlen(text), &set, &diags);
        if (r != 0)
                print_diags(&diags);
        assert_int_equal(r, 0);
        assert_int_equal(set.n, 1);
        return set.items[0];
}

static size_t count(enum diag_severity sev)
{
        return diag_count(&diags, sev);
}

static void assert_json_str(const json_t *j, const char *path, const char *want)
{
        json_t *v = json_object_get(j, path);
        assert_non_null(v);
        assert_string_equal(json_string_value(v), want);
}

static void test_native_full(void **state)
{
        etcd_cluster *c = load_example("examples/full/etcd.yaml");
        assert_int_equal(count(DIAG_WARNING), 0);
        assert_int_equal(c->dialect, DIALECT_GITCD);
        assert_string_equal(c->name, "orders");
        assert_string_equal(c->namespace_, "storage");
        assert_string_equal(kv_get(&c->labels, "team"), "payments");
        assert_string_equal(kv_get(&c->annotations, "gitcd.io/owner"),
                            "payments-oncall@example.com");
        assert_int_equal(c->replicas, 5);
        assert_string_equal(c->version, "3.5.16");
        assert_int_equal(c->ver.minor, 5);
        assert_string_equal(c->repository, "quay.io/coreos/etcd");
        assert_string_equal(c->storage.size, "20Gi");
        assert_int_equal(c->storage.size_bytes, 20LL << 30);
        assert_int_equal(c->storage.medium, MEDIUM_DISK);
        assert_string_equal(c->storage.storage_class, "fast-ssd");

        assert_int_equal(c->tls.provider, TLS_PROVIDER_CERT_MANAGER);
        assert_true(c->tls.client.enabled);
        assert_true(c->tls.peer.enabled);
        assert_string_equal(c->tls.client.issuer.name, "etcd-ca");
        assert_string_equal(c->tls.client.issuer.kind, "ClusterIssuer");
        assert_string_equal(c->tls.client.issuer.group, "cert-manager.io");
        assert_string_equal(c->tls.peer.issuer.name, "etcd-peer-ca");
        assert_string_equal(c->tls.operator_client_issuer.name, "etcd-ca");
        assert_null(c->tls.client.secret);
        assert_string_equal(c->tls.ca_bundle_secret, "corporate-ca-bundle");

        assert_true(c->auth.enabled);
        assert_string_equal(c->auth.root_credentials_secret, "orders-etcd-root");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(c->resources, "limits"), "cpu")),
            "2");
        assert_non_null(json_object_get(c->affinity, "podAntiAffinity"));
        assert_int_equal(json_array_size(c->topology_spread_constraints), 1);
        assert_json_str(c->node_selector, "node-role.example.com/storage", "true");
        assert_int_equal(json_array_size(c->tolerations), 1);
        assert_string_equal(kv_get(&c->additional_labels, "cost-center"), "cc-1234");
        assert_string_equal(kv_get(&c->additional_annotations, "example.com/contact"), "payments");
        assert_string_equal(kv_get(&c->pod_labels, "sidecar.istio.io/inject"), "false");
        assert_string_equal(kv_get(&c->pod_annotations, "prometheus.io/scrape"), "true");

        assert_string_equal(c->options.quota_backend, "8Gi");
        assert_int_equal(c->options.quota_backend_bytes, 8LL << 30);
        assert_string_equal(c->options.auto_compaction_mode, "periodic");
        assert_string_equal(c->options.auto_compaction_retention, "1h");
        assert_int_equal(c->options.snapshot_count, 50000);
        assert_int_equal(c->options.heartbeat_interval_ms, 100);
        assert_int_equal(c->options.election_timeout_ms, 1000);
        assert_int_equal(c->options.extra_flags.n, 2);
        assert_string_equal(kv_get(&c->options.extra_flags, "max-request-bytes"), "1572864");
        assert_int_equal(c->progress_deadline_seconds, 900);

        assert_true(c->snapshots.enabled);
        assert_string_equal(c->snapshots.schedule, "15 */6 * * *");
        assert_int_equal(c->snapshots.retention_count, 14);
        assert_int_equal(c->snapshots.retention_max_age_ms, 7LL * 24 * 3600 * 1000);
        assert_int_equal(c->snapshots.destination.kind, DEST_S3);
        assert_string_equal(c->snapshots.destination.s3.bucket, "etcd-backups");
        assert_string_equal(c->snapshots.destination.s3.key, "orders/");
        assert_string_equal(c->snapshots.destination.s3.region, "eu-west-1");
        assert_false(c->snapshots.destination.s3.force_path_style);
        assert_string_equal(c->snapshots.destination.s3.credentials_secret, "etcd-backup-s3");

        assert_true(c->defrag.enabled);
        assert_string_equal(c->defrag.schedule, "30 3 * * sun");
        assert_int_equal(c->defrag.free_space_above_bytes, 512LL << 20);
        assert_int_equal(c->defrag.quota_usage_above_percent, 80);

        assert_true(c->restore.enabled);
        assert_int_equal(c->restore.source.kind, DEST_S3);
        assert_string_equal(c->restore.source.s3.key, "orders/2026-11-01T00-15-00Z.db");
        assert_int_equal(c->role, ROLE_GENERAL);
        assert_int_equal(c->restore.bump.mode, BUMP_AUTO);

        /* Locations point at what was written. */
        int line, col;
        etcd_cluster_loc(c, "spec.replicas", &line, &col);
        assert_int_equal(line, 13);
        assert_int_equal(col, 13);
        etcd_cluster_loc(c, "spec.storage.size", &line, &col);
        assert_int_equal(line, 18);
}

/* spec.defrag.disarmNoSpace alone asks for NOSPACE recovery, and survives normalization. */
static void test_native_disarm_nospace(void **state)
{
        (void)state;
        etcd_cluster *c = load_text("apiVersion: gitcd.io/v1alpha1\n"
                                    "kind: EtcdCluster\n"
                                    "metadata:\n"
                                    "  name: tiny\n"
                                    "spec:\n"
                                    "  defrag:\n"
                                    "    disarmNoSpace: true\n");
        assert_int_equal(count(DIAG_ERROR), 0);
        assert_true(c->defrag.enabled);
        assert_true(c->defrag.disarm_nospace);
        json_t *j = spec_to_json(c);
        etcd_cluster *back = NULL;
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_from_json(j, "test", &back, &d), 0);
        assert_true(back->defrag.disarm_nospace);
        json_decref(j);
        diag_list_release(&d);
        etcd_cluster_free(back);
}

static void test_native_defaults(void **state)
{
        etcd_cluster *c = load_text("apiVersion: gitcd.io/v1alpha1\n"
                                    "kind: EtcdCluster\n"
                                    "metadata:\n"
                                    "  name: tiny\n");
        assert_string_equal(c->namespace_, "default");
        assert_int_equal(c->replicas, GITCD_DEFAULT_REPLICAS);
        assert_string_equal(c->version, GITCD_DEFAULT_VERSION);
        assert_string_equal(c->repository, GITCD_DEFAULT_REPOSITORY);
        assert_string_equal(c->storage.size, GITCD_DEFAULT_STORAGE_SIZE);
        assert_int_equal(c->storage.size_bytes, 1LL << 30);
        assert_int_equal(c->tls.provider, TLS_PROVIDER_NONE);
        assert_false(c->tls.client.enabled);
        assert_false(c->auth.enabled);
        assert_int_equal(c->progress_deadline_seconds, 600);
        assert_false(c->snapshots.enabled);
        assert_int_equal(c->snapshots.retention_count, 7);
        assert_false(c->defrag.enabled);
        assert_false(c->restore.enabled);
        assert_null(c->affinity);
        assert_int_equal(diags.n, 0);
}

static void test_coreos(void **state)
{
        etcd_cluster *c = load_example("examples/dialects/coreos.yaml");
        assert_int_equal(c->dialect, DIALECT_COREOS);
        assert_int_equal(count(DIAG_WARNING), 1); /* spec.pod.busyboxImage */
        assert_non_null(strstr(diags.items[0].message, "spec.pod.busyboxImage is not supported"));
        assert_string_equal(c->name, "coreos-example");
        assert_int_equal(c->replicas, 3);
        assert_string_equal(c->version, "3.5.16");
        assert_string_equal(c->repository, "quay.io/coreos/etcd");
        assert_string_equal(kv_get(&c->pod_labels, "team"), "platform");
        assert_json_str(c->node_selector, "kubernetes.io/os", "linux");
        assert_non_null(json_object_get(c->resources, "requests"));
        /* antiAffinity: true -> required anti-affinity over hostnames */
        json_t *req = json_object_get(json_object_get(c->affinity, "podAntiAffinity"),
                                      "requiredDuringSchedulingIgnoredDuringExecution");
        assert_int_equal(json_array_size(req), 1);
        assert_json_str(json_array_get(req, 0), "topologyKey", "kubernetes.io/hostname");
        assert_string_equal(c->storage.size, "1Gi");
        assert_string_equal(c->storage.storage_class, "standard");
        assert_int_equal(c->tls.provider, TLS_PROVIDER_SECRETS);
        assert_string_equal(c->tls.peer.secret, "etcd-peer-tls");
        assert_string_equal(c->tls.client.secret, "etcd-server-tls");
        assert_string_equal(c->tls.operator_client_secret, "etcd-client-tls");
        assert_true(c->tls.peer.enabled && c->tls.client.enabled);
}

/* coreos paused is gitcd's suspend: etcd keeps serving, gitcd takes no voluntary step. */
static void test_coreos_paused_is_suspend(void **state)
{
        etcd_cluster *c = load_text("apiVersion: etcd.database.coreos.com/v1beta2\n"
                                    "kind: EtcdCluster\n"
                                    "metadata:\n"
                                    "  name: p\n"
                                    "spec:\n"
                                    "  size: 3\n"
                                    "  version: 3.5.16\n"
                                    "  paused: true\n");
        assert_int_equal(c->replicas, 3);
        assert_true(c->suspend);
        assert_int_equal(count(DIAG_WARNING), 0);
}

static void test_etcdio(void **state)
{
        etcd_cluster *c = load_example("examples/dialects/etcd-io.yaml");
        assert_int_equal(c->dialect, DIALECT_ETCDIO);
        assert_int_equal(count(DIAG_WARNING), 0);
        assert_int_equal(c->replicas, 3);
        assert_string_equal(c->repository, "quay.io/coreos/etcd");
        assert_string_equal(c->storage.size, "1Gi");
        assert_string_equal(c->storage.storage_class, "standard");
        assert_int_equal(c->options.quota_backend_bytes, 4294967296LL);
        assert_string_equal(c->options.auto_compaction_mode, "periodic");
        assert_string_equal(c->options.auto_compaction_retention, "1h");
        assert_int_equal(c->options.extra_flags.n, 1);
        assert_string_equal(kv_get(&c->options.extra_flags, "max-request-bytes"), "1572864");
        assert_int_equal(c->tls.provider, TLS_PROVIDER_CERT_MANAGER);
        assert_string_equal(c->tls.client.issuer.name, "etcd-ca");
        assert_string_equal(c->tls.client.issuer.kind, "ClusterIssuer");
        assert_string_equal(c->tls.peer.issuer.name, "etcd-ca");
        assert_string_equal(c->tls.operator_client_issuer.name, "etcd-ca");
        assert_string_equal(c->tls.ca_bundle_secret, "etcd-ca-bundle");
        assert_string_equal(kv_get(&c->pod_labels, "team"), "platform");
        assert_json_str(c->node_selector, "kubernetes.io/os", "linux");
}

static void test_etcdio_size_and_provider_cfg(void **state)
{
        etcd_cluster *c = load_text("apiVersion: operator.etcd.io/v1alpha1\n"
                                    "kind: EtcdCluster\n"
                                    "metadata:\n"
                                    "  name: old\n"
                                    "spec:\n"
                                    "  size: 5\n"
                                    "  version: 3.6.0\n"
                                    "  tls:\n"
                                    "    provider: auto\n"
                                    "    providerCfg:\n"
                                    "      autoCfg:\n"
                                    "        validityDuration: 100d\n"
                                    "        commonName: etcd\n");
        assert_int_equal(c->replicas, 5);
        assert_int_equal(c->tls.provider, TLS_PROVIDER_AUTO);
        assert_int_equal(c->tls.validity_seconds, 100 * TLS_DAY_SECONDS);
        assert_int_equal(count(DIAG_WARNING), 1); /* commonName is ignored */
}

static void test_improbable(void **state)
{
        etcd_cluster *c = load_example("examples/dialects/improbable.yaml");
        assert_int_equal(c->dialect, DIALECT_IMPROBABLE);
        assert_int_equal(count(DIAG_WARNING), 0);
        assert_int_equal(count(DIAG_NOTE), 1); /* the EtcdBackupSchedule is read */
        assert_non_null(strstr(diags.items[0].message,
                               "EtcdBackupSchedule \"improbable-example-hourly\" read as "
                               "spec.snapshots of default/improbable-example"));
        /* ... as the cluster's spec.snapshots, which survive the stored (normalized) form */
        assert_true(c->snapshots.enabled);
        assert_string_equal(c->snapshots.schedule, "0 * * * *");
        assert_int_equal(c->snapshots.destination.kind, DEST_S3);
        assert_string_equal(c->snapshots.destination.s3.bucket, "example-backups");
        assert_string_equal(c->snapshots.destination.s3.key, "etcd");
        assert_null(c->snapshots.destination.s3.credentials_secret);
        assert_int_equal(c->snapshots.retention_count, 7);
        json_t *j = spec_to_json(c);
        etcd_cluster *back = NULL;
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_from_json(j, "stored", &back, &d), 0);
        assert_true(back->snapshots.enabled);
        assert_string_equal(back->snapshots.schedule, "0 * * * *");
        assert_string_equal(back->snapshots.destination.s3.key, "etcd");
        etcd_cluster_free(back);
        diag_list_release(&d);
        json_decref(j);
        assert_int_equal(c->replicas, 3);
        assert_string_equal(c->storage.size, "1Gi");
        assert_string_equal(c->storage.storage_class, "standard");
        assert_string_equal(kv_get(&c->pod_annotations, "prometheus.io/scrape"), "true");
        assert_non_null(json_object_get(c->resources, "limits"));
        assert_non_null(json_object_get(c->affinity, "podAntiAffinity"));
}

static void test_cozystack(void **state)
{
        etcd_cluster *c = load_example("examples/dialects/cozystack.yaml");
        assert_int_equal(c->dialect, DIALECT_COZYSTACK);
        /* the EtcdSnapshot beside it is read, into a folder of a claim */
        assert_int_equal(diags.n, 1);
        assert_int_equal(count(DIAG_NOTE), 1);
        assert_non_null(strstr(diags.items[0].message,
                               "EtcdSnapshot \"cozystack-example-before-migration\" read as one "
                               "snapshot of default/cozystack-example to "
                               "pvc://etcd-backups/cozystack-example"));
        assert_int_equal(c->n_declared, 1);
        assert_int_equal(c->declared[0].destination.kind, DEST_PVC);
        assert_int_equal(c->replicas, 3);
        assert_string_equal(c->storage.size, "1Gi");
        assert_int_equal(c->tls.provider, TLS_PROVIDER_SECRETS);
        assert_string_equal(c->tls.client.secret, "cozystack-example-server-tls");
        assert_string_equal(c->tls.operator_client_secret, "cozystack-example-client-tls");
        assert_string_equal(c->tls.peer.secret, "cozystack-example-peer-tls");
        assert_true(c->auth.enabled);
        assert_string_equal(c->auth.root_credentials_secret, "cozystack-example-root");
        assert_string_equal(kv_get(&c->additional_labels, "team"), "platform");
        assert_int_equal(c->progress_deadline_seconds, 600);
}

static void test_cozystack_pause_and_memory(void **state)
{
        etcd_cluster *c = load_text("apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                                    "kind: EtcdCluster\n"
                                    "metadata:\n"
                                    "  name: paused\n"
                                    "spec:\n"
                                    "  replicas: 0\n"
                                    "  version: 3.6.11\n"
                                    "  tls:\n"
                                    "    peer:\n"
                                    "      certManager:\n"
                                    "        issuerRef: {name: peer-ca, kind: ClusterIssuer}\n"
                                    "  bootstrap:\n"
                                    "    restore:\n"
                                    "      source:\n"
                                    "        pvc: {claimName: backups, subPath: snap.db}\n");
        assert_int_equal(c->replicas, 0);
        assert_int_equal(c->tls.provider, TLS_PROVIDER_CERT_MANAGER);
        assert_true(c->tls.peer.enabled);
        assert_false(c->tls.client.enabled);
        assert_string_equal(c->tls.peer.issuer.kind, "ClusterIssuer");
        assert_true(c->restore.enabled);
        assert_int_equal(c->restore.source.kind, DEST_PVC);
        assert_string_equal(c->restore.source.sub_path, "snap.db");
        /* cozystack backs Kubernetes control planes: its restores bump the revision */
        assert_int_equal(c->role, ROLE_KUBERNETES);
        assert_int_equal(c->restore.bump.mode, BUMP_AUTO);
}

/* The same three-member cluster in every dialect. */
static const char *const same_cluster[] = {
    "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: same\n"
    "spec:\n  replicas: 3\n  version: 3.5.16\n  storage:\n    size: 2Gi\n"
    "    storageClassName: ssd\n  resources:\n    requests: {cpu: 500m}\n"
    "  affinity:\n    nodeAffinity: {}\n",
    "apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdCluster\nmetadata:\n"
    "  name: same\n  namespace: default\nspec:\n  size: 3\n  version: 3.5.16\n"
    "  pod:\n    resources:\n      requests: {cpu: 500m}\n    affinity:\n"
    "      nodeAffinity: {}\n    persistentVolumeClaimSpec:\n"
    "      storageClassName: ssd\n      resources: {requests: {storage: 2Gi}}\n",
    "apiVersion: operator.etcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: same\n"
    "spec:\n  replicas: 3\n  version: 3.5.16\n  storageSpec:\n"
    "    volumeSizeRequest: 2Gi\n    storageClassName: ssd\n  podTemplate:\n    spec:\n"
    "      resources:\n        requests: {cpu: 500m}\n      affinity:\n"
    "        nodeAffinity: {}\n",
    "apiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: same\n"
    "spec:\n  replicas: 3\n  version: 3.5.16\n  storage:\n    volumeClaimTemplate:\n"
    "      storageClassName: ssd\n      resources:\n        requests:\n"
    "          storage: 2Gi\n  podTemplate:\n    resources:\n      requests: {cpu: 500m}\n"
    "    affinity:\n      nodeAffinity: {}\n",
};

/*
 * cozystack's clusters back Kubernetes control planes (Kamaji): the dialect
 * is kubernetes-control-plane, and normalizes alike the native spec that
 * says so.
 */
static const char *const same_control_plane[] = {
    "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: same\n"
    "spec:\n  replicas: 3\n  version: 3.5.16\n  role: kubernetes-control-plane\n"
    "  storage:\n    size: 2Gi\n    storageClassName: ssd\n  resources:\n"
    "    requests: {cpu: 500m}\n  affinity:\n    nodeAffinity: {}\n",
    "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n"
    "  name: same\nspec:\n  replicas: 3\n  version: 3.5.16\n  storage:\n    size: 2Gi\n"
    "    storageClassName: ssd\n  resources:\n    requests: {cpu: 500m}\n  affinity:\n"
    "    nodeAffinity: {}\n",
};

static void normalize_alike(const char *const *texts, size_t n, cluster_role role)
{
        char *first = NULL, *first_hash = NULL;
        for (size_t i = 0; i < n; i++) {
                etcd_cluster *c = load_text(texts[i]);
                assert_int_equal(c->role, role);
                assert_int_equal(diags.n, 0);
                json_t *j = spec_to_json(c);
                char *s = json_dumps(j, JSON_INDENT(2));
                char *h = spec_hash(c);
                json_decref(j);
                if (!first) {
                        first = s;
                        first_hash = h;
                        continue;
                }
                if (!streq(first, s))
                        print_message("dialect %s differs:\n%s\nvs\n%s\n", dialect_name(c->dialect),
                                      s, first);
                assert_string_equal(s, first);
                assert_string_equal(h, first_hash);
                free(s);
                free(h);
        }
        free(first);
        free(first_hash);
}

static void test_dialects_normalize_alike(void **state)
{
        (void)state;
        normalize_alike(same_cluster, ARRAY_SIZE(same_cluster), ROLE_GENERAL);
        normalize_alike(same_control_plane, ARRAY_SIZE(same_control_plane), ROLE_KUBERNETES);
}

#define COZY_CLUSTER                                                                               \
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"                                        \
        "kind: EtcdCluster\n"                                                                      \
        "metadata:\n  name: main\n"                                                                \
        "spec:\n  replicas: 3\n  version: \"3.5.16\"\n"

#define IMPROBABLE_CLUSTER                                                                         \
        "apiVersion: etcd.improbable.io/v1alpha1\n"                                                \
        "kind: EtcdCluster\n"                                                                      \
        "metadata:\n  name: main\n"                                                                \
        "spec:\n  replicas: 3\n  version: \"3.5.16\"\n"

static const char *schedule_doc(const char *schedule, const char *url, const char *object)
{
        static char buf[1024];
        snprintf(buf, sizeof(buf),
                 "apiVersion: etcd.improbable.io/v1alpha1\n"
                 "kind: EtcdBackupSchedule\n"
                 "metadata:\n  name: hourly\n"
                 "spec:\n  schedule: \"%s\"\n"
                 "  backupSpec:\n"
                 "    source:\n      clusterURL: %s\n"
                 "    destination:\n      objectURLTemplate: %s\n",
                 schedule, url, object);
        return buf;
}

/* Load text expecting errors; the message of the first error contains want. */
static void assert_load_error(const char *text, const char *want)
{
        cluster_set_release(&set);
        diag_list_release(&diags);
        assert_int_equal(spec_load_buffer("test.yaml", text, strlen(text), &set, &diags), -EINVAL);
        for (size_t i = 0; i < diags.n; i++)
                if (diags.items[i].severity == DIAG_ERROR) {
                        if (!strstr(diags.items[i].message, want))
                                print_diags(&diags);
                        assert_non_null(strstr(diags.items[i].message, want));
                        return;
                }
        fail_msg("no error");
}

/* The schedule may come before the cluster; the prefix ends before the first template field. */
static void test_improbable_schedule_any_order(void **state)
{
        (void)state;
        char text[2048];
        snprintf(text, sizeof(text), "%s---\n%s",
                 schedule_doc("*/15 * * * *", "https://main:2379", "s3://b/x/y-{{ .UID }}.db"),
                 IMPROBABLE_CLUSTER);
        etcd_cluster *c = load_text(text);
        assert_string_equal(c->snapshots.schedule, "*/15 * * * *");
        assert_string_equal(c->snapshots.destination.s3.bucket, "b");
        assert_string_equal(c->snapshots.destination.s3.key, "x");
        snprintf(text, sizeof(text), "%s---\n%s", IMPROBABLE_CLUSTER,
                 schedule_doc("0 3 * * *", "http://main.default.svc.cluster.local:2379",
                              "s3://b/snapshot.db"));
        c = load_text(text);
        assert_null(c->snapshots.destination.s3.key);
}

/* What does not map is an error at the document, never skipped. */
static void test_side_kinds_refused(void **state)
{
        (void)state;
        char text[2048];
        snprintf(text, sizeof(text), "%s---\n%s", IMPROBABLE_CLUSTER,
                 schedule_doc("0 * * * *", "http://main:2379", "gs://b/{{ .Name }}.db"));
        assert_load_error(text, "Google Cloud Storage is not supported");
        snprintf(text, sizeof(text), "%s---\n%s", IMPROBABLE_CLUSTER,
                 schedule_doc("0 25 * * *", "http://main:2379", "s3://b/p/{{ .Name }}.db"));
        assert_load_error(text, "spec.schedule:");
        /* not in the set loaded, or in another namespace */
        snprintf(text, sizeof(text), "%s---\n%s", IMPROBABLE_CLUSTER,
                 schedule_doc("0 * * * *", "http://other:2379", "s3://b/p.db"));
        assert_load_error(text, "names cluster default/other, which is not defined");
        snprintf(text, sizeof(text), "%s---\n%s", IMPROBABLE_CLUSTER,
                 schedule_doc("0 * * * *", "http://main.prod.svc:2379", "s3://b/p.db"));
        assert_load_error(text,
                          "is a cluster of namespace prod; the EtcdBackupSchedule is in default");
        /* a cluster that has snapshots of its own */
        snprintf(text, sizeof(text),
                 "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: main\n"
                 "spec:\n  replicas: 1\n  snapshots:\n    schedule: \"0 * * * *\"\n"
                 "    destination:\n      local:\n        path: /srv/snaps\n---\n%s",
                 schedule_doc("0 * * * *", "http://main:2379", "s3://b/p.db"));
        assert_load_error(text, "has snapshots already");
        /* one-off snapshots: a destination gitcd cannot write to, or none at all */
        snprintf(text, sizeof(text),
                 "%s---\napiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdBackup\n"
                 "metadata:\n  name: once\nspec:\n  source:\n    clusterURL: http://main:2379\n",
                 IMPROBABLE_CLUSTER);
        assert_load_error(text, "spec.destination is required");
        assert_int_equal(set.n, 1); /* the cluster itself is still read */
        snprintf(text, sizeof(text),
                 "%s---\napiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                 "metadata:\n  name: snap\nspec:\n  clusterRef:\n    name: main\n"
                 "  destination:\n    pvc:\n      volumeClaimTemplate: {}\n",
                 COZY_CLUSTER);
        assert_load_error(text, "unknown field \"volumeClaimTemplate\" in spec.destination.pvc");
        snprintf(text, sizeof(text),
                 "%s---\napiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                 "metadata:\n  name: snap\nspec:\n  clusterRef:\n    name: main\n",
                 COZY_CLUSTER);
        assert_load_error(text, "EtcdSnapshot \"snap\" names no destination, and cluster "
                                "default/main has no spec.snapshots.destination");
}

static const char *cozy_snapshot(const char *name, const char *bucket)
{
        static char buf[1024];
        snprintf(buf, sizeof(buf),
                 "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                 "metadata:\n  name: %s\nspec:\n  clusterRef:\n    name: main\n"
                 "  destination:\n    s3:\n      endpoint: https://s3.example.com\n"
                 "      bucket: %s\n      key: main\n      forcePathStyle: true\n"
                 "      credentialsSecretRef:\n        name: s3-creds\n",
                 name, bucket);
        return buf;
}

/*
 * One-off snapshots (cozystack EtcdSnapshot, improbable EtcdBackup) join
 * their cluster as declared snapshots, outside the spec: its hash does not
 * change; the identity follows what the document asks.
 */
static void test_one_off_snapshots(void **state)
{
        (void)state;
        char text[4096];
        etcd_cluster *c = load_text(COZY_CLUSTER);
        _cleanup_free_ char *plain = spec_hash(c);

        snprintf(text, sizeof(text), "%s---\n%s", cozy_snapshot("nightly-1", "snaps"),
                 COZY_CLUSTER);
        c = load_text(text);
        _cleanup_free_ char *with = spec_hash(c);
        assert_string_equal(plain, with);
        assert_int_equal(c->n_declared, 1);
        assert_string_equal(c->declared[0].object, "EtcdSnapshot default/nightly-1");
        assert_int_equal(strlen(c->declared[0].identity), 64);
        assert_int_equal(c->declared[0].destination.kind, DEST_S3);
        assert_string_equal(c->declared[0].destination.s3.bucket, "snaps");
        assert_string_equal(c->declared[0].destination.s3.key, "main");
        assert_string_equal(c->declared[0].destination.s3.credentials_secret, "s3-creds");
        _cleanup_free_ char *id1 = xstrdup(c->declared[0].identity);
        c = load_text(text); /* the same document: the same identity */
        assert_string_equal(c->declared[0].identity, id1);
        snprintf(text, sizeof(text), "%s---\n%s", cozy_snapshot("nightly-1", "other"),
                 COZY_CLUSTER);
        c = load_text(text); /* edited: another request */
        assert_string_not_equal(c->declared[0].identity, id1);

        /* improbable EtcdBackup: the bucket of objectURLTemplate, gitcd names the object */
        snprintf(text, sizeof(text),
                 "%s---\napiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdBackup\n"
                 "metadata:\n  name: once\nspec:\n  source:\n    clusterURL: http://main:2379\n"
                 "  destination:\n    objectURLTemplate: s3://b/adhoc/{{ .UID }}.db\n",
                 IMPROBABLE_CLUSTER);
        c = load_text(text);
        assert_int_equal(c->n_declared, 1);
        assert_string_equal(c->declared[0].object, "EtcdBackup default/once");
        assert_string_equal(c->declared[0].destination.s3.bucket, "b");
        assert_string_equal(c->declared[0].destination.s3.key, "adhoc");
        assert_false(c->snapshots.enabled);

        /* without a destination: the cluster's spec.snapshots destination */
        snprintf(text, sizeof(text),
                 "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: main\n"
                 "spec:\n  replicas: 1\n  snapshots:\n    schedule: \"0 * * * *\"\n"
                 "    destination:\n      local:\n        path: /srv/snaps\n---\n"
                 "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                 "metadata:\n  name: snap\nspec:\n  clusterRef:\n    name: main\n");
        c = load_text(text);
        assert_int_equal(c->n_declared, 1);
        assert_int_equal(c->declared[0].destination.kind, DEST_NONE);

        /* into a folder of a PersistentVolumeClaim, as spec.snapshots.destination.pvc */
        snprintf(text, sizeof(text),
                 "%s---\napiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                 "metadata:\n  name: snap\nspec:\n  clusterRef:\n    name: main\n"
                 "  destination:\n    pvc:\n      claimName: backups\n      subPath: etcd\n",
                 COZY_CLUSTER);
        c = load_text(text);
        assert_int_equal(c->n_declared, 1);
        assert_int_equal(c->declared[0].destination.kind, DEST_PVC);
        assert_string_equal(c->declared[0].destination.claim_name, "backups");
        assert_string_equal(c->declared[0].destination.sub_path, "etcd");

        /* without a destination, the cluster's claim: taken, not dropped */
        snprintf(text, sizeof(text),
                 "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: main\n"
                 "spec:\n  replicas: 1\n  snapshots:\n    schedule: \"0 * * * *\"\n"
                 "    destination:\n      pvc:\n        claimName: backups\n---\n"
                 "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                 "metadata:\n  name: snap\nspec:\n  clusterRef:\n    name: main\n");
        c = load_text(text);
        assert_int_equal(c->n_declared, 1);
        assert_int_equal(c->declared[0].destination.kind, DEST_NONE);
}

/*
 * improbable EtcdRestore: the cluster clusterTemplate.clusterName names is
 * created from the object of spec.source.objectURL (gocloud.dev's query
 * read); clusterTemplate.spec is not read, with a warning.
 */
static void test_improbable_restore(void **state)
{
        (void)state;
        static const char *const text =
            "apiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdRestore\n"
            "metadata:\n  name: etcdrestore-sample\n"
            "spec:\n  source:\n"
            "    objectURL: s3://foo-bucket/backups/main.db?endpoint=minio%3A9000&region=eu-west-2"
            "&disableSSL=true&s3ForcePathStyle=true\n"
            "  clusterTemplate:\n    clusterName: main\n    spec:\n      replicas: "
            "3\n---\n" IMPROBABLE_CLUSTER;
        etcd_cluster *c = load_text(text);
        assert_true(c->restore.enabled);
        assert_int_equal(c->restore.source.kind, DEST_S3);
        assert_string_equal(c->restore.source.s3.bucket, "foo-bucket");
        assert_string_equal(c->restore.source.s3.key, "backups/main.db");
        assert_string_equal(c->restore.source.s3.endpoint, "http://minio:9000");
        assert_string_equal(c->restore.source.s3.region, "eu-west-2");
        assert_true(c->restore.source.s3.force_path_style);
        assert_null(c->restore.source.s3.credentials_secret);
        bool warned = false;
        for (size_t i = 0; i < diags.n; i++)
                warned = warned ||
                         (diags.items[i].severity == DIAG_WARNING &&
                          strstr(diags.items[i].message, "spec.clusterTemplate.spec is not read"));
        assert_true(warned);

        char bad[1024];
        snprintf(bad, sizeof(bad),
                 "apiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdRestore\nmetadata:\n"
                 "  name: r\nspec:\n  source:\n    objectURL: %s\n  clusterTemplate:\n"
                 "    clusterName: main\n---\n" IMPROBABLE_CLUSTER,
                 "gs://b/main.db");
        assert_load_error(bad, "Google Cloud Storage is not supported");
        snprintf(bad, sizeof(bad),
                 "apiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdRestore\nmetadata:\n"
                 "  name: r\nspec:\n  source:\n    objectURL: %s\n  clusterTemplate:\n"
                 "    clusterName: main\n---\n" IMPROBABLE_CLUSTER,
                 "s3://just-a-bucket");
        assert_load_error(bad, "is not s3://BUCKET/KEY");
        snprintf(bad, sizeof(bad),
                 "apiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdRestore\nmetadata:\n"
                 "  name: r\nspec:\n  source:\n    objectURL: %s\n  clusterTemplate:\n"
                 "    clusterName: main\n---\n" IMPROBABLE_CLUSTER,
                 "s3://b/k.db?awssdk=v2");
        assert_load_error(bad, "query parameter \"awssdk\" is not supported");
        snprintf(bad, sizeof(bad),
                 "apiVersion: etcd.improbable.io/v1alpha1\nkind: EtcdRestore\nmetadata:\n"
                 "  name: r\nspec:\n  source:\n    objectURL: s3://b/k.db\n  clusterTemplate:\n"
                 "    clusterName: other\n---\n" IMPROBABLE_CLUSTER);
        assert_load_error(bad, "names cluster default/other, which is not defined");
}

/* coreos EtcdRestore: the cluster it names is created from the S3 object. */
static void test_coreos_restore(void **state)
{
        (void)state;
        static const char *const text = "apiVersion: etcd.database.coreos.com/v1beta2\n"
                                        "kind: EtcdRestore\n"
                                        "metadata:\n  name: from-backup\n"
                                        "spec:\n"
                                        "  etcdCluster:\n    name: orders\n"
                                        "  backupStorageType: S3\n"
                                        "  s3:\n"
                                        "    path: backups/orders/etcd.backup\n"
                                        "    awsSecret: aws\n"
                                        "    endpoint: http://minio:9000\n"
                                        "    forcePathStyle: true\n"
                                        "---\n"
                                        "apiVersion: etcd.database.coreos.com/v1beta2\n"
                                        "kind: EtcdCluster\n"
                                        "metadata:\n  name: orders\n"
                                        "spec:\n  size: 3\n  version: \"3.5.16\"\n";
        etcd_cluster *c = load_text(text);
        assert_true(c->restore.enabled);
        assert_int_equal(c->restore.source.kind, DEST_S3);
        assert_string_equal(c->restore.source.s3.bucket, "backups");
        assert_string_equal(c->restore.source.s3.key, "orders/etcd.backup");
        assert_string_equal(c->restore.source.s3.credentials_secret, "aws");
        assert_string_equal(c->restore.source.s3.endpoint, "http://minio:9000");
        assert_true(c->restore.source.s3.force_path_style);
        /* coreos clusters are general: the restore keeps the snapshot's revision */
        assert_int_equal(c->role, ROLE_GENERAL);
        assert_int_equal(c->restore.bump.mode, BUMP_FIXED);
        assert_int_equal(c->restore.bump.amount, 0);
        assert_int_equal(count(DIAG_NOTE), 1);
        assert_non_null(strstr(diags.items[0].message,
                               "EtcdRestore \"from-backup\" read as spec.bootstrap.restore of "
                               "default/orders"));

        assert_load_error("apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdRestore\n"
                          "metadata:\n  name: r\nspec:\n  etcdCluster:\n    name: orders\n"
                          "  backupStorageType: ABS\n",
                          "spec.backupStorageType: \"ABS\" is not supported");
}

static int teardown(void **state)
{
        cluster_set_release(&set);
        diag_list_release(&diags);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_native_full),
            cmocka_unit_test(test_native_defaults),
            cmocka_unit_test(test_native_disarm_nospace),
            cmocka_unit_test(test_coreos),
            cmocka_unit_test(test_coreos_paused_is_suspend),
            cmocka_unit_test(test_etcdio),
            cmocka_unit_test(test_etcdio_size_and_provider_cfg),
            cmocka_unit_test(test_improbable),
            cmocka_unit_test(test_improbable_schedule_any_order),
            cmocka_unit_test(test_side_kinds_refused),
            cmocka_unit_test(test_one_off_snapshots),
            cmocka_unit_test(test_improbable_restore),
            cmocka_unit_test(test_coreos_restore),
            cmocka_unit_test(test_cozystack),
            cmocka_unit_test(test_cozystack_pause_and_memory),
            cmocka_unit_test(test_dialects_normalize_alike),
        };
        return cmocka_run_group_tests(tests, NULL, teardown);
}
