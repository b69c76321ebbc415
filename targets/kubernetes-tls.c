/*
 * The Kubernetes target's TLS: with tls.provider auto, gitcd is the CA
 * (pki/), keeps it under the state folder, issues one certificate per surface
 * with exactly the names render gives cert-manager, and applies them as
 * kubernetes.io/tls Secrets; with the other providers it reads the operator's
 * Secret. Secrets gitcd itself reads (S3 credentials, the root password) are
 * copied into a folder of 0600 files (secret_folder).
 */

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "pki/auto.h"
#include "render/layout.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"
#include "targets/kubernetes-internal.h"

#define SECRET_MAX (1024 * 1024)

/* A JSON array of strings as a NULL-terminated vector of borrowed strings. */
static const char **borrow_strv(const json_t *arr)
{
        size_t n = json_array_size(arr);
        const char **v = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                v[i] = json_string_value(json_array_get(arr, i));
        return v;
}

/*
 * The names server certificates carry: exactly those render gives the
 * cert-manager Certificates (rendered here for a copy of the spec with that
 * provider; render reads the spec and never keeps it).
 */
static void server_names(const etcd_cluster *c, const membership_plan *steady, json_t **ret_dns,
                         json_t **ret_ips)
{
        etcd_cluster tmp = *c;
        tmp.tls.provider = TLS_PROVIDER_CERT_MANAGER;
        json_t *objs = render_shared_objects(&tmp, steady);
        *ret_dns = json_array();
        *ret_ips = json_array();
        size_t i;
        json_t *o;
        json_array_foreach(objs, i, o)
        {
                if (!streq_ptr(obj_kind(o), "Certificate"))
                        continue;
                json_t *spec = json_object_get(o, "spec");
                json_t *dns = json_object_get(spec, "dnsNames");
                if (json_array_size(dns) > 0) {
                        json_array_extend(*ret_dns, dns);
                        json_array_extend(*ret_ips, json_object_get(spec, "ipAddresses"));
                        break;
                }
        }
        json_decref(objs);
}

static int write_secret_file(kubernetes_target *kt, const char *dir, const char *file,
                             const char *data, size_t len)
{
        _cleanup_free_ char *path = path_join(dir, file);
        int r = mkdir_p(dir, 0700);
        if (r >= 0)
                r = write_file_atomic(path, data, len, 0600);
        if (r < 0)
                return target_fail(&kt->base, r, "cannot write %s: %s", path, strerror(-r));
        return 0;
}

/* A kubernetes.io/tls Secret from the files in dir, labelled like the cluster's objects. */
static int tls_secret(kubernetes_target *kt, const char *dir, const char *name,
                      const json_t *labels, json_t **ret)
{
        static const char *const files[] = {"tls.crt", "tls.key", "ca.crt"};
        json_t *data = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                _cleanup_free_ char *path = path_join(dir, files[i]);
                char *content = NULL;
                size_t len = 0;
                int r = read_file(path, SECRET_MAX, &content, &len);
                if (r < 0) {
                        json_decref(data);
                        return target_fail(&kt->base, r, "cannot read %s: %s", path, strerror(-r));
                }
                char *b64 = kube_base64_encode(content, len);
                explicit_bzero(content, len);
                free(content);
                json_object_set_new(data, files[i], json_string(b64));
                free(b64);
        }
        json_t *lab = json_deep_copy(labels);
        json_object_set_new(lab, LABEL_KEY_COMPONENT, json_string("tls"));
        json_t *md = json_pack("{s:s, s:o}", "name", name, "labels", lab);
        json_t *s = json_pack("{s:s, s:s, s:o, s:s, s:o}", "apiVersion", "v1", "kind", "Secret",
                              "metadata", md, "type", "kubernetes.io/tls", "data", data);
        *ret = s;
        return 0;
}

/* Members hold leaves the cluster CA signed: half a CA must not be silently replaced. */
bool kt_tls_leaves_exist(const char *tls)
{
        const char *const *subdirs = pki_auto_leaf_dirs;
        for (size_t i = 0; i < PKI_AUTO_LEAVES; i++) {
                _cleanup_free_ char *dir = path_join(tls, subdirs[i]);
                if (pki_auto_leaf_exists(dir))
                        return true;
        }
        return false;
}

