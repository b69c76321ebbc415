/*
 * What maintenance is due and the order of a defragmentation run
 * (maintenance/due.h), with a fake clock and hand-made observations: the
 * schedule (caught up once, never for slots before the cluster existed),
 * the free-space and quota thresholds and their one-hour re-trigger pause,
 * NOSPACE recovery (compact, followers, leader, disarm) only when the spec
 * allows it, followers first (the most fragmented first) and the leader
 * last after leadership moved, the bounded pause for apply lag between
 * members,
 * no step while a member is unhealthy or a CORRUPT alarm is raised, a
 * resumed run skipping what its record says is done; the alarm
 * conditions; and the run records in a real SQLite store.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "maintenance/due.h"
#include "state/maintenance.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define MIN_MS  (60 * 1000LL)
#define HOUR_MS (60 * MIN_MS)
#define MiB     (INT64_C(1) << 20)

static int64_t at(int y, int mo, int d, int h, int mi)
{
        struct tm tm = {
            .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi};
        return (int64_t)timegm(&tm) * 1000;
}

/* Three healthy members m0, m1, m2 (ids 10, 11, 12) led by lead (an id), 10 MiB each. */
static void members3(maint_member m[3], uint64_t lead)
{
        static const char *const names[] = {"main-0", "main-1", "main-2"};
        for (int i = 0; i < 3; i++)
                m[i] = (maint_member){.name = names[i],
                                      .id = 10 + (uint64_t)i,
                                      .reachable = true,
                                      .leader = lead,
                                      .db_size = 10 * MiB,
                                      .db_size_in_use = 9 * MiB};
}

/* A run record built by hand (the fields maint_decide reads). */
static state_maint_run *run_new(const char *trigger, const char *result, const char *done,
                                int64_t started, int64_t slot)
{
        state_maint_run *r = XNEW(state_maint_run);
        r->id = 1;
        r->cluster = xstrdup("default/main");
        r->trigger = xstrdup(trigger);
        r->result = xstrdup(result);
        r->members_done = xstrdup(done);
        r->started_ms = started;
        r->finished_ms = streq(result, "running") ? 0 : started + MIN_MS;
        r->slot_ms = slot;
        return r;
}

static maint_action decide(const maint_view *v)
{
        maint_action a;
        maint_decide(v, &a);
        return a;
}

static void test_schedule(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .schedule = "0 3 * * *"};
        maint_member m[3];
        members3(m, 10);
        state_maint_run_list none = {0};
        int64_t now = at(2026, 11, 23, 14, 5);
        maint_view v = {.defrag = &d,
                        .members = m,
                        .n = 3,
                        .runs = &none,
                        .now_ms = now,
                        .created_ms = at(2026, 11, 1, 0, 0)};
        int64_t slot, next;
        size_t who;
        /* today's 03:00 is due, once */
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_SCHEDULE);
        assert_int_equal(slot, at(2026, 11, 23, 3, 0));
        assert_int_equal(next, at(2026, 11, 24, 3, 0));
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_START);
        assert_int_equal(a.trigger, MAINT_TRIGGER_SCHEDULE);
        assert_int_equal(a.slot_ms, at(2026, 11, 23, 3, 0));
        maint_action_release(&a);

        /* a run for that slot (even a failed one) covers it: the next is tomorrow */
        state_maint_run *r = run_new("schedule", "failed", "", slot, slot);
        state_maint_run_list l = {.items = &r, .n = 1};
        v.runs = &l;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_NONE);
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        assert_int_equal(a.next_ms, at(2026, 11, 24, 3, 0));
        maint_action_release(&a);
        /* three days later: only the latest slot is due */
        v.now_ms = at(2026, 11, 26, 12, 0);
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_SCHEDULE);
        assert_int_equal(slot, at(2026, 11, 26, 3, 0));
        state_maint_run_free(r);

        /* a cluster created after today's slot waits for tomorrow's */
        v.runs = &none;
        v.now_ms = now;
        v.created_ms = at(2026, 11, 23, 10, 0);
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_NONE);
        /* defrag disabled: nothing, ever */
        d.enabled = false;
        v.created_ms = 0;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_NONE);
}

