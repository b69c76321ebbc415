/*
 * `gitcd diff REV1 REV2` and `gitcd plan --since REV` run as users run them
 * (the real binary) over real Git repositories made here with the git
 * command: a cluster changed (its fields, its steps, the unified diff of the
 * normalized specs), added and removed between two real commits; the same
 * specs in another layout are no change; a revision that refuses a cluster;
 * a CA rotation; tags, branches and HEAD~1 as revisions; bad revisions and
 * bad usage; the exit statuses; the JSON form; plan's summary above its
 * plan; secret-looking values never shown; an unsigned revision refused
 * under --verify-signatures.
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
#include "util/macro.h"
#include "util/xalloc.h"

static char *repo;

static char *cluster_yaml(const char *name, int replicas, const char *version, const char *extra)
{
        return xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                         "kind: EtcdCluster\n"
                         "metadata:\n"
                         "  name: %s\n"
                         "spec:\n"
                         "  replicas: %d\n"
                         "  version: \"%s\"\n"
                         "%s",
                         name, replicas, version, extra ? extra : "");
}

static void write_cluster(const char *file, const char *name, int replicas, const char *version,
                          const char *extra)
{
        _cleanup_free_ char *y = cluster_yaml(name, replicas, version, extra);
        pf_write(repo, file, y);
}

static int setup(void **state)
{
        (void)state;
        pf_init();
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        pf_cleanup();
        return 0;
}

static int test_setup(void **state)
{
        (void)state;
        static int n;
        _cleanup_free_ char *r = xasprintf("repo-%d", ++n);
        free(repo);
        repo = pf_path(r);
        assert_int_equal(pf_sh("git init -q -b main '%s'", repo), 0);
        return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
        if (!strstr(hay, needle))
                fail_msg("expected to find\n  %s\nin:\n%s", needle, hay);
}

static void assert_lacks(const char *hay, const char *needle)
{
        if (strstr(hay, needle))
                fail_msg("did not expect\n  %s\nin:\n%s", needle, hay);
}

/* `gitcd diff --source REPO ARGS`: the exit status must be want; stdout and stderr returned. */
static void diff(int want, char **ret_out, char **ret_err, const char *args)
{
        char *out = NULL, *err = NULL;
        int st = pf_gitcd(&out, &err, "diff --source '%s' %s", repo, args);
        if (st != want)
                fail_msg("gitcd diff %s: exit %d, wanted %d; stderr: %s\nstdout: %s", args, st,
                         want, err, out);
        *ret_out = out;
        if (ret_err)
                *ret_err = err;
        else
                free(err);
}

