/*
 * The rules of the consistency check (reconciler/proof.h), table by table:
 * the revision compared at, the majority rule (a group holding a quorum of
 * the voters, or nobody), when a check is due and when a proof is fresh,
 * the freeze gate over every kind of step, and the DataConsistent
 * condition. Pure functions: no world, no clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "reconciler/proof.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define A 0xaaaaaaaau
#define B 0xbbbbbbbbu
#define C 0xccccccccu

static void test_revision(void **state)
{
        (void)state;
        proof_answer a[] = {{.name = "m-0", .revision = 1207},
                            {.name = "m-1", .revision = 1190},
                            {.name = "m-2", .revision = 1300}};
        /* the smallest: every member applied it, none answers "future revision" */
        assert_int_equal(proof_revision(a, 3), 1190);
        assert_int_equal(proof_revision(a, 1), 1207);
        a[2].revision = 0; /* a member that reported none: nothing to compare at */
        assert_int_equal(proof_revision(a, 3), 0);
        assert_int_equal(proof_revision(a, 0), 0);
}

typedef struct judge_case {
        const char *what;
        int voters;
        uint32_t hashes[5];
        size_t n;
        proof_verdict verdict;
        const char *minority;
        const char *majority;
} judge_case;

static void test_majority(void **state)
{
        (void)state;
        static const judge_case cases[] = {
            {"three agree", 3, {A, A, A}, 3, PROOF_AGREE, NULL, "m-0,m-1,m-2"},
            {"one of three differs", 3, {A, B, A}, 3, PROOF_MINORITY, "m-1", "m-0,m-2"},
            {"the leader (compared last) differs",
             3,
             {A, A, B},
             3,
             PROOF_MINORITY,
             "m-2",
             "m-0,m-1"},
            {"two of five differ, alike",
             5,
             {A, B, A, B, A},
             5,
             PROOF_MINORITY,
             "m-1,m-3",
             "m-0,m-2,m-4"},
            {"two of five differ, each its own way",
             5,
             {A, B, A, C, A},
             5,
             PROOF_MINORITY,
             "m-1,m-3",
             "m-0,m-2,m-4"},
            {"1-1 of two", 2, {A, B}, 2, PROOF_NO_MAJORITY, "m-0,m-1", NULL},
            {"three different hashes", 3, {A, B, C}, 3, PROOF_NO_MAJORITY, "m-0,m-1,m-2", NULL},
            {"2-2 of four", 4, {A, A, B, B}, 4, PROOF_NO_MAJORITY, "m-0,m-1,m-2,m-3", NULL},
            {"three of four", 4, {A, A, B, A}, 4, PROOF_MINORITY, "m-2", "m-0,m-1,m-3"},
            /* before a replacement: the two running of three voters */
            {"two running agree", 3, {A, A}, 2, PROOF_AGREE, NULL, "m-0,m-1"},
            {"two running differ", 3, {A, B}, 2, PROOF_NO_MAJORITY, "m-0,m-1", NULL},
            /* three running of five voters: 2 is no quorum of 5 */
            {"no quorum among the running",
             5,
             {A, A, B},
             3,
             PROOF_NO_MAJORITY,
             "m-0,m-1,m-2",
             NULL},
            {"one member", 1, {A}, 1, PROOF_AGREE, NULL, "m-0"},
        };
        static const char *const names[] = {"m-0", "m-1", "m-2", "m-3", "m-4"};
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const judge_case *k = &cases[i];
                proof_answer a[5] = {0};
                for (size_t j = 0; j < k->n; j++)
                        a[j] = (proof_answer){.name = names[j],
                                              .revision = 50,
                                              .hashed = true,
                                              .hash = k->hashes[j],
                                              .compact_revision = 20};
                proof_result r;
                proof_judge(a, k->n, k->voters, 50, &r);
                print_message("%s: %s\n", k->what, r.message);
                assert_int_equal(r.verdict, k->verdict);
                assert_int_equal(r.revision, 50);
                assert_int_equal(r.compact_revision, 20);
                if (k->minority)
                        assert_string_equal(r.minority, k->minority);
                else
                        assert_null(r.minority);
                if (k->majority)
                        assert_string_equal(r.majority, k->majority);
                else
                        assert_null(r.majority);
                assert_non_null(strstr(r.hashes, "\"m-0\""));
                proof_result_release(&r);
        }
}

