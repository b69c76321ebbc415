/*
 * Members proven to hold the same data: the check, the freeze and the
 * repair (reconciler/consistency.h says what each does and when; the rules
 * themselves are reconciler/proof.c's, pure).
 *
 * Design decisions:
 *   - The check goes through the reconciler's etcd seam (hash_kv_at), one
 *     member at a time on its own endpoint, followers first: a member's
 *     HashKV holds that member's writes while it reads the whole keyspace,
 *     and one member at a time keeps a quorum free to commit. Its cost is
 *     bounded: one Status and one HashKV per voter per check.
 *   - Everything the check learns is one row in the state store, written
 *     after the check: a gitcd killed mid-check simply checks again. The
 *     freeze is part of that row, so it survives restarts; only a repair
 *     whose check afterwards agrees lifts it.
 *   - What is audited is what a person needs to follow: a disagreement
 *     (consistency.diverged), the freeze and its lifting, the first step
 *     held (once per step), agreement found again, and every repair's
 *     request, start, refusal and end. A periodic check that agrees again
 *     is only the row (gitcd status, metrics), not 288 audit events a day.
 *   - A repair's record is written after each effect and each effect is
 *     idempotent (the replacement is act.c's, journaled; a disarm or a
 *     lifted freeze done twice is done once), so gitcd killed at a repair's
 *     failpoints (repair.after-start, repair.after-replacement,
 *     repair.after-disarm, repair.after-unfreeze) finishes it on its next
 *     run.
 *   - etcd's CORRUPT alarm is listed by maintenance/ (its one observer,
 *     the CorruptAlarm condition); an alarm raised after the last lift
 *     freezes. gitcd disarms it only at the end of a person's repair, once
 *     its own check found every member agreeing.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maintenance/due.h"
#include "reconciler/consistency.h"
#include "reconciler/proof.h"
#include "render/render.h"
#include "state/carotate.h"
#include "state/maintenance.h"
#include "state/recovery.h"
#include "util/failpoint.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define HASH_TIMEOUT_MS (5 * 60 * 1000)

/* ---- the audit log --------------------------------------------------------- */

