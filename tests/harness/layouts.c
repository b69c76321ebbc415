/*
 * The four old operators' object layouts (layouts.h): one builder per
 * operator turns the options into the list of objects that operator's
 * controller would have created, and one applier creates any list on the
 * apiserver in order, filling each ownerReference with the uid its owner
 * got. Builders do no I/O (tests hold them to the facts without an
 * apiserver); only certificate issuing and random Pod names make them
 * non-deterministic.
 *
 * Objects are written with json_pack as the operator's Go code spells
 * them; where a value is the operator's default (image repository, label
 * keys, mount paths) it is written out, never derived, so a reader can set
 * this file beside the operator's source.
 */
#include "tests/harness/layouts.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define LAYOUT_DEFAULT_SIZE    3
#define LAYOUT_DEFAULT_VERSION "3.5.16"
#define LAYOUT_FIELD_MANAGER   "gitcd-test-layouts"
#define LAYOUT_VOLUME_SIZE     "64Mi"
/* floor(0.95 * 64Mi): aenix's --quota-backend-bytes for a 64Mi claim. */
#define LAYOUT_COZY_QUOTA "63753420"

const char *layout_kind_name(layout_kind kind)
{
        switch (kind) {
        case LAYOUT_COREOS:
                return "coreos";
        case LAYOUT_ETCDIO:
                return "etcdio";
        case LAYOUT_IMPROBABLE:
                return "improbable";
        case LAYOUT_COZYSTACK:
                return "cozystack";
        }
        return "unknown";
}

/* ---- building blocks ---- */

typedef struct build {
        const layout_opts *o;
        const char *name, *ns, *version;
        int size;
        json_t *entries;
} build;

static void add(build *b, const char *resource, bool namespaced, json_t *obj)
{
        json_array_append_new(b->entries, json_pack("{s:s, s:b, s:o}", "resource", resource,
                                                    "namespaced", namespaced, "object", obj));
}

static json_t *last(build *b)
{
        return json_array_get(b->entries, json_array_size(b->entries) - 1);
}

static void owned_by(build *b, const char *api_version, const char *kind, const char *name)
{
        json_object_set_new(
            last(b), "owner",
            json_pack("{s:s, s:s, s:s}", "apiVersion", api_version, "kind", kind, "name", name));
}

static void shared(build *b)
{
        json_object_set_new(last(b), "shared", json_true());
}

static json_t *meta(const char *name, const char *ns, json_t *labels)
{
        json_t *m = json_pack("{s:s}", "name", name);

        if (ns)
                json_object_set_new(m, "namespace", json_string(ns));
        if (labels)
                json_object_set_new(m, "labels", labels);
        return m;
}

static void add_namespace(build *b, const char *ns)
{
        add(b, "namespaces", false,
            json_pack("{s:s, s:s, s:o}", "apiVersion", "v1", "kind", "Namespace", "metadata",
                      meta(ns, NULL, NULL)));
        shared(b);
}

/* A CRD that keeps whatever the custom resource holds (the operators' schemas are not needed). */
static void add_crd(build *b, const char *group, const char *version, const char *kind,
                    const char *plural, bool status_subresource)
{
        _cleanup_free_ char *name = xasprintf("%s.%s", plural, group);
        _cleanup_free_ char *singular = xstrdup(kind), *list_kind = xasprintf("%sList", kind);
        json_t *ver;

        for (char *c = singular; *c; c++)
                *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        ver = json_pack("{s:s, s:b, s:b, s:{s:{s:s, s:b}}}", "name", version, "served", 1,
                        "storage", 1, "schema", "openAPIV3Schema", "type", "object",
                        "x-kubernetes-preserve-unknown-fields", 1);
        if (status_subresource)
                json_object_set_new(ver, "subresources", json_pack("{s:{}}", "status"));
        add(b, "customresourcedefinitions", false,
            json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:[o]}}", "apiVersion",
                      "apiextensions.k8s.io/v1", "kind", "CustomResourceDefinition", "metadata",
                      meta(name, NULL, NULL), "spec", "group", group, "scope", "Namespaced",
                      "names", "kind", kind, "listKind", list_kind, "plural", plural, "singular",
                      singular, "versions", ver));
        shared(b);
}

/* The operator's Deployment; no deployment controller runs, so its status is written as given. */
static void add_operator(build *b, const char *ns, const char *name, json_t *labels,
                         json_t *selector, json_t *container)
{
        int replicas = b->o->operator_replicas;

        add(b, "deployments", true,
            json_pack("{s:s, s:s, s:o, s:{s:i, s:{s:o}, s:{s:{s:O}, s:{s:[o]}}}}", "apiVersion",
                      "apps/v1", "kind", "Deployment", "metadata", meta(name, ns, labels), "spec",
                      "replicas", replicas, "selector", "matchLabels", selector, "template",
                      "metadata", "labels", selector, "spec", "containers", container));
        json_object_set_new(last(b), "status",
                            json_pack("{s:i, s:i, s:i, s:i, s:i}", "observedGeneration", 1,
                                      "replicas", replicas, "updatedReplicas", replicas,
                                      "readyReplicas", replicas, "availableReplicas", replicas));
        shared(b);
}

static json_t *service_port(const char *name, int port)
{
        json_t *p =
            json_pack("{s:i, s:i, s:s}", "port", port, "targetPort", port, "protocol", "TCP");

        if (name)
                json_object_set_new(p, "name", json_string(name));
        return p;
}

static json_t *pvc_spec(void)
{
        return json_pack("{s:[s], s:{s:{s:s}}}", "accessModes", "ReadWriteOnce", "resources",
                         "requests", "storage", LAYOUT_VOLUME_SIZE);
}

static json_t *field_env(const char *name, const char *path)
{
        return json_pack("{s:s, s:{s:{s:s}}}", "name", name, "valueFrom", "fieldRef", "fieldPath",
                         path);
}

static json_t *env(const char *name, const char *value)
{
        return json_pack("{s:s, s:s}", "name", name, "value", value);
}

/* ---- certificates ---- */

static char *b64(const char *s)
{
        return kube_base64_encode(s, strlen(s));
}

/*
 * A certificate from the test's CA as PEM strings (cert, key, CA cert).
 * server and client usages both, as the operators' docs make member
 * certificates (a peer certificate is a server and a client).
 */
static int issue(const layout_opts *o, const char *cn, const char *const *dns, char **ret_cert,
                 char **ret_key, char **ret_ca)
{
        const char *const ips[] = {"127.0.0.1", NULL};
        pki_cert_request req = {.cn = cn,
                                .dns_names = dns,
                                .ip_addresses = ips,
                                .days = 2,
                                .server = true,
                                .client = true};
        pki_key *key = NULL;
        pki_cert *cert = NULL;
        int r = pki_cert_issue(o->ca, o->ca_key, &req, &key, &cert);

        if (r >= 0)
                r = pki_cert_to_pem(cert, ret_cert);
        if (r >= 0)
                r = pki_key_to_pem(key, ret_key);
        if (r >= 0)
                r = pki_cert_to_pem(o->ca, ret_ca);
        if (r < 0)
                fprintf(stderr, "layouts: issuing %s: %s\n", cn, pki_last_error());
        pki_key_free(key);
        pki_cert_free(cert);
        return r;
}

/* A Secret holding kv: NULL-ended pairs of key and text. */
static void add_secret(build *b, const char *name, json_t *labels, const char *type,
                       const char *const *kv)
{
        json_t *data = json_object();

        for (size_t i = 0; kv[i]; i += 2)
                json_object_set_new(data, kv[i], json_string_nocheck(kv[i + 1]));
        /* base64 each value in place */
        const char *key;
        json_t *val;
        json_object_foreach(data, key, val)
        {
                char *e = b64(json_string_value(val));
                json_string_set(val, e);
                free(e);
        }
        add(b, "secrets", true,
            json_pack("{s:s, s:s, s:o, s:s, s:o}", "apiVersion", "v1", "kind", "Secret", "metadata",
                      meta(name, b->ns, labels), "type", type, "data", data));
}

/* Lower-case letters and digits as Kubernetes' utilrand.String draws them. */
static char *random_suffix(size_t n)
{
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
        unsigned char raw[32];
        char *out = xmalloc(n + 1);

        assert(n <= sizeof(raw));
        if (getrandom(raw, n, 0) != (ssize_t)n)
                for (size_t i = 0; i < n; i++)
                        raw[i] = (unsigned char)rand();
        for (size_t i = 0; i < n; i++)
                out[i] = alphabet[raw[i] % (sizeof(alphabet) - 1)];
        out[n] = '\0';
        return out;
}