static void test_thresholds(void **unused)
{
        (void)unused;
        defrag_spec d = {
            .enabled = true, .free_space_above = "100Mi", .free_space_above_bytes = 100 * MiB};
        maint_member m[3];
        members3(m, 10);
        state_maint_run_list none = {0};
        int64_t now = at(2026, 11, 23, 14, 5);
        maint_view v = {.defrag = &d, .members = m, .n = 3, .runs = &none, .now_ms = now};
        int64_t slot, next;
        size_t who;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_NONE);
        /* one member with 150 MiB free: due, naming it */
        m[2].db_size = 400 * MiB;
        m[2].db_size_in_use = 250 * MiB;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_FREE_SPACE);
        assert_int_equal(who, 2);
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_START);
        assert_non_null(strstr(a.message, "main-2 has 150.0 MiB free"));
        maint_action_release(&a);
        /* an unreachable member's old figures do not count */
        m[2].reachable = false;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_NONE);
        m[2].reachable = true;

        /* within an hour of the last threshold run: not again */
        state_maint_run *r =
            run_new("free-space", "succeeded", "main-1,main-2,main-0", now - 30 * MIN_MS, 0);
        state_maint_run_list l = {.items = &r, .n = 1};
        v.runs = &l;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_NONE);
        v.now_ms = now + HOUR_MS;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_FREE_SPACE);
        state_maint_run_free(r);

        /* quota usage: dbSize above 80% of a 100 MiB quota (the spec's, else etcd's 2 GiB) */
        d = (defrag_spec){.enabled = true, .quota_usage_above_percent = 80};
        members3(m, 10);
        v.runs = &none;
        v.quota_bytes = 100 * MiB;
        m[0].db_size = 81 * MiB;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_QUOTA);
        assert_int_equal(who, 0);
        m[0].db_size = 80 * MiB;
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_NONE);
        v.quota_bytes = 0;
        m[0].db_size = 1700 * MiB; /* 83% of 2 GiB */
        assert_int_equal(maint_due(&v, &slot, &next, &who), MAINT_TRIGGER_QUOTA);
}

/* Drive a run to its end as a reconciler would, recording each step's effect. */
static char *drive(maint_view *v, maint_member *m, state_maint_run *run, bool *alarm,
                   char ***ret_steps)
{
        static char *steps[32];
        size_t n = 0;
        for (int guard = 0; guard < 20; guard++) {
                v->nospace = *alarm;
                maint_action a = decide(v);
                steps[n++] = xasprintf(
                    "%s%s%s", maint_action_name(a.kind),
                    a.kind == MAINT_DEFRAG || a.kind == MAINT_MOVE_LEADER ? " " : "",
                    a.kind == MAINT_DEFRAG || a.kind == MAINT_MOVE_LEADER ? m[a.member].name : "");
                switch (a.kind) {
                case MAINT_COMPACT:
                        run->compact_revision = 42;
                        break;
                case MAINT_DEFRAG: {
                        char *d = isempty(run->members_done)
                                      ? xstrdup(m[a.member].name)
                                      : xasprintf("%s,%s", run->members_done, m[a.member].name);
                        free(run->members_done);
                        run->members_done = d;
                        break;
                }
                case MAINT_MOVE_LEADER:
                        for (size_t i = 0; i < v->n; i++)
                                m[i].leader = a.to_id;
                        break;
                case MAINT_DISARM:
                        *alarm = false;
                        break;
                default:
                        break;
                }
                maint_action_kind k = a.kind;
                maint_action_release(&a);
                if (k == MAINT_FINISH || k == MAINT_WAIT || k == MAINT_IDLE)
                        break;
        }
        steps[n] = NULL;
        *ret_steps = steps;
        return run->members_done;
}

static void steps_equal(char **steps, const char *const *want)
{
        size_t i = 0;
        for (; want[i]; i++) {
                assert_non_null(steps[i]);
                assert_string_equal(steps[i], want[i]);
        }
        assert_null(steps[i]);
        for (i = 0; steps[i]; i++)
                free(steps[i]);
}

