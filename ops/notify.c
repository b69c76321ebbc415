/*
 * Notifications (see notify.h).
 *
 * Decisions:
 * - The payload is built when the event is queued and stored as the exact
 *   request body; the signature is computed when it is sent, from the
 *   webhook's secret file read at that moment. So a secret never sits in
 *   the state store, and a rotated secret applies to what is still queued.
 * - Filters apply when queuing: a row exists only for a webhook that wants
 *   the event.
 * - The destination is not: a row names its webhook (or its source's
 *   commit statuses) and, for a commit status, its commit; the URL is read
 *   from the configuration in force at each attempt (a reload may move a
 *   webhook or a forge API: retries follow it, never the old host), and a
 *   row whose destination was removed is dropped with an audit line.
 * - Backoff doubles from 1s up to 5 minutes; a row older than the webhook's
 *   maxAge (24h by default) expires. Any 2xx answer is a delivery; anything
 *   else, or no answer within 10s, is retried.
 * - The sender opens the store itself and never holds a transaction across
 *   a request, so the daemon's writes never wait for a receiver.
 * - Delivered and expired rows are kept 7 days (to look at with sqlite3),
 *   then forgotten.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>

#include "ops/notify.h"
#include "state/notify-queue.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/http.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define SEND_TIMEOUT_S 10
#define MAX_BACKOFF_MS (5 * 60 * 1000)
#define BATCH          16
#define KEEP_DONE_MS   (7LL * 24 * 3600 * 1000) /* delivered or expired rows kept this long */
#define PRUNE_EVERY_MS (10LL * 60 * 1000)

typedef struct hook {
        char *name;
        char *url;
        char *secret_file;
        char *ca_file;
        ops_webhook_format format;
        ops_severity min_severity;
        char **clusters;
        size_t n_clusters;
        int64_t max_age_ms;
        /* Commit statuses of a source ("commit-status/<source>"): */
        ops_forge forge; /* OPS_FORGE_NONE for a webhook */
        char *token_file;
        char *repository;
        char *context;
} hook;

struct ops_notifier {
        char *state_path;
        pthread_t thread;
        bool started;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool woken;
        atomic_bool stop;
        hook *hooks; /* under lock */
        size_t n_hooks;
};

static void hooks_free(hook *h, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(h[i].name);
                free(h[i].url);
                free(h[i].secret_file);
                free(h[i].ca_file);
                free(h[i].token_file);
                free(h[i].repository);
                free(h[i].context);
                for (size_t j = 0; j < h[i].n_clusters; j++)
                        free(h[i].clusters[j]);
                free(h[i].clusters);
        }
        free(h);
}

static hook *hooks_copy(const ops_config *cfg, size_t *ret_n)
{
        hook *h = xcalloc(cfg->n_webhooks + cfg->n_sources + 1, sizeof(hook));
        for (size_t i = 0; i < cfg->n_webhooks; i++) {
                const ops_webhook *w = &cfg->webhooks[i];
                h[i].name = xstrdup(w->name);
                h[i].url = xstrdup(w->url);
                h[i].secret_file = xstrdup_null(w->secret_file);
                h[i].ca_file = xstrdup_null(w->ca_file);
                h[i].format = w->format;
                h[i].min_severity = w->min_severity;
                h[i].max_age_ms = w->max_age_ms > 0 ? w->max_age_ms : 24LL * 3600 * 1000;
                h[i].clusters = xcalloc(w->n_clusters + 1, sizeof(char *));
                for (size_t j = 0; j < w->n_clusters; j++)
                        h[i].clusters[h[i].n_clusters++] = xstrdup(w->clusters[j]);
        }
        size_t n = cfg->n_webhooks;
        for (size_t i = 0; i < cfg->n_sources; i++) {
                const ops_commit_status *cs = &cfg->sources[i].status;
                if (cs->forge == OPS_FORGE_NONE)
                        continue;
                h[n].name = xasprintf("commit-status/%s", cfg->sources[i].name);
                h[n].url = xstrdup(cs->api);
                h[n].forge = cs->forge;
                h[n].token_file = xstrdup(cs->token_file);
                h[n].repository = xstrdup(cs->repository);
                h[n].context = xstrdup(cs->context);
                h[n].max_age_ms = 24LL * 3600 * 1000;
                n++;
        }
        *ret_n = n;
        return h;
}

static bool wants(const hook *h, const ops_event *ev)
{
        if (ev->severity < h->min_severity)
                return false;
        if (h->n_clusters == 0)
                return true;
        for (size_t i = 0; ev->cluster && i < h->n_clusters; i++)
                if (streq(h->clusters[i], ev->cluster))
                        return true;
        return false;
}

