/*
 * The pass's effects: the step decide() chose, taken journal-before-act.
 *
 * Every effect is preceded by an intent in the journal and followed by its
 * outcome and an audit event, so `gitcd log` tells what gitcd did and a
 * restart after a crash at any point converges from what it finds:
 *
 *   - a member planned but never added to etcd: decide() deletes it;
 *   - a learner added to etcd but never started: decide() starts it;
 *   - a promotion done but not recorded: the member list says voter;
 *   - a member removed from etcd whose process still runs: decide() deletes it.
 *
 * Operations an earlier run left pending are closed as abandoned once, on
 * the first pass of a process (journal_recover): the observation says what
 * actually happened, nothing is replayed blindly. Each write a crash could
 * cut short is followed by a named failpoint (util/failpoint.h), which
 * tests/e2e/test-crash.c and the fake-world lifecycle test kill gitcd at.
 *
 * A step the target refuses (-EACCES, -EEXIST) blocks the cluster for
 * POLL_BLOCKED_MS: a person must act. etcd's expected refusals (an
 * unhealthy cluster for an add or a removal, a learner not in sync) are
 * waits, not failures, paced by the cluster context.
 *
 * The upkeep of every pass that is not quiet lives here too: target
 * members nobody recorded are removed, and the shared objects (Services,
 * the PodDisruptionBudget, TLS material) follow the members' roles.
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "etcd/client.h"
#include "reconciler/adopt.h"
#include "reconciler/bootstrap.h"
#include "reconciler/internal.h"
#include "reconciler/restore.h"
#include "state/restores.h"
#include "render/render.h"
#include "util/failpoint.h"
#include "util/xalloc.h"

/* ---- journal-before-act -------------------------------------------------- */

/* One step being taken: the pass's world and result, and what the step fetched. */
typedef struct act_ctx {
        reconciler *r;
        cluster_ctx *x;
        const etcd_cluster *c;
        world *w;
        const step *s;
        char *commit;
        char *author;
        pass_result *res;
        restore_prep *prep;     /* spec.bootstrap.restore: the checked snapshot, once fetched */
        state_restore *restore; /* its restore record: the bump every member gets */
} act_ctx;

static int journal_begin(act_ctx *a, const char *kind, const char *subject, const char *payload,
                         int64_t *ret_id)
{
        int k =
            state_op_begin(a->r->opts.db, a->x->name, kind, subject, payload, wall(a->r), ret_id);
        if (k < 0)
                log_error("%s: cannot journal %s %s: %s", a->x->name, kind, subject,
                          state_last_error());
        return k;
}

static void journal_end(act_ctx *a, int64_t id, int result, const char *error)
{
        (void)state_op_finish(a->r->opts.db, id, result < 0 ? STATE_OP_FAILED : STATE_OP_DONE,
                              result < 0 ? error : NULL, wall(a->r));
}

/* Finish: journal outcome, audit, and the pass result. */
static int finish(act_ctx *a, int64_t op, const char *action, int result, const char *error,
                  int64_t started)
{
        journal_end(a, op, result, error);
        const char *who = a->res->member[0] ? a->res->member : a->s->member;
        _cleanup_free_ char *subject = a->s->audit_after ? xstrdup(a->s->audit_after)
                                       : who             ? xasprintf("{\"member\":\"%s\"}", who)
                                                         : NULL;
        audit(a->r, a->x->name, action, result < 0 ? error : a->s->message, NULL, subject,
              result < 0 ? "failure" : "success", mono(a->r) - started, a->commit, a->author);
        if (result < 0) {
                log_warn("%s: %s failed: %s", a->x->name, action, error);
                a->res->outcome = PASS_WAITING;
                a->res->poll_ms = POLL_RETRY_MS;
                pass_say(a->res, "%s failed: %s", action, error);
                /* Refused, not failed: retrying at once cannot help until a person acts. */
                if (result == -EACCES || result == -EEXIST || result == -ESTALE) {
                        a->res->outcome = PASS_BLOCKED;
                        a->res->poll_ms = POLL_BLOCKED_MS;
                        a->x->blocked_until = mono(a->r) + POLL_BLOCKED_MS;
                        str_assign(&a->x->blocked_message, xstrdup(a->res->message));
                }
                return 0;
        }
        log_info("%s: %s", a->x->name, a->s->message);
        a->res->outcome = PASS_PROGRESSED;
        return 0;
}

/* ---- members recorded, restored, started --------------------------------- */

