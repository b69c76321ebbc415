/*
 * The auto-TLS module (pki/auto.h): one place that decides the CA's name
 * and lifetime, the leaf lifetime and renewal window, and when a leaf is
 * reissued. Targets only choose folders and names.
 *
 * Decisions: the CA's commonName names the cluster ("gitcd ns/name etcd
 * CA") and lives 10 years; leaves live tls.validityDays (90) and are
 * reissued within tls.renewBeforeDays (30; a third of the lifetime when
 * that is not shorter). etcd reads its certificate files on every
 * handshake, so a reissued leaf takes effect without a restart.
 */
#include <errno.h>
#include <string.h>

#include "pki/auto.h"
#include "render/render.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CA_DAYS 3650

struct pki_auto {
        pki_key *ca_key;
        pki_cert *ca_cert;
        char *ca_pem;
        int days;
        int renew_days;
};

void pki_auto_free(pki_auto *a)
{
        if (!a)
                return;
        pki_key_free(a->ca_key);
        pki_cert_free(a->ca_cert);
        free(a->ca_pem);
        free(a);
}

int pki_auto_open(const char *cluster_dir, const etcd_cluster *c, bool members_depend,
                  pki_auto **ret)
{
        _cleanup_free_ char *dir = path_join(cluster_dir, "pki");
        const char *ns = isempty(c->namespace_) ? "default" : c->namespace_;
        _cleanup_free_ char *cn = xasprintf("gitcd %.20s/%.30s etcd CA", ns, c->name);
        _cleanup_(pki_auto_freep) pki_auto *a = XNEW(pki_auto);
        int r = pki_ca_open(dir, cn, CA_DAYS, members_depend, &a->ca_key, &a->ca_cert);
        if (r < 0)
                return r;
        r = pki_cert_to_pem(a->ca_cert, &a->ca_pem);
        if (r < 0)
                return r;
        a->days = c->tls.validity_days > 0 ? c->tls.validity_days : 90;
        a->renew_days = c->tls.renew_before_days > 0 ? c->tls.renew_before_days : 30;
        if (a->renew_days >= a->days)
                a->renew_days = a->days / 3;
        *ret = TAKE_PTR(a);
        return 0;
}

const char *pki_auto_ca_pem(const pki_auto *a)
{
        return a->ca_pem;
}

int pki_auto_trust_version(const char *cluster_dir, const etcd_cluster *c, bool members_depend,
                           char **ret)
{
        if (c->tls.provider != TLS_PROVIDER_AUTO ||
            (!render_client_tls(c) && !render_peer_tls(c))) {
                *ret = NULL;
                return 0;
        }
        _cleanup_(pki_auto_freep) pki_auto *a = NULL;
        int r = pki_auto_open(cluster_dir, c, members_depend, &a);
        if (r < 0)
                return r;
        /* Client and peer trust the same CA: one bundle, one fingerprint. */
        return pki_bundle_fingerprint(a->ca_pem, strlen(a->ca_pem), ret);
}

bool pki_auto_leaf_exists(const char *dir)
{
        _cleanup_free_ char *crt = path_join(dir, "tls.crt");
        return path_exists(crt);
}

int pki_auto_leaf(pki_auto *a, const char *dir, const char *cn, const char *const *dns,
                  const char *const *ips, bool server)
{
        if (pki_leaf_is_current(dir, a->ca_cert, dns, ips, a->renew_days))
                return 0;
        pki_cert_request req = {
            .cn = cn,
            .dns_names = dns,
            .ip_addresses = ips,
            .days = a->days,
            .server = server,
            .client = true,
        };
        _cleanup_free_ char *crt = path_join(dir, "tls.crt");
        _cleanup_free_ char *key = path_join(dir, "tls.key");
        _cleanup_free_ char *cacrt = path_join(dir, "ca.crt");
        pki_key *k = NULL;
        pki_cert *cert = NULL;
        int r = mkdir_p(dir, 0700);
        if (r < 0)
                return pki_error(r, "cannot create %s: %s", dir, strerror(-r));
        r = pki_cert_issue(a->ca_cert, a->ca_key, &req, &k, &cert);
        if (r >= 0) {
                r = write_file_atomic(cacrt, a->ca_pem, strlen(a->ca_pem), 0644);
                if (r < 0)
                        (void)pki_error(r, "cannot write %s: %s", cacrt, strerror(-r));
        }
        if (r >= 0)
                r = pki_write_pem(crt, key, cert, k);
        pki_key_free(k);
        pki_cert_free(cert);
        return r < 0 ? r : 1;
}
