/*
 * Table-driven tests of decide(): each case is a cluster situation a
 * person can picture ("3 voters ready, spec wants 5, no learner pending")
 * and the one step gitcd must take. The safety cases (quorum lost, scale
 * down with members down) are the ones that matter most.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "reconciler/bootstrap.h"
#include "reconciler/decide.h"
#include "util/macro.h"

#define R MEMBER_READY
#define S MEMBER_STARTING
#define X MEMBER_STOPPED
#define A MEMBER_ABSENT
#define C MEMBER_CRASHED
#define L MEMBER_CRASH_LOOP
#define D MEMBER_DATA_LOST

/* One member: name, ordinal, in etcd?, learner?, unstarted?, runtime, dormant?, outdated? */
#define M(n, o, etcd, lrn, unst, rt)                                                               \
        {                                                                                          \
                n, o, true, false, etcd, 0x100 + o, lrn, unst, rt, NULL, false                     \
        }

struct tcase {
        const char *what;
        int replicas;
        bool listed;
        bool bootstrapped;
        int leader; /* ordinal of the leader, -1 none */
        obs_member members[8];
        size_t n;
        step_kind want;
        const char *want_member; /* NULL: no member */
        const char *want_reason;
};

static const struct tcase cases[] = {
    {"empty cluster, 3 wanted: start the seed alone",
     3,
     false,
     false,
     -1,
     {{0}},
     0,
     STEP_START_SEED,
     NULL,
     REASON_WAITING_FOR_SEED},
    {"empty cluster, paused: nothing",
     0,
     false,
     false,
     -1,
     {{0}},
     0,
     STEP_CONVERGED,
     NULL,
     REASON_PAUSED},
    {"seed starting: wait for it",
     3,
     false,
     false,
     -1,
     {M("c-0", 0, false, false, false, S)},
     1,
     STEP_WAIT,
     "c-0",
     REASON_WAITING_FOR_SEED},
    {"seed recorded but not started (crash before start): start it",
     3,
     false,
     false,
     -1,
     {M("c-0", 0, false, false, false, A)},
     1,
     STEP_START_MEMBER,
     "c-0",
     REASON_WAITING_FOR_SEED},
    {"seed ready, 3 wanted: add a learner",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R)},
     1,
     STEP_ADD_LEARNER,
     NULL,
     REASON_SCALING_UP},
    {"learner added but never started: start it",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, true, true, A)},
     2,
     STEP_START_MEMBER,
     "c-1",
     REASON_SCALING_UP},
    {"learner added, never started, not recorded: remove it",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R),
      {"", 1, false, false, true, 0x101, true, true, A, NULL, false}},
     2,
     STEP_REMOVE_MEMBER,
     "",
     REASON_SCALING_UP},
    {"learner catching up: wait",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, true, false, S)},
     2,
     STEP_WAIT,
     "c-1",
     REASON_SCALING_UP},
    {"learner ready: promote",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, true, false, R)},
     2,
     STEP_PROMOTE,
     "c-1",
     REASON_SCALING_UP},
    {"3 voters ready, want 5, no learner pending: add learner",
     5,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_ADD_LEARNER,
     NULL,
     REASON_SCALING_UP},
    {"3 voters ready, want 3: converged",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_CONVERGED,
     NULL,
     REASON_QUORUM_HEALTHY},
    {"5 voters, want 3: remove the newest",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, R), M("c-3", 3, true, false, false, R),
      M("c-4", 4, true, false, false, R)},
     5,
     STEP_REMOVE_MEMBER,
     "c-4",
     REASON_SCALING_DOWN},
    {"5 voters, want 3, newest leads: move leadership first",
     3,
     true,
     true,
     4,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, R), M("c-3", 3, true, false, false, R),
      M("c-4", 4, true, false, false, R)},
     5,
     STEP_MOVE_LEADER,
     "c-0",
     REASON_SCALING_DOWN},
    {"5 voters, want 3, one down: remove the down one first",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, C),
      M("c-2", 2, true, false, false, R), M("c-3", 3, true, false, false, R),
      M("c-4", 4, true, false, false, R)},
     5,
     STEP_REMOVE_MEMBER,
     "c-1",
     REASON_SCALING_DOWN},
    {"4 voters, want 3, two down: removing a healthy one would break quorum",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, C),
      M("c-2", 2, true, false, false, C), M("c-3", 3, true, false, false, R)},
     4,
     STEP_WAIT,
     NULL,
     REASON_QUORUM_LOST},
    {"removed member's process remains: delete it",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, R), M("c-3", 3, false, false, false, R)},
     4,
     STEP_DELETE_MEMBER,
     "c-3",
     REASON_SCALING_DOWN},
    {"member data lost, others healthy: remove it (replacement)",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, D),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_REMOVE_MEMBER,
     "c-1",
     REASON_REPLACING_MEMBER},
    {"member dir vanished although etcd knows it started: replace",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, A)},
     3,
     STEP_REMOVE_MEMBER,
     "c-2",
     REASON_REPLACING_MEMBER},
    {"member crash-loops: replace",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, L)},
     3,
     STEP_REMOVE_MEMBER,
     "c-2",
     REASON_REPLACING_MEMBER},
    {"after replacement removal: 2 voters, want 3: add learner",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-2", 2, true, false, false, R)},
     2,
     STEP_ADD_LEARNER,
     NULL,
     REASON_SCALING_UP},
    {"two of three crashed: quorum lost, nothing removed",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, C),
      M("c-2", 2, true, false, false, D)},
     3,
     STEP_WAIT,
     NULL,
     REASON_QUORUM_LOST},
    {"no member answers: quorum lost",
     3,
     false,
     true,
     -1,
     {M("c-0", 0, false, false, false, C), M("c-1", 1, false, false, false, C),
      M("c-2", 2, false, false, false, R)},
     3,
     STEP_WAIT,
     NULL,
     REASON_QUORUM_LOST},
    {"single member lost its data: quorum lost, no deletion",
     1,
     true,
     true,
     -1,
     {M("c-0", 0, true, false, false, D)},
     1,
     STEP_WAIT,
     NULL,
     REASON_QUORUM_LOST},
    {"one member crashed (restarting): wait, no replacement",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, C),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_WAIT,
     NULL,
     REASON_RECOVERING},
    {"stopped member (not paused): start it with its data",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, X),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_START_MEMBER,
     "c-1",
     REASON_RECOVERING},
    {"pause: 3 voters, want 0: remove newest",
     0,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R), M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_REMOVE_MEMBER,
     "c-2",
     REASON_SCALING_DOWN},
    {"pause: one voter left: stop it",
     0,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R)},
     1,
     STEP_STOP_MEMBER,
     "c-0",
     REASON_PAUSED},
    {"paused: the dormant member is stopped: converged",
     0,
     false,
     true,
     -1,
     {{"c-0", 0, true, true, false, 0x100, false, false, X, NULL, false}},
     1,
     STEP_CONVERGED,
     NULL,
     REASON_PAUSED},
    {"resume: dormant member, want 3: start it with its data",
     3,
     false,
     true,
     -1,
     {{"c-0", 0, true, true, false, 0x100, false, false, X, NULL, false}},
     1,
     STEP_START_MEMBER,
     "c-0",
     REASON_SCALING_UP},
    {"upgrade: follower outdated: restart the highest follower",
     3,
     true,
     true,
     0,
     {M("c-0", 0, true, false, false, R),
      {"c-1", 1, true, false, true, 0x101, false, false, R, NULL, true},
      {"c-2", 2, true, false, true, 0x102, false, false, R, NULL, true}},
     3,
     STEP_RESTART_MEMBER,
     "c-2",
     REASON_UPGRADING},
    /* etcd hands leadership over inside its graceful stop: no MoveLeader pass before */
    {"upgrade: only the leader outdated, the others healthy: restart the leader",
     3,
     true,
     true,
     0,
     {{"c-0", 0, true, false, true, 0x100, false, false, R, NULL, true},
      M("c-1", 1, true, false, false, R),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_RESTART_MEMBER,
     "c-0",
     REASON_UPGRADING},
    {"upgrade: the leader and a follower outdated: the follower first",
     3,
     true,
     true,
     0,
     {{"c-0", 0, true, false, true, 0x100, false, false, R, NULL, true},
      {"c-1", 1, true, false, true, 0x101, false, false, R, NULL, true},
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_RESTART_MEMBER,
     "c-1",
     REASON_UPGRADING},
    {"upgrade: only the leader outdated, a follower down: wait, nothing restarts",
     3,
     true,
     true,
     0,
     {{"c-0", 0, true, false, true, 0x100, false, false, R, NULL, true},
      M("c-1", 1, true, false, false, C),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_WAIT,
     "c-0",
     REASON_UPGRADING},
    {"upgrade: a member still starting: wait before the next restart",
     3,
     true,
     true,
     0,
     {{"c-0", 0, true, false, true, 0x100, false, false, R, NULL, true},
      M("c-1", 1, true, false, false, S),
      M("c-2", 2, true, false, false, R)},
     3,
     STEP_WAIT,
     "c-0",
     REASON_UPGRADING},
};

/* decide() again on s: the message of the step before is freed first. */
static void redecide(const desired *want, const observation *obs, step *s)
{
        step_release(s);
        decide(want, obs, s);
}

static void run_case(const struct tcase *tc)
{
        obs_member members[8];
        memcpy(members, tc->members, sizeof(members));
        observation obs = {
            .members = members,
            .n = tc->n,
            .etcd_listed = tc->listed,
            .leader_id = tc->leader >= 0 ? 0x100 + (uint64_t)tc->leader : 0,
            .bootstrapped = tc->bootstrapped,
            .next_ordinal = 9,
        };
        desired want = {.replicas = tc->replicas};
        _cleanup_(step_release) step s = {0};
        redecide(&want, &obs, &s);
        if (s.kind != tc->want || !streq_ptr(s.reason, tc->want_reason) ||
            (tc->want_member && !streq_ptr(s.member, tc->want_member)))
                fail_msg("%s: got %s(%s) reason %s: %s", tc->what, step_kind_name(s.kind),
                         s.member ? s.member : "-", s.reason ? s.reason : "-", s.message);
        assert_true(s.message[0] != '\0');
        if (s.kind == STEP_ADD_LEARNER || s.kind == STEP_START_SEED)
                assert_int_equal(s.ordinal, 9); /* the counter that only grows */
}

static void test_cases(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                run_case(&cases[i]);
}

/* Every state reachable in a 1..5 member cluster: decide never removes a voter below quorum. */
static void test_never_breaks_quorum(void **state)
{
        (void)state;
        const member_runtime_state rts[] = {R, S, C, L, D, X};
        for (int n = 1; n <= 5; n++) {
                size_t combos = 1;
                for (int i = 0; i < n; i++)
                        combos *= sizeof(rts) / sizeof(rts[0]);
                for (size_t k = 0; k < combos; k++) {
                        obs_member members[5];
                        size_t x = k;
                        int healthy = 0;
                        for (int i = 0; i < n; i++) {
                                member_runtime_state rt = rts[x % 6];
                                x /= 6;
                                obs_member m = M("m", i, true, false, false, rt);
                                members[i] = m;
                                if (rt == R)
                                        healthy++;
                        }
                        for (int replicas = 0; replicas <= 5; replicas++) {
                                observation obs = {members, (size_t)n, true, 0x100, true, 9};
                                desired want = {replicas};
                                _cleanup_(step_release) step s = {0};
                                redecide(&want, &obs, &s);
                                if (s.kind != STEP_REMOVE_MEMBER)
                                        continue;
                                const obs_member *v = NULL;
                                for (int i = 0; i < n; i++)
                                        if (members[i].id == s.member_id)
                                                v = &members[i];
                                assert_non_null(v);
                                int after = healthy - (v->runtime == R ? 1 : 0);
                                if (after < (n - 1) / 2 + 1)
                                        fail_msg("n=%d replicas=%d: removing %d leaves %d "
                                                 "healthy of %d",
                                                 n, replicas, v->ordinal, after, n - 1);
                        }
                }
        }
}

/*
 * Certificates (rules 0 and 12), judged at an injected time: in a healthy
 * 3-member cluster nothing is due until the soonest leaf enters its
 * window; then its member is renewed, one member per step; an expired
 * leaf is renewed even when quorum is lost (it may be why), a leaf in its
 * window is not (no change while the cluster is broken).
 */
static void test_certificates(void **state)
{
        (void)state;
        obs_member healthy3[] = {M("c-0", 0, true, false, false, R),
                                 M("c-1", 1, true, false, false, R),
                                 M("c-2", 2, true, false, false, R)};
        obs_member broken3[] = {M("c-0", 0, true, false, false, R),
                                M("c-1", 1, true, false, false, C),
                                M("c-2", 2, true, false, false, C)};
        const obs_cert certs[] = {
            {"c-0", "peer", 100000},
            {"c-1", "peer", 90000}, /* the soonest */
            {"c-2", "client", 100000},
        };
        desired want = {.replicas = 3, .renew_before_ms = 40000};
        observation obs = {
            .members = healthy3,
            .n = 3,
            .etcd_listed = true,
            .leader_id = 0x100,
            .bootstrapped = true,
            .next_ordinal = 3,
            .certs = certs,
            .n_certs = 3,
        };
        _cleanup_(step_release) step s = {0};

        assert_int_equal(certs_next_renewal_ms(&want, &obs), 50000);
        obs.now_ms = 49999;
        redecide(&want, &obs, &s);
        assert_int_equal(s.kind, STEP_CONVERGED);

        obs.now_ms = 50000;
        redecide(&want, &obs, &s);
        assert_int_equal(s.kind, STEP_RENEW_CERTS);
        assert_string_equal(s.member, "c-1");
        assert_string_equal(s.reason, REASON_RENEWING_CERTS);

        /* Quorum lost: a leaf in its window waits ... */
        obs.members = broken3;
        redecide(&want, &obs, &s);
        assert_int_equal(s.kind, STEP_WAIT);
        assert_string_equal(s.reason, REASON_QUORUM_LOST);
        /* ... an expired one does not, even when etcd cannot be listed at all. */
        obs.now_ms = 95000;
        obs.etcd_listed = false;
        redecide(&want, &obs, &s);
        assert_int_equal(s.kind, STEP_RENEW_CERTS);
        assert_string_equal(s.member, "c-1");
        assert_string_equal(s.reason, REASON_CERTS_EXPIRED);

        /* Leaves every member shares (Kubernetes Secrets): member NULL. */
        const obs_cert shared[] = {{NULL, "peer", 60000}};
        obs.certs = shared;
        obs.n_certs = 1;
        obs.members = healthy3;
        obs.etcd_listed = true;
        obs.now_ms = 30000;
        redecide(&want, &obs, &s);
        assert_int_equal(s.kind, STEP_RENEW_CERTS);
        assert_null(s.member);
        assert_true(strstr(s.message, "shared") != NULL);

        /* No certificates (no TLS): nothing to renew, no due time. */
        obs.certs = NULL;
        obs.n_certs = 0;
        assert_int_equal(certs_next_renewal_ms(&want, &obs), 0);
        redecide(&want, &obs, &s);
        assert_int_equal(s.kind, STEP_CONVERGED);
}

/* A member of a static initial cluster that has not joined yet. */
#define SI(n, o, etcd, unst, rt)                                                                   \
        {                                                                                          \
                n, o, true, false, etcd, 0x100 + o, false, unst, rt, NULL, false, true             \
        }

static void decide_static(int replicas, bool static_mode, observation *obs, step *s)
{
        desired want = {.replicas = replicas, .static_bootstrap = static_mode};
        redecide(&want, obs, s);
}

/* spec.bootstrap.mode static: rules 1 and 1b (reconciler/bootstrap.c). */
static void test_static_bootstrap(void **state)
{
        (void)state;
        _cleanup_(step_release) step s = {0};
        observation obs = {.next_ordinal = 0};

        /* Nothing anywhere: every member at once. */
        decide_static(3, true, &obs, &s);
        assert_int_equal(s.kind, STEP_BOOTSTRAP);
        assert_int_equal(s.ordinal, 0);
        assert_int_equal(s.count, 3);
        assert_string_equal(s.reason, REASON_BOOTSTRAPPING);
        assert_true(bootstrap_in_progress(&obs));

        /* One replica, or mode learners: the seed. */
        decide_static(1, true, &obs, &s);
        assert_int_equal(s.kind, STEP_START_SEED);
        decide_static(3, false, &obs, &s);
        assert_int_equal(s.kind, STEP_START_SEED);

        /* The records say the cluster formed once (a cluster ID): never a new initial cluster. */
        obs.bootstrapped = true;
        decide_static(3, true, &obs, &s);
        assert_int_not_equal(s.kind, STEP_BOOTSTRAP);
        obs.bootstrapped = false;

        /* Recorded, then gitcd stopped before starting them: start them from their records. */
        obs_member rec[3] = {SI("c-0", 0, false, false, A), SI("c-1", 1, false, false, A),
                             SI("c-2", 2, false, false, A)};
        obs.members = rec;
        obs.n = 3;
        obs.next_ordinal = 3;
        decide_static(3, true, &obs, &s);
        assert_int_equal(s.kind, STEP_START_MEMBER);
        assert_string_equal(s.member, "c-0");
        rec[0].runtime = S;
        decide_static(3, true, &obs, &s);
        assert_int_equal(s.kind, STEP_START_MEMBER);
        assert_string_equal(s.member, "c-1");
        /* Not for a paused spec: nothing starts. */
        decide_static(0, true, &obs, &s);
        assert_int_not_equal(s.kind, STEP_START_MEMBER);

        /* All started, none ready: wait, naming the first member that is not. */
        rec[1].runtime = S;
        rec[2].runtime = S;
        decide_static(3, true, &obs, &s);
        assert_int_equal(s.kind, STEP_WAIT);
        assert_string_equal(s.member, "c-0");
        assert_string_equal(s.reason, REASON_BOOTSTRAPPING);

        /*
         * Two formed the cluster, the third crash-loops before it ever joined:
         * wait for it (never replaced during the bootstrap), still bootstrapping.
         */
        obs_member formed[3] = {M("c-0", 0, true, false, false, R),
                                M("c-1", 1, true, false, false, R), SI("c-2", 2, true, true, L)};
        obs.members = formed;
        obs.etcd_listed = true;
        obs.bootstrapped = true;
        obs.leader_id = 0x100;
        decide_static(3, true, &obs, &s);
        assert_int_equal(s.kind, STEP_WAIT);
        assert_string_equal(s.member, "c-2");
        assert_non_null(strstr(s.message, "c-2"));
        assert_true(bootstrap_in_progress(&obs));

        /* Once it joined, the bootstrap is over. */
        formed[2] = (obs_member)M("c-2", 2, true, false, false, R);
        decide_static(3, true, &obs, &s);
        assert_int_equal(s.kind, STEP_CONVERGED);
        assert_false(bootstrap_in_progress(&obs));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_cases),
            cmocka_unit_test(test_certificates),
            cmocka_unit_test(test_never_breaks_quorum),
            cmocka_unit_test(test_static_bootstrap),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
