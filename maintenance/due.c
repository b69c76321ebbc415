/*
 * The maintenance decision (maintenance/due.h).
 *
 * Design: like reconciler/decide.c, one pure function that picks ONE step
 * from what was observed, so a run is level-based: the record says which
 * members are done, etcd says who leads now, and the next step follows
 * from those alone. A crash or a leadership change in the middle of a run
 * therefore needs no special case: the leader is whoever leads at the
 * moment a step is chosen, and it is always the last member defragmented.
 *
 * Which member goes next is what clients feel: a defragmentation locks the
 * member's backend, so the leader is never defragmented while it leads
 * (its heartbeats would stop and the cluster would hold an election), the
 * follower with the most free space goes first, and between members the
 * run waits (bounded) until every member applied what was committed, so
 * the cluster is not asked to catch up two members at once.
 *
 * The schedule reuses the snapshot schedule's rule (snapshots/schedule.h):
 * only the latest cron slot at or before now is due, once, whatever was
 * missed while gitcd was down; slots before the cluster existed are not.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "api/cron.h"
#include "maintenance/due.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

const char *maint_trigger_name(maint_trigger t)
{
        switch (t) {
        case MAINT_TRIGGER_SCHEDULE:
                return "schedule";
        case MAINT_TRIGGER_FREE_SPACE:
                return "free-space";
        case MAINT_TRIGGER_QUOTA:
                return "quota";
        case MAINT_TRIGGER_NOSPACE:
                return "nospace";
        case MAINT_TRIGGER_NONE:
                break;
        }
        return "";
}

const char *maint_action_name(maint_action_kind k)
{
        static const char *const names[] = {
            [MAINT_IDLE] = "idle",
            [MAINT_WAIT] = "wait",
            [MAINT_START] = "start",
            [MAINT_COMPACT] = "compact",
            [MAINT_MOVE_LEADER] = "move-leader",
            [MAINT_DEFRAG] = "defrag",
            [MAINT_DISARM] = "disarm",
            [MAINT_FINISH] = "finish",
        };
        assert((size_t)k < ARRAY_SIZE(names));
        return names[k];
}

const state_maint_run *maint_running(const state_maint_run_list *runs)
{
        if (!runs || runs->n == 0)
                return NULL;
        const state_maint_run *r = runs->items[0];
        return streq_ptr(r->result, "running") ? r : NULL;
}

/* Whether the newest run of the kind of trigger t (thresholds count as one) ended an hour ago. */
static bool cooled(const maint_view *v, maint_trigger t)
{
        bool nospace = t == MAINT_TRIGGER_NOSPACE;
        for (size_t i = 0; v->runs && i < v->runs->n; i++) {
                const state_maint_run *r = v->runs->items[i];
                if (streq_ptr(r->trigger, "schedule") ||
                    streq_ptr(r->trigger, "nospace") != nospace)
                        continue;
                int64_t end = r->finished_ms ? r->finished_ms : r->started_ms;
                return v->now_ms - end >= MAINT_RETRIGGER_MS;
        }
        return true;
}

static int64_t last_slot(const state_maint_run_list *runs)
{
        int64_t last = 0;
        for (size_t i = 0; runs && i < runs->n; i++)
                if (streq_ptr(runs->items[i]->trigger, "schedule") &&
                    runs->items[i]->slot_ms > last)
                        last = runs->items[i]->slot_ms;
        return last;
}