static void audit_as(const consistency_env *env, const char *action, const char *reason,
                     json_t *after, const char *outcome, const char *commit, const char *author,
                     int64_t duration_ms)
{
        _cleanup_free_ char *text =
            after ? json_dumps(after, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(after);
        state_audit_event ev = {
            .time_ms = env->now_ms,
            .cluster = (char *)env->cluster,
            .commit = (char *)commit,
            .author = (char *)author,
            .action = (char *)action,
            .reason = (char *)reason,
            .after_json = text,
            .outcome = (char *)outcome,
            .duration_ms = duration_ms,
        };
        if (state_audit_append(env->db, &ev, NULL) < 0)
                log_warn("%s: could not write the audit event %s: %s", env->cluster, action,
                         state_last_error());
}

static void audit(const consistency_env *env, const char *action, const char *reason, json_t *after,
                  const char *outcome)
{
        audit_as(env, action, reason, after, outcome, env->commit, env->author, 0);
}

static json_t *check_json(const state_consistency *row)
{
        json_t *o =
            json_pack("{s:I, s:I, s:s?}", "revision", (json_int_t)row->revision, "compactRevision",
                      (json_int_t)row->compact_revision, "verdict", row->verdict);
        json_t *h = row->hashes ? json_loads(row->hashes, 0, NULL) : NULL;
        json_object_set_new(o, "hashes", h ? h : json_object());
        if (!isempty(row->minority))
                json_object_set_new(o, "minority", json_string(row->minority));
        return o;
}

/* ---- the row ---------------------------------------------------------------- */

static int save(const consistency_env *env, const consistency_pass *cp)
{
        int k = state_consistency_put(env->db, cp->row);
        if (k < 0)
                log_warn("%s: cannot record the consistency check: %s", env->cluster,
                         state_last_error());
        return k;
}

static void set_str(char **field, const char *v)
{
        free(*field);
        *field = xstrdup_null(v);
}

/* ---- the freeze --------------------------------------------------------------- */

/* The sentence a frozen cluster shows, with what a person can run. */
static char *freeze_message(const consistency_env *env, const char *cause, const char *what,
                            const char *minority)
{
        if (streq(cause, "hashes")) {
                _cleanup_free_ char *first = xstrdup(minority ? minority : "");
                char *comma = strchr(first, ',');
                if (comma)
                        *comma = '\0';
                return xasprintf("%s; voluntary changes are held until a person acts: gitcd repair "
                                 "%s --replace %s%s",
                                 what, env->cluster, first,
                                 comma ? " (then the others of the minority)" : "");
        }
        if (streq(cause, "no-majority"))
                return xasprintf("%s; voluntary changes are held until a person acts "
                                 "(docs/consistency.md)",
                                 what);
        return xasprintf("etcd raised a CORRUPT alarm (its own check found members whose data "
                         "differs); voluntary changes are held until a person acts: gitcd repair "
                         "%s --recheck",
                         env->cluster);
}

static void freeze(const consistency_env *env, consistency_pass *cp, const char *cause,
                   const char *what)
{
        state_consistency *row = cp->row;
        _cleanup_free_ char *msg = freeze_message(env, cause, what, row->minority);
        bool fresh = row->frozen_ms == 0;
        if (!fresh && streq_ptr(row->frozen_cause, cause) && streq_ptr(row->frozen_message, msg))
                return;
        if (fresh)
                row->frozen_ms = env->now_ms;
        set_str(&row->frozen_cause, cause);
        set_str(&row->frozen_message, msg);
        cp->frozen = true;
        str_assign(&cp->message, xstrdup(msg));
        if (!fresh)
                return;
        json_t *after = check_json(row);
        json_object_set_new(after, "cause", json_string(cause));
        audit(env, "consistency.frozen", msg, after, "failure");
        log_error("%s: frozen: %s", env->cluster, msg);
}

/* A person's repair was proven: every member agrees. Disarm CORRUPT, lift the freeze. */
static void lift(const consistency_env *env, consistency_pass *cp, const state_repair *rep)
{
        state_consistency *row = cp->row;
        size_t disarmed = 0;
        if (env->conn && env->etcd->corrupt_disarm) {
                if (env->etcd->corrupt_disarm(env->conn, &disarmed) < 0)
                        log_warn("%s: cannot disarm etcd's CORRUPT alarms: %s", env->cluster,
                                 env->etcd->last_error(env->conn));
                else if (disarmed > 0) {
                        FAILPOINT("repair.after-disarm");
                        _cleanup_free_ char *why =
                            xasprintf("CORRUPT alarm disarmed: every member agrees at revision "
                                      "%" PRId64 " after repair %" PRId64,
                                      row->revision, rep->id);
                        audit_as(env, "alarm.disarmed", why,
                                 json_pack("{s:s, s:I}", "alarm", "CORRUPT", "count",
                                           (json_int_t)disarmed),
                                 "success", rep->commit, rep->requested_by, 0);
                        log_info("%s: %s", env->cluster, why);
                        /* CorruptAlarm (its checker is maintenance/'s) says so now, not at
                         * maintenance's next look */
                        maint_condition cond;
                        maint_check_alarm("CorruptAlarm", "CORRUPT", NULL, &cond);
                        if (state_cluster_set_condition(env->db, env->cluster, cond.type,
                                                        cond.status, cond.reason, cond.message,
                                                        env->now_ms) == 1)
                                audit_as(env, "condition.changed", cond.message,
                                         json_pack("{s:s, s:s, s:s}", "type", cond.type, "status",
                                                   cond.status, "reason", cond.reason),
                                         "success", rep->commit, rep->requested_by, 0);
                        free(cond.message);
                }
        }
        if (!row->frozen_ms)
                return;
        _cleanup_free_ char *why =
            xasprintf("every member agrees at revision %" PRId64 " after repair %" PRId64
                      " (asked by %s): voluntary changes go on",
                      row->revision, rep->id, rep->requested_by ? rep->requested_by : "?");
        json_t *after = check_json(row);
        json_object_set_new(after, "frozenSinceMs", json_integer((json_int_t)row->frozen_ms));
        row->frozen_ms = 0;
        set_str(&row->frozen_cause, NULL);
        set_str(&row->frozen_message, NULL);
        set_str(&row->held, NULL);
        row->lifted_ms = env->now_ms;
        cp->frozen = false;
        str_assign(&cp->message, NULL);
        audit_as(env, "consistency.unfrozen", why, after, "success", rep->commit, rep->requested_by,
                 0);
        log_info("%s: %s", env->cluster, why);
}

/* ---- the check ------------------------------------------------------------------ */

/* The members a check compares: voters with a client URL, followers first, the leader last. */
typedef struct check_set {
        const char **names;
        const char **urls;
        size_t n;
        int voters;    /* every voter etcd lists */
        bool complete; /* every voter is ready and can be asked */
} check_set;

static const char *client_url_of(const consistency_env *env, const char *name)
{
        for (size_t i = 0; name && i < env->records->n; i++)
                if (streq(env->records->items[i]->name, name))
                        return env->records->items[i]->client_url;
        return NULL;
}

static void check_set_of(const consistency_env *env, check_set *cs)
{
        const observation *obs = env->obs;
        memset(cs, 0, sizeof(*cs));
        cs->names = xcalloc(obs->n + 1, sizeof(char *));
        cs->urls = xcalloc(obs->n + 1, sizeof(char *));
        cs->complete = true;
        const obs_member *leader = NULL;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!m->in_etcd || m->learner)
                        continue;
                cs->voters++;
                const char *url = client_url_of(env, m->name);
                if (m->runtime != MEMBER_READY || isempty(url)) {
                        cs->complete = false;
                        continue;
                }
                if (obs->leader_id && m->id == obs->leader_id) {
                        leader = m;
                        continue;
                }
                cs->names[cs->n] = m->name;
                cs->urls[cs->n++] = url;
        }
        if (leader) {
                cs->names[cs->n] = leader->name;
                cs->urls[cs->n++] = client_url_of(env, leader->name);
        }
}