static bool tls(const build *b)
{
        return b->o->ca && b->o->ca_key;
}

/* ---- coreos/etcd-operator v0.9.4 ---- */

#define COREOS_API "etcd.database.coreos.com/v1beta2"

static json_t *coreos_labels(const build *b)
{
        return json_pack("{s:s, s:s}", "etcd_cluster", b->name, "app", "etcd");
}

/* The static TLS Secrets a coreos user makes (example/tls): peer, server and operator client. */
static int coreos_secrets(build *b)
{
        const char *ns = b->ns, *name = b->name;
        _cleanup_free_ char *peer_secret = xasprintf("%s-peer-tls", name);
        _cleanup_free_ char *server_secret = xasprintf("%s-server-tls", name);
        _cleanup_free_ char *operator_secret = xasprintf("%s-client-tls", name);
        _cleanup_free_ char *client_svc = xasprintf("%s-client", name);
        int r;

        _cleanup_free_ char *w1 = xasprintf("*.%s.%s.svc", name, ns);
        _cleanup_free_ char *w2 = xasprintf("*.%s.%s.svc.cluster.local", name, ns);
        _cleanup_free_ char *c1 = xasprintf("%s.%s.svc", client_svc, ns);
        const char *const peer_dns[] = {w1, w2, NULL};
        const char *const server_dns[] = {w1, w2, c1, client_svc, "localhost", NULL};
        const char *const client_dns[] = {NULL};
        char *pc = NULL, *pk = NULL, *pca = NULL, *sc = NULL, *sk = NULL, *sca = NULL;
        char *cc = NULL, *ck = NULL, *cca = NULL;

        r = issue(b->o, "etcd-peer", peer_dns, &pc, &pk, &pca);
        if (r >= 0)
                r = issue(b->o, "etcd-server", server_dns, &sc, &sk, &sca);
        if (r >= 0)
                r = issue(b->o, "root", client_dns, &cc, &ck, &cca);
        if (r >= 0) {
                /* example/tls: the key names coreos reads (etcdutil/tls.go) */
                const char *const peer_kv[] = {"peer.crt",    pc,  "peer.key", pk,
                                               "peer-ca.crt", pca, NULL};
                const char *const server_kv[] = {"server.crt",    sc,  "server.key", sk,
                                                 "server-ca.crt", sca, NULL};
                const char *const client_kv[] = {
                    "etcd-client.crt", cc, "etcd-client.key", ck, "etcd-client-ca.crt", cca, NULL};
                add_secret(b, peer_secret, NULL, "Opaque", peer_kv);
                add_secret(b, server_secret, NULL, "Opaque", server_kv);
                add_secret(b, operator_secret, NULL, "Opaque", client_kv);
        }
        free(pc), free(pk), free(pca), free(sc), free(sk), free(sca);
        free(cc), free(ck), free(cca);
        return r;
}

static void coreos_services(build *b)
{
        const char *ns = b->ns, *name = b->name;
        _cleanup_free_ char *client_svc = xasprintf("%s-client", name);

        /* CreateClientService, CreatePeerService */
        add(b, "services", true,
            json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:{s:s}}, s:{s:[o], s:o}}", "apiVersion", "v1",
                      "kind", "Service", "metadata", "name", client_svc, "namespace", ns, "labels",
                      coreos_labels(b), "annotations",
                      "service.alpha.kubernetes.io/tolerate-unready-endpoints", "false", "spec",
                      "ports", service_port("client", 2379), "selector", coreos_labels(b)));
        owned_by(b, COREOS_API, "EtcdCluster", name);
        add(b, "services", true,
            json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:{s:s}}, s:{s:[o, o], s:o, s:s}}",
                      "apiVersion", "v1", "kind", "Service", "metadata", "name", name, "namespace",
                      ns, "labels", coreos_labels(b), "annotations",
                      "service.alpha.kubernetes.io/tolerate-unready-endpoints", "true", "spec",
                      "ports", service_port("client", 2379), service_port("peer", 2380), "selector",
                      coreos_labels(b), "clusterIP", "None"));
        owned_by(b, COREOS_API, "EtcdCluster", name);
}

/* newEtcdPod and NewEtcdPodPVC for member m. */
static void coreos_member(build *b, const char *m, const char *initial, const char *token)
{
        const char *ns = b->ns, *name = b->name;
        const char *scheme = tls(b) ? "https" : "http";
        _cleanup_free_ char *peer_secret = xasprintf("%s-peer-tls", name);
        _cleanup_free_ char *server_secret = xasprintf("%s-server-tls", name);
        _cleanup_free_ char *operator_secret = xasprintf("%s-client-tls", name);
        _cleanup_free_ char *addr = xasprintf("%s.%s.%s.svc", m, name, ns);
        _cleanup_free_ char *image = xasprintf("quay.io/coreos/etcd:v%s", b->version);
        strbuf cmd = STRBUF_INIT;
        json_t *labels = coreos_labels(b), *volumes, *mounts, *command, *probe;

        /* NewEtcdPodPVC: the claim is named after the member */
        add(b, "persistentvolumeclaims", true,
            json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "PersistentVolumeClaim",
                      "metadata", meta(m, ns, coreos_labels(b)), "spec", pvc_spec()));
        owned_by(b, COREOS_API, "EtcdCluster", name);

        /* newEtcdPod: one string split on spaces, no shell */
        sb_printf(&cmd,
                  "/usr/local/bin/etcd --data-dir=/var/etcd/data --name=%s "
                  "--initial-advertise-peer-urls=%s://%s:2380 "
                  "--listen-peer-urls=%s://0.0.0.0:2380 "
                  "--listen-client-urls=%s://0.0.0.0:2379 "
                  "--advertise-client-urls=%s://%s:2379 --initial-cluster=%s "
                  "--initial-cluster-state=new",
                  m, scheme, addr, scheme, scheme, scheme, addr, initial);
        if (tls(b))
                sb_printf(&cmd, " --peer-client-cert-auth=true "
                                "--peer-trusted-ca-file=/etc/etcdtls/member/peer-tls/"
                                "peer-ca.crt "
                                "--peer-cert-file=/etc/etcdtls/member/peer-tls/peer.crt "
                                "--peer-key-file=/etc/etcdtls/member/peer-tls/peer.key "
                                "--client-cert-auth=true "
                                "--trusted-ca-file=/etc/etcdtls/member/server-tls/"
                                "server-ca.crt "
                                "--cert-file=/etc/etcdtls/member/server-tls/server.crt "
                                "--key-file=/etc/etcdtls/member/server-tls/server.key");
        sb_printf(&cmd, " --initial-cluster-token=%s", token);
        command = json_array();
        _cleanup_free_ char *text = sb_detach(&cmd);
        char *save = NULL;
        for (char *t = strtok_r(text, " ", &save); t; t = strtok_r(NULL, " ", &save))
                json_array_append_new(command, json_string(t));

        volumes = json_pack("[{s:s, s:{s:s}}]", "name", "etcd-data", "persistentVolumeClaim",
                            "claimName", m);
        mounts = json_pack("[{s:s, s:s}]", "name", "etcd-data", "mountPath", "/var/etcd");
        if (tls(b)) {
                json_array_append_new(volumes,
                                      json_pack("{s:s, s:{s:s}}", "name", "member-peer-tls",
                                                "secret", "secretName", peer_secret));
                json_array_append_new(volumes,
                                      json_pack("{s:s, s:{s:s}}", "name", "member-server-tls",
                                                "secret", "secretName", server_secret));
                json_array_append_new(volumes,
                                      json_pack("{s:s, s:{s:s}}", "name", "etcd-client-tls",
                                                "secret", "secretName", operator_secret));
                json_array_append_new(mounts,
                                      json_pack("{s:s, s:s}", "name", "member-peer-tls",
                                                "mountPath", "/etc/etcdtls/member/peer-tls"));
                json_array_append_new(mounts,
                                      json_pack("{s:s, s:s}", "name", "member-server-tls",
                                                "mountPath", "/etc/etcdtls/member/server-tls"));
                json_array_append_new(mounts,
                                      json_pack("{s:s, s:s}", "name", "etcd-client-tls",
                                                "mountPath", "/etc/etcdtls/operator/etcd-tls"));
        }
        probe =
            json_pack("{s:{s:[s, s, s]}, s:i, s:i, s:i, s:i}", "exec", "command", "/bin/sh", "-ec",
                      tls(b) ? "ETCDCTL_API=3 etcdctl --endpoints=https://localhost:2379 "
                               "--cert=/etc/etcdtls/operator/etcd-tls/etcd-client.crt "
                               "--key=/etc/etcdtls/operator/etcd-tls/etcd-client.key "
                               "--cacert=/etc/etcdtls/operator/etcd-tls/etcd-client-ca.crt "
                               "endpoint status"
                             : "ETCDCTL_API=3 etcdctl endpoint status",
                      "initialDelaySeconds", 1, "timeoutSeconds", 5, "periodSeconds", 5,
                      "failureThreshold", 3);
        json_object_set_new(labels, "etcd_node", json_string(m));
        _cleanup_free_ char *check_dns =
            xasprintf("\n\t\t\t\t\tTIMEOUT_READY=0\n\t\t\t\t\twhile ( ! nslookup %s )\n"
                      "\t\t\t\t\tdo\n\t\t\t\t\t\tTIMEOUT_READY=$(( TIMEOUT_READY-1 ))\n"
                      "\t\t\t\t\t\tif [ $TIMEOUT_READY -eq 0 ];\n\t\t\t\t\t\tthen\n"
                      "\t\t\t\t\t\t\techo \"Timed out waiting for DNS entry\"\n"
                      "\t\t\t\t\t\t\texit 1\n\t\t\t\t\t\tfi\n\t\t\t\t\t\tsleep 1\n"
                      "\t\t\t\t\tdone",
                      addr);
        add(b, "pods", true,
            json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:{s:s}}, "
                      "s:{s:[{s:s, s:s, s:[s, s, s]}], "
                      "s:[{s:s, s:s, s:o, s:[{s:s, s:i, s:s}, {s:s, s:i, s:s}], s:o, "
                      "s:O, s:o}], "
                      "s:s, s:o, s:s, s:s, s:b}}",
                      "apiVersion", "v1", "kind", "Pod", "metadata", "name", m, "namespace", ns,
                      "labels", labels, "annotations", "etcd.version", b->version, "spec",
                      "initContainers", "image", "busybox:1.28.0-glibc", "name", "check-dns",
                      "command", "/bin/sh", "-c", check_dns, "containers", "name", "etcd", "image",
                      image, "command", command, "ports", "name", "server", "containerPort", 2380,
                      "protocol", "TCP", "name", "client", "containerPort", 2379, "protocol", "TCP",
                      "volumeMounts", mounts, "livenessProbe", probe, "readinessProbe", probe,
                      "restartPolicy", "Never", "volumes", volumes, "hostname", m, "subdomain",
                      name, "automountServiceAccountToken", 0));
        owned_by(b, COREOS_API, "EtcdCluster", name);
}