static int new_member_record(act_ctx *a, int ordinal, bool seed, bool learner,
                             const char *initial_cluster_extra, state_member **ret)
{
        const etcd_cluster *c = a->c;
        _cleanup_free_ char *name = render_member_name(c, ordinal);
        /*
         * A current record or a target member of that name was made by someone
         * else (another gitcd on this state): never take it over, so a failure
         * below cleans up only what this call created.
         */
        state_member *other = NULL;
        int k = state_member_get(a->r->opts.db, a->x->name, name, &other);
        bool taken = k >= 0 && other->removed_ms == 0;
        state_member_free(other);
        if (!taken && target_holds_member(a->r->opts.target, c, name))
                taken = true;
        if (taken) {
                pass_say(a->res,
                         "member %s already exists (another gitcd on this state?); not touched",
                         name);
                return -EEXIST;
        }
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_new(c);
        k = membership_plan_append(p, a->r->opts.target, c, name, ordinal, learner, NULL, NULL);
        if (k < 0) {
                /* the target's reason (no free machine, a refused host key) reaches the user */
                log_warn("%s: cannot place member %s: %s", a->x->name, name,
                         target_last_error(a->r->opts.target));
                pass_say(a->res, "cannot place member %s: %s", name,
                         target_last_error(a->r->opts.target));
                return k;
        }
        const member_plan *mp = &p->members[0];
        _cleanup_free_ char *ic =
            initial_cluster_extra ? xasprintf("%s,%s=%s", initial_cluster_extra, name, mp->peer_url)
                                  : xasprintf("%s=%s", name, mp->peer_url);
        state_member *m = XNEW(state_member);
        m->cluster = xstrdup(a->x->name);
        m->name = xstrdup(name);
        m->ordinal = ordinal;
        m->peer_url = xstrdup_null(mp->peer_url);
        m->client_url = xstrdup_null(mp->client_url);
        m->learner = learner;
        m->seed = seed;
        m->version = xstrdup(c->version);
        m->state = xstrdup("absent");
        m->initial_cluster = TAKE_PTR(ic);
        m->initial_cluster_state = xstrdup(seed ? "new" : "existing");
        k = state_member_put(a->r->opts.db, m, wall(a->r));
        if (k < 0) {
                state_member_free(m);
                return k;
        }
        *ret = m;
        return 0;
}

/*
 * spec.bootstrap.restore (reconciler/restore.h): fetch and check the
 * snapshot once per pass. A snapshot refused for what it is (missing,
 * damaged, too new, too large) makes the cluster terminal with reason
 * RestoreRefused until the spec changes: nothing was created. 1: go on
 * with a->prep; 0: refused, the pass ends with res filled; -errno: failed,
 * try again.
 */
static int restore_check(act_ctx *a)
{
        if (a->prep)
                return 1;
        _cleanup_free_ char *error = NULL;
        bool refused = false;
        int k = restore_prepare(a->r->opts.db, a->r->opts.target, a->c, a->r->opts.etcd_dir,
                                &a->prep, &refused, &error);
        if (k >= 0)
                return 1;
        if (!refused) {
                pass_say(a->res, "cannot restore yet: %s", error);
                log_warn("%s: %s", a->x->name, error);
                return k;
        }
        _cleanup_free_ char *msg = xasprintf("spec.bootstrap.restore refused: %s", error);
        conditions_terminal(a->r, a->x->name, a->w, "RestoreRefused", msg, "restore.refused", NULL,
                            a->res);
        log_error("%s: %s", a->x->name, msg);
        return 0;
}

/*
 * The record of this cluster's bootstrap restore (state/restores.h),
 * written before the first member is restored and read back after: its
 * bump, decided once, is every member's. members: the names the restore is
 * for (the static initial cluster, or the seed). 1: a->restore is set; 0:
 * the snapshot was refused (res filled); -errno.
 */
static int restore_record(act_ctx *a, const char *members)
{
        if (a->restore)
                return 1;
        /* recorded by an earlier pass: no need to fetch the snapshot for it */
        state_restore *last = NULL;
        if (state_restore_latest(a->r->opts.db, a->x->name, &last) == 0 &&
            streq(last->origin, "bootstrap")) {
                a->restore = last;
                return 1;
        }
        state_restore_free(last);
        int k = restore_check(a);
        if (k <= 0)
                return k;
        const restore_prep *prep = a->prep;
        _cleanup_(bump_decision_release) bump_decision d = {0};
        restore_bump(a->r->opts.db, &a->c->restore.bump, restore_bump_asker(a->c),
                     prep->from_cluster, prep->revision, prep->taken_ms, 0, wall(a->r), &d);
        state_restore want = {.cluster = a->x->name,
                              .origin = "bootstrap",
                              .source = prep->source,
                              .snapshot_revision = prep->revision,
                              .bump = d.amount,
                              .sizing = d.sizing,
                              .revision = prep->revision + d.amount,
                              .members = (char *)members};
        k = state_restore_record(a->r->opts.db, &want, wall(a->r), &a->restore);
        if (k < 0) {
                pass_say(a->res, "cannot record the restore: %s", state_last_error());
                return k;
        }
        if (k == 0) {
                const state_restore *rec = a->restore;
                _cleanup_free_ char *what = xasprintf(
                    "restore of %s into %s (revision %lld) recorded: revision bump %s, the "
                    "restored data starts at revision %lld",
                    rec->source, rec->members, (long long)rec->snapshot_revision, rec->sizing,
                    (long long)rec->revision);
                json_t *j =
                    json_pack("{s:I, s:s, s:I, s:I, s:I, s:s}", "restore", (json_int_t)rec->id,
                              "source", rec->source, "snapshot_revision",
                              (json_int_t)rec->snapshot_revision, "bump", (json_int_t)rec->bump,
                              "revision", (json_int_t)rec->revision, "members", rec->members);
                _cleanup_free_ char *after = json_dumps(j, JSON_COMPACT);
                json_decref(j);
                audit(a->r, a->x->name, "restore.recorded", what, NULL, after, "success", 0,
                      a->commit, a->author);
                log_info("%s: %s", a->x->name, what);
        }
        return 1;
}

