/*
 * The metrics registry and the scrape (see metrics.h).
 *
 * Decision: a request never touches the state store and never waits on a
 * member. What /metrics and /readyz show lives in memory, in three parts,
 * each behind the one mutex:
 * - the registry of events the process counts as they happen: one call
 *   per pass (through driver_opts.pass_done) and one per fetch;
 * - the published facts: the daemon's loop reads the state store with its
 *   own connection (ops_metrics_publish, at most every second, and at once
 *   on the first change after a quiet while) and keeps the rendered series
 *   of the clusters, their conditions, members, certificates, snapshots and
 *   applied commits, the audit failures, whether the store took a write
 *   transaction, and which members to ask;
 * - the members' own answers (database sizes, the leader they follow),
 *   asked by the collector thread (ops_metrics_collector_start), every 10
 *   seconds and as soon as the published members change. Members reached
 *   over https:// are asked with gitcd's client identity, which belongs to
 *   the target (the main loop's object, never touched here): the daemon
 *   resolves it after each pass and publishes the three file paths per
 *   cluster (ops_metrics_set_client_tls); until it has, such members are
 *   not asked and, when no member can be asked, the leader comes from the
 *   state store.
 * A scrape renders those three from memory, so a slow member or a busy
 * store never holds up /healthz (one thread serves every request), and a
 * storm of scrapes never takes the store's write lock. Snapshot facts come
 * from the snapshot and drill records (state/snapshots.h), their one owner.
 *
 * Counters live as long as the process; "leader changes" counts the
 * changes of the recorded leader seen from one publication to the next.
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec.h"
#include "etcd/client.h"
#include "ops/metrics.h"
#include "reconciler/hold.h"
#include "state/holds.h"
#include "state/consistency.h"
#include "state/snapshots.h"
#include "state/state.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const double pass_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,  5,     10,   30,  60};
static const double fetch_buckets[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
#define MAX_BUCKETS 16

typedef struct series {
        char *name;   /* metric name */
        char *labels; /* rendered label set without braces */
        double value; /* counter or gauge */
        /* histograms */
        const double *bounds;
        size_t n_bounds;
        uint64_t buckets[MAX_BUCKETS];
        uint64_t count;
        double sum;
} series;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static series *all;
static size_t n_all;
/* "name\nlabels" → its index in all: a pass of each cluster finds its series, which a walk
 * through every cluster's would make grow with the square of the clusters */
static strmap index_all;
static char **sources;
static bool *sources_read;
static size_t n_sources;
static char **leaders; /* "cluster\tleader" last seen */
static size_t n_leaders;
static strmap index_leaders; /* cluster → its index in leaders */

/* gitcd's client identity per cluster, published by the main loop. */
typedef struct client_tls {
        char *cluster;
        char *ca, *cert, *key;
} client_tls;
static client_tls *tls_ids;
static size_t n_tls_ids;

static void escape_label(strbuf *sb, const char *v)
{
        for (const char *p = v ? v : ""; *p; p++) {
                if (*p == '\\' || *p == '"')
                        sb_appendc(sb, '\\');
                if (*p == '\n') {
                        sb_append(sb, "\\n");
                        continue;
                }
                sb_appendc(sb, *p);
        }
}

/* namespace="ns",cluster="name" from "ns/name". */
static void cluster_labels(strbuf *sb, const char *cluster)
{
        const char *slash = strchr(cluster, '/');
        _cleanup_free_ char *ns = slash ? xstrndup(cluster, (size_t)(slash - cluster)) : NULL;
        sb_append(sb, "namespace=\"");
        escape_label(sb, ns ? ns : "");
        sb_append(sb, "\",cluster=\"");
        escape_label(sb, slash ? slash + 1 : cluster);
        sb_appendc(sb, '"');
}

/* Caller holds the lock. */
static series *find(const char *name, const char *labels)
{
        _cleanup_free_ char *key = xasprintf("%s\n%s", name, labels);
        size_t i = 0;
        if (strmap_get(&index_all, key, &i))
                return &all[i];
        all = xrealloc(all, (n_all + 1) * sizeof(series));
        (void)strmap_put(&index_all, key, n_all);
        series *s = &all[n_all++];
        memset(s, 0, sizeof(*s));
        s->name = xstrdup(name);
        s->labels = xstrdup(labels);
        return s;
}

static void observe(series *s, const double *bounds, size_t n, double v)
{
        assert(n <= MAX_BUCKETS);
        s->bounds = bounds;
        s->n_bounds = n;
        for (size_t i = 0; i < n; i++)
                if (v <= bounds[i])
                        s->buckets[i]++;
        s->count++;
        s->sum += v;
}

/* Count a change of leader; caller holds the lock. */
static void note_leader(const char *cluster, const char *leader)
{
        size_t len = strlen(cluster), i = 0;
        if (strmap_get(&index_leaders, cluster, &i)) {
                assert(strncmp(leaders[i], cluster, len) == 0 && leaders[i][len] == '\t');
                if (streq(leaders[i] + len + 1, leader ? leader : ""))
                        return;
                free(leaders[i]);
                leaders[i] = xasprintf("%s\t%s", cluster, leader ? leader : "");
                if (!leader)
                        return;
                strbuf l = STRBUF_INIT;
                cluster_labels(&l, cluster);
                find("gitcd_cluster_leader_changes_total", sb_str(&l))->value++;
                sb_release(&l);
                return;
        }
        leaders = xrealloc(leaders, (n_leaders + 1) * sizeof(char *));
        (void)strmap_put(&index_leaders, cluster, n_leaders);
        leaders[n_leaders++] = xasprintf("%s\t%s", cluster, leader ? leader : "");
        strbuf l = STRBUF_INIT;
        cluster_labels(&l, cluster);
        (void)find("gitcd_cluster_leader_changes_total", sb_str(&l));
        sb_release(&l);
}

