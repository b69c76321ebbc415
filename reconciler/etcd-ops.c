/*
 * The default membership operations: a thin adapter from the reconciler's
 * seam (reconciler/etcd-ops.h) to the real etcd client. A connection is an
 * etcd_client over every endpoint plus the options to dial one member
 * alone; the leader comes from the Status of whichever member answers.
 * Nothing here decides anything: errors pass through unchanged.
 *
 * A look (the member list and the leader, every pass) asks Status first
 * and reuses the member list it kept when the member that answers is the
 * one that gave it and its raft position has not moved since (the same
 * cluster, term, last index and applied index). etcd answers MemberList
 * from the member's own membership (not linearizable), which changes only
 * when the member applies a raft entry: a member added, removed, promoted
 * or given other peer URLs (conf changes), or a member's name and client
 * URLs published when it starts (an ordinary entry); each moves the
 * applied index. A member restarted with its data, or replaced by another
 * process under the same ID, applies its entries again and answers with
 * what they say; wiped, it is a new member with a new ID. So an unchanged
 * position means an unchanged list, and an idle converged cluster costs
 * one call a pass instead of two. The list is kept as it was taken after
 * its Status (the member may have applied more in between: the next look
 * then sees the position moved and asks again), and dropped by any
 * membership change made through the connection.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reconciler/etcd-ops.h"
#include "util/xalloc.h"

/* Where a member's raft log stood when it answered (etcd's Status). */
typedef struct raft_position {
        uint64_t member_id, cluster_id, term, index, applied;
} raft_position;

struct etcd_conn {
        etcd_client *client;
        etcd_conn_opts o; /* strings owned */
        char *error;      /* the last error of a one-member call */
        /* The last look's member list, and where its member stood before it answered. */
        etcd_members *kept_list;
        raft_position kept_at;
};

static int real_connect(void *userdata, const etcd_conn_opts *o, etcd_conn **ret_conn)
{
        (void)userdata;
        etcd_client_opts co = {
            .endpoints = o->endpoints,
            .cacert = o->cacert,
            .cert = o->cert,
            .key = o->key,
            .user = o->user,
            .password = o->password,
            .fallback_password = o->fallback_password,
            .call_timeout_ms = o->call_timeout_ms,
            .dial_timeout_ms = 1000,
        };
        etcd_client *c = NULL;
        int k = etcd_client_new(&co, &c);
        if (k < 0)
                return k;
        etcd_conn *conn = XNEW(etcd_conn);
        conn->client = c;
        conn->o = (etcd_conn_opts){
            .endpoints = xstrdup_null(o->endpoints),
            .cacert = xstrdup_null(o->cacert),
            .cert = xstrdup_null(o->cert),
            .key = xstrdup_null(o->key),
            .user = xstrdup_null(o->user),
            .password = xstrdup_null(o->password),
            .fallback_password = xstrdup_null(o->fallback_password),
            .call_timeout_ms = o->call_timeout_ms,
        };
        *ret_conn = conn;
        return 0;
}

static void real_disconnect(etcd_conn *conn)
{
        if (!conn)
                return;
        /* dropped before a member stops, or for other endpoints: no idle connection kept */
        etcd_client_close_idle(conn->client);
        etcd_client_free(conn->client);
        free((char *)conn->o.endpoints);
        free((char *)conn->o.cacert);
        free((char *)conn->o.cert);
        free((char *)conn->o.key);
        free((char *)conn->o.user);
        if (conn->o.password)
                explicit_bzero((char *)conn->o.password, strlen(conn->o.password));
        free((char *)conn->o.password);
        if (conn->o.fallback_password)
                explicit_bzero((char *)conn->o.fallback_password,
                               strlen(conn->o.fallback_password));
        free((char *)conn->o.fallback_password);
        free(conn->error);
        etcd_members_free(conn->kept_list);
        free(conn);
}

/* The client for a call over every endpoint (a one-member call's error is forgotten). */
static etcd_client *C(etcd_conn *conn)
{
        free(conn->error);
        conn->error = NULL;
        return conn->client;
}

static int real_member_list(etcd_conn *conn, etcd_members **ret_list)
{
        return etcd_member_list(C(conn), ret_list);
}

static int real_member_list_at(etcd_conn *conn, const char *endpoint, etcd_members **ret_list)
{
        etcd_client_opts co = {
            .endpoints = endpoint,
            .cacert = conn->o.cacert,
            .cert = conn->o.cert,
            .key = conn->o.key,
            .user = conn->o.user,
            .password = conn->o.password,
            .fallback_password = conn->o.fallback_password,
            .call_timeout_ms = conn->o.call_timeout_ms,
            .dial_timeout_ms = 1000,
        };
        etcd_client *c = NULL;
        int k = etcd_client_new(&co, &c);
        if (k >= 0)
                k = etcd_member_list(c, ret_list);
        free(conn->error);
        conn->error = k < 0 ? xasprintf("%s: %s", endpoint,
                                        c ? etcd_client_last_error(c) : "unusable endpoint")
                            : NULL;
        etcd_client_free(c);
        return k;
}

