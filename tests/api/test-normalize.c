/*
 * The normalized form: for every example, load -> to_json -> from_json ->
 * to_json is identical (and so is the hash); the quickstart example
 * normalizes to an exact, documented JSON text; the hash follows meaning,
 * not spelling.
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

static void print_diags(const diag_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                char *s = diag_format(&l->items[i]);
                print_message("%s\n", s);
                free(s);
        }
}

static char *dump(const etcd_cluster *c)
{
        json_t *j = spec_to_json(c);
        char *s = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        return s;
}

static void round_trip(const char *rel)
{
        char *root = getenv("GITCD_SOURCE_ROOT");
        assert_non_null(root);
        char *path = path_join(root, rel);
        char *paths[] = {path};
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_paths(paths, 1, &set, &diags), 0);
        assert_true(set.n >= 1);
        for (size_t i = 0; i < set.n; i++) {
                char *a = dump(set.items[i]);
                json_t *j = spec_to_json(set.items[i]);
                etcd_cluster *back = NULL;
                diag_list d2 = DIAG_LIST_INIT;
                int r = spec_from_json(j, "state:test", &back, &d2);
                if (r != 0) {
                        print_message("%s\n", a);
                        print_diags(&d2);
                }
                assert_int_equal(r, 0);
                assert_int_equal(d2.n, 0); /* the normalized form has nothing to warn about */
                char *b = dump(back);
                assert_string_equal(a, b);
                char *h1 = spec_hash(set.items[i]), *h2 = spec_hash(back);
                assert_string_equal(h1, h2);
                assert_int_equal(strlen(h1), 64);
                free(h1);
                free(h2);
                free(a);
                free(b);
                json_decref(j);
                etcd_cluster_free(back);
                diag_list_release(&d2);
        }
        cluster_set_release(&set);
        diag_list_release(&diags);
        free(path);
}

static void test_round_trip_quickstart(void **state)
{
        round_trip("examples/quickstart/etcd.yaml");
}

static void test_round_trip_full(void **state)
{
        round_trip("examples/full/etcd.yaml");
}

static void test_round_trip_dialects(void **state)
{
        round_trip("examples/dialects/coreos.yaml");
        round_trip("examples/dialects/etcd-io.yaml");
        round_trip("examples/dialects/improbable.yaml");
        round_trip("examples/dialects/cozystack.yaml");
}

static const char quickstart_json[] =
    "{\"apiVersion\":\"gitcd.io/v1alpha1\",\"kind\":\"EtcdCluster\","
    "\"metadata\":{\"name\":\"quickstart\",\"namespace\":\"default\",\"labels\":{},"
    "\"annotations\":{}},"
    "\"spec\":{\"replicas\":3,\"version\":\"3.5.16\",\"repository\":\"quay.io/coreos/etcd\","
    "\"storage\":{\"size\":\"1Gi\",\"medium\":\"Disk\"},"
    "\"tls\":{\"provider\":\"none\"},"
    "\"auth\":{\"enabled\":false},"
    "\"additionalMetadata\":{\"labels\":{},\"annotations\":{}},"
    "\"podTemplate\":{\"metadata\":{\"labels\":{},\"annotations\":{}}},"
    "\"options\":{\"extraFlags\":{}},"
    "\"progressDeadlineSeconds\":600,"
    "\"snapshots\":{\"enabled\":false,\"retention\":{\"count\":7}},"
    "\"defrag\":{\"enabled\":false}}}";

static void test_quickstart_exact(void **state)
{
        char *root = getenv("GITCD_SOURCE_ROOT");
        char *path = path_join(root, "examples/quickstart/etcd.yaml");
        char *paths[] = {path};
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_paths(paths, 1, &set, &diags), 0);
        json_t *j = spec_to_json(set.items[0]);
        char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(s, quickstart_json);
        free(s);
        json_decref(j);
        cluster_set_release(&set);
        diag_list_release(&diags);
        free(path);
}

static etcd_cluster *load(const char *text)
{
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("t.yaml", text, strlen(text), &set, &diags), 0);
        assert_int_equal(set.n, 1);
        etcd_cluster *c = set.items[0];
        free(set.items);
        diag_list_release(&diags);
        return c;
}

