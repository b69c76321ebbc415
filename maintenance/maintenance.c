/*
 * Maintenance steps against etcd (maintenance/maintenance.h).
 *
 * Design: observe, decide (maintenance/due.c, pure), act, record: the same
 * shape as a reconciler pass, one step per call. The record of the run is
 * written before the step that depends on it (a run exists before its
 * first member is touched; leadership is recorded as moved before the old
 * leader is defragmented) and a member is recorded done only after it
 * answered Status with a leader again, so what the record says is always
 * true of the world.
 *
 * Each cluster gets two clients: one with the ordinary deadline for
 * Status, AlarmList, MoveLeader, Compact and Disarm, and one with a long
 * deadline used for Defragment alone, which holds a member's backend for
 * as long as it needs. Both are rebuilt when the member endpoints change.
 * Nothing else is kept between calls except the time to look again,
 * which only saves Status calls, and since when the run has been waiting
 * for the members to apply what was committed (a gitcd restarted in the
 * middle of that wait waits again, at most as long).
 *
 * A member is asked for Status once more right before its Defragment: a
 * member that became the leader since the step was decided is not
 * defragmented (the step is decided again), so the leader's backend is
 * never locked while it leads.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "etcd/client.h"
#include "maintenance/due.h"
#include "maintenance/maintenance.h"
#include "state/maintenance.h"
#include "util/failpoint.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAINT_WAIT_POLL_MS   2000
#define MAINT_HEALTH_POLL_MS 200

typedef struct maint_ctx {
        char *cluster;
        char *endpoints;
        char *password;      /* the one the clients authenticate with: a new one rebuilds them */
        etcd_client *client; /* ordinary deadline */
        etcd_client *slow;   /* Defragment */
        int64_t next_look_ms;
        int64_t lag_since_ms; /* the run has been waiting on apply lag since (0: it is not) */
        bool running;         /* the last look found a run in progress, or started one */
} maint_ctx;

struct maintenance {
        maintenance_opts opts;
        maint_ctx *ctx;
        size_t n_ctx, alloc_ctx;
};

static int64_t wall(const maintenance *m)
{
        return m->opts.wall_ms ? m->opts.wall_ms() : now_wall_ms();
}

int maintenance_new(const maintenance_opts *opts, maintenance **ret)
{
        if (!opts || !opts->db)
                return -EINVAL;
        maintenance *m = XNEW(maintenance);
        m->opts = *opts;
        if (m->opts.call_timeout_ms <= 0)
                m->opts.call_timeout_ms = 5000;
        if (m->opts.defrag_timeout_ms <= 0)
                m->opts.defrag_timeout_ms = 600000;
        if (m->opts.health_timeout_ms <= 0)
                m->opts.health_timeout_ms = 60000;
        *ret = m;
        return 0;
}

static void ctx_close(maint_ctx *x)
{
        etcd_client_free(x->client);
        etcd_client_free(x->slow);
        x->client = x->slow = NULL;
        free(x->endpoints);
        x->endpoints = NULL;
        if (x->password)
                explicit_bzero(x->password, strlen(x->password));
        free(x->password);
        x->password = NULL;
}

void maintenance_set_db(maintenance *m, state_db *db)
{
        assert(db);
        m->opts.db = db;
}

void maintenance_free(maintenance *m)
{
        if (!m)
                return;
        for (size_t i = 0; i < m->n_ctx; i++) {
                ctx_close(&m->ctx[i]);
                free(m->ctx[i].cluster);
        }
        free(m->ctx);
        free(m);
}

void maintenance_hang_up(maintenance *m, const char *cluster)
{
        for (size_t i = 0; m && i < m->n_ctx; i++)
                if (streq(m->ctx[i].cluster, cluster)) {
                        /* the process's idle connections to its members (etcd/pool.h) too */
                        etcd_client_close_idle(m->ctx[i].client);
                        etcd_client_close_idle(m->ctx[i].slow);
                        ctx_close(&m->ctx[i]);
                }
}

static maint_ctx *ctx_get(maintenance *m, const char *cluster)
{
        for (size_t i = 0; i < m->n_ctx; i++)
                if (streq(m->ctx[i].cluster, cluster))
                        return &m->ctx[i];
        m->ctx = xgrow(m->ctx, &m->alloc_ctx, m->n_ctx + 1, sizeof(maint_ctx));
        maint_ctx *x = &m->ctx[m->n_ctx++];
        *x = (maint_ctx){.cluster = xstrdup(cluster)};
        return x;
}