static int real_status_at(etcd_conn *conn, const char *endpoint, etcd_endpoint_status **ret)
{
        etcd_client_opts co = {
            .endpoints = endpoint,
            .cacert = conn->o.cacert,
            .cert = conn->o.cert,
            .key = conn->o.key,
            .user = conn->o.user,
            .password = conn->o.password,
            .fallback_password = conn->o.fallback_password,
            .call_timeout_ms = conn->o.call_timeout_ms,
            .dial_timeout_ms = 1000,
        };
        etcd_client *c = NULL;
        etcd_endpoint_status *st = NULL;
        int k = etcd_client_new(&co, &c);
        if (k >= 0)
                k = etcd_status(c, endpoint, &st);
        free(conn->error);
        conn->error = k < 0 ? xasprintf("%s: %s", endpoint,
                                        c ? etcd_client_last_error(c) : "unusable endpoint")
                            : NULL;
        if (k >= 0)
                *ret = TAKE_PTR(st);
        etcd_endpoint_status_free(st);
        etcd_client_free(c);
        return k;
}

static int real_hash_kv_at(etcd_conn *conn, const char *endpoint, int64_t revision, int timeout_ms,
                           uint32_t *ret_hash, int64_t *ret_compact_revision)
{
        etcd_client_opts co = {
            .endpoints = endpoint,
            .cacert = conn->o.cacert,
            .cert = conn->o.cert,
            .key = conn->o.key,
            .user = conn->o.user,
            .password = conn->o.password,
            .fallback_password = conn->o.fallback_password,
            .call_timeout_ms = MAX(timeout_ms, conn->o.call_timeout_ms),
            .dial_timeout_ms = 1000,
        };
        etcd_client *c = NULL;
        int k = etcd_client_new(&co, &c);
        if (k >= 0)
                k = etcd_hash_kv(c, endpoint, revision, ret_hash, ret_compact_revision);
        free(conn->error);
        conn->error = k < 0 ? xasprintf("%s: %s", endpoint,
                                        c ? etcd_client_last_error(c) : "unusable endpoint")
                            : NULL;
        etcd_client_free(c);
        return k;
}

static int real_corrupt_disarm(etcd_conn *conn, size_t *ret_n)
{
        etcd_client *c = C(conn);
        etcd_alarm *alarms = NULL;
        size_t n = 0, corrupt = 0;
        int k = etcd_alarm_list(c, &alarms, &n);
        for (size_t i = 0; k >= 0 && i < n; i++)
                if (alarms[i].type == ETCD_ALARM_CORRUPT) {
                        k = etcd_alarm_disarm(c, alarms[i].member_id, ETCD_ALARM_CORRUPT);
                        corrupt++;
                }
        free(alarms);
        if (k >= 0)
                *ret_n = corrupt;
        return k;
}

static int real_leader(etcd_conn *conn, uint64_t *ret_leader)
{
        etcd_endpoint_status *st = NULL;
        int k = etcd_status(C(conn), NULL, &st);
        if (k < 0)
                return k;
        *ret_leader = st->leader;
        etcd_endpoint_status_free(st);
        return 0;
}

/* Forget the kept member list: a membership change through this connection. */
static etcd_client *C_change(etcd_conn *conn)
{
        etcd_members_free(conn->kept_list);
        conn->kept_list = NULL;
        return C(conn);
}

static raft_position position_of(const etcd_endpoint_status *st)
{
        return (raft_position){.member_id = st->member_id,
                               .cluster_id = st->cluster_id,
                               .term = st->raft_term,
                               .index = st->raft_index,
                               .applied = st->raft_applied_index};
}

static bool position_same(const raft_position *a, const raft_position *b)
{
        return a->member_id == b->member_id && a->cluster_id == b->cluster_id &&
               a->term == b->term && a->index == b->index && a->applied == b->applied;
}

