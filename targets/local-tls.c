/*
 * `tls.provider: auto` for the local target: gitcd is the CA. On
 * Kubernetes the same material goes into Secrets that members mount; here
 * it is written straight into each member's tls_dir, in the folders the
 * rendered command line names (render/layout.h).
 *
 * Design: the CA lives once per cluster, in <cluster dir>/pki/ (key mode
 * 0600), and outlives its members. Leaf certificates are checked on every
 * call and reissued when missing, not signed by the current CA, not
 * matching their key, or within renew_before_days of expiry. etcd reads its
 * certificate files on every handshake, so a reissued certificate takes
 * effect without a restart.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pki/pki.h"
#include "render/layout.h"
#include "targets/local-tls.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define CA_DAYS 3650

DEFINE_TRIVIAL_CLEANUP_FUNC(pki_key *, pki_key_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(pki_cert *, pki_cert_free);

static int fail(char **ret_error, int err, const char *fmt, ...) _printf_(3, 4);

static int fail(char **ret_error, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        free(*ret_error);
        *ret_error = xvasprintf(fmt, ap);
        va_end(ap);
        return err;
}

/* Load the cluster CA from <cluster dir>/pki, creating it on first use. */
static int ensure_ca(const char *cluster_dir, const etcd_cluster *c, pki_key **ret_key,
                     pki_cert **ret_cert, char **ret_error)
{
        _cleanup_free_ char *dir = path_join(cluster_dir, "pki");
        _cleanup_free_ char *cn = xasprintf("gitcd %.20s/%.30s etcd CA", c->namespace_, c->name);
        int r = pki_ca_load_or_create(dir, cn, CA_DAYS, ret_key, ret_cert);
        if (r < 0)
                return fail(ret_error, r, "cluster CA in %s: %s", dir, pki_last_error());
        return 0;
}

/* "https://127.0.0.1:2379" -> "127.0.0.1" (newly allocated; NULL when there is no host). */
static char *url_host(const char *url)
{
        if (isempty(url))
                return NULL;
        const char *h = strstr(url, "://");
        h = h ? h + 3 : url;
        size_t len = strcspn(h, ":/,");
        return len ? xstrndup(h, len) : NULL;
}

static bool looks_like_ip(const char *s)
{
        return strspn(s, "0123456789.") == strlen(s) || strchr(s, ':');
}

static int issue_leaf(const char *dir, const pki_cert *ca_cert, const pki_key *ca_key,
                      const char *ca_pem, const char *cn, const char *url, bool server, int days,
                      char **ret_error)
{
        _cleanup_free_ char *host = url_host(url);
        const char *dns[3] = {"localhost", NULL, NULL};
        const char *ips[3] = {"127.0.0.1", NULL, NULL};
        if (host && !streq(host, "localhost") && !streq(host, "127.0.0.1")) {
                if (looks_like_ip(host))
                        ips[1] = host;
                else
                        dns[1] = host;
        }
        pki_cert_request req = {
            .cn = cn,
            .dns_names = server ? dns : NULL,
            .ip_addresses = server ? ips : NULL,
            .days = days,
            .server = server,
            .client = true,
        };
        int r = mkdir_p(dir, 0700);
        if (r < 0)
                return fail(ret_error, r, "cannot create %s: %s", dir, strerror(-r));
        _cleanup_(pki_key_freep) pki_key *k = NULL;
        _cleanup_(pki_cert_freep) pki_cert *cert = NULL;
        _cleanup_free_ char *crt = path_join(dir, "tls.crt");
        _cleanup_free_ char *key = path_join(dir, "tls.key");
        _cleanup_free_ char *cacrt = path_join(dir, "ca.crt");
        r = pki_cert_issue(ca_cert, ca_key, &req, &k, &cert);
        if (r >= 0)
                r = write_file_atomic(cacrt, ca_pem, strlen(ca_pem), 0644);
        if (r >= 0)
                r = pki_write_pem(crt, key, cert, k);
        if (r < 0)
                return fail(ret_error, r, "cannot issue the certificate in %s: %s", dir,
                            pki_last_error());
        return 1;
}

int local_tls_ensure(const char *cluster_dir, const etcd_cluster *c, const membership_plan *p,
                     char **ret_error)
{
        bool client = c->tls.client.enabled, peer = c->tls.peer.enabled;
        if (c->tls.provider != TLS_PROVIDER_AUTO || (!client && !peer))
                return 0;
        _cleanup_(pki_key_freep) pki_key *ca_key = NULL;
        _cleanup_(pki_cert_freep) pki_cert *ca_cert = NULL;
        int r = ensure_ca(cluster_dir, c, &ca_key, &ca_cert, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *ca_pem = NULL;
        r = pki_cert_to_pem(ca_cert, &ca_pem);
        if (r < 0)
                return fail(ret_error, r, "cluster CA: %s", pki_last_error());
        int days = c->tls.validity_days > 0 ? c->tls.validity_days : 90;
        int renew = c->tls.renew_before_days > 0 ? c->tls.renew_before_days : 30;
        if (renew >= days)
                renew = days / 3;
        int issued = 0;
        for (size_t i = 0; i < p->n; i++) {
                const member_plan *mp = &p->members[i];
                if (isempty(mp->tls_dir) || isempty(mp->name))
                        continue;
                struct {
                        const char *sub;
                        bool on;
                        const char *cn;
                        const char *url;
                        bool server;
                } leaves[] = {
                    {TLS_SUBDIR_CLIENT, client, mp->name, mp->client_url, true},
                    {TLS_SUBDIR_PEER, peer, mp->name, mp->peer_url, true},
                    {TLS_SUBDIR_OPERATOR, client, "root", NULL, false},
                };
                for (size_t j = 0; j < ARRAY_SIZE(leaves); j++) {
                        if (!leaves[j].on)
                                continue;
                        _cleanup_free_ char *dir = path_join(mp->tls_dir, leaves[j].sub);
                        if (pki_leaf_is_current(dir, ca_cert, NULL, NULL, renew))
                                continue;
                        r = issue_leaf(dir, ca_cert, ca_key, ca_pem, leaves[j].cn, leaves[j].url,
                                       leaves[j].server, days, ret_error);
                        if (r < 0)
                                return r;
                        issued++;
                }
                if (!isempty(c->tls.ca_bundle_secret)) {
                        /* The rendered command trusts ca-bundle/ca.crt instead: our CA. */
                        _cleanup_free_ char *dir = path_join(mp->tls_dir, TLS_SUBDIR_CA_BUNDLE);
                        _cleanup_free_ char *f = path_join(dir, "ca.crt");
                        r = mkdir_p(dir, 0700);
                        if (r >= 0)
                                r = write_file_atomic(f, ca_pem, strlen(ca_pem), 0644);
                        if (r < 0)
                                return fail(ret_error, r, "cannot write %s: %s", f, strerror(-r));
                }
        }
        return issued;
}
