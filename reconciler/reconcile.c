/*
 * The reconciler's act side: observe, decide (decide.c), act, record.
 *
 * Every pass rebuilds the observation from the world: the state store's
 * member records, the target's status of each member, and etcd's member
 * list. The journal says what was in flight; the world says what happened.
 * Every effect is preceded by an intent in the journal and followed by its
 * outcome and an audit event, so `gitcd log` tells what gitcd did and a
 * restart after a crash at any point converges from what it finds:
 *
 *   - a member planned but never added to etcd: decide() deletes it;
 *   - a learner added to etcd but never started: decide() starts it;
 *   - a promotion done but not recorded: the member list says voter;
 *   - a member removed from etcd whose process still runs: decide() deletes it.
 *
 * Member records (state/state.h) keep the initial cluster a member was
 * first started with, so a restart of an unchanged member renders the same
 * command. "Outdated" is one value: the config hash of the member as
 * the spec renders it now (render_member_config_hash(), carried by the
 * plan) against the hash the target reports its member was started with
 * (the record's, when the target reports none). A changed spec is thus
 * seen as an outdated member to roll one at a time; when the version
 * changes, reconciler/upgrade.c holds each next member until the one before
 * serves the new version, caught up and the cluster settled (UpgradeFailed
 * when it does not come back).
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "etcd/client.h"
#include "maintenance/maintenance.h"
#include "pki/auto.h"
#include "reconciler/adopt.h"
#include "reconciler/auth.h"
#include "reconciler/bootstrap.h"
#include "reconciler/carotate.h"
#include "reconciler/membership.h"
#include "reconciler/quiet.h"
#include "reconciler/reconcile.h"
#include "reconciler/recovery.h"
#include "reconciler/tlsswitch.h"
#include "reconciler/upgrade.h"
#include "reconciler/restore.h"
#include "render/layout.h"
#include "render/render.h"
#include "snapshots/scheduler.h"
#include "snapshots/snapshot.h"
#include "api/spec.h"
#include "util/failpoint.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define POLL_IN_FLIGHT_MS 200
/*
 * A learner etcd refuses to promote (not caught up yet) is asked again soon
 * and then less often: it is usually ready within a few tens of ms of its
 * start, so a fixed 250 ms made the whole scale step wait for it. The wait
 * for a new member to join looks every POLL_PROMOTE_FIRST_MS for its first
 * 100 ms, then doubles up to POLL_IN_FLIGHT_MS.
 */
#define POLL_PROMOTE_FIRST_MS 25
#define POLL_PROMOTE_MS       250
#define POLL_RETRY_MS         1000
#define POLL_BLOCKED_MS       30000 /* a step the target refused (RBAC, ownership) */
/*
 * etcd refuses MemberAdd ("unhealthy cluster") until every voter has been
 * connected for its health interval (5 s) after the previous change.
 */
#define ETCD_HEALTH_INTERVAL_MS 5000

typedef struct cluster_ctx {
        char *name; /* "ns/name" */
        char *latched_hash;
        etcd_cluster *latched;
        char *rejected_hash; /* desired spec refused by the transition rules */
        char *rejected_message;
        etcd_conn *client;
        char *client_endpoints;
        int64_t add_not_before; /* monotonic ms: etcd's health interval after a change */
        bool journal_checked;   /* operations left pending by an earlier run were closed */
        int64_t blocked_until;  /* monotonic ms: a refused step is not tried before */
        char blocked_message[256];
        upgrade_track upgrade; /* the member rolled last onto a new version (upgrade.c) */
        int promote_refusals;  /* in a row, for the learner being promoted (backoff) */
        int join_waits;        /* passes in a row waiting for a new member to join (backoff) */
        quiet_track quiet;     /* which idle passes may leave the upkeep out (quiet.h) */
} cluster_ctx;

struct reconciler {
        reconciler_opts opts;
        maintenance *maint; /* with the real etcd client only; NULL under a fake seam */
        cluster_ctx *ctx;
        size_t n_ctx;
        size_t alloc_ctx;
};

/* One member as observed, owning its strings (decide's obs_member points into these). */
typedef struct member_view {
        state_member *rec; /* NULL for members only etcd knows */
        char *name;
        int ordinal;
        const etcd_member *em;
        target_member_status ts;
        char *want_hash; /* config hash of the member as the spec renders it now */
        char *command;   /* rendered now, joined with spaces: only for a legacy record */
} member_view;

typedef struct world {
        state_cluster *sc;
        state_member_list records;
        state_member_list all_records; /* including removed ones: ordinals are never reused */
        etcd_members *etcd;
        uint64_t leader;
        member_view *views;
        size_t n;
        obs_member *obs_members;
        observation obs;
        int healthy_voters;
        int voters;
        target_cert *certs; /* tls.provider auto: the leaves the target holds */
        size_t n_certs;
        bool certs_read; /* the target told: certs is the whole set */
        obs_cert *obs_certs;
        char *commit; /* the commit and author behind the latched spec, for audit events */
        char *author;
        bool target_failed; /* observe failed because the target could not report a member */
        unsigned char digest[QUIET_DIGEST_LEN]; /* of what was observed (quiet.h) */
        bool quiet; /* the same as the last full pass, which converged: no upkeep */
} world;

const char *pass_outcome_name(pass_outcome o)
{
        switch (o) {
        case PASS_CONVERGED:
                return "converged";
        case PASS_PROGRESSED:
                return "progressed";
        case PASS_WAITING:
                return "waiting";
        case PASS_FAILED:
                return "failed";
        case PASS_BLOCKED:
                return "blocked";
        }
        return "unknown";
}

static int64_t wall(const reconciler *r)
{
        return r->opts.wall_ms ? r->opts.wall_ms() : now_wall_ms();
}

static int64_t mono(const reconciler *r)
{
        return r->opts.mono_ms ? r->opts.mono_ms() : now_mono_ms();
}

int reconciler_new(const reconciler_opts *opts, reconciler **ret)
{
        if (!opts || !opts->db || !opts->target || !opts->target->ops->client_tls ||
            !opts->target->ops->place_member)
                return -EINVAL;
        reconciler *r = XNEW(reconciler);
        r->opts = *opts;
        if (r->opts.etcd_timeout_ms <= 0)
                r->opts.etcd_timeout_ms = 3000;
        if (!r->opts.etcd) {
                r->opts.etcd = &etcd_membership_real;
                maintenance_opts mo = {.db = opts->db, .wall_ms = opts->wall_ms};
                (void)maintenance_new(&mo, &r->maint);
        }
        *ret = r;
        return 0;
}

void reconciler_set_db(reconciler *r, state_db *db)
{
        assert(db);
        r->opts.db = db;
}

static void ctx_release(const reconciler *r, cluster_ctx *x)
{
        free(x->name);
        free(x->latched_hash);
        etcd_cluster_free(x->latched);
        free(x->rejected_hash);
        free(x->rejected_message);
        if (x->client)
                r->opts.etcd->disconnect(x->client);
        free(x->client_endpoints);
        upgrade_track_release(&x->upgrade);
}

void reconciler_free(reconciler *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n_ctx; i++)
                ctx_release(r, &r->ctx[i]);
        free(r->ctx);
        maintenance_free(r->maint);
        free(r);
}

static cluster_ctx *ctx_get(reconciler *r, const char *name)
{
        for (size_t i = 0; i < r->n_ctx; i++)
                if (streq(r->ctx[i].name, name))
                        return &r->ctx[i];
        r->ctx = xgrow(r->ctx, &r->alloc_ctx, r->n_ctx + 1, sizeof(cluster_ctx));
        cluster_ctx *x = &r->ctx[r->n_ctx++];
        memset(x, 0, sizeof(*x));
        x->name = xstrdup(name);
        return x;
}

/* ---- small helpers ------------------------------------------------------- */

/* IDs in the state store are exactly 16 hex digits (etcdctl drops leading zeros). */
static void id_hex16(uint64_t id, char buf[static 17])
{
        snprintf(buf, 17, "%016" PRIx64, id);
}

static char *summary_json(const etcd_cluster *c)
{
        if (!c)
                return NULL;
        json_t *j = json_pack("{s:i, s:s}", "replicas", c->replicas, "version", c->version);
        char *s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        return s;
}

static void audit(reconciler *r, const char *cluster, const char *action, const char *reason,
                  const char *before, const char *after, const char *outcome, int64_t duration_ms,
                  const char *commit, const char *author)
{
        state_audit_event ev = {
            .time_ms = wall(r),
            .cluster = (char *)cluster,
            .commit = (char *)commit,
            .author = (char *)author,
            .action = (char *)action,
            .reason = (char *)reason,
            .before_json = (char *)before,
            .after_json = (char *)after,
            .outcome = (char *)outcome,
            .duration_ms = duration_ms,
        };
        int k = state_audit_append(r->opts.db, &ev, NULL);
        if (k < 0)
                log_warn("%s: could not write the audit event %s: %s", cluster, action,
                         state_last_error());
}

/* The commit and author behind the latched spec, for audit events. */
static void origin_of(reconciler *r, const state_cluster *sc, char **ret_commit, char **ret_author)
{
        *ret_commit = NULL;
        *ret_author = NULL;
        if (!sc || isempty(sc->desired_commit))
                return;
        *ret_commit = xstrdup(sc->desired_commit);
        state_revision *rev = NULL;
        if (state_revision_get(r->opts.db, sc->desired_commit, &rev) == 0 && rev) {
                if (rev->author_name)
                        *ret_author = xasprintf("%s <%s>", rev->author_name,
                                                rev->author_email ? rev->author_email : "");
                state_revision_free(rev);
        }
}

