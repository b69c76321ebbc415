/*
 * The incident bundle: what gitcd knows and what the cluster says about
 * itself, collected into one .tar.gz for a person (docs/incidents.md
 * draws the layout). It is wanted most when the cluster is in trouble, so
 * nothing in it may stop it from being written: every collection step has
 * a deadline (BUNDLE_STEP_TIMEOUT_MS for etcd's calls and /metrics, the
 * target's own command deadline for logs), and a step that fails leaves an
 * error.txt where its files would be.
 *
 * The files are collected in memory first, then bounded (BUNDLE_MAX_BYTES:
 * logs are cut first, then metrics), then written with libarchive under a
 * temporary name in the destination folder (mode 0600) and renamed: a
 * bundle is whole or absent. libarchive writes the tar format and its
 * gzip filter; tar is never written by hand. libarchive (with libxml2,
 * ICU and libstdc++ behind it) is loaded when the first bundle is written
 * (util/dload.h), not at every start of gitcd.
 *
 * No secret goes in. The desired spec and the journal's payloads pass
 * through the store's scrubber (state_scrub_json: the values of keys that
 * look secret, PEM private keys); the audit events were scrubbed when
 * they were appended; key files are never read (the client identity's
 * paths are only handed to libcurl); and every file is checked last for
 * a PEM private key block and for root's etcd password, both replaced by
 * "[redacted]" wherever they appear (a log line, a metric's label).
 */
#include <archive.h>
#include <archive_entry.h>
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/spec.h"
#include "ops/bundle.h"
#include "etcd/client.h"
#include "etcd/credentials.h"
#include "etcd/health.h"
#include "ops/notify.h"
#include "util/dload.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

typedef struct bundle_file {
        char *name; /* under the bundle's top folder */
        char *data;
        size_t len;
        int kind; /* FILE_* below: what is cut first */
} bundle_file;

enum { FILE_OTHER, FILE_LOG, FILE_METRICS };

typedef struct bundle {
        bundle_file *files;
        size_t n, alloc;
        const char *password; /* root's, redacted wherever it shows */
        const char *fallback_password;
} bundle;

static void add_len(bundle *b, int kind, char *name, char *data, size_t len)
{
        b->files = xgrow(b->files, &b->alloc, b->n + 1, sizeof(*b->files));
        b->files[b->n++] = (bundle_file){.name = name, .data = data, .len = len, .kind = kind};
}

/* Add a file; name and data are taken over. */
static void add(bundle *b, int kind, char *name, char *data)
{
        add_len(b, kind, name, data, data ? strlen(data) : 0);
}

static void add_json(bundle *b, char *name, json_t *j)
{
        char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        if (!s)
                s = xstrdup("null");
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, s);
        sb_appendc(&sb, '\n');
        free(s);
        add(b, FILE_OTHER, name, sb_detach(&sb));
}

static void bundle_release(bundle *b)
{
        for (size_t i = 0; i < b->n; i++) {
                free(b->files[i].name);
                free(b->files[i].data);
        }
        free(b->files);
}

/* Replace every occurrence of word in *data with "[redacted]". */
static void redact_word(char **data, size_t *len, const char *word)
{
        if (isempty(word) || !memmem(*data, *len, word, strlen(word)))
                return;
        size_t wl = strlen(word);
        strbuf sb = STRBUF_INIT;
        const char *p = *data, *end = *data + *len;
        for (const char *q; (q = memmem(p, (size_t)(end - p), word, wl)); p = q + wl) {
                sb_append_len(&sb, p, (size_t)(q - p));
                sb_append(&sb, "[redacted]");
        }
        sb_append_len(&sb, p, (size_t)(end - p));
        free(*data);
        *len = sb.len;
        *data = sb_detach(&sb);
}

/* The last check of every file: no private key block, no root password. */
static void redact_all(bundle *b)
{
        for (size_t i = 0; i < b->n; i++) {
                bundle_file *f = &b->files[i];
                if (!f->data)
                        f->data = xstrdup("");
                if (state_text_has_private_key(f->data)) {
                        char *r = state_redact_private_keys(f->data);
                        free(f->data);
                        f->data = r;
                        f->len = strlen(r);
                }
                redact_word(&f->data, &f->len, b->password);
                redact_word(&f->data, &f->len, b->fallback_password);
        }
}

static size_t total_size(const bundle *b)
{
        size_t n = 0;
        for (size_t i = 0; i < b->n; i++)
                n += b->files[i].len;
        return n;
}

