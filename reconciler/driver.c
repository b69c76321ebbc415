/*
 * The driver loop shared by `gitcd apply` and `gitcd run`; see driver.h.
 *
 * A revision is taken in whole: its commit is recorded, every valid
 * EtcdCluster in it is offered to the reconciler (which records accepted
 * specs and refuses forbidden transitions), and invalid documents are
 * audited as `spec.rejected`. Since an invalid document may be an existing
 * cluster that failed to parse, a revision with errors never orphans or
 * prunes anything.
 *
 * Cadence: a cluster that is not converged is passed at every step (the
 * caller waits for the shortest poll_ms or a target event in between); a
 * converged or failed one only when its own timer runs out (the idle
 * interval, jittered by +-25% so that clusters that converged together do
 * not look together ever after), when its spec changes, when a certificate
 * renewal falls due (poll_ms), or when driver_wake() names it.
 *
 * Concurrency: each cluster has its own reconciler (its latched spec, etcd
 * connection and pacing), so passes of different clusters share nothing
 * but the target (locked by the caller, targets/locked.h), the log and the
 * metrics registry (both locked). With workers, the main thread queues due
 * clusters; a worker runs one cluster's passes with its own state
 * connection (a state_db belongs to one thread at a time), then hands the
 * result back. Everything else happens on the main thread: the source,
 * offers, orphans, prune, the callbacks (queued by the workers and
 * delivered at the next step) and the scheduling. A cluster is never in two
 * places at once: the main thread touches a cluster's reconciler only while
 * no worker holds it; an offer or a prune that meets a busy cluster waits
 * in the cluster until its pass is over.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "reconciler/driver.h"
#include "api/spec.h"
#include "intake/intake.h"
#include "intake/order.h"
#include "snapshots/declared.h"
#include "state/verdicts.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAX_PASSES_PER_STEP 64
/*
 * Timers of converged clusters are served in batches at least this far
 * apart: with thousands of clusters, a step per timer would scan every
 * cluster hundreds of times a second.
 */
#define IDLE_BATCH_MS 500

/* One cluster the driver knows, from this revision or an earlier one. */
typedef struct dcluster {
        char *name; /* "ns/name" */
        reconciler *rec;
        bool active;    /* defined by the current revision */
        bool have_last; /* last holds a result */
        pass_result last;
        int64_t due_ms; /* observe again at (monotonic) */
        bool wake;      /* observe at the next step, whatever the timer says (main thread) */
        /* Deferred while a worker holds the cluster. */
        etcd_cluster *pending_spec;
        char *pending_commit;
        char *pending_author;
        bool pending_prune;
        /*
         * A change spec.dependsOn holds back (intake/order.h) until its
         * upstreams converged on its commit and soaked: not offered yet; the
         * cluster goes on with its accepted spec meanwhile (main thread).
         */
        etcd_cluster *gated_spec;
        char *gated_commit;
        char *gated_author;
        char *gated_reason;     /* the reason word recorded last: audited once per change */
        int64_t gated_until_ms; /* a soak under way ends (wall ms); 0: none */
        /* A pass found it converged since its desired spec last changed (an upstream's fact). */
        bool settled;
        /* Set by both sides (atomic: the main thread scans every cluster at each step). */
        atomic_bool busy; /* queued or running in a worker */
        atomic_bool done; /* the worker finished; res and k wait to be taken in */
        pass_result res;
        int k;
        struct dcluster *next_job;
} dcluster;

/* A callback a worker could not call itself (callbacks run on the main thread). */
typedef struct dcallback {
        char *cluster;
        pass_result res;
        int64_t duration_ms; /* -1: progress; else pass_done */
} dcallback;

struct driver {
        driver_opts opts;
        reconciler *rec; /* for orphans only: it holds no cluster */
        dcluster **all;  /* every cluster known, by first appearance */
        size_t n_all, alloc_all;
        dcluster **index; /* open addressing on the name, 2x n_all slots at least */
        size_t n_index;
        dcluster **clusters; /* the current revision's, in order */
        size_t n_clusters, alloc_clusters;
        char commit[41];
        bool have_revision;
        size_t n_held; /* changes and removals of the current revision held for approvals */
        /* The current revision's clusters and the hash of the spec it defines for each. */
        char **rev_ids;
        char **rev_hashes;
        size_t n_rev;
        char *last_error;
        uint64_t rng;

        /* The workers. */
        pthread_t *threads;
        state_db **dbs;
        size_t n_threads;
        pthread_mutex_t lock;
        pthread_cond_t work;
        pthread_cond_t idle;
        dcluster *queue_head, *queue_tail;
        size_t in_flight;
        bool stop;
        dcallback *callbacks;
        size_t n_callbacks, alloc_callbacks;
};

/* Every driver's workers signal here when a pass ends (driver_wait). */
static pthread_mutex_t finished_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finished_cond = PTHREAD_COND_INITIALIZER;
static uint64_t finished_gen;
static size_t in_flight_all; /* passes queued or running, every driver */

static int64_t mono(const driver *d)
{
        return d->opts.mono_ms ? d->opts.mono_ms() : now_mono_ms();
}

static void set_error(driver *d, const char *fmt, ...) _printf_(2, 3);
static void set_error(driver *d, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        free(d->last_error);
        d->last_error = xvasprintf(fmt, ap);
        va_end(ap);
}

const char *driver_last_error(const driver *d)
{
        return d->last_error ? d->last_error : "";
}

/* ---- clusters ------------------------------------------------------------ */

static uint64_t name_hash(const char *s)
{
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ULL;
        return h;
}

static void index_put(dcluster **index, size_t n_index, dcluster *dc)
{
        size_t i = name_hash(dc->name) & (n_index - 1);
        while (index[i])
                i = (i + 1) & (n_index - 1);
        index[i] = dc;
}

static dcluster *cluster_find(const driver *d, const char *name)
{
        if (!d->n_index)
                return NULL;
        for (size_t i = name_hash(name) & (d->n_index - 1); d->index[i];
             i = (i + 1) & (d->n_index - 1))
                if (streq(d->index[i]->name, name))
                        return d->index[i];
        return NULL;
}

/* The options of every reconciler the driver makes: one place, so none is left out. */
static reconciler_opts reconciler_opts_of(const driver_opts *o)
{
        return (reconciler_opts){.db = o->db,
                                 .target = o->target,
                                 .etcd = o->etcd,
                                 .etcd_userdata = o->etcd_userdata,
                                 .wall_ms = o->wall_ms,
                                 .mono_ms = o->mono_ms,
                                 .state_dir = o->state_dir,
                                 .etcd_dir = o->etcd_dir};
}

