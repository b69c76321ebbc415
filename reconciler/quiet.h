/*
 * Quiet passes: what an idle pass of a converged cluster may leave out.
 *
 * Every pass observes the whole world (records, the target's status of
 * each member with its health, etcd's member list and leader) and decides;
 * that is how a member that died or hangs is noticed, and it is never
 * skipped. What a pass of a converged cluster may leave out is the upkeep
 * that only matters when something changed: keeping the shared objects in
 * step with the members (the target's ensure_shared: rendering Services, a
 * PDB, TLS material and comparing them) and looking for members the
 * target holds that nobody recorded (a leftover of a crash mid-step).
 *
 * The rule: a digest of everything the pass observed (the latched spec's
 * hash, the cluster record, every member record, the target's status of
 * it, the config hash the spec renders for it now, etcd's member list and
 * leader). A pass whose digest equals the one of the last full pass, when
 * that pass converged and was less than QUIET_FULL_PASS_MS ago, is quiet.
 * Any difference (a member's state, a restart, a new leader, a new spec or
 * CA bundle, a record changed) makes the pass full again; so does a pass
 * that did not converge, and the time limit bounds how long a change made
 * behind gitcd's back to an object that is not a member (a deleted
 * Service, a removed certificate file) waits to be repaired.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "etcd/client.h"
#include "state/state.h"
#include "targets/target.h"
#include "util/strbuf.h"

#define QUIET_FULL_PASS_MS (5 * 60 * 1000)
#define QUIET_DIGEST_LEN   32

typedef struct quiet_track {
        bool armed; /* the last full pass converged, with digest */
        unsigned char digest[QUIET_DIGEST_LEN];
        int64_t full_pass_ms; /* monotonic */
} quiet_track;

/* The text a digest is made of; every value is written with its length, so none is ambiguous. */
typedef struct quiet_digest {
        strbuf sb;
} quiet_digest;

void quiet_digest_cluster(quiet_digest *d, const char *latched_hash, const state_cluster *sc);
/* One observed member: rec NULL for a member only etcd lists. */
void quiet_digest_member(quiet_digest *d, const state_member *rec, const target_member_status *ts,
                         const char *want_hash);
void quiet_digest_etcd(quiet_digest *d, const etcd_members *l, uint64_t leader);
/* The digest (SHA-256 of the text); the text is released. */
void quiet_digest_end(quiet_digest *d, unsigned char ret[QUIET_DIGEST_LEN]);

/* Whether a pass that observed digest may be quiet. */
bool quiet_may_skip(const quiet_track *q, const unsigned char digest[QUIET_DIGEST_LEN],
                    int64_t now_ms);
/*
 * After a pass: a full pass that converged arms the track with its digest;
 * a quiet one that converged keeps it; any other pass disarms it.
 */
void quiet_pass_end(quiet_track *q, bool quiet, bool converged,
                    const unsigned char digest[QUIET_DIGEST_LEN], int64_t now_ms);
