/*
 * Rendering: a validated EtcdCluster plus a membership plan -> the
 * Kubernetes objects that run it. Pure: no I/O, no clock, no randomness;
 * the same input gives the same objects byte for byte.
 *
 * Both targets consume these objects. The Kubernetes target applies them;
 * the local target runs each member Pod's etcd container command as a
 * local process. Addresses are part of the plan, so the same renderer
 * serves headless-Service DNS names (Kubernetes) and 127.0.0.1 ports (local).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "api/model.h"

/* Standard ports on Kubernetes. */
#define ETCD_CLIENT_PORT  2379
#define ETCD_PEER_PORT    2380
#define ETCD_METRICS_PORT 2381

/* Label keys gitcd puts on every object it renders. */
#define LABEL_CLUSTER          "gitcd.io/cluster"
#define LABEL_MEMBER           "gitcd.io/member"
#define LABEL_ROLE             "gitcd.io/role" /* "voter" | "learner" */
#define LABEL_MANAGED_BY_VALUE "gitcd"
#define LABEL_APP_MANAGED_BY   "app.kubernetes.io/managed-by" /* = LABEL_MANAGED_BY_VALUE */

typedef struct member_plan {
        char *name; /* "<cluster>-<ordinal>", never reused in a cluster */
        int ordinal;
        bool learner;
        char *peer_url;   /* advertised, e.g. http://c-0.c-headless.ns.svc.cluster.local:2380 */
        char *client_url; /* advertised */
        char *listen_peer_url;       /* e.g. http://0.0.0.0:2380 */
        char *listen_client_url;     /* e.g. http://0.0.0.0:2379 */
        char *listen_metrics_url;    /* e.g. http://0.0.0.0:2381 */
        char *initial_cluster;       /* "name=peerURL,..." this member starts with */
        char *initial_cluster_state; /* "new" (seed) | "existing" (joiner) */
        char *data_dir;              /* inside the Pod (Kubernetes) or on the host (local) */
        char *tls_dir;               /* where client/ peer/ operator/ certificate folders are */
        char *tls_version; /* the target's TLS material version (pki_auto_trust_version), or NULL */
        char *config_hash; /* render_member_config_hash() of this entry, NULL when not computed */
        /*
         * The data identity recorded for this member (state_member.data_identity):
         * NULL while it never ran. A target refuses to start a member whose data
         * it now sees under another identity, or none (-ESTALE). Not rendered.
         */
        char *data_identity;
        /*
         * Disaster recovery only (reconciler/recovery.c): this one start
         * renders --force-new-cluster. Never set by a plan builder, so the
         * next start of the member renders the command without it.
         */
        bool force_new_cluster;
} member_plan;

typedef struct membership_plan {
        member_plan *members;
        size_t n;
        size_t alloc;
        char *cluster_token; /* --initial-cluster-token */
} membership_plan;

/*
 * "Is client (peer) TLS on?": the one answer every module uses. On only
 * with a provider and the surface enabled.
 */
bool render_client_tls(const etcd_cluster *c);
bool render_peer_tls(const etcd_cluster *c);
/*
 * spec.tls.peer.selfSigned: the members speak https to each other with the
 * certificates etcd makes for itself (--peer-auto-tls), no CA, no peer
 * client-certificate check.
 */
bool render_peer_self_signed(const etcd_cluster *c);
/* The peer URLs' scheme: "https" with peer TLS of either kind, else "http". */
const char *render_peer_scheme(const etcd_cluster *c);

/* Names gitcd gives the shared objects of a cluster. */
char *render_headless_service_name(const etcd_cluster *c); /* "<name>-headless" */
char *render_client_service_name(const etcd_cluster *c);   /* "<name>" */
/* The client Service's selector: the cluster's voters (a new object). */
json_t *render_client_selector(const etcd_cluster *c);
char *render_member_name(const etcd_cluster *c, int ordinal); /* "<name>-<ordinal>" */

/* "<namespace>-<name>": the --initial-cluster-token of every member. Newly allocated. */
char *membership_cluster_token(const etcd_cluster *c);

/* An empty plan for cluster c (its token set), to fill with membership_plan_add(). */
membership_plan *membership_plan_new(const etcd_cluster *c);

/*
 * The plan for the steady state a fresh cluster converges to on
 * Kubernetes: replicas voters with ordinals 0..replicas-1 (one dormant
 * member when paused), the seed started "new" with itself, each later
 * member "existing" with the members before it, headless-Service DNS names
 * under cluster_domain ("cluster.local").
 */
membership_plan *membership_plan_steady(const etcd_cluster *c, const char *cluster_domain);
void membership_plan_free(membership_plan *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(membership_plan *, membership_plan_free);
member_plan *membership_plan_add(membership_plan *p); /* zeroed entry to fill */
/* Free the strings of one entry (not the entry itself); the entry is zeroed. */
void member_plan_release(member_plan *m);
/*
 * Clients on both schemes on the member's one client port (etcd tells
 * them apart per connection): its https listen URL gets the same one in
 * http before it. false when it listens on no single https URL.
 */
bool member_plan_listen_plain(member_plan *m);
/* tls.client.allowPlainHTTP: member_plan_listen_plain() when the spec asks for it. */
void member_plan_allow_plain(const etcd_cluster *c, member_plan *m);

/*
 * The etcd container command line for one member: argv[0] "etcd", then
 * flags; NULL-terminated (free it with strv_free()).
 */
char **render_member_command(const etcd_cluster *c, const membership_plan *p, size_t idx);

/*
 * "Outdated" in one value: a hash of what one member runs (the etcd
 * version, its rendered command and, when set, the version of the TLS
 * material it trusts: member_plan.tls_version), as 64 hex digits. The plan builders
 * store it in member_plan.config_hash; targets store the hash a member was
 * started with and report it (target_member_status.config_hash); a
 * running member whose hash differs from the desired one is outdated.
 */
char *render_member_config_hash(const etcd_cluster *c, const membership_plan *p, size_t idx);

/*
 * The Secret mounted for a TLS folder (TLS_SUBDIR_*): the user's Secret
 * (provider secrets), or "<name>-client-tls" / "-peer-tls" /
 * "-operator-tls" (providers auto and cert-manager). NULL when that
 * folder is not mounted. Newly allocated.
 */
char *render_tls_secret_name(const etcd_cluster *c, const char *subdir);

/* Per-member objects. */
json_t *render_member_pod(const etcd_cluster *c, const membership_plan *p, size_t idx);
/* NULL for medium: Memory (the Pod gets an emptyDir instead). */
json_t *render_member_pvc(const etcd_cluster *c, const membership_plan *p, size_t idx);

/* Shared objects: headless Service, client Service, PodDisruptionBudget, Certificates. */
json_t *render_shared_objects(const etcd_cluster *c, const membership_plan *p);

/*
 * Every object for the cluster in a fixed order: Services, PDB, TLS
 * objects, then each member's PVC and Pod. A JSON array.
 */
json_t *render_cluster(const etcd_cluster *c, const membership_plan *p);
