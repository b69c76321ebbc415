/*
 * Adoption's pure half (see hosts-adopt.h).
 *
 * Design: a manifest is outside input, read with the project's YAML loader
 * (api/yaml.h: limits, positions) and nothing else; a unit is read by
 * hosts-unit.c. Only the flags that say who a member is and where its
 * data lives are taken from either, by one function
 * (hosts_running_from_flags: etcd's flag syntax and its ETCD_*
 * variables), so both modes share the decision below. The
 * decision compares three sources that must agree before anything is
 * taken over: the spec (count, machines and their addresses, dataDir),
 * what each machine's file says, and what etcd itself lists. Any
 * disagreement is a refusal that names the first one found, so a person
 * can fix the spec (or the machines) and try again; nothing is changed
 * before the decision. A machine's member is the one etcd lists at its
 * peer URL, not the one with a given name: names are the operator's
 * (kubeadm uses node names), and adoption gives each gitcd's name for it
 * (hosts_adopt_ordinals()).
 *
 * TLS is all or nothing: a running cluster with TLS is adopted only with
 * TLS on both surfaces, by a spec with tls.provider auto and both surfaces
 * on, because gitcd then keeps using the cluster's CA (kubeadm's) as its
 * own auto CA and its clients (the kube-apiserver) keep working. That
 * part of the decision is checked before anything else (the member list
 * cannot be read without a client certificate from that CA).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "api/yaml.h"
#include "render/render.h"
#include "targets/hosts-adopt.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

void hosts_running_release(hosts_running *r)
{
        free(r->file);
        free(r->config_hash);
        free(r->name);
        free(r->data_dir);
        free(r->initial_cluster);
        free(r->advertise_client_urls);
        free(r->initial_advertise_peer_urls);
        free(r->trusted_ca_file);
        free(r->peer_trusted_ca_file);
        free(r->cert_file);
        free(r->peer_cert_file);
        memset(r, 0, sizeof(*r));
}

static int bad(diag_list *d, const char *origin, const ynode *n, const char *msg)
{
        diag_add(d, DIAG_ERROR, origin, n ? n->line : 0, n ? n->col : 0, "%s", msg);
        return -EINVAL;
}

/*
 * The flags adoption reads. etcd parses its command line with Go's flag
 * package (`-k`, `--k`, `--k=v`, `--k v`; a boolean flag takes no separate
 * value) and, for every flag not on it, reads ETCD_<FLAG> (upper case,
 * dashes as underscores) from its environment.
 */
static const struct {
        const char *name;
        ssize_t off; /* the field of hosts_running, -1: only whether TLS is on */
        bool boolean;
        bool tls; /* set to anything but "false" or "": TLS is on */
} known_flags[] = {
    {"name", offsetof(hosts_running, name), false, false},
    {"data-dir", offsetof(hosts_running, data_dir), false, false},
    {"initial-cluster", offsetof(hosts_running, initial_cluster), false, false},
    {"advertise-client-urls", offsetof(hosts_running, advertise_client_urls), false, false},
    {"initial-advertise-peer-urls", offsetof(hosts_running, initial_advertise_peer_urls), false,
     false},
    {"trusted-ca-file", offsetof(hosts_running, trusted_ca_file), false, true},
    {"peer-trusted-ca-file", offsetof(hosts_running, peer_trusted_ca_file), false, true},
    {"cert-file", offsetof(hosts_running, cert_file), false, true},
    {"peer-cert-file", offsetof(hosts_running, peer_cert_file), false, true},
    {"key-file", -1, false, true},
    {"peer-key-file", -1, false, true},
    {"client-cert-auth", -1, true, true},
    {"peer-client-cert-auth", -1, true, true},
    {"config-file", -1, false, false},
};

static ssize_t flag_index(const char *key, size_t klen)
{
        for (size_t i = 0; i < ARRAY_SIZE(known_flags); i++)
                if (strlen(known_flags[i].name) == klen && strneq(known_flags[i].name, key, klen))
                        return (ssize_t)i;
        return -1;
}

