/*
 * Ordered rollouts (intake/order.h), pure: the references of
 * spec.dependsOn (a cluster of the same revision; another source's or an
 * unknown name refuses that cluster alone), cycles with their path at the
 * entry that closes them (validate: an error at file:line:col), tiers, and
 * the gate: wait until every upstream took in the commit, converged and
 * stayed healthy for soakSeconds (the time left counted down, the soak's
 * end when it is due), held by an upstream that failed or was refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "intake/intake.h"
#include "intake/order.h"
#include "sources/revision.h"
#include "util/xalloc.h"

#define CLUSTER(name, extra)                                                                       \
        "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: " name "\n"          \
        "spec:\n  replicas: 1\n  version: \"3.5.16\"\n" extra

static source_revision *revision(const char *const *texts, size_t n)
{
        source_revision *r = XNEW(source_revision);
        r->repository = xstrdup("/srv/clusters");
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *path = xasprintf("c%zu.yaml", i);
                revision_add_file(r, path, xstrdup(texts[i]), strlen(texts[i]));
        }
        revision_sort(r);
        return r;
}

static const diag *find_diag(const diag_list *l, const char *text)
{
        for (size_t i = 0; i < l->n; i++)
                if (strstr(l->items[i].message, text))
                        return &l->items[i];
        return NULL;
}

static const intake_cluster *item(const intake_result *r, const char *id)
{
        const intake_cluster *c = intake_find(r, id);
        assert_non_null(c);
        return c;
}

static void test_references(void **state)
{
        (void)state;
        const char *texts[] = {
            CLUSTER("staging", ""),
            CLUSTER("prod", "  dependsOn: [staging, other/edge]\n  rollout: {soakSeconds: 5}\n"),
            CLUSTER("edge", "  dependsOn: [elsewhere]\n"),
            CLUSTER("lost", "  dependsOn: [nowhere]\n"),
        };
        _cleanup_(source_revision_freep) source_revision *rev = revision(texts, 4);
        /* other/edge and default/elsewhere are in the state store, from another source */
        intake_prior priors[] = {{.id = "default/elsewhere"}, {.id = "other/edge"}};
        intake_input in = {.rev = rev, .priors = priors, .n_priors = 2};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        /* a refused dependsOn refuses that cluster only: the revision has no errors */
        assert_false(r.errors);
        assert_int_equal(item(&r, "default/staging")->verdict, INTAKE_TAKEN);
        const intake_cluster *prod = item(&r, "default/prod");
        assert_int_equal(prod->verdict, INTAKE_REFUSED);
        assert_int_equal(prod->spec->soak_seconds, 5);
        const diag *g = find_diag(&prod->diags, "other/edge is not defined by this source");
        assert_non_null(g);
        assert_string_equal(g->file, "c1.yaml");
        assert_int_equal(g->line, 8); /* the entry itself */
        assert_true(g->col > 14);
        const intake_cluster *edge = item(&r, "default/edge");
        assert_int_equal(edge->verdict, INTAKE_REFUSED);
        assert_non_null(strstr(edge->why, "default/elsewhere is not defined by this source"));
        const intake_cluster *lost = item(&r, "default/lost");
        assert_int_equal(lost->verdict, INTAKE_REFUSED);
        assert_non_null(strstr(lost->why, "no cluster default/nowhere in this source"));
        intake_result_release(&r);
}

