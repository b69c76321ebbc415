/*
 * Disaster recovery after quorum loss: one implementation behind
 * spec.recovery and `gitcd recover` (reconciler/recovery.h).
 *
 * A recovery is a state machine whose journal is its own record
 * (state/recovery.h): each pass takes one phase, and the phase is written
 * after its effect, every effect being idempotent, so gitcd killed at any
 * point resumes by doing the current phase again.
 *
 *   from a member M:   requested ─▶ aside ─▶ force ─▶ forced ─▶ restarted ─▶ succeeded
 *   from a snapshot S: requested ─▶ aside ─▶ seed ─▶ seeded ─▶ succeeded
 *
 *   requested  refuse unless quorum is lost (a recovery next to a living
 *              quorum would split the cluster), M is recorded, has data and
 *              answers Status (its raft index and revision are recorded), or
 *              S is a succeeded snapshot of this cluster that fetches and
 *              checks (size, SHA-256, etcd's trailer);
 *   aside      every other member (from a snapshot: every member) is removed
 *              from the target with its data kept aside (remove_member with
 *              keep_data: renamed on the local target, a detached PVC on
 *              Kubernetes) and its record marked removed;
 *   force      M is started alone with --force-new-cluster (the flag lives
 *              only in this one plan, never in a record or the spec);
 *   forced     once M is ready and lists itself alone, it is restarted onto
 *              its normal command: a later restart can never force again;
 *   seed       S is restored by the target into a new member's data
 *              directory (a new ordinal: names are never reused), with
 *              target_ops.restore_member and etcd's tool found as for
 *              spec.bootstrap.restore (restore_find_tool);
 *   seeded     the new member is started;
 *   restarted / seeded, ready: the revision is recorded, the recovery
 *              succeeds, and the normal lifecycle adds learners.
 *
 * The data set aside stays until the cluster is healthy with every member
 * the spec wants; then it is deleted (drop_kept_data) and the record says so.
 * Every step is audited with who asked and from what; the end with the
 * revision recovered to.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/membership.h"
#include "reconciler/recovery.h"
#include "reconciler/restore.h"
#include "api/versions.h"
#include "state/restores.h"
#include "render/render.h"
#include "snapstore/destination.h"
#include "snapstore/restore.h"
#include "snapshots/schedule.h"
#include "snapshots/snapshot.h"
#include "state/snapshots.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(state_member *, state_member_free);

#define POLL_RECOVERY_MS   500
#define ASSESS_INTERVAL_MS 5000 /* how often the quorum-loss assessment is refreshed */

static void audit(const recovery_env *env, const state_recovery *rec, const char *action,
                  const char *reason, const char *outcome)
{
        json_t *after =
            json_pack("{s:I, s:s, s:s, s:s?}", "recovery", (json_int_t)rec->id, "from",
                      rec->source_kind, "source", rec->source, "requested_by", rec->requested_by);
        if (rec->revision)
                json_object_set_new(after, "revision", json_integer(rec->revision));
        if (rec->raft_index)
                json_object_set_new(after, "raft_index", json_integer((json_int_t)rec->raft_index));
        if (rec->seed)
                json_object_set_new(after, "seed", json_string(rec->seed));
        _cleanup_free_ char *text = json_dumps(after, JSON_COMPACT);
        json_decref(after);
        state_audit_event ev = {
            .time_ms = env->now_ms,
            .cluster = (char *)env->cluster,
            .commit = rec->commit,
            .author = rec->requested_by,
            .action = (char *)action,
            .reason = (char *)reason,
            .after_json = text,
            .outcome = (char *)outcome,
        };
        if (state_audit_append(env->db, &ev, NULL) < 0)
                log_warn("%s: could not write the audit event %s: %s", env->cluster, action,
                         state_last_error());
}

static int result(pass_result *res, pass_outcome o, int poll_ms, const char *fmt, ...)
    _printf_(4, 5);
static int result(pass_result *res, pass_outcome o, int poll_ms, const char *fmt, ...)
{
        res->outcome = o;
        res->poll_ms = poll_ms;
        res->step = o == PASS_PROGRESSED ? STEP_START_MEMBER : STEP_WAIT;
        snprintf(res->reason, sizeof(res->reason), "Recovering");
        va_list ap;
        va_start(ap, fmt);
        str_assign(&res->message, xvasprintf(fmt, ap));
        va_end(ap);
        return 1;
}

/* The raft index and revision of the member at url, asked of it alone. */
static int status_index(const recovery_env *env, const char *url, uint64_t *ret_index,
                        int64_t *ret_revision)
{
        etcd_endpoint_status *st = NULL;
        int k = env->etcd->status_at(env->conn, url, &st);
        if (k < 0)
                return k;
        *ret_index = st->raft_index;
        *ret_revision = st->revision;
        etcd_endpoint_status_free(st);
        return 0;
}