/* Keep the bundle within BUNDLE_MAX_BYTES: halve the logs' tails, then the metrics. */
static void bound(bundle *b)
{
        for (int kind = FILE_LOG; kind <= FILE_METRICS; kind++)
                for (int round = 0; round < 16 && total_size(b) > BUNDLE_MAX_BYTES; round++)
                        for (size_t i = 0; i < b->n; i++) {
                                bundle_file *f = &b->files[i];
                                if (f->kind != kind || f->len < 1024)
                                        continue;
                                char *t = target_text_tail(f->data, f->len, f->len / 2);
                                free(f->data);
                                f->data = t;
                                f->len = strlen(t);
                        }
}

static json_t *json_str(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *json_time(int64_t ms)
{
        if (ms <= 0)
                return json_null();
        char buf[40];
        format_rfc3339(ms, buf, sizeof(buf));
        return json_string(buf);
}

/* ---- what etcd says ---- */

static json_t *hex_id(uint64_t id)
{
        char buf[17];
        etcd_member_id_format(id, buf);
        return json_string(buf);
}

static json_t *endpoint_status_json(const etcd_endpoint_status *s)
{
        json_t *errors = json_array();
        for (size_t i = 0; i < s->n_errors; i++)
                json_array_append_new(errors, json_string(s->errors[i]));
        json_t *o = json_object();
        json_object_set_new(o, "endpoint", json_string(s->endpoint));
        json_object_set_new(o, "version", json_string(s->version));
        json_object_set_new(o, "dbSize", json_integer(s->db_size));
        json_object_set_new(o, "dbSizeInUse", json_integer(s->db_size_in_use));
        json_object_set_new(o, "memberID", hex_id(s->member_id));
        json_object_set_new(o, "clusterID", hex_id(s->cluster_id));
        json_object_set_new(o, "leader", hex_id(s->leader));
        json_object_set_new(o, "isLeader", json_boolean(s->leader && s->leader == s->member_id));
        json_object_set_new(o, "raftIndex", json_integer((json_int_t)s->raft_index));
        json_object_set_new(o, "raftTerm", json_integer((json_int_t)s->raft_term));
        json_object_set_new(o, "raftAppliedIndex", json_integer((json_int_t)s->raft_applied_index));
        json_object_set_new(o, "revision", json_integer(s->revision));
        json_object_set_new(o, "isLearner", json_boolean(s->is_learner));
        json_object_set_new(o, "errors", errors);
        return o;
}

typedef struct conn {
        char *ca, *cert, *key;
        auth_creds cr;
} conn;

/*
 * A client of endpoints; with root's credentials only when auth is true.
 * Status and /metrics need none, and etcd's Authenticate goes through raft:
 * a member of a cluster that lost quorum answers only callers without.
 */
static int client_for(const conn *k, const char *endpoints, bool auth, etcd_client **ret)
{
        etcd_client_opts o = {.endpoints = endpoints,
                              .cacert = k->ca,
                              .cert = k->cert,
                              .key = k->key,
                              .user = auth ? k->cr.user : NULL,
                              .password = auth ? k->cr.password : NULL,
                              .fallback_password = auth ? k->cr.fallback_password : NULL,
                              .call_timeout_ms = BUNDLE_STEP_TIMEOUT_MS,
                              .dial_timeout_ms = 1000};
        return etcd_client_new(&o, ret);
}

static char *etcd_error(etcd_client *c, int r)
{
        const char *m = c ? etcd_client_last_error(c) : "";
        return xasprintf("%s\n", !isempty(m) ? m : etcd_strerror(r));
}

static bool auth_refusal(int r)
{
        return r == ETCD_ERR_UNAUTHENTICATED || r == ETCD_ERR_AUTH_FAILED ||
               r == ETCD_ERR_INVALID_TOKEN || r == ETCD_ERR_PERMISSION_DENIED;
}

static void collect_cluster(bundle *b, const conn *k, const char *endpoints)
{
        etcd_client *c = NULL;
        int r = client_for(k, endpoints, false, &c);
        etcd_members *ml = NULL;
        if (r >= 0)
                r = etcd_member_list(c, &ml);
        if (auth_refusal(r) && k->cr.user) {
                /* asked again as root: the alarms below too */
                etcd_client_free(c);
                c = NULL;
                r = client_for(k, endpoints, true, &c);
                if (r >= 0)
                        r = etcd_member_list(c, &ml);
        }
        if (r < 0) {
                _cleanup_free_ char *e = etcd_error(c, r);
                add(b, FILE_OTHER, xstrdup("etcd/members.error.txt"),
                    xasprintf("the member list: %s", e));
        } else {
                json_t *a = json_array();
                for (size_t i = 0; i < ml->n; i++) {
                        const etcd_member *m = &ml->members[i];
                        json_t *peers = json_array(), *clients = json_array();
                        for (size_t j = 0; j < m->n_peer_urls; j++)
                                json_array_append_new(peers, json_string(m->peer_urls[j]));
                        for (size_t j = 0; j < m->n_client_urls; j++)
                                json_array_append_new(clients, json_string(m->client_urls[j]));
                        json_array_append_new(
                            a, json_pack("{s:o,s:s,s:o,s:o,s:b}", "id", hex_id(m->id), "name",
                                         m->name ? m->name : "", "peerURLs", peers, "clientURLs",
                                         clients, "isLearner", m->is_learner));
                }
                add_json(b, xstrdup("etcd/members.json"), a);
                etcd_members_free(ml);
        }
        etcd_alarm *al = NULL;
        size_t n_al = 0;
        if (c)
                r = etcd_alarm_list(c, &al, &n_al);
        if (c && auth_refusal(r) && k->cr.user) {
                etcd_client_free(c);
                c = NULL;
                if (client_for(k, endpoints, true, &c) >= 0)
                        r = etcd_alarm_list(c, &al, &n_al);
        }
        if (c && r >= 0) {
                json_t *a = json_array();
                for (size_t i = 0; i < n_al; i++)
                        json_array_append_new(
                            a, json_pack("{s:o,s:s}", "memberID", hex_id(al[i].member_id), "alarm",
                                         al[i].type == ETCD_ALARM_NOSPACE   ? "NOSPACE"
                                         : al[i].type == ETCD_ALARM_CORRUPT ? "CORRUPT"
                                                                            : "NONE"));
                add_json(b, xstrdup("etcd/alarms.json"), a);
                free(al);
        } else if (c) {
                _cleanup_free_ char *e = etcd_error(c, r);
                add(b, FILE_OTHER, xstrdup("etcd/alarms.error.txt"),
                    xasprintf("the alarm list: %s", e));
        }
        etcd_client_free(c);
}

/* One member's folder: its status, metrics, log and machine, or error.txt for what failed. */
static void collect_member(bundle *b, const conn *k, const state_member *m, target *t,
                           const etcd_cluster *spec)
{
        strbuf errors = STRBUF_INIT;
        const char *name = m->name;
        if (isempty(m->client_url))
                sb_printf(&errors, "status: no client URL recorded for the member\n");
        else {
                _cleanup_free_ char *first = xstrndup(m->client_url, strcspn(m->client_url, ","));
                etcd_client *c = NULL;
                etcd_endpoint_status *st = NULL;
                int r = client_for(k, first, false, &c);
                if (r >= 0)
                        r = etcd_status(c, NULL, &st);
                bool answered = r >= 0;
                if (r >= 0) {
                        add_json(b, xasprintf("members/%s/status.json", name),
                                 endpoint_status_json(st));
                        etcd_endpoint_status_free(st);
                } else {
                        _cleanup_free_ char *e = etcd_error(c, r);
                        sb_printf(&errors, "status (%s): %s", first, e);
                        /* a member that answers nothing is not waited on twice */
                        answered = r != ETCD_ERR_UNREACHABLE && r != ETCD_ERR_TIMEOUT;
                }
                etcd_client_free(c);

                etcd_health_opts ho = {
                    .timeout_ms = BUNDLE_STEP_TIMEOUT_MS,
                    .tls = {.ca_file = k->ca, .cert_file = k->cert, .key_file = k->key}};
                char *text = NULL, *why = NULL;
                if (!answered)
                        sb_printf(&errors, "metrics: not asked: the member did not answer\n");
                else if (etcd_member_metrics(first, &ho, BUNDLE_METRICS_MAX, &text, &why) >= 0)
                        add(b, FILE_METRICS, xasprintf("members/%s/metrics.txt", name), text);
                else
                        sb_printf(&errors, "metrics: %s\n", why);
                free(why);
        }
        if (!t || !spec)
                sb_printf(&errors, "log: no target opened for the cluster\n");
        else if (!t->ops->debug || !t->ops->debug->member_logs)
                add(b, FILE_OTHER, xasprintf("members/%s/log.txt", name),
                    xasprintf("the %s target keeps no log of its members that gitcd can read\n",
                              t->ops->name));
        else {
                char *text = NULL, *from = NULL;
                if (t->ops->debug->member_logs(t, spec, name, BUNDLE_LOG_MAX, &text, &from) >= 0) {
                        strbuf sb = STRBUF_INIT;
                        sb_printf(&sb, "# from %s\n", from);
                        sb_append(&sb, text);
                        add(b, FILE_LOG, xasprintf("members/%s/log.txt", name), sb_detach(&sb));
                        free(text);
                        free(from);
                } else
                        sb_printf(&errors, "log: %s\n", target_last_error(t));
        }
        if (t && spec && t->ops->debug && t->ops->debug->machine_facts) {
                char *text = NULL;
                if (t->ops->debug->machine_facts(t, spec, name, BUNDLE_FACTS_MAX, &text) >= 0)
                        add(b, FILE_OTHER, xasprintf("members/%s/machine.txt", name), text);
                else
                        sb_printf(&errors, "machine: %s\n", target_last_error(t));
        }
        if (errors.len)
                add(b, FILE_OTHER, xasprintf("members/%s/error.txt", name), sb_detach(&errors));
        sb_release(&errors);
}

/* ---- what gitcd knows ---- */

static json_t *scrubbed(const char *json)
{
        if (!json)
                return json_null();
        _cleanup_free_ char *s = state_scrub_json(json);
        json_t *j = s ? json_loads(s, 0, NULL) : NULL;
        return j ? j : json_string("[not valid JSON: left out]");
}

static void collect_gitcd(bundle *b, state_db *db, const state_cluster *sc,
                          bundle_status_fn status_json_fn)
{
        add_json(b, xstrdup("gitcd/status.json"),
                 status_json_fn ? status_json_fn(db, sc->name) : json_null());
        add_json(b, xstrdup("cluster/spec.json"), scrubbed(state_cluster_spec_json(sc)));

        state_audit_list al = {0};
        state_audit_filter f = {.cluster = sc->name, .limit = BUNDLE_AUDIT_EVENTS};
        json_t *a = json_array();
        if (state_audit_query(db, &f, &al) >= 0)
                for (size_t i = 0; i < al.n; i++) {
                        const state_audit_event *e = al.items[i];
                        json_t *o = json_object();
                        json_object_set_new(o, "id", json_integer(e->id));
                        json_object_set_new(o, "time", json_time(e->time_ms));
                        json_object_set_new(o, "action", json_str(e->action));
                        json_object_set_new(o, "outcome", json_str(e->outcome));
                        json_object_set_new(o, "reason", json_str(e->reason));
                        json_object_set_new(o, "commit", json_str(e->commit));
                        json_object_set_new(o, "author", json_str(e->author));
                        json_object_set_new(o, "before", scrubbed(e->before_json));
                        json_object_set_new(o, "after", scrubbed(e->after_json));
                        json_object_set_new(o, "duration_ms", json_integer(e->duration_ms));
                        json_array_append_new(a, o);
                }
        state_audit_list_release(&al);
        add_json(b, xstrdup("gitcd/audit.json"), a);

        state_op_list ol = {0};
        json_t *j = json_array();
        if (state_op_list_pending(db, sc->name, &ol) >= 0)
                for (size_t i = 0; i < ol.n; i++) {
                        const state_op *op = ol.items[i];
                        json_array_append_new(
                            j, json_pack("{s:I,s:s,s:o,s:o,s:o,s:s}", "id", (json_int_t)op->id,
                                         "kind", op->kind, "subject", json_str(op->subject),
                                         "payload", scrubbed(op->payload_json), "started",
                                         json_time(op->started_ms), "state",
                                         state_op_state_to_string(op->state)));
                }
        state_op_list_release(&ol);
        add_json(b, xstrdup("gitcd/journal.json"), j);
}

static const char readme_files[] =
    "Files (docs/incidents.md says more):\n"
    "  README.txt               this file\n"
    "  cluster/spec.json        the desired spec gitcd recorded, normalized, secrets redacted\n"
    "  gitcd/status.json        the cluster as `gitcd status NAME -o json` shows it (conditions,\n"
    "                           members as last observed, recovery, repairs)\n"
    "  gitcd/audit.json         the cluster's last audit events, newest first\n"
    "  gitcd/journal.json       operations gitcd began and has not finished (in flight)\n"
    "  etcd/members.json        etcd's member list (IDs in hex), or members.error.txt\n"
    "  etcd/alarms.json         etcd's active alarms (NOSPACE, CORRUPT), or alarms.error.txt\n"
    "  members/NAME/status.json the member's status: version, db size, raft index, raft term,\n"
    "                           applied index, leader, errors\n"
    "  members/NAME/metrics.txt the member's /metrics (Prometheus text)\n"
    "  members/NAME/log.txt     the member's last log lines, as its target keeps them\n"
    "  members/NAME/machine.txt (hosts target) disk errors in dmesg, the machine's clock offset\n"
    "  members/NAME/error.txt   what could not be collected from the member, and why\n";

static char *readme(const bundle_request *rq, int64_t now, const state_member_list *ml)
{
        char when[40];
        format_rfc3339(now, when, sizeof(when));
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, "gitcd incident bundle\n\ncluster:  %s\ntaken:    %s\nwhy:      %s\n",
                  rq->cluster, when, rq->reason ? rq->reason : "asked for");
        sb_printf(&sb, "gitcd:    %s\ntarget:   %s\nmembers:  ", GITCD_VERSION,
                  rq->t ? rq->t->ops->name : "(not opened)");
        for (size_t i = 0; i < ml->n; i++)
                sb_printf(&sb, "%s%s%s", i ? ", " : "", ml->items[i]->name,
                          ml->items[i]->dormant ? " (dormant)" : "");
        sb_printf(&sb,
                  "\n\nEach step had a deadline of %d ms (logs: the target's own); a member "
                  "that did not answer\nhas an error.txt in its folder. Logs are cut to "
                  "their last %u bytes, metrics to %u,\nthe whole to %u bytes before "
                  "compression (logs first). Secrets are redacted.\n\n",
                  BUNDLE_STEP_TIMEOUT_MS, BUNDLE_LOG_MAX, BUNDLE_METRICS_MAX, BUNDLE_MAX_BYTES);
        sb_append(&sb, readme_files);
        return sb_detach(&sb);
}

