/*
 * Deciding the next step for one cluster: a pure function from what the
 * spec wants and what was observed (etcd's member list, the target's view
 * of each member, the state store's records) to ONE safe step.
 *
 * The act side (reconciler/act.c) performs the step, journaling the
 * intent first, then observes again. Because the observation is rebuilt
 * from the world on every pass, the same pass repeated is harmless, and a
 * crash between any two steps resumes from what etcd and the target say.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "targets/target.h"

typedef struct obs_member {
        const char *name;
        int ordinal;
        /* From the state store. */
        bool recorded;
        bool dormant; /* stopped on purpose by a pause */
        /* From etcd's member list (valid when the list was read). */
        bool in_etcd;
        uint64_t id;
        bool learner;
        bool unstarted; /* listed by etcd but never started (empty name) */
        /* From the target. */
        member_runtime_state runtime;
        /* From the member's Status call; NULL when it did not answer. */
        const char *version;
        /* The command it runs differs from the one the spec renders (version, flags). */
        bool outdated;
        /*
         * A member of a static initial cluster (recorded with initial-cluster-state
         * new and more than one member in its initial cluster) that etcd has not yet
         * listed as started (with its client URLs): the static bootstrap is not
         * over (reconciler/bootstrap.h).
         */
        bool static_initial;
        /*
         * A person asked to replace it from the majority (`gitcd repair
         * --replace`, reconciler/consistency.c): taken for lost, so the
         * replacement rule (7) removes it and a learner takes its place.
         */
        bool replace;
        /*
         * A member of the cluster another operator ran, being taken over
         * (spec.adopt, reconciler/takeover.h): in etcd, not gitcd's (never
         * recorded, never started or deleted by the target); runtime is
         * MEMBER_READY when it answers etcd's status, else MEMBER_STARTING.
         */
        bool foreign;
} obs_member;

/* A TLS leaf certificate gitcd issued (tls.provider auto), from the target. */
typedef struct obs_cert {
        const char *member;  /* NULL: shared by every member */
        const char *surface; /* "client", "peer", "operator"; TARGET_CERT_CA: the CA */
        int64_t not_after_ms;
} obs_cert;

typedef struct observation {
        obs_member *members;
        size_t n;
        bool etcd_listed;   /* the member list was read from a voter */
        uint64_t leader_id; /* 0: no leader seen */
        bool bootstrapped;  /* the cluster has formed once (a cluster ID is recorded) */
        int next_ordinal;   /* the counter that only grows: the next member's ordinal */
        const obs_cert *certs;
        size_t n_certs;
        int64_t now_ms; /* wall clock of the observation (certificate windows) */
} observation;

typedef struct desired {
        int replicas;            /* 0 = paused */
        bool static_bootstrap;   /* spec.bootstrap.mode static: a new cluster forms at once */
        int64_t renew_before_ms; /* tls.auto.renewBefore; certificates are renewed this early */
        /*
         * A takeover is under way (spec.adopt, not finished): no seed is
         * ever started, the old cluster's members are replaced (rule 8b).
         */
        bool takeover;
} desired;

typedef enum step_kind {
        STEP_CONVERGED,      /* nothing to do */
        STEP_WAIT,           /* something is in flight or broken; look again after an event */
        STEP_START_SEED,     /* create the first member alone (initial-cluster-state new) */
        STEP_ADD_LEARNER,    /* MemberAdd(isLearner) for member `name` (a new ordinal) */
        STEP_START_MEMBER,   /* start a member etcd already knows (or a dormant/stopped one) */
        STEP_PROMOTE,        /* MemberPromote(member_id) */
        STEP_MOVE_LEADER,    /* MoveLeader(to member_id) away from the member about to go */
        STEP_REMOVE_MEMBER,  /* MemberRemove(member_id) before its process and data go */
        STEP_DELETE_MEMBER,  /* stop the process of a member etcd no longer has; delete its data */
        STEP_STOP_MEMBER,    /* pause: stop the last member, keeping its data */
        STEP_RESTART_MEMBER, /* roll one member onto its new command (upgrade, flags) */
        STEP_RENEW_CERTS,    /* reissue one member's leaf certificates (member NULL: shared ones) */
        STEP_BOOTSTRAP,      /* record and start `count` members at once from `ordinal` (static) */
} step_kind;

const char *step_kind_name(step_kind k); /* "add-learner", ... (audit action suffixes) */

