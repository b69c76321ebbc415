/*
 * The loader's contract (api/spec.h): one bad document never hides the
 * good ones, other kinds are skipped with a note, duplicates name both
 * places, missing paths are reported, and the model helpers (locations,
 * ids, string maps, sets) behave as documented.
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
#include "util/strbuf.h"
#include "util/xalloc.h"

static char *format_all(diag_list *d)
{
        strbuf sb = STRBUF_INIT;
        diag_sort(d);
        for (size_t i = 0; i < d->n; i++) {
                char *s = diag_format(&d->items[i]);
                sb_printf(&sb, "%s\n", s);
                free(s);
        }
        return sb_detach(&sb);
}

static void test_bad_document_does_not_hide_good_ones(void **state)
{
        static const char text[] = "apiVersion: gitcd.io/v1alpha1\n"
                                   "kind: EtcdCluster\n"
                                   "metadata: {name: good}\n"
                                   "---\n"
                                   "apiVersion: gitcd.io/v1alpha1\n"
                                   "kind: EtcdCluster\n"
                                   "metadata: {name: bad}\n"
                                   "spec: {replicas: -2}\n"
                                   "---\n"
                                   "apiVersion: v1\n"
                                   "kind: ConfigMap\n"
                                   "metadata: {name: settings}\n"
                                   "---\n"
                                   "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                                   "kind: EtcdCluster\n"
                                   "metadata: {name: also-good, namespace: team}\n"
                                   "spec: {replicas: 0}\n";
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("m.yaml", text, strlen(text), &set, &d), -EINVAL);
        assert_int_equal(set.n, 2);
        assert_string_equal(set.items[0]->name, "good");
        assert_string_equal(set.items[1]->name, "also-good");
        assert_int_equal(set.items[1]->replicas, 0);
        assert_ptr_equal(cluster_set_find(&set, "team", "also-good"), set.items[1]);
        assert_null(cluster_set_find(&set, "default", "also-good"));
        assert_null(cluster_set_find(&set, "default", "bad"));
        char *id = etcd_cluster_id(set.items[1]);
        assert_string_equal(id, "team/also-good");
        free(id);
        char *all = format_all(&d);
        assert_string_equal(all,
                            "m.yaml:8:18: error: spec.replicas: -2 is out of range (0 to 99; 0 "
                            "pauses the cluster)\n"
                            "m.yaml:10:1: note: skipping v1 ConfigMap \"settings\" (not an "
                            "EtcdCluster)\n");
        free(all);
        cluster_set_release(&set);
        diag_list_release(&d);
}

static void test_syntax_error_keeps_earlier_documents(void **state)
{
        static const char text[] = "apiVersion: gitcd.io/v1alpha1\n"
                                   "kind: EtcdCluster\n"
                                   "metadata: {name: first}\n"
                                   "---\n"
                                   "apiVersion: [unclosed\n";
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("s.yaml", text, strlen(text), &set, &d), -EINVAL);
        assert_int_equal(set.n, 1);
        assert_true(diag_has_errors(&d));
        cluster_set_release(&set);
        diag_list_release(&d);
}

static void test_empty_input(void **state)
{
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("e.yaml", "", 0, &set, &d), 0);
        assert_int_equal(spec_load_buffer("e.yaml", "---\n---\n# only comments\n", 24, &set, &d),
                         0);
        assert_int_equal(set.n, 0);
        assert_int_equal(d.n, 0);
        diag_list_release(&d);
}

static void test_duplicates_in_a_set(void **state)
{
        static const char a[] = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                "metadata:\n  name: twin\n";
        static const char b[] = "# another file\napiVersion: gitcd.io/v1alpha1\n"
                                "kind: EtcdCluster\nmetadata:\n  namespace: default\n"
                                "  name: twin\n";
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("a.yaml", a, strlen(a), &set, &d), 0);
        assert_int_equal(spec_load_buffer("b.yaml", b, strlen(b), &set, &d), 0);
        assert_int_equal(spec_check_duplicates(&set, &d), -EINVAL);
        char *all = format_all(&d);
        assert_string_equal(all, "a.yaml:4:9: note: cluster default/twin is defined again at "
                                 "b.yaml:6:9\n"
                                 "b.yaml:6:9: error: cluster default/twin is defined twice; first "
                                 "defined at a.yaml:4:9\n");
        free(all);
        cluster_set_release(&set);
        diag_list_release(&d);
}

static void test_missing_path(void **state)
{
        char *root = getenv("GITCD_SOURCE_ROOT");
        assert_non_null(root);
        char *good = path_join(root, "examples/quickstart");
        char *paths[] = {"/nonexistent/gitcd", good};
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_paths(paths, 2, &set, &d), -ENOENT);
        assert_int_equal(set.n, 1); /* the other path is still read */
        assert_int_equal(d.n, 1);
        char *s = diag_format(&d.items[0]);
        assert_string_equal(s, "/nonexistent/gitcd: error: no such file or directory");
        free(s);
        free(good);
        cluster_set_release(&set);
        diag_list_release(&d);
}

