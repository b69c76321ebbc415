/*
 * The hosts target's last preflight of each machine of a cluster
 * (targets/hosts-preflight.h): one row per (cluster, machine), replaced at
 * each preflight. The verdict and reason of a row also say whether a
 * verdict is new: the caller audits or alerts once per change, not at
 * every preflight.
 */
#pragma once

#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"

typedef struct state_preflight {
        char *cluster; /* "namespace/name" */
        char *machine; /* "address:port" */
        char *member;  /* the member of cluster it held when measured; NULL: it was free */
        int64_t time_ms;
        char *verdict; /* "passed", "failed", "unmeasured" (the machine did not answer) */
        char *reason;  /* why it failed or was not measured; NULL when passed */
        char *kernel, *fstype;
        int64_t free_bytes, quota_bytes;
        int64_t n_sync, sync_p50_us, sync_p99_us, sync_max_us;
        int64_t offset_ms, offset_bound_ms;
        /* peer RTT (targets/hosts-rtt.h): connects timed, peers timed and not reached */
        int64_t rtt_samples, rtt_peers, rtt_failed;
        int64_t rtt_slowest_us, rtt_max_us; /* slowest peer's median; slowest connect */
} state_preflight;

typedef struct state_preflight_list {
        state_preflight **items;
        size_t n;
} state_preflight_list;

/*
 * Record p (p->time_ms is its time). Returns 1 when its verdict or reason
 * differs from the one recorded for that machine (or none was), 0 when
 * they are the same, or -errno (-EINVAL: no cluster, machine or verdict).
 */
int state_preflight_set(state_db *db, const state_preflight *p);
/* The last preflight of machine for cluster: 1 and *ret, 0 when none, or -errno. */
int state_preflight_get(state_db *db, const char *cluster, const char *machine,
                        state_preflight **ret);
/* Every machine's last preflight of cluster (NULL: every cluster's), by cluster and machine. */
int state_preflight_list_get(state_db *db, const char *cluster, state_preflight_list *ret);
/* Forget a cluster's preflights (the cluster is gone). 0 or -errno. */
int state_preflight_clear(state_db *db, const char *cluster);
/* A copy of p, every string its own. */
state_preflight *state_preflight_dup(const state_preflight *p);
void state_preflight_free(state_preflight *p);
void state_preflight_list_release(state_preflight_list *l);

/*
 * The heartbeat and election timeouts derived from the peer RTT and in
 * force for a cluster (reconciler/timeouts.h), with the measurement they
 * were derived from (the slowest link's median RTT) and when.
 */
typedef struct state_timeouts {
        int heartbeat_ms, election_ms;
        int64_t rtt_us, time_ms;
} state_timeouts;

/* Record a cluster's derived timeouts. 0 or -errno. */
int state_timeouts_set(state_db *db, const char *cluster, const state_timeouts *t);
/* A cluster's derived timeouts: 1 and *ret, 0 when none, or -errno. */
int state_timeouts_get(state_db *db, const char *cluster, state_timeouts *ret);
/* Forget a cluster's derived timeouts (the preflight is off, or the cluster gone). 0 or -errno. */
int state_timeouts_clear(state_db *db, const char *cluster);
