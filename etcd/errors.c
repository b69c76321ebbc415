/*
 * Mapping of gRPC statuses and etcd's error strings to gitcd's etcd_err
 * codes. etcd signals most conditions with a gRPC code that is too coarse
 * (Unavailable means "no leader", "learner refused" and "server stopped"),
 * so the decision is made on etcd's message text first: it is part of
 * etcd's API (api/v3rpc/rpctypes) and stable across 3.4 and 3.5. The gRPC
 * code is the fallback for anything not in the table.
 */
#include <stddef.h>
#include <string.h>

#include "etcd/errors.h"
#include "util/macro.h"

struct err_name {
        int err;
        const char *text;
};

static const struct err_name names[] = {
    {ETCD_OK, "success"},
    {ETCD_ERR_UNREACHABLE, "no etcd endpoint reachable"},
    {ETCD_ERR_TIMEOUT, "deadline exceeded"},
    {ETCD_ERR_TLS, "TLS handshake or certificate verification failed"},
    {ETCD_ERR_TLS_FILES, "TLS CA, certificate or key file unusable"},
    {ETCD_ERR_PROTOCOL, "malformed gRPC response"},
    {ETCD_ERR_CANCELLED, "call cancelled"},
    {ETCD_ERR_UNKNOWN, "unknown server error"},
    {ETCD_ERR_INVALID_ARGUMENT, "invalid argument"},
    {ETCD_ERR_NOT_FOUND, "not found"},
    {ETCD_ERR_ALREADY_EXISTS, "already exists"},
    {ETCD_ERR_RESOURCE_EXHAUSTED, "resource exhausted"},
    {ETCD_ERR_FAILED_PRECONDITION, "failed precondition"},
    {ETCD_ERR_ABORTED, "aborted"},
    {ETCD_ERR_OUT_OF_RANGE, "out of range"},
    {ETCD_ERR_UNIMPLEMENTED, "call not implemented by this etcd version"},
    {ETCD_ERR_INTERNAL, "internal server error"},
    {ETCD_ERR_UNAVAILABLE, "server unavailable"},
    {ETCD_ERR_DATA_LOSS, "data loss"},
    {ETCD_ERR_MEMBER_NOT_FOUND, "member not found"},
    {ETCD_ERR_MEMBER_EXISTS, "member already exists"},
    {ETCD_ERR_PEER_URL_EXISTS, "peer URL already used by another member"},
    {ETCD_ERR_MEMBER_BAD_URLS, "invalid member URLs"},
    {ETCD_ERR_MEMBER_NOT_LEARNER, "member is not a learner"},
    {ETCD_ERR_MEMBER_NOT_IN_SYNC, "learner not in sync with leader"},
    {ETCD_ERR_TOO_MANY_LEARNERS, "too many learners in cluster"},
    {ETCD_ERR_NOT_ENOUGH_STARTED, "not enough started members for reconfiguration"},
    {ETCD_ERR_UNHEALTHY, "unhealthy cluster"},
    {ETCD_ERR_LEARNER_NOT_SUPPORTED, "call not supported by a learner"},
    {ETCD_ERR_BAD_LEADER_TRANSFEREE, "bad leader transferee"},
    {ETCD_ERR_NO_LEADER, "no leader"},
    {ETCD_ERR_NOT_LEADER, "not leader"},
    {ETCD_ERR_LEADER_CHANGED, "leader changed"},
    {ETCD_ERR_SERVER_STOPPED, "server stopped"},
    {ETCD_ERR_PROPOSAL_DROPPED, "proposal dropped"},
    {ETCD_ERR_SERVER_TIMEOUT, "request timed out in etcd"},
    {ETCD_ERR_NOT_CAPABLE, "cluster not capable (version too old)"},
    {ETCD_ERR_CORRUPT, "corrupt cluster"},
    {ETCD_ERR_REQUEST_TOO_LARGE, "request too large"},
    {ETCD_ERR_NOSPACE, "database space exceeded (NOSPACE alarm)"},
    {ETCD_ERR_COMPACTED, "revision compacted"},
    {ETCD_ERR_FUTURE_REV, "future revision"},
    {ETCD_ERR_EMPTY_KEY, "key not provided"},
    {ETCD_ERR_TOO_MANY_OPS, "too many operations in transaction"},
    {ETCD_ERR_DUPLICATE_KEY, "duplicate key in transaction"},
    {ETCD_ERR_AUTH_FAILED, "authentication failed: invalid user name or password"},
    {ETCD_ERR_INVALID_TOKEN, "invalid or expired auth token"},
    {ETCD_ERR_PERMISSION_DENIED, "permission denied"},
    {ETCD_ERR_AUTH_NOT_ENABLED, "authentication not enabled"},
    {ETCD_ERR_USER_EXISTS, "user already exists"},
    {ETCD_ERR_USER_NOT_FOUND, "user not found"},
    {ETCD_ERR_ROLE_EXISTS, "role already exists"},
    {ETCD_ERR_ROLE_NOT_FOUND, "role not found"},
    {ETCD_ERR_ROOT_USER_MISSING, "root user does not exist"},
    {ETCD_ERR_ROOT_ROLE_MISSING, "root user lacks the root role"},
    {ETCD_ERR_UNAUTHENTICATED, "authentication required"},
    {ETCD_ERR_SNAPSHOT_CHECKSUM, "snapshot checksum mismatch"},
};

const char *etcd_strerror(int err)
{
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (names[i].err == err)
                        return names[i].text;
        if (err < 0 && err > ETCD_ERR_BASE)
                return strerror(-err);
        return "unknown error";
}

