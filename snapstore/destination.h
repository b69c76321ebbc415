/*
 * Snapshot destinations: where finished snapshot files are stored, under keys.
 *
 * A destination is opened from a spec location (`spec.snapshots.destination`,
 * `spec.bootstrap.restore.source`): a folder on the gitcd host (`local`) or an
 * S3 bucket and key prefix (`s3`), or a folder in a PersistentVolumeClaim
 * (`pvc`), reached through a writer the target runs (pvc_writer below; the
 * Kubernetes target's writer Pod). Without a writer in the context, a PVC
 * location is refused with -EOPNOTSUPP.
 *
 * Every put is all-or-nothing: a reader (get/stat) never sees a partial object.
 * Local: a hidden temporary in the same folder, fsync, rename, folder fsync.
 * S3: one PUT, or a multipart upload completed only after every part succeeded
 * and aborted otherwise. PVC: the writer's temporary, SHA-256 check, fsync,
 * rename and folder fsync (snapstore/receiver.h, store mode). A get writes
 * `path.part`, fsyncs it and renames it to `path`, so `path` is never a
 * partial download either.
 *
 * Keys are relative ("prod/orders/2026-11-23T1400Z-r42.db"): components
 * separated by '/', none empty, none starting with '.', no control characters,
 * at most 1024 bytes. A local destination never follows a symlink inside its
 * folder (the folder named in the spec may itself be one).
 *
 * Errors are negative errno with a human message in *ret_error (optional;
 * written only on failure; never contains a secret). Expected ones:
 *   -EINVAL   a bad key or location
 *   -ENOENT   the key (or the file to upload) does not exist
 *   -EACCES   the server refused the credentials, or a file cannot be read
 *   -EIO, -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH   the storage failed, after retries
 *
 * The operation table is public so tests can drive a pipeline with a fake
 * destination (snapshot_dest_new()).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "api/model.h" /* storage_location, s3_location */
#include "util/macro.h"

typedef struct snapshot_dest snapshot_dest;

/* S3 credentials; the secret key never appears in a log line or an error. */
typedef struct s3_credentials {
        char *access_key_id;
        char *secret_access_key;
        char *session_token; /* NULL: none */
        char *ca_file;       /* a PEM CA bundle for HTTPS; NULL: the system's */
} s3_credentials;

void s3_credentials_release(s3_credentials *c);

typedef struct dest_object {
        char *key;        /* relative key under the destination's prefix/folder */
        int64_t size;     /* bytes */
        int64_t mtime_ms; /* last-modified, wall clock */
        char *sha256_hex; /* stored with the object by put (metadata / xattr); NULL: none */
} dest_object;

void dest_object_release(dest_object *o);

/*
 * How a target reaches a PersistentVolumeClaim: start() runs a writer (a
 * receiver in store mode, snapstore/receiver.h) with claim mounted at folder
 * ("" for the claim's root) and fills *ret_peer, whose strings stay valid
 * until stop(); stop() ends the writer and removes what start() made. The
 * destination calls start() on its first operation and stop() when freed.
 */
struct receiver_peer;
typedef struct pvc_writer {
        int (*start)(void *userdata, const char *claim, const char *folder,
                     struct receiver_peer *ret_peer, char **ret_error);
        void (*stop)(void *userdata);
        void *userdata;
} pvc_writer;

/*
 * What opening a location needs besides the location itself.
 *
 * S3 credentials on the gitcd host (local target): the location's
 * `credentialsSecretRef.name` names a folder
 * `<state_dir>/secrets/<namespace>/<name>/` holding one file per Secret key
 * (`accessKeyID`, `secretAccessKey`, optional `sessionToken`, optional `ca.crt`),
 * like a mounted Kubernetes Secret. When that folder does not exist,
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (and
 * AWS_CA_BUNDLE) from gitcd's environment are used. A target that reads
 * Secrets itself (Kubernetes: target_ops.secret_folder) writes the Secret
 * into a folder of the same layout and hands it in as `secret_dir`; that
 * folder is then the only place looked at (no environment fallback: the
 * spec named a Secret, and it is the one used). Credentials already in
 * memory come in through `credentials`.
 */
