/*
 * gitcd run: the daemon. Polls each source at its interval, takes in new
 * revisions, and reconciles continuously, waking at once when a member
 * process changes state. A converged cluster is observed on its own
 * jittered timer (--observe-interval); passes run in the driver's worker
 * threads (--workers), so the loop stays free to take signals, fetches and
 * events while a cluster's pass waits on a member that does not answer.
 * SIGTERM or SIGINT start no new pass, wait a bounded time for the passes in
 * flight and exit cleanly (members keep running).
 *
 * Settings come from the configuration file (--config, or
 * /etc/gitcd/gitcd.yaml when present) with the flags on top. SIGHUP reads
 * the file again between two steps, so no step is cut short: a valid file
 * replaces the settings (sources, targets, credentials files) and every
 * source is polled at once; an invalid one is reported with file:line:col
 * and the settings in force stay as they are. The state path is fixed for
 * the life of the process (the lock is held on it). Passes in flight are not
 * waited for when the target settings stay (runner_reopen retires their
 * drivers: cli/runner.h); they are taken in by runner_retired_reap at each
 * step, and SIGTERM gives them the same grace as the others.
 *
 * Signals reach the loop itself: every thread is started with them blocked
 * (signals_block), so a signal interrupts the loop's wait on target events,
 * and with passes in flight that wait is bounded by BUSY_POLL_MS (a pass
 * that ends is taken in by then).
 *
 * With --listen (or listen: in the file) the daemon serves /metrics,
 * /healthz and /readyz from libmicrohttpd's own thread (ops/http.h) and
 * memory: the loop below reports fetches to the metrics registry and
 * publishes what the state store says (publish_tick); the HTTP thread
 * never opens the store.
 *
 * A push reaches the loop at once: the HTTP thread judges a forge's
 * webhook (/hooks/<forge>, ops/push.h) and puts the source's name in the
 * push inbox, then wakes the loop with SIGUSR1 sent to the loop's own
 * thread (its wait on target events ends on a signal, as for SIGHUP).
 * The loop takes the inbox at the start of each turn: a source with no
 * fetch in flight is fetched at once, one whose fetch is in flight is
 * fetched once more when that ends (fetch_again), so a flood of pushes
 * costs at most two fetches; the inbox itself holds each source once.
 * Polling stays as the safety net. Each push taken is logged and audited
 * (source.push) once, with the number of pushes it stands for. Before the
 * signal the HTTP thread calls target_wake(), which ends the target's
 * wait_event in progress or the next one to start (targets/target.h): so
 * a push that lands between the loop's last look at got_push and the start
 * of its wait is not left waiting, and the hosts target's sleep and the
 * Kubernetes target's watch, which do not end on a signal, end too (the
 * watch within about a second, libcurl's progress callback).
 *
 * A fetch never blocks the loop: it runs in a child process (sources/git.c)
 * that the loop starts and then looks at without waiting; a source whose
 * fetch is in flight is skipped, its clusters (and every other source's)
 * are reconciled from the revision already taken in, and the fetch's
 * outcome (a revision, an error, its time budget spent) is taken in at the
 * first pass after it ends. SIGTERM and SIGHUP kill a fetch in flight (with
 * the source it belongs to). apply and plan fetch synchronously.
 *
 * Scheduled snapshots (spec.snapshots) run in a worker thread beside the
 * loop (snapshots/scheduler.h), one at a time; SIGTERM aborts a running
 * one (recorded as failed).
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ops/bundle.h"
#include "cli/cli.h"
#include "cli/notify-systemd.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "ops/http.h"
#include "ops/metrics.h"
#include "ops/notify.h"
#include "ops/push.h"
#include "state/state.h"
#include "state/snapshots.h"
#include "targets/target.h"
#include "snapshots/scheduler.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* How often a source whose fetch is in flight is looked at: the loop's own cadence. */
#define FETCH_POLL_MS 1000
/* The same for a fetch a push asked for: a push's commit is wanted at once. */
#define PUSH_FETCH_POLL_MS 50
/* The longest the loop sleeps: scheduled snapshots are looked for at least this often. */
#define LOOP_MAX_SLEEP_MS 10000
/* With passes in flight, the loop waits on target events at most this long before it
 * looks for finished passes (and signals). */
#define BUSY_POLL_MS 100
/* SIGTERM: how long passes in flight may take to end before gitcd exits without them. */
#define STOP_GRACE_MS 10000

static volatile sig_atomic_t got_term;
static volatile sig_atomic_t got_hup;
static volatile sig_atomic_t got_push;
/* The loop's thread, which SIGUSR1 is sent to when a push comes in. */
static pthread_t loop_thread;

static void on_signal(int sig)
{
        if (sig == SIGHUP)
                got_hup = 1;
        else if (sig == SIGUSR1)
                got_push = 1;
        else
                got_term = 1;
}

/* The push inbox's wake (on the HTTP thread): end the loop's wait. */
static void wake_loop(void *cls)
{
        (void)cls;
        target_wake(); /* ends a wait_event that does not end on a signal */
        (void)pthread_kill(loop_thread, SIGUSR1);
}

/*
 * Threads started with the daemon's signals blocked (workers, the HTTP
 * server, the snapshot worker, libcurl's resolver), so that a signal
 * always interrupts the loop's own wait and is answered at once.
 */
static void signals_block(sigset_t *old)
{
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &set, old);
}

static void signals_restore(const sigset_t *old)
{
        pthread_sigmask(SIG_SETMASK, old, NULL);
}

static const char usage_text[] =
    "usage: gitcd run --source SRC [options]\n"
    "       gitcd run [--config FILE] [options]\n\n"
    "Run the reconciler as a daemon: poll the sources, take in new revisions and\n"
    "keep every cluster converged. The daemon's documented configuration keeps its\n"
    "state in /var/lib/gitcd/state.db (--state).\n\n";