static void check_set_release(check_set *cs)
{
        free(cs->names);
        free(cs->urls);
}

static int answer_cmp(const void *x, const void *y)
{
        return strcmp(((const proof_answer *)x)->name, ((const proof_answer *)y)->name);
}

/*
 * Compare the members of cs: each one's applied revision (Status), then
 * each one's HashKV at the smallest of them. The verdict in *res; a call
 * that fails makes it inconclusive with that call's error.
 */
static void run_check(const consistency_env *env, const check_set *cs, proof_result *res,
                      int64_t *ret_duration_ms)
{
        int64_t t0 = now_mono_ms();
        proof_answer *a = xcalloc(cs->n + 1, sizeof(proof_answer));
        _cleanup_free_ char *error = NULL;
        for (size_t i = 0; i < cs->n && !error; i++) {
                a[i].name = cs->names[i];
                etcd_endpoint_status *st = NULL;
                int k = env->etcd->status_at ? env->etcd->status_at(env->conn, cs->urls[i], &st)
                                             : -ENOTSUP;
                if (k < 0) {
                        error = xasprintf("%s did not answer Status: %s", cs->names[i],
                                          env->etcd->status_at ? env->etcd->last_error(env->conn)
                                                               : "not supported");
                        break;
                }
                a[i].revision = st->revision;
                etcd_endpoint_status_free(st);
        }
        int64_t rev = error ? 0 : proof_revision(a, cs->n);
        if (!error && rev <= 0)
                error = xstrdup("a member reported no revision");
        int timeout = env->hash_timeout_ms > 0 ? env->hash_timeout_ms : HASH_TIMEOUT_MS;
        for (size_t i = 0; i < cs->n && !error; i++) {
                int k = env->etcd->hash_kv_at(env->conn, cs->urls[i], rev, timeout, &a[i].hash,
                                              &a[i].compact_revision);
                if (k < 0) {
                        error = xasprintf("%s did not answer HashKV at revision %" PRId64 ": %s",
                                          cs->names[i], rev, env->etcd->last_error(env->conn));
                        break;
                }
                a[i].hashed = true;
        }
        /* asked followers first; told by name */
        if (!error)
                qsort(a, cs->n, sizeof(*a), answer_cmp);
        if (error) {
                memset(res, 0, sizeof(*res));
                res->verdict = PROOF_INCONCLUSIVE;
                res->revision = rev;
                res->message = TAKE_PTR(error);
        } else
                proof_judge(a, cs->n, cs->voters, rev, res);
        free(a);
        *ret_duration_ms = now_mono_ms() - t0;
}

/*
 * Record what a check found: the row, and for a disagreement the audit
 * event (when it differs from the last one) and the freeze. Returns the
 * verdict.
 */