/* Two real commits: one cluster changed, one added, one removed; exit 2. */
static void test_changed_added_removed(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        write_cluster("clusters/c.yaml", "c", 1, "3.5.16", NULL);
        _cleanup_free_ char *one = pf_commit(repo, "one");
        assert_int_equal(pf_sh("git -C '%s' tag v1", repo), 0);
        write_cluster("clusters/a.yaml", "a", 5, "3.5.30", NULL);
        write_cluster("clusters/b.yaml", "b", 3, "3.5.30", NULL);
        assert_int_equal(pf_sh("git -C '%s' rm -q clusters/c.yaml", repo), 0);
        _cleanup_free_ char *two = pf_commit(repo, "two");

        _cleanup_free_ char *out = NULL;
        diff(2, &out, NULL, "v1 main");
        assert_contains(out, "~ changed default/a  (clusters/a.yaml:1)");
        assert_contains(out, "spec.replicas: 3 → 5");
        assert_contains(out, "spec.version: 3.5.16 → 3.5.30");
        /* the steps, from the plan's rules */
        assert_contains(out, "add 2 learners one at a time");
        assert_contains(out, "restart 3 members one at a time on 3.5.30, followers first, "
                             "the leader last");
        /* the unified diff of the normalized specs */
        assert_contains(out, "    -    \"replicas\": 3,\n    +    \"replicas\": 5,\n");
        assert_contains(out,
                        "    -    \"version\": \"3.5.16\"\n    +    \"version\": \"3.5.30\"\n");
        assert_contains(out, "@@ -");
        assert_contains(out, "+ added default/b  (clusters/b.yaml:1)");
        assert_contains(out, "start all 3 members at once on etcd 3.5.30");
        assert_contains(out, "- removed default/c");
        assert_contains(out, "orphaned: members keep running");
        assert_contains(out, "Diff: 1 added, 1 changed, 1 removed, 0 refused.");

        /* commit ids, HEAD~1 and HEAD name the same revisions */
        _cleanup_free_ char *again = NULL;
        _cleanup_free_ char *args = xasprintf("%.10s %s", one, two);
        diff(2, &again, NULL, args);
        assert_contains(again, "Diff: 1 added, 1 changed, 1 removed, 0 refused.");
        _cleanup_free_ char *head = NULL;
        diff(2, &head, NULL, "HEAD~1 HEAD");
        assert_contains(head, "Diff: 1 added, 1 changed, 1 removed, 0 refused.");

        /* --prune: the removal's step */
        _cleanup_free_ char *pruned = NULL;
        diff(2, &pruned, NULL, "--prune v1 main");
        assert_contains(pruned, "stop its 1 member; data is kept");

        /* the other way round */
        _cleanup_free_ char *back = NULL;
        diff(2, &back, NULL, "--summary main v1");
        assert_contains(back, "- removed default/b");
        assert_contains(back, "+ added default/c");
        assert_contains(back, "spec.replicas: 5 → 3");
        assert_contains(back, "remove 2 members one at a time");
        assert_lacks(back, "@@ -");

        /* the same revision twice: no change, exit 0 */
        _cleanup_free_ char *same = NULL;
        diff(0, &same, NULL, "main main");
        assert_contains(same, "No changes");
}

/* The same clusters in another layout and dialect of YAML: no change. */
static void test_formatting_is_no_change(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        _cleanup_free_ char *one = pf_commit(repo, "one");
        pf_write(repo, "clusters/a.yaml",
                 "# the same cluster, in flow style and another order\n"
                 "kind: EtcdCluster\n"
                 "apiVersion: gitcd.io/v1alpha1\n"
                 "spec: {version: '3.5.16', replicas: 3, storage: {size: 1Gi}}\n"
                 "metadata: {namespace: default, name: a}\n");
        assert_int_equal(pf_sh("git -C '%s' mv clusters/a.yaml clusters/renamed.yaml", repo), 0);
        _cleanup_free_ char *two = pf_commit(repo, "reformat");
        _cleanup_free_ char *out = NULL;
        _cleanup_free_ char *args = xasprintf("%s %s", one, two);
        diff(0, &out, NULL, args);
        assert_contains(out, "No changes");
        _cleanup_free_ char *verbose = NULL;
        diff(0, &verbose, NULL, "-v HEAD~1 HEAD");
        assert_contains(verbose, "= unchanged default/a");
}

/* A revision that refuses a cluster: exit 1 with the reason; fixed again: a change. */
static void test_refused(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        free(pf_commit(repo, "good"));
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", "  progressDeadlineSeconds: -5\n");
        free(pf_commit(repo, "bad"));
        _cleanup_free_ char *out = NULL;
        diff(1, &out, NULL, "HEAD~1 HEAD");
        assert_contains(out, "! refused default/a");
        assert_contains(out, "refused: clusters/a.yaml:");
        assert_contains(out, "1 refused.");

        /* REV1 refused it, REV2 defines it validly: shown as added, with why it was refused */
        write_cluster("clusters/a.yaml", "a", 3, "3.5.30", NULL);
        free(pf_commit(repo, "fixed"));
        _cleanup_free_ char *fixed = NULL;
        diff(2, &fixed, NULL, "HEAD~1 HEAD");
        assert_contains(fixed, "+ added default/a");
        assert_contains(fixed, "refused before: clusters/a.yaml:");
}