/* ---- the archive ---- */

/* The libarchive functions a bundle uses, typed by archive.h, loaded on first use. */
#define ARCHIVE_FUNCS(X)                                                                           \
        X(archive_write_new)                                                                       \
        X(archive_write_add_filter_gzip)                                                           \
        X(archive_write_set_format_pax_restricted)                                                 \
        X(archive_write_open_fd)                                                                   \
        X(archive_write_header)                                                                    \
        X(archive_write_data)                                                                      \
        X(archive_write_close)                                                                     \
        X(archive_write_free)                                                                      \
        X(archive_error_string)                                                                    \
        X(archive_entry_new)                                                                       \
        X(archive_entry_free)                                                                      \
        X(archive_entry_set_pathname)                                                              \
        X(archive_entry_set_filetype)                                                              \
        X(archive_entry_set_perm)                                                                  \
        X(archive_entry_set_size)                                                                  \
        X(archive_entry_set_mtime)
#define ARCHIVE_FIELD(f) __typeof__(f) *f;
#define ARCHIVE_NAME(f)  #f,

static struct {
        ARCHIVE_FUNCS(ARCHIVE_FIELD)
} la;
static pthread_once_t la_once = PTHREAD_ONCE_INIT;
static char *la_error; /* why libarchive could not be loaded, or NULL */

