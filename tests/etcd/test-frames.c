/*
 * The gRPC response framing parser (etcd/grpc.h) on bytes that come from
 * the network: messages split at every possible point, empty messages,
 * compressed or oversized frames, truncated replies, a callback that
 * aborts, and random bytes, which must give an error and never a crash.
 * Random bytes are also fed to the protobuf decoders of etcd's replies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/errors.h"
#include "etcd/grpc.h"
#include "etcd/health.pb-c.h"
#include "etcd/rpc.pb-c.h"

struct seen {
        size_t n;
        size_t lens[8];
        uint8_t first[8];
        int fail_at; /* return an error on this message (1-based), 0 = never */
};

static int on_msg(const uint8_t *msg, size_t len, void *userdata)
{
        struct seen *s = userdata;
        assert_non_null(msg);
        if (s->n < 8) {
                s->lens[s->n] = len;
                s->first[s->n] = len ? msg[0] : 0;
        }
        s->n++;
        if (s->fail_at && (int)s->n == s->fail_at)
                return -42;
        return 0;
}

/* Three messages: 3 bytes, empty, 300 bytes. */
static size_t build_stream(uint8_t *buf)
{
        size_t o = 0;
        const size_t lens[] = {3, 0, 300};
        for (size_t m = 0; m < 3; m++) {
                buf[o++] = 0;
                buf[o++] = 0;
                buf[o++] = 0;
                buf[o++] = (uint8_t)(lens[m] >> 8);
                buf[o++] = (uint8_t)lens[m];
                for (size_t i = 0; i < lens[m]; i++)
                        buf[o++] = (uint8_t)(m + 1);
        }
        return o;
}

static void test_every_split(void **state)
{
        uint8_t buf[512];
        size_t len = build_stream(buf);
        for (size_t a = 0; a <= len; a++) {
                for (size_t b = a; b <= len; b += 7) {
                        grpc_frames f;
                        grpc_frames_init(&f, 1024);
                        struct seen s = {0};
                        assert_int_equal(grpc_frames_feed(&f, buf, a, on_msg, &s), 0);
                        assert_int_equal(grpc_frames_feed(&f, buf + a, b - a, on_msg, &s), 0);
                        assert_int_equal(grpc_frames_feed(&f, buf + b, len - b, on_msg, &s), 0);
                        assert_int_equal(s.n, 3);
                        assert_int_equal(s.lens[0], 3);
                        assert_int_equal(s.lens[1], 0);
                        assert_int_equal(s.lens[2], 300);
                        assert_int_equal(s.first[2], 3);
                        assert_false(grpc_frames_partial(&f));
                        grpc_frames_release(&f);
                }
        }
}

static void test_truncated(void **state)
{
        uint8_t buf[512];
        size_t len = build_stream(buf);
        for (size_t cut = 1; cut < len; cut++) {
                grpc_frames f;
                grpc_frames_init(&f, 1024);
                struct seen s = {0};
                assert_int_equal(grpc_frames_feed(&f, buf, cut, on_msg, &s), 0);
                /* a cut exactly between two frames is not partial */
                bool boundary = cut == 8 || cut == 13;
                assert_true(grpc_frames_partial(&f) == !boundary);
                grpc_frames_release(&f);
        }
}

static void test_bad_frames(void **state)
{
        grpc_frames f;
        struct seen s = {0};
        const uint8_t compressed[] = {1, 0, 0, 0, 1, 'x'};
        grpc_frames_init(&f, 1024);
        assert_int_equal(grpc_frames_feed(&f, compressed, sizeof(compressed), on_msg, &s),
                         ETCD_ERR_PROTOCOL);
        grpc_frames_release(&f);

        const uint8_t huge[] = {0, 0xff, 0xff, 0xff, 0xff};
        grpc_frames_init(&f, 1024);
        assert_int_equal(grpc_frames_feed(&f, huge, sizeof(huge), on_msg, &s),
                         ETCD_ERR_RESOURCE_EXHAUSTED);
        grpc_frames_release(&f);
        assert_int_equal(s.n, 0);

        /* the callback's error ends the stream */
        uint8_t buf[512];
        size_t len = build_stream(buf);
        s = (struct seen){.fail_at = 2};
        grpc_frames_init(&f, 1024);
        assert_int_equal(grpc_frames_feed(&f, buf, len, on_msg, &s), -42);
        assert_int_equal(s.n, 2);
        grpc_frames_release(&f);
}

static void test_random_bytes(void **state)
{
        srand(12345);
        uint8_t buf[4096];
        for (int round = 0; round < 2000; round++) {
                size_t len = (size_t)(rand() % (int)sizeof(buf));
                for (size_t i = 0; i < len; i++)
                        buf[i] = (uint8_t)rand();
                if (round % 2)
                        buf[0] = 0; /* get past the compressed flag more often */
                grpc_frames f;
                grpc_frames_init(&f, 2048);
                struct seen s = {0};
                int r = grpc_frames_feed(&f, buf, len, on_msg, &s);
                assert_true(r == 0 || r == ETCD_ERR_PROTOCOL || r == ETCD_ERR_RESOURCE_EXHAUSTED);
                grpc_frames_release(&f);

                /* etcd's replies from garbage: NULL or a message, never a crash */
                Etcdserverpb__MemberListResponse *ml =
                    etcdserverpb__member_list_response__unpack(NULL, len, buf);
                if (ml)
                        etcdserverpb__member_list_response__free_unpacked(ml, NULL);
                Etcdserverpb__StatusResponse *st =
                    etcdserverpb__status_response__unpack(NULL, len, buf);
                if (st)
                        etcdserverpb__status_response__free_unpacked(st, NULL);
                Etcdserverpb__SnapshotResponse *sn =
                    etcdserverpb__snapshot_response__unpack(NULL, len, buf);
                if (sn)
                        etcdserverpb__snapshot_response__free_unpacked(sn, NULL);
                Grpc__Health__V1__HealthCheckResponse *hc =
                    grpc__health__v1__health_check_response__unpack(NULL, len, buf);
                if (hc)
                        grpc__health__v1__health_check_response__free_unpacked(hc, NULL);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_split),
            cmocka_unit_test(test_truncated),
            cmocka_unit_test(test_bad_frames),
            cmocka_unit_test(test_random_bytes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