/*
 * tls.provider auto: the Secrets that carry the certificates issued under
 * <cluster dir>/tls, appended to out; a surface not issued yet has none.
 * Only reads files.
 */
int kt_tls_secrets(kubernetes_target *kt, const etcd_cluster *c, const json_t *labels, json_t *out)
{
        pki_auto_leaf_kind leaves[PKI_AUTO_LEAVES];
        if (!pki_auto_leaves(c, leaves))
                return 0;
        _cleanup_free_ char *cdir = cluster_dir(kt, ns_of(c), c->name);
        _cleanup_free_ char *tls = path_join(cdir, "tls");
        for (size_t i = 0; i < ARRAY_SIZE(leaves); i++) {
                _cleanup_free_ char *dir = path_join(tls, leaves[i].sub);
                if (!leaves[i].on || !pki_auto_leaf_exists(dir))
                        continue;
                _cleanup_free_ char *name = render_tls_secret_name(c, leaves[i].sub);
                json_t *secret = NULL;
                int r = tls_secret(kt, dir, name, labels, &secret);
                if (r < 0)
                        return r;
                json_object_set_new(metadata(secret), "namespace", json_string(ns_of(c)));
                json_array_append_new(out, secret);
        }
        return 0;
}

/*
 * tls.provider auto: the CA and one certificate per surface under
 * <cluster dir>, (re)issued when missing, stale or naming other hosts.
 */
int kt_tls_issue(kubernetes_target *kt, const etcd_cluster *c, const membership_plan *steady)
{
        pki_auto_leaf_kind leaves[PKI_AUTO_LEAVES];
        if (!pki_auto_leaves(c, leaves))
                return 0;
        _cleanup_free_ char *cdir = cluster_dir(kt, ns_of(c), c->name);
        _cleanup_free_ char *tls = path_join(cdir, "tls");
        _cleanup_(pki_auto_freep) pki_auto *a = NULL;
        int r = pki_auto_open(cdir, c, kt_tls_leaves_exist(tls), &a);
        if (r < 0)
                return pki_fail(kt, r, "the cluster CA", cdir);

        json_t *dns_j = NULL, *ips_j = NULL;
        server_names(c, steady, &dns_j, &ips_j);
        _cleanup_free_ const char **dns = borrow_strv(dns_j);
        _cleanup_free_ const char **ips = borrow_strv(ips_j);
        r = 0;
        for (size_t i = 0; i < ARRAY_SIZE(leaves) && r >= 0; i++) {
                if (!leaves[i].on)
                        continue;
                _cleanup_free_ char *dir = path_join(tls, leaves[i].sub);
                const char *const *want_dns = leaves[i].server ? dns : NULL;
                const char *const *want_ips = leaves[i].server ? ips : NULL;
                r = pki_auto_leaf(a, dir, leaves[i].server ? c->name : "root", want_dns, want_ips,
                                  leaves[i].server, kt->tls_renew,
                                  kt->tls_renew ? kt->tls_now_ms : (int64_t)time(NULL) * 1000);
                if (r < 0) {
                        r = pki_fail(kt, r, "cannot issue the certificate", dir);
                        break;
                }
                if (r > 0) {
                        kt->tls_issued++;
                        log_debug("kubernetes target: issued %s/%s %s certificate", ns_of(c),
                                  c->name, leaves[i].sub);
                }
        }
        json_decref(dns_j);
        json_decref(ips_j);
        return r < 0 ? r : 0;
}

/*
 * tls.provider secrets and cert-manager: the version of the trust the
 * members start with (member_plan.tls_version, as pki/auto.h's for auto),
 * from the ca.crt of the Secrets their Pods mount. The kubelet brings
 * renewed leaves into running Pods by itself and etcd reads leaves again
 * on each new connection; a CA is read only at start, so a changed ca.crt
 * changes the members' config hash and the reconciler restarts them one
 * at a time, as for any other change of their command. A Secret not there
 * yet (cert-manager has not issued it) adds nothing: no Pod can start
 * before it exists. Read on every pass: a Secret's change is seen within
 * the observation interval.
 */
