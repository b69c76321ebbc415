/*
 * The TLS checks of a takeover (takeover-tls.h), pure: certificates are
 * parsed and compared, nothing is read or written.
 *
 * Decisions a reader needs:
 * - The old CA is kept, never replaced mid-move: gitcd's members join the
 *   old ones with leaves that CA signed, and the old members go on
 *   trusting what they trusted, so no client sees a new CA. coreos' Secrets
 *   hold the CA certificates but not the key; with tls.provider auto the
 *   user hands gitcd the key (spec.adopt.ca), with secrets the user's
 *   Secrets carry leaves signed by the old CA.
 * - "One CA" is compared by fingerprint (pki_bundle_fingerprint: the DER
 *   of each certificate), so the same CA written twice with other line
 *   breaks is one; a bundle of several CAs is not one CA and is refused.
 * - The surfaces must be the same on both sides: a spec with client TLS
 *   for a cluster whose clients speak plain HTTP (or the reverse) would
 *   switch TLS while members of both kinds serve one cluster.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "targets/takeover-tls.h"
#include "util/xalloc.h"

static const char *on_off(bool on)
{
        return on ? "on" : "off";
}

static int surfaces(const takeover_tls_facts *f, const etcd_cluster *c, char **ret_why)
{
        bool any = c->tls.provider != TLS_PROVIDER_NONE;
        bool want_client = any && c->tls.client.enabled;
        bool want_peer = any && c->tls.peer.enabled;
        if (want_client == f->client_tls && want_peer == f->peer_tls)
                return 0;
        *ret_why = xasprintf("the old members run with client TLS %s and peer TLS %s, the spec "
                             "asks for client TLS %s and peer TLS %s: a takeover keeps the "
                             "cluster's TLS as it is (switching it mid-move is not supported); "
                             "set spec.tls.client.enabled and spec.tls.peer.enabled as the old "
                             "cluster runs, and change them once the takeover finished",
                             on_off(f->client_tls), on_off(f->peer_tls), on_off(want_client),
                             on_off(want_peer));
        return -EPERM;
}

/* p parsed as exactly one CA certificate, with its fingerprint; a refusal else. */
static int one_ca(const takeover_pem *p, pki_cert **ret, char **ret_fp, char **ret_why)
{
        if (!p->pem) {
                *ret_why =
                    xasprintf("%s is missing: gitcd reads the old cluster's CA there", p->what);
                return -EPERM;
        }
        size_t len = strlen(p->pem);
        char *fp = NULL;
        pki_cert *crt = NULL;
        if (pki_bundle_fingerprint(p->pem, len, &fp) < 0 ||
            pki_cert_from_pem(p->pem, len, p->what, &crt) < 0) {
                free(fp);
                *ret_why = xasprintf("%s holds no PEM certificate", p->what);
                return -EPERM;
        }
        _cleanup_free_ char *first = NULL;
        _cleanup_free_ char *first_pem = NULL;
        if (pki_cert_to_pem(crt, &first_pem) >= 0)
                (void)pki_bundle_fingerprint(first_pem, strlen(first_pem), &first);
        if (!first || !streq(first, fp)) {
                free(fp);
                pki_cert_free(crt);
                *ret_why = xasprintf("%s holds several certificates: gitcd keeps one CA, the one "
                                     "the old members' certificates chain to",
                                     p->what);
                return -EPERM;
        }
        if (!pki_cert_is_ca(crt)) {
                free(fp);
                pki_cert_free(crt);
                *ret_why = xasprintf("%s is not a CA certificate", p->what);
                return -EPERM;
        }
        *ret = crt;
        *ret_fp = fp;
        return 0;
}

/* The old cluster's CAs are one: into *ret_ca / *ret_fp (the first present). */
static int old_ca(const takeover_tls_facts *f, pki_cert **ret_ca, char **ret_fp, char **ret_why)
{
        pki_cert *ca = NULL;
        char *fp = NULL;
        const char *first = NULL;
        for (size_t i = 0; i < TAKEOVER_TLS_OLD_CAS; i++) {
                const takeover_pem *p = &f->old_ca[i];
                if (!p->what)
                        continue;
                pki_cert *crt = NULL;
                char *one = NULL;
                if (one_ca(p, &crt, &one, ret_why) < 0) {
                        pki_cert_free(ca);
                        free(fp);
                        return -EPERM;
                }
                if (!ca) {
                        ca = crt;
                        fp = one;
                        first = p->what;
                        continue;
                }
                bool same = streq(one, fp);
                pki_cert_free(crt);
                free(one);
                if (!same) {
                        *ret_why = xasprintf("the old cluster trusts two CAs: %s is not the CA of "
                                             "%s; gitcd keeps one CA for the whole cluster, so "
                                             "its members could not be trusted by both (make "
                                             "every Secret carry the same CA first)",
                                             p->what, first);
                        pki_cert_free(ca);
                        free(fp);
                        return -EPERM;
                }
        }
        if (!ca) {
                *ret_why = xstrdup("the old members run with TLS but no Secret of theirs names "
                                   "a CA (spec.TLS.static of the old EtcdCluster)");
                return -EPERM;
        }
        *ret_ca = ca;
        *ret_fp = fp;
        return 0;
}

