/*
 * gitcd's etcd v3 client: etcd's gRPC API (Cluster, Maintenance, KV, Auth)
 * spoken directly over HTTP/2, with typed results.
 *
 * A client holds a list of endpoints; its calls borrow the process's
 * connection to each endpoint (etcd/pool.h: opened on first use, shared by
 * every client of the process with the same TLS identity, closed after
 * idle), so a client costs no connection of its own. Cluster-wide calls go to the endpoint that answered
 * last and fail over to the next one when an endpoint cannot be reached, or
 * when it is a learner that refuses the call; a member whose gRPC health
 * service says NOT_SERVING (defragmenting) is tried last for a short while,
 * and one this process is defragmenting (etcd_defragment) for as long as
 * that lasts, by every client of the process.
 * Per-member calls (status,
 * defragment, snapshot, hash) take an explicit endpoint, which must be one
 * of the configured ones (-EINVAL otherwise): the client never dials a URL
 * it was not given, nor changes a configured scheme, so credentials go
 * nowhere else. Every call has a deadline (opts.call_timeout_ms) that holds
 * across fail-overs.
 *
 * Errors: every function returns 0 on success or a negative code, either an
 * etcd_err (etcd/errors.h: ETCD_ERR_MEMBER_NOT_IN_SYNC, ETCD_ERR_UNREACHABLE,
 * ...) or -EINVAL for a bad argument. After a failure
 * etcd_client_last_error() holds a sentence for a person (which call,
 * which endpoint, what etcd said, what to do). Passwords and tokens never
 * appear in it.
 *
 * Threads: a client is not thread-safe; use one client per thread. Results
 * are plain structs owned by the caller, freed with their *_free function.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/errors.h"

typedef struct etcd_client etcd_client;

typedef struct etcd_client_opts {
        /* Comma-separated client URLs ("http://127.0.0.1:2379,..."). A URL without
         * a scheme gets https:// when cacert or cert is set, else http://. */
        const char *endpoints;
        const char *cacert;   /* PEM CA bundle for https:// endpoints; NULL = system store */
        const char *cert;     /* client certificate for mTLS */
        const char *key;      /* its private key */
        const char *user;     /* etcd auth user; NULL = no auth */
        const char *password; /* its password (never logged) */
        /*
         * A second password, tried once when etcd refuses the first (and
         * used from then on): for the moment of a password change, when
         * the caller cannot know which of the two etcd has. NULL = none.
         */
        const char *fallback_password;
        int call_timeout_ms;     /* deadline of one call incl. fail-over; default 5000 */
        int dial_timeout_ms;     /* TCP + TLS connect per endpoint; default 2000 */
        int snapshot_timeout_ms; /* deadline of a whole snapshot; default 600000 */
        /*
         * A small read's first attempt (one key, the member list, the
         * alarms, ...) while other endpoints are left; past it with nothing
         * back the client asks that member's gRPC health and moves on when
         * it is not serving (defragmenting). A read over a prefix is not cut
         * at it (a large answer takes long to build). Default 1000.
         */
        int read_first_try_ms;
} etcd_client_opts;

/*
 * Create a client; no connection is made until the first call. -EINVAL for an
 * empty endpoint list, a URL with a scheme other than http:// or https://, or
 * a URL with a user name or password in it (use user and password).
 */
int etcd_client_new(const etcd_client_opts *opts, etcd_client **ret_client);
void etcd_client_free(etcd_client *c);
/*
 * Close the process's idle connections to c's endpoints (etcd/pool.h), for
 * every client that shares them: before one of those members is stopped.
 */
void etcd_client_close_idle(etcd_client *c);
/* The message for the last failure; "" when the last call succeeded. */
const char *etcd_client_last_error(const etcd_client *c);
size_t etcd_client_endpoint_count(const etcd_client *c);
const char *etcd_client_endpoint(const etcd_client *c, size_t i);
/*
 * How many times, over the client's life, a call waited on a timer while
 * part of etcd's answer was already in hand (grpc_conn_timer_wakeups on
 * every endpoint): 0 when the transport works as designed. For tests and
 * benchmarks.
 */
uint64_t etcd_client_timer_wakeups(const etcd_client *c);
/*
 * How many times, over the client's life, an endpoint's gRPC health service
 * said NOT_SERVING (a member defragmenting with etcd 3.5.14+'s
 * --experimental-stop-grpc-service-on-defrag): each time, that endpoint was
 * tried last for a short while and calls were served by the others. For
 * tests and benchmarks.
 */
uint64_t etcd_client_not_serving(const etcd_client *c);

/* Member IDs print in lowercase hex without leading zeros, like etcdctl ("8e9e05c52164694d"). */
void etcd_member_id_format(uint64_t id, char buf[static 17]);
/* Parse a hex member ID (an optional "0x" prefix is accepted). -EINVAL otherwise. */
int etcd_member_id_parse(const char *s, uint64_t *ret_id);

