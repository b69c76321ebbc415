/*
 * spec_intake() as a pure function over revisions built in memory: the one
 * rule plan, apply, run and validate share. Duplicates collapse to one
 * verdict, a field not acted on yet or a target's rule refuses a cluster
 * with an error and marks the revision (nothing orphaned), skipped files
 * are noted, and validate warns where apply refuses. The operator's policy
 * refuses a cluster without marking the revision, and a change (or a
 * removal) that needs more trusted signers than it has is held with how
 * many it has; the signers are asked for the files that define it, back to
 * the commit its accepted spec came from.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "intake/intake.h"
#include "ops/config.h"
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
        in.caps = TARGET_CAP_HOSTS_INVENTORY;
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

/* A kubeconfig that has the contexts "east" and "west" only. */
static int known_contexts(void *userdata, const char *context, char **ret_error)
{
        int *calls = userdata;
        (*calls)++;
        if (streq(context, "east") || streq(context, "west"))
                return 0;
        *ret_error = xasprintf("context \"%s\" not found in kc (contexts: east, west)", context);
        return -ENOENT;
}

static const etcd_cluster *taken(const intake_result *r, const char *id)
{
        const intake_cluster *c = intake_find(r, id);
        return c && c->verdict == INTAKE_TAKEN ? c->spec : NULL;
}

/*
 * The kubeconfig context of each cluster: the spec's over the source's
 * (written into the spec), none when neither names one; an unknown one
 * refuses that cluster alone at the line that names it (the spec's, or the
 * configuration's for the source's); off a target of contexts, refused.
 */
static void test_kube_contexts(void **state)
{
        (void)state;
        const char *paths[] = {"own.yaml", "plain.yaml", "lost.yaml"};
        const char *texts[] = {CLUSTER("own", "  kubernetes:\n    context: west\n"),
                               CLUSTER("plain", ""),
                               CLUSTER("lost", "  kubernetes:\n    context: \"no where\"\n")};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 3);
        int calls = 0;
        intake_kube kube = {.context = "east",
                            .file = "/etc/gitcd/gitcd.yaml",
                            .line = 7,
                            .col = 16,
                            .check = known_contexts,
                            .userdata = &calls};
        intake_input in = {.rev = rev, .caps = TARGET_CAP_KUBE_CONTEXTS, .kube = &kube};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_true(r.errors); /* nothing orphaned while one is refused */
        assert_string_equal(taken(&r, "default/own")->kube_context, "west");
        assert_string_equal(taken(&r, "default/plain")->kube_context, "east");
        assert_null(intake_find(&r, "default/lost"));
        assert_true(has_diag(&r.diags, DIAG_ERROR,
                             "spec.kubernetes.context: context \"no where\" "
                             "not found in kc"));
        bool at_line = false;
        for (size_t i = 0; i < r.diags.n; i++)
                at_line |= streq_ptr(r.diags.items[i].file, "lost.yaml") &&
                           r.diags.items[i].line == 9 && r.diags.items[i].col == 14;
        assert_true(at_line);
        assert_int_equal(calls, 3);
        intake_result_release(&r);

        /* The source's context unknown: each of its clusters without one refused at its line. */
        kube.context = "gone";
        calls = 0;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_non_null(taken(&r, "default/own"));
        assert_null(intake_find(&r, "default/plain"));
        bool at_config = false;
        for (size_t i = 0; i < r.diags.n; i++)
                at_config |= streq_ptr(r.diags.items[i].file, "/etc/gitcd/gitcd.yaml") &&
                             r.diags.items[i].line == 7 && r.diags.items[i].col == 16 &&
                             strstr(r.diags.items[i].message, "kubernetes.context: context "
                                                              "\"gone\"");
        assert_true(at_config);
        intake_result_release(&r);

        /* No context anywhere: none written, nothing asked. */
        kube.context = NULL;
        calls = 0;
        const char *one[] = {CLUSTER("plain", "")};
        _cleanup_(source_revision_freep) source_revision *rev1 = revision(paths + 1, one, 1);
        in.rev = rev1;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(r.errors);
        assert_null(taken(&r, "default/plain")->kube_context);
        assert_int_equal(calls, 0);
        intake_result_release(&r);

        /* A target without contexts: a cluster naming one is refused, the source's is not applied. */
        in = (intake_input){.rev = rev, .caps = 0, .target = "local", .kube = &kube};
        kube.context = "east";
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_null(intake_find(&r, "default/own"));
        assert_null(taken(&r, "default/plain")->kube_context);
        assert_true(has_diag(&r.diags, DIAG_ERROR,
                             "target local does not run clusters on a "
                             "kubeconfig context"));
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

