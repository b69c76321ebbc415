/*
 * The hosts target's reads and writes for adoption (hosts-adopt.h): what a
 * machine's kubeadm manifest or etcd.service runs (parsed by hosts-unit.c
 * and hosts-adopt.c), the CA its members trust, the claim of its data and
 * the retirement of what ran a member before, for hosts-adopt-ops.c.
 * Nothing here decides whether a cluster may be adopted.
 */

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "pki/pki.h"
#include "targets/health.h"
#include "util/strbuf.h"
#include "targets/locked.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

static char *kubeadm_manifest(const host_spec *h);

/*
 * Wait until the etcd a removed static Pod, or the unit etcd.service that
 * was disabled, ran no longer listens on its client and peer ports: the
 * kubelet stops a Pod on its own schedule, and a data directory must not
 * move (or go) under a running etcd, nor a new member start beside it.
 * gitcd's own units are stopped by `disable --now`, which returns once
 * they stopped: no wait then (foreign false).
 */
int ht_wait_stopped(hosts_target *ht, const host_spec *h, const char *member, bool foreign)
{
        if (h->mode != HOST_MODE_STATIC_POD && !foreign)
                return 0;
        int64_t until = now_mono_ms() + ht->o.stop_timeout_ms;
        bool up;
        target_blocking_begin();
        while ((up = target_port_accepts(h->advertise_address, ht->o.client_port, 1000) ||
                     target_port_accepts(h->advertise_address, ht->o.peer_port, 1000)) &&
               now_mono_ms() < until)
                msleep(250);
        target_blocking_end();
        if (up)
                return target_fail(&ht->base, -EBUSY,
                                   "%s: etcd still listens on %s:%d or :%d %d s after %s of %s "
                                   "was %s; its data is moved once it stopped",
                                   h->address, h->advertise_address, ht->o.client_port,
                                   ht->o.peer_port, ht->o.stop_timeout_ms / 1000,
                                   h->mode == HOST_MODE_STATIC_POD ? "the manifest"
                                                                   : "the unit " HOSTS_FOREIGN_UNIT,
                                   member,
                                   h->mode == HOST_MODE_STATIC_POD ? "removed" : "disabled");
        return 0;
}

static int read_foreign(hosts_target *ht, const host_spec *h, hosts_running **ret, char **ret_why);
static int disable_foreign_unit(hosts_target *ht, const host_spec *h, const char *member);

/*
 * Before gitcd's manifest replaces a member adopted from kubeadm's
 * etcd.yaml (adoption stopped half-way, reconciler/adopt.c): remove that
 * etcd.yaml when it runs this machine's dataDir, so kubelet does not run
 * two etcds on one data directory and its ports. A manifest for other data
 * is left alone. 1 when it was removed.
 */
int ht_retire_kubeadm(hosts_target *ht, const host_spec *h)
{
        _cleanup_free_ char *path = kubeadm_manifest(h), *qp = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf("if [ -f %s ]; then head -c 1048577 %s; fi", qp, qp);
        _cleanup_free_ char *out = NULL;
        int k = ht_exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0 || isempty(out))
                return k;
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        bool ours = hosts_running_parse_manifest(path, out, strlen(out), &r, &d) == 0 &&
                    streq(r.data_dir, h->data_dir);
        hosts_running_release(&r);
        diag_list_release(&d);
        if (!ours)
                return 0;
        log_info("hosts target: %s: removing %s, which runs the data of the member gitcd starts",
                 h->address, path);
        _cleanup_free_ char *rm = xasprintf("rm -f -- %s", qp);
        k = run(ht, h, rm, NULL);
        return k < 0 ? k : 1;
}

/*
 * Before gitcd's unit starts a member on machine h: when the active unit
 * etcd.service runs this machine's dataDir (an adopted member not moved
 * yet, reconciler/adopt.c), disable and stop it and wait until its etcd
 * stopped, so systemd does not run two etcds on one data directory and its
 * ports. An etcd.service for other data, or one that cannot be read, is
 * left alone.
 */
int ht_retire_foreign_unit(hosts_target *ht, const host_spec *h, const char *member)
{
        hosts_running *r = NULL;
        _cleanup_free_ char *why = NULL;
        int k = read_foreign(ht, h, &r, &why);
        if (k == -EPERM) {
                log_warn("hosts target: %s: %s", h->address, why);
                return 0;
        }
        if (k < 0 || !r)
                return k;
        bool ours = streq(r->data_dir, h->data_dir);
        hosts_running_release(r);
        free(r);
        if (!ours)
                return 0;
        log_info("hosts target: %s: disabling " HOSTS_FOREIGN_UNIT
                 ", which runs the data of the member gitcd starts",
                 h->address);
        return disable_foreign_unit(ht, h, member);
}