static void test_order_leader_last(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .schedule = "0 3 * * *"};
        maint_member m[3];
        members3(m, 10); /* main-0 leads */
        state_maint_run *run = run_new("schedule", "running", "", 0, 0);
        state_maint_run_list l = {.items = &run, .n = 1};
        maint_view v = {.defrag = &d, .members = m, .n = 3, .runs = &l, .now_ms = HOUR_MS};
        bool alarm = false;
        char **steps;
        drive(&v, m, run, &alarm, &steps);
        steps_equal(steps,
                    (const char *const[]){"defrag main-1", "defrag main-2", "move-leader main-0",
                                          "defrag main-0", "finish", NULL});
        assert_string_equal(run->members_done, "main-1,main-2,main-0");
        state_maint_run_free(run);

        /* resumed after a crash with main-2 done; main-1 leads now */
        members3(m, 11);
        run = run_new("free-space", "running", "main-2", 0, 0);
        l.items = &run;
        drive(&v, m, run, &alarm, &steps);
        steps_equal(steps, (const char *const[]){"defrag main-0", "move-leader main-1",
                                                 "defrag main-1", "finish", NULL});
        state_maint_run_free(run);

        /* a single member is defragmented as it is */
        members3(m, 10);
        v.n = 1;
        run = run_new("schedule", "running", "", 0, 0);
        l.items = &run;
        drive(&v, m, run, &alarm, &steps);
        steps_equal(steps, (const char *const[]){"defrag main-0", "finish", NULL});
        state_maint_run_free(run);
}

/*
 * The most fragmented follower first (dbSize - dbSizeInUse), member order
 * among equals, the leader last whatever its free space; a member whose
 * free space grows during the run is taken in its new place.
 */
static void test_order_most_fragmented(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .free_space_above = "1Mi", .free_space_above_bytes = MiB};
        maint_member m[5];
        static const char *const names[] = {"a", "b", "c", "d", "e"};
        /* free MiB per member; "c" (id 12) leads and has the most */
        static const int64_t free_mib[] = {2, 30, 900, 30, 400};
        for (int i = 0; i < 5; i++)
                m[i] = (maint_member){.name = names[i],
                                      .id = 10 + (uint64_t)i,
                                      .reachable = true,
                                      .leader = 12,
                                      .db_size = 1000 * MiB,
                                      .db_size_in_use = (1000 - free_mib[i]) * MiB};
        state_maint_run *run = run_new("free-space", "running", "", 0, 0);
        state_maint_run_list l = {.items = &run, .n = 1};
        maint_view v = {.defrag = &d, .members = m, .n = 5, .runs = &l, .now_ms = HOUR_MS};
        bool alarm = false;
        char **steps;
        drive(&v, m, run, &alarm, &steps);
        steps_equal(steps, (const char *const[]){"defrag e", "defrag b", "defrag d", "defrag a",
                                                 "move-leader c", "defrag c", "finish", NULL});
        state_maint_run_free(run);

        /* the message says why this one */
        run = run_new("free-space", "running", "e", 0, 0);
        l.items = &run;
        for (int i = 0; i < 5; i++)
                m[i].leader = 12;
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_DEFRAG);
        assert_string_equal(m[a.member].name, "b");
        assert_string_equal(a.message, "defragmenting b (a follower, 30.0 MiB free)");
        maint_action_release(&a);
        /* d's free space grew since: it goes before b now */
        m[3].db_size_in_use = 500 * MiB;
        a = decide(&v);
        assert_string_equal(m[a.member].name, "d");
        maint_action_release(&a);
        state_maint_run_free(run);
}

/*
 * Between members the run waits while a member is more than
 * MAINT_APPLY_LAG_NORMAL entries behind in applying, then goes on after
 * MAINT_APPLY_LAG_WAIT_MS with a message for the log; a lag within normal,
 * an unreachable member's or a member that reports no applied index never
 * holds it.
 */
