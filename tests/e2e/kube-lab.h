/*
 * The Kubernetes lab of the e2e tests: the real kube-apiserver and the node
 * simulator of tests/harness/kubeapi.h in a private mount namespace (the
 * Pods' DNS names in its /etc/hosts), with the namespaces a test needs and
 * deploy/rbac.yaml applied, so gitcd runs as the "gitcd" context with what
 * the RBAC file grants.
 */
#pragma once

#include <jansson.h>

#include "kube/client.h"
#include "tests/harness/kubeapi.h"

typedef struct kube_lab {
        kubeapi *api;
        nodesim *sim;
        kube_client *admin; /* the "admin" context */
        char *root;         /* removed by kube_lab_free */
        char *hosts;
} kube_lab;

/*
 * Start it with namespace ns (and "gitcd", the ServiceAccount's) created.
 * NULL when the test must be skipped (exit 77): no kube-apiserver, no etcd
 * of version, or no private mount namespace (needs root); why is printed.
 */
kube_lab *kube_lab_start(const char *ns, const char *version);
void kube_lab_free(kube_lab *l);
/* Apply every document of a YAML file (relative to the source tree) as admin. */
void kube_lab_apply_yaml_file(kube_lab *l, const char *rel);
/* How many objects of gvr in namespace ns admin lists with selector (failing the test on error). */
size_t kube_lab_count(kube_lab *l, const kube_gvr *gvr, const char *ns, const char *selector);
