/*
 * The effects around a rolling version change: what the pure gates of
 * reconciler/upgrade.c need asked of the world, and what their verdicts
 * do.
 *
 * While a rollout is under way (and until the version etcd reports is
 * recorded for `gitcd status`), every pass asks each ready member's Status
 * (server version, raft index) on its own endpoint; a member the target
 * does not report ready is not asked (a dead endpoint costs a timeout).
 * Before the first member of a minor upgrade rolls, a snapshot is taken
 * when the spec configures snapshots: no member moves to a new minor
 * without it. A rollout the gates fail makes the cluster terminal
 * (UpgradeFailed) until the spec changes, which is how a rollback starts.
 */
#include <errno.h>
#include <string.h>

#include "etcd/client.h"
#include "reconciler/internal.h"
#include "snapshots/snapshot.h"
#include "util/xalloc.h"

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
        member_view *v = world_view(w, s->member);
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
                str_assign(&s->message,
                           xasprintf("no snapshot before the upgrade to %s: %s", c->version,
                                     err ? err : "gitcd has no state folder for it"));
                s->kind = STEP_WAIT;
                audit(r, x->name, "upgrade.snapshot", s->message, NULL, subject, "failure", 0,
                      w->commit, w->author);
                log_warn("%s: %s", x->name, s->message);
                /* A person may have to act (destination, credentials): not again at once. */
                x->blocked_until = mono(r) + POLL_BLOCKED_MS;
                str_assign(&x->blocked_message, xstrdup(s->message));
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
        _cleanup_free_ char *subject = xasprintf("{\"member\":\"%s\"}", s->member);
        conditions_terminal(r, x->name, w, REASON_UPGRADE_FAILED, s->message, "upgrade.failed",
                            subject, res);
        log_error("%s: upgrade failed: %s", x->name, s->message);
        upgrade_track_release(&x->upgrade);
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

/* Each member's Status (version, raft index) is asked only while a rollout is under way. */
int rollout_pass(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w, step *s,
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
