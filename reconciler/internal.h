/*
 * What the files of the reconciler share and nothing else includes
 * (reconciler/reconcile.h is the module's contract). One concept a file:
 *
 *   reconcile.c   the reconciler object and its per-cluster context; the
 *                 desired specs offered, the spec latched, orphans, prune
 *   pass.c        one pass over one cluster: the ordered array of steps
 *                 and reconciler_pass()
 *   observe.c     the world a pass sees (records, the target's view of each
 *                 member, etcd's member list, certificates) and the facts
 *                 it records from it; the cluster's etcd connection
 *   conditions.c  one checker per condition, the phase, the progress
 *                 deadline and the terminal state
 *   act.c         journal-before-act: the effect of each of decide()'s
 *                 steps, the upkeep of every pass, a crashed run's journal
 *   rollout.c     the effects around a rolling version change (each
 *                 member's Status, the snapshot before a minor upgrade,
 *                 UpgradeFailed); the gates themselves are upgrade.c's
 *
 * A pass owns its world (world_release); the cluster context outlives
 * passes and holds what one pass tells the next (the etcd connection,
 * pacing, backoff, a refused step).
 */
#pragma once

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "maintenance/maintenance.h"
#include "reconciler/decide.h"
#include "reconciler/membership.h"
#include "reconciler/quiet.h"
#include "reconciler/reconcile.h"
#include "reconciler/slowdisk.h"
#include "reconciler/upgrade.h"
#include "util/log.h"
#include "util/timeutil.h"

#define POLL_IN_FLIGHT_MS 200
/*
 * A learner etcd refuses to promote (not caught up yet) is asked again soon
 * and then less often: it is usually ready within a few tens of ms of its
 * start, so a fixed 250 ms made the whole scale step wait for it. The wait
 * for a new member to join looks every POLL_PROMOTE_FIRST_MS for its first
 * 100 ms, then doubles up to POLL_IN_FLIGHT_MS.
 */
#define POLL_PROMOTE_FIRST_MS 25
#define POLL_PROMOTE_MS       250
/*
 * The members of a new cluster (a static bootstrap, a seed) answer as soon
 * as etcd has elected a leader, about half a second after they start on an
 * idle machine; a wait of POLL_IN_FLIGHT_MS between looks doubled that.
 * A cluster being formed is looked at every POLL_FORMING_MS for its first
 * POLL_FORMING_LOOKS looks (a look at members that do not listen yet is a
 * refused connection; one that listens answers /health only once it has a
 * leader, so a look waits on etcd, not on a timer), then every
 * POLL_IN_FLIGHT_MS, so a member that does not start is not asked 50 times
 * a second until the progress deadline. A target whose look itself takes
 * longer than POLL_FORMING_MS (SSH to machines, an API server) waits as
 * long as its last look took, so it is never asked back to back.
 */
#define POLL_FORMING_MS    20
#define POLL_FORMING_LOOKS 150
#define POLL_RETRY_MS      1000
#define POLL_BLOCKED_MS    30000 /* a step the target refused (RBAC, ownership) */
/*
 * etcd refuses MemberAdd ("unhealthy cluster") until every voter has been
 * connected for its health interval (5 s) after the previous change.
 */
#define ETCD_HEALTH_INTERVAL_MS 5000

/*
 * spec.leadership (slowleader.c): each member's last scrape of its disk
 * histograms, and when leadership was last moved off a slow disk. In
 * memory: a restart forgets both, so its first window only takes scrapes
 * and at most one move more than the interval allows can follow it.
 */
typedef struct slow_scrape {
        char *name;
        uint64_t id;
        disk_scrape s;
} slow_scrape;

typedef struct slow_track {
        slow_scrape *m;
        size_t n;
        int64_t scraped_ms; /* monotonic: the last scrape; 0: none */
        int64_t moved_ms;   /* monotonic: the last move; 0: none */
} slow_track;

void slow_track_release(slow_track *t);

