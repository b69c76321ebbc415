/*
 * Spec intake: the one rule that turns the files of a source revision into
 * the clusters gitcd takes in. `gitcd plan`, `gitcd apply`, `gitcd run`
 * (through the driver, reconciler/driver.c) and `gitcd validate` all call
 * spec_intake(), so what plan shows and what apply does cannot disagree.
 *
 * In order: every file is parsed and validated (api/spec.h), clusters
 * defined twice are found, clusters that use a field gitcd does not act on
 * yet are refused (api/unsupported.c), then the target's rules (spec.hosts
 * only on the hosts target, snapshots in a PersistentVolumeClaim only where
 * a writer Pod can run), and every file the source skipped is noted; a
 * spec.dependsOn that names a cluster outside the revision or closes a
 * cycle refuses its cluster (intake/order.h); a cluster takes the source's
 * kubeconfig context when it names none, and one whose context the
 * kubeconfig lacks is refused (kube_context_check). Then,
 * cluster by cluster, the operator's policy (intake/policy.h): a cluster it
 * refuses is REFUSED with the policy lines that refuse it, and a change of
 * a kind that needs more trusted signers than it has (approvals, counted by
 * sources/ over the revision's history) is HELD. What the intake needs of
 * the target comes as data (its kind's TARGET_CAP_* bits and its name), of the state
 * store as data too (the specs accepted before), so plan/ never opens a
 * target and the intake never opens a state store.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api/model.h"
#include "api/spec.h"
#include "intake/policy.h"
#include "sources/source.h"
#include "targets/target.h"
#include "util/diag.h"

/* A cluster gitcd accepted before (the state store's record), as data. */
typedef struct intake_prior {
        const char *id;     /* "namespace/name" */
        const char *json;   /* the accepted spec, normalized JSON; NULL: none readable */
        const char *commit; /* the commit it was accepted from; NULL: a plain directory */
} intake_prior;

/*
 * Who approved: the distinct trusted signers of the revision's history
 * while the files at paths stayed as they are (no paths: the whole source),
 * back to since_commit (source_signers(), sources/source.h).
 */
typedef int (*intake_signers_fn)(void *userdata, const char *const *paths, size_t n_paths,
                                 const char *since_commit, source_signer_list *ret);

/*
 * What the intake needs of the kubeconfig contexts of a source (caps has
 * TARGET_CAP_KUBE_CONTEXTS; a cluster that names a context elsewhere is
 * refused). context: the one a cluster without spec.kubernetes.context
 * takes (the source's; NULL: none, the target's own default applies),
 * written at file:line:col of the configuration (file NULL: no place).
 * check: whether the source's kubeconfig has a context, 0 or -errno with
 * *ret_error a sentence (NULL: not checked). A cluster whose context fails
 * the check is refused, alone, at the place the context was written.
 */
typedef struct intake_kube {
        const char *context;
        const char *file;
        int line, col;
        int (*check)(void *userdata, const char *context, char **ret_error);
        void *userdata;
} intake_kube;

typedef enum intake_mode {
        /* plan, apply, run: refusals are errors; the target's rules apply */
        INTAKE_APPLY,
        /*
         * validate: no target and no state. Fields gitcd does not act on yet
         * are warnings (apply would refuse them); the target's rules are
         * left out.
         */
        INTAKE_VALIDATE,
} intake_mode;

typedef struct intake_input {
        /* The revision's files and the entries the source skipped; or files below. */
        const source_revision *rev;
        /* Without rev: files read some other way (gitcd validate), none skipped. */
        const spec_buffer *files;
        size_t n_files;
        intake_mode mode;
        /* What the target can do (TARGET_CAP_*: its kind's, targets/registry.h) */
        unsigned caps;
        const char *target; /* the target's name, for policy.targets; NULL: not checked */
        /*
         * The operator's policy; NULL: gitcd's built-in one (validate checks
         * none).
         */
        const policy *policy;
        /*
         * The clusters accepted before (NULL: none), for the wording of a
         * refusal ("not created" or "not changed") and the kinds of change
         * against the spec accepted last.
         */
        const intake_prior *priors;
        size_t n_priors;
        /* The kubeconfig contexts (caps has TARGET_CAP_KUBE_CONTEXTS); NULL: none given. */
        const struct intake_kube *kube;
        /* Approvals: the revision's source (source_signers()), or a function of one's own. */
        source *src;
        intake_signers_fn signers;
        void *signers_userdata;
} intake_input;

typedef enum intake_verdict {
        INTAKE_TAKEN,     /* to be offered to the reconciler (a removal: may go) */
        INTAKE_DUPLICATE, /* defined more than once: no definition is taken in */
        INTAKE_REFUSED,   /* the policy refuses it: diags name the policy's lines */
        INTAKE_HELD,      /* a change waiting for approvals: why says how many */
} intake_verdict;

/* "taken", "duplicate", "refused", "held". */
const char *intake_verdict_name(intake_verdict v);

/* A cluster the revision defines validly (clusters with errors are in diags only). */
typedef struct intake_cluster {
        char *id;           /* "namespace/name" */
        etcd_cluster *spec; /* owned; for a duplicate its first definition; NULL: a removal */
        intake_verdict verdict;
        bool exists;      /* accepted before (a prior) */
        unsigned changes; /* kinds of change against the accepted spec (1u << policy_change) */
        int needed;       /* distinct trusted signers the changes need (0: none) */
        size_t n_signers; /* distinct trusted signers counted (when needed) */
        char *why;        /* REFUSED, HELD: one line for logs, the audit and status */
        diag_list diags;  /* REFUSED: the policy's errors, at its lines */
} intake_cluster;

typedef struct intake_result {
        intake_cluster *items; /* in the order of first definition, each id once */
        size_t n, alloc;
        diag_list diags; /* every diagnostic, in the order found */
        /*
         * A document is invalid, a cluster is defined twice or refused by a
         * rule above: since an invalid document may be an existing cluster
         * that failed to parse, nothing is orphaned or pruned.
         */
        bool errors;
} intake_result;

/*
 * Take in a revision. Every problem is a diagnostic in ret->diags; the
 * function itself only fails on bad arguments (-EINVAL). ret is filled
 * whatever the verdicts; release it with intake_result_release().
 */
int spec_intake(const intake_input *in, intake_result *ret);
void intake_result_release(intake_result *r);

/* The cluster with id in r, or NULL. */
const intake_cluster *intake_find(const intake_result *r, const char *id);

/*
 * The policy's gate on a cluster the revision no longer defines (prior):
 * TAKEN when it may go (orphaned, or pruned), HELD while clusterDeletion
 * waits for approvals. Fills *ret (release with intake_cluster_release()).
 */
int spec_intake_removal(const intake_input *in, const intake_prior *prior, intake_cluster *ret);
void intake_cluster_release(intake_cluster *c);