static policy *load_policy(const char *text)
{
        ops_config *c = NULL;
        diag_list d = DIAG_LIST_INIT;
        int r = ops_config_load_buffer("gitcd.yaml", text, strlen(text), &c, &d);
        if (r < 0) {
                diag_print(&d, stderr);
                fail_msg("the test's policy is invalid");
        }
        diag_list_release(&d);
        policy *p = policy_copy(c->policy);
        ops_config_free(c);
        return p;
}

static void test_policy_refuses_one(void **state)
{
        (void)state;
        const char *paths[] = {"a.yaml", "b.yaml"};
        const char *texts[] = {CLUSTER("a", "  options:\n    extraFlags: {enable-pprof: \"\"}\n"),
                               CLUSTER("b", "")};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 2);
        /* the built-in policy: enable-pprof needs the operator's leave */
        intake_input in = {.rev = rev, .target = "local"};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(r.errors); /* not the revision's fault: the rest goes on, orphans too */
        assert_int_equal(r.n, 2);
        assert_int_equal(r.items[0].verdict, INTAKE_REFUSED);
        assert_false(r.items[0].exists);
        assert_true(has_diag(&r.items[0].diags, DIAG_ERROR, "policy.etcdFlags: default/a"));
        assert_string_equal(r.items[0].diags.items[0].file, POLICY_BUILTIN);
        assert_non_null(strstr(r.items[0].why, "the cluster is not taken in"));
        assert_int_equal(r.items[1].verdict, INTAKE_TAKEN);
        intake_result_release(&r);

        /* the operator's: namespaces and targets; an existing cluster is "not changed" */
        _cleanup_(policy_freep) policy *p =
            load_policy("policy:\n  namespaces: [prod]\n  etcdFlags: [enable-pprof]\n");
        intake_prior prior = {.id = "default/b", .json = NULL};
        in.policy = p;
        in.priors = &prior;
        in.n_priors = 1;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_int_equal(r.items[0].verdict, INTAKE_REFUSED);
        assert_int_equal(r.items[1].verdict, INTAKE_REFUSED);
        assert_true(r.items[1].exists);
        assert_true(has_diag(&r.items[1].diags, DIAG_ERROR, "not changed"));
        assert_string_equal(r.items[1].diags.items[0].file, "gitcd.yaml");
        assert_int_equal(r.items[1].diags.items[0].line, 2);
        assert_string_equal(intake_verdict_name(r.items[1].verdict), "refused");
        intake_result_release(&r);

        /* validate checks no policy */
        in.mode = INTAKE_VALIDATE;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_int_equal(r.items[0].verdict, INTAKE_TAKEN);
        intake_result_release(&r);
}

/* Signers as a source would count them: the names given, and what was asked. */
typedef struct fake_signers {
        const char *const *names;
        size_t n;
        char *asked_path;
        char *asked_since;
        size_t asked_paths;
} fake_signers;

static int count(void *userdata, const char *const *paths, size_t n_paths, const char *since,
                 source_signer_list *ret)
{
        fake_signers *f = userdata;
        free(f->asked_path);
        free(f->asked_since);
        f->asked_path = n_paths ? xstrdup(paths[0]) : NULL;
        f->asked_paths = n_paths;
        f->asked_since = xstrdup_null(since);
        ret->names = xcalloc(f->n + 1, sizeof(char *));
        for (size_t i = 0; i < f->n; i++)
                ret->names[ret->n++] = xstrdup(f->names[i]);
        ret->walked = (unsigned)f->n;
        return 0;
}

