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
 * a writer Pod can run), and every file the source skipped is noted. What
 * the intake needs of the target comes as data (INTAKE_CAP_* bits), of the
 * state store as data too (whether a cluster exists), so plan/ never
 * includes a target and the intake never opens a state store.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api/model.h"
#include "api/spec.h"
#include "sources/source.h"
#include "util/diag.h"

/* What the target the revision is taken in for can do (the caller maps its caps). */
enum {
        /* Runs members on the machines of spec.hosts, and nowhere else (the hosts target). */
        INTAKE_CAP_HOSTS_INVENTORY = 1u << 0,
        /* Writes snapshots into PersistentVolumeClaims through a Pod (the Kubernetes target). */
        INTAKE_CAP_PVC_WRITER = 1u << 1,
};

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
        unsigned caps; /* INTAKE_CAP_* */
        /*
         * Whether the cluster "namespace/name" was taken in before (NULL:
         * nothing was), which picks "not created" or "not changed" in a
         * refusal's message.
         */
        bool (*exists)(const char *id, void *userdata);
        void *userdata;
} intake_input;

typedef enum intake_verdict {
        INTAKE_TAKEN,     /* to be offered to the reconciler */
        INTAKE_DUPLICATE, /* defined more than once: no definition is taken in */
} intake_verdict;

/* A cluster the revision defines validly (clusters with errors are in diags only). */
typedef struct intake_cluster {
        char *id;           /* "namespace/name" */
        etcd_cluster *spec; /* owned; for a duplicate its first definition */
        intake_verdict verdict;
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
