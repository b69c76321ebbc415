/*
 * What maintenance is due for one cluster, and the next safe step of a
 * defragmentation run: a pure function of the spec, what etcd reports
 * (each member's Status, the active alarms), the run records and the time.
 * maintenance/maintenance.c observes and acts; everything it decides is
 * decided here, so the rules are tested without etcd.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/model.h"
#include "state/maintenance.h"

/* etcd's default backend quota (--quota-backend-bytes unset or 0): 2 GiB. */
#define MAINT_DEFAULT_QUOTA_BYTES (INT64_C(2) << 30)
/*
 * A run started by a threshold is not started by a threshold again within
 * this long of the last one, nor a NOSPACE recovery within this long of the
 * last recovery: defragmentation cannot shrink data that is in use, so a
 * threshold that stays crossed (or an alarm etcd raises again at once) must
 * not defragment the cluster over and over.
 */
#define MAINT_RETRIGGER_MS (INT64_C(3600) * 1000)
/* How often thresholds and alarms are looked at when nothing is running. */
#define MAINT_LOOK_MS (INT64_C(30) * 1000)
/*
 * The pause between members: the next member is not defragmented while any
 * member has more than MAINT_APPLY_LAG_NORMAL committed raft entries it has
 * not applied yet (Status's raftIndex - raftAppliedIndex; a healthy member
 * under load is a few entries behind, etcd refuses requests at 5000), and
 * the run waits for that at most MAINT_APPLY_LAG_WAIT_MS, then goes on with
 * a log line: a member that stays behind must not stop maintenance forever,
 * and a cluster that is merely busy is not one a defragmentation breaks.
 */
#define MAINT_APPLY_LAG_NORMAL  INT64_C(100)
#define MAINT_APPLY_LAG_WAIT_MS (INT64_C(60) * 1000)

typedef enum maint_trigger {
        MAINT_TRIGGER_NONE,
        MAINT_TRIGGER_SCHEDULE,   /* spec.defrag.schedule */
        MAINT_TRIGGER_FREE_SPACE, /* spec.defrag.freeSpaceAbove */
        MAINT_TRIGGER_QUOTA,      /* spec.defrag.quotaUsageAbovePercent */
        MAINT_TRIGGER_NOSPACE,    /* a NOSPACE alarm with spec.defrag.disarmNoSpace */
} maint_trigger;

/* "schedule", "free-space", "quota", "nospace" (as stored); "" for none. */
const char *maint_trigger_name(maint_trigger t);

/* One voting member as observed this pass. */
typedef struct maint_member {
        const char *name;
        uint64_t id;
        bool reachable;  /* Status answered */
        uint64_t leader; /* the leader it reports (0: none) */
        int64_t db_size;
        int64_t db_size_in_use;
        bool compaction_pending;     /* a nospace run compacted, and it still serves the revision
                                  * before (its defragmentation would give nothing back) */
        uint64_t raft_index;         /* committed (Status raftIndex) */
        uint64_t raft_applied_index; /* applied (Status raftAppliedIndex; 0: not reported) */
} maint_member;

typedef struct maint_view {
        const defrag_spec *defrag; /* the latched spec's */
        int64_t quota_bytes;       /* spec.options.quotaBackendBytes, 0: etcd's default */
        const maint_member *members;
        size_t n;
        bool nospace;        /* a NOSPACE alarm is active on some member */
        bool corrupt;        /* a CORRUPT alarm is active on some member */
        bool frozen;         /* the members' data differs (consistency freeze) */
        bool alarms_unknown; /* the alarms could not be listed */
        /*
         * Holds (reconciler/hold.h), each a sentence saying why, or NULL:
         * held_all (suspended) holds every run; held_disruptive (outside
         * the maintenance windows) every run but a NOSPACE alarm's, which
         * ends an outage. A held run starts no step: the member in flight
         * finished with the step before, the next waits; a run due but not
         * started stays due (its slot is not taken), so it starts when the
         * hold ends. held_until_ms: when the hold may end (0: not known).
         */
        const char *held_all;
        const char *held_disruptive;
        int64_t held_until_ms;
        const state_maint_run_list *runs; /* the cluster's records, newest first */
        int64_t created_ms;   /* when gitcd first saw the cluster: no slot before is due */
        int64_t lag_since_ms; /* since when the run has been waiting on apply lag (0: it is not) */
        int64_t now_ms;
} maint_view;