static int connect_clients(maintenance *m, maint_ctx *x, const maint_cluster *c)
{
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < c->n; i++) {
                if (eps.len)
                        sb_appendc(&eps, ',');
                sb_append(&eps, c->client_urls[i]);
        }
        if (x->client && streq_ptr(x->endpoints, sb_str(&eps)) &&
            streq_ptr(x->password, c->password)) {
                sb_release(&eps);
                return 0;
        }
        ctx_close(x);
        x->endpoints = sb_detach(&eps);
        x->password = xstrdup_null(c->password);
        etcd_client_opts o = {
            .endpoints = x->endpoints,
            .cacert = c->cacert,
            .cert = c->cert,
            .key = c->key,
            .user = c->user,
            .password = c->password,
            .call_timeout_ms = m->opts.call_timeout_ms,
        };
        int k = etcd_client_new(&o, &x->client);
        if (k < 0)
                return k;
        o.call_timeout_ms = m->opts.defrag_timeout_ms;
        k = etcd_client_new(&o, &x->slow);
        if (k < 0) {
                etcd_client_free(x->client);
                x->client = NULL;
        }
        return k;
}

static void audit(maintenance *m, const maint_cluster *c, const char *action, const char *reason,
                  json_t *before, json_t *after, const char *outcome, int64_t duration_ms)
{
        _cleanup_free_ char *b =
            before ? json_dumps(before, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        _cleanup_free_ char *a =
            after ? json_dumps(after, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(before);
        json_decref(after);
        state_audit_event ev = {
            .time_ms = wall(m),
            .cluster = (char *)c->cluster,
            .commit = (char *)c->commit,
            .author = (char *)c->author,
            .action = (char *)action,
            .reason = (char *)reason,
            .before_json = b,
            .after_json = a,
            .outcome = (char *)outcome,
            .duration_ms = duration_ms,
        };
        if (state_audit_append(m->opts.db, &ev, NULL) < 0)
                log_warn("%s: could not write the audit event %s: %s", c->cluster, action,
                         state_last_error());
}

/* ---- observe ------------------------------------------------------------- */

typedef struct observed {
        maint_member *members;
        etcd_endpoint_status **status;
        size_t n;
        bool alarms_known;
        etcd_alarm *alarms;
        size_t n_alarms;
} observed;

static void observed_release(observed *o)
{
        for (size_t i = 0; i < o->n; i++)
                etcd_endpoint_status_free(o->status[i]);
        free(o->status);
        free(o->members);
        free(o->alarms);
        *o = (observed){0};
}

/*
 * compact_revision: the running nospace run's compaction (0: none). Each
 * member applies a compaction on its own: a member that still answers at the
 * revision before it has not, and defragmenting it now gives nothing back.
 */
static void observe(maint_ctx *x, const maint_cluster *c, int64_t compact_revision, observed *o)
{
        o->n = c->n;
        o->members = xcalloc(c->n + 1, sizeof(maint_member));
        o->status = xcalloc(c->n + 1, sizeof(etcd_endpoint_status *));
        bool answered = false, alarm_reported = false;
        for (size_t i = 0; i < c->n; i++) {
                maint_member *mm = &o->members[i];
                mm->name = c->names[i];
                etcd_endpoint_status *s = NULL;
                if (c->looked && streq_ptr(c->looked->endpoint, c->client_urls[i]))
                        s = etcd_endpoint_status_dup(c->looked);
                else if (etcd_status(x->client, c->client_urls[i], &s) < 0)
                        continue;
                o->status[i] = s;
                answered = true;
                alarm_reported |= etcd_status_may_report_alarm(s);
                mm->reachable = true;
                mm->id = s->member_id;
                mm->leader = s->leader;
                mm->db_size = s->db_size;
                mm->db_size_in_use = s->db_size_in_use;
                mm->raft_index = s->raft_index;
                mm->raft_applied_index = s->raft_applied_index;
                int64_t count;
                mm->compaction_pending = compact_revision > 1 &&
                                         etcd_count_keys(x->client, c->client_urls[i],
                                                         compact_revision - 1, &count, NULL) == 0;
        }
        /*
         * etcd lists the cluster's alarms in every Status (etcd/client.h): the
         * Alarm call, which goes through raft, is made only when one may
         * report an alarm, or when no member answered (then it says why).
         */
        if (answered && !alarm_reported)
                o->alarms_known = true;
        else
                o->alarms_known = etcd_alarm_list(x->client, &o->alarms, &o->n_alarms) == 0;
}

/* The members an alarm is raised on, comma-separated (newly allocated; "" for none). */
static char *alarm_members(const observed *o, etcd_alarm_type type)
{
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, "");
        for (size_t i = 0; i < o->n_alarms; i++) {
                if (o->alarms[i].type != type)
                        continue;
                const char *name = NULL;
                for (size_t j = 0; j < o->n; j++)
                        if (o->members[j].reachable && o->members[j].id == o->alarms[i].member_id)
                                name = o->members[j].name;
                char id[17];
                etcd_member_id_format(o->alarms[i].member_id, id);
                if (sb.len)
                        sb_append(&sb, ", ");
                sb_append(&sb, name ? name : id);
        }
        return sb_detach(&sb);
}

static const state_condition *condition_of(const state_cluster *sc, const char *type)
{
        for (size_t i = 0; sc && i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, type))
                        return &sc->conditions[i];
        return NULL;
}

