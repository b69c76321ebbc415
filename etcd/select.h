/*
 * Which endpoint a cluster-wide call tries first, and in which order the
 * others follow: pure (no I/O, the clock passed in), so its rules are tested
 * on their own (tests/etcd/test-select.c).
 *
 * An endpoint is "down" until a monotonic time when its gRPC health service
 * said NOT_SERVING (etcd 3.5.14+ defragmenting with
 * --experimental-stop-grpc-service-on-defrag). Down endpoints go last, not
 * away: a call never fails without having tried every endpoint.
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
