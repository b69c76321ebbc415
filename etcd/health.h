/*
 * Whether one etcd member is healthy: the one definition of it in gitcd.
 * etcd's own /health of the member, asked directly (never through a proxy)
 * with gitcd's client identity when the member serves TLS. The local and
 * hosts targets report a member's health with it.
 */
#pragma once

#include <curl/curl.h>

#include "util/http.h"
#include "util/strbuf.h"

/*
 * The path of etcd's health check. Two alarms are excluded: NOSPACE is a
 * full database and CORRUPT members whose data differs, not dead members;
 * each has its own condition and its own way out (docs/maintenance.md,
 * docs/consistency.md), and neither must make every member look down, the
 * cluster QuorumLost and that way out impossible. etcd 3.4.23 and 3.5
 * honour exclude.
 */
#define ETCD_HEALTH_PATH "/health?exclude=NOSPACE&exclude=CORRUPT"

typedef struct etcd_health_opts {
        http_tls tls;   /* gitcd's client identity toward the member; none over http */
        int timeout_ms; /* the whole GET, and its connection; 0: 2 s */
        /* Called around the GET when set: a target lets go of its shared lock. */
        void (*wait_begin)(void);
        void (*wait_end)(void);
} etcd_health_opts;

/*
 * GET <client_url>ETCD_HEALTH_PATH (client_url: the member's first client
 * URL; a comma-separated list is cut at its first comma). 1 healthy, 0 not;
 * *ret_detail (allocated) says which: "healthy", "not answering yet (…)",
 * "no leader", "unhealthy: <etcd's reason>" or "unexpected /health answer".
 * An https:// member given a CA file is asked on the process's kept
 * connection to it (etcd/pool.h, the one its gRPC calls use for the same
 * identity); when that one does not answer, and over http://, on a
 * connection of the GET's own, its TLS files parsed once (http_creds_get).
 */
int etcd_member_health(const char *client_url, const etcd_health_opts *o, char **ret_detail);

/*
 * GET <client_url>/metrics: etcd's Prometheus text, at most max_bytes of it
 * (a longer answer is cut there, with a comment saying so), asked as the
 * health check is (directly, o->tls, o->timeout_ms for the whole GET).
 * 0 with *ret_text; -EIO when the member does not answer 200, with why in
 * *ret_error (allocated; no secret in it).
 */
int etcd_member_metrics(const char *client_url, const etcd_health_opts *o, size_t max_bytes,
                        char **ret_text, char **ret_error);

/*
 * Perform the GET prepared on h for url, its answer collected into body.
 * A member asked over https that answers the handshake in plain http is
 * asked again over http: TLS is being switched on for its cluster
 * (reconciler/tlsswitch.c) and it has not restarted onto its TLS files
 * yet. Nothing secret travels in plain: a health or metrics GET carries none.
 */
CURLcode etcd_http_perform(CURL *h, const char *url, strbuf *body);
