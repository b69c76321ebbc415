/*
 * TLS switched on for a running cluster (reconciler/tlsswitch.c) through
 * whole passes on the fake world, whose members answer at every URL they
 * listen on (clients on both schemes while the switch runs). What an
 * operator would watch: a plain 3-member cluster given tls.provider auto
 * ends with https peer URLs in etcd's membership and https in every
 * record, two restarts per member and no more, one MemberUpdate per
 * member, every step audited; gitcd killed after each kind of step
 * resumes and ends the same way.
 *
 * And off again: the same cluster given tls.provider none (or one surface
 * disabled) ends with http in etcd's membership and in every record, its
 * members started without TLS, three restarts per member (both schemes for
 * clients, the peer side, the certificates dropped) and one MemberUpdate
 * per member, every step audited as tls.disable; killed after each kind of
 * step it resumes and ends the same way. Never are two members listed in
 * etcd's membership at a peer URL of another scheme than the one they run.
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

#include "reconciler/reconcile.h"
#include "state/carotate.h"
#include "tests/fake/fixture.h"
#include "util/xalloc.h"

#define CLUSTER "default/demo"

static const fx_config config = {.name = "tlsswitch", .cluster = CLUSTER};

static int setup(void **state)
{
        return fx_setup(state, &config);
}

/* The fake world's model of CA generations, for a CA rotation under way. */
static void ca_model(fx *f)
{
        f->w->ca_model = true;
}

static const fx_config config_ca = {
    .name = "tlsswitch-ca", .cluster = CLUSTER, .prepare = ca_model};

static int setup_ca(void **state)
{
        return fx_setup(state, &config_ca);
}

static void offer(fx *f, bool tls)
{
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  progressDeadlineSeconds: 3600\n%s",
                 tls ? "  tls:\n    provider: auto\n"
                       "    client:\n      enabled: true\n"
                       "    peer:\n      enabled: true\n"
                     : "");
}

static bool has_scheme(const char *url, const char *scheme)
{
        return url && strneq(url, scheme, strlen(scheme));
}

/* etcd's membership and every record: every URL of the surface starts with scheme. */
static void assert_schemes(fx *f, const char *client, const char *peer)
{
        int members = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                const fake_etcd_member *m = &f->w->members[i];
                if (!m->used)
                        continue;
                members++;
                assert_true(has_scheme(m->peer_url, peer));
                assert_true(has_scheme(m->client_url, client));
        }
        assert_int_equal(members, 3);
        state_member_list l = {0};
        assert_int_equal(state_member_list_for(f->db, CLUSTER, false, &l), 0);
        assert_int_equal((int)l.n, 3);
        for (size_t i = 0; i < l.n; i++) {
                assert_true(has_scheme(l.items[i]->peer_url, peer));
                assert_true(has_scheme(l.items[i]->client_url, client));
        }
        state_member_list_release(&l);
}

static void assert_https(fx *f)
{
        assert_schemes(f, "https://", "https://");
}

/*
 * How many running members etcd's membership lists at a peer URL of
 * another scheme than the one they were started with (their peers cannot
 * dial them).
 */
static int unreachable(fx *f)
{
        int n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                const fake_proc *p = &f->w->procs[i];
                if (!p->present || !p->running)
                        continue;
                for (size_t j = 0; j < FAKE_MAX_MEMBERS; j++) {
                        const fake_etcd_member *m = &f->w->members[j];
                        if (m->used && streq(m->name, p->name) &&
                            strneq(m->peer_url, "https://", 8) !=
                                strneq(p->listen_peer, "https://", 8))
                                n++;
                }
        }
        return n;
}

/* fx_converge, checking after every pass that no two members are unreachable at once. */
static void converge_one_unreachable_at_most(fx *f)
{
        for (int i = 0; i < FX_MAX_PASSES; i++) {
                pass_result res = fx_pass(f);
                assert_true(unreachable(f) <= 1);
                if (res.outcome == PASS_CONVERGED)
                        return;
                assert_int_not_equal(res.outcome, PASS_FAILED);
        }
        fail_msg("not converged");
}