static void test_cycle_path(void **state)
{
        (void)state;
        const char *texts[] = {
            CLUSTER("a", "  dependsOn: [b]\n"), CLUSTER("b", "  dependsOn:\n    - x\n    - c\n"),
            CLUSTER("c", "  dependsOn: [a]\n"), CLUSTER("x", ""),
            CLUSTER("y", "  dependsOn: [x]\n"),
        };
        _cleanup_(source_revision_freep) source_revision *rev = revision(texts, 5);
        /* validate: one error at the entry that closes the cycle, with its path */
        intake_input in = {.rev = rev, .mode = INTAKE_VALIDATE};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_true(r.errors);
        const diag *g = find_diag(&r.diags, "a dependency cycle: a -> b -> c -> a");
        assert_non_null(g);
        assert_string_equal(g->file, "c2.yaml");
        assert_int_equal(g->line, 8);
        assert_non_null(strstr(g->message, "spec.dependsOn[0]"));
        intake_result_release(&r);

        /* apply: every cluster on the cycle refused, the others taken, tiers beside */
        in.mode = INTAKE_APPLY;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_false(r.errors);
        assert_int_equal(item(&r, "default/a")->verdict, INTAKE_REFUSED);
        assert_int_equal(item(&r, "default/b")->verdict, INTAKE_REFUSED);
        assert_int_equal(item(&r, "default/c")->verdict, INTAKE_REFUSED);
        assert_non_null(strstr(item(&r, "default/a")->why, "a -> b -> c -> a"));
        assert_int_equal(item(&r, "default/y")->verdict, INTAKE_TAKEN);
        int *t = order_tiers(&r);
        for (size_t i = 0; i < r.n; i++) {
                const char *id = r.items[i].id;
                int want = streq(id, "default/x") ? 0 : streq(id, "default/y") ? 1 : -1;
                assert_int_equal(t[i], want);
        }
        free(t);
        intake_result_release(&r);
}

static void test_field_rules(void **state)
{
        (void)state;
        const char *texts[] = {
            CLUSTER("a", "  dependsOn: [a, \"Bad Name\", b, default/b]\n"
                         "  rollout: {soakSeconds: 90000}\n"),
            CLUSTER("b", "  dependsOn: staging\n"),
        };
        _cleanup_(source_revision_freep) source_revision *rev = revision(texts, 2);
        intake_input in = {.rev = rev, .mode = INTAKE_VALIDATE};
        intake_result r;
        assert_int_equal(spec_intake(&in, &r), 0);
        assert_true(r.errors);
        assert_non_null(
            find_diag(&r.diags, "spec.dependsOn[0]: a cluster cannot depend on itself"));
        assert_non_null(find_diag(&r.diags, "\"Bad Name\" is not a cluster name"));
        assert_non_null(find_diag(&r.diags, "default/b is already listed as spec.dependsOn[2]"));
        assert_non_null(find_diag(&r.diags, "90000 is out of range (0 to 86400 seconds)"));
        assert_non_null(find_diag(&r.diags, "expected a sequence of cluster names"));
        intake_result_release(&r);
}

/* An upstream converged on the commit and healthy since `since`. */
static order_upstream healthy(const char *id, int64_t since)
{
        return (order_upstream){
            .id = id, .at_commit = true, .converged = true, .healthy_since_ms = since};
}

static void test_gate_soak(void **state)
{
        (void)state;
        const char *commit = "abc1234def";
        order_upstream up[2] = {healthy("default/staging", 100000), healthy("other/qa", 50000)};
        order_gate g;
        /* 28 s into a 60 s soak: 32 s left, the end written as a time for the store */
        assert_int_equal(order_gate_decide(commit, 60, up, 2, 128000, &g), 0);
        assert_int_equal(g.kind, ORDER_WAIT);
        assert_string_equal(g.reason, ORDER_REASON_WAITING);
        assert_string_equal(g.message, "waits for staging to converge on abc1234 and soak 60 s "
                                       "(32 s left)");
        assert_non_null(strstr(g.stored, "(until 1970-01-01T00:02:40"));
        assert_int_equal(g.until_ms, 160000);
        order_gate_release(&g);
        /* a partial second left counts as a whole one; at the end, released */
        assert_int_equal(order_gate_decide(commit, 60, up, 2, 159001, &g), 0);
        assert_non_null(strstr(g.message, "(1 s left)"));
        order_gate_release(&g);
        assert_int_equal(order_gate_decide(commit, 60, up, 2, 160000, &g), 0);
        assert_int_equal(g.kind, ORDER_RELEASE);
        assert_null(g.message);
        order_gate_release(&g);
        /* soakSeconds 0: released as soon as converged */
        assert_int_equal(order_gate_decide(commit, 0, up, 2, 100000, &g), 0);
        assert_int_equal(g.kind, ORDER_RELEASE);
        order_gate_release(&g);
        /* not on the commit yet, or not converged: no soak under way */
        up[1].at_commit = false;
        up[0].converged = false;
        assert_int_equal(order_gate_decide(commit, 5, up, 2, 999999, &g), 0);
        assert_int_equal(g.kind, ORDER_WAIT);
        assert_string_equal(g.message, "waits for staging to converge on abc1234 and soak 5 s; "
                                       "waits for other/qa to converge on abc1234 and soak 5 s");
        assert_int_equal(g.until_ms, 0);
        order_gate_release(&g);
}

