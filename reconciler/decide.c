/*
 * decide(): the membership state machine of one cluster, as a pure
 * function. The act side performs the one step returned and observes again.
 *
 *                 replicas > 0, nothing exists (mode learners, or 1 replica)
 *     (empty) ───────────────────────────────▶ seed starting ──ready──▶ formed
 *        │                                                               ▲
 *        └── mode static, replicas > 1, no cluster ID ──▶ every member ──┘
 *            starting at once with one --initial-cluster (bootstrap.c)
 *                                                                        │
 *        ┌───────────── fewer members than wanted ◀──────────────────────┤
 *        ▼                                                               │
 *   add learner ──▶ start it ──▶ promote (once etcd accepts) ──▶ formed ◀┘
 *                                                                        │
 *   more voters than wanted: move leader away ──▶ MemberRemove ──▶ stop + delete data
 *   member data lost / crash loop: MemberRemove (replacement) ──▶ add learner ...
 *   replicas 0: scale down to one ──▶ stop it, data kept (dormant) ──▶ resume starts it
 *   outdated command: restart followers one at a time, the leader last
 *   (etcd hands its leadership over inside its graceful stop: rule 13)
 *   takeover (spec.adopt): add a learner, promote, remove an old member
 *   (a follower; the leader last, after moving leadership to a gitcd
 *   voter), until no member of the old cluster is left
 *   certificate expired (any time) or within renewBefore (with quorum):
 *   renew one member's leaves, no restart
 *
 * Invariants, checked before every membership change:
 *   - quorum is never voluntarily broken: a voter is removed only when the
 *     healthy voters left still form a quorum of the smaller cluster;
 *   - one membership change at a time: never a second learner, never an
 *     add while a learner is pending;
 *   - nothing is deleted while quorum is lost: the step is WAIT, and the
 *     target keeps restarting what it can.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/bootstrap.h"
#include "reconciler/decide.h"
#include "util/xalloc.h"

static const char *const step_names[] = {
    [STEP_CONVERGED] = "converged",     [STEP_WAIT] = "wait",
    [STEP_START_SEED] = "start-seed",   [STEP_ADD_LEARNER] = "add-learner",
    [STEP_START_MEMBER] = "start",      [STEP_PROMOTE] = "promote",
    [STEP_MOVE_LEADER] = "move-leader", [STEP_REMOVE_MEMBER] = "remove",
    [STEP_DELETE_MEMBER] = "delete",    [STEP_STOP_MEMBER] = "stop",
    [STEP_RESTART_MEMBER] = "restart",  [STEP_RENEW_CERTS] = "renew-certificates",
    [STEP_BOOTSTRAP] = "bootstrap",
};

const char *step_kind_name(step_kind k)
{
        if ((size_t)k < sizeof(step_names) / sizeof(step_names[0]) && step_names[k])
                return step_names[k];
        return "unknown";
}

static int quorum(int voters)
{
        return voters / 2 + 1;
}

static bool is_voter(const obs_member *m)
{
        return m->in_etcd && !m->learner;
}

static bool is_ready(const obs_member *m)
{
        return m->runtime == MEMBER_READY;
}

/* A member that will not come back by restarting: its data is gone or it crash-loops. */
static bool is_lost(const observation *obs, const obs_member *m)
{
        if (m->runtime == MEMBER_DATA_LOST || m->runtime == MEMBER_CRASH_LOOP || m->replace)
                return true;
        /* etcd knows it as started, but the target has nothing: its data is gone. */
        return m->in_etcd && !m->unstarted && m->runtime == MEMBER_ABSENT && obs->etcd_listed;
}

void observation_voters(const observation *obs, int *ret_voters, int *ret_healthy)
{
        int v = 0, h = 0;
        for (size_t i = 0; i < obs->n; i++)
                if (is_voter(&obs->members[i])) {
                        v++;
                        if (is_ready(&obs->members[i]))
                                h++;
                }
        *ret_voters = v;
        *ret_healthy = h;
}

static void set(step *s, step_kind kind, const obs_member *m, const char *reason, const char *fmt,
                ...) _printf_(5, 6);

static void set(step *s, step_kind kind, const obs_member *m, const char *reason, const char *fmt,
                ...)
{
        s->kind = kind;
        s->member = m ? m->name : NULL;
        s->member_id = m ? m->id : 0;
        s->ordinal = m ? m->ordinal : 0;
        s->reason = reason;
        va_list ap;
        va_start(ap, fmt);
        str_assign(&s->message, xvasprintf(fmt, ap));
        va_end(ap);
}