void ops_metrics_set_sources(const char *const *names, size_t n)
{
        pthread_mutex_lock(&lock);
        bool *read = xcalloc(n + 1, sizeof(bool));
        char **copy = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
                copy[i] = xstrdup(names[i]);
                for (size_t j = 0; j < n_sources; j++)
                        if (streq(sources[j], names[i]))
                                read[i] = sources_read[j];
        }
        for (size_t j = 0; j < n_sources; j++)
                free(sources[j]);
        free(sources);
        free(sources_read);
        sources = copy;
        sources_read = read;
        n_sources = n;
        pthread_mutex_unlock(&lock);
}

void ops_metrics_pass(const char *cluster, const pass_result *res, int64_t duration_ms)
{
        pthread_mutex_lock(&lock);
        strbuf l = STRBUF_INIT;
        cluster_labels(&l, cluster);
        observe(find("gitcd_reconcile_pass_duration_seconds", sb_str(&l)), pass_buckets,
                ARRAY_SIZE(pass_buckets), (double)duration_ms / 1000.0);
        _cleanup_free_ char *base = xstrdup(sb_str(&l));
        sb_printf(&l, ",outcome=\"%s\"", pass_outcome_name(res->outcome));
        find("gitcd_reconcile_passes_total", sb_str(&l))->value++;
        sb_release(&l);
        /* A step was tried: taken (progressed), or refused or failed on the way. */
        if (res->step != STEP_CONVERGED && res->step != STEP_WAIT &&
            res->outcome != PASS_CONVERGED && res->outcome != PASS_WAITING) {
                _cleanup_free_ char *labels =
                    xasprintf("%s,kind=\"%s\",result=\"%s\"", base, step_kind_name(res->step),
                              pass_outcome_name(res->outcome));
                find("gitcd_steps_total", labels)->value++;
        }
        pthread_mutex_unlock(&lock);
}

void ops_metrics_fetch(const char *source, bool read, int64_t duration_ms)
{
        pthread_mutex_lock(&lock);
        strbuf l = STRBUF_INIT;
        sb_append(&l, "source=\"");
        escape_label(&l, source);
        sb_appendc(&l, '"');
        observe(find("gitcd_source_fetch_duration_seconds", sb_str(&l)), fetch_buckets,
                ARRAY_SIZE(fetch_buckets), (double)duration_ms / 1000.0);
        if (read) {
                find("gitcd_source_last_read_timestamp_seconds", sb_str(&l))->value =
                    (double)now_wall_ms() / 1000.0;
                for (size_t i = 0; i < n_sources; i++)
                        if (streq(sources[i], source))
                                sources_read[i] = true;
        } else {
                find("gitcd_source_fetch_errors_total", sb_str(&l))->value++;
        }
        sb_release(&l);
        pthread_mutex_unlock(&lock);
}

void ops_metrics_webhook(const char *forge, const char *result)
{
        pthread_mutex_lock(&lock);
        strbuf l = STRBUF_INIT;
        sb_append(&l, "forge=\"");
        escape_label(&l, forge);
        sb_append(&l, "\",result=\"");
        escape_label(&l, result);
        sb_appendc(&l, '"');
        find("gitcd_webhook_requests_total", sb_str(&l))->value++;
        sb_release(&l);
        pthread_mutex_unlock(&lock);
}

static void client_tls_release(client_tls *x)
{
        free(x->cluster);
        free(x->ca);
        free(x->cert);
        free(x->key);
}

void ops_metrics_set_client_tls(const char *cluster, const char *ca, const char *cert,
                                const char *key)
{
        assert(cluster);
        pthread_mutex_lock(&lock);
        size_t i = 0;
        while (i < n_tls_ids && !streq(tls_ids[i].cluster, cluster))
                i++;
        if (i < n_tls_ids) {
                client_tls_release(&tls_ids[i]);
                tls_ids[i] = tls_ids[--n_tls_ids];
        }
        if (ca || cert || key) {
                tls_ids = xrealloc(tls_ids, (n_tls_ids + 1) * sizeof(client_tls));
                tls_ids[n_tls_ids++] = (client_tls){
                    .cluster = xstrdup(cluster),
                    .ca = ca ? xstrdup(ca) : NULL,
                    .cert = cert ? xstrdup(cert) : NULL,
                    .key = key ? xstrdup(key) : NULL,
                };
        }
        pthread_mutex_unlock(&lock);
}

/* A copy of cluster's published client identity; false when there is none. */
static bool client_tls_get(const char *cluster, client_tls *ret)
{
        bool found = false;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n_tls_ids && !found; i++) {
                const client_tls *x = &tls_ids[i];
                if (!streq(x->cluster, cluster))
                        continue;
                *ret = (client_tls){
                    .cluster = xstrdup(x->cluster),
                    .ca = x->ca ? xstrdup(x->ca) : NULL,
                    .cert = x->cert ? xstrdup(x->cert) : NULL,
                    .key = x->key ? xstrdup(x->key) : NULL,
                };
                found = true;
        }
        pthread_mutex_unlock(&lock);
        return found;
}