static void test_gate_failed_upstream(void **state)
{
        (void)state;
        order_upstream up[2] = {healthy("default/staging", 1), healthy("default/qa", 1)};
        up[0].failed_reason = "UpgradeFailed";
        up[0].failed_message = "member staging-0 did not become healthy on 3.5.30";
        order_gate g;
        assert_int_equal(order_gate_decide("abc1234", 5, up, 2, 100000, &g), 0);
        assert_int_equal(g.kind, ORDER_HOLD);
        assert_string_equal(g.reason, ORDER_REASON_FAILED);
        assert_string_equal(g.message, "held: staging UpgradeFailed: member staging-0 did not "
                                       "become healthy on 3.5.30");
        order_gate_release(&g);
        assert_int_equal(order_gate_decide(NULL, -1, up, 2, 0, &g), -EINVAL);
}

/* The facts of an upstream as the state store holds them. */
static void test_upstream_from_state(void **state)
{
        (void)state;
        state_condition conds[] = {
            {.type = "Available", .status = "True", .last_transition_ms = 1000},
            {.type = "Progressing", .status = "False", .last_transition_ms = 7000},
            {.type = "Degraded", .status = "False", .last_transition_ms = 2000},
        };
        state_cluster sc = {.name = "default/staging",
                            .desired_hash = "h2",
                            .desired_commit = "c2",
                            .desired_ms = 5000,
                            .observed_hash = "h2",
                            .phase = "Running",
                            .conditions = conds,
                            .n_conditions = 3};
        order_upstream u;
        order_upstream_from_state("default/staging", &sc, NULL, "c2", NULL, &u);
        assert_true(u.at_commit && u.converged);
        assert_int_equal(u.healthy_since_ms, 7000); /* the latest of the transitions */
        /* the revision's spec for it is another: not at the commit */
        order_upstream_from_state("default/staging", &sc, NULL, "c3", "h3", &u);
        assert_false(u.at_commit);
        /* unchanged by the revision (same hash, older commit): at the commit */
        order_upstream_from_state("default/staging", &sc, NULL, "c3", "h2", &u);
        assert_true(u.at_commit);
        /* latched spec behind the desired one: not converged */
        sc.observed_hash = "h1";
        order_upstream_from_state("default/staging", &sc, NULL, "c2", NULL, &u);
        assert_false(u.converged);
        /* given up on */
        sc.terminal_reason = "UpgradeFailed";
        sc.terminal_message = "no";
        order_upstream_from_state("default/staging", &sc, NULL, "c2", NULL, &u);
        assert_string_equal(u.failed_reason, "UpgradeFailed");
        /* refused by the intake */
        sc.terminal_reason = NULL;
        state_verdict v = {.cluster = "default/staging", .verdict = "refused", .message = "nope"};
        state_verdict *vp = &v;
        state_verdict_list vl = {.items = &vp, .n = 1};
        order_upstream_from_state("default/staging", &sc, &vl, "c2", NULL, &u);
        assert_string_equal(u.failed_reason, "refused");
        assert_string_equal(u.failed_message, "nope");
        /* not in the store yet */
        order_upstream_from_state("default/staging", NULL, NULL, "c2", NULL, &u);
        assert_false(u.at_commit || u.converged);
        assert_null(u.failed_reason);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_references),           cmocka_unit_test(test_cycle_path),
            cmocka_unit_test(test_field_rules),          cmocka_unit_test(test_gate_soak),
            cmocka_unit_test(test_gate_failed_upstream), cmocka_unit_test(test_upstream_from_state),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
