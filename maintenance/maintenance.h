/*
 * Maintenance of a running cluster: defragmentation (on spec.defrag's
 * schedule or thresholds), NOSPACE recovery (compact, defragment, disarm,
 * when spec.defrag.disarmNoSpace allows it) and the NoSpaceAlarm and
 * CorruptAlarm conditions. docs/maintenance.md tells the rules.
 *
 * The reconciler calls maintenance_pass() at the end of a pass in which the
 * cluster is converged: membership work always comes first, and a
 * defragmentation run pauses while a member is added, replaced or rolled.
 * One call takes at most one step (start a run, compact, move leadership,
 * defragment one member, disarm, finish), chosen by maint_decide()
 * (maintenance/due.h) from what etcd reports and the run's record
 * (state/maintenance.h), so a gitcd that stops mid-run resumes where its
 * record says it was.
 *
 * A defragmentation blocks the calling thread until etcd answers (one
 * member at a time, with its own deadline): the reconciler's other
 * clusters wait that long. Everything is audited with the commit behind
 * the latched spec.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/model.h"
#include "etcd/client.h"
#include "state/state.h"

typedef struct maintenance maintenance;

typedef struct maintenance_opts {
        state_db *db;             /* required */
        int64_t (*wall_ms)(void); /* the clock; NULL: the real one */
        int call_timeout_ms;      /* Status, AlarmList, MoveLeader...; default 5000 */
        int defrag_timeout_ms;    /* one member's Defragment; default 600000 */
        int health_timeout_ms;    /* a member healthy again after it; default 60000 */
} maintenance_opts;

/* One cluster as the reconciler sees it this pass (nothing is kept). */
typedef struct maint_cluster {
        const char *cluster;      /* "namespace/name" */
        const etcd_cluster *spec; /* the latched spec */
        const state_cluster *sc;  /* its row: creation time, conditions */
        const char *const *names; /* the voting members with a client URL */
        const char *const *client_urls;
        size_t n;
        const char *cacert; /* gitcd's client TLS files, or NULL */
        const char *cert;
        const char *key;
        const char *user; /* etcd auth (reconciler/auth.h), or NULL; never logged */
        const char *password;
        /*
         * A Status the pass read a moment ago (its look, reconciler/etcd-ops.h),
         * or NULL: used for the member whose client URL it names instead of
         * asking that member again.
         */
        const etcd_endpoint_status *looked;
        const char *commit; /* behind the latched spec, for audit events; may be NULL */
        const char *author;
        /*
         * The members were found holding different data (reconciler/
         * consistency.h): the alarms are listed and recorded, nothing runs
         * (a run in progress is given up).
         */
        bool frozen;
        /* Holds on defragmentation (maint_view.held_*, reconciler/hold.h); NULL: none. */
        const char *held_all;
        const char *held_disruptive;
        int64_t held_until_ms;
} maint_cluster;

typedef enum maint_outcome {
        MAINT_OUT_IDLE,    /* nothing to do: look again after poll_ms */
        MAINT_OUT_ACTED,   /* a step was taken: pass again at once */
        MAINT_OUT_WAITING, /* a run is in progress but must wait: pass again after poll_ms */
} maint_outcome;

typedef struct maint_result {
        maint_outcome outcome;
        int poll_ms;
        char *message; /* what was done or waits, or NULL; freed by maint_result_release() */
        bool corrupt;  /* etcd listed an active CORRUPT alarm in this call */
} maint_result;

/* Frees the message; the result may be passed to maintenance_pass() again. */
void maint_result_release(maint_result *r);

int maintenance_new(const maintenance_opts *opts, maintenance **ret);
void maintenance_free(maintenance *m);
/*
 * The state connection of the thread that runs the next passes (a state_db
 * belongs to one thread at a time): the reconciler hands it over with its
 * own (reconciler_set_db), as the daemon's workers take its passes in turn.
 */
void maintenance_set_db(maintenance *m, state_db *db);

/*
 * Close the connections kept to the cluster's members (the next pass dials
 * again). Called before gitcd stops a member: etcd's graceful stop waits up
 * to a second for each idle HTTP/2 connection a client keeps open to it.
 * m NULL, or a cluster never seen: nothing to do.
 */
void maintenance_hang_up(maintenance *m, const char *cluster);

/*
 * One maintenance step for a converged cluster. 0 (ret says what
 * happened; a failed step fails and closes the run, recorded and audited),
 * or -errno when the state store cannot be read. *ret is written whole (never
 * read): release it with maint_result_release(), also after an error.
 */
int maintenance_pass(maintenance *m, const maint_cluster *c, maint_result *ret);
