/*
 * The snapshot scheduler of `gitcd run` (snapshots/scheduler.h).
 *
 * Design: one worker thread at most, started per snapshot and joined when
 * it is done; the main thread never waits for it except at shutdown. The
 * worker gets a snapshot_job that owns copies of everything (built on the
 * main thread, where the target may be used), and opens its own state store
 * connection, since a state_db belongs to one thread. Whether a cluster is
 * due is decided from the records alone (schedule.c), so a restart of gitcd
 * neither loses nor repeats a slot; the per-cluster "next look" times kept
 * here only save queries. Restore drills share the worker: one after the
 * snapshot it proves (verify: every), or on their own when due (a cron
 * slot of spec.snapshots.verify, a snapshot stored by another process, a
 * drill that could not run), never beside a snapshot, never two at once.
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "api/cron.h"
#include "api/spec.h"
#include "snapshots/declared.h"
#include "snapshots/drill.h"
#include "snapshots/schedule.h"
#include "snapshots/scheduler.h"
#include "snapshots/snapshot.h"
#include "snapstore/destination.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define DRILL_LOOK_MS (60 * 1000)

typedef struct next_look {
        char *cluster;
        int64_t at_ms;
        int64_t drill_at_ms;  /* restore drills: look again from then */
        char *schedule;       /* the schedule the time was computed for */
        char *unneeded;       /* the spec hash last found without a snapshot schedule */
        char *drill_unneeded; /* the spec hash last found without restore drills */
} next_look;

struct snapshot_scheduler {
        snapshot_scheduler_opts opts;
        char *state_path, *state_dir, *etcd_dir;
        next_look *looks;
        size_t n_looks, alloc_looks;
        strmap look_index; /* cluster → its index in looks */

        pthread_t thread;
        bool running;       /* a worker was started and not joined yet */
        atomic_bool done;   /* the worker finished */
        atomic_bool cancel; /* abort the running snapshot */
        snapshot_job *job;  /* the running job (owned here) */
        /* A drill job: the snapshot and the slot it runs for; 0: the job takes a snapshot. */
        int64_t drill_id, drill_slot_ms;
        bool drill_after;            /* a snapshot job: drill what it stored (verify: every) */
        state_snapshot_drill *drill; /* the drill the worker ran, for reap() */
        int result;                  /* the worker's outcome */
        char *error;
        int64_t declared_look_ms; /* declared snapshots: look again from then */
};

static int64_t wall(const snapshot_scheduler *s)
{
        return s->opts.wall_ms ? s->opts.wall_ms() : now_wall_ms();
}

int snapshot_scheduler_new(const snapshot_scheduler_opts *opts, state_db *db,
                           snapshot_scheduler **ret)
{
        if (!opts || isempty(opts->state_path) || isempty(opts->state_dir))
                return -EINVAL;
        snapshot_scheduler *s = XNEW(snapshot_scheduler);
        s->opts = *opts;
        s->state_path = xstrdup(opts->state_path);
        s->state_dir = xstrdup(opts->state_dir);
        s->etcd_dir = xstrdup_null(opts->etcd_dir);
        s->opts.state_path = s->state_path;
        s->opts.state_dir = s->state_dir;
        s->opts.etcd_dir = s->etcd_dir;
        /* what a killed gitcd left: its temporary files, and records still running */
        _cleanup_free_ char *tmp = path_join(s->state_dir, "snapshots-tmp");
        (void)rm_rf(tmp);
        int k = state_snapshot_abandon_running(db, NULL, "gitcd stopped while it ran", wall(s));
        if (k > 0)
                log_warn("%d snapshot%s left running by an earlier gitcd recorded as failed", k,
                         k == 1 ? "" : "s");
        k = snapshot_drill_cleanup(db, s->state_dir);
        if (k > 0)
                log_warn("removed what %d restore drill%s cut short left in %s/%s", k,
                         k == 1 ? "" : "s", s->state_dir, SNAPSHOT_DRILL_DIR);
        *ret = s;
        return 0;
}