static proof_verdict record_check(const consistency_env *env, consistency_pass *cp,
                                  proof_result *res, int64_t duration_ms)
{
        state_consistency *row = cp->row;
        row->attempt_ms = env->now_ms;
        if (res->verdict == PROOF_INCONCLUSIVE) {
                set_str(&row->attempt_error, res->message);
                log_debug("%s: consistency check: %s", env->cluster, res->message);
                (void)save(env, cp);
                return res->verdict;
        }
        bool changed = !streq_ptr(row->verdict, proof_verdict_name(res->verdict)) ||
                       !streq_ptr(row->minority, res->minority);
        bool was_bad = row->verdict && !streq(row->verdict, "agree");
        row->checked_ms = env->now_ms;
        row->revision = res->revision;
        row->compact_revision = res->compact_revision;
        set_str(&row->verdict, proof_verdict_name(res->verdict));
        set_str(&row->hashes, res->hashes);
        set_str(&row->minority, res->minority);
        row->duration_ms = duration_ms;
        set_str(&row->attempt_error, NULL);
        row->due = false;
        if (res->verdict == PROOF_AGREE) {
                if (was_bad) {
                        audit(env, "consistency.agreed", res->message, check_json(row), "success");
                        log_info("%s: %s", env->cluster, res->message);
                } else
                        log_debug("%s: consistency check: %s", env->cluster, res->message);
        } else {
                if (changed) {
                        audit(env, "consistency.diverged", res->message, check_json(row),
                              "failure");
                        log_error("%s: %s", env->cluster, res->message);
                }
                freeze(env, cp, res->verdict == PROOF_MINORITY ? "hashes" : "no-majority",
                       res->message);
        }
        (void)save(env, cp);
        return res->verdict;
}

/* Every voter ready, no learner, no member etcd does not list: the membership is at rest. */
static bool settled(const observation *obs)
{
        if (!obs->etcd_listed)
                return false;
        int voters = 0;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!m->in_etcd || m->learner || m->unstarted || m->runtime != MEMBER_READY)
                        return false;
                voters++;
        }
        return voters > 0;
}

/* A check over every voter (every one ready). */
static proof_verdict check_all(const consistency_env *env, consistency_pass *cp)
{
        check_set cs;
        check_set_of(env, &cs);
        proof_result res = {0};
        int64_t took = 0;
        if (!cs.complete) {
                res.verdict = PROOF_INCONCLUSIVE;
                res.message = xstrdup("not every voter is ready to be compared");
        } else
                run_check(env, &cs, &res, &took);
        proof_verdict v = record_check(env, cp, &res, took);
        proof_result_release(&res);
        check_set_release(&cs);
        return v;
}

/* ---- repairs ---------------------------------------------------------------------- */

static void repair_audit(const consistency_env *env, const state_repair *rep, const char *action,
                         const char *reason, const char *outcome)
{
        json_t *after =
            json_pack("{s:I, s:s, s:s?, s:s?}", "repair", (json_int_t)rep->id, "kind", rep->kind,
                      "member", rep->member, "replacement", rep->replacement);
        audit_as(env, action, reason, after, outcome, rep->commit, rep->requested_by, 0);
}

static int repair_phase(const consistency_env *env, state_repair *rep, const char *phase)
{
        set_str(&rep->phase, phase);
        return state_repair_update(env->db, rep);
}

/* End the running repair: succeeded, refused or failed, audited and logged. */
static int repair_finish(const consistency_env *env, consistency_pass *cp, const char *how,
                         const char *why)
{
        state_repair *rep = cp->repair;
        bool ok = streq(how, "succeeded");
        int k = state_repair_finish(env->db, rep->id, how, ok ? NULL : why, env->now_ms);
        if (k < 0)
                return k;
        repair_audit(env, rep,
                     ok                      ? "repair.succeeded"
                     : streq(how, "refused") ? "repair.refused"
                                             : "repair.failed",
                     why,
                     ok                      ? "success"
                     : streq(how, "refused") ? "rejected"
                                             : "failure");
        if (ok)
                log_info("%s: repair %" PRId64 " succeeded: %s", env->cluster, rep->id, why);
        else
                log_error("%s: repair %" PRId64 " %s: %s", env->cluster, rep->id, how, why);
        state_repair_free(cp->repair);
        cp->repair = NULL;
        return 0;
}