bool ops_metrics_sources_read(void)
{
        pthread_mutex_lock(&lock);
        bool ok = n_sources > 0;
        for (size_t i = 0; i < n_sources; i++)
                ok = ok && sources_read[i];
        pthread_mutex_unlock(&lock);
        return ok;
}

/* ---- rendering ----------------------------------------------------------- */

typedef struct meta {
        const char *name;
        const char *type;
        const char *help;
} meta;

/* Every metric gitcd exposes, in the order they are written. */
static const meta metas[] = {
    {"gitcd_build_info", "gauge", "The gitcd version running (always 1)."},
    {"gitcd_ready", "gauge", "1 when every source was read and the state store is writable."},
    {"gitcd_cluster_info", "gauge",
     "Where a cluster runs (always 1): kube_context, the kubeconfig context of its API server "
     "(Kubernetes clusters that name one)."},
    {"gitcd_cluster_members_desired", "gauge", "Members the spec asks for (spec.replicas)."},
    {"gitcd_cluster_members_running", "gauge", "Members whose etcd process is ready."},
    {"gitcd_cluster_members_voters", "gauge", "Voting members, as gitcd last observed."},
    {"gitcd_cluster_members_voters_ready", "gauge", "Voting members whose process is ready."},
    {"gitcd_cluster_members_learners", "gauge", "Learner members, as gitcd last observed."},
    {"gitcd_cluster_leader_present", "gauge", "1 when a member reports a leader."},
    {"gitcd_cluster_leader_changes_total", "counter", "Changes of leader gitcd saw."},
    {"gitcd_cluster_condition", "gauge",
     "Condition status: 1 for the series of the current status."},
    {"gitcd_cluster_progress_deadline_exceeded", "gauge",
     "1 when the cluster did not converge before its progress deadline."},
    {"gitcd_cluster_applied_commit_timestamp_seconds", "gauge",
     "Commit time of the revision whose spec the cluster is reconciled to."},
    {"gitcd_member_db_size_bytes", "gauge", "Size of the member's backend database."},
    {"gitcd_certificate_not_after_timestamp_seconds", "gauge",
     "When a certificate gitcd issued expires (surface client, peer or operator)."},
    {"gitcd_member_db_size_in_use_bytes", "gauge", "Bytes of the backend database in use."},
    {"gitcd_snapshot_last_success_timestamp_seconds", "gauge",
     "When the last successful snapshot of the cluster finished."},
    {"gitcd_snapshot_last_success_size_bytes", "gauge",
     "Bytes stored for the last successful snapshot (after compression)."},
    {"gitcd_snapshot_failures_total", "counter",
     "Snapshots of the cluster that failed, as recorded in the state store."},
    {"gitcd_snapshot_last_verified_timestamp_seconds", "gauge",
     "When the newest snapshot a restore drill proved to restore was taken (0: none yet)."},
    {"gitcd_snapshot_last_verified_restore_seconds", "gauge",
     "How long restoring that snapshot took in its drill, until etcd served it."},
    {"gitcd_snapshot_verify_total", "counter",
     "Restore drills of the cluster's snapshots, by result."},
    {"gitcd_snapshot_verify_duration_seconds", "histogram",
     "How long one restore drill took, fetch included."},
    {"gitcd_reconcile_passes_total", "counter", "Reconciler passes, by outcome."},
    {"gitcd_reconcile_pass_duration_seconds", "histogram", "How long one pass took."},
    {"gitcd_steps_total", "counter", "Steps taken, by kind and the pass outcome."},
    {"gitcd_source_fetch_duration_seconds", "histogram", "How long one fetch of a source took."},
    {"gitcd_source_fetch_errors_total", "counter", "Fetches that could not read the source."},
    {"gitcd_source_last_read_timestamp_seconds", "gauge",
     "When the source was last read successfully."},
    {"gitcd_webhook_requests_total", "counter",
     "Push webhook requests (/hooks/FORGE), by forge and result."},
    {"gitcd_audit_append_failures_total", "counter",
     "Audit events that could not be written to the state store."},
    {"gitcd_cluster_data_consistent", "gauge",
     "1 when the last check found every member holding the same data and the cluster is not "
     "frozen, 0 otherwise."},
    {"gitcd_cluster_frozen", "gauge",
     "1 while voluntary changes are held because members' data differs (or etcd raised "
     "CORRUPT)."},
    {"gitcd_cluster_suspended", "gauge",
     "1 while the cluster is suspended (spec.suspend or gitcd suspend): no voluntary step runs."},
    {"gitcd_cluster_held", "gauge",
     "1 while a step of the cluster is held back, by reason (Suspended, MaintenanceWindow)."},
    {"gitcd_member_data_differs", "gauge",
     "1 for a member whose hash was not the majority's in the last check, 0 for the others."},
    {"gitcd_consistency_last_check_timestamp_seconds", "gauge",
     "When gitcd last compared the members' data (HashKV of every member)."},
    {"gitcd_consistency_last_check_revision", "gauge",
     "The revision the last check compared the members at."},
    {"gitcd_consistency_last_check_duration_seconds", "gauge",
     "How long the last check took (every member's HashKV, one after the other)."},
};

typedef struct scrape {
        strbuf body[ARRAY_SIZE(metas)];
} scrape;

static size_t meta_index(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(metas); i++)
                if (streq(metas[i].name, name))
                        return i;
        assert(!"metric without a description");
        return 0;
}

