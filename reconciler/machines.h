/*
 * The machines a cluster's members run on (targets that measure them: the
 * hosts target's preflight, docs/hosts.md): their preflights recorded in
 * the state store (state/preflights.h), each new verdict audited once
 * (machine.preflight), and the MachineHealthy condition judged from the
 * last preflight of every machine that holds a member. Gitcd never stops
 * or moves a member for it: the condition and the daemon's alert
 * (cluster.machine-unhealthy) are for a person.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "state/preflights.h"

/* MachineHealthy's reasons. */
#define REASON_MACHINES_PASSED  "PreflightPassed"
#define REASON_MACHINE_DEGRADED "PreflightFailed"

/*
 * Judge MachineHealthy from each machine's last preflight (l, of one
 * cluster) and the members the cluster has (names, n): only a machine
 * whose preflight names one of them as the member it held counts. 0 when
 * none counts (no condition: nothing is known of the members' machines);
 * else 1, with *ret_healthy false when a counted machine failed its last
 * preflight, and *ret_message (allocated) naming each failed machine, its
 * member, when it was measured and why ("10.0.0.5:22 (member main-1,
 * measured 2026-11-28T14:05:00Z): fdatasync p99 42.0 ms > 10.0 ms"), or
 * how many machines passed. A machine that could not be measured counts
 * neither way (an unreachable machine is Degraded's, MachineUnreachable).
 */
int machines_judge(const state_preflight_list *l, char *const *names, size_t n, bool *ret_healthy,
                   char **ret_message);
