/*
 * The machines members run on (see machines.h): machines_judge() is pure;
 * machines_pass() asks the target for its preflights (target_machine_ops),
 * records them, audits a new verdict and stores the condition. It runs at
 * the end of every pass that observed the cluster, after the step was
 * taken, so a placement's preflights are recorded by the pass that made
 * them; it never changes the pass's outcome or its step.
 *
 * It also derives etcd's heartbeat and election timeouts from the peer
 * RTT the preflights measured (reconciler/timeouts.h) when the spec sets
 * neither, keeps them in the state store (state_timeouts) and the next
 * pass renders them (machines_apply_timeouts): a new value reaches the
 * members through the member configuration's hash, so by the normal
 * rolling restart, one member at a time. With the preflight off nothing
 * is derived and what was is forgotten (etcd's defaults again).
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reconciler/internal.h"
#include "reconciler/machines.h"
#include "reconciler/timeouts.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static bool has_name(char *const *names, size_t n, const char *name)
{
        for (size_t i = 0; name && i < n; i++)
                if (streq(names[i], name))
                        return true;
        return false;
}

int machines_judge(const state_preflight_list *l, char *const *names, size_t n, bool *ret_healthy,
                   char **ret_message)
{
        size_t counted = 0, failed = 0;
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < l->n; i++) {
                const state_preflight *p = l->items[i];
                if (!has_name(names, n, p->member) || streq_ptr(p->verdict, "unmeasured"))
                        continue;
                counted++;
                if (!streq_ptr(p->verdict, "failed"))
                        continue;
                char when[40] = "";
                format_rfc3339(p->time_ms, when, sizeof(when));
                sb_printf(&sb, "%s%s (member %s, measured %s): %s", failed ? "; " : "", p->machine,
                          p->member, when, p->reason ? p->reason : "failed");
                failed++;
        }
        if (counted == 0) {
                sb_release(&sb);
                return 0;
        }
        *ret_healthy = failed == 0;
        if (failed == 0)
                sb_printf(&sb,
                          "the last preflight of each of the %zu machines holding members "
                          "passed",
                          counted);
        *ret_message = xstrdup(sb_str(&sb));
        sb_release(&sb);
        return 1;
}

/* A machine's new verdict: audited (machine.preflight) and logged, once per change. */
static void audit_verdict(reconciler *r, const char *cluster, const world *w,
                          const state_preflight *p)
{
        _cleanup_free_ char *msg = xasprintf(
            "machine %s%s%s%s: preflight %s%s%s", p->machine, p->member ? " (member " : "",
            p->member ? p->member : "", p->member ? ")" : "", p->verdict, p->reason ? ": " : "",
            p->reason ? p->reason : "");
        json_t *j =
            json_pack("{s:s, s:s?, s:s, s:I, s:I, s:I}", "machine", p->machine, "member", p->member,
                      "verdict", p->verdict, "syncP99Us", (json_int_t)p->sync_p99_us, "freeBytes",
                      (json_int_t)p->free_bytes, "clockOffsetMs", (json_int_t)p->offset_ms);
        _cleanup_free_ char *after = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        audit(r, cluster, "machine.preflight", msg, NULL, after,
              streq(p->verdict, "passed") ? "success" : "failure", 0, w->commit, w->author);
        if (streq(p->verdict, "passed"))
                log_info("%s: %s", cluster, msg);
        else
                log_warn("%s: %s", cluster, msg);
}

void machines_apply_timeouts(reconciler *r, cluster_ctx *x)
{
        etcd_options *o = &x->latched->options;
        o->heartbeat_interval_ms = x->spec_heartbeat_ms;
        o->election_timeout_ms = x->spec_election_ms;
        if (x->spec_heartbeat_ms || x->spec_election_ms)
                return;
        state_timeouts t;
        if (state_timeouts_get(r->opts.db, x->name, &t) <= 0)
                return;
        if (t.heartbeat_ms == TIMEOUTS_DEFAULT_HEARTBEAT_MS &&
            t.election_ms == TIMEOUTS_DEFAULT_ELECTION_MS)
                return; /* etcd's defaults: rendered as before, no restart */
        o->heartbeat_interval_ms = t.heartbeat_ms;
        o->election_timeout_ms = t.election_ms;
}

/* Whether t (0: none) puts other timeouts than etcd's defaults into the units. */
static bool renders_other(int k, const state_timeouts *t)
{
        return k > 0 && (t->heartbeat_ms != TIMEOUTS_DEFAULT_HEARTBEAT_MS ||
                         t->election_ms != TIMEOUTS_DEFAULT_ELECTION_MS);
}

/*
 * Derive the timeouts from the slowest link the member machines' last
 * preflights measured, and record them when they moved by more than a
 * factor of two from those in force (reconciler/timeouts.h). Returns
 * whether what the units render changed (a rolling restart follows).
 */