/* The names of a member's --initial-cluster ("a=URL,b=URL" -> "a,b"). */
static char *initial_names(const char *initial_cluster)
{
        strbuf sb = STRBUF_INIT;
        for (const char *p = initial_cluster; p && *p;) {
                size_t len = strcspn(p, ","), eq = strcspn(p, "=");
                if (sb.len)
                        sb_appendc(&sb, ',');
                sb_append_len(&sb, p, MIN(len, eq));
                p = p[len] ? p + len + 1 : NULL;
        }
        return sb_detach(&sb);
}

/* Restore the checked snapshot into member idx's data before its first start (audited). */
static int act_restore(act_ctx *a, const membership_plan *p, size_t idx, char **err)
{
        int64_t t0 = mono(a->r);
        int k = restore_check(a);
        if (k > 0 && !a->restore) {
                _cleanup_free_ char *names = target_restore_initial_cluster(&p->members[idx])
                                                 ? initial_names(p->members[idx].initial_cluster)
                                                 : xstrdup(p->members[idx].name);
                k = restore_record(a, names);
        }
        if (k <= 0) {
                str_assign(err, xstrdup_null(a->res->message));
                return k < 0 ? k : -ECANCELED;
        }
        _cleanup_free_ char *error = NULL;
        FAILPOINT("restore.before-target");
        k = restore_into(a->r->opts.target, a->c, p, idx, a->prep, a->restore->bump, &error);
        FAILPOINT("restore.after-target");
        _cleanup_free_ char *what =
            xasprintf("%s restored from %s (revision %lld, %lld keys, %lld bytes; revision bump "
                      "%s: it starts at revision %lld)",
                      p->members[idx].name, a->prep->source, (long long)a->prep->revision,
                      (long long)a->prep->keys, (long long)a->prep->size, a->restore->sizing,
                      (long long)a->restore->revision);
        _cleanup_free_ char *after = xasprintf(
            "{\"member\":\"%s\",\"revision\":%lld,\"bump\":%lld,\"restored_revision\":%lld}",
            p->members[idx].name, (long long)a->prep->revision, (long long)a->restore->bump,
            (long long)a->restore->revision);
        audit(a->r, a->x->name, "member.restore", k < 0 ? error : what, NULL, after,
              k < 0 ? "failure" : "success", mono(a->r) - t0, a->commit, a->author);
        if (k < 0)
                str_assign(err, xstrdup_null(error));
        else
                log_info("%s: %s", a->x->name, what);
        return k;
}

/*
 * A member a restore was for, about to start on data gitcd did not just
 * restore into it: the data must hold the restore's revision
 * (restore_check_data). Refused (-ESTALE), the cluster is blocked until a
 * person moves the data away; the refusal is audited once and Degraded
 * says why while it stands.
 */
static int act_check_data(act_ctx *a, const state_member *rec, char **err)
{
        reconciler *r = a->r;
        _cleanup_free_ char *why = NULL;
        int k = restore_check_data(r->opts.db, r->opts.target, a->c, a->x->name, rec,
                                   r->opts.etcd_dir, &why);
        if (k >= 0)
                return 0;
        str_assign(err, xstrdup(why ? why : "cannot check the member's data"));
        if (k != -ESTALE)
                return k;
        if (!streq_ptr(a->x->stale_message, why)) {
                _cleanup_free_ char *subject = xasprintf("{\"member\":\"%s\"}", rec->name);
                audit(r, a->x->name, "member.refused", why, NULL, subject, "rejected", 0, a->commit,
                      a->author);
                log_error("%s: %s", a->x->name, why);
                conditions_refused(r, a->x->name, a->w, why);
        }
        free(a->x->stale_message);
        a->x->stale_message = xstrdup(why);
        return k;
}