static int build_coreos(build *b)
{
        const char *ns = b->ns, *name = b->name;
        const char *op_ns = b->o->operator_namespace ? b->o->operator_namespace : ns;
        const char *scheme = tls(b) ? "https" : "http";
        _cleanup_free_ char *peer_secret = xasprintf("%s-peer-tls", name);
        _cleanup_free_ char *server_secret = xasprintf("%s-server-tls", name);
        _cleanup_free_ char *operator_secret = xasprintf("%s-client-tls", name);
        _cleanup_free_ char *client_svc = xasprintf("%s-client", name);
        _cleanup_free_ char *token = random_suffix(16);
        char **members = xcalloc((size_t)b->size, sizeof(char *));
        strbuf initial = STRBUF_INIT;
        json_t *spec;
        int r = 0;

        add_namespace(b, ns);
        add_crd(b, "etcd.database.coreos.com", "v1beta2", "EtcdCluster", "etcdclusters", false);
        if (!streq(op_ns, ns))
                add_namespace(b, op_ns);
        add_operator(b, op_ns, "etcd-operator", NULL, json_pack("{s:s}", "name", "etcd-operator"),
                     json_pack("{s:s, s:s, s:[s], s:[o, o]}", "name", "etcd-operator", "image",
                               "quay.io/coreos/etcd-operator:v0.9.4", "command", "etcd-operator",
                               "env", field_env("MY_POD_NAMESPACE", "metadata.namespace"),
                               field_env("MY_POD_NAME", "metadata.name")));

        /* pkg/util/k8sutil: UniqueMemberName, NAME-<10 random characters> */
        for (int i = 0; i < b->size; i++) {
                _cleanup_free_ char *suffix = random_suffix(10);
                members[i] = xasprintf("%s-%s", name, suffix);
                sb_printf(&initial, "%s%s=%s://%s.%s.%s.svc:2380", i ? "," : "", members[i], scheme,
                          members[i], name, ns);
        }

        spec = json_pack("{s:i, s:s, s:s, s:{s:o}}", "size", b->size, "version", b->version,
                         "repository", "quay.io/coreos/etcd", "pod", "persistentVolumeClaimSpec",
                         pvc_spec());
        if (tls(b))
                json_object_set_new(spec, "TLS",
                                    json_pack("{s:{s:{s:s, s:s}, s:s}}", "static", "member",
                                              "peerSecret", peer_secret, "serverSecret",
                                              server_secret, "operatorSecret", operator_secret));
        json_t *members_ready = json_array();
        for (int i = 0; i < b->size; i++)
                json_array_append_new(members_ready, json_string(members[i]));
        add(b, "etcdclusters", true,
            json_pack("{s:s, s:s, s:o, s:o, s:{s:s, s:i, s:s, s:s, s:i, s:{s:o}}}", "apiVersion",
                      COREOS_API, "kind", "EtcdCluster", "metadata", meta(name, ns, NULL), "spec",
                      spec, "status", "phase", "Running", "size", b->size, "currentVersion",
                      b->version, "serviceName", client_svc, "clientPort", 2379, "members", "ready",
                      members_ready));

        if (tls(b)) {
                r = coreos_secrets(b);
                if (r < 0)
                        goto out;
        }
        coreos_services(b);
        for (int i = 0; i < b->size; i++)
                coreos_member(b, members[i], sb_str(&initial), token);
out:
        for (int i = 0; i < b->size; i++)
                free(members[i]);
        free(members);
        sb_release(&initial);
        return r;
}

/* ---- etcd-io/etcd-operator ---- */

#define ETCDIO_API "operator.etcd.io/v1alpha1"

static json_t *etcdio_labels(const build *b)
{
        return json_pack("{s:s, s:s}", "app", b->name, "controller", b->name);
}

/* "NAME-0=SCHEME://NAME-0.SUB<suffix>:2380,..." for members NAME-0 .. NAME-(size-1). */
static char *initial_cluster(const build *b, const char *scheme, const char *sub,
                             const char *suffix)
{
        strbuf sb = STRBUF_INIT;

        for (int i = 0; i < b->size; i++)
                sb_printf(&sb, "%s%s-%d=%s://%s-%d.%s%s:2380", i ? "," : "", b->name, i, scheme,
                          b->name, i, sub, suffix);
        return sb_detach(&sb);
}