static void put(scrape *s, const char *name, const char *labels, double v)
{
        strbuf *b = &s->body[meta_index(name)];
        sb_append(b, name);
        if (labels && *labels)
                sb_printf(b, "{%s}", labels);
        if (v == floor(v) && fabs(v) < 1e15)
                sb_printf(b, " %.0f\n", v);
        else
                sb_printf(b, " %.3f\n", v);
}

static void put_cluster(scrape *s, const char *name, const char *cluster, const char *extra,
                        double v)
{
        strbuf l = STRBUF_INIT;
        cluster_labels(&l, cluster);
        if (extra)
                sb_printf(&l, ",%s", extra);
        put(s, name, sb_str(&l), v);
        sb_release(&l);
}

static void put_registry(scrape *s)
{
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n_all; i++) {
                const series *x = &all[i];
                if (!x->bounds) {
                        put(s, x->name, x->labels, x->value);
                        continue;
                }
                strbuf *b = &s->body[meta_index(x->name)];
                const char *sep = *x->labels ? "," : "";
                for (size_t j = 0; j < x->n_bounds; j++)
                        sb_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", x->name, x->labels, sep,
                                  x->bounds[j], (unsigned long long)x->buckets[j]);
                sb_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", x->name, x->labels, sep,
                          (unsigned long long)x->count);
                sb_printf(b, "%s_sum{%s} %.6f\n", x->name, x->labels, x->sum);
                sb_printf(b, "%s_count{%s} %llu\n", x->name, x->labels,
                          (unsigned long long)x->count);
        }
        pthread_mutex_unlock(&lock);
}

/* ---- published facts (the daemon's loop) ---------------------------------- */

/* A member to ask, as the store recorded it. */
typedef struct member_addr {
        char *cluster, *name, *client_url;
} member_addr;

/* A cluster as published: the leader the store recorded (when no member can be asked). */
typedef struct pub_cluster {
        char *name;
        bool store_leader;
} pub_cluster;

/* All under `lock`. */
static char *pub_body[ARRAY_SIZE(metas)]; /* rendered series from the store, per metric */
static pub_cluster *pub_clusters;
static size_t n_pub_clusters;
static member_addr *pub_members;
static size_t n_pub_members;
static bool pub_done;           /* published at least once */
static int pub_store_error;     /* 0: the last write transaction tried was taken */
static char *pub_store_why;     /* its message */
static uint64_t pub_generation; /* grows when the members to ask change */

/* The members' own answers (the collector). All under `lock`. */
typedef struct asked_cluster {
        char *name;
        bool asked;  /* some member could be asked (one that did not answer counts) */
        bool leader; /* some member knows a leader */
} asked_cluster;
static char *asked_body[ARRAY_SIZE(metas)];
static asked_cluster *asked;
static size_t n_asked;

static pthread_cond_t members_changed = PTHREAD_COND_INITIALIZER;

static void member_addrs_free(member_addr *v, size_t n)
{
        if (!v)
                return; /* taken (TAKE_PTR): nothing left to free */
        for (size_t i = 0; i < n; i++) {
                free(v[i].cluster);
                free(v[i].name);
                free(v[i].client_url);
        }
        free(v);
}

static void pub_clusters_free(pub_cluster *v, size_t n)
{
        if (!v)
                return; /* taken (TAKE_PTR): nothing left to free */
        for (size_t i = 0; i < n; i++)
                free(v[i].name);
        free(v);
}

static void asked_free(asked_cluster *v, size_t n)
{
        if (!v)
                return; /* taken (TAKE_PTR): nothing left to free */
        for (size_t i = 0; i < n; i++)
                free(v[i].name);
        free(v);
}

static bool same_members(const member_addr *a, size_t na, const member_addr *b, size_t nb)
{
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!streq(a[i].cluster, b[i].cluster) || !streq(a[i].name, b[i].name) ||
                    !streq(a[i].client_url, b[i].client_url))
                        return false;
        return true;
}

static const double drill_buckets[] = {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};

/*
 * The restore drills of the cluster (state/snapshots.h: drill records are
 * never deleted, so the counts only grow): by result, their durations, and
 * the newest snapshot proven to restore (its latest drill verified it).
 * drills_on: spec.snapshots.verify is not off, so a cluster with snapshots
 * but none proven yet shows 0 (the alert on it fires) rather than nothing.
 */