static const state_member *record_by_name(const recovery_env *env, const char *name)
{
        for (size_t i = 0; name && i < env->records->n; i++)
                if (streq(env->records->items[i]->name, name))
                        return env->records->items[i];
        return NULL;
}

static const obs_member *observed(const recovery_env *env, const char *name)
{
        for (size_t i = 0; name && i < env->obs->n; i++)
                if (streq(env->obs->members[i].name, name))
                        return &env->obs->members[i];
        return NULL;
}

static bool has_data(member_runtime_state s)
{
        return s != MEMBER_ABSENT && s != MEMBER_DATA_LOST;
}

/* ---- finishing ------------------------------------------------------------ */

static int finish(const recovery_env *env, state_recovery *rec, const char *how, const char *why,
                  pass_result *res)
{
        int k = state_recovery_finish(env->db, rec->id, how, why, env->now_ms);
        if (k < 0)
                return k;
        bool ok = streq(how, "succeeded");
        audit(env, rec,
              ok                      ? "recovery.succeeded"
              : streq(how, "refused") ? "recovery.refused"
                                      : "recovery.failed",
              why,
              ok                      ? "success"
              : streq(how, "refused") ? "rejected"
                                      : "failure");
        if (ok) {
                log_info("%s: recovered from %s %s at revision %" PRId64 "; growing back",
                         env->cluster, rec->source_kind, rec->source, rec->revision);
                /* The time quorum was lost does not count against the lifecycle that follows. */
                if (env->latched_hash)
                        (void)state_cluster_latch(env->db, env->cluster, env->latched_json,
                                                  env->latched_hash, 0, env->now_ms);
                (void)state_recovery_assessment_clear(env->db, env->cluster);
                return result(res, PASS_PROGRESSED, 0, "recovered from %s %s at revision %" PRId64,
                              rec->source_kind, rec->source, rec->revision);
        }
        log_error("%s: recovery %" PRId64 " %s: %s", env->cluster, rec->id, how, why);
        /* Refused or failed: the normal lifecycle goes on (QuorumLost, most likely). */
        pass_say(res, "recovery %" PRId64 " %s: %s", rec->id, how, why);
        return 0;
}

static int refuse(const recovery_env *env, state_recovery *rec, pass_result *res, const char *fmt,
                  ...) _printf_(4, 5);
static int refuse(const recovery_env *env, state_recovery *rec, pass_result *res, const char *fmt,
                  ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *why = xvasprintf(fmt, ap);
        va_end(ap);
        return finish(env, rec, "refused", why, res);
}

static int advance(const recovery_env *env, state_recovery *rec, const char *phase)
{
        free(rec->phase);
        rec->phase = xstrdup(phase);
        return state_recovery_update(env->db, rec);
}

/* ---- the snapshot source --------------------------------------------------- */

/* Where a recovery keeps its files: <state dir>/recovery/<id>. */
static char *work_dir(const recovery_env *env, const state_recovery *rec)
{
        _cleanup_free_ char *copy = xstrdup(state_path(env->db));
        return xasprintf("%s/recovery/%" PRId64, dirname(copy), rec->id);
}

/*
 * Fetch the recorded snapshot and make an uncompressed, checked copy at
 * <work>/snapshot.db. -errno with *ret_error.
 */
static int fetch_snapshot(const recovery_env *env, const state_recovery *rec,
                          state_snapshot **ret_snap, char **ret_path, char **ret_error)
{
        int64_t id = 0;
        char *end = NULL;
        id = strtoll(rec->source, &end, 10);
        state_snapshot *snap = NULL;
        if (!end || *end || id <= 0 || state_snapshot_get(env->db, id, &snap) < 0) {
                *ret_error =
                    xasprintf("snapshot %s is not recorded (gitcd snapshot list)", rec->source);
                return -ENOENT;
        }
        _cleanup_(state_snapshot_freep) state_snapshot *s = snap;
        if (!streq_ptr(s->cluster, env->cluster)) {
                *ret_error = xasprintf("snapshot %s is of %s, not of %s", rec->source, s->cluster,
                                       env->cluster);
                return -EINVAL;
        }
        if (!streq_ptr(s->result, "succeeded") || s->deleted_ms) {
                *ret_error = xasprintf("snapshot %s is %s", rec->source,
                                       s->deleted_ms ? "deleted" : s->result);
                return -ENOENT;
        }
        _cleanup_free_ char *dir = work_dir(env, rec);
        int k = mkdir_p(dir, 0700);
        if (k < 0) {
                *ret_error = xasprintf("cannot create %s: %s", dir, strerror(-k));
                return k;
        }
        _cleanup_free_ char *fetched = path_join(dir, "fetched");
        _cleanup_free_ char *raw = path_join(dir, "snapshot.db");
        (void)unlink(fetched);
        (void)unlink(raw);
        _cleanup_free_ char *copy = xstrdup(state_path(env->db));
        pvc_writer *pvc = snapshot_pvc_writer_new(env->target, env->c);
        k = snapshot_fetch(env->db, s, dirname(copy), pvc, fetched, ret_error);
        snapshot_pvc_writer_free(pvc);
        if (k >= 0) {
                int64_t size = 0;
                k = snapshot_unpack(fetched, raw, &size, ret_error);
        }
        (void)unlink(fetched);
        if (k < 0)
                return k;
        *ret_snap = TAKE_PTR(s);
        *ret_path = TAKE_PTR(raw);
        return 0;
}