static char *payload(const hook *h, const ops_event *ev, int64_t now_ms)
{
        char when[64];
        format_rfc3339(now_ms, when, sizeof(when));
        json_t *o = json_object();
        if (h->format == OPS_WEBHOOK_SLACK) {
                const char *icon = ev->severity == OPS_SEV_CRITICAL  ? ":red_circle:"
                                   : ev->severity == OPS_SEV_WARNING ? ":warning:"
                                                                     : ":white_check_mark:";
                _cleanup_free_ char *text = xasprintf(
                    "%s *%s* %s: %s%s%s", icon, ev->cluster ? ev->cluster : "gitcd", ev->event,
                    ev->message ? ev->message : "", ev->bundle ? "\nincident bundle: " : "",
                    ev->bundle ? ev->bundle : "");
                json_object_set_new(o, "text", json_string(text));
        } else {
                json_object_set_new(o, "version", json_string("gitcd.io/v1"));
                json_object_set_new(o, "event", json_string(ev->event));
                json_object_set_new(o, "severity", json_string(ops_severity_name(ev->severity)));
                if (ev->cluster) {
                        const char *slash = strchr(ev->cluster, '/');
                        json_object_set_new(o, "cluster", json_string(ev->cluster));
                        if (slash) {
                                json_object_set_new(
                                    o, "namespace",
                                    json_stringn(ev->cluster, (size_t)(slash - ev->cluster)));
                                json_object_set_new(o, "name", json_string(slash + 1));
                        }
                }
                json_object_set_new(o, "message", json_string(ev->message ? ev->message : ""));
                if (ev->commit)
                        json_object_set_new(o, "commit", json_string(ev->commit));
                if (ev->bundle)
                        json_object_set_new(o, "bundle", json_string(ev->bundle));
                json_object_set_new(o, "time", json_string(when));
        }
        char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(o);
        return s;
}

static void wake(ops_notifier *n)
{
        pthread_mutex_lock(&n->lock);
        n->woken = true;
        pthread_cond_signal(&n->wake);
        pthread_mutex_unlock(&n->lock);
}

int ops_notify(ops_notifier *n, state_db *db, const ops_event *ev)
{
        if (!n)
                return 0;
        int64_t now = now_wall_ms();
        int queued = 0, k = 0;
        pthread_mutex_lock(&n->lock);
        for (size_t i = 0; i < n->n_hooks && k >= 0; i++) {
                const hook *h = &n->hooks[i];
                if (h->forge != OPS_FORGE_NONE || !wants(h, ev))
                        continue;
                _cleanup_free_ char *body = payload(h, ev, now);
                state_notification row = {
                    .webhook = h->name,
                    .url = h->url,
                    .event = (char *)ev->event,
                    .cluster = (char *)ev->cluster,
                    .severity = (char *)ops_severity_name(ev->severity),
                    .payload = body,
                    .created_ms = now,
                    .expires_ms = now + h->max_age_ms,
                    .next_attempt_ms = now,
                };
                k = state_notify_enqueue(db, &row, NULL);
                if (k >= 0)
                        queued++;
        }
        pthread_mutex_unlock(&n->lock);
        if (k < 0) {
                log_warn("notification %s could not be queued: %s", ev->event, state_last_error());
                return k;
        }
        if (queued)
                wake(n);
        return queued;
}

/* GitLab takes the project as one path segment: "group/name" -> "group%2Fname". */
static char *url_segment(const char *s)
{
        strbuf sb = STRBUF_INIT;
        for (const char *p = s; *p; p++) {
                unsigned char ch = (unsigned char)*p;
                if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || strchr("-._~", ch))
                        sb_appendc(&sb, (char)ch);
                else
                        sb_printf(&sb, "%%%02X", ch);
        }
        return sb_detach(&sb);
}

/* Where the status of commit goes on h's forge (its API and repository as configured now). */
static char *commit_status_url(const hook *h, const char *commit)
{
        if (h->forge == OPS_FORGE_GITLAB) {
                _cleanup_free_ char *project = url_segment(h->repository);
                return xasprintf("%s/projects/%s/statuses/%s", h->url, project, commit);
        }
        return xasprintf("%s/repos/%s/statuses/%s", h->url, h->repository, commit);
}