static void put_drills(scrape *s, state_db *db, const char *cluster, const state_snapshot_list *sl,
                       bool drills_on)
{
        state_snapshot_drill_list dl = {0};
        if (state_snapshot_drill_list_for(db, cluster, 0, &dl) < 0)
                return;
        static const char *const results[] = {"verified", "verify-failed", "unverified"};
        int64_t counts[ARRAY_SIZE(results)] = {0};
        uint64_t buckets[ARRAY_SIZE(drill_buckets)] = {0};
        uint64_t n = 0;
        double sum = 0;
        for (size_t i = 0; i < dl.n; i++) {
                const state_snapshot_drill *d = dl.items[i];
                if (streq(d->result, "running"))
                        continue;
                for (size_t k = 0; k < ARRAY_SIZE(results); k++)
                        counts[k] += streq(d->result, results[k]);
                double secs = (double)d->duration_ms / 1000.0;
                for (size_t k = 0; k < ARRAY_SIZE(drill_buckets); k++)
                        buckets[k] += secs <= drill_buckets[k];
                n++;
                sum += secs;
        }
        const state_snapshot *proven = NULL;
        bool any = false;
        for (size_t i = 0; i < sl->n; i++) {
                const state_snapshot *x = sl->items[i];
                any = any || streq(x->result, "succeeded");
                if (!proven && streq(x->result, "succeeded") &&
                    streq_ptr(x->verify_result, "verified"))
                        proven = x;
        }
        if (proven) {
                put_cluster(s, "gitcd_snapshot_last_verified_timestamp_seconds", cluster, NULL,
                            (double)proven->finished_ms / 1000.0);
                put_cluster(s, "gitcd_snapshot_last_verified_restore_seconds", cluster, NULL,
                            (double)proven->verify_restore_ms / 1000.0);
        } else if (drills_on && any) {
                put_cluster(s, "gitcd_snapshot_last_verified_timestamp_seconds", cluster, NULL, 0);
        }
        if (n > 0 || (drills_on && any)) {
                for (size_t k = 0; k < ARRAY_SIZE(results); k++) {
                        _cleanup_free_ char *extra = xasprintf("result=\"%s\"", results[k]);
                        put_cluster(s, "gitcd_snapshot_verify_total", cluster, extra,
                                    (double)counts[k]);
                }
                strbuf l = STRBUF_INIT;
                cluster_labels(&l, cluster);
                const char *name = "gitcd_snapshot_verify_duration_seconds";
                strbuf *b = &s->body[meta_index(name)];
                for (size_t k = 0; k < ARRAY_SIZE(drill_buckets); k++)
                        sb_printf(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, sb_str(&l),
                                  drill_buckets[k], (unsigned long long)buckets[k]);
                sb_printf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, sb_str(&l),
                          (unsigned long long)n);
                sb_printf(b, "%s_sum{%s} %.6f\n", name, sb_str(&l), sum);
                sb_printf(b, "%s_count{%s} %llu\n", name, sb_str(&l), (unsigned long long)n);
                sb_release(&l);
        }
        state_snapshot_drill_list_release(&dl);
}

/*
 * The last successful snapshot of the cluster (the newest succeeded
 * record, whatever retention did with it since) and the failed ones, from
 * the snapshot records, which are never deleted: the count only grows.
 */
static void put_snapshots(scrape *s, state_db *db, const char *cluster, bool drills_on)
{
        state_snapshot_list sl = {0};
        if (state_snapshot_list_for(db, cluster, 0, &sl) < 0)
                return;
        const state_snapshot *last = NULL;
        int failures = 0;
        for (size_t i = 0; i < sl.n; i++) {
                const state_snapshot *x = sl.items[i];
                if (streq(x->result, "failed"))
                        failures++;
                else if (!last && streq(x->result, "succeeded"))
                        last = x;
        }
        if (last) {
                put_cluster(s, "gitcd_snapshot_last_success_timestamp_seconds", cluster, NULL,
                            (double)last->finished_ms / 1000.0);
                put_cluster(s, "gitcd_snapshot_last_success_size_bytes", cluster, NULL,
                            (double)last->size);
        }
        if (sl.n > 0)
                put_cluster(s, "gitcd_snapshot_failures_total", cluster, NULL, failures);
        put_drills(s, db, cluster, &sl, drills_on);
        state_snapshot_list_release(&sl);
}

/*
 * When each certificate of the cluster expires, as the reconciler recorded
 * it (state_certs_list: the one owner of that fact, for every target). A
 * certificate all members share (a Kubernetes Secret) has member="".
 */
static void put_certs(scrape *s, state_db *db, const char *cluster)
{
        state_cert_list cl = {0};
        if (state_certs_list(db, cluster, &cl) < 0)
                return;
        for (size_t i = 0; i < cl.n; i++) {
                const state_cert *c = cl.items[i];
                strbuf extra = STRBUF_INIT;
                sb_append(&extra, "member=\"");
                escape_label(&extra, c->member);
                sb_append(&extra, "\",surface=\"");
                escape_label(&extra, c->surface);
                sb_appendc(&extra, '"');
                put_cluster(s, "gitcd_certificate_not_after_timestamp_seconds", cluster,
                            sb_str(&extra), (double)(c->not_after_ms / 1000));
                sb_release(&extra);
        }
        state_cert_list_release(&cl);
}

/* Whether the cluster's spec asks for restore drills of its scheduled snapshots. */
static bool drills_on(const state_cluster *c)
{
        etcd_cluster *spec = spec_from_json_text(state_cluster_spec_json(c), c->name);
        bool on = spec && spec->snapshots.enabled && spec->snapshots.verify != VERIFY_OFF;
        etcd_cluster_free(spec);
        return on;
}

/*
 * The last check of the members' data and the freeze, as the reconciler
 * recorded them (state/consistency.h, their one owner); no series before
 * the first check.
 */
static void put_consistency(scrape *s, state_db *db, const char *cluster)
{
        state_consistency *v = NULL;
        if (state_consistency_get(db, cluster, &v) < 0)
                return;
        put_cluster(s, "gitcd_cluster_frozen", cluster, NULL, v->frozen_ms != 0);
        if (v->checked_ms > 0) {
                bool agree = v->verdict && streq(v->verdict, "agree");
                put_cluster(s, "gitcd_cluster_data_consistent", cluster, NULL,
                            agree && !v->frozen_ms);
                put_cluster(s, "gitcd_consistency_last_check_timestamp_seconds", cluster, NULL,
                            (double)v->checked_ms / 1000.0);
                put_cluster(s, "gitcd_consistency_last_check_revision", cluster, NULL,
                            (double)v->revision);
                put_cluster(s, "gitcd_consistency_last_check_duration_seconds", cluster, NULL,
                            (double)v->duration_ms / 1000.0);
                json_t *h = v->hashes ? json_loads(v->hashes, 0, NULL) : NULL;
                const char *member;
                json_t *val;
                json_object_foreach(h, member, val)
                {
                        strbuf extra = STRBUF_INIT;
                        sb_append(&extra, "member=\"");
                        escape_label(&extra, member);
                        sb_appendc(&extra, '"');
                        bool differs = false;
                        size_t n = strlen(member);
                        for (const char *p = v->minority; p && *p;) {
                                const char *end = strchr(p, ',');
                                size_t len = end ? (size_t)(end - p) : strlen(p);
                                differs = differs || (len == n && strncmp(p, member, n) == 0);
                                p = end ? end + 1 : NULL;
                        }
                        put_cluster(s, "gitcd_member_data_differs", cluster, sb_str(&extra),
                                    differs);
                        sb_release(&extra);
                }
                json_decref(h);
        }
        state_consistency_free(v);
}

