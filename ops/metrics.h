/*
 * gitcd's own metrics, in the Prometheus text format (0.0.4).
 *
 * Two kinds of values: events the process counts as they happen (passes,
 * steps, source fetches: ops_metrics_pass, ops_metrics_fetch), kept in a
 * process-wide registry behind a mutex; and facts gathered when /metrics
 * is scraped, from the state store and from each member's own status
 * (members, leader, database sizes, conditions, applied commits, the last
 * successful snapshot).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reconciler/reconcile.h"
#include "util/strbuf.h"

/* The sources the daemon reads now (readiness needs each read once). */
void ops_metrics_set_sources(const char *const *names, size_t n);
/* A pass over a cluster ("ns/name") ended with res after duration_ms. */
void ops_metrics_pass(const char *cluster, const pass_result *res, int64_t duration_ms);
/*
 * A fetch of a source: read is true when the source could be read (a new
 * revision, the same one, or one refused or with invalid documents).
 */
void ops_metrics_fetch(const char *source, bool read, int64_t duration_ms);
/*
 * gitcd's client identity toward cluster ("ns/name"), as the daemon's main
 * loop resolved it (target_client_tls): the CA bundle, certificate and key
 * files the scrape dials members reached over https:// with. All NULL:
 * the cluster has no client TLS, or no identity yet (forgotten).
 */
void ops_metrics_set_client_tls(const char *cluster, const char *ca, const char *cert,
                                const char *key);
/* Whether every source was read at least once. */
bool ops_metrics_sources_read(void);
/* Forget everything (tests). */
void ops_metrics_reset(void);

/*
 * Append the whole exposition to out: the registry, then what the state
 * store at state_path and the members say now. 0, or -errno when the store
 * cannot be read (the registry is still appended).
 */
int ops_metrics_render(const char *state_path, strbuf *out);