static char *join_strv(char **v)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; v && v[i]; i++) {
                if (i)
                        sb_appendc(&sb, ' ');
                sb_append(&sb, v[i]);
        }
        return sb_detach(&sb);
}

/* A string field of a record's runtime JSON (heap copy), or NULL: what an older gitcd kept. */
static char *runtime_get(const state_member *m, const char *key)
{
        if (!m || isempty(m->runtime_json))
                return NULL;
        json_t *j = json_loads(m->runtime_json, 0, NULL);
        const char *v = j ? json_string_value(json_object_get(j, key)) : NULL;
        char *s = v ? xstrdup(v) : NULL;
        json_decref(j);
        return s;
}

/* The plan to start one recorded member (reconciler/membership.h). */
static int member_start_plan(reconciler *r, const etcd_cluster *c, state_member *rec,
                             membership_plan **ret_plan)
{
        return membership_plan_for_records(r->opts.target, c, &rec, 1, ret_plan);
}

/*
 * What the member of rec should run now: its config hash and, only for a
 * record written by an older gitcd that kept the command line instead of a
 * hash, that command line.
 */
static void member_wanted(reconciler *r, const etcd_cluster *c, state_member *rec, member_view *v)
{
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        if (member_start_plan(r, c, rec, &p) < 0)
                return;
        v->want_hash = xstrdup_null(p->members[0].config_hash);
        _cleanup_free_ char *legacy = runtime_get(rec, "command");
        if (!isempty(legacy)) {
                char **argv = render_member_command(c, p, 0);
                v->command = join_strv(argv);
                render_strv_free(argv);
        }
}

/* Does the member run something else than the spec renders now (flags, version)? */
static bool member_outdated(const member_view *v, const etcd_cluster *c)
{
        if (!v->rec)
                return false;
        if (v->rec->version && !streq(v->rec->version, c->version))
                return true;
        const char *started = v->ts.config_hash ? v->ts.config_hash : v->rec->config_hash;
        if (started)
                return v->want_hash && !streq(started, v->want_hash);
        /* A member started by an older gitcd: compare the command line it recorded. */
        _cleanup_free_ char *cmd = runtime_get(v->rec, "command");
        return !isempty(cmd) && v->command && !streq(cmd, v->command);
}

/* ---- observation --------------------------------------------------------- */

static void world_release(world *w)
{
        state_cluster_free(w->sc);
        state_member_list_release(&w->records);
        state_member_list_release(&w->all_records);
        etcd_members_free(w->etcd);
        for (size_t i = 0; i < w->n; i++) {
                free(w->views[i].name);
                free(w->views[i].command);
                free(w->views[i].want_hash);
                target_member_status_release(&w->views[i].ts);
        }
        free(w->views);
        free(w->obs_members);
        target_certs_free(w->certs, w->n_certs);
        free(w->obs_certs);
        free(w->commit);
        free(w->author);
        memset(w, 0, sizeof(*w));
}

/*
 * Has the member started and published itself? A member added with
 * MemberAdd is listed without a name until then; a member of a static
 * initial cluster is listed with its name from the start, but without
 * client URLs until it has started.
 */
static bool etcd_member_started(const etcd_member *em)
{
        return !isempty(em->name) && em->n_client_urls > 0;
}

static bool etcd_member_has_peer(const etcd_member *em, const char *peer)
{
        for (size_t i = 0; peer && i < em->n_peer_urls; i++)
                if (streq(em->peer_urls[i], peer))
                        return true;
        return false;
}

/* gitcd's own client identity for a cluster with client TLS: the target knows where it is. */
static void client_tls_files(reconciler *r, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                             char **ret_key)
{
        target *t = r->opts.target;
        if (target_client_tls(t, c, ret_ca, ret_cert, ret_key) < 0)
                log_warn("%s/%s: no client certificate for gitcd: %s", c->namespace_, c->name,
                         target_last_error(t));
}

static etcd_conn *cluster_client(reconciler *r, cluster_ctx *x, const etcd_cluster *c,
                                 const state_member_list *recs)
{
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < recs->n; i++) {
                const state_member *m = recs->items[i];
                if (isempty(m->client_url))
                        continue;
                if (eps.len)
                        sb_appendc(&eps, ',');
                sb_append(&eps, m->client_url);
        }
        if (eps.len == 0) {
                sb_release(&eps);
                return NULL;
        }
        if (x->client && streq_ptr(x->client_endpoints, sb_str(&eps))) {
                sb_release(&eps);
                return x->client;
        }
        if (x->client)
                r->opts.etcd->disconnect(x->client);
        x->client = NULL;
        free(x->client_endpoints);
        x->client_endpoints = sb_detach(&eps);
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        client_tls_files(r, c, &ca, &cert, &key);
        auth_creds cr = {0};
        if (auth_credentials(r->opts.state_dir, x->name, &cr) < 0)
                log_warn("%s: cannot read the etcd root password files", x->name);
        etcd_conn_opts o = {
            .endpoints = x->client_endpoints,
            .cacert = ca,
            .cert = cert,
            .key = key,
            .user = cr.user,
            .password = cr.password,
            .fallback_password = cr.fallback_password,
            .call_timeout_ms = r->opts.etcd_timeout_ms,
        };
        if (r->opts.etcd->connect(r->opts.etcd_userdata, &o, &x->client) < 0)
                x->client = NULL;
        auth_creds_release(&cr);
        return x->client;
}

static member_view *view_add(world *w, size_t *alloc)
{
        w->views = xgrow(w->views, alloc, w->n + 1, sizeof(member_view));
        member_view *v = &w->views[w->n++];
        memset(v, 0, sizeof(*v));
        return v;
}

/*
 * The leaf certificates of the recorded members, from the target (it alone
 * knows where they live). Not reading them is no reason to stop the pass:
 * without them nothing is renewed this time.
 */
static void observe_certs(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        target *t = r->opts.target;
        w->obs.now_ms = wall(r);
        if (c->tls.provider != TLS_PROVIDER_AUTO || !t->ops->tls_certificates || w->records.n == 0)
                return;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        if (membership_plan_for_records(t, c, w->records.items, w->records.n, &p) < 0 ||
            t->ops->tls_certificates(t, c, p, &w->certs, &w->n_certs) < 0) {
                target_certs_free(w->certs, w->n_certs);
                w->certs = NULL;
                w->n_certs = 0;
                log_warn("%s: cannot read the TLS certificates: %s", x->name, target_last_error(t));
                return;
        }
        w->obs_certs = xcalloc(w->n_certs + 1, sizeof(obs_cert));
        for (size_t i = 0; i < w->n_certs; i++)
                w->obs_certs[i] = (obs_cert){
                    .member = w->certs[i].member,
                    .surface = w->certs[i].surface,
                    .not_after_ms = w->certs[i].not_after_ms,
                };
        w->obs.certs = w->obs_certs;
        w->obs.n_certs = w->n_certs;
        w->certs_read = true;
}

/* What `gitcd status` shows of the certificates: the set just read, when it was read. */
static void record_certs(reconciler *r, cluster_ctx *x, const etcd_cluster *c, const world *w)
{
        if (!w->certs_read && c->tls.provider == TLS_PROVIDER_AUTO)
                return;
        state_cert *v = xcalloc(w->n_certs + 1, sizeof(*v));
        for (size_t i = 0; i < w->n_certs; i++)
                v[i] = (state_cert){.member = w->certs[i].member,
                                    .surface = w->certs[i].surface,
                                    .not_after_ms = w->certs[i].not_after_ms,
                                    .serial = w->certs[i].serial};
        if (state_certs_replace(r->opts.db, x->name, v, w->n_certs) < 0)
                log_warn("%s: cannot record the certificates: %s", x->name, state_last_error());
        free(v);
}

