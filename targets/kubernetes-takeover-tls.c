/*
 * The TLS half of a coreos takeover's survey on the Kubernetes target
 * (spec.adopt with spec.tls; the checks themselves are pure, in
 * targets/takeover-tls.c). Reads the old members' flags from their Pods,
 * the CAs from the Secrets their EtcdCluster's spec.TLS.static names
 * (coreos' keys: peer-ca.crt, server-ca.crt, etcd-client-ca.crt), and
 * spec.adopt.ca's Secret (tls.crt, tls.key) or the ca.crt of the Secrets
 * the spec names (tls.provider secrets).
 *
 * Decisions a reader needs:
 * - The one write, on gitcd's side only: with tls.provider auto the old CA
 *   is imported as the cluster's CA (<cluster dir>/pki, where
 *   kubernetes-tls.c issues from, marked imported so it is never
 *   rotated), then gitcd's own client certificate is issued from it, before
 *   the member list is read (the old members ask for a client certificate
 *   of their CA). A CA already there is kept when it is the old one and
 *   refused otherwise (nothing is replaced). Nothing of the old cluster is
 *   changed, so a refusal leaves it as it was.
 * - The CA key lives in memory only as long as the import takes; it never
 *   reaches a message (takeover-tls.h).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pki/auto.h"
#include "render/layout.h"
#include "targets/kubernetes-internal.h"
#include "targets/takeover-tls.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/xalloc.h"

#define PEM_MAX (1024 * 1024)

/* Everything read for the judge; owns the texts. */
typedef struct tls_read {
        takeover_tls_facts f;
        char *texts[2 * (TAKEOVER_TLS_OLD_CAS + 5)];
        size_t n;
} tls_read;

static void tls_read_release(tls_read *r)
{
        for (size_t i = 0; i < r->n; i++) {
                if (r->texts[i]) {
                        explicit_bzero(r->texts[i], strlen(r->texts[i]));
                        free(r->texts[i]);
                }
        }
        r->n = 0;
}

static const char *keep(tls_read *r, char *text)
{
        assert(r->n < ARRAY_SIZE(r->texts));
        r->texts[r->n++] = text;
        return text;
}

/*
 * Key `key` of Secret ns/name into *p ("Secret ns/name key key" as what);
 * a missing Secret or key leaves p->pem NULL (the judge says so). Other
 * API errors fail.
 */
static int read_key(kubernetes_target *kt, tls_read *r, const char *ns, const char *name,
                    const char *key, takeover_pem *p)
{
        p->what = keep(r, xasprintf("Secret %s/%s key %s", ns, name, key));
        p->pem = NULL;
        json_t *secret = NULL;
        int k = kube_get(kt->kc, &GVR_SECRETS, ns, name, &secret);
        if (k == -ENOENT)
                return 0;
        if (k < 0)
                return kube_fail(kt, k);
        const char *b64 = json_string_value(json_object_get(json_object_get(secret, "data"), key));
        char *data = NULL;
        size_t len = 0;
        k = b64 ? kube_base64_decode(b64, &data, &len) : 0;
        json_decref(secret);
        if (k < 0 || (data && (len > PEM_MAX || memchr(data, '\0', len)))) {
                free(data);
                return 0; /* not text: the judge says it holds no PEM */
        }
        if (data) {
                char *text = xmalloc(len + 1);
                memcpy(text, data, len);
                text[len] = '\0';
                explicit_bzero(data, len);
                free(data);
                p->pem = keep(r, text);
        }
        return 0;
}

/* Does the container's command line hold flag=https... (or "flag https...")? */
static bool flag_https(const json_t *container, const char *flag)
{
        static const char *const lists[] = {"command", "args"};
        size_t n = strlen(flag);
        for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
                const json_t *a = json_object_get(container, lists[l]);
                for (size_t i = 0; i < json_array_size(a); i++) {
                        const char *s = json_string_value(json_array_get(a, i));
                        if (!s || strncmp(s, flag, n) != 0)
                                continue;
                        const char *v = s[n] == '=' ? s + n + 1
                                        : !s[n]     ? json_string_value(json_array_get(a, i + 1))
                                                    : NULL;
                        if (v && strncmp(v, "https://", 8) == 0)
                                return true;
                }
        }
        return false;
}

/* The surfaces the old members serve TLS on, from their Pods; every Pod must say the same. */
static int read_surfaces(kubernetes_target *kt, const char *ns, const char *selector,
                         takeover_tls_facts *f, char **ret_why)
{
        json_t *pods = NULL;
        int k = kube_list(kt->kc, &GVR_PODS, ns, selector, &pods, NULL);
        if (k < 0)
                return kube_fail(kt, k);
        size_t i;
        json_t *pod;
        const char *first = NULL;
        json_array_foreach(pods, i, pod)
        {
                const json_t *c0 =
                    json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
                bool client = flag_https(c0, "--listen-client-urls");
                bool peer = flag_https(c0, "--listen-peer-urls");
                if (!first) {
                        f->client_tls = client;
                        f->peer_tls = peer;
                        first = obj_name(pod);
                } else if (client != f->client_tls || peer != f->peer_tls) {
                        *ret_why = xasprintf("the old Pods %s/%s and %s/%s run with different TLS "
                                             "settings; every member must serve the same "
                                             "surfaces over TLS before a takeover",
                                             ns, first, ns, obj_name(pod));
                        json_decref(pods);
                        return -EPERM;
                }
        }
        json_decref(pods);
        return 0;
}

