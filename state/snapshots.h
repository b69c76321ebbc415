/*
 * Snapshot records in the state store: every snapshot gitcd took or tried
 * to take, and what retention did with it.
 *
 * A record is written "running" before the first byte is read from etcd
 * and finished as "succeeded" or "failed" afterwards, so a crash leaves a
 * running row that state_snapshot_abandon_running() turns into a failure.
 * Only a succeeded record is a snapshot: a failed or partial upload never
 * counts, for restore, for retention or for the SnapshotsHealthy condition.
 *
 * Retention deletes only what is recorded here, by key. It first marks a
 * record expired (expired_ms), then deletes the object and records the
 * outcome: deleted_ms on success, delete_error on failure. An expired record
 * that is not deleted yet is tried again on the next retention run; it no
 * longer counts as a kept snapshot.
 *
 * Records are not tied to the clusters table: a snapshot outlives the
 * cluster it was taken from (state_cluster_delete keeps them).
 *
 * Errors and the last-error message follow state/state.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_snapshot {
        int64_t id;
        char *cluster;   /* "namespace/name" */
        char *trigger;   /* "manual", "schedule" or "declared" */
        int64_t slot_ms; /* schedule: the cron time it was taken for; 0 for manual */
        int64_t started_ms;
        int64_t finished_ms; /* 0 while running */
        char *result;        /* "running", "succeeded" or "failed" */
        char *error;         /* why it failed, or NULL */
        char *member;        /* the member it was taken from */
        int64_t revision;    /* etcd store revision in the snapshot */
        int64_t size;        /* bytes stored (after compression) */
        int64_t db_size;     /* bytes of etcd's snapshot (before compression) */
        char *sha256;        /* 64 hex digits over the stored bytes */
        char *compression;   /* "none" or "gzip" */
        char *etcd_version;  /* version of the member it was taken from */
        char *destination;   /* the destination's identity ("local:/srv/backups", "s3:...") */
        char *key;           /* key under that destination */
        char *location;      /* human location ("/srv/backups/ns/name/...") */
        int64_t duration_ms;
        int64_t expired_ms; /* retention decided to delete it; 0: kept */
        int64_t deleted_ms; /* the object was deleted; 0: not (yet) */
        char *delete_error; /* the last failed deletion, or NULL */
        char *declared_by;  /* declared: the document that asked ("EtcdSnapshot ns/name") */
        /* Keys the member held at the snapshot's revision (a count-only Range); -1: unknown. */
        int64_t key_count;
        /*
         * The latest restore drill of this snapshot that reached a verdict
         * (verified or verify-failed), else its latest finished one
         * (unverified): a drill that could not run does not hide what an
         * earlier one proved. Read with the record from state_snapshot_drill;
         * verify_result NULL: never drilled.
         */
        char *verify_result; /* "verified", "verify-failed" or "unverified" */
        char *verify_trigger;
        char *verify_method;
        char *verify_message;
        int64_t verify_ms; /* when that drill finished */
        int64_t verify_restore_ms;
        int64_t verify_duration_ms;
} state_snapshot;

typedef struct state_snapshot_list {
        state_snapshot **items;
        size_t n;
} state_snapshot_list;

/*
 * Write a "running" record and return its id. trigger is "manual" or
 * "schedule". -EINVAL for a bad cluster name or trigger.
 */
int state_snapshot_begin(state_db *db, const char *cluster, const char *trigger, int64_t slot_ms,
                         int64_t now_ms, int64_t *ret_id);
/*
 * Finish a running record with the outcome in s (result "succeeded" or
 * "failed", and every measured field; id, cluster, trigger and the times
 * are taken from the record and now_ms). -ENOENT, -EALREADY when it is no
 * longer running, -EINVAL for another result or a succeeded record without
 * a key or SHA-256.
 */
int state_snapshot_finish(state_db *db, int64_t id, const state_snapshot *s, int64_t now_ms);
int state_snapshot_get(state_db *db, int64_t id, state_snapshot **ret);
/* Records of cluster (NULL: every cluster), newest first; at most limit (0: all). */
int state_snapshot_list_for(state_db *db, const char *cluster, size_t limit,
                            state_snapshot_list *ret_list);
/* Mark a succeeded record expired by retention (kept when already expired). -ENOENT. */
int state_snapshot_expire(state_db *db, int64_t id, int64_t now_ms);
/* Record a deletion: error NULL sets deleted_ms, else delete_error. -ENOENT. */
int state_snapshot_deleted(state_db *db, int64_t id, const char *error, int64_t now_ms);
/* Running records of cluster (NULL: all) become failed with why; returns the count. */
int state_snapshot_abandon_running(state_db *db, const char *cluster, const char *why,
                                   int64_t now_ms);
/*
 * Declared one-off snapshots: a document in Git (cozystack EtcdSnapshot,
 * improbable EtcdBackup) asks for one snapshot of a cluster. Each version of
 * a document (object + identity, a hash of what it asks) is one request,
 * taken at most once: state_snapshot_begin_declared() writes the running
 * record and marks the request taken in one transaction, so neither a
 * restart of gitcd nor the document staying in Git ever repeats it. A
 * request whose document left Git before it was taken is withdrawn (and
 * pending again if the same version comes back).
 */
