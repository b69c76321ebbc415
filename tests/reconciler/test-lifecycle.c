/*
 * Whole cluster lifecycles through reconciler_pass, against the fake
 * world (tests/fake/fake.h): an in-memory target and etcd membership with
 * etcd's refusal rules. Each test is what an operator would watch:
 * bootstrap 3, scale 3 -> 5 -> 3, pause and resume, a member whose data
 * is lost gets replaced, a cluster that lost quorum is left alone, and
 * gitcd killed at every step boundary converges when started again.
 *
 * The clock is the world's; a waiting pass advances it by the poll time
 * the reconciler asked for, so etcd's 5 s health interval costs nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/spec.h"
#include "pki/pki.h"
#include "reconciler/reconcile.h"
#include "tests/fake/fixture.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"

static const fx_config config = {.name = "lifecycle", .cluster = CLUSTER};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

/*
 * Offer the spec "demo" with replicas, an extra flag that grows with n
 * (--host-whitelist with 5 * n host names, about 100 bytes each n; none
 * for 0) and extra lines under spec (or NULL).
 */
static void offer_spec(fx *f, int replicas, int n, const char *extra)
{
        strbuf y = STRBUF_INIT;
        sb_printf(&y, "  replicas: %d\n  version: \"3.5.16\"\n  storage:\n    size: 1Gi\n",
                  replicas);
        if (extra)
                sb_append(&y, extra);
        if (n > 0) {
                sb_append(&y, "  options:\n    extraFlags:\n      host-whitelist: \"");
                for (int i = 0; i < 5 * n; i++) {
                        sb_printf(&y, "%sh%04d-", i ? "," : "", i);
                        for (int j = 0; j < 10; j++)
                                sb_appendc(&y, (char)('a' + (i + j) % 26));
                        sb_append(&y, ".example");
                }
                sb_append(&y, "\"\n");
        }
        fx_offer(f, NULL, "%s", sb_str(&y));
        sb_release(&y);
}

static void offer_flags(fx *f, int replicas, int n_flags)
{
        offer_spec(f, replicas, n_flags, NULL);
}

static void offer(fx *f, int replicas)
{
        offer_flags(f, replicas, 0);
}

/* The cluster is exactly `replicas` healthy voters, each recorded, named and running. */
static void assert_cluster(fx *f, int replicas)
{
        size_t learners = 0;
        assert_int_equal(fake_etcd_count(f->w, &learners), (size_t)replicas);
        assert_int_equal(learners, 0);
        assert_int_equal(fake_procs_running(f->w), (size_t)replicas);
        assert_int_equal(fake_procs_present(f->w), (size_t)replicas);
        state_member_list l = {0};
        assert_int_equal(state_member_list_for(f->db, CLUSTER, false, &l), 0);
        assert_int_equal(l.n, (size_t)replicas);
        for (size_t i = 0; i < l.n; i++) {
                const fake_etcd_member *m = fake_etcd_find(f->w, l.items[i]->name);
                assert_non_null(m);
                assert_false(m->learner);
                fake_proc *p = fake_proc_find(f->w, l.items[i]->name);
                assert_non_null(p);
                assert_true(p->running);
                /* The record holds the member's facts: joined, how it started, what it runs. */
                assert_true(l.items[i]->initialized);
                assert_non_null(l.items[i]->initial_cluster);
                assert_non_null(l.items[i]->initial_cluster_state);
                assert_string_equal(l.items[i]->config_hash, p->config_hash);
        }
        state_member_list_release(&l);
}

/*
 * The static set formed exactly once: at most one bootstrap step (none
 * audited when gitcd was killed before it ended), every member joined the
 * initial cluster it was recorded with (the same list, "new"), nothing
 * added or removed, no member ever exited at start.
 */
