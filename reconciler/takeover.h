/*
 * The takeover of a cluster another operator runs, on the Kubernetes
 * target (spec.adopt; docs/migration.md): a migration, not an adoption in
 * place. gitcd adds members of its own beside the old ones and removes the
 * old ones, one membership change at a time, until only gitcd's are left;
 * the cluster ID, the data and quorum are kept at every step.
 *
 * The membership steps are decide()'s (rule 8b: obs_member.foreign); this
 * module finds the old cluster, judges whether it may be taken over, keeps
 * the record that says which members are the old cluster's, points the
 * old client Service at gitcd's voters, and says when it is over.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "etcd/client.h"
#include "reconciler/internal.h"

/* What etcd said of one member of the old cluster, for takeover_judge(). */
typedef struct takeover_fact {
        uint64_t id;
        const char *name; /* "" when it never started */
        bool learner;
        bool answered;       /* its status call answered */
        const char *version; /* its server version, when it answered */
        uint64_t cluster_id; /* as its status says, when it answered */
        size_t n_errors;     /* alarms and health problems its status reports */
} takeover_fact;

/*
 * Whether the old cluster of these members may be taken over by a spec of
 * etcd version `version`: 0, or -EPERM with the reason for a person in
 * *ret_why (no members, a learner, a member never started or not
 * answering, alarms, a version other than the spec's, members of
 * different clusters). Pure.
 */
int takeover_judge(const takeover_fact *f, size_t n, const char *version, char **ret_why);

/*
 * Before observing: for a cluster with spec.adopt whose takeover is not
 * finished, find the old cluster (the target's survey) and, the first
 * time, judge it and record the takeover before any step (the old
 * members, the cluster ID, the objects left for the user); every pass,
 * refuse while the old operator acts on it. 0: go on (x says whether a
 * takeover is under way: its endpoints and the old members' IDs); 1: the
 * pass ends here with res filled (refused, audited once per reason, or the
 * old cluster could not be read).
 */
int takeover_prepare(reconciler *r, cluster_ctx *x, const etcd_cluster *c, const char *commit,
                     const char *author, pass_result *res);
/* Whether member id was one of the old cluster's (a takeover under way). */
bool takeover_is_foreign(const cluster_ctx *x, uint64_t id);
/*
 * After observing: once gitcd has a healthy voter, point the old client
 * Service at gitcd's voters (recorded and audited); once etcd lists none
 * of the old members, record the takeover finished and audit what is
 * left for the user to delete.
 */
void takeover_observed(reconciler *r, cluster_ctx *x, const etcd_cluster *c, world *w);
/* Forget the takeover state of x (a cluster dropped, a spec without spec.adopt). */
void takeover_ctx_release(cluster_ctx *x);