/*
 * The holds (reconciler/hold.h): whether the cluster is suspended, from the
 * spec in force and the state store, and the step held when the last pass
 * ended on one (state/holds.h).
 */
static void put_holds(scrape *s, state_db *db, const state_cluster *c)
{
        etcd_cluster *spec = spec_from_json_text(state_cluster_spec_json(c), c->name);
        if (!spec)
                return;
        if (spec->kube_context) {
                /* the API server's kubeconfig context, a name: escaped as every label value */
                strbuf extra = STRBUF_INIT;
                sb_append(&extra, "kube_context=\"");
                escape_label(&extra, spec->kube_context);
                sb_appendc(&extra, '"');
                put_cluster(s, "gitcd_cluster_info", c->name, sb_str(&extra), 1);
                sb_release(&extra);
        }
        hold_state hs;
        if (hold_read(db, c->name, spec, now_wall_ms(), &hs) == 0) {
                put_cluster(s, "gitcd_cluster_suspended", c->name, NULL, hs.suspended);
                hold_state_release(&hs);
        }
        etcd_cluster_free(spec);
        state_hold *h = NULL;
        if (state_hold_get(db, c->name, &h) == 0 && h->held) {
                strbuf extra = STRBUF_INIT;
                sb_append(&extra, "reason=\"");
                escape_label(&extra, h->held);
                sb_appendc(&extra, '"');
                put_cluster(s, "gitcd_cluster_held", c->name, sb_str(&extra), 1);
                sb_release(&extra);
        }
        state_hold_free(h);
}

/* What the store says about one cluster; its members to ask are appended to *members. */
static void put_cluster_facts(scrape *s, state_db *db, const state_cluster *c,
                              member_addr **members, size_t *n_members, size_t *alloc)
{
        const char *cl = c->name;
        if (c->desired_replicas >= 0)
                put_cluster(s, "gitcd_cluster_members_desired", cl, NULL, c->desired_replicas);
        state_member_list ml = {0};
        if (state_member_list_for(db, cl, false, &ml) == 0) {
                int running = 0, voters = 0, voters_ready = 0, learners = 0;
                for (size_t i = 0; i < ml.n; i++) {
                        const state_member *m = ml.items[i];
                        bool ready = m->state && streq(m->state, "ready");
                        running += ready;
                        if (!isempty(m->client_url)) {
                                *members =
                                    xgrow(*members, alloc, *n_members + 1, sizeof(member_addr));
                                (*members)[(*n_members)++] =
                                    (member_addr){.cluster = xstrdup(cl),
                                                  .name = xstrdup(m->name),
                                                  .client_url = xstrdup(m->client_url)};
                        }
                        if (!m->member_id)
                                continue;
                        if (m->learner) {
                                learners++;
                        } else {
                                voters++;
                                voters_ready += ready;
                        }
                }
                put_cluster(s, "gitcd_cluster_members_running", cl, NULL, running);
                put_cluster(s, "gitcd_cluster_members_voters", cl, NULL, voters);
                put_cluster(s, "gitcd_cluster_members_voters_ready", cl, NULL, voters_ready);
                put_cluster(s, "gitcd_cluster_members_learners", cl, NULL, learners);
                state_member_list_release(&ml);
        }
        put_certs(s, db, cl);
        put_snapshots(s, db, cl, drills_on(c));
        put_consistency(s, db, cl);
        put_holds(s, db, c);

        static const char *const statuses[] = {"True", "False", "Unknown"};
        bool deadline = false;
        for (size_t i = 0; i < c->n_conditions; i++) {
                const state_condition *k = &c->conditions[i];
                for (size_t j = 0; j < ARRAY_SIZE(statuses); j++) {
                        _cleanup_free_ char *extra =
                            xasprintf("type=\"%s\",status=\"%s\"", k->type, statuses[j]);
                        put_cluster(s, "gitcd_cluster_condition", cl, extra,
                                    streq(k->status, statuses[j]));
                }
                if (streq(k->type, "Progressing") && k->reason &&
                    streq(k->reason, "DeadlineExceeded"))
                        deadline = true;
        }
        put_cluster(s, "gitcd_cluster_progress_deadline_exceeded", cl, NULL, deadline);
        if (c->desired_commit) {
                state_revision *rev = NULL;
                if (state_revision_get(db, c->desired_commit, &rev) == 0) {
                        if (rev->commit_time_ms > 0)
                                put_cluster(s, "gitcd_cluster_applied_commit_timestamp_seconds", cl,
                                            NULL, (double)rev->commit_time_ms / 1000.0);
                        state_revision_free(rev);
                }
        }
}