static void test_apply_lag_pause(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .schedule = "0 3 * * *"};
        maint_member m[3];
        members3(m, 10);
        for (int i = 0; i < 3; i++) {
                m[i].raft_index = 5000;
                m[i].raft_applied_index = 5000 - MAINT_APPLY_LAG_NORMAL; /* at the limit: normal */
        }
        state_maint_run *run = run_new("schedule", "running", "main-1", 0, 0);
        state_maint_run_list l = {.items = &run, .n = 1};
        maint_view v = {.defrag = &d, .members = m, .n = 3, .runs = &l, .now_ms = HOUR_MS};
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_DEFRAG);
        assert_false(a.apply_lag);
        assert_null(a.lag_message);
        maint_action_release(&a);

        /* main-1, just defragmented, is 4000 entries behind: wait */
        m[1].raft_applied_index = 1000;
        int64_t lag;
        assert_int_equal(maint_apply_lag(&v, &lag), 1);
        assert_int_equal(lag, 4000);
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        assert_true(a.apply_lag);
        assert_non_null(strstr(a.message, "waiting for main-1 to apply"));
        assert_non_null(strstr(a.message, "4000 entries behind"));
        maint_action_release(&a);
        /* still within the bounded wait */
        v.lag_since_ms = v.now_ms - MAINT_APPLY_LAG_WAIT_MS + 1;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        maint_action_release(&a);
        /* the wait is over: go on, and say so */
        v.lag_since_ms = v.now_ms - MAINT_APPLY_LAG_WAIT_MS;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_DEFRAG);
        assert_true(a.apply_lag);
        assert_non_null(a.lag_message);
        assert_non_null(strstr(a.lag_message, "main-1 is still 4000 entries behind"));
        assert_non_null(strstr(a.lag_message, "after 60 s"));
        maint_action_release(&a);

        /* the leader's step waits the same way */
        v.lag_since_ms = 0;
        free(run->members_done);
        run->members_done = xstrdup("main-1,main-2");
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        assert_true(a.apply_lag);
        maint_action_release(&a);
        m[1].raft_applied_index = m[1].raft_index;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_MOVE_LEADER);
        assert_false(a.apply_lag);
        maint_action_release(&a);

        /* an unreachable member's or an unreported applied index never holds a run */
        m[1].raft_applied_index = 0;
        m[2].reachable = false;
        m[2].raft_applied_index = 1;
        assert_int_equal(maint_apply_lag(&v, &lag), 0);
        assert_int_equal(lag, MAINT_APPLY_LAG_NORMAL);
        m[0].raft_applied_index = m[0].raft_index;
        assert_int_equal(maint_apply_lag(&v, &lag), 3);
        assert_int_equal(lag, 0);
        m[2].reachable = true;
        m[2].raft_applied_index = m[2].raft_index;
        /* nor does it start or wait a run that has nothing left to defragment */
        m[1].raft_applied_index = 1;
        free(run->members_done);
        run->members_done = xstrdup("main-1,main-2,main-0");
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_FINISH);
        maint_action_release(&a);
        state_maint_run_free(run);
}

static void test_health_gate(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .schedule = "0 3 * * *"};
        maint_member m[3];
        members3(m, 10);
        state_maint_run *run = run_new("schedule", "running", "main-1", 0, 0);
        state_maint_run_list l = {.items = &run, .n = 1};
        maint_view v = {.defrag = &d, .members = m, .n = 3, .runs = &l, .now_ms = HOUR_MS};
        /* a member down: wait, naming it; a member without a leader: wait */
        m[1].reachable = false;
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        assert_non_null(strstr(a.message, "main-1"));
        maint_action_release(&a);
        m[1].reachable = true;
        m[2].leader = 0;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        assert_non_null(strstr(a.message, "main-2"));
        maint_action_release(&a);
        /* members that disagree on the leader: wait */
        m[2].leader = 11;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        maint_action_release(&a);
        m[2].leader = 10;
        /* nothing starts while a member is unhealthy either */
        v.runs = NULL;
        d.free_space_above_bytes = 1;
        m[0].reachable = false;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        maint_action_release(&a);
        m[0].reachable = true;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_START);
        maint_action_release(&a);
        v.runs = &l;
        /* CORRUPT: the run is given up, nothing new starts */
        v.corrupt = true;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_ABORT);
        assert_non_null(strstr(a.message, "CORRUPT"));
        maint_action_release(&a);
        v.runs = NULL;
        d.free_space_above_bytes = 1;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        maint_action_release(&a);
        /* the members' data differs (the consistency freeze): the same */
        v.corrupt = false;
        v.frozen = true;
        v.runs = &l;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_ABORT);
        assert_non_null(strstr(a.message, "data differs"));
        maint_action_release(&a);
        v.runs = NULL;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        maint_action_release(&a);
        v.frozen = false;
        /* alarms unknown: same */
        v.alarms_unknown = true;
        v.runs = &l;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        maint_action_release(&a);
        v.alarms_unknown = false;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_DEFRAG);
        assert_int_equal(a.member, 2);
        maint_action_release(&a);
        state_maint_run_free(run);
}

