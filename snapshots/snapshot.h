/*
 * Taking a snapshot of an etcd cluster and keeping the set of snapshots
 * tidy: the pipeline behind `gitcd snapshot save` and scheduled snapshots.
 *
 *   pick a member ─▶ stream to a temporary file (SHA-256 on the way)
 *     ─▶ verify (etcd's sha256 trailer; `etcdutl snapshot status`)
 *     ─▶ compress (optional, gzip) ─▶ upload (snapstore/destination.h)
 *     ─▶ record (state/snapshots.h) and audit ("snapshot.save")
 *
 * A snapshot_job owns copies of everything it needs (no pointer into the
 * reconciler's data), so it can run in a worker thread with its own
 * state-store connection and etcd client.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/model.h"
#include "state/snapshots.h"

struct pvc_writer;

typedef struct snapshot_endpoint {
        char *member;     /* member name ("main-0") */
        char *client_url; /* where it answers */
} snapshot_endpoint;

typedef struct snapshot_job {
        char *cluster;                /* "namespace/name" */
        char *trigger;                /* "manual", "schedule" or "declared" */
        int64_t request_id;           /* declared: the request it takes (state/snapshots.h) */
        char *declared_by;            /* declared: the document ("EtcdSnapshot ns/name") */
        char *reason;                 /* the audit event's reason; NULL: said by the trigger */
        int64_t slot_ms;              /* schedule: the cron time it is taken for */
        snapshot_endpoint *endpoints; /* the cluster's current members */
        size_t n_endpoints;
        char *ca, *cert, *key;      /* gitcd's client identity; NULL without client TLS */
        storage_location *override; /* --to: store here instead of the spec's destination */
        char *spec_json;            /* the cluster's latched spec (normalized JSON) */
        char *state_dir;            /* temporary files, S3 credential folders */
        /* The S3 credentials Secret as the target wrote it (snapshot_secret_folder);
         * NULL: the state folder's Secret folders or the environment. */
        char *secret_dir;
        /* Why the target could not read that Secret: the snapshot fails with it. */
        char *secret_error;
        char *etcd_dir;      /* where etcd's tools are by version; NULL: the default */
        atomic_bool *cancel; /* set to abort (gitcd stopping); may be NULL */
        /* The target's writer for a pvc destination (snapshot_pvc_writer_new); NULL: none. */
        struct pvc_writer *pvc;
} snapshot_job;

void snapshot_job_free(snapshot_job *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(snapshot_job *, snapshot_job_free);

struct target;
/*
 * Where the S3 credentials of loc are when the target reads Secrets itself
 * (target_ops.secret_folder, the Kubernetes target): *ret_dir is the folder
 * it wrote the Secret into. *ret_dir is NULL when loc names no Secret or t
 * has no Secrets (then <state dir>/secrets/ or the environment serve,
 * snapstore/destination.h). -errno with *ret_error when the target cannot
 * read the Secret (-ENOENT: there is none).
 */
int snapshot_secret_folder(struct target *t, const etcd_cluster *c, const storage_location *loc,
                           char **ret_dir, char **ret_error);

/*
 * The writer of target t for the pvc locations of cluster c
 * (target_ops.writer_start, snapstore/destination.h): what a
 * snapshot_dest_context names for a pvc destination or restore source.
 * NULL when t has none (pvc locations are then refused). It holds t, which
 * must outlive it, and a copy of c.
 */
struct pvc_writer *snapshot_pvc_writer_new(struct target *t, const etcd_cluster *c);
void snapshot_pvc_writer_free(struct pvc_writer *w);

/*
 * One writer per cluster at a time (target_ops.writer_start): a writer
 * started while another of the cluster is in use, by this gitcd or another
 * sharing the state folder, waits for it, trying again every second, at
 * most wait_ms (0: not at all), with a warning naming the holder when it
 * begins to wait; then the operation fails, naming it. It stops waiting
 * as soon as *cancel (when not NULL) is set. By default
 * SNAPSHOT_WRITER_WAIT_MS, without cancel; `gitcd run`'s scheduler, whose
 * one worker serves every cluster, waits SNAPSHOT_WRITER_WAIT_RUN_MS.
 * w may be NULL.
 */
#define SNAPSHOT_WRITER_WAIT_MS     (10 * 60 * 1000)
#define SNAPSHOT_WRITER_WAIT_RUN_MS (30 * 1000)
void snapshot_pvc_writer_set_wait(struct pvc_writer *w, int64_t wait_ms, atomic_bool *cancel);

/*
 * A job for cluster from what the state store recorded: its latched spec
 * (else its desired one), its current members' client URLs, and gitcd's
 * client identity and the S3 credentials Secret of its destination from the
 * target (t may be NULL for a cluster without client TLS or credentials
 * Secret). -ENOENT with *ret_error when the cluster is unknown.
 */
int snapshot_job_from_state(state_db *db, struct target *t, const char *cluster,
                            const char *trigger, int64_t slot_ms, const char *state_dir,
                            snapshot_job **ret, char **ret_error);

/*
 * Store the job's snapshot in loc instead of the spec's destination (copied
 * into job->override), and read again from the target the S3 credentials
 * Secret that loc names (t may be NULL).
 */
void snapshot_job_set_destination(snapshot_job *job, struct target *t, const storage_location *loc);

struct etcd_client;
/*
 * A client of job's cluster with gitcd's credentials for it (the client
 * identity of the job, etcd's root password with spec.auth): of its
 * members (endpoints NULL), or of other endpoints over plain http (a
 * restore drill's throwaway etcd, which holds the cluster's auth store),
 * with the password alone. As etcd_client_new().
 */
int snapshot_job_client(const snapshot_job *job, const char *endpoints, int call_timeout_ms,
                        struct etcd_client **ret);

/*
 * snapshot_fetch() for a caller that holds the target the record's cluster
 * runs on but not its spec (gitcd snapshot restore): a record in a
 * PersistentVolumeClaim is fetched through t's writer, made for the
 * cluster's spec in the state store (snapshot_pvc_writer_new). A target
 * without writers: -EOPNOTSUPP, as snapshot_fetch() without one.
 */
int snapshot_fetch_on(state_db *db, const state_snapshot *rec, const char *state_dir,
                      struct target *t, const char *path, char **ret_error);

/*
 * Take the snapshot described by job, record it in db and audit it. Returns
 * 0 with the id of the record (which says succeeded), or -errno with the
 * record saying failed (and why) and *ret_error set. The record id is
 * written in both cases when a record could be written (else 0).
 * Expected errors: -EHOSTUNREACH no healthy member answered, -EBADMSG the
 * snapshot failed verification, -ECANCELED aborted through job->cancel,
 * and the destination's errors. A declared job (request_id) begins its
 * record with state_snapshot_begin_declared(): -EALREADY, with no record,
 * when its request was taken already.
 */
int snapshot_take(state_db *db, const snapshot_job *job, int64_t *ret_id, char **ret_error);

/*
 * Retention for one cluster and destination: of the succeeded snapshots
 * recorded for this destination, keep the `count` newest that are younger
 * than max_age_ms (0: no age limit), and never the newest one whatever its
 * age; expire and delete the others by their recorded key. Objects gitcd did
 * not record are never touched. A deletion that fails is recorded and tried
 * again on the next call. Returns the number deleted, or -errno when the
 * records cannot be read (a failed deletion is not an error here).
 * secret_dir: as snapshot_job.secret_dir.
 */
int snapshot_retention(state_db *db, const char *cluster, const snapshot_spec *spec,
                       const char *state_dir, const char *secret_dir, const struct pvc_writer *pvc,
                       int64_t now_ms);
