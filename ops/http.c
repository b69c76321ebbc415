/*
 * The HTTP endpoints of the daemon (see http.h) on libmicrohttpd, which
 * runs its own listening thread: a request never waits for a reconciler
 * pass, and a pass never waits for a scrape. /readyz and /metrics answer
 * from memory (ops/metrics.h: what the daemon's loop publishes from the
 * state store and what the collector thread asks the members), never from
 * the state store itself: one thread serves every request, so nothing on
 * it may wait on a database lock or a member.
 *
 * Idle and slow connections cannot fill the server (util/httpd.h): one
 * that has not made a request with the token within HTTP_DEADLINE_S, or
 * sends nothing for HTTP_IDLE_S, is closed; at most HTTP_MAX_PENDING such
 * connections are kept (HTTP_PEER_PENDING per client address), the
 * oldest closed for a new one, so /healthz answers a prober with the
 * token under any number of idle connections; at most HTTP_MAX_CONNECTIONS
 * in all, far below the process's descriptor limit.
 *
 * The bearer token is compared in constant time and never logged; a
 * missing or wrong token is 401 with a WWW-Authenticate header.
 *
 * /hooks/<forge> (ops/push.h) takes no token: a forge cannot send one, and
 * the signature made with the source's secret is the request's
 * authentication. Its body is collected up to PUSH_MAX_BODY (a larger one
 * is 413, told by its Content-Length before it is read, or once read),
 * judged by push_judge() on this thread, and an accepted push only puts
 * the source's name in the inbox: the daemon's loop fetches. A request
 * whose signature matched is trusted (httpd_trust), like one with the token.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "ops/http.h"
#include "ops/metrics.h"
#include "ops/push.h"
#include "util/fs.h"
#include "util/httpd.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define HTTP_IDLE_S          10
#define HTTP_TRUSTED_IDLE_S  30
#define HTTP_DEADLINE_S      10
#define HTTP_MAX_PENDING     200
#define HTTP_PEER_PENDING    64
#define HTTP_MAX_CONNECTIONS 256

struct ops_http {
        httpd *server;
        ops_metrics_collector *collector;
        char *token; /* NULL: none */
        char *cert_pem;
        char *key_pem;
        int port;
        push_source *hooks; /* the sources, each with its webhook secret or NULL */
        size_t n_hooks;
        push_inbox *inbox;
};

/* One request to /hooks/<forge>, from its first call of the handler to its completion. */
typedef struct hook_request {
        push_forge forge;
        strbuf body;
        bool too_large;
} hook_request;

static void hook_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                           enum MHD_RequestTerminationCode toe)
{
        (void)cls;
        (void)conn;
        (void)toe;
        hook_request *hr = *con_cls;
        if (!hr)
                return;
        sb_release(&hr->body);
        free(hr);
        *con_cls = NULL;
}

static enum MHD_Result hook_reply(struct MHD_Connection *conn, push_forge forge, push_outcome o,
                                  const char *message)
{
        ops_metrics_webhook(push_forge_name(forge), push_outcome_name(o));
        return httpd_reply(conn, push_outcome_status(o), "text/plain", xasprintf("%s\n", message));
}