static void la_load(void)
{
        static const char *const names[] = {ARCHIVE_FUNCS(ARCHIVE_NAME)};
        void *fns[ARRAY_SIZE(names)];
        if (dload("libarchive.so.13", names, ARRAY_SIZE(names), fns, &la_error) < 0)
                return;
        size_t i = 0;
#define ARCHIVE_SET(f) la.f = (__typeof__(f) *)fns[i++];
        ARCHIVE_FUNCS(ARCHIVE_SET)
#undef ARCHIVE_SET
        assert(i == ARRAY_SIZE(names));
}

static int write_archive(const bundle *b, const char *top, int64_t now, const char *path,
                         char **ret_error)
{
        pthread_once(&la_once, la_load);
        if (la_error) {
                *ret_error = xasprintf("%s (the libarchive13 package)", la_error);
                return -ENOENT;
        }
        _cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                *ret_error = xasprintf("%s: %s", tmp, strerror(errno));
                return -errno;
        }
        struct archive *a = la.archive_write_new();
        int r = 0;
        if (la.archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
            la.archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            la.archive_write_open_fd(a, fd) != ARCHIVE_OK)
                r = -EIO;
        for (size_t i = 0; r == 0 && i < b->n; i++) {
                struct archive_entry *e = la.archive_entry_new();
                _cleanup_free_ char *name = xasprintf("%s/%s", top, b->files[i].name);
                la.archive_entry_set_pathname(e, name);
                la.archive_entry_set_filetype(e, AE_IFREG);
                la.archive_entry_set_perm(e, 0600);
                la.archive_entry_set_size(e, (la_int64_t)b->files[i].len);
                la.archive_entry_set_mtime(e, (time_t)(now / 1000), 0);
                if (la.archive_write_header(a, e) != ARCHIVE_OK ||
                    la.archive_write_data(a, b->files[i].data, b->files[i].len) !=
                        (la_ssize_t)b->files[i].len)
                        r = -EIO;
                la.archive_entry_free(e);
        }
        if (r == 0 && la.archive_write_close(a) != ARCHIVE_OK)
                r = -EIO;
        if (r < 0)
                *ret_error = xasprintf("%s: %s", tmp,
                                       la.archive_error_string(a) ? la.archive_error_string(a)
                                                                  : "cannot be written");
        la.archive_write_free(a);
        if (r == 0 && fsync(fd) < 0) {
                r = -errno;
                *ret_error = xasprintf("%s: %s", tmp, strerror(errno));
        }
        close(fd);
        if (r == 0 && rename(tmp, path) < 0) {
                r = -errno;
                *ret_error = xasprintf("%s: %s", path, strerror(errno));
        }
        if (r < 0)
                (void)unlink(tmp);
        return r;
}

