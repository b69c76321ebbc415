/*
 * plan_compute() as a pure function: a revision built in memory and the
 * accepted specs as the state store would return them. Covers what the
 * command-line tests do not reach cheaply: flag-only restarts, changes
 * while paused, nested and array values, redaction in both outputs, a
 * duplicate of an applied cluster, pruned clusters and the summary.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plan/plan.h"
#include "sources/revision.h"
#include "api/spec.h"
#include "util/xalloc.h"

static source_revision *revision(const char *const *paths, const char *const *texts, size_t n)
{
        source_revision *r = XNEW(source_revision);
        r->repository = xstrdup("/srv/clusters");
        for (size_t i = 0; i < n; i++)
                revision_add_file(r, paths[i], xstrdup(texts[i]), strlen(texts[i]));
        revision_sort(r);
        return r;
}

/* An accepted (and, with latched, applied) record made from YAML. */
static state_cluster *accepted(const char *yaml, bool latched, const char *phase)
{
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("old.yaml", yaml, strlen(yaml), &set, &d), 0);
        assert_int_equal(set.n, 1);
        state_cluster *sc = XNEW(state_cluster);
        sc->name = etcd_cluster_id(set.items[0]);
        json_t *j = spec_to_json(set.items[0]);
        sc->desired_json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        sc->desired_hash = spec_hash(set.items[0]);
        sc->observed_hash = latched ? xstrdup(sc->desired_hash) : NULL;
        sc->desired_commit = xstrdup("0123456789abcdef0123456789abcdef01234567");
        sc->desired_replicas = set.items[0]->replicas;
        sc->phase = xstrdup_null(phase);
        cluster_set_release(&set);
        diag_list_release(&d);
        return sc;
}

static const plan_item *item(const plan *p, const char *name)
{
        for (size_t i = 0; i < p->n; i++)
                if (streq(p->items[i].name, name))
                        return &p->items[i];
        fail_msg("no item %s", name);
        return NULL;
}

static bool has_step(const plan_item *it, const char *text)
{
        for (size_t i = 0; i < it->n_steps; i++)
                if (strstr(it->steps[i], text))
                        return true;
        return false;
}

#define LABELED(name, pw)                                                                          \
        "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: " name               \
        "\n  labels:\n    db-password: " pw "\nspec:\n"
#define HEAD(name)                                                                                 \
        "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: " name "\nspec:\n"