/* Reasons, shared with the Progressing/Degraded/Available conditions. */
#define REASON_QUORUM_HEALTHY   "QuorumHealthy"
#define REASON_QUORUM_LOST      "QuorumLost"
#define REASON_PAUSED           "Paused"
#define REASON_WAITING_FOR_SEED "WaitingForSeed"
#define REASON_SCALING_UP       "ScalingUp"
#define REASON_SCALING_DOWN     "ScalingDown"
#define REASON_REPLACING_MEMBER "ReplacingMember"
#define REASON_UPGRADING        "Upgrading"
#define REASON_RECOVERING       "RecoveringMember"
#define REASON_CERTS_EXPIRED    "CertificatesExpired"
#define REASON_RENEWING_CERTS   "RenewingCertificates"
#define REASON_BOOTSTRAPPING    "Bootstrapping"
#define REASON_TAKING_OVER      "TakingOver"

typedef struct step {
        step_kind kind;
        const char *member; /* the member the step is about (points into the observation) */
        int ordinal;        /* STEP_ADD_LEARNER, STEP_START_SEED, STEP_BOOTSTRAP: the new (first)
                               member's ordinal */
        int count;          /* STEP_BOOTSTRAP: how many members form the initial cluster */
        uint64_t member_id; /* etcd ID for PROMOTE / REMOVE / MOVE_LEADER (target) */
        const char *reason; /* one of REASON_* */
        char *message;      /* a sentence for people and the audit log; owned (step_release) */
        /* The audit event's JSON when not {"member": member}; not owned (never set by decide) */
        const char *audit_after;
} step;

/* Frees the message; a step copied by value needs its own (xstrdup) before either is released. */
void step_release(step *s);
/* Sets s->message, freeing the one it replaces. */
void step_say(step *s, const char *fmt, ...) _printf_(2, 3);

/*
 * The decision. Rules, first match wins:
 *  0. a certificate that has expired: renew it (its member first, one
 *     member per step). Renewal swaps files and restarts nothing, so it is
 *     safe without quorum, and an expired certificate may be why there is
 *     none;
 *  1. nothing exists and replicas > 0: with a static bootstrap and more
 *     than one replica (and no cluster ID recorded), record and start every
 *     member at once (reconciler/bootstrap.h); otherwise start the seed;
 *  1b. a static initial cluster not formed yet: start its members that
 *     are not running, then wait for every one of them (Bootstrapping);
 *  2. the seed is not up yet: wait (WaitingForSeed);
 *  3. fewer healthy voters than a quorum: wait (QuorumLost) — no
 *     membership change, no deletion, ever;
 *  4. a member etcd knows but that never started: start it;
 *  5. a started learner: promote it (one learner at a time);
 *  6. a member etcd dropped whose process or data remains: delete it;
 *  7. a member whose data is lost, that crash-loops, or that a person
 *     asked to replace (obs_member.replace): remove it from etcd
 *     (replacement), only while the others keep quorum;
 *  8. a recorded member whose process is stopped or absent (not paused):
 *     start it again with its data;
 *  8b. a takeover (want->takeover, reconciler/takeover.h) while etcd lists
 *     members of the old cluster (obs_member.foreign): every voter healthy
 *     first; while gitcd has fewer voters than wanted and the cluster is
 *     no larger than wanted, add a learner (rules 4-5 start and promote
 *     it); else remove one old member, a follower first, the leader last
 *     after moving leadership to a voter of gitcd's. So 3 old members
 *     become 4, 3, 4, 3, 4, 3: one change at a time, quorum kept. With a
 *     takeover, no member answering is a wait, never a seed (rule 1);
 *  9. fewer members than wanted: add a learner;
 * 10. more voters than wanted (or paused with more than one): move leadership
 *     away from the newest, then remove it;
 * 11. paused with one member left: stop it;
 * 12. a certificate within tls.auto.renewBefore of expiry: renew it, one
 *     member per step, the soonest to expire first;
 * 13. a member running an outdated command: restart it, followers first,
 *     leader last after moving leadership away;
 * 14. otherwise converged.
 * (Rule 8 is checked right after rule 2, before the quorum check: starting
 * a stopped member is how quorum comes back.)
 */
void decide(const desired *want, const observation *obs, step *ret_step);
/* (*ret_step is written whole, never read, its message always set: release it with
 * step_release() before it is decided again.) */

/*
 * Rule 12 alone: a certificate within tls.auto.renewBefore of expiry (with
 * quorum) gives its renewal step in *s (released first) and true; else
 * false and *s untouched. For a pass whose step is held back
 * (reconciler/hold.h): renewal is never held, and rules before it (a
 * membership change) must not keep it waiting.
 */
bool decide_renewal(const desired *want, const observation *obs, step *s);

/*
 * When the next certificate enters its renewal window (wall ms; it may be
 * in the past), or 0 when there is no certificate. For the requeue of a
 * converged pass and the CertificatesExpiring condition.
 */
int64_t certs_next_renewal_ms(const desired *want, const observation *obs);
/* The certificate that expires first (NULL when none). */
const obs_cert *certs_soonest(const observation *obs);

/* Voters etcd lists, and how many of them the target reports ready. */
void observation_voters(const observation *obs, int *ret_voters, int *ret_healthy);