int ops_notify_commit_status(ops_notifier *n, state_db *db, const char *source_name,
                             const char *commit, const char *cluster, ops_commit_state state,
                             const char *description)
{
        if (!n || !commit || !*commit)
                return 0;
        _cleanup_free_ char *name = xasprintf("commit-status/%s", source_name);
        int64_t now = now_wall_ms();
        int k = 0, queued = 0;
        pthread_mutex_lock(&n->lock);
        for (size_t i = 0; i < n->n_hooks && k >= 0; i++) {
                const hook *h = &n->hooks[i];
                if (h->forge == OPS_FORGE_NONE || !streq(h->name, name))
                        continue;
                static const char *const github[] = {"success", "failure", "pending"};
                static const char *const gitlab[] = {"success", "failed", "running"};
                _cleanup_free_ char *ctx = xasprintf("%s/%s", h->context, cluster);
                /* GitHub cuts descriptions at 140 characters. */
                _cleanup_free_ char *desc = xstrndup(description ? description : "", 140);
                json_t *o = json_object();
                _cleanup_free_ char *url = commit_status_url(h, commit);
                if (h->forge == OPS_FORGE_GITLAB) {
                        json_object_set_new(o, "state", json_string(gitlab[state]));
                        json_object_set_new(o, "name", json_string(ctx));
                } else {
                        json_object_set_new(o, "state", json_string(github[state]));
                        json_object_set_new(o, "context", json_string(ctx));
                }
                json_object_set_new(o, "description", json_string(desc));
                _cleanup_free_ char *body = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
                json_decref(o);
                state_notification row = {
                    .webhook = h->name,
                    .url = url,
                    .commit = (char *)commit,
                    .event = "commit.status",
                    .cluster = (char *)cluster,
                    .severity = "info",
                    .payload = body,
                    .created_ms = now,
                    .expires_ms = now + h->max_age_ms,
                    .next_attempt_ms = now,
                };
                k = state_notify_enqueue(db, &row, NULL);
                queued += k >= 0;
        }
        pthread_mutex_unlock(&n->lock);
        if (k < 0)
                return k;
        if (queued)
                wake(n);
        return queued;
}

bool ops_config_has_notifications(const ops_config *cfg)
{
        if (cfg->n_webhooks > 0)
                return true;
        for (size_t i = 0; i < cfg->n_sources; i++)
                if (cfg->sources[i].status.forge != OPS_FORGE_NONE)
                        return true;
        return false;
}

/* ---- the sender ----------------------------------------------------------- */

static int abort_on_stop(void *userdata, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
        (void)a, (void)b, (void)c, (void)d;
        ops_notifier *n = userdata;
        return atomic_load(&n->stop) ? 1 : 0;
}

static size_t discard(char *p, size_t size, size_t nmemb, void *userdata)
{
        (void)p, (void)userdata;
        return size * nmemb;
}

/* Post one row to url; 0 when delivered, else -errno and a reason (no secret in it). */
static int post(ops_notifier *n, const hook *h, const state_notification *row, const char *url,
                char **ret_error)
{
        struct curl_slist *hdrs = NULL;
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        _cleanup_free_ char *delivery = xasprintf("X-Gitcd-Delivery: %lld", (long long)row->id);
        _cleanup_free_ char *event = xasprintf("X-Gitcd-Event: %s", row->event);
        hdrs = curl_slist_append(hdrs, delivery);
        hdrs = curl_slist_append(hdrs, event);
        _cleanup_free_ char *sig = NULL;
        _cleanup_free_ char *auth = NULL;
        if (h->forge != OPS_FORGE_NONE) {
                char *token = NULL;
                size_t len = 0;
                int k = read_secret_file(h->token_file, "token file", 64 * 1024, &token, &len,
                                         ret_error);
                if (k < 0) {
                        curl_slist_free_all(hdrs);
                        return k;
                }
                token[strcspn(token, "\r\n")] = 0;
                auth = xasprintf("%s%s",
                                 h->forge == OPS_FORGE_GITLAB  ? "PRIVATE-TOKEN: "
                                 : h->forge == OPS_FORGE_GITEA ? "Authorization: token "
                                                               : "Authorization: Bearer ",
                                 token);
                OPENSSL_cleanse(token, len);
                free(token);
                hdrs = curl_slist_append(hdrs, auth);
                if (h->forge == OPS_FORGE_GITHUB)
                        hdrs = curl_slist_append(hdrs, "Accept: application/vnd.github+json");
        } else if (h->secret_file) {
                char *secret = NULL;
                size_t len = 0;
                int k = read_secret_file(h->secret_file, "secret file", 64 * 1024, &secret, &len,
                                         ret_error);
                if (k < 0) {
                        curl_slist_free_all(hdrs);
                        return k;
                }
                while (len && (secret[len - 1] == '\n' || secret[len - 1] == '\r'))
                        len--;
                _cleanup_free_ char *hex =
                    hash_hmac_sha256_hex(secret, len, row->payload, strlen(row->payload));
                OPENSSL_cleanse(secret, len);
                free(secret);
                sig = xasprintf(OPS_SIGNATURE_HEADER ": sha256=%s", hex);
                hdrs = curl_slist_append(hdrs, sig);
        }
        /* Webhooks and forges are services outside: the environment's proxy (util/http.h). */
        http_opts o = {.proxy = HTTP_PROXY_ENV,
                       .connect_timeout_ms = 5000,
                       .timeout_ms = SEND_TIMEOUT_S * 1000,
                       .tls = {.ca_file = h->ca_file}};
        CURL *c = http_handle_new(&o);
        if (!c) {
                curl_slist_free_all(hdrs);
                *ret_error = xstrdup("cannot start a request");
                return -ENOMEM;
        }
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, row->payload);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_on_stop);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, n);
        CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(hdrs);
        if (auth)
                OPENSSL_cleanse(auth, strlen(auth));
        if (rc != CURLE_OK) {
                *ret_error = xstrdup(curl_easy_strerror(rc));
                return -EIO;
        }
        if (status < 200 || status > 299) {
                *ret_error = xasprintf("the receiver answered HTTP %ld", status);
                return -EIO;
        }
        return 0;
}