/*
 * The bump a recovery from a snapshot asks for: the request's (`gitcd
 * recover --bump-revision`, a written spec.recovery.bumpRevision), else the
 * spec's (the role's default). -EINVAL when the recorded request is not a
 * bump (an older or a newer gitcd wrote it).
 */
static int wanted_bump(const recovery_env *env, const state_recovery *rec, revision_bump *ret,
                       const char **ret_asked_by)
{
        if (rec->bump_revision) {
                *ret_asked_by =
                    rec->token ? "spec.recovery.bumpRevision" : "gitcd recover --bump-revision";
                return revision_bump_parse(rec->bump_revision, ret) < 0 ? -EINVAL : 0;
        }
        *ret = env->c->recovery.bump;
        *ret_asked_by = env->c->role == ROLE_KUBERNETES
                            ? "the default of spec.role kubernetes-control-plane"
                            : "the default of spec.role general";
        return 0;
}

/* The highest revision a member answered while quorum was lost (the assessment); 0: none. */
static int64_t seen_revision(const recovery_env *env)
{
        char *text = NULL;
        if (state_recovery_assessment_get(env->db, env->cluster, &text, NULL) < 0)
                return 0;
        json_t *j = json_loads(text, 0, NULL);
        free(text);
        int64_t best = 0;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(j, "members"), i, m)
        {
                json_t *rev = json_object_get(m, "revision");
                if (json_is_integer(rev) && json_integer_value(rev) > best)
                        best = json_integer_value(rev);
        }
        json_decref(j);
        return best;
}

/*
 * The restore record of this recovery (state/restores.h), written before
 * the seed is restored and read back after a crash: the bump is decided
 * once. 0, or -errno with *ret_error.
 */
static int recovery_restore_record(const recovery_env *env, const state_recovery *rec,
                                   const state_snapshot *snap, const char *seed,
                                   state_restore **ret, char **ret_error)
{
        revision_bump want;
        const char *asked_by = NULL;
        if (wanted_bump(env, rec, &want, &asked_by) < 0) {
                *ret_error = xasprintf("the revision bump recorded for the recovery, \"%s\", is "
                                       "not one",
                                       rec->bump_revision);
                return -EINVAL;
        }
        _cleanup_(bump_decision_release) bump_decision d = {0};
        restore_bump(env->db, &want, asked_by, snap->cluster, snap->revision, snap->started_ms,
                     seen_revision(env), env->now_ms, &d);
        _cleanup_free_ char *source = xasprintf("snapshot %lld (%s)", (long long)snap->id,
                                                snap->location ? snap->location : "no location");
        state_restore r = {.cluster = (char *)env->cluster,
                           .origin = "recovery",
                           .recovery_id = rec->id,
                           .source = source,
                           .snapshot_revision = snap->revision,
                           .bump = d.amount,
                           .sizing = d.sizing,
                           .revision = snap->revision + d.amount,
                           .members = (char *)seed};
        int k = state_restore_record(env->db, &r, env->now_ms, ret);
        if (k < 0) {
                *ret_error = xasprintf("cannot record the restore: %s", state_last_error());
                return k;
        }
        return 0;
}

/* ---- phases ----------------------------------------------------------------- */

static char *aside_list(const recovery_env *env, const char *keep)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < env->records->n; i++) {
                const char *name = env->records->items[i]->name;
                if (keep && streq(name, keep))
                        continue;
                if (sb.len)
                        sb_appendc(&sb, ',');
                sb_append(&sb, name);
        }
        return sb.len ? sb_detach(&sb) : (sb_release(&sb), NULL);
}

