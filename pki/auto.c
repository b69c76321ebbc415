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
 *
 * CA rotation (reconciler/carotate.c records the phase; this file moves
 * the folders to it, idempotently, whenever the CA is opened with
 * c->tls.ca_rotation_phase set). Three sibling folders of the cluster dir:
 *   pki/       the signer: leaves are issued from it;
 *   pki-next/  phase 1: the incoming CA, trusted but not signing yet;
 *   pki-old/   phase 2: the retiring CA (it was pki/), trusted, not signing.
 * Phase 1 creates pki-next; phase 2 promotes it (pki -> pki-old, then
 * pki-next -> pki; a crash between the two renames leaves no pki/ beside
 * both others, which only a promotion produces, and is finished on the
 * next open); phase 3 deletes pki-old, the old key with it. The trust
 * bundle every member gets as ca.crt is pki-old + pki + pki-next, in that
 * order, so it is the same old+new bundle (same fingerprint, no restart)
 * in phases 1 and 2, and only pki's CA after phase 3.
 *
 * Why members restart in phases 1 and 3 (through the trust version in
 * their config hash) but not in phase 2: etcd (client/pkg/transport/
 * listener.go, 3.4 to main) reloads the leaf on every handshake through
 * tls.Config.GetCertificate / GetClientCertificate, but builds
 * ClientCAs (ServerConfig) and RootCAs (ClientConfig) with
 * tlsutil.NewCertPool once, when the listener and peer transport are
 * made: a changed trusted-ca-file is only read at start.
 *
 * Between rotations, a leaf signed by a CA of the bundle other than the
 * signer counts as current unless renewing (phase 2 reissues each
 * member's leaves on purpose, one member at a time, through renew_tls),
 * and a current leaf whose ca.crt is not the bundle gets the bundle
 * written in its place (etcd reads it at its next start).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pki/auto.h"
#include "render/layout.h"
#include "render/render.h"
#include "util/filememo.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define CA_DAYS 3650

struct pki_auto {
        pki_key *ca_key;
        pki_cert *ca_cert;
        pki_cert *others[2]; /* pki-old's and pki-next's CA, when there */
        char *ca_pem;        /* the trust bundle: pki-old, pki, pki-next */
        int64_t seconds;
        int64_t renew_seconds;
};

void pki_auto_free(pki_auto *a)
{
        if (!a)
                return;
        pki_key_free(a->ca_key);
        pki_cert_free(a->ca_cert);
        for (size_t i = 0; i < ARRAY_SIZE(a->others); i++)
                pki_cert_free(a->others[i]);
        free(a->ca_pem);
        free(a);
}

static int fsync_parent(const char *path);

/* Rename with a message; the caller syncs the folder. */
static int rename_dir(const char *from, const char *to)
{
        if (rename(from, to) < 0)
                return pki_error(-errno, "cannot rename %s to %s: %s", from, to, strerror(errno));
        return 0;
}

/* Bring the CA folders of cluster_dir to the rotation phase (see the top of the file). */
static int rotate_to(const char *cluster_dir, int phase, const char *cn)
{
        _cleanup_free_ char *cur = path_join(cluster_dir, "pki");
        _cleanup_free_ char *next = path_join(cluster_dir, "pki-next");
        _cleanup_free_ char *old = path_join(cluster_dir, "pki-old");
        int r = 0;
        /* A promotion killed between its renames, whatever the phase says. */
        if (!path_exists(cur) && path_exists(old) && path_exists(next)) {
                r = rename_dir(next, cur);
                if (r >= 0)
                        r = fsync_parent(cur);
                if (r < 0)
                        return r;
        }
        switch (phase) {
        case 1:
                if (path_exists(old))
                        return pki_error(-EBADMSG,
                                         "%s is left from an earlier CA rotation while a new one "
                                         "starts; remove it once no member trusts that CA only",
                                         old);
                /* Only with a signer to rotate from: a new cluster gets pki/ first. */
                if (!path_exists(cur) || path_exists(next))
                        return 0;
                {
                        pki_key *k = NULL;
                        pki_cert *crt = NULL;
                        r = pki_ca_open(next, cn, CA_DAYS, false, &k, &crt);
                        pki_key_free(k);
                        pki_cert_free(crt);
                }
                return r < 0 ? r : fsync_parent(next);
        case 2:
                if (!path_exists(next))
                        return 0; /* promoted already */
                if (path_exists(old))
                        return pki_error(-EBADMSG,
                                         "%s and %s both exist: a promotion cannot tell which CA "
                                         "retires",
                                         old, next);
                r = rename_dir(cur, old);
                if (r >= 0)
                        r = rename_dir(next, cur);
                if (r >= 0)
                        r = fsync_parent(cur);
                return r;
        case 3:
                if (!path_exists(old))
                        return 0;
                r = rm_rf(old);
                if (r < 0)
                        return pki_error(r, "cannot delete %s: %s", old, strerror(-r));
                return fsync_parent(old);
        default:
                return 0;
        }
}

/* The CA certificate <cluster_dir>/<name>/ca.crt; NULL when there is none. */
static int load_other(const char *cluster_dir, const char *name, pki_cert **ret)
{
        _cleanup_free_ char *dir = path_join(cluster_dir, name);
        _cleanup_free_ char *crt = path_join(dir, "ca.crt");
        *ret = NULL;
        if (!path_exists(crt))
                return 0;
        return pki_cert_load(crt, ret);
}

/* The PEM of crt (when not NULL) appended to *pem. */
static int append_pem(char **pem, const pki_cert *crt)
{
        if (!crt)
                return 0;
        _cleanup_free_ char *p = NULL;
        int r = pki_cert_to_pem(crt, &p);
        if (r < 0)
                return r;
        char *joined = xasprintf("%s%s", *pem ? *pem : "", p);
        free(*pem);
        *pem = joined;
        return 0;
}

int pki_auto_open(const char *cluster_dir, const etcd_cluster *c, bool members_depend,
                  pki_auto **ret)
{
        _cleanup_free_ char *dir = path_join(cluster_dir, "pki");
        const char *ns = isempty(c->namespace_) ? "default" : c->namespace_;
        _cleanup_free_ char *cn = xasprintf("gitcd %.20s/%.30s etcd CA", ns, c->name);
        _cleanup_(pki_auto_freep) pki_auto *a = XNEW(pki_auto);
        int r = rotate_to(cluster_dir, c->tls.ca_rotation_phase, cn);
        if (r < 0)
                return r;
        r = pki_ca_open(dir, cn, CA_DAYS, members_depend, &a->ca_key, &a->ca_cert);
        if (r < 0)
                return r;
        r = load_other(cluster_dir, "pki-old", &a->others[0]);
        if (r >= 0)
                r = load_other(cluster_dir, "pki-next", &a->others[1]);
        if (r >= 0)
                r = append_pem(&a->ca_pem, a->others[0]);
        if (r >= 0)
                r = append_pem(&a->ca_pem, a->ca_cert);
        if (r >= 0)
                r = append_pem(&a->ca_pem, a->others[1]);
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

bool pki_auto_trusted(const etcd_cluster *c)
{
        return c->tls.provider == TLS_PROVIDER_AUTO && (render_client_tls(c) || render_peer_tls(c));
}

/*
 * The trust versions read, kept while the cluster's CA folders and files
 * stay as they were (util/filememo.h): the target asks for it for every
 * member each pass. A pki_auto_open() that changed nothing is all the
 * memo skips: it is not kept when a folder or file changed meanwhile (a
 * CA created, a rotation's step taken), and a new rotation phase or name
 * is another key.
 */
static filememo trust_versions = FILEMEMO_INIT(filememo_strdup, filememo_free);

int pki_auto_trust_version(const char *cluster_dir, const etcd_cluster *c, bool members_depend,
                           char **ret)
{
        if (!pki_auto_trusted(c)) {
                *ret = NULL;
                return 0;
        }
        const char *ns = isempty(c->namespace_) ? "default" : c->namespace_;
        _cleanup_free_ char *key =
            xasprintf("%s\n%s/%s\n%d", cluster_dir, ns, c->name, (int)c->tls.ca_rotation_phase);
        const char *names[] = {
            "pki",      "pki/ca.crt",     "pki/ca.key", "pki-old", "pki-old/ca.crt",
            "pki-next", "pki-next/ca.crt"};
        char *paths[ARRAY_SIZE(names)];
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                paths[i] = path_join(cluster_dir, names[i]);
        const char *const *cpaths = (const char *const *)paths;
        file_id ids[ARRAY_SIZE(names)];
        int r = 0;
        if (!filememo_get(&trust_versions, key, cpaths, ARRAY_SIZE(names), (void **)ret)) {
                filememo_ids(cpaths, ARRAY_SIZE(names), ids);
                _cleanup_(pki_auto_freep) pki_auto *a = NULL;
                r = pki_auto_open(cluster_dir, c, members_depend, &a);
                /* Client and peer trust the same CAs: one bundle, one fingerprint. */
                if (r >= 0)
                        r = pki_bundle_fingerprint(a->ca_pem, strlen(a->ca_pem), ret);
                if (r >= 0)
                        filememo_put(&trust_versions, key, ids, ARRAY_SIZE(names), *ret);
        }
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                free(paths[i]);
        return r;
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

/* Is the leaf in dir current: from the signer or, unless renewing, another trusted CA? */
static bool leaf_current(const pki_auto *a, const char *dir, const char *const *dns,
                         const char *const *ips, bool renew, int64_t now_ms)
{
        int64_t window = renew ? a->renew_seconds : 0;
        if (pki_leaf_is_current(dir, a->ca_cert, dns, ips, window, now_ms))
                return true;
        for (size_t i = 0; !renew && i < ARRAY_SIZE(a->others); i++)
                if (a->others[i] && pki_leaf_is_current(dir, a->others[i], dns, ips, 0, now_ms))
                        return true;
        return false;
}

/* A kept leaf's ca.crt becomes the bundle when it is another (a rotation's phase 1 or 3). */
static int refresh_bundle(const pki_auto *a, const char *dir)
{
        _cleanup_free_ char *cacrt = path_join(dir, "ca.crt");
        _cleanup_free_ char *have = NULL;
        size_t len = 0;
        if (read_file(cacrt, 1024 * 1024, &have, &len) >= 0 && len == strlen(a->ca_pem) &&
            memcmp(have, a->ca_pem, len) == 0)
                return 0;
        int r = write_file_atomic(cacrt, a->ca_pem, strlen(a->ca_pem), 0644);
        if (r < 0)
                return pki_error(r, "cannot write %s: %s", cacrt, strerror(-r));
        return 0;
}

int pki_auto_leaf(pki_auto *a, const char *dir, const char *cn, const char *const *dns,
                  const char *const *ips, bool server, bool renew, int64_t now_ms)
{
        if (leaf_current(a, dir, dns, ips, renew, now_ms))
                return refresh_bundle(a, dir);
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

const char *const pki_auto_leaf_dirs[PKI_AUTO_LEAVES] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER,
                                                         TLS_SUBDIR_OPERATOR};

bool pki_auto_leaves(const etcd_cluster *c, pki_auto_leaf_kind ret[PKI_AUTO_LEAVES])
{
        bool client = render_client_tls(c), peer = render_peer_tls(c);
        ret[0] = (pki_auto_leaf_kind){pki_auto_leaf_dirs[0], client, true};
        ret[1] = (pki_auto_leaf_kind){pki_auto_leaf_dirs[1], peer, true};
        ret[2] = (pki_auto_leaf_kind){pki_auto_leaf_dirs[2], client, false};
        return c->tls.provider == TLS_PROVIDER_AUTO && (client || peer);
}