/* "ns_name-": the start of the cluster's bundles' names in <state dir>/bundles. */
static char *name_prefix(const char *cluster)
{
        char *p = xasprintf("%s-", cluster);
        char *slash = strchr(p, '/');
        if (slash)
                *slash = '_';
        return p;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int bundle_prune(const char *dir, const char *cluster, size_t keep)
{
        _cleanup_free_ char *prefix = name_prefix(cluster);
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        char **names = NULL;
        size_t n = 0, alloc = 0;
        for (struct dirent *de; (de = readdir(d));) {
                size_t len = strlen(de->d_name);
                /* ns_name-YYYYmmddTHHMMSS.mmmZ.tar.gz: the time right after the prefix */
                if (!strneq(de->d_name, prefix, strlen(prefix)) || len < 7 ||
                    !streq(de->d_name + len - 7, ".tar.gz") ||
                    !(de->d_name[strlen(prefix)] >= '0' && de->d_name[strlen(prefix)] <= '9'))
                        continue;
                names = xgrow(names, &alloc, n + 1, sizeof(*names));
                names[n++] = xstrdup(de->d_name);
        }
        closedir(d);
        if (n)
                qsort(names, n, sizeof(*names), cmp_str); /* oldest first: the names sort by time */
        int deleted = 0;
        for (size_t i = 0; i < n; i++) {
                if (i + keep < n) {
                        _cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]);
                        if (unlink(p) == 0)
                                deleted++;
                }
                free(names[i]);
        }
        free(names);
        return deleted;
}