static const char footer_text[] =
    "\n"
    "The file's policy: (per source, over the top-level one; built in without a\n"
    "file) bounds what each source's commits may do: a cluster it refuses is\n"
    "not taken in (one that exists keeps its accepted spec), a change it holds\n"
    "waits for more trusted signers; `gitcd status` shows both\n"
    "(docs/operating.md, docs/security.md).\n\n"
    "Clusters with spec.snapshots get their scheduled snapshots (cron, UTC),\n"
    "one at a time beside the reconciliation; a schedule missed while gitcd\n"
    "was down is caught up once.\n\n"
    "A push reaches the daemon at once: a source with webhook: {secretFile:\n"
    "FILE} in the file is fetched as soon as its forge posts a push of its\n"
    "branch to /hooks/FORGE, signed with that secret (GitHub's\n"
    "X-Hub-Signature-256, Gitea's X-Gitea-Signature, GitLab's X-Gitlab-Token,\n"
    "or X-Gitcd-Signature: sha256=HMAC for {\"repository\": URL, \"ref\":\n"
    "\"refs/heads/B\"} from a script); pushes during a fetch coalesce into one\n"
    "more, and polling stays as the safety net (docs/operating.md).\n\n"
    "A cluster that loses quorum, fails an upgrade, raises CORRUPT or NOSPACE\n"
    "or whose members disagree gets an incident bundle (gitcd debug bundle),\n"
    "once per episode, taken beside the loop into <state dir>/bundles/ (the\n"
    "newest 10 per cluster kept), audited and notified as debug.bundle with\n"
    "its path (docs/incidents.md).\n\n"
    "A slow or stalled remote never holds up the reconciliation: its fetch\n"
    "runs beside it (within its 120 s budget) and is taken in when it ends.\n\n"
    "Signals: SIGTERM/SIGINT start no new pass, give the passes in flight\n"
    "10 s to end (every step is journaled: the next start resumes one cut\n"
    "short), abort a running snapshot (recorded as failed) and any fetch in\n"
    "flight, wait for an incident bundle being taken, and exit 0; SIGHUP\n"
    "reads the configuration file again at once (an invalid one is reported\n"
    "and the settings in force stay), re-reads the files it names and polls\n"
    "every source at once (a fetch in flight is started again); passes in\n"
    "flight end on the settings they started with\n"
    "(a reload that changes the target's settings waits for them).\n"
    "The daemon holds a lock in the state folder while it runs: another\n"
    "apply or run on the same state exits 1; plan, status and log still read.\n";

/* What the progress callback needs to notify: the queue and the last outcome sent per cluster. */
typedef struct notify_ctx {
        ops_notifier *notifier;
        runner *r;
        char **clusters;
        pass_outcome *sent;
        char **frozen; /* per cluster: frozen since this message was notified, or NULL */
        int *machines; /* per cluster: MachineHealthy as last notified (pass_result.machines) */
        size_t n;
        char **conflicts; /* conflicts notified, while they last */
        size_t n_conflicts;
        char **refusals; /* per source: the refusal notified last, or NULL */
        size_t n_refusals;
        bundler *bundler; /* incident bundles on trouble (cli/bundle.h) */
        ops_config **cfg; /* the settings in force: the target a bundle asks */
} notify_ctx;

/* The index of cluster in nc's tables, added when new. */
static size_t notify_index(notify_ctx *nc, const char *cluster)
{
        size_t i = 0;
        while (i < nc->n && !streq(nc->clusters[i], cluster))
                i++;
        if (i == nc->n) {
                nc->clusters = xrealloc(nc->clusters, (nc->n + 1) * sizeof(char *));
                nc->sent = xrealloc(nc->sent, (nc->n + 1) * sizeof(pass_outcome));
                nc->frozen = xrealloc(nc->frozen, (nc->n + 1) * sizeof(char *));
                nc->machines = xrealloc(nc->machines, (nc->n + 1) * sizeof(int));
                nc->clusters[nc->n] = xstrdup(cluster);
                nc->sent[nc->n] = PASS_PROGRESSED;
                nc->frozen[nc->n] = NULL;
                nc->machines[nc->n] = 0;
                nc->n++;
        }
        return i;
}

/*
 * The members of a cluster were found holding different data (or etcd
 * raised CORRUPT) and it is frozen: cluster.data-inconsistent once, and
 * cluster.data-consistent once a repair lifted the freeze.
 */
static void notify_frozen(notify_ctx *nc, const char *cluster, const pass_result *res)
{
        if (!nc->notifier || !nc->r->db)
                return;
        size_t i = notify_index(nc, cluster);
        /* lifted: told once the cluster converged again (a repair's passes are not frozen) */
        if (!res->frozen == !nc->frozen[i] || (!res->frozen && res->outcome != PASS_CONVERGED))
                return;
        free(nc->frozen[i]);
        nc->frozen[i] = res->frozen ? xstrdup(res->message) : NULL;
        state_cluster *sc = NULL;
        (void)state_cluster_get(nc->r->db, cluster, &sc);
        ops_event ev = {
            .severity = res->frozen ? OPS_SEV_CRITICAL : OPS_SEV_INFO,
            .event = res->frozen ? "cluster.data-inconsistent" : "cluster.data-consistent",
            .cluster = cluster,
            .message = res->frozen ? res->message
                                   : "every member holds the same data again; the freeze is "
                                     "lifted",
            .commit = sc ? sc->desired_commit : NULL,
        };
        (void)ops_notify(nc->notifier, nc->r->db, &ev);
        state_cluster_free(sc);
}

/*
 * A machine holding a member failed its preflight (MachineHealthy False,
 * reconciler/machines.h): cluster.machine-unhealthy once, and
 * cluster.machine-healthy once they all pass again. Only a change after
 * the daemon started is told (a cluster first seen healthy says nothing).
 */
