/*
 * Unit tests for the pieces of the etcd client that need no server: the
 * mapping of gRPC statuses and etcd's messages to error codes, gRPC's
 * percent-encoding, member ID formatting, and endpoint list parsing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "etcd/errors.h"
#include "etcd/grpc.h"

static void test_grpc_mapping(void **state)
{
        assert_int_equal(etcd_err_from_grpc(0, NULL), ETCD_OK);
        assert_int_equal(
            etcd_err_from_grpc(
                9, "etcdserver: can only promote a learner member which is in sync with leader"),
            ETCD_ERR_MEMBER_NOT_IN_SYNC);
        assert_int_equal(etcd_err_from_grpc(9, "etcdserver: can only promote a learner member"),
                         ETCD_ERR_MEMBER_NOT_LEARNER);
        assert_int_equal(etcd_err_from_grpc(9, "etcdserver: too many learner members in cluster"),
                         ETCD_ERR_TOO_MANY_LEARNERS);
        assert_int_equal(etcd_err_from_grpc(9, "etcdserver: Peer URLs already exists"),
                         ETCD_ERR_PEER_URL_EXISTS);
        assert_int_equal(etcd_err_from_grpc(5, "etcdserver: member not found"),
                         ETCD_ERR_MEMBER_NOT_FOUND);
        assert_int_equal(etcd_err_from_grpc(14, "etcdserver: unhealthy cluster"),
                         ETCD_ERR_UNHEALTHY);
        assert_int_equal(etcd_err_from_grpc(14, "etcdserver: no leader"), ETCD_ERR_NO_LEADER);
        assert_int_equal(etcd_err_from_grpc(14, "etcdserver: server stopped"),
                         ETCD_ERR_SERVER_STOPPED);
        /* raft's own, answered by a member removed from its cluster */
        assert_int_equal(etcd_err_from_grpc(2, "raft: stopped"), ETCD_ERR_SERVER_STOPPED);
        assert_int_equal(etcd_err_from_grpc(2, "raft proposal dropped"), ETCD_ERR_PROPOSAL_DROPPED);
        assert_true(etcd_err_is_transient(ETCD_ERR_PROPOSAL_DROPPED));
        assert_int_equal(etcd_err_from_grpc(14, "etcdserver: rpc not supported for learner"),
                         ETCD_ERR_LEARNER_NOT_SUPPORTED);
        assert_int_equal(etcd_err_from_grpc(3, "etcdserver: request is too large"),
                         ETCD_ERR_REQUEST_TOO_LARGE);
        assert_int_equal(etcd_err_from_grpc(8, "etcdserver: mvcc: database space exceeded"),
                         ETCD_ERR_NOSPACE);
        assert_int_equal(
            etcd_err_from_grpc(3, "etcdserver: authentication failed, invalid user ID or password"),
            ETCD_ERR_AUTH_FAILED);
        assert_int_equal(etcd_err_from_grpc(16, "etcdserver: invalid auth token"),
                         ETCD_ERR_INVALID_TOKEN);
        assert_int_equal(etcd_err_from_grpc(7, "etcdserver: permission denied"),
                         ETCD_ERR_PERMISSION_DENIED);
        /* unknown text: the gRPC code decides */
        assert_int_equal(etcd_err_from_grpc(12, "unknown service"), ETCD_ERR_UNIMPLEMENTED);
        assert_int_equal(etcd_err_from_grpc(4, NULL), ETCD_ERR_TIMEOUT);
        assert_int_equal(etcd_err_from_grpc(99, NULL), ETCD_ERR_UNKNOWN);
}

static void test_strerror(void **state)
{
        assert_string_equal(etcd_strerror(ETCD_ERR_MEMBER_NOT_IN_SYNC),
                            "learner not in sync with leader");
        /* every code has its own text */
        for (int a = ETCD_ERR_BASE - 1; a > -1600; a--) {
                const char *ta = etcd_strerror(a);
                if (strcmp(ta, "unknown error") == 0)
                        continue;
                for (int b = a - 1; b > -1600; b--)
                        assert_string_not_equal(ta, etcd_strerror(b));
        }
        assert_string_equal(etcd_strerror(-ENOENT), strerror(ENOENT));
        assert_true(etcd_err_is_transient(ETCD_ERR_NO_LEADER));
        assert_false(etcd_err_is_transient(ETCD_ERR_AUTH_FAILED));
}

static void test_percent_decode(void **state)
{
        char *s = grpc_percent_decode("etcdserver: a%20b%25c%2");
        assert_string_equal(s, "etcdserver: a b%c%2");
        free(s);
        s = grpc_percent_decode("%E2%9C%93 ok%zz");
        assert_string_equal(s, "\xe2\x9c\x93 ok%zz");
        free(s);
}

static void test_member_ids(void **state)
{
        char buf[17];
        etcd_member_id_format(0x8e9e05c52164694dULL, buf);
        assert_string_equal(buf, "8e9e05c52164694d");
        etcd_member_id_format(0x1234, buf);
        assert_string_equal(buf, "1234");
        uint64_t id = 0;
        assert_int_equal(etcd_member_id_parse("8e9e05c52164694d", &id), 0);
        assert_true(id == 0x8e9e05c52164694dULL);
        assert_int_equal(etcd_member_id_parse("0x10", &id), 0);
        assert_true(id == 16);
        assert_int_equal(etcd_member_id_parse("", &id), -EINVAL);
        assert_int_equal(etcd_member_id_parse("xyz", &id), -EINVAL);
        assert_int_equal(etcd_member_id_parse("-1", &id), -EINVAL);
        assert_int_equal(etcd_member_id_parse("12345678901234567", &id), -EINVAL);
}

static void test_endpoints(void **state)
{
        etcd_client *c = NULL;
        etcd_client_opts o = {.endpoints = " 127.0.0.1:2379 ,https://h:1/"};
        assert_int_equal(etcd_client_new(&o, &c), 0);
        assert_int_equal(etcd_client_endpoint_count(c), 2);
        assert_string_equal(etcd_client_endpoint(c, 0), "http://127.0.0.1:2379");
        assert_string_equal(etcd_client_endpoint(c, 1), "https://h:1");
        assert_string_equal(etcd_client_last_error(c), "");
        etcd_client_free(c);

        o.endpoints = "10.0.0.1:2379";
        o.cacert = "/ca.crt";
        assert_int_equal(etcd_client_new(&o, &c), 0);
        assert_string_equal(etcd_client_endpoint(c, 0), "https://10.0.0.1:2379");
        etcd_client_free(c);

        c = NULL;
        o = (etcd_client_opts){.endpoints = "ftp://x"};
        assert_int_equal(etcd_client_new(&o, &c), -EINVAL);
        assert_null(c);
        o.endpoints = " , ";
        assert_int_equal(etcd_client_new(&o, &c), -EINVAL);
        o.endpoints = NULL;
        assert_int_equal(etcd_client_new(&o, &c), -EINVAL);
        etcd_client_free(NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_grpc_mapping),   cmocka_unit_test(test_strerror),
            cmocka_unit_test(test_percent_decode), cmocka_unit_test(test_member_ids),
            cmocka_unit_test(test_endpoints),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