static int build_etcdio(build *b)
{
        const char *ns = b->ns, *name = b->name;
        const char *op_ns =
            b->o->operator_namespace ? b->o->operator_namespace : "etcd-operator-system";
        _cleanup_free_ char *state_cm = xasprintf("%s-state", name);
        _cleanup_free_ char *server_secret = xasprintf("%s-server-tls", name);
        _cleanup_free_ char *peer_secret = xasprintf("%s-peer-tls", name);
        _cleanup_free_ char *image = xasprintf("gcr.io/etcd-development/etcd:v%s", b->version);
        _cleanup_free_ char *version = xasprintf("v%s", b->version);
        _cleanup_free_ char *suffix = xasprintf(".%s.svc.cluster.local", ns);
        _cleanup_free_ char *initial = initial_cluster(b, "http", name, suffix);
        _cleanup_free_ char *peer_adv = xasprintf(
            "--initial-advertise-peer-urls=http://$(POD_NAME).%s.$(POD_NAMESPACE).svc.cluster."
            "local:2380",
            name);
        _cleanup_free_ char *client_adv = xasprintf(
            "--advertise-client-urls=http://$(POD_NAME).%s.$(POD_NAMESPACE).svc.cluster.local:2379",
            name);
        json_t *spec, *pod_spec;
        int r = 0;

        add_namespace(b, ns);
        add_crd(b, "operator.etcd.io", "v1alpha1", "EtcdCluster", "etcdclusters", true);
        add_namespace(b, op_ns);
        add_operator(b, op_ns, "etcd-operator-controller-manager",
                     json_pack("{s:s, s:s, s:s}", "control-plane", "controller-manager",
                               "app.kubernetes.io/name", "etcd-operator",
                               "app.kubernetes.io/managed-by", "kustomize"),
                     json_pack("{s:s}", "control-plane", "controller-manager"),
                     json_pack("{s:s, s:s, s:[s], s:[s, s]}", "name", "manager", "image",
                               "controller:latest", "command", "/manager", "args", "--leader-elect",
                               "--health-probe-bind-address=:8081"));

        spec = json_pack("{s:i, s:s, s:s, s:{s:s}}", "size", b->size, "version", version,
                         "imageRegistry", "gcr.io/etcd-development/etcd", "storageSpec",
                         "volumeSizeRequest", LAYOUT_VOLUME_SIZE);
        if (tls(b))
                json_object_set_new(spec, "tls", json_pack("{s:s}", "provider", "auto"));
        add(b, "etcdclusters", true,
            json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", ETCDIO_API, "kind", "EtcdCluster",
                      "metadata", meta(name, ns, NULL), "spec", spec));
        json_object_set_new(last(b), "status",
                            json_pack("{s:i, s:i, s:i, s:i, s:s}", "observedGeneration", 1,
                                      "currentReplicas", b->size, "readyReplicas", b->size,
                                      "memberCount", b->size, "currentVersion", b->version));

        /* applyEtcdClusterState: NAME-state; "new" until layout_wait_healthy (see layouts.h) */
        add(b, "configmaps", true,
            json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                      "metadata", meta(state_cm, ns, NULL), "data", "ETCD_INITIAL_CLUSTER_STATE",
                      "new", "ETCD_INITIAL_CLUSTER", initial, "ETCD_DATA_DIR", "/var/lib/etcd"));
        owned_by(b, ETCDIO_API, "EtcdCluster", name);

        if (tls(b)) {
                /* the auto provider: tls.crt, tls.key, ca.crt; default SANs *.NAME.NS.svc.cluster.local */
                _cleanup_free_ char *w = xasprintf("*.%s.%s.svc.cluster.local", name, ns);
                _cleanup_free_ char *h = xasprintf("%s.%s.svc.cluster.local", name, ns);
                const char *const dns[] = {w, h, NULL};
                char *c = NULL, *k = NULL, *ca = NULL;
                for (int i = 0; i < 2 && r >= 0; i++) {
                        r = issue(b->o, h, dns, &c, &k, &ca);
                        if (r >= 0) {
                                const char *const kv[] = {"tls.crt", c,  "tls.key", k,
                                                          "ca.crt",  ca, NULL};
                                add_secret(b, i ? peer_secret : server_secret, NULL,
                                           "kubernetes.io/tls", kv);
                                owned_by(b, ETCDIO_API, "EtcdCluster", name);
                        }
                        free(c), free(k), free(ca);
                        c = k = ca = NULL;
                }
                if (r < 0)
                        return r;
        }

        /* createHeadlessServiceIfNotExist: no ports */
        add(b, "services", true,
            json_pack("{s:s, s:s, s:o, s:{s:s, s:o}}", "apiVersion", "v1", "kind", "Service",
                      "metadata", meta(name, ns, etcdio_labels(b)), "spec", "clusterIP", "None",
                      "selector", etcdio_labels(b)));
        owned_by(b, ETCDIO_API, "EtcdCluster", name);

        _cleanup_free_ char *pod_name_arg = xstrdup("--name=$(POD_NAME)");
        pod_spec = json_pack(
            "{s:[{s:s, s:[s], s:[s, s, s, s, s], s:s, s:[o, o], s:[{s:{s:s}}], "
            "s:[{s:s, s:i}, {s:s, s:i}], s:[{s:s, s:s, s:s}]}]}",
            "containers", "name", "etcd", "command", "/usr/local/bin/etcd", "args", pod_name_arg,
            "--listen-peer-urls=http://0.0.0.0:2380", "--listen-client-urls=http://0.0.0.0:2379",
            peer_adv, client_adv, "image", image, "env", field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"), "envFrom", "configMapRef", "name",
            state_cm, "ports", "name", "client", "containerPort", 2379, "name", "peer",
            "containerPort", 2380, "volumeMounts", "name", "etcd-data", "mountPath",
            "/var/lib/etcd", "subPathExpr", "$(POD_NAME)");
        if (tls(b))
                json_object_set_new(pod_spec, "volumes",
                                    json_pack("[{s:s, s:{s:s}}, {s:s, s:{s:s}}]", "name",
                                              "server-secret", "secret", "secretName",
                                              server_secret, "name", "peer-secret", "secret",
                                              "secretName", peer_secret));
        add(b, "statefulsets", true,
            json_pack("{s:s, s:s, s:o, s:{s:i, s:s, s:{s:o}, s:{s:{s:o, s:{}}, s:o}, "
                      "s:[{s:{s:s}, s:{s:[s], s:{s:{s:s}, s:{s:s}}}}]}}",
                      "apiVersion", "apps/v1", "kind", "StatefulSet", "metadata",
                      meta(name, ns, NULL), "spec", "replicas", b->size, "serviceName", name,
                      "selector", "matchLabels", etcdio_labels(b), "template", "metadata", "labels",
                      etcdio_labels(b), "annotations", "spec", pod_spec, "volumeClaimTemplates",
                      "metadata", "name", "etcd-data", "spec", "accessModes", "ReadWriteOnce",
                      "resources", "requests", "storage", LAYOUT_VOLUME_SIZE, "limits", "storage",
                      LAYOUT_VOLUME_SIZE));
        owned_by(b, ETCDIO_API, "EtcdCluster", name);
        return 0;
}

/* ---- improbable-eng/etcd-cluster-operator ---- */

#define IMPROBABLE_API "etcd.improbable.io/v1alpha1"

static json_t *improbable_labels(const build *b, const char *peer)
{
        json_t *l = json_pack("{s:s, s:s}", "app.kubernetes.io/name", "etcd",
                              "etcd.improbable.io/cluster-name", b->name);

        if (peer)
                json_object_set_new(l, "etcd.improbable.io/peer-name", json_string(peer));
        return l;
}