/* The value of variable name in env ("K=V" entries, the last one wins), or NULL. */
static const char *env_value(char *const *env, size_t n_env, const char *name)
{
        size_t len = strlen(name);
        const char *v = NULL;
        for (size_t i = 0; i < n_env; i++)
                if (strneq(env[i], name, len) && env[i][len] == '=')
                        v = env[i] + len + 1;
        return v;
}

int hosts_running_from_flags(char *const *args, size_t n_args, char *const *env, size_t n_env,
                             const char *default_name, hosts_running *r, char **ret_why)
{
        const char *val[ARRAY_SIZE(known_flags)] = {0};
        for (size_t i = 0; i < ARRAY_SIZE(known_flags); i++) {
                _cleanup_free_ char *var = xasprintf("ETCD_%s", known_flags[i].name);
                for (char *p = var; *p; p++)
                        *p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
                val[i] = env_value(env, n_env, var);
        }
        for (size_t i = 0; i < n_args; i++) {
                const char *w = args[i];
                if (w[0] != '-' || !w[1] || streq(w, "--"))
                        continue;
                const char *key = w + 1 + (w[1] == '-'), *eq = strchr(key, '=');
                size_t klen = eq ? (size_t)(eq - key) : strlen(key);
                ssize_t f = flag_index(key, klen);
                const char *v = eq ? eq + 1 : NULL;
                if (!eq && f >= 0 && known_flags[f].boolean)
                        v = "true";
                else if (!eq && i + 1 < n_args && args[i + 1][0] != '-')
                        v = args[++i];
                else if (!eq)
                        v = "true";
                if (f >= 0)
                        val[f] = v;
        }
        hosts_running out = {0};
        for (size_t i = 0; i < ARRAY_SIZE(known_flags); i++) {
                if (!val[i])
                        continue;
                if (known_flags[i].off >= 0) {
                        char **slot = (char **)((char *)&out + known_flags[i].off);
                        *slot = xstrdup(val[i]);
                }
                if (known_flags[i].tls && !streq(val[i], "false") && !isempty(val[i]))
                        out.tls = true;
        }
        ssize_t cfg = flag_index("config-file", strlen("config-file"));
        if (!isempty(val[cfg])) {
                hosts_running_release(&out);
                *ret_why = xasprintf("etcd reads its configuration from the file %s "
                                     "(--config-file, which makes it ignore its other flags); "
                                     "adopting such a member is not supported",
                                     val[cfg]);
                return -EINVAL;
        }
        if (isempty(out.name) && default_name)
                str_assign(&out.name, xstrdup(default_name));
        if (isempty(out.name) || isempty(out.data_dir)) {
                *ret_why = xstrdup(isempty(out.name) ? "etcd runs without --name"
                                                     : "etcd runs without --data-dir (its default, "
                                                       "<name>.etcd in its working directory, is "
                                                       "not adopted)");
                hosts_running_release(&out);
                return -EINVAL;
        }
        hosts_running_release(r);
        *r = out;
        return 0;
}

/* The words of a sequence of scalars, appended to words. */
static int words_of(const char *origin, const ynode *seq, char ***words, size_t *n, size_t *alloc,
                    diag_list *d)
{
        if (!seq)
                return 0;
        if (seq->kind != YNODE_SEQ)
                return bad(d, origin, seq, "the container's command/args is not a list");
        for (size_t i = 0; i < seq->n; i++) {
                const ynode *w = seq->values[i];
                if (w->kind != YNODE_SCALAR || strlen(w->str) != w->len)
                        return bad(d, origin, w, "a command word is not a string");
                *words = xgrow(*words, alloc, *n + 1, sizeof(char *));
                (*words)[(*n)++] = w->str;
        }
        return 0;
}