static void notify_machines(notify_ctx *nc, const char *cluster, const pass_result *res)
{
        if (!nc->notifier || !nc->r->db || res->machines == 0)
                return;
        size_t i = notify_index(nc, cluster);
        int was = nc->machines[i];
        nc->machines[i] = res->machines;
        if (was == res->machines || (was == 0 && res->machines > 0))
                return;
        state_cluster *sc = NULL;
        (void)state_cluster_get(nc->r->db, cluster, &sc);
        ops_event ev = {
            .severity = res->machines < 0 ? OPS_SEV_WARNING : OPS_SEV_INFO,
            .event = res->machines < 0 ? "cluster.machine-unhealthy" : "cluster.machine-healthy",
            .cluster = cluster,
            .message = res->machines_message,
            .commit = sc ? sc->desired_commit : NULL,
        };
        (void)ops_notify(nc->notifier, nc->r->db, &ev);
        state_cluster_free(sc);
}

/* A cluster converged, failed or is blocked: one notification per change of outcome. */
static void notify_outcome(notify_ctx *nc, const char *cluster, const pass_result *res)
{
        if (!nc->notifier || !nc->r->db)
                return;
        /* a step held back (reconciler/hold.h) is what a person asked for: audited, not paged */
        if ((res->outcome != PASS_CONVERGED && res->outcome != PASS_FAILED &&
             res->outcome != PASS_BLOCKED) ||
            res->held)
                return;
        size_t i = notify_index(nc, cluster);
        if (nc->sent[i] == res->outcome)
                return;
        nc->sent[i] = res->outcome;
        state_cluster *sc = NULL;
        (void)state_cluster_get(nc->r->db, cluster, &sc);
        ops_event ev = {
            .severity = res->outcome == PASS_CONVERGED ? OPS_SEV_INFO : OPS_SEV_CRITICAL,
            .event = res->outcome == PASS_CONVERGED ? "cluster.converged"
                     : res->outcome == PASS_FAILED  ? "cluster.failed"
                                                    : "cluster.blocked",
            .cluster = cluster,
            .message = res->message,
            .commit = sc ? sc->desired_commit : NULL,
        };
        (void)ops_notify(nc->notifier, nc->r->db, &ev);
        const runner_source *rs = runner_source_for(nc->r, cluster);
        if (rs && sc && sc->desired_commit)
                (void)ops_notify_commit_status(
                    nc->notifier, nc->r->db, rs->conf->name, sc->desired_commit, cluster,
                    res->outcome == PASS_CONVERGED ? OPS_COMMIT_APPLIED : OPS_COMMIT_FAILED,
                    res->outcome == PASS_CONVERGED ? "applied" : res->message);
        state_cluster_free(sc);
}

static void notify_ctx_release(notify_ctx *nc)
{
        for (size_t i = 0; i < nc->n; i++) {
                free(nc->clusters[i]);
                free(nc->frozen[i]);
        }
        free(nc->clusters);
        free(nc->sent);
        free(nc->frozen);
        free(nc->machines);
        for (size_t i = 0; i < nc->n_conflicts; i++)
                free(nc->conflicts[i]);
        free(nc->conflicts);
        for (size_t i = 0; i < nc->n_refusals; i++)
                free(nc->refusals[i]);
        free(nc->refusals);
}

/* The sources change on reload: what was notified per source starts over. */
static void notify_forget_sources(notify_ctx *nc)
{
        for (size_t i = 0; i < nc->n_refusals; i++)
                free(nc->refusals[i]);
        free(nc->refusals);
        nc->refusals = NULL;
        nc->n_refusals = 0;
}

static bool strv_has(char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] && streq(v[i], s))
                        return true;
        return false;
}

/* New conflicts between sources are notified once each (again if they come back later). */
static void notify_conflicts(notify_ctx *nc)
{
        runner *r = nc->r;
        for (size_t i = 0; i < nc->n_conflicts;) {
                if (strv_has(r->conflicts, r->n_conflicts, nc->conflicts[i])) {
                        i++;
                        continue;
                }
                free(nc->conflicts[i]);
                nc->conflicts[i] = nc->conflicts[--nc->n_conflicts];
        }
        for (size_t i = 0; i < r->n_conflicts; i++) {
                if (strv_has(nc->conflicts, nc->n_conflicts, r->conflicts[i]))
                        continue;
                nc->conflicts = xrealloc(nc->conflicts, (nc->n_conflicts + 1) * sizeof(char *));
                nc->conflicts[nc->n_conflicts++] = xstrdup(r->conflicts[i]);
                ops_event ev = {.severity = OPS_SEV_WARNING,
                                .event = "cluster.conflict",
                                .cluster = r->conflicts[i],
                                .message = "defined by two sources; refused until only one "
                                           "defines it"};
                (void)ops_notify(nc->notifier, r->db, &ev);
        }
}

/* A refused revision (signature, rollback, tag name) is notified once per refusal. */
static void notify_refusal(notify_ctx *nc, size_t idx, int k, const char *why)
{
        if (nc->n_refusals < nc->r->n_sources) {
                nc->refusals = xrealloc(nc->refusals, nc->r->n_sources * sizeof(char *));
                for (size_t i = nc->n_refusals; i < nc->r->n_sources; i++)
                        nc->refusals[i] = NULL;
                nc->n_refusals = nc->r->n_sources;
        }
        if (k != -EPERM) {
                if (k >= 0) {
                        free(nc->refusals[idx]);
                        nc->refusals[idx] = NULL;
                }
                return;
        }
        if (isempty(why) || streq_ptr(nc->refusals[idx], why))
                return;
        free(nc->refusals[idx]);
        nc->refusals[idx] = xstrdup(why);
        ops_event ev = {.severity = OPS_SEV_WARNING, .event = "revision.rejected", .message = why};
        (void)ops_notify(nc->notifier, nc->r->db, &ev);
}