int bundle_take(const bundle_request *rq, char **ret_path, char **ret_error)
{
        int64_t now = now_wall_ms();
        state_cluster *sc = NULL;
        int r = state_cluster_get(rq->db, rq->cluster, &sc);
        if (r < 0) {
                *ret_error = r == -ENOENT
                                 ? xasprintf("no cluster %s in the state store", rq->cluster)
                                 : xstrdup(state_last_error());
                return r;
        }
        state_member_list ml = {0};
        if (state_member_list_for(rq->db, rq->cluster, false, &ml) < 0)
                ml = (state_member_list){0};
        etcd_cluster *spec = spec_from_json_text(state_cluster_spec_json(sc), rq->cluster);

        bundle b = {0};
        conn k = {0};
        strbuf notes = STRBUF_INIT;
        if (rq->t && spec && target_client_tls(rq->t, spec, &k.ca, &k.cert, &k.key) < 0)
                sb_printf(&notes, "gitcd's client certificate: %s\n", target_last_error(rq->t));
        if (auth_credentials(rq->state_dir, rq->cluster, &k.cr) < 0)
                sb_printf(&notes, "root's credentials could not be read: etcd asked without\n");
        b.password = k.cr.password;
        b.fallback_password = k.cr.fallback_password;

        add(&b, FILE_OTHER, xstrdup("README.txt"), readme(rq, now, &ml));
        collect_gitcd(&b, rq->db, sc, rq->status_json);
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < ml.n; i++)
                if (!ml.items[i]->dormant && !isempty(ml.items[i]->client_url))
                        sb_printf(&eps, "%s%.*s", eps.len ? "," : "",
                                  (int)strcspn(ml.items[i]->client_url, ","),
                                  ml.items[i]->client_url);
        if (eps.len)
                collect_cluster(&b, &k, sb_str(&eps));
        else
                add(&b, FILE_OTHER, xstrdup("etcd/error.txt"),
                    xstrdup("no member has a client URL recorded: etcd was not asked\n"));
        sb_release(&eps);
        for (size_t i = 0; i < ml.n; i++)
                collect_member(&b, &k, ml.items[i], rq->t, spec);
        if (notes.len)
                add(&b, FILE_OTHER, xstrdup("gitcd/notes.txt"), sb_detach(&notes));
        sb_release(&notes);
        redact_all(&b);
        bound(&b);

        /* 20261128T111400.123Z: sorts by time, no ':' in a file name */
        char stamp[40];
        time_t secs = (time_t)(now / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        size_t sl = strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
        snprintf(stamp + sl, sizeof(stamp) - sl, ".%03dZ", (int)(now % 1000));
        strbuf st = STRBUF_INIT;
        sb_append(&st, stamp);
        _cleanup_free_ char *prefix = name_prefix(rq->cluster);
        _cleanup_free_ char *top = xasprintf("gitcd-bundle-%s%s", prefix, sb_str(&st));
        _cleanup_free_ char *dir = NULL, *path = NULL;
        if (rq->path)
                path = xstrdup(rq->path);
        else {
                dir = xasprintf("%s/bundles", rq->state_dir);
                if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
                        r = -errno;
                        *ret_error = xasprintf("%s: %s", dir, strerror(errno));
                }
                path = xasprintf("%s/%s%s.tar.gz", dir, prefix, sb_str(&st));
        }
        sb_release(&st);
        if (r >= 0)
                r = write_archive(&b, top, now, path, ret_error);
        if (r >= 0 && dir)
                (void)bundle_prune(dir, rq->cluster, BUNDLE_KEEP);
        if (r >= 0)
                *ret_path = TAKE_PTR(path);
        bundle_release(&b);
        free(k.ca);
        free(k.cert);
        free(k.key);
        auth_creds_release(&k.cr);
        etcd_cluster_free(spec);
        state_member_list_release(&ml);
        state_cluster_free(sc);
        return r < 0 ? r : 0;
}

