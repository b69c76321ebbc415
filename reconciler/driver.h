/*
 * The driver: what `gitcd apply` and `gitcd run` share. It pulls a
 * revision from a source, records it, parses the EtcdCluster definitions in
 * it, offers each to the reconciler, reports orphans (and prunes them when
 * asked), and runs reconciler passes over every cluster until they converge
 * or fail, waking on target events instead of fixed requeues. A converged
 * cluster is observed again on its own jittered timer (idle_interval_ms);
 * with workers, passes of different clusters run concurrently.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reconciler/reconcile.h"
#include "sources/source.h"
#include "api/model.h"
#include "intake/intake.h"
#include "intake/policy.h"
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
        const char *state_dir; /* snapshot temporaries, etcd root passwords (reconciler/auth.h) */
        const char *etcd_dir;  /* etcd's tools by version (restore); NULL: the default */
        driver_progress_fn progress;
        void *userdata;
        /* Called after every pass that ran, with how long it took (metrics). */
        void (*pass_done)(const char *cluster, const pass_result *res, int64_t duration_ms,
                          void *userdata);
        void *pass_done_userdata;
        driver_claim_fn claim; /* NULL: this source owns every cluster */
        void *claim_userdata;
        /*
         * How often a converged (or failed) cluster is observed when nothing
         * wakes it, each cluster on its own timer jittered by +-25%; 0: the
         * default, DRIVER_IDLE_INTERVAL_MS. A cluster that is not converged
         * is passed at every step.
         */
        int64_t idle_interval_ms;
        /*
         * Passes of different clusters run concurrently in this many worker
         * threads, each with its own state connection; 0 or 1: in the
         * caller's thread. With workers, the target must be safe to share
         * between threads (targets/locked.h).
         */
        int workers;
        /* etcd's membership API and clocks for the reconcilers; NULL: the real ones. */
        const etcd_membership_ops *etcd;
        void *etcd_userdata;
        int64_t (*wall_ms)(void);
        int64_t (*mono_ms)(void);
        /*
         * The operator's policy for this source (intake/policy.h); NULL:
         * gitcd's built-in one. Must outlive the driver.
         */
        const policy *policy;
        /* The source's name, for its intake verdicts in the state store; NULL: "default". */
        const char *source_name;
        /*
         * The source's kubeconfig contexts for the intake (intake/intake.h);
         * NULL: none. Must outlive the driver.
         */
        const intake_kube *kube;
} driver_opts;

#define DRIVER_IDLE_INTERVAL_MS (30 * 1000)
#define DRIVER_WORKERS_DEFAULT  8

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
 *            valid clusters were still offered; no orphan is pruned. Or
 *            the operator's policy refused a cluster (audited as
 *            spec.refused, its diagnostics at the policy's lines): the
 *            cluster is not offered, one that exists keeps its accepted
 *            spec, the other clusters go on, orphans included
 * A change (or a removal) the policy holds for approvals is not offered
 * either (audited once per head as spec.held, a warning in diags): the
 * cluster keeps its accepted spec until a later head has the signers.
 *  other     the source could not be read (message in driver_last_error)
 */
int driver_sync(driver *d, diag_list *diags);

typedef struct driver_summary {
        int clusters;
        int converged;
        int failed;  /* failed, or blocked until a person acts (PASS_BLOCKED) */
        int waiting; /* passes in flight included */
        int busy;    /* of those, passes running in a worker */
        int wait_ms; /* when to look again at the latest, with no event */
} driver_summary;

/*
 * Run passes over the clusters of the current revision that are due until
 * each is converged, failed or waiting: every cluster that is not converged,
 * and a converged or failed one when its observation timer ran out or
 * driver_wake() named it. With workers, the passes are handed to them and
 * the results of earlier ones are taken in; a cluster whose pass is still
 * in flight is counted as waiting and skipped. Never blocks for long.
 * 0 or -errno.
 */
int driver_step(driver *d, driver_summary *ret);

/* Observe a cluster ("ns/name"; NULL: every one) at the next step: a member event. */
void driver_wake(driver *d, const char *cluster);

/*
 * Block until no pass of any driver is in flight or timeout_ms passes (for
 * a caller whose step reported busy > 0): one step takes in a batch of
 * results, not one step per pass. 1 when some pass finished meanwhile.
 */
int driver_wait(int timeout_ms);

/*
 * Stop handing out passes and wait up to timeout_ms for the ones in flight
 * (every effect is journaled, so a process that exits with one in flight
 * resumes it at the next start). Returns the number still in flight.
 */
int driver_quiesce(driver *d, int timeout_ms);

/* Changes and removals of the current revision held waiting for approvals. */
size_t driver_held(const driver *d);

/* Whether a pass of the cluster ("ns/name") is queued or running in a worker (main thread). */
bool driver_cluster_busy(const driver *d, const char *cluster);

/* Clusters of the current revision ("ns/name"), in order. */
size_t driver_cluster_count(const driver *d);
const char *driver_cluster_name(const driver *d, size_t i);
const char *driver_last_error(const driver *d);