static void test_model(void **state)
{
        (void)state;
        const char *paths[] = {"c/flags.yaml", "c/paused.yaml", "c/nested.yaml", "c/d1.yaml",
                               "c/d2.yaml"};
        const char *now[] = {
            LABELED("flags", "new-hunter2") "  replicas: 3\n  options:\n    extraFlags:\n"
                                            "      max-txn-ops: \"256\"\n",
            HEAD("paused") "  replicas: 0\n  version: \"3.5.16\"\n",
            HEAD("nested") "  replicas: 3\n  resources:\n    requests:\n      cpu: 500m\n"
                           "  tolerations:\n    - key: dedicated\n      operator: Exists\n",
            HEAD("dup") "  replicas: 1\n",
            HEAD("dup") "  replicas: 5\n",
        };
        source_revision *rev = revision(paths, now, 5);

        state_cluster *items[] = {
            accepted(LABELED("flags", "old-hunter2") "  replicas: 3\n  options:\n    extraFlags:\n"
                                                     "      max-txn-ops: \"128\"\n",
                     true, "Running"),
            accepted(HEAD("paused") "  replicas: 0\n  version: \"3.5.10\"\n", true, "Paused"),
            accepted(HEAD("nested") "  replicas: 3\n", false, "Running"),
            accepted(HEAD("dup") "  replicas: 1\n", true, "Running"),
            accepted(HEAD("gone") "  replicas: 3\n", true, "Pruned"),
        };
        items[1]->progress_deadline_ms = 5000; /* latched, not converged yet */
        state_cluster_list applied = {.items = items, .n = 5};
        plan *p = NULL;
        plan_input in = {.rev = rev, .applied = &applied, .prune = true};
        assert_int_equal(plan_compute(&in, &p), 0);

        const plan_item *f = item(p, "default/flags");
        assert_int_equal(f->action, PLAN_UPDATE);
        assert_int_equal(f->n_changes, 2);
        assert_string_equal(f->changes[0].path, "metadata.labels.db-password");
        assert_true(f->changes[0].redacted);
        assert_string_equal(f->changes[1].path, "spec.options.extraFlags.max-txn-ops");
        assert_false(f->changes[1].redacted);
        assert_true(has_step(f, "restart 3 members one at a time with the new flags"));

        const plan_item *ps = item(p, "default/paused");
        assert_int_equal(ps->action, PLAN_UPDATE);
        assert_int_equal(ps->n_steps, 1);
        assert_true(has_step(ps, "the paused member starts with them when resumed"));
        assert_int_equal(ps->n_notes, 1);
        assert_non_null(strstr(ps->notes[0], "still being applied: the reconciler is working"));

        const plan_item *n = item(p, "default/nested");
        assert_int_equal(n->action, PLAN_UPDATE);
        assert_string_equal(n->changes[0].path, "spec.resources.requests.cpu");
        assert_null(n->changes[0].from);
        assert_string_equal(json_string_value(n->changes[0].to), "500m");
        assert_string_equal(n->changes[1].path, "spec.tolerations");
        assert_true(json_is_array(n->changes[1].to));
        assert_true(has_step(n, "no member restarts"));
        assert_int_equal(n->n_notes, 1);
        assert_non_null(strstr(n->notes[0], "still being applied"));
        assert_non_null(strstr(n->notes[0], "0123456"));

        const plan_item *d = item(p, "default/dup");
        assert_int_equal(d->action, PLAN_REJECTED);
        assert_int_equal(d->n_steps, 0);
        assert_int_equal(d->n_changes, 0);
        assert_true(diag_has_errors(&d->diags));

        assert_int_equal(item(p, "default/gone")->action, PLAN_UNCHANGED);

        assert_int_equal(p->n_update, 3);
        assert_int_equal(p->n_rejected, 1);
        assert_int_equal(p->n_unchanged, 1);
        assert_true(plan_has_changes(p));
        assert_true(plan_has_errors(p));

        /* Neither output shows a redacted value. */
        json_t *j = plan_to_json(p, rev);
        char *dump = json_dumps(j, 0);
        assert_null(strstr(dump, "hunter2"));
        assert_non_null(strstr(dump, "\"(redacted)\""));
        free(dump);
        json_decref(j);
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        plan_print_opts po = {.verbose = true};
        plan_print_text(p, rev, &po, mem);
        fclose(mem);
        assert_null(strstr(text, "hunter2"));
        assert_non_null(strstr(text, "metadata.labels.db-password: (redacted) → "
                                     "(redacted)"));
        assert_non_null(strstr(text, "Plan: 0 to create, 3 to change, 0 to delete, 1 rejected."));
        free(text);

        plan_free(p);
        for (size_t i = 0; i < 5; i++)
                state_cluster_free(items[i]);
        source_revision_free(rev);
}

/*
 * spec.consistency: etcd's checks and their interval are member flags (a
 * rolling restart); gitcd's own check interval and a repair restart nothing.
 */
static void test_consistency(void **state)
{
        (void)state;
        const char *paths[] = {"c/off.yaml", "c/gitcd.yaml"};
        const char *now[] = {
            HEAD("off") "  replicas: 3\n  consistency:\n    etcdChecks: false\n"
                        "    reason: \"bench\"\n",
            HEAD("gitcd") "  replicas: 3\n  consistency:\n    checkInterval: 1m\n"
                          "  repair: {recheck: true, token: t}\n",
        };
        source_revision *rev = revision(paths, now, 2);
        state_cluster *items[] = {
            accepted(HEAD("off") "  replicas: 3\n", true, "Running"),
            accepted(HEAD("gitcd") "  replicas: 3\n", true, "Running"),
        };
        state_cluster_list applied = {.items = items, .n = 2};
        plan *p = NULL;
        plan_input in = {.rev = rev, .applied = &applied};
        assert_int_equal(plan_compute(&in, &p), 0);
        const plan_item *off = item(p, "default/off");
        assert_int_equal(off->action, PLAN_UPDATE);
        assert_true(has_step(off, "restart 3 members one at a time with the new flags"));
        const plan_item *g = item(p, "default/gitcd");
        assert_int_equal(g->action, PLAN_UPDATE);
        assert_true(has_step(g, "no member restarts"));
        plan_free(p);
        for (size_t i = 0; i < 2; i++)
                state_cluster_free(items[i]);
        source_revision_free(rev);
}