typedef struct cluster_ctx {
        char *name; /* "ns/name" */
        char *latched_hash;
        etcd_cluster *latched;
        /*
         * The latched spec's own timeouts (0: unset): latched's options
         * carry the derived ones when it sets neither (machines.c).
         */
        int spec_heartbeat_ms, spec_election_ms;
        char *rejected_hash; /* desired spec refused by the transition rules */
        char *rejected_message;
        etcd_conn *client;
        char *client_endpoints;
        int64_t add_not_before; /* monotonic ms: etcd's health interval after a change */
        bool journal_checked;   /* operations left pending by an earlier run were closed */
        int64_t blocked_until;  /* monotonic ms: a refused step is not tried before */
        char *blocked_message;  /* what the refused step said */
        /* a member refused a start on data from before a restore (act.c); Degraded says so */
        char *stale_message;
        upgrade_track upgrade; /* the member rolled last onto a new version (upgrade.c) */
        int promote_refusals;  /* in a row, for the learner being promoted (backoff) */
        int join_waits;        /* passes in a row waiting for a new member or cluster (backoff) */
        quiet_track quiet;     /* which idle passes may leave the upkeep out (quiet.h) */
        /* the certificate set last found or written in the store, with the cluster row's
         * creation (record_certs): not asked for again while it is the same */
        char *certs_recorded;
        /* spec.adopt under way (takeover.h): the old members' client URLs and etcd IDs */
        bool takeover;
        char *takeover_endpoints;
        uint64_t *takeover_ids;
        size_t n_takeover_ids;
        bool takeover_none; /* no takeover under way in the store (a new one needs spec.adopt) */
        slow_track slow;    /* disk scrapes and the last move off a slow leader */
        /*
         * When each member was last observed (wall ms), kept here between the
         * record's refreshes (observe.c): written when the member turns unknown.
         */
        struct member_seen {
                char *name;
                int64_t ms;
        } * seen;
        size_t n_seen;
} cluster_ctx;

struct reconciler {
        reconciler_opts opts;
        maintenance *maint; /* with the real etcd client only; NULL under a fake seam */
        cluster_ctx *ctx;
        size_t n_ctx;
        size_t alloc_ctx;
};

/* One member as observed, owning its strings (decide's obs_member points into these). */
typedef struct member_view {
        state_member *rec; /* NULL for members only etcd knows */
        char *name;
        int ordinal;
        const etcd_member *em;
        target_member_status ts;
        char *want_hash; /* config hash of the member as the spec renders it now */
        char *command;   /* rendered now, joined with spaces: only for a legacy record */
        char *unknown;   /* the target could not report it: its error (naming the machine) */
        bool foreign;    /* a member of the old cluster of a takeover (takeover.h) */
} member_view;

typedef struct world {
        int64_t observe_began_mono_ms; /* when this pass began to observe (its cost, see act.c) */
        state_cluster *sc;
        state_member_list records;     /* the ones not removed: a view into all_records */
        state_member_list all_records; /* including removed ones: ordinals are never reused */
        etcd_members *etcd;
        uint64_t leader;
        etcd_endpoint_status *looked; /* the Status the look read (etcd-ops.h), or NULL */
        member_view *views;
        size_t n;
        obs_member *obs_members;
        observation obs;
        int healthy_voters;
        int voters;
        target_cert *certs; /* tls.provider auto: the leaves the target holds */
        size_t n_certs;
        bool certs_read; /* the target told: certs is the whole set */
        obs_cert *obs_certs;
        char *commit; /* the commit and author behind the latched spec, for audit events */
        char *author;
        bool target_failed; /* observe failed because the target could not report a member */
        unsigned char digest[QUIET_DIGEST_LEN]; /* of what was observed (quiet.h) */
        bool quiet; /* the same as the last full pass, which converged: no upkeep */
        /* The consistency freeze (reconciler/consistency.h), for the conditions and phase. */
        bool frozen;
        const char *frozen_message; /* points into the pass's consistency state */
} world;