static int phase_requested(const recovery_env *env, state_recovery *rec, pass_result *res)
{
        int voters = 0, healthy = 0;
        observation_voters(env->obs, &voters, &healthy);
        if (env->quorum)
                return refuse(env, rec, res,
                              "quorum is not lost (%d of %d voters healthy): recovering now would "
                              "split the cluster",
                              healthy, voters);
        if (!env->obs->bootstrapped)
                return refuse(env, rec, res, "the cluster never formed; nothing to recover");

        if (streq(rec->source_kind, "member")) {
                const state_member *m = record_by_name(env, rec->source);
                const obs_member *o = observed(env, rec->source);
                if (!m || !o)
                        return refuse(env, rec, res, "%s is not a member of %s", rec->source,
                                      env->cluster);
                if (!has_data(o->runtime) || isempty(m->member_id))
                        return refuse(env, rec, res, "member %s has no data (%s)", m->name,
                                      member_runtime_state_name(o->runtime));
                /* Forced alone, a learner would be a cluster without a voter. */
                if (o->learner || (!o->in_etcd && m->learner))
                        return refuse(env, rec, res,
                                      "member %s is a learner: it may lack committed writes and "
                                      "cannot lead a cluster of itself",
                                      m->name);
                uint64_t index = 0;
                int64_t revision = 0;
                if (!env->conn || !env->etcd->status_at || isempty(m->client_url) ||
                    status_index(env, m->client_url, &index, &revision) < 0)
                        return refuse(env, rec, res, "member %s is unreachable: %s", m->name,
                                      env->conn ? env->etcd->last_error(env->conn)
                                                : "no connection");
                rec->raft_index = (int64_t)index;
                rec->revision = revision;
                free(rec->seed);
                rec->seed = xstrdup(m->name);
                free(rec->aside);
                rec->aside = aside_list(env, m->name);
        } else {
                _cleanup_(state_snapshot_freep) state_snapshot *snap = NULL;
                _cleanup_free_ char *path = NULL, *error = NULL;
                if (fetch_snapshot(env, rec, &snap, &path, &error) < 0)
                        return refuse(env, rec, res, "%s", error ? error : "unusable snapshot");
                (void)unlink(path); /* checked; the seed phase fetches it again */
                if (!env->target->ops->restore_member)
                        return refuse(env, rec, res,
                                      "the %s target cannot restore a snapshot into a member",
                                      env->target->ops->name);
                revision_bump want;
                const char *asked_by = NULL;
                if (wanted_bump(env, rec, &want, &asked_by) < 0)
                        return refuse(env, rec, res, "\"%s\" is not a revision bump",
                                      rec->bump_revision);
                _cleanup_free_ char *first = NULL;
                bool bumps = want.mode == BUMP_AUTO || want.amount > 0;
                if (bumps && !version_has_restore_bump(&env->c->ver, &first))
                        return refuse(env, rec, res,
                                      "%s asks for a revision bump, which etcd %s's restore tool "
                                      "cannot make (--bump-revision came with %s); ask again with "
                                      "a bump of 0 (every client watching the cluster must then "
                                      "be restarted by hand)",
                                      asked_by, env->c->version,
                                      first ? first : "3.4.27 and 3.5.10");
                rec->revision = snap->revision;
                free(rec->seed);
                rec->seed = NULL; /* named in the seed phase, from the ordinals recorded then */
                free(rec->aside);
                rec->aside = aside_list(env, NULL);
        }
        int k = advance(env, rec, "aside");
        if (k < 0)
                return k;
        audit(env, rec, "recovery.started",
              streq(rec->source_kind, "member")
                  ? "quorum lost; restarting the member alone, the others' data set aside"
                  : "quorum lost; restoring the snapshot as a new seed, every member's data set "
                    "aside",
              "success");
        log_warn("%s: recovery %" PRId64 " from %s %s started (asked by %s)", env->cluster, rec->id,
                 rec->source_kind, rec->source, rec->requested_by ? rec->requested_by : "?");
        return result(res, PASS_PROGRESSED, 0, "recovery from %s %s: setting the others aside",
                      rec->source_kind, rec->source);
}

static int phase_aside(const recovery_env *env, state_recovery *rec, pass_result *res)
{
        target *t = env->target;
        _cleanup_free_ char *names = xstrdup_null(rec->aside);
        char *save = NULL;
        for (char *n = names ? strtok_r(names, ",", &save) : NULL; n;
             n = strtok_r(NULL, ",", &save)) {
                int k = t->ops->remove_member(t, env->c, n, true);
                if (k < 0)
                        return result(res, PASS_WAITING, POLL_RECOVERY_MS,
                                      "recovery: cannot set %s aside: %s", n, target_last_error(t));
                FAILPOINT("recovery.aside.after-target");
                if (record_by_name(env, n) &&
                    state_member_mark_removed(env->db, env->cluster, n, env->now_ms) < 0)
                        return -EIO;
        }
        int k = advance(env, rec, streq(rec->source_kind, "member") ? "force" : "seed");
        if (k < 0)
                return k;
        return result(res, PASS_PROGRESSED, 0, "recovery: data of %s set aside",
                      rec->aside ? rec->aside : "no member");
}

