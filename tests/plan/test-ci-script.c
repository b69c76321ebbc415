/*
 * examples/ci/gitcd-plan.sh, the CI script, run as a CI job runs it: in a
 * real Git checkout, with the real gitcd binary, with and without a copy
 * of the state database; its report, JSON, GitHub annotations and exit
 * statuses.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/plan/plan-fixture.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

static char *repo;
static char *script;

static const char cluster_a[] = "apiVersion: gitcd.io/v1alpha1\n"
                                "kind: EtcdCluster\n"
                                "metadata:\n"
                                "  name: a\n"
                                "spec:\n"
                                "  replicas: 3\n";

static int setup(void **state)
{
        (void)state;
        pf_init();
        const char *src = getenv("GITCD_SOURCE_ROOT");
        if (!src)
                return -1;
        script = path_join(src, "examples/ci/gitcd-plan.sh");
        repo = pf_path("checkout");
        if (pf_sh("git init -q -b main '%s'", repo) != 0)
                return -1;
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        free(repo);
        free(script);
        pf_cleanup();
        return 0;
}

static char *slurp(const char *dir, const char *rel)
{
        _cleanup_free_ char *p = path_join(dir, rel);
        char *data = NULL;
        size_t len = 0;
        if (read_file(p, 1u << 20, &data, &len) < 0)
                return xstrdup("");
        return data;
}

static void assert_contains(const char *hay, const char *needle)
{
        if (!strstr(hay, needle))
                fail_msg("expected to find\n  %s\nin:\n%s", needle, hay);
}

/* Run the script in the checkout with extra environment; its exit status. */
static int run_script(const char *env)
{
        return pf_sh("cd '%s' && env GITCD=\"$GITCD_BIN\" %s sh '%s' clusters > ci.out 2> ci.err",
                     repo, env, script);
}

static void test_changes_and_no_changes(void **state)
{
        (void)state;
        pf_write(repo, "clusters/a.yaml", cluster_a);
        pf_write(repo, "README.md", "not a cluster\n");
        _cleanup_free_ char *commit = pf_commit(repo, "add cluster a");

        /* No state: a create; changes are not a failure unless asked. */
        assert_int_equal(run_script(""), 0);
        _cleanup_free_ char *report = slurp(repo, "gitcd-plan.md");
        assert_contains(report, "### gitcd plan");
        assert_contains(report, "Changes pending");
        assert_contains(report, "+ create default/a");
        assert_contains(report, "Ada Operator: add cluster a");
        _cleanup_free_ char *js = slurp(repo, "gitcd-plan.json");
        json_t *j = json_loads(js, 0, NULL);
        assert_non_null(j);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(j, "summary"), "create")), 1);
        json_decref(j);
        assert_int_equal(run_script("GITCD_PLAN_FAIL_ON_CHANGES=1"), 2);

        /* With a copy of the state that has taken this revision in: no changes. */
        _cleanup_free_ char *db = pf_path("state-copy.db");
        pf_state_from_revision(db, repo, commit, NULL, true);
        _cleanup_free_ char *env =
            xasprintf("GITCD_PLAN_STATE='%s' GITCD_PLAN_FAIL_ON_CHANGES=1", db);
        assert_int_equal(run_script(env), 0);
        free(report);
        report = slurp(repo, "gitcd-plan.md");
        assert_contains(report, "**No changes.**");

        assert_int_equal(run_script("GITCD_PLAN_STATE=/nonexistent/state.db"), 1);
        _cleanup_free_ char *err = slurp(repo, "ci.err");
        assert_contains(err, "does not exist");
}

static void test_rejection_annotations(void **state)
{
        (void)state;
        pf_write(repo, "clusters/bad.yaml",
                 "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: bad\n"
                 "spec:\n  replicas: many\n");
        _cleanup_free_ char *commit = pf_commit(repo, "a bad cluster");
        _cleanup_free_ char *summary = pf_path("step-summary.md");
        _cleanup_free_ char *env =
            xasprintf("GITHUB_ACTIONS=true GITHUB_STEP_SUMMARY='%s'", summary);
        assert_int_equal(run_script(env), 1);
        _cleanup_free_ char *out = slurp(repo, "ci.out");
        assert_contains(out, "::error file=clusters/bad.yaml,line=6,col=13::");
        _cleanup_free_ char *report = slurp(repo, "gitcd-plan.md");
        assert_contains(report, "**Rejected:");
        assert_contains(report, "! rejected default/bad");
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(summary, 1u << 20, &data, &len), 0);
        assert_non_null(strstr(data, "### gitcd plan"));
        free(data);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_changes_and_no_changes),
            cmocka_unit_test(test_rejection_annotations),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