static int64_t backoff_ms(int attempts)
{
        int64_t ms = 1000;
        for (int i = 0; i < attempts && ms < MAX_BACKOFF_MS; i++)
                ms *= 2;
        return MIN(ms, (int64_t)MAX_BACKOFF_MS);
}

/* Find a webhook by name and copy what sending needs (the list may change meanwhile). */
static bool hook_get(ops_notifier *n, const char *name, hook *ret)
{
        bool found = false;
        pthread_mutex_lock(&n->lock);
        for (size_t i = 0; i < n->n_hooks; i++)
                if (streq(n->hooks[i].name, name)) {
                        *ret = (hook){.name = xstrdup(name),
                                      .url = xstrdup(n->hooks[i].url),
                                      .secret_file = xstrdup_null(n->hooks[i].secret_file),
                                      .ca_file = xstrdup_null(n->hooks[i].ca_file),
                                      .forge = n->hooks[i].forge,
                                      .token_file = xstrdup_null(n->hooks[i].token_file),
                                      .repository = xstrdup_null(n->hooks[i].repository)};
                        found = true;
                        break;
                }
        pthread_mutex_unlock(&n->lock);
        return found;
}

/*
 * A queued row that can no longer be sent (its webhook or its source's
 * commit statuses are no longer configured): expired, with an audit line,
 * so an operator who removed a destination sees what was not sent.
 */
static void drop(state_db *db, const state_notification *row, int64_t now, const char *why)
{
        log_warn("notification %lld (%s) to %s dropped: %s", (long long)row->id, row->event,
                 row->webhook, why);
        (void)state_notify_expire(db, row->id, now, why);
        _cleanup_free_ char *reason = xasprintf("notification %lld (%s) to %s dropped: %s",
                                                (long long)row->id, row->event, row->webhook, why);
        state_audit_event ev = {.time_ms = now,
                                .cluster = row->cluster,
                                .commit = row->commit,
                                .action = "notification.dropped",
                                .reason = reason,
                                .outcome = "dropped"};
        (void)state_audit_append(db, &ev, NULL);
}

/*
 * Where a queued row goes now: the destination is read from the
 * configuration in force at each attempt, never from the row, so a
 * webhook or forge API moved to another host is not retried at the old
 * one (with the new secret). NULL, with why, when it cannot be sent.
 */
static char *destination(const hook *h, const state_notification *row, const char **ret_why)
{
        if (h->forge == OPS_FORGE_NONE)
                return xstrdup(h->url);
        if (isempty(row->commit)) {
                *ret_why = "queued by an earlier gitcd without its commit, so its destination "
                           "cannot be read again";
                return NULL;
        }
        return commit_status_url(h, row->commit);
}