static int build_improbable(build *b)
{
        const char *ns = b->ns, *name = b->name;
        const char *op_ns = b->o->operator_namespace ? b->o->operator_namespace : "eco-system";
        _cleanup_free_ char *initial = initial_cluster(b, "http", name, "");
        _cleanup_free_ char *image = xasprintf("quay.io/coreos/etcd:v%s", b->version);
        json_t *static_members = json_array();

        if (tls(b)) {
                json_decref(static_members);
                return -EOPNOTSUPP; /* etcdScheme = "http": this operator has no TLS */
        }
        add_namespace(b, ns);
        add_crd(b, "etcd.improbable.io", "v1alpha1", "EtcdCluster", "etcdclusters", true);
        add_crd(b, "etcd.improbable.io", "v1alpha1", "EtcdPeer", "etcdpeers", true);
        add_namespace(b, op_ns);
        add_operator(b, op_ns, "eco-controller-manager",
                     json_pack("{s:s}", "control-plane", "controller-manager"),
                     json_pack("{s:s}", "control-plane", "controller-manager"),
                     json_pack("{s:s, s:s, s:[s], s:[s, s]}", "name", "manager", "image",
                               "controller:latest", "command", "/manager", "args",
                               "--enable-leader-election", "--proxy-url=eco-proxy.eco-system.svc"));

        add(b, "etcdclusters", true,
            json_pack("{s:s, s:s, s:o, s:{s:s, s:i, s:{s:o}}}", "apiVersion", IMPROBABLE_API,
                      "kind", "EtcdCluster", "metadata", meta(name, ns, NULL), "spec", "version",
                      b->version, "replicas", b->size, "storage", "volumeClaimTemplate",
                      pvc_spec()));
        json_object_set_new(
            last(b), "status",
            json_pack("{s:i, s:s}", "replicas", b->size, "clusterVersion", b->version));

        /* headlessServiceForCluster */
        add(b, "services", true,
            json_pack("{s:s, s:s, s:o, s:{s:s, s:b, s:o, s:[o, o]}}", "apiVersion", "v1", "kind",
                      "Service", "metadata", meta(name, ns, improbable_labels(b, NULL)), "spec",
                      "clusterIP", "None", "publishNotReadyAddresses", 1, "selector",
                      improbable_labels(b, NULL), "ports", service_port("etcd-client", 2379),
                      service_port("etcd-peer", 2380)));
        owned_by(b, IMPROBABLE_API, "EtcdCluster", name);

        for (int i = 0; i < b->size; i++) {
                _cleanup_free_ char *peer = xasprintf("%s-%d", name, i);
                _cleanup_free_ char *host = xasprintf("%s.%s", peer, name);
                json_array_append_new(static_members,
                                      json_pack("{s:s, s:s}", "name", peer, "host", host));
        }
        for (int i = 0; i < b->size; i++) {
                _cleanup_free_ char *peer = xasprintf("%s-%d", name, i);
                _cleanup_free_ char *host = xasprintf("%s.%s", peer, name);
                _cleanup_free_ char *peer_url = xasprintf("http://%s:2380", host);
                _cleanup_free_ char *client_url = xasprintf("http://%s:2379", host);
                json_t *peer_meta = meta(peer, ns, NULL);

                /* the cluster controller's peers carry the PVC clean-up finalizer */
                json_object_set_new(peer_meta, "finalizers",
                                    json_pack("[s]", "etcdpeer.etcd.improbable.io/pvc-cleanup"));
                add(b, "etcdpeers", true,
                    json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:{s:{s:O}, s:s}, s:{s:o}}}",
                              "apiVersion", IMPROBABLE_API, "kind", "EtcdPeer", "metadata",
                              peer_meta, "spec", "clusterName", name, "version", b->version,
                              "bootstrap", "static", "initialCluster", static_members,
                              "initialClusterState", "New", "storage", "volumeClaimTemplate",
                              pvc_spec()));
                owned_by(b, IMPROBABLE_API, "EtcdCluster", name);
                json_object_set_new(last(b), "status",
                                    json_pack("{s:s}", "serverVersion", b->version));

                /* pvcForPeer: no owner; the peer's finalizer deletes it */
                add(b, "persistentvolumeclaims", true,
                    json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind",
                              "PersistentVolumeClaim", "metadata",
                              meta(peer, ns, improbable_labels(b, peer)), "spec", pvc_spec()));

                /* defineReplicaSet: the image's entrypoint, everything in env */
                json_t *container = json_pack(
                    "{s:s, s:s, s:[o, o, o, o, o, o, o, o, o], s:[{s:s, s:i}, {s:s, s:i}], "
                    "s:[{s:s, s:s}]}",
                    "name", "etcd", "image", image, "env", env("ETCD_INITIAL_CLUSTER", initial),
                    env("ETCD_NAME", peer), env("ETCD_INITIAL_CLUSTER_TOKEN", name),
                    env("ETCD_INITIAL_ADVERTISE_PEER_URLS", peer_url),
                    env("ETCD_ADVERTISE_CLIENT_URLS", client_url),
                    env("ETCD_LISTEN_PEER_URLS", "http://0.0.0.0:2380"),
                    env("ETCD_LISTEN_CLIENT_URLS", "http://0.0.0.0:2379"),
                    env("ETCD_INITIAL_CLUSTER_STATE", "new"), env("ETCD_DATA_DIR", "/var/lib/etcd"),
                    "ports", "name", "etcd-client", "containerPort", 2379, "name", "etcd-peer",
                    "containerPort", 2380, "volumeMounts", "name", "etcd-data", "mountPath",
                    "/var/lib/etcd");
                add(b, "replicasets", true,
                    json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:{}}, "
                              "s:{s:i, s:{s:o}, s:{s:{s:o, s:{}, s:s, s:s}, "
                              "s:{s:s, s:s, s:[{s:s, s:[s]}], s:[o], "
                              "s:[{s:s, s:{s:s}}]}}}}",
                              "apiVersion", "apps/v1", "kind", "ReplicaSet", "metadata", "name",
                              peer, "namespace", ns, "labels", improbable_labels(b, peer),
                              "annotations", "spec", "replicas", 1, "selector", "matchLabels",
                              improbable_labels(b, peer), "template", "metadata", "labels",
                              improbable_labels(b, peer), "annotations", "name", peer, "namespace",
                              ns, "spec", "hostname", peer, "subdomain", name, "hostAliases", "ip",
                              "127.0.0.1", "hostnames", host, "containers", container, "volumes",
                              "name", "etcd-data", "persistentVolumeClaim", "claimName", peer));
                owned_by(b, IMPROBABLE_API, "EtcdPeer", peer);
        }
        json_decref(static_members);
        return 0;
}

/* ---- aenix-io/etcd-operator v0.4.2 (legacy Cozystack) ---- */

#define COZY_API "etcd.aenix.io/v1alpha1"

static json_t *cozy_labels(const build *b)
{
        return json_pack("{s:s, s:s, s:s}", "app.kubernetes.io/name", "etcd",
                         "app.kubernetes.io/instance", b->name, "app.kubernetes.io/managed-by",
                         "etcd-operator");
}

static int cozy_secrets(build *b, const char *name, const char *ns)
{
        _cleanup_free_ char *w = xasprintf("*.%s-headless.%s.svc", name, ns);
        _cleanup_free_ char *w2 = xasprintf("*.%s-headless.%s.svc.cluster.local", name, ns);
        _cleanup_free_ char *svc = xasprintf("%s.%s.svc", name, ns);
        const char *const server_dns[] = {w, w2, svc, name, "localhost", NULL};
        const char *const none[] = {NULL};
        char *ca_pem = NULL, *ca_key = NULL;
        int r = pki_cert_to_pem(b->o->ca, &ca_pem);

        if (r >= 0)
                r = pki_key_to_pem(b->o->ca_key, &ca_key);
        /* The CA issuers' Secrets as cert-manager keeps them: the CA's key is there. */
        for (int i = 0; r >= 0 && i < 2; i++) {
                _cleanup_free_ char *n = xasprintf("%s-%s-ca", name, i ? "client" : "peer");
                const char *const kv[] = {"ca.crt",  ca_pem, "tls.crt", ca_pem,
                                          "tls.key", ca_key, NULL};
                add_secret(b, n, NULL, "kubernetes.io/tls", kv);
        }
        static const char *const what[] = {"peer", "server", "client"};
        for (size_t i = 0; r >= 0 && i < 3; i++) {
                _cleanup_free_ char *n = xasprintf("%s-%s-cert", name, what[i]);
                char *c = NULL, *k = NULL, *ca = NULL;
                r = issue(b->o, i == 2 ? "root" : what[i], i == 2 ? none : server_dns, &c, &k, &ca);
                if (r >= 0) {
                        const char *const kv[] = {"tls.crt", c, "tls.key", k, "ca.crt", ca, NULL};
                        add_secret(b, n, NULL, "kubernetes.io/tls", kv);
                }
                free(c), free(k), free(ca);
        }
        free(ca_pem);
        free(ca_key);
        return r;
}

