/*
 * Plans: what taking in a source revision would change, computed without
 * touching any etcd, target or state.
 *
 * plan_compute() is pure: it takes the revision (files already read by a
 * source) and the clusters the state store has accepted, takes the
 * revision in through the intake the driver uses (intake/intake.h: invalid
 * documents and duplicates rejected, the rest still planned), and classifies every
 * cluster as create, update, delete, rejected or unchanged. Updates carry
 * a field-by-field diff of the normalized specs (secret-looking values
 * redacted) and the steps the reconciler will take. The printers turn a
 * plan into text for people or JSON for tools (docs/plan.md).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "intake/intake.h"
#include "util/strmap.h"
#include "sources/source.h"
#include "state/state.h"
#include "state/verdicts.h"
#include "util/diag.h"

typedef enum plan_action {
        PLAN_CREATE,
        PLAN_UPDATE,
        PLAN_DELETE,
        PLAN_REJECTED,
        PLAN_UNCHANGED,
        PLAN_HELD, /* a change (or a removal) waiting for approvals: not applied yet */
} plan_action;

/* "create", "update", "delete", "rejected", "unchanged", "held" (the JSON names). */
const char *plan_action_name(plan_action a);

typedef struct plan_change {
        char *path;    /* "spec.replicas", "metadata.labels.team", ... */
        json_t *from;  /* NULL: absent before */
        json_t *to;    /* NULL: absent after */
        bool redacted; /* a secret-looking key: values are never shown */
} plan_change;

typedef struct plan_item {
        char *name; /* "namespace/name"; for a document without a name, its file */
        plan_action action;
        char *file; /* where it is defined in the revision (NULL for a delete) */
        int line;
        etcd_cluster *spec;   /* the definition taken in; NULL when rejected or deleted */
        plan_change *changes; /* sorted by path */
        size_t n_changes;
        char **steps; /* what the reconciler will do, in order */
        size_t n_steps;
        char **notes; /* remarks: "still being applied", "kept: ..." */
        size_t n_notes;
        /*
         * spec.dependsOn (intake/order.h): its tier in the order (0: no
         * upstreams; -1: not in the order), and for a change or a creation
         * held back behind its upstreams the reason word and the sentence
         * ("waits for staging to converge on abc1234 and soak 60 s (32 s
         * left)"); NULL: taken in at once.
         */
        int tier;
        const char *wait_reason;
        char *wait;
        diag_list diags; /* the reasons for a rejection; warnings for the others */
} plan_item;

typedef struct plan {
        plan_item *items; /* sorted by name */
        size_t n;
        size_t alloc;
        diag_list diags; /* problems not tied to one cluster (skipped files, ...) */
        int n_create, n_update, n_delete, n_rejected, n_unchanged, n_held;
        strmap by_name; /* private to plan.c: the index of each item by name */
} plan;

typedef struct plan_input {
        const source_revision *rev;        /* required */
        const state_cluster_list *applied; /* NULL: nothing applied yet */
        /*
         * Parallel to applied->items: each cluster's current member records
         * (ordinals, the versions they were last started on), for the
         * version policy and the order members roll in. NULL: not known.
         */
        const state_member_list *members;
        bool prune; /* clusters removed from the source are stopped */
        /*
         * What the target apply would use can do (TARGET_CAP_*): the hosts
         * target takes in only clusters with spec.hosts (and only it does);
         * snapshots may go into a PVC only on the Kubernetes target.
         */
        unsigned caps;
        const char *target;   /* its kind's name, for policy.targets (the default's when NULL) */
        const policy *policy; /* the operator's policy; NULL: the built-in one */
        /* The kubeconfig contexts, as the intake takes them (intake/intake.h); NULL: none. */
        const intake_kube *kube;
        /* The revision's source, to count approvals (NULL: none are counted). */
        source *src;
        /* The intake's verdicts on record (an upstream refused or held); NULL: none. */
        const state_verdict_list *verdicts;
        /*
         * The state store, read for each cluster's holds (reconciler/hold.h:
         * a suspension `gitcd suspend` recorded, a spent override token);
         * NULL: the spec's holds only.
         */
        state_db *db;
        /* The wall clock (ms) a soak of spec.dependsOn is measured at and the
         * maintenance windows are judged at (0: the windows are not shown);
         * the gate of spec.dependsOn reads no clock of its own. */
        int64_t now_ms;
} plan_input;

/*
 * Compute the plan. Returns 0 (rejections are part of the plan, not an
 * error) or -EINVAL for a missing revision.
 */
int plan_compute(const plan_input *in, plan **ret);
void plan_free(plan *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(plan *, plan_free);

/* True when taking the revision in would create, change or delete something (held is not). */
bool plan_has_changes(const plan *p);
/* True when a document or a transition was rejected (or any error diagnostic). */
bool plan_has_errors(const plan *p);

/*
 * A key whose value is never shown (password, token, secret, key,
 * credential, in any case): the plan's and the diff's one rule.
 */
bool plan_key_looks_secret(const char *key);

typedef struct plan_print_opts {
        bool color;     /* ANSI colours */
        bool verbose;   /* also list unchanged clusters */
        bool show_diag; /* print unassigned diagnostics (skipped files) */
} plan_print_opts;

/* The human-readable plan, ending with "Plan: N to create, ...". */
void plan_print_text(const plan *p, const source_revision *rev, const plan_print_opts *o,
                     FILE *out);
/*
 * The plan for tools: {"revision": {...}, "clusters": [...], "diagnostics":
 * [...], "summary": {...}}; see docs/plan.md for every field.
 */
json_t *plan_to_json(const plan *p, const source_revision *rev);