/* The request's whole body is in: judge it, hand an accepted push to the loop. */
static enum MHD_Result hook_judge(ops_http *h, struct MHD_Connection *conn, hook_request *hr)
{
        if (hr->too_large)
                return hook_reply(conn, hr->forge, PUSH_TOO_LARGE, "the payload is over 1 MiB");
        static const char *const sig_headers[PUSH_FORGE_COUNT] = {
            "X-Hub-Signature-256", "X-Gitlab-Token", "X-Gitea-Signature", "X-Gitcd-Signature"};
        static const char *const event_headers[PUSH_FORGE_COUNT] = {
            "X-GitHub-Event", "X-Gitlab-Event", "X-Gitea-Event", NULL};
        push_request req = {
            .forge = hr->forge,
            .signature = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, sig_headers[hr->forge]),
            .event = event_headers[hr->forge] ? MHD_lookup_connection_value(
                                                    conn, MHD_HEADER_KIND, event_headers[hr->forge])
                                              : NULL,
            .body = hr->body.len ? sb_str(&hr->body) : "",
            .len = hr->body.len,
        };
        push_verdict v;
        push_judge(&req, h->inbox ? h->hooks : NULL, h->inbox ? h->n_hooks : 0, &v);
        if (v.outcome == PUSH_QUEUED || v.outcome == PUSH_IGNORED)
                httpd_trust(conn);
        for (size_t i = 0; v.outcome == PUSH_QUEUED && i < v.n_sources; i++)
                push_inbox_put(h->inbox, v.sources[i], hr->forge, v.ref, v.commit);
        if (v.outcome != PUSH_QUEUED)
                log_debug("http: %s hook: %s", push_forge_name(hr->forge), v.message);
        enum MHD_Result r = hook_reply(conn, hr->forge, v.outcome, v.message);
        push_verdict_release(&v);
        return r;
}

/* POST /hooks/<forge>: called once with the headers, then with the body, then once with none. */
static enum MHD_Result handle_hook(ops_http *h, struct MHD_Connection *conn, push_forge forge,
                                   const char *method, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
        hook_request *hr = *con_cls;
        if (!hr) {
                if (!streq(method, "POST"))
                        return hook_reply(conn, forge, PUSH_BAD_METHOD, "only POST");
                const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                             MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl && strtoull(cl, NULL, 10) > PUSH_MAX_BODY)
                        return hook_reply(conn, forge, PUSH_TOO_LARGE, "the payload is over 1 MiB");
                hr = XNEW(hook_request);
                hr->forge = forge;
                *con_cls = hr;
                return MHD_YES;
        }
        if (*upload_data_size) {
                if (hr->body.len + *upload_data_size > PUSH_MAX_BODY)
                        hr->too_large = true;
                else
                        sb_append_len(&hr->body, upload_data, *upload_data_size);
                *upload_data_size = 0;
                return MHD_YES;
        }
        return hook_judge(h, conn, hr);
}

static bool authorized(const ops_http *h, struct MHD_Connection *conn)
{
        return !h->token || httpd_bearer_ok(conn, h->token);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
        ops_http *h = cls;
        (void)version;
        push_forge forge;
        if (push_forge_from_path(url, &forge) == 0)
                return handle_hook(h, conn, forge, method, upload_data, upload_data_size, con_cls);
        if (strncmp(url, "/hooks/", 7) == 0) /* before the body, which is not read */
                return httpd_reply(conn, MHD_HTTP_NOT_FOUND, "text/plain",
                                   xstrdup("no such hook; POST /hooks/github, /hooks/gitlab, "
                                           "/hooks/gitea or /hooks/generic\n"));
        if (*upload_data_size)
                return MHD_NO;
        if (!streq(method, "GET") && !streq(method, "HEAD"))
                return httpd_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                                   xstrdup("only GET and HEAD\n"));
        if (!authorized(h, conn))
                return httpd_reply(conn, MHD_HTTP_UNAUTHORIZED, "text/plain",
                                   xstrdup("a bearer token is required\n"));
        httpd_trust(conn); /* authorized: no longer pending (see the top of this file) */
        if (streq(url, "/healthz"))
                return httpd_reply(conn, MHD_HTTP_OK, "text/plain", xstrdup("ok\n"));
        if (streq(url, "/readyz")) {
                char *why = ops_metrics_not_ready();
                if (why)
                        return httpd_reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", why);
                return httpd_reply(conn, MHD_HTTP_OK, "text/plain", xstrdup("ready\n"));
        }
        if (streq(url, "/metrics")) {
                strbuf out = STRBUF_INIT;
                ops_metrics_render(&out);
                return httpd_reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                                   sb_detach(&out));
        }
        return httpd_reply(conn, MHD_HTTP_NOT_FOUND, "text/plain",
                           xstrdup("not found; try /metrics, /healthz, /readyz or "
                                   "POST /hooks/{github,gitlab,gitea,generic}\n"));
}

