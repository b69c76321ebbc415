/*
 * etcd's --heartbeat-interval and --election-timeout derived from the
 * measured peer round-trip time (docs/hosts.md), when the spec sets
 * neither and the hosts target's preflight measures RTT. Pure: the caller
 * passes the measurement and the value in force, both from the state
 * store (state/preflights.h).
 *
 * The rule, after etcd's tuning guide: heartbeat = the slowest peer
 * link's median connect time rounded up to 10 ms, at least etcd's default
 * 100 ms; election = 10 x heartbeat, at least etcd's default 1000 ms, at
 * most etcd's limit 50000 ms (then heartbeat = election / 10).
 *
 * Hysteresis: the value in force (etcd's defaults when none was derived)
 * changes only when the newly derived heartbeat is more than twice it or
 * less than half of it; every change is a rolling restart, so a figure
 * that wanders within a factor of two never restarts a member.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define TIMEOUTS_DEFAULT_HEARTBEAT_MS 100
#define TIMEOUTS_DEFAULT_ELECTION_MS  1000
#define TIMEOUTS_MAX_ELECTION_MS      50000

/* The timeouts for a slowest-link RTT of rtt_us (>= 0). */
void timeouts_derive(int64_t rtt_us, int *ret_heartbeat_ms, int *ret_election_ms);

/*
 * Whether the derived heartbeat moved far enough from the one in force
 * (0: none derived, etcd's default in force) to change it.
 */
bool timeouts_moved(int in_force_heartbeat_ms, int derived_heartbeat_ms);
