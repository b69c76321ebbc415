/*
 * Drift: how the objects live on a Kubernetes API server differ from what
 * gitcd would apply for each cluster, found without writing anything.
 *
 * For every object the Kubernetes target applies for a cluster (its
 * kind's kube_objects, targets/registry.h: Services, PodDisruptionBudget, cert-manager
 * Certificates, the TLS Secrets of tls.provider auto, and each recorded
 * member's PVC and Pod with its pod-hash and config-hash annotations),
 * fitted to the server's API versions, drift_compute() reads the live
 * object and asks the server for a server-side apply in dry-run mode: the
 * fields of the object the server would store that differ from the live
 * one are the drift. It also lists the cluster's labelled objects that are
 * not rendered any more (they would be pruned), and counts the members'
 * Pods and PVCs against spec.replicas and their etcd image tag against
 * spec.version. docs/kubernetes.md describes the report.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "kube/client.h"
#include "api/model.h"
#include "state/state.h"
#include "targets/registry.h"
#include "targets/target.h"

typedef enum drift_state {
        DRIFT_IN_SYNC,     /* the apply would change nothing */
        DRIFT_MISSING,     /* the object does not exist: it would be created */
        DRIFT_CHANGED,     /* the apply would change the paths listed */
        DRIFT_CONFLICT,    /* the fields differ and the server refuses gitcd's apply (message) */
        DRIFT_UNMANAGED,   /* an object without gitcd's managed-by label holds the name */
        DRIFT_PRUNE,       /* labelled for the cluster but not rendered: it would be deleted */
        DRIFT_UNSUPPORTED, /* the server does not serve the kind (message) */
} drift_state;

/* "in-sync", "missing", "drift", "conflict", "not-managed", "prune", "unsupported". */
const char *drift_state_name(drift_state s);

typedef struct drift_object {
        char *api_version; /* as the server serves it */
        char *kind;
        char *name;
        drift_state state;
        char **paths; /* DRIFT_CHANGED, DRIFT_CONFLICT: the differing fields */
        size_t n_paths;
        char *message; /* the server's reason (conflict, unsupported, refused create), or NULL */
} drift_object;

typedef struct drift_cluster {
        char *name; /* "namespace/name" */
        drift_object *objects;
        size_t n_objects, alloc_objects;
        int replicas; /* spec.replicas */
        char *version;
        int want_pods, want_pvcs; /* what the steady state has */
        int pods, pvcs;           /* what is live */
        char **stale;             /* "pod: image" for Pods running another etcd version */
        size_t n_stale;
        /*
         * Failure domains of the live Pods' nodes (their zone label and the
         * node itself) whose loss loses quorum: "topology.kubernetes.io/zone=z1
         * holds demo-0, demo-1 of 3 members: losing z1 loses quorum"; or why
         * the nodes could not be judged. Warnings: not drift.
         */
        char **domain_risks;
        size_t n_domain_risks;
} drift_cluster;

typedef struct drift_report {
        drift_cluster *items; /* in the order given */
        size_t n;
        int n_missing, n_changed, n_unmanaged, n_prune, n_unsupported, n_members;
} drift_report;

typedef struct drift_opts {
        /* Required: the plan operations of the kind whose objects are compared (kube_objects). */
        const target_plan_ops *plan;
        const char *cluster_domain; /* NULL: cluster.local */
        /*
         * The Kubernetes target the clusters run with (its state folder holds
         * the issued TLS material) and the state store with their member
         * records. With both, the TLS Secrets and every recorded member's PVC
         * and Pod (a dormant member's PVC only) are compared too, and the
         * PodDisruptionBudget is fitted to the recorded voters, as the target
         * applies them. Without: the shared objects of the steady plan only.
         */
        target *target;
        state_db *db;
} drift_opts;

/*
 * Compare each cluster with the server kc talks to. Only GET, LIST and
 * dry-run PATCH requests are made. Returns 0, or a negative errno with
 * *ret_error a sentence for a person when the server cannot be read:
 * -EACCES (401/403, naming the verb and resource), -EIO (unreachable).
 */
int drift_compute(kube_client *kc, etcd_cluster *const *clusters, size_t n, const drift_opts *o,
                  drift_report **ret, char **ret_error);
void drift_report_free(drift_report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(drift_report *, drift_report_free);

/* True when applying would create, change or delete an object, or members differ. */
bool drift_has_changes(const drift_report *r);
/* True when an object cannot be applied at all (not managed by gitcd, kind not served). */
bool drift_has_errors(const drift_report *r);

/*
 * The fields of `after` that differ from `before` (both whole objects as a
 * server returns them), ignoring status and the metadata the server keeps
 * (managedFields, resourceVersion, generation, creationTimestamp, uid,
 * selfLink). Paths read "spec.ports[0].port",
 * "metadata.labels[\"app.kubernetes.io/version\"]"; arrays of different
 * lengths are one path. Pure.
 */
void drift_diff(const json_t *before, const json_t *after, char ***ret_paths, size_t *ret_n);
/* The fields of `want` (a rendered object) that `live` does not hold with the same value. Pure. */
void drift_diff_subset(const json_t *want, const json_t *live, char ***ret_paths, size_t *ret_n);

/* Text for people: one block per cluster, then "Drift: ..." (docs/kubernetes.md). */
void drift_print_text(const drift_report *r, const char *server, bool color, FILE *out);
/* {"server": ..., "clusters": [...], "summary": {...}} (docs/plan.md). */
json_t *drift_to_json(const drift_report *r, const char *server, const char *context);