/* The cluster's entry, made on first use with a reconciler of its own; NULL when it cannot. */
static dcluster *cluster_get(driver *d, const char *name)
{
        dcluster *dc = cluster_find(d, name);
        if (dc)
                return dc;
        reconciler_opts ro = reconciler_opts_of(&d->opts);
        reconciler *rec = NULL;
        if (reconciler_new(&ro, &rec) < 0)
                return NULL;
        dc = XNEW(dcluster);
        dc->name = xstrdup(name);
        dc->rec = rec;
        d->all = xgrow(d->all, &d->alloc_all, d->n_all + 1, sizeof(dcluster *));
        d->all[d->n_all++] = dc;
        if (d->n_all * 2 > d->n_index) {
                size_t n = d->n_index ? d->n_index * 2 : 64;
                while (n < d->n_all * 2)
                        n *= 2;
                free(d->index);
                d->index = xcalloc(n, sizeof(dcluster *));
                d->n_index = n;
                for (size_t i = 0; i < d->n_all; i++)
                        index_put(d->index, n, d->all[i]);
        } else {
                index_put(d->index, d->n_index, dc);
        }
        return dc;
}

static void pending_release(dcluster *dc)
{
        etcd_cluster_free(dc->pending_spec);
        free(dc->pending_commit);
        free(dc->pending_author);
        dc->pending_spec = NULL;
        dc->pending_commit = dc->pending_author = NULL;
}

static void gated_release(dcluster *dc)
{
        etcd_cluster_free(dc->gated_spec);
        free(dc->gated_commit);
        free(dc->gated_author);
        free(dc->gated_reason);
        dc->gated_spec = NULL;
        dc->gated_commit = dc->gated_author = dc->gated_reason = NULL;
        dc->gated_until_ms = 0;
}

static void cluster_free(dcluster *dc)
{
        pending_release(dc);
        gated_release(dc);
        reconciler_free(dc->rec);
        pass_result_release(&dc->last);
        pass_result_release(&dc->res);
        free(dc->name);
        free(dc);
}

/* Whether a worker holds the cluster. */
static bool cluster_busy(driver *d, dcluster *dc)
{
        (void)d;
        return atomic_load(&dc->busy);
}

/* A uniform draw in [interval * 3/4, interval * 5/4] (xorshift64*). */
static int64_t jittered(driver *d, int64_t interval_ms)
{
        d->rng ^= d->rng >> 12;
        d->rng ^= d->rng << 25;
        d->rng ^= d->rng >> 27;
        uint64_t r = d->rng * 2685821657736338717ULL;
        int64_t span = interval_ms / 2;
        return interval_ms - interval_ms / 4 + (span > 0 ? (int64_t)(r % (uint64_t)span) : 0);
}

/* ---- callbacks ----------------------------------------------------------- */

/* A worker's callback waits for the main thread; the main thread's runs at once. */
static void callback(driver *d, bool on_worker, const char *cluster, const pass_result *res,
                     int64_t duration_ms)
{
        if (duration_ms < 0 ? !d->opts.progress : !d->opts.pass_done)
                return;
        if (!on_worker) {
                if (duration_ms < 0)
                        d->opts.progress(cluster, res, d->opts.userdata);
                else
                        d->opts.pass_done(cluster, res, duration_ms, d->opts.pass_done_userdata);
                return;
        }
        pthread_mutex_lock(&d->lock);
        d->callbacks =
            xgrow(d->callbacks, &d->alloc_callbacks, d->n_callbacks + 1, sizeof(dcallback));
        d->callbacks[d->n_callbacks++] =
            (dcallback){.cluster = xstrdup(cluster), .res = *res, .duration_ms = duration_ms};
        /* the queued copy owns its own message */
        d->callbacks[d->n_callbacks - 1].res.message = xstrdup_null(res->message);
        d->callbacks[d->n_callbacks - 1].res.machines_message = xstrdup_null(res->machines_message);
        pthread_mutex_unlock(&d->lock);
}

static void callbacks_deliver(driver *d)
{
        pthread_mutex_lock(&d->lock);
        dcallback *v = d->callbacks;
        size_t n = d->n_callbacks;
        d->callbacks = NULL;
        d->n_callbacks = d->alloc_callbacks = 0;
        pthread_mutex_unlock(&d->lock);
        for (size_t i = 0; i < n; i++) {
                callback(d, false, v[i].cluster, &v[i].res, v[i].duration_ms);
                free(v[i].cluster);
                pass_result_release(&v[i].res);
        }
        free(v);
}

/* ---- one cluster's passes ---------------------------------------------- */

/* Passes until the cluster is converged, failed or waiting: on a worker or the main thread. */
static void run_passes(driver *d, dcluster *dc, state_db *db, bool on_worker)
{
        reconciler_set_db(dc->rec, db);
        pass_result res = {0};
        int k = 0;
        for (int n = 0; n < MAX_PASSES_PER_STEP; n++) {
                int64_t t0 = now_mono_ms();
                pass_result_release(&res);
                k = reconciler_pass(dc->rec, dc->name, &res);
                if (k >= 0)
                        callback(d, on_worker, dc->name, &res, now_mono_ms() - t0);
                if (k < 0 || res.outcome != PASS_PROGRESSED)
                        break;
                callback(d, on_worker, dc->name, &res, -1);
        }
        reconciler_set_db(dc->rec, d->opts.db);
        pass_result_release(&dc->res);
        dc->res = res; /* dc owns the message; take_result() moves it to last */
        dc->k = k;
}

/* Take in a finished pass (main thread): report a change, set the cluster's timer. */
static void take_result(driver *d, dcluster *dc)
{
        pass_result res = dc->res;
        dc->res = (pass_result){0};
        if (dc->k < 0) {
                log_error("%s: pass failed: %s", dc->name, res.message);
                res.outcome = PASS_WAITING;
                res.poll_ms = 1000;
        }
        /* a change of MachineHealthy is reported too (the daemon alerts on it) */
        if (!dc->have_last || dc->last.outcome != res.outcome ||
            !streq_ptr(dc->last.message, res.message) ||
            (res.machines && dc->last.machines != res.machines))
                callback(d, false, dc->name, &res, -1);
        pass_result_release(&dc->last);
        dc->last = res;
        dc->have_last = true;
        if (res.outcome == PASS_CONVERGED)
                dc->settled = true;
        int64_t now = mono(d);
        switch (res.outcome) {
        case PASS_CONVERGED:
        case PASS_FAILED:
                dc->due_ms = now + jittered(d, d->opts.idle_interval_ms);
                if (res.poll_ms > 0)
                        dc->due_ms = MIN(dc->due_ms, now + res.poll_ms);
                break;
        case PASS_BLOCKED:
                dc->due_ms = now + (res.poll_ms > 0 ? res.poll_ms : 1000);
                break;
        case PASS_WAITING:
                /* Inline, the caller's wait is the cadence; with workers, the cluster's own. */
                dc->due_ms =
                    d->n_threads > 0 ? now + (res.poll_ms > 0 ? MIN(res.poll_ms, 1000) : 1000) : 0;
                break;
        case PASS_PROGRESSED:
                dc->due_ms = 0;
        }
}

