/*
 * The metrics registry and the scrape (see metrics.h).
 *
 * Decision: as few hooks into the reconciler as possible. The driver calls
 * one function per pass (through driver_opts.pass_done) and the daemon one
 * per fetch; everything else is read at scrape time, on the HTTP thread,
 * with its own connection to the state store: the clusters, their
 * conditions and members as the reconciler recorded them, and each
 * member's status asked from the member itself (database sizes, the
 * leader it follows), so a scrape never waits for a pass and a pass never
 * waits for a scrape. Members reached over https:// are asked with
 * gitcd's client identity, which belongs to the target (the main loop's
 * object, never touched here): the daemon resolves it after each pass and
 * publishes the three file paths per cluster (ops_metrics_set_client_tls);
 * until it has, such members are not asked and, when no member can be
 * asked, the leader comes from the state store. Snapshot facts come from
 * the snapshot records (state/snapshots.h), their one owner.
 *
 * Counters live as long as the process; "leader changes" counts the
 * changes of the recorded leader seen from one scrape to the next.
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/client.h"
#include "ops/metrics.h"
#include "state/consistency.h"
#include "state/snapshots.h"
#include "state/state.h"
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
static char **sources;
static bool *sources_read;
static size_t n_sources;
static char **leaders; /* "cluster\tleader" last seen */
static size_t n_leaders;

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
        for (size_t i = 0; i < n_all; i++)
                if (streq(all[i].name, name) && streq(all[i].labels, labels))
                        return &all[i];
        all = xrealloc(all, (n_all + 1) * sizeof(series));
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
        size_t len = strlen(cluster);
        for (size_t i = 0; i < n_leaders; i++)
                if (strncmp(leaders[i], cluster, len) == 0 && leaders[i][len] == '\t') {
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
        for (size_t i = 0; i < n_tls_ids; i++)
                client_tls_release(&tls_ids[i]);
        free(tls_ids);
        tls_ids = NULL;
        n_tls_ids = 0;
        pthread_mutex_unlock(&lock);
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
    {"gitcd_reconcile_passes_total", "counter", "Reconciler passes, by outcome."},
    {"gitcd_reconcile_pass_duration_seconds", "histogram", "How long one pass took."},
    {"gitcd_steps_total", "counter", "Steps taken, by kind and the pass outcome."},
    {"gitcd_source_fetch_duration_seconds", "histogram", "How long one fetch of a source took."},
    {"gitcd_source_fetch_errors_total", "counter", "Fetches that could not read the source."},
    {"gitcd_source_last_read_timestamp_seconds", "gauge",
     "When the source was last read successfully."},
    {"gitcd_audit_append_failures_total", "counter",
     "Audit events that could not be written to the state store."},
    {"gitcd_cluster_data_consistent", "gauge",
     "1 when the last check found every member holding the same data and the cluster is not "
     "frozen, 0 otherwise."},
    {"gitcd_cluster_frozen", "gauge",
     "1 while voluntary changes are held because members' data differs (or etcd raised "
     "CORRUPT)."},
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

/*
 * Ask each member for its status: over http://, or over https:// with the
 * client identity the daemon published for the cluster; whether any of
 * them knows a leader. *ret_asked: some member could be asked (a member
 * that does not answer counts: a cluster whose members are all down has no
 * leader, whatever the state store last recorded).
 */
static bool put_member_status(scrape *s, const char *cluster, const state_member_list *ml,
                              bool *ret_asked)
{
        bool leader = false;
        *ret_asked = false;
        client_tls id = {0};
        bool have_id = client_tls_get(cluster, &id);
        for (size_t i = 0; i < ml->n; i++) {
                const state_member *m = ml->items[i];
                if (isempty(m->client_url))
                        continue;
                bool https = strncmp(m->client_url, "https://", 8) == 0;
                if (https ? !have_id : strncmp(m->client_url, "http://", 7) != 0)
                        continue;
                *ret_asked = true;
                etcd_client_opts o = {.endpoints = m->client_url,
                                      .cacert = https ? id.ca : NULL,
                                      .cert = https ? id.cert : NULL,
                                      .key = https ? id.key : NULL,
                                      .call_timeout_ms = 1000,
                                      .dial_timeout_ms = 500};
                etcd_client *c = NULL;
                if (etcd_client_new(&o, &c) < 0)
                        continue;
                etcd_endpoint_status *st = NULL;
                if (etcd_status(c, m->client_url, &st) == 0) {
                        _cleanup_free_ char *ml_ = xasprintf("member=\"%s\"", m->name);
                        put_cluster(s, "gitcd_member_db_size_bytes", cluster, ml_,
                                    (double)st->db_size);
                        put_cluster(s, "gitcd_member_db_size_in_use_bytes", cluster, ml_,
                                    (double)st->db_size_in_use);
                        leader = leader || st->leader != 0;
                        etcd_endpoint_status_free(st);
                }
                etcd_client_free(c);
        }
        client_tls_release(&id);
        return leader;
}

/*
 * The last successful snapshot of the cluster (the newest succeeded
 * record, whatever retention did with it since) and the failed ones, from
 * the snapshot records, which are never deleted: the count only grows.
 */
static void put_snapshots(scrape *s, state_db *db, const char *cluster)
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

static void put_cluster_facts(scrape *s, state_db *db, const state_cluster *c)
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
                bool asked = false;
                bool leader = put_member_status(s, cl, &ml, &asked);
                if (!asked)
                        leader = c->leader != NULL;
                put_cluster(s, "gitcd_cluster_leader_present", cl, NULL, leader);
                state_member_list_release(&ml);
        }
        put_certs(s, db, cl);
        put_snapshots(s, db, cl);
        put_consistency(s, db, cl);
        pthread_mutex_lock(&lock);
        note_leader(cl, c->leader);
        pthread_mutex_unlock(&lock);

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

int ops_metrics_render(const char *state_path, strbuf *out)
{
        scrape s;
        memset(&s, 0, sizeof(s));
        put(&s, "gitcd_build_info", "version=\"" GITCD_VERSION "\"", 1);
        int k = 0;
        state_db *db = NULL;
        if (state_path)
                k = state_open(state_path, STATE_OPEN_READ_ONLY, &db);
        if (db) {
                state_cluster_list cl = {0};
                k = state_cluster_list_all(db, &cl);
                for (size_t i = 0; k >= 0 && i < cl.n; i++)
                        put_cluster_facts(&s, db, cl.items[i]);
                state_cluster_list_release(&cl);
                state_audit_failures af = {0};
                if (state_audit_failures_get(db, &af) >= 0)
                        put(&s, "gitcd_audit_append_failures_total", NULL, (double)af.count);
                state_audit_failures_release(&af);
                state_close(db);
        }
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
        return k < 0 ? k : 0;
}
