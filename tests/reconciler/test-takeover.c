/*
 * The takeover of a cluster another operator ran (spec.adopt,
 * reconciler/takeover.h), its pure halves: decide()'s rule 8b played as a
 * whole move on a simulated membership (3 old members replaced by 3 of
 * gitcd's, one change at a time, the old leader last, quorum kept at
 * every step, and a crash before or after any step resuming to the same
 * end), and takeover_judge()'s refusals.
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

#include "reconciler/decide.h"
#include "reconciler/takeover.h"
#include "util/macro.h"

#define MAXM 12

/* A simulated cluster: each member a voter or learner, ready, old or gitcd's. */
typedef struct sim {
        obs_member m[MAXM];
        char names[MAXM][16];
        size_t n;
        uint64_t leader;
        int next_ordinal;
        int steps;
        int max_voters;
} sim;

static void sim_add(sim *s, bool foreign, int ordinal, bool learner, member_runtime_state rt)
{
        obs_member *o = &s->m[s->n];
        if (foreign)
                snprintf(s->names[s->n], 16, "old-%c", (char)('a' + s->n));
        else
                snprintf(s->names[s->n], 16, "new-%d", ordinal);
        *o = (obs_member){.name = s->names[s->n],
                          .ordinal = foreign ? -1 : ordinal,
                          .recorded = !foreign,
                          .in_etcd = true,
                          .id = foreign ? 0x10 + s->n : 0x100 + (uint64_t)ordinal,
                          .learner = learner,
                          .runtime = rt,
                          .foreign = foreign};
        s->n++;
}

static void sim_old(sim *s, int n, int leader_idx)
{
        memset(s, 0, sizeof(*s));
        for (int i = 0; i < n; i++)
                sim_add(s, true, -1, false, MEMBER_READY);
        s->leader = s->m[leader_idx].id;
}

static obs_member *sim_find(sim *s, const char *name, uint64_t id)
{
        for (size_t i = 0; i < s->n; i++)
                if ((name && streq(s->m[i].name, name)) || (!name && s->m[i].id == id))
                        return &s->m[i];
        return NULL;
}

static void sim_observation(sim *s, observation *obs)
{
        *obs = (observation){.members = s->m,
                             .n = s->n,
                             .etcd_listed = true,
                             .leader_id = s->leader,
                             .bootstrapped = true,
                             .next_ordinal = s->next_ordinal};
}

/* Apply step st as etcd and the target would; false when it was a wait or converged. */
static bool sim_apply(sim *s, const step *st)
{
        obs_member *m;
        switch (st->kind) {
        case STEP_ADD_LEARNER:
                sim_add(s, false, st->ordinal, true, MEMBER_ABSENT);
                s->m[s->n - 1].unstarted = true; /* listed without a name until it starts */
                s->next_ordinal = st->ordinal + 1;
                return true;
        case STEP_START_MEMBER:
                m = sim_find(s, st->member, 0);
                assert_non_null(m);
                m->runtime = MEMBER_READY;
                m->unstarted = false;
                return true;
        case STEP_PROMOTE:
                m = sim_find(s, NULL, st->member_id);
                assert_non_null(m);
                assert_true(m->learner);
                m->learner = false;
                return true;
        case STEP_MOVE_LEADER:
                m = sim_find(s, NULL, st->member_id);
                assert_non_null(m);
                assert_false(m->foreign); /* leadership goes to a member of gitcd's */
                s->leader = st->member_id;
                return true;
        case STEP_REMOVE_MEMBER: {
                m = sim_find(s, NULL, st->member_id);
                assert_non_null(m);
                assert_true(m->foreign); /* only old members are removed during a takeover */
                assert_true(s->leader != m->id); /* never the leader */
                size_t i = (size_t)(m - s->m);
                memmove(&s->m[i], &s->m[i + 1], (s->n - i - 1) * sizeof(obs_member));
                memmove(s->names[i], s->names[i + 1], (s->n - i - 1) * 16);
                s->n--;
                for (size_t j = 0; j < s->n; j++)
                        s->m[j].name = s->names[j];
                return true;
        }
        default:
                return false;
        }
}

/* Quorum: healthy voters form a majority, and there is at most one learner. */
static void sim_check(sim *s)
{
        int voters = 0, healthy = 0, learners = 0;
        for (size_t i = 0; i < s->n; i++) {
                if (s->m[i].learner)
                        learners++;
                else {
                        voters++;
                        healthy += s->m[i].runtime == MEMBER_READY;
                }
        }
        assert_true(learners <= 1);
        assert_true(healthy >= voters / 2 + 1);
        s->max_voters = MAX(s->max_voters, voters);
}

/*
 * Run the move to its end. crash_at: the step (counted from 0) that a
 * crash interrupts, once: before it took effect (the step is lost: the
 * next pass decides again from the same world) or after.
 */
static void run(sim *s, int replicas, int crash_at, bool after)
{
        desired want = {.replicas = replicas, .takeover = true};
        for (int pass = 0; pass < 200; pass++) {
                observation obs;
                step st;
                sim_observation(s, &obs);
                decide(&want, &obs, &st);
                bool acted = false;
                if (s->steps == crash_at && !after && st.kind != STEP_CONVERGED) {
                        s->steps++; /* killed before the step took effect */
                        step_release(&st);
                        continue;
                }
                acted = sim_apply(s, &st);
                if (acted)
                        s->steps++;
                sim_check(s);
                bool done = st.kind == STEP_CONVERGED;
                if (!acted && !done) {
                        /* a wait: nothing of gitcd's is in flight in this simulation */
                        fail_msg("waiting with nothing in flight: %s", st.message);
                }
                step_release(&st);
                if (done)
                        return;
        }
        fail_msg("the takeover did not converge");
}

