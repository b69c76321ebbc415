/*
 * Failure domains of the hosts target's machines
 * (spec.hosts.machines[].domains, spec.hosts.placement): where a new
 * member goes, and whether a placement survives the loss of one domain.
 *
 * Pure: no I/O, no clock. The hosts target places members with
 * domains_pick() (targets/hosts.c); intake judges the placement gitcd would
 * make for a new cluster with domains_place() and domains_risks()
 * (api/validate.c), so `gitcd validate`, `plan` and the reconciler say the
 * same thing.
 *
 * Every key any machine names is judged. A machine that does not name a
 * key shares that key's domain with no other machine (it is counted alone);
 * intake warns about it. A cluster of one or two members survives the loss
 * of no member at all, so it is never judged.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api/model.h"

/* Whether any machine of hs names a failure domain. */
bool hosts_have_domains(const hosts_spec *hs);

/*
 * The machine a new member goes on: among the machines i with
 * candidate[i] and not taken[i] (a member is already on it), the one that
 * minimises the largest number of members sharing one domain value with
 * it (over every key), then the sum of those numbers; ties in list order.
 * -1 when no machine is a candidate.
 */
int domains_pick(const hosts_spec *hs, const bool *taken, const bool *candidate);

/*
 * The placement gitcd makes for n new members on empty machines
 * (n <= hs->n): ret_idx[k] is member k's machine, picked in turn.
 */
void domains_place(const hosts_spec *hs, size_t n, size_t *ret_idx);

/* One domain value whose loss loses quorum. */
typedef struct domain_risk {
        char *key;       /* "rack" */
        char *value;     /* "r1" */
        size_t *members; /* positions in the placement (member k) of the members it holds */
        size_t n;        /* how many it holds */
        size_t replicas; /* of how many members */
        size_t values;   /* the distinct values of key among the machines */
        bool avoidable;  /* some placement on these machines keeps quorum without any one value */
} domain_risk;

/*
 * The domain values of placement[0..n) (machine indices, one member each)
 * whose loss loses quorum, in key order then value order of first
 * appearance. Returns how many (0 when none or n < 3); *ret_risks is
 * NULL when none.
 */
size_t domains_risks(const hosts_spec *hs, const size_t *placement, size_t n,
                     domain_risk **ret_risks);
void domain_risks_free(domain_risk *risks, size_t n);

/*
 * "rack=r1 holds demo-0, demo-1 of 3 members: losing r1 loses quorum".
 * names[k]: member k's name.
 */
char *domain_risk_summary(const domain_risk *r, char *const *names);
/* The summary, then for machines of spec.hosts why it cannot be avoided, or how it can. */
char *domain_risk_message(const domain_risk *r, char *const *names);
