/*
 * spec_intake() as a pure function over revisions built in memory: the one
 * rule plan, apply, run and validate share. Duplicates collapse to one
 * verdict, a field not acted on yet or a target's rule refuses a cluster
 * with an error and marks the revision (nothing orphaned), skipped files
 * are noted, and validate warns where apply refuses.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "intake/intake.h"
#include "sources/revision.h"
#include "util/xalloc.h"

#define CLUSTER(name, extra)                                                                       \
        "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: " name "\n"          \
        "spec:\n  replicas: 1\n  version: \"3.5.16\"\n" extra

static source_revision *revision(const char *const *paths, const char *const *texts, size_t n)
{
        source_revision *r = XNEW(source_revision);
        r->repository = xstrdup("/srv/clusters");
        for (size_t i = 0; i < n; i++)
                revision_add_file(r, paths[i], xstrdup(texts[i]), strlen(texts[i]));
        revision_sort(r);
        return r;
}

static bool has_diag(const diag_list *l, enum diag_severity sev, const char *text)
{
        for (size_t i = 0; i < l->n; i++)
                if (l->items[i].severity == sev && strstr(l->items[i].message, text))
                        return true;
        return false;
}

static void test_duplicates_collapse(void **state)
{
        (void)state;
        const char *paths[] = {"a.yaml", "b.yaml", "c.yaml"};
        const char *texts[] = {CLUSTER("one", ""), CLUSTER("one", ""), CLUSTER("two", "")};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 3);
        intake_input in = {.rev = rev};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_true(r.errors);
        assert_int_equal(r.n, 2);
        assert_string_equal(r.items[0].id, "default/one");
        assert_int_equal(r.items[0].verdict, INTAKE_DUPLICATE);
        assert_string_equal(r.items[0].spec->file, "a.yaml"); /* the first definition */
        assert_int_equal(r.items[1].verdict, INTAKE_TAKEN);
        assert_non_null(intake_find(&r, "default/two"));
        assert_null(intake_find(&r, "default/three"));
        assert_true(has_diag(&r.diags, DIAG_ERROR, "defined twice"));
        intake_result_release(&r);
}

static void test_target_rules(void **state)
{
        (void)state;
        const char *paths[] = {"hosts.yaml", "plain.yaml"};
        const char *texts[] = {
            CLUSTER("m", "  hosts:\n    mode: systemd\n    machines:\n    - address: 10.0.0.1\n"),
            CLUSTER("p", "")};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 2);

        /* not the hosts target: the cluster with spec.hosts is refused */
        intake_input in = {.rev = rev};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_true(r.errors);
        assert_int_equal(r.n, 1);
        assert_string_equal(r.items[0].id, "default/p");
        assert_true(has_diag(&r.diags, DIAG_ERROR, "needs --target hosts"));
        intake_result_release(&r);

        /* the hosts target: the other way round */
        in.caps = INTAKE_CAP_HOSTS_INVENTORY;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_int_equal(r.n, 1);
        assert_string_equal(r.items[0].id, "default/m");
        assert_true(has_diag(&r.diags, DIAG_ERROR, "has none"));
        intake_result_release(&r);

        /* validate: no target, both taken, no error */
        in.mode = INTAKE_VALIDATE;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(r.errors);
        assert_int_equal(r.n, 2);
        intake_result_release(&r);
}

static void test_skipped_files_noted(void **state)
{
        (void)state;
        const char *paths[] = {"a.yaml"};
        const char *texts[] = {CLUSTER("a", "")};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 1);
        revision_add_note(rev, "big.yaml", "larger than %d bytes", 4);
        intake_input in = {.rev = rev};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(r.errors);
        assert_true(has_diag(&r.diags, DIAG_NOTE, "skipped: larger than 4 bytes"));
        intake_result_release(&r);
}

static void test_files_without_revision(void **state)
{
        (void)state;
        /* a CI workflow found by scanning a folder is skipped; named, it is checked */
        const char *ci = "on: push\njobs: {}\n";
        spec_buffer files[] = {{.file = "ci.yaml", .data = ci, .len = strlen(ci), .scanned = true}};
        intake_input in = {.files = files, .n_files = 1, .mode = INTAKE_VALIDATE};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(r.errors);
        assert_true(has_diag(&r.diags, DIAG_NOTE, "no document has an apiVersion"));
        intake_result_release(&r);
        files[0].scanned = false;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(has_diag(&r.diags, DIAG_NOTE, "no document has an apiVersion"));
        intake_result_release(&r);
        assert_int_equal(spec_intake(NULL, &r), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_duplicates_collapse),
            cmocka_unit_test(test_target_rules),
            cmocka_unit_test(test_skipped_files_noted),
            cmocka_unit_test(test_files_without_revision),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