/*
 * Trouble a cluster did not show at its last bundle (quorum lost, a failed
 * upgrade, CORRUPT or NOSPACE, members that disagree): an incident bundle,
 * taken by the bundler's worker thread with a target of its own, so the
 * loop never waits on it.
 */
static void bundle_check(notify_ctx *nc, const char *cluster)
{
        if (!nc->bundler || !nc->r->db || !nc->cfg)
                return;
        char *trouble = bundler_due(nc->bundler, nc->r->db, cluster);
        if (!trouble)
                return;
        target *t = NULL;
        runner_flags none = {0};
        if (runner_open_cluster_target(nc->r->db, cluster, &none, *nc->cfg, nc->r->state_dir,
                                       "gitcd run", &t) < 0)
                t = NULL; /* a bundle without the target's logs, said in it */
        bundler_start(nc->bundler, cluster, trouble, t, nc->notifier);
}

static void progress(const char *cluster, const pass_result *res, void *userdata)
{
        enum log_level l =
            res->outcome == PASS_FAILED || (res->outcome == PASS_BLOCKED && !res->held) ? LOG_ERROR
                                                                                        : LOG_INFO;
        log_msg(l, "%s: %s: %s", cluster, pass_outcome_name(res->outcome), res->message);
        notify_frozen(userdata, cluster, res);
        notify_machines(userdata, cluster, res);
        notify_outcome(userdata, cluster, res);
        bundle_check(userdata, cluster);
}

static void log_diags(diag_list *diags)
{
        diag_sort(diags);
        for (size_t i = 0; i < diags->n; i++) {
                _cleanup_free_ char *line = diag_format(&diags->items[i]);
                log_msg(diags->items[i].severity == DIAG_ERROR ? LOG_ERROR : LOG_WARN, "%s", line);
        }
}

static void apply_log_level(const ops_config *c)
{
        enum log_level l;
        if (c->log_level && !log_level_is_explicit() &&
            log_level_from_string(c->log_level, &l) == 0)
                log_set_level(l);
}

/*
 * Poll source i without blocking: start its fetch, or, once the fetch has
 * ended, take in what it brought. While it runs, the source is looked at
 * again every FETCH_POLL_MS and its clusters keep the revision in force.
 */
static void sync_source(runner *r, size_t i, notify_ctx *nc)
{
        runner_source *rs = &r->sources[i];
        diag_list diags = DIAG_LIST_INIT;
        if (rs->fetch_started_ms == 0)
                rs->fetch_started_ms = now_mono_ms();
        /* A start is a no-op while a fetch runs; -EAGAIN: the mirror is busy, not started. */
        if (source_fetch_start(rs->src) == -EAGAIN || source_fetch_poll(rs->src) == -EAGAIN) {
                rs->next_sync_ms =
                    now_mono_ms() + (rs->pushed ? PUSH_FETCH_POLL_MS : FETCH_POLL_MS);
                return;
        }
        int64_t t0 = rs->fetch_started_ms;
        rs->fetch_started_ms = 0;
        int k = runner_sync(r, i, &diags);
        ops_metrics_fetch(rs->conf->name, k >= 0 || k == -EINVAL || k == -EPERM,
                          now_mono_ms() - t0);
        if (nc->notifier) {
                notify_refusal(nc, i, k, driver_last_error(rs->drv));
                notify_conflicts(nc);
        }
        log_diags(&diags);
        diag_list_release(&diags);
        if (k < 0 && k != -EINVAL && k != -EPERM && r->n_sources == 1)
                log_error("source: %s (retrying in %llds)", driver_last_error(rs->drv),
                          (long long)(rs->interval_ms / 1000));
        else if (k < 0 && k != -EINVAL && k != -EPERM)
                log_error("source %s: %s (retrying in %llds)", rs->conf->name,
                          driver_last_error(rs->drv), (long long)(rs->interval_ms / 1000));
        rs->next_sync_ms = now_mono_ms() + rs->interval_ms;
        /* A push during this fetch may not be in it: fetch once more, at once. */
        rs->pushed = rs->fetch_again;
        if (rs->fetch_again)
                rs->next_sync_ms = 0;
        rs->fetch_again = false;
}

/* A push of source rs taken from the inbox: logged and audited once. */
static void push_record(runner *r, const runner_source *rs, const push_item *it, bool again)
{
        _cleanup_free_ char *reason =
            xasprintf("%u %s push(es) of %s to source %s; %s", it->count,
                      push_forge_name(it->forge), it->ref ? it->ref : "a ref", rs->conf->name,
                      again ? "fetching again once the fetch in flight ends" : "fetching now");
        log_info("push: %s%s%s", reason, it->commit ? ", head " : "", it->commit ? it->commit : "");
        json_t *after =
            json_pack("{s:s, s:s, s:s?, s:I}", "source", rs->conf->name, "forge",
                      push_forge_name(it->forge), "ref", it->ref, "pushes", (json_int_t)it->count);
        _cleanup_free_ char *after_json = after ? json_dumps(after, JSON_COMPACT) : NULL;
        json_decref(after);
        state_audit_event ev = {.time_ms = now_wall_ms(),
                                .commit = it->commit,
                                .action = "source.push",
                                .reason = reason,
                                .after_json = after_json,
                                .outcome = again ? "fetch-again" : "fetch"};
        if (r->db)
                (void)state_audit_append(r->db, &ev, NULL);
}

/*
 * The pushes the HTTP thread took in since the last turn: each source
 * named is fetched at once, or again right after the fetch in flight.
 */
