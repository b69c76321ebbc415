/*
 * Helpers shared by the files of render/ and nothing else: object metadata
 * and labels, which TLS surfaces are on, where certificate files live, and
 * the TLS volumes and cert-manager Certificates. Everything here is pure.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "render/layout.h"
#include "render/render.h"
#include "api/model.h"

/* Label keys from the Kubernetes recommended set. */
#define LABEL_APP_NAME      "app.kubernetes.io/name"
#define LABEL_APP_INSTANCE  "app.kubernetes.io/instance"
#define LABEL_APP_COMPONENT "app.kubernetes.io/component"
#define LABEL_APP_VERSION   "app.kubernetes.io/version"

/* gitcd's reserved label and annotation prefix. */
#define GITCD_LABEL_PREFIX "gitcd.io/"

/* Values of app.kubernetes.io/component. */
#define COMPONENT_MEMBER         "member"
#define COMPONENT_DATA           "data"
#define COMPONENT_PEER_SERVICE   "peer-service"
#define COMPONENT_CLIENT_SERVICE "client-service"
#define COMPONENT_PDB            "disruption-budget"
#define COMPONENT_CERTIFICATE    "certificate"

/* The cluster's namespace ("default" when unset). */
const char *render_namespace(const etcd_cluster *c);
/* True when the cluster is paused (replicas 0). */
bool render_paused(const etcd_cluster *c);

/* "<tls_dir>/<subdir>/<file>" with subdir ca-bundle replacing ca.crt when set. */
char *render_tls_file(const etcd_cluster *c, const member_plan *m, const char *subdir,
                      const char *file);

/* {"app.kubernetes.io/instance": ..., "gitcd.io/cluster": ...} plus the voter role if asked. */
json_t *render_selector(const etcd_cluster *c, bool voters_only);

/*
 * metadata for an object: name, namespace, labels and annotations. Labels
 * are the user's (additionalMetadata, then podTemplate for Pods) overlaid by
 * gitcd's own, which always win; member objects (m non-NULL) also carry
 * gitcd.io/member and gitcd.io/role. Keys are sorted, so the output does
 * not depend on the order the user wrote them in.
 */
json_t *render_metadata(const etcd_cluster *c, const char *name, const char *component,
                        const member_plan *m, bool pod);

/* Append the TLS Secret volumes and their read-only mounts for a member. */
void render_tls_volumes(const etcd_cluster *c, const member_plan *m, json_t *volumes,
                        json_t *mounts);
/* Append the cert-manager Certificates of the cluster (none for other providers). */
void render_certificates(const etcd_cluster *c, const membership_plan *p, json_t *out);

/* The port of a URL such as "http://0.0.0.0:2381"; fallback when absent or unparsable. */
int render_url_port(const char *url, int fallback);
