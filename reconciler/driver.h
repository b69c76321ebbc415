/*
 * The driver: what `gitcd apply` and `gitcd run` share. It pulls a
 * revision from a source, records it, parses the EtcdCluster definitions in
 * it, offers each to the reconciler, reports orphans (and prunes them when
 * asked), and runs reconciler passes over every cluster until they converge
 * or fail, waking on target events instead of fixed requeues.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reconciler/reconcile.h"
#include "sources/source.h"
#include "api/model.h"
#include "state/state.h"
#include "targets/target.h"
#include "util/diag.h"

typedef struct driver driver;

/* Called after every pass that did something or changed what it waits for. */
typedef void (*driver_progress_fn)(const char *cluster, const pass_result *res, void *userdata);

/*
 * When several sources feed one state (gitcd run --config), the daemon
 * decides which source may act on a cluster: DEFINE when a revision of this
 * source defines it (false: not offered), PASS before each pass (false:
 * skipped), ORPHAN before orphaning or pruning one this source no longer
 * defines (false: left alone, another source has it).
 */
typedef enum driver_claim {
        DRIVER_CLAIM_DEFINE,
        DRIVER_CLAIM_PASS,
        DRIVER_CLAIM_ORPHAN
} driver_claim;
typedef bool (*driver_claim_fn)(const char *cluster, driver_claim what, void *userdata);

typedef struct driver_opts {
        state_db *db;          /* required */
        target *target;        /* required */
        source *src;           /* required */
        bool prune;            /* stop members of clusters removed from the source (data kept) */
        const char *state_dir; /* temporary files of a snapshot before a minor upgrade */
        const char *etcd_dir;  /* etcd's tools by version (restore); NULL: the default */
        driver_progress_fn progress;
        void *userdata;
        /* Called after every pass that ran, with how long it took (metrics). */
        void (*pass_done)(const char *cluster, const pass_result *res, int64_t duration_ms,
                          void *userdata);
        void *pass_done_userdata;
        driver_claim_fn claim; /* NULL: this source owns every cluster */
        void *claim_userdata;
} driver_opts;

int driver_new(const driver_opts *opts, driver **ret);
void driver_free(driver *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(driver *, driver_free);

/*
 * Fetch and take in the source's current revision. Diagnostics for invalid
 * documents go to diags. Returns:
 *   1        a new revision was taken in (or the first one)
 *   0        the revision was the one already taken in
 *  -EPERM    the revision was refused (its signature, a tag name that is
 *            not the ref, or a rollback): recorded and audited once, not
 *            again while it stays the head; the last good revision stays
 *            in force. A revision taken in becomes the ref's applied commit
 *            (source_mark_applied).
 *  -EINVAL   some documents are invalid: they are audited and skipped; the
 *            valid clusters were still offered; no orphan is pruned
 *  other     the source could not be read (message in driver_last_error)
 */
int driver_sync(driver *d, diag_list *diags);

typedef struct driver_summary {
        int clusters;
        int converged;
        int failed; /* failed, or blocked until a person acts (PASS_BLOCKED) */
        int waiting;
        int wait_ms; /* when to look again at the latest, with no event */
} driver_summary;

/*
 * Run passes over every cluster of the current revision until each is
 * converged, failed or waiting; never blocks for long. 0 or -errno.
 */
int driver_step(driver *d, driver_summary *ret);

/* Clusters of the current revision ("ns/name"), in order. */
size_t driver_cluster_count(const driver *d);
const char *driver_cluster_name(const driver *d, size_t i);
const char *driver_last_error(const driver *d);
