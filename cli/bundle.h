/*
 * The incident bundle (gitcd debug bundle): one .tar.gz with what the
 * first hour of an etcd incident is spent collecting by hand. The layout
 * is documented in docs/incidents.md.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "targets/target.h"

/* Bundles kept per cluster in <state dir>/bundles/ (older ones are deleted). */
#define BUNDLE_KEEP 10
/* The bundle's content before compression at most; logs are cut first, then metrics. */
#define BUNDLE_MAX_BYTES (32u * 1024 * 1024)
/* Per member: its log's tail, its /metrics, its machine's facts. */
#define BUNDLE_LOG_MAX     (2u * 1024 * 1024)
#define BUNDLE_METRICS_MAX (4u * 1024 * 1024)
#define BUNDLE_FACTS_MAX   (64u * 1024)
/* The deadline of each etcd call and /metrics GET. */
#define BUNDLE_STEP_TIMEOUT_MS 3000
/* The audit events of the cluster in it, newest first. */
#define BUNDLE_AUDIT_EVENTS 200

typedef struct bundle_request {
        state_db *db;          /* read only */
        const char *state_dir; /* for root's credentials and <state dir>/bundles */
        const char *cluster;   /* "namespace/name", recorded */
        target *t;             /* the target the cluster runs on, or NULL (no logs then) */
        const char *reason;    /* why it was taken, a sentence for README.txt */
        /* where to write it; NULL: <state_dir>/bundles/<ns>_<name>-<UTC time>.tar.gz, and
           only the newest BUNDLE_KEEP of the cluster are kept there */
        const char *path;
} bundle_request;

/*
 * Collect and write the bundle (mode 0600, whole or not at all: written
 * under a temporary name and renamed). A member or call that does not
 * answer gets an error.txt where its files would be; the bundle is still
 * written. 0 with *ret_path (allocated); -errno with *ret_error
 * (allocated) when it could not be written (-ENOENT: no such cluster
 * recorded).
 */
int bundle_take(const bundle_request *rq, char **ret_path, char **ret_error);

/* Delete all but the newest keep bundles of cluster in dir; the number deleted. */
int bundle_prune(const char *dir, const char *cluster, size_t keep);
