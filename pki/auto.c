/*
 * The auto-TLS module (pki/auto.h): one place that decides the CA's name
 * and lifetime, the leaf lifetime and renewal window, and when a leaf is
 * reissued. Targets only choose folders and names.
 *
 * Decisions: the CA's commonName names the cluster ("gitcd ns/name etcd
 * CA") and lives 10 years; leaves live tls.auto.validity (90 days, down
 * to seconds) and are reissued within tls.auto.renewBefore (30 days; a
 * third of the lifetime when that is not shorter), or as soon as they are
 * expired, not yet valid, or signed by another CA.
 *
 * A reissued leaf becomes visible whole: the new tls.crt, tls.key and
 * ca.crt are written into <dir>.next and the two folders are swapped with
 * renameat2(RENAME_EXCHANGE), so a reader opening files by path sees the
 * old set or the new set, never a certificate beside another key. etcd
 * (3.4 and 3.5) loads its leaf files again for every new TLS connection,
 * so with the CA unchanged a swap takes effect without a restart; open
 * connections keep the old certificate until they are re-established
 * (measured: tests/e2e/test-tls-renewal.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pki/auto.h"
#include "render/render.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CA_DAYS 3650

struct pki_auto {
        pki_key *ca_key;
        pki_cert *ca_cert;
        char *ca_pem;
        int64_t seconds;
        int64_t renew_seconds;
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
        pki_auto_lifetime(c, &a->seconds, &a->renew_seconds);
        *ret = TAKE_PTR(a);
        return 0;
}

void pki_auto_lifetime(const etcd_cluster *c, int64_t *ret_seconds, int64_t *ret_renew_seconds)
{
        int64_t s = c->tls.validity_seconds > 0 ? c->tls.validity_seconds : 90 * TLS_DAY_SECONDS;
        int64_t renew =
            c->tls.renew_before_seconds > 0 ? c->tls.renew_before_seconds : 30 * TLS_DAY_SECONDS;
        if (renew >= s)
                renew = s / 3;
        *ret_seconds = s;
        *ret_renew_seconds = renew;
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

/* Write the three files of a new leaf into the empty folder next. */
static int write_leaf(const pki_auto *a, const char *next, const pki_cert_request *req)
{
        _cleanup_free_ char *crt = path_join(next, "tls.crt");
        _cleanup_free_ char *key = path_join(next, "tls.key");
        _cleanup_free_ char *cacrt = path_join(next, "ca.crt");
        pki_key *k = NULL;
        pki_cert *cert = NULL;
        int r = pki_cert_issue(a->ca_cert, a->ca_key, req, &k, &cert);
        if (r >= 0) {
                r = write_file_atomic(cacrt, a->ca_pem, strlen(a->ca_pem), 0644);
                if (r < 0)
                        (void)pki_error(r, "cannot write %s: %s", cacrt, strerror(-r));
        }
        if (r >= 0)
                r = pki_write_pem(crt, key, cert, k);
        pki_key_free(k);
        pki_cert_free(cert);
        return r;
}

/* "/a/b/c" -> "/a/b"; "c" -> "." */
static char *parent_of(const char *path)
{
        const char *slash = strrchr(path, '/');
        if (!slash)
                return xstrdup(".");
        return slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
}

/* Make a rename in the folder holding path durable. */
static int fsync_parent(const char *path)
{
        int r = fsync_parent_dir(path);
        if (r < 0)
                return pki_error(r, "cannot sync the folder of %s: %s", path, strerror(-r));
        return 0;
}

/* Make next the content of dir in one step; next is gone afterwards. */
static int swap_in(const char *next, const char *dir)
{
        if (!path_exists(dir)) {
                if (rename(next, dir) < 0)
                        return pki_error(-errno, "cannot rename %s to %s: %s", next, dir,
                                         strerror(errno));
                return fsync_parent(dir);
        }
        if (renameat2(AT_FDCWD, next, AT_FDCWD, dir, RENAME_EXCHANGE) < 0)
                return pki_error(-errno, "cannot swap %s and %s: %s", next, dir, strerror(errno));
        int r = fsync_parent(dir);
        (void)rm_rf(next); /* the old leaf */
        return r;
}

int pki_auto_leaf(pki_auto *a, const char *dir, const char *cn, const char *const *dns,
                  const char *const *ips, bool server, bool renew, int64_t now_ms)
{
        if (pki_leaf_is_current(dir, a->ca_cert, dns, ips, renew ? a->renew_seconds : 0, now_ms))
                return 0;
        pki_cert_request req = {
            .cn = cn,
            .dns_names = dns,
            .ip_addresses = ips,
            .seconds = a->seconds,
            .server = server,
            .client = true,
        };
        _cleanup_free_ char *next = xasprintf("%s.next", dir);
        _cleanup_free_ char *parent = parent_of(dir);
        int r = mkdir_p(parent, 0700);
        if (r >= 0) {
                (void)rm_rf(next); /* left by a writer that was killed */
                r = mkdir_p(next, 0700);
        }
        if (r < 0)
                return pki_error(r, "cannot create %s: %s", next, strerror(-r));
        r = write_leaf(a, next, &req);
        if (r >= 0)
                r = swap_in(next, dir);
        if (r < 0) {
                (void)rm_rf(next);
                return r;
        }
        return 1;
}