static int refuse(const consistency_env *env, consistency_pass *cp, const char *fmt, ...)
    _printf_(3, 4);
static int refuse(const consistency_env *env, consistency_pass *cp, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *why = xvasprintf(fmt, ap);
        va_end(ap);
        return repair_finish(env, cp, "refused", why);
}

/* spec.repair with a token not seen before becomes a request (its commit's author asked). */
static int take_spec_request(const consistency_env *env)
{
        const repair_spec *rs = &env->c->repair;
        if (!rs->set || isempty(rs->token) || !rs->replace == !rs->recheck)
                return 0;
        int k = state_repair_token_used(env->db, env->cluster, rs->token);
        if (k != 0)
                return k < 0 ? k : 0;
        state_repair req = {
            .cluster = (char *)env->cluster,
            .kind = rs->replace ? "replace" : "recheck",
            .member = rs->replace,
            .token = rs->token,
            .requested_by = (char *)env->author,
            .commit = (char *)env->commit,
        };
        k = state_repair_request(env->db, &req, env->now_ms, NULL);
        if (k == -EBUSY) {
                log_warn("%s: spec.repair waits: %s", env->cluster, state_last_error());
                return 0;
        }
        if (k >= 0) {
                json_t *after = json_pack("{s:s, s:s?, s:s}", "kind", req.kind, "member",
                                          req.member, "token", req.token);
                audit(env, "repair.requested", "spec.repair", after, "success");
        }
        return k;
}

/* Another change of the cluster in flight: a repair would cross it. NULL: none. */
static char *other_change(const consistency_env *env)
{
        for (size_t i = 0; i < env->obs->n; i++) {
                const obs_member *m = &env->obs->members[i];
                if (m->in_etcd && (m->learner || m->unstarted))
                        return xasprintf("member %s is joining as a learner", m->name);
        }
        state_ca_rotation *rot = NULL;
        if (state_ca_rotation_running(env->db, env->cluster, &rot) == 0) {
                state_ca_rotation_free(rot);
                return xstrdup("a CA rotation runs");
        }
        _cleanup_free_ char *tls_off = NULL;
        if (state_cluster_tls_off(env->db, env->cluster, &tls_off) == 0 && tls_off)
                return xasprintf("TLS is being switched off (%s)", tls_off);
        state_maint_run_list runs = {0};
        bool defrag = false;
        if (state_maint_run_list_for(env->db, env->cluster, 1, &runs) == 0)
                defrag = runs.n && streq_ptr(runs.items[0]->result, "running");
        state_maint_run_list_release(&runs);
        if (defrag)
                return xstrdup("a defragmentation runs");
        state_recovery *rec = NULL;
        if (state_recovery_running(env->db, env->cluster, &rec) == 0) {
                state_recovery_free(rec);
                return xstrdup("a disaster recovery runs");
        }
        return NULL;
}

/* Voters etcd lists and how many of them the comma-separated list holds. */
static void count_voters(const observation *obs, const char *list, int *ret_voters, int *ret_in)
{
        int v = 0, in = 0;
        for (size_t i = 0; i < obs->n; i++) {
                const obs_member *m = &obs->members[i];
                if (!m->in_etcd || m->learner)
                        continue;
                v++;
                in += proof_listed(list, m->name);
        }
        *ret_voters = v;
        *ret_in = in;
}