/* An offer or a prune that waited for the cluster's pass to end (main thread, not busy). */
static void run_pending(driver *d, dcluster *dc)
{
        if (dc->pending_prune) {
                dc->pending_prune = false;
                (void)reconciler_prune(dc->rec, dc->name);
        }
        if (dc->pending_spec) {
                reconcile_origin origin = {.commit = dc->pending_commit,
                                           .author = dc->pending_author};
                if (reconciler_offer(dc->rec, dc->pending_spec, &origin) < 0)
                        log_error("%s: cannot record the desired spec: %s", dc->name,
                                  state_last_error());
                pending_release(dc);
                dc->settled = false;
                dc->wake = true;
        }
}

/* ---- spec.dependsOn: changes held back for their upstreams --------------- */

static int64_t wall(const driver *d)
{
        return d->opts.wall_ms ? d->opts.wall_ms() : now_wall_ms();
}

static const char *source_name(const driver *d)
{
        return d->opts.source_name ? d->opts.source_name : "default";
}

static void rev_forget(driver *d)
{
        for (size_t i = 0; i < d->n_rev; i++) {
                free(d->rev_ids[i]);
                free(d->rev_hashes[i]);
        }
        free(d->rev_ids);
        free(d->rev_hashes);
        d->rev_ids = d->rev_hashes = NULL;
        d->n_rev = 0;
}

/* The hash of the spec the current revision defines for id; NULL: none. */
static const char *rev_hash(const driver *d, const char *id)
{
        for (size_t i = 0; i < d->n_rev; i++)
                if (streq(d->rev_ids[i], id))
                        return d->rev_hashes[i];
        return NULL;
}

static void audit_at(driver *d, const char *cluster, const char *action, const char *reason,
                     const char *commit, const char *author, const char *outcome)
{
        state_audit_event ev = {
            .time_ms = now_wall_ms(),
            .cluster = (char *)cluster,
            .commit = (char *)commit,
            .author = (char *)author,
            .action = (char *)action,
            .reason = (char *)reason,
            .outcome = (char *)outcome,
        };
        (void)state_audit_append(d->opts.db, &ev, NULL);
}

/* The gate over the held-back change of dc, from the state store's facts (order.h). */
static void gate_eval(driver *d, dcluster *dc, order_gate *ret)
{
        const etcd_cluster *c = dc->gated_spec;
        size_t n = c->n_depends_on;
        order_upstream *ups = xcalloc(n + 1, sizeof(*ups));
        state_cluster **scs = xcalloc(n + 1, sizeof(*scs));
        state_verdict_list *vls = xcalloc(n + 1, sizeof(*vls));
        char **ids = xcalloc(n + 1, sizeof(char *));
        for (size_t j = 0; j < n; j++) {
                ids[j] = order_resolve(c, c->depends_on[j]);
                int k = state_cluster_get(d->opts.db, ids[j], &scs[j]);
                if (k < 0 && k != -ENOENT)
                        log_warn("%s: cannot read %s: %s", dc->name, ids[j], state_last_error());
                if (state_verdict_list_get(d->opts.db, ids[j], &vls[j]) < 0)
                        vls[j] = (state_verdict_list){0};
                order_upstream_from_state(ids[j], k < 0 ? NULL : scs[j], &vls[j], dc->gated_commit,
                                          rev_hash(d, ids[j]), &ups[j]);
                /* The store's phase may predate the spec just latched: a pass must say so. */
                dcluster *up = cluster_find(d, ids[j]);
                if (!up || !up->settled || up->gated_spec)
                        ups[j].converged = false;
        }
        (void)order_gate_decide(dc->gated_commit, c->soak_seconds, ups, n, wall(d), ret);
        for (size_t j = 0; j < n; j++) {
                free(ids[j]);
                state_cluster_free(scs[j]);
                state_verdict_list_release(&vls[j]);
        }
        free(ids);
        free(scs);
        free(vls);
        free(ups);
}

/* Whether the store already has this wait (reason and commit): audited before a restart. */
static bool wait_recorded(driver *d, const char *cluster, const char *reason, const char *commit)
{
        state_verdict_list vl = {0};
        if (state_verdict_list_get(d->opts.db, cluster, &vl) < 0)
                return false;
        bool same = false;
        size_t len = strlen(reason);
        for (size_t i = 0; i < vl.n && !same; i++) {
                const state_verdict *v = vl.items[i];
                same = streq_ptr(v->source, source_name(d)) &&
                       streq_ptr(v->verdict, ORDER_VERDICT) && streq_ptr(v->commit, commit) &&
                       v->message && strneq(v->message, reason, len) && v->message[len] == ':';
        }
        state_verdict_list_release(&vl);
        return same;
}

/* The held-back change of dc offered now that its upstreams are through (not busy). */
static int gate_offer(driver *d, dcluster *dc)
{
        reconcile_origin origin = {.commit = dc->gated_commit, .author = dc->gated_author};
        if (reconciler_offer(dc->rec, dc->gated_spec, &origin) < 0) {
                log_error("%s: cannot record the desired spec: %s", dc->name, state_last_error());
                return -EIO;
        }
        if (snapshot_requests_record(d->opts.db, dc->name, dc->gated_spec, now_wall_ms()) < 0)
                log_error("%s: cannot record declared snapshots: %s", dc->name, state_last_error());
        dc->settled = false;
        dc->wake = true;
        if (!dc->active) {
                dc->active = true;
                d->clusters =
                    xgrow(d->clusters, &d->alloc_clusters, d->n_clusters + 1, sizeof(dcluster *));
                d->clusters[d->n_clusters++] = dc;
        }
        return 0;
}