/* A drill of snapshot id by the worker: never waits for another drill (tried again later). */
static int worker_drill(snapshot_scheduler *s, state_db *db, int64_t id, int64_t slot_ms)
{
        snapshot_drill_opts o = {.trigger = slot_ms ? "schedule" : "snapshot", .slot_ms = slot_ms};
        free(s->error);
        s->error = NULL;
        return snapshot_drill(db, s->job, id, &o, &s->drill, &s->error);
}

static void *worker(void *userdata)
{
        snapshot_scheduler *s = userdata;
        snapshot_job *job = s->job;
        state_db *db = NULL;
        int r = state_open(s->state_path, STATE_OPEN_READ_WRITE, &db);
        if (r < 0) {
                s->error = xstrdup(state_last_error());
        } else if (s->drill_id) {
                r = worker_drill(s, db, s->drill_id, s->drill_slot_ms);
        } else {
                int64_t id = 0;
                r = snapshot_take(db, job, &id, &s->error);
                etcd_cluster *c = r >= 0 ? spec_from_json_text(job->spec_json, job->cluster) : NULL;
                if (c && !job->request_id)
                        (void)snapshot_retention(db, job->cluster, &c->snapshots, s->state_dir,
                                                 job->secret_dir, job->pvc, now_wall_ms());
                /* verify: every, and stored where the spec's snapshots are */
                state_snapshot *rec = NULL;
                if (c && s->drill_after && state_snapshot_get(db, id, &rec) == 0) {
                        _cleanup_free_ char *dest =
                            snapshot_destination_id(&c->snapshots.destination);
                        if (streq_ptr(rec->destination, dest) && !atomic_load(&s->cancel)) {
                                if (worker_drill(s, db, id, 0) < 0)
                                        log_debug("%s: no drill of snapshot %lld now: %s",
                                                  job->cluster, (long long)id, s->error);
                                free(s->error);
                                s->error = NULL;
                        }
                }
                state_snapshot_free(rec);
                etcd_cluster_free(c);
        }
        state_close(db);
        s->result = r;
        atomic_store(&s->done, true);
        return NULL;
}

static void reap(snapshot_scheduler *s, state_db *db)
{
        if (!s->running)
                return;
        pthread_join(s->thread, NULL);
        s->running = false;
        const char *what = s->job->declared_by ? s->job->declared_by : "scheduled snapshot";
        const char *cluster = s->job->cluster;
        if (s->drill_id && s->result < 0)
                log_warn("%s: no restore drill of snapshot %lld: %s", cluster,
                         (long long)s->drill_id, s->error ? s->error : strerror(-s->result));
        else if (s->result < 0)
                log_error("%s: %s failed: %s", cluster, what,
                          s->error ? s->error : strerror(-s->result));
        else if (!s->drill_id)
                log_info("%s: %s taken", cluster, what);
        const state_snapshot_drill *d = s->drill;
        if (d) {
                enum log_level l = streq(d->result, "verified")        ? LOG_INFO
                                   : streq(d->result, "verify-failed") ? LOG_ERROR
                                                                       : LOG_WARN;
                log_msg(l, "%s: restore drill of snapshot %lld: %s: %s", cluster,
                        (long long)d->snapshot_id, d->result, d->message ? d->message : "");
                if (s->opts.drilled && db)
                        s->opts.drilled(db, cluster, d, s->opts.userdata);
        }
        /* look at the cluster again soon: its condition and next slot changed */
        for (size_t i = 0; i < s->n_looks; i++)
                if (streq(s->looks[i].cluster, cluster)) {
                        s->looks[i].at_ms = 0;
                        /* a drill that could not start (another one ran) waits a while */
                        s->looks[i].drill_at_ms = s->drill_id && !d ? wall(s) + DRILL_LOOK_MS : 0;
                }
        state_snapshot_drill_free(s->drill);
        s->drill = NULL;
        s->drill_id = s->drill_slot_ms = 0;
        s->drill_after = false;
        snapshot_job_free(s->job);
        s->job = NULL;
        free(s->error);
        s->error = NULL;
}