static void assert_one_static_cluster(fx *f)
{
        assert_true(fx_audit_count(f, "member.bootstrap") <= 1);
        assert_int_equal(f->w->adds, 0);
        assert_int_equal(f->w->removes, 0);
        state_member_list l = {0};
        assert_int_equal(state_member_list_for(f->db, CLUSTER, true, &l), 0);
        assert_int_equal(l.n, 3);
        for (size_t i = 0; i < l.n; i++) {
                assert_string_equal(l.items[i]->initial_cluster_state, "new");
                assert_string_equal(l.items[i]->initial_cluster, f->w->formed_with);
                fake_proc *p = fake_proc_find(f->w, l.items[i]->name);
                assert_non_null(p);
                assert_int_equal(p->restarts, 0);
        }
        state_member_list_release(&l);
}

/* ---- lifecycles ---------------------------------------------------------- */

#define LEARNERS_MODE "  bootstrap:\n    mode: learners\n"

/* spec.bootstrap.mode learners: the seed-then-learners path, asked for explicitly. */
static void test_bootstrap_three(void **state)
{
        fx *f = *state;
        offer_spec(f, 3, 0, LEARNERS_MODE);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        /* One member at a time: a seed, then two learners promoted. */
        assert_int_equal(f->w->adds, 2);
        assert_int_equal(f->w->promotes, 2);
        assert_int_equal(f->w->removes, 0);
        assert_non_null(fake_etcd_find(f->w, "demo-0"));
        assert_non_null(fake_etcd_find(f->w, "demo-2"));

        /* Converged means nothing more to do: another pass changes nothing. */
        int starts = fx_total_starts(f);
        pass_result res;
        assert_int_equal(fx_converge_n(f, 1, &res), PASS_CONVERGED);
        assert_int_equal(fx_total_starts(f), starts);

        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->phase, "Running");
        assert_non_null(sc->cluster_id);
        state_cluster_free(sc);
        /* the target that runs it is recorded, for `gitcd snapshot save` */
        _cleanup_free_ char *recorded = NULL;
        assert_int_equal(state_cluster_target(f->db, CLUSTER, &recorded), 0);
        assert_string_equal(recorded, "fake");
}

/*
 * The default: a new cluster forms with every member at once, one static
 * initial cluster, no MemberAdd and no promotion; the next change uses a
 * learner.
 */
static void test_static_bootstrap_three(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_one_static_cluster(f);
        assert_int_equal(f->w->promotes, 0);
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->phase, "Running");
        assert_non_null(sc->cluster_id);
        state_cluster_free(sc);

        /* Every later change is a learner. */
        offer(f, 4);
        fx_converge(f, NULL);
        assert_cluster(f, 4);
        assert_int_equal(f->w->adds, 1);
        assert_int_equal(f->w->promotes, 1);
}

/*
 * One member of the initial cluster never starts (its host is down): the
 * others form the cluster and wait for it; past the deadline the cluster is
 * terminal, BootstrapFailed, naming the member. Nothing is replaced.
 */
static void test_static_member_never_starts(void **state)
{
        fx *f = *state;
        snprintf(f->w->never_starts, sizeof(f->w->never_starts), "demo-2");
        offer_spec(f, 3, 0, "  progressDeadlineSeconds: 5\n");
        pass_result res;
        assert_int_equal(fx_converge_n(f, FX_MAX_PASSES, &res), PASS_FAILED);
        assert_string_equal(res.reason, "BootstrapFailed");
        assert_non_null(strstr(res.message, "demo-2"));
        assert_int_equal(f->w->adds, 0);
        assert_int_equal(f->w->removes, 0);
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->terminal_reason, "BootstrapFailed");
        assert_non_null(strstr(sc->terminal_message, "demo-2"));
        state_cluster_free(sc);
}

/*
 * A cluster being formed is looked at soon (every 20 ms, at etcd's pace,
 * not a 200 ms timer's) and, when a member does not start, less often after
 * its first 150 looks: never 50 times a second until the deadline.
 */