/* Start rec (a member record) on its normal command, or forced alone; records the hash. */
static int start(const recovery_env *env, state_member *m, bool force)
{
        target *t = env->target;
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        int k = membership_plan_for_records(t, env->c, &m, 1, &p);
        if (k < 0)
                return k;
        if (force) {
                p->members[0].force_new_cluster = true;
                free(p->members[0].config_hash);
                p->members[0].config_hash = render_member_config_hash(env->c, p, 0);
        }
        k = t->ops->ensure_shared(t, env->c, p);
        if (k >= 0)
                k = t->ops->ensure_member(t, env->c, p, 0);
        if (k < 0 || force)
                return k;
        free(m->config_hash);
        m->config_hash = xstrdup_null(p->members[0].config_hash);
        m->dormant = false;
        free(m->version);
        m->version = xstrdup(env->c->version);
        return state_member_put(env->db, m, env->now_ms);
}

static int phase_force(const recovery_env *env, state_recovery *rec, pass_result *res)
{
        state_member *m = (state_member *)record_by_name(env, rec->seed);
        if (!m)
                return finish(env, rec, "failed",
                              "the member to recover from is no longer recorded", res);
        int k = start(env, m, true);
        if (k < 0)
                return result(res, PASS_WAITING, POLL_RECOVERY_MS,
                              "recovery: cannot start %s with --force-new-cluster: %s", m->name,
                              target_last_error(env->target));
        FAILPOINT("recovery.force.after-target");
        k = advance(env, rec, "forced");
        if (k < 0)
                return k;
        audit(env, rec, "recovery.force-new-cluster",
              "started alone with --force-new-cluster, once", "success");
        return result(res, PASS_PROGRESSED, 0, "recovery: %s started alone (--force-new-cluster)",
                      m->name);
}

/* Is the member ready, and does it list itself alone? */
static bool alone_and_ready(const recovery_env *env, const state_member *m)
{
        const obs_member *o = observed(env, m->name);
        if (!o || o->runtime != MEMBER_READY || !env->conn || isempty(m->client_url))
                return false;
        etcd_members *l = NULL;
        if (env->etcd->member_list_at(env->conn, m->client_url, &l) < 0)
                return false;
        bool alone = l->n == 1;
        etcd_members_free(l);
        return alone;
}

static int phase_forced(const recovery_env *env, state_recovery *rec, pass_result *res)
{
        state_member *m = (state_member *)record_by_name(env, rec->seed);
        if (!m)
                return finish(env, rec, "failed",
                              "the member to recover from is no longer recorded", res);
        if (!alone_and_ready(env, m))
                return result(res, PASS_WAITING, POLL_RECOVERY_MS,
                              "recovery: waiting for %s to form a cluster of itself", m->name);
        /* Never left in its flags: restart it on its normal command now. */
        int k = start(env, m, false);
        if (k < 0)
                return result(res, PASS_WAITING, POLL_RECOVERY_MS,
                              "recovery: cannot restart %s on its normal command: %s", m->name,
                              target_last_error(env->target));
        FAILPOINT("recovery.forced.after-restart");
        k = advance(env, rec, "restarted");
        if (k < 0)
                return k;
        return result(res, PASS_PROGRESSED, 0, "recovery: %s restarted without --force-new-cluster",
                      m->name);
}

/* A new member record for the restored seed, with the next ordinal. */
static int seed_record(const recovery_env *env, state_recovery *rec, state_member **ret)
{
        if (rec->seed) {
                state_member *m = NULL;
                if (state_member_get(env->db, env->cluster, rec->seed, &m) == 0) {
                        *ret = m;
                        return 0;
                }
        }
        state_member_list all = {0};
        int k = state_member_list_for(env->db, env->cluster, true, &all);
        if (k < 0)
                return k;
        int next = 0;
        for (size_t i = 0; i < all.n; i++)
                next = MAX(next, all.items[i]->ordinal + 1);
        state_member_list_release(&all);
        _cleanup_free_ char *name = render_member_name(env->c, next);
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_new(env->c);
        k = membership_plan_append(p, env->target, env->c, name, next, false, NULL, "new");
        if (k < 0)
                return k;
        state_member *m = XNEW(state_member);
        m->cluster = xstrdup(env->cluster);
        m->name = xstrdup(name);
        m->ordinal = next;
        m->peer_url = xstrdup_null(p->members[0].peer_url);
        m->client_url = xstrdup_null(p->members[0].client_url);
        m->seed = true;
        m->version = xstrdup(env->c->version);
        m->state = xstrdup("absent");
        m->initial_cluster = xasprintf("%s=%s", name, p->members[0].peer_url);
        m->initial_cluster_state = xstrdup("new");
        /* The name first, so a crash after the record resumes with this member. */
        free(rec->seed);
        rec->seed = xstrdup(name);
        k = state_recovery_update(env->db, rec);
        if (k >= 0)
                k = state_member_put(env->db, m, env->now_ms);
        if (k < 0) {
                state_member_free(m);
                return k;
        }
        *ret = m;
        return 0;
}