/* ---- adoption (reconciler/adopt.c) ------------------------------------- */

static char *kubeadm_manifest(const host_spec *h)
{
        return xasprintf("%s/" HOSTS_KUBEADM_MANIFEST, h->manifest_dir);
}

/*
 * What a foreign etcd runs from: kubeadm's etcd.yaml, or the unit
 * etcd.service wherever systemd keeps it (a distribution's package puts it
 * in /lib/systemd/system, an operator in /etc/systemd/system, either with
 * drop-ins beside it), read as `systemctl cat` shows it: the unit's file
 * and then its drop-ins, each after a "# PATH" line, which the unit
 * reader takes in that order as systemd does.
 */
char *ht_foreign_file(const host_spec *h)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return kubeadm_manifest(h);
        return xstrdup("systemctl cat " HOSTS_FOREIGN_UNIT);
}

/* The command that prints the foreign configuration (quoted: foreign_file, quoted). */
static char *foreign_read(hosts_target *ht, const host_spec *h, const char *quoted)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return xasprintf("head -c 1048577 %s", quoted);
        return xasprintf("%s cat " HOSTS_FOREIGN_UNIT " | head -c 1048577", ht->systemctl);
}

static int read_machine_file(hosts_target *ht, const host_spec *h, const char *path, bool optional,
                             char **ret, char **ret_why);

static char *diags_text(const diag_list *d)
{
        strbuf sb = STRBUF_INIT;
        for (size_t j = 0; j < d->n; j++) {
                if (d->items[j].line > 0)
                        sb_printf(&sb, "%sline %d: %s", j ? "; " : "", d->items[j].line,
                                  d->items[j].message);
                else
                        sb_printf(&sb, "%s%s", j ? "; " : "", d->items[j].message);
        }
        return sb_detach(&sb);
}

/*
 * What the file at path (body: its text) runs on machine h: a static Pod
 * manifest, or a unit with the environment files it names, read over the
 * same connection. unit is the unit's name and hostname the machine's
 * (for the unit's specifiers). -EPERM with the reason in *ret_why when it
 * cannot be read.
 */
static int parse_running(hosts_target *ht, const host_spec *h, const char *path, const char *unit,
                         const char *hostname, const char *body, hosts_running **ret,
                         char **ret_why)
{
        _cleanup_free_ char *origin = xasprintf("%s:%s", h->address, path);
        diag_list d = DIAG_LIST_INIT;
        hosts_running *r = XNEW(hosts_running);
        int k;
        if (h->mode == HOST_MODE_STATIC_POD) {
                k = hosts_running_parse_manifest(origin, body, strlen(body), r, &d);
        } else {
                hosts_unit u = {0};
                hosts_unit_context ctx = {.unit_name = unit, .hostname = hostname};
                char **env = NULL;
                size_t n_env = 0;
                k = hosts_unit_parse(origin, body, strlen(body), &ctx, &u, &d);
                for (size_t j = 0; k >= 0 && j < u.n_env_files; j++) {
                        _cleanup_free_ char *text = NULL, *why = NULL;
                        k = read_machine_file(ht, h, u.env_files[j], u.env_file_optional[j], &text,
                                              &why);
                        if (k == -EPERM) {
                                diag_add(&d, DIAG_ERROR, origin, 0, 0,
                                         "its EnvironmentFile=%s does not exist (systemd does "
                                         "not start the unit without it)",
                                         u.env_files[j]);
                                break;
                        }
                        if (k < 0) {
                                hosts_unit_release(&u);
                                strv_free(env);
                                diag_list_release(&d);
                                free(r);
                                return k; /* the transport's error */
                        }
                        _cleanup_free_ char *eorigin =
                            xasprintf("%s:%s", h->address, u.env_files[j]);
                        k = hosts_env_file_parse(eorigin, text, strlen(text), &env, &n_env, &d);
                        explicit_bzero(text, strlen(text));
                }
                if (k >= 0)
                        k = hosts_running_from_unit(origin, &u, env, n_env, r, &d);
                hosts_unit_release(&u);
                strv_free(env);
        }
        if (k < 0) {
                _cleanup_free_ char *text = diags_text(&d);
                *ret_why = xasprintf("%s: cannot read the etcd it runs from %s: %s", h->address,
                                     path, d.n ? text : strerror(-k));
                diag_list_release(&d);
                free(r);
                return -EPERM;
        }
        diag_list_release(&d);
        str_assign(&r->file, xstrdup(path));
        *ret = r;
        return 0;
}