static int observe(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        int k = state_member_list_for(r->opts.db, x->name, false, &w->records);
        if (k < 0)
                return k;
        k = state_member_list_for(r->opts.db, x->name, true, &w->all_records);
        if (k < 0)
                return k;

        etcd_conn *cl = cluster_client(r, x, c, &w->records);
        if (cl && r->opts.etcd->member_list(cl, &w->etcd) == 0) {
                uint64_t leader = 0;
                if (r->opts.etcd->leader(cl, &leader) == 0)
                        w->leader = leader;
        } else
                w->etcd = NULL;

        size_t alloc = 0;
        bool *matched = w->etcd ? xcalloc(w->etcd->n + 1, sizeof(bool)) : NULL;
        for (size_t i = 0; i < w->records.n; i++) {
                state_member *rec = w->records.items[i];
                member_view *v = view_add(w, &alloc);
                v->rec = rec;
                v->name = xstrdup(rec->name);
                v->ordinal = rec->ordinal;
                for (size_t j = 0; w->etcd && j < w->etcd->n; j++) {
                        const etcd_member *em = &w->etcd->members[j];
                        if (matched[j])
                                continue;
                        if ((!isempty(em->name) && streq(em->name, rec->name)) ||
                            etcd_member_has_peer(em, rec->peer_url)) {
                                v->em = em;
                                matched[j] = true;
                                break;
                        }
                }
                /*
                 * A member the target cannot report on (its machine does not
                 * answer) is not "absent": that would replace a member that
                 * may well run. Nothing is decided for the cluster until the
                 * target answers.
                 */
                k = r->opts.target->ops->member_status(r->opts.target, c, rec->name, &v->ts);
                if (k < 0) {
                        w->target_failed = true;
                        free(matched);
                        return k;
                }
                (void)membership_check_identity(rec->data_identity, &v->ts);
                member_wanted(r, c, rec, v);
        }
        for (size_t j = 0; w->etcd && j < w->etcd->n; j++) {
                if (matched[j])
                        continue;
                const etcd_member *em = &w->etcd->members[j];
                member_view *v = view_add(w, &alloc);
                v->name = xstrdup(em->name ? em->name : "");
                v->ordinal = -1;
                v->em = em;
                v->ts.state = MEMBER_ABSENT;
        }
        free(matched);

        int max_ordinal = -1;
        for (size_t i = 0; i < w->all_records.n; i++) {
                const state_member *m = w->all_records.items[i];
                /* A member etcd never accepted leaves no peer URL behind: its ordinal is free. */
                if (m->removed_ms && isempty(m->member_id))
                        continue;
                max_ordinal = MAX(max_ordinal, m->ordinal);
        }

        w->obs_members = xcalloc(w->n + 1, sizeof(obs_member));
        for (size_t i = 0; i < w->n; i++) {
                member_view *v = &w->views[i];
                obs_member *o = &w->obs_members[i];
                o->name = v->name;
                o->ordinal = v->ordinal;
                o->recorded = v->rec != NULL;
                o->dormant = v->rec && v->rec->dormant;
                o->in_etcd = v->em != NULL;
                o->id = v->em ? v->em->id : 0;
                o->learner = v->em && v->em->is_learner;
                o->unstarted = v->em && !etcd_member_started(v->em);
                o->runtime = v->ts.state;
                o->outdated = member_outdated(v, c);
                /* A member of a static initial cluster that etcd has not listed as started yet. */
                o->static_initial =
                    v->rec && !v->rec->initialized &&
                    streq_ptr(v->rec->initial_cluster_state, "new") && v->rec->initial_cluster &&
                    strchr(v->rec->initial_cluster, ',') && !(v->em && etcd_member_started(v->em));
        }
        w->obs.members = w->obs_members;
        w->obs.n = w->n;
        w->obs.etcd_listed = w->etcd != NULL;
        w->obs.leader_id = w->leader;
        w->obs.bootstrapped = w->sc && !isempty(w->sc->cluster_id);
        w->obs.next_ordinal = max_ordinal + 1;
        observation_voters(&w->obs, &w->voters, &w->healthy_voters);
        observe_certs(r, x, c, w);

        quiet_digest qd = {STRBUF_INIT};
        quiet_digest_cluster(&qd, x->latched_hash, w->sc);
        for (size_t i = 0; i < w->n; i++)
                quiet_digest_member(&qd, w->views[i].rec, &w->views[i].ts, w->views[i].want_hash);
        quiet_digest_etcd(&qd, w->etcd, w->leader);
        quiet_digest_end(&qd, w->digest);
        w->quiet = quiet_may_skip(&x->quiet, w->digest, mono(r));
        return 0;
}

/* A quorum of the voters etcd lists is healthy: what Available and a recovery go by. */
static bool world_has_quorum(const world *w)
{
        return w->obs.etcd_listed && w->voters > 0 && w->healthy_voters >= w->voters / 2 + 1;
}

/* Update recorded facts the world told us: member IDs, learner flags, cluster ID. */
static void record_observed(reconciler *r, cluster_ctx *x, world *w)
{
        int64_t now = wall(r);
        if (w->etcd && w->etcd->cluster_id && w->sc) {
                char id[17];
                id_hex16(w->etcd->cluster_id, id);
                if (!w->sc->cluster_id || !streq(w->sc->cluster_id, id)) {
                        (void)state_cluster_set_id(r->opts.db, x->name, id, now);
                        free(w->sc->cluster_id);
                        w->sc->cluster_id = xstrdup(id);
                        w->obs.bootstrapped = true;
                }
        }
        const char *leader = NULL;
        for (size_t i = 0; i < w->n; i++)
                if (w->leader && w->views[i].em && w->views[i].em->id == w->leader)
                        leader = w->views[i].name;
        if (w->sc && w->etcd && !streq_ptr(w->sc->leader, leader))
                (void)state_cluster_set_leader(r->opts.db, x->name, leader, now);
        for (size_t i = 0; i < w->n; i++) {
                member_view *v = &w->views[i];
                if (!v->rec)
                        continue;
                bool changed = false;
                char id[17] = "";
                if (v->em) {
                        id_hex16(v->em->id, id);
                        if (!v->rec->member_id || !streq(v->rec->member_id, id)) {
                                free(v->rec->member_id);
                                v->rec->member_id = xstrdup(id);
                                changed = true;
                        }
                        if (v->rec->learner != v->em->is_learner) {
                                v->rec->learner = v->em->is_learner;
                                changed = true;
                        }
                        /* Listed as started: it has started and joined once. */
                        if (!v->rec->initialized && etcd_member_started(v->em)) {
                                v->rec->initialized = true;
                                changed = true;
                        }
                }
                /* Joined etcd: from now on, data under another identity is lost data. */
                if (v->rec->initialized && !v->rec->data_identity && v->ts.data_identity) {
                        v->rec->data_identity = xstrdup(v->ts.data_identity);
                        changed = true;
                }
                const char *sname = member_runtime_state_name(v->ts.state);
                if (!streq_ptr(v->rec->state, sname)) {
                        free(v->rec->state);
                        v->rec->state = xstrdup(sname);
                        changed = true;
                }
                if (changed)
                        (void)state_member_put(r->opts.db, v->rec, now);
        }
}

/* ---- acting -------------------------------------------------------------- */

typedef struct act_ctx {
        reconciler *r;
        cluster_ctx *x;
        const etcd_cluster *c;
        world *w;
        const step *s;
        char *commit;
        char *author;
        pass_result *res;
        restore_prep *prep; /* spec.bootstrap.restore: the checked snapshot, once fetched */
} act_ctx;

static member_view *view_by_name(world *w, const char *name)
{
        for (size_t i = 0; name && i < w->n; i++)
                if (streq(w->views[i].name, name))
                        return &w->views[i];
        return NULL;
}

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
        _cleanup_free_ char *subject = who ? xasprintf("{\"member\":\"%s\"}", who) : NULL;
        audit(a->r, a->x->name, action, result < 0 ? error : a->s->message, NULL, subject,
              result < 0 ? "failure" : "success", mono(a->r) - started, a->commit, a->author);
        if (result < 0) {
                log_warn("%s: %s failed: %s", a->x->name, action, error);
                a->res->outcome = PASS_WAITING;
                a->res->poll_ms = POLL_RETRY_MS;
                snprintf(a->res->message, sizeof(a->res->message), "%s failed: %s", action, error);
                /* Refused, not failed: retrying at once cannot help until a person acts. */
                if (result == -EACCES || result == -EEXIST) {
                        a->res->outcome = PASS_BLOCKED;
                        a->res->poll_ms = POLL_BLOCKED_MS;
                        a->x->blocked_until = mono(a->r) + POLL_BLOCKED_MS;
                        snprintf(a->x->blocked_message, sizeof(a->x->blocked_message), "%s",
                                 a->res->message);
                }
                return 0;
        }
        log_info("%s: %s", a->x->name, a->s->message);
        a->res->outcome = PASS_PROGRESSED;
        return 0;
}

/* Does the target hold a member of that name (placed, running or not)? */
static bool target_holds(target *t, const etcd_cluster *c, const char *name)
{
        char **names = NULL;
        size_t n = 0;
        bool found = false;
        if (t->ops->list_members(t, c->namespace_, c->name, &names, &n) < 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                found = found || streq(names[i], name);
                free(names[i]);
        }
        free(names);
        return found;
}

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
        if (!taken && target_holds(a->r->opts.target, c, name))
                taken = true;
        if (taken) {
                snprintf(a->res->message, sizeof(a->res->message),
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
                snprintf(a->res->message, sizeof(a->res->message), "cannot place member %s: %s",
                         name, target_last_error(a->r->opts.target));
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

static int set_cond(reconciler *r, const char *cluster, const char *type, bool status,
                    const char *reason, const char *message, const char *commit,
                    const char *author);

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
                snprintf(a->res->message, sizeof(a->res->message), "cannot restore yet: %s", error);
                log_warn("%s: %s", a->x->name, error);
                return k;
        }
        const char *reason = "RestoreRefused";
        _cleanup_free_ char *msg = xasprintf("spec.bootstrap.restore refused: %s", error);
        set_cond(a->r, a->x->name, "Progressing", false, reason, msg, a->commit, a->author);
        set_cond(a->r, a->x->name, "Degraded", true, reason, msg, a->commit, a->author);
        if (state_cluster_set_terminal(a->r->opts.db, a->x->name, reason, msg, wall(a->r)) < 0)
                log_warn("%s: cannot record the terminal state: %s", a->x->name,
                         state_last_error());
        audit(a->r, a->x->name, "restore.refused", msg, NULL, NULL, "failure", 0, a->commit,
              a->author);
        log_error("%s: %s", a->x->name, msg);
        a->res->outcome = PASS_FAILED;
        snprintf(a->res->reason, sizeof(a->res->reason), "%s", reason);
        snprintf(a->res->message, sizeof(a->res->message), "%s", msg);
        return 0;
}

/* Restore the checked snapshot into member idx's data before its first start (audited). */
static int act_restore(act_ctx *a, const membership_plan *p, size_t idx, char *err, size_t errsize)
{
        int64_t t0 = mono(a->r);
        int k = restore_check(a);
        if (k <= 0) {
                snprintf(err, errsize, "%s", a->res->message);
                return k < 0 ? k : -ECANCELED;
        }
        _cleanup_free_ char *error = NULL;
        FAILPOINT("restore.before-target");
        k = restore_into(a->r->opts.target, a->c, p, idx, a->prep, &error);
        FAILPOINT("restore.after-target");
        _cleanup_free_ char *what =
            xasprintf("%s restored from %s (revision %lld, %lld keys, %lld bytes)",
                      p->members[idx].name, a->prep->source, (long long)a->prep->revision,
                      (long long)a->prep->keys, (long long)a->prep->size);
        _cleanup_free_ char *after = xasprintf("{\"member\":\"%s\",\"revision\":%lld}",
                                               p->members[idx].name, (long long)a->prep->revision);
        audit(a->r, a->x->name, "member.restore", k < 0 ? error : what, NULL, after,
              k < 0 ? "failure" : "success", mono(a->r) - t0, a->commit, a->author);
        if (k < 0)
                snprintf(err, errsize, "%s", error);
        else
                log_info("%s: %s", a->x->name, what);
        return k;
}