static void gate_released(driver *d, dcluster *dc)
{
        if (gate_offer(d, dc) < 0)
                return;
        if (dc->gated_reason) {
                _cleanup_free_ char *on =
                    dc->gated_commit ? xstrndup(dc->gated_commit, 7) : xstrdup("the same revision");
                _cleanup_free_ char *why = xasprintf(
                    "every cluster it depends on converged on %s and stayed healthy %d s; the "
                    "change is taken in",
                    on, dc->gated_spec->soak_seconds);
                log_info("%s: released: %s", dc->name, why);
                audit_at(d, dc->name, "rollout.release", why, dc->gated_commit, dc->gated_author,
                         "success");
                if (state_verdict_clear(d->opts.db, source_name(d), dc->name) < 0)
                        log_warn("%s: cannot forget its wait: %s", dc->name, state_last_error());
        }
        gated_release(dc);
}

/*
 * Judge the held-back change of dc again: offered when released, else its
 * wait recorded (the intake's verdict "waiting", shown by gitcd status) and
 * audited once per change of its reason. Returns the gate's kind.
 */
static order_gate_kind gate_check(driver *d, dcluster *dc, diag_list *diags)
{
        order_gate g;
        gate_eval(d, dc, &g);
        order_gate_kind kind = g.kind;
        if (kind == ORDER_RELEASE) {
                order_gate_release(&g);
                gate_released(d, dc);
                return kind;
        }
        _cleanup_free_ char *msg = xasprintf("%s: %s", g.reason, g.stored);
        bool changed = !streq_ptr(dc->gated_reason, g.reason);
        bool audited = changed && wait_recorded(d, dc->name, g.reason, dc->gated_commit);
        if (state_verdict_set(d->opts.db, source_name(d), dc->name, ORDER_VERDICT, msg,
                              dc->gated_commit, now_wall_ms()) < 0)
                log_warn("%s: cannot record its wait: %s", dc->name, state_last_error());
        if (changed && !audited) {
                log_info("%s: %s: %s", dc->name, g.reason, g.message);
                audit_at(d, dc->name, "rollout.wait", msg, dc->gated_commit, dc->gated_author,
                         kind == ORDER_HOLD ? "held" : "waiting");
        }
        if (diags)
                diag_add(diags, DIAG_WARNING, dc->gated_spec->file, dc->gated_spec->line,
                         dc->gated_spec->col, "%s: %s: %s; %s", dc->name, g.reason, g.message,
                         dc->active ? "its last accepted spec stays in force until then"
                                    : "it is created then");
        if (changed) {
                free(dc->gated_reason);
                dc->gated_reason = xstrdup(g.reason);
        }
        dc->gated_until_ms = g.until_ms;
        order_gate_release(&g);
        return kind;
}

/* Every held-back change judged again (a step; main thread). */
static void gates_step(driver *d)
{
        for (size_t i = 0; i < d->n_all; i++) {
                dcluster *dc = d->all[i];
                if (dc->gated_spec && !cluster_busy(d, dc))
                        (void)gate_check(d, dc, NULL);
        }
}

/* A held-back cluster in a step's summary; its wait in *w (ms). */
static void gate_count(const driver *d, const dcluster *dc, driver_summary *sum, int64_t *w)
{
        if (streq_ptr(dc->gated_reason, ORDER_REASON_FAILED)) {
                sum->failed++;
                *w = d->opts.idle_interval_ms;
                return;
        }
        sum->waiting++;
        /* a soak under way: wake when it ends; else the upstreams' own passes pace it */
        int64_t left = dc->gated_until_ms ? dc->gated_until_ms - wall(d) : 1000;
        *w = MAX(left, 0);
}

/* ---- workers ------------------------------------------------------------- */

typedef struct worker_arg {
        driver *d;
        state_db *db;
} worker_arg;

static void *worker(void *userdata)
{
        worker_arg *wa = userdata;
        driver *d = wa->d;
        state_db *db = wa->db;
        free(wa);
        pthread_mutex_lock(&d->lock);
        for (;;) {
                while (!d->stop && !d->queue_head)
                        pthread_cond_wait(&d->work, &d->lock);
                if (d->stop && !d->queue_head)
                        break;
                dcluster *dc = d->queue_head;
                d->queue_head = dc->next_job;
                if (!d->queue_head)
                        d->queue_tail = NULL;
                dc->next_job = NULL;
                pthread_mutex_unlock(&d->lock);
                run_passes(d, dc, db, true);
                pthread_mutex_lock(&d->lock);
                atomic_store(&dc->done, true);
                atomic_store(&dc->busy, false);
                d->in_flight--;
                pthread_cond_broadcast(&d->idle);
                pthread_mutex_lock(&finished_lock);
                finished_gen++;
                in_flight_all--;
                pthread_cond_broadcast(&finished_cond);
                pthread_mutex_unlock(&finished_lock);
        }
        pthread_mutex_unlock(&d->lock);
        return NULL;
}

/* Passes queued but not started are not started (d->lock held). */
static void queue_drop(driver *d)
{
        for (dcluster *dc = d->queue_head; dc;) {
                dcluster *next = dc->next_job;
                atomic_store(&dc->busy, false);
                dc->next_job = NULL;
                dc->wake = true;
                d->in_flight--;
                pthread_mutex_lock(&finished_lock);
                in_flight_all--;
                pthread_mutex_unlock(&finished_lock);
                dc = next;
        }
        d->queue_head = d->queue_tail = NULL;
}

static void workers_stop(driver *d)
{
        pthread_mutex_lock(&d->lock);
        queue_drop(d);
        d->stop = true;
        pthread_cond_broadcast(&d->work);
        pthread_mutex_unlock(&d->lock);
        for (size_t i = 0; i < d->n_threads; i++)
                pthread_join(d->threads[i], NULL);
        for (size_t i = 0; i < d->n_threads; i++)
                state_close(d->dbs[i]);
        free(d->threads);
        free(d->dbs);
        d->threads = NULL;
        d->dbs = NULL;
        d->n_threads = 0;
}

/* Start the workers, each with its own state connection; fewer (none) when they cannot. */
static void workers_start(driver *d)
{
        size_t n = d->opts.workers > 1 ? (size_t)d->opts.workers : 0;
        d->threads = xcalloc(n + 1, sizeof(pthread_t));
        d->dbs = xcalloc(n + 1, sizeof(state_db *));
        for (size_t i = 0; i < n; i++) {
                state_db *db = NULL;
                if (state_open(state_path(d->opts.db), STATE_OPEN_READ_WRITE, &db) < 0) {
                        log_warn("cannot open a state connection for a worker: %s",
                                 state_last_error());
                        break;
                }
                worker_arg *wa = XNEW(worker_arg);
                *wa = (worker_arg){d, db};
                if (pthread_create(&d->threads[d->n_threads], NULL, worker, wa) != 0) {
                        log_warn("cannot start a worker thread");
                        free(wa);
                        state_close(db);
                        break;
                }
                d->dbs[d->n_threads++] = db;
        }
}