static void test_empty(void **state)
{
        (void)state;
        source_revision *rev = revision(NULL, NULL, 0);
        plan *p = NULL;
        plan_input in = {.rev = rev};
        assert_int_equal(plan_compute(&in, &p), 0);
        assert_false(plan_has_changes(p));
        assert_false(plan_has_errors(p));
        plan_free(p);
        plan_free(NULL);
        assert_int_equal(plan_compute(&(plan_input){0}, &p), -EINVAL);
        source_revision_free(rev);
}

/*
 * The kubeconfig context in the plan as apply takes it: a creation says the
 * API server it goes on (the source's context when the spec names none); a
 * move of an existing cluster to another context is rejected at the field.
 */
static void test_kube_context(void **state)
{
        (void)state;
        const char *paths[] = {"a.yaml", "b.yaml"};
        const char *texts[] = {HEAD("a") "  replicas: 1\n  version: \"3.5.16\"\n",
                               HEAD("b") "  replicas: 1\n  version: \"3.5.16\"\n"
                                         "  kubernetes:\n    context: east\n"};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 2);
        state_cluster *sc = accepted(HEAD("b") "  replicas: 1\n  version: \"3.5.16\"\n"
                                               "  kubernetes:\n    context: west\n",
                                     true, "Running");
        state_cluster *items[] = {sc};
        state_cluster_list applied = {.items = items, .n = 1};
        intake_kube kube = {.context = "west"};
        plan *p = NULL;
        plan_input in = {
            .rev = rev, .applied = &applied, .caps = TARGET_CAP_KUBE_CONTEXTS, .kube = &kube};
        assert_int_equal(plan_compute(&in, &p), 0);
        const plan_item *a = item(p, "default/a");
        assert_int_equal(a->action, PLAN_CREATE);
        assert_true(has_step(a, "run it on the API server of kubeconfig context \"west\""));
        const plan_item *b = item(p, "default/b");
        assert_int_equal(b->action, PLAN_REJECTED);
        bool refused = false;
        for (size_t i = 0; i < b->diags.n; i++)
                refused |= strstr(b->diags.items[i].message,
                                  "spec.kubernetes.context: west → east: a cluster stays") != NULL;
        assert_true(refused);
        plan_free(p);
        state_cluster_free(sc);
}

/*
 * spec.adopt from cozystack: the steps say gitcd's members join on etcd's
 * own peer TLS and that the old client Service is pointed at gitcd's
 * voters; spec.tls.peer.selfSigned is refused by a target without the
 * capability (the hosts target), at its line.
 */
