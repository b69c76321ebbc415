/*
 * tls.provider auto on the hosts target: pki/auto.c issues the CA and the
 * leaves on the gitcd host, under <state dir>/hosts/<namespace>/<name>/ in
 * the local target's layout (local-tls.c); each member's client/ and peer/
 * folders are copied into its tls_dir on its machine (files 0600, folders
 * 0700) before the file that starts it is written, and again on renew_tls.
 * gitcd's own client identity (operator/) never leaves the gitcd host.
 */

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "render/layout.h"
#include "targets/local-tls.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

/*
 * Where the gitcd host keeps a cluster's TLS material: the CA in pki/ and
 * each member's leaves in <member>/tls/ (the local target's layout, so
 * local-tls.c and pki/auto.c serve both). Only the client/ and peer/
 * folders travel to the machines; operator/ is gitcd's own identity.
 */
int ht_tls_home(hosts_target *ht, const etcd_cluster *c, char **ret)
{
        if (!ht->o.state_dir)
                return target_fail(&ht->base, -EOPNOTSUPP,
                                   "cluster %s/%s: TLS needs a state folder for the cluster CA",
                                   c->namespace_, c->name);
        if (!target_name_is_component(c->namespace_) || !target_name_is_component(c->name))
                return target_fail(&ht->base, -EINVAL, "invalid cluster name \"%s/%s\"",
                                   c->namespace_, c->name);
        char *dir = xasprintf("%s/hosts/%s/%s", ht->o.state_dir, c->namespace_, c->name);
        int k = mkdir_p(dir, 0700);
        if (k < 0) {
                free(dir);
                return target_fail(&ht->base, k, "cannot create the TLS folder of %s/%s: %s",
                                   c->namespace_, c->name, strerror(-k));
        }
        *ret = dir;
        return 0;
}

/* The plan with each member's tls_dir on the gitcd host (for local-tls.c). */
static membership_plan *local_plan(const etcd_cluster *c, const membership_plan *p,
                                   const char *home)
{
        membership_plan *lp = membership_plan_new(c);
        for (size_t i = 0; i < p->n; i++) {
                const member_plan *mp = &p->members[i];
                member_plan *m = membership_plan_add(lp);
                m->name = xstrdup_null(mp->name);
                m->ordinal = mp->ordinal;
                m->client_url = xstrdup_null(mp->client_url);
                m->peer_url = xstrdup_null(mp->peer_url);
                m->tls_dir = mp->name && target_name_is_component(mp->name)
                                 ? xasprintf("%s/%s/tls", home, mp->name)
                                 : NULL;
        }
        return lp;
}

/* Issue (or with renew, reissue what is due) the leaves on the gitcd host. */
int ht_tls_issue(hosts_target *ht, const etcd_cluster *c, const membership_plan *p,
                 const char *only, bool renew, int64_t now_ms)
{
        _cleanup_free_ char *home = NULL, *err = NULL;
        int k = ht_tls_home(ht, c, &home);
        if (k < 0)
                return k;
        _cleanup_(membership_plan_freep) membership_plan *lp = local_plan(c, p, home);
        k = local_tls_ensure(home, c, lp, only, renew, now_ms, &err);
        if (k < 0)
                return target_fail(&ht->base, k, "cluster %s/%s: %s", c->namespace_, c->name,
                                   err ? err : "TLS material cannot be issued");
        return k;
}

/*
 * Copy member mp's client/ and peer/ folders (and ca-bundle/ when used)
 * into its tls_dir on machine h: each file mode 0600 in folders mode 0700,
 * each written atomically.
 */
