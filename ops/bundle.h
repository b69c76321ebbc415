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

#include <jansson.h>

/* One cluster's object as `gitcd status NAME -o json` prints it (cli/cmd-status.c owns it). */
typedef json_t *(*bundle_status_fn)(state_db *db, const char *cluster);

typedef struct bundle_request {
        state_db *db;          /* read only */
        const char *state_dir; /* for root's credentials and <state dir>/bundles */
        const char *cluster;   /* "namespace/name", recorded */
        target *t;             /* the target the cluster runs on, or NULL (no logs then) */
        const char *reason;    /* why it was taken, a sentence for README.txt */
        /* where to write it; NULL: <state_dir>/bundles/<ns>_<name>-<UTC time>.tar.gz, and
           only the newest BUNDLE_KEEP of the cluster are kept there */
        const char *path;
        bundle_status_fn status_json; /* gitcd/status.json; NULL: null there */
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

/*
 * The trouble a cluster's recorded conditions show, the words that take
 * a bundle by themselves in gitcd run, comma-separated in this order:
 * "QuorumLost" (Available False for lack of quorum), "UpgradeFailed" (a
 * condition with that reason), "CorruptAlarm" and "NoSpaceAlarm" (True),
 * "DataInconsistent" (DataConsistent False). NULL when none.
 */
char *bundle_trouble(const state_cluster *sc);

/*
 * gitcd run's automatic bundles: one worker thread beside the loop, one
 * bundle at a time. The loop asks bundler_due() after each pass; it
 * answers the trouble to take a bundle for when the cluster shows a word
 * of bundle_trouble() it did not show at its last bundle (once per
 * episode: a word that stays takes no second one; one that goes and comes
 * back does), and the worker is free. The loop then opens the cluster's
 * target and hands it to bundler_start(), which takes it over.
 */
struct ops_notifier;
typedef struct bundler bundler;

bundler *bundler_new(const char *state_path, const char *state_dir, bundle_status_fn status_json);
/* Waits for a bundle being taken. NULL: nothing. */
void bundler_free(bundler *b);
/* The trouble (allocated) a bundle is due for now, or NULL. */
char *bundler_due(bundler *b, state_db *db, const char *cluster);
/*
 * Take the bundle in the worker: written under <state dir>/bundles
 * (BUNDLE_KEEP kept), an audit event debug.bundle with its path (or the
 * failure), and a notification debug.bundle carrying the path through n
 * (may be NULL). t (may be NULL) is freed by the worker. trouble as from
 * bundler_due (taken over).
 */
void bundler_start(bundler *b, const char *cluster, char *trouble, target *t,
                   struct ops_notifier *n);