static int real_look(etcd_conn *conn, etcd_members **ret_list, uint64_t *ret_leader,
                     etcd_endpoint_status **ret_status)
{
        etcd_endpoint_status *st = NULL;
        if (ret_status)
                *ret_status = NULL;
        if (etcd_status(C(conn), NULL, &st) < 0) {
                /* as member_list then leader: another member may answer the list */
                int k = real_member_list(conn, ret_list);
                if (k < 0)
                        return k;
                if (real_leader(conn, ret_leader) < 0)
                        *ret_leader = 0;
                return 0;
        }
        raft_position at = position_of(st);
        uint64_t leader = st->leader;
        etcd_members *l = NULL;
        /* a member that reports no applied index (or none yet) is never trusted to be unchanged */
        if (conn->kept_list && at.applied > 0 && position_same(&at, &conn->kept_at)) {
                l = etcd_members_dup(conn->kept_list);
        } else {
                etcd_members_free(conn->kept_list);
                conn->kept_list = NULL;
                int k = etcd_member_list(C(conn), &l);
                if (k < 0) {
                        etcd_endpoint_status_free(st);
                        return k;
                }
                /* kept only when the member whose position was read answered the list */
                if (l->responder_id == at.member_id && l->cluster_id == at.cluster_id) {
                        conn->kept_list = etcd_members_dup(l);
                        conn->kept_at = at;
                }
        }
        *ret_list = l;
        *ret_leader = leader;
        if (ret_status)
                *ret_status = st;
        else
                etcd_endpoint_status_free(st);
        return 0;
}

static int real_add_learner(etcd_conn *conn, const char *peer_url, uint64_t *ret_id)
{
        const char *urls[] = {peer_url};
        return etcd_member_add(C_change(conn), urls, 1, true, ret_id, NULL);
}

static int real_promote(etcd_conn *conn, uint64_t id)
{
        return etcd_member_promote(C_change(conn), id);
}

static int real_remove(etcd_conn *conn, uint64_t id)
{
        return etcd_member_remove(C_change(conn), id);
}

static int real_update_peer(etcd_conn *conn, uint64_t id, const char *peer_url)
{
        const char *urls[] = {peer_url};
        return etcd_member_update(C_change(conn), id, urls, 1);
}

static int real_move_leader(etcd_conn *conn, uint64_t to_id)
{
        return etcd_move_leader(C(conn), to_id);
}

static int real_auth_status(etcd_conn *conn, bool *ret_enabled)
{
        int k = etcd_auth_status(C(conn), ret_enabled);
        if (k != ETCD_ERR_UNIMPLEMENTED)
                return k;
        /* etcd 3.4: UserList needs credentials exactly when auth is on */
        etcd_client_opts co = {
            .endpoints = conn->o.endpoints,
            .cacert = conn->o.cacert,
            .cert = conn->o.cert,
            .key = conn->o.key,
            .call_timeout_ms = conn->o.call_timeout_ms,
            .dial_timeout_ms = 1000,
        };
        etcd_client *c = NULL;
        k = etcd_client_new(&co, &c);
        char **users = NULL;
        size_t n = 0;
        if (k >= 0)
                k = etcd_user_list(c, &users, &n);
        for (size_t i = 0; users && users[i]; i++)
                free(users[i]);
        free(users);
        free(conn->error);
        conn->error = NULL;
        if (k == ETCD_ERR_UNAUTHENTICATED || k == ETCD_ERR_PERMISSION_DENIED) {
                *ret_enabled = true;
                k = 0;
        } else if (k >= 0) {
                *ret_enabled = false;
        } else {
                conn->error = xstrdup(c ? etcd_client_last_error(c) : "unusable endpoints");
        }
        etcd_client_free(c);
        return k;
}

static int real_user_add(etcd_conn *conn, const char *user, const char *password)
{
        return etcd_user_add(C(conn), user, password);
}

static int real_user_change_password(etcd_conn *conn, const char *user, const char *password)
{
        return etcd_user_change_password(C(conn), user, password);
}

static int real_role_add(etcd_conn *conn, const char *role)
{
        return etcd_role_add(C(conn), role);
}

static int real_user_grant_role(etcd_conn *conn, const char *user, const char *role)
{
        return etcd_user_grant_role(C(conn), user, role);
}

static int real_auth_enable(etcd_conn *conn)
{
        return etcd_auth_enable(C(conn));
}

static int real_auth_disable(etcd_conn *conn)
{
        return etcd_auth_disable(C(conn));
}

static const char *real_last_error(const etcd_conn *conn)
{
        return conn->error ? conn->error : etcd_client_last_error(conn->client);
}

const etcd_membership_ops etcd_membership_real = {
    .connect = real_connect,
    .disconnect = real_disconnect,
    .member_list = real_member_list,
    .member_list_at = real_member_list_at,
    .leader = real_leader,
    .look = real_look,
    .add_learner = real_add_learner,
    .update_peer = real_update_peer,
    .promote = real_promote,
    .remove = real_remove,
    .move_leader = real_move_leader,
    .status_at = real_status_at,
    .hash_kv_at = real_hash_kv_at,
    .corrupt_disarm = real_corrupt_disarm,
    .auth_status = real_auth_status,
    .user_add = real_user_add,
    .user_change_password = real_user_change_password,
    .role_add = real_role_add,
    .user_grant_role = real_user_grant_role,
    .auth_enable = real_auth_enable,
    .auth_disable = real_auth_disable,
    .last_error = real_last_error,
};
