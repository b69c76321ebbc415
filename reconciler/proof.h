/*
 * What a comparison of the members' hashes proves, and what a cluster
 * whose members may hold different data is allowed to do: pure functions,
 * the rules reconciler/consistency.c acts on (docs/consistency.md).
 *
 * The proof: every member answers etcd's HashKV at one revision all of
 * them applied; two members whose hashes are equal at the same revision
 * and above the same compact revision hold the same keyspace (a CRC-32C of
 * every key and value, etcd's own corruption check). A disagreement is
 * judged by majority: the group of equal hashes that alone holds a quorum
 * of the voters is trusted, the others are the minority. No such group:
 * no side is trusted.
 *
 * The freeze: from a disagreement (or etcd's CORRUPT alarm) until a
 * person acts, no voluntary change happens (membership, rolling restarts,
 * the converged-only work); what still happens is what moves no data
 * between members and changes nothing a person would choose, and the
 * steps of the repair the person asked for (proof_gate).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reconciler/decide.h"
#include "state/consistency.h"

/* A check that agreed this long ago still vouches for a new member copying data. */
#define PROOF_FRESH_MS (INT64_C(60) * 1000)
/* A check that did not conclude (a compaction in between, a member slow) is tried again after. */
#define PROOF_RETRY_MS (INT64_C(10) * 1000)

/* A step held by the freeze waits with this reason (Progressing False, phase Frozen). */
#define REASON_FROZEN "Frozen"

/* One member's answers to a check. */
typedef struct proof_answer {
        const char *name;
        int64_t revision;         /* Status: the store revision it has applied */
        bool hashed;              /* HashKV answered at the revision chosen */
        uint32_t hash;            /* its hash there */
        int64_t compact_revision; /* the compaction the hash was computed above */
} proof_answer;

/*
 * The revision to compare at: the smallest of the members' applied
 * revisions, which every one of them has applied (no "future revision")
 * and which is as recent as that allows (the least compaction can have
 * passed it). 0 when a member reported none.
 */
int64_t proof_revision(const proof_answer *a, size_t n);

typedef enum proof_verdict {
        PROOF_AGREE,        /* every member compared: one hash */
        PROOF_MINORITY,     /* one group of equal hashes holds a quorum of the voters */
        PROOF_NO_MAJORITY,  /* the hashes differ and no group holds a quorum */
        PROOF_INCONCLUSIVE, /* a member did not answer, or the compact revisions differ */
} proof_verdict;

/* "agree", "minority", "no-majority", "inconclusive" (as stored). */
const char *proof_verdict_name(proof_verdict v);

typedef struct proof_result {
        proof_verdict verdict;
        int64_t revision;
        int64_t compact_revision;
        char *hashes;   /* JSON object: member -> 8 hex digits */
        char *majority; /* comma-separated: the trusted group (AGREE: everyone; else NULL) */
        char *minority; /* MINORITY: the others; NO_MAJORITY: everyone; else NULL */
        char *message;  /* a sentence for people: what was compared and what it shows */
} proof_result;

/*
 * Judge n members' answers at revision, the cluster having voters voting
 * members (those compared may be fewer: the running voters before a
 * replacement). Rules, first match wins:
 *   1. a member that did not answer, or whose compact revision is not the
 *      others' (a compaction between two calls): INCONCLUSIVE;
 *   2. one hash: AGREE (one member alone agrees with itself);
 *   3. the largest group of equal hashes holds floor(voters/2)+1 members:
 *      MINORITY, the members outside it named;
 *   4. NO_MAJORITY, every member named.
 */
void proof_judge(const proof_answer *a, size_t n, int voters, int64_t revision, proof_result *ret);
void proof_result_release(proof_result *r);

/*
 * When the next check is due (wall ms): now when none concluded yet or a
 * member (re)started since (due), PROOF_RETRY_MS after an attempt that did
 * not conclude, else interval_ms after the last check.
 */
int64_t proof_next_check_ms(const state_consistency *row, int64_t interval_ms);

/*
 * Does step s make a member copy the leader's data, or begin a replacement
 * that ends with one doing so? A learner added, or a member removed to be
 * replaced. Such a step waits for a fresh proof (proof_fresh) first: a new
 * member must not copy the data of a minority.
 */
bool proof_step_copies(const step *s);
/* The last check agreed, PROOF_FRESH_MS ago at most, and no member (re)started since. */
bool proof_fresh(const state_consistency *row, int64_t now_ms);

/* The freeze as a pass sees it. */
typedef struct proof_freeze {
        bool frozen;
        const char *cause;    /* "hashes", "no-majority", "alarm" */
        const char *minority; /* comma-separated; NULL or "" when none is known */
        /* The repair a person asked for, while it runs (NULL: none, or a recheck). */
        const char *repair_member;      /* the member being replaced */
        const char *repair_replacement; /* the learner added in its place, once added */
} proof_freeze;

/* Is name in the comma-separated list? */
bool proof_listed(const char *list, const char *name);

/*
 * The freeze over decide()'s step s. Not frozen: it goes. Frozen, these go:
 *   - a wait; certificates renewed (files swapped, nothing restarted); a
 *     member that ran before started again on its own data (a crash is
 *     not a person's choice, and starting moves no data);
 *   - the steps of the repair being run: the replaced member's leadership
 *     moved away, its removal and deletion, one learner added in its
 *     place, that learner started and promoted.
 * Before the repair removes a member or adds its learner, leadership must
 * be on a member outside the minority (a new member copies the leader's
 * data): the step becomes that move (to the lowest ordinal). Everything
 * else is held: s becomes a wait with REASON_FROZEN that says what waits.
 * true: s goes (maybe rewritten into the move); false: held.
 */
bool proof_gate(const proof_freeze *f, const observation *obs, step *s);

/* The DataConsistent condition, judged from the cluster's row (NULL: never checked). */
typedef struct proof_condition {
        const char *status; /* "True", "False", "Unknown" */
        const char *reason; /* "Agree", "Mismatch", "NoMajority", "CorruptAlarm", "NotChecked" */
        char *message;      /* newly allocated */
} proof_condition;

void proof_check_condition(const state_consistency *row, proof_condition *ret);