/* The healthy, up-to-date voter other than `not` with the lowest ordinal: where leadership goes. */
static const obs_member *leader_candidate(const observation *obs, const obs_member * not )
{
        const obs_member *best = NULL;
        for (int pass = 0; pass < 2 && !best; pass++)
                for (size_t i = 0; i < obs->n; i++) {
                        const obs_member *m = &obs->members[i];
                        if (m == not || !is_voter(m) || !is_ready(m))
                                continue;
                        if (pass == 0 && m->outdated)
                                continue;
                        if (!best || m->ordinal < best->ordinal)
                                best = m;
                }
        return best;
}

/* Move leadership away from m when it leads; true when a step was set. */
static bool move_leader_away(const observation *obs, const obs_member *m, const char *reason,
                             step *s)
{
        if (obs->leader_id == 0 || obs->leader_id != m->id)
                return false;
        const obs_member *to = leader_candidate(obs, m);
        if (!to)
                return false;
        set(s, STEP_MOVE_LEADER, to, reason, "move leadership from %s to %s", m->name, to->name);
        return true;
}

static bool formed(const observation *obs)
{
        return obs->bootstrapped || obs->etcd_listed;
}

/* Rules 1-2: the first member. */
static bool decide_seed(const desired *want, const observation *obs, step *s)
{
        if (obs->n == 0) {
                if (want->replicas > 0) {
                        set(s, STEP_START_SEED, NULL, REASON_WAITING_FOR_SEED,
                            "start the seed member alone");
                        s->ordinal = obs->next_ordinal;
                } else
                        set(s, STEP_CONVERGED, NULL, REASON_PAUSED, "paused; no members");
                return true;
        }
        if (formed(obs))
                return false;
        /* Not formed yet: the lowest ordinal is the seed. */
        const obs_member *seed = &obs->members[0];
        for (size_t i = 1; i < obs->n; i++)
                if (obs->members[i].ordinal < seed->ordinal)
                        seed = &obs->members[i];
        if (want->replicas == 0 && seed->runtime != MEMBER_READY &&
            seed->runtime != MEMBER_STARTING) {
                set(s, STEP_CONVERGED, seed, REASON_PAUSED, "paused before the seed started");
                return true;
        }
        if (seed->runtime == MEMBER_ABSENT || seed->runtime == MEMBER_STOPPED)
                set(s, STEP_START_MEMBER, seed, REASON_WAITING_FOR_SEED, "start seed member %s",
                    seed->name);
        else
                set(s, STEP_WAIT, seed, REASON_WAITING_FOR_SEED,
                    "waiting for seed member %s to become ready (%s)", seed->name,
                    member_runtime_state_name(seed->runtime));
        return true;
}

/* Rule 8 (early: starting processes never changes membership): bring stopped members back. */
static bool decide_restart_stopped(const desired *want, const observation *obs, step *s)
{
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (m->runtime != MEMBER_STOPPED || is_lost(obs, m))
                        continue;
                if (obs->etcd_listed && !m->in_etcd)
                        continue; /* removed from etcd: rule 6 deletes it */
                if (m->dormant && want->replicas == 0)
                        continue; /* paused on purpose */
                set(s, STEP_START_MEMBER, m, m->dormant ? REASON_SCALING_UP : REASON_RECOVERING,
                    m->dormant ? "resume dormant member %s with its data"
                               : "start stopped member %s with its data",
                    m->name);
                return true;
        }
        return false;
}

/* Rules 4-5: members etcd knows that are not full voters yet. */
static bool decide_pending(const observation *obs, step *s)
{
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!m->in_etcd)
                        continue;
                if (m->unstarted) {
                        if (!m->recorded) {
                                set(s, STEP_REMOVE_MEMBER, m, REASON_SCALING_UP,
                                    "remove member %016llx that etcd lists but gitcd never "
                                    "started",
                                    (unsigned long long)m->id);
                        } else if (m->runtime == MEMBER_ABSENT || m->runtime == MEMBER_STOPPED) {
                                set(s, STEP_START_MEMBER, m, REASON_SCALING_UP,
                                    "start new member %s", m->name);
                        } else if (m->runtime == MEMBER_DATA_LOST ||
                                   m->runtime == MEMBER_CRASH_LOOP) {
                                set(s, STEP_REMOVE_MEMBER, m, REASON_REPLACING_MEMBER,
                                    "remove new member %s: it cannot start (%s)", m->name,
                                    member_runtime_state_name(m->runtime));
                        } else
                                set(s, STEP_WAIT, m, REASON_SCALING_UP,
                                    "waiting for new member %s to join", m->name);
                        return true;
                }
                if (m->learner) {
                        if (is_lost(obs, m))
                                set(s, STEP_REMOVE_MEMBER, m, REASON_REPLACING_MEMBER,
                                    "remove learner %s: %s", m->name,
                                    member_runtime_state_name(m->runtime));
                        else if (is_ready(m))
                                set(s, STEP_PROMOTE, m, REASON_SCALING_UP,
                                    "promote learner %s to voter", m->name);
                        else
                                set(s, STEP_WAIT, m, REASON_SCALING_UP,
                                    "waiting for learner %s to catch up", m->name);
                        return true;
                }
        }
        return false;
}