int ops_metrics_publish(state_db *db, bool check_writable)
{
        assert(db);
        scrape s;
        memset(&s, 0, sizeof(s));
        member_addr *members = NULL;
        size_t n_members = 0, alloc = 0;
        pub_cluster *clusters = NULL;
        size_t n_clusters = 0;
        state_cluster_list cl = {0};
        int k = state_cluster_list_all(db, &cl);
        if (k >= 0) {
                clusters = xcalloc(cl.n + 1, sizeof(pub_cluster));
                for (size_t i = 0; i < cl.n; i++) {
                        put_cluster_facts(&s, db, cl.items[i], &members, &n_members, &alloc);
                        clusters[n_clusters++] =
                            (pub_cluster){.name = xstrdup(cl.items[i]->name),
                                          .store_leader = cl.items[i]->leader != NULL};
                }
        }
        state_audit_failures af = {0};
        if (state_audit_failures_get(db, &af) >= 0)
                put(&s, "gitcd_audit_append_failures_total", NULL, (double)af.count);
        state_audit_failures_release(&af);
        /* a write transaction, at once rolled back: whether the store takes writes */
        int w = 0;
        _cleanup_free_ char *why = NULL;
        if (check_writable) {
                w = state_begin(db);
                if (w >= 0)
                        (void)state_rollback(db);
                else
                        why = xstrdup(state_last_error());
        }

        pthread_mutex_lock(&lock);
        for (size_t i = 0; k >= 0 && i < cl.n; i++)
                note_leader(cl.items[i]->name, cl.items[i]->leader);
        for (size_t i = 0; i < ARRAY_SIZE(metas); i++) {
                if (k < 0 && i != meta_index("gitcd_audit_append_failures_total")) {
                        sb_release(&s.body[i]); /* the store could not be read: keep the last */
                        continue;
                }
                free(pub_body[i]);
                pub_body[i] = sb_detach(&s.body[i]);
        }
        if (k >= 0) {
                if (!same_members(pub_members, n_pub_members, members, n_members)) {
                        pub_generation++;
                        pthread_cond_broadcast(&members_changed);
                }
                member_addrs_free(pub_members, n_pub_members);
                pub_members = TAKE_PTR(members);
                n_pub_members = n_members;
                pub_clusters_free(pub_clusters, n_pub_clusters);
                pub_clusters = TAKE_PTR(clusters);
                n_pub_clusters = n_clusters;
        }
        if (check_writable) {
                pub_store_error = w < 0 ? w : 0;
                free(pub_store_why);
                pub_store_why = TAKE_PTR(why);
        }
        pub_done = pub_done || k >= 0;
        pthread_mutex_unlock(&lock);
        state_cluster_list_release(&cl);
        member_addrs_free(members, n_members);
        pub_clusters_free(clusters, n_clusters);
        return k < 0 ? k : 0;
}

/* ---- the members' answers (the collector) ---------------------------------- */

void ops_metrics_collect(void)
{
        pthread_mutex_lock(&lock);
        size_t n = n_pub_members;
        member_addr *members = xcalloc(n + 1, sizeof(member_addr));
        for (size_t i = 0; i < n; i++)
                members[i] = (member_addr){.cluster = xstrdup(pub_members[i].cluster),
                                           .name = xstrdup(pub_members[i].name),
                                           .client_url = xstrdup(pub_members[i].client_url)};
        pthread_mutex_unlock(&lock);

        scrape s;
        memset(&s, 0, sizeof(s));
        asked_cluster *res = xcalloc(n + 1, sizeof(asked_cluster));
        size_t n_res = 0;
        for (size_t i = 0; i < n; i++) {
                const member_addr *m = &members[i];
                if (!n_res || !streq(res[n_res - 1].name, m->cluster))
                        res[n_res++] = (asked_cluster){.name = xstrdup(m->cluster)};
                asked_cluster *a = &res[n_res - 1];
                client_tls id = {0};
                bool have_id = client_tls_get(m->cluster, &id);
                bool https = strncmp(m->client_url, "https://", 8) == 0;
                if (https ? !have_id : strncmp(m->client_url, "http://", 7) != 0) {
                        client_tls_release(&id);
                        continue;
                }
                a->asked = true;
                etcd_client_opts o = {.endpoints = m->client_url,
                                      .cacert = https ? id.ca : NULL,
                                      .cert = https ? id.cert : NULL,
                                      .key = https ? id.key : NULL,
                                      .call_timeout_ms = 1000,
                                      .dial_timeout_ms = 500};
                etcd_client *c = NULL;
                if (etcd_client_new(&o, &c) == 0) {
                        etcd_endpoint_status *st = NULL;
                        if (etcd_status(c, m->client_url, &st) == 0) {
                                _cleanup_free_ char *ml = xasprintf("member=\"%s\"", m->name);
                                put_cluster(&s, "gitcd_member_db_size_bytes", m->cluster, ml,
                                            (double)st->db_size);
                                put_cluster(&s, "gitcd_member_db_size_in_use_bytes", m->cluster, ml,
                                            (double)st->db_size_in_use);
                                a->leader = a->leader || st->leader != 0;
                                etcd_endpoint_status_free(st);
                        }
                        etcd_client_free(c);
                }
                client_tls_release(&id);
        }
        member_addrs_free(members, n);

        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < ARRAY_SIZE(metas); i++) {
                free(asked_body[i]);
                asked_body[i] = sb_detach(&s.body[i]);
        }
        asked_free(asked, n_asked);
        asked = res;
        n_asked = n_res;
        pthread_mutex_unlock(&lock);
}

