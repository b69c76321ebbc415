/*
 * spec.hosts, the machine inventory of the hosts target: every machine is
 * filled in from the hosts-level defaults and gitcd's own defaults, the
 * normalized form keeps all of it, and it reads back to the same spec
 * (what the state store relies on). Bad inventories are in the validation
 * corpus (tests/api/bad/6x-hosts-*.yaml).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/spec.h"
#include "util/xalloc.h"

static const char inventory[] = "apiVersion: gitcd.io/v1alpha1\n"
                                "kind: EtcdCluster\n"
                                "metadata:\n"
                                "  name: demo\n"
                                "spec:\n"
                                "  replicas: 3\n"
                                "  hosts:\n"
                                "    mode: staticPod\n"
                                "    ssh: {user: admin}\n"
                                "    machines:\n"
                                "    - address: 10.0.0.11\n"
                                "    - address: 10.0.0.12\n"
                                "      dataDir: /srv/etcd\n"
                                "    - address: cp3.example.com\n"
                                "      advertiseAddress: 10.0.0.13\n"
                                "      ssh: {port: 2222, user: root}\n";

static etcd_cluster *load(const char *text)
{
        cluster_set set = {0};
        diag_list d = {0};
        assert_int_equal(spec_load_buffer("hosts.yaml", text, strlen(text), &set, &d), 0);
        assert_int_equal(set.n, 1);
        etcd_cluster *c = set.items[0];
        free(set.items);
        diag_list_release(&d);
        return c;
}

static void test_defaults_filled(void **state)
{
        (void)state;
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = load(inventory);
        assert_true(c->hosts.set);
        assert_int_equal(c->hosts.n, 3);
        const host_spec *h = c->hosts.items;
        assert_int_equal(h[0].mode, HOST_MODE_STATIC_POD);
        assert_string_equal(h[0].ssh_user, "admin");
        assert_int_equal(h[0].ssh_port, 22);
        assert_string_equal(h[0].advertise_address, "10.0.0.11");
        assert_string_equal(h[0].data_dir, "/var/lib/etcd/default-demo");
        assert_string_equal(h[0].manifest_dir, "/etc/kubernetes/manifests");
        assert_string_equal(h[0].tls_dir, "/etc/etcd/default-demo/pki");
        assert_null(h[0].unit_dir);
        assert_string_equal(h[1].data_dir, "/srv/etcd");
        assert_string_equal(h[2].ssh_user, "root");
        assert_int_equal(h[2].ssh_port, 2222);
        assert_string_equal(h[2].advertise_address, "10.0.0.13");
}

static void test_systemd_defaults(void **state)
{
        (void)state;
        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
            load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: d}\n"
                 "spec:\n  replicas: 1\n  hosts:\n    mode: systemd\n"
                 "    etcdBinary: /opt/etcd/etcd\n    machines: [{address: h1}]\n");
        assert_int_equal(c->hosts.items[0].mode, HOST_MODE_SYSTEMD);
        assert_string_equal(c->hosts.items[0].unit_dir, "/etc/systemd/system");
        assert_string_equal(c->hosts.items[0].etcd_binary, "/opt/etcd/etcd");
        assert_null(c->hosts.items[0].manifest_dir);
}

static void test_normalized_round_trip(void **state)
{
        (void)state;
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = load(inventory);
        _cleanup_(etcd_cluster_freep) etcd_cluster *back = NULL;
        diag_list d = {0};
        json_t *j = spec_to_json(c);
        assert_int_equal(spec_from_json(j, "stored", &back, &d), 0);
        json_decref(j);
        diag_list_release(&d);
        assert_int_equal(back->hosts.n, 3);
        assert_string_equal(back->hosts.items[1].data_dir, "/srv/etcd");
        _cleanup_free_ char *h1 = spec_hash(c), *h2 = spec_hash(back);
        assert_string_equal(h1, h2);
}

static void test_no_hosts_no_change(void **state)
{
        (void)state;
        /* a spec without spec.hosts normalizes as before (no "hosts" key) */
        _cleanup_(etcd_cluster_freep) etcd_cluster *c =
            load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: d}\n");
        json_t *j = spec_to_json(c);
        assert_null(json_object_get(json_object_get(j, "spec"), "hosts"));
        json_decref(j);
}

static cluster_set load_set(const char *text)
{
        cluster_set set = {0};
        diag_list d = {0};
        assert_int_equal(spec_load_buffer("c.yaml", text, strlen(text), &set, &d), 0);
        diag_list_release(&d);
        return set;
}