static void test_forming_cluster_is_looked_at_soon_then_less_often(void **state)
{
        fx *f = *state;
        snprintf(f->w->never_starts, sizeof(f->w->never_starts), "demo-2");
        offer_spec(f, 3, 0, "  progressDeadlineSeconds: 600\n");
        int waits = 0, soon = 0, last_poll = 0;
        for (int i = 0; i < 1000 && waits < 200; i++) {
                _cleanup_(pass_result_release) pass_result res = {0};
                assert_int_equal(reconciler_pass(f->r, CLUSTER, &res), 0);
                assert_int_not_equal(res.outcome, PASS_FAILED);
                if (res.outcome == PASS_PROGRESSED)
                        continue;
                assert_int_equal(res.outcome, PASS_WAITING);
                assert_string_equal(res.reason, "Bootstrapping");
                waits++;
                soon += res.poll_ms == 20;
                last_poll = res.poll_ms;
                fake_world_advance(f->w, res.poll_ms);
        }
        assert_int_equal(waits, 200);
        assert_int_equal(soon, 150);
        assert_int_equal(last_poll, 200);
        assert_int_equal(f->w->adds, 0);
}

/*
 * The records say the cluster formed (a cluster ID, members recorded) and
 * every member is down when gitcd starts: the members are started with
 * their data, never a new initial cluster.
 */
static void test_formed_cluster_is_never_bootstrapped_again(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        uint64_t id = f->w->cluster_id;
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_proc *p = fake_proc_find(f->w, name);
                p->running = false;
                p->stopped = true;
        }
        fx_close(f);
        fx_open(f);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_int_equal(f->w->cluster_id, id);
        assert_int_equal(fx_audit_count(f, "member.bootstrap"), 1);
        assert_int_equal(f->w->adds, 0);
}

static void test_scale_up_and_down(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        int adds = f->w->adds;
        offer(f, 5);
        fx_converge(f, NULL);
        assert_cluster(f, 5);
        assert_int_equal(f->w->adds - adds, 2);
        offer(f, 3);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_int_equal(f->w->removes, 2);
        /* Scale-down removes the newest members; the first three stay. */
        assert_non_null(fake_etcd_find(f->w, "demo-0"));
        assert_non_null(fake_etcd_find(f->w, "demo-1"));
        assert_non_null(fake_etcd_find(f->w, "demo-2"));
        assert_null(fake_etcd_find(f->w, "demo-3"));
        assert_null(fake_etcd_find(f->w, "demo-4"));
        assert_int_equal(fx_audit_count(f, "member.remove"), 2);
}

static void test_pause_and_resume(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        offer(f, 0);
        fx_converge(f, NULL);
        /* Paused: one dormant member keeps the data, nothing runs. */
        assert_int_equal(fake_etcd_count(f->w, NULL), 1);
        assert_int_equal(fake_procs_running(f->w), 0);
        assert_int_equal(fake_procs_present(f->w), 1);
        fake_proc *p = fake_proc_find(f->w, "demo-0");
        assert_non_null(p);
        assert_true(p->has_data);
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->phase, "Paused");
        state_cluster_free(sc);

        offer(f, 3);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        /* The dormant member came back with its identity: the cluster was never re-formed. */
        assert_non_null(fake_etcd_find(f->w, "demo-0"));
}

static void test_data_lost_is_replaced(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        uint64_t lost_id = fake_etcd_find(f->w, "demo-1")->id;
        fake_lose_data(f->w, "demo-1");
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        /* The lost member left etcd and the target; a new ordinal took its place. */
        assert_null(fake_etcd_find(f->w, "demo-1"));
        assert_null(fake_proc_find(f->w, "demo-1"));
        assert_non_null(fake_etcd_find(f->w, "demo-3"));
        assert_int_not_equal(fake_etcd_find(f->w, "demo-3")->id, lost_id);
        assert_int_equal(f->w->removes, 1);
}

/*
 * The record, not the target, knows which data a member ran with: data
 * under another identity (a volume swapped for another) is lost data too.
 */