static int phase_seed(const recovery_env *env, state_recovery *rec, pass_result *res)
{
        _cleanup_(state_member_freep) state_member *m = NULL;
        int k = seed_record(env, rec, &m);
        if (k < 0)
                return result(res, PASS_WAITING, POLL_RECOVERY_MS,
                              "recovery: cannot plan the new seed: %s",
                              target_last_error(env->target));
        _cleanup_(state_snapshot_freep) state_snapshot *snap = NULL;
        _cleanup_free_ char *path = NULL, *error = NULL;
        if (fetch_snapshot(env, rec, &snap, &path, &error) < 0)
                return finish(env, rec, "failed", error ? error : "the snapshot is unusable", res);
        _cleanup_free_ char *tool = NULL, *tool_error = NULL;
        if (restore_find_tool(env->c, env->etcd_dir, &tool, &tool_error) < 0) {
                (void)unlink(path);
                return finish(env, rec, "failed", tool_error, res);
        }
        _cleanup_(state_restore_freep) state_restore *restore = NULL;
        _cleanup_free_ char *record_error = NULL;
        if (recovery_restore_record(env, rec, snap, m->name, &restore, &record_error) < 0) {
                (void)unlink(path);
                return result(res, PASS_WAITING, POLL_RECOVERY_MS, "recovery: %s", record_error);
        }
        _cleanup_(membership_plan_freep) membership_plan *p = NULL;
        k = membership_plan_for_records(env->target, env->c, &m, 1, &p);
        bool has_data = false;
        if (k >= 0) {
                FAILPOINT("recovery.seed.before-restore");
                target_restore rs = {
                    .snapshot = path, .tool = tool, .bump_revision = restore->bump};
                k = env->target->ops->restore_member(env->target, env->c, p, 0, &rs);
                /* The seed has data already: restored before a crash, never over. */
                has_data = k == -EEXIST;
                if (k == -EEXIST)
                        k = 0;
        }
        (void)unlink(path);
        if (k < 0)
                return finish(env, rec, "failed", target_last_error(env->target), res);
        /* ... and only when that data is the restore's: from before it, the seed is refused */
        _cleanup_free_ char *why = NULL;
        if (has_data && (k = restore_check_data(env->db, env->target, env->c, env->cluster, m,
                                                env->etcd_dir, &why)) < 0) {
                if (k != -ESTALE)
                        return result(res, PASS_WAITING, POLL_RECOVERY_MS, "recovery: %s", why);
                audit(env, rec, "member.refused", why, "rejected");
                return finish(env, rec, "failed", why, res);
        }
        FAILPOINT("recovery.seed.after-restore");
        k = start(env, m, false);
        if (k < 0)
                return result(res, PASS_WAITING, POLL_RECOVERY_MS, "recovery: cannot start %s: %s",
                              m->name, target_last_error(env->target));
        k = advance(env, rec, "seeded");
        if (k < 0)
                return k;
        _cleanup_free_ char *how =
            xasprintf("snapshot restored as the new seed %s; revision bump %s: it starts at "
                      "revision %lld",
                      m->name, restore->sizing, (long long)restore->revision);
        audit(env, rec, "recovery.restored", how, "success");
        return result(res, PASS_PROGRESSED, 0, "recovery: %s restored from snapshot %s", m->name,
                      rec->source);
}

/* restarted / seeded: done once the seed serves with a leader. */
static int phase_wait_ready(const recovery_env *env, state_recovery *rec, pass_result *res)
{
        const state_member *m = record_by_name(env, rec->seed);
        const obs_member *o = observed(env, rec->seed);
        if (!m || !o)
                return finish(env, rec, "failed", "the seed member is no longer recorded", res);
        if (o->runtime != MEMBER_READY || !env->obs->etcd_listed)
                return result(res, PASS_WAITING, POLL_RECOVERY_MS,
                              "recovery: waiting for %s to serve", m->name);
        uint64_t index = 0;
        int64_t revision = 0;
        /* The revision recovered to is the source's, as checked; only when unknown, now. */
        if (!rec->revision && env->etcd->status_at &&
            status_index(env, m->client_url, &index, &revision) == 0)
                rec->revision = revision;
        int k = state_recovery_update(env->db, rec);
        if (k < 0)
                return k;
        /* Its work files are not needed any more. */
        _cleanup_free_ char *dir = work_dir(env, rec);
        (void)rm_rf(dir);
        return finish(env, rec, "succeeded", NULL, res);
}

/* ---- requests ----------------------------------------------------------------- */