/* CreateOrUpdateStatefulSet with generateContainer, generateEtcdArgs and generateVolumes. */
static void cozy_statefulset(build *b)
{
        const char *ns = b->ns, *name = b->name;
        const char *client_scheme = tls(b) ? "https://" : "http://";
        _cleanup_free_ char *headless = xasprintf("%s-headless", name);
        _cleanup_free_ char *state_cm = xasprintf("%s-cluster-state", name);
        _cleanup_free_ char *image = xasprintf("quay.io/coreos/etcd:v%s", b->version);
        _cleanup_free_ char *listen_client =
            xasprintf("--listen-client-urls=%s0.0.0.0:2379", client_scheme);
        _cleanup_free_ char *peer_adv = xasprintf(
            "--initial-advertise-peer-urls=https://$(POD_NAME).%s.$(POD_NAMESPACE).svc:2380",
            headless);
        _cleanup_free_ char *client_adv =
            xasprintf("--advertise-client-urls=%s$(POD_NAME).%s.$(POD_NAMESPACE).svc:2379",
                      client_scheme, headless);
        json_t *args, *container, *volumes, *mounts;

        /* generateEtcdArgs, in its order; extra options sorted */
        args = json_pack("[s, s, s, s, s, s, s]", "--name=$(POD_NAME)",
                         "--listen-metrics-urls=http://0.0.0.0:2381",
                         "--listen-peer-urls=https://0.0.0.0:2380", listen_client, peer_adv,
                         "--data-dir=/var/run/etcd/default.etcd", client_adv);
        volumes = json_pack("[{s:s, s:{s:s}}]", "name", "data", "persistentVolumeClaim",
                            "claimName", "data");
        mounts = json_pack("[{s:s, s:b, s:s}]", "name", "data", "readOnly", 0, "mountPath",
                           "/var/run/etcd");
        if (!tls(b)) {
                json_array_append_new(args, json_string("--peer-auto-tls"));
        } else {
                static const char *const flags[] = {
                    "--peer-trusted-ca-file=/etc/etcd/pki/peer/ca/ca.crt",
                    "--peer-cert-file=/etc/etcd/pki/peer/cert/tls.crt",
                    "--peer-key-file=/etc/etcd/pki/peer/cert/tls.key",
                    "--peer-client-cert-auth",
                    "--cert-file=/etc/etcd/pki/server/cert/tls.crt",
                    "--key-file=/etc/etcd/pki/server/cert/tls.key",
                    "--trusted-ca-file=/etc/etcd/pki/client/ca/ca.crt",
                    "--client-cert-auth",
                };
                static const char *const vols[][3] = {
                    {"peer-trusted-ca-certificate", "peer-ca", "/etc/etcd/pki/peer/ca"},
                    {"peer-certificate", "peer-cert", "/etc/etcd/pki/peer/cert"},
                    {"server-certificate", "server-cert", "/etc/etcd/pki/server/cert"},
                    {"client-trusted-ca-certificate", "client-ca", "/etc/etcd/pki/client/ca"},
                };
                for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
                        json_array_append_new(args, json_string(flags[i]));
                for (size_t i = 0; i < ARRAY_SIZE(vols); i++) {
                        _cleanup_free_ char *secret = xasprintf("%s-%s", name, vols[i][1]);
                        json_array_append_new(volumes,
                                              json_pack("{s:s, s:{s:s}}", "name", vols[i][0],
                                                        "secret", "secretName", secret));
                        json_array_append_new(mounts,
                                              json_pack("{s:s, s:b, s:s}", "name", vols[i][0],
                                                        "readOnly", 1, "mountPath", vols[i][2]));
                }
        }
        json_array_append_new(args, json_string("--auto-compaction-retention=5m"));
        json_array_append_new(args, json_string("--snapshot-count=10000"));
        json_array_append_new(args, json_string("--quota-backend-bytes=" LAYOUT_COZY_QUOTA));

        container = json_pack(
            "{s:s, s:s, s:[s], s:o, s:[{s:s, s:i}, {s:s, s:i}], s:[{s:{s:s}}], "
            "s:{s:{s:s, s:i}, s:i}, s:{s:{s:s, s:i}, s:i}, s:{s:{s:s, s:i}, s:i}, s:[o, o], "
            "s:o}",
            "name", "etcd", "image", image, "command", "etcd", "args", args, "ports", "name",
            "peer", "containerPort", 2380, "name", "client", "containerPort", 2379, "envFrom",
            "configMapRef", "name", state_cm, "startupProbe", "httpGet", "path",
            "/readyz?serializable=false", "port", 2381, "periodSeconds", 5, "livenessProbe",
            "httpGet", "path", "/livez", "port", 2381, "periodSeconds", 5, "readinessProbe",
            "httpGet", "path", "/readyz", "port", 2381, "periodSeconds", 5, "env",
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"), "volumeMounts", mounts);
        add(b, "statefulsets", true,
            json_pack("{s:s, s:s, s:o, s:{s:i, s:s, s:s, s:{s:o}, s:{s:{s:o}, s:{s:[o], s:o}}, "
                      "s:[{s:{s:s}, s:{s:[s], s:{s:{s:s}}}}]}}",
                      "apiVersion", "apps/v1", "kind", "StatefulSet", "metadata",
                      meta(name, ns, NULL), "spec", "replicas", b->size, "serviceName", headless,
                      "podManagementPolicy", "Parallel", "selector", "matchLabels", cozy_labels(b),
                      "template", "metadata", "labels", cozy_labels(b), "spec", "containers",
                      container, "volumes", volumes, "volumeClaimTemplates", "metadata", "name",
                      "data", "spec", "accessModes", "ReadWriteOnce", "resources", "requests",
                      "storage", LAYOUT_VOLUME_SIZE));
        owned_by(b, COZY_API, "EtcdCluster", name);
}

static int build_cozystack(build *b)
{
        const char *ns = b->ns, *name = b->name;
        const char *op_ns =
            b->o->operator_namespace ? b->o->operator_namespace : "etcd-operator-system";
        _cleanup_free_ char *headless = xasprintf("%s-headless", name);
        _cleanup_free_ char *state_cm = xasprintf("%s-cluster-state", name);
        _cleanup_free_ char *image = xasprintf("quay.io/coreos/etcd:v%s", b->version);
        _cleanup_free_ char *suffix = xasprintf(".%s.svc", ns);
        _cleanup_free_ char *initial = NULL;
        _cleanup_free_ char *token = xasprintf("%s-%s", name, ns);
        json_t *spec;
        int r;

        /* TemplateClusterStateConfigMap: NAME-i=https://NAME-i.NAME-headless.NS.svc:2380 */
        initial = initial_cluster(b, "https", headless, suffix);

        add_namespace(b, ns);
        add_crd(b, "etcd.aenix.io", "v1alpha1", "EtcdCluster", "etcdclusters", true);
        add_namespace(b, op_ns);
        add_operator(
            b, op_ns, "etcd-operator-controller-manager",
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "control-plane", "controller-manager",
                      "app.kubernetes.io/name", "deployment", "app.kubernetes.io/instance",
                      "controller-manager", "app.kubernetes.io/component", "manager",
                      "app.kubernetes.io/created-by", "etcd-operator", "app.kubernetes.io/part-of",
                      "etcd-operator", "app.kubernetes.io/managed-by", "kustomize"),
            json_pack("{s:s}", "control-plane", "controller-manager"),
            json_pack("{s:s, s:s, s:[s], s:[s, s]}", "name", "manager", "image",
                      "ghcr.io/aenix-io/etcd-operator:v0.4.2", "command", "/manager", "args",
                      "--leader-elect", "--health-probe-bind-address=:8081"));

        spec =
            json_pack("{s:i, s:{s:{s:{s:[s], s:{s:{s:s}}}}}, s:{s:{s:[{s:s, s:s}]}}}", "replicas",
                      b->size, "storage", "volumeClaimTemplate", "spec", "accessModes",
                      "ReadWriteOnce", "resources", "requests", "storage", LAYOUT_VOLUME_SIZE,
                      "podTemplate", "spec", "containers", "name", "etcd", "image", image);
        if (tls(b)) {
                _cleanup_free_ char *pca = xasprintf("%s-peer-ca", name);
                _cleanup_free_ char *pc = xasprintf("%s-peer-cert", name);
                _cleanup_free_ char *sc = xasprintf("%s-server-cert", name);
                _cleanup_free_ char *cca = xasprintf("%s-client-ca", name);
                _cleanup_free_ char *cc = xasprintf("%s-client-cert", name);
                json_object_set_new(spec, "security",
                                    json_pack("{s:{s:s, s:s, s:s, s:s, s:s}}", "tls",
                                              "peerTrustedCASecret", pca, "peerSecret", pc,
                                              "serverSecret", sc, "clientTrustedCASecret", cca,
                                              "clientSecret", cc));
        }
        add(b, "etcdclusters", true,
            json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", COZY_API, "kind", "EtcdCluster",
                      "metadata", meta(name, ns, NULL), "spec", spec));
        json_object_set_new(last(b), "status",
                            json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "conditions", "type",
                                      "Ready", "status", "True", "reason", "StatefulSetReady",
                                      "message", "Cluster is ready", "lastTransitionTime",
                                      "2026-01-01T00:00:00Z"));
        if (tls(b)) {
                r = cozy_secrets(b, name, ns);
                if (r < 0)
                        return r;
        }
        add(b, "configmaps", true,
            json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                      "metadata", meta(state_cm, ns, NULL), "data", "ETCD_INITIAL_CLUSTER_STATE",
                      "new", "ETCD_INITIAL_CLUSTER", initial, "ETCD_INITIAL_CLUSTER_TOKEN", token));
        owned_by(b, COZY_API, "EtcdCluster", name);
        add(b, "services", true,
            json_pack("{s:s, s:s, s:o, s:{s:[o, o], s:s, s:o}}", "apiVersion", "v1", "kind",
                      "Service", "metadata", meta(name, ns, cozy_labels(b)), "spec", "ports",
                      service_port("client", 2379), service_port("metrics", 2381), "type",
                      "ClusterIP", "selector", cozy_labels(b)));
        owned_by(b, COZY_API, "EtcdCluster", name);
        add(b, "services", true,
            json_pack("{s:s, s:s, s:o, s:{s:[o, o], s:s, s:s, s:o, s:b}}", "apiVersion", "v1",
                      "kind", "Service", "metadata", meta(headless, ns, cozy_labels(b)), "spec",
                      "ports", service_port("peer", 2380), service_port("client", 2379), "type",
                      "ClusterIP", "clusterIP", "None", "selector", cozy_labels(b),
                      "publishNotReadyAddresses", 1));
        owned_by(b, COZY_API, "EtcdCluster", name);

        cozy_statefulset(b);
        return 0;
}