/* tls.provider auto: spec.adopt.ca's certificate is the old CA and the key is its key. */
static int given_ca(const takeover_tls_facts *f, const char *fp, const pki_cert *ca,
                    const char *which, pki_key **ret_key, char **ret_why)
{
        pki_cert *crt = NULL;
        _cleanup_free_ char *gfp = NULL;
        if (one_ca(&f->given_cert, &crt, &gfp, ret_why) < 0)
                return -EPERM;
        bool same = streq(gfp, fp);
        pki_cert_free(crt);
        if (!same) {
                *ret_why = xasprintf("%s is not the old cluster's CA (the CA of %s): gitcd must "
                                     "issue its members' certificates from the CA the old "
                                     "members trust",
                                     f->given_cert.what, which);
                return -EPERM;
        }
        if (!f->given_key.pem) {
                *ret_why = xasprintf("%s is missing: gitcd needs the CA's key to issue its "
                                     "members' certificates",
                                     f->given_key.what);
                return -EPERM;
        }
        pki_key *key = NULL;
        if (pki_key_from_pem(f->given_key.pem, strlen(f->given_key.pem), f->given_key.what, &key) <
            0) {
                *ret_why = xasprintf("%s holds no PEM private key", f->given_key.what);
                return -EPERM;
        }
        if (!pki_key_matches(key, ca)) {
                pki_key_free(key);
                *ret_why = xasprintf("%s is not the key of the CA certificate %s",
                                     f->given_key.what, f->given_cert.what);
                return -EPERM;
        }
        *ret_key = key;
        return 0;
}

/* tls.provider secrets: every Secret the spec names carries the old CA as its ca.crt. */
static int spec_cas(const takeover_tls_facts *f, const char *fp, const char *which, char **ret_why)
{
        for (size_t i = 0; i < ARRAY_SIZE(f->spec_ca); i++) {
                const takeover_pem *p = &f->spec_ca[i];
                if (!p->what)
                        continue;
                pki_cert *crt = NULL;
                _cleanup_free_ char *one = NULL;
                if (one_ca(p, &crt, &one, ret_why) < 0)
                        return -EPERM;
                pki_cert_free(crt);
                if (!streq(one, fp)) {
                        *ret_why = xasprintf("%s is not the old cluster's CA (the CA of %s): "
                                             "sign gitcd's certificates with the CA the old "
                                             "members trust",
                                             p->what, which);
                        return -EPERM;
                }
        }
        return 0;
}

int takeover_tls_judge(const takeover_tls_facts *f, const etcd_cluster *c, pki_cert **ret_ca,
                       pki_key **ret_key, char **ret_why)
{
        *ret_why = NULL;
        if (surfaces(f, c, ret_why) < 0)
                return -EPERM;
        if (c->tls.provider == TLS_PROVIDER_NONE)
                return 0;
        if (c->tls.provider != TLS_PROVIDER_AUTO && c->tls.provider != TLS_PROVIDER_SECRETS) {
                *ret_why = xasprintf("tls.provider %s cannot keep the old cluster's CA; use auto "
                                     "(with spec.adopt.ca) or secrets",
                                     tls_provider_name(c->tls.provider));
                return -EPERM;
        }
        pki_cert *ca = NULL;
        _cleanup_free_ char *fp = NULL;
        if (old_ca(f, &ca, &fp, ret_why) < 0)
                return -EPERM;
        const char *which = NULL;
        for (size_t i = 0; !which && i < TAKEOVER_TLS_OLD_CAS; i++)
                which = f->old_ca[i].what;
        pki_key *key = NULL;
        int k = c->tls.provider == TLS_PROVIDER_AUTO ? given_ca(f, fp, ca, which, &key, ret_why)
                                                     : spec_cas(f, fp, which, ret_why);
        if (k < 0) {
                pki_cert_free(ca);
                return -EPERM;
        }
        *ret_ca = ca;
        *ret_key = key;
        return 1;
}
