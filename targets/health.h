/*
 * The health GET the local and hosts targets ask a member's client URL
 * (etcd's own /health), shared by both; and whether anything still listens
 * on a member's port.
 */
#pragma once

#include <stdbool.h>

#include <curl/curl.h>

#include "util/strbuf.h"

/*
 * The path of etcd's health check the local and hosts targets ask. Two
 * alarms are excluded: NOSPACE is a full database and CORRUPT members
 * whose data differs, not dead members; each has its own condition and its
 * own way out (docs/maintenance.md, docs/consistency.md), and neither must
 * make every member look down, the cluster QuorumLost and that way out
 * impossible. etcd 3.4.23 and 3.5 honour exclude.
 */
#define TARGET_HEALTH_PATH "/health?exclude=NOSPACE&exclude=CORRUPT"

/*
 * Perform the GET prepared on h for url, its answer collected into body.
 * A member asked over https that answers the handshake in plain http is
 * asked again over http: TLS is being switched on for its cluster
 * (reconciler/tlsswitch.c) and it has not restarted onto its TLS files
 * yet. Nothing secret travels in plain: a health GET carries none.
 */
CURLcode target_health_perform(CURL *h, const char *url, strbuf *body);

/*
 * Whether a TCP connection to host:port is accepted within timeout_ms: a
 * stopped member's ports refuse (or, filtered, time out) once its process
 * is gone.
 */
bool target_port_accepts(const char *host, int port, int timeout_ms);