/*
 * Store one alarm condition. A cluster that never had the alarm gets no
 * condition (nothing to report); once raised, the condition stays and
 * turns False when the alarm is gone. Changes are audited.
 */
static void record_alarm(maintenance *m, const maint_cluster *c, const char *type,
                         const char *alarm, const char *members)
{
        maint_condition cond;
        maint_check_alarm(type, alarm, members, &cond);
        if (streq(cond.status, "False") && !condition_of(c->sc, type)) {
                free(cond.message);
                return;
        }
        int k = state_cluster_set_condition(m->opts.db, c->cluster, cond.type, cond.status,
                                            cond.reason, cond.message, wall(m));
        if (k == 1) {
                audit(m, c, "condition.changed", cond.message, NULL,
                      json_pack("{s:s, s:s, s:s}", "type", cond.type, "status", cond.status,
                                "reason", cond.reason),
                      "success", 0);
                bool raised = streq(cond.status, "True");
                audit(m, c, raised ? "alarm.raised" : "alarm.cleared", cond.message, NULL,
                      json_pack("{s:s, s:s}", "alarm", alarm, "members", members ? members : ""),
                      "success", 0);
                if (raised)
                        log_warn("%s: %s", c->cluster, cond.message);
                else
                        log_info("%s: the %s alarm is cleared", c->cluster, alarm);
        }
        free(cond.message);
}

/* ---- act ----------------------------------------------------------------- */

static json_t *sizes_json(const maint_member *mm)
{
        return json_pack("{s:I, s:I}", "dbSize", (json_int_t)mm->db_size, "dbSizeInUse",
                         (json_int_t)mm->db_size_in_use);
}

/* Wait until the member at url answers Status with a leader; its status then, or NULL. */
static etcd_endpoint_status *wait_healthy(maintenance *m, maint_ctx *x, const char *url)
{
        int64_t until = now_mono_ms() + m->opts.health_timeout_ms;
        for (;;) {
                etcd_endpoint_status *s = NULL;
                if (etcd_status(x->client, url, &s) == 0 && s->leader != 0)
                        return s;
                etcd_endpoint_status_free(s);
                if (now_mono_ms() >= until)
                        return NULL;
                msleep(MAINT_HEALTH_POLL_MS);
        }
}

static void fail_run(maintenance *m, const maint_cluster *c, const state_maint_run *run,
                     const char *error)
{
        if (state_maint_run_finish(m->opts.db, run->id, error, wall(m)) < 0)
                log_warn("%s: cannot record the failed defragmentation: %s", c->cluster,
                         state_last_error());
        audit(m, c, "defrag.failed", error, NULL,
              json_pack("{s:s, s:s}", "trigger", run->trigger, "membersDone", run->members_done),
              "failure", wall(m) - run->started_ms);
        log_error("%s: defragmentation failed: %s", c->cluster, error);
}