maint_trigger maint_due(const maint_view *v, int64_t *ret_slot_ms, int64_t *ret_next_ms,
                        size_t *ret_member)
{
        assert(v && ret_slot_ms && ret_next_ms && ret_member);
        const defrag_spec *d = v->defrag;
        *ret_slot_ms = 0;
        *ret_next_ms = 0;
        *ret_member = 0;
        if (!d || !d->enabled)
                return MAINT_TRIGGER_NONE;

        /* thresholds, NOSPACE: not again within MAINT_RETRIGGER_MS of the last run of their kind */
        if (v->nospace && d->disarm_nospace && cooled(v, MAINT_TRIGGER_NOSPACE))
                return MAINT_TRIGGER_NOSPACE;

        cron_expr e;
        if (d->schedule && cron_parse(d->schedule, &e) == 0) {
                int64_t slot = 0, next = 0;
                int64_t since = MAX(last_slot(v->runs), v->created_ms);
                int k = cron_due(&e, since, v->now_ms, &slot, &next);
                if (k >= 0)
                        *ret_next_ms = next;
                if (k > 0) {
                        *ret_slot_ms = slot;
                        return MAINT_TRIGGER_SCHEDULE;
                }
        }
        if (!cooled(v, MAINT_TRIGGER_FREE_SPACE))
                return MAINT_TRIGGER_NONE;
        int64_t quota = v->quota_bytes > 0 ? v->quota_bytes : MAINT_DEFAULT_QUOTA_BYTES;
        for (size_t i = 0; i < v->n; i++) {
                const maint_member *m = &v->members[i];
                if (!m->reachable)
                        continue;
                *ret_member = i;
                if (d->free_space_above_bytes > 0 &&
                    m->db_size - m->db_size_in_use > d->free_space_above_bytes)
                        return MAINT_TRIGGER_FREE_SPACE;
                if (d->quota_usage_above_percent > 0 &&
                    m->db_size * 100 > quota * (int64_t)d->quota_usage_above_percent)
                        return MAINT_TRIGGER_QUOTA;
        }
        *ret_member = 0;
        return MAINT_TRIGGER_NONE;
}

static void size_text(int64_t bytes, char *buf, size_t size)
{
        if (bytes >= (INT64_C(1) << 20))
                snprintf(buf, size, "%.1f MiB", (double)bytes / (1 << 20));
        else
                snprintf(buf, size, "%" PRId64 " KiB", bytes / 1024);
}

static char *due_message(const maint_view *v, maint_trigger t, size_t member, int64_t slot)
{
        const maint_member *m = v->n ? &v->members[member] : NULL;
        char a[32], b[32];
        switch (t) {
        case MAINT_TRIGGER_SCHEDULE: {
                char when[40];
                format_rfc3339(slot, when, sizeof(when));
                return xasprintf("scheduled defragmentation (%s, slot %s)", v->defrag->schedule,
                                 when);
        }
        case MAINT_TRIGGER_FREE_SPACE:
                size_text(m->db_size - m->db_size_in_use, a, sizeof(a));
                return xasprintf("%s has %s free in its database, above freeSpaceAbove %s", m->name,
                                 a, v->defrag->free_space_above);
        case MAINT_TRIGGER_QUOTA:
                size_text(m->db_size, a, sizeof(a));
                size_text(v->quota_bytes > 0 ? v->quota_bytes : MAINT_DEFAULT_QUOTA_BYTES, b,
                          sizeof(b));
                return xasprintf("%s's database is %s of a %s quota, above %d%%", m->name, a, b,
                                 v->defrag->quota_usage_above_percent);
        case MAINT_TRIGGER_NOSPACE:
                return xstrdup("a NOSPACE alarm is raised: compact, defragment, disarm");
        case MAINT_TRIGGER_NONE:
                break;
        }
        return xstrdup("");
}

/* The leader every reachable member agrees on; 0 when they do not agree or know none. */
static uint64_t agreed_leader(const maint_view *v)
{
        uint64_t leader = 0;
        for (size_t i = 0; i < v->n; i++) {
                if (!v->members[i].reachable || v->members[i].leader == 0)
                        return 0;
                if (leader && v->members[i].leader != leader)
                        return 0;
                leader = v->members[i].leader;
        }
        return leader;
}

/*
 * Steps 1 and 2 of maint_decide: CORRUPT or frozen, alarms unknown, or a
 * member unhealthy or without the agreed leader. True when that decides.
 */
static bool decide_blocked(const maint_view *v, const state_maint_run *run, uint64_t leader,
                           maint_action *ret)
{
        /* 1. CORRUPT or frozen: a person must look first; unknown alarms: look again later */
        if (v->corrupt || v->frozen) {
                ret->kind = run ? MAINT_ABORT : MAINT_IDLE;
                ret->message =
                    xstrdup(v->corrupt ? "a CORRUPT alarm is raised: no maintenance until a person "
                                         "repaired the cluster (docs/consistency.md)"
                                       : "the members' data differs: no maintenance until a person "
                                         "repaired the cluster (docs/consistency.md)");
                return true;
        }
        if (v->alarms_unknown) {
                ret->kind = run ? MAINT_WAIT : MAINT_IDLE;
                ret->message = xstrdup("the alarms cannot be listed");
                return true;
        }

        /* 2. every member healthy, agreeing on one leader */
        for (size_t i = 0; i < v->n && !ret->message; i++) {
                const maint_member *m = &v->members[i];
                if (!m->reachable || m->leader == 0)
                        ret->message = xasprintf(
                            "waiting for %s to be healthy before defragmenting (%s)", m->name,
                            m->reachable ? "it knows no leader" : "it does not answer");
        }
        if (!ret->message && (v->n == 0 || leader == 0))
                ret->message = xstrdup("waiting for the members to agree on a leader");
        if (ret->message) {
                /* nothing starts (a due slot or threshold is seen again at the next look) */
                ret->kind = run ? MAINT_WAIT : MAINT_IDLE;
                return true;
        }
        return false;
}