/* ---- the public side ---- */

int layout_objects(layout_kind kind, const layout_opts *o, json_t **ret_entries)
{
        build b = {.o = o};
        int r;

        if (!o || isempty(o->name) || isempty(o->ns) || o->size < 0 || !o->ca != !o->ca_key ||
            o->operator_replicas < 0)
                return -EINVAL;
        b.name = o->name;
        b.ns = o->ns;
        b.size = o->size ? o->size : LAYOUT_DEFAULT_SIZE;
        b.version = o->version ? o->version : LAYOUT_DEFAULT_VERSION;
        b.entries = json_array();
        switch (kind) {
        case LAYOUT_COREOS:
                r = build_coreos(&b);
                break;
        case LAYOUT_ETCDIO:
                r = build_etcdio(&b);
                break;
        case LAYOUT_IMPROBABLE:
                r = build_improbable(&b);
                break;
        case LAYOUT_COZYSTACK:
                r = build_cozystack(&b);
                break;
        default:
                r = -EINVAL;
        }
        if (r < 0) {
                json_decref(b.entries);
                return r;
        }
        *ret_entries = b.entries;
        return 0;
}

char *layout_member_selector(layout_kind kind, const layout_opts *o)
{
        switch (kind) {
        case LAYOUT_COREOS:
                return xasprintf("app=etcd,etcd_cluster=%s", o->name);
        case LAYOUT_ETCDIO:
                return xasprintf("app=%s,controller=%s", o->name, o->name);
        case LAYOUT_IMPROBABLE:
                return xasprintf("app.kubernetes.io/name=etcd,etcd.improbable.io/cluster-name=%s",
                                 o->name);
        case LAYOUT_COZYSTACK:
                return xasprintf("app.kubernetes.io/name=etcd,app.kubernetes.io/instance=%s,"
                                 "app.kubernetes.io/managed-by=etcd-operator",
                                 o->name);
        }
        return NULL;
}

