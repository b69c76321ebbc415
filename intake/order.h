/*
 * Ordered rollouts across clusters: spec.dependsOn and
 * spec.rollout.soakSeconds (native dialect).
 *
 * Two halves, both pure. order_check() is part of the intake: every
 * dependsOn entry of a revision's clusters must name a cluster the same
 * revision defines (the clusters of another source have unrelated
 * commits), and the graph has no cycle; a cluster with a bad entry is
 * refused alone (validate: an error at the entry's file:line:col, the
 * cycle's path in it). order_gate_decide() is the gate the driver puts
 * between a revision and a dependent's desired state: a changed (or new)
 * dependent is taken in only once every upstream has taken in the same
 * commit, converged on it and stayed healthy (no Degraded) for the
 * dependent's soakSeconds; an upstream gitcd gave up on (UpgradeFailed,
 * the progress deadline) or whose spec was refused holds it. The facts
 * come as data (order_upstream, read from the state store by
 * order_upstream_from_state()), so the driver, `gitcd plan` and `gitcd
 * status` judge alike.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "intake/intake.h"
#include "state/state.h"
#include "state/verdicts.h"

/* The reason words of a held-back dependent (`gitcd status`, `gitcd plan`, the audit). */
#define ORDER_REASON_WAITING "WaitingForDependency"
#define ORDER_REASON_FAILED  "DependencyFailed"
/* The intake verdict (state/verdicts.h) a held-back dependent is recorded with, its message
 * led by the reason word: "WaitingForDependency: waits for staging ...". */
#define ORDER_VERDICT "held"

/* "namespace/name" of a dependsOn entry of c ("name": c's own namespace); newly allocated. */
char *order_resolve(const etcd_cluster *c, const char *entry);

/*
 * Check the dependsOn entries of the clusters the intake took in (r):
 * each names a cluster of r (one of in->priors that r does not define is
 * another source's, or removed: refused; any other name is unknown), and
 * no cycle (refused with its path, "a -> b -> a", at the entry that closes
 * it; every cluster on it is refused). INTAKE_APPLY: such a cluster is
 * REFUSED with its diagnostics and why, the others go on. INTAKE_VALIDATE:
 * the errors go to r->diags and r->errors is set.
 */
void order_check(const intake_input *in, intake_result *r);

/*
 * The tier of each cluster of r (ret[i] for r->items[i]): 0 without
 * upstreams, else one more than its highest upstream's; -1 for a cluster
 * without a spec, refused or on a cycle. Newly allocated (r->n entries).
 */
int *order_tiers(const intake_result *r);

/* What the gate knows of one upstream. */
typedef struct order_upstream {
        const char *id; /* "namespace/name" */
        /* It holds the dependent's commit: its desired spec is the one that commit defines. */
        bool at_commit;
        /* Its latched spec is its desired one and it is converged (phase Running, not Degraded). */
        bool converged;
        /* Converged and healthy since (wall ms; 0: not known). */
        int64_t healthy_since_ms;
        /* Non-NULL: given up on or refused (a reason word and a sentence): holds its dependents. */
        const char *failed_reason;
        const char *failed_message;
        /* Non-NULL: its own change is held back (approvals, its own upstreams): why. */
        const char *held;
        /* Unhealthy while converged: why (Degraded's reason). */
        const char *unhealthy;
} order_upstream;

typedef enum order_gate_kind {
        ORDER_RELEASE, /* every upstream converged and soaked: take the change in */
        ORDER_WAIT,    /* ORDER_REASON_WAITING: an upstream has not converged or soaked yet */
        ORDER_HOLD,    /* ORDER_REASON_FAILED: an upstream failed; a person acts */
} order_gate_kind;

typedef struct order_gate {
        order_gate_kind kind;
        const char *reason; /* ORDER_REASON_*; NULL on release */
        /* What it waits for, with the time left: "waits for staging to converge on abc1234 ..." */
        char *message;
        /* The same with the soak's end as a time instead of the time left (for the store). */
        char *stored;
        /* ORDER_WAIT: when the first soak under way ends (wall ms); 0: none under way. */
        int64_t until_ms;
} order_gate;

/*
 * The gate of a dependent's change at commit (any string; shown by its
 * first 7 characters) over its upstreams' facts. 0, or -EINVAL on bad
 * arguments; release *ret with order_gate_release().
 */
int order_gate_decide(const char *commit, int soak_seconds, const order_upstream *ups, size_t n,
                      int64_t now_ms, order_gate *ret);
void order_gate_release(order_gate *g);

/*
 * An upstream's facts from its clusters row (sc, NULL: none yet) and the
 * intake's verdicts on it (NULL: none). spec_hash: the hash of the spec
 * the dependent's commit defines for it (NULL: compare commits instead).
 * The strings of *ret point into sc and v.
 */
void order_upstream_from_state(const char *id, const state_cluster *sc, const state_verdict_list *v,
                               const char *commit, const char *spec_hash, order_upstream *ret);