/*
 * The shell test that the foreign file runs: kubelet runs every manifest
 * of its folder; a unit runs when systemd says it is active.
 */
char *ht_foreign_active_test(hosts_target *ht, const host_spec *h, const char *quoted)
{
        if (h->mode == HOST_MODE_STATIC_POD)
                return xasprintf("[ -f %s ]", quoted);
        return xasprintf("%s is-active --quiet " HOSTS_FOREIGN_UNIT, ht->systemctl);
}

/* What the foreign file of machine h runs, when it runs; *ret NULL when nothing. */
static int read_foreign(hosts_target *ht, const host_spec *h, hosts_running **ret, char **ret_why)
{
        *ret = NULL;
        _cleanup_free_ char *path = ht_foreign_file(h), *qp = ssh_quote(path);
        _cleanup_free_ char *test = ht_foreign_active_test(ht, h, qp);
        _cleanup_free_ char *read = foreign_read(ht, h, qp);
        _cleanup_free_ char *cmd = xasprintf("if %s; then uname -n; %s; fi", test, read);
        _cleanup_free_ char *out = NULL;
        int k = ht_exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0 || isempty(out) || !strchr(out, '\n'))
                return k;
        char *nl = strchr(out, '\n');
        *nl = 0;
        return parse_running(ht, h, path, HOSTS_FOREIGN_UNIT, out, nl + 1, ret, ret_why);
}

/* `systemctl disable --now etcd.service` on machine h, then wait until its etcd stopped. */
static int disable_foreign_unit(hosts_target *ht, const host_spec *h, const char *member)
{
        _cleanup_free_ char *cmd = xasprintf("%s disable --now " HOSTS_FOREIGN_UNIT, ht->systemctl);
        int k = run(ht, h, cmd, NULL);
        if (k < 0)
                return k;
        return ht_wait_stopped(ht, h, member, true);
}

int hosts_adopt_read(target *t, const etcd_cluster *c, size_t i, hosts_running **ret,
                     char **ret_why)
{
        hosts_target *ht = HT(t);
        assert(i < c->hosts.n);
        const host_spec *h = &c->hosts.items[i];
        *ret = NULL;
        *ret_why = NULL;
        _cleanup_free_ char *own = ht_member_file(c, h), *foreign = ht_foreign_file(h);
        _cleanup_free_ char *qo = ssh_quote(own), *qf = ssh_quote(foreign);
        _cleanup_free_ char *test = ht_foreign_active_test(ht, h, qf);
        _cleanup_free_ char *read = foreign_read(ht, h, qf);
        _cleanup_free_ char *cmd = xasprintf("if [ -f %s ]; then echo own; uname -n; head -c "
                                             "1048577 %s; elif %s; then echo foreign; uname -n; "
                                             "%s; fi",
                                             qo, qo, test, read);
        _cleanup_free_ char *out = NULL;
        int k = ht_exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0)
                return k;
        char *host = out ? strchr(out, '\n') : NULL;
        char *body = host ? strchr(host + 1, '\n') : NULL;
        if (!body)
                return 0;
        bool is_own = strneq(out, "own\n", 4);
        *body++ = 0;
        _cleanup_free_ char *unit = unit_name(c);
        hosts_running *r = NULL;
        k = parse_running(ht, h, is_own ? own : foreign, is_own ? unit : HOSTS_FOREIGN_UNIT,
                          host + 1, body, &r, ret_why);
        if (k < 0)
                return k;
        r->gitcd_file = is_own;
        if (is_own)
                r->config_hash = ht_line_value(body, HASH_PREFIX);
        *ret = r;
        return 0;
}

