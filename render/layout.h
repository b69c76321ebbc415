/*
 * Where rendered members keep their files, for every target that runs the
 * rendered command line: the certificate folders under a member's tls_dir
 * and the defaults of the steady Kubernetes plan. A target that runs
 * members itself (the local target) puts each surface's kubernetes.io/tls
 * keys -- tls.crt, tls.key, ca.crt -- into these folders.
 */
#pragma once

#define TLS_SUBDIR_CLIENT    "client"    /* the client-facing server certificate */
#define TLS_SUBDIR_PEER      "peer"      /* the member-to-member certificate */
#define TLS_SUBDIR_OPERATOR  "operator"  /* gitcd's own client identity (CN root) */
#define TLS_SUBDIR_CA_BUNDLE "ca-bundle" /* optional trust bundle replacing both ca.crt */

#define RENDER_DEFAULT_CLUSTER_DOMAIN "cluster.local"
#define RENDER_STEADY_DATA_DIR        "/var/lib/etcd/data"
#define RENDER_STEADY_TLS_DIR         "/etc/etcd/tls"
/* The name of the etcd container in a member's Pod (its logs are read by that name). */
#define RENDER_ETCD_CONTAINER "etcd"