static bool derive_timeouts(reconciler *r, const char *cluster, const world *w,
                            const state_preflight_list *known, char *const *names, size_t n)
{
        const cluster_ctx *x = cluster_ctx_get(r, cluster);
        state_timeouts cur = {0};
        int k = state_timeouts_get(r->opts.db, cluster, &cur);
        if (k < 0)
                return false;
        if (x->spec_heartbeat_ms || x->spec_election_ms) {
                if (k > 0) /* the spec's stand */
                        (void)state_timeouts_clear(r->opts.db, cluster);
                return false;
        }
        int64_t rtt = -1;
        for (size_t i = 0; i < known->n; i++) {
                const state_preflight *p = known->items[i];
                if (has_name(names, n, p->member) && p->rtt_peers > 0)
                        rtt = MAX(rtt, p->rtt_slowest_us);
        }
        if (rtt < 0)
                return false; /* nothing measured yet: what is in force stays */
        state_timeouts next = {.rtt_us = rtt, .time_ms = wall(r)};
        timeouts_derive(rtt, &next.heartbeat_ms, &next.election_ms);
        if (k > 0 && !timeouts_moved(cur.heartbeat_ms, next.heartbeat_ms))
                return false;
        if (k == 0 && !timeouts_moved(0, next.heartbeat_ms)) {
                /* etcd's defaults stand; kept so that plan shows what they rest on */
                next.heartbeat_ms = TIMEOUTS_DEFAULT_HEARTBEAT_MS;
                next.election_ms = TIMEOUTS_DEFAULT_ELECTION_MS;
        }
        if (state_timeouts_set(r->opts.db, cluster, &next) < 0) {
                log_warn("%s: cannot record the derived timeouts: %s", cluster, state_last_error());
                return false;
        }
        bool changed = renders_other(k, &cur) != renders_other(1, &next) ||
                       (k > 0 && (cur.heartbeat_ms != next.heartbeat_ms ||
                                  cur.election_ms != next.election_ms));
        if (changed) {
                _cleanup_free_ char *msg = xasprintf(
                    "heartbeat interval %d ms, election timeout %d ms, derived from the peer RTT "
                    "(slowest link's median %.1f ms; was %d ms / %d ms): a rolling restart "
                    "follows",
                    next.heartbeat_ms, next.election_ms, rtt / 1000.0,
                    k > 0 ? cur.heartbeat_ms : TIMEOUTS_DEFAULT_HEARTBEAT_MS,
                    k > 0 ? cur.election_ms : TIMEOUTS_DEFAULT_ELECTION_MS);
                audit(r, cluster, "timeouts.derived", msg, NULL, NULL, "success", 0, w->commit,
                      w->author);
                log_info("%s: %s", cluster, msg);
        }
        return changed;
}

/* A converged pass whose timeouts changed passes again soon: the rolling restart. */
static void timeouts_changed(pass_result *res)
{
        if (res->outcome != PASS_CONVERGED)
                return;
        res->outcome = PASS_WAITING;
        res->poll_ms = 1000;
        pass_say(res, "etcd's heartbeat interval and election timeout changed: a rolling restart "
                      "follows");
}

void machines_pass(reconciler *r, const char *cluster, const etcd_cluster *c, const world *w,
                   pass_result *res)
{
        target *t = r->opts.target;
        if (!t->ops->machines || !t->ops->machines->preflights || !c)
                return;
        state_preflight_list known = {0}, got = {0};
        if (state_preflight_list_get(r->opts.db, cluster, &known) < 0) {
                log_warn("%s: cannot read the machines' preflights: %s", cluster,
                         state_last_error());
                return;
        }
        int k = t->ops->machines->preflights(t, c, &known, wall(r), &got);
        state_preflight_list_release(&known);
        if (k < 0)
                log_warn("%s: machines' preflights: %s", cluster, target_last_error(t));
        state_timeouts was;
        int had = k == 0 ? state_timeouts_get(r->opts.db, cluster, &was) : 0;
        if (had > 0 && state_timeouts_clear(r->opts.db, cluster) == 0 && renders_other(had, &was))
                timeouts_changed(res); /* off: etcd's defaults again */
        if (k <= 0)
                return; /* off (no condition), or the target could not say */
        for (size_t i = 0; i < got.n; i++) {
                int n = state_preflight_set(r->opts.db, got.items[i]);
                if (n < 0)
                        log_warn("%s: cannot record the preflight of %s: %s", cluster,
                                 got.items[i]->machine, state_last_error());
                else if (n > 0)
                        audit_verdict(r, cluster, w, got.items[i]);
        }
        state_preflight_list_release(&got);
        if (state_preflight_list_get(r->opts.db, cluster, &known) < 0)
                return;
        char **names = xcalloc(w->records.n + 1, sizeof(char *));
        for (size_t i = 0; i < w->records.n; i++)
                names[i] = w->records.items[i]->name;
        if (derive_timeouts(r, cluster, w, &known, names, w->records.n))
                timeouts_changed(res);
        bool healthy = true;
        _cleanup_free_ char *msg = NULL;
        if (machines_judge(&known, names, w->records.n, &healthy, &msg) > 0) {
                conditions_machines(r, cluster, w, healthy, msg);
                res->machines = healthy ? 1 : -1;
                str_assign(&res->machines_message, TAKE_PTR(msg));
        }
        free(names);
        state_preflight_list_release(&known);
}