/* Step 3: nothing running: start one when due. */
static void decide_start(const maint_view *v, maint_action *ret)
{
        int64_t slot, next;
        size_t member;
        maint_trigger t = maint_due(v, &slot, &next, &member);
        if (t == MAINT_TRIGGER_NONE) {
                ret->next_ms = next;
                return;
        }
        ret->kind = MAINT_START;
        ret->trigger = t;
        ret->slot_ms = slot;
        ret->message = due_message(v, t, member, slot);
}

/* A member waits until it applied the compaction. True when that decides. */
static bool decide_compaction_pending(const maint_member *m, maint_action *ret)
{
        if (!m->compaction_pending)
                return false;
        ret->kind = MAINT_WAIT;
        ret->message = xasprintf("waiting for %s to apply the compaction before "
                                 "defragmenting it",
                                 m->name);
        return true;
}

size_t maint_apply_lag(const maint_view *v, int64_t *ret_lag)
{
        assert(v && ret_lag);
        size_t worst = v->n;
        int64_t lag = 0;
        for (size_t i = 0; i < v->n; i++) {
                const maint_member *m = &v->members[i];
                if (!m->reachable || m->raft_applied_index == 0 ||
                    m->raft_index <= m->raft_applied_index)
                        continue;
                int64_t behind = (int64_t)(m->raft_index - m->raft_applied_index);
                if (behind > lag) {
                        lag = behind;
                        worst = i;
                }
        }
        *ret_lag = lag;
        return worst;
}

/*
 * Step 5: before a member's step, every member caught up with what was
 * committed, or the bounded wait for it over. True when the run waits.
 */
static bool decide_apply_lag(const maint_view *v, maint_action *ret)
{
        int64_t lag;
        size_t i = maint_apply_lag(v, &lag);
        if (i == v->n || lag <= MAINT_APPLY_LAG_NORMAL)
                return false;
        const char *name = v->members[i].name;
        int64_t waited = v->lag_since_ms > 0 ? v->now_ms - v->lag_since_ms : 0;
        ret->apply_lag = true;
        if (waited < MAINT_APPLY_LAG_WAIT_MS) {
                ret->kind = MAINT_WAIT;
                ret->message = xasprintf("waiting for %s to apply what the cluster committed "
                                         "(%" PRId64 " entries behind, normal is at most %" PRId64
                                         ") before the next member",
                                         name, lag, MAINT_APPLY_LAG_NORMAL);
                return true;
        }
        ret->lag_message = xasprintf("%s is still %" PRId64 " entries behind in applying after "
                                     "%" PRId64 " s of waiting: going on with the next member",
                                     name, lag, waited / 1000);
        return false;
}

/* The follower not done yet with the most free space (member order among equals); v->n: none. */
static size_t most_fragmented(const maint_view *v, const state_maint_run *run, uint64_t leader)
{
        size_t best = v->n;
        for (size_t i = 0; i < v->n; i++) {
                const maint_member *m = &v->members[i];
                if (m->id == leader || state_maint_run_has_done(run, m->name))
                        continue;
                if (best == v->n || m->db_size - m->db_size_in_use >
                                        v->members[best].db_size - v->members[best].db_size_in_use)
                        best = i;
        }
        return best;
}

/* Step 7: the leader last, once it is no longer the leader. True when that decides. */
static bool decide_leader(const maint_view *v, const state_maint_run *run, size_t leader_i,
                          maint_action *ret)
{
        const maint_member *l = &v->members[leader_i];
        if (state_maint_run_has_done(run, l->name))
                return false;
        if (decide_compaction_pending(l, ret))
                return true;
        if (decide_apply_lag(v, ret))
                return true;
        if (v->n == 1) {
                ret->kind = MAINT_DEFRAG;
                ret->member = leader_i;
                ret->message = xasprintf("defragmenting %s (the only member)", l->name);
                return true;
        }
        size_t to = leader_i == 0 ? 1 : 0;
        ret->kind = MAINT_MOVE_LEADER;
        ret->member = leader_i;
        ret->to_id = v->members[to].id;
        ret->message = xasprintf("moving leadership from %s to %s before defragmenting it", l->name,
                                 v->members[to].name);
        return true;
}

