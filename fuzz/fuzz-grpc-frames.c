/*
 * Fuzz target for what gitcd reads from an etcd server: the gRPC response
 * framing (etcd/grpc.h) fed in odd splits, and every complete message
 * decoded as the replies gitcd parses most (MemberList, Status, Range) and
 * gRPC health's Check answer.
 * Malformed input must give an error, never a crash or a leak.
 */
#include <stddef.h>
#include <stdint.h>

#include "etcd/grpc.h"
#include "etcd/health.pb-c.h"
#include "etcd/rpc.pb-c.h"

static int on_msg(const uint8_t *msg, size_t len, void *userdata)
{
        (void)userdata;
        Etcdserverpb__MemberListResponse *ml =
            etcdserverpb__member_list_response__unpack(NULL, len, msg);
        if (ml)
                etcdserverpb__member_list_response__free_unpacked(ml, NULL);
        Etcdserverpb__StatusResponse *st = etcdserverpb__status_response__unpack(NULL, len, msg);
        if (st)
                etcdserverpb__status_response__free_unpacked(st, NULL);
        Etcdserverpb__RangeResponse *rr = etcdserverpb__range_response__unpack(NULL, len, msg);
        if (rr)
                etcdserverpb__range_response__free_unpacked(rr, NULL);
        Grpc__Health__V1__HealthCheckResponse *hc =
            grpc__health__v1__health_check_response__unpack(NULL, len, msg);
        if (hc)
                grpc__health__v1__health_check_response__free_unpacked(hc, NULL);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* The first byte chooses the split size, as the network would. */
        size_t step = size ? (size_t)(data[0] % 17) + 1 : 1;
        grpc_frames f;
        grpc_frames_init(&f, 1 << 20);
        int r = 0;
        for (size_t off = 1; off < size && r == 0; off += step) {
                size_t n = size - off < step ? size - off : step;
                r = grpc_frames_feed(&f, data + off, n, on_msg, NULL);
        }
        (void)grpc_frames_partial(&f);
        grpc_frames_release(&f);
        return 0;
}