int kt_secrets_trust_version(kubernetes_target *kt, const etcd_cluster *c, char **ret)
{
        *ret = NULL;
        if (c->tls.provider != TLS_PROVIDER_SECRETS && c->tls.provider != TLS_PROVIDER_CERT_MANAGER)
                return 0;
        static const char *const surfaces[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER};
        static const char *const bundle[] = {TLS_SUBDIR_CA_BUNDLE};
        bool use_bundle = !isempty(c->tls.ca_bundle_secret);
        const char *const *which = use_bundle ? bundle : surfaces;
        size_t n = use_bundle ? ARRAY_SIZE(bundle) : ARRAY_SIZE(surfaces);
        _cleanup_(sb_release) strbuf pem = STRBUF_INIT;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *name = render_tls_secret_name(c, which[i]);
                if (!name)
                        continue;
                json_t *secret = NULL;
                int r = kube_get(kt->kc, &GVR_SECRETS, ns_of(c), name, &secret);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return kube_fail(kt, r);
                const char *b64 =
                    json_string_value(json_object_get(json_object_get(secret, "data"), "ca.crt"));
                char *data = NULL;
                size_t len = 0;
                r = b64 ? kube_base64_decode(b64, &data, &len) : 0;
                json_decref(secret);
                if (r < 0)
                        return target_fail(&kt->base, r,
                                           "Secret %s/%s: key ca.crt is not valid base64", ns_of(c),
                                           name);
                if (!data)
                        continue;
                _cleanup_free_ char *one = NULL;
                r = pki_bundle_fingerprint(data, len, &one);
                if (r >= 0) {
                        sb_append_len(&pem, data, len);
                        sb_appendc(&pem, '\n');
                }
                free(data);
                if (r < 0)
                        return target_fail(&kt->base, r,
                                           "cluster %s/%s: the ca.crt of Secret %s, the CA its "
                                           "members trust, holds no certificate in PEM",
                                           ns_of(c), c->name, name);
        }
        return pem.len ? pki_bundle_fingerprint(sb_str(&pem), pem.len, ret) : 0;
}

/* Read one key of a Secret's data into <dir>/<file> (0600). */
static int secret_key_to_file(kubernetes_target *kt, const json_t *secret, const char *key,
                              const char *dir, const char *file)
{
        const char *b64 = json_string_value(json_object_get(json_object_get(secret, "data"), key));
        if (!b64)
                return target_fail(&kt->base, -ENOENT, "Secret %s has no key %s",
                                   obj_name(secret) ?: "?", key);
        char *data = NULL;
        size_t len = 0;
        int r = kube_base64_decode(b64, &data, &len);
        if (r < 0)
                return target_fail(&kt->base, r, "Secret %s: key %s is not valid base64",
                                   obj_name(secret) ?: "?", key);
        r = write_secret_file(kt, dir, file, data, len);
        explicit_bzero(data, len);
        free(data);
        return r;
}

static int read_secret(kubernetes_target *kt, const char *ns, const char *name, json_t **ret)
{
        int r = kube_get(kt->kc, &GVR_SECRETS, ns, name, ret);
        if (r < 0)
                return kube_fail(kt, r);
        return 0;
}

int kt_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert, char **ret_key)
{
        kubernetes_target *kt = KT(t);
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!render_client_tls(c))
                return 0;
        const char *ns = ns_of(c);
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *dir = NULL;
        int r = 0;
        if (c->tls.provider == TLS_PROVIDER_AUTO) {
                dir = xasprintf("%s/tls/%s", cdir, TLS_SUBDIR_OPERATOR);
        } else {
                dir = path_join(cdir, TLS_SUBDIR_OPERATOR);
                _cleanup_free_ char *name = render_tls_secret_name(c, TLS_SUBDIR_OPERATOR);
                if (!name)
                        return target_fail(t, -EINVAL,
                                           "cluster %s/%s: no operator client Secret is named", ns,
                                           c->name);
                json_t *secret = NULL;
                r = read_secret(kt, ns, name, &secret);
                if (r >= 0)
                        r = secret_key_to_file(kt, secret, "tls.crt", dir, "tls.crt");
                if (r >= 0)
                        r = secret_key_to_file(kt, secret, "tls.key", dir, "tls.key");
                if (r >= 0 && isempty(c->tls.ca_bundle_secret))
                        r = secret_key_to_file(kt, secret, "ca.crt", dir, "ca.crt");
                json_decref(secret);
                if (r >= 0 && !isempty(c->tls.ca_bundle_secret)) {
                        r = read_secret(kt, ns, c->tls.ca_bundle_secret, &secret);
                        if (r >= 0)
                                r = secret_key_to_file(kt, secret, "ca.crt", dir, "ca.crt");
                        json_decref(secret);
                }
                if (r < 0)
                        return r;
        }
        *ret_ca = path_join(dir, "ca.crt");
        *ret_cert = path_join(dir, "tls.crt");
        *ret_key = path_join(dir, "tls.key");
        return 0;
}

