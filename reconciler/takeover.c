/*
 * The takeover of a cluster another operator runs (spec.adopt; see
 * takeover.h). The steps, each a separate pass, each recorded before it
 * is taken:
 *
 *   survey ──▶ judge ──▶ record (old members, cluster ID, objects) ──▶
 *   add learner ▶ start ▶ promote ▶ remove an old member ─┐  (decide 8b,
 *        ▲                                                 │   act.c, each
 *        └───────────── while etcd lists an old member ◀───┘   journaled)
 *   ──▶ old client Service pointed at gitcd's voters (once gitcd has one)
 *   ──▶ finished: nothing of the old cluster left in etcd; its objects are
 *       listed for the user, never deleted
 *
 * Invariants: nothing is written before the record (a refusal changes
 * nothing); the old members are those the record names, so a member etcd
 * lists that is neither gitcd's nor the old cluster's is never taken for
 * an old one; the cluster ID is recorded with it, so no seed is ever
 * started beside the old cluster (decide: want->takeover); the old
 * operator is checked on every pass, and the move stops (blocked) when it
 * acts again. A gitcd killed at any point finds the record, the journal
 * and etcd's member list, and takes the next step from them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reconciler/takeover.h"
#include "state/takeovers.h"
#include "util/failpoint.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define REASON_REFUSED "TakeoverRefused"

int takeover_judge(const takeover_fact *f, size_t n, const char *version, char **ret_why)
{
        if (n == 0) {
                *ret_why = xstrdup("etcd lists no member");
                return -EPERM;
        }
        for (size_t i = 0; i < n; i++) {
                char hex[17];
                snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)f[i].id);
                const char *who = isempty(f[i].name) ? hex : f[i].name;
                if (isempty(f[i].name)) {
                        *ret_why = xasprintf("member %s was added but never started; finish or "
                                             "undo that change first",
                                             hex);
                        return -EPERM;
                }
                if (f[i].learner) {
                        *ret_why = xasprintf("member %s is a learner; promote or remove it first "
                                             "(a takeover changes membership one step at a "
                                             "time)",
                                             who);
                        return -EPERM;
                }
                if (!f[i].answered) {
                        *ret_why = xasprintf("member %s does not answer; every member must be "
                                             "healthy before a takeover",
                                             who);
                        return -EPERM;
                }
                if (f[i].n_errors > 0) {
                        *ret_why =
                            xasprintf("member %s reports alarms or errors; clear them first", who);
                        return -EPERM;
                }
                if (!streq_ptr(f[i].version, version)) {
                        *ret_why = xasprintf("member %s runs etcd %s and the spec says %s: set "
                                             "spec.version to the version the cluster runs (and "
                                             "upgrade once it is gitcd's)",
                                             who, f[i].version ? f[i].version : "?", version);
                        return -EPERM;
                }
                if (f[i].cluster_id != f[0].cluster_id) {
                        *ret_why = xasprintf("member %s belongs to another cluster than %s", who,
                                             isempty(f[0].name) ? "the first" : f[0].name);
                        return -EPERM;
                }
        }
        return 0;
}

bool takeover_is_foreign(const cluster_ctx *x, uint64_t id)
{
        for (size_t i = 0; x->takeover && i < x->n_takeover_ids; i++)
                if (x->takeover_ids[i] == id)
                        return true;
        return false;
}

void takeover_ctx_release(cluster_ctx *x)
{
        x->takeover = false;
        free(x->takeover_endpoints);
        x->takeover_endpoints = NULL;
        free(x->takeover_ids);
        x->takeover_ids = NULL;
        x->n_takeover_ids = 0;
}

/* A refusal: the pass is blocked, with the reason as its message, audited once per reason. */
static int refuse(reconciler *r, cluster_ctx *x, const char *why, const char *commit,
                  const char *author, pass_result *res)
{
        _cleanup_free_ char *msg = xasprintf("takeover refused: %s", why);
        state_audit_filter f = {.cluster = x->name, .action = "cluster.adopt", .limit = 1};
        state_audit_list l = {0};
        bool again = state_audit_query(r->opts.db, &f, &l) == 0 && l.n == 1 &&
                     streq_ptr(l.items[0]->reason, msg) &&
                     streq_ptr(l.items[0]->outcome, "rejected");
        state_audit_list_release(&l);
        if (!again) {
                audit(r, x->name, "cluster.adopt", msg, NULL, NULL, "rejected", 0, commit, author);
                log_error("%s: %s", x->name, msg);
        }
        res->outcome = PASS_BLOCKED;
        res->poll_ms = POLL_BLOCKED_MS;
        snprintf(res->reason, sizeof(res->reason), "%s", REASON_REFUSED);
        pass_say(res, "%s", msg);
        return 1;
}