static void take_pushes(runner *r, push_inbox *inbox)
{
        got_push = 0;
        if (!inbox)
                return;
        push_item *items = NULL;
        size_t n = 0;
        push_inbox_take(inbox, &items, &n);
        for (size_t j = 0; j < n; j++) {
                runner_source *rs = NULL;
                for (size_t i = 0; i < r->n_sources && !rs; i++)
                        if (streq(r->sources[i].conf->name, items[j].source))
                                rs = &r->sources[i];
                if (!rs)
                        continue; /* gone with a reload */
                bool again = rs->fetch_started_ms != 0;
                if (again) {
                        rs->fetch_again = true;
                        rs->next_sync_ms =
                            MIN(rs->next_sync_ms, now_mono_ms() + PUSH_FETCH_POLL_MS);
                } else {
                        rs->pushed = true;
                        rs->next_sync_ms = 0;
                }
                push_record(r, rs, &items[j], again);
        }
        push_items_free(items, n);
}

/* What only the daemon defaults to: its worker threads. */
static void run_defaults(ops_config *c)
{
        if (c->workers <= 0)
                c->workers = DRIVER_WORKERS_DEFAULT;
}

/* Member events of target t: observe the clusters they name (every cluster when it cannot tell). */
static void wake_clusters(runner *r, target *t)
{
        char **names = NULL;
        size_t n = 0;
        bool known = t->ops->take_events && t->ops->take_events(t, &names, &n) >= 0;
        for (size_t i = 0; i < r->n_sources; i++) {
                if (r->sources[i].target != t)
                        continue;
                if (!known)
                        driver_wake(r->sources[i].drv, NULL);
                for (size_t j = 0; j < n; j++)
                        driver_wake(r->sources[i].drv, names[j]);
        }
        for (size_t j = 0; j < n; j++)
                free(names[j]);
        free(names);
}

/*
 * A source's webhook: needs the endpoints that receive it: refused without
 * --listen or listen:, which would leave it accepted and never acting.
 */
static int check_webhooks(const ops_config *c, diag_list *diags)
{
        int k = 0;
        for (size_t i = 0; !c->listen && i < c->n_sources; i++)
                if (c->sources[i].webhook_secret_file) {
                        diag_add(diags, DIAG_ERROR, c->file ? c->file : "gitcd run", 0, 0,
                                 "source %s has a webhook, but nothing receives pushes: give "
                                 "--listen ADDR or listen: in the file",
                                 c->sources[i].name);
                        k = -EINVAL;
                }
        return k;
}

/* SIGHUP: the new settings, or NULL when the file is invalid (the old ones stay). */
static ops_config *reload(const runner_flags *f, const char *config, int64_t interval_ms,
                          const ops_config *old)
{
        diag_list diags = DIAG_LIST_INIT;
        ops_config *c = NULL;
        int k = runner_settings(f, config, interval_ms, &c, &diags);
        if (k >= 0)
                k = check_webhooks(c, &diags);
        if (k >= 0)
                run_defaults(c);
        if (k < 0) {
                ops_config_free(c);
                log_diags(&diags);
                diag_list_release(&diags);
                log_error("SIGHUP: %s is invalid; the configuration in force stays unchanged",
                          config ? config : "the command line");
                return NULL;
        }
        diag_list_release(&diags);
        if (!streq_ptr(c->state, old->state))
                log_warn("SIGHUP: the state path cannot change while running; restart gitcd "
                         "to use the new one");
        log_info("SIGHUP: %s read; %zu source(s); polling every source now",
                 config ? config : "configuration", c->n_sources);
        return c;
}

static int start_http(const ops_config *c, push_inbox *inbox, ops_http **ret)
{
        *ret = NULL;
        if (!c->listen)
                return 0;
        ops_http_opts o = {.listen = c->listen,
                           .tls_cert_file = c->tls_cert_file,
                           .tls_key_file = c->tls_key_file,
                           .token_file = c->token_file,
                           .sources = c->sources,
                           .n_sources = c->n_sources,
                           .inbox = inbox};
        char *err = NULL;
        int k = ops_http_start(&o, ret, &err);
        if (k < 0) {
                log_error("%s", err ? err : strerror(-k));
                free(err);
                return k;
        }
        size_t hooks = 0;
        for (size_t i = 0; i < c->n_sources; i++)
                hooks += c->sources[i].webhook_secret_file != NULL;
        log_info("serving /metrics, /healthz and /readyz on %s://%s (port %d)%s",
                 c->tls_cert_file ? "https" : "http", c->listen, ops_http_port(*ret),
                 c->token_file ? " with a bearer token" : "");
        if (hooks)
                log_info("push webhooks: POST /hooks/{github,gitlab,gitea,generic} for %zu "
                         "source(s)",
                         hooks);
        return 0;
}

/*
 * A restore drill ended: one that failed or could not run is notified
 * (snapshot.verify_failed, critical; snapshot.unverified, warning), and the
 * first proof after either (snapshot.verified, info).
 */
static void notify_drill(state_db *db, const char *cluster, const state_snapshot_drill *d,
                         void *userdata)
{
        notify_ctx *nc = userdata;
        if (!nc->notifier)
                return;
        bool ok = streq(d->result, "verified");
        if (ok) {
                /* the drill before this one, of any snapshot of the cluster */
                state_snapshot_drill_list l = {0};
                bool after_trouble = false;
                if (state_snapshot_drill_list_for(db, cluster, 2, &l) == 0 && l.n == 2)
                        after_trouble = !streq_ptr(l.items[1]->result, "verified");
                state_snapshot_drill_list_release(&l);
                if (!after_trouble)
                        return;
        }
        _cleanup_free_ char *message =
            xasprintf("restore drill of snapshot %lld: %s", (long long)d->snapshot_id,
                      d->message ? d->message : d->result);
        bool failed = streq(d->result, "verify-failed");
        ops_event ev = {.severity = ok       ? OPS_SEV_INFO
                                    : failed ? OPS_SEV_CRITICAL
                                             : OPS_SEV_WARNING,
                        .event = ok       ? "snapshot.verified"
                                 : failed ? "snapshot.verify_failed"
                                          : "snapshot.unverified",
                        .cluster = cluster,
                        .message = message};
        (void)ops_notify(nc->notifier, db, &ev);
}