/* spec.recovery with a token not seen before becomes a request (its commit's author asked). */
static int take_spec_request(const recovery_env *env)
{
        const recovery_spec *rs = &env->c->recovery;
        if (rs->from == RECOVERY_NONE || isempty(rs->token))
                return 0;
        int k = state_recovery_token_used(env->db, env->cluster, rs->token);
        if (k != 0)
                return k < 0 ? k : 0;
        _cleanup_free_ char *id = rs->from == RECOVERY_FROM_SNAPSHOT
                                      ? xasprintf("%" PRId64, rs->snapshot_id)
                                      : xstrdup(rs->member);
        /* a bump written in the spec is the request's; not written: the spec's default then */
        _cleanup_free_ char *bump = NULL;
        for (size_t i = 0; i < env->c->n_locs && rs->from == RECOVERY_FROM_SNAPSHOT; i++)
                if (streq(env->c->locs[i].path, "spec.recovery.bumpRevision"))
                        bump = revision_bump_format(&rs->bump);
        state_recovery req = {
            .cluster = (char *)env->cluster,
            .source_kind = rs->from == RECOVERY_FROM_SNAPSHOT ? "snapshot" : "member",
            .source = id,
            .token = rs->token,
            .requested_by = (char *)env->author,
            .commit = (char *)env->commit,
            .bump_revision = bump,
        };
        k = state_recovery_request(env->db, &req, env->now_ms, NULL);
        if (k == -EBUSY) {
                log_warn("%s: spec.recovery waits: %s", env->cluster, state_last_error());
                return 0;
        }
        return k;
}