static void test_hash_follows_meaning(void **state)
{
        /* Defaults written out or left implicit, keys in another order: same hash. */
        etcd_cluster *a = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec: {replicas: 3}\n");
        etcd_cluster *b = load("kind: EtcdCluster\napiVersion: gitcd.io/v1alpha1\n"
                               "metadata: {namespace: default, name: h}\n"
                               "spec:\n  storage: {medium: Disk, size: 1Gi}\n"
                               "  progressDeadlineSeconds: 600\n  replicas: 3\n"
                               "  version: 3.5.16\n  tls: {provider: none}\n");
        etcd_cluster *c = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec: {replicas: 5}\n");
        char *ha = spec_hash(a), *hb = spec_hash(b), *hc = spec_hash(c);
        assert_string_equal(ha, hb);
        assert_string_not_equal(ha, hc);
        for (const char *p = ha; *p; p++)
                assert_true((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
        free(ha);
        free(hb);
        free(hc);
        etcd_cluster_free(a);
        etcd_cluster_free(b);
        etcd_cluster_free(c);
}

/*
 * spec.bootstrap.mode: static is the default and is left out of the
 * normalized form (a spec written before the field existed keeps its hash);
 * learners is kept and survives the stored round trip.
 */
static void test_bootstrap_mode(void **state)
{
        (void)state;
        etcd_cluster *a = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec: {replicas: 3}\n");
        etcd_cluster *b = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec:\n  replicas: 3\n"
                               "  bootstrap: {mode: static}\n");
        etcd_cluster *c = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec:\n  replicas: 3\n"
                               "  bootstrap: {mode: learners}\n");
        assert_int_equal(a->bootstrap_mode, BOOTSTRAP_STATIC);
        assert_int_equal(c->bootstrap_mode, BOOTSTRAP_LEARNERS);
        char *ha = spec_hash(a), *hb = spec_hash(b), *hc = spec_hash(c);
        assert_string_equal(ha, hb);
        assert_string_not_equal(ha, hc);
        char *da = dump(a);
        assert_null(strstr(da, "bootstrap"));
        json_t *j = spec_to_json(c);
        etcd_cluster *back = NULL;
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_from_json(j, "state:test", &back, &d), 0);
        assert_int_equal(back->bootstrap_mode, BOOTSTRAP_LEARNERS);
        json_decref(j);
        diag_list_release(&d);
        etcd_cluster_free(back);
        free(da);
        free(ha);
        free(hb);
        free(hc);
        etcd_cluster_free(a);
        etcd_cluster_free(b);
        etcd_cluster_free(c);
}

/*
 * spec.consistency: its defaults (etcd's checks on, gitcd's check every 5
 * minutes, etcd's every 4 hours) are left out of the normalized form, so a
 * spec written before the field existed keeps its hash; what differs, and
 * spec.repair, survive the stored round trip.
 */
static void test_consistency_and_repair(void **state)
{
        (void)state;
        etcd_cluster *a = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec: {replicas: 3}\n");
        etcd_cluster *b = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec:\n  replicas: 3\n"
                               "  consistency: {etcdChecks: true, checkInterval: 300s, "
                               "etcdCheckInterval: 240m}\n");
        etcd_cluster *c = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: h}\nspec:\n  replicas: 3\n"
                               "  consistency: {etcdChecks: false, reason: \"slow disks\", "
                               "checkInterval: 90s}\n"
                               "  repair: {replace: h-1, token: incident-7}\n");
        assert_true(a->consistency.etcd_checks);
        assert_int_equal(a->consistency.check_interval_ms, 5 * 60 * 1000);
        assert_int_equal(a->consistency.etcd_check_interval_ms, 4 * 3600 * 1000);
        assert_false(a->repair.set);
        char *ha = spec_hash(a), *hb = spec_hash(b), *hc = spec_hash(c);
        assert_string_equal(ha, hb);
        assert_string_not_equal(ha, hc);
        char *da = dump(a);
        assert_null(strstr(da, "consistency"));
        assert_null(strstr(da, "repair"));
        json_t *j = spec_to_json(c);
        etcd_cluster *back = NULL;
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_from_json(j, "state:test", &back, &d), 0);
        assert_false(back->consistency.etcd_checks);
        assert_string_equal(back->consistency.reason, "slow disks");
        assert_int_equal(back->consistency.check_interval_ms, 90000);
        assert_true(back->repair.set);
        assert_string_equal(back->repair.replace, "h-1");
        assert_string_equal(back->repair.token, "incident-7");
        json_decref(j);
        diag_list_release(&d);
        etcd_cluster_free(back);
        free(da);
        free(ha);
        free(hb);
        free(hc);
        etcd_cluster_free(a);
        etcd_cluster_free(b);
        etcd_cluster_free(c);
}

static void test_from_json_rejects_bad(void **state)
{
        diag_list diags = DIAG_LIST_INIT;
        etcd_cluster *c = NULL;
        json_t *j =
            json_pack("{s:s,s:s,s:{s:s},s:{s:i}}", "apiVersion", "gitcd.io/v1alpha1", "kind",
                      "EtcdCluster", "metadata", "name", "x", "spec", "replicas", -3);
        assert_int_equal(spec_from_json(j, "state:x", &c, &diags), -EINVAL);
        assert_null(c);
        assert_true(diag_has_errors(&diags));
        json_decref(j);
        diag_list_release(&diags);

        j = json_array();
        assert_int_equal(spec_from_json(j, "state:x", &c, &diags), -EINVAL);
        assert_null(c);
        json_decref(j);
        diag_list_release(&diags);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip_quickstart),
            cmocka_unit_test(test_round_trip_full),
            cmocka_unit_test(test_round_trip_dialects),
            cmocka_unit_test(test_quickstart_exact),
            cmocka_unit_test(test_hash_follows_meaning),
            cmocka_unit_test(test_bootstrap_mode),
            cmocka_unit_test(test_consistency_and_repair),
            cmocka_unit_test(test_from_json_rejects_bad),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
