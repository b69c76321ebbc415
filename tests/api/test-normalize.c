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
                /* From the stored text, and a copy: the same spec. */
                char *text = json_dumps(j, JSON_COMPACT);
                etcd_cluster *from_text = spec_from_json_text(text, "state:test");
                etcd_cluster *copy = spec_dup(set.items[i], "state:test");
                assert_non_null(from_text);
                assert_non_null(copy);
                char *c1 = dump(from_text), *c2 = dump(copy);
                assert_string_equal(a, c1);
                assert_string_equal(a, c2);
                free(c1);
                free(c2);
                free(text);
                etcd_cluster_free(from_text);
                etcd_cluster_free(copy);
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

/* spec.snapshots.verify: every (the default) leaves the hash alone; the others round-trip. */
static void test_snapshots_verify(void **state)
{
        (void)state;
        const char *base = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                           "metadata: {name: v}\nspec:\n  snapshots:\n"
                           "    schedule: \"0 * * * *\"\n"
                           "    destination: {local: {path: /b}}\n";
        char *t_every = xasprintf("%s    verify: every\n", base);
        char *t_off = xasprintf("%s    verify: \"off\"\n", base);
        char *t_cron = xasprintf("%s    verify: \"30 4 * * sun\"\n", base);
        etcd_cluster *plain = load(base), *every = load(t_every), *off = load(t_off),
                     *cron = load(t_cron);
        assert_int_equal(plain->snapshots.verify, VERIFY_EVERY);
        assert_int_equal(off->snapshots.verify, VERIFY_OFF);
        assert_int_equal(cron->snapshots.verify, VERIFY_SCHEDULE);
        assert_string_equal(cron->snapshots.verify_schedule, "30 4 * * sun");
        char *hp = spec_hash(plain), *he = spec_hash(every), *ho = spec_hash(off),
             *hc = spec_hash(cron);
        assert_string_equal(hp, he);
        assert_string_not_equal(hp, ho);
        assert_string_not_equal(ho, hc);
        char *dp = dump(plain);
        assert_null(strstr(dp, "verify"));
        json_t *j = spec_to_json(cron);
        etcd_cluster *back = NULL;
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_from_json(j, "state:test", &back, &d), 0);
        assert_int_equal(back->snapshots.verify, VERIFY_SCHEDULE);
        assert_string_equal(back->snapshots.verify_schedule, "30 4 * * sun");
        json_decref(j);
        diag_list_release(&d);
        etcd_cluster_free(back);
        free(dp);
        free(hp);
        free(he);
        free(ho);
        free(hc);
        etcd_cluster_free(plain);
        etcd_cluster_free(every);
        etcd_cluster_free(off);
        etcd_cluster_free(cron);
        free(t_every);
        free(t_off);
        free(t_cron);
}

/* The normalized text of a native spec, read back from the store: the same text. */
static char *stored(const etcd_cluster *c, etcd_cluster **ret_back)
{
        json_t *j = spec_to_json(c);
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_from_json(j, "state:test", ret_back, &d), 0);
        json_decref(j);
        diag_list_release(&d);
        return dump(c);
}

/*
 * spec.role and bumpRevision: the default role (general) and a bump equal
 * to the role's default are left out (specs written before the fields
 * existed keep their hash; writing the default means what leaving it out
 * means), anything else is kept and survives the stored round trip.
 */