static void test_data_of_another_identity_is_replaced(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        fake_proc *p = fake_proc_find(f->w, "demo-1");
        state_member *m = NULL;
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-1", &m), 0);
        assert_non_null(m->data_identity);
        assert_string_equal(m->data_identity, p->data_id);
        state_member_free(m);

        snprintf(p->data_id, sizeof(p->data_id), "another-volume");
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_null(fake_etcd_find(f->w, "demo-1"));
        assert_null(fake_proc_find(f->w, "demo-1"));
        assert_non_null(fake_etcd_find(f->w, "demo-3"));
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-3", &m), 0);
        assert_non_null(m->data_identity);
        assert_string_not_equal(m->data_identity, "another-volume");
        state_member_free(m);
}

static void test_quorum_loss_removes_nothing(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        int adds = f->w->adds;
        /* Two of three hosts go down: every restart exits at once. */
        fake_kill(f->w, "demo-1", true);
        fake_kill(f->w, "demo-2", true);
        pass_result res;
        assert_int_equal(fx_converge_n(f, 60, &res), PASS_WAITING);
        assert_int_equal(fake_etcd_count(f->w, NULL), 3);
        assert_int_equal(fake_procs_present(f->w), 3);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(f->w->adds, adds);
        assert_int_equal(fx_audit_count(f, "member.delete"), 0);
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->phase, "QuorumLost");
        state_cluster_free(sc);

        /* The hosts come back: the same three members, nothing replaced. */
        fake_heal(f->w, "demo-1");
        fake_heal(f->w, "demo-2");
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_int_equal(f->w->removes, 0);
        assert_non_null(fake_etcd_find(f->w, "demo-1"));
        assert_non_null(fake_etcd_find(f->w, "demo-2"));
}

/*
 * A member the target cannot report on (its machine does not answer SSH)
 * is never taken for absent: the pass says why and decides nothing, so
 * nothing is removed or replaced; it is recorded unknown with what was
 * last seen of it and Degraded names why; once the target answers, the
 * same three members carry on and the marks go.
 */
static void test_unreported_member_is_not_replaced(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        int adds = f->w->adds;
        int changes = fx_audit_count(f, "condition.changed");
        fake_proc_find(f->w, "demo-1")->silent = true;
        for (int i = 0; i < 30; i++) {
                _cleanup_(pass_result_release) pass_result res = {0};
                assert_true(reconciler_pass(f->r, CLUSTER, &res) < 0);
                assert_non_null(strstr(res.message, "demo-1: its machine does not answer"));
                fake_world_advance(f->w, 1000);
        }
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(f->w->adds, adds);
        assert_int_equal(fx_audit_count(f, "member.delete"), 0);
        assert_non_null(fake_etcd_find(f->w, "demo-1"));

        /* status tells the truth: unknown, what was seen last and when, Degraded says why */
        state_member *m = NULL;
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-1", &m), 0);
        assert_string_equal(m->state, "unknown");
        assert_string_equal(m->seen_state, "ready");
        assert_true(m->seen_ms > 0 && m->seen_ms <= f->w->now_ms - 29000);
        assert_string_equal(m->unreachable, "demo-1: its machine does not answer");
        state_member_free(m);
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-0", &m), 0);
        assert_string_equal(m->state, "ready");
        assert_null(m->seen_state);
        state_member_free(m);
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        bool degraded = false;
        for (size_t i = 0; i < sc->n_conditions; i++) {
                const state_condition *c = &sc->conditions[i];
                if (!streq(c->type, "Degraded"))
                        continue;
                degraded = true;
                assert_string_equal(c->status, "True");
                assert_string_equal(c->reason, "MachineUnreachable");
                assert_non_null(strstr(c->message, "member demo-1 is unknown: demo-1: its machine "
                                                   "does not answer (last observed ready at "));
        }
        assert_true(degraded);
        assert_non_null(sc->leader); /* etcd answered: who leads is still observed */
        state_cluster_free(sc);
        /* audited once, not every pass */
        assert_int_equal(fx_audit_count(f, "condition.changed"), changes + 1);

        fake_proc_find(f->w, "demo-1")->silent = false;
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-1", &m), 0);
        assert_string_equal(m->state, "ready");
        assert_null(m->seen_state);
        assert_null(m->unreachable);
        state_member_free(m);
}