void snapshot_scheduler_free(snapshot_scheduler *s)
{
        if (!s)
                return;
        if (s->running) {
                log_info("%s: aborting the running snapshot", s->job->cluster);
                atomic_store(&s->cancel, true);
                reap(s, NULL);
        }
        for (size_t i = 0; i < s->n_looks; i++) {
                free(s->looks[i].cluster);
                free(s->looks[i].schedule);
                free(s->looks[i].unneeded);
                free(s->looks[i].drill_unneeded);
        }
        free(s->looks);
        strmap_release(&s->look_index);
        free(s->state_path);
        free(s->state_dir);
        free(s->etcd_dir);
        free(s);
}

static next_look *look_for(snapshot_scheduler *s, const char *cluster)
{
        size_t i;
        if (strmap_get(&s->look_index, cluster, &i))
                return &s->looks[i];
        s->looks = xgrow(s->looks, &s->alloc_looks, s->n_looks + 1, sizeof(next_look));
        (void)strmap_put(&s->look_index, cluster, s->n_looks);
        next_look *l = &s->looks[s->n_looks++];
        *l = (next_look){.cluster = xstrdup(cluster)};
        return l;
}

/*
 * The spec in force is the one last found not needing what is looked for
 * (unneeded: its hash): nothing to read and parse again. *ret_hash: the
 * hash in force, to remember when the spec read now does not need it.
 */
static bool still_unneeded(state_db *db, const next_look *look, const char *unneeded,
                           char **ret_hash)
{
        *ret_hash = NULL;
        if (state_cluster_spec_hash(db, look->cluster, ret_hash) < 0 || !*ret_hash)
                return false;
        return streq_ptr(unneeded, *ret_hash);
}

/* The cluster's latched (else desired) spec; NULL when unreadable. */
static etcd_cluster *cluster_spec(state_db *db, const char *cluster, bool *ret_available)
{
        state_cluster *sc = NULL;
        *ret_available = false;
        if (state_cluster_get(db, cluster, &sc) < 0)
                return NULL;
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, "Available"))
                        *ret_available = streq(sc->conditions[i].status, "True");
        etcd_cluster *c = spec_from_json_text(state_cluster_spec_json(sc), cluster);
        state_cluster_free(sc);
        return c;
}

/* Whether the spec of job asks for a drill of each snapshot stored (verify: every). */
static bool drills_every(const snapshot_job *job)
{
        etcd_cluster *c = spec_from_json_text(job->spec_json, job->cluster);
        bool every = c && c->snapshots.enabled && c->snapshots.verify == VERIFY_EVERY;
        etcd_cluster_free(c);
        return every;
}

static int start_worker(snapshot_scheduler *s, snapshot_job *job)
{
        job->etcd_dir = xstrdup_null(s->etcd_dir);
        job->cancel = &s->cancel;
        /* the one worker serves every cluster: a writer of this one in use holds it briefly */
        snapshot_pvc_writer_set_wait(job->pvc, SNAPSHOT_WRITER_WAIT_RUN_MS, &s->cancel);
        s->job = job;
        if (!s->drill_id)
                s->drill_after = drills_every(job);
        atomic_store(&s->done, false);
        atomic_store(&s->cancel, false);
        if (pthread_create(&s->thread, NULL, worker, s) != 0) {
                log_error("%s: cannot start the snapshot worker", job->cluster);
                snapshot_job_free(s->job);
                s->job = NULL;
                s->drill_id = s->drill_slot_ms = 0;
                return -EAGAIN;
        }
        s->running = true;
        return 0;
}

/*
 * The oldest pending declared snapshot of an available cluster among
 * clusters, started. A request that cannot become a job stays pending and
 * is tried again after a minute.
 */