int ht_tls_upload(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                  const member_plan *mp)
{
        _cleanup_free_ char *home = NULL;
        int k = ht_tls_home(ht, c, &home);
        if (k < 0)
                return k;
        static const char *const subs[] = {TLS_SUBDIR_CLIENT, TLS_SUBDIR_PEER,
                                           TLS_SUBDIR_CA_BUNDLE};
        static const char *const files[] = {"tls.crt", "tls.key", "ca.crt"};
        for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
                _cleanup_free_ char *from = xasprintf("%s/%s/tls/%s", home, mp->name, subs[i]);
                if (!path_exists(from))
                        continue;
                _cleanup_free_ char *to = xasprintf("%s/%s", mp->tls_dir, subs[i]);
                _cleanup_free_ char *qt = ssh_quote(to);
                _cleanup_free_ char *mk = xasprintf("mkdir -p -m 0700 -- %s", qt);
                if ((k = run(ht, h, mk, NULL)) < 0)
                        return k;
                for (size_t j = 0; j < ARRAY_SIZE(files); j++) {
                        _cleanup_free_ char *src = path_join(from, files[j]);
                        _cleanup_free_ char *data = NULL;
                        size_t len = 0;
                        if (!path_exists(src))
                                continue;
                        k = read_file(src, 1 << 20, &data, &len);
                        if (k < 0)
                                return target_fail(&ht->base, k, "cannot read %s: %s", src,
                                                   strerror(-k));
                        _cleanup_free_ char *dst = path_join(to, files[j]);
                        k = ht_upload(ht, h, dst, data, len, 0600);
                        explicit_bzero(data, len);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

/* gitcd's client identity: the first member folder with an operator/ leaf. */
int ht_tls_client_files(hosts_target *ht, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                        char **ret_key)
{
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!ht->o.state_dir || !target_name_is_component(c->namespace_) ||
            !target_name_is_component(c->name))
                return 0;
        _cleanup_free_ char *home =
            xasprintf("%s/hosts/%s/%s", ht->o.state_dir, c->namespace_, c->name);
        DIR *d = opendir(home);
        if (!d)
                return 0;
        char *best = NULL;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || streq(de->d_name, "pki"))
                        continue;
                _cleanup_free_ char *cert =
                    xasprintf("%s/%s/tls/" TLS_SUBDIR_OPERATOR "/tls.crt", home, de->d_name);
                if (path_exists(cert) && (!best || strcmp(de->d_name, best) < 0))
                        str_assign(&best, xstrdup(de->d_name));
        }
        closedir(d);
        if (!best)
                return 0;
        _cleanup_free_ char *op = xasprintf("%s/%s/tls/" TLS_SUBDIR_OPERATOR, home, best);
        free(best);
        *ret_ca = path_join(op, "ca.crt");
        *ret_cert = path_join(op, "tls.crt");
        *ret_key = path_join(op, "tls.key");
        return 0;
}

int hosts_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                     char **ret_key)
{
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!render_client_tls(c))
                return 0;
        return ht_tls_client_files(HT(t), c, ret_ca, ret_cert, ret_key);
}

int hosts_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                           target_cert **ret_certs, size_t *ret_n)
{
        hosts_target *ht = HT(t);
        *ret_certs = NULL;
        *ret_n = 0;
        if (!auto_tls(c) || !ht->o.state_dir)
                return 0;
        _cleanup_free_ char *home = NULL;
        int k = ht_tls_home(ht, c, &home);
        if (k < 0)
                return k;
        _cleanup_(membership_plan_freep) membership_plan *lp = local_plan(c, p, home);
        return local_tls_certificates(home, c, lp, ret_certs, ret_n);
}

/*
 * Renewal: reissue the member's due leaves on the gitcd host, then copy its
 * folders to its machine. No restart: etcd reads its leaf files again for
 * every new connection.
 */
int hosts_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p, const char *member,
                    int64_t now_ms)
{
        hosts_target *ht = HT(t);
        if (!member || !auto_tls(c))
                return 0; /* every leaf lives in a member's folder */
        if (c->hosts.set)
                ht_remember(ht, c);
        int issued = ht_tls_issue(ht, c, p, member, true, now_ms);
        if (issued <= 0)
                return issued;
        for (size_t i = 0; i < p->n; i++) {
                const member_plan *mp = &p->members[i];
                if (!streq_ptr(mp->name, member))
                        continue;
                int m = ht_machine_of_url(c, mp->peer_url);
                if (m < 0)
                        return target_fail(t, -EINVAL,
                                           "member %s: its peer URL %s is on no "
                                           "machine",
                                           mp->name, mp->peer_url ? mp->peer_url : "(none)");
                int k = ht_tls_upload(ht, c, &c->hosts.items[m], mp);
                if (k < 0)
                        return k;
        }
        return issued;
}