static void test_approvals_hold(void **state)
{
        (void)state;
        /* accepted with 3 members from commit c0; the revision scales it down to 1 */
        const char *old = CLUSTER("main", "");
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("old.yaml", old, strlen(old), &set, &d), 0);
        set.items[0]->replicas = 3;
        json_t *j = spec_to_json(set.items[0]);
        _cleanup_free_ char *json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        cluster_set_release(&set);
        intake_prior prior = {.id = "default/main", .json = json, .commit = "c0"};

        const char *paths[] = {"clusters/main.yaml"};
        const char *texts[] = {CLUSTER("main", "")};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 1);
        _cleanup_(policy_freep) policy *p = load_policy(
            "policy:\n  approvals: {scaleDown: 2, recovery: 2}\n"
            "sources: [{name: s, url: /x, signatures: {verify: true, allowedSigners: /f}}]\n");
        const char *alice[] = {"alice@example.org"};
        fake_signers f = {.names = alice, .n = 1};
        intake_input in = {.rev = rev,
                           .policy = p,
                           .priors = &prior,
                           .n_priors = 1,
                           .signers = count,
                           .signers_userdata = &f};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(r.errors);
        assert_int_equal(r.items[0].verdict, INTAKE_HELD);
        assert_int_equal(r.items[0].changes, 1u << POLICY_CHANGE_SCALE_DOWN);
        assert_int_equal(r.items[0].needed, 2);
        assert_int_equal(r.items[0].n_signers, 1);
        assert_string_equal(r.items[0].why, "waiting for 1 more approval (scaleDown needs 2 "
                                            "distinct signers, has 1: alice@example.org)");
        /* asked for the file that defines it, back to the accepted spec's commit */
        assert_int_equal(f.asked_paths, 1);
        assert_string_equal(f.asked_path, "clusters/main.yaml");
        assert_string_equal(f.asked_since, "c0");
        intake_result_release(&r);

        /* a second signer: taken */
        const char *two[] = {"alice@example.org", "bob@example.org"};
        f.names = two;
        f.n = 2;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_int_equal(r.items[0].verdict, INTAKE_TAKEN);
        intake_result_release(&r);

        /* no source to count in: none, and said so */
        in.signers = NULL;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_int_equal(r.items[0].verdict, INTAKE_HELD);
        assert_non_null(strstr(r.items[0].why, "waiting for 2 more approvals"));
        assert_non_null(strstr(r.items[0].why, "has 0)"));
        intake_result_release(&r);

        /* removals: held while clusterDeletion waits, may go otherwise */
        intake_cluster gone;
        in.signers = count;
        assert_int_equal(spec_intake_removal(&in, &prior, &gone), 0);
        assert_int_equal(gone.verdict, INTAKE_TAKEN); /* no clusterDeletion in this policy */
        intake_cluster_release(&gone);
        _cleanup_(policy_freep) policy *q = load_policy(
            "policy:\n  approvals: {clusterDeletion: 3}\n"
            "sources: [{name: s, url: /x, signatures: {verify: true, allowedSigners: /f}}]\n");
        in.policy = q;
        assert_int_equal(spec_intake_removal(&in, &prior, &gone), 0);
        assert_int_equal(gone.verdict, INTAKE_HELD);
        assert_string_equal(gone.why, "waiting for 1 more approval (clusterDeletion needs 3 "
                                      "distinct signers, has 2: alice@example.org, "
                                      "bob@example.org)");
        /* the whole source must stay as it is: no paths */
        assert_int_equal(f.asked_paths, 0);
        intake_cluster_release(&gone);
        free(f.asked_path);
        free(f.asked_since);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_policy_refuses_one),
            cmocka_unit_test(test_approvals_hold),
            cmocka_unit_test(test_duplicates_collapse),
            cmocka_unit_test(test_target_rules),
            cmocka_unit_test(test_kube_contexts),
            cmocka_unit_test(test_skipped_files_noted),
            cmocka_unit_test(test_files_without_revision),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
