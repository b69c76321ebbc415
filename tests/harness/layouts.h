/*
 * The objects four other etcd operators leave in a Kubernetes cluster for a
 * running etcd cluster, made on the harness apiserver as each operator's
 * controller would have made them, so tests can take such a cluster over.
 * No operator runs: its CRD, its custom resource and its Deployment are
 * there (the Deployment's replicas say whether the operator was running or
 * stopped); the etcd members run as Pods of the node simulator (bare Pods,
 * or Pods of a real StatefulSet/ReplicaSet controller: kubeapi_start_controllers()).
 *
 * Where the facts come from (the operators' sources, read at these versions):
 *   LAYOUT_COREOS      coreos/etcd-operator v0.9.4 (13a1831): pkg/util/k8sutil/
 *                      k8sutil.go (Pods, Services, PVCs), pod_util.go (container,
 *                      probes), pkg/util/etcdutil/member.go (URLs), pkg/apis/etcd/
 *                      v1beta2/{cluster,cluster_tls}.go, example/deployment.yaml.
 *   LAYOUT_ETCDIO      etcd-io/etcd-operator v0.2.0+ (77c7f10): internal/controller/
 *                      utils.go (StatefulSet, Service, ConfigMap, Secret names),
 *                      pkg/certificate/auto/provider.go (Secret keys), api/v1alpha1/
 *                      etcdcluster_types.go, config/manager/manager.yaml.
 *   LAYOUT_IMPROBABLE  improbable-eng/etcd-cluster-operator v0.2.0+ (f84abc6):
 *                      controllers/etcdpeer_controller.go (ReplicaSet per peer, env,
 *                      PVC), controllers/etcdcluster_controller.go (Service, peers),
 *                      controllers/constants.go, internal/etcdenvvar/envvars.go.
 *   LAYOUT_COZYSTACK   the legacy Cozystack operator, aenix-io/etcd-operator v0.4.2
 *                      (6537618): internal/controller/factory/{statefulset,svc,
 *                      configmap,pvc,labels_builder}.go, api/v1alpha1/
 *                      etcdcluster_types.go. (Not the newer cozystack/etcd-operator
 *                      v1alpha2, which has no StatefulSet.)
 * A summary per operator (names, labels, selectors, URLs, Secrets, what
 * pauses it) is in tests/harness/README.md.
 *
 * Where the harness differs from what the operator did, on purpose: the
 * members bootstrap together as one "new" cluster (every operator grew its
 * cluster one member at a time; etcd's view once running is the same:
 * names, peer and client URLs, data); the ConfigMaps that carry the
 * initial cluster state (etcd-io, cozystack) say "new" until
 * layout_wait_healthy() sets "existing", as the operator leaves them; the
 * image tags are of opts->version (the node simulator runs the cached etcd
 * of that version).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "etcd/client.h"
#include "kube/client.h"
#include "pki/pki.h"

typedef enum layout_kind {
        LAYOUT_COREOS,
        LAYOUT_ETCDIO,
        LAYOUT_IMPROBABLE,
        LAYOUT_COZYSTACK,
} layout_kind;

typedef struct layout_opts {
        const char *name;    /* the EtcdCluster's name (NAME) */
        const char *ns;      /* its namespace (made when missing) */
        int size;            /* members; 0 = 3 */
        const char *version; /* etcd version; NULL = "3.5.16" */
        /*
         * TLS from the test's CA (both or neither): member certificates are
         * issued from it into the operator's Secrets, and the members serve
         * https where that operator did. LAYOUT_IMPROBABLE has no TLS
         * (-EOPNOTSUPP); LAYOUT_ETCDIO makes its Secrets but its members
         * stay http, as that operator's StatefulSet never mounts them.
         */
        const pki_cert *ca;
        const pki_key *ca_key;
        int operator_replicas;          /* the operator Deployment's replicas: 0 = stopped */
        const char *operator_namespace; /* NULL = the operator's own default */
} layout_opts;

/* "coreos", "etcdio", "improbable", "cozystack". */
const char *layout_kind_name(layout_kind kind);

/*
 * The objects of a layout, in creation order, without I/O (for unit tests
 * and layout_create): a JSON array of entries
 *   {"resource": PLURAL, "namespaced": BOOL, "object": OBJECT,
 *    "owner": {"apiVersion", "kind", "name"}   (optional: its controller),
 *    "status": STATUS                           (optional: written after),
 *    "shared": true                             (optional: may exist already)}
 * The owner's uid is only known once it exists: layout_create fills the
 * ownerReference. -EINVAL for bad options, -EOPNOTSUPP for TLS on
 * LAYOUT_IMPROBABLE.
 */
int layout_objects(layout_kind kind, const layout_opts *opts, json_t **ret_entries);

/*
 * Create the layout's objects with admin (system:masters): the CRDs (and
 * wait until they serve), the operator's namespace and Deployment, the
 * custom resources, Secrets, Services, PVCs, ConfigMaps and the member Pods
 * or their StatefulSet/ReplicaSets, each with its operator's
 * ownerReferences. 0 or negative errno (the apiserver's message on stderr).
 */
int layout_create(kube_client *admin, layout_kind kind, const layout_opts *opts);

/* The label selector of the member Pods ("app=etcd,etcd_cluster=NAME"). Newly allocated. */
char *layout_member_selector(layout_kind kind, const layout_opts *opts);

/*
 * The client endpoints of the running members, reachable from the test
 * process: for each Pod the client Service's selector picks (the headless
 * Service's where the operator made no client Service) that runs,
 * "SCHEME://HOST.SUB.NS.svc:2379" (".svc.cluster.local" for etcd-io), the
 * name the operator advertised, resolvable through the node simulator's
 * hosts file and matching the certificates. Comma-separated; -ENOENT when
 * no member runs.
 */
int layout_client_endpoints(kube_client *admin, layout_kind kind, const layout_opts *opts,
                            char **ret_endpoints);

/*
 * An etcd client for the layout's client endpoints, with a client
 * certificate from the test's CA (CN root) when the layout serves TLS.
 */
int layout_etcd_client(kube_client *admin, layout_kind kind, const layout_opts *opts,
                       etcd_client **ret_client);

/*
 * Wait (at most timeout_s) until the cluster is healthy: opts->size member
 * Pods run, etcd's member list holds opts->size started voting members, and
 * a write and a read through the client endpoints work; then leave the
 * initial-cluster-state ConfigMap at "existing", as the operator does.
 * -ETIMEDOUT, with the last problem on stderr.
 */
int layout_wait_healthy(kube_client *admin, layout_kind kind, const layout_opts *opts,
                        int timeout_s);