/* A changed flag makes every member outdated: each restarts once, followers first. */
static void test_flag_change_rolls_each_member_once(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        assert_int_equal(fx_total_starts(f), 3);
        offer_flags(f, 3, 1);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_int_equal(fx_total_starts(f), 6);
        assert_int_equal(fx_audit_count(f, "member.restart"), 3);
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present)
                        assert_int_equal(f->w->procs[i].starts, 2);
}

/* A fresh CA certificate, PEM (newly allocated). */
static char *new_ca_pem(const char *cn)
{
        pki_key *key = NULL;
        pki_cert *cert = NULL;
        assert_int_equal(pki_ca_create(cn, 3650, &key, &cert), 0);
        char *pem = NULL;
        assert_int_equal(pki_cert_to_pem(cert, &pem), 0);
        pki_cert_free(cert);
        pki_key_free(key);
        return pem;
}

static void set_ca_bundle(fx *f, const char *a, const char *b)
{
        int n = snprintf(f->w->ca_pem, sizeof(f->w->ca_pem), "%s%s", a, b ? b : "");
        assert_true(n > 0 && (size_t)n < sizeof(f->w->ca_pem));
}

/*
 * The CA bundle members trust is part of "outdated": a new CA in the
 * bundle restarts each member once; the same certificates written out
 * differently (what a leaf renewal rewrites around them) restart none.
 */
static void test_ca_bundle_change_rolls_each_member_once(void **state)
{
        fx *f = *state;
        _cleanup_free_ char *ca1 = new_ca_pem("ca one");
        _cleanup_free_ char *ca2 = new_ca_pem("ca two");
        set_ca_bundle(f, ca1, NULL);
        offer(f, 3);
        fx_converge(f, NULL);
        assert_int_equal(fx_total_starts(f), 3);

        _cleanup_free_ char *noted = xasprintf("# the cluster CA\n%s", ca1);
        set_ca_bundle(f, noted, NULL);
        pass_result res;
        assert_int_equal(fx_converge_n(f, 3, &res), PASS_CONVERGED);
        assert_int_equal(fx_total_starts(f), 3);

        set_ca_bundle(f, ca1, ca2);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        assert_int_equal(fx_total_starts(f), 6);
        assert_int_equal(fx_audit_count(f, "member.restart"), 3);
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present)
                        assert_int_equal(f->w->procs[i].starts, 2);
        assert_int_equal(fx_converge_n(f, 3, &res), PASS_CONVERGED);
        assert_int_equal(fx_total_starts(f), 6);
}

/*
 * A member command longer than 8 KiB (a long extra flag) converges: each
 * member starts once and is never seen as outdated afterwards.
 */
static void test_long_command_converges_without_restarts(void **state)
{
        fx *f = *state;
        offer_flags(f, 3, 100);
        fx_converge(f, NULL);
        assert_cluster(f, 3);
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present) {
                        assert_true(f->w->procs[i].command_len > 8192);
                        assert_int_equal(f->w->procs[i].starts, 1);
                }
        pass_result res;
        assert_int_equal(fx_converge_n(f, 3, &res), PASS_CONVERGED);
        assert_int_equal(fx_total_starts(f), 3);
        assert_int_equal(fx_audit_count(f, "member.restart"), 0);
}

/*
 * A spec that cannot converge before its deadline is given up on, and the
 * cluster stays terminal (also across a restart of gitcd) until a new
 * spec is latched.
 */