static int start_declared(snapshot_scheduler *s, state_db *db, target *t,
                          const char *const *clusters, size_t n, int64_t now)
{
        if (now < s->declared_look_ms)
                return 0;
        state_snapshot_request_list l = {0};
        if (state_snapshot_requests_list(db, NULL, true, &l) < 0)
                return 0;
        int started = 0;
        for (size_t i = 0; i < l.n && !started; i++) {
                const state_snapshot_request *q = l.items[i];
                bool listed = false;
                for (size_t k = 0; k < n && !listed; k++)
                        listed = streq(clusters[k], q->cluster);
                bool available = false;
                _cleanup_(etcd_cluster_freep) etcd_cluster *c =
                    listed ? cluster_spec(db, q->cluster, &available) : NULL;
                if (!c || !available)
                        continue;
                char *error = NULL;
                snapshot_job *job = NULL;
                if (snapshot_declared_job(db, t, q, s->state_dir, &job, &error) < 0) {
                        log_error("%s: cannot take the snapshot %s declares: %s", q->cluster,
                                  q->object, error);
                        free(error);
                        s->declared_look_ms = now + 60 * 1000;
                        continue;
                }
                if (start_worker(s, job) < 0) {
                        s->declared_look_ms = now + 60 * 1000;
                        break;
                }
                log_info("%s: taking the snapshot %s declares", q->cluster, q->object);
                started = 1;
        }
        state_snapshot_request_list_release(&l);
        return started;
}

/*
 * The restore drill due for the first cluster that has one (snapshot_drill_due),
 * started. Each cluster is looked at again at most DRILL_LOOK_MS later: a
 * snapshot another process stored is drilled within that time.
 */
static int start_drill(snapshot_scheduler *s, state_db *db, target *t, const char *const *clusters,
                       size_t n, int64_t now)
{
        for (size_t i = 0; i < n; i++) {
                next_look *look = look_for(s, clusters[i]);
                if (now < look->drill_at_ms)
                        continue;
                look->drill_at_ms = now + DRILL_LOOK_MS;
                _cleanup_free_ char *hash = NULL;
                if (still_unneeded(db, look, look->drill_unneeded, &hash))
                        continue;
                bool available = false;
                _cleanup_(etcd_cluster_freep) etcd_cluster *c =
                    cluster_spec(db, clusters[i], &available);
                snapshot_verify_policy policy;
                if (!c || !c->snapshots.enabled || c->snapshots.verify == VERIFY_OFF ||
                    c->snapshots.destination.kind == DEST_NONE ||
                    snapshot_verify_policy_of(&c->snapshots, &policy) < 0) {
                        if (c)
                                str_assign(&look->drill_unneeded, TAKE_PTR(hash));
                        continue;
                }
                int64_t last_slot = 0;
                state_snapshot_list l = {0};
                if (state_snapshot_drill_last_slot(db, clusters[i], &last_slot) < 0 ||
                    state_snapshot_list_for(db, clusters[i], 0, &l) < 0)
                        continue;
                _cleanup_free_ char *dest = snapshot_destination_id(&c->snapshots.destination);
                int64_t id = 0, slot = 0, next = 0;
                int due = snapshot_drill_due(&policy, &l, dest, last_slot, now, &id, &slot, &next);
                state_snapshot_list_release(&l);
                if (next > 0 && next < look->drill_at_ms)
                        look->drill_at_ms = next;
                if (due <= 0)
                        continue;
                char *error = NULL;
                snapshot_job *job = NULL;
                if (snapshot_job_from_state(db, t, clusters[i], "manual", 0, s->state_dir, &job,
                                            &error) < 0) {
                        log_error("%s: cannot run the restore drill of snapshot %lld: %s",
                                  clusters[i], (long long)id, error);
                        free(error);
                        continue;
                }
                s->drill_id = id;
                s->drill_slot_ms = slot;
                if (start_worker(s, job) < 0)
                        continue;
                log_info("%s: restore drill of snapshot %lld", clusters[i], (long long)id);
                return 1;
        }
        return 0;
}

