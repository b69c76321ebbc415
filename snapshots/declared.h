/*
 * Declared one-off snapshots: the cozystack EtcdSnapshot and improbable
 * EtcdBackup documents in Git (api/sidekinds.c) as requests in the state
 * store (state/snapshots.h), each taken once by the scheduler of `gitcd run`.
 */
#pragma once

#include <stdint.h>

#include "api/model.h"
#include "snapshots/snapshot.h"
#include "state/snapshots.h"

struct target;

/*
 * Record the one-off snapshots the documents of this revision ask of
 * cluster (c->declared): new ones become pending requests, pending ones
 * whose document left are withdrawn. Taken or withdrawn requests never come
 * back as new ones for the same document version. Returns the number of
 * new requests, or -errno.
 */
int snapshot_requests_record(state_db *db, const char *cluster, const etcd_cluster *c,
                             int64_t now_ms);

/*
 * The job that takes request q: the cluster's members and identity as for
 * any snapshot (snapshot_job_from_state), trigger "declared", and the
 * destination the document names (else the spec's).
 */
int snapshot_declared_job(state_db *db, struct target *t, const state_snapshot_request *q,
                          const char *state_dir, snapshot_job **ret, char **ret_error);