static void test_deadline_is_terminal_until_the_spec_changes(void **state)
{
        fx *f = *state;
        offer_spec(f, 3, 0, "  progressDeadlineSeconds: 60\n");
        fx_converge(f, NULL);
        /* A learner that never catches up: scale-up to 4 cannot finish. */
        f->w->learner_sync_ms = 1000 * 1000 * 1000;
        offer_spec(f, 4, 0, "  progressDeadlineSeconds: 60\n");
        pass_result res;
        assert_int_equal(fx_converge_n(f, FX_MAX_PASSES, &res), PASS_FAILED);
        assert_string_equal(res.reason, "DeadlineExceeded");
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_string_equal(sc->terminal_reason, "DeadlineExceeded");
        state_cluster_free(sc);

        /* gitcd restarts: still terminal, and nothing is tried. */
        fx_close(f);
        fx_open(f);
        int adds = f->w->adds, promotes = f->w->promotes;
        assert_int_equal(fx_converge_n(f, 3, &res), PASS_FAILED);
        assert_string_equal(res.reason, "DeadlineExceeded");
        assert_int_equal(f->w->adds, adds);
        assert_int_equal(f->w->promotes, promotes);

        /* A new spec ends it. */
        f->w->learner_sync_ms = 300;
        offer_spec(f, 4, 0, "  progressDeadlineSeconds: 120\n");
        fx_converge(f, NULL);
        assert_cluster(f, 4);
        assert_int_equal(state_cluster_get(f->db, CLUSTER, &sc), 0);
        assert_null(sc->terminal_reason);
        state_cluster_free(sc);
}

/*
 * One member lists only itself (it was restarted with force-new-cluster):
 * the others are missing from the list this pass read, but they still list
 * each other, so nothing is deleted.
 */
static void test_one_diverged_member_list_deletes_nothing(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        fake_proc_find(f->w, "demo-0")->alone = true;
        pass_result res;
        assert_int_not_equal(fx_converge_n(f, 30, &res), PASS_CONVERGED);
        assert_int_equal(fake_procs_present(f->w), 3);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%d", i);
                fake_proc *p = fake_proc_find(f->w, name);
                assert_non_null(p);
                assert_true(p->has_data);
        }
        state_member_list l = {0};
        assert_int_equal(state_member_list_for(f->db, CLUSTER, false, &l), 0);
        assert_int_equal(l.n, 3);
        state_member_list_release(&l);
        assert_int_equal(f->w->removes, 0);

        fake_proc_find(f->w, "demo-0")->alone = false;
        fx_converge(f, NULL);
        assert_cluster(f, 3);
}

/* Pass once at a time until the injected MemberAdd failure was used. */
static void pass_until_add_failed(fx *f)
{
        for (int i = 0; i < FX_MAX_PASSES && f->w->fail_next_add; i++) {
                _cleanup_(pass_result_release) pass_result res = {0};
                assert_int_equal(reconciler_pass(f->r, CLUSTER, &res), 0);
                if (res.outcome != PASS_PROGRESSED)
                        fake_world_advance(f->w, res.poll_ms > 0 ? res.poll_ms : 200);
        }
        assert_int_equal(f->w->fail_next_add, 0);
}

/* A failed MemberAdd forgets the member this pass planned; the others are untouched. */
static void test_failed_add_cleans_up_its_own_member(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        offer(f, 4);
        f->w->fail_next_add = ETCD_ERR_UNAVAILABLE;
        pass_until_add_failed(f);
        state_member *m = NULL;
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-3", &m), 0);
        assert_true(m->removed_ms != 0);
        state_member_free(m);
        assert_null(fake_proc_find(f->w, "demo-3"));
        assert_int_equal(fake_procs_present(f->w), 3);
        fx_converge(f, NULL);
        assert_cluster(f, 4);
}

/* On PEER_URL_EXISTS etcd holds a member at that URL: nothing is cleaned up. */
static void test_peer_url_exists_cleans_up_nothing(void **state)
{
        fx *f = *state;
        offer(f, 3);
        fx_converge(f, NULL);
        offer(f, 4);
        f->w->fail_next_add = ETCD_ERR_PEER_URL_EXISTS;
        pass_until_add_failed(f);
        state_member *m = NULL;
        assert_int_equal(state_member_get(f->db, CLUSTER, "demo-3", &m), 0);
        assert_int_equal(m->removed_ms, 0);
        state_member_free(m);
        assert_non_null(fake_proc_find(f->w, "demo-3"));
        fx_converge(f, NULL);
        assert_cluster(f, 4);
}

/* ---- crash points -------------------------------------------------------- */

