/*
 * Static bootstrap: a brand-new cluster forms with all its members at once,
 * every one started "new" with the same --initial-cluster and token, the
 * way etcd's clustering guide does it. Learners stay the path for every
 * later change (spec.bootstrap.mode learners keeps the seed-and-learners
 * path for the first members too).
 *
 * The path is three calls, so a bootstrap that prepares members' data
 * first (every member restored from one snapshot) uses it as is and puts
 * its own step between the second and the third:
 *
 *   bootstrap_static_plan()    the plan: names, addresses, one initial cluster
 *   bootstrap_static_record()  every member recorded, all or nothing
 *   bootstrap_static_start()   every member started from that plan
 *
 * Records are the marker that the cluster may have formed: once they
 * exist, decide() never plans a new initial cluster again. It resumes the
 * same static set from the records (same initial cluster, same token, same
 * flags) until every member has joined.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "reconciler/decide.h"
#include "render/render.h"
#include "state/state.h"
#include "targets/target.h"

/*
 * Decide's rules 1 (static) and 1b, pure: true when s was set. Nothing
 * recorded and no cluster ID yet, a static mode and more than one replica:
 * STEP_BOOTSTRAP. A static initial cluster whose members have not all
 * joined: start the ones not running (one per step), else wait for them,
 * naming the first member that is not ready.
 */
bool decide_bootstrap(const desired *want, const observation *obs, step *s);

/*
 * Has the cluster's bootstrap not finished: no cluster ID recorded yet, or
 * a member of a static initial cluster has never joined? A deadline that
 * passes then is BootstrapFailed rather than DeadlineExceeded.
 */
bool bootstrap_in_progress(const observation *obs);

/*
 * The plan of n new members from first_ordinal (membership_plan_static()),
 * after checking that none of their names is taken. -EEXIST (why in *ret_error)
 * when a record or a target member of one of those names exists already:
 * nothing is placed and nothing is taken over. Else 0 or the target's error.
 */
int bootstrap_static_plan(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
                          int first_ordinal, int n, membership_plan **ret_plan, char **ret_error);

/*
 * Record every member of plan for cluster ("ns/name") in one transaction:
 * all or none. 0, or the store's error (why in *ret_error).
 */
int bootstrap_static_record(state_db *db, const char *cluster, const etcd_cluster *c,
                            const membership_plan *plan, int64_t now_ms, char **ret_error);

/*
 * Start every member of plan: the shared objects once, then each member,
 * and record the config hash each was started with. A member that cannot
 * start does not hold the others back; the first error is returned (with
 * the member named in *ret_error) after every member was tried.
 */
int bootstrap_static_start(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
                           const membership_plan *plan, int64_t now_ms, char **ret_error);