/* A step the holds keep back (maint_view.held_*): a start stays due, a run waits. */
static void decide_held(const maint_view *v, const state_maint_run *run, maint_action *ret)
{
        if (ret->kind == MAINT_IDLE || ret->kind == MAINT_WAIT || ret->kind == MAINT_ABORT ||
            ret->kind == MAINT_FINISH)
                return;
        bool nospace =
            run ? streq_ptr(run->trigger, "nospace") : ret->trigger == MAINT_TRIGGER_NOSPACE;
        const char *why = v->held_all ? v->held_all : nospace ? NULL : v->held_disruptive;
        if (!why)
                return;
        bool start = ret->kind == MAINT_START;
        maint_action_release(ret);
        *ret = (maint_action){.kind = start ? MAINT_IDLE : MAINT_WAIT,
                              .next_ms = start ? v->held_until_ms : 0,
                              .message = xasprintf("defragmentation held: %s", why)};
}

static void decide_run(const maint_view *v, maint_action *ret);

void maint_decide(const maint_view *v, maint_action *ret)
{
        decide_run(v, ret);
        decide_held(v, maint_running(v->runs), ret);
}

static void decide_run(const maint_view *v, maint_action *ret)
{
        assert(v && ret);
        *ret = (maint_action){.kind = MAINT_IDLE};
        const state_maint_run *run = maint_running(v->runs);
        uint64_t leader = agreed_leader(v);
        if (decide_blocked(v, run, leader, ret))
                return;
        if (!run) {
                decide_start(v, ret);
                return;
        }
        bool nospace = streq_ptr(run->trigger, "nospace");

        /* 4. nospace: compact first, so defragmentation has space to give back */
        if (nospace && run->compact_revision == 0) {
                ret->kind = MAINT_COMPACT;
                ret->message = xstrdup("compacting to the current revision");
                return;
        }

        /* 6. followers first, the most fragmented first */
        size_t leader_i = v->n;
        for (size_t i = 0; i < v->n; i++)
                if (v->members[i].id == leader)
                        leader_i = i;
        size_t next = most_fragmented(v, run, leader);
        if (next < v->n) {
                const maint_member *m = &v->members[next];
                if (decide_compaction_pending(m, ret))
                        return;
                if (decide_apply_lag(v, ret))
                        return;
                char free_text[32];
                size_text(m->db_size - m->db_size_in_use, free_text, sizeof(free_text));
                ret->kind = MAINT_DEFRAG;
                ret->member = next;
                ret->message =
                    xasprintf("defragmenting %s (a follower, %s free)", m->name, free_text);
                return;
        }
        if (leader_i == v->n) {
                ret->kind = MAINT_WAIT;
                ret->message = xstrdup("waiting for the leader to be one of the recorded members");
                return;
        }
        if (decide_leader(v, run, leader_i, ret))
                return;

        /* 8. nospace: the alarm goes last, when there is space again */
        if (nospace && v->nospace) {
                ret->kind = MAINT_DISARM;
                ret->message = xstrdup("disarming the NOSPACE alarm");
                return;
        }

        /* 9. */
        ret->kind = MAINT_FINISH;
        ret->message = xasprintf("every member defragmented (%s)", run->members_done);
}

void maint_action_release(maint_action *a)
{
        if (!a)
                return;
        free(a->message);
        free(a->lag_message);
        a->message = a->lag_message = NULL;
}

void maint_check_alarm(const char *type, const char *alarm, const char *members,
                       maint_condition *ret)
{
        assert(type && alarm && ret);
        *ret = (maint_condition){.type = type};
        if (isempty(members)) {
                ret->status = "False";
                ret->reason = "NoAlarm";
                ret->message = xasprintf("no %s alarm is raised", alarm);
                return;
        }
        ret->status = "True";
        ret->reason = "AlarmRaised";
        ret->message =
            streq(alarm, "NOSPACE")
                ? xasprintf("a NOSPACE alarm is raised on %s: the database reached its quota and "
                            "etcd refuses writes",
                            members)
                : xasprintf("a %s alarm is raised on %s: members disagree on their data; "
                            "investigate before disarming it",
                            alarm, members);
}