/* ---- automatic bundles (gitcd run) ---- */

static const state_condition *condition(const state_cluster *sc, const char *type)
{
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq_ptr(sc->conditions[i].type, type))
                        return &sc->conditions[i];
        return NULL;
}

static bool condition_is(const state_cluster *sc, const char *type, const char *status)
{
        const state_condition *c = condition(sc, type);
        return c && streq_ptr(c->status, status);
}

char *bundle_trouble(const state_cluster *sc)
{
        strbuf sb = STRBUF_INIT;
        const state_condition *av = condition(sc, "Available");
        if (av && streq_ptr(av->status, "False") && streq_ptr(av->reason, "QuorumLost"))
                sb_append(&sb, "QuorumLost");
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq_ptr(sc->conditions[i].reason, "UpgradeFailed") &&
                    !streq_ptr(sc->conditions[i].status, "Unknown")) {
                        sb_printf(&sb, "%sUpgradeFailed", sb.len ? "," : "");
                        break;
                }
        if (condition_is(sc, "CorruptAlarm", "True"))
                sb_printf(&sb, "%sCorruptAlarm", sb.len ? "," : "");
        if (condition_is(sc, "NoSpaceAlarm", "True"))
                sb_printf(&sb, "%sNoSpaceAlarm", sb.len ? "," : "");
        if (condition_is(sc, "DataConsistent", "False"))
                sb_printf(&sb, "%sDataInconsistent", sb.len ? "," : "");
        if (!sb.len) {
                sb_release(&sb);
                return NULL;
        }
        return sb_detach(&sb);
}

/* Whether the comma-separated list has word. */
static bool has_word(const char *list, const char *word, size_t n)
{
        for (const char *p = list; p && *p;) {
                size_t len = strcspn(p, ",");
                if (len == n && strneq(p, word, n))
                        return true;
                p += len;
                if (*p == ',')
                        p++;
        }
        return false;
}

typedef struct bundle_job {
        bundler *owner;
        char *cluster;
        char *trouble;
        target *t;
        struct ops_notifier *notifier;
} bundle_job;

struct bundler {
        char *state_path, *state_dir;
        bundle_status_fn status_json;
        strmap seen; /* cluster -> index in words */
        char **words;
        size_t n_words, alloc_words;
        pthread_mutex_t lock;
        bool running; /* a worker was started and not joined */
        bool busy;    /* that worker is still at work */
        pthread_t thread;
};

bundler *bundler_new(const char *state_path, const char *state_dir, bundle_status_fn status_json)
{
        bundler *b = XNEW(bundler);
        b->status_json = status_json;
        b->state_path = xstrdup(state_path);
        b->state_dir = xstrdup(state_dir);
        pthread_mutex_init(&b->lock, NULL);
        return b;
}

static void bundler_join(bundler *b)
{
        if (b->running) {
                pthread_join(b->thread, NULL);
                b->running = false;
        }
}

void bundler_free(bundler *b)
{
        if (!b)
                return;
        bundler_join(b);
        pthread_mutex_destroy(&b->lock);
        for (size_t i = 0; i < b->n_words; i++)
                free(b->words[i]);
        free(b->words);
        strmap_release(&b->seen);
        free(b->state_path);
        free(b->state_dir);
        free(b);
}