static void assert_only_gitcd(const sim *s, int n)
{
        assert_int_equal(s->n, n);
        for (size_t i = 0; i < s->n; i++) {
                assert_false(s->m[i].foreign);
                assert_false(s->m[i].learner);
        }
}

static void test_three_by_three(void **state)
{
        (void)state;
        sim s;
        sim_old(&s, 3, 0);
        desired want = {.replicas = 3, .takeover = true};
        observation obs;
        step st;
        /* first a member of gitcd's joins: 3 → 4 */
        sim_observation(&s, &obs);
        decide(&want, &obs, &st);
        assert_int_equal(st.kind, STEP_ADD_LEARNER);
        assert_string_equal(st.reason, REASON_TAKING_OVER);
        step_release(&st);
        run(&s, 3, -1, false);
        assert_only_gitcd(&s, 3);
        assert_int_equal(s.max_voters, 4); /* never more than one extra member */
        /* 3 × (add, start, promote) + 3 removals + the old leader's move */
        assert_int_equal(s.steps, 13);
}

static void test_leader_last(void **state)
{
        (void)state;
        sim s;
        sim_old(&s, 3, 1); /* old-b leads */
        desired want = {.replicas = 3, .takeover = true};
        uint64_t old_leader = s.leader;
        int removed_before_leader = 0;
        for (int pass = 0; pass < 100; pass++) {
                observation obs;
                step st;
                sim_observation(&s, &obs);
                decide(&want, &obs, &st);
                if (st.kind == STEP_REMOVE_MEMBER && st.member_id != old_leader)
                        removed_before_leader++;
                if (st.kind == STEP_MOVE_LEADER)
                        assert_int_equal(removed_before_leader, 2); /* the followers went first */
                bool done = st.kind == STEP_CONVERGED;
                (void)sim_apply(&s, &st);
                step_release(&st);
                if (done)
                        break;
        }
        assert_only_gitcd(&s, 3);
        assert_true(s.leader != old_leader);
}

/* A crash before or after any step resumes to the same end. */
static void test_crash_at_each_step(void **state)
{
        (void)state;
        for (int at = 0; at < 13; at++)
                for (int after = 0; after < 2; after++) {
                        sim s;
                        sim_old(&s, 3, 2);
                        run(&s, 3, at, after);
                        assert_only_gitcd(&s, 3);
                }
}

static void test_other_sizes(void **state)
{
        (void)state;
        sim s;
        sim_old(&s, 5, 0); /* five old members, three wanted: old ones go first */
        run(&s, 3, -1, false);
        assert_only_gitcd(&s, 3);
        assert_true(s.max_voters <= 5);
        sim_old(&s, 1, 0); /* one old member, three wanted */
        run(&s, 3, -1, false);
        assert_only_gitcd(&s, 3);
}

static void test_waits(void **state)
{
        (void)state;
        sim s;
        sim_old(&s, 3, 0);
        s.m[1].runtime = MEMBER_STARTING; /* an old member does not answer */
        desired want = {.replicas = 3, .takeover = true};
        observation obs;
        step st;
        sim_observation(&s, &obs);
        decide(&want, &obs, &st);
        assert_int_equal(st.kind, STEP_WAIT);
        assert_string_equal(st.reason, REASON_TAKING_OVER);
        step_release(&st);

        /* nothing answers: a wait, never a seed */
        obs = (observation){.etcd_listed = false, .bootstrapped = true};
        decide(&want, &obs, &st);
        assert_int_equal(st.kind, STEP_WAIT);
        step_release(&st);
        obs = (observation){0};
        decide(&want, &obs, &st);
        assert_int_equal(st.kind, STEP_WAIT);
        step_release(&st);
}

static void test_judge(void **state)
{
        (void)state;
        takeover_fact ok[3] = {
            {1, "a", false, true, "3.5.16", 7, 0},
            {2, "b", false, true, "3.5.16", 7, 0},
            {3, "c", false, true, "3.5.16", 7, 0},
        };
        char *why = NULL;
        assert_int_equal(takeover_judge(ok, 3, "3.5.16", &why), 0);
        assert_null(why);

        static const struct {
                size_t idx;
                takeover_fact f;
                const char *says;
        } bad[] = {
            {1, {2, "b", true, true, "3.5.16", 7, 0}, "is a learner"},
            {1, {2, "", false, false, NULL, 0, 0}, "never started"},
            {2, {3, "c", false, false, NULL, 0, 0}, "does not answer"},
            {0, {1, "a", false, true, "3.5.16", 7, 1}, "alarms"},
            {2, {3, "c", false, true, "3.5.30", 7, 0}, "runs etcd 3.5.30 and the spec says 3.5.16"},
            {2, {3, "c", false, true, "3.5.16", 8, 0}, "another cluster"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                takeover_fact f[3];
                memcpy(f, ok, sizeof(f));
                f[bad[i].idx] = bad[i].f;
                why = NULL;
                assert_int_equal(takeover_judge(f, 3, "3.5.16", &why), -EPERM);
                assert_non_null(why);
                if (!strstr(why, bad[i].says))
                        fail_msg("case %zu: \"%s\" does not say \"%s\"", i, why, bad[i].says);
                free(why);
        }
        why = NULL;
        assert_int_equal(takeover_judge(NULL, 0, "3.5.16", &why), -EPERM);
        free(why);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_three_by_three),
            cmocka_unit_test(test_leader_last),
            cmocka_unit_test(test_crash_at_each_step),
            cmocka_unit_test(test_other_sizes),
            cmocka_unit_test(test_waits),
            cmocka_unit_test(test_judge),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