int hosts_running_parse_manifest(const char *origin, const char *text, size_t len, hosts_running *r,
                                 diag_list *diags)
{
        _cleanup_(ydoc_list_release) ydoc_list docs = {0};
        yaml_limits lim = yaml_config_limits;
        lim.max_file_bytes = 1024 * 1024;
        lim.max_documents = 1;
        int k = yaml_parse(origin, text, len, &lim, &docs, diags);
        if (k < 0)
                return k;
        const ynode *root = docs.n ? docs.docs[0].root : NULL;
        if (!root || root->kind != YNODE_MAP)
                return bad(diags, origin, root, "not a Pod manifest (no mapping)");
        const ynode *kind = ynode_get(root, "kind");
        if (!kind || kind->kind != YNODE_SCALAR || !streq(kind->str, "Pod"))
                return bad(diags, origin, kind ? kind : root,
                           "not a Pod manifest (kind is not Pod)");
        const ynode *spec = ynode_get(root, "spec");
        const ynode *cs = spec ? ynode_get(spec, "containers") : NULL;
        if (!cs || cs->kind != YNODE_SEQ || cs->n == 0)
                return bad(diags, origin, spec ? spec : root, "the Pod has no containers");
        const ynode *ctr = NULL;
        for (size_t i = 0; i < cs->n; i++) {
                const ynode *nm = ynode_get(cs->values[i], "name");
                if (nm && nm->kind == YNODE_SCALAR && streq(nm->str, "etcd"))
                        ctr = cs->values[i];
        }
        if (!ctr && cs->n == 1)
                ctr = cs->values[0];
        if (!ctr || ctr->kind != YNODE_MAP)
                return bad(diags, origin, cs, "no container named etcd");
        _cleanup_free_ char **words = NULL;
        size_t n = 0, alloc = 0;
        if ((k = words_of(origin, ynode_get(ctr, "command"), &words, &n, &alloc, diags)) < 0 ||
            (k = words_of(origin, ynode_get(ctr, "args"), &words, &n, &alloc, diags)) < 0)
                return k;
        _cleanup_free_ char *why = NULL;
        hosts_running out = {0};
        if (hosts_running_from_flags(words, n, NULL, 0, NULL, &out, &why) < 0)
                return bad(diags, origin, ctr, why);
        out.file = xstrdup(origin);
        hosts_running_release(r);
        *r = out;
        return 0;
}

int hosts_adopt_ordinal(const char *cluster, const char *member)
{
        size_t n = strlen(cluster);
        if (!strneq(member, cluster, n) || member[n] != '-' || !member[n + 1])
                return -1;
        const char *p = member + n + 1;
        if (strlen(p) > 6 || (p[0] == '0' && p[1]))
                return -1;
        int v = 0;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -1;
                v = v * 10 + (*p - '0');
        }
        return v;
}

static int refuse(char **ret_why, const char *fmt, ...) _printf_(2, 3);
static int refuse(char **ret_why, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        *ret_why = s ? s : xstrdup("adoption refused");
        return -EPERM;
}