static void test_taken_in_by_the_hosts_target_only(void **state)
{
        (void)state;
        /* spec.hosts is no field "not supported yet" any more: validate does not warn */
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = load(inventory);
        diag_list d = {0};
        assert_int_equal(spec_check_unsupported(c, SPEC_UNSUPPORTED_CREATE, &d), 0);
        assert_int_equal(d.n, 0);

        /* --target hosts takes it in */
        cluster_set set = load_set(inventory);
        assert_int_equal(spec_refuse_for_target(&set, true, false, &d), 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(d.n, 0);
        cluster_set_release(&set);

        /* any other target refuses it, pointing at spec.hosts */
        set = load_set(inventory);
        assert_int_equal(spec_refuse_for_target(&set, false, false, &d), -EOPNOTSUPP);
        assert_int_equal(set.n, 0);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.items[0].severity, DIAG_ERROR);
        assert_non_null(strstr(d.items[0].message, "spec.hosts"));
        assert_non_null(strstr(d.items[0].message, "needs --target hosts"));
        assert_int_equal(d.items[0].line, 7);
        diag_list_release(&d);
        cluster_set_release(&set);

        /* the hosts target refuses a cluster without spec.hosts, and keeps the others */
        set = load_set("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: "
                       "plain}\n---\n");
        cluster_set more = load_set(inventory);
        set.items = xrealloc(set.items, 2 * sizeof(*set.items));
        set.alloc = 2;
        set.items[set.n++] = more.items[0];
        more.n = 0;
        cluster_set_release(&more);
        assert_int_equal(spec_refuse_for_target(&set, true, false, &d), -EOPNOTSUPP);
        assert_int_equal(set.n, 1);
        assert_string_equal(set.items[0]->name, "demo");
        assert_int_equal(d.n, 1);
        assert_non_null(strstr(d.items[0].message, "--target hosts"));
        assert_non_null(strstr(d.items[0].message, "default/plain has none"));
        diag_list_release(&d);
        cluster_set_release(&set);
}

/* A PVC snapshot destination is taken in by a target with writer Pods only. */
static void test_pvc_destination_needs_a_writer(void **state)
{
        (void)state;
        static const char pvc[] = "apiVersion: gitcd.io/v1alpha1\n"
                                  "kind: EtcdCluster\n"
                                  "metadata: {name: p}\n"
                                  "spec:\n"
                                  "  snapshots:\n"
                                  "    schedule: \"0 * * * *\"\n"
                                  "    destination:\n"
                                  "      pvc: {claimName: backups, subPath: etcd}\n";
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = load(pvc);
        diag_list d = {0};
        /* no field "not supported yet": validate does not warn */
        assert_int_equal(spec_check_unsupported(c, SPEC_UNSUPPORTED_WARN, &d), 0);

        cluster_set set = load_set(pvc);
        assert_int_equal(spec_refuse_for_target(&set, false, true, &d), 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(d.n, 0);
        cluster_set_release(&set);

        set = load_set(pvc);
        assert_int_equal(spec_refuse_for_target(&set, false, false, &d), -EOPNOTSUPP);
        assert_int_equal(set.n, 0);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.items[0].severity, DIAG_ERROR);
        assert_non_null(strstr(d.items[0].message, "spec.snapshots.destination.pvc"));
        assert_non_null(strstr(d.items[0].message, "needs --target kubernetes"));
        assert_int_equal(d.items[0].line, 8);
        diag_list_release(&d);
        cluster_set_release(&set);

        /* written off, it asks for nothing */
        static const char off[] = "apiVersion: gitcd.io/v1alpha1\n"
                                  "kind: EtcdCluster\n"
                                  "metadata: {name: p}\n"
                                  "spec:\n"
                                  "  snapshots:\n"
                                  "    enabled: false\n"
                                  "    destination:\n"
                                  "      pvc: {claimName: backups}\n";
        set = load_set(off);
        assert_int_equal(spec_refuse_for_target(&set, false, false, &d), 0);
        assert_int_equal(set.n, 1);
        cluster_set_release(&set);
}

/*
 * A cozystack EtcdSnapshot into a claim (its own spec.destination.pvc, or
 * the cluster's claim it falls back to, even with scheduled snapshots
 * off) is taken in by a target with writer Pods only, refused at the
 * document elsewhere; into S3 it is taken in anywhere.
 */