static void test_switched_on(void **state)
{
        fx *f = *state;
        offer(f, false);
        fx_converge(f, NULL);
        int starts = fx_total_starts(f);
        assert_int_equal(f->w->peer_updates, 0);

        offer(f, true);
        converge_one_unreachable_at_most(f);
        assert_https(f);
        assert_int_equal(fx_total_starts(f), starts + 6); /* half way, then the peer side */
        assert_int_equal(f->w->peer_updates, 3);
        /* clients moved once; per member: peer URL recorded, membership updated */
        assert_int_equal(fx_audit_count(f, "tls.enable"), 1 + 3 + 3);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(f->w->adds, 0);

        /* Nothing more to do, also after a restart of gitcd. */
        fx_close(f);
        fx_open(f);
        fx_converge(f, NULL);
        assert_int_equal(fx_total_starts(f), starts + 6);
        assert_int_equal(fx_audit_count(f, "tls.enable"), 7);
}

static void test_killed_after_each_step(void **state)
{
        fx *f = *state;
        offer(f, false);
        fx_converge(f, NULL);
        int starts = fx_total_starts(f);

        offer(f, true);
        fx_run_until_killed(f, "tls-switch.clients-moved");
        fx_run_until_killed(f, "tls-switch.peer-recorded");
        fx_run_until_killed(f, "tls-switch.peer-updated");
        fx_converge(f, NULL);
        assert_https(f);
        assert_int_equal(fx_total_starts(f), starts + 6);
        assert_int_equal(f->w->peer_updates, 3);
        assert_int_equal(f->w->removes, 0);
}

/* A cluster switched on (counted from here), then the TLS part of its spec given. */
static int switched_on(fx *f)
{
        offer(f, true);
        fx_converge(f, NULL);
        assert_https(f);
        return fx_total_starts(f);
}

static void test_switched_off(void **state)
{
        fx *f = *state;
        int starts = switched_on(f);
        int updates = f->w->peer_updates;

        offer(f, false);
        converge_one_unreachable_at_most(f);
        assert_schemes(f, "http://", "http://");
        /* both schemes for clients, the peer side, the certificates dropped */
        assert_int_equal(fx_total_starts(f), starts + 9);
        assert_int_equal(f->w->peer_updates, updates + 3);
        /* started; clients moved once; per member: peer recorded, membership updated; ended */
        assert_int_equal(fx_audit_count(f, "tls.disable"), 1 + 1 + 3 + 3 + 1);
        assert_int_equal(f->w->removes, 0);
        assert_int_equal(f->w->adds, 0);

        /* Nothing more to do, also after a restart of gitcd. */
        fx_close(f);
        fx_open(f);
        fx_converge(f, NULL);
        assert_int_equal(fx_total_starts(f), starts + 9);
        assert_int_equal(fx_audit_count(f, "tls.disable"), 9);
}

static void test_off_killed_after_each_step(void **state)
{
        fx *f = *state;
        int starts = switched_on(f);
        int updates = f->w->peer_updates;

        offer(f, false);
        fx_run_until_killed(f, "tls-switch-off.started");
        fx_run_until_killed(f, "tls-switch-off.clients-moved");
        fx_run_until_killed(f, "tls-switch-off.peer-recorded");
        fx_run_until_killed(f, "tls-switch-off.peer-updated");
        fx_run_until_killed(f, "tls-switch-off.finished");
        fx_converge(f, NULL);
        assert_schemes(f, "http://", "http://");
        assert_int_equal(fx_total_starts(f), starts + 9);
        assert_int_equal(f->w->peer_updates, updates + 3);
        assert_int_equal(f->w->removes, 0);
}