/* Start (or restart onto its current command) a recorded member; records its config hash. */
static int start_member(act_ctx *a, state_member *rec, char **err)
{
        target *t = a->r->opts.target;
        membership_plan *p = NULL;
        int k = member_start_plan(a->r, a->c, rec, &p);
        if (k >= 0)
                k = t->ops->ensure_shared(t, a->c, p);
        /* a restore in progress is recorded before any of its members starts */
        if (k >= 0 && a->c->restore.enabled && !a->w->obs.bootstrapped) {
                _cleanup_free_ char *names = target_restore_initial_cluster(&p->members[0])
                                                 ? initial_names(rec->initial_cluster)
                                                 : xstrdup(rec->name);
                k = restore_record(a, names);
                if (k <= 0) {
                        str_assign(err, xstrdup_null(a->res->message));
                        membership_plan_free(p);
                        return k < 0 ? k : -ECANCELED;
                }
        }
        bool restored = false;
        if (k >= 0 && restore_due(t, a->c, rec, a->w->obs.bootstrapped)) {
                k = act_restore(a, p, 0, err);
                restored = k >= 0;
        }
        if (k < 0) {
                if (!*err || !**err)
                        str_assign(err, xstrdup(target_last_error(t)));
                membership_plan_free(p);
                return k;
        }
        if (!restored && (k = act_check_data(a, rec, err)) < 0) {
                membership_plan_free(p);
                return k;
        }
        k = t->ops->ensure_member(t, a->c, p, 0);
        if (k < 0) {
                str_assign(err, xstrdup(target_last_error(t)));
                membership_plan_free(p);
                return k;
        }
        /* the member refused for its data before starts now (restored): Degraded follows */
        _cleanup_free_ char *refused = xasprintf("member %s ", rec->name);
        if (a->x->stale_message && strneq(a->x->stale_message, refused, strlen(refused))) {
                free(a->x->stale_message);
                a->x->stale_message = NULL;
        }
        free(rec->config_hash);
        rec->config_hash = xstrdup_null(p->members[0].config_hash);
        /* What an older gitcd kept in the runtime JSON (its command line) is superseded. */
        free(rec->runtime_json);
        rec->runtime_json = NULL;
        rec->dormant = false;
        free(rec->version);
        rec->version = xstrdup(a->c->version);
        membership_plan_free(p);
        k = state_member_put(a->r->opts.db, rec, wall(a->r));
        if (k < 0)
                str_assign(err, xstrdup(state_last_error()));
        return k;
}

/* ---- the steps ----------------------------------------------------------- */

static int act_start_seed(act_ctx *a)
{
        int64_t t0 = mono(a->r), op;
        state_member *rec = NULL;
        _cleanup_free_ char *err = NULL;
        /* spec.bootstrap.restore: the snapshot is checked before anything is created. */
        int k = a->c->restore.enabled ? restore_check(a) : 1;
        if (k <= 0)
                return k;
        k = new_member_record(a, a->s->ordinal, true, false, NULL, &rec);
        if (k < 0)
                return k;
        snprintf(a->res->member, sizeof(a->res->member), "%s", rec->name);
        FAILPOINT("start-seed.after-record");
        k = journal_begin(a, "member.start-seed", rec->name, NULL, &op);
        if (k >= 0) {
                k = start_member(a, rec, &err);
                FAILPOINT("start-seed.after-start");
                finish(a, op, "member.start-seed", k, err ? err : "", t0);
                k = 0;
        }
        state_member_free(rec);
        return k;
}

/*
 * A static bootstrap (reconciler/bootstrap.h): every member recorded (the
 * marker that the cluster may form from now on), journaled, with
 * spec.bootstrap.restore every member restored from the one checked
 * snapshot, then all started. After a crash midway, the members not
 * started yet are restored (when they hold no data) and started one by
 * one by the start step (restore_due).
 */
static int act_bootstrap(act_ctx *a)
{
        int64_t t0 = mono(a->r), op;
        reconciler *r = a->r;
        _cleanup_free_ char *err = NULL;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        /* spec.bootstrap.restore: the snapshot is checked before anything is created. */
        int k = a->c->restore.enabled ? restore_check(a) : 1;
        if (k <= 0)
                return k;
        k = bootstrap_static_plan(r->opts.db, r->opts.target, a->x->name, a->c, a->s->ordinal,
                                  a->s->count, &p, &err);
        if (k >= 0)
                k = bootstrap_static_record(r->opts.db, a->x->name, a->c, p, wall(r), &err);
        if (k < 0) {
                pass_say(a->res, "%s", err ? err : "");
                return k;
        }
        if (a->c->restore.enabled) {
                _cleanup_free_ char *names = initial_names(p->members[0].initial_cluster);
                k = restore_record(a, names);
                if (k <= 0)
                        return k;
        }
        snprintf(a->res->member, sizeof(a->res->member), "%s", p->members[0].name);
        FAILPOINT("bootstrap.after-records");
        json_t *j = json_pack("{s:s, s:s, s:i}", "initial_cluster", p->members[0].initial_cluster,
                              "token", p->cluster_token, "members", (int)p->n);
        _cleanup_free_ char *payload = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        k = journal_begin(a, "member.bootstrap", p->members[0].name, payload, &op);
        if (k < 0)
                return k;
        FAILPOINT("bootstrap.after-journal");
        if (a->c->restore.enabled) {
                k = r->opts.target->ops->ensure_shared(r->opts.target, a->c, p);
                if (k < 0)
                        str_assign(&err, xstrdup(target_last_error(r->opts.target)));
                for (size_t i = 0; k >= 0 && i < p->n; i++) {
                        k = act_restore(a, p, i, &err);
                        if (i == 0)
                                FAILPOINT("bootstrap.after-first-restore");
                }
                if (k < 0)
                        return finish(a, op, "member.bootstrap", k, err ? err : "", t0);
        }
        k = bootstrap_static_start(r->opts.db, r->opts.target, a->x->name, a->c, p, wall(r), &err);
        FAILPOINT("bootstrap.after-start");
        /* New voters: etcd takes the next member only after its health interval. */
        if (k >= 0)
                a->x->add_not_before = mono(r) + ETCD_HEALTH_INTERVAL_MS;
        return finish(a, op, "member.bootstrap", k, err ? err : "", t0);
}