static void send_due(ops_notifier *n, state_db *db)
{
        state_notification_list due = {0};
        if (state_notify_due(db, now_wall_ms(), BATCH, &due) < 0) {
                log_debug("notifications: %s", state_last_error());
                return;
        }
        for (size_t i = 0; i < due.n && !atomic_load(&n->stop); i++) {
                const state_notification *row = due.items[i];
                int64_t now = now_wall_ms();
                if (now >= row->expires_ms) {
                        log_warn("notification %lld (%s) to webhook %s expired undelivered%s%s",
                                 (long long)row->id, row->event, row->webhook,
                                 row->last_error ? ": " : "",
                                 row->last_error ? row->last_error : "");
                        (void)state_notify_expire(db, row->id, now, NULL);
                        continue;
                }
                hook h = {0};
                if (!hook_get(n, row->webhook, &h)) {
                        drop(db, row, now,
                             strneq(row->webhook, "commit-status/", 14)
                                 ? "the source's commit statuses are no longer configured"
                                 : "the webhook is no longer configured");
                        continue;
                }
                const char *why = NULL;
                _cleanup_free_ char *url = destination(&h, row, &why);
                char *err = NULL;
                int k = url ? post(n, &h, row, url, &err) : -ENOENT;
                if (!url)
                        drop(db, row, now, why);
                now = now_wall_ms();
                if (k >= 0) {
                        log_debug("notification %lld (%s) delivered to webhook %s",
                                  (long long)row->id, row->event, row->webhook);
                        (void)state_notify_delivered(db, row->id, now);
                } else if (url && !atomic_load(&n->stop)) {
                        int64_t wait = backoff_ms(row->attempts);
                        if (row->attempts == 0)
                                log_warn("notification %lld (%s) to webhook %s failed: %s; "
                                         "retrying with backoff",
                                         (long long)row->id, row->event, row->webhook, err);
                        (void)state_notify_retry(db, row->id, now + wait, err);
                }
                free(err);
                free(h.name);
                free(h.url);
                free(h.secret_file);
                free(h.ca_file);
                free(h.token_file);
                free(h.repository);
        }
        state_notification_list_release(&due);
}

static void *sender(void *userdata)
{
        ops_notifier *n = userdata;
        state_db *db = NULL;
        int64_t pruned_ms = 0;
        while (!atomic_load(&n->stop)) {
                if (!db && state_open(n->state_path, STATE_OPEN_READ_WRITE, &db) < 0) {
                        log_warn("notifications: %s", state_last_error());
                        db = NULL;
                }
                int64_t wait_ms = 1000;
                if (db && now_mono_ms() - pruned_ms >= PRUNE_EVERY_MS) {
                        (void)state_notify_prune(db, now_wall_ms() - KEEP_DONE_MS);
                        pruned_ms = now_mono_ms();
                }
                if (db) {
                        send_due(n, db);
                        int64_t next = 0;
                        if (state_notify_next_due(db, &next) == 0)
                                wait_ms = MAX((int64_t)0, MIN(next - now_wall_ms(), (int64_t)1000));
                }
                pthread_mutex_lock(&n->lock);
                if (!n->woken && !atomic_load(&n->stop) && wait_ms > 0) {
                        struct timespec ts;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_sec += wait_ms / 1000;
                        ts.tv_nsec += (wait_ms % 1000) * 1000000L;
                        if (ts.tv_nsec >= 1000000000L) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000L;
                        }
                        pthread_cond_timedwait(&n->wake, &n->lock, &ts);
                }
                n->woken = false;
                pthread_mutex_unlock(&n->lock);
        }
        state_close(db);
        return NULL;
}

int ops_notifier_start(const char *state_path, const ops_config *cfg, ops_notifier **ret)
{
        ops_notifier *n = XNEW(ops_notifier);
        n->state_path = xstrdup(state_path);
        pthread_mutex_init(&n->lock, NULL);
        pthread_cond_init(&n->wake, NULL);
        n->hooks = hooks_copy(cfg, &n->n_hooks);
        int k = pthread_create(&n->thread, NULL, sender, n);
        if (k != 0) {
                ops_notifier_stop(n);
                return -k;
        }
        n->started = true;
        *ret = n;
        return 0;
}

void ops_notifier_configure(ops_notifier *n, const ops_config *cfg)
{
        if (!n)
                return;
        size_t count = 0;
        hook *h = hooks_copy(cfg, &count);
        pthread_mutex_lock(&n->lock);
        hooks_free(n->hooks, n->n_hooks);
        n->hooks = h;
        n->n_hooks = count;
        n->woken = true;
        pthread_cond_signal(&n->wake);
        pthread_mutex_unlock(&n->lock);
}

void ops_notifier_stop(ops_notifier *n)
{
        if (!n)
                return;
        atomic_store(&n->stop, true);
        wake(n);
        if (n->started)
                pthread_join(n->thread, NULL);
        hooks_free(n->hooks, n->n_hooks);
        pthread_mutex_destroy(&n->lock);
        pthread_cond_destroy(&n->wake);
        free(n->state_path);
        free(n);
}