/* A requested repair: refused with the reason, or started. */
static int judge_request(const consistency_env *env, consistency_pass *cp)
{
        state_repair *rep = cp->repair;
        const state_consistency *row = cp->row;
        _cleanup_free_ char *busy = other_change(env);
        if (busy)
                return refuse(env, cp, "another change of the cluster runs: %s", busy);
        if (streq(rep->kind, "replace")) {
                if (!row->frozen_ms)
                        return refuse(env, cp,
                                      "%s is not in a minority: the members agree (last check at "
                                      "revision %" PRId64 "); nothing to repair",
                                      rep->member, row->revision);
                if (!streq_ptr(row->verdict, "minority"))
                        return refuse(
                            env, cp, "%s is not in a minority: %s", rep->member,
                            streq_ptr(row->verdict, "no-majority")
                                ? "no side holds a quorum, so gitcd cannot tell whose data "
                                  "is right (docs/consistency.md)"
                                : "gitcd's check found no minority (recheck with gitcd repair "
                                  "--recheck)");
                if (!proof_listed(row->minority, rep->member))
                        return refuse(env, cp,
                                      "%s is not in the minority (%s): it holds the majority's "
                                      "data",
                                      rep->member, row->minority);
                /* The majority must still be a quorum of the voters etcd lists now. */
                _cleanup_free_ char *majority = NULL;
                {
                        json_t *h = row->hashes ? json_loads(row->hashes, 0, NULL) : NULL;
                        strbuf sb = STRBUF_INIT;
                        const char *key;
                        json_t *val;
                        json_object_foreach(h, key, val)
                        {
                                if (!proof_listed(row->minority, key))
                                        sb_printf(&sb, "%s%s", sb.len ? "," : "", key);
                        }
                        json_decref(h);
                        majority = sb_detach(&sb);
                }
                int voters = 0, in = 0;
                count_voters(env->obs, majority, &voters, &in);
                if (in < voters / 2 + 1)
                        return refuse(env, cp,
                                      "the majority (%s) is %d of the %d voters, not a quorum: "
                                      "a replacement could copy nothing trusted",
                                      majority, in, voters);
        }
        int k = repair_phase(env, rep, streq(rep->kind, "replace") ? "replacing" : "rechecking");
        if (k < 0)
                return k;
        FAILPOINT("repair.after-start");
        if (streq(rep->kind, "recheck"))
                cp->row->due = true;
        _cleanup_free_ char *why =
            streq(rep->kind, "replace")
                ? xasprintf("replace %s from the majority (%s's data is discarded)", rep->member,
                            rep->member)
                : xstrdup("compare every member's data again");
        repair_audit(env, rep, "repair.started", why, "success");
        log_info("%s: repair %" PRId64 " started: %s", env->cluster, rep->id, why);
        return 0;
}

static const obs_member *obs_named(const observation *obs, const char *name)
{
        for (size_t i = 0; name && i < obs->n; i++)
                if (streq(obs->members[i].name, name))
                        return &obs->members[i];
        return NULL;
}

/* ---- the pass ------------------------------------------------------------------------ */

static bool corrupt_alarm_raised(const consistency_env *env, const state_consistency *row)
{
        const state_cluster *sc = env->sc;
        for (size_t i = 0; sc && i < sc->n_conditions; i++) {
                const state_condition *k = &sc->conditions[i];
                if (streq(k->type, "CorruptAlarm"))
                        return streq_ptr(k->status, "True") &&
                               k->last_transition_ms > row->lifted_ms;
        }
        return false;
}

int consistency_prepare(const consistency_env *env, consistency_pass *cp)
{
        memset(cp, 0, sizeof(*cp));
        int k = state_consistency_get(env->db, env->cluster, &cp->row);
        if (k == -ENOENT) {
                cp->row = XNEW(state_consistency);
                cp->row->cluster = xstrdup(env->cluster);
        } else if (k < 0)
                return k;
        cp->frozen = cp->row->frozen_ms != 0;
        if (cp->frozen)
                cp->message = xstrdup(cp->row->frozen_message ? cp->row->frozen_message : "frozen");
        k = take_spec_request(env);
        if (k < 0)
                return k;
        k = state_repair_running(env->db, env->cluster, &cp->repair);
        if (k < 0 && k != -ENOENT)
                return k;
        if (corrupt_alarm_raised(env, cp->row) && !streq_ptr(cp->row->frozen_cause, "hashes") &&
            !streq_ptr(cp->row->frozen_cause, "no-majority")) {
                freeze(env, cp, "alarm", NULL);
                (void)save(env, cp);
        }
        if (cp->repair && streq(cp->repair->phase, "requested")) {
                k = judge_request(env, cp);
                if (k < 0)
                        return k;
        }
        if (cp->repair && streq(cp->repair->phase, "replacing")) {
                for (size_t i = 0; i < env->obs->n; i++) {
                        obs_member *m = &env->obs->members[i];
                        if (streq(m->name, cp->repair->member) && m->in_etcd)
                                m->replace = true;
                }
        }
        return 0;
}