/*
 * Adoption (reconciler/adopt.h), before a cluster with no records is
 * bootstrapped: 0 when there is nothing to adopt (bootstrap), 1 when the
 * pass's result is set: adopted, refused (blocked, nothing changed), or
 * the machines could not be read (tried again; never bootstrapped then).
 */
static int act_adopt(act_ctx *a)
{
        reconciler *r = a->r;
        if (!r->opts.target->ops->adopt || a->w->obs.bootstrapped)
                return 0;
        _cleanup_free_ char *msg = NULL;
        int k = adopt_try(r->opts.db, r->opts.target, a->x->name, a->c, a->commit, a->author,
                          r->opts.wall_ms, &msg);
        if (k == 0)
                return 0;
        pass_say(a->res, "%s", msg ? msg : "");
        if (k > 0) {
                a->res->outcome = PASS_PROGRESSED;
                return 1;
        }
        if (k == -EPERM) {
                a->res->outcome = PASS_BLOCKED;
                a->res->poll_ms = POLL_BLOCKED_MS;
                a->x->blocked_until = mono(r) + POLL_BLOCKED_MS;
                snprintf(a->res->reason, sizeof(a->res->reason), "AdoptionRefused");
                return 1;
        }
        log_warn("%s: %s", a->x->name, a->res->message);
        a->res->outcome = PASS_WAITING;
        a->res->poll_ms = POLL_RETRY_MS;
        return 1;
}

static char *started_initial_cluster(world *w)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; w->etcd && i < w->etcd->n; i++) {
                const etcd_member *em = &w->etcd->members[i];
                if (isempty(em->name) || em->n_peer_urls == 0)
                        continue;
                if (sb.len)
                        sb_appendc(&sb, ',');
                sb_printf(&sb, "%s=%s", em->name, em->peer_urls[0]);
        }
        return sb_detach(&sb);
}

static int act_add_learner(act_ctx *a)
{
        int64_t t0 = mono(a->r), op;
        state_member *rec = NULL;
        _cleanup_free_ char *ic = started_initial_cluster(a->w);
        int k = new_member_record(a, a->s->ordinal, false, true, ic, &rec);
        if (k < 0)
                return k;
        snprintf(a->res->member, sizeof(a->res->member), "%s", rec->name);
        _cleanup_free_ char *payload = xasprintf("{\"peer_url\":\"%s\"}", rec->peer_url);
        FAILPOINT("add-learner.after-record");
        k = journal_begin(a, "member.add-learner", rec->name, payload, &op);
        if (k >= 0) {
                const etcd_membership_ops *eo = a->r->opts.etcd;
                uint64_t id = 0;
                FAILPOINT("add-learner.after-journal");
                k = eo->add_learner(a->x->client, rec->peer_url, &id);
                FAILPOINT("add-learner.after-etcd");
                if (k >= 0) {
                        char hex[17];
                        id_hex16(id, hex);
                        free(rec->member_id);
                        rec->member_id = xstrdup(hex);
                        (void)state_member_put(a->r->opts.db, rec, wall(a->r));
                }
                if (k == ETCD_ERR_UNHEALTHY || k == ETCD_ERR_TOO_MANY_LEARNERS) {
                        /*
                         * Expected: etcd accepts a new member only once every voter has been
                         * connected for its health interval. Not a failure: wait and retry.
                         */
                        (void)state_op_finish(a->r->opts.db, op, STATE_OP_ABANDONED,
                                              eo->last_error(a->x->client), wall(a->r));
                        a->res->outcome = PASS_WAITING;
                        a->res->poll_ms = POLL_RETRY_MS;
                        a->x->add_not_before = mono(a->r) + POLL_RETRY_MS;
                        pass_say(a->res,
                                 "waiting for etcd to accept a new member (every voter must be "
                                 "connected for 5 s)");
                } else
                        finish(a, op, "member.add-learner", k,
                               k < 0 ? eo->last_error(a->x->client) : NULL, t0);
                if (k < 0 && k != ETCD_ERR_PEER_URL_EXISTS) {
                        /*
                         * etcd did not take it: forget the planned member and its ports
                         * (both created by this call). Never on PEER_URL_EXISTS: etcd
                         * holds a member at that URL, and the next observation matches
                         * it with this record.
                         */
                        target *t = a->r->opts.target;
                        (void)t->ops->remove_member(t, a->c, rec->name, false);
                        (void)state_member_mark_removed(a->r->opts.db, a->x->name, rec->name,
                                                        wall(a->r));
                }
                k = 0;
        }
        state_member_free(rec);
        return k;
}