/* Rule 6: leftovers of members etcd no longer has. */
static bool decide_leftovers(const observation *obs, step *s)
{
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (m->in_etcd || !m->recorded)
                        continue;
                set(s, STEP_DELETE_MEMBER, m, REASON_SCALING_DOWN,
                    "delete member %s, which is no longer in the cluster", m->name);
                return true;
        }
        return false;
}

/* Rule 7: replace a voter that will not come back. */
static bool decide_replace(const observation *obs, int voters, int healthy, step *s)
{
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!is_voter(m) || !is_lost(obs, m))
                        continue;
                if (move_leader_away(obs, m, REASON_REPLACING_MEMBER, s))
                        return true;
                int healthy_after = healthy - (is_ready(m) ? 1 : 0);
                const char *why =
                    m->replace ? "to be replaced" : member_runtime_state_name(m->runtime);
                if (healthy_after < quorum(voters - 1)) {
                        set(s, STEP_WAIT, m, REASON_REPLACING_MEMBER,
                            "member %s is %s but removing it now would break quorum", m->name, why);
                        return true;
                }
                set(s, STEP_REMOVE_MEMBER, m, REASON_REPLACING_MEMBER,
                    "remove member %s (%s) so a new member can replace it", m->name, why);
                return true;
        }
        return false;
}

/* Rule 8b: take the old cluster's members over, one membership change at a time. */
static bool decide_takeover(const desired *want, const observation *obs, int voters, int healthy,
                            step *s)
{
        int foreign = 0, own = 0;
        const obs_member *victim = NULL, *old_leader = NULL, *to = NULL;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!is_voter(m))
                        continue;
                if (!m->foreign) {
                        own++;
                        if (is_ready(m) && (!to || m->ordinal < to->ordinal))
                                to = m;
                        continue;
                }
                foreign++;
                if (obs->leader_id && m->id == obs->leader_id)
                        old_leader = m;
                else if (!victim || m->id < victim->id)
                        victim = m;
        }
        if (foreign == 0)
                return false;
        if (healthy < voters) {
                set(s, STEP_WAIT, NULL, REASON_TAKING_OVER,
                    "%d of %d voters healthy; every one must be before the next takeover step",
                    healthy, voters);
                return true;
        }
        int wanted = want->replicas > 0 ? want->replicas : 1;
        if (own < wanted && voters <= wanted) {
                set(s, STEP_ADD_LEARNER, NULL, REASON_TAKING_OVER,
                    "add a member of gitcd's beside the old cluster's %d (%d → %d)", foreign,
                    voters, voters + 1);
                s->ordinal = obs->next_ordinal;
                return true;
        }
        if (!victim) {
                victim = old_leader;
                if (!to) {
                        set(s, STEP_WAIT, victim, REASON_TAKING_OVER,
                            "waiting for a healthy voter of gitcd's to lead before removing the "
                            "old leader %s",
                            victim->name);
                        return true;
                }
                set(s, STEP_MOVE_LEADER, to, REASON_TAKING_OVER,
                    "move leadership from the old member %s to %s", victim->name, to->name);
                return true;
        }
        if (healthy - 1 < quorum(voters - 1)) {
                set(s, STEP_WAIT, victim, REASON_TAKING_OVER,
                    "waiting for members to be healthy before removing the old member %s",
                    victim->name);
                return true;
        }
        set(s, STEP_REMOVE_MEMBER, victim, REASON_TAKING_OVER,
            "remove the old member %s (%d → %d; %d of the old cluster's left)", victim->name,
            voters, voters - 1, foreign - 1);
        return true;
}