int snapshot_scheduler_tick(snapshot_scheduler *s, state_db *db, target *t,
                            const char *const *clusters, size_t n)
{
        assert(s && db);
        if (s->running && atomic_load(&s->done))
                reap(s, db);
        int64_t now = wall(s);
        if (!s->running && start_declared(s, db, t, clusters, n, now) > 0)
                return 1;
        for (size_t i = 0; i < n; i++) {
                next_look *look = look_for(s, clusters[i]);
                if (now < look->at_ms)
                        continue;
                _cleanup_free_ char *hash = NULL;
                if (still_unneeded(db, look, look->unneeded, &hash)) {
                        look->at_ms = now + 60 * 1000;
                        continue;
                }
                bool available = false;
                _cleanup_(etcd_cluster_freep) etcd_cluster *c =
                    cluster_spec(db, clusters[i], &available);
                cron_expr e;
                if (!c || !c->snapshots.enabled || !c->snapshots.schedule ||
                    cron_parse(c->snapshots.schedule, &e) < 0) {
                        if (c)
                                str_assign(&look->unneeded, TAKE_PTR(hash));
                        look->at_ms = now + 60 * 1000;
                        continue;
                }
                state_snapshot_list l = {0};
                if (state_snapshot_list_for(db, clusters[i], 0, &l) < 0) {
                        look->at_ms = now + 10 * 1000;
                        continue;
                }
                int64_t slot = 0, next = 0;
                int due = cron_due(&e, snapshot_last_slot(&l), now, &slot, &next);
                state_snapshot_list_release(&l);
                if (due <= 0) {
                        look->at_ms = next > 0 ? next : now + 3600 * 1000;
                        continue;
                }
                /* due: waits for the worker, and for a cluster with quorum (still
                 * forming, or quorum lost: a snapshot cannot succeed; SnapshotsHealthy
                 * turns false when that lasts) */
                if (s->running || !available)
                        continue;
                char *error = NULL;
                snapshot_job *job = NULL;
                if (snapshot_job_from_state(db, t, clusters[i], "schedule", slot, s->state_dir,
                                            &job, &error) < 0) {
                        log_error("%s: cannot take the scheduled snapshot: %s", clusters[i], error);
                        free(error);
                        look->at_ms = now + 60 * 1000;
                        continue;
                }
                if (start_worker(s, job) < 0) {
                        look->at_ms = now + 60 * 1000;
                        continue;
                }
                log_info("%s: taking the scheduled snapshot", clusters[i]);
                look->at_ms = 0;
                return 1;
        }
        if (!s->running)
                return start_drill(s, db, t, clusters, n, now);
        return 0;
}

int snapshot_record_health(state_db *db, const char *cluster, const snapshot_spec *spec,
                           int64_t now_ms)
{
        cron_expr e;
        snapshot_verify_policy policy;
        if (!spec || !spec->enabled || !spec->schedule || cron_parse(spec->schedule, &e) < 0 ||
            snapshot_verify_policy_of(spec, &policy) < 0)
                return 0;
        state_snapshot_list l = {0};
        int k = state_snapshot_list_for(db, cluster, 100, &l);
        if (k < 0)
                return k;
        snapshot_condition cond;
        snapshot_check_health(&l, &e, &policy, now_ms, &cond);
        state_snapshot_list_release(&l);
        k = state_cluster_set_condition(db, cluster, cond.type, cond.status, cond.reason,
                                        cond.message, now_ms);
        if (k == 1) {
                json_t *after = json_pack("{s:s, s:s, s:s}", "type", cond.type, "status",
                                          cond.status, "reason", cond.reason);
                _cleanup_free_ char *text = json_dumps(after, JSON_COMPACT | JSON_PRESERVE_ORDER);
                json_decref(after);
                state_audit_event ev = {.time_ms = now_ms,
                                        .cluster = (char *)cluster,
                                        .action = "condition.changed",
                                        .reason = cond.message,
                                        .after_json = text,
                                        .outcome = "success"};
                (void)state_audit_append(db, &ev, NULL);
        }
        free(cond.message);
        return k;
}
