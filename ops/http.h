/*
 * The daemon's HTTP endpoints (`gitcd run --listen ADDR`), served by
 * libmicrohttpd on a thread of its own:
 *
 *   /metrics  the Prometheus text format (ops/metrics.h)
 *   /healthz  200 while the process serves requests
 *   /readyz   200 once every source was read and the state store took the
 *             last write transaction the daemon's loop tried; 503 with the
 *             reason otherwise
 *
 *   /hooks/github, /hooks/gitlab, /hooks/gitea, /hooks/generic
 *             a forge's push webhook (POST, ops/push.h): a signed push of
 *             a source's branch puts the source in the inbox the daemon's
 *             loop takes its fetches from (202)
 *
 * They answer from memory (ops/metrics.h), never from the state store,
 * and never fetch. Optional TLS (certificate and key files) and an
 * optional bearer token (read from a file) required on every endpoint but
 * the hooks, which a forge cannot send a token to: a hook's signature,
 * made with the source's own secret, is its authentication. Idle and slow
 * connections are bounded (http.c), so /healthz answers under any number
 * of them.
 */
#pragma once

#include <stddef.h>

#include "ops/config.h"
#include "ops/push.h"

typedef struct ops_http ops_http;

typedef struct ops_http_opts {
        const char *listen;        /* "host:port", "[v6]:port" or ":port" (every address) */
        const char *tls_cert_file; /* PEM; with tls_key_file, serve https */
        const char *tls_key_file;
        const char *token_file; /* NULL: no token */
        /* The sources, whose webhook.secretFile is read at the start; none: every hook 404 */
        const ops_source *sources;
        size_t n_sources;
        push_inbox *inbox; /* where accepted pushes go; NULL: every hook 404 */
} ops_http_opts;

/*
 * Start serving. -EINVAL for an address that is not host:port, -errno when
 * a file cannot be read (a webhook secret file too; -EPERM when it is not
 * gitcd's own, as for the other secret files) or the address cannot be bound; ret_err says which
 * (newly allocated, no secret in it).
 */
int ops_http_start(const ops_http_opts *opts, ops_http **ret, char **ret_err);
/* The port bound (useful with port 0). */
int ops_http_port(const ops_http *h);
/* Stop serving; ops_http_stop(NULL) is a no-op. */
void ops_http_stop(ops_http *h);