static void test_nospace(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .free_space_above_bytes = 1 << 30};
        maint_member m[3];
        members3(m, 12);
        state_maint_run_list none = {0};
        maint_view v = {
            .defrag = &d, .members = m, .n = 3, .runs = &none, .now_ms = HOUR_MS, .nospace = true};
        /* not allowed by the spec: nothing */
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        maint_action_release(&a);
        /* allowed: a threshold run a minute ago does not hold a NOSPACE recovery back */
        d.disarm_nospace = true;
        state_maint_run *thr =
            run_new("free-space", "succeeded", "main-0,main-1,main-2", HOUR_MS - 2 * MIN_MS, 0);
        state_maint_run_list recent = {.items = &thr, .n = 1};
        v.runs = &recent;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_START);
        assert_int_equal(a.trigger, MAINT_TRIGGER_NOSPACE);
        maint_action_release(&a);
        v.runs = &none;
        state_maint_run_free(thr);
        /* allowed: compact, followers, leader, disarm, finish */
        d.disarm_nospace = true;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_START);
        assert_int_equal(a.trigger, MAINT_TRIGGER_NOSPACE);
        maint_action_release(&a);
        state_maint_run *run = run_new("nospace", "running", "", HOUR_MS, 0);
        state_maint_run_list l = {.items = &run, .n = 1};
        v.runs = &l;
        bool alarm = true;
        char **steps;
        drive(&v, m, run, &alarm, &steps);
        steps_equal(steps, (const char *const[]){"compact", "defrag main-0", "defrag main-1",
                                                 "move-leader main-2", "defrag main-2", "disarm",
                                                 "finish", NULL});
        assert_false(alarm);
        free(run->result);
        run->result = xstrdup("succeeded");
        run->finished_ms = HOUR_MS + MIN_MS;
        /* raised again within the hour: left to a person */
        v.nospace = true;
        v.now_ms = HOUR_MS + 10 * MIN_MS;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        maint_action_release(&a);
        state_maint_run_free(run);
}

/* A member defragmented before it applied the compaction gives nothing back: it waits. */
static void test_nospace_waits_for_compaction(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .disarm_nospace = true};
        maint_member m[3];
        members3(m, 12);
        state_maint_run *run = run_new("nospace", "running", "", HOUR_MS, 0);
        run->compact_revision = 40;
        state_maint_run_list l = {.items = &run, .n = 1};
        maint_view v = {
            .defrag = &d, .members = m, .n = 3, .runs = &l, .now_ms = HOUR_MS, .nospace = true};
        m[0].compaction_pending = true;
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        assert_non_null(strstr(a.message, "waiting for main-0 to apply the compaction"));
        maint_action_release(&a);
        m[0].compaction_pending = false;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_DEFRAG);
        assert_int_equal(a.member, 0);
        maint_action_release(&a);
        /* the leader (main-2) too, before leadership moves away from it */
        free(run->members_done);
        run->members_done = xstrdup("main-0,main-1");
        m[2].compaction_pending = true;
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        assert_non_null(strstr(a.message, "main-2"));
        maint_action_release(&a);
        state_maint_run_free(run);
}

static void test_alarm_conditions(void **unused)
{
        (void)unused;
        maint_condition c;
        maint_check_alarm("NoSpaceAlarm", "NOSPACE", "main-0, main-2", &c);
        assert_string_equal(c.status, "True");
        assert_string_equal(c.reason, "AlarmRaised");
        assert_non_null(strstr(c.message, "NOSPACE alarm is raised on main-0, main-2"));
        free(c.message);
        maint_check_alarm("CorruptAlarm", "CORRUPT", "", &c);
        assert_string_equal(c.type, "CorruptAlarm");
        assert_string_equal(c.status, "False");
        assert_string_equal(c.reason, "NoAlarm");
        free(c.message);
}

