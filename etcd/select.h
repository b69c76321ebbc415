/*
 * Which endpoint a cluster-wide call tries first, and in which order the
 * others follow: pure (no I/O, the clock passed in), so its rules are tested
 * on their own (tests/etcd/test-select.c), with how long an attempt may take.
 *
 * An endpoint is "down" until a monotonic time when its gRPC health service
 * said NOT_SERVING (etcd 3.5.14+ defragmenting with
 * --experimental-stop-grpc-service-on-defrag), or while this process
 * defragments it (INT64_MAX; etcd/marks.h). Down endpoints go last, not
 * away: a call never fails without having tried every endpoint. The order
 * is the same for reads and writes: a write is sent to a member up when
 * there is one, which is how a write moves off a member not serving before
 * it is sent (once sent, it is never sent again).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Fill order[0..n) with the endpoint indexes to try: from start round the
 * list, endpoints up at now first, then the down ones in the same rotation.
 * down_until[i] <= now means up. Returns how many endpoints are up (the
 * first ones in order).
 */
size_t etcd_select_order(size_t n, size_t start, const int64_t *down_until, int64_t now,
                         size_t *order);

/*
 * Whether an endpoint about to be tried needs a health probe first: it was
 * marked down (down_until != 0) and the mark has run out. An endpoint never
 * marked down is never probed before a call, so the common path has no
 * extra round trip.
 */
bool etcd_select_probe_first(int64_t down_until, int64_t now);

/*
 * What a cluster-wide call's answer may be, which decides how long its
 * first try may take before the call moves on (etcd_select_attempt_deadline).
 */
typedef enum etcd_call_kind {
        ETCD_CALL_WRITE,      /* may be applied: never cut short, never sent twice */
        ETCD_CALL_SMALL_READ, /* an answer known to be small: a key, the member list, ... */
        ETCD_CALL_LARGE_READ, /* an answer of unknown size (a Range over a prefix) or one
                                 computed over every key (HashKV) */
} etcd_call_kind;

/*
 * The deadline (monotonic ms) of one attempt of a call on an endpoint, or 0
 * for the call's whole deadline: first is whether it is the call's first
 * attempt, others_left whether endpoints are left to try after this one.
 *
 * A write, and any call on the last endpoint, gets the whole deadline. A
 * read gets at most half of the time left while others are left (a hung
 * member cannot eat the whole deadline), and a small read's first try at
 * most first_try_ms: its answer takes milliseconds, so one that has not
 * come by then says the member is stuck (defragmenting) and the client asks
 * its health. A large read is not cut at first_try_ms: etcd answers a Range
 * in one message once it has read every key, so nothing comes back for as
 * long as a slow large read takes, exactly as from a member that is stuck;
 * cutting it would send the same heavy read to a second member.
 */
int64_t etcd_select_attempt_deadline(etcd_call_kind kind, bool first, bool others_left, int64_t now,
                                     int64_t deadline, int first_try_ms);