int recovery_request(state_db *db, const char *cluster, const char *member, int64_t snapshot_id,
                     const revision_bump *bump, const char *requested_by, int64_t now_ms,
                     int64_t *ret_id)
{
        assert(!member != !(snapshot_id > 0));
        assert(!bump || !member);
        state_cluster *sc = NULL;
        int k = state_cluster_get(db, cluster, &sc);
        if (k < 0)
                return k;
        bool terminal = sc->terminal_reason != NULL;
        state_cluster_free(sc);
        _cleanup_free_ char *id = member ? xstrdup(member) : xasprintf("%" PRId64, snapshot_id);
        _cleanup_free_ char *bump_text = bump ? revision_bump_format(bump) : NULL;
        state_recovery req = {
            .cluster = (char *)cluster,
            .source_kind = member ? "member" : "snapshot",
            .source = id,
            .requested_by = (char *)requested_by,
            .bump_revision = bump_text,
        };
        k = state_begin(db);
        if (k < 0)
                return k;
        k = state_recovery_request(db, &req, now_ms, ret_id);
        /* A cluster given up on while quorum was lost is acted on again. */
        if (k >= 0 && terminal)
                k = state_cluster_set_terminal(db, cluster, NULL, NULL, now_ms);
        if (k >= 0) {
                json_t *after = json_pack("{s:s, s:s, s:s?}", "from", req.source_kind, "source", id,
                                          "bump_revision", bump_text);
                _cleanup_free_ char *text = json_dumps(after, JSON_COMPACT);
                json_decref(after);
                state_audit_event ev = {.time_ms = now_ms,
                                        .cluster = (char *)cluster,
                                        .author = (char *)requested_by,
                                        .action = "recovery.requested",
                                        .reason = "gitcd recover",
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

/* ---- what gitcd knows while quorum is lost ------------------------------------- */

/*
 * Each member's reachability, raft index and revision, the latest
 * snapshot, and the proposal: the reachable member with the highest raft
 * index (it holds every write a quorum acknowledged that any survivor
 * holds), else the latest snapshot.
 */
static void assess(const recovery_env *env)
{
        char *old = NULL;
        int64_t seen = 0;
        if (state_recovery_assessment_get(env->db, env->cluster, &old, &seen) == 0) {
                free(old);
                if (env->now_ms >= seen && env->now_ms - seen < ASSESS_INTERVAL_MS)
                        return;
        }
        json_t *members = json_array();
        const state_member *best = NULL;
        uint64_t best_index = 0;
        for (size_t i = 0; i < env->records->n; i++) {
                const state_member *m = env->records->items[i];
                const obs_member *o = observed(env, m->name);
                uint64_t index = 0;
                int64_t revision = 0;
                bool reachable = env->conn && env->etcd->status_at && !isempty(m->client_url) &&
                                 status_index(env, m->client_url, &index, &revision) == 0;
                json_t *j = json_pack("{s:s, s:s, s:b}", "name", m->name, "state",
                                      member_runtime_state_name(o ? o->runtime : MEMBER_ABSENT),
                                      "reachable", reachable);
                if (reachable) {
                        json_object_set_new(j, "raft_index", json_integer((json_int_t)index));
                        json_object_set_new(j, "revision", json_integer(revision));
                        if (!best || index > best_index) {
                                best = m;
                                best_index = index;
                        }
                }
                json_array_append_new(members, j);
        }
        json_t *a = json_pack("{s:o}", "members", members);
        state_snapshot_list snaps = {0};
        const state_snapshot *latest = NULL;
        /* the restore candidate: the newest proven to restore, never one that failed its drill */
        if (state_snapshot_list_for(env->db, env->cluster, 0, &snaps) == 0)
                latest = snapshot_restore_candidate(&snaps);
        if (latest)
                json_object_set_new(
                    a, "snapshot",
                    json_pack("{s:I, s:I, s:I, s:s?, s:s?}", "id", (json_int_t)latest->id,
                              "revision", (json_int_t)latest->revision, "finished_ms",
                              (json_int_t)latest->finished_ms, "location", latest->location,
                              "verify_result", latest->verify_result));
        _cleanup_free_ char *cmd = NULL;
        if (best)
                cmd = xasprintf("gitcd recover %s --from-member %s", env->cluster, best->name);
        else if (latest)
                cmd = xasprintf("gitcd recover %s --from-snapshot %" PRId64, env->cluster,
                                latest->id);
        if (cmd)
                json_object_set_new(
                    a, "proposal",
                    json_pack("{s:s, s:s, s:s}", "from", best ? "member" : "snapshot", "why",
                              best ? "the reachable member with the highest raft index"
                              : streq_ptr(latest->verify_result, "verified")
                                  ? "no member is reachable; the newest snapshot a restore "
                                    "drill proved"
                                  : "no member is reachable; the newest snapshot (no restore "
                                    "drill proved one)",
                              "command", cmd));
        state_snapshot_list_release(&snaps);
        _cleanup_free_ char *text = json_dumps(a, JSON_COMPACT);
        json_decref(a);
        if (state_recovery_assessment_put(env->db, env->cluster, text, env->now_ms) < 0)
                log_warn("%s: cannot record what is known: %s", env->cluster, state_last_error());
}

/* ---- after a recovery: the data set aside goes once the cluster is whole -------- */

static void clean_aside(const recovery_env *env)
{
        state_recovery_list l = {0};
        if (state_recovery_list_for(env->db, env->cluster, 1, &l) < 0)
                return;
        state_recovery *rec = l.n ? l.items[0] : NULL;
        int voters = 0, healthy = 0;
        observation_voters(env->obs, &voters, &healthy);
        if (rec && streq_ptr(rec->result, "succeeded") && !rec->cleaned_ms && env->quorum &&
            healthy == voters && voters >= env->c->replicas && env->obs->n == (size_t)voters) {
                target *t = env->target;
                _cleanup_free_ char *names = xstrdup_null(rec->aside);
                char *save = NULL;
                bool ok = true;
                for (char *n = names ? strtok_r(names, ",", &save) : NULL; n && ok;
                     n = strtok_r(NULL, ",", &save))
                        if (t->ops->drop_kept_data && t->ops->drop_kept_data(t, env->c, n) < 0) {
                                log_warn("%s: cannot delete the data %s had: %s", env->cluster, n,
                                         target_last_error(t));
                                ok = false;
                        }
                if (ok && state_recovery_set_cleaned(env->db, rec->id, env->now_ms) >= 0)
                        audit(env, rec, "recovery.cleaned",
                              t->ops->drop_kept_data
                                  ? "the cluster is healthy again: the data set aside is deleted"
                                  : "the cluster is healthy again; this target keeps the data set "
                                    "aside until a person removes it",
                              "success");
        }
        state_recovery_list_release(&l);
}

int recovery_pass(const recovery_env *env, pass_result *res)
{
        int k = take_spec_request(env);
        if (k < 0)
                return k;
        state_recovery *rec = NULL;
        k = state_recovery_running(env->db, env->cluster, &rec);
        if (k == -ENOENT) {
                if (env->obs->bootstrapped && !env->quorum && env->records->n > 0)
                        assess(env);
                else if (env->quorum) {
                        char *old = NULL;
                        if (state_recovery_assessment_get(env->db, env->cluster, &old, NULL) == 0)
                                (void)state_recovery_assessment_clear(env->db, env->cluster);
                        free(old);
                        clean_aside(env);
                }
                return 0;
        }
        if (k < 0)
                return k;
        _cleanup_(state_recovery_freep) state_recovery *r = rec;
        if (streq(r->phase, "requested"))
                return phase_requested(env, r, res);
        if (streq(r->phase, "aside"))
                return phase_aside(env, r, res);
        if (streq(r->phase, "force"))
                return phase_force(env, r, res);
        if (streq(r->phase, "forced"))
                return phase_forced(env, r, res);
        if (streq(r->phase, "seed"))
                return phase_seed(env, r, res);
        if (streq(r->phase, "restarted") || streq(r->phase, "seeded"))
                return phase_wait_ready(env, r, res);
        return finish(env, r, "failed", "unknown recovery phase (a newer gitcd?)", res);
}