typedef enum maint_action_kind {
        MAINT_IDLE,        /* nothing due; look again at next_ms */
        MAINT_WAIT,        /* a run is due or running but must wait (message says why) */
        MAINT_START,       /* record a new run (trigger, slot_ms) */
        MAINT_COMPACT,     /* nospace: compact to the current revision */
        MAINT_MOVE_LEADER, /* hand leadership from member to to_id before defragmenting it */
        MAINT_DEFRAG,      /* defragment member, then check its health */
        MAINT_DISARM,      /* nospace: disarm the NOSPACE alarms */
        MAINT_FINISH,      /* every member done: the run succeeded */
        MAINT_ABORT,       /* the run is given up (message says why): it failed */
} maint_action_kind;

const char *maint_action_name(maint_action_kind k);

typedef struct maint_action {
        maint_action_kind kind;
        maint_trigger trigger; /* START */
        int64_t slot_ms;       /* START on schedule: the cron slot */
        size_t member;         /* DEFRAG, MOVE_LEADER: index into view->members */
        uint64_t to_id;        /* MOVE_LEADER: the new leader */
        int64_t next_ms;       /* IDLE: when something may be due next (0: look at MAINT_LOOK_MS) */
        bool apply_lag;        /* WAIT: for apply lag; DEFRAG, MOVE_LEADER: going on despite it,
                                * the wait was MAINT_APPLY_LAG_WAIT_MS (lag_message says so) */
        char *lag_message; /* DEFRAG, MOVE_LEADER with apply_lag: for the log; newly allocated */
        char *message;     /* for a person; newly allocated */
} maint_action;

/*
 * The member furthest behind in applying what its cluster committed
 * (raftIndex - raftAppliedIndex), among the reachable members; *ret_lag its
 * lag (0 when every member applied all). v->n when none is behind.
 */
size_t maint_apply_lag(const maint_view *v, int64_t *ret_lag);

/* The run in progress (the newest record, when it is running); NULL when none. */
const state_maint_run *maint_running(const state_maint_run_list *runs);

/*
 * Why a run should start now (MAINT_TRIGGER_NONE: it should not). A NOSPACE
 * alarm comes first (when the spec allows disarming it), then the
 * schedule's latest slot when no run covers it, then the thresholds, each
 * judged per member: free space (dbSize - dbSizeInUse) above
 * freeSpaceAbove, or dbSize above quotaUsageAbovePercent of the quota.
 * *ret_slot_ms is the cron slot (schedule) and *ret_next_ms the next time
 * the schedule is due (0 when there is no schedule).
 */
maint_trigger maint_due(const maint_view *v, int64_t *ret_slot_ms, int64_t *ret_next_ms,
                        size_t *ret_member);

/*
 * The next step. Rules, first match wins:
 *   1. a CORRUPT alarm, or the cluster frozen because its members' data
 *      differs (reconciler/consistency.h): a running run is given up
 *      (ABORT), none starts;
 *      alarms that could not be listed: WAIT / IDLE;
 *   2. a member unreachable, without a leader, or the members disagreeing
 *      on the leader: WAIT (a run in progress; never defragment while
 *      another member is unhealthy) or IDLE (none starts);
 *   3. no run running: START when maint_due() says so, else IDLE;
 *   4. a nospace run not compacted yet: COMPACT;
 *   5. before a member's step (DEFRAG, MOVE_LEADER): a member more than
 *      MAINT_APPLY_LAG_NORMAL entries behind in applying: WAIT for it,
 *      up to MAINT_APPLY_LAG_WAIT_MS from lag_since_ms, then go on
 *      (apply_lag set, lag_message for the log);
 *   6. the follower not done yet with the most free space in its file
 *      (dbSize - dbSizeInUse; member order among equals): DEFRAG it;
 *   7. the leader not done yet: MOVE_LEADER to a done follower, or DEFRAG
 *      it when it is the only member;
 *   8. a nospace run with the alarm still raised: DISARM;
 *   9. FINISH.
 * So followers go first, most fragmented first (what a run gives back
 * soonest, should it be stopped), the leader last and only after it
 * stopped being the leader, each after the cluster caught up with the
 * previous one, and a resumed run skips what its record says is done.
 */
void maint_decide(const maint_view *v, maint_action *ret);
void maint_action_release(maint_action *a);

/* A condition as a checker returns it (static strings but the message). */
typedef struct maint_condition {
        const char *type;   /* "NoSpaceAlarm" or "CorruptAlarm" */
        const char *status; /* "True" or "False" */
        const char *reason; /* "AlarmRaised" or "NoAlarm" */
        char *message;      /* newly allocated */
} maint_condition;

/*
 * The checker of one alarm condition: NoSpaceAlarm (alarm NOSPACE) or
 * CorruptAlarm (CORRUPT). members names the members the alarm is raised
 * on, comma-separated; NULL or "" when it is raised on none.
 */
void maint_check_alarm(const char *type, const char *alarm, const char *members,
                       maint_condition *ret);