static void test_cozystack_takeover(void **state)
{
        (void)state;
        const char *paths[] = {"kc.yaml"};
        const char *texts[] = {HEAD("kc") "  replicas: 3\n  version: \"3.5.16\"\n"
                                          "  tls:\n    provider: none\n"
                                          "    peer:\n      selfSigned: true\n"
                                          "  adopt:\n    from: cozystack\n    name: old\n"};
        _cleanup_(source_revision_freep) source_revision *rev = revision(paths, texts, 1);
        state_cluster_list applied = {0};
        plan *p = NULL;
        plan_input in = {.rev = rev,
                         .applied = &applied,
                         .caps = TARGET_CAP_PVC_WRITER | TARGET_CAP_PEER_SELF_SIGNED};
        assert_int_equal(plan_compute(&in, &p), 0);
        const plan_item *it = item(p, "default/kc");
        assert_int_equal(it->action, PLAN_CREATE);
        assert_true(has_step(it, "find the cozystack cluster default/old"));
        assert_true(has_step(it, "etcd's own self-signed certificates"));
        assert_true(has_step(it, "point the old client Service at gitcd's voters"));
        plan_free(p);

        /* without the capability: refused at spec.tls.peer.selfSigned (line 11) */
        in.caps = TARGET_CAP_PVC_WRITER;
        assert_int_equal(plan_compute(&in, &p), 0);
        it = item(p, "default/kc");
        assert_int_equal(it->action, PLAN_REJECTED);
        bool refused = false;
        for (size_t i = 0; i < it->diags.n; i++)
                refused |= it->diags.items[i].line == 11 &&
                           strstr(it->diags.items[i].message, "needs --target kubernetes or local");
        assert_true(refused);
        plan_free(p);
}

static state_member *member(const char *name, int ordinal, const char *version)
{
        state_member *m = XNEW(state_member);
        m->cluster = xstrdup("default/up");
        m->name = xstrdup(name);
        m->ordinal = ordinal;
        m->version = xstrdup(version);
        m->initialized = true; /* joined etcd once: it holds data */
        return m;
}

/* A version change lists the order members roll in (the leader last) and its gates. */
static void test_roll_order(void **state)
{
        (void)state;
        const char *paths[] = {"c/up.yaml"};
        const char *texts[] = {HEAD("up") "  replicas: 3\n  version: \"3.5.30\"\n"};
        source_revision *rev = revision(paths, texts, 1);
        state_cluster *items[] = {
            accepted(HEAD("up") "  replicas: 3\n  version: \"3.5.16\"\n", true, "Running")};
        items[0]->leader = xstrdup("up-1");
        state_cluster_list applied = {.items = items, .n = 1};
        state_member *ms[] = {member("up-0", 0, "3.5.16"), member("up-1", 1, "3.5.16"),
                              member("up-2", 2, "3.5.16")};
        state_member_list members = {.items = ms, .n = 3};
        plan *p = NULL;
        plan_input in = {.rev = rev, .applied = &applied, .members = &members};
        assert_int_equal(plan_compute(&in, &p), 0);
        const plan_item *it = item(p, "default/up");
        assert_int_equal(it->action, PLAN_UPDATE);
        assert_true(has_step(it, "restart 3 members one at a time on 3.5.30 in this order: "
                                 "up-2 (3.5.16), up-0 (3.5.16), up-1 (3.5.16, the leader: "
                                 "it hands leadership over as it stops)"));
        assert_true(has_step(it, "after each: wait until it serves 3.5.30, has caught up"));
        plan_free(p);

        /* 3.6 while a member still runs 3.5.16 (the spec already says 3.5.30): rejected. */
        state_cluster_free(items[0]);
        items[0] = accepted(HEAD("up") "  replicas: 3\n  version: \"3.5.30\"\n", true, "Running");
        free(ms[1]->version);
        ms[1]->version = xstrdup("3.5.30");
        free(ms[2]->version);
        ms[2]->version = xstrdup("3.5.30");
        source_revision_free(rev);
        const char *texts6[] = {HEAD("up") "  replicas: 3\n  version: \"3.6.0\"\n"};
        rev = revision(paths, texts6, 1);
        in.rev = rev;
        assert_int_equal(plan_compute(&in, &p), 0);
        it = item(p, "default/up");
        assert_int_equal(it->action, PLAN_REJECTED);
        assert_int_equal(it->diags.n, 1);
        assert_non_null(strstr(it->diags.items[0].message, "members still run 3.5.16"));
        plan_free(p);
        state_cluster_free(items[0]);
        for (size_t i = 0; i < 3; i++)
                state_member_free(ms[i]);
        source_revision_free(rev);
}

/* Author, subject and file names come from the commit: the text output escapes them. */
static bool has_note(const plan_item *it, const char *text)
{
        for (size_t i = 0; i < it->n_notes; i++)
                if (strstr(it->notes[i], text))
                        return true;
        return false;
}