int driver_wait(int timeout_ms)
{
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + (int64_t)(timeout_ms % 1000) * 1000000;
        until.tv_sec += timeout_ms / 1000 + ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_mutex_lock(&finished_lock);
        uint64_t gen = finished_gen;
        int r = 0;
        while (in_flight_all > 0 && r == 0)
                r = pthread_cond_timedwait(&finished_cond, &finished_lock, &until);
        bool finished = finished_gen != gen;
        pthread_mutex_unlock(&finished_lock);
        return finished ? 1 : 0;
}

int driver_quiesce(driver *d, int timeout_ms)
{
        int64_t end = now_mono_ms() + timeout_ms;
        pthread_mutex_lock(&d->lock);
        queue_drop(d);
        while (d->in_flight > 0) {
                int64_t left = end - now_mono_ms();
                if (left <= 0)
                        break;
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                int64_t ns = until.tv_nsec + (left % 1000) * 1000000;
                until.tv_sec += left / 1000 + ns / 1000000000;
                until.tv_nsec = ns % 1000000000;
                (void)pthread_cond_timedwait(&d->idle, &d->lock, &until);
        }
        int n = (int)d->in_flight;
        pthread_mutex_unlock(&d->lock);
        return n;
}

bool driver_cluster_busy(const driver *d, const char *cluster)
{
        dcluster *dc = cluster_find(d, cluster);
        return dc && atomic_load(&dc->busy);
}

/* ---- the driver ---------------------------------------------------------- */

int driver_new(const driver_opts *opts, driver **ret)
{
        if (!opts || !opts->db || !opts->target || !opts->src)
                return -EINVAL;
        driver *d = XNEW(driver);
        d->opts = *opts;
        if (d->opts.idle_interval_ms <= 0)
                d->opts.idle_interval_ms = DRIVER_IDLE_INTERVAL_MS;
        reconciler_opts ro = reconciler_opts_of(opts);
        int k = reconciler_new(&ro, &d->rec);
        if (k < 0) {
                free(d);
                return k;
        }
        d->rng = (uint64_t)now_mono_ms() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() ^
                 (uint64_t)(uintptr_t)d;
        if (!d->rng)
                d->rng = 1;
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->work, NULL);
        pthread_cond_init(&d->idle, NULL);
        workers_start(d);
        *ret = d;
        return 0;
}

void driver_free(driver *d)
{
        if (!d)
                return;
        workers_stop(d);
        callbacks_deliver(d);
        for (size_t i = 0; i < d->n_all; i++)
                cluster_free(d->all[i]);
        free(d->all);
        free(d->index);
        free(d->clusters);
        reconciler_free(d->rec);
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->work);
        pthread_cond_destroy(&d->idle);
        free(d->last_error);
        rev_forget(d);
        free(d);
}

size_t driver_cluster_count(const driver *d)
{
        return d->n_clusters;
}

const char *driver_cluster_name(const driver *d, size_t i)
{
        return i < d->n_clusters ? d->clusters[i]->name : NULL;
}

void driver_wake(driver *d, const char *cluster)
{
        if (!cluster) {
                for (size_t i = 0; i < d->n_all; i++)
                        d->all[i]->wake = true;
                return;
        }
        dcluster *dc = cluster_find(d, cluster);
        if (dc)
                dc->wake = true;
}

static void record_revision(driver *d, const source_revision *rev)
{
        if (!rev->commit_id[0])
                return;
        state_revision sr = {
            .repository = rev->repository,
            .ref = rev->ref,
            .commit = (char *)rev->commit_id,
            .author_name = rev->author.name,
            .author_email = rev->author.email,
            .commit_time_ms = rev->committer.time * 1000,
            .message = rev->message,
            .fetched_ms = now_wall_ms(),
            .signature_verified = rev->signature_verified,
            .signature_key = rev->signer_fingerprint,
        };
        _cleanup_free_ char *committer =
            xasprintf("%s <%s>", rev->committer.name ? rev->committer.name : "",
                      rev->committer.email ? rev->committer.email : "");
        sr.committer = committer;
        if (state_revision_record(d->opts.db, &sr) < 0)
                log_warn("could not record revision %s: %s", rev->commit_id, state_last_error());
}

static void audit_event(driver *d, const char *cluster, const char *action, const char *reason,
                        const source_revision *rev, const char *outcome)
{
        _cleanup_free_ char *author =
            rev && rev->author.name
                ? xasprintf("%s <%s>", rev->author.name, rev->author.email ? rev->author.email : "")
                : NULL;
        audit_at(d, cluster, action, reason, rev && rev->commit_id[0] ? rev->commit_id : NULL,
                 author, outcome);
}

/* Keep a cluster the revision does not offer on its accepted spec: passes go on. */
static void keep_managed(driver *d, const char *cluster)
{
        dcluster *dc = cluster_get(d, cluster);
        if (!dc) {
                log_error("%s: cannot make a reconciler", cluster);
                return;
        }
        if (dc->active)
                return;
        dc->active = true;
        d->clusters = xgrow(d->clusters, &d->alloc_clusters, d->n_clusters + 1, sizeof(dcluster *));
        d->clusters[d->n_clusters++] = dc;
}

/*
 * Record a verdict of the intake (refused, held) on a cluster of this
 * source; new for this head: audited (once per head, restarts included:
 * the state store remembers it).
 */
static void verdict(driver *d, const char *cluster, const char *kind, const char *why,
                    const source_revision *rev)
{
        const char *name = d->opts.source_name ? d->opts.source_name : "default";
        const char *commit = rev->commit_id[0] ? rev->commit_id : NULL;
        int k = state_verdict_set(d->opts.db, name, cluster, kind, why, commit, now_wall_ms());
        if (k < 0)
                log_warn("%s: cannot record the intake's verdict: %s", cluster, state_last_error());
        if (k == 0)
                return;
        /* The diagnostics the caller prints (apply) or logs (run) say why in full. */
        if (streq(kind, "refused")) {
                log_info("%s: refused (audited as spec.refused)", cluster);
                audit_event(d, cluster, "spec.refused", why, rev, "rejected");
        } else {
                log_info("%s: held waiting for approvals (audited as spec.held)", cluster);
                audit_event(d, cluster, "spec.held", why, rev, "held");
        }
}

/*
 * A cluster no longer in the source: reported once; with prune, its members
 * stop. When the policy's clusterDeletion needs approvals it does not have
 * yet, the removal is held: the cluster stays managed on its accepted spec.
 * Returns true when held.
 */