/* The old CAs, from the Secrets of the old EtcdCluster's spec.TLS.static. */
static int read_old_cas(kubernetes_target *kt, tls_read *r, const json_t *cr, const char *ns)
{
        const json_t *st =
            json_object_get(json_object_get(json_object_get(cr, "spec"), "TLS"), "static");
        const json_t *member = json_object_get(st, "member");
        const char *server = json_string_value(json_object_get(member, "serverSecret"));
        const char *peer = json_string_value(json_object_get(member, "peerSecret"));
        const char *op = json_string_value(json_object_get(st, "operatorSecret"));
        takeover_tls_facts *f = &r->f;
        int k = 0;
        if (server && r->f.client_tls)
                k = read_key(kt, r, ns, server, "server-ca.crt", &f->old_ca[0]);
        if (k >= 0 && peer && r->f.peer_tls)
                k = read_key(kt, r, ns, peer, "peer-ca.crt", &f->old_ca[1]);
        if (k >= 0 && op && r->f.client_tls)
                k = read_key(kt, r, ns, op, "etcd-client-ca.crt", &f->old_ca[2]);
        return k;
}

/* What gitcd would use: spec.adopt.ca's Secret (auto) or the spec's Secrets' ca.crt (secrets). */
static int read_spec_side(kubernetes_target *kt, tls_read *r, const etcd_cluster *c)
{
        const char *ns = ns_of(c);
        takeover_tls_facts *f = &r->f;
        if (c->tls.provider == TLS_PROVIDER_AUTO && !c->adopt.ca_secret) {
                /* validate refuses it: said as a missing CA all the same */
                f->given_cert.what = "spec.adopt.ca.secret";
                return 0;
        }
        if (c->tls.provider == TLS_PROVIDER_AUTO) {
                int k = read_key(kt, r, ns, c->adopt.ca_secret, "tls.crt", &f->given_cert);
                return k < 0 ? k
                             : read_key(kt, r, ns, c->adopt.ca_secret, "tls.key", &f->given_key);
        }
        if (c->tls.provider != TLS_PROVIDER_SECRETS)
                return 0;
        const char *subs[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER, TLS_SUBDIR_OPERATOR};
        for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
                _cleanup_free_ char *name = render_tls_secret_name(c, subs[i]);
                if (!name)
                        continue;
                int k = read_key(kt, r, ns, name, "ca.crt", &f->spec_ca[i]);
                if (k < 0)
                        return k;
        }
        return 0;
}

/*
 * tls.provider auto: the old CA made the cluster's CA (kept when it is
 * there already, refused when another is), and gitcd's client identity
 * issued from it.
 */
static int import_ca(kubernetes_target *kt, const etcd_cluster *c, const pki_cert *ca,
                     const pki_key *key, char **ret_why)
{
        _cleanup_free_ char *cdir = cluster_dir(kt, ns_of(c), c->name);
        _cleanup_free_ char *pki = path_join(cdir, "pki");
        _cleanup_free_ char *crt = path_join(pki, "ca.crt");
        int k;
        if (path_exists(crt)) {
                _cleanup_free_ char *have = NULL, *have_fp = NULL, *want = NULL, *want_fp = NULL;
                size_t len = 0;
                if ((k = read_file(crt, PEM_MAX, &have, &len)) < 0)
                        return target_fail(&kt->base, k, "cannot read %s: %s", crt, strerror(-k));
                if (pki_cert_to_pem(ca, &want) < 0 ||
                    pki_bundle_fingerprint(want, strlen(want), &want_fp) < 0 ||
                    pki_bundle_fingerprint(have, len, &have_fp) < 0 || !streq(have_fp, want_fp)) {
                        *ret_why = xasprintf("gitcd already keeps a CA for %s/%s in %s, and it is "
                                             "not the old cluster's; remove that folder to import "
                                             "the old CA",
                                             ns_of(c), c->name, pki);
                        return -EPERM;
                }
        } else {
                if ((k = pki_ca_import(pki, ca, key)) < 0)
                        return pki_fail(kt, k, "cannot import the old cluster's CA", pki);
                log_info("%s/%s: imported the old cluster's CA (spec.adopt.ca) into %s", ns_of(c),
                         c->name, pki);
        }
        if (!c->tls.client.enabled)
                return 0;
        _cleanup_(pki_auto_freep) pki_auto *a = NULL;
        if ((k = pki_auto_open(cdir, c, true, &a)) < 0)
                return pki_fail(kt, k, "the cluster CA", cdir);
        _cleanup_free_ char *dir = xasprintf("%s/tls/%s", cdir, TLS_SUBDIR_OPERATOR);
        k = pki_auto_leaf(a, dir, "root", NULL, NULL, false, false, (int64_t)time(NULL) * 1000);
        if (k < 0)
                return pki_fail(kt, k, "cannot issue gitcd's client certificate", dir);
        return 0;
}

int kt_takeover_tls(kubernetes_target *kt, const etcd_cluster *c, const json_t *cr,
                    const char *selector, char **ret_why)
{
        const char *ns = ns_of(c);
        tls_read r = {0};
        int k = read_surfaces(kt, ns, selector, &r.f, ret_why);
        if (k >= 0 && (r.f.client_tls || r.f.peer_tls))
                k = read_old_cas(kt, &r, cr, ns);
        if (k >= 0 && (r.f.client_tls || r.f.peer_tls))
                k = read_spec_side(kt, &r, c);
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        if (k >= 0)
                k = takeover_tls_judge(&r.f, c, &ca, &key, ret_why);
        tls_read_release(&r);
        if (k > 0 && key)
                k = import_ca(kt, c, ca, key, ret_why);
        pki_cert_free(ca);
        pki_key_free(key);
        return k < 0 ? k : 0;
}