/*
 * A revision of many small files, each an alias bomb within the limits of
 * one file (about 900,000 nodes of 1,000,000): together they spend the
 * revision's YAML budget, which stops the load with one error where it ran
 * out and a note on the files not read. (Without the budget every file
 * was expanded: 100,000 of them cost hours.)
 */
static void test_revision_budget(void **state)
{
        strbuf bomb = STRBUF_INIT;
        sb_append(&bomb, "a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        const char *names = "abcde";
        for (int i = 1; i < 5; i++) {
                sb_printf(&bomb, "%c: &%c [", names[i], names[i]);
                for (int k = 0; k < 10; k++)
                        sb_printf(&bomb, "%s*%c", k ? ", " : "", names[i - 1]);
                sb_append(&bomb, "]\n");
        }
        sb_append(&bomb, "f: [*e, *e, *e, *e, *e, *e, *e]\n");
        enum { N = 1000 };
        spec_buffer bufs[N];
        char *files[N];
        for (size_t i = 0; i < N; i++) {
                files[i] = xasprintf("bomb-%04zu.yaml", i);
                bufs[i] = (spec_buffer){.file = files[i], .data = bomb.buf, .len = bomb.len};
        }
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffers(bufs, N, &set, &d), -EINVAL);
        _cleanup_free_ char *out = format_all(&d);
        /* 22 files fit in 20,000,000 nodes; the 23rd runs out (line 6, the copies of *e) */
        if (!strstr(out, "bomb-0022.yaml:6:") ||
            !strstr(out, "error: the YAML files of this revision hold more than 20000000 nodes "
                         "in all, after alias expansion (revision budget)") ||
            !strstr(out, "bomb-0022.yaml: note: 977 more file(s) after this one were not read"))
                fail_msg("unexpected diagnostics:\n%.2000s", out);
        assert_int_equal(set.n, 0);
        for (size_t i = 0; i < N; i++)
                free(files[i]);
        diag_list_release(&d);
        sb_release(&bomb);
}

static void test_model_helpers(void **state)
{
        kv_list l = {0};
        kv_set(&l, "a", "1");
        kv_set(&l, "b", "2");
        kv_set(&l, "a", "3");
        assert_int_equal(l.n, 2);
        assert_string_equal(kv_get(&l, "a"), "3");
        assert_string_equal(l.items[0].key, "a"); /* order of first insertion */
        assert_null(kv_get(&l, "c"));
        kv_list_release(&l);
        kv_list_release(&l); /* releasing twice is harmless */

        etcd_cluster *c = etcd_cluster_new();
        c->line = 3;
        c->col = 1;
        etcd_cluster_set_loc(c, "spec.storage", 10, 3);
        etcd_cluster_set_loc(c, "spec.storage.size", 11, 11);
        etcd_cluster_set_loc(c, "spec.storage.size", 12, 11); /* replaces */
        int line, col;
        etcd_cluster_loc(c, "spec.storage.size", &line, &col);
        assert_int_equal(line, 12);
        etcd_cluster_loc(c, "spec.storage.medium", &line, &col); /* falls back to parent */
        assert_int_equal(line, 10);
        assert_int_equal(col, 3);
        etcd_cluster_loc(c, "spec.replicas", &line, &col); /* falls back to the document */
        assert_int_equal(line, 3);
        etcd_cluster_free(c);
        etcd_cluster_free(NULL);

        assert_string_equal(dialect_name(DIALECT_ETCDIO), "etcd-io");
        assert_string_equal(dialect_api_version(DIALECT_COZYSTACK),
                            "etcd-operator.cozystack.io/v1alpha2");
        assert_string_equal(tls_provider_name(TLS_PROVIDER_CERT_MANAGER), "cert-manager");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bad_document_does_not_hide_good_ones),
            cmocka_unit_test(test_syntax_error_keeps_earlier_documents),
            cmocka_unit_test(test_empty_input),
            cmocka_unit_test(test_duplicates_in_a_set),
            cmocka_unit_test(test_missing_path),
            cmocka_unit_test(test_model_helpers),
            cmocka_unit_test(test_revision_budget),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
