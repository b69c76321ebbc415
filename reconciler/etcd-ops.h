/*
 * The seam between the reconciler and etcd's membership API: the handful
 * of calls a reconciler pass makes (member list, leader, MemberAdd as a
 * learner, MemberPromote, MemberRemove, MoveLeader), as an operation table
 * in the style of the target's (targets/target.h).
 *
 * The default table (etcd_membership_real) drives the real client
 * (etcd/client.h). Tests pass their own table in reconciler_opts to run
 * whole lifecycles against an in-memory model of etcd's membership rules,
 * without processes or sockets.
 *
 * Errors are the client's: 0 or a negative etcd_err / errno
 * (etcd/errors.h), with a sentence for a person in last_error().
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "etcd/client.h"
#include "etcd/errors.h"

/* One cluster's connection: endpoints and gitcd's client identity. */
typedef struct etcd_conn etcd_conn;

typedef struct etcd_conn_opts {
        const char *endpoints; /* comma-separated client URLs of the recorded members */
        const char *cacert;    /* client TLS files, or NULL */
        const char *cert;
        const char *key;
        /* etcd auth (reconciler/auth.h owns them): NULL = none. Never logged. */
        const char *user;
        const char *password;
        const char *fallback_password; /* tried when password is refused (a change in flight) */
        int call_timeout_ms;
} etcd_conn_opts;

typedef struct etcd_membership_ops {
        /* Make a connection (no network yet). -EINVAL for unusable endpoints. */
        int (*connect)(void *userdata, const etcd_conn_opts *o, etcd_conn **ret_conn);
        void (*disconnect)(etcd_conn *conn);

        int (*member_list)(etcd_conn *conn, etcd_members **ret_list);
        /*
         * The member list as the member at endpoint (one of its client URLs)
         * sees it, asked of that member alone: to cross-check a list before
         * acting on what it leaves out.
         */
        int (*member_list_at)(etcd_conn *conn, const char *endpoint, etcd_members **ret_list);
        /* The leader's member ID as one member reports it (0: none known). */
        int (*leader)(etcd_conn *conn, uint64_t *ret_leader);
        /*
         * A pass's look: the member list (as member_list) and the leader (as
         * leader; 0 when it could not be asked). Fails only as member_list
         * does. The real table answers an unchanged member's list from the
         * last look, with one call (reconciler/etcd-ops.c says why nothing
         * is missed). *ret_status (ret_status may be NULL): the Status the
         * look read, with the endpoint that answered it, for the rest of
         * the pass to use instead of asking again; NULL when none was read.
         * May be NULL: member_list, then leader.
         */
        int (*look)(etcd_conn *conn, etcd_members **ret_list, uint64_t *ret_leader,
                    etcd_endpoint_status **ret_status);
        /* Expected: ETCD_ERR_PEER_URL_EXISTS, _TOO_MANY_LEARNERS, _UNHEALTHY. */
        int (*add_learner)(etcd_conn *conn, const char *peer_url, uint64_t *ret_id);
        /* Expected: ETCD_ERR_MEMBER_NOT_IN_SYNC (retry later), _MEMBER_NOT_LEARNER. */
        int (*promote)(etcd_conn *conn, uint64_t id);
        /* Expected: ETCD_ERR_MEMBER_NOT_FOUND, _UNHEALTHY, _NOT_ENOUGH_STARTED. */
        int (*remove)(etcd_conn *conn, uint64_t id);
        /* Set a member's one peer URL (MemberUpdate). Expected: ETCD_ERR_PEER_URL_EXISTS. */
        int (*update_peer)(etcd_conn *conn, uint64_t id, const char *peer_url);
        /* Expected: ETCD_ERR_BAD_LEADER_TRANSFEREE, _NO_LEADER. */
        int (*move_leader)(etcd_conn *conn, uint64_t to_id);
        /*
         * The Status of the member at endpoint (one of its client URLs), asked
         * of it alone, so it answers without a leader: its server version, raft
         * index and store revision (upgrade gates, quorum-loss assessment). May
         * be NULL: unknown.
         */
        int (*status_at)(etcd_conn *conn, const char *endpoint, etcd_endpoint_status **ret_status);

        /*
         * The hash of the member at endpoint's keyspace at revision (etcd's
         * HashKV, asked of that member alone, with its own deadline:
         * etcd reads the whole keyspace for it), and the compact revision
         * it was computed above (reconciler/consistency.c). Expected:
         * ETCD_ERR_COMPACTED (revision is below the member's compaction),
         * ETCD_ERR_FUTURE_REV (the member has not applied it). May be NULL:
         * unsupported, no check is made.
         */
        int (*hash_kv_at)(etcd_conn *conn, const char *endpoint, int64_t revision, int timeout_ms,
                          uint32_t *ret_hash, int64_t *ret_compact_revision);
        /*
         * Disarm every active CORRUPT alarm (the last step of a repair a
         * person asked for, once every member agrees). *ret_n: how many
         * there were. May be NULL.
         */
        int (*corrupt_disarm)(etcd_conn *conn, size_t *ret_n);

        /*
         * etcd auth (reconciler/auth.c), with the connection's credentials.
         * auth_status: whether auth is on (on etcd 3.4, which has no
         * AuthStatus, told by whether UserList needs credentials).
         * Expected: ETCD_ERR_USER_EXISTS, _ROLE_EXISTS, _USER_NOT_FOUND,
         * _AUTH_FAILED (the connection's password is not the user's),
         * _ROOT_USER_MISSING, _ROOT_ROLE_MISSING.
         */
        int (*auth_status)(etcd_conn *conn, bool *ret_enabled);
        int (*user_add)(etcd_conn *conn, const char *user, const char *password);
        int (*user_change_password)(etcd_conn *conn, const char *user, const char *password);
        int (*role_add)(etcd_conn *conn, const char *role);
        int (*user_grant_role)(etcd_conn *conn, const char *user, const char *role);
        int (*auth_enable)(etcd_conn *conn);
        int (*auth_disable)(etcd_conn *conn);

        /* The message of the last failed call on conn ("" after a success). */
        const char *(*last_error)(const etcd_conn *conn);
} etcd_membership_ops;

/* The real etcd client (etcd/client.h); userdata is unused. */
extern const etcd_membership_ops etcd_membership_real;