/* Start (or restart onto its current command) a recorded member; records its config hash. */
static int start_member(act_ctx *a, state_member *rec, char *err, size_t errsize)
{
        target *t = a->r->opts.target;
        membership_plan *p = NULL;
        int k = member_start_plan(a->r, a->c, rec, &p);
        if (k >= 0)
                k = t->ops->ensure_shared(t, a->c, p);
        if (k >= 0 && restore_due(t, a->c, rec, a->w->obs.bootstrapped))
                k = act_restore(a, p, 0, err, errsize);
        if (k >= 0)
                k = t->ops->ensure_member(t, a->c, p, 0);
        if (k < 0) {
                snprintf(err, errsize, "%s", target_last_error(t));
                membership_plan_free(p);
                return k;
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
                snprintf(err, errsize, "%s", state_last_error());
        return k;
}

static int act_start_seed(act_ctx *a)
{
        int64_t t0 = mono(a->r), op;
        state_member *rec = NULL;
        char err[512] = "";
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
                k = start_member(a, rec, err, sizeof(err));
                FAILPOINT("start-seed.after-start");
                finish(a, op, "member.start-seed", k, err, t0);
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
        char err[sizeof(a->res->message)] = "";
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        /* spec.bootstrap.restore: the snapshot is checked before anything is created. */
        int k = a->c->restore.enabled ? restore_check(a) : 1;
        if (k <= 0)
                return k;
        k = bootstrap_static_plan(r->opts.db, r->opts.target, a->x->name, a->c, a->s->ordinal,
                                  a->s->count, &p, err, sizeof(err));
        if (k >= 0)
                k = bootstrap_static_record(r->opts.db, a->x->name, a->c, p, wall(r), err,
                                            sizeof(err));
        if (k < 0) {
                snprintf(a->res->message, sizeof(a->res->message), "%s", err);
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
                        snprintf(err, sizeof(err), "%s", target_last_error(r->opts.target));
                for (size_t i = 0; k >= 0 && i < p->n; i++) {
                        k = act_restore(a, p, i, err, sizeof(err));
                        if (i == 0)
                                FAILPOINT("bootstrap.after-first-restore");
                }
                if (k < 0)
                        return finish(a, op, "member.bootstrap", k, err, t0);
        }
        k = bootstrap_static_start(r->opts.db, r->opts.target, a->x->name, a->c, p, wall(r), err,
                                   sizeof(err));
        FAILPOINT("bootstrap.after-start");
        /* New voters: etcd takes the next member only after its health interval. */
        if (k >= 0)
                a->x->add_not_before = mono(r) + ETCD_HEALTH_INTERVAL_MS;
        return finish(a, op, "member.bootstrap", k, err, t0);
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
        if (!r->opts.adopt_target || a->w->obs.bootstrapped)
                return 0;
        char msg[sizeof(a->res->message)] = "";
        int k = adopt_try(r->opts.db, r->opts.adopt_target, a->x->name, a->c, a->commit, a->author,
                          r->opts.wall_ms, msg, sizeof(msg));
        if (k == 0)
                return 0;
        snprintf(a->res->message, sizeof(a->res->message), "%s", msg);
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
        log_warn("%s: %s", a->x->name, msg);
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
                        snprintf(a->res->message, sizeof(a->res->message),
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
                        snprintf(a->res->message, sizeof(a->res->message),
                                 "waiting for learner %s to catch up", a->s->member);
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
                        snprintf(a->res->message, sizeof(a->res->message),
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
                member_view *v = view_by_name(a->w, a->s->member);
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
static int confirm_gone(act_ctx *a, const state_member *gone, char *err, size_t errsize)
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
        snprintf(err, errsize,
                 "not deleting %s: %d of the other %d members no longer list it, %d still do "
                 "(%d must confirm)",
                 gone->name, without, asked, with, need);
        return -EAGAIN;
}

static int act_target(act_ctx *a, const char *action)
{
        int64_t t0 = mono(a->r), op;
        target *t = a->r->opts.target;
        member_view *v = view_by_name(a->w, a->s->member);
        char err[512] = "";
        int k = journal_begin(a, action, a->s->member, NULL, &op);
        if (k < 0)
                return k;
        switch (a->s->kind) {
        case STEP_START_MEMBER:
        case STEP_RESTART_MEMBER:
                FAILPOINT("start.before-target");
                k = v && v->rec ? start_member(a, v->rec, err, sizeof(err)) : -ENOENT;
                FAILPOINT("start.after-target");
                break;
        case STEP_DELETE_MEMBER:
                k = v && v->rec && !isempty(v->rec->member_id)
                        ? confirm_gone(a, v->rec, err, sizeof(err))
                        : 0;
                if (k < 0)
                        break;
                k = t->ops->remove_member(t, a->c, a->s->member, false);
                FAILPOINT("delete.after-target");
                if (k >= 0)
                        k = state_member_mark_removed(a->r->opts.db, a->x->name, a->s->member,
                                                      wall(a->r));
                if (k < 0 && !err[0])
                        snprintf(err, sizeof(err), "%s", target_last_error(t));
                break;
        case STEP_STOP_MEMBER:
                k = t->ops->stop_member(t, a->c, a->s->member);
                FAILPOINT("stop.after-target");
                if (k >= 0 && v && v->rec) {
                        v->rec->dormant = true;
                        k = state_member_put(a->r->opts.db, v->rec, wall(a->r));
                }
                if (k < 0 && !err[0])
                        snprintf(err, sizeof(err), "%s", target_last_error(t));
                break;
        default:
                k = -EINVAL;
        }
        if (k < 0 && !err[0])
                snprintf(err, sizeof(err), "%s", strerror(-k));
        return finish(a, op, action, k, err, t0);
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

/* Members the target holds that neither the store nor etcd knows: leftovers of a crash. */
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

/*
 * Operations an earlier gitcd left pending (it crashed or was killed
 * mid-step). The observation that follows says what actually happened, so
 * each one is closed as abandoned and audited; nothing is replayed blindly.
 */
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

static void recover_journal(reconciler *r, cluster_ctx *x)
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

/* ---- conditions ---------------------------------------------------------- */

/* Every reason a condition can give; names are what the store and `gitcd status` show. */
typedef enum cond_reason {
        CR_QUORUM_HEALTHY,
        CR_QUORUM_LOST,
        CR_PAUSED,
        CR_WAITING_FOR_SEED,
        CR_SCALING_UP,
        CR_SCALING_DOWN,
        CR_REPLACING_MEMBER,
        CR_UPGRADING,
        CR_RECOVERING,
        CR_MEMBER_UNHEALTHY,
        CR_SPEC_REJECTED,
        CR_DEADLINE_EXCEEDED,
        CR_BOOTSTRAP_FAILED,
        CR_CERTS_EXPIRED,
        CR_RENEWING_CERTS,
        CR_CERTS_VALID,
        CR_RENEWAL_DUE,
        CR_BOOTSTRAPPING,
        _CR_MAX,
} cond_reason;

static const char *const cond_reason_names[_CR_MAX] = {
    [CR_QUORUM_HEALTHY] = REASON_QUORUM_HEALTHY,
    [CR_QUORUM_LOST] = REASON_QUORUM_LOST,
    [CR_PAUSED] = REASON_PAUSED,
    [CR_WAITING_FOR_SEED] = REASON_WAITING_FOR_SEED,
    [CR_SCALING_UP] = REASON_SCALING_UP,
    [CR_SCALING_DOWN] = REASON_SCALING_DOWN,
    [CR_REPLACING_MEMBER] = REASON_REPLACING_MEMBER,
    [CR_UPGRADING] = REASON_UPGRADING,
    [CR_RECOVERING] = REASON_RECOVERING,
    [CR_MEMBER_UNHEALTHY] = "MemberUnhealthy",
    [CR_SPEC_REJECTED] = "SpecRejected",
    [CR_DEADLINE_EXCEEDED] = "DeadlineExceeded",
    [CR_BOOTSTRAP_FAILED] = "BootstrapFailed",
    [CR_CERTS_EXPIRED] = REASON_CERTS_EXPIRED,
    [CR_RENEWING_CERTS] = REASON_RENEWING_CERTS,
    [CR_CERTS_VALID] = "CertificatesValid",
    [CR_RENEWAL_DUE] = "RenewalDue",
    [CR_BOOTSTRAPPING] = REASON_BOOTSTRAPPING,
};

static const char *cond_reason_name(cond_reason r)
{
        assert(r >= 0 && r < _CR_MAX && cond_reason_names[r]);
        return cond_reason_names[r];
}

/* The typed form of a step's reason (decide.h's REASON_*); NULL: quorum healthy. */
static cond_reason cond_reason_of_step(const step *s)
{
        if (!s->reason)
                return CR_QUORUM_HEALTHY;
        for (int i = 0; i < _CR_MAX; i++)
                if (streq(cond_reason_names[i], s->reason))
                        return (cond_reason)i;
        assert(!"decide() gave a reason the conditions do not know");
        return CR_QUORUM_HEALTHY;
}

/* The facts every condition is judged from, gathered once per pass. */
typedef struct pass_facts {
        bool quorum;
        bool paused;
        bool bootstrapped;
        bool converged;
        int healthy_voters;
        int voters;
        const step *s;
        const char *rejected_message; /* non-NULL: the desired spec was refused */
        char *health;                 /* "N of M voters healthy" */
        const obs_cert *soonest;      /* the certificate that expires first; NULL: none */
        int64_t renew_at_ms;          /* when it enters its renewal window */
        int64_t now_ms;
        char *cert_message;
} pass_facts;

typedef struct condition_check {
        const char *type;
        bool skip; /* the condition does not apply to this cluster: not stored */
        bool status;
        cond_reason reason;
        const char *message;
} condition_check;

static condition_check check_available(const pass_facts *f)
{
        condition_check c = {.type = "Available"};
        if (f->paused) {
                c.reason = CR_PAUSED;
                c.message = "paused: replicas is 0";
        } else if (f->quorum) {
                c.status = true;
                c.reason = CR_QUORUM_HEALTHY;
                c.message = f->health;
        } else if (!f->bootstrapped) {
                c.reason = CR_WAITING_FOR_SEED;
                c.message = "the cluster has not formed yet";
        } else {
                c.reason = CR_QUORUM_LOST;
                c.message = f->health;
        }
        return c;
}

static condition_check check_progressing(const pass_facts *f)
{
        return (condition_check){
            .type = "Progressing",
            .status = !f->converged,
            .reason = cond_reason_of_step(f->s),
            .message = f->s->message,
        };
}

static condition_check check_degraded(const pass_facts *f)
{
        condition_check c = {.type = "Degraded", .message = f->health};
        if (f->rejected_message) {
                c.status = true;
                c.reason = CR_SPEC_REJECTED;
                c.message = f->rejected_message;
                return c;
        }
        bool unhealthy = !f->paused && f->bootstrapped && f->healthy_voters < f->voters;
        c.status = unhealthy || (!f->quorum && f->bootstrapped && !f->paused);
        c.reason = !unhealthy  ? CR_QUORUM_HEALTHY
                   : f->quorum ? CR_MEMBER_UNHEALTHY
                               : CR_QUORUM_LOST;
        return c;
}

/* CertificatesExpiring: True from the moment a leaf enters its renewal window until renewed. */
static condition_check check_certificates_expiring(const pass_facts *f)
{
        condition_check c = {.type = "CertificatesExpiring", .message = f->cert_message};
        if (!f->soonest) {
                c.skip = true;
                return c;
        }
        c.status = f->renew_at_ms <= f->now_ms;
        c.reason = f->soonest->not_after_ms <= f->now_ms ? CR_CERTS_EXPIRED
                   : c.status                            ? CR_RENEWAL_DUE
                                                         : CR_CERTS_VALID;
        return c;
}

/* "the peer certificate of demo-1 expires 2026-11-23T14:31:22Z" */
static char *cert_message(const obs_cert *c, int64_t now_ms)
{
        if (!c)
                return NULL;
        char when[40];
        format_rfc3339(c->not_after_ms, when, sizeof(when));
        return xasprintf("the %s certificate%s%s %s %s", c->surface, c->member ? " of " : "",
                         c->member ? c->member : "",
                         c->not_after_ms <= now_ms ? "expired" : "expires", when);
}

static const char *phase_of(const pass_facts *f)
{
        return f->paused          ? "Paused"
               : !f->bootstrapped ? "Bootstrapping"
               : !f->quorum       ? "QuorumLost"
               : f->converged     ? "Running"
                                  : "Progressing";
}

/* Store a condition; its change (status) is audited. 1 when the status changed. */
static int set_cond(reconciler *r, const char *cluster, const char *type, bool status,
                    const char *reason, const char *message, const char *commit, const char *author)
{
        int k = state_cluster_set_condition(r->opts.db, cluster, type, status ? "True" : "False",
                                            reason, message, wall(r));
        if (k == 1) {
                _cleanup_free_ char *after =
                    xasprintf("{\"type\":\"%s\",\"status\":\"%s\",\"reason\":\"%s\"}", type,
                              status ? "True" : "False", reason);
                audit(r, cluster, "condition.changed", message, NULL, after, "success", 0, commit,
                      author);
        }
        return k;
}

static void store_check(reconciler *r, const char *cluster, const world *w,
                        const condition_check *c)
{
        if (c->skip)
                return;
        int k = set_cond(r, cluster, c->type, c->status, cond_reason_name(c->reason), c->message,
                         w->commit, w->author);
        if (k == 1 && c->status && streq(c->type, "CertificatesExpiring")) {
                audit(r, cluster, "tls.renewal-due", c->message, NULL, NULL, "success", 0,
                      w->commit, w->author);
                log_info("%s: certificate renewal due: %s", cluster, c->message);
        }
}

static void update_conditions(reconciler *r, cluster_ctx *x, const world *w, const desired *want,
                              const step *s)
{
        pass_facts f = {
            .soonest = certs_soonest(&w->obs),
            .renew_at_ms = certs_next_renewal_ms(want, &w->obs),
            .now_ms = w->obs.now_ms,
            .cert_message = cert_message(certs_soonest(&w->obs), w->obs.now_ms),
            .quorum = world_has_quorum(w),
            .paused = s->reason && streq(s->reason, REASON_PAUSED),
            .bootstrapped = w->obs.bootstrapped,
            .converged = s->kind == STEP_CONVERGED,
            .healthy_voters = w->healthy_voters,
            .voters = w->voters,
            .s = s,
            .rejected_message = x->rejected_hash ? x->rejected_message : NULL,
            .health = xasprintf("%d of %d voters healthy", w->healthy_voters, w->voters),
        };
        const condition_check checks[] = {
            check_available(&f),
            check_progressing(&f),
            check_degraded(&f),
            check_certificates_expiring(&f),
        };
        for (size_t i = 0; i < ARRAY_SIZE(checks); i++)
                store_check(r, x->name, w, &checks[i]);
        if (x->latched) /* SnapshotsHealthy: its one checker lives in snapshots/ */
                (void)snapshot_record_health(r->opts.db, x->name, &x->latched->snapshots, wall(r));
        (void)state_cluster_set_phase(r->opts.db, x->name, phase_of(&f), wall(r));
        free(f.health);
        free(f.cert_message);
}

/* ---- the pass ------------------------------------------------------------ */

static int latch(reconciler *r, cluster_ctx *x, state_cluster *sc)
{
        if (!sc->desired_json)
                return -ENOENT;
        bool relatch = !streq_ptr(sc->observed_hash, sc->desired_hash);
        if (relatch || !x->latched || !streq_ptr(x->latched_hash, sc->observed_hash)) {
                const char *json = relatch ? sc->desired_json : sc->observed_json;
                const char *hash = relatch ? sc->desired_hash : sc->observed_hash;
                json_t *j = json_loads(json, 0, NULL);
                diag_list d = DIAG_LIST_INIT;
                etcd_cluster *c = NULL;
                int k = j ? spec_from_json(j, x->name, &c, &d) : -EINVAL;
                json_decref(j);
                diag_list_release(&d);
                if (k < 0)
                        return -EBADMSG;
                etcd_cluster_free(x->latched);
                x->latched = c;
                free(x->latched_hash);
                x->latched_hash = xstrdup(hash);
                if (relatch) {
                        int64_t deadline = wall(r) + (int64_t)c->progress_deadline_seconds * 1000;
                        k = state_cluster_latch(r->opts.db, x->name, json, hash, deadline, wall(r));
                        if (k < 0)
                                return k;
                        /* both, or pass_deadline stores the old spec under the new hash */
                        free(sc->observed_json);
                        sc->observed_json = xstrdup(json);
                        free(sc->observed_hash);
                        sc->observed_hash = xstrdup(hash);
                        sc->progress_deadline_ms = deadline;
                        /* A new latched spec ends any terminal state of the previous one. */
                        k = state_cluster_set_terminal(r->opts.db, x->name, NULL, NULL, wall(r));
                        if (k < 0)
                                return k;
                        free(sc->terminal_reason);
                        free(sc->terminal_message);
                        sc->terminal_reason = sc->terminal_message = NULL;
                        (void)state_cluster_set_condition(r->opts.db, x->name, "Progressing",
                                                          "True", "SpecChanged",
                                                          "working toward the new spec", wall(r));
                        return 1;
                }
        }
        return 0;
}

/*
 * Before observing: latch the spec, and end the pass at once when the
 * cluster is terminal, asks for what the target cannot do, or waits out a
 * refused step. 1: go on; 0: the pass ends with res filled; -errno.
 */
static int pass_begin(reconciler *r, cluster_ctx *x, world *w, pass_result *res)
{
        int k = state_cluster_get(r->opts.db, x->name, &w->sc);
        if (k < 0)
                return k;
        k = latch(r, x, w->sc);
        if (k < 0) {
                snprintf(res->message, sizeof(res->message), "cannot latch the spec: %s",
                         k == -EBADMSG ? "the stored spec does not parse" : state_last_error());
                return k;
        }
        assert(x->latched);
        const etcd_cluster *c = x->latched;
        origin_of(r, w->sc, &w->commit, &w->author);

        /* Terminal until the spec changes: stored as such when the deadline passed. */
        if (w->sc->terminal_reason) {
                res->outcome = PASS_FAILED;
                snprintf(res->reason, sizeof(res->reason), "%s", w->sc->terminal_reason);
                snprintf(res->message, sizeof(res->message), "%s",
                         w->sc->terminal_message ? w->sc->terminal_message : "");
                return 0;
        }

        const target_ops *ops = r->opts.target->ops;
        if ((c->tls.provider == TLS_PROVIDER_SECRETS ||
             c->tls.provider == TLS_PROVIDER_CERT_MANAGER) &&
            !(ops->caps & TARGET_CAP_TLS_FROM_SECRETS)) {
                res->outcome = PASS_FAILED;
                snprintf(res->reason, sizeof(res->reason), "Unsupported");
                snprintf(res->message, sizeof(res->message),
                         "tls.provider %s needs Kubernetes; on the %s target use "
                         "tls.provider auto",
                         tls_provider_name(c->tls.provider), ops->name);
                return 0;
        }

        /* A step the target refused: not again before the pause is over. */
        if (x->blocked_until && mono(r) < x->blocked_until) {
                res->outcome = PASS_BLOCKED;
                res->poll_ms = (int)(x->blocked_until - mono(r));
                snprintf(res->message, sizeof(res->message), "%s", x->blocked_message);
                return 0;
        }
        x->blocked_until = 0;
        return 1;
}

/* Observe the world: the journal left by an earlier run, the target, etcd, the records. */
static int pass_observe(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w,
                        pass_result *res)
{
        recover_journal(r, x);
        (void)r->opts.target->ops->tick(r->opts.target);
        int k = observe(r, x, c, w);
        if (k < 0) {
                snprintf(res->message, sizeof(res->message), "cannot observe: %s",
                         w->target_failed ? target_last_error(r->opts.target) : state_last_error());
                return k;
        }
        record_observed(r, x, w);
        record_certs(r, x, c, w);
        if (!w->quiet) {
                remove_target_strays(r, x, c, w);
                sync_shared(r, x, c, w);
        }
        return 0;
}

/*
 * The progress deadline. Converged: cleared. Work after convergence (a
 * replacement, a restart), or the first pass of this process past the
 * deadline (time gitcd was not running does not count): a fresh deadline.
 * Past it: the latched spec is given up on and the cluster is terminal
 * (stored as such) until a new spec is latched. 1: go on and act; 0: the
 * pass ends with res filled.
 */
static int pass_deadline(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w,
                         const step *s, bool first_pass, pass_result *res)
{
        int64_t now = wall(r);
        const char *latched_json =
            w->sc->observed_json ? w->sc->observed_json : w->sc->desired_json;
        if (s->kind == STEP_CONVERGED) {
                if (w->sc->progress_deadline_ms)
                        (void)state_cluster_latch(r->opts.db, x->name, latched_json,
                                                  x->latched_hash, 0, now);
                res->outcome = PASS_CONVERGED;
                return 0;
        }
        if (w->sc->progress_deadline_ms == 0 || (first_pass && now > w->sc->progress_deadline_ms)) {
                (void)state_cluster_latch(r->opts.db, x->name, latched_json, x->latched_hash,
                                          now + (int64_t)c->progress_deadline_seconds * 1000, now);
                return 1;
        }
        if (now <= w->sc->progress_deadline_ms)
                return 1;

        cond_reason why =
            bootstrap_in_progress(&w->obs) ? CR_BOOTSTRAP_FAILED : CR_DEADLINE_EXCEEDED;
        const char *reason = cond_reason_name(why);
        _cleanup_free_ char *msg =
            xasprintf("no convergence within %ds: %s", c->progress_deadline_seconds, s->message);
        set_cond(r, x->name, "Progressing", false, reason, msg, w->commit, w->author);
        set_cond(r, x->name, "Degraded", true, reason, msg, w->commit, w->author);
        if (state_cluster_set_terminal(r->opts.db, x->name, reason, msg, now) < 0)
                log_warn("%s: cannot record the terminal state: %s", x->name, state_last_error());
        audit(r, x->name, "deadline.exceeded", msg, NULL, NULL, "failure", 0, w->commit, w->author);
        log_error("%s: %s", x->name, msg);
        res->outcome = PASS_FAILED;
        snprintf(res->reason, sizeof(res->reason), "%s", reason);
        snprintf(res->message, sizeof(res->message), "%s", msg);
        return 0;
}

static void act_ctx_release(act_ctx *a)
{
        restore_prep_free(a->prep);
}

/* Take the step decide() chose. 0 (res says how it went), or -errno when it could not start. */
static int pass_act(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w, const step *s,
                    pass_result *res)
{
        _cleanup_(act_ctx_release) act_ctx a = {r, x, c, w, s, w->commit, w->author, res, NULL};
        /* Audit actions are "member." plus the step's name: member.promote, member.remove... */
        _cleanup_free_ char *action = xasprintf("member.%s", step_kind_name(s->kind));
        if (s->kind != STEP_WAIT)
                x->join_waits = 0;
        switch (s->kind) {
        case STEP_WAIT:
                res->outcome = PASS_WAITING;
                res->poll_ms = POLL_IN_FLIGHT_MS;
                /* A new member joins within a few tens of ms: look soon, then less often. */
                if (s->reason && streq(s->reason, REASON_SCALING_UP)) {
                        /* every 25 ms for the first 100 ms, then doubling */
                        int shift = x->join_waits < 4 ? 0 : MIN(x->join_waits - 3, 3);
                        res->poll_ms = MIN(POLL_PROMOTE_FIRST_MS << shift, POLL_IN_FLIGHT_MS);
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
                        snprintf(res->message, sizeof(res->message),
                                 "%s after etcd's health interval", s->message);
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
        assert(!"pass_act: a converged step is handled by pass_deadline");
        return 0;
}

/*
 * etcd auth of a converged cluster (reconciler/auth.h): one step when etcd's
 * auth differs from spec.auth. A step may change the credentials clients
 * use, so the cluster's connection is made again on the next pass.
 */
static void pass_auth(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w,
                      pass_result *res)
{
        if (!x->client_endpoints)
                return;
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        client_tls_files(r, c, &ca, &cert, &key);
        char *secret_pw = NULL;
        _cleanup_free_ char *secret_error = NULL;
        (void)auth_secret_password(r->opts.target, c, r->opts.state_dir, &secret_pw, &secret_error);
        auth_env env = {
            .etcd = r->opts.etcd,
            .etcd_userdata = r->opts.etcd_userdata,
            .base = {.endpoints = x->client_endpoints,
                     .cacert = ca,
                     .cert = cert,
                     .key = key,
                     .call_timeout_ms = r->opts.etcd_timeout_ms},
            .state_dir = r->opts.state_dir,
            .cluster = x->name,
            .want = c->auth.enabled,
            .db = r->opts.db,
            .now_ms = wall(r),
            .commit = w->commit,
            .author = w->author,
            .secret_password = secret_pw,
            .secret_error = secret_error,
        };
        int k = auth_pass(&env, res->message, sizeof(res->message));
        if (secret_pw) {
                explicit_bzero(secret_pw, strlen(secret_pw));
                free(secret_pw);
        }
        if (k == 0)
                return;
        if (k > 0) {
                res->outcome = PASS_PROGRESSED;
                r->opts.etcd->disconnect(x->client);
                x->client = NULL;
                free(x->client_endpoints);
                x->client_endpoints = NULL;
                return;
        }
        log_warn("%s: etcd auth: %s", x->name, res->message);
        res->outcome = PASS_WAITING;
        res->poll_ms = 10 * POLL_RETRY_MS; /* a person may have to act: not every second */
        snprintf(res->reason, sizeof(res->reason), "AuthPending");
}

/*
 * Maintenance of a converged cluster (maintenance/maintenance.h): at most
 * one step per pass; a run in progress keeps the pass from reporting
 * converged, so `gitcd apply` waits for it.
 */
static void pass_maintenance(reconciler *r, const etcd_cluster *c, world *w, pass_result *res)
{
        if (!r->maint)
                return;
        const char **names = xcalloc(w->records.n + 1, sizeof(char *));
        const char **urls = xcalloc(w->records.n + 1, sizeof(char *));
        size_t n = 0;
        for (size_t i = 0; i < w->records.n; i++) {
                const state_member *m = w->records.items[i];
                if (!m->dormant && !m->learner && !isempty(m->client_url)) {
                        names[n] = m->name;
                        urls[n++] = m->client_url;
                }
        }
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        client_tls_files(r, c, &ca, &cert, &key);
        auth_creds cr = {0};
        (void)auth_credentials(r->opts.state_dir, w->sc->name, &cr);
        maint_cluster mc = {.cluster = w->sc->name,
                            .spec = c,
                            .sc = w->sc,
                            .names = names,
                            .client_urls = urls,
                            .n = n,
                            .cacert = ca,
                            .cert = cert,
                            .key = key,
                            .user = cr.user,
                            .password = cr.password,
                            .commit = w->commit,
                            .author = w->author};
        maint_result mr;
        if (maintenance_pass(r->maint, &mc, &mr) == 0 && mr.outcome != MAINT_OUT_IDLE) {
                res->outcome = mr.outcome == MAINT_OUT_ACTED ? PASS_PROGRESSED : PASS_WAITING;
                res->poll_ms = mr.poll_ms;
                snprintf(res->message, sizeof(res->message), "%s", mr.message);
        } else if (mr.poll_ms > 0 && (res->poll_ms == 0 || mr.poll_ms < res->poll_ms)) {
                res->poll_ms = mr.poll_ms;
        }
        auth_creds_release(&cr);
        free(names);
        free(urls);
}

/* ---- rolling version changes (reconciler/upgrade.c) ---------------------- */

/*
 * A snapshot before the first member of a minor upgrade rolls, when the
 * spec configures snapshots. 0 when taken (or not needed), else -errno with
 * *s turned into a wait that says why: no member moves to a new minor
 * without it. A failure blocks the cluster for POLL_BLOCKED_MS (`gitcd
 * apply` reports it and exits; `gitcd run` tries again).
 */
static int snapshot_before_minor(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w,
                                 step *s)
{
        member_view *v = view_by_name(w, s->member);
        semver from, to;
        if (s->kind != STEP_RESTART_MEMBER || !c->snapshots.enabled || !v || !v->rec ||
            semver_parse(v->rec->version, &from) < 0 || semver_parse(c->version, &to) < 0 ||
            from.minor == to.minor)
                return 0;
        for (size_t i = 0; i < w->records.n; i++)
                if (streq_ptr(w->records.items[i]->version, c->version))
                        return 0; /* the rollout has begun: taken before its first member */
        _cleanup_(snapshot_job_freep) snapshot_job *job = NULL;
        _cleanup_free_ char *err = NULL;
        int64_t id = 0;
        int k = r->opts.state_dir
                    ? snapshot_job_from_state(r->opts.db, r->opts.target, x->name, "manual", 0,
                                              r->opts.state_dir, &job, &err)
                    : -ENOTDIR;
        if (k >= 0) {
                /* Recorded as taken on demand (the store knows "manual" and "schedule"). */
                job->reason =
                    xasprintf("snapshot before the upgrade %s → %s", v->rec->version, c->version);
                k = snapshot_take(r->opts.db, job, &id, &err);
        }
        _cleanup_free_ char *subject = xasprintf("{\"snapshot\":%" PRId64 ",\"from\":\"%s\","
                                                 "\"to\":\"%s\"}",
                                                 id, v->rec->version, c->version);
        if (k < 0) {
                snprintf(s->message, sizeof(s->message), "no snapshot before the upgrade to %s: %s",
                         c->version, err ? err : "gitcd has no state folder for it");
                s->kind = STEP_WAIT;
                audit(r, x->name, "upgrade.snapshot", s->message, NULL, subject, "failure", 0,
                      w->commit, w->author);
                log_warn("%s: %s", x->name, s->message);
                /* A person may have to act (destination, credentials): not again at once. */
                x->blocked_until = mono(r) + POLL_BLOCKED_MS;
                snprintf(x->blocked_message, sizeof(x->blocked_message), "%s", s->message);
                return k;
        }
        audit(r, x->name, "upgrade.snapshot", "snapshot before a minor upgrade", NULL, subject,
              "success", 0, w->commit, w->author);
        log_info("%s: snapshot %" PRId64 " taken before the upgrade to %s", x->name, id,
                 c->version);
        return 0;
}

/* The rollout stopped: terminal UpgradeFailed until the spec changes (a rollback). */
static void upgrade_failed(reconciler *r, cluster_ctx *x, const world *w, const step *s,
                           pass_result *res)
{
        int64_t now = wall(r);
        set_cond(r, x->name, "Progressing", false, REASON_UPGRADE_FAILED, s->message, w->commit,
                 w->author);
        set_cond(r, x->name, "Degraded", true, REASON_UPGRADE_FAILED, s->message, w->commit,
                 w->author);
        if (state_cluster_set_terminal(r->opts.db, x->name, REASON_UPGRADE_FAILED, s->message,
                                       now) < 0)
                log_warn("%s: cannot record the terminal state: %s", x->name, state_last_error());
        _cleanup_free_ char *subject = xasprintf("{\"member\":\"%s\"}", s->member);
        audit(r, x->name, "upgrade.failed", s->message, NULL, subject, "failure", 0, w->commit,
              w->author);
        log_error("%s: upgrade failed: %s", x->name, s->message);
        upgrade_track_release(&x->upgrade);
        res->outcome = PASS_FAILED;
        snprintf(res->reason, sizeof(res->reason), "%s", REASON_UPGRADE_FAILED);
        snprintf(res->message, sizeof(res->message), "%s", s->message);
        snprintf(res->member, sizeof(res->member), "%s", s->member ? s->member : "");
}

/*
 * The version the cluster runs, as etcd reports it: the lowest server
 * version of the members, recorded once every recorded member answered.
 */
static void record_running_version(reconciler *r, cluster_ctx *x, world *w,
                                   etcd_endpoint_status *const *st)
{
        const char *low = NULL;
        semver lv = {0};
        for (size_t i = 0; i < w->n; i++) {
                semver v;
                if (!w->views[i].rec)
                        continue;
                if (!st[i] || semver_parse(st[i]->version, &v) < 0)
                        return;
                if (!low || semver_cmp(&v, &lv) < 0) {
                        low = st[i]->version;
                        lv = v;
                }
        }
        if (!low || streq_ptr(w->sc->version, low))
                return;
        if (state_cluster_set_version(r->opts.db, x->name, low, wall(r)) == 0) {
                free(w->sc->version);
                w->sc->version = xstrdup(low);
        }
}

/*
 * The gates of a rolling version change (upgrade.h) around decide()'s step:
 * each member's Status (version, raft index) is asked only while a rollout
 * is under way. 1: go on with *s (maybe rewritten); 0: the rollout failed.
 */
static int upgrade_pass(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w, step *s,
                        pass_result *res)
{
        upgrade_member *um = xcalloc(w->n + 1, sizeof(*um));
        etcd_endpoint_status **st = xcalloc(w->n + 1, sizeof(*st));
        upgrade_obs o = {.version = c->version,
                         .members = um,
                         .n = w->n,
                         .leader_id = w->leader,
                         .now_ms = mono(r)};
        for (size_t i = 0; i < w->n; i++) {
                const member_view *v = &w->views[i];
                um[i] = (upgrade_member){
                    .name = v->name,
                    .id = v->em ? v->em->id : 0,
                    .voter = v->em && !v->em->is_learner,
                    .runtime = v->ts.state,
                    .started_version = v->rec ? v->rec->version : NULL,
                };
        }
        /* While rolling, and until the version etcd reports is recorded for `gitcd status`. */
        bool ask = (upgrade_in_progress(&o) || x->upgrade.member ||
                    !streq_ptr(w->sc->version, c->version)) &&
                   x->client && r->opts.etcd->status_at;
        for (size_t i = 0; ask && i < w->n; i++) {
                const member_view *v = &w->views[i];
                /* Only members the target reports ready: a dead endpoint costs a timeout. */
                if (!v->rec || isempty(v->rec->client_url) || v->ts.state != MEMBER_READY ||
                    r->opts.etcd->status_at(x->client, v->rec->client_url, &st[i]) < 0)
                        continue;
                um[i].answered = true;
                um[i].server_version = st[i]->version;
                um[i].raft_index = st[i]->raft_index;
        }
        if (ask)
                record_running_version(r, x, w, st);
        upgrade_policy pol = upgrade_policy_default;
        if (r->opts.upgrade_settle_ms > 0)
                pol.settle_ms = r->opts.upgrade_settle_ms;
        if (r->opts.upgrade_start_timeout_ms > 0)
                pol.start_timeout_ms = r->opts.upgrade_start_timeout_ms;
        upgrade_verdict verdict = upgrade_gate(&pol, &o, &x->upgrade, s);
        for (size_t i = 0; i < w->n; i++)
                etcd_endpoint_status_free(st[i]);
        free(st);
        free(um);
        if (verdict == UPGRADE_FAILED) {
                upgrade_failed(r, x, w, s, res);
                return 0;
        }
        if (verdict == UPGRADE_PASS && snapshot_before_minor(r, x, c, w, s) < 0)
                upgrade_track_release(&x->upgrade); /* not rolled: nothing to gate */
        return 1;
}

static void world_releasep(world *w)
{
        world_release(w);
}

/* Disaster recovery (reconciler/recovery.c): 1 when this pass is the recovery's. */
static int pass_recovery(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w,
                         pass_result *res)
{
        recovery_env env = {
            .db = r->opts.db,
            .target = r->opts.target,
            .etcd = r->opts.etcd,
            .conn = x->client,
            .c = c,
            .cluster = x->name,
            .records = &w->records,
            .obs = &w->obs,
            .quorum = world_has_quorum(w),
            .latched_json = w->sc->observed_json ? w->sc->observed_json : w->sc->desired_json,
            .latched_hash = x->latched_hash,
            .commit = w->commit,
            .author = w->author,
            .etcd_dir = r->opts.etcd_dir,
            .now_ms = wall(r),
        };
        int k = recovery_pass(&env, res);
        if (k > 0)
                (void)state_cluster_set_phase(r->opts.db, x->name, "Recovering", wall(r));
        return k;
}

/*
 * One pass: begin (latch; terminal, unsupported, blocked), observe, decide,
 * conditions, deadline, act. Each returns early with the pass result filled.
 */
static int pass_run(reconciler *r, cluster_ctx *x, world *wp, pass_result *res)
{
        int k = pass_begin(r, x, wp, res);
        if (k <= 0)
                return k;
        const etcd_cluster *c = x->latched;
        /* TLS switched off (reconciler/tlsswitch.h): the surfaces still on, set on the spec. */
        tlsswitch_env pre = {.db = r->opts.db,
                             .cluster = x->name,
                             .commit = wp->commit,
                             .author = wp->author,
                             .now_ms = wall(r)};
        if ((k = tlsswitch_prepare(&pre, x->latched)) < 0) {
                snprintf(res->message, sizeof(res->message), "TLS switch: %s", state_last_error());
                return k;
        }
        /* CA rotation (reconciler/carotate.h): its phase is set on the spec before observing. */
        carotate_env ca_env = {.db = r->opts.db,
                               .target = r->opts.target,
                               .c = x->latched,
                               .cluster = x->name,
                               .bootstrapped = wp->sc && !isempty(wp->sc->cluster_id),
                               .records = &wp->records,
                               .commit = wp->commit,
                               .author = wp->author,
                               .now_ms = wall(r)};
        if ((k = carotate_prepare(&ca_env)) < 0) {
                snprintf(res->message, sizeof(res->message), "CA rotation: %s", state_last_error());
                return k;
        }

        /* The first pass of this process: time gitcd was not running does not count. */
        bool first_pass = !x->journal_checked;
        k = pass_observe(r, x, c, wp, res);
        if (k < 0)
                return k;
        assert(wp->obs.n == wp->n);
        k = pass_recovery(r, x, c, wp, res);
        if (k != 0)
                return k < 0 ? k : 0;

        int64_t life_s = 0, renew_s = 0;
        pki_auto_lifetime(c, &life_s, &renew_s);
        desired want = {.replicas = c->replicas,
                        .static_bootstrap = c->bootstrap_mode == BOOTSTRAP_STATIC,
                        .renew_before_ms = renew_s * 1000};
        step s;
        decide(&want, &wp->obs, &s);
        if (upgrade_pass(r, x, c, wp, &s, res) == 0)
                return 0; /* UpgradeFailed: terminal, res filled */
        res->step = s.kind;
        snprintf(res->member, sizeof(res->member), "%s", s.member ? s.member : "");
        snprintf(res->reason, sizeof(res->reason), "%s", s.reason ? s.reason : "");
        snprintf(res->message, sizeof(res->message), "%s", s.message);
        update_conditions(r, x, wp, &want, &s);

        if (pass_deadline(r, x, c, wp, &s, first_pass, res) == 0) {
                /* Converged: look again when the next certificate is due for renewal. */
                int64_t due = certs_next_renewal_ms(&want, &wp->obs);
                if (res->outcome == PASS_CONVERGED && due)
                        res->poll_ms = (int)MIN(MAX(due - wp->obs.now_ms, 1000), 3600 * 1000);
                bool new_identity = false;
                if (res->outcome == PASS_CONVERGED &&
                    (k = carotate_converged(&ca_env, res, &new_identity)) != 0) {
                        if (new_identity && x->client) { /* dial again with the new certificate */
                                r->opts.etcd->disconnect(x->client);
                                x->client = NULL;
                                free(x->client_endpoints);
                                x->client_endpoints = NULL;
                        }
                        return k < 0 ? k : 0;
                }
                if (res->outcome == PASS_CONVERGED) {
                        tlsswitch_env ts = {.db = r->opts.db,
                                            .target = r->opts.target,
                                            .c = c,
                                            .cluster = x->name,
                                            .records = &wp->records,
                                            .etcd = wp->etcd,
                                            .leader = wp->leader,
                                            .ops = r->opts.etcd,
                                            .conn = x->client,
                                            .commit = wp->commit,
                                            .author = wp->author,
                                            .now_ms = wall(r)};
                        if ((k = tlsswitch_converged(&ts, res)) != 0)
                                return k < 0 ? k : 0;
                }
                if (res->outcome == PASS_CONVERGED)
                        pass_auth(r, x, c, wp, res);
                if (res->outcome == PASS_CONVERGED)
                        pass_maintenance(r, c, wp, res);
                return 0;
        }
        k = pass_act(r, x, c, wp, &s, res);
        if (k < 0 && res->outcome != PASS_WAITING) {
                res->outcome = PASS_WAITING;
                res->poll_ms = POLL_RETRY_MS;
                if (!res->message[0])
                        snprintf(res->message, sizeof(res->message), "%s", strerror(-k));
        }
        return 0;
}

int reconciler_pass(reconciler *r, const char *cluster, pass_result *res)
{
        memset(res, 0, sizeof(*res));
        cluster_ctx *x = ctx_get(r, cluster);
        _cleanup_(world_releasep) world w = {0};
        int k = pass_run(r, x, &w, res);
        quiet_pass_end(&x->quiet, w.quiet, k >= 0 && res->outcome == PASS_CONVERGED, w.digest,
                       mono(r));
        return k;
}

/* ---- desired specs, orphans, prune --------------------------------------- */

/* Where the cluster's members run, for commands outside the daemon (gitcd snapshot save);
 * also for clusters recorded before the store kept it. Unchanged writes nothing. */
static int record_target(reconciler *r, const char *id)
{
        return r->opts.target ? state_cluster_set_target(r->opts.db, id, r->opts.target->ops->name)
                              : 0;
}

int reconciler_offer(reconciler *r, const etcd_cluster *c, const reconcile_origin *origin)
{
        _cleanup_free_ char *id = etcd_cluster_id(c);
        _cleanup_free_ char *hash = spec_hash(c);
        cluster_ctx *x = ctx_get(r, id);
        const char *commit = origin ? origin->commit : NULL;
        const char *author = origin ? origin->author : NULL;

        state_cluster *sc = NULL;
        int k = state_cluster_get(r->opts.db, id, &sc);
        if (k < 0 && k != -ENOENT)
                return k;
        if (sc && streq_ptr(sc->desired_hash, hash)) {
                free(x->rejected_hash);
                x->rejected_hash = NULL;
                state_cluster_free(sc);
                return record_target(r, id);
        }
        if (x->rejected_hash && streq(x->rejected_hash, hash)) {
                state_cluster_free(sc);
                return 0; /* already refused and recorded */
        }

        /* Transition rules against the spec gitcd has accepted last. */
        etcd_cluster *prev = NULL;
        if (sc && sc->desired_json) {
                json_t *j = json_loads(sc->desired_json, 0, NULL);
                diag_list d = DIAG_LIST_INIT;
                if (j)
                        (void)spec_from_json(j, id, &prev, &d);
                json_decref(j);
                diag_list_release(&d);
        }
        _cleanup_free_ char *before = summary_json(prev);
        _cleanup_free_ char *after = summary_json(c);
        if (prev) {
                diag_list d = DIAG_LIST_INIT;
                /* The versions members were last started on: a rollout may be under way. */
                state_member_list ml = {0};
                (void)state_member_list_for(r->opts.db, id, false, &ml);
                const char **running = xcalloc(ml.n + 1, sizeof(char *));
                size_t n_running = 0;
                for (size_t i = 0; i < ml.n; i++)
                        if (ml.items[i]->initialized) /* holds data */
                                running[n_running++] = ml.items[i]->version;
                /* No record at all: nothing known, the specs alone decide. */
                k = spec_check_transition_running(prev, c, ml.n ? running : NULL, n_running, &d);
                free(running);
                state_member_list_release(&ml);
                if (k < 0) {
                        strbuf why = STRBUF_INIT;
                        for (size_t i = 0; i < d.n; i++) {
                                if (d.items[i].severity != DIAG_ERROR)
                                        continue;
                                _cleanup_free_ char *line = diag_format(&d.items[i]);
                                if (why.len)
                                        sb_append(&why, "; ");
                                sb_append(&why, line);
                        }
                        free(x->rejected_hash);
                        free(x->rejected_message);
                        x->rejected_hash = xstrdup(hash);
                        x->rejected_message = sb_detach(&why);
                        audit(r, id, "spec.rejected", x->rejected_message, before, after,
                              "rejected", 0, commit, author);
                        log_error("%s: new spec rejected: %s", id, x->rejected_message);
                        diag_list_release(&d);
                        etcd_cluster_free(prev);
                        state_cluster_free(sc);
                        return 0;
                }
                diag_list_release(&d);
        }
        etcd_cluster_free(prev);
        state_cluster_free(sc);
        free(x->rejected_hash);
        x->rejected_hash = NULL;

        json_t *j = spec_to_json(c);
        char *json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        k = state_cluster_set_desired(r->opts.db, id, json, hash, commit, wall(r));
        free(json);
        if (k < 0)
                return k;
        if (k > 0) {
                audit(r, id, "spec.accepted", NULL, before, after, "success", 0, commit, author);
                log_info("%s: accepted spec (replicas %d, version %s)", id, c->replicas,
                         c->version);
        }
        return record_target(r, id);
}

int reconciler_orphans(reconciler *r, const char *const *present, size_t n_present,
                       char ***ret_names, size_t *ret_n)
{
        state_cluster_list l = {0};
        int k = state_cluster_list_all(r->opts.db, &l);
        if (k < 0)
                return k;
        strmap defined = STRMAP_INIT;
        for (size_t j = 0; j < n_present; j++)
                (void)strmap_put(&defined, present[j], j);
        char **names = NULL;
        size_t n = 0, alloc = 0;
        for (size_t i = 0; i < l.n; i++) {
                if (!strmap_get(&defined, l.items[i]->name, NULL)) {
                        names = xgrow(names, &alloc, n + 1, sizeof(char *));
                        names[n++] = xstrdup(l.items[i]->name);
                }
        }
        strmap_release(&defined);
        state_cluster_list_release(&l);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

int reconciler_prune(reconciler *r, const char *cluster)
{
        cluster_ctx *x = ctx_get(r, cluster);
        state_cluster *sc = NULL;
        int k = state_cluster_get(r->opts.db, cluster, &sc);
        if (k < 0)
                return k;
        k = latch(r, x, sc);
        if (k < 0 || !x->latched) {
                state_cluster_free(sc);
                return k < 0 ? k : -ENOENT;
        }
        state_member_list l = {0};
        k = state_member_list_for(r->opts.db, cluster, false, &l);
        for (size_t i = 0; k >= 0 && i < l.n; i++) {
                int64_t op;
                if (state_op_begin(r->opts.db, cluster, "member.stop", l.items[i]->name,
                                   "{\"reason\":\"prune\"}", wall(r), &op) < 0)
                        continue;
                int s =
                    r->opts.target->ops->stop_member(r->opts.target, x->latched, l.items[i]->name);
                (void)state_op_finish(r->opts.db, op, s < 0 ? STATE_OP_FAILED : STATE_OP_DONE,
                                      s < 0 ? target_last_error(r->opts.target) : NULL, wall(r));
        }
        state_member_list_release(&l);
        (void)state_cluster_set_phase(r->opts.db, cluster, "Pruned", wall(r));
        audit(r, cluster, "cluster.pruned", "removed from the source; members stopped, data kept",
              NULL, NULL, "success", 0, NULL, NULL);
        state_cluster_free(sc);
        return 0;
}