static void test_etcdsnapshot_pvc_needs_a_writer(void **state)
{
        (void)state;
        static const char cluster[] = "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                                      "kind: EtcdCluster\n"
                                      "metadata: {name: main}\n"
                                      "spec: {replicas: 1, version: \"3.5.16\"}\n";
        static const char own[] = "---\n"
                                  "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                                  "kind: EtcdSnapshot\n"
                                  "metadata: {name: once}\n"
                                  "spec:\n"
                                  "  clusterRef: {name: main}\n"
                                  "  destination:\n"
                                  "    pvc: {claimName: backups, subPath: etcd}\n";
        _cleanup_free_ char *text = xasprintf("%s%s", cluster, own);
        cluster_set set = load_set(text);
        assert_int_equal(set.n, 1);
        assert_int_equal(set.items[0]->n_declared, 1);
        const storage_location *l = &set.items[0]->declared[0].destination;
        assert_int_equal(l->kind, DEST_PVC);
        assert_string_equal(l->claim_name, "backups");
        assert_string_equal(l->sub_path, "etcd");
        diag_list d = {0};
        assert_int_equal(spec_refuse_for_target(&set, false, true, &d), 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(d.n, 0);
        cluster_set_release(&set);

        set = load_set(text);
        assert_int_equal(spec_refuse_for_target(&set, false, false, &d), -EOPNOTSUPP);
        assert_int_equal(set.n, 0);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.items[0].severity, DIAG_ERROR);
        assert_non_null(strstr(d.items[0].message, "EtcdSnapshot default/once: "
                                                   "spec.destination.pvc"));
        assert_non_null(strstr(d.items[0].message, "needs --target kubernetes"));
        assert_int_equal(d.items[0].line, 12); /* its pvc */
        diag_list_release(&d);
        cluster_set_release(&set);

        /* no destination: the cluster's claim, though its scheduled snapshots are off */
        static const char fallback[] = "apiVersion: gitcd.io/v1alpha1\n"
                                       "kind: EtcdCluster\n"
                                       "metadata: {name: main}\n"
                                       "spec:\n"
                                       "  snapshots:\n"
                                       "    enabled: false\n"
                                       "    destination:\n"
                                       "      pvc: {claimName: backups}\n"
                                       "---\n"
                                       "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                                       "kind: EtcdSnapshot\n"
                                       "metadata: {name: once}\n"
                                       "spec: {clusterRef: {name: main}}\n";
        set = load_set(fallback);
        assert_int_equal(set.items[0]->n_declared, 1);
        assert_int_equal(spec_refuse_for_target(&set, false, true, &d), 0);
        assert_int_equal(set.n, 1);
        cluster_set_release(&set);
        set = load_set(fallback);
        assert_int_equal(spec_refuse_for_target(&set, false, false, &d), -EOPNOTSUPP);
        assert_int_equal(d.n, 1);
        assert_non_null(strstr(d.items[0].message, "takes cluster default/main's "
                                                   "spec.snapshots.destination.pvc"));
        diag_list_release(&d);
        cluster_set_release(&set);

        /* into S3: any target */
        static const char s3[] = "---\n"
                                 "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                                 "kind: EtcdSnapshot\n"
                                 "metadata: {name: once}\n"
                                 "spec:\n"
                                 "  clusterRef: {name: main}\n"
                                 "  destination:\n"
                                 "    s3: {bucket: snaps, credentialsSecretRef: {name: c}}\n";
        _cleanup_free_ char *t3 = xasprintf("%s%s", cluster, s3);
        set = load_set(t3);
        assert_int_equal(spec_refuse_for_target(&set, false, false, &d), 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(d.n, 0);
        cluster_set_release(&set);
}

/* spec.tls.peer.selfSigned is taken in only by a target that plans https peers for it. */
static void test_peer_self_signed_needs_the_capability(void **state)
{
        (void)state;
        static const char self[] = "apiVersion: gitcd.io/v1alpha1\n"
                                   "kind: EtcdCluster\n"
                                   "metadata: {name: s}\n"
                                   "spec:\n"
                                   "  tls:\n"
                                   "    provider: none\n"
                                   "    peer: {selfSigned: true}\n";
        diag_list d = {0};
        cluster_set set = load_set(self);
        assert_int_equal(spec_refuse_peer_self_signed(&set, true, &d), 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(d.n, 0);
        cluster_set_release(&set);

        set = load_set(self);
        assert_int_equal(spec_refuse_peer_self_signed(&set, false, &d), -EOPNOTSUPP);
        assert_int_equal(set.n, 0);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.items[0].severity, DIAG_ERROR);
        assert_non_null(strstr(d.items[0].message, "needs --target kubernetes or local"));
        assert_int_equal(d.items[0].line, 7);
        diag_list_release(&d);
        cluster_set_release(&set);

        /* a cluster without it is taken in by any target */
        set = load_set("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: p}\n");
        assert_int_equal(spec_refuse_peer_self_signed(&set, false, &d), 0);
        assert_int_equal(set.n, 1);
        cluster_set_release(&set);
        diag_list_release(&d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults_filled),
            cmocka_unit_test(test_systemd_defaults),
            cmocka_unit_test(test_normalized_round_trip),
            cmocka_unit_test(test_no_hosts_no_change),
            cmocka_unit_test(test_taken_in_by_the_hosts_target_only),
            cmocka_unit_test(test_pvc_destination_needs_a_writer),
            cmocka_unit_test(test_etcdsnapshot_pvc_needs_a_writer),
            cmocka_unit_test(test_peer_self_signed_needs_the_capability),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
