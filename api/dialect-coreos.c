/*
 * The coreos dialect, etcd.database.coreos.com/v1beta2 (the archived
 * coreos/etcd-operator): size, version, repository, pod policy and static
 * TLS Secrets.
 *
 * Design decision: `spec.paused: true` is NOT mapped to replicas 0. In the
 * coreos operator, paused meant "the operator stops managing the cluster"
 * while etcd kept serving; replicas 0 in gitcd stops serving. It maps onto
 * gitcd's spec.suspend instead (reconciler/hold.h): etcd keeps serving,
 * gitcd keeps observing and takes no voluntary step.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "util/xalloc.h"

/* Required anti-affinity over nodes: what coreos did for antiAffinity: true. */
static json_t *hostname_anti_affinity(const char *name)
{
        return json_pack("{s:{s:[{s:{s:{s:s,s:s}},s:s}]}}", "podAntiAffinity",
                         "requiredDuringSchedulingIgnoredDuringExecution", "labelSelector",
                         "matchLabels", "app.kubernetes.io/name", "etcd",
                         "app.kubernetes.io/instance", name ? name : "", "topologyKey",
                         "kubernetes.io/hostname");
}

/* persistentVolumeClaimSpec / volumeClaimTemplate: size, class, access modes. */
void read_pvc_spec(reader *r, const ynode *pvc, const char *path)
{
        etcd_cluster *c = r->c;
        static const char *const known[] = {"accessModes", "resources", "storageClassName", NULL};
        static const char *const ignored[] = {"selector",   "volumeMode",    "volumeName",
                                              "dataSource", "dataSourceRef", NULL};
        rd_keys(r, pvc, path, known, ignored);
        rd_string(r, pvc, path, "storageClassName", "spec.storage.storageClassName",
                  &c->storage.storage_class);
        const ynode *modes = NULL, *k = NULL;
        modes = rd_get(pvc, "accessModes", &k);
        if (modes) {
                _cleanup_free_ char *p = rd_join(path, "accessModes");
                if (modes->kind != YNODE_SEQ)
                        rd_type_error(r, modes, p, "a sequence");
                for (size_t i = 0; modes->kind == YNODE_SEQ && i < modes->n; i++) {
                        const ynode *m = modes->values[i];
                        if (m->kind != YNODE_SCALAR || !streq(m->str, "ReadWriteOnce"))
                                rd_warning(r, m,
                                           "%s: only ReadWriteOnce is supported by gitcd (each "
                                           "member has its own volume); other modes are ignored",
                                           p);
                }
        }
        const ynode *res = NULL, *req = NULL;
        _cleanup_free_ char *pres = rd_join(path, "resources");
        _cleanup_free_ char *preq = rd_join(pres, "requests");
        if (rd_map(r, pvc, path, "resources", NULL, &res)) {
                static const char *const kr[] = {"requests", NULL};
                static const char *const ir[] = {"limits", NULL};
                rd_keys(r, res, pres, kr, ir);
                if (rd_map(r, res, pres, "requests", NULL, &req)) {
                        static const char *const kq[] = {"storage", NULL};
                        rd_keys(r, req, preq, kq, NULL);
                        rd_quantity(r, req, preq, "storage", "spec.storage.size", &c->storage.size,
                                    &c->storage.size_bytes);
                }
        }
}