/*
 * What /metrics and /readyz show is published from the loop's own
 * connection to the state store (ops_metrics_publish), never read by the
 * HTTP thread: at most every PUBLISH_MS, and at once when passes ended
 * since the last publication (the loop then wakes for it); whether the
 * store takes a write transaction is tried every WRITABLE_CHECK_MS.
 */
#define PUBLISH_MS        1000
#define WRITABLE_CHECK_MS 5000

typedef struct publisher {
        int64_t last_ms, last_check_ms;
        bool due; /* passes ended (or ran) since the last publication */
} publisher;

/* Publish when due; *w: how long the loop may sleep (shortened when a publication waits). */
static void publish_tick(publisher *p, state_db *db, int busy, int64_t *w)
{
        int64_t now = now_mono_ms();
        p->due = p->due || busy > 0;
        if (p->last_ms && now - p->last_ms < PUBLISH_MS) {
                if (p->due)
                        *w = MIN(*w, PUBLISH_MS - (now - p->last_ms));
                return;
        }
        if (p->last_ms && !p->due && now - p->last_ms < LOOP_MAX_SLEEP_MS)
                return;
        bool check = !p->last_check_ms || now - p->last_check_ms >= WRITABLE_CHECK_MS;
        if (ops_metrics_publish(db, check) < 0)
                log_debug("metrics: the state store could not be read: %s", state_last_error());
        p->last_ms = now;
        if (check)
                p->last_check_ms = now;
        p->due = busy > 0;
}

/* Scheduled snapshots of the clusters of the current revision (in a worker thread). */
static void snapshot_tick(snapshot_scheduler *snap, runner_source *rs)
{
        size_t n = driver_cluster_count(rs->drv);
        const char **names = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                names[i] = driver_cluster_name(rs->drv, i);
        (void)snapshot_scheduler_tick(snap, rs->owner->db, rs->target, names, n);
        free(names);
}

/*
 * How often, at most, the snapshot scheduler looks at the clusters. A turn
 * of the loop comes with every pass that ends, and the scheduler goes
 * through every cluster each time it looks, so looking at every turn would
 * grow with the square of the clusters; schedules and requests are kept to
 * within this.
 */
#define SNAPSHOT_TICK_MS 1000

/* The daemon's state for the life of the process. */
typedef struct run_ctx {
        runner_flags f;
        int64_t interval_ms; /* --interval; 0: unset */
        const char *config;  /* the configuration file, or NULL */
        ops_config *cfg;     /* the settings in force */
        runner r;
        notify_ctx nc;
        ops_http *http;
        push_inbox *inbox; /* pushes from the HTTP thread to the loop */
        publisher pub;
        snapshot_scheduler *snap;
        int64_t next_snap_tick_ms; /* the scheduler's next look (snapshot_ticks) */
} run_ctx;

/* --workers N: a number from 1 to OPS_WORKERS_MAX into *(int *)dest; -EINVAL. */
static int parse_workers(const char *arg, void *dest)
{
        char *end = NULL;
        long n = strtol(arg, &end, 10);
        if (end == arg || *end || n < 1 || n > OPS_WORKERS_MAX)
                return -EINVAL;
        *(int *)dest = (int)n;
        return 0;
}

_Static_assert(OPS_WORKERS_MAX == 256, "the message of --workers says 256");

/* The command line into d: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, run_ctx *d)
{
        runner_flags *f = &d->f;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_STRING,
             .name = "config",
             .arg = "FILE",
             .dest = &d->config,
             .help = "the daemon's configuration file (default:\n" OPS_CONFIG_DEFAULT_PATH
                     " when present); flags\n"
                     "override it, --source replaces its sources\n"
                     "(docs/operating.md)"},
            {.kind = CLI_OPT_DURATION,
             .name = "interval",
             .arg = "D",
             .dest = &d->interval_ms,
             .min = 1000,
             .help = "how often to poll a source (default 30s)",
             .bad = "--interval takes a duration of at least 1s"},
            {.kind = CLI_OPT_DURATION,
             .name = "observe-interval",
             .arg = "D",
             .dest = &f->observe_interval_ms,
             .min = 1000,
             .help = "how often a converged cluster is observed when\n"
                     "nothing wakes it (default 30s, each cluster\n"
                     "jittered by +-25%; member events, a new\n"
                     "revision and due renewals wake it at once)",
             .bad = "--observe-interval takes a duration of at least 1s"},
            {.kind = CLI_OPT_CUSTOM,
             .name = "workers",
             .arg = "N",
             .dest = &f->workers,
             .parse = parse_workers,
             .help = "clusters reconciled at once (default 8): a\n"
                     "slow cluster never holds up the others",
             .bad = "--workers takes a number from 1 to 256"},
            {.kind = CLI_OPT_STRING,
             .name = "listen",
             .arg = "ADDR",
             .dest = &f->listen,
             .help = "serve /metrics, /healthz and /readyz on ADDR\n"
                     "(host:port, [v6]:port or :port), and the push\n"
                     "webhooks POST /hooks/github, /hooks/gitlab,\n"
                     "/hooks/gitea, /hooks/generic for the sources\n"
                     "with webhook: in the file"},
            {.kind = CLI_OPT_STRING,
             .name = "listen-token-file",
             .arg = "FILE",
             .dest = &f->listen_token_file,
             .help = "require \"Authorization: Bearer <token>\"\n"
                     "(not on /hooks/: their signature is their\n"
                     "authentication)"},
            {.kind = CLI_OPT_STRING,
             .name = "tls-cert",
             .arg = "FILE",
             .dest = &f->listen_tls_cert,
             .help = "serve https with this certificate and"},
            {.kind = CLI_OPT_STRING,
             .name = "tls-key",
             .arg = "FILE",
             .dest = &f->listen_tls_key,
             .help = "this key (PEM)"},
            {.kind = CLI_OPT_HELP, .help = "show this help"},
            CLI_RUNNER_ROWS(f),
        };
        const cli_command cmd = {.prog = "gitcd run",
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 25};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        d->config = cli_config_path(d->config, OPS_CONFIG_DEFAULT_PATH);
        if (optind < argc || (!f->src.url_or_path && !d->config)) {
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        return -1;
}

/* The settings (the file with the flags on top) into d->cfg; -errno with why printed. */
static int load_settings(run_ctx *d)
{
        diag_list diags = DIAG_LIST_INIT;
        int k = runner_settings(&d->f, d->config, d->interval_ms, &d->cfg, &diags);
        if (k >= 0)
                k = check_webhooks(d->cfg, &diags);
        if (k >= 0)
                run_defaults(d->cfg);
        diag_sort(&diags);
        diag_print(&diags, stderr);
        diag_list_release(&diags);
        if (k < 0)
                return k;
        apply_log_level(d->cfg);
        return 0;
}