static int act_defrag(maintenance *m, maint_ctx *x, const maint_cluster *c, observed *o,
                      const state_maint_run *run, size_t i, maint_result *ret)
{
        const char *url = c->client_urls[i];
        const maint_member *before = &o->members[i];
        /* leadership may have moved to this member since it was observed: decide again */
        etcd_endpoint_status *now = NULL;
        int k = etcd_status(x->client, url, &now);
        if (k < 0 || now->leader == 0 || (now->leader == now->member_id && o->n > 1)) {
                str_assign(&ret->message,
                           xasprintf(k < 0 ? "%s does not answer: not defragmenting it now"
                                     : now->leader == 0
                                         ? "%s knows no leader: not defragmenting it now"
                                         : "%s became the leader: not defragmenting it while it "
                                           "leads",
                                     before->name));
                etcd_endpoint_status_free(now);
                ret->outcome = MAINT_OUT_WAITING;
                ret->poll_ms = MAINT_HEALTH_POLL_MS;
                return 0;
        }
        char leader_hex[17];
        etcd_member_id_format(now->leader, leader_hex);
        etcd_endpoint_status_free(now);
        log_info("%s: defragmenting %s", c->cluster, before->name);
        int64_t t0 = now_mono_ms();
        k = etcd_defragment(x->slow, url);
        if (k < 0) {
                _cleanup_free_ char *e = xasprintf("defragmenting %s: %s", before->name,
                                                   etcd_client_last_error(x->slow));
                fail_run(m, c, run, e);
                str_assign(&ret->message, xstrdup(e));
                return 0;
        }
        int64_t took = now_mono_ms() - t0;
        FAILPOINT("defrag.after-etcd");
        etcd_endpoint_status *s = wait_healthy(m, x, url);
        if (!s) {
                _cleanup_free_ char *e = xasprintf("%s did not answer with a leader within %d s "
                                                   "of its defragmentation",
                                                   before->name, m->opts.health_timeout_ms / 1000);
                fail_run(m, c, run, e);
                str_assign(&ret->message, xstrdup(e));
                return 0;
        }
        maint_member after = *before;
        after.db_size = s->db_size;
        after.db_size_in_use = s->db_size_in_use;
        etcd_endpoint_status_free(s);
        /* the record and its audit event in one transaction: both or neither */
        _cleanup_free_ char *why = xasprintf("%s defragmented: %" PRId64 " -> %" PRId64 " bytes",
                                             before->name, before->db_size, after.db_size);
        k = state_begin(m->opts.db);
        if (k < 0)
                return k;
        k = state_maint_run_member_done(m->opts.db, run->id, before->name);
        if (k < 0) {
                (void)state_rollback(m->opts.db);
                return k;
        }
        audit(m, c, "defrag.member", why, sizes_json(before),
              json_pack("{s:s, s:s, s:I, s:I}", "member", before->name, "leader", leader_hex,
                        "dbSize", (json_int_t)after.db_size, "dbSizeInUse",
                        (json_int_t)after.db_size_in_use),
              "success", took);
        k = state_commit(m->opts.db);
        if (k < 0)
                return k;
        FAILPOINT("defrag.after-member");
        log_info("%s: %s", c->cluster, why);
        str_assign(&ret->message, xstrdup(why));
        return 0;
}

static int act_compact(maintenance *m, maint_ctx *x, const maint_cluster *c,
                       const state_maint_run *run, maint_result *ret)
{
        etcd_kv_list *l = NULL;
        int k = etcd_get(x->client, "gitcd/maintenance", false, &l);
        if (k < 0) {
                str_assign(&ret->message, xasprintf("cannot read the revision: %s",
                                                    etcd_client_last_error(x->client)));
                return k;
        }
        int64_t rev = l->revision;
        etcd_kv_list_free(l);
        k = etcd_compact(x->client, rev, true);
        if (k < 0 && k != ETCD_ERR_COMPACTED) {
                str_assign(&ret->message,
                           xasprintf("cannot compact: %s", etcd_client_last_error(x->client)));
                return k;
        }
        k = state_maint_run_set_compacted(m->opts.db, run->id, rev);
        if (k < 0)
                return k;
        _cleanup_free_ char *why = xasprintf("compacted to revision %" PRId64 " (NOSPACE)", rev);
        audit(m, c, "compaction", why, NULL,
              json_pack("{s:I, s:s}", "revision", (json_int_t)rev, "trigger", run->trigger),
              "success", 0);
        log_info("%s: %s", c->cluster, why);
        str_assign(&ret->message, xstrdup(why));
        return 0;
}