static void test_records(void **unused)
{
        (void)unused;
        char tmpl[] = "/tmp/gitcd-maint-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *path = xasprintf("%s/state.db", tmpl);
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        int64_t id = 0;
        assert_int_equal(state_maint_run_begin(db, "default/main", "bogus", 0, 1, &id), -EINVAL);
        assert_int_equal(state_maint_run_begin(db, "default/main", "nospace", 0, 1000, &id), 0);
        assert_int_equal(state_maint_run_set_compacted(db, id, 77), 0);
        assert_int_equal(state_maint_run_member_done(db, id, "main-1"), 0);
        assert_int_equal(state_maint_run_set_leader(db, id, "main-0"), 0);
        assert_int_equal(state_maint_run_member_done(db, id, "main-0"), 0);
        assert_int_equal(state_maint_run_set_disarmed(db, id), 0);
        state_maint_run_list l = {0};
        assert_int_equal(state_maint_run_list_for(db, "default/main", 0, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->result, "running");
        assert_string_equal(l.items[0]->members_done, "main-1,main-0");
        assert_true(state_maint_run_has_done(l.items[0], "main-0"));
        assert_false(state_maint_run_has_done(l.items[0], "main-"));
        assert_string_equal(l.items[0]->leader, "main-0");
        assert_int_equal(l.items[0]->compact_revision, 77);
        assert_true(l.items[0]->disarmed);
        state_maint_run_list_release(&l);
        assert_int_equal(state_maint_run_finish(db, id, NULL, 2000), 0);
        /* finished is final */
        assert_int_equal(state_maint_run_finish(db, id, "late", 3000), -EALREADY);
        assert_int_equal(state_maint_run_member_done(db, id, "main-2"), -EALREADY);
        assert_int_equal(state_maint_run_member_done(db, 999, "main-2"), -ENOENT);
        assert_int_equal(state_maint_run_list_for(db, NULL, 0, &l), 0);
        assert_string_equal(l.items[0]->result, "succeeded");
        assert_int_equal(l.items[0]->finished_ms, 2000);
        state_maint_run_list_release(&l);
        state_close(db);
        (void)rm_rf(tmpl);
}

/*
 * Holds (reconciler/hold.h): outside the windows a scheduled run does not
 * start and stays due (it starts when the hold ends); a run in progress
 * waits between members; a NOSPACE run is held only while suspended.
 */
static void test_holds(void **unused)
{
        (void)unused;
        defrag_spec d = {.enabled = true, .schedule = "0 3 * * *", .disarm_nospace = true};
        maint_member m[3];
        members3(m, 10);
        state_maint_run_list none = {0};
        int64_t now = at(2026, 11, 23, 14, 5);
        maint_view v = {.defrag = &d,
                        .members = m,
                        .n = 3,
                        .runs = &none,
                        .now_ms = now,
                        .created_ms = at(2026, 11, 1, 0, 0),
                        .held_disruptive = "waits for the window at 2026-11-28T02:00Z",
                        .held_until_ms = at(2026, 11, 28, 2, 0)};
        maint_action a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        assert_int_equal(a.next_ms, at(2026, 11, 28, 2, 0));
        assert_non_null(strstr(a.message, "defragmentation held: waits for the window at"));
        maint_action_release(&a);
        /* the hold lifted (days later): the latest slot is due, once */
        v.held_disruptive = NULL;
        v.now_ms = at(2026, 11, 28, 3, 1);
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_START);
        assert_int_equal(a.slot_ms, at(2026, 11, 28, 3, 0));
        maint_action_release(&a);

        /* a run in progress: the next member waits */
        state_maint_run *run = run_new("schedule", "running", "main-1", now, 0);
        state_maint_run_list l = {.items = &run, .n = 1};
        v.runs = &l;
        v.held_disruptive = "waits for the window at 2026-11-28T02:00Z";
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_WAIT);
        maint_action_release(&a);
        state_maint_run_free(run);

        /* NOSPACE: not held by the windows, held while suspended */
        v.runs = &none;
        v.nospace = true;
        v.created_ms = now; /* no scheduled slot due */
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_START);
        assert_int_equal(a.trigger, MAINT_TRIGGER_NOSPACE);
        maint_action_release(&a);
        v.held_all = "suspended (by spec)";
        a = decide(&v);
        assert_int_equal(a.kind, MAINT_IDLE);
        assert_non_null(strstr(a.message, "suspended (by spec)"));
        maint_action_release(&a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_schedule),
            cmocka_unit_test(test_thresholds),
            cmocka_unit_test(test_order_leader_last),
            cmocka_unit_test(test_order_most_fragmented),
            cmocka_unit_test(test_apply_lag_pause),
            cmocka_unit_test(test_health_gate),
            cmocka_unit_test(test_nospace),
            cmocka_unit_test(test_nospace_waits_for_compaction),
            cmocka_unit_test(test_alarm_conditions),
            cmocka_unit_test(test_records),
            cmocka_unit_test(test_holds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
