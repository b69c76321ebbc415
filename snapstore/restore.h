/*
 * Getting a recorded or given snapshot back into an etcd data directory:
 * fetch and check it, unpack it, verify etcd's own hash, and run etcd's
 * restore tool for the target version. Behind `gitcd snapshot restore`.
 *
 * Every check runs before anything is written to the data directory, and
 * each refusal says which check failed: missing, size, SHA-256 (against the
 * record), etcd's sha256 trailer, a snapshot from a newer etcd than the
 * target version, or etcd's tool refusing it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "state/snapshots.h"

struct pvc_writer;

/*
 * Download the snapshot of a succeeded record into path, then check its
 * size and SHA-256 against the record. The destination is the cluster's
 * current spec destination when it is the one recorded, else a recorded
 * local folder. -ENOENT (the object is gone), -EBADMSG (size or SHA-256
 * mismatch), -EINVAL (not a succeeded record, or its destination is
 * unknown now); *ret_error says which. pvc: the target's writer for a
 * record in a PersistentVolumeClaim (snapshot_pvc_writer_new); NULL: such a
 * record is refused (-EOPNOTSUPP).
 */
int snapshot_fetch(state_db *db, const state_snapshot *rec, const char *state_dir,
                   const struct pvc_writer *pvc, const char *path, char **ret_error);

/*
 * snapshot_fetch() with the S3 credentials Secret of the record's
 * destination as the target wrote it (snapshot_secret_folder; NULL: the
 * state folder's Secret folders or gitcd's environment, as for
 * snapshot_fetch()).
 */
int snapshot_fetch_secret(state_db *db, const state_snapshot *rec, const char *state_dir,
                          const char *secret_dir, const struct pvc_writer *pvc, const char *path,
                          char **ret_error);

/*
 * The cluster rec was taken of, as the state store holds its spec (the
 * latched one, else the desired one), when rec's destination is that
 * spec's destination still; else NULL. Newly allocated.
 */
etcd_cluster *snapshot_record_cluster(state_db *db, const state_snapshot *rec);

/*
 * Make an uncompressed snapshot file at out from in (gzip is recognised by
 * its magic bytes; anything else is copied) and check etcd's sha256
 * trailer over it. -EBADMSG with *ret_error when the trailer is missing or
 * does not match (the file is damaged), or the gzip stream is broken.
 * out NULL: only check (no copy is written; for an uncompressed in, which
 * can then be restored as it is).
 */
int snapshot_unpack(const char *in, const char *out, int64_t *ret_size, char **ret_error);

/* Whether path starts with gzip's magic bytes (a compressed snapshot). */
bool snapshot_is_gzip(const char *path);

typedef struct snapshot_restore_opts {
        const char *tool;     /* etcdutl (3.5+) or etcdctl (3.4) of the target version */
        const char *snapshot; /* an uncompressed snapshot file (snapshot_unpack) */
        const char *data_dir; /* must not exist yet */
        const char *name;     /* the member's name */
        const char *peer_url; /* its advertised peer URL */
        const char *token;    /* --initial-cluster-token */
        /* --initial-cluster: every member of a static initial cluster, each restored from
         * the same snapshot; NULL: the member alone (name=peer_url) */
        const char *initial_cluster;
        /*
         * --bump-revision N --mark-compacted (etcd 3.4.27, 3.5.10 and later,
         * api/versions.h): the restored store's revision is the snapshot's
         * plus N, every revision up to it compacted; 0: neither flag.
         */
        int64_t bump_revision;
} snapshot_restore_opts;

/* Run the tool's `snapshot restore`. -EEXIST when data_dir exists; -EIO with its words. */
int snapshot_restore_dir(const snapshot_restore_opts *o, char **ret_error);