/*
 * The holds (reconciler/hold.h) as notes: a suspended cluster, and an
 * upgrade outside its maintenance window with the window's start; an
 * unchanged cluster outside its window gets no note.
 */
static void test_holds(void **state)
{
        (void)state;
        const char *paths[] = {"c/s.yaml", "c/w.yaml", "c/q.yaml"};
        static const char win[] = "  maintenance:\n    windows:\n"
                                  "      - {schedule: \"0 2 * * 6\", duration: 4h}\n";
        char *w_text = xasprintf(HEAD("w") "  replicas: 3\n  version: \"3.5.30\"\n%s", win);
        char *q_text = xasprintf(HEAD("q") "  replicas: 3\n%s", win);
        const char *s_text = HEAD("s") "  replicas: 3\n  suspend: true\n";
        const char *now_texts[] = {s_text, w_text, q_text};
        source_revision *rev = revision(paths, now_texts, 3);
        char *w_old = xasprintf(HEAD("w") "  replicas: 3\n  version: \"3.5.16\"\n%s", win);
        state_cluster *items[] = {
            accepted(HEAD("s") "  replicas: 1\n", true, "Running"),
            accepted(w_old, true, "Running"),
            accepted(q_text, true, "Running"),
        };
        state_cluster_list applied = {.items = items, .n = 3};
        plan *p = NULL;
        /* Thursday 2026-11-26T12:00Z */
        plan_input in = {.rev = rev, .applied = &applied, .now_ms = INT64_C(1795694400000)};
        assert_int_equal(plan_compute(&in, &p), 0);
        assert_true(has_note(item(p, "default/s"), "held (Suspended): suspended (by spec)"));
        assert_true(has_note(item(p, "default/w"),
                             "held (MaintenanceWindow): restarts, upgrades, CA rotation, the TLS "
                             "switch and scheduled defragmentation wait for the window at "
                             "2026-11-28T02:00Z"));
        const plan_item *q = item(p, "default/q");
        assert_int_equal(q->action, PLAN_UNCHANGED);
        assert_int_equal(q->n_notes, 0);
        plan_free(p);
        for (size_t i = 0; i < 3; i++)
                state_cluster_free(items[i]);
        source_revision_free(rev);
        free(w_text);
        free(q_text);
        free(w_old);
}

static void test_hostile_text_escaped(void **state)
{
        (void)state;
        static const char yaml[] = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                   "metadata:\n  name: x\nspec:\n  replicas: 1\n";
        const char *paths[] = {"a\033[31m.yaml"};
        const char *texts[] = {yaml};
        source_revision *rev = revision(paths, texts, 1);
        memcpy(rev->commit_id, "0123456789abcdef0123456789abcdef01234567", 41);
        rev->author.name = xstrdup("Eve\033[2J");
        rev->author.email = xstrdup("eve@example.org");
        rev->message = xstrdup("subject\033]0;title\007 ok\nbody");
        plan *p = NULL;
        plan_input in = {.rev = rev};
        assert_int_equal(plan_compute(&in, &p), 0);
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        plan_print_opts po = {.verbose = true};
        plan_print_text(p, rev, &po, mem);
        fclose(mem);
        assert_null(strchr(text, '\033'));
        assert_null(strchr(text, '\007'));
        assert_non_null(strstr(text, "by Eve\\x1b[2J <eve@example.org>: "
                                     "subject\\x1b]0;title\\x07 ok\n"));
        assert_non_null(strstr(text, "(a\\x1b[31m.yaml:"));
        free(text);
        plan_free(p);
        source_revision_free(rev);
}

/*
 * spec.dependsOn: tiers, and the driver's gate judged over the records:
 * prod's change waits for staging's (changed by the same revision), with
 * the time left once staging is on it and soaking, and is held when
 * staging gave up; the text has the Order section, the JSON tier and wait.
 */