/* ---- reconcile.c: the reconciler and its clusters ------------------------ */

static inline int64_t wall(const reconciler *r)
{
        return r->opts.wall_ms ? r->opts.wall_ms() : now_wall_ms();
}

static inline int64_t mono(const reconciler *r)
{
        return r->opts.mono_ms ? r->opts.mono_ms() : now_mono_ms();
}

/* IDs in the state store are exactly 16 hex digits (etcdctl drops leading zeros). */
static inline void id_hex16(uint64_t id, char buf[static 17])
{
        snprintf(buf, 17, "%016" PRIx64, id);
}

/* One event in the audit log; a store that refuses it is logged, never fatal. */
static inline void audit(reconciler *r, const char *cluster, const char *action, const char *reason,
                         const char *before, const char *after, const char *outcome,
                         int64_t duration_ms, const char *commit, const char *author)
{
        state_audit_event ev = {
            .time_ms = wall(r),
            .cluster = (char *)cluster,
            .commit = (char *)commit,
            .author = (char *)author,
            .action = (char *)action,
            .reason = (char *)reason,
            .before_json = (char *)before,
            .after_json = (char *)after,
            .outcome = (char *)outcome,
            .duration_ms = duration_ms,
        };
        int k = state_audit_append(r->opts.db, &ev, NULL);
        if (k < 0)
                log_warn("%s: could not write the audit event %s: %s", cluster, action,
                         state_last_error());
}

/* The context of cluster "ns/name", made on first use; lives as long as r. */
cluster_ctx *cluster_ctx_get(reconciler *r, const char *name);

/*
 * Latch the spec to work toward: the desired spec of sc when it differs
 * from the latched one (stored, with a fresh progress deadline, ending a
 * terminal state), else the latched spec parsed into x once. 1: a new spec
 * was latched; 0: the latched spec stands; -ENOENT: no desired spec;
 * -EBADMSG: the stored spec does not parse; or the store's error. sc may be
 * read brief (state_cluster_get_brief): the specs' texts are read into it
 * only when one is to be parsed, so a pass whose latched spec stands reads
 * neither.
 */
int reconciler_latch(reconciler *r, cluster_ctx *x, state_cluster *sc);

/* ---- observe.c: the world ------------------------------------------------ */

/*
 * Build the world of one pass: the records, the target's status of every
 * recorded member, etcd's member list and leader, the certificates, and
 * the observation decide() reads. 0, or -errno: the store failed, or the
 * target could not report a member (w->target_failed; nothing may be
 * decided then).
 */
int world_observe(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w);
void world_release(world *w);
/* Record what the world told: member IDs, learner flags, cluster ID, leader, certificates. */
void world_record(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w);
/*
 * The target could not report some members (w->target_failed): they are
 * recorded "unknown" with what was last observed of them, the leader as
 * etcd tells it (none when etcd did not answer and it led), and Degraded
 * names their machines. Nothing else is decided.
 */
void world_record_unknown(reconciler *r, cluster_ctx *x, world *w);
/* A quorum of the voters etcd lists is healthy: what Available and a recovery go by. */
bool world_has_quorum(const world *w);
/* The observed member of that name, or NULL. */
member_view *world_view(world *w, const char *name);

/* gitcd's own client identity for a cluster with client TLS: the target knows where it is. */
void cluster_client_tls(reconciler *r, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                        char **ret_key);
/* Forget the cluster's etcd connection: the next pass dials again (new credentials). */
void cluster_client_drop(reconciler *r, cluster_ctx *x);
/* Close every connection gitcd keeps to the cluster's members (before one stops). */
void cluster_hang_up(reconciler *r, cluster_ctx *x);
/* The plan to start one recorded member (reconciler/membership.h). */
int member_start_plan(reconciler *r, const etcd_cluster *c, state_member *rec,
                      membership_plan **ret_plan);