/* One surface off, the other kept: the peer side goes plain, clients stay on https alone. */
static void test_peer_off_only(void **state)
{
        fx *f = *state;
        int starts = switched_on(f);
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  progressDeadlineSeconds: 3600\n"
                 "  tls:\n    provider: auto\n    client:\n      enabled: true\n"
                 "    peer:\n      enabled: false\n");
        converge_one_unreachable_at_most(f);
        assert_schemes(f, "https://", "http://");
        /* no restart for clients: the peer side, then the peer certificates dropped */
        assert_int_equal(fx_total_starts(f), starts + 6);
}

/*
 * spec.tls.peer.selfSigned: the members' https peer records are etcd's own
 * peer TLS, never taken for a switch off under way (which would keep the
 * provider's certificates on and restart every member onto them).
 */
static void test_peer_self_signed_is_no_switch(void **state)
{
        fx *f = *state;
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  progressDeadlineSeconds: 3600\n"
                 "  tls:\n    provider: none\n    peer:\n      selfSigned: true\n");
        fx_converge(f, NULL);
        assert_schemes(f, "http://", "https://");
        int starts = fx_total_starts(f);
        assert_int_equal(starts, 3);
        fx_close(f);
        fx_open(f);
        fx_converge(f, NULL);
        assert_schemes(f, "http://", "https://");
        assert_int_equal(fx_total_starts(f), starts);
        assert_int_equal(fx_audit_count(f, "tls.disable"), 0);
        assert_int_equal(fx_audit_count(f, "tls.enable"), 0);
}

/* Switched on again half way through the switch off: the switch on takes over. */
static void test_on_again_half_way(void **state)
{
        fx *f = *state;
        (void)switched_on(f);
        offer(f, false);
        fx_run_until_killed(f, "tls-switch-off.peer-recorded");
        offer(f, true);
        fx_converge(f, NULL);
        assert_https(f);
        /* started, clients moved, given up (the peer step was killed before its audit) */
        assert_int_equal(fx_audit_count(f, "tls.disable"), 1 + 1 + 1);
        assert_int_equal(f->w->removes, 0);
}

/*
 * Half way through the switch on (gitcd's client moved, no peer yet), a
 * commit keeps peer TLS and turns client TLS off: clients go back to http
 * first, then the switch on finishes the peer side.
 */
static void test_client_off_while_switching_on(void **state)
{
        fx *f = *state;
        offer(f, false);
        fx_converge(f, NULL);
        offer(f, true);
        fx_run_until_killed(f, "tls-switch.clients-moved");
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  progressDeadlineSeconds: 3600\n"
                 "  tls:\n    provider: auto\n    client:\n      enabled: false\n"
                 "    peer:\n      enabled: true\n");
        fx_converge(f, NULL);
        assert_schemes(f, "http://", "https://");
        assert_int_equal(f->w->peer_updates, 3);
        assert_int_equal(f->w->removes, 0);
        assert_true(fx_audit_count(f, "tls.disable") >= 2); /* started, clients moved, ended */
}

/* TLS switched off while a CA rotation runs: the rotation runs to its end, then TLS goes. */
static void test_off_during_ca_rotation(void **state)
{
        fx *f = *state;
        (void)switched_on(f);
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  progressDeadlineSeconds: 3600\n"
                 "  tls:\n    provider: auto\n    auto:\n      rotateCA: \"r1\"\n");
        fx_run_until_killed(f, "ca-rotate.phase-1");
        offer(f, false);
        converge_one_unreachable_at_most(f);
        assert_schemes(f, "http://", "http://");
        state_ca_rotation *rot = NULL;
        assert_int_equal(state_ca_rotation_running(f->db, CLUSTER, &rot), -ENOENT);
        assert_int_equal(f->w->removes, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_switched_on, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_killed_after_each_step, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_switched_off, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_off_killed_after_each_step, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_peer_off_only, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_peer_self_signed_is_no_switch, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_on_again_half_way, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_client_off_while_switching_on, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_off_during_ca_rotation, setup_ca, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