static void test_inconclusive(void **state)
{
        (void)state;
        proof_answer a[] = {
            {.name = "m-0", .revision = 9, .hashed = true, .hash = A, .compact_revision = 5},
            {.name = "m-1", .revision = 9, .hashed = true, .hash = B, .compact_revision = 7},
            {.name = "m-2", .revision = 9, .hashed = true, .hash = A, .compact_revision = 5}};
        proof_result r;
        /* a compaction between two calls: the hashes cover different history, nothing shown */
        proof_judge(a, 3, 3, 9, &r);
        assert_int_equal(r.verdict, PROOF_INCONCLUSIVE);
        assert_non_null(strstr(r.message, "different compactions"));
        assert_null(r.minority);
        proof_result_release(&r);
        a[1].compact_revision = 5;
        a[1].hashed = false;
        proof_judge(a, 3, 3, 9, &r);
        assert_int_equal(r.verdict, PROOF_INCONCLUSIVE);
        assert_non_null(strstr(r.message, "m-1 did not answer"));
        proof_result_release(&r);
        proof_judge(a, 0, 3, 9, &r);
        assert_int_equal(r.verdict, PROOF_INCONCLUSIVE);
        proof_result_release(&r);
        assert_string_equal(proof_verdict_name(PROOF_NO_MAJORITY), "no-majority");
}

static void test_when_due(void **state)
{
        (void)state;
        const int64_t T = 1700000000000, I = 300000;
        assert_int_equal(proof_next_check_ms(NULL, I), 0); /* never checked: now */
        state_consistency row = {.checked_ms = T, .attempt_ms = T, .verdict = "agree"};
        assert_int_equal(proof_next_check_ms(&row, I), T + I);
        row.due = true; /* a member (re)started: at the next chance */
        assert_int_equal(proof_next_check_ms(&row, I), 0);
        row.due = false;
        /* an attempt that did not conclude: again after PROOF_RETRY_MS, not at once */
        row.attempt_ms = T + 1000;
        row.attempt_error = "m-1 did not answer";
        assert_int_equal(proof_next_check_ms(&row, I), T + I);
        row.due = true;
        assert_int_equal(proof_next_check_ms(&row, I), T + 1000 + PROOF_RETRY_MS);
        row.due = false;
        /* a short interval bounds the retry too */
        assert_int_equal(proof_next_check_ms(&row, 2000), T + 1000 + 2000);

        /* fresh: agreed within a minute, nothing restarted since, not frozen */
        state_consistency f = {.checked_ms = T, .verdict = "agree"};
        assert_true(proof_fresh(&f, T + PROOF_FRESH_MS));
        assert_false(proof_fresh(&f, T + PROOF_FRESH_MS + 1));
        f.due = true;
        assert_false(proof_fresh(&f, T));
        f.due = false;
        f.verdict = "minority";
        assert_false(proof_fresh(&f, T));
        assert_false(proof_fresh(NULL, T));

        step s = {.kind = STEP_ADD_LEARNER};
        assert_true(proof_step_copies(&s));
        s = (step){.kind = STEP_REMOVE_MEMBER, .reason = REASON_REPLACING_MEMBER};
        assert_true(proof_step_copies(&s));
        s = (step){.kind = STEP_REMOVE_MEMBER, .reason = REASON_SCALING_DOWN};
        assert_false(proof_step_copies(&s));
        s = (step){.kind = STEP_RESTART_MEMBER};
        assert_false(proof_step_copies(&s));
}

/* Three voters m-0..m-2 (ids 1..3), m-1 in the minority, m-2 leading, and a stopped one. */
static obs_member members[5];
static observation world(uint64_t leader)
{
        static const char *const names[] = {"m-0", "m-1", "m-2", "m-3", "m-4"};
        for (int i = 0; i < 3; i++)
                members[i] = (obs_member){.name = names[i],
                                          .ordinal = i,
                                          .recorded = true,
                                          .in_etcd = true,
                                          .id = (uint64_t)i + 1,
                                          .runtime = MEMBER_READY};
        members[3] = (obs_member){.name = names[3],
                                  .ordinal = 3,
                                  .recorded = true,
                                  .in_etcd = true,
                                  .id = 4,
                                  .learner = true,
                                  .unstarted = true,
                                  .runtime = MEMBER_ABSENT};
        return (observation){.members = members, .n = 3, .etcd_listed = true, .leader_id = leader};
}

static step mk(step_kind kind, const char *member, uint64_t id, const char *reason)
{
        step s = {.kind = kind, .member = member, .member_id = id, .reason = reason};
        s.message = xasprintf("%s %s", step_kind_name(kind), member ? member : "");
        return s;
}

/* *s becomes a new step, its message freed first. */
static void remk(step *s, step_kind kind, const char *member, uint64_t id, const char *reason)
{
        step_release(s);
        *s = mk(kind, member, id, reason);
}

