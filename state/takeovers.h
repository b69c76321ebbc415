/*
 * The takeover of a cluster another operator ran (spec.adopt,
 * reconciler/takeover.h) in the state store: one row per cluster, written
 * before the first membership change. It names the old operator's
 * members (their etcd IDs: only those are ever removed as "the old
 * cluster's"), the cluster ID they formed, the objects gitcd leaves for
 * the user to delete, and what gitcd changed on the old client Service
 * (its selector before). finished_ms is set once etcd lists none of the
 * old members; the row stays, for status and plan.
 */
#pragma once

#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_takeover {
        char *cluster;
        char *source;                  /* "coreos default/example": the operator and its resource */
        char *cluster_id;              /* 16 hex digits */
        char *members_json;            /* [{"id": hex, "name", "peer_url", "client_url"}] */
        char *objects_json;            /* ["Pod default/example-x", ...] left for the user */
        char *service;                 /* the old client Service, or NULL when there is none */
        char *service_selector_before; /* its selector (JSON) before gitcd pointed it; NULL */
        int64_t started_ms;
        int64_t finished_ms; /* 0: still under way */
} state_takeover;

void state_takeover_free(state_takeover *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(state_takeover *, state_takeover_free);

/* The cluster's takeover; -ENOENT when none was recorded. */
int state_takeover_get(state_db *db, const char *cluster, state_takeover **ret);
/*
 * Record a takeover begun (every field of t but the selector and
 * finished_ms): 1 when recorded, 0 when one was recorded already (kept
 * as it was: a takeover is surveyed once). -ENOENT: unknown cluster.
 */
int state_takeover_begin(state_db *db, const state_takeover *t);
/* Record the old client Service's selector before gitcd changed it (kept when set already). */
int state_takeover_set_service_before(state_db *db, const char *cluster, const char *selector);
/* Record the takeover finished at now_ms (kept when it was already). */
int state_takeover_finish(state_db *db, const char *cluster, int64_t now_ms);