/* The old cluster could not be read: try again soon, never start anything. */
static int cannot_read(reconciler *r, cluster_ctx *x, const char *what, pass_result *res)
{
        res->outcome = PASS_WAITING;
        res->poll_ms = POLL_RETRY_MS * 5;
        snprintf(res->reason, sizeof(res->reason), "%s", REASON_TAKING_OVER);
        pass_say(res, "takeover: %s", what);
        log_warn("%s: %s", x->name, res->message);
        (void)r;
        return 1;
}

/* Load the record's old member IDs into x. */
static void load_ids(cluster_ctx *x, const state_takeover *t)
{
        json_t *ms = json_loads(t->members_json, 0, NULL);
        free(x->takeover_ids);
        x->n_takeover_ids = 0;
        x->takeover_ids = xcalloc(json_array_size(ms) + 1, sizeof(uint64_t));
        size_t i;
        json_t *m;
        json_array_foreach(ms, i, m)
        {
                uint64_t id = 0;
                if (etcd_member_id_parse(json_string_value(json_object_get(m, "id")), &id) >= 0)
                        x->takeover_ids[x->n_takeover_ids++] = id;
        }
        json_decref(ms);
}

/* The takeover recorded: cluster.adopt with what was found, member.adopt per old member. */
static void audit_begun(reconciler *r, cluster_ctx *x, const state_takeover *t, json_t *ms,
                        const char *commit, const char *author)
{
        _cleanup_free_ char *summary =
            xasprintf("{\"source\":\"%s\",\"cluster_id\":\"%s\",\"members\":%s,\"objects\":%s}",
                      t->source, t->cluster_id, t->members_json, t->objects_json);
        audit(r, x->name, "cluster.adopt",
              "takeover begun: gitcd's members replace the old cluster's one at a time", NULL,
              summary, "success", 0, commit, author);
        size_t i;
        json_t *m;
        json_array_foreach(ms, i, m)
        {
                _cleanup_free_ char *one = json_dumps(m, JSON_COMPACT);
                audit(r, x->name, "member.adopt",
                      "a member of the old cluster, to be replaced by one of gitcd's", NULL, one,
                      "success", 0, commit, author);
        }
}

/*
 * The first time: etcd's member list and every member's status through
 * the old members' endpoints, judged; then the record, before any step.
 */