/* A new tls.auto.rotateCA token: the CA rotation's phases. */
static void test_ca_rotation(void **state)
{
        (void)state;
        const char *tls = "  tls:\n    provider: auto\n    client:\n      enabled: true\n";
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", tls);
        free(pf_commit(repo, "tls"));
        _cleanup_free_ char *rot = xasprintf("%s    auto:\n      rotateCA: \"2026-11\"\n", tls);
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", rot);
        free(pf_commit(repo, "rotate"));
        _cleanup_free_ char *out = NULL;
        diff(2, &out, NULL, "HEAD~1 HEAD");
        assert_contains(out, "spec.tls.auto.rotateCA: (none) → 2026-11");
        assert_contains(out, "rotate the cluster CA (rotateCA 2026-11), starting at phase 1 of 3");
}

/* Revisions that name nothing, a plain directory and bad usage are refused clearly. */
static void test_bad_revisions(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        free(pf_commit(repo, "one"));
        _cleanup_free_ char *out = NULL, *err = NULL;
        diff(1, &out, &err, "main nosuch");
        assert_contains(err, "gitcd diff: revision \"nosuch\" not found in");
        assert_string_equal(out, "");
        _cleanup_free_ char *out2 = NULL, *err2 = NULL;
        diff(1, &out2, &err2, "0000000000000000000000000000000000000000 main");
        assert_contains(err2, "not found");
        _cleanup_free_ char *out3 = NULL, *err3 = NULL;
        diff(1, &out3, &err3, "-- -x main");
        assert_contains(err3, "\"-x\" is not a revision");
        _cleanup_free_ char *out4 = NULL, *err4 = NULL;
        diff(64, &out4, &err4, "main");
        assert_contains(err4, "give two revisions, REV1 and REV2 (1 given)");
        /* a plain directory has no revisions */
        _cleanup_free_ char *dir = pf_path("plain");
        _cleanup_free_ char *a = cluster_yaml("a", 1, "3.5.16", NULL);
        pf_write(dir, "a.yaml", a);
        _cleanup_free_ char *o5 = NULL, *e5 = NULL;
        int st = pf_gitcd(&o5, &e5, "diff --source '%s' main main", dir);
        assert_int_equal(st, 1);
        assert_contains(e5, "has no revisions");
}

/* -o json: per cluster its change, fields, steps and diff lines; the summary. */
static void test_json(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        free(pf_commit(repo, "one"));
        write_cluster("clusters/a.yaml", "a", 5, "3.5.16", NULL);
        _cleanup_free_ char *two = pf_commit(repo, "two");
        _cleanup_free_ char *out = NULL;
        diff(2, &out, NULL, "-o json HEAD~1 HEAD");
        json_error_t e;
        json_t *j = json_loads(out, 0, &e);
        if (!j)
                fail_msg("not JSON (%s): %s", e.text, out);
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "to"), "commit")),
                            two);
        json_t *c = json_array_get(json_object_get(j, "clusters"), 0);
        assert_string_equal(json_string_value(json_object_get(c, "name")), "default/a");
        assert_string_equal(json_string_value(json_object_get(c, "change")), "changed");
        json_t *ch = json_array_get(json_object_get(c, "changes"), 0);
        assert_string_equal(json_string_value(json_object_get(ch, "path")), "spec.replicas");
        assert_int_equal(json_integer_value(json_object_get(ch, "to")), 5);
        assert_true(json_array_size(json_object_get(c, "steps")) > 0);
        assert_true(json_array_size(json_object_get(c, "diff")) > 0);
        json_t *s = json_object_get(j, "summary");
        assert_int_equal(json_integer_value(json_object_get(s, "changed")), 1);
        assert_true(json_is_true(json_object_get(s, "changes")));
        json_decref(j);
}

