/*
 * etcd's timeouts derived from the peer RTT (reconciler/timeouts.h): the
 * rule and its hysteresis, one small function each.
 */
#include <assert.h>

#include "reconciler/timeouts.h"

void timeouts_derive(int64_t rtt_us, int *ret_heartbeat_ms, int *ret_election_ms)
{
        assert(rtt_us >= 0);
        if (rtt_us > 1000000000) /* past any cap: keeps the sums below from overflowing */
                rtt_us = 1000000000;
        int64_t ms = (rtt_us + 999) / 1000;
        int64_t hb = (ms + 9) / 10 * 10;
        if (hb < TIMEOUTS_DEFAULT_HEARTBEAT_MS)
                hb = TIMEOUTS_DEFAULT_HEARTBEAT_MS;
        int64_t el = 10 * hb;
        if (el < TIMEOUTS_DEFAULT_ELECTION_MS)
                el = TIMEOUTS_DEFAULT_ELECTION_MS;
        if (el > TIMEOUTS_MAX_ELECTION_MS) {
                el = TIMEOUTS_MAX_ELECTION_MS;
                hb = el / 10;
        }
        *ret_heartbeat_ms = (int)hb;
        *ret_election_ms = (int)el;
}

bool timeouts_moved(int in_force_heartbeat_ms, int derived_heartbeat_ms)
{
        int64_t f =
            in_force_heartbeat_ms > 0 ? in_force_heartbeat_ms : TIMEOUTS_DEFAULT_HEARTBEAT_MS;
        int64_t d = derived_heartbeat_ms;
        return d > 2 * f || 2 * d < f;
}