static bool report_orphan(driver *d, const state_cluster *sc, const intake_input *ii,
                          const source_revision *rev, diag_list *diags)
{
        const char *cluster = sc->name;
        const char *phase = sc->phase;
        bool done =
            phase && (streq(phase, "Pruned") || (!d->opts.prune && streq(phase, "Orphaned")));
        if (!done) {
                intake_prior prior = {
                    .id = sc->name, .json = sc->desired_json, .commit = sc->desired_commit};
                intake_cluster gone;
                if (spec_intake_removal(ii, &prior, &gone) == 0 && gone.verdict == INTAKE_HELD) {
                        _cleanup_free_ char *why = xasprintf("removal %s", gone.why);
                        diag_add(diags, DIAG_WARNING, cluster, 0, 0,
                                 "removed from the source; held: %s (until then it stays "
                                 "managed on its accepted spec)",
                                 gone.why);
                        verdict(d, cluster, "held", why, rev);
                        keep_managed(d, cluster);
                        d->n_held++;
                        intake_cluster_release(&gone);
                        return true;
                }
                intake_cluster_release(&gone);
        }
        if (d->opts.prune) {
                if (phase && streq(phase, "Pruned"))
                        return false;
                log_info("%s: removed from the source; pruning (members stopped, data kept)",
                         cluster);
                dcluster *dc = cluster_get(d, cluster);
                if (!dc)
                        return false;
                dc->pending_prune = true;
                if (!cluster_busy(d, dc))
                        run_pending(d, dc);
                return false;
        }
        if (phase && (streq(phase, "Orphaned") || streq(phase, "Pruned")))
                return false;
        log_warn("%s: removed from the source; left running (orphaned; --prune stops it)", cluster);
        (void)state_cluster_set_phase(d->opts.db, cluster, "Orphaned", now_wall_ms());
        audit_event(d, cluster, "cluster.orphaned", "removed from the source; members keep running",
                    rev, "success");
        return false;
}

/*
 * A head the source refused (signature, rollback, policy): recorded, and
 * audited once per head. -EPERM.
 */
static int sync_refused(driver *d, const source_revision *rev)
{
        /* A head refused before and unchanged since: already recorded and audited. */
        if (rev->refusal_repeated)
                return -EPERM;
        record_revision(d, rev);
        if (!d->have_revision || !streq(d->commit, rev->commit_id)) {
                _cleanup_free_ char *why =
                    xasprintf("commit %s refused: %s", rev->commit_id,
                              rev->refusal            ? rev->refusal
                              : rev->signature_reason ? rev->signature_reason
                                                      : "signature not verified");
                audit_event(d, NULL, "revision.rejected", why, rev, "rejected");
                log_error("%s; the last good revision stays in force", why);
                set_error(d, "%s", why);
        }
        return -EPERM;
}

/* The errors of a revision taken in, audited as one spec.rejected event. */
static void audit_spec_errors(driver *d, const intake_result *taken, const source_revision *rev)
{
        strbuf why = STRBUF_INIT;
        for (size_t i = 0; i < taken->diags.n; i++)
                if (taken->diags.items[i].severity == DIAG_ERROR) {
                        _cleanup_free_ char *line = diag_format(&taken->diags.items[i]);
                        if (why.len)
                                sb_append(&why, "; ");
                        sb_append(&why, line);
                }
        audit_event(d, NULL, "spec.rejected", sb_str(&why), rev, "rejected");
        sb_release(&why);
}

/* One revision taken in, cluster by cluster (driver_sync). */
typedef struct sync_ctx {
        driver *d;
        const source_revision *rev;
        diag_list *diags;
        reconcile_origin origin;
        const char **judged; /* the clusters with a verdict recorded now */
        size_t n_judged;
        bool refused;
} sync_ctx;

/*
 * A cluster refused or held is not offered. One that exists keeps its
 * accepted spec and its passes (like a forbidden transition); none is
 * orphaned.
 */
static void judge_not_offered(sync_ctx *s, const intake_cluster *ic)
{
        driver *d = s->d;
        const char *id = ic->id;
        bool held = ic->verdict == INTAKE_HELD;
        if (held) {
                int line, col;
                etcd_cluster_loc(ic->spec, "metadata.name", &line, &col);
                diag_add(s->diags, DIAG_WARNING, ic->spec->file, line, col,
                         "%s: held: %s; its last accepted spec stays in force", id, ic->why);
                d->n_held++;
        } else {
                s->refused = true;
                for (size_t j = 0; j < ic->diags.n; j++) {
                        const diag *g = &ic->diags.items[j];
                        diag_add(s->diags, g->severity, g->file, g->line, g->col, "%s", g->message);
                }
        }
        verdict(d, id, held ? "held" : "refused", ic->why, s->rev);
        s->judged[s->n_judged++] = id;
        if (ic->exists)
                keep_managed(d, id);
}

/*
 * An accepted cluster offered to its reconciler, or kept pending (*steal)
 * while its pass is in flight; its declared snapshots recorded.
 */
static void offer(sync_ctx *s, const intake_cluster *ic, dcluster **steal)
{
        driver *d = s->d;
        const char *id = ic->id;
        dcluster *dc = cluster_get(d, id);
        if (!dc) {
                log_error("%s: cannot make a reconciler", id);
                return;
        }
        if (dc->active)
                return;
        if (cluster_busy(d, dc)) {
                /* Offered when its pass in flight ends; the latest revision wins. */
                pending_release(dc);
                *steal = dc; /* the spec itself once orphans are known */
                dc->pending_commit = xstrdup_null(s->origin.commit);
                dc->pending_author = xstrdup_null(s->origin.author);
        } else if (reconciler_offer(dc->rec, ic->spec, &s->origin) < 0) {
                log_error("%s: cannot record the desired spec: %s", id, state_last_error());
                return;
        }
        dc->active = true;
        dc->wake = true;
        d->clusters = xgrow(d->clusters, &d->alloc_clusters, d->n_clusters + 1, sizeof(dcluster *));
        d->clusters[d->n_clusters++] = dc;
        /* one-off snapshots its documents declare: requests, taken once */
        if (snapshot_requests_record(d->opts.db, id, ic->spec, now_wall_ms()) < 0)
                log_error("%s: cannot record declared snapshots: %s", id, state_last_error());
}

static const state_cluster *known_find(const state_cluster_list *known, const char *id)
{
        for (size_t i = 0; i < known->n; i++)
                if (streq(known->items[i]->name, id))
                        return known->items[i];
        return NULL;
}