/* ---- Cluster ---- */

typedef struct etcd_member {
        uint64_t id;
        char *name; /* "" for a member added but not started yet */
        char **peer_urls;
        size_t n_peer_urls;
        char **client_urls; /* empty until the member has started */
        size_t n_client_urls;
        bool is_learner;
} etcd_member;

typedef struct etcd_members {
        uint64_t cluster_id;
        uint64_t responder_id; /* the member that answered */
        etcd_member *members;
        size_t n;
} etcd_members;

void etcd_members_free(etcd_members *l);
/* A deep copy of l. */
etcd_members *etcd_members_dup(const etcd_members *l);
/* Find a member by ID in a list; NULL when absent. */
const etcd_member *etcd_members_find(const etcd_members *l, uint64_t id);

int etcd_member_list(etcd_client *c, etcd_members **ret_list);
/*
 * Add a member (a learner when is_learner). Returns the new member's ID and,
 * when ret_list is not NULL, the membership after the change.
 * Expected errors: ETCD_ERR_PEER_URL_EXISTS, ETCD_ERR_TOO_MANY_LEARNERS,
 * ETCD_ERR_UNHEALTHY, ETCD_ERR_MEMBER_BAD_URLS.
 */
int etcd_member_add(etcd_client *c, const char *const *peer_urls, size_t n_peer_urls,
                    bool is_learner, uint64_t *ret_id, etcd_members **ret_list);
/* Expected errors: ETCD_ERR_MEMBER_NOT_FOUND, ETCD_ERR_UNHEALTHY (would lose quorum). */
int etcd_member_remove(etcd_client *c, uint64_t id);
int etcd_member_update(etcd_client *c, uint64_t id, const char *const *peer_urls,
                       size_t n_peer_urls);
/* Expected errors: ETCD_ERR_MEMBER_NOT_IN_SYNC (retry later), ETCD_ERR_MEMBER_NOT_LEARNER. */
int etcd_member_promote(etcd_client *c, uint64_t id);

/* ---- Maintenance ---- */

typedef struct etcd_endpoint_status {
        char *endpoint; /* the URL asked */
        char *version;  /* server version, "3.5.16" */
        int64_t db_size;
        int64_t db_size_in_use;
        uint64_t leader; /* 0 when the member knows no leader */
        uint64_t raft_index;
        uint64_t raft_applied_index;
        uint64_t raft_term;
        uint64_t member_id;
        uint64_t cluster_id;
        int64_t revision; /* the store revision the member answered at */
        bool is_learner;
        char **errors; /* alarms and health problems the member reports */
        size_t n_errors;
} etcd_endpoint_status;

void etcd_endpoint_status_free(etcd_endpoint_status *s);
etcd_endpoint_status *etcd_endpoint_status_dup(const etcd_endpoint_status *s);
/*
 * Whether the member's Status may be reporting an alarm. etcd 3.4 and 3.5
 * list every alarm of the cluster in a Status's errors (one entry each,
 * "memberID:… alarm:NOSPACE ") beside "etcdserver: no leader"; any entry
 * but that one counts, so a format etcd changes errs toward asking. A
 * Status with none says the cluster has no alarm as that member applied it,
 * without the Alarm call (whose GET etcd puts through raft: an entry in the
 * log and a WAL write on every member, each time it is asked).
 */
bool etcd_status_may_report_alarm(const etcd_endpoint_status *s);
/*
 * Status of one member: endpoint is one of the configured endpoints (a URL
 * without a scheme names the configured one of that host and port); NULL =
 * any reachable endpoint.
 */
int etcd_status(etcd_client *c, const char *endpoint, etcd_endpoint_status **ret_status);

typedef enum etcd_alarm_type {
        ETCD_ALARM_NONE = 0,
        ETCD_ALARM_NOSPACE = 1,
        ETCD_ALARM_CORRUPT = 2,
} etcd_alarm_type;

typedef struct etcd_alarm {
        uint64_t member_id;
        etcd_alarm_type type;
} etcd_alarm;

/* Active alarms (ret_alarms is NULL when there are none; free() it). */
int etcd_alarm_list(etcd_client *c, etcd_alarm **ret_alarms, size_t *ret_n);
/* Deactivate one alarm (as etcdctl alarm disarm does for each listed alarm). */
int etcd_alarm_disarm(etcd_client *c, uint64_t member_id, etcd_alarm_type type);
/* Raise an alarm by hand (for drills and tests: NOSPACE makes etcd refuse writes). */
int etcd_alarm_activate(etcd_client *c, uint64_t member_id, etcd_alarm_type type);

/*
 * Defragment one member's backend (it blocks that member while it runs).
 * While the call runs, every etcd client of this process tries that member
 * last (cluster-wide calls, writes included: they go to another member
 * before they are sent); after it, the member is tried as before.
 */