/* Signal handlers, the runner, notifications, the HTTP endpoints and the snapshot scheduler. */
static int start(run_ctx *d)
{
        struct sigaction sa = {0};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        /* A push's wake ends the loop's wait (poll and nanosleep are never restarted)
         * and restarts every other call it lands in. */
        struct sigaction push_sa = sa;
        push_sa.sa_flags = SA_RESTART;
        sigaction(SIGUSR1, &push_sa, NULL);
        loop_thread = pthread_self();
        d->inbox = push_inbox_new(wake_loop, NULL);

        runner *r = &d->r;
        sigset_t oldmask;
        signals_block(&oldmask);
        if (runner_open_config(d->cfg, progress, &d->nc, r) < 0)
                return EXIT_FAIL;
        d->nc.bundler = bundler_new(r->state_path, r->state_dir, cli_status_cluster_json);
        if (ops_config_has_notifications(d->cfg) &&
            ops_notifier_start(r->state_path, d->cfg, &d->nc.notifier) < 0)
                log_error("notifications: cannot start the sender; none will be sent");
        if (start_http(d->cfg, d->inbox, &d->http) < 0) {
                bundler_free(d->nc.bundler);
                runner_close(r);
                return EXIT_FAIL;
        }
        int64_t no_wait = LOOP_MAX_SLEEP_MS;
        if (d->http)
                publish_tick(&d->pub, r->db, 0, &no_wait);
        if (r->n_sources == 1)
                log_info("gitcd %s running: source %s, state %s, polling every %llds",
                         GITCD_VERSION, source_display_url(r->src), r->state_path,
                         (long long)(r->sources[0].interval_ms / 1000));
        else
                log_info("gitcd %s running: %zu sources (%s), state %s", GITCD_VERSION,
                         r->n_sources, d->config, r->state_path);

        snapshot_scheduler_opts so = {.state_path = r->state_path,
                                      .state_dir = r->state_dir,
                                      .etcd_dir = d->cfg->etcd_dir,
                                      .drilled = notify_drill,
                                      .userdata = &d->nc};
        if (snapshot_scheduler_new(&so, r->db, &d->snap) < 0) {
                bundler_free(d->nc.bundler);
                runner_close(r);
                ops_http_stop(d->http);
                ops_notifier_stop(d->nc.notifier);
                notify_ctx_release(&d->nc);
                return EXIT_FAIL;
        }
        signals_restore(&oldmask);
        return EXIT_OK;
}

/*
 * SIGHUP: read the configuration again and put it in force, or keep the
 * settings in force (reopened) when it is invalid or cannot be opened.
 * -errno when the runner cannot be reopened at all.
 */
static int reload_now(run_ctx *d)
{
        sigset_t oldmask;
        signals_block(&oldmask);
        int k = 0;
        ops_config *fresh = reload(&d->f, d->config, d->interval_ms, d->cfg);
        if (fresh) {
                apply_log_level(fresh);
                notify_forget_sources(&d->nc);
                k = runner_reopen(fresh, progress, &d->nc, &d->r);
                if (k < 0) {
                        /* Valid, but it cannot be opened: the old settings stay. */
                        log_error("SIGHUP: %s cannot be put in force; the "
                                  "configuration in force stays unchanged",
                                  d->config ? d->config : "the configuration");
                        ops_config_free(fresh);
                        fresh = NULL;
                }
        }
        if (fresh) {
                if (!d->nc.notifier && ops_config_has_notifications(fresh) &&
                    ops_notifier_start(d->r.state_path, fresh, &d->nc.notifier) < 0)
                        log_error("notifications: cannot start the sender");
                ops_notifier_configure(d->nc.notifier, fresh);
                /* The endpoints restart with the new address, TLS and token. */
                ops_http_stop(d->http);
                d->http = NULL;
                if (k >= 0 && start_http(fresh, d->inbox, &d->http) < 0)
                        log_error("SIGHUP: the HTTP endpoints stay down until "
                                  "the next reload");
                ops_config_free(d->cfg);
                d->cfg = fresh;
        } else {
                k = runner_reopen(d->cfg, progress, &d->nc, &d->r);
        }
        signals_restore(&oldmask);
        return k;
}