bool etcd_err_is_transient(int err)
{
        switch (err) {
        case ETCD_ERR_MEMBER_NOT_IN_SYNC:
        case ETCD_ERR_NOT_ENOUGH_STARTED:
        case ETCD_ERR_UNHEALTHY:
        case ETCD_ERR_NO_LEADER:
        case ETCD_ERR_NOT_LEADER:
        case ETCD_ERR_LEADER_CHANGED:
        case ETCD_ERR_SERVER_TIMEOUT:
        case ETCD_ERR_SERVER_STOPPED:
        case ETCD_ERR_PROPOSAL_DROPPED:
        case ETCD_ERR_TIMEOUT:
        case ETCD_ERR_UNAVAILABLE:
        case ETCD_ERR_UNREACHABLE:
                return true;
        default:
                return false;
        }
}

/* etcd's error strings (api/v3rpc/rpctypes), matched as substrings. Order matters:
 * "can only promote a learner member which is in sync" before "can only promote". */
static const struct err_name etcd_messages[] = {
    {ETCD_ERR_MEMBER_NOT_IN_SYNC, "can only promote a learner member which is in sync"},
    {ETCD_ERR_MEMBER_NOT_LEARNER, "can only promote a learner member"},
    {ETCD_ERR_TOO_MANY_LEARNERS, "too many learner members"},
    {ETCD_ERR_PEER_URL_EXISTS, "Peer URLs already exists"},
    {ETCD_ERR_MEMBER_EXISTS, "member ID already exist"},
    {ETCD_ERR_MEMBER_NOT_FOUND, "member not found"},
    {ETCD_ERR_MEMBER_BAD_URLS, "given member URLs are invalid"},
    {ETCD_ERR_NOT_ENOUGH_STARTED, "not enough started members"},
    {ETCD_ERR_UNHEALTHY, "unhealthy cluster"},
    {ETCD_ERR_LEARNER_NOT_SUPPORTED, "rpc not supported for learner"},
    {ETCD_ERR_BAD_LEADER_TRANSFEREE, "bad leader transferee"},
    {ETCD_ERR_NO_LEADER, "no leader"},
    {ETCD_ERR_NOT_LEADER, "not leader"},
    {ETCD_ERR_LEADER_CHANGED, "leader changed"},
    {ETCD_ERR_SERVER_STOPPED, "server stopped"},
    {ETCD_ERR_SERVER_STOPPED, "raft: stopped"}, /* raft's own: a removed member's */
    {ETCD_ERR_PROPOSAL_DROPPED, "raft proposal dropped"},
    {ETCD_ERR_SERVER_TIMEOUT, "request timed out"},
    {ETCD_ERR_NOT_CAPABLE, "not capable"},
    {ETCD_ERR_CORRUPT, "corrupt cluster"},
    {ETCD_ERR_REQUEST_TOO_LARGE, "request is too large"},
    {ETCD_ERR_REQUEST_TOO_LARGE, "received message larger than max"},
    {ETCD_ERR_NOSPACE, "database space exceeded"},
    {ETCD_ERR_COMPACTED, "required revision has been compacted"},
    {ETCD_ERR_FUTURE_REV, "required revision is a future revision"},
    {ETCD_ERR_EMPTY_KEY, "key is not provided"},
    {ETCD_ERR_TOO_MANY_OPS, "too many operations in txn request"},
    {ETCD_ERR_DUPLICATE_KEY, "duplicate key given in txn request"},
    {ETCD_ERR_AUTH_FAILED, "authentication failed"},
    {ETCD_ERR_INVALID_TOKEN, "invalid auth token"},
    {ETCD_ERR_INVALID_TOKEN, "revision of auth store is old"},
    {ETCD_ERR_PERMISSION_DENIED, "permission denied"},
    {ETCD_ERR_AUTH_NOT_ENABLED, "authentication is not enabled"},
    {ETCD_ERR_USER_EXISTS, "user name already exists"},
    {ETCD_ERR_USER_NOT_FOUND, "user name not found"},
    {ETCD_ERR_ROLE_EXISTS, "role name already exists"},
    {ETCD_ERR_ROLE_NOT_FOUND, "role name not found"},
    {ETCD_ERR_ROOT_USER_MISSING, "root user does not exist"},
    {ETCD_ERR_ROOT_ROLE_MISSING, "root user does not have root role"},
    {ETCD_ERR_UNAUTHENTICATED, "user name is empty"},
};

int etcd_err_from_grpc(int grpc_code, const char *message)
{
        if (grpc_code == 0)
                return ETCD_OK;
        if (message)
                for (size_t i = 0; i < ARRAY_SIZE(etcd_messages); i++)
                        if (strstr(message, etcd_messages[i].text))
                                return etcd_messages[i].err;
        switch (grpc_code) {
        case 1:
                return ETCD_ERR_CANCELLED;
        case 3:
                return ETCD_ERR_INVALID_ARGUMENT;
        case 4:
                return ETCD_ERR_TIMEOUT;
        case 5:
                return ETCD_ERR_NOT_FOUND;
        case 6:
                return ETCD_ERR_ALREADY_EXISTS;
        case 7:
                return ETCD_ERR_PERMISSION_DENIED;
        case 8:
                return ETCD_ERR_RESOURCE_EXHAUSTED;
        case 9:
                return ETCD_ERR_FAILED_PRECONDITION;
        case 10:
                return ETCD_ERR_ABORTED;
        case 11:
                return ETCD_ERR_OUT_OF_RANGE;
        case 12:
                return ETCD_ERR_UNIMPLEMENTED;
        case 13:
                return ETCD_ERR_INTERNAL;
        case 14:
                return ETCD_ERR_UNAVAILABLE;
        case 15:
                return ETCD_ERR_DATA_LOSS;
        case 16:
                return ETCD_ERR_UNAUTHENTICATED;
        default:
                return ETCD_ERR_UNKNOWN;
        }
}