int hosts_adopt_claim(target *t, const etcd_cluster *c, size_t i, const char *member,
                      char **ret_identity)
{
        hosts_target *ht = HT(t);
        const host_spec *h = &c->hosts.items[i];
        *ret_identity = NULL;
        for (int round = 0; round < 2; round++) {
                _cleanup_(ht_view_release) machine_view v = {0};
                int k = ht_probe(ht, c, h, &v);
                if (k < 0)
                        return k;
                if (v.claimed_by && !streq(v.claimed_by, member))
                        return target_fail(t, -EEXIST, "%s: the data directory %s belongs to %s",
                                           h->address, h->data_dir, v.claimed_by);
                if (v.claimed_by && v.identity) {
                        *ret_identity = TAKE_PTR(v.identity);
                        return 0;
                }
                if (round == 0 && (k = ht_write_marker(ht, h, member, NULL)) < 0)
                        return k;
        }
        return target_fail(t, -EIO, "%s: the marker written in %s does not read back", h->address,
                           h->data_dir);
}

int hosts_adopt_retire(target *t, const etcd_cluster *c, size_t i, const char *member)
{
        const host_spec *h = &c->hosts.items[i];
        if (h->mode == HOST_MODE_SYSTEMD)
                return disable_foreign_unit(HT(t), h, member);
        _cleanup_free_ char *path = kubeadm_manifest(h), *qp = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf("rm -f -- %s", qp);
        return run(HT(t), h, cmd, NULL);
}

/*
 * A file of machine h: its first 1 MiB and one byte, so that a reader with
 * a 1 MiB limit sees a longer file is longer rather than reading it cut
 * short. A file that does not exist is a
 * refusal with the reason in *ret_why (-EPERM), or with optional reads as
 * ""; a machine that cannot be reached, or a command that fails, fails as
 * any SSH step does.
 */
static int read_machine_file(hosts_target *ht, const host_spec *h, const char *path, bool optional,
                             char **ret, char **ret_why)
{
        _cleanup_free_ char *q = ssh_quote(path);
        _cleanup_free_ char *cmd = xasprintf(
            "if [ -f %s ]; then echo file; head -c 1048577 -- %s; else echo none; fi", q, q);
        _cleanup_free_ char *out = NULL;
        int k = ht_exec_cmd(ht, h, cmd, NULL, 0, &out);
        if (k < 0)
                return k;
        if (out && strneq(out, "file\n", 5)) {
                *ret = xstrdup(out + 5);
                explicit_bzero(out, strlen(out));
                return 0;
        }
        if (!optional) {
                *ret_why = xasprintf("%s: %s does not exist", h->address, path);
                return -EPERM;
        }
        *ret = xstrdup("");
        return 0;
}

/* The first URL of a comma-separated list (newly allocated). */
static char *first_url(const char *urls)
{
        return urls ? xstrndup(urls, strcspn(urls, ",")) : NULL;
}

/* What the machines' CA is: read and checked by hosts_adopt_import_ca(). */
typedef struct machines_ca {
        char *fingerprint; /* of the trusted CA file (pki_bundle_fingerprint) */
        pki_cert *cert;
        pki_key *key; /* NULL when no machine holds it */
} machines_ca;

static void machines_ca_release(machines_ca *m)
{
        free(m->fingerprint);
        pki_cert_free(m->cert);
        pki_key_free(m->key);
}

/* Read machine i's CA files into m, or refuse when they are not m's. */
static int read_machine_ca(hosts_target *ht, const etcd_cluster *c, size_t i,
                           const hosts_running *r, machines_ca *m, char **ret_why)
{
        const host_spec *h = &c->hosts.items[i];
        const char *files[] = {r->trusted_ca_file, r->peer_trusted_ca_file};
        for (size_t j = 0; j < ARRAY_SIZE(files); j++) {
                if (j == 1 && streq(files[0], files[1]))
                        continue;
                _cleanup_free_ char *pem = NULL, *fp = NULL;
                int k = read_machine_file(ht, h, files[j], false, &pem, ret_why);
                if (k < 0)
                        return k;
                _cleanup_free_ char *what = xasprintf("%s:%s", h->address, files[j]);
                pki_cert *crt = NULL;
                if (pki_bundle_fingerprint(pem, strlen(pem), &fp) < 0 ||
                    pki_cert_from_pem(pem, strlen(pem), what, &crt) < 0) {
                        *ret_why =
                            xasprintf("%s: %s holds no PEM CA certificate", h->address, files[j]);
                        return -EPERM;
                }
                if (!m->fingerprint) {
                        m->fingerprint = TAKE_PTR(fp);
                        m->cert = crt;
                        continue;
                }
                pki_cert_free(crt);
                if (!streq(m->fingerprint, fp)) {
                        *ret_why = xasprintf(
                            "%s: etcd trusts the CA in %s, which is not the CA the other "
                            "members trust; every member must trust one CA (kubeadm's etcd CA) "
                            "on both surfaces to be adopted",
                            h->address, files[j]);
                        return -EPERM;
                }
        }
        _cleanup_free_ char *key_file = hosts_running_ca_key_file(r);
        assert(key_file); /* hosts_adopt_check_tls() refused otherwise */
        _cleanup_free_ char *pem = NULL;
        int k = read_machine_file(ht, h, key_file, true, &pem, ret_why);
        if (k < 0)
                return k;
        if (!*pem)
                return 0;
        _cleanup_free_ char *what = xasprintf("%s:%s", h->address, key_file);
        pki_key *key = NULL;
        k = pki_key_from_pem(pem, strlen(pem), what, &key);
        explicit_bzero(pem, strlen(pem));
        if (k < 0 || !pki_key_matches(key, m->cert)) {
                pki_key_free(key);
                *ret_why = xasprintf("%s: %s is not the key of the CA certificate %s", h->address,
                                     key_file, r->trusted_ca_file);
                return -EPERM;
        }
        if (m->key)
                pki_key_free(key);
        else
                m->key = key;
        return 0;
}