/* The URL path of an entry's object (its collection when name is NULL). */
static char *entry_path(const json_t *entry, const char *name)
{
        const json_t *obj = json_object_get(entry, "object");
        const char *api = json_string_value(json_object_get(obj, "apiVersion"));
        const char *resource = json_string_value(json_object_get(entry, "resource"));
        const char *ns =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
        bool namespaced = json_is_true(json_object_get(entry, "namespaced"));
        strbuf sb = STRBUF_INIT;

        sb_printf(&sb, "%s%s", strchr(api, '/') ? "/apis/" : "/api/", api);
        if (namespaced)
                sb_printf(&sb, "/namespaces/%s", ns);
        sb_printf(&sb, "/%s", resource);
        if (name)
                sb_printf(&sb, "/%s", name);
        return sb_detach(&sb);
}

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* Until the CRD is Established (then its resource serves). */
static int wait_crd(kube_client *admin, const char *name)
{
        kube_gvr crds = {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
        time_t deadline = time(NULL) + 60;

        for (;;) {
                json_t *crd = NULL, *c;
                size_t i;
                bool established = false;
                if (kube_get(admin, &crds, NULL, name, &crd) == 0)
                        json_array_foreach(
                            json_object_get(json_object_get(crd, "status"), "conditions"), i, c)
                        {
                                if (streq_ptr(json_string_value(json_object_get(c, "type")),
                                              "Established") &&
                                    streq_ptr(json_string_value(json_object_get(c, "status")),
                                              "True"))
                                        established = true;
                        }
                json_decref(crd);
                if (established)
                        return 0;
                if (time(NULL) > deadline) {
                        fprintf(stderr, "layouts: CRD %s not established after 60 s\n", name);
                        return -ETIMEDOUT;
                }
                sleep_ms(200);
        }
}

int layout_create(kube_client *admin, layout_kind kind, const layout_opts *o)
{
        json_t *entries = NULL, *entry, *uids = json_object();
        size_t i;
        int r = layout_objects(kind, o, &entries);

        if (r < 0) {
                json_decref(uids);
                return r;
        }
        json_array_foreach(entries, i, entry)
        {
                json_t *obj = json_object_get(entry, "object"), *owner, *created = NULL;
                json_t *md = json_object_get(obj, "metadata");
                const char *kind_s = json_string_value(json_object_get(obj, "kind"));
                const char *name = json_string_value(json_object_get(md, "name"));
                _cleanup_free_ char *path = entry_path(entry, NULL);
                _cleanup_free_ char *key = xasprintf("%s/%s", kind_s, name);
                time_t deadline = time(NULL) + 30;

                owner = json_object_get(entry, "owner");
                if (owner) {
                        _cleanup_free_ char *okey =
                            xasprintf("%s/%s", json_string_value(json_object_get(owner, "kind")),
                                      json_string_value(json_object_get(owner, "name")));
                        json_t *uid = json_object_get(uids, okey);
                        if (!uid) {
                                fprintf(stderr, "layouts: %s: owner %s not created first\n", key,
                                        okey);
                                r = -EINVAL;
                                break;
                        }
                        json_object_set_new(md, "ownerReferences",
                                            json_pack("[{s:O, s:O, s:O, s:O, s:b, s:b}]",
                                                      "apiVersion",
                                                      json_object_get(owner, "apiVersion"), "kind",
                                                      json_object_get(owner, "kind"), "name",
                                                      json_object_get(owner, "name"), "uid", uid,
                                                      "controller", 1, "blockOwnerDeletion", 1));
                }
                /* A custom resource right after its CRD: retry while the resource is not served. */
                for (;;) {
                        r = kube_request(admin, "POST", path, NULL, obj, "create", key, NULL,
                                         &created);
                        if (r != -ENOENT || time(NULL) > deadline)
                                break;
                        sleep_ms(200);
                }
                if (r == -EEXIST && json_is_true(json_object_get(entry, "shared"))) {
                        _cleanup_free_ char *opath = entry_path(entry, name);
                        r = kube_get_path(admin, opath, &created);
                }
                if (r < 0) {
                        fprintf(stderr, "layouts: cannot create %s: %s\n", key,
                                kube_client_last_error(admin));
                        json_decref(created);
                        break;
                }
                json_object_set(uids, key,
                                json_object_get(json_object_get(created, "metadata"), "uid"));
                json_decref(created);
                if (streq(kind_s, "CustomResourceDefinition")) {
                        r = wait_crd(admin, name);
                        if (r < 0)
                                break;
                }
                if (json_object_get(entry, "status")) {
                        _cleanup_free_ char *spath = entry_path(entry, name);
                        _cleanup_free_ char *status_path = xasprintf("%s/status", spath);
                        json_t *patch =
                            json_pack("{s:O}", "status", json_object_get(entry, "status"));
                        r = kube_request(admin, "PATCH", status_path,
                                         "application/merge-patch+json", patch, "patch", key, NULL,
                                         NULL);
                        json_decref(patch);
                        /* a CRD without the status subresource kept it at creation */
                        if (r == -ENOENT)
                                r = 0;
                        if (r < 0) {
                                fprintf(stderr, "layouts: cannot write the status of %s: %s\n", key,
                                        kube_client_last_error(admin));
                                break;
                        }
                }
        }
        json_decref(entries);
        json_decref(uids);
        return r < 0 ? r : 0;
}

static bool pod_running(const json_t *pod)
{
        const json_t *st = json_object_get(pod, "status");

        return streq_ptr(json_string_value(json_object_get(st, "phase")), "Running") &&
               !isempty(json_string_value(json_object_get(st, "podIP"))) &&
               !json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp");
}

/* The Service whose selector picks the clients' Pods: the client Service, else the headless one. */
static char *client_service(layout_kind kind, const layout_opts *o)
{
        switch (kind) {
        case LAYOUT_COREOS:
                return xasprintf("%s-client", o->name);
        case LAYOUT_ETCDIO:     /* no client Service: the operator uses the headless one */
        case LAYOUT_IMPROBABLE: /* clients use NAME.NS:2379, the headless Service */
        case LAYOUT_COZYSTACK:
                return xstrdup(o->name);
        }
        return NULL;
}

static bool serves_tls(layout_kind kind, const layout_opts *o)
{
        return o->ca && (kind == LAYOUT_COREOS || kind == LAYOUT_COZYSTACK);
}

static char *selector_string(const json_t *sel)
{
        strbuf sb = STRBUF_INIT;
        const char *k;
        json_t *v;

        json_object_foreach((json_t *)sel, k, v)
        {
                sb_printf(&sb, "%s%s=%s", sb.len ? "," : "", k, json_string_value(v));
        }
        return sb_detach(&sb);
}

int layout_client_endpoints(kube_client *admin, layout_kind kind, const layout_opts *o,
                            char **ret_endpoints)
{
        kube_gvr services = {"", "v1", "services", true}, pods = {"", "v1", "pods", true};
        _cleanup_free_ char *svc_name = client_service(kind, o), *selector = NULL;
        json_t *svc = NULL, *items = NULL, *pod;
        strbuf sb = STRBUF_INIT;
        size_t i;
        int r = kube_get(admin, &services, o->ns, svc_name, &svc);

        if (r < 0)
                return r;
        selector = selector_string(json_object_get(json_object_get(svc, "spec"), "selector"));
        json_decref(svc);
        r = kube_list(admin, &pods, o->ns, selector, &items, NULL);
        if (r < 0)
                return r;
        json_array_foreach(items, i, pod)
        {
                const json_t *spec = json_object_get(pod, "spec");
                const char *host = json_string_value(json_object_get(spec, "hostname"));
                const char *sub = json_string_value(json_object_get(spec, "subdomain"));
                if (!pod_running(pod) || isempty(host) || isempty(sub))
                        continue;
                sb_printf(&sb, "%s%s://%s.%s.%s.svc%s:2379", sb.len ? "," : "",
                          serves_tls(kind, o) ? "https" : "http", host, sub, o->ns,
                          kind == LAYOUT_ETCDIO ? ".cluster.local" : "");
        }
        json_decref(items);
        if (!sb.len) {
                sb_release(&sb);
                return -ENOENT;
        }
        *ret_endpoints = sb_detach(&sb);
        return 0;
}

int layout_etcd_client(kube_client *admin, layout_kind kind, const layout_opts *o,
                       etcd_client **ret_client)
{
        /* One folder for the client certificates of every call (layout_wait_healthy polls). */
        static char *dir;
        _cleanup_free_ char *endpoints = NULL, *ca = NULL, *cert = NULL, *key = NULL;
        etcd_client_opts eo = {.call_timeout_ms = 5000, .dial_timeout_ms = 2000};
        int r = layout_client_endpoints(admin, kind, o, &endpoints);

        if (r < 0)
                return r;
        eo.endpoints = endpoints;
        if (serves_tls(kind, o)) {
                const char *const none[] = {NULL};
                pki_cert_request req = {.cn = "root", .dns_names = none, .days = 1, .client = true};
                pki_key *k = NULL;
                pki_cert *c = NULL;
                if (!dir)
                        dir = harness_tmpdir("gitcd-layout-client");
                if (!dir)
                        return -EIO;
                ca = xasprintf("%s/%s_%s-ca.crt", dir, o->ns, o->name);
                cert = xasprintf("%s/%s_%s-client.crt", dir, o->ns, o->name);
                key = xasprintf("%s/%s_%s-client.key", dir, o->ns, o->name);
                r = pki_cert_issue(o->ca, o->ca_key, &req, &k, &c);
                if (r >= 0)
                        r = pki_write_pem(ca, NULL, o->ca, NULL);
                if (r >= 0)
                        r = pki_write_pem(cert, key, c, k);
                pki_key_free(k);
                pki_cert_free(c);
                if (r < 0)
                        return r;
                eo.cacert = ca;
                eo.cert = cert;
                eo.key = key;
        }
        return etcd_client_new(&eo, ret_client);
}

/* One pass of the health check; a message for the caller when it fails. */
static int check_health(kube_client *admin, layout_kind kind, const layout_opts *o, int size,
                        char **ret_problem)
{
        kube_gvr pods = {"", "v1", "pods", true};
        _cleanup_free_ char *selector = layout_member_selector(kind, o);
        json_t *items = NULL, *pod;
        etcd_client *ec = NULL;
        etcd_members *ml = NULL;
        etcd_kv_list *kvs = NULL;
        int running = 0, started = 0, r;
        size_t i;

        r = kube_list(admin, &pods, o->ns, selector, &items, NULL);
        if (r < 0) {
                *ret_problem = xasprintf("list pods: %s", kube_client_last_error(admin));
                return r;
        }
        json_array_foreach(items, i, pod) running += pod_running(pod);
        json_decref(items);
        if (running != size) {
                *ret_problem = xasprintf("%d of %d member Pods run", running, size);
                return -EAGAIN;
        }
        r = layout_etcd_client(admin, kind, o, &ec);
        if (r < 0) {
                *ret_problem = xasprintf("etcd client: %s", strerror(-r));
                return r;
        }
        r = etcd_member_list(ec, &ml);
        if (r < 0) {
                *ret_problem = xasprintf("member list: %s", etcd_client_last_error(ec));
                goto out;
        }
        for (i = 0; i < ml->n; i++)
                if (!isempty(ml->members[i].name) && ml->members[i].n_client_urls > 0 &&
                    !ml->members[i].is_learner)
                        started++;
        if (started != size || ml->n != (size_t)size) {
                *ret_problem =
                    xasprintf("%d started voting members of %zu, want %d", started, ml->n, size);
                r = -EAGAIN;
                goto out;
        }
        r = etcd_put(ec, "layout-health", "ok", 2, NULL);
        if (r >= 0)
                r = etcd_get(ec, "layout-health", false, &kvs);
        if (r < 0 || kvs->n != 1) {
                *ret_problem = xasprintf("write and read: %s", etcd_client_last_error(ec));
                r = r < 0 ? r : -EIO;
        }
out:
        etcd_kv_list_free(kvs);
        etcd_members_free(ml);
        etcd_client_free(ec);
        return r;
}

/* What the operator leaves once its cluster runs: the initial-cluster-state ConfigMap at "existing". */
static int settle(kube_client *admin, layout_kind kind, const layout_opts *o)
{
        _cleanup_free_ char *cm = NULL, *path = NULL;
        json_t *patch;
        int r;

        if (kind == LAYOUT_ETCDIO)
                cm = xasprintf("%s-state", o->name);
        else if (kind == LAYOUT_COZYSTACK)
                cm = xasprintf("%s-cluster-state", o->name);
        else
                return 0;
        path = xasprintf("/api/v1/namespaces/%s/configmaps/%s", o->ns, cm);
        patch = json_pack("{s:{s:s}}", "data", "ETCD_INITIAL_CLUSTER_STATE", "existing");
        r = kube_request(admin, "PATCH", path, "application/merge-patch+json", patch, "patch",
                         "configmaps", o->ns, NULL);
        json_decref(patch);
        return r;
}

int layout_wait_healthy(kube_client *admin, layout_kind kind, const layout_opts *o, int timeout_s)
{
        time_t deadline = time(NULL) + timeout_s;
        int size = o->size ? o->size : LAYOUT_DEFAULT_SIZE;
        char *problem = NULL;

        for (;;) {
                free(problem);
                problem = NULL;
                if (check_health(admin, kind, o, size, &problem) >= 0)
                        break;
                if (time(NULL) > deadline) {
                        fprintf(stderr, "layouts: %s cluster %s/%s not healthy after %d s: %s\n",
                                layout_kind_name(kind), o->ns, o->name, timeout_s,
                                problem ? problem : "?");
                        free(problem);
                        return -ETIMEDOUT;
                }
                sleep_ms(500);
        }
        free(problem);
        return settle(admin, kind, o);
}
