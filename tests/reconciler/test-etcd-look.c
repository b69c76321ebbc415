/*
 * A pass's look at etcd (etcd_membership_real.look, reconciler/etcd-ops.h)
 * against a real single-member etcd of the version given (3.5.16 default,
 * 3.4.23): an idle member's list is asked once and then answered from
 * what its unchanged raft position proves, one Status a look; and every
 * membership change is still seen at the next look, whether made by
 * another client (a learner added, its peer URLs changed, removed) or
 * through the look's own connection.
 *
 * What etcd answered is counted by etcd itself: the MemberList calls its
 * /metrics says it handled (grpc_server_handled_total).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "reconciler/etcd-ops.h"
#include "tests/harness/harness.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char *version = "3.5.16";
static harness_cluster *cluster;
static const etcd_membership_ops *ops = &etcd_membership_real;

/* The MemberList calls the member has answered, from its /metrics. */
static long member_lists_handled(void)
{
        long n = harness_grpc_handled(cluster, 0, "MemberList");
        assert_true(n >= 0);
        return n;
}

static etcd_members *look(etcd_conn *conn, uint64_t *ret_leader)
{
        etcd_members *l = NULL;
        uint64_t leader = 0;
        etcd_endpoint_status *st = NULL;
        if (ops->look(conn, &l, &leader, &st) < 0)
                fail_msg("look: %s", ops->last_error(conn));
        /* the Status the look read comes back for the rest of the pass */
        assert_non_null(st);
        assert_true(st->member_id != 0 && !isempty(st->endpoint));
        etcd_endpoint_status_free(st);
        if (ret_leader)
                *ret_leader = leader;
        return l;
}

static const etcd_member *find_peer(const etcd_members *l, const char *peer_url)
{
        for (size_t i = 0; i < l->n; i++)
                for (size_t j = 0; j < l->members[i].n_peer_urls; j++)
                        if (streq(l->members[i].peer_urls[j], peer_url))
                                return &l->members[i];
        return NULL;
}

static etcd_conn *look_connect(void)
{
        etcd_conn_opts o = {.endpoints = cluster->endpoints, .call_timeout_ms = 10000};
        etcd_conn *conn = NULL;
        assert_int_equal(ops->connect(NULL, &o, &conn), 0);
        return conn;
}

static etcd_client *other_client(void)
{
        etcd_client_opts o = {.endpoints = cluster->endpoints, .call_timeout_ms = 10000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

/* An idle member: its list asked once, then one Status a look, the same list and leader. */
static void test_idle_member_list_asked_once(void **state)
{
        (void)state;
        etcd_conn *conn = look_connect();
        uint64_t leader = 0;
        etcd_members *first = look(conn, &leader);
        assert_int_equal(first->n, 1);
        assert_int_equal(leader, first->members[0].id);
        long asked = member_lists_handled();
        for (int i = 0; i < 5; i++) {
                uint64_t again_leader = 0;
                etcd_members *again = look(conn, &again_leader);
                assert_int_equal(again->n, 1);
                assert_int_equal(again->members[0].id, first->members[0].id);
                assert_string_equal(again->members[0].name, first->members[0].name);
                assert_int_equal(again->responder_id, first->responder_id);
                assert_int_equal(again_leader, leader);
                etcd_members_free(again);
        }
        long more = member_lists_handled() - asked;
        printf("MemberList calls for 5 looks at an idle member: %ld\n", more);
        assert_int_equal(more, 0);
        etcd_members_free(first);
        ops->disconnect(conn);
}

/* Every change made by another client is in the next look. */
static void test_changes_elsewhere_seen(void **state)
{
        (void)state;
        etcd_conn *conn = look_connect();
        etcd_members_free(look(conn, NULL));
        etcd_members_free(look(conn, NULL)); /* from what was kept */

        etcd_client *other = other_client();
        const char *peer = "http://127.0.0.1:1", *peer2 = "http://127.0.0.1:2";
        uint64_t id = 0;
        assert_int_equal(etcd_member_add(other, &peer, 1, true, &id, NULL), 0);
        etcd_members *l = look(conn, NULL);
        assert_int_equal(l->n, 2);
        const etcd_member *m = find_peer(l, peer);
        assert_non_null(m);
        assert_true(m->is_learner);
        etcd_members_free(l);

        assert_int_equal(etcd_member_update(other, id, &peer2, 1), 0);
        l = look(conn, NULL);
        assert_null(find_peer(l, peer));
        assert_non_null(find_peer(l, peer2));
        etcd_members_free(l);

        assert_int_equal(etcd_member_remove(other, id), 0);
        l = look(conn, NULL);
        assert_int_equal(l->n, 1);
        assert_null(find_peer(l, peer2));
        etcd_members_free(l);
        etcd_client_free(other);
        ops->disconnect(conn);
}

/* A change through the look's own connection, too. */
static void test_own_changes_seen(void **state)
{
        (void)state;
        etcd_conn *conn = look_connect();
        etcd_members_free(look(conn, NULL));
        const char *peer = "http://127.0.0.1:3";
        uint64_t id = 0;
        assert_int_equal(ops->add_learner(conn, peer, &id), 0);
        etcd_members *l = look(conn, NULL);
        assert_non_null(find_peer(l, peer));
        etcd_members_free(l);
        assert_int_equal(ops->remove(conn, id), 0);
        l = look(conn, NULL);
        assert_int_equal(l->n, 1);
        etcd_members_free(l);
        ops->disconnect(conn);
}

static int setup(void **state)
{
        (void)state;
        harness_opts o = {.version = version, .members = 1};
        if (harness_cluster_start(&o, &cluster) < 0) {
                fprintf(stderr, "cannot start etcd %s\n", version);
                return -1;
        }
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        harness_cluster_free(cluster);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc > 1)
                version = argv[1];
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed (scripts/setup)\n", version);
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_idle_member_list_asked_once),
            cmocka_unit_test(test_changes_elsewhere_seen),
            cmocka_unit_test(test_own_changes_seen),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
