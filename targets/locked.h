/*
 * A target shared by several threads: the operations of one cluster are
 * serialized, those of different clusters run at once, and the inner
 * target's shared state is guarded by one lock that the inner target
 * lets go of around its slow waits (design: targets/locked.c). A target
 * written for one thread can thus serve the driver's worker threads and
 * the daemon's main loop at once, and one cluster's slow operation does
 * not hold up another cluster's.
 */
#pragma once

#include "targets/target.h"

/* Wrap inner (ownership passes to the wrapper: freeing it frees inner). 0 or -errno. */
int target_locked_new(target *inner, target **ret);

/*
 * For the targets themselves: around a wait that reads or writes none of
 * the target's shared state (its tables, its shared clients), let other
 * threads' operations in, and take the shared lock back after. Within an
 * operation that names a cluster, that cluster's lock stays held, so
 * what belongs to the cluster alone may be used across the wait; anything
 * shared must be looked up again after target_blocking_end(). Nothing
 * happens outside a locked target (one thread).
 */
void target_blocking_begin(void);
void target_blocking_end(void);

/*
 * For a target that forwards each operation to locked targets of its own
 * (targets/kubernetes-servers.c: one per API server): around the forwarded
 * call, let go of the shared lock of the wrapper around it (if any) and
 * leave the thread free to enter the inner wrapper; the cluster's lock
 * stays held. target_forward_end takes back what begin returned.
 */
void *target_forward_begin(void);
void target_forward_end(void *token);