static void test_role_and_bump(void **state)
{
        (void)state;
        static const char *const head = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                        "metadata: {name: h}\nspec:\n  replicas: 3\n";
        static const char *const restore =
            "  bootstrap:\n    restore:\n      source: {local: {path: /b/s.db}}\n";
        _cleanup_free_ char *t_plain = xasprintf("%s%s", head, restore);
        _cleanup_free_ char *t_general =
            xasprintf("%s  role: general\n%s      bumpRevision: 0\n", head, restore);
        _cleanup_free_ char *t_k8s =
            xasprintf("%s  role: kubernetes-control-plane\n%s", head, restore);
        _cleanup_free_ char *t_k8s_auto = xasprintf(
            "%s  role: kubernetes-control-plane\n%s      bumpRevision: auto\n", head, restore);
        _cleanup_free_ char *t_fixed = xasprintf("%s%s      bumpRevision: off\n"
                                                 "  recovery:\n    from: {snapshot: 3}\n"
                                                 "    token: t1\n    bumpRevision: 5000\n",
                                                 head, restore);
        etcd_cluster *plain = load(t_plain), *general = load(t_general), *k8s = load(t_k8s),
                     *k8s_auto = load(t_k8s_auto), *fixed = load(t_fixed);
        assert_int_equal(plain->role, ROLE_GENERAL);
        assert_int_equal(plain->restore.bump.mode, BUMP_FIXED);
        assert_int_equal(plain->restore.bump.amount, 0);
        assert_int_equal(k8s->role, ROLE_KUBERNETES);
        assert_int_equal(k8s->restore.bump.mode, BUMP_AUTO);
        assert_int_equal(k8s->recovery.bump.mode, BUMP_AUTO);
        assert_int_equal(fixed->restore.bump.amount, 0);
        assert_int_equal(fixed->recovery.bump.amount, 5000);

        char *h_plain = spec_hash(plain), *h_general = spec_hash(general), *h_k8s = spec_hash(k8s),
             *h_k8s_auto = spec_hash(k8s_auto);
        assert_string_equal(h_plain, h_general);
        assert_string_equal(h_k8s, h_k8s_auto);
        assert_string_not_equal(h_plain, h_k8s);
        char *d_plain = dump(plain);
        assert_null(strstr(d_plain, "role"));
        assert_null(strstr(d_plain, "bumpRevision"));

        etcd_cluster *back = NULL;
        char *d_k8s = stored(k8s, &back);
        assert_non_null(strstr(d_k8s, "\"role\": \"kubernetes-control-plane\""));
        assert_null(strstr(d_k8s, "bumpRevision"));
        assert_int_equal(back->role, ROLE_KUBERNETES);
        assert_int_equal(back->restore.bump.mode, BUMP_AUTO);
        etcd_cluster_free(back);
        char *d_fixed = stored(fixed, &back);
        assert_non_null(strstr(d_fixed, "\"bumpRevision\": 5000"));
        assert_int_equal(back->recovery.bump.mode, BUMP_FIXED);
        assert_int_equal(back->recovery.bump.amount, 5000);
        etcd_cluster_free(back);
        /* A general cluster that asks for auto keeps it. */
        etcd_cluster *asks = load("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                  "metadata: {name: h}\nspec:\n  bootstrap:\n    restore:\n"
                                  "      source: {snapshot: 4}\n      bumpRevision: auto\n");
        char *d_asks = stored(asks, &back);
        assert_non_null(strstr(d_asks, "\"bumpRevision\": \"auto\""));
        assert_int_equal(back->restore.bump.mode, BUMP_AUTO);
        etcd_cluster_free(back);

        free(d_asks);
        free(d_fixed);
        free(d_k8s);
        free(d_plain);
        free(h_plain);
        free(h_general);
        free(h_k8s);
        free(h_k8s_auto);
        etcd_cluster_free(asks);
        etcd_cluster_free(plain);
        etcd_cluster_free(general);
        etcd_cluster_free(k8s);
        etcd_cluster_free(k8s_auto);
        etcd_cluster_free(fixed);
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

        /* From text: NULL for no text, text that is not JSON, or not a valid spec. */
        assert_null(spec_from_json_text(NULL, "state:x"));
        assert_null(spec_from_json_text("", "state:x"));
        assert_null(spec_from_json_text("{\"apiVersion\":", "state:x"));
        assert_null(spec_from_json_text("[]", "state:x"));
        assert_null(spec_from_json_text("{\"apiVersion\":\"gitcd.io/v1alpha1\",\"kind\":"
                                        "\"EtcdCluster\",\"metadata\":{\"name\":\"x\"},"
                                        "\"spec\":{\"replicas\":-3}}",
                                        "state:x"));
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
            cmocka_unit_test(test_from_json_rejects_bad),
            cmocka_unit_test(test_snapshots_verify),
            cmocka_unit_test(test_role_and_bump),
            cmocka_unit_test(test_consistency_and_repair),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