static void test_gate(void **state)
{
        (void)state;
        observation obs = world(3);
        proof_freeze off = {0};
        step s = mk(STEP_ADD_LEARNER, NULL, 0, REASON_SCALING_UP);
        assert_true(proof_gate(&off, &obs, &s)); /* not frozen: everything goes */
        assert_int_equal(s.kind, STEP_ADD_LEARNER);

        proof_freeze f = {.frozen = true, .cause = "hashes", .minority = "m-1"};
        struct {
                step s;
                bool goes;
        } cases[] = {
            /* voluntary changes wait for a person */
            {mk(STEP_ADD_LEARNER, NULL, 0, REASON_SCALING_UP), false},
            {mk(STEP_REMOVE_MEMBER, "m-2", 3, REASON_SCALING_DOWN), false},
            {mk(STEP_REMOVE_MEMBER, "m-1", 2, REASON_REPLACING_MEMBER), false},
            {mk(STEP_RESTART_MEMBER, "m-0", 1, REASON_UPGRADING), false},
            {mk(STEP_MOVE_LEADER, "m-0", 1, REASON_UPGRADING), false},
            {mk(STEP_STOP_MEMBER, "m-0", 1, REASON_PAUSED), false},
            {mk(STEP_DELETE_MEMBER, "m-1", 2, REASON_SCALING_DOWN), false},
            {mk(STEP_PROMOTE, "m-3", 4, REASON_SCALING_UP), false},
            /* a new member would copy the leader's data: held */
            {mk(STEP_START_MEMBER, "m-3", 4, REASON_SCALING_UP), false},
            /* what moves no data and is no one's choice goes */
            {mk(STEP_START_MEMBER, "m-0", 1, REASON_RECOVERING), true},
            {mk(STEP_RENEW_CERTS, "m-0", 0, REASON_RENEWING_CERTS), true},
            {mk(STEP_WAIT, NULL, 0, REASON_QUORUM_LOST), true},
            {mk(STEP_CONVERGED, NULL, 0, REASON_QUORUM_HEALTHY), true},
        };
        obs.n = 4;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                step t = cases[i].s;
                t.message = xstrdup(cases[i].s.message); /* the gate rewrites t's own */
                bool goes = proof_gate(&f, &obs, &t);
                print_message("%s -> %s\n", cases[i].s.message, t.message);
                assert_int_equal(goes, cases[i].goes);
                if (goes)
                        assert_int_equal(t.kind, cases[i].s.kind);
                else {
                        assert_int_equal(t.kind, STEP_WAIT);
                        assert_string_equal(t.reason, REASON_FROZEN);
                        assert_non_null(strstr(t.message, cases[i].s.message));
                }
                step_release(&t);
                step_release(&cases[i].s);
        }
        step_release(&s);
}