struct ops_metrics_collector {
        pthread_t thread;
        int interval_ms;
        bool stop; /* under lock */
};

static void *collector_main(void *userdata)
{
        ops_metrics_collector *c = userdata;
        uint64_t seen = UINT64_MAX;
        pthread_mutex_lock(&lock);
        while (!c->stop) {
                if (seen != pub_generation || seen == UINT64_MAX) {
                        seen = pub_generation;
                        pthread_mutex_unlock(&lock);
                        ops_metrics_collect();
                        pthread_mutex_lock(&lock);
                        continue;
                }
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += c->interval_ms / 1000;
                ts.tv_nsec += (long)(c->interval_ms % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                if (pthread_cond_timedwait(&members_changed, &lock, &ts) == ETIMEDOUT)
                        seen = UINT64_MAX; /* time for another round */
        }
        pthread_mutex_unlock(&lock);
        return NULL;
}

int ops_metrics_collector_start(int interval_ms, ops_metrics_collector **ret)
{
        ops_metrics_collector *c = XNEW(ops_metrics_collector);
        c->interval_ms = interval_ms > 0 ? interval_ms : 10000;
        int k = pthread_create(&c->thread, NULL, collector_main, c);
        if (k != 0) {
                free(c);
                return -k;
        }
        *ret = c;
        return 0;
}

void ops_metrics_collector_stop(ops_metrics_collector *c)
{
        if (!c)
                return;
        pthread_mutex_lock(&lock);
        c->stop = true;
        pthread_cond_broadcast(&members_changed);
        pthread_mutex_unlock(&lock);
        pthread_join(c->thread, NULL);
        free(c);
}

/* ---- from memory: readiness and the exposition ----------------------------- */

/* Caller holds the lock. */
static char *not_ready_locked(void)
{
        bool read = n_sources > 0;
        for (size_t i = 0; i < n_sources; i++)
                read = read && sources_read[i];
        if (!read)
                return xstrdup("a source was not read yet\n");
        if (!pub_done)
                return xstrdup("the state store was not read yet\n");
        if (pub_store_error < 0)
                return xasprintf("the state store is not writable: %s\n",
                                 pub_store_why ? pub_store_why : strerror(-pub_store_error));
        return NULL;
}

char *ops_metrics_not_ready(void)
{
        pthread_mutex_lock(&lock);
        char *why = not_ready_locked();
        pthread_mutex_unlock(&lock);
        return why;
}

void ops_metrics_render(strbuf *out)
{
        scrape s;
        memset(&s, 0, sizeof(s));
        put(&s, "gitcd_build_info", "version=\"" GITCD_VERSION "\"", 1);
        pthread_mutex_lock(&lock);
        _cleanup_free_ char *why = not_ready_locked();
        put(&s, "gitcd_ready", NULL, why ? 0 : 1);
        for (size_t i = 0; i < ARRAY_SIZE(metas); i++) {
                if (pub_body[i])
                        sb_append(&s.body[i], pub_body[i]);
                if (asked_body[i])
                        sb_append(&s.body[i], asked_body[i]);
        }
        for (size_t i = 0; i < n_pub_clusters; i++) {
                const pub_cluster *c = &pub_clusters[i];
                bool leader = c->store_leader;
                for (size_t j = 0; j < n_asked; j++)
                        if (streq(asked[j].name, c->name) && asked[j].asked)
                                leader = asked[j].leader;
                put_cluster(&s, "gitcd_cluster_leader_present", c->name, NULL, leader);
        }
        pthread_mutex_unlock(&lock);
        put_registry(&s);
        for (size_t i = 0; i < ARRAY_SIZE(metas); i++) {
                if (s.body[i].len == 0) {
                        sb_release(&s.body[i]);
                        continue;
                }
                sb_printf(out, "# HELP %s %s\n# TYPE %s %s\n", metas[i].name, metas[i].help,
                          metas[i].name, metas[i].type);
                sb_append(out, sb_str(&s.body[i]));
                sb_release(&s.body[i]);
        }
}

void ops_metrics_reset(void)
{
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < n_all; i++) {
                free(all[i].name);
                free(all[i].labels);
        }
        free(all);
        all = NULL;
        n_all = 0;
        strmap_release(&index_all);
        for (size_t i = 0; i < n_sources; i++)
                free(sources[i]);
        free(sources);
        free(sources_read);
        sources = NULL;
        sources_read = NULL;
        n_sources = 0;
        for (size_t i = 0; i < n_leaders; i++)
                free(leaders[i]);
        free(leaders);
        leaders = NULL;
        n_leaders = 0;
        strmap_release(&index_leaders);
        for (size_t i = 0; i < n_tls_ids; i++)
                client_tls_release(&tls_ids[i]);
        free(tls_ids);
        tls_ids = NULL;
        n_tls_ids = 0;
        for (size_t i = 0; i < ARRAY_SIZE(metas); i++) {
                free(pub_body[i]);
                free(asked_body[i]);
                pub_body[i] = asked_body[i] = NULL;
        }
        member_addrs_free(pub_members, n_pub_members);
        pub_members = NULL;
        n_pub_members = 0;
        pub_clusters_free(pub_clusters, n_pub_clusters);
        pub_clusters = NULL;
        n_pub_clusters = 0;
        asked_free(asked, n_asked);
        asked = NULL;
        n_asked = 0;
        pub_done = false;
        pub_store_error = 0;
        free(pub_store_why);
        pub_store_why = NULL;
        pthread_mutex_unlock(&lock);
}