int etcd_defragment(etcd_client *c, const char *endpoint);

/*
 * Hand leadership to target_id. The call goes to the current leader, found
 * among the configured endpoints by Status (never through a URL the leader
 * advertises). Expected errors: ETCD_ERR_BAD_LEADER_TRANSFEREE (a learner or
 * unknown member), ETCD_ERR_NO_LEADER, ETCD_ERR_UNAVAILABLE (the leader is
 * not among the configured endpoints). Moving leadership to the current
 * leader is a no-op returning 0.
 */
int etcd_move_leader(etcd_client *c, uint64_t target_id);

/* The hash of the MVCC keyspace up to revision (0 = latest) on one member. */
int etcd_hash_kv(etcd_client *c, const char *endpoint, int64_t revision, uint32_t *ret_hash,
                 int64_t *ret_compact_revision);

typedef struct etcd_snapshot_info {
        uint64_t size;    /* bytes streamed, including etcd's 32-byte sha256 trailer */
        int64_t revision; /* store revision the snapshot was taken at */
        bool checksum_ok; /* the trailer matched the sha256 of the data */
} etcd_snapshot_info;

/* Receives the snapshot bytes in order; return a negative code to abort. */
typedef int (*etcd_snapshot_fn)(const void *data, size_t len, void *userdata);

/*
 * Stream a snapshot of one member (endpoint NULL = any) to fn, chunk by chunk,
 * never holding it whole in memory. The sha256 etcd appends is verified:
 * ETCD_ERR_SNAPSHOT_CHECKSUM when it does not match.
 */
int etcd_snapshot(etcd_client *c, const char *endpoint, etcd_snapshot_fn fn, void *userdata,
                  etcd_snapshot_info *ret_info);
/* etcd_snapshot into a file: written as path.part, fsynced, renamed on success. */
int etcd_snapshot_save(etcd_client *c, const char *endpoint, const char *path,
                       etcd_snapshot_info *ret_info);

/* ---- KV ---- */

typedef struct etcd_kv {
        char *key; /* NUL-terminated copies; key_len/value_len hold the byte lengths */
        size_t key_len;
        char *value;
        size_t value_len;
        int64_t create_revision;
        int64_t mod_revision;
        int64_t version;
        int64_t lease;
} etcd_kv;

typedef struct etcd_kv_list {
        int64_t revision; /* store revision of the read */
        etcd_kv *kvs;
        size_t n;
        bool more;
} etcd_kv_list;

void etcd_kv_list_free(etcd_kv_list *l);
int etcd_put(etcd_client *c, const char *key, const void *value, size_t value_len,
             int64_t *ret_revision);
/* Read key, or every key starting with it when prefix. An absent key gives an empty list. */
int etcd_get(etcd_client *c, const char *key, bool prefix, etcd_kv_list **ret_list);
int etcd_delete(etcd_client *c, const char *key, bool prefix, int64_t *ret_deleted);
/*
 * How many keys the whole keyspace holds at revision (0: now), as one member
 * (endpoint; NULL: any) serves it from its own data (a serializable,
 * count-only Range: no key or value is read out). *ret_revision (may be
 * NULL) is the store revision the member answered at. Expected errors:
 * ETCD_ERR_COMPACTED (revision compacted away), ETCD_ERR_FUTURE_REV.
 */
int etcd_count_keys(etcd_client *c, const char *endpoint, int64_t revision, int64_t *ret_count,
                    int64_t *ret_revision);
/*
 * Compare-and-put: store value when key's mod_revision equals expected_mod_revision
 * (0 = the key must not exist). *ret_succeeded says whether the put happened.
 */
int etcd_txn_put_if(etcd_client *c, const char *key, int64_t expected_mod_revision,
                    const void *value, size_t value_len, bool *ret_succeeded);
int etcd_compact(etcd_client *c, int64_t revision, bool physical);

/* ---- Auth ---- */

int etcd_auth_enable(etcd_client *c);
int etcd_auth_disable(etcd_client *c);
/* ETCD_ERR_UNIMPLEMENTED on servers older than 3.5. */
int etcd_auth_status(etcd_client *c, bool *ret_enabled);
int etcd_user_add(etcd_client *c, const char *name, const char *password);
int etcd_role_add(etcd_client *c, const char *name);
int etcd_user_grant_role(etcd_client *c, const char *user, const char *role);
/* Set a user's password (what `etcdctl user passwd` does). ETCD_ERR_USER_NOT_FOUND. */
int etcd_user_change_password(etcd_client *c, const char *name, const char *password);
/* The user names; *ret_users is NULL-terminated, free each and the array. */
int etcd_user_list(etcd_client *c, char ***ret_users, size_t *ret_n);