/* plan --since: what changed from REV above the plan's lines. */
static void test_plan_since(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        free(pf_commit(repo, "one"));
        assert_int_equal(pf_sh("git -C '%s' tag before", repo), 0);
        write_cluster("clusters/a.yaml", "a", 3, "3.5.30", NULL);
        free(pf_commit(repo, "two"));
        _cleanup_free_ char *db = pf_path("since/state.db");
        _cleanup_free_ char *out = NULL, *err = NULL;
        int st = pf_plan(&out, &err, "--source '%s' --state '%s' --since before", repo, db);
        if (st != 0)
                fail_msg("exit %d; stderr: %s", st, err);
        const char *since = strstr(out, "Changes from ");
        const char *plan = strstr(out, "Plan: ");
        assert_non_null(since);
        assert_non_null(plan);
        assert_true(since < plan);
        assert_contains(out, "~ changed default/a");
        assert_contains(out, "spec.version: 3.5.16 → 3.5.30");
        assert_contains(out, "+ create default/a");
        _cleanup_free_ char *bad = NULL, *berr = NULL;
        st = pf_plan(&bad, &berr, "--source '%s' --state '%s' --since nosuch", repo, db);
        assert_int_equal(st, 1);
        assert_contains(berr, "gitcd plan: revision \"nosuch\" not found");
}

/* Secret-looking values never shown, in the fields or the unified diff. */
static void test_secrets(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        free(pf_commit(repo, "one"));
        pf_write(repo, "clusters/a.yaml",
                 "apiVersion: gitcd.io/v1alpha1\n"
                 "kind: EtcdCluster\n"
                 "metadata:\n"
                 "  name: a\n"
                 "  labels:\n"
                 "    api-token: s3cr3t-value\n"
                 "    team: db\n"
                 "spec:\n"
                 "  replicas: 3\n"
                 "  version: \"3.5.16\"\n");
        free(pf_commit(repo, "label"));
        _cleanup_free_ char *out = NULL;
        diff(2, &out, NULL, "HEAD~1 HEAD");
        assert_contains(out, "metadata.labels.api-token: (none) → (redacted)");
        assert_contains(out, "+      \"api-token\": \"(redacted)\",");
        assert_contains(out, "+      \"team\": \"db\"");
        assert_lacks(out, "s3cr3t");
        _cleanup_free_ char *json = NULL;
        diff(2, &json, NULL, "-o json HEAD~1 HEAD");
        assert_lacks(json, "s3cr3t");
}

/* With --verify-signatures, an unsigned revision is refused, not diffed. */
static void test_unsigned_refused(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        free(pf_commit(repo, "one"));
        write_cluster("clusters/a.yaml", "a", 5, "3.5.16", NULL);
        free(pf_commit(repo, "two"));
        /* a trusted key that signed nothing */
        assert_int_equal(pf_sh("mkdir -p keys && rm -f keys/k keys/k.pub && "
                               "ssh-keygen -q -t ed25519 -N '' -f keys/k && "
                               "printf 'ops@example.com %%s\\n' \"$(cat keys/k.pub)\" "
                               "> keys/allowed_signers"),
                         0);
        _cleanup_free_ char *file = pf_path("keys/allowed_signers");
        _cleanup_free_ char *out = NULL, *err = NULL;
        _cleanup_free_ char *args =
            xasprintf("--verify-signatures --allowed-signers '%s' HEAD~1 HEAD", file);
        diff(1, &out, &err, args);
        assert_contains(err, "is not signed by a trusted key");
        assert_lacks(out, "changed default/a");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_changed_added_removed, test_setup),
            cmocka_unit_test_setup(test_formatting_is_no_change, test_setup),
            cmocka_unit_test_setup(test_refused, test_setup),
            cmocka_unit_test_setup(test_ca_rotation, test_setup),
            cmocka_unit_test_setup(test_bad_revisions, test_setup),
            cmocka_unit_test_setup(test_json, test_setup),
            cmocka_unit_test_setup(test_plan_since, test_setup),
            cmocka_unit_test_setup(test_secrets, test_setup),
            cmocka_unit_test_setup(test_unsigned_refused, test_setup),
        };
        int r = cmocka_run_group_tests(tests, setup, teardown);
        free(repo);
        return r;
}