/* ---- conditions.c: conditions, phase, deadline, terminal ----------------- */

/* Every condition and the phase, from the world and the step decided. */
void conditions_update(reconciler *r, cluster_ctx *x, const world *w, const desired *want,
                       const step *s);

/*
 * The progress deadline. Converged: cleared, res says converged. Work after
 * convergence, or the first pass of this process past the deadline: a fresh
 * deadline. Past it: terminal. 1: go on and act; 0: the pass ends with res
 * filled (converged, or failed).
 */
int progress_deadline(reconciler *r, cluster_ctx *x, const etcd_cluster *c, const world *w,
                      const step *s, bool first_pass, pass_result *res);

/*
 * Give up on the latched spec until it changes: Progressing False and
 * Degraded True with reason, the terminal state stored, audit event action
 * (after_json subject, may be NULL), res failed with reason and message.
 * The caller logs the decision.
 */
void conditions_terminal(reconciler *r, const char *cluster, const world *w, const char *reason,
                         const char *message, const char *action, const char *subject,
                         pass_result *res);

/*
 * A member was refused a start because its data is from before a restore
 * (act.c): Degraded True, reason DataBehindRestore, with message; the
 * Degraded checker keeps it so while x->stale_message stands.
 */
void conditions_refused(reconciler *r, const char *cluster, const world *w, const char *message);
/* Members whose machines do not answer: Degraded True, reason MachineUnreachable, with message. */
void conditions_unreachable(reconciler *r, const char *cluster, const world *w,
                            const char *message);

/*
 * MachineHealthy from the machines' last preflights (machines.c): True or
 * False with its reason (PreflightPassed, PreflightFailed) and message;
 * its change is audited (condition.changed).
 */
void conditions_machines(reconciler *r, const char *cluster, const world *w, bool healthy,
                         const char *message);

/* ---- machines.c: the machines members run on ------------------------------ */

/*
 * The machines' preflights for the target that has machine operations:
 * recorded, each new verdict audited, and MachineHealthy stored and put in
 * res (machines, machines_message). Nothing when the target measures none.
 */
/*
 * Put the timeouts in force for cluster into x->latched's options: the
 * spec's own, or those derived from the peer RTT (state_timeouts) when it
 * sets neither and they differ from etcd's defaults. Before anything is
 * rendered in a pass.
 */
void machines_apply_timeouts(reconciler *r, cluster_ctx *x);
void machines_pass(reconciler *r, const char *cluster, const etcd_cluster *c, const world *w,
                   pass_result *res);

/* ---- act.c: the effects -------------------------------------------------- */

/* Take the step decide() chose. 0 (res says how it went), or -errno when it could not start. */
/* ---- slowleader.c: leadership moved off a slow disk ---------------------- */

/*
 * A converged cluster with spec.leadership.avoidSlowMembers: scrape the
 * voters' disk histograms once per window and, when the leader's disk is an
 * outlier (slowdisk.h) and no move was made this interval, MoveLeader to
 * the healthiest voter (audited member.move-leader, reason SlowDisk).
 * `held` is why a hold keeps voluntary work back, or NULL. 1 when a step
 * was taken (res filled), 0 otherwise (res untouched).
 */
int slow_leader_pass(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w,
                     const char *held, pass_result *res);

int act_step(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w, const step *s,
             pass_result *res);
/* Every pass that is not quiet: leftover target members removed, shared objects in step. */
void act_upkeep(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w);
/* Once per process and cluster: close the operations an earlier run left pending. */
void journal_recover(reconciler *r, cluster_ctx *x);

/* ---- rollout.c: a rolling version change --------------------------------- */

/*
 * The gates of a rolling version change (upgrade.h) around decide()'s step.
 * 1: go on with *s (maybe rewritten); 0: the rollout failed (terminal, res
 * filled).
 */
int rollout_pass(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w, step *s,
                 pass_result *res);