/* The slot of cluster's last trouble (NULL in it: none). */
static char **seen_slot(bundler *b, const char *cluster)
{
        size_t i;
        if (!strmap_get(&b->seen, cluster, &i)) {
                b->words = xgrow(b->words, &b->alloc_words, b->n_words + 1, sizeof(char *));
                i = b->n_words++;
                b->words[i] = NULL;
                strmap_put(&b->seen, cluster, i);
        }
        return &b->words[i];
}

char *bundler_due(bundler *b, state_db *db, const char *cluster)
{
        state_cluster *sc = NULL;
        if (state_cluster_get(db, cluster, &sc) < 0)
                return NULL;
        char *now = bundle_trouble(sc);
        state_cluster_free(sc);
        char **slot = seen_slot(b, cluster);
        bool fresh = false;
        for (const char *p = now; p && *p;) {
                size_t len = strcspn(p, ",");
                if (!has_word(*slot, p, len))
                        fresh = true;
                p += len + (p[len] == ',');
        }
        pthread_mutex_lock(&b->lock);
        bool busy = b->busy;
        pthread_mutex_unlock(&b->lock);
        if (fresh && busy) {
                free(now); /* asked again after the next pass */
                return NULL;
        }
        /* what it shows now is what the next bundle is compared with: a word gone ends its episode */
        str_assign(slot, now ? xstrdup(now) : NULL);
        if (!fresh) {
                free(now);
                return NULL;
        }
        return now;
}

static void *bundle_worker(void *userdata)
{
        bundle_job *job = userdata;
        bundler *b = job->owner;
        state_db *db = NULL;
        char *path = NULL, *error = NULL;
        _cleanup_free_ char *reason =
            xasprintf("taken by gitcd run: the cluster shows %s", job->trouble);
        int r = state_open(b->state_path, STATE_OPEN_READ_WRITE, &db);
        if (r < 0)
                error = xstrdup(state_last_error());
        else {
                bundle_request rq = {.db = db,
                                     .state_dir = b->state_dir,
                                     .cluster = job->cluster,
                                     .t = job->t,
                                     .reason = reason,
                                     .status_json = b->status_json};
                r = bundle_take(&rq, &path, &error);
        }
        if (r < 0)
                log_warn("%s: the incident bundle for %s could not be written: %s", job->cluster,
                         job->trouble, error);
        else
                log_warn("%s: incident bundle for %s written: %s", job->cluster, job->trouble,
                         path);
        if (db) {
                json_t *after =
                    r < 0 ? json_pack("{s:s}", "error", error) : json_pack("{s:s}", "path", path);
                _cleanup_free_ char *after_json = json_dumps(after, JSON_COMPACT);
                json_decref(after);
                state_audit_event ev = {.time_ms = now_wall_ms(),
                                        .cluster = job->cluster,
                                        .action = "debug.bundle",
                                        .reason = reason,
                                        .after_json = after_json,
                                        .outcome = r < 0 ? "failure" : "success"};
                (void)state_audit_append(db, &ev, NULL);
                if (r >= 0) {
                        _cleanup_free_ char *message =
                            xasprintf("an incident bundle was taken (%s): %s", job->trouble, path);
                        ops_event ne = {.severity = OPS_SEV_WARNING,
                                        .event = "debug.bundle",
                                        .cluster = job->cluster,
                                        .message = message,
                                        .bundle = path};
                        (void)ops_notify(job->notifier, db, &ne);
                }
                state_close(db);
        }
        free(path);
        free(error);
        target_free(job->t);
        free(job->cluster);
        free(job->trouble);
        free(job);
        pthread_mutex_lock(&b->lock);
        b->busy = false;
        pthread_mutex_unlock(&b->lock);
        return NULL;
}

void bundler_start(bundler *b, const char *cluster, char *trouble, target *t,
                   struct ops_notifier *n)
{
        bundler_join(b); /* the last one ended: bundler_due saw it free */
        bundle_job *job = XNEW(bundle_job);
        *job = (bundle_job){
            .owner = b, .cluster = xstrdup(cluster), .trouble = trouble, .t = t, .notifier = n};
        b->busy = true;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old); /* signals stay with the loop */
        int k = pthread_create(&b->thread, NULL, bundle_worker, job);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (k != 0) {
                log_warn("%s: no thread for the incident bundle: %s", cluster, strerror(k));
                b->busy = false;
                target_free(t);
                free(job->cluster);
                free(job->trouble);
                free(job);
                return;
        }
        b->running = true;
}
