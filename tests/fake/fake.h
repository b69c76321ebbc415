/*
 * A fake world for reconciler tests: an in-memory target (target_ops)
 * whose "processes" form an in-memory etcd membership, reached through
 * the reconciler's etcd seam (reconciler/etcd-ops.h). No process, socket
 * or disk: a whole lifecycle runs in milliseconds.
 *
 * The membership follows etcd's own refusal rules (v3.5, strict reconfig
 * check on):
 *   - MemberAdd: refused while a learner exists (max-learners 1,
 *     TOO_MANY_LEARNERS), for a peer URL already listed (PEER_URL_EXISTS),
 *     and unless every voter has been connected for the health interval
 *     (5 s, UNHEALTHY);
 *   - MemberPromote: only a learner (MEMBER_NOT_LEARNER) that has been
 *     running long enough to catch up (MEMBER_NOT_IN_SYNC);
 *   - MemberRemove of a voter: refused when the started voters left would
 *     not be a quorum (NOT_ENOUGH_STARTED) or when the connected voters
 *     left would not be (UNHEALTHY); a removed member's process exits;
 *   - any change needs a leader, which needs a quorum of voters up.
 * A member process joins the membership the way etcd does: "new" with no
 * cluster yet forms it with every member of its --initial-cluster (the
 * others listed unstarted, without a name), "new" with the very initial
 * cluster the cluster formed with takes its unstarted member (a static
 * bootstrap), "existing" takes the unstarted member listed with its peer
 * URL; anything else exits at once.
 *
 * The world lives in a shared anonymous mapping, so a test can fork a
 * child that runs reconciler passes until a failpoint kills it and then
 * see exactly the effects that happened before the kill.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "reconciler/etcd-ops.h"
#include "targets/target.h"

#define FAKE_MAX_MEMBERS 16
#define FAKE_NAME_MAX    64
#define FAKE_URL_MAX     128
#define FAKE_HEALTH_MS   5000 /* etcd's health interval */
#define FAKE_IC_MAX      (FAKE_MAX_MEMBERS * (FAKE_NAME_MAX + FAKE_URL_MAX + 2))

typedef struct fake_etcd_member {
        bool used;
        uint64_t id;
        char name[FAKE_NAME_MAX];      /* "" until it first started (set from the start in a static
                                     initial cluster, as etcd does) */
        char client_url[FAKE_URL_MAX]; /* "" until the member first started */
        char peer_url[FAKE_URL_MAX];
        bool learner;
} fake_etcd_member;

typedef struct fake_proc {
        bool present; /* the target holds this member (planned at least) */
        char name[FAKE_NAME_MAX];
        char peer_url[FAKE_URL_MAX];
        char client_url[FAKE_URL_MAX];
        char listen_client[2 * FAKE_URL_MAX]; /* --listen-client-urls, as last started */
        char listen_peer[FAKE_URL_MAX];       /* --listen-peer-urls, as last started */
        char initial_state[16];               /* "new" | "existing", as last started */
        char initial_cluster[FAKE_IC_MAX];    /* --initial-cluster, as last started */
        char config_hash[72];                 /* member_plan.config_hash it was last started with */
        uint64_t command_hash;                /* of the command last started */
        size_t command_len;
        uint64_t etcd_id; /* the etcd member this process is, 0 before it joined */
        bool has_data;
        char data_id[32]; /* its data directory's identity ("" before the first start) */
        bool initialized; /* joined etcd once */
        bool running;
        bool stopped;  /* stopped on purpose */
        bool crashed;  /* exited on its own */
        bool broken;   /* test hook: every start exits at once (host down) */
        bool lost;     /* test hook: its data directory is gone */
        bool alone;    /* test hook: it sees a cluster of itself alone (force-new-cluster) */
        bool silent;   /* test hook: the target cannot report on it (its machine is down) */
        bool force;    /* its last command had --force-new-cluster */
        bool restored; /* its data is a snapshot restored while a cluster existed, never started */
        /* What its Status call answers (test hooks; raft index and store revision). */
        uint64_t raft_index;
        int64_t revision;
        int64_t restored_revision; /* restore_member put a snapshot of this revision in its data */
        int64_t restored_bump;     /* ... with this --bump-revision (0: none) */
        /* test hook: its data came from elsewhere (a folder put back by hand); data_revision
         * reports this revision (0: the data it got from gitcd) */
        int64_t foreign_revision;
        int revision_reads;              /* data_revision calls that read its data */
        char restored_with[FAKE_IC_MAX]; /* the --initial-cluster it was restored with */
        int64_t running_since_ms;
        int64_t cert_not_after_ms; /* its leaf certificate (world cert_life_ms > 0) */
        int cert_serial;
        int cert_ca;     /* world ca_model: the CA generation that signed its leaf */
        char trusts[16]; /* world ca_model: the CA generations it trusts, as last started */
        int starts;      /* process starts, restarts included */
        int restarts;
        char version[16];  /* the etcd version it was last started on (its Status says so) */
        uint64_t raft_lag; /* test hook: raft entries it is behind the leader */
        /*
         * test hook: its data differs from the cluster's by this (0: the same):
         * its HashKV answers the cluster's hash xor it. A learner that joins
         * copies the leader's (etcd sends a new member the leader's data).
         */
        uint32_t garble;
        int64_t kv_lag; /* test hook: store revisions it is behind (its Status says so) */
} fake_proc;

