/*
 * gitcd's own metrics, in the Prometheus text format (0.0.4), and the
 * daemon's readiness.
 *
 * Everything a scrape shows is in memory (see metrics.c): events the
 * process counts as they happen (passes, steps, source fetches:
 * ops_metrics_pass, ops_metrics_fetch), facts the daemon's loop publishes
 * from the state store (ops_metrics_publish: members, conditions, applied
 * commits, certificates, the last successful snapshot, whether the store
 * takes writes) and what each member says of itself, asked by a thread of
 * its own (the collector: database sizes, the leader). A request never
 * opens the state store and never waits on a member.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reconciler/reconcile.h"
#include "state/state.h"
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
/* A request to /hooks/<forge> was answered with result (push_outcome_name(), ops/push.h). */
void ops_metrics_webhook(const char *forge, const char *result);
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
 * The daemon's loop, with its own connection: read the state store's facts
 * into memory. check_writable: also take a write transaction (and roll it
 * back) to tell whether the store takes writes (the loop does that every
 * few seconds, never per request). 0, or -errno when the store could not
 * be read (what was published before stays).
 */
int ops_metrics_publish(state_db *db, bool check_writable);
/* Ask every published member for its status now (blocks: about 1.5 s per member at worst). */
void ops_metrics_collect(void);
/*
 * The collector thread: ops_metrics_collect() every interval_ms (0: 10 s)
 * and as soon as a publication changes the members to ask.
 */
typedef struct ops_metrics_collector ops_metrics_collector;
int ops_metrics_collector_start(int interval_ms, ops_metrics_collector **ret);
void ops_metrics_collector_stop(ops_metrics_collector *c); /* NULL: no-op */

/*
 * Why the daemon is not ready, from memory (newly allocated, ending in a
 * newline), or NULL: every source was read, the store was published and
 * took the last write transaction tried.
 */
char *ops_metrics_not_ready(void);
/* Append the whole exposition to out, from memory. */
void ops_metrics_render(strbuf *out);
