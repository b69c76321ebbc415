/*
 * The reconciler: for each cluster, observe (etcd's member list, the
 * target's view of every member, the state store), decide one safe step
 * (reconciler/decide.h), act (journal the intent, perform it, record the
 * outcome and an audit event), and keep conditions and the progress
 * deadline up to date.
 *
 * The reconciler latches the spec it works toward (the "observed" spec in
 * the state store) with a progress deadline. A new desired spec is latched
 * at the next step boundary, after the transition rules accept it; a
 * refused one is recorded (audit `spec.rejected`, condition SpecRejected)
 * and the last accepted spec stays in force. Once the deadline passes
 * without convergence the cluster is terminal (DeadlineExceeded, or
 * BootstrapFailed before the first quorum) until the spec changes again.
 *
 * One reconciler drives any number of clusters; a problem in one never
 * stops the others.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reconciler/decide.h"
#include "reconciler/etcd-ops.h"
#include "api/model.h"
#include "state/state.h"
#include "targets/target.h"

typedef struct reconciler reconciler;

typedef struct reconciler_opts {
        state_db *db;        /* required */
        target *target;      /* required */
        int etcd_timeout_ms; /* one etcd call; default 3000 */
        /* etcd's membership API; NULL: the real client (etcd_membership_real). */
        const etcd_membership_ops *etcd;
        void *etcd_userdata; /* passed to etcd->connect */
        /* Rolling version changes (reconciler/upgrade.h); 0: the defaults. */
        int upgrade_settle_ms;
        int upgrade_start_timeout_ms;
        /*
         * The state folder: temporary files of a snapshot before a minor upgrade,
         * and etcd's root password of clusters with spec.auth (reconciler/auth.h).
         * NULL: no snapshot is taken, and spec.auth cannot be acted on.
         */
        const char *state_dir;
        /* etcd's tools by version (spec.bootstrap.restore); NULL: the default lookup. */
        const char *etcd_dir;
        /* Clocks (injected for tests); NULL: the real ones (util/timeutil.h). */
        int64_t (*wall_ms)(void);
        int64_t (*mono_ms)(void);
        /*
         * A member's /metrics text (spec.leadership's disk figures), given
         * etcd_userdata; 0 with *ret_text, or -errno with *ret_error (both
         * allocated). NULL: etcd_member_metrics with the real etcd client;
         * under a fake etcd seam without it, nothing is scraped.
         */
        int (*member_metrics)(void *userdata, const char *client_url, char **ret_text,
                              char **ret_error);
} reconciler_opts;

/* Where a desired spec came from, for the audit log. */
typedef struct reconcile_origin {
        const char *commit; /* commit id, or NULL for a plain directory */
        const char *author; /* "Name <email>", or NULL */
} reconcile_origin;

typedef enum pass_outcome {
        PASS_CONVERGED,  /* nothing left to do */
        PASS_PROGRESSED, /* a step was taken: pass again at once */
        PASS_WAITING,    /* something is in flight: pass again after an event or poll_ms */
        PASS_FAILED, /* terminal (deadline exceeded, rejected first spec) until the spec changes */
        /*
         * A person must act: the target refused the step (permissions, a name
         * held by an object gitcd does not own). The step is tried again every
         * 30 s in case it was fixed; `gitcd apply` reports it and exits.
         */
        PASS_BLOCKED,
} pass_outcome;

const char *pass_outcome_name(pass_outcome o);

typedef struct pass_result {
        pass_outcome outcome;
        step_kind step;
        char member[64];
        char reason[48];
        char *message; /* a sentence for people (never NULL after reconciler_pass()); owned */
        int poll_ms;   /* PASS_WAITING: look again after at most this long */
        /*
         * The cluster is frozen: its members were found holding different
         * data (or etcd raised CORRUPT) and voluntary changes wait for a
         * person (reconciler/consistency.h). The message says why.
         */
        bool frozen;
        /*
         * A hold keeps the next step back (reconciler/hold.h): the cluster is
         * suspended, or a disruptive step waits for a maintenance window.
         * The outcome is PASS_BLOCKED, reason the hold's word (Suspended,
         * MaintenanceWindow), the message what waits and why; `gitcd apply`
         * reports it and stops waiting for the cluster (exit 1, not converged).
         */
        bool held;
        /*
         * MachineHealthy as this pass judged it (reconciler/machines.h): 0
         * not judged (the target measures no machine, the preflight is off,
         * or no machine holding a member was measured yet), 1 True, -1
         * False; machines_message says why (owned).
         */
        int machines;
        char *machines_message;
} pass_result;

/* Frees the messages; pass_result_release(NULL) is a no-op. */
void pass_result_release(pass_result *r);
/* Sets r->message, freeing the one it replaces. */
void pass_say(pass_result *r, const char *fmt, ...) _printf_(2, 3);

int reconciler_new(const reconciler_opts *opts, reconciler **ret);
void reconciler_free(reconciler *r);
/* The state connection the calls that follow use (a worker thread's own: a state_db
 * belongs to one thread at a time). */
void reconciler_set_db(reconciler *r, state_db *db);
DEFINE_TRIVIAL_CLEANUP_FUNC(reconciler *, reconciler_free);

/*
 * Offer the desired spec of a cluster (from a source revision). Records it
 * in the state store when it changed (audit `spec.accepted` or
 * `spec.rejected` with the transition rule's reason). 0, or -errno on a
 * state store failure.
 */
int reconciler_offer(reconciler *r, const etcd_cluster *c, const reconcile_origin *origin);

/*
 * One pass for one cluster ("namespace/name"). 0, or -errno when the pass
 * could not run. *ret is written whole (never read), its message set in
 * both cases: release it with pass_result_release().
 */
int reconciler_pass(reconciler *r, const char *cluster, pass_result *ret);

/*
 * Names of clusters the store knows that are missing from `present` (the
 * n_present "namespace/name" a revision defines); for orphan reports.
 */
int reconciler_orphans(reconciler *r, const char *const *present, size_t n_present,
                       char ***ret_names, size_t *ret_n);

/* Stop every member of an orphaned cluster, keeping data (prune). Audited. */
int reconciler_prune(reconciler *r, const char *cluster);
