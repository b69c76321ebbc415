/*
 * The reconciler object: its options, one context per cluster (what one
 * pass tells the next: the etcd connection, pacing, backoff, a refused
 * step), and the specs it works toward.
 *
 * A desired spec offered from a source revision is checked against the
 * transition rules and recorded (audit `spec.accepted`, or `spec.rejected`
 * with the rule's reason, the last accepted spec staying in force). A pass
 * latches it at its start, the next step boundary (reconciler_latch). A
 * cluster the source no longer has is an orphan; pruning one stops its
 * members and keeps their data.
 *
 * The pass itself is reconciler/pass.c, an ordered array of steps over the
 * world of observe.c, the conditions of conditions.c and the effects of
 * act.c (reconciler/internal.h says which file holds what).
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "api/spec.h"
#include "reconciler/takeover.h"
#include "reconciler/internal.h"
#include "util/strbuf.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

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
        /* maintenance keeps the connection it was made with: hand it over too */
        if (r->maint)
                maintenance_set_db(r->maint, db);
}

static void ctx_release(const reconciler *r, cluster_ctx *x)
{
        free(x->name);
        free(x->latched_hash);
        etcd_cluster_free(x->latched);
        free(x->rejected_hash);
        free(x->rejected_message);
        free(x->stale_message);
        free(x->blocked_message);
        free(x->certs_recorded);
        if (x->client)
                r->opts.etcd->disconnect(x->client);
        free(x->client_endpoints);
        upgrade_track_release(&x->upgrade);
        takeover_ctx_release(x);
        slow_track_release(&x->slow);
        for (size_t i = 0; i < x->n_seen; i++)
                free(x->seen[i].name);
        free(x->seen);
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

cluster_ctx *cluster_ctx_get(reconciler *r, const char *name)
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

int reconciler_latch(reconciler *r, cluster_ctx *x, state_cluster *sc)
{
        bool relatch = !streq_ptr(sc->observed_hash, sc->desired_hash);
        bool parse = relatch || !x->latched || !streq_ptr(x->latched_hash, sc->observed_hash);
        /* read brief (state_cluster_get_brief): the texts now, with the hashes they go with */
        if (!sc->desired_json && (parse || !sc->desired_hash)) {
                int k = state_cluster_get_specs(r->opts.db, sc);
                if (k < 0)
                        return k;
                relatch = !streq_ptr(sc->observed_hash, sc->desired_hash);
                parse = relatch || !x->latched || !streq_ptr(x->latched_hash, sc->observed_hash);
        }
        if (!sc->desired_json && (parse || !sc->desired_hash))
                return -ENOENT;
        if (parse) {
                const char *json = relatch ? sc->desired_json : sc->observed_json;
                const char *hash = relatch ? sc->desired_hash : sc->observed_hash;
                etcd_cluster *c = spec_from_json_text(json, x->name);
                if (!c)
                        return -EBADMSG;
                etcd_cluster_free(x->latched);
                x->latched = c;
                x->spec_heartbeat_ms = c->options.heartbeat_interval_ms;
                x->spec_election_ms = c->options.election_timeout_ms;
                free(x->latched_hash);
                x->latched_hash = xstrdup(hash);
                if (relatch) {
                        int64_t deadline = wall(r) + (int64_t)c->progress_deadline_seconds * 1000;
                        int k =
                            state_cluster_latch(r->opts.db, x->name, json, hash, deadline, wall(r));
                        if (k < 0)
                                return k;
                        /* both, or progress_deadline stores the old spec under the new hash */
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
 * What an audited spec change shows of the spec before and after: the
 * replicas, the version and, on the Kubernetes target, the kubeconfig
 * context of its API server when one is named (where it is created).
 */
static char *summary_json(const etcd_cluster *c)
{
        if (!c)
                return NULL;
        json_t *j = json_pack("{s:i, s:s}", "replicas", c->replicas, "version", c->version);
        if (c->kube_context)
                json_object_set_new(j, "kube_context", json_string(c->kube_context));
        char *s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        return s;
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
        cluster_ctx *x = cluster_ctx_get(r, id);
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
        etcd_cluster *prev = sc ? spec_from_json_text(sc->desired_json, id) : NULL;
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
        cluster_ctx *x = cluster_ctx_get(r, cluster);
        state_cluster *sc = NULL;
        int k = state_cluster_get(r->opts.db, cluster, &sc);
        if (k < 0)
                return k;
        k = reconciler_latch(r, x, sc);
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