/* Rule 10: scale down, unhealthy members first, then the newest. */
static bool decide_scale_down(const desired *want, const observation *obs, int voters, int healthy,
                              step *s)
{
        int target_voters = want->replicas > 0 ? want->replicas : 1;
        if (voters <= target_voters)
                return false;
        const obs_member *victim = NULL;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!is_voter(m))
                        continue;
                if (!victim || (is_ready(victim) && !is_ready(m)) ||
                    (is_ready(victim) == is_ready(m) && m->ordinal > victim->ordinal))
                        victim = m;
        }
        if (!victim)
                return false;
        int healthy_after = healthy - (is_ready(victim) ? 1 : 0);
        if (healthy_after < quorum(voters - 1)) {
                set(s, STEP_WAIT, victim, REASON_SCALING_DOWN,
                    "waiting for members to be healthy before removing %s", victim->name);
                return true;
        }
        if (move_leader_away(obs, victim, REASON_SCALING_DOWN, s))
                return true;
        set(s, STEP_REMOVE_MEMBER, victim, REASON_SCALING_DOWN, "remove member %s (%d → %d)",
            victim->name, voters, voters - 1);
        return true;
}

const obs_cert *certs_soonest(const observation *obs)
{
        const obs_cert *best = NULL;
        for (size_t i = 0; i < obs->n_certs; i++)
                /* leaves only: the CA is replaced by a rotation (carotate.c), not renewed */
                if (!streq_ptr(obs->certs[i].surface, TARGET_CERT_CA) &&
                    (!best || obs->certs[i].not_after_ms < best->not_after_ms))
                        best = &obs->certs[i];
        return best;
}

int64_t certs_next_renewal_ms(const desired *want, const observation *obs)
{
        const obs_cert *c = certs_soonest(obs);
        return c ? c->not_after_ms - want->renew_before_ms : 0;
}

/* Rules 0 and 12: renew the leaves of the member whose certificate expires first. */
static bool decide_renew(const desired *want, const observation *obs, bool expired_only, step *s)
{
        const obs_cert *c = certs_soonest(obs);
        if (!c)
                return false;
        bool expired = c->not_after_ms <= obs->now_ms;
        if (expired_only ? !expired : c->not_after_ms - want->renew_before_ms > obs->now_ms)
                return false;
        step_release(s);
        memset(s, 0, sizeof(*s));
        s->kind = STEP_RENEW_CERTS;
        s->member = c->member;
        s->reason = expired ? REASON_CERTS_EXPIRED : REASON_RENEWING_CERTS;
        str_assign(&s->message,
                   xasprintf("%s the %s certificate%s%s", expired ? "expired: renew" : "renew",
                             c->surface, c->member ? " of " : "s",
                             c->member ? c->member : " shared by every member"));
        return true;
}

bool decide_renewal(const desired *want, const observation *obs, step *s)
{
        int voters, healthy;
        observation_voters(obs, &voters, &healthy);
        if (!obs->etcd_listed || healthy < quorum(voters))
                return false;
        return decide_renew(want, obs, false, s);
}

/*
 * Rule 13: roll outdated members, followers first (highest ordinal), the
 * leader last. The leader is restarted without a MoveLeader before it:
 * every target stops a member with SIGTERM and a grace of 10 s or more
 * (local: SIGKILL after stop_timeout_ms; hosts: systemd's TimeoutStopSec,
 * 90 s; static Pods and Kubernetes: the Pod's grace period), and etcd (3.4
 * and 3.5, EtcdServer.Stop) hands leadership over inside that graceful
 * stop: to the voter with the longest-lived peer connection, through
 * raft's own transfer, which lets it campaign only once it holds the
 * leader's whole log (the same transfer MoveLeader asks for), within
 * etcd's request timeout. By the time the leader is the one left, every
 * other voter is healthy and already on the new spec, so whichever etcd
 * picks is up to date. A transfer that does not finish (the grace runs
 * out, no peer connected) is a leader's crash: the healthy others keep
 * quorum and elect a leader within one election timeout, and no
 * committed entry is lost. This is what a rolling restart by hand does,
 * and it saves a pass and an election per rolled leader.
 */
