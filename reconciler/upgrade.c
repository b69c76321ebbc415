/*
 * Health gates of a rolling version change (see reconciler/upgrade.h).
 *
 * The gates are judged from what a pass observed and nothing else, except
 * the one member rolled last and when (upgrade_track): that is what turns
 * "not serving yet" into "did not come back" after the start timeout. A
 * gitcd that restarts in the middle of a rollout has no track: it goes on
 * with the next member once decide() sees every voter healthy, and a member
 * crash-looping on the new version still stops the rollout.
 *
 * Order of the rules, first match wins:
 *   1. a member that is down and was last started on another version than
 *      the spec's: restart it on the spec's version (this is how a rollback
 *      brings a failed member back, instead of decide() replacing it);
 *   2. a member that crash-loops on the spec's version while the rollout is
 *      under way, or the member rolled last not serving the spec's version
 *      within the start timeout: the rollout failed;
 *   3. a member rolled last, its gates not passed: every voter answers and
 *      is ready, the members on the spec's version serve it, every voter is
 *      within max_raft_lag of the leader's raft index, and all of that has
 *      held for the settle time; until then the step waits;
 *   4. otherwise the step stands; a restart is tracked from now.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reconciler/upgrade.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

const upgrade_policy upgrade_policy_default = {
    .settle_ms = 5000,
    .start_timeout_ms = 120 * 1000,
    .max_raft_lag = 1000,
};

void upgrade_track_release(upgrade_track *t)
{
        free(t->member);
        free(t->version);
        memset(t, 0, sizeof(*t));
}

static bool on_version(const upgrade_member *m, const char *version)
{
        return m->started_version && streq(m->started_version, version);
}

bool upgrade_in_progress(const upgrade_obs *o)
{
        for (size_t i = 0; i < o->n; i++)
                if (o->members[i].started_version && !on_version(&o->members[i], o->version))
                        return true;
        return false;
}

static const upgrade_member *member_named(const upgrade_obs *o, const char *name)
{
        for (size_t i = 0; name && i < o->n; i++)
                if (streq(o->members[i].name, name))
                        return &o->members[i];
        return NULL;
}

static void say(step *s, step_kind kind, const char *member, const char *reason, const char *fmt,
                ...) _printf_(5, 6);
static void say(step *s, step_kind kind, const char *member, const char *reason, const char *fmt,
                ...)
{
        s->kind = kind;
        s->member = member;
        s->reason = reason;
        va_list ap;
        va_start(ap, fmt);
        str_assign(&s->message, xvasprintf(fmt, ap));
        va_end(ap);
}

static bool is_down(const upgrade_member *m)
{
        return m->runtime == MEMBER_CRASHED || m->runtime == MEMBER_CRASH_LOOP;
}

/* Rule 1. */
static bool roll_back_down_member(const upgrade_obs *o, step *s)
{
        for (size_t i = 0; i < o->n; i++) {
                const upgrade_member *m = &o->members[i];
                if (!m->voter || !is_down(m) || !m->started_version || on_version(m, o->version))
                        continue;
                say(s, STEP_RESTART_MEMBER, m->name, REASON_UPGRADING,
                    "restart member %s on etcd %s (it is %s on %s)", m->name, o->version,
                    member_runtime_state_name(m->runtime), m->started_version);
                s->member_id = m->id;
                return true;
        }
        return false;
}

/* The versions members not rolled yet still run, for the failure message. */
static void untouched(const upgrade_obs *o, strbuf *out)
{
        int n = 0;
        for (size_t i = 0; i < o->n; i++) {
                const upgrade_member *m = &o->members[i];
                if (!m->started_version || on_version(m, o->version))
                        continue;
                sb_printf(out, "%s%s (%s)", n++ ? ", " : "", m->name, m->started_version);
        }
}

static void failed(const upgrade_obs *o, const upgrade_member *m, const char *what, step *s)
{
        strbuf rest = STRBUF_INIT;
        untouched(o, &rest);
        const char *old = NULL;
        for (size_t i = 0; i < o->n && !old; i++)
                if (o->members[i].started_version && !on_version(&o->members[i], o->version))
                        old = o->members[i].started_version;
        say(s, STEP_WAIT, m->name, REASON_UPGRADE_FAILED,
            "member %s %s on etcd %s; rollout stopped%s%s%s%s", m->name, what, o->version,
            rest.len ? ", untouched: " : "", sb_str(&rest),
            old ? "; set spec.version back to " : "", old ? old : "");
        sb_release(&rest);
}