static void read_pod(reader *r, const ynode *pod)
{
        etcd_cluster *c = r->c;
        const char *P = "spec.pod";
        static const char *const known[] = {
            "labels",   "annotations", "nodeSelector", "antiAffinity",
            "affinity", "resources",   "tolerations",  "persistentVolumeClaimSpec",
            NULL};
        static const char *const ignored[] = {
            "busyboxImage",     "etcdEnv", "securityContext", "DNSTimeoutInSecond", "ClusterDomain",
            "imagePullSecrets", NULL};
        rd_keys(r, pod, P, known, ignored);
        rd_kv(r, pod, P, "labels", "spec.podTemplate.metadata.labels", true, &c->pod_labels);
        rd_kv(r, pod, P, "annotations", "spec.podTemplate.metadata.annotations", false,
              &c->pod_annotations);
        rd_json(r, pod, P, "nodeSelector", "spec.nodeSelector", true, &c->node_selector);
        rd_json(r, pod, P, "resources", "spec.resources", true, &c->resources);
        rd_json(r, pod, P, "tolerations", "spec.tolerations", false, &c->tolerations);
        bool anti = false;
        bool have_anti = rd_bool(r, pod, P, "antiAffinity", "spec.affinity", &anti);
        if (rd_json(r, pod, P, "affinity", "spec.affinity", true, &c->affinity)) {
                if (have_anti && anti)
                        rd_warning(r, rd_get(pod, "antiAffinity", NULL),
                                   "spec.pod.antiAffinity is ignored because spec.pod.affinity "
                                   "is set");
        } else if (have_anti && anti) {
                c->affinity = hostname_anti_affinity(c->name);
        }
        const ynode *pvc = NULL;
        if (rd_map(r, pod, P, "persistentVolumeClaimSpec", "spec.storage", &pvc))
                read_pvc_spec(r, pvc, "spec.pod.persistentVolumeClaimSpec");
}

static void read_tls(reader *r, const ynode *tls)
{
        etcd_cluster *c = r->c;
        static const char *const known[] = {"static", NULL};
        rd_keys(r, tls, "spec.TLS", known, NULL);
        const ynode *st = NULL, *member = NULL;
        if (!rd_map(r, tls, "spec.TLS", "static", "spec.tls", &st))
                return;
        static const char *const ks[] = {"member", "operatorSecret", NULL};
        rd_keys(r, st, "spec.TLS.static", ks, NULL);
        c->tls.provider = TLS_PROVIDER_SECRETS;
        rd_record(r, "spec.tls.provider", "spec.TLS.static", NULL, st);
        if (rd_map(r, st, "spec.TLS.static", "member", NULL, &member)) {
                static const char *const km[] = {"peerSecret", "serverSecret", NULL};
                rd_keys(r, member, "spec.TLS.static.member", km, NULL);
                c->tls.peer.enabled = rd_string(r, member, "spec.TLS.static.member", "peerSecret",
                                                "spec.tls.peer.secretRef", &c->tls.peer.secret);
                c->tls.client.enabled =
                    rd_string(r, member, "spec.TLS.static.member", "serverSecret",
                              "spec.tls.client.secretRef", &c->tls.client.secret);
        }
        rd_string(r, st, "spec.TLS.static", "operatorSecret", "spec.tls.operatorClient.secretRef",
                  &c->tls.operator_client_secret);
        rd_note(r, st,
                "spec.TLS.static: gitcd reads tls.crt, tls.key and ca.crt from these Secrets "
                "(the coreos operator used peer.crt, server.crt and etcd-client.crt names)");
        if (!c->tls.peer.enabled && !c->tls.client.enabled)
                c->tls.provider = TLS_PROVIDER_NONE;
}

void read_spec_coreos(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        if (!spec)
                return;
        static const char *const known[] = {"size",   "version", "repository", "baseImage",
                                            "paused", "pod",     "TLS",        NULL};
        static const char *const ignored[] = {"selfHosted", NULL};
        rd_keys(r, spec, "spec", known, ignored);
        int64_t v;
        if (rd_int(r, spec, "spec", "size", "spec.replicas", INT32_MIN, INT32_MAX, &v))
                c->replicas = (int)v;
        rd_string(r, spec, "spec", "version", NULL, &c->version);
        if (!rd_string(r, spec, "spec", "repository", NULL, &c->repository))
                rd_string(r, spec, "spec", "baseImage", "spec.repository", &c->repository);
        (void)rd_bool(r, spec, "spec", "paused", "spec.suspend", &c->suspend);
        const ynode *m = NULL;
        if (rd_map(r, spec, "spec", "pod", NULL, &m))
                read_pod(r, m);
        if (rd_map(r, spec, "spec", "TLS", NULL, &m))
                read_tls(r, m);
}