/*
 * A Secret gitcd itself reads (S3 credentials), as the files of a mounted
 * Secret under <cluster dir>/secrets/<name>/: written beside it as a hidden
 * folder, then swapped in, so the folder never mixes two versions of the
 * Secret. Keys that cannot be a file name (starting with '.') are left out.
 */
int kt_secret_folder(target *t, const etcd_cluster *c, const char *name, char **ret_dir)
{
        kubernetes_target *kt = KT(t);
        const char *ns = ns_of(c);
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        if (!target_name_is_component(name))
                return target_fail(t, -EINVAL, "invalid Secret name \"%s\"", name ? name : "");
        json_t *secret = NULL;
        int r = read_secret(kt, ns, name, &secret);
        if (r < 0)
                return r;
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        _cleanup_free_ char *parent = path_join(cdir, "secrets");
        _cleanup_free_ char *dir = path_join(parent, name);
        _cleanup_free_ char *tmp = xasprintf("%s/.%s.new", parent, name);
        (void)rm_rf(tmp);
        r = mkdir_p(tmp, 0700);
        if (r < 0)
                r = target_fail(t, r, "cannot create %s: %s", tmp, strerror(-r));
        const char *key;
        json_t *value;
        json_object_foreach(json_object_get(secret, "data"), key, value)
        {
                if (r < 0)
                        break;
                if (!target_name_is_component(key) || !json_is_string(value))
                        continue;
                r = secret_key_to_file(kt, secret, key, tmp, key);
        }
        json_decref(secret);
        if (r >= 0) {
                (void)rm_rf(dir);
                if (rename(tmp, dir) < 0) {
                        int e = errno;
                        r = target_fail(t, -e, "cannot rename %s to %s: %s", tmp, dir, strerror(e));
                }
        }
        if (r < 0) {
                (void)rm_rf(tmp);
                return r;
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

/* tls.provider auto: one leaf per surface for the whole cluster, under <cluster dir>/tls. */
int kt_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                        target_cert **ret_certs, size_t *ret_n)
{
        (void)p;
        kubernetes_target *kt = KT(t);
        *ret_certs = NULL;
        *ret_n = 0;
        const char *ns = ns_of(c);
        if (c->tls.provider != TLS_PROVIDER_AUTO)
                return 0;
        if (!target_name_is_component(ns) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", ns, c->name);
        _cleanup_free_ char *cdir = cluster_dir(kt, ns, c->name);
        const char *const *subdirs = pki_auto_leaf_dirs;
        target_cert *v = xcalloc(PKI_AUTO_LEAVES, sizeof(*v));
        size_t n = 0;
        for (size_t i = 0; i < PKI_AUTO_LEAVES; i++) {
                _cleanup_free_ char *dir = xasprintf("%s/tls/%s", cdir, subdirs[i]);
                int64_t not_after;
                char *serial = NULL;
                if (pki_leaf_info(dir, &not_after, &serial) < 0)
                        continue;
                v[n++] = (target_cert){
                    .surface = xstrdup(subdirs[i]), .not_after_ms = not_after, .serial = serial};
        }
        _cleanup_free_ char *pki = path_join(cdir, "pki");
        target_certs_add_ca(&v, &n, pki);
        *ret_certs = v;
        *ret_n = n;
        return 0;
}

/*
 * Renewal: the leaves are shared by every member (one Secret per surface),
 * so they are renewed once, for member NULL, and the Secrets updated; the
 * kubelet swaps the mounted files of each Pod atomically (its ..data link).
 */
int kt_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p, const char *member,
                 int64_t now_ms)
{
        kubernetes_target *kt = KT(t);
        if (member)
                return 0;
        kt->tls_renew = true;
        kt->tls_now_ms = now_ms;
        int r = kt_ensure_shared(t, c, p);
        kt->tls_renew = false;
        return r < 0 ? r : kt->tls_issued;
}