typedef struct fake_world {
        int64_t now_ms; /* the clock of the world and the reconciler */
        uint64_t cluster_id;
        char formed_with[FAKE_IC_MAX]; /* the --initial-cluster the cluster formed with */
        uint64_t leader;
        uint64_t next_id;
        int data_ids; /* data identities handed out */
        char ns[FAKE_NAME_MAX];
        char cluster[FAKE_NAME_MAX];
        fake_etcd_member members[FAKE_MAX_MEMBERS];
        fake_proc procs[FAKE_MAX_MEMBERS];
        int learner_sync_ms;    /* how long a learner runs before it is in sync (default 300) */
        int fail_next_add;      /* test hook: MemberAdd fails once with this etcd error */
        const char *fail_renew; /* test hook: renew_tls of this member fails once */
        int disconnects;        /* etcd connections gitcd closed (the fake seam's disconnect) */
        char never_starts[FAKE_NAME_MAX]; /* test hook: this member's every start exits at once */
        /*
         * TLS: > 0 gives every member one leaf certificate (surface "peer")
         * of this lifetime when it first starts. A member whose certificate
         * expired is cut off: no peer or client talks to it.
         */
        int64_t cert_life_ms;
        int renewals;          /* certificates renewed through the target */
        int restores;          /* snapshots restored into a member (restore_member) */
        int64_t data_revision; /* the revision the cluster's data started from (0: empty) */
        /*
         * Members that started with empty data into a static cluster formed
         * from a snapshot: etcd takes them in at the snapshot's raft index
         * without its keys, so their data silently differs. Must stay 0.
         */
        int diverged;
        /* test hook: the CA bundle (PEM) members trust, "" for none; its fingerprint is the
         * TLS material version place_member reports (pki_bundle_fingerprint) */
        char ca_pem[8192];
        /*
         * test hook: model tls.provider auto's CA folders (pki/auto.c) by
         * generation: the signer, the incoming CA (rotation phase 1) and the
         * retiring one (phase 2), following c->tls.ca_rotation_phase the way
         * pki_auto_open() does; the trust version place_member reports is
         * the set of generations trusted ("1,2"). Violations counted: a
         * member started trusting less than a present member's leaf needs,
         * a leaf reissued from a CA some running member does not trust.
         */
        bool ca_model;
        int ca_signer, ca_next, ca_old;
        /* ca_model: the signer's notAfter, reported by tls_certificates as TARGET_CERT_CA
         * (0: no CA reported); a new signer (phase 2) gets ten years from then */
        int64_t ca_not_after_ms;
        bool ca_imported; /* the CA reported is one taken over (target_cert.imported) */
        int ca_reissues;
        int ca_violations;
        /* Data kept aside by remove_member(keep_data), by member name ("" = free slot). */
        char kept[FAKE_MAX_MEMBERS][FAKE_NAME_MAX];
        int kept_dropped;  /* kept data deleted through drop_kept_data */
        int forced_starts; /* starts with --force-new-cluster */
        /* test hook: a process started on this etcd version exits at once (a broken build) */
        char bad_version[16];
        uint64_t raft_index; /* the leader's raft index in Status answers (default 1000) */
        /*
         * etcd auth (root user and role only, as gitcd uses it). While it is
         * on, membership changes and auth calls need root's password.
         */
        struct {
                bool enabled;
                bool root_user;
                bool root_role;
                bool root_granted;
                char root_password[128];
        } auth;
        int auth_refusals; /* calls refused for missing or wrong credentials */
        /*
         * The keyspace (reconciler/consistency.c): the store revision members
         * answer in Status (0: 100) and the compact revision their HashKV
         * answers above. corrupt_alarm: etcd's CORRUPT alarm is raised.
         */
        int64_t kv_revision;
        int64_t compact_revision;
        bool corrupt_alarm;
        int hashes;         /* HashKV calls answered */
        int garbled_copies; /* learners that joined with a leader's garbled data */
        /* Counters of calls that changed something, for assertions. */
        int adds, promotes, removes, leader_moves;
        int peer_updates; /* MemberUpdate calls (update_peer) */
        int shared_syncs;
} fake_world;

/* A world in shared memory (survives in the parent when a forked child is killed). */
fake_world *fake_world_new(void);
void fake_world_free(fake_world *w);

/* The clock to give reconciler_opts (reads the world last made current). */
void fake_world_make_current(fake_world *w);
int64_t fake_clock_ms(void);
/* Advance the clock and let crashed processes restart (the target's own supervision). */
void fake_world_advance(fake_world *w, int64_t ms);

/* The target and the etcd operations over the world. */
int fake_target_new(fake_world *w, target **ret);
extern const etcd_membership_ops fake_etcd_ops;

/* Test hooks and queries. */
fake_proc *fake_proc_find(fake_world *w, const char *name);
const fake_etcd_member *fake_etcd_find(const fake_world *w, const char *name);
void fake_kill(fake_world *w, const char *name, bool broken); /* the process dies */
void fake_heal(fake_world *w, const char *name);              /* its host is back */
void fake_lose_data(fake_world *w, const char *name);         /* its data dir is gone */
size_t fake_etcd_count(const fake_world *w, size_t *ret_learners);
size_t fake_procs_present(const fake_world *w);
size_t fake_procs_running(const fake_world *w);
/* Is data of member kept aside (remove_member with keep_data)? */
bool fake_kept(const fake_world *w, const char *name);