static void test_order(void **state)
{
        (void)state;
        const char *paths[] = {"prod.yaml", "staging.yaml"};
        const char *texts[] = {HEAD("prod") "  replicas: 3\n  dependsOn: [staging]\n",
                               HEAD("staging") "  replicas: 3\n"};
        source_revision *rev = revision(paths, texts, 2);
        snprintf(rev->commit_id, sizeof(rev->commit_id), "%s",
                 "abc1234def0123456789abcdef0123456789abcd");
        state_cluster *items[] = {
            accepted(HEAD("prod") "  replicas: 1\n  dependsOn: [staging]\n", true, "Running"),
            accepted(HEAD("staging") "  replicas: 1\n", true, "Running")};
        state_cluster_list applied = {.items = items, .n = 2};
        plan *p = NULL;
        plan_input in = {.rev = rev, .applied = &applied, .now_ms = 100000};
        assert_int_equal(plan_compute(&in, &p), 0);
        const plan_item *prod = item(p, "default/prod");
        assert_int_equal(prod->tier, 1);
        assert_int_equal(item(p, "default/staging")->tier, 0);
        assert_string_equal(prod->wait_reason, "WaitingForDependency");
        assert_string_equal(prod->wait, "waits for staging to converge on abc1234 and soak 60 s");
        assert_null(item(p, "default/staging")->wait);
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        plan_print_text(p, rev, &(plan_print_opts){0}, mem);
        fclose(mem);
        assert_non_null(strstr(text, "Order (spec.dependsOn), each tier after the one before:\n"
                                     "  0: default/staging\n  1: default/prod\n"));
        free(text);
        json_t *j = plan_to_json(p, rev);
        json_t *c0 = json_array_get(json_object_get(j, "clusters"), 0);
        assert_int_equal(json_integer_value(json_object_get(c0, "tier")), 1);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(c0, "wait"), "reason")),
            "WaitingForDependency");
        json_decref(j);
        plan_free(p);

        /* staging already holds this revision's spec and has been healthy 28 s */
        free(items[1]->desired_hash);
        free(items[1]->observed_hash);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("s.yaml", texts[1], strlen(texts[1]), &set, &d), 0);
        items[1]->desired_hash = spec_hash(set.items[0]);
        items[1]->observed_hash = xstrdup(items[1]->desired_hash);
        cluster_set_release(&set);
        diag_list_release(&d);
        state_condition conds[] = {
            {.type = "Available", .status = "True", .last_transition_ms = 72000},
            {.type = "Progressing", .status = "False", .last_transition_ms = 72000},
            {.type = "Degraded", .status = "False", .last_transition_ms = 1000}};
        items[1]->conditions = conds;
        items[1]->n_conditions = 3;
        assert_int_equal(plan_compute(&in, &p), 0);
        assert_string_equal(item(p, "default/prod")->wait,
                            "waits for staging to converge on abc1234 and soak 60 s (32 s left)");
        plan_free(p);

        /* staging given up on: prod held with the reason */
        items[1]->terminal_reason = xstrdup("UpgradeFailed");
        items[1]->terminal_message = xstrdup("member staging-2 crash-loops on etcd 3.5.99");
        assert_int_equal(plan_compute(&in, &p), 0);
        assert_string_equal(item(p, "default/prod")->wait_reason, "DependencyFailed");
        assert_string_equal(item(p, "default/prod")->wait,
                            "held: staging UpgradeFailed: member staging-2 crash-loops on etcd "
                            "3.5.99");
        plan_free(p);
        items[1]->conditions = NULL;
        items[1]->n_conditions = 0;
        state_cluster_free(items[0]);
        state_cluster_free(items[1]);
        source_revision_free(rev);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_model),
            cmocka_unit_test(test_kube_context),
            cmocka_unit_test(test_cozystack_takeover),
            cmocka_unit_test(test_consistency),
            cmocka_unit_test(test_empty),
            cmocka_unit_test(test_roll_order),
            cmocka_unit_test(test_hostile_text_escaped),
            cmocka_unit_test(test_order),
            cmocka_unit_test(test_holds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