struct s3_config;
typedef struct snapshot_dest_context {
        const char *state_dir;             /* gitcd's state folder; NULL: no Secret folders */
        const char *namespace_;            /* the cluster's namespace; NULL: "default" */
        const s3_credentials *credentials; /* NULL: resolve as described above */
        /* The folder holding the Secret's keys, written by the target; NULL: as above. */
        const char *secret_dir;
        /* S3 client tuning (snapstore/s3.h): part size, multipart threshold, retries,
         * callbacks, extra name resolution; its endpoint, bucket, region, addressing
         * and credentials are ignored (they come from the location). NULL: defaults. */
        const struct s3_config *s3_tuning;
        /* The target's writer for PVC locations; NULL: they are refused (-EOPNOTSUPP). */
        const pvc_writer *pvc;
} snapshot_dest_context;

/*
 * Open a destination for snapshots (a folder / a bucket and key prefix).
 * Opening does not touch the network; a local folder is created (0700) on the
 * first put. -EINVAL for an unusable location, -EOPNOTSUPP for a PVC without
 * a writer, -ENOKEY when no S3 credentials are found.
 */
int snapshot_dest_open(const storage_location *loc, const snapshot_dest_context *ctx,
                       snapshot_dest **ret, char **ret_error);
/*
 * Open the destination holding a restore source (`bootstrap.restore.source`,
 * which names one file / one object) and return the key of that snapshot in
 * it: local "/a/b/s.db" opens folder "/a/b" with key "s.db"; s3 key "p/s.db"
 * opens the bucket with no prefix and key "p/s.db".
 */
int snapshot_source_open(const storage_location *loc, const snapshot_dest_context *ctx,
                         snapshot_dest **ret, char **ret_key, char **ret_error);
void snapshot_dest_free(snapshot_dest *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(snapshot_dest *, snapshot_dest_free);

/*
 * Upload a local file as key, replacing it; sha256_hex (64 lowercase hex digits)
 * is stored with it when non-NULL.
 */
int snapshot_dest_put_file(snapshot_dest *d, const char *key, const char *path,
                           const char *sha256_hex, char **ret_error);
/* Download key into path (written as path.part, fsynced, renamed; 0600). -ENOENT when absent. */
int snapshot_dest_get_file(snapshot_dest *d, const char *key, const char *path, char **ret_error);
/* Delete one key; -ENOENT when absent. Only keys gitcd recorded are ever passed here. */
int snapshot_dest_delete(snapshot_dest *d, const char *key, char **ret_error);
/* Size, time and stored SHA-256 of one key; -ENOENT when absent. */
int snapshot_dest_stat(snapshot_dest *d, const char *key, dest_object *ret, char **ret_error);
/* A human location for records and output: "s3://bucket/prefix/key", "/path/key" or
 * "pvc://claim/subPath/key". */
char *snapshot_dest_location(const snapshot_dest *d, const char *key);
/* "local", "s3" or "pvc": for messages and records, never for branching. */
const char *snapshot_dest_kind(const snapshot_dest *d);

/* True when key follows the rules above. */
bool snapshot_dest_key_valid(const char *key);

/* The identity of a destination as recorded ("local:/srv/backups", "s3:host/bucket/prefix"). */
char *snapshot_destination_id(const storage_location *loc);

/*
 * The operation table behind a destination. Keys reach an operation already
 * checked with snapshot_dest_key_valid(); ret_error is never NULL there.
 */
typedef struct snapshot_dest_ops {
        const char *kind;
        int (*put_file)(void *impl, const char *key, const char *path, const char *sha256_hex,
                        char **ret_error);
        int (*get_file)(void *impl, const char *key, const char *path, char **ret_error);
        int (*delete_key)(void *impl, const char *key, char **ret_error);
        int (*stat_key)(void *impl, const char *key, dest_object *ret, char **ret_error);
        char *(*location)(const void *impl, const char *key);
        void (*free_impl)(void *impl);
} snapshot_dest_ops;

/* A destination over any operation table (takes impl; ops must outlive it). */
snapshot_dest *snapshot_dest_new(const snapshot_dest_ops *ops, void *impl);