/* The replacement's progress: the learner added in the member's place, then at rest. */
static int repair_replacing(const consistency_env *env, consistency_pass *cp, const step *s,
                            bool held)
{
        state_repair *rep = cp->repair;
        bool adding = !held && s->kind == STEP_ADD_LEARNER;
        if (adding) {
                _cleanup_free_ char *name = render_member_name(env->c, s->ordinal);
                set_str(&rep->replacement, name);
                int k = state_repair_update(env->db, rep);
                if (k < 0)
                        return k;
                FAILPOINT("repair.after-replacement");
                _cleanup_free_ char *why =
                    xasprintf("%s joins as a learner in %s's place", name, rep->member);
                repair_audit(env, rep, "repair.replacement", why, "success");
                log_info("%s: repair %" PRId64 ": %s", env->cluster, rep->id, why);
        }
        /* Gone from etcd and the records, and the one added in its place (if any) a voter. */
        if (adding || obs_named(env->obs, rep->member) || !settled(env->obs))
                return 0;
        cp->row->due = true;
        (void)save(env, cp);
        return repair_phase(env, rep, "rechecking");
}

/* The repair's proof, on a settled cluster: every member must agree now. */
static int repair_rechecking(const consistency_env *env, consistency_pass *cp)
{
        if (!settled(env->obs) || !env->etcd->hash_kv_at)
                return 0;
        /* at once; after an attempt that did not conclude, PROOF_RETRY_MS later */
        const state_consistency *row = cp->row;
        if (row->attempt_error && row->attempt_ms > row->checked_ms &&
            env->now_ms < row->attempt_ms + PROOF_RETRY_MS)
                return 0;
        proof_verdict v = check_all(env, cp);
        if (v == PROOF_INCONCLUSIVE)
                return 0;
        state_repair *rep = cp->repair;
        if (v == PROOF_AGREE) {
                lift(env, cp, rep);
                (void)save(env, cp);
                FAILPOINT("repair.after-unfreeze");
                _cleanup_free_ char *why =
                    xasprintf("every member agrees at revision %" PRId64 "%s%s", cp->row->revision,
                              rep->replacement ? "; replaced by " : "",
                              rep->replacement ? rep->replacement : "");
                return repair_finish(env, cp, "succeeded", why);
        }
        _cleanup_free_ char *why =
            xasprintf("the members still differ: %s",
                      cp->row->frozen_message ? cp->row->frozen_message : "see gitcd status");
        return repair_finish(env, cp, "failed", why);
}

/* A step that makes a member copy data, on a cluster not frozen: a fresh proof first. */
static void proof_before_copy(const consistency_env *env, consistency_pass *cp, step *s)
{
        if (proof_fresh(cp->row, env->now_ms))
                return;
        check_set cs;
        check_set_of(env, &cs);
        if (cs.n < 2) { /* one member (or none) ready: nothing to compare it with */
                check_set_release(&cs);
                return;
        }
        bool may_try = !(cp->row->attempt_error && cp->row->attempt_ms > cp->row->checked_ms &&
                         env->now_ms < cp->row->attempt_ms + PROOF_RETRY_MS);
        proof_verdict v = PROOF_INCONCLUSIVE;
        if (may_try) {
                proof_result res = {0};
                int64_t took = 0;
                run_check(env, &cs, &res, &took);
                v = record_check(env, cp, &res, took);
                proof_result_release(&res);
        }
        check_set_release(&cs);
        if (v != PROOF_INCONCLUSIVE)
                return; /* agreed: the step goes; differed: frozen, the gate holds it */
        _cleanup_free_ char *why = xasprintf(
            "%s waits for a proof that the members agree (a new member copies the "
            "leader's data): %s",
            s->message, cp->row->attempt_error ? cp->row->attempt_error : "not compared yet");
        _cleanup_free_ char *short_ = xasprintf("%s waits for a consistency proof", s->message);
        str_assign(&cp->message, TAKE_PTR(why));
        str_assign(&s->message, xstrdup(short_));
        s->kind = STEP_WAIT;
        cp->held = true;
}

