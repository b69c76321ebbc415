/*
 * The default membership operations: a thin adapter from the reconciler's
 * seam (reconciler/etcd-ops.h) to the real etcd client. A connection is an
 * etcd_client; the leader comes from the Status of whichever member
 * answers. Nothing here decides anything: errors pass through unchanged.
 */
#include <errno.h>

#include "reconciler/etcd-ops.h"

static int real_connect(void *userdata, const etcd_conn_opts *o, etcd_conn **ret_conn)
{
        (void)userdata;
        etcd_client_opts co = {
            .endpoints = o->endpoints,
            .cacert = o->cacert,
            .cert = o->cert,
            .key = o->key,
            .call_timeout_ms = o->call_timeout_ms,
            .dial_timeout_ms = 1000,
        };
        etcd_client *c = NULL;
        int k = etcd_client_new(&co, &c);
        if (k < 0)
                return k;
        *ret_conn = (etcd_conn *)c;
        return 0;
}

static void real_disconnect(etcd_conn *conn)
{
        etcd_client_free((etcd_client *)conn);
}

static int real_member_list(etcd_conn *conn, etcd_members **ret_list)
{
        return etcd_member_list((etcd_client *)conn, ret_list);
}

static int real_leader(etcd_conn *conn, uint64_t *ret_leader)
{
        etcd_endpoint_status *st = NULL;
        int k = etcd_status((etcd_client *)conn, NULL, &st);
        if (k < 0)
                return k;
        *ret_leader = st->leader;
        etcd_endpoint_status_free(st);
        return 0;
}

static int real_add_learner(etcd_conn *conn, const char *peer_url, uint64_t *ret_id)
{
        const char *urls[] = {peer_url};
        return etcd_member_add((etcd_client *)conn, urls, 1, true, ret_id, NULL);
}

static int real_promote(etcd_conn *conn, uint64_t id)
{
        return etcd_member_promote((etcd_client *)conn, id);
}

static int real_remove(etcd_conn *conn, uint64_t id)
{
        return etcd_member_remove((etcd_client *)conn, id);
}

static int real_move_leader(etcd_conn *conn, uint64_t to_id)
{
        return etcd_move_leader((etcd_client *)conn, to_id);
}

static const char *real_last_error(const etcd_conn *conn)
{
        return etcd_client_last_error((const etcd_client *)conn);
}

const etcd_membership_ops etcd_membership_real = {
    .connect = real_connect,
    .disconnect = real_disconnect,
    .member_list = real_member_list,
    .leader = real_leader,
    .add_learner = real_add_learner,
    .promote = real_promote,
    .remove = real_remove,
    .move_leader = real_move_leader,
    .last_error = real_last_error,
};