/* Does every URL of the comma-separated list start with scheme "://"? */
static bool all_urls(const char *urls, const char *scheme)
{
        if (isempty(urls))
                return false;
        size_t n = strlen(scheme);
        for (const char *p = urls; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
                if (!strneq(p, scheme, n) || !strneq(p + n, "://", 3))
                        return false;
        return true;
}

/* The TLS checks of one machine's running member; 0 or a refusal. */
static int check_running_tls(const etcd_cluster *c, const host_spec *h, const hosts_running *r,
                             char **ret_why)
{
        static const char *const set_tls =
            "set tls.provider: auto with tls.client.enabled and tls.peer.enabled true";
        if (c->tls.provider != TLS_PROVIDER_AUTO || !render_client_tls(c) || !render_peer_tls(c))
                return refuse(ret_why,
                              "%s runs etcd with TLS (%s) but the spec %s; %s to adopt it (gitcd "
                              "then imports the CA of --trusted-ca-file as the cluster's CA)",
                              h->address, r->file,
                              c->tls.provider == TLS_PROVIDER_NONE ? "has no TLS"
                              : c->tls.provider != TLS_PROVIDER_AUTO
                                  ? "asks for another TLS provider than auto"
                                  : "does not enable both client and peer TLS",
                              set_tls);
        if (!all_urls(r->advertise_client_urls, "https"))
                return refuse(ret_why,
                              "%s runs etcd with TLS flags but advertises client URLs %s; gitcd "
                              "adopts TLS on both surfaces (https) only",
                              h->address,
                              r->advertise_client_urls ? r->advertise_client_urls : "(none)");
        if (!all_urls(r->initial_advertise_peer_urls, "https"))
                return refuse(ret_why,
                              "%s runs etcd with TLS flags but advertises peer URLs %s; gitcd "
                              "adopts TLS on both surfaces (https) only",
                              h->address,
                              r->initial_advertise_peer_urls ? r->initial_advertise_peer_urls
                                                             : "(none)");
        if (isempty(r->trusted_ca_file) || isempty(r->peer_trusted_ca_file) ||
            isempty(r->cert_file) || isempty(r->peer_cert_file))
                return refuse(ret_why,
                              "%s runs etcd with TLS but %s has no %s; gitcd imports the CA the "
                              "members trust on both surfaces and needs --cert-file, "
                              "--peer-cert-file, --trusted-ca-file and --peer-trusted-ca-file",
                              h->address, r->file,
                              isempty(r->trusted_ca_file)        ? "--trusted-ca-file"
                              : isempty(r->peer_trusted_ca_file) ? "--peer-trusted-ca-file"
                              : isempty(r->cert_file)            ? "--cert-file"
                                                                 : "--peer-cert-file");
        _cleanup_free_ char *key = hosts_running_ca_key_file(r);
        if (!key)
                return refuse(ret_why,
                              "%s: the CA file %s ends in neither .crt nor .pem, so its key "
                              "cannot be found beside it (kubeadm's ca.crt and ca.key; "
                              "kubespray's ca.pem and ca-key.pem)",
                              h->address, r->trusted_ca_file);
        return 0;
}

char *hosts_running_ca_key_file(const hosts_running *r)
{
        const char *f = r->trusted_ca_file;
        size_t n = f ? strlen(f) : 0;
        if (n <= 4 || f[n - 5] == '/')
                return NULL;
        if (streq(f + n - 4, ".crt")) /* kubeadm: ca.crt, ca.key */
                return xasprintf("%.*s.key", (int)(n - 4), f);
        if (streq(f + n - 4, ".pem")) /* cfssl, kubespray: ca.pem, ca-key.pem */
                return xasprintf("%.*s-key.pem", (int)(n - 4), f);
        return NULL;
}

int hosts_adopt_ordinals(const etcd_cluster *c, hosts_running *const *running, int *ret_ordinals,
                         char **ret_why)
{
        *ret_why = NULL;
        _cleanup_free_ int *ord = xcalloc(c->hosts.n + 1, sizeof(int));
        for (size_t i = 0; i < c->hosts.n; i++) {
                ord[i] = -1;
                if (!running[i])
                        continue;
                int kept = hosts_adopt_ordinal(c->name, running[i]->name);
                ord[i] = kept >= 0 ? kept : (int)i;
        }
        for (size_t i = 0; i < c->hosts.n; i++)
                for (size_t j = 0; ord[i] >= 0 && j < i; j++) {
                        if (ord[j] != ord[i])
                                continue;
                        /* i and j: the one that keeps its name, and the other */
                        bool i_kept = hosts_adopt_ordinal(c->name, running[i]->name) >= 0;
                        size_t a = i_kept ? i : j, b = i_kept ? j : i;
                        if (hosts_adopt_ordinal(c->name, running[b]->name) >= 0)
                                return refuse(ret_why, "member %s runs on two machines (%s and %s)",
                                              running[a]->name, c->hosts.items[j].address,
                                              c->hosts.items[i].address);
                        return refuse(ret_why,
                                      "member %s on %s would be named %s-%d (its machine's "
                                      "position in spec.hosts), the name of member %s on %s; "
                                      "restart one of them with another --name, or reorder "
                                      "spec.hosts.machines",
                                      running[b]->name, c->hosts.items[b].address, c->name, ord[i],
                                      running[a]->name, c->hosts.items[a].address);
                }
        memcpy(ret_ordinals, ord, c->hosts.n * sizeof(int));
        return 0;
}

int hosts_adopt_check_tls(const etcd_cluster *c, hosts_running *const *running, char **ret_why)
{
        *ret_why = NULL;
        size_t n_running = 0, n_tls = 0;
        for (size_t i = 0; i < c->hosts.n; i++)
                if (running[i]) {
                        n_running++;
                        n_tls += running[i]->tls;
                }
        if (n_running == 0)
                return 0;
        /* the names come first: with TLS, leaves are issued for them before the decision */
        _cleanup_free_ int *ord = xcalloc(c->hosts.n + 1, sizeof(int));
        int k = hosts_adopt_ordinals(c, running, ord, ret_why);
        if (k < 0)
                return k;
        for (size_t i = 0; n_tls > 0 && i < c->hosts.n; i++) {
                const hosts_running *r = running[i];
                const host_spec *h = &c->hosts.items[i];
                if (!r)
                        continue;
                if (!r->tls)
                        return refuse(ret_why,
                                      "%s runs etcd without TLS (%s) while other machines run it "
                                      "with TLS; adoption needs one cluster-wide setting",
                                      h->address, r->file);
                if ((k = check_running_tls(c, h, r, ret_why)) < 0)
                        return k;
        }
        if (n_tls > 0)
                return 1; /* the CA files' content is compared where they are read */
        if (render_client_tls(c) || render_peer_tls(c)) {
                for (size_t i = 0; i < c->hosts.n; i++)
                        if (running[i])
                                return refuse(ret_why,
                                              "%s runs etcd without TLS (%s) but the spec asks "
                                              "for TLS; remove spec.tls (or set tls.provider: "
                                              "none) to adopt it",
                                              c->hosts.items[i].address, running[i]->file);
        }
        return 0;
}

/*
 * p's --initial-cluster with each entry of a renamed member (its old name
 * and its peer URL) under the member's gitcd name, so gitcd's manifest
 * says one name; other entries (gitcd's names kept) are left as they are.
 */
static char *renamed_initial_cluster(const adopt_plan *p)
{
        strbuf sb = STRBUF_INIT;
        for (const char *e = p->initial_cluster; e && *e;) {
                size_t len = strcspn(e, ",");
                const char *eq = memchr(e, '=', len);
                const char *name = NULL;
                for (size_t i = 0; eq && i < p->n; i++) {
                        const adopt_step *st = &p->steps[i];
                        size_t nlen = (size_t)(eq - e), ulen = len - nlen - 1;
                        if (strlen(st->running_name) == nlen && strneq(st->running_name, e, nlen) &&
                            strlen(st->peer_url) == ulen && strneq(st->peer_url, eq + 1, ulen))
                                name = st->member;
                }
                if (sb.len)
                        sb_appendc(&sb, ',');
                if (name)
                        sb_printf(&sb, "%s%.*s", name, (int)(e + len - eq), eq);
                else
                        sb_printf(&sb, "%.*s", (int)len, e);
                e += len;
                e += *e == ',';
        }
        return sb_detach(&sb);
}

int hosts_adopt_decide(const etcd_cluster *c, int peer_port, hosts_running *const *running,
                       const etcd_members *list, bool healthy, adopt_plan *plan, char **ret_why)
{
        *ret_why = NULL;
        memset(plan, 0, sizeof(*plan));
        size_t n_running = 0;
        for (size_t i = 0; i < c->hosts.n; i++)
                n_running += running[i] != NULL;
        if (n_running == 0)
                return 0;
        int tls = hosts_adopt_check_tls(c, running, ret_why);
        if (tls < 0)
                return tls;
        for (size_t i = 0; i < c->hosts.n; i++) {
                const hosts_running *r = running[i];
                if (!r)
                        continue;
                if (!streq(r->data_dir, c->hosts.items[i].data_dir))
                        return refuse(ret_why,
                                      "%s: etcd runs with --data-dir %s but the spec's dataDir is "
                                      "%s; set dataDir to the running one to adopt it",
                                      c->hosts.items[i].address, r->data_dir,
                                      c->hosts.items[i].data_dir);
        }
        if (!list)
                return refuse(ret_why, "etcd runs on the machines but its member list could not "
                                       "be read through any advertised client URL");
        if (!healthy)
                return refuse(ret_why, "etcd runs on the machines but not every member is "
                                       "healthy; adoption waits for a healthy cluster");
        if (list->n != (size_t)c->replicas)
                return refuse(ret_why, "the running cluster has %zu members, the spec %d replicas",
                              list->n, c->replicas);
        if (n_running != list->n)
                return refuse(ret_why,
                              "etcd lists %zu members but %zu of the spec's machines run etcd",
                              list->n, n_running);
        _cleanup_free_ int *ord = xcalloc(c->hosts.n + 1, sizeof(int));
        int k = hosts_adopt_ordinals(c, running, ord, ret_why);
        assert(k == 0); /* hosts_adopt_check_tls() refused otherwise */
        (void)k;
        plan->cluster_id = list->cluster_id;
        plan->steps = xcalloc(list->n, sizeof(adopt_step));
        for (size_t i = 0; i < c->hosts.n; i++) {
                const hosts_running *r = running[i];
                if (!r)
                        continue;
                const host_spec *h = &c->hosts.items[i];
                _cleanup_free_ char *want = xasprintf("%s://%s:%d", tls ? "https" : "http",
                                                      h->advertise_address, peer_port);
                /* the member at this machine's peer URL is the one it runs, whatever its name */
                const etcd_member *em = NULL, *named = NULL;
                for (size_t j = 0; j < list->n; j++) {
                        const etcd_member *m = &list->members[j];
                        if (m->n_peer_urls == 1 && streq(m->peer_urls[0], want))
                                em = m;
                        if (streq_ptr(m->name, r->name))
                                named = m;
                }
                if (!em) {
                        adopt_plan_release(plan);
                        if (named)
                                return refuse(
                                    ret_why, "member %s on %s: its peer URL is %s, the spec's %s",
                                    named->name, h->address,
                                    named->n_peer_urls ? named->peer_urls[0] : "(none)", want);
                        return refuse(ret_why,
                                      "%s runs member %s, which etcd does not list (no member "
                                      "has the peer URL %s)",
                                      h->address, r->name, want);
                }
                if (!streq_ptr(em->name, r->name)) {
                        adopt_plan_release(plan);
                        return refuse(ret_why,
                                      "%s runs member %s (%s), but etcd lists %s at its peer URL "
                                      "%s",
                                      h->address, r->name, r->file,
                                      isempty(em->name) ? "a member that never started" : em->name,
                                      want);
                }
                if (em->is_learner) {
                        adopt_plan_release(plan);
                        return refuse(ret_why, "member %s is a learner; promote it first",
                                      em->name);
                }
                for (size_t j = 0; j < plan->n; j++)
                        if (plan->steps[j].id == em->id) {
                                adopt_plan_release(plan);
                                return refuse(ret_why, "member %s runs on two machines", em->name);
                        }
                adopt_step *s = &plan->steps[plan->n++];
                s->machine = i;
                s->ordinal = ord[i];
                s->member = render_member_name(c, ord[i]);
                s->running_name = xstrdup(em->name);
                s->id = em->id;
                s->peer_url = xstrdup(want);
                s->client_url = em->n_client_urls ? xstrdup(em->client_urls[0]) : NULL;
                s->restart = !r->gitcd_file || !streq(s->member, s->running_name);
                s->replaces = r->gitcd_file ? NULL : xstrdup(r->file);
                s->retired = h->mode == HOST_MODE_SYSTEMD ? "disabled" : "removed";
                s->where = xstrdup(h->address);
                if (!plan->initial_cluster && r->initial_cluster)
                        plan->initial_cluster = xstrdup(r->initial_cluster);
        }
        if (plan->initial_cluster)
                str_assign(&plan->initial_cluster, renamed_initial_cluster(plan));
        return 1;
}