int consistency_after_decide(const consistency_env *env, consistency_pass *cp, step *s,
                             bool converged)
{
        state_consistency *row = cp->row;
        int64_t interval = env->c->consistency.check_interval_ms;
        bool can_check = env->conn && env->etcd->hash_kv_at;
        int k = 0;
        bool check_ran = false;
        if (cp->repair && streq(cp->repair->phase, "rechecking") && can_check) {
                check_ran = settled(env->obs);
                k = repair_rechecking(env, cp);
        } else if (can_check && (converged || cp->frozen) && settled(env->obs) &&
                   env->now_ms >= proof_next_check_ms(row, interval)) {
                check_ran = true;
                (void)check_all(env, cp);
        }
        if (k < 0)
                return k;
        if (!cp->frozen && can_check && !check_ran && proof_step_copies(s))
                proof_before_copy(env, cp, s);

        /* A member (re)started: its data is compared at the next chance. */
        if (!cp->held &&
            (s->kind == STEP_START_MEMBER || s->kind == STEP_RESTART_MEMBER ||
             s->kind == STEP_PROMOTE) &&
            !row->due) {
                row->due = true;
                (void)save(env, cp);
        }

        proof_freeze f = {
            .frozen = cp->frozen,
            .cause = row->frozen_cause,
            .minority = row->minority,
            .repair_member = cp->repair && streq(cp->repair->kind, "replace") &&
                                     streq(cp->repair->phase, "replacing")
                                 ? cp->repair->member
                                 : NULL,
            .repair_replacement = cp->repair ? cp->repair->replacement : NULL,
        };
        bool goes = cp->held ? false : proof_gate(&f, env->obs, s);
        if (!goes && cp->frozen) {
                cp->held = true;
                if (!streq_ptr(row->held, s->message)) {
                        set_str(&row->held, s->message);
                        (void)save(env, cp);
                        audit(env, "consistency.held", s->message,
                              json_pack("{s:s}", "frozenBecause",
                                        row->frozen_message ? row->frozen_message : ""),
                              "rejected");
                        log_warn("%s: %s", env->cluster, s->message);
                }
        }
        if (cp->repair && streq(cp->repair->phase, "replacing")) {
                k = repair_replacing(env, cp, s, cp->held);
                if (k < 0)
                        return k;
        }
        cp->next_check_ms = proof_next_check_ms(row, interval);
        return 0;
}

int consistency_alarm(const consistency_env *env, consistency_pass *cp)
{
        if (cp->frozen)
                return 0;
        freeze(env, cp, "alarm", NULL);
        (void)save(env, cp);
        return 1;
}

int consistency_record_condition(const consistency_env *env, const consistency_pass *cp)
{
        const state_consistency *row = cp->row;
        /* Before a cluster formed and was ever compared, there is nothing to say. */
        if (!row || (row->checked_ms == 0 && !row->frozen_ms && !env->obs->bootstrapped))
                return 0;
        proof_condition pc;
        proof_check_condition(row, &pc);
        int k = state_cluster_set_condition(env->db, env->cluster, "DataConsistent", pc.status,
                                            pc.reason, pc.message, env->now_ms);
        if (k == 1)
                audit(env, "condition.changed", pc.message,
                      json_pack("{s:s, s:s, s:s}", "type", "DataConsistent", "status", pc.status,
                                "reason", pc.reason),
                      "success");
        free(pc.message);
        return k;
}

void consistency_pass_release(consistency_pass *cp)
{
        state_consistency_free(cp->row);
        state_repair_free(cp->repair);
        free(cp->message);
        cp->row = NULL;
        cp->repair = NULL;
        cp->message = NULL;
}

int consistency_repair_request(state_db *db, const char *cluster, const char *member,
                               const char *requested_by, int64_t now_ms, int64_t *ret_id)
{
        state_cluster *sc = NULL;
        int k = state_cluster_get(db, cluster, &sc);
        if (k < 0)
                return k;
        state_cluster_free(sc);
        state_repair req = {
            .cluster = (char *)cluster,
            .kind = member ? "replace" : "recheck",
            .member = (char *)member,
            .requested_by = (char *)requested_by,
        };
        k = state_begin(db);
        if (k < 0)
                return k;
        k = state_repair_request(db, &req, now_ms, ret_id);
        if (k >= 0) {
                json_t *after = json_pack("{s:s, s:s?}", "kind", req.kind, "member", req.member);
                _cleanup_free_ char *text = json_dumps(after, JSON_COMPACT);
                json_decref(after);
                state_audit_event ev = {.time_ms = now_ms,
                                        .cluster = (char *)cluster,
                                        .author = (char *)requested_by,
                                        .action = "repair.requested",
                                        .reason = "gitcd repair",
                                        .after_json = text,
                                        .outcome = "success"};
                k = state_audit_append(db, &ev, NULL);
        }
        if (k < 0) {
                (void)state_rollback(db);
                return k;
        }
        return state_commit(db);
}