static int act_disarm(maintenance *m, maint_ctx *x, const maint_cluster *c, const observed *o,
                      const state_maint_run *run, maint_result *ret)
{
        _cleanup_free_ char *members = alarm_members(o, ETCD_ALARM_NOSPACE);
        for (size_t i = 0; i < o->n_alarms; i++) {
                if (o->alarms[i].type != ETCD_ALARM_NOSPACE)
                        continue;
                int k = etcd_alarm_disarm(x->client, o->alarms[i].member_id, ETCD_ALARM_NOSPACE);
                if (k < 0) {
                        str_assign(&ret->message, xasprintf("cannot disarm: %s",
                                                            etcd_client_last_error(x->client)));
                        return k;
                }
        }
        int k = state_maint_run_set_disarmed(m->opts.db, run->id);
        if (k < 0)
                return k;
        _cleanup_free_ char *why = xasprintf("NOSPACE alarm disarmed on %s", members);
        audit(m, c, "alarm.disarmed", why, NULL,
              json_pack("{s:s, s:s}", "alarm", "NOSPACE", "members", members), "success", 0);
        log_info("%s: %s", c->cluster, why);
        str_assign(&ret->message, xstrdup(why));
        return 0;
}

static int act_finish(maintenance *m, const maint_cluster *c, const state_maint_run *run,
                      const char *message, maint_result *ret)
{
        int k = state_maint_run_finish(m->opts.db, run->id, NULL, wall(m));
        if (k < 0)
                return k;
        json_t *after = json_pack("{s:s, s:s, s:s?}", "trigger", run->trigger, "members",
                                  run->members_done, "leaderMovedFrom", run->leader);
        if (run->compact_revision)
                json_object_set_new(after, "compactRevision",
                                    json_integer((json_int_t)run->compact_revision));
        if (streq(run->trigger, "nospace"))
                json_object_set_new(after, "disarmed", json_boolean(run->disarmed));
        audit(m, c, "defrag.finished", message, NULL, after, "success", wall(m) - run->started_ms);
        log_info("%s: defragmentation finished: %s", c->cluster, message);
        str_assign(&ret->message, xstrdup(message));
        return 0;
}

/* MAINT_START: a run recorded and audited. */
static int act_start(maintenance *m, maint_ctx *x, const maint_cluster *c, const maint_action *a,
                     int64_t now)
{
        int64_t id = 0;
        const char *trigger = maint_trigger_name(a->trigger);
        int k = state_maint_run_begin(m->opts.db, c->cluster, trigger, a->slot_ms, now, &id);
        if (k < 0)
                return k;
        x->running = true;
        audit(m, c, "defrag.started", a->message, NULL,
              json_pack("{s:s, s:I}", "trigger", trigger, "run", (json_int_t)id), "success", 0);
        log_info("%s: defragmentation started: %s", c->cluster, a->message);
        return k;
}

/* MAINT_MOVE_LEADER: leadership moved away from the member to defragment, recorded first. */
static int act_move_leader(maintenance *m, maint_ctx *x, const maint_cluster *c, const observed *o,
                           const state_maint_run *run, const maint_action *a, maint_result *ret)
{
        const char *from = o->members[a->member].name;
        int k = state_maint_run_set_leader(m->opts.db, run->id, from);
        if (k < 0)
                return k;
        k = etcd_move_leader(x->client, a->to_id);
        if (k < 0) {
                str_assign(&ret->message, xasprintf("cannot move leadership away from %s: %s", from,
                                                    etcd_client_last_error(x->client)));
                return k;
        }
        char to[17];
        etcd_member_id_format(a->to_id, to);
        audit(m, c, "defrag.leader-moved", a->message, NULL,
              json_pack("{s:s, s:s}", "from", from, "to", to), "success", 0);
        log_info("%s: %s", c->cluster, a->message);
        return k;
}

void maint_result_release(maint_result *r)
{
        if (!r)
                return;
        free(r->message);
        r->message = NULL;
}