static int act_simple_etcd(act_ctx *a, const char *action)
{
        int64_t t0 = mono(a->r), op;
        etcd_conn *cl = a->x->client;
        const etcd_membership_ops *eo = a->r->opts.etcd;
        char hex[17];
        etcd_member_id_format(a->s->member_id, hex);
        int k = journal_begin(a, action, a->s->member ? a->s->member : hex, NULL, &op);
        if (k < 0)
                return k;
        FAILPOINT(a->s->kind == STEP_PROMOTE         ? "promote.before-etcd"
                  : a->s->kind == STEP_REMOVE_MEMBER ? "remove.before-etcd"
                                                     : "move-leader.before-etcd");
        switch (a->s->kind) {
        case STEP_PROMOTE:
                k = eo->promote(cl, a->s->member_id);
                FAILPOINT("promote.after-etcd");
                if (k == ETCD_ERR_MEMBER_NOT_LEARNER)
                        k = 0; /* promoted already (a lagging member list): idempotent */
                if (k == ETCD_ERR_MEMBER_NOT_IN_SYNC) {
                        /* Expected while the learner catches up: not a failure. */
                        (void)state_op_finish(a->r->opts.db, op, STATE_OP_ABANDONED,
                                              "learner not in sync yet", wall(a->r));
                        a->res->outcome = PASS_WAITING;
                        a->res->poll_ms =
                            MIN(POLL_PROMOTE_FIRST_MS << MIN(a->x->promote_refusals, 4),
                                POLL_PROMOTE_MS);
                        a->x->promote_refusals++;
                        pass_say(a->res, "waiting for learner %s to catch up", a->s->member);
                        return 0;
                }
                break;
        case STEP_MOVE_LEADER:
                k = eo->move_leader(cl, a->s->member_id);
                FAILPOINT("move-leader.after-etcd");
                break;
        case STEP_REMOVE_MEMBER:
                k = eo->remove(cl, a->s->member_id);
                FAILPOINT("remove.after-etcd");
                if (k == ETCD_ERR_MEMBER_NOT_FOUND)
                        k = 0; /* already gone: idempotent */
                if (k == ETCD_ERR_UNHEALTHY) {
                        /* etcd's own guard: the others must be connected for 5 s. Wait. */
                        (void)state_op_finish(a->r->opts.db, op, STATE_OP_ABANDONED,
                                              eo->last_error(cl), wall(a->r));
                        a->res->outcome = PASS_WAITING;
                        a->res->poll_ms = POLL_RETRY_MS;
                        a->x->add_not_before = mono(a->r) + POLL_RETRY_MS;
                        pass_say(a->res,
                                 "waiting for etcd to accept removing %s (the others must be "
                                 "connected for 5 s)",
                                 a->s->member);
                        return 0;
                }
                break;
        default:
                k = -EINVAL;
        }
        /* A new voter must be connected for etcd's health interval before the next add. */
        if (k >= 0 && a->s->kind == STEP_PROMOTE) {
                a->x->add_not_before = mono(a->r) + ETCD_HEALTH_INTERVAL_MS;
                a->x->promote_refusals = 0;
        }
        if (k >= 0 && a->s->kind == STEP_PROMOTE) {
                member_view *v = world_view(a->w, a->s->member);
                if (v && v->rec) {
                        v->rec->learner = false;
                        (void)state_member_put(a->r->opts.db, v->rec, wall(a->r));
                }
        }
        return finish(a, op, action, k, k < 0 ? eo->last_error(cl) : NULL, t0);
}

/*
 * Before a member's data goes because the member list read this pass does
 * not have it: ask every other recorded member, each on its own endpoint.
 * A quorum of them must answer without the member, and none with it. One
 * member's list is not enough: a member restarted with force-new-cluster
 * lists only itself. -EAGAIN (with why in err) when not confirmed.
 */
static int confirm_gone(act_ctx *a, const state_member *gone, char **err)
{
        const etcd_membership_ops *eo = a->r->opts.etcd;
        uint64_t id = 0;
        if (etcd_member_id_parse(gone->member_id, &id) < 0 || !a->x->client)
                return 0;
        int asked = 0, without = 0, with = 0;
        for (size_t i = 0; i < a->w->records.n; i++) {
                const state_member *m = a->w->records.items[i];
                if (m == gone || streq(m->name, gone->name) || isempty(m->member_id) ||
                    isempty(m->client_url))
                        continue;
                asked++;
                etcd_members *l = NULL;
                if (eo->member_list_at(a->x->client, m->client_url, &l) < 0)
                        continue;
                if (etcd_members_find(l, id))
                        with++;
                else
                        without++;
                etcd_members_free(l);
        }
        int need = asked / 2 + 1;
        if (with == 0 && without >= need)
                return 0;
        str_assign(
            err,
            xasprintf("not deleting %s: %d of the other %d members no longer list it, %d still do "
                      "(%d must confirm)",
                      gone->name, without, asked, with, need));
        return -EAGAIN;
}