int hosts_adopt_import_ca(target *t, const etcd_cluster *c, hosts_running *const *running,
                          char **ret_why)
{
        hosts_target *ht = HT(t);
        *ret_why = NULL;
        _cleanup_(machines_ca_release) machines_ca m = {0};
        int k;
        for (size_t i = 0; i < c->hosts.n; i++)
                if (running[i] && (k = read_machine_ca(ht, c, i, running[i], &m, ret_why)) < 0)
                        return k;
        if (!m.cert)
                return 0;
        if (!pki_cert_is_ca(m.cert)) {
                *ret_why = xstrdup("the certificate the members trust (--trusted-ca-file) is "
                                   "not a CA certificate");
                return -EPERM;
        }
        _cleanup_free_ char *home = NULL;
        if ((k = ht_tls_home(ht, c, &home)) < 0)
                return k;
        _cleanup_free_ char *pki = path_join(home, "pki");
        _cleanup_free_ char *crt = path_join(pki, "ca.crt");
        _cleanup_free_ char *have = NULL, *have_fp = NULL;
        size_t len = 0;
        if (path_exists(crt)) {
                if ((k = read_file(crt, 1 << 20, &have, &len)) < 0)
                        return target_fail(t, k, "cannot read %s: %s", crt, strerror(-k));
                if (pki_bundle_fingerprint(have, len, &have_fp) < 0 ||
                    !streq(have_fp, m.fingerprint)) {
                        *ret_why = xasprintf(
                            "gitcd already keeps a CA for %s/%s in %s, and it is not the CA "
                            "the running members trust; remove that folder to import theirs",
                            c->namespace_, c->name, pki);
                        return -EPERM;
                }
        } else {
                if (!m.key) {
                        *ret_why = xasprintf("no machine holds the key of the etcd CA (the file "
                                             "beside --trusted-ca-file, .key for .crt); gitcd "
                                             "needs it to issue the members' and its own "
                                             "certificates");
                        return -EPERM;
                }
                if ((k = pki_ca_import(pki, m.cert, m.key)) < 0)
                        return target_fail(t, k, "cluster %s/%s: cannot import the CA: %s",
                                           c->namespace_, c->name, pki_last_error());
                log_info("%s/%s: imported the running members' etcd CA into %s", c->namespace_,
                         c->name, pki);
        }
        /* gitcd's client identity (and the members' leaves, under the names adopted) */
        _cleanup_free_ int *ord = xcalloc(c->hosts.n + 1, sizeof(int));
        if ((k = hosts_adopt_ordinals(c, running, ord, ret_why)) < 0)
                return k;
        _cleanup_(membership_plan_freep) membership_plan *p = membership_plan_new(c);
        for (size_t i = 0; i < c->hosts.n; i++) {
                if (!running[i])
                        continue;
                member_plan *mp = membership_plan_add(p);
                mp->name = render_member_name(c, ord[i]);
                mp->ordinal = ord[i];
                mp->client_url = first_url(running[i]->advertise_client_urls);
                mp->peer_url = first_url(running[i]->initial_advertise_peer_urls);
        }
        k = ht_tls_issue(ht, c, p, NULL, false, now_wall_ms());
        return k < 0 ? k : 1;
}