int maintenance_pass(maintenance *m, const maint_cluster *c, maint_result *ret)
{
        assert(m && c && c->spec && ret);
        *ret = (maint_result){.outcome = MAINT_OUT_IDLE, .poll_ms = (int)MAINT_LOOK_MS};
        maint_ctx *x = ctx_get(m, c->cluster);
        int64_t now = wall(m);
        /* nothing running and not time to look: not even the records are read */
        if ((!x->running && now < x->next_look_ms) || c->n == 0) {
                ret->poll_ms = (int)MIN(MAX(x->next_look_ms - now, 1000), MAINT_LOOK_MS);
                return 0;
        }
        state_maint_run_list runs = {0};
        int k = state_maint_run_list_for(m->opts.db, c->cluster, 20, &runs);
        if (k < 0)
                return k;
        const state_maint_run *run = maint_running(&runs);
        x->running = run != NULL;
        if (connect_clients(m, x, c) < 0) {
                state_maint_run_list_release(&runs);
                x->next_look_ms = now + MAINT_LOOK_MS;
                return 0;
        }

        observed o = {0};
        observe(x, c, run && streq_ptr(run->trigger, "nospace") ? run->compact_revision : 0, &o);
        if (o.alarms_known) {
                _cleanup_free_ char *nospace = alarm_members(&o, ETCD_ALARM_NOSPACE);
                _cleanup_free_ char *corrupt = alarm_members(&o, ETCD_ALARM_CORRUPT);
                record_alarm(m, c, "NoSpaceAlarm", "NOSPACE", nospace);
                record_alarm(m, c, "CorruptAlarm", "CORRUPT", corrupt);
        }
        maint_view v = {
            .defrag = &c->spec->defrag,
            .quota_bytes = c->spec->options.quota_backend_bytes,
            .members = o.members,
            .n = o.n,
            .runs = &runs,
            .created_ms = c->sc ? c->sc->created_ms : 0,
            .lag_since_ms = x->lag_since_ms,
            .now_ms = now,
        };
        for (size_t i = 0; i < o.n_alarms; i++) {
                v.nospace |= o.alarms[i].type == ETCD_ALARM_NOSPACE;
                v.corrupt |= o.alarms[i].type == ETCD_ALARM_CORRUPT;
        }
        v.alarms_unknown = !o.alarms_known;
        v.frozen = c->frozen;
        v.held_all = c->held_all;
        v.held_disruptive = c->held_disruptive;
        v.held_until_ms = c->held_until_ms;
        ret->corrupt = v.corrupt;
        maint_action a;
        maint_decide(&v, &a);
        /* maint_decide acts on a run only while one is running (maintenance/due.c). */
        assert(run || a.kind == MAINT_IDLE || a.kind == MAINT_WAIT || a.kind == MAINT_START);
        str_assign(&ret->message, xstrdup(a.message ? a.message : ""));
        if (a.kind == MAINT_WAIT && a.apply_lag) {
                if (!x->lag_since_ms) {
                        x->lag_since_ms = now;
                        log_info("%s: %s", c->cluster, a.message);
                }
        } else {
                if (a.lag_message)
                        log_warn("%s: %s", c->cluster, a.lag_message);
                x->lag_since_ms = 0;
        }
        ret->outcome = MAINT_OUT_ACTED;
        ret->poll_ms = 0;
        switch (a.kind) {
        case MAINT_IDLE:
                x->next_look_ms = now + MAINT_LOOK_MS;
                if (a.next_ms > now && a.next_ms < x->next_look_ms)
                        x->next_look_ms = a.next_ms;
                ret->outcome = MAINT_OUT_IDLE;
                ret->poll_ms = (int)(x->next_look_ms - now);
                break;
        case MAINT_WAIT:
                ret->outcome = MAINT_OUT_WAITING;
                ret->poll_ms = MAINT_WAIT_POLL_MS;
                break;
        case MAINT_START:
                k = act_start(m, x, c, &a, now);
                break;
        case MAINT_COMPACT:
                k = act_compact(m, x, c, run, ret);
                break;
        case MAINT_MOVE_LEADER:
                k = act_move_leader(m, x, c, &o, run, &a, ret);
                break;
        case MAINT_DEFRAG:
                k = act_defrag(m, x, c, &o, run, a.member, ret);
                break;
        case MAINT_DISARM:
                k = act_disarm(m, x, c, &o, run, ret);
                break;
        case MAINT_FINISH:
                k = act_finish(m, c, run, a.message, ret);
                break;
        case MAINT_ABORT:
                fail_run(m, c, run, a.message);
                break;
        }
        if (k < 0) {
                /* a step that could not be taken is tried again on a later pass */
                if (!ret->message[0])
                        str_assign(&ret->message, xstrdup(state_last_error()));
                log_warn("%s: maintenance: %s", c->cluster, ret->message);
                ret->outcome = MAINT_OUT_WAITING;
                ret->poll_ms = MAINT_WAIT_POLL_MS;
        }
        maint_action_release(&a);
        observed_release(&o);
        state_maint_run_list_release(&runs);
        return 0;
}