static int act_target(act_ctx *a, const char *action)
{
        int64_t t0 = mono(a->r), op;
        target *t = a->r->opts.target;
        member_view *v = world_view(a->w, a->s->member);
        _cleanup_free_ char *err = NULL;
        int k = journal_begin(a, action, a->s->member, NULL, &op);
        if (k < 0)
                return k;
        switch (a->s->kind) {
        case STEP_START_MEMBER:
        case STEP_RESTART_MEMBER:
                FAILPOINT("start.before-target");
                if (a->s->kind == STEP_RESTART_MEMBER)
                        cluster_hang_up(a->r, a->x); /* its stop need not wait for them */
                k = v && v->rec ? start_member(a, v->rec, &err) : -ENOENT;
                FAILPOINT("start.after-target");
                break;
        case STEP_DELETE_MEMBER:
                k = v && v->rec && !isempty(v->rec->member_id) ? confirm_gone(a, v->rec, &err) : 0;
                if (k < 0)
                        break;
                k = t->ops->remove_member(t, a->c, a->s->member, false);
                FAILPOINT("delete.after-target");
                if (k >= 0)
                        k = state_member_mark_removed(a->r->opts.db, a->x->name, a->s->member,
                                                      wall(a->r));
                if (k < 0 && (!err || !*err))
                        str_assign(&err, xstrdup(target_last_error(t)));
                break;
        case STEP_STOP_MEMBER:
                cluster_hang_up(a->r, a->x);
                k = t->ops->stop_member(t, a->c, a->s->member);
                FAILPOINT("stop.after-target");
                if (k >= 0 && v && v->rec) {
                        v->rec->dormant = true;
                        k = state_member_put(a->r->opts.db, v->rec, wall(a->r));
                }
                if (k < 0 && (!err || !*err))
                        str_assign(&err, xstrdup(target_last_error(t)));
                break;
        default:
                k = -EINVAL;
        }
        if (k < 0 && (!err || !*err))
                str_assign(&err, xstrdup(strerror(-k)));
        return finish(a, op, action, k, err ? err : "", t0);
}

/*
 * Renew one member's leaf certificates (member NULL: the shared ones). The
 * target swaps the files; etcd picks them up on its next connections, so
 * nothing restarts and quorum is never at stake. Audited as tls.renew.
 */
static int act_renew_certs(act_ctx *a)
{
        int64_t t0 = mono(a->r), op;
        target *t = a->r->opts.target;
        const char *subject = a->s->member ? a->s->member : "*";
        int k = journal_begin(a, "tls.renew", subject, NULL, &op);
        if (k < 0)
                return k;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        k = membership_plan_for_records(t, a->c, a->w->records.items, a->w->records.n, &p);
        FAILPOINT("renew.before-target");
        if (k >= 0)
                k = t->ops->renew_tls ? t->ops->renew_tls(t, a->c, p, a->s->member, wall(a->r))
                                      : -EOPNOTSUPP;
        _cleanup_free_ char *err = k < 0 ? xstrdup(target_last_error(t)) : NULL;
        if (k == 0 && a->s->kind == STEP_RENEW_CERTS) {
                /* Nothing was due after all (renewed by an earlier run): look again. */
                log_debug("%s: no certificate of %s needed renewal", a->x->name, subject);
        }
        if (k >= 0 && a->s->reason && streq(a->s->reason, REASON_CERTS_EXPIRED))
                log_warn("%s: %s (the certificates had expired; members may have been "
                         "unreachable until now)",
                         a->x->name, a->s->message);
        return finish(a, op, "tls.renew", k, err && *err ? err : k < 0 ? strerror(-k) : NULL, t0);
}

/* ---- the upkeep of every pass -------------------------------------------- */

/*
 * Keep the cluster-wide objects (Services, PodDisruptionBudget, TLS
 * material) in step with the members as they are now: every recorded
 * member with its role as etcd reports it. Steps pass only the member they
 * start; this pass-level call is what updates the PDB after a promotion or
 * a removal. Only with a fresh member list, so roles are known. A failure
 * is logged and the step goes on: members keep running either way.
 */
static void sync_shared(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        target *t = r->opts.target;
        if (!w->etcd || w->records.n == 0)
                return;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        if (membership_plan_for_records(t, c, w->records.items, w->records.n, &p) < 0)
                return;
        if (t->ops->ensure_shared(t, c, p) < 0)
                log_warn("%s: cannot update the shared objects: %s", x->name, target_last_error(t));
}

/* Members the target holds that neither the store nor etcd knows: leftovers of a crash. */
static void remove_target_strays(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        target *t = r->opts.target;
        char **names = NULL;
        size_t n = 0;
        if (t->ops->list_members(t, c->namespace_, c->name, &names, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                bool known = false;
                for (size_t j = 0; j < w->all_records.n && !known; j++)
                        known = streq(w->all_records.items[j]->name, names[i]);
                bool removed = false;
                for (size_t j = 0; j < w->all_records.n; j++)
                        if (streq(w->all_records.items[j]->name, names[i]) &&
                            w->all_records.items[j]->removed_ms)
                                removed = true;
                if (!known || removed) {
                        int64_t op;
                        if (state_op_begin(r->opts.db, x->name, "member.delete", names[i],
                                           "{\"reason\":\"not recorded\"}", wall(r), &op) >= 0) {
                                int k = t->ops->remove_member(t, c, names[i], false);
                                (void)state_op_finish(r->opts.db, op,
                                                      k < 0 ? STATE_OP_FAILED : STATE_OP_DONE,
                                                      k < 0 ? target_last_error(t) : NULL, wall(r));
                                log_info("%s: removed leftover member %s", x->name, names[i]);
                        }
                }
                free(names[i]);
        }
        free(names);
}

void act_upkeep(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        remove_target_strays(r, x, c, w);
        sync_shared(r, x, c, w);
}

/* ---- a crashed run's journal --------------------------------------------- */

/* When the last membership change happened (from the audit log), for etcd's health interval. */
static void init_add_pacing(reconciler *r, cluster_ctx *x)
{
        static const char *const actions[] = {"member.promote", "member.start", "member.restart",
                                              "member.bootstrap"};
        int64_t last = 0;
        for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
                state_audit_filter f = {.cluster = x->name, .action = actions[i], .limit = 1};
                state_audit_list l = {0};
                if (state_audit_query(r->opts.db, &f, &l) == 0 && l.n > 0)
                        last = MAX(last, l.items[0]->time_ms);
                state_audit_list_release(&l);
        }
        int64_t wait = last + ETCD_HEALTH_INTERVAL_MS - wall(r);
        if (wait > 0)
                x->add_not_before = mono(r) + MIN(wait, (int64_t)ETCD_HEALTH_INTERVAL_MS);
}