/*
 * The current revision's clusters and the hash of each one's spec (what an
 * upstream must hold to be at the revision); a change held back for an
 * earlier revision is judged anew against this one.
 */
static void rev_remember(driver *d, const intake_result *taken)
{
        rev_forget(d);
        d->rev_ids = xcalloc(taken->n + 1, sizeof(char *));
        d->rev_hashes = xcalloc(taken->n + 1, sizeof(char *));
        for (size_t i = 0; i < taken->n; i++) {
                if (!taken->items[i].spec)
                        continue;
                d->rev_ids[d->n_rev] = xstrdup(taken->items[i].id);
                d->rev_hashes[d->n_rev++] = spec_hash(taken->items[i].spec);
        }
        for (size_t i = 0; i < d->n_all; i++)
                gated_release(d->all[i]);
}

/* Whether the revision changes (or creates) a cluster that has upstreams. */
static bool gate_needed(driver *d, const state_cluster_list *known, const intake_cluster *ic)
{
        if (!ic->spec || !ic->spec->n_depends_on)
                return false;
        const state_cluster *sc = known_find(known, ic->id);
        return !sc || !streq_ptr(sc->desired_hash, rev_hash(d, ic->id));
}

/* offer(), and a changed spec is not converged on until a pass says so. */
static void offer_taken(sync_ctx *s, const state_cluster_list *known, const intake_cluster *ic,
                        dcluster **steal)
{
        const state_cluster *sc = known_find(known, ic->id);
        bool changed = !sc || !streq_ptr(sc->desired_hash, rev_hash(s->d, ic->id));
        offer(s, ic, steal);
        dcluster *dc = cluster_find(s->d, ic->id);
        if (dc && changed)
                dc->settled = false;
}

/*
 * The changes spec.dependsOn gates, upstreams first (tier by tier): each
 * is offered at once when its upstreams are through already, else held
 * back with its verdict recorded; a cluster that exists goes on with its
 * accepted spec meanwhile.
 */
static void gate_taken(sync_ctx *s, intake_result *taken, const bool *gated)
{
        driver *d = s->d;
        _cleanup_free_ int *tiers = order_tiers(taken);
        int top = 0;
        for (size_t i = 0; i < taken->n; i++)
                if (gated[i])
                        top = MAX(top, tiers[i]);
        /* tier -1 last: an upstream refused (a cycle of its own) holds these */
        for (int t = 0; t <= top + 1; t++)
                for (size_t i = 0; i < taken->n; i++) {
                        if (!gated[i] || (t <= top ? tiers[i] != t : tiers[i] >= 0))
                                continue;
                        intake_cluster *ic = &taken->items[i];
                        dcluster *dc = cluster_get(d, ic->id);
                        if (!dc) {
                                log_error("%s: cannot make a reconciler", ic->id);
                                continue;
                        }
                        if (ic->exists)
                                keep_managed(d, ic->id);
                        dc->gated_spec = TAKE_PTR(ic->spec);
                        dc->gated_commit = xstrdup_null(s->origin.commit);
                        dc->gated_author = xstrdup_null(s->origin.author);
                        /* judged at the next step, once its pass in flight is over */
                        if (cluster_busy(d, dc) || gate_check(d, dc, s->diags) != ORDER_RELEASE)
                                s->judged[s->n_judged++] = dc->name;
                }
}