/* The targets' events, for at most w ms (BUSY_POLL_MS with passes in flight). */
static void wait_targets(runner *r, int busy, int64_t w)
{
        if (busy) {
                /* Waiting on a target's events blocks none of the passes in flight
                 * (targets/locked.h): wait on them, briefly, and then take in the
                 * passes that ended. */
                if (w > 0 && r->target->ops->wait_event(r->target, (int)MIN(w, BUSY_POLL_MS)) > 0)
                        wake_clusters(r, r->target);
        } else if (w > 0) {
                /* Several targets: wait on the first, look at the others at once. */
                if (r->target->ops->wait_event(r->target, (int)w) > 0)
                        wake_clusters(r, r->target);
        } else {
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(r->targets); i++)
                if (r->targets[i] && r->targets[i] != r->target &&
                    r->targets[i]->ops->wait_event(r->targets[i], 0) > 0)
                        wake_clusters(r, r->targets[i]);
}

/* One turn of the loop: fetches, a step of every source's driver, snapshots, publishing, a wait. */
static void turn(run_ctx *d)
{
        runner *r = &d->r;
        take_pushes(r, d->inbox);
        for (size_t i = 0; i < r->n_sources; i++)
                if (now_mono_ms() >= r->sources[i].next_sync_ms && !got_term)
                        sync_source(r, i, &d->nc);
        int64_t w = LOOP_MAX_SLEEP_MS;
        /* Passes a reload retired: their clusters are passed again once they end. */
        int busy = runner_retired_reap(r);
        for (size_t i = 0; i < r->n_sources && !got_term; i++) {
                driver_summary sum = {0};
                (void)driver_step(r->sources[i].drv, &sum);
                busy += sum.busy;
                if (sum.clusters)
                        w = MIN(w, (int64_t)sum.wait_ms);
                w = MIN(w, r->sources[i].next_sync_ms - now_mono_ms());
        }
        service_notify_ready();
        if (got_term)
                return;
        int64_t now = now_mono_ms();
        if (now >= d->next_snap_tick_ms) {
                for (size_t i = 0; i < r->n_sources; i++)
                        snapshot_tick(d->snap, &r->sources[i]);
                d->next_snap_tick_ms = now + SNAPSHOT_TICK_MS;
        }
        w = MIN(w, d->next_snap_tick_ms - now);
        if (d->http)
                publish_tick(&d->pub, r->db, busy, &w);
        if (got_push)
                return; /* a push came in meanwhile: take it before any wait */
        wait_targets(r, busy, w);
}

/* SIGTERM: no new pass, one grace for the passes in flight, then everything closed. */
static int stop(run_ctx *d)
{
        runner *r = &d->r;
        /* No source hands out a pass any more; then one grace for all of them. */
        for (size_t i = 0; i < r->n_sources; i++)
                (void)driver_quiesce(r->sources[i].drv, 0);
        int64_t grace_end = now_mono_ms() + STOP_GRACE_MS;
        int left = runner_retired_quiesce(r, STOP_GRACE_MS);
        for (size_t i = 0; i < r->n_sources; i++)
                left += driver_quiesce(r->sources[i].drv, (int)MAX(grace_end - now_mono_ms(), 0));
        if (left > 0) {
                /* Every step is journaled before it acts: the next start resumes it. */
                log_warn("stopping with %d pass(es) still in flight after %ds; members keep "
                         "running and the next start resumes them",
                         left, STOP_GRACE_MS / 1000);
                service_notify_stopping();
                fflush(NULL);
                _exit(EXIT_OK);
        }
        service_notify_stopping();
        log_info("stopping; members keep running");
        ops_http_stop(d->http);
        snapshot_scheduler_free(d->snap);
        /* Closing the runner delivers the passes' last progress callbacks, which look at
         * the bundler and the notification context: those go after it. */
        runner_close(r);
        bundler_free(d->nc.bundler); /* a bundle being taken ends within its steps' deadlines */
        d->nc.bundler = NULL;
        ops_notifier_stop(d->nc.notifier);
        notify_ctx_release(&d->nc);
        return EXIT_OK;
}

/*
 * The daemon holds descriptors in proportion to its clusters: a kept etcd
 * connection per member (with libcurl's wake-up pair beside it) and a pidfd
 * per local member. Its soft limit is raised to the hard one, as the packaged
 * unit's LimitNOFILE does, so a daemon started from a shell with the usual
 * 1,024 does not run out at a few hundred clusters; nothing in gitcd or the
 * libraries it uses waits with select(), which a higher number would break.
 */
static void raise_descriptor_limit(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rlim_t was = rl.rlim_cur;
        /* an unlimited hard limit: the kernel's usual nr_open */
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
        if (rl.rlim_cur <= was)
                return;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warn("cannot raise the limit on open files from %llu: %s",
                         (unsigned long long)was, strerror(errno));
}

/* The loop until SIGTERM; SIGHUP reloads between two turns. */
static int run(run_ctx *d)
{
        raise_descriptor_limit();
        int status = start(d);
        if (status != EXIT_OK)
                return status;
        while (!got_term) {
                service_notify_watchdog();
                if (got_hup) {
                        got_hup = 0;
                        if (reload_now(d) < 0) {
                                bundler_free(d->nc.bundler);
                                snapshot_scheduler_free(d->snap);
                                runner_close(&d->r);
                                ops_http_stop(d->http);
                                ops_notifier_stop(d->nc.notifier);
                                notify_ctx_release(&d->nc);
                                return EXIT_FAIL;
                        }
                }
                turn(d);
        }
        return stop(d);
}

int cmd_run(int argc, char **argv)
{
        run_ctx d = {0};
        d.nc.r = &d.r;
        d.nc.cfg = &d.cfg;
        int status = parse_args(argc, argv, &d);
        if (status < 0)
                status = load_settings(&d) < 0 ? EXIT_FAIL : run(&d);
        push_inbox_free(d.inbox); /* the HTTP server that puts in it is stopped by now */
        ops_config_free(d.cfg);
        return status;
}