static int begin(reconciler *r, cluster_ctx *x, const etcd_cluster *c, const takeover_survey *sv,
                 const char *commit, const char *author, pass_result *res)
{
        state_member_list recs = {0};
        int k = state_member_list_for(r->opts.db, x->name, true, &recs);
        size_t n_recs = recs.n;
        state_member_list_release(&recs);
        if (k < 0)
                return cannot_read(r, x, state_last_error(), res);
        if (n_recs > 0)
                return refuse(r, x,
                              "gitcd already ran members of this cluster; a takeover starts "
                              "from a cluster gitcd never ran (remove spec.adopt)",
                              commit, author, res);

        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        cluster_client_tls(r, c, &ca, &cert, &key);
        etcd_conn_opts o = {.endpoints = sv->endpoints,
                            .cacert = ca,
                            .cert = cert,
                            .key = key,
                            .call_timeout_ms = r->opts.etcd_timeout_ms};
        etcd_conn *cl = NULL;
        etcd_members *l = NULL;
        if (r->opts.etcd->connect(r->opts.etcd_userdata, &o, &cl) < 0)
                return cannot_read(r, x, "cannot connect to the old members", res);
        if (r->opts.etcd->member_list(cl, &l) < 0) {
                _cleanup_free_ char *e = xasprintf("no old member answers the member list (%s): %s",
                                                   sv->endpoints, r->opts.etcd->last_error(cl));
                r->opts.etcd->disconnect(cl);
                return cannot_read(r, x, e, res);
        }
        takeover_fact *f = xcalloc(l->n + 1, sizeof(takeover_fact));
        etcd_endpoint_status **st = xcalloc(l->n + 1, sizeof(*st));
        for (size_t i = 0; i < l->n; i++) {
                const etcd_member *m = &l->members[i];
                f[i] = (takeover_fact){.id = m->id, .name = m->name, .learner = m->is_learner};
                if (m->n_client_urls > 0 &&
                    r->opts.etcd->status_at(cl, m->client_urls[0], &st[i]) >= 0) {
                        f[i].answered = true;
                        f[i].version = st[i]->version;
                        f[i].cluster_id = st[i]->cluster_id;
                        f[i].n_errors = st[i]->n_errors;
                }
        }
        r->opts.etcd->disconnect(cl);
        char *why = NULL;
        k = takeover_judge(f, l->n, c->version, &why);

        state_takeover t = {.cluster = x->name, .source = sv->source, .started_ms = wall(r)};
        json_t *ms = json_array();
        for (size_t i = 0; k >= 0 && i < l->n; i++) {
                const etcd_member *m = &l->members[i];
                char id[17];
                id_hex16(m->id, id);
                json_array_append_new(
                    ms, json_pack("{s:s, s:s, s:s?, s:s?}", "id", id, "name", m->name, "peer_url",
                                  m->n_peer_urls ? m->peer_urls[0] : NULL, "client_url",
                                  m->n_client_urls ? m->client_urls[0] : NULL));
        }
        json_t *objs = json_array();
        for (size_t i = 0; i < sv->n_objects; i++)
                json_array_append_new(objs, json_string(sv->objects[i]));
        char cid[17];
        id_hex16(l->cluster_id, cid);
        _cleanup_free_ char *mj = json_dumps(ms, JSON_COMPACT);
        _cleanup_free_ char *oj = json_dumps(objs, JSON_COMPACT);
        t.cluster_id = cid;
        t.members_json = mj;
        t.objects_json = oj;
        t.service = sv->service;
        for (size_t i = 0; i < l->n; i++)
                etcd_endpoint_status_free(st[i]);
        free(st);
        free(f);
        json_decref(objs);
        if (k < 0) {
                json_decref(ms);
                etcd_members_free(l);
                int e = refuse(r, x, why, commit, author, res);
                free(why);
                return e;
        }

        /* the record, and the cluster ID with it: from here on no seed is ever started */
        FAILPOINT("takeover.before-record");
        k = state_begin(r->opts.db);
        if (k >= 0)
                k = state_takeover_begin(r->opts.db, &t);
        if (k >= 0)
                k = state_cluster_set_id(r->opts.db, x->name, cid, wall(r));
        if (k >= 0)
                k = state_commit(r->opts.db);
        else
                (void)state_rollback(r->opts.db);
        if (k < 0) {
                json_decref(ms);
                etcd_members_free(l);
                return cannot_read(r, x, state_last_error(), res);
        }
        audit_begun(r, x, &t, ms, commit, author);
        log_info("%s: taking over %s (cluster %s, %zu members)", x->name, sv->source, cid, l->n);
        json_decref(ms);
        etcd_members_free(l);
        FAILPOINT("takeover.after-record");
        return 0;
}