static void test_gate_repair(void **state)
{
        (void)state;
        /* replacing m-1, which leads: decide moves leadership to the lowest ordinal */
        observation obs = world(2);
        proof_freeze f = {
            .frozen = true, .cause = "hashes", .minority = "m-1", .repair_member = "m-1"};
        step s = mk(STEP_MOVE_LEADER, "m-0", 1, REASON_REPLACING_MEMBER);
        assert_true(proof_gate(&f, &obs, &s));
        assert_string_equal(s.member, "m-0");

        /* five members, two in the minority: never hand leadership to the other one */
        static obs_member five[5];
        for (int i = 0; i < 5; i++)
                five[i] =
                    (obs_member){.name = (const char *[]){"m-0", "m-1", "m-2", "m-3", "m-4"}[i],
                                 .ordinal = i,
                                 .recorded = true,
                                 .in_etcd = true,
                                 .id = (uint64_t)i + 1,
                                 .runtime = MEMBER_READY};
        observation big = {.members = five, .n = 5, .etcd_listed = true, .leader_id = 1};
        proof_freeze f5 = {
            .frozen = true, .cause = "hashes", .minority = "m-0,m-1", .repair_member = "m-0"};
        remk(&s, STEP_MOVE_LEADER, "m-1", 2, REASON_REPLACING_MEMBER);
        assert_true(proof_gate(&f5, &big, &s));
        assert_int_equal(s.kind, STEP_MOVE_LEADER);
        assert_string_equal(s.member, "m-2");
        assert_int_equal(s.member_id, 3);

        /* the removal of the member replaced goes, once leadership is in the majority */
        big.leader_id = 2; /* m-1, the other of the minority, leads */
        remk(&s, STEP_REMOVE_MEMBER, "m-0", 1, REASON_REPLACING_MEMBER);
        assert_true(proof_gate(&f5, &big, &s));
        assert_int_equal(s.kind, STEP_MOVE_LEADER);
        assert_string_equal(s.member, "m-2");
        big.leader_id = 3;
        remk(&s, STEP_REMOVE_MEMBER, "m-0", 1, REASON_REPLACING_MEMBER);
        assert_true(proof_gate(&f5, &big, &s));
        assert_int_equal(s.kind, STEP_REMOVE_MEMBER);
        /* another member's removal is still held */
        remk(&s, STEP_REMOVE_MEMBER, "m-4", 5, REASON_SCALING_DOWN);
        assert_false(proof_gate(&f5, &big, &s));

        /* m-1 gone from etcd: its deletion, then one learner in its place */
        observation gone = world(3);
        members[1].in_etcd = false;
        members[1].id = 0;
        remk(&s, STEP_DELETE_MEMBER, "m-1", 0, REASON_SCALING_DOWN);
        assert_true(proof_gate(&f, &gone, &s));
        gone.n = 3;
        members[1] = members[2]; /* the record deleted: m-2 moves up */
        gone.n = 2;
        remk(&s, STEP_ADD_LEARNER, NULL, 0, REASON_SCALING_UP);
        assert_true(proof_gate(&f, &gone, &s));
        assert_int_equal(s.kind, STEP_ADD_LEARNER);
        /* the replacement joins: started and promoted; a second learner waits */
        proof_freeze g = f;
        g.repair_replacement = "m-3";
        members[2] = (obs_member){.name = "m-3",
                                  .ordinal = 3,
                                  .recorded = true,
                                  .in_etcd = true,
                                  .id = 4,
                                  .learner = true,
                                  .unstarted = true,
                                  .runtime = MEMBER_ABSENT};
        gone.n = 3;
        remk(&s, STEP_START_MEMBER, "m-3", 4, REASON_SCALING_UP);
        assert_true(proof_gate(&g, &gone, &s));
        remk(&s, STEP_PROMOTE, "m-3", 4, REASON_SCALING_UP);
        assert_true(proof_gate(&g, &gone, &s));
        remk(&s, STEP_ADD_LEARNER, NULL, 0, REASON_SCALING_UP);
        assert_false(proof_gate(&g, &gone, &s));
        /* a replacement whose MemberAdd failed (no record left) is added again */
        gone.n = 2;
        remk(&s, STEP_ADD_LEARNER, NULL, 0, REASON_SCALING_UP);
        assert_true(proof_gate(&g, &gone, &s));

        /* while a minority member leads, the learner waits for leadership to move */
        observation led = world(2);
        members[1].replace = false;
        proof_freeze h = {
            .frozen = true, .cause = "hashes", .minority = "m-1,m-4", .repair_member = "m-4"};
        remk(&s, STEP_ADD_LEARNER, NULL, 0, REASON_SCALING_UP);
        assert_true(proof_gate(&h, &led, &s));
        assert_int_equal(s.kind, STEP_MOVE_LEADER);
        assert_string_equal(s.member, "m-0");
        step_release(&s);
}

static void test_condition(void **state)
{
        (void)state;
        proof_condition c;
        proof_check_condition(NULL, &c);
        assert_string_equal(c.status, "Unknown");
        assert_string_equal(c.reason, "NotChecked");
        free(c.message);
        state_consistency row = {
            .checked_ms = 5,
            .revision = 1207,
            .verdict = "agree",
            .hashes = "{\"m-0\":\"aaaaaaaa\",\"m-1\":\"aaaaaaaa\",\"m-2\":\"aaaaaaaa\"}"};
        proof_check_condition(&row, &c);
        assert_string_equal(c.status, "True");
        assert_string_equal(c.reason, "Agree");
        assert_string_equal(c.message, "3 members hold the same data at revision 1207");
        free(c.message);
        row.frozen_ms = 9;
        row.frozen_cause = "hashes";
        row.frozen_message = "data of m-1 differs";
        proof_check_condition(&row, &c);
        assert_string_equal(c.status, "False");
        assert_string_equal(c.reason, "Mismatch");
        assert_string_equal(c.message, "data of m-1 differs");
        free(c.message);
        row.frozen_cause = "alarm";
        proof_check_condition(&row, &c);
        assert_string_equal(c.reason, "CorruptAlarm");
        free(c.message);
        row.frozen_cause = "no-majority";
        proof_check_condition(&row, &c);
        assert_string_equal(c.reason, "NoMajority");
        free(c.message);
        assert_true(proof_listed("m-0,m-10,m-1", "m-1"));
        assert_false(proof_listed("m-0,m-10", "m-1"));
        assert_false(proof_listed(NULL, "m-1"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_revision),     cmocka_unit_test(test_majority),
            cmocka_unit_test(test_inconclusive), cmocka_unit_test(test_when_due),
            cmocka_unit_test(test_gate),         cmocka_unit_test(test_gate_repair),
            cmocka_unit_test(test_condition),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
