/*
 * Errors of gitcd's etcd client. Every failure of a call is one of these
 * negative codes (returned by the etcd_* functions) plus a message a person
 * can act on, kept in the client (etcd_client_last_error()). gRPC status
 * codes and etcd's well-known error strings ("etcdserver: ...") are mapped
 * here, at the adapter, so callers switch on a code and never parse text.
 *
 * The codes live below -1000 so they never collide with -errno values,
 * which the client still returns for local problems (-EINVAL for a bad
 * argument, -EIO when a local file cannot be written, -ENOMEM never).
 */
#pragma once

#include <stdbool.h>

typedef enum etcd_err {
        ETCD_OK = 0,
        ETCD_ERR_BASE = -1000,

        /* Transport: reaching the server. */
        ETCD_ERR_UNREACHABLE = -1001, /* no endpoint accepted a connection */
        ETCD_ERR_TIMEOUT = -1002,     /* the call's deadline passed */
        ETCD_ERR_TLS = -1003,         /* TLS handshake or verification failed */
        ETCD_ERR_TLS_FILES = -1004,   /* CA, certificate or key file unusable */
        ETCD_ERR_PROTOCOL = -1005,    /* not a gRPC answer, or a malformed message */

        /* gRPC status codes without a more specific etcd meaning. */
        ETCD_ERR_CANCELLED = -1011,
        ETCD_ERR_UNKNOWN = -1012,
        ETCD_ERR_INVALID_ARGUMENT = -1013,
        ETCD_ERR_NOT_FOUND = -1015,
        ETCD_ERR_ALREADY_EXISTS = -1016,
        ETCD_ERR_RESOURCE_EXHAUSTED = -1018,
        ETCD_ERR_FAILED_PRECONDITION = -1019,
        ETCD_ERR_ABORTED = -1020,
        ETCD_ERR_OUT_OF_RANGE = -1021,
        ETCD_ERR_UNIMPLEMENTED = -1022,
        ETCD_ERR_INTERNAL = -1023,
        ETCD_ERR_UNAVAILABLE = -1024,
        ETCD_ERR_DATA_LOSS = -1025,

        /* Membership. */
        ETCD_ERR_MEMBER_NOT_FOUND = -1101,
        ETCD_ERR_MEMBER_EXISTS = -1102,
        ETCD_ERR_PEER_URL_EXISTS = -1103,
        ETCD_ERR_MEMBER_BAD_URLS = -1104,
        ETCD_ERR_MEMBER_NOT_LEARNER = -1105,
        ETCD_ERR_MEMBER_NOT_IN_SYNC = -1106, /* learner not yet caught up: retry later */
        ETCD_ERR_TOO_MANY_LEARNERS = -1107,
        ETCD_ERR_NOT_ENOUGH_STARTED = -1108,
        ETCD_ERR_UNHEALTHY = -1109,
        ETCD_ERR_LEARNER_NOT_SUPPORTED = -1110, /* a learner refused the call */
        ETCD_ERR_BAD_LEADER_TRANSFEREE = -1111,

        /* Leadership and availability. */
        ETCD_ERR_NO_LEADER = -1201,
        ETCD_ERR_NOT_LEADER = -1202,
        ETCD_ERR_LEADER_CHANGED = -1203,
        ETCD_ERR_SERVER_STOPPED = -1204,
        ETCD_ERR_SERVER_TIMEOUT = -1205, /* etcd's own "request timed out" */
        ETCD_ERR_NOT_CAPABLE = -1206,
        ETCD_ERR_CORRUPT = -1207,
        ETCD_ERR_PROPOSAL_DROPPED = -1208, /* raft's: no leader to take it (transfer, removal) */

        /* Key-value store. */
        ETCD_ERR_REQUEST_TOO_LARGE = -1301,
        ETCD_ERR_NOSPACE = -1302, /* NOSPACE alarm: database quota exceeded */
        ETCD_ERR_COMPACTED = -1303,
        ETCD_ERR_FUTURE_REV = -1304,
        ETCD_ERR_EMPTY_KEY = -1305,
        ETCD_ERR_TOO_MANY_OPS = -1306,
        ETCD_ERR_DUPLICATE_KEY = -1307,

        /* Authentication and authorisation. */
        ETCD_ERR_AUTH_FAILED = -1401, /* wrong user name or password */
        ETCD_ERR_INVALID_TOKEN = -1402,
        ETCD_ERR_PERMISSION_DENIED = -1403,
        ETCD_ERR_AUTH_NOT_ENABLED = -1404,
        ETCD_ERR_USER_EXISTS = -1405,
        ETCD_ERR_USER_NOT_FOUND = -1406,
        ETCD_ERR_ROLE_EXISTS = -1407,
        ETCD_ERR_ROLE_NOT_FOUND = -1408,
        ETCD_ERR_ROOT_USER_MISSING = -1409,
        ETCD_ERR_ROOT_ROLE_MISSING = -1410,
        ETCD_ERR_UNAUTHENTICATED = -1411, /* credentials needed but not given */

        /* Snapshot. */
        ETCD_ERR_SNAPSHOT_CHECKSUM = -1501, /* the streamed snapshot's sha256 did not match */
} etcd_err;

/* A short, stable description of a code ("member not in sync with leader"). */
const char *etcd_strerror(int err);

/* True for codes that say "try again later" (not in sync, no leader, timeout, ...). */
bool etcd_err_is_transient(int err);

/*
 * Map a gRPC status (code, message already percent-decoded) to an etcd_err.
 * etcd's message text decides first, the gRPC code second.
 */
int etcd_err_from_grpc(int grpc_code, const char *message);