int takeover_prepare(reconciler *r, cluster_ctx *x, const etcd_cluster *c, const char *commit,
                     const char *author, pass_result *res)
{
        /* a takeover is begun only with spec.adopt: once none is under way, none is without it */
        if (c->adopt.from == ADOPT_FROM_NONE && x->takeover_none) {
                takeover_ctx_release(x);
                return 0;
        }
        _cleanup_(state_takeover_freep) state_takeover *t = NULL;
        int k = state_takeover_get(r->opts.db, x->name, &t);
        if (k < 0 && k != -ENOENT)
                return cannot_read(r, x, state_last_error(), res);
        bool under_way = t && !t->finished_ms;
        x->takeover_none = false;
        if (!under_way && (t || c->adopt.from == ADOPT_FROM_NONE)) {
                x->takeover_none = true;
                takeover_ctx_release(x);
                return 0;
        }
        if (c->adopt.from == ADOPT_FROM_NONE) {
                /*
                 * Under way, and spec.adopt removed: the old members are
                 * known from its survey only (their endpoints, whether
                 * their operator acts). Without it gitcd would see members
                 * it does not know in a cluster it runs half of, so it
                 * changes nothing until spec.adopt is back.
                 */
                takeover_ctx_release(x);
                _cleanup_free_ char *why =
                    xasprintf("spec.adopt was removed while the takeover of %s is under way "
                              "(old members are still in the cluster); put spec.adopt back as it "
                              "was until `gitcd status` shows the takeover finished",
                              t->source);
                return refuse(r, x, why, commit, author, res);
        }
        target *tg = r->opts.target;
        if (!tg->ops->takeover) {
                res->outcome = PASS_FAILED;
                snprintf(res->reason, sizeof(res->reason), "Unsupported");
                pass_say(res,
                         "spec.adopt needs the Kubernetes target; the %s target cannot take "
                         "a cluster over",
                         tg->ops->name);
                return 1;
        }
        takeover_survey sv = {0};
        char *why = NULL;
        k = tg->ops->takeover->survey(tg, c, &sv, &why);
        if (k == -EPERM) {
                int e = refuse(r, x, why, commit, author, res);
                free(why);
                return e;
        }
        if (k == -EACCES) {
                /* RBAC: the survey is the first call of a takeover, so nothing was written */
                _cleanup_free_ char *e =
                    xasprintf("gitcd may not read the old cluster (deploy/rbac.yaml grants it): %s",
                              target_last_error(tg));
                return refuse(r, x, e, commit, author, res);
        }
        if (k < 0)
                return cannot_read(r, x, target_last_error(tg), res);
        if (t && !streq_ptr(t->source, sv.source)) {
                /* spec.adopt changed mid-move: the record's old members are another cluster's */
                takeover_ctx_release(x);
                _cleanup_free_ char *moved =
                    xasprintf("spec.adopt names %s, but the takeover under way is of %s; put "
                              "spec.adopt back as it was until the takeover finished",
                              sv.source, t->source);
                takeover_survey_release(&sv);
                return refuse(r, x, moved, commit, author, res);
        }
        if (!t) {
                k = begin(r, x, c, &sv, commit, author, res);
                if (k == 0)
                        k = state_takeover_get(r->opts.db, x->name, &t) < 0
                                ? cannot_read(r, x, state_last_error(), res)
                                : 0;
                if (k != 0) {
                        takeover_survey_release(&sv);
                        return k;
                }
        }
        x->takeover = true;
        str_assign(&x->takeover_endpoints, TAKE_PTR(sv.endpoints));
        load_ids(x, t);
        takeover_survey_release(&sv);
        return 0;
}

/* A voter of gitcd's that answers: the old client Service may select gitcd's voters. */
static bool own_voter_ready(const world *w)
{
        for (size_t i = 0; i < w->obs.n; i++) {
                const obs_member *m = &w->obs.members[i];
                if (m->recorded && !m->foreign && m->in_etcd && !m->learner &&
                    m->runtime == MEMBER_READY)
                        return true;
        }
        return false;
}

void takeover_observed(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        if (!x->takeover)
                return;
        _cleanup_(state_takeover_freep) state_takeover *t = NULL;
        if (state_takeover_get(r->opts.db, x->name, &t) < 0)
                return;
        target *tg = r->opts.target;
        if (t->service && !t->service_selector_before && own_voter_ready(w)) {
                char *before = NULL;
                FAILPOINT("takeover.before-service");
                int k = tg->ops->takeover->point_service(tg, c, t->service, &before);
                if (k > 0) {
                        (void)state_takeover_set_service_before(r->opts.db, x->name, before);
                        _cleanup_free_ char *why = xasprintf(
                            "the old client Service %s now selects gitcd's voters", t->service);
                        audit(r, x->name, "cluster.adopt", why, before, NULL, "success", 0,
                              w->commit, w->author);
                        log_info("%s: %s", x->name, why);
                } else if (k < 0)
                        log_warn("%s: cannot point the old client Service %s at gitcd's voters: "
                                 "%s",
                                 x->name, t->service, target_last_error(tg));
                free(before);
        }
        if (!w->obs.etcd_listed || w->records.n == 0)
                return;
        for (size_t i = 0; i < w->obs.n; i++)
                if (w->obs.members[i].foreign)
                        return;
        /* none of the old members is left in etcd */
        if (state_takeover_finish(r->opts.db, x->name, wall(r)) > 0) {
                _cleanup_free_ char *after = xasprintf("{\"left_for_you_to_delete\":%s}",
                                                       t->objects_json ? t->objects_json : "[]");
                audit(r, x->name, "cluster.adopt",
                      "takeover finished: only gitcd's members are left; the old operator's "
                      "objects are left for you to delete",
                      NULL, after, "success", 0, w->commit, w->author);
                log_info("%s: takeover of %s finished; left for you to delete: %s", x->name,
                         t->source, t->objects_json);
        }
        takeover_ctx_release(x);
}