/* The clusters taken in before and gone from the source now: reported, judged. */
static void judge_orphans(sync_ctx *s, const state_cluster_list *known, const intake_input *ii,
                          const char **present, size_t n_present)
{
        driver *d = s->d;
        char **orphans = NULL;
        size_t n = 0;
        if (reconciler_orphans(d->rec, present, n_present, &orphans, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                const state_cluster *sc = NULL;
                for (size_t j = 0; j < known->n && !sc; j++)
                        if (streq(known->items[j]->name, orphans[i]))
                                sc = known->items[j];
                if (sc &&
                    (!d->opts.claim ||
                     d->opts.claim(orphans[i], DRIVER_CLAIM_ORPHAN, d->opts.claim_userdata)) &&
                    report_orphan(d, sc, ii, s->rev, s->diags))
                        s->judged[s->n_judged++] = sc->name;
        }
        for (size_t i = 0; i < n; i++)
                free(orphans[i]);
        free(orphans);
}

int driver_sync(driver *d, diag_list *diags)
{
        _cleanup_(source_revision_freep) source_revision *rev = NULL;
        int k = source_fetch(d->opts.src, &rev);
        if (k == -EPERM && rev)
                return sync_refused(d, rev);
        if (k < 0) {
                set_error(d, "%s", source_last_error(d->opts.src));
                return k;
        }
        bool same = d->have_revision && rev->commit_id[0] && streq(d->commit, rev->commit_id);
        if (same)
                return 0;
        record_revision(d, rev);
        /* Later heads of this ref must descend from it (rollback protection). */
        if (source_mark_applied(d->opts.src, rev) < 0)
                log_warn("%s", source_last_error(d->opts.src));

        /* The intake plan uses too (intake/intake.h), over the specs accepted before. */
        state_cluster_list known = {0};
        k = state_cluster_list_all(d->opts.db, &known);
        if (k < 0) {
                set_error(d, "cannot read the clusters taken in before: %s", state_last_error());
                return k;
        }
        _cleanup_free_ intake_prior *priors = xcalloc(known.n + 1, sizeof(*priors));
        for (size_t i = 0; i < known.n; i++)
                priors[i] = (intake_prior){.id = known.items[i]->name,
                                           .json = known.items[i]->desired_json,
                                           .commit = known.items[i]->desired_commit};
        const target_ops *ops = d->opts.target->ops;
        intake_input ii = {.rev = rev,
                           .mode = INTAKE_APPLY,
                           .caps = ops->caps,
                           .target = ops->name,
                           .policy = d->opts.policy,
                           .kube = d->opts.kube,
                           .priors = priors,
                           .n_priors = known.n,
                           .src = d->opts.src};
        intake_result taken;
        k = spec_intake(&ii, &taken);
        if (k < 0) {
                state_cluster_list_release(&known);
                set_error(d, "cannot take the revision in: %s", strerror(-k));
                return k;
        }
        bool errors = taken.errors;
        if (errors)
                audit_spec_errors(d, &taken, rev);
        diag_move(diags, &taken.diags);

        _cleanup_free_ char *author =
            rev->author.name
                ? xasprintf("%s <%s>", rev->author.name, rev->author.email ? rev->author.email : "")
                : NULL;
        _cleanup_free_ const char **judged = xcalloc(taken.n + known.n + 1, sizeof(char *));
        sync_ctx s = {
            .d = d,
            .rev = rev,
            .diags = diags,
            .origin = {.commit = rev->commit_id[0] ? rev->commit_id : NULL, .author = author},
            .judged = judged};

        /* A cluster with a duplicate definition is not offered at all. */
        for (size_t i = 0; i < d->n_all; i++)
                d->all[i]->active = false;
        d->n_clusters = 0;
        d->n_held = 0;
        _cleanup_free_ dcluster **steal = xcalloc(taken.n + 1, sizeof(dcluster *));
        _cleanup_free_ const char **present = xcalloc(taken.n + 1, sizeof(char *));
        _cleanup_free_ bool *gated = xcalloc(taken.n + 1, sizeof(bool));
        rev_remember(d, &taken);
        for (size_t i = 0; i < taken.n; i++) {
                intake_cluster *ic = &taken.items[i];
                present[i] = ic->id;
                if (ic->verdict == INTAKE_DUPLICATE)
                        continue;
                if (d->opts.claim &&
                    !d->opts.claim(ic->id, DRIVER_CLAIM_DEFINE, d->opts.claim_userdata))
                        continue;
                if (ic->verdict == INTAKE_REFUSED || ic->verdict == INTAKE_HELD)
                        judge_not_offered(&s, ic);
                else if (!(gated[i] = gate_needed(d, &known, ic)))
                        offer_taken(&s, &known, ic, &steal[i]);
        }
        gate_taken(&s, &taken, gated);
        if (!errors)
                judge_orphans(&s, &known, &ii, present, taken.n);
        if (state_verdict_retain(d->opts.db, d->opts.source_name ? d->opts.source_name : "default",
                                 judged, s.n_judged) < 0)
                log_warn("cannot forget old intake verdicts: %s", state_last_error());
        for (size_t i = 0; i < taken.n; i++)
                if (steal[i])
                        steal[i]->pending_spec = TAKE_PTR(taken.items[i].spec);
        intake_result_release(&taken);
        state_cluster_list_release(&known);
        snprintf(d->commit, sizeof(d->commit), "%s", rev->commit_id);
        d->have_revision = true;
        return errors || s.refused ? -EINVAL : 1;
}

size_t driver_held(const driver *d)
{
        return d->n_held;
}

/* Hand a cluster to the workers (main thread). */
static void enqueue(driver *d, dcluster *dc)
{
        pthread_mutex_lock(&d->lock);
        assert(!atomic_load(&dc->busy));
        atomic_store(&dc->busy, true);
        pthread_mutex_lock(&finished_lock);
        in_flight_all++;
        pthread_mutex_unlock(&finished_lock);
        dc->next_job = NULL;
        if (d->queue_tail)
                d->queue_tail->next_job = dc;
        else
                d->queue_head = dc;
        d->queue_tail = dc;
        d->in_flight++;
        pthread_cond_signal(&d->work);
        pthread_mutex_unlock(&d->lock);
}

/* Whether the cluster is due for a pass now. */
static bool due(const dcluster *dc, int64_t now)
{
        return !dc->have_last || dc->wake || now >= dc->due_ms;
}

/* A cluster's last pass in a step's summary; when to look again (ms). */
static int64_t count_outcome(const driver *d, const dcluster *dc, int64_t now, driver_summary *sum)
{
        const pass_result *res = &dc->last;
        switch (res->outcome) {
        case PASS_CONVERGED:
                sum->converged++;
                return dc->wake ? 0 : MAX(dc->due_ms - now, IDLE_BATCH_MS);
        case PASS_FAILED:
        case PASS_BLOCKED:
                sum->failed++;
                return dc->wake ? 0 : MAX(dc->due_ms - now, IDLE_BATCH_MS);
        case PASS_PROGRESSED:
                sum->waiting++;
                return 0;
        default:
                sum->waiting++;
                if (d->n_threads > 0)
                        return dc->due_ms - now;
                return res->poll_ms > 0 ? MIN(res->poll_ms, 1000) : 1000;
        }
}

int driver_step(driver *d, driver_summary *ret)
{
        driver_summary sum = {0};
        int64_t wait_ms = -1;

        /* What the workers finished since the last step. */
        callbacks_deliver(d);
        for (size_t i = 0; i < d->n_all; i++) {
                dcluster *dc = d->all[i];
                bool done = atomic_exchange(&dc->done, false);
                if (done)
                        take_result(d, dc);
                if (done || (!atomic_load(&dc->busy) && (dc->pending_spec || dc->pending_prune)))
                        if (!cluster_busy(d, dc))
                                run_pending(d, dc);
        }
        /* a change released now makes its cluster one of this step's */
        gates_step(d);
        sum.clusters = (int)d->n_clusters;

        int64_t now = mono(d);
        for (size_t i = 0; i < d->n_clusters; i++) {
                dcluster *dc = d->clusters[i];
                if (cluster_busy(d, dc)) {
                        sum.waiting++;
                        sum.busy++;
                        continue;
                }
                if (d->opts.claim &&
                    !d->opts.claim(dc->name, DRIVER_CLAIM_PASS, d->opts.claim_userdata))
                        continue;
                if (due(dc, now)) {
                        /* A pass that starts now sees whatever woke it. */
                        dc->wake = false;
                        if (d->n_threads > 0) {
                                enqueue(d, dc);
                                sum.waiting++;
                                sum.busy++;
                                continue;
                        }
                        run_passes(d, dc, d->opts.db, false);
                        take_result(d, dc);
                }
                int64_t w = 0;
                if (dc->gated_spec) {
                        /* counted by its gate; its passes on the accepted spec go on */
                        driver_summary scratch = {0};
                        gate_count(d, dc, &sum, &w);
                        w = MIN(w, count_outcome(d, dc, now, &scratch));
                } else {
                        w = count_outcome(d, dc, now, &sum);
                }
                w = MAX(w, 0);
                if (wait_ms < 0 || w < wait_ms)
                        wait_ms = w;
        }
        /* held back and not created yet: no passes, a wait of their own */
        for (size_t i = 0; i < d->n_all; i++) {
                dcluster *dc = d->all[i];
                if (!dc->gated_spec || dc->active)
                        continue;
                int64_t w = 0;
                sum.clusters++;
                gate_count(d, dc, &sum, &w);
                if (wait_ms < 0 || w < wait_ms)
                        wait_ms = w;
        }
        callbacks_deliver(d);
        sum.wait_ms = wait_ms < 0 ? 1000 : (int)MIN(wait_ms, (int64_t)INT32_MAX);
        *ret = sum;
        return 0;
}
