/*
 * What one pass sees: the world, rebuilt from scratch every pass.
 *
 * The world is the state store's member records, the target's status of
 * each recorded member, etcd's member list and leader (through the
 * cluster's one connection, kept in its context between passes and dialed
 * again when the endpoints change), and with tls.provider auto the leaf
 * certificates the target holds. From it comes the observation decide()
 * reads (reconciler/decide.h) and the digest that lets an idle converged
 * pass leave the upkeep out (reconciler/quiet.h). The journal says what
 * was in flight; the world says what happened.
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
 *
 * A member the target cannot report on is never taken for absent: the
 * pass stops before deciding anything, and world_record_unknown() records
 * it "unknown" (no longer what was seen last, which stays beside it with
 * its time) with Degraded naming its machine. What the world tells that the
 * records do not say yet (member IDs, learner flags, the cluster ID, the
 * leader, a data identity) is written back by world_record().
 */
#include <jansson.h>
#include <string.h>

#include "reconciler/auth.h"
#include "reconciler/takeover.h"
#include "reconciler/internal.h"
#include "render/render.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/*
 * How often the time a member was last observed is written again while
 * nothing else about it changes. Between those writes the time is kept in
 * the cluster's context and written when the member turns unknown, so an
 * idle pass writes nothing; the record is at most this old only after gitcd
 * restarted while the member could not be seen.
 */
#define SEEN_REFRESH_MS (10 * 60 * 1000)

/* The cluster's slot for when member name was last observed (0: not this run). */
static int64_t *seen_slot(cluster_ctx *x, const char *name)
{
        for (size_t i = 0; i < x->n_seen; i++)
                if (streq(x->seen[i].name, name))
                        return &x->seen[i].ms;
        x->seen = xrealloc(x->seen, (x->n_seen + 1) * sizeof(*x->seen));
        x->seen[x->n_seen] = (struct member_seen){.name = xstrdup(name)};
        return &x->seen[x->n_seen++].ms;
}

/* ---- what a recorded member should run ----------------------------------- */

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

