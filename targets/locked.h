/*
 * A target shared by several threads: every operation of the target it
 * wraps runs under one mutex, so a target written for one thread (its
 * process table, its Kubernetes client) can serve the driver's worker
 * threads and the daemon's main loop at once.
 */
#pragma once

#include "targets/target.h"

/* Wrap inner (ownership passes to the wrapper: freeing it frees inner). 0 or -errno. */
int target_locked_new(target *inner, target **ret);
