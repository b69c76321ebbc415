/*
 * `tls.provider: auto` for the local target: the cluster CA and leaf
 * issuance are pki/auto.c's; this file only says where the local target
 * puts each leaf (each member's tls_dir, in the folders the rendered
 * command line names, render/layout.h) and which names it carries (the
 * host of the member's URL, plus localhost and 127.0.0.1).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pki/auto.h"
#include "render/layout.h"
#include "targets/local-tls.h"
#include "util/fs.h"
#include "util/xalloc.h"

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

/* Members hold certificates the CA signed: half a CA must not be silently replaced. */
static bool members_depend(const membership_plan *p)
{
        for (size_t i = 0; i < p->n; i++)
                for (size_t j = 0; !isempty(p->members[i].tls_dir) && j < PKI_AUTO_LEAVES; j++) {
                        _cleanup_free_ char *dir =
                            path_join(p->members[i].tls_dir, pki_auto_leaf_dirs[j]);
                        if (pki_auto_leaf_exists(dir))
                                return true;
                }
        return false;
}

int local_tls_certificates(const char *cluster_dir, const etcd_cluster *c, const membership_plan *p,
                           target_cert **ret, size_t *ret_n)
{
        target_cert *v = NULL;
        size_t n = 0;
        if (c->tls.provider == TLS_PROVIDER_AUTO)
                for (size_t i = 0; i < p->n; i++) {
                        const member_plan *mp = &p->members[i];
                        for (size_t j = 0; !isempty(mp->tls_dir) && j < PKI_AUTO_LEAVES; j++) {
                                _cleanup_free_ char *dir =
                                    path_join(mp->tls_dir, pki_auto_leaf_dirs[j]);
                                int64_t not_after;
                                char *serial = NULL;
                                if (pki_leaf_info(dir, &not_after, &serial) < 0)
                                        continue; /* not issued (yet), or not readable: reissued */
                                v = xrealloc(v, (n + 1) * sizeof(*v));
                                v[n++] = (target_cert){
                                    .member = xstrdup(mp->name),
                                    .surface = xstrdup(pki_auto_leaf_dirs[j]),
                                    .not_after_ms = not_after,
                                    .serial = serial,
                                };
                        }
                }
        if (c->tls.provider == TLS_PROVIDER_AUTO && cluster_dir) {
                _cleanup_free_ char *pki = path_join(cluster_dir, "pki");
                target_certs_add_ca(&v, &n, pki);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int local_tls_ensure(const char *cluster_dir, const etcd_cluster *c, const membership_plan *p,
                     const char *only_member, bool renew, int64_t now_ms, char **ret_error)
{
        pki_auto_leaf_kind leaves[PKI_AUTO_LEAVES];
        if (!pki_auto_leaves(c, leaves))
                return 0;
        _cleanup_(pki_auto_freep) pki_auto *a = NULL;
        int r = pki_auto_open(cluster_dir, c, members_depend(p), &a);
        if (r < 0) {
                *ret_error = xasprintf("cluster CA in %s/pki: %s", cluster_dir, pki_last_error());
                return r;
        }
        const char *ca_pem = pki_auto_ca_pem(a);
        int issued = 0;
        for (size_t i = 0; i < p->n; i++) {
                const member_plan *mp = &p->members[i];
                if (isempty(mp->tls_dir) || isempty(mp->name) ||
                    (only_member && !streq(only_member, mp->name)))
                        continue;
                for (size_t j = 0; j < ARRAY_SIZE(leaves); j++) {
                        if (!leaves[j].on)
                                continue;
                        /* a server certificate names the member's own host */
                        const char *url =
                            streq(leaves[j].sub, TLS_SUBDIR_PEER) ? mp->peer_url : mp->client_url;
                        _cleanup_free_ char *host = leaves[j].server ? url_host(url) : NULL;
                        const char *dns[3] = {"localhost", NULL, NULL};
                        const char *ips[3] = {"127.0.0.1", NULL, NULL};
                        if (host && !streq(host, "localhost") && !streq(host, "127.0.0.1")) {
                                if (looks_like_ip(host))
                                        ips[1] = host;
                                else
                                        dns[1] = host;
                        }
                        bool server = leaves[j].server;
                        _cleanup_free_ char *dir = path_join(mp->tls_dir, leaves[j].sub);
                        r = pki_auto_leaf(a, dir, server ? mp->name : "root", server ? dns : NULL,
                                          server ? ips : NULL, server, renew, now_ms);
                        if (r < 0) {
                                *ret_error = xasprintf("cannot issue the certificate in %s: %s",
                                                       dir, pki_last_error());
                                return r;
                        }
                        issued += r;
                }
                if (!isempty(c->tls.ca_bundle_secret)) {
                        /* The rendered command trusts ca-bundle/ca.crt instead: our CA. */
                        _cleanup_free_ char *dir = path_join(mp->tls_dir, TLS_SUBDIR_CA_BUNDLE);
                        _cleanup_free_ char *f = path_join(dir, "ca.crt");
                        r = mkdir_p(dir, 0700);
                        if (r >= 0)
                                r = write_file_atomic(f, ca_pem, strlen(ca_pem), 0644);
                        if (r < 0) {
                                *ret_error = xasprintf("cannot write %s: %s", f, strerror(-r));
                                return r;
                        }
                }
        }
        return issued;
}

/* Does any member folder under cluster_dir hold a leaf (<member>/tls/<leaf>/tls.crt)? */
static bool cluster_members_depend(const char *cluster_dir)
{
        DIR *d = opendir(cluster_dir);
        if (!d)
                return false;
        bool depend = false;
        struct dirent *de;
        while (!depend && (de = readdir(d))) {
                if (de->d_name[0] == '.' || streq(de->d_name, "pki"))
                        continue;
                for (size_t j = 0; !depend && j < PKI_AUTO_LEAVES; j++) {
                        _cleanup_free_ char *dir = xasprintf("%s/%s/tls/%s", cluster_dir,
                                                             de->d_name, pki_auto_leaf_dirs[j]);
                        depend = pki_auto_leaf_exists(dir);
                }
        }
        closedir(d);
        return depend;
}

int local_tls_version(const char *cluster_dir, const etcd_cluster *c, char **ret, char **ret_error)
{
        /* a cluster without auto TLS has no version: its folders are not read (each pass) */
        bool depend = pki_auto_trusted(c) && cluster_members_depend(cluster_dir);
        int r = pki_auto_trust_version(cluster_dir, c, depend, ret);
        if (r < 0)
                *ret_error = xasprintf("cluster CA in %s/pki: %s", cluster_dir, pki_last_error());
        return r;
}