int member_start_plan(reconciler *r, const etcd_cluster *c, state_member *rec,
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
                strv_free(argv);
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

/* ---- the cluster's etcd connection --------------------------------------- */

void cluster_client_tls(reconciler *r, const etcd_cluster *c, char **ret_ca, char **ret_cert,
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
        /* a takeover (takeover.h): the old members too, until they are gone */
        if (x->takeover && !isempty(x->takeover_endpoints))
                sb_printf(&eps, "%s%s", eps.len ? "," : "", x->takeover_endpoints);
        if (eps.len == 0) {
                sb_release(&eps);
                return NULL;
        }
        if (x->client && streq_ptr(x->client_endpoints, sb_str(&eps))) {
                sb_release(&eps);
                return x->client;
        }
        cluster_client_drop(r, x);
        x->client_endpoints = sb_detach(&eps);
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        cluster_client_tls(r, c, &ca, &cert, &key);
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

void cluster_client_drop(reconciler *r, cluster_ctx *x)
{
        if (x->client)
                r->opts.etcd->disconnect(x->client);
        x->client = NULL;
        free(x->client_endpoints);
        x->client_endpoints = NULL;
}

/*
 * Before gitcd stops one of the cluster's members, it closes the
 * connections it keeps to them (its own client's and maintenance's, and
 * the process's idle ones to those endpoints, etcd/pool.h; the next pass
 * dials again, a TLS handshake per member). etcd stops
 * gracefully on SIGTERM: its client server's graceful shutdown sends each
 * HTTP/2 connection a GOAWAY and waits for it to close, which an idle
 * libcurl connection (not read until its next call) does not do, until
 * the server closes it itself about a second later (Go's http2 server's
 * GOAWAY timeout, as far as we can tell). Measured on the local target
 * (etcd 3.5.16, bench-tls): a member stopped while gitcd held its
 * connections took 1.5 to 2.1 s to exit; without them, from a few ms to
 * about 1 s, as one stopped by hand (etcd's peer server waits up to 1 s
 * for its peers' connections). Every rolling restart paid the difference
 * once per member.
 */
void cluster_hang_up(reconciler *r, cluster_ctx *x)
{
        cluster_client_drop(r, x);
        maintenance_hang_up(r->maint, x->name);
}

/* ---- the world ----------------------------------------------------------- */

void world_release(world *w)
{
        state_cluster_free(w->sc);
        free(w->records.items); /* a view into all_records */
        state_member_list_release(&w->all_records);
        etcd_members_free(w->etcd);
        etcd_endpoint_status_free(w->looked);
        for (size_t i = 0; i < w->n; i++) {
                free(w->views[i].name);
                free(w->views[i].command);
                free(w->views[i].want_hash);
                free(w->views[i].unknown);
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

/*
 * The recorded members, each matched with the member etcd lists under its
 * name or peer URL and with the target's status; then the members only
 * etcd knows. -errno when the target could not report a member; every
 * member is asked still, and each it could not report keeps the target's
 * error (view->unknown) for world_record_unknown().
 */
static int observe_members(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        size_t alloc = 0;
        int failed = 0;
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
                int k = r->opts.target->ops->member_status(r->opts.target, c, rec->name, &v->ts);
                if (k < 0) {
                        /* the others are still asked: status shows every member it cannot see */
                        w->target_failed = true;
                        v->unknown = xstrdup(target_last_error(r->opts.target));
                        failed = failed ? failed : k;
                        continue;
                }
                (void)membership_check_identity(rec->data_identity, &v->ts);
                member_wanted(r, c, rec, v);
        }
        if (failed) {
                free(matched);
                return failed;
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
                /* an old member of a takeover: as healthy as its status call says */
                if (takeover_is_foreign(x, em->id)) {
                        etcd_endpoint_status *st = NULL;
                        v->foreign = true;
                        v->ts.state =
                            em->n_client_urls > 0 && x->client &&
                                    r->opts.etcd->status_at(x->client, em->client_urls[0], &st) >= 0
                                ? MEMBER_READY
                                : MEMBER_STARTING;
                        etcd_endpoint_status_free(st);
                }
        }
        free(matched);
        return 0;
}

/* The observation decide() reads, pointing into the member views. */
static void observe_decide_input(const etcd_cluster *c, world *w)
{
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
                o->foreign = v->foreign;
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
}

int world_observe(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        w->observe_began_mono_ms = mono(r);
        int k = state_member_list_for(r->opts.db, x->name, true, &w->all_records);
        if (k < 0)
                return k;
        /* the members not removed, in the same order: one read of the store, not two */
        w->records.items = xcalloc(w->all_records.n + 1, sizeof(*w->records.items));
        for (size_t i = 0; i < w->all_records.n; i++)
                if (!w->all_records.items[i]->removed_ms)
                        w->records.items[w->records.n++] = w->all_records.items[i];

        etcd_conn *cl = cluster_client(r, x, c, &w->records);
        uint64_t leader = 0;
        if (cl && r->opts.etcd->look) {
                if (r->opts.etcd->look(cl, &w->etcd, &leader, &w->looked) == 0)
                        w->leader = leader;
                else
                        w->etcd = NULL;
        } else if (cl && r->opts.etcd->member_list(cl, &w->etcd) == 0) {
                if (r->opts.etcd->leader(cl, &leader) == 0)
                        w->leader = leader;
        } else
                w->etcd = NULL;

        k = observe_members(r, x, c, w);
        if (k < 0)
                return k;
        observe_decide_input(c, w);
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

bool world_has_quorum(const world *w)
{
        return w->obs.etcd_listed && w->voters > 0 && w->healthy_voters >= w->voters / 2 + 1;
}

member_view *world_view(world *w, const char *name)
{
        for (size_t i = 0; name && i < w->n; i++)
                if (streq(w->views[i].name, name))
                        return &w->views[i];
        return NULL;
}

/* ---- what the world told, recorded --------------------------------------- */

/* What `gitcd status` shows of the certificates: the set just read, when it was read. */
static void record_certs(reconciler *r, cluster_ctx *x, const etcd_cluster *c, const world *w)
{
        if (!w->certs_read && c->tls.provider == TLS_PROVIDER_AUTO)
                return;
        /* the set as this process last recorded it for this very row: nothing to ask the store */
        strbuf set = STRBUF_INIT;
        sb_printf(&set, "%lld\n", (long long)(w->sc ? w->sc->created_ms : 0));
        for (size_t i = 0; i < w->n_certs; i++)
                sb_printf(&set, "%s/%s/%lld/%s\n", w->certs[i].member ? w->certs[i].member : "",
                          w->certs[i].surface, (long long)w->certs[i].not_after_ms,
                          w->certs[i].serial ? w->certs[i].serial : "");
        if (streq_ptr(x->certs_recorded, sb_str(&set))) {
                sb_release(&set);
                return;
        }
        state_cert *v = xcalloc(w->n_certs + 1, sizeof(*v));
        for (size_t i = 0; i < w->n_certs; i++)
                v[i] = (state_cert){.member = w->certs[i].member,
                                    .surface = w->certs[i].surface,
                                    .not_after_ms = w->certs[i].not_after_ms,
                                    .serial = w->certs[i].serial};
        if (state_certs_replace(r->opts.db, x->name, v, w->n_certs) < 0) {
                log_warn("%s: cannot record the certificates: %s", x->name, state_last_error());
                str_assign(&x->certs_recorded, NULL);
                sb_release(&set);
        } else {
                str_assign(&x->certs_recorded, sb_detach(&set));
        }
        free(v);
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
                /* seen again: what was kept while it was unknown goes */
                if (v->rec->seen_state || v->rec->unreachable) {
                        str_assign(&v->rec->seen_state, NULL);
                        str_assign(&v->rec->unreachable, NULL);
                        changed = true;
                }
                /* when it was last observed: kept here, written with a change or now and then */
                *seen_slot(x, v->rec->name) = now;
                if (changed || now - v->rec->seen_ms >= SEEN_REFRESH_MS) {
                        v->rec->seen_ms = now;
                        changed = true;
                }
                if (changed)
                        (void)state_member_put(r->opts.db, v->rec, now);
        }
}

void world_record_unknown(reconciler *r, cluster_ctx *x, world *w)
{
        int64_t now = wall(r);
        /* etcd answered: who leads is observed; else a leader gitcd cannot see is not claimed */
        const char *leader = w->sc ? w->sc->leader : NULL;
        if (w->etcd) {
                leader = NULL;
                for (size_t i = 0; i < w->etcd->n; i++)
                        if (w->leader && w->etcd->members[i].id == w->leader)
                                leader = w->etcd->members[i].name;
        }
        strbuf sb = STRBUF_INIT;
        bool news = false; /* logged when what is unknown changes, not every pass */
        for (size_t i = 0; i < w->n; i++) {
                member_view *v = &w->views[i];
                if (!v->unknown || !v->rec)
                        continue;
                state_member *m = v->rec;
                bool changed = false;
                if (!streq_ptr(m->state, "unknown")) {
                        /* the last pass that saw it, which may not have written the time */
                        int64_t seen = *seen_slot(x, m->name);
                        if (seen > m->seen_ms)
                                m->seen_ms = seen;
                        str_assign(&m->seen_state, xstrdup_null(m->state));
                        str_assign(&m->state, xstrdup("unknown"));
                        changed = true;
                }
                if (!streq_ptr(m->unreachable, v->unknown)) {
                        str_assign(&m->unreachable, xstrdup(v->unknown));
                        changed = true;
                }
                if (changed)
                        (void)state_member_put(r->opts.db, m, now);
                news |= changed;
                if (!w->etcd && streq_ptr(leader, m->name))
                        leader = NULL;
                char when[40] = "never";
                if (m->seen_ms)
                        format_rfc3339(m->seen_ms, when, sizeof(when));
                sb_printf(&sb, "%smember %s is unknown: %s (last observed %s at %s)",
                          sb.len ? "; " : "", m->name, v->unknown,
                          m->seen_state ? m->seen_state : "nothing", when);
        }
        if (w->sc && !streq_ptr(w->sc->leader, leader))
                (void)state_cluster_set_leader(r->opts.db, x->name, leader, now);
        if (sb.len) {
                if (news)
                        log_warn("%s: %s", x->name, sb_str(&sb));
                conditions_unreachable(r, x->name, w, sb_str(&sb));
        }
        sb_release(&sb);
}

void world_record(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w)
{
        record_observed(r, x, w);
        record_certs(r, x, c, w);
}