/*
 * Operations an earlier gitcd left pending (it crashed or was killed
 * mid-step). The observation that follows says what actually happened, so
 * each one is closed as abandoned and audited; nothing is replayed blindly.
 */
void journal_recover(reconciler *r, cluster_ctx *x)
{
        if (x->journal_checked)
                return;
        init_add_pacing(r, x);
        state_op_list l = {0};
        if (state_op_list_pending(r->opts.db, x->name, &l) < 0)
                return;
        for (size_t i = 0; i < l.n; i++) {
                const state_op *op = l.items[i];
                _cleanup_free_ char *why =
                    xasprintf("%s %s was in flight when gitcd stopped; re-observed", op->kind,
                              op->subject ? op->subject : "");
                audit(r, x->name, "journal.recovered", why, NULL, op->payload_json, "success", 0,
                      NULL, NULL);
                log_info("%s: %s", x->name, why);
        }
        if (l.n)
                (void)state_op_abandon_pending(r->opts.db, x->name,
                                               "gitcd restarted; the cluster was observed again",
                                               wall(r));
        state_op_list_release(&l);
        x->journal_checked = true;
}

/* ---- the step decided ---------------------------------------------------- */

static void act_ctx_release(act_ctx *a)
{
        restore_prep_free(a->prep);
        state_restore_free(a->restore);
}

int act_step(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w, const step *s,
             pass_result *res)
{
        _cleanup_(act_ctx_release)
            act_ctx a = {r, x, c, w, s, w->commit, w->author, res, NULL, NULL};
        /* Audit actions are "member." plus the step's name: member.promote, member.remove... */
        _cleanup_free_ char *action = xasprintf("member.%s", step_kind_name(s->kind));
        if (s->kind != STEP_WAIT)
                x->join_waits = 0;
        switch (s->kind) {
        case STEP_WAIT:
                res->outcome = PASS_WAITING;
                res->poll_ms = POLL_IN_FLIGHT_MS;
                /*
                 * A new member joins within a few tens of ms, and a member a rolling
                 * restart just restarted serves within a few hundred (the next
                 * restart waits for it): look soon, then less often.
                 */
                if (s->reason &&
                    (streq(s->reason, REASON_SCALING_UP) || streq(s->reason, REASON_UPGRADING))) {
                        /* every 25 ms for the first 100 ms, then doubling */
                        int shift = x->join_waits < 4 ? 0 : MIN(x->join_waits - 3, 3);
                        res->poll_ms = MIN(POLL_PROMOTE_FIRST_MS << shift, POLL_IN_FLIGHT_MS);
                        x->join_waits++;
                } else if (s->reason && (streq(s->reason, REASON_BOOTSTRAPPING) ||
                                         streq(s->reason, REASON_WAITING_FOR_SEED))) {
                        int64_t look = mono(r) - w->observe_began_mono_ms;
                        if (x->join_waits < POLL_FORMING_LOOKS)
                                res->poll_ms =
                                    (int)MIN(MAX(POLL_FORMING_MS, look), POLL_IN_FLIGHT_MS);
                        x->join_waits++;
                }
                return 0;
        case STEP_START_SEED:
        case STEP_BOOTSTRAP: {
                /* machines that already run the cluster are adopted, never bootstrapped over */
                if (act_adopt(&a))
                        return 0;
                return s->kind == STEP_BOOTSTRAP ? act_bootstrap(&a) : act_start_seed(&a);
        }
        case STEP_ADD_LEARNER:
                if (mono(r) < x->add_not_before) {
                        res->outcome = PASS_WAITING;
                        res->poll_ms = (int)(x->add_not_before - mono(r));
                        pass_say(res, "%s after etcd's health interval", s->message);
                        return 0;
                }
                return x->client ? act_add_learner(&a) : -ENOTCONN;
        case STEP_PROMOTE:
        case STEP_MOVE_LEADER:
        case STEP_REMOVE_MEMBER:
                assert(s->member_id != 0);
                return act_simple_etcd(&a, action);
        case STEP_START_MEMBER:
        case STEP_RESTART_MEMBER:
        case STEP_DELETE_MEMBER:
        case STEP_STOP_MEMBER:
                assert(s->member);
                return act_target(&a, action);
        case STEP_RENEW_CERTS:
                return act_renew_certs(&a);
        case STEP_CONVERGED:
                break;
        }
        assert(!"act_step: a converged pass ends at the progress deadline");
        return 0;
}