enum scenario {
        BOOTSTRAP,  /* nothing -> 3, seed then learners (mode learners) */
        STATIC,     /* nothing -> 3, all at once (the default) */
        SCALE_DOWN, /* 3 -> 1 */
        REPLACE,    /* 3 with one member's data lost */
        PAUSE,      /* 3 -> 0 */
};

static const struct crash_case {
        const char *failpoint;
        enum scenario scenario;
} crash_cases[] = {
    {"start-seed.after-record", BOOTSTRAP},
    {"start-seed.after-start", BOOTSTRAP},
    {"add-learner.after-record", BOOTSTRAP},
    {"add-learner.after-journal", BOOTSTRAP},
    {"add-learner.after-etcd", BOOTSTRAP},
    {"start.before-target", BOOTSTRAP},
    {"start.after-target", BOOTSTRAP},
    {"promote.before-etcd", BOOTSTRAP},
    {"promote.after-etcd", BOOTSTRAP},
    {"bootstrap.after-records", STATIC},
    {"bootstrap.after-journal", STATIC},
    {"bootstrap.after-first-start", STATIC},
    {"bootstrap.after-start", STATIC},
    {"remove.before-etcd", SCALE_DOWN},
    {"remove.after-etcd", SCALE_DOWN},
    {"delete.after-target", SCALE_DOWN},
    {"move-leader.after-etcd", SCALE_DOWN},
    {"remove.after-etcd", REPLACE},
    {"add-learner.after-etcd", REPLACE},
    {"delete.after-target", REPLACE},
    {"stop.after-target", PAUSE},
};

static void crash_case(fx *f, const struct crash_case *cc)
{
        int want = 3;
        switch (cc->scenario) {
        case BOOTSTRAP:
                offer_spec(f, 3, 0, LEARNERS_MODE);
                break;
        case STATIC:
                offer(f, 3);
                break;
        case SCALE_DOWN:
                offer(f, 3);
                fx_converge(f, NULL);
                /* The newest member leads: scale-down moves leadership first. */
                f->w->leader = fake_etcd_find(f->w, "demo-2")->id;
                offer(f, 1);
                want = 1;
                break;
        case REPLACE:
                offer(f, 3);
                fx_converge(f, NULL);
                fake_lose_data(f->w, "demo-1");
                break;
        case PAUSE:
                offer(f, 3);
                fx_converge(f, NULL);
                offer(f, 0);
                want = 0;
                break;
        }
        fx_run_until_killed(f, cc->failpoint);
        fx_converge(f, NULL);
        if (want > 0) {
                assert_cluster(f, want);
        } else {
                assert_int_equal(fake_etcd_count(f->w, NULL), 1);
                assert_int_equal(fake_procs_running(f->w), 0);
                assert_int_equal(fake_procs_present(f->w), 1);
        }
        /* The operation the crash interrupted is closed and audited, never left pending. */
        fx_assert_no_pending_ops(f);
        if (cc->scenario == STATIC)
                assert_one_static_cluster(f);
}

static void test_crash_points(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(crash_cases) / sizeof(crash_cases[0]); i++) {
                void *st = NULL;
                setup(&st);
                crash_case(st, &crash_cases[i]);
                fx_teardown(&st);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_bootstrap_three, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_static_bootstrap_three, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_static_member_never_starts, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_forming_cluster_is_looked_at_soon_then_less_often,
                                            setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_formed_cluster_is_never_bootstrapped_again, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_scale_up_and_down, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_pause_and_resume, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_data_lost_is_replaced, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_data_of_another_identity_is_replaced, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_quorum_loss_removes_nothing, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_unreported_member_is_not_replaced, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_flag_change_rolls_each_member_once, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_ca_bundle_change_rolls_each_member_once, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_long_command_converges_without_restarts, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_deadline_is_terminal_until_the_spec_changes, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_one_diverged_member_list_deletes_nothing, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_failed_add_cleans_up_its_own_member, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_peer_url_exists_cleans_up_nothing, setup,
                                            fx_teardown),
            cmocka_unit_test(test_crash_points),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