static bool decide_roll(const observation *obs, int voters, int healthy, step *s)
{
        const obs_member *next = NULL;
        const obs_member *leader = NULL;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!is_voter(m) || !m->outdated)
                        continue;
                if (obs->leader_id && m->id == obs->leader_id) {
                        leader = m;
                        continue;
                }
                if (!next || m->ordinal > next->ordinal)
                        next = m;
        }
        if (!next && !leader)
                return false;
        if (healthy < voters) {
                set(s, STEP_WAIT, next ? next : leader, REASON_UPGRADING,
                    "waiting for every member to be healthy before the next restart");
                return true;
        }
        if (!next) {
                set(s, STEP_RESTART_MEMBER, leader, REASON_UPGRADING,
                    voters > 1 ? "restart member %s, the leader, on its new spec (etcd hands "
                                 "leadership to an up-to-date voter as it stops)"
                               : "restart member %s on its new spec",
                    leader->name);
                return true;
        }
        set(s, STEP_RESTART_MEMBER, next, REASON_UPGRADING, "restart member %s on its new spec",
            next->name);
        return true;
}

void step_release(step *s)
{
        if (!s)
                return;
        free(s->message);
        s->message = NULL;
}

void step_say(step *s, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        str_assign(&s->message, xvasprintf(fmt, ap));
        va_end(ap);
}

static void decide_rules(const desired *want, const observation *obs, step *s);

void decide(const desired *want, const observation *obs, step *s)
{
        memset(s, 0, sizeof(*s));
        decide_rules(want, obs, s);
        if (!s->message)
                s->message = xstrdup("");
}

static void decide_rules(const desired *want, const observation *obs, step *s)
{
        if (decide_renew(want, obs, true, s))
                return;
        if (want->takeover && !obs->etcd_listed) {
                set(s, STEP_WAIT, NULL, REASON_TAKING_OVER,
                    "no member of the cluster being taken over answers; nothing is started");
                return;
        }
        if (decide_bootstrap(want, obs, s)) /* rules 1 (static) and 1b: bootstrap.c */
                return;
        if (decide_seed(want, obs, s))
                return;
        if (decide_restart_stopped(want, obs, s))
                return;
        if (!obs->etcd_listed && want->replicas == 0) {
                bool all_stopped = true;
                for (size_t i = 0; i < obs->n; i++)
                        if (obs->members[i].runtime != MEMBER_STOPPED &&
                            obs->members[i].runtime != MEMBER_ABSENT)
                                all_stopped = false;
                if (all_stopped) {
                        set(s, STEP_CONVERGED, NULL, REASON_PAUSED, "paused; data kept");
                        return;
                }
        }
        if (!obs->etcd_listed) {
                set(s, STEP_WAIT, NULL, REASON_QUORUM_LOST,
                    "no member answers; waiting for members to come back");
                return;
        }

        int voters, healthy;
        observation_voters(obs, &voters, &healthy);
        if (healthy < quorum(voters)) {
                set(s, STEP_WAIT, NULL, REASON_QUORUM_LOST,
                    "%d of %d voters healthy, quorum needs %d; nothing is removed", healthy, voters,
                    quorum(voters));
                return;
        }

        if (decide_pending(obs, s) || decide_leftovers(obs, s) ||
            decide_replace(obs, voters, healthy, s) ||
            decide_takeover(want, obs, voters, healthy, s))
                return;

        int members = 0;
        for (size_t i = 0; i < obs->n; i++)
                if (obs->members[i].in_etcd)
                        members++;
        if (want->replicas > 0 && members < want->replicas) {
                set(s, STEP_ADD_LEARNER, NULL, REASON_SCALING_UP, "add a learner (%d → %d)",
                    members, members + 1);
                s->ordinal = obs->next_ordinal;
                return;
        }
        if (decide_scale_down(want, obs, voters, healthy, s))
                return;
        if (want->replicas == 0) {
                for (size_t i = 0; i < obs->n; i++) {
                        const obs_member *m = &obs->members[i];
                        if (is_voter(m) && m->runtime != MEMBER_STOPPED) {
                                set(s, STEP_STOP_MEMBER, m, REASON_PAUSED,
                                    "pause: stop %s and keep its data", m->name);
                                return;
                        }
                }
                set(s, STEP_CONVERGED, NULL, REASON_PAUSED, "paused");
                return;
        }
        if (decide_renew(want, obs, false, s) || decide_roll(obs, voters, healthy, s))
                return;
        if (healthy < voters) {
                set(s, STEP_WAIT, NULL, REASON_RECOVERING,
                    "%d of %d voters healthy; waiting for the rest to recover", healthy, voters);
                return;
        }
        set(s, STEP_CONVERGED, NULL, REASON_QUORUM_HEALTHY, "%d of %d voters healthy", healthy,
            voters);
}