/* Rule 2. */
static bool check_failed(const upgrade_policy *pol, const upgrade_obs *o, const upgrade_track *t,
                         step *s)
{
        bool rolling = upgrade_in_progress(o);
        for (size_t i = 0; rolling && i < o->n; i++) {
                const upgrade_member *m = &o->members[i];
                if (on_version(m, o->version) && m->runtime == MEMBER_CRASH_LOOP) {
                        failed(o, m, "crash-loops", s);
                        return true;
                }
        }
        const upgrade_member *m = t->member ? member_named(o, t->member) : NULL;
        if (!m || o->now_ms - t->rolled_ms <= pol->start_timeout_ms)
                return false;
        bool serves = m->answered && m->runtime == MEMBER_READY && m->server_version &&
                      streq(m->server_version, o->version);
        if (serves)
                return false;
        char what[160];
        snprintf(what, sizeof(what), "did not come back within %" PRId64 " s (%s%s%s)",
                 pol->start_timeout_ms / 1000, member_runtime_state_name(m->runtime),
                 m->answered && m->server_version ? ", serves " : "",
                 m->answered && m->server_version ? m->server_version : "");
        failed(o, m, what, s);
        return true;
}

/* Rule 3: NULL when every gate holds, else what is awaited (static or in buf). */
static const char *gate_open(const upgrade_policy *pol, const upgrade_obs *o, char *buf,
                             size_t size)
{
        uint64_t head = 0;
        for (size_t i = 0; i < o->n; i++)
                if (o->members[i].id == o->leader_id && o->members[i].answered)
                        head = o->members[i].raft_index;
        if (!o->leader_id || !head)
                return "waiting for a leader that answers";
        for (size_t i = 0; i < o->n; i++) {
                const upgrade_member *m = &o->members[i];
                if (!m->voter)
                        continue;
                if (!m->answered || m->runtime != MEMBER_READY) {
                        snprintf(buf, size, "waiting for member %s to serve (%s)", m->name,
                                 member_runtime_state_name(m->runtime));
                        return buf;
                }
                if (on_version(m, o->version) &&
                    !(m->server_version && streq(m->server_version, o->version))) {
                        snprintf(buf, size, "waiting for member %s to serve etcd %s (it says %s)",
                                 m->name, o->version, m->server_version ? m->server_version : "?");
                        return buf;
                }
                if (head > m->raft_index && head - m->raft_index > pol->max_raft_lag) {
                        snprintf(buf, size,
                                 "waiting for member %s to catch up: %" PRIu64
                                 " raft entries behind the leader",
                                 m->name, head - m->raft_index);
                        return buf;
                }
        }
        (void)pol;
        return NULL;
}

upgrade_verdict upgrade_gate(const upgrade_policy *pol, const upgrade_obs *o, upgrade_track *t,
                             step *s)
{
        /* A track for another version (the spec changed since): forget it. */
        if (t->member && !streq_ptr(t->version, o->version))
                upgrade_track_release(t);
        if (!upgrade_in_progress(o) && !t->member)
                return UPGRADE_PASS;

        if (roll_back_down_member(o, s)) {
                upgrade_track_release(t);
                return UPGRADE_PASS;
        }
        if (check_failed(pol, o, t, s))
                return UPGRADE_FAILED;

        if (t->member) {
                char buf[192];
                const char *wait = gate_open(pol, o, buf, sizeof(buf));
                if (wait) {
                        t->healthy_since_ms = 0;
                        say(s, STEP_WAIT, t->member, REASON_UPGRADING, "%s", wait);
                        return UPGRADE_WAIT;
                }
                if (!t->healthy_since_ms)
                        t->healthy_since_ms = o->now_ms;
                int64_t held = o->now_ms - t->healthy_since_ms;
                if (held < pol->settle_ms) {
                        say(s, STEP_WAIT, t->member, REASON_UPGRADING,
                            "member %s serves etcd %s and caught up; settling (%" PRId64
                            " of %" PRId64 " s healthy)",
                            t->member, o->version, held / 1000, pol->settle_ms / 1000);
                        return UPGRADE_WAIT;
                }
                upgrade_track_release(t); /* its gates passed */
        }
        if (s->kind == STEP_RESTART_MEMBER && s->member) {
                const upgrade_member *m = member_named(o, s->member);
                if (m && m->started_version && !on_version(m, o->version)) {
                        t->member = xstrdup(s->member);
                        t->version = xstrdup(o->version);
                        t->rolled_ms = o->now_ms;
                        t->healthy_since_ms = 0;
                }
        }
        return UPGRADE_PASS;
}
