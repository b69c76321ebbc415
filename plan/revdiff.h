/*
 * Diffs between two revisions of a source (`gitcd diff`, `gitcd plan
 * --since`): cluster by cluster, what was added, removed, changed or is
 * refused, each change as a field list and a unified diff of the
 * normalized specs, with the steps the change implies.
 *
 * revdiff_compute() is pure, like plan_compute(): it takes both revisions
 * (files already read by a source) and plans the second as if the
 * clusters the first defines validly had been accepted, so the steps, the
 * refusals and the policy's verdicts are the plan's own (plan/plan.h) and
 * cannot disagree with what apply would do going from one revision to the
 * other. What the planner cannot know from specs alone (which member
 * leads, the versions members run) is left out: steps say "followers
 * first, the leader last" rather than names.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "plan/plan.h"
#include "sources/source.h"

typedef enum revdiff_kind {
        REVDIFF_ADDED,     /* defined validly by `to` only */
        REVDIFF_REMOVED,   /* defined by `from` only */
        REVDIFF_CHANGED,   /* defined validly by both, differently */
        REVDIFF_REFUSED,   /* `to` defines it but it is invalid or refused (by the policy) */
        REVDIFF_UNCHANGED, /* the same normalized spec in both */
} revdiff_kind;

/* "added", "removed", "changed", "refused", "unchanged" (the JSON names). */
const char *revdiff_kind_name(revdiff_kind k);

typedef struct revdiff_item {
        char *name; /* "namespace/name" */
        revdiff_kind kind;
        /*
         * The plan of `to` for this cluster, against `from`'s spec: file,
         * line, the field-by-field changes, the steps, notes and the
         * reasons for a refusal. Points into revdiff.to_plan; NULL when
         * the plan has no item for it.
         */
        const plan_item *plan;
        /* Unified-diff lines of the normalized specs ("@@ ...", " x", "-x", "+x"). */
        char **lines;
        size_t n_lines;
        /* Why `from` refused its definition (the cluster was then not accepted). */
        diag_list from_diags;
} revdiff_item;

typedef struct revdiff {
        revdiff_item *items; /* sorted by name */
        size_t n;
        int n_added, n_removed, n_changed, n_refused, n_unchanged;
        plan *to_plan;        /* owned: `to` planned against `from`'s specs */
        diag_list from_diags; /* `from`'s problems not tied to a cluster */
} revdiff;

typedef struct revdiff_input {
        const source_revision *from; /* required */
        const source_revision *to;   /* required */
        bool prune;                  /* as plan's --prune: removed clusters are stopped */
        unsigned caps;               /* the target kind's TARGET_CAP_* (plan_input) */
        const char *target;          /* its name (NULL: the default kind's) */
        const policy *policy;        /* NULL: the built-in one */
        source *src;                 /* approvals of `to`'s changes are counted in it; NULL: none */
} revdiff_input;

/* 0, or -EINVAL for a missing revision. */
int revdiff_compute(const revdiff_input *in, revdiff **ret);
void revdiff_free(revdiff *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(revdiff *, revdiff_free);

/* Something added, removed or changed (a refusal alone is not a change). */
bool revdiff_has_changes(const revdiff *d);
/* `to` has a refused cluster or an invalid document. */
bool revdiff_has_errors(const revdiff *d);

typedef struct revdiff_print_opts {
        bool color;
        bool verbose; /* also list unchanged clusters */
        bool lines;   /* the unified diffs (`gitcd diff`); without: the summary (plan --since) */
        bool steps;   /* the steps each change implies */
} revdiff_print_opts;

/*
 * For people: "Changes from A to B of REPO:", one block per cluster, and
 * "Diff: N added, N changed, N removed, N refused."
 */
void revdiff_print_text(const revdiff *d, const source_revision *from, const source_revision *to,
                        const revdiff_print_opts *o, FILE *out);
/*
 * For tools: {"from": {...}, "to": {...}, "clusters": [{"name", "change",
 * "file", "line", "changes", "steps", "notes", "diagnostics",
 * "fromDiagnostics", "diff"}], "summary": {...}} (docs/plan.md).
 */
json_t *revdiff_to_json(const revdiff *d, const source_revision *from, const source_revision *to);