/* Each source's webhook secret: the first line of its secretFile, which must be gitcd's own. */
static int read_hook_secrets(ops_http *h, const ops_http_opts *o, char **ret_err)
{
        h->hooks = xcalloc(o->n_sources + 1, sizeof(push_source));
        for (size_t i = 0; i < o->n_sources; i++) {
                const ops_source *s = &o->sources[i];
                push_source *p = &h->hooks[h->n_hooks++];
                *p = (push_source){.name = s->name, .url = s->src.url_or_path, .ref = s->src.ref};
                if (!s->webhook_secret_file)
                        continue;
                char *secret = NULL;
                int k = httpd_read_secret(s->webhook_secret_file, "webhook secret file", &secret,
                                          ret_err);
                if (k < 0)
                        return k;
                secret[strcspn(secret, "\r\n")] = 0;
                if (!*secret) {
                        free(secret);
                        *ret_err = xasprintf("source %s: the webhook secret file %s is empty",
                                             s->name, s->webhook_secret_file);
                        return -EINVAL;
                }
                p->secret = secret;
        }
        return 0;
}

int ops_http_start(const ops_http_opts *o, ops_http **ret, char **ret_err)
{
        ops_http *h = XNEW(ops_http);
        h->inbox = o->inbox;
        int k = read_hook_secrets(h, o, ret_err);
        if (k >= 0 && o->token_file)
                k = httpd_read_token(o->token_file, &h->token, ret_err);
        if (k >= 0 && o->tls_cert_file) {
                k = httpd_read_file(o->tls_cert_file, "TLS certificate", &h->cert_pem, ret_err);
                if (k >= 0)
                        k = httpd_read_secret(o->tls_key_file, "TLS key", &h->key_pem, ret_err);
        }
        if (k >= 0)
                k = httpd_start(&(httpd_config){.listen = o->listen,
                                                .cert_pem = h->cert_pem,
                                                .key_pem = h->key_pem,
                                                .timeout_s = HTTP_IDLE_S,
                                                .trusted_timeout_s = HTTP_TRUSTED_IDLE_S,
                                                .deadline_s = HTTP_DEADLINE_S,
                                                .max_pending = HTTP_MAX_PENDING,
                                                .per_peer_pending = HTTP_PEER_PENDING,
                                                .connection_limit = HTTP_MAX_CONNECTIONS,
                                                .log_prefix = "http",
                                                .handler = handle,
                                                .handler_cls = h,
                                                .completed = hook_completed},
                                &h->server, &h->port, ret_err);
        if (k >= 0) {
                k = ops_metrics_collector_start(0, &h->collector);
                if (k < 0)
                        *ret_err =
                            xasprintf("cannot start the metrics collector: %s", strerror(-k));
        }
        if (k < 0) {
                ops_http_stop(h);
                return k;
        }
        *ret = h;
        return 0;
}

int ops_http_port(const ops_http *h)
{
        return h->port;
}

void ops_http_stop(ops_http *h)
{
        if (!h)
                return;
        httpd_stop(h->server);
        ops_metrics_collector_stop(h->collector);
        if (h->token)
                OPENSSL_cleanse(h->token, strlen(h->token));
        free(h->token);
        free(h->cert_pem);
        if (h->key_pem)
                OPENSSL_cleanse(h->key_pem, strlen(h->key_pem));
        free(h->key_pem);
        for (size_t i = 0; i < h->n_hooks; i++)
                if (h->hooks[i].secret) {
                        OPENSSL_cleanse((char *)h->hooks[i].secret, strlen(h->hooks[i].secret));
                        free((char *)h->hooks[i].secret);
                }
        free(h->hooks);
        free(h);
}
