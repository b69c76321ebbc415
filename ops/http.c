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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "ops/http.h"
#include "ops/metrics.h"
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
};

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
        (void)upload_data;
        (void)con_cls;
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
                           xstrdup("not found; try /metrics, /healthz or /readyz\n"));
}

int ops_http_start(const ops_http_opts *o, ops_http **ret, char **ret_err)
{
        ops_http *h = XNEW(ops_http);
        int k = 0;
        if (o->token_file)
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
                                                .handler_cls = h},
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
        free(h);
}