typedef struct state_snapshot_request {
        int64_t id;
        char *cluster;          /* "namespace/name" */
        char *object;           /* "EtcdSnapshot ns/name" */
        char *identity;         /* what the document asks, hashed */
        char *destination_json; /* the location it names (api/spec.h); NULL: spec.snapshots' */
        int64_t seen_ms;        /* first recorded */
        int64_t withdrawn_ms;   /* 0: the document is still in Git */
        int64_t snapshot_id;    /* the record of its one attempt; 0: pending */
} state_snapshot_request;

typedef struct state_snapshot_request_list {
        state_snapshot_request **items;
        size_t n;
} state_snapshot_request_list;

/*
 * The requests the documents in Git make for cluster now: new ones are
 * recorded, pending ones not among them are withdrawn. Returns the number
 * of new requests.
 */
int state_snapshot_requests_sync(state_db *db, const char *cluster,
                                 const state_snapshot_request *reqs, size_t n, int64_t now_ms);
/* Requests of cluster (NULL: all), oldest first; pending_only: not taken, not withdrawn. */
int state_snapshot_requests_list(state_db *db, const char *cluster, bool pending_only,
                                 state_snapshot_request_list *ret_list);
/*
 * Begin the one attempt of a request: a running record with trigger
 * "declared" and declared_by the request's object, and the request marked
 * taken by it, in one transaction. -EALREADY when it was taken (or
 * withdrawn), -ENOENT when there is no such request.
 */
int state_snapshot_begin_declared(state_db *db, int64_t request_id, int64_t now_ms,
                                  int64_t *ret_id);
void state_snapshot_request_free(state_snapshot_request *r);
void state_snapshot_request_list_release(state_snapshot_request_list *l);

/*
 * Restore drills: a drill fetches a succeeded snapshot back from its
 * destination, restores it with etcd's tool into a scratch folder, starts a
 * throwaway etcd on it and compares what that serves with the live cluster
 * (snapshots/drill.h). Each drill is one row, written "running" before
 * anything is fetched and finished once, never deleted:
 *
 *   running ──▶ verified       the snapshot restores and serves what the
 *                              cluster held at its revision
 *      ├──────▶ verify-failed  it does not (damaged, refused by etcd's tool,
 *      │                       etcd does not start on it, other data)
 *      └──────▶ unverified     the drill could not reach a verdict (no room in
 *                              the scratch folder, no etcd binary, the
 *                              destination unreachable, gitcd stopped): it
 *                              says nothing about the snapshot
 *
 * A snapshot record carries its latest verdict (verify_* above).
 */
typedef struct state_snapshot_drill {
        int64_t id;
        int64_t snapshot_id;
        char *cluster;
        char *trigger;   /* "snapshot" (after it was stored), "schedule" or "manual" */
        int64_t slot_ms; /* schedule: the cron time of spec.snapshots.verify it ran for */
        int64_t started_ms;
        int64_t finished_ms; /* 0 while running */
        char *result;        /* "running", "verified", "verify-failed" or "unverified" */
        char *method;        /* what was compared: "hashkv", "revision-and-count", "revision" */
        char *message;       /* what was found, or why it failed */
        int64_t revision;    /* the revision the throwaway etcd served; 0: not reached */
        int64_t key_count;   /* the keys it served; -1: not reached */
        int64_t restore_ms; /* etcd's restore tool and the throwaway etcd's start; 0: not reached */
        int64_t duration_ms; /* the whole drill, fetch included */
} state_snapshot_drill;

typedef struct state_snapshot_drill_list {
        state_snapshot_drill **items;
        size_t n;
} state_snapshot_drill_list;

/*
 * Write a running drill of snapshot snapshot_id and return its id. -ENOENT
 * when there is no such succeeded snapshot, -EINVAL for a bad trigger.
 */
int state_snapshot_drill_begin(state_db *db, int64_t snapshot_id, const char *trigger,
                               int64_t slot_ms, int64_t now_ms, int64_t *ret_id);
/*
 * Finish a running drill with d's result and measurements (its id, snapshot,
 * trigger and times are the record's and now_ms). -ENOENT, -EALREADY when it
 * is no longer running, -EINVAL for another result.
 */
int state_snapshot_drill_finish(state_db *db, int64_t id, const state_snapshot_drill *d,
                                int64_t now_ms);
int state_snapshot_drill_get(state_db *db, int64_t id, state_snapshot_drill **ret);
/* Drills of cluster (NULL: every cluster), newest first; at most limit (0: all). */
int state_snapshot_drill_list_for(state_db *db, const char *cluster, size_t limit,
                                  state_snapshot_drill_list *ret_list);
/* Running drills become unverified with why (no drill runs: the caller holds the drill lock). */
int state_snapshot_drill_abandon_running(state_db *db, const char *why, int64_t now_ms);
/* The cron slot of the last scheduled drill of cluster; 0 when none. */
int state_snapshot_drill_last_slot(state_db *db, const char *cluster, int64_t *ret_slot_ms);
void state_snapshot_drill_free(state_snapshot_drill *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_snapshot_drill *, state_snapshot_drill_free);
void state_snapshot_drill_list_release(state_snapshot_drill_list *l);

void state_snapshot_free(state_snapshot *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_snapshot *, state_snapshot_free);
void state_snapshot_list_release(state_snapshot_list *l);
