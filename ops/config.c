/*
 * The daemon configuration file, read through the project's one YAML loader
 * (api/yaml.h) so every problem points at file:line:col like a spec does.
 *
 * Decisions: keys are camelCase like the EtcdCluster specs; an unknown key
 * is an error (a misspelt "verifySignatures" must not silently turn signature
 * checks off); every problem in the file is reported, not just the first.
 * Secrets are never in the file itself: credentials, tokens and webhook
 * secrets are named by the files that hold them. The parsed form only holds
 * strings owned by the ops_config, so a reload builds a complete new one and
 * swaps it in, or keeps the old one whole. The policy (`policy:`, and per
 * source) is parsed by intake/policy.c once the whole file is read, so a
 * source's policy builds on the top-level one wherever the keys stand; a
 * policy that asks for approvals on a source that does not verify
 * signatures is an error: approvals are counted in signatures.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/model.h"
#include "api/yaml.h"
#include "ops/config.h"
#include "ops/push.h"
#include "targets/registry.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

ops_config *ops_config_new(void)
{
        ops_config *c = XNEW(ops_config);
        c->policy = policy_builtin();
        return c;
}

const policy *ops_config_policy_for(const ops_config *cfg, const char *url)
{
        for (size_t i = 0; url && i < cfg->n_sources; i++)
                if (cfg->sources[i].src.url_or_path && streq(cfg->sources[i].src.url_or_path, url))
                        return cfg->sources[i].policy ? cfg->sources[i].policy : cfg->policy;
        return cfg->policy;
}

void ops_config_set_policy(ops_config *cfg, const policy *p)
{
        policy *copy = policy_copy(p);
        policy_free(cfg->policy);
        cfg->policy = copy;
        for (size_t i = 0; i < cfg->n_sources; i++)
                cfg->sources[i].policy = copy;
}

const char *ops_config_strdup(ops_config *cfg, const char *s)
{
        if (!s)
                return NULL;
        cfg->owned = xrealloc(cfg->owned, (cfg->n_owned + 1) * sizeof(char *));
        cfg->owned[cfg->n_owned] = xstrdup(s);
        return cfg->owned[cfg->n_owned++];
}

void ops_config_free(ops_config *cfg)
{
        if (!cfg)
                return;
        for (size_t i = 0; i < cfg->n_owned; i++)
                free(cfg->owned[i]);
        free(cfg->owned);
        for (size_t i = 0; i < cfg->n_webhooks; i++)
                free(cfg->webhooks[i].clusters);
        free(cfg->webhooks);
        free(cfg->sources);
        free(cfg->plain_http_hosts);
        free(cfg->file);
        policy_free(cfg->policy);
        for (size_t i = 0; i < cfg->n_owned_policies; i++)
                policy_free(cfg->owned_policies[i]);
        free(cfg->owned_policies);
        free(cfg);
}

static const char *const severity_names[] = {"info", "warning", "critical"};

const char *ops_severity_name(ops_severity s)
{
        assert(s <= OPS_SEV_CRITICAL);
        return severity_names[s];
}

int ops_severity_from_string(const char *s, ops_severity *ret)
{
        for (size_t i = 0; i < ARRAY_SIZE(severity_names); i++)
                if (s && streq(s, severity_names[i])) {
                        *ret = (ops_severity)i;
                        return 0;
                }
        return -EINVAL;
}

/* A forge or webhook URL, judged once the whole file (and allowPlainHTTP) is read. */
typedef struct url_use {
        const ynode *node;
        const char *what; /* "url", "api" */
} url_use;

typedef struct parser {
        ops_config *cfg;
        const char *file;
        diag_list *diags;
        const ynode *policy;         /* the top-level policy: */
        const ynode **source_policy; /* each source's, by index (NULL: none) */
        url_use *urls;
        size_t n_urls;
} parser;

static void err(parser *p, const ynode *n, const char *fmt, ...) _printf_(3, 4);
static void err(parser *p, const ynode *n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        diag_add(p->diags, DIAG_ERROR, p->file, n ? n->line : 0, n ? n->col : 0, "%s", msg);
}

static bool want_map(parser *p, const ynode *n, const char *what)
{
        if (n->kind == YNODE_MAP)
                return true;
        err(p, n, "%s must be a mapping, not %s", what, ynode_type_name(n));
        return false;
}

static const char *str(parser *p, const ynode *n, const char *key)
{
        if (n->kind != YNODE_SCALAR || ynode_is_null(n) || n->len == 0) {
                err(p, n, "%s must be a non-empty string, not %s", key, ynode_type_name(n));
                return NULL;
        }
        if (strlen(n->str) != n->len) {
                err(p, n, "%s contains a NUL byte", key);
                return NULL;
        }
        return ops_config_strdup(p->cfg, n->str);
}

static bool boolean(parser *p, const ynode *n, const char *key)
{
        if (n->kind == YNODE_SCALAR && !n->quoted &&
            (streq(n->str, "true") || streq(n->str, "false")))
                return streq(n->str, "true");
        err(p, n, "%s must be true or false", key);
        return false;
}

static int64_t duration(parser *p, const ynode *n, const char *key, int64_t min_ms)
{
        int64_t ms = 0;
        if (n->kind != YNODE_SCALAR || parse_duration_ms(n->str, &ms) < 0 || ms < min_ms) {
                err(p, n, "%s must be a duration of at least %llds (e.g. 30s, 5m)", key,
                    (long long)(min_ms / 1000));
                return 0;
        }
        return ms;
}

/* How many clusters are reconciled at once: 1 to OPS_WORKERS_MAX. */
static int workers(parser *p, const ynode *n)
{
        char *end = NULL;
        long v = n->kind == YNODE_SCALAR ? strtol(n->str, &end, 10) : 0;
        if (n->kind != YNODE_SCALAR || end == n->str || *end || v < 1 || v > OPS_WORKERS_MAX) {
                err(p, n, "workers must be a whole number from 1 to %d", OPS_WORKERS_MAX);
                return 0;
        }
        return (int)v;
}

static void note_url(parser *p, const ynode *n, const char *what)
{
        p->urls = xrealloc(p->urls, (p->n_urls + 1) * sizeof(url_use));
        p->urls[p->n_urls++] = (url_use){n, what};
}

char *ops_url_host(const char *url)
{
        const char *a = strstr(url, "://");
        if (!a)
                return NULL;
        a += 3;
        size_t n = strcspn(a, "/?#");
        const char *at = memrchr(a, '@', n);
        if (at) {
                n -= (size_t)(at + 1 - a);
                a = at + 1;
        }
        if (n > 0 && a[0] == '[') {
                const char *close = memchr(a, ']', n);
                return close ? xstrndup(a + 1, (size_t)(close - a - 1)) : NULL;
        }
        const char *colon = memchr(a, ':', n);
        size_t len = colon ? (size_t)(colon - a) : n;
        return len ? xstrndup(a, len) : NULL;
}

bool ops_config_allows_plain_http(const ops_config *c, const char *url)
{
        if (strncmp(url, "http://", 7) != 0)
                return true; /* not plain http */
        _cleanup_free_ char *host = ops_url_host(url);
        for (size_t i = 0; host && i < c->n_plain_http_hosts; i++)
                if (strcasecmp(c->plain_http_hosts[i], host) == 0)
                        return true;
        return false;
}

/* allowPlainHTTP: the hosts (names or addresses) that webhooks and forge APIs may reach over http. */
static void parse_plain_http(parser *p, const ynode *seq)
{
        ops_config *c = p->cfg;
        if (seq->kind != YNODE_SEQ) {
                err(p, seq, "allowPlainHTTP must be a sequence of host names or addresses");
                return;
        }
        c->plain_http_hosts = xcalloc(seq->n + 1, sizeof(char *));
        for (size_t i = 0; i < seq->n; i++) {
                const char *h = str(p, seq->values[i], "a host");
                if (!h)
                        continue;
                unsigned char v6[16];
                if (h[0] == '[' && h[strlen(h) - 1] == ']') {
                        char *inner = (char *)ops_config_strdup(c, h + 1);
                        inner[strlen(inner) - 1] = '\0';
                        h = inner;
                }
                if (!*h || (strpbrk(h, "/:@ []") && inet_pton(AF_INET6, h, v6) != 1)) {
                        err(p, seq->values[i],
                            "allowPlainHTTP takes host names or addresses (hooks.internal, "
                            "10.0.0.5, fd00::5), not URLs or ports");
                        continue;
                }
                c->plain_http_hosts[c->n_plain_http_hosts++] = h;
        }
}

/* Plain http:// only to the hosts allowPlainHTTP lists. */
static void check_urls(parser *p)
{
        for (size_t i = 0; i < p->n_urls; i++) {
                const char *url = p->urls[i].node->str;
                if (ops_config_allows_plain_http(p->cfg, url))
                        continue;
                _cleanup_free_ char *host = ops_url_host(url);
                err(p, p->urls[i].node,
                    "%s: plain http:// would send notifications and tokens unencrypted; use "
                    "https://, or list %s under allowPlainHTTP to allow it for that host",
                    p->urls[i].what, host ? host : "the host");
        }
}

static const char *target_name(parser *p, const ynode *n)
{
        const char *t = str(p, n, "target");
        if (t && !target_kind_find(t)) {
                _cleanup_free_ char *kinds = target_kind_names(", ", ", ");
                err(p, n, "unknown target '%s' (available: %s)", t, kinds);
                return NULL;
        }
        return t;
}

static void parse_credentials(parser *p, const ynode *m, source_opts *so)
{
        if (!want_map(p, m, "credentials"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "sshKey"))
                        so->ssh_key_path = str(p, v, k);
                else if (streq(k, "sshPassphraseFile"))
                        so->ssh_key_passphrase_file = str(p, v, k);
                else if (streq(k, "sshPassphraseEnv"))
                        so->ssh_key_passphrase_env = str(p, v, k);
                else if (streq(k, "sshAgent"))
                        so->use_ssh_agent = boolean(p, v, k);
                else if (streq(k, "knownHosts"))
                        so->known_hosts_path = str(p, v, k);
                else if (streq(k, "httpsCA"))
                        so->https_ca_file = str(p, v, k);
                else if (streq(k, "tokenFile"))
                        so->https_token_file = str(p, v, k);
                else if (streq(k, "tokenEnv"))
                        so->https_token_env = str(p, v, k);
                else if (streq(k, "username"))
                        so->https_username = str(p, v, k);
                else if (streq(k, "token") || streq(k, "password") || streq(k, "passphrase"))
                        err(p, m->keys[i],
                            "%s: secrets are not kept in this file; name the file that holds "
                            "it (tokenFile, sshPassphraseFile)",
                            k);
                else
                        err(p, m->keys[i], "unknown key '%s' in credentials", k);
        }
}

static void parse_signatures(parser *p, const ynode *m, source_opts *so)
{
        if (!want_map(p, m, "signatures"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "verify"))
                        so->verify_signatures = boolean(p, v, k);
                else if (streq(k, "allowedSigners"))
                        so->allowed_signers_path = str(p, v, k);
                else if (streq(k, "allowRollback"))
                        so->allow_rollback = boolean(p, v, k);
                else
                        err(p, m->keys[i], "unknown key '%s' in signatures", k);
        }
        if (so->verify_signatures && !so->allowed_signers_path)
                err(p, m, "signatures: verify needs allowedSigners FILE");
}

static void parse_commit_status(parser *p, const ynode *m, ops_commit_status *cs)
{
        if (!want_map(p, m, "commitStatus"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "provider")) {
                        const char *f = str(p, v, k);
                        if (f && streq(f, "github"))
                                cs->forge = OPS_FORGE_GITHUB;
                        else if (f && streq(f, "gitlab"))
                                cs->forge = OPS_FORGE_GITLAB;
                        else if (f && streq(f, "gitea"))
                                cs->forge = OPS_FORGE_GITEA;
                        else if (f)
                                err(p, v, "unknown provider '%s' (github, gitlab, gitea)", f);
                } else if (streq(k, "api")) {
                        cs->api = str(p, v, k);
                        if (cs->api && strncmp(cs->api, "http://", 7) != 0 &&
                            strncmp(cs->api, "https://", 8) != 0)
                                err(p, v, "api must start with http:// or https://");
                        else if (cs->api)
                                note_url(p, v, "api");
                } else if (streq(k, "repository")) {
                        cs->repository = str(p, v, k);
                } else if (streq(k, "tokenFile")) {
                        cs->token_file = str(p, v, k);
                } else if (streq(k, "context")) {
                        cs->context = str(p, v, k);
                } else if (streq(k, "token")) {
                        err(p, m->keys[i], "secrets are not kept in this file; use tokenFile");
                } else {
                        err(p, m->keys[i], "unknown key '%s' in commitStatus", k);
                }
        }
        if (cs->forge == OPS_FORGE_NONE)
                err(p, m, "commitStatus needs a provider (github, gitlab, gitea)");
        if (!cs->repository)
                err(p, m, "commitStatus needs a repository");
        if (!cs->token_file)
                err(p, m, "commitStatus needs a tokenFile");
        if (!cs->api && cs->forge == OPS_FORGE_GITEA)
                err(p, m, "commitStatus: gitea needs the api URL (https://HOST/api/v1)");
        if (!cs->api && cs->forge == OPS_FORGE_GITHUB)
                cs->api = "https://api.github.com";
        if (!cs->api && cs->forge == OPS_FORGE_GITLAB)
                cs->api = "https://gitlab.com/api/v4";
        if (!cs->context)
                cs->context = "gitcd";
}

/* webhook: {secretFile: PATH}: the push receiver's secret for this source (ops/push.h). */
static void parse_source_webhook(parser *p, const ynode *m, ops_source *s)
{
        if (!want_map(p, m, "webhook"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                if (streq(k, "secretFile"))
                        s->webhook_secret_file = str(p, m->values[i], k);
                else if (streq(k, "secret"))
                        err(p, m->keys[i], "secrets are not kept in this file; use secretFile");
                else
                        err(p, m->keys[i], "unknown key '%s' in webhook", k);
        }
        if (!s->webhook_secret_file)
                err(p, m, "webhook needs a secretFile");
}

/* A push can only change a remote repository's branch or tag: refuse a webhook that never could. */
static void check_webhook(parser *p, const ynode *m, const ops_source *s)
{
        if (!s->webhook_secret_file || !s->src.url_or_path)
                return;
        const ynode *at = ynode_get(m, "webhook");
        _cleanup_free_ char *norm = push_url_normalize(s->src.url_or_path);
        if (!norm)
                err(p, at ? at : m,
                    "webhook: source %s reads %s, not a remote repository; no forge pushes to it",
                    s->name ? s->name : "", s->src.url_or_path);
        else if (s->src.ref && strlen(s->src.ref) == 40 &&
                 strspn(s->src.ref, "0123456789abcdef") == 40)
                err(p, at ? at : m,
                    "webhook: source %s is pinned to commit %s; a push never changes it",
                    s->name ? s->name : "", s->src.ref);
}

/*
 * kubernetes: {kubeconfig: PATH, context: NAME}: this source's API server.
 * A context name is data, looked up in the kubeconfig by the intake; the
 * rules of spec.kubernetes.context hold for it (no control characters).
 */
static void parse_source_kubernetes(parser *p, const ynode *m, ops_source *s)
{
        if (!want_map(p, m, "kubernetes"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "kubeconfig")) {
                        s->kubeconfig = str(p, v, k);
                } else if (streq(k, "context")) {
                        s->kube_context = str(p, v, k);
                        s->kube_context_line = v->line;
                        s->kube_context_col = v->col;
                        bool control = false;
                        for (const char *q = s->kube_context; q && *q; q++)
                                control |= (unsigned char)*q < 0x20 || *q == 0x7f;
                        if (control)
                                err(p, v,
                                    "context: control characters are not allowed in a "
                                    "context name");
                        else if (s->kube_context &&
                                 strlen(s->kube_context) > GITCD_MAX_KUBE_CONTEXT)
                                err(p, v, "context: longer than %d bytes", GITCD_MAX_KUBE_CONTEXT);
                } else {
                        err(p, m->keys[i],
                            "unknown key '%s' in a source's kubernetes (kubeconfig, "
                            "context)",
                            k);
                }
        }
}

static void parse_source(parser *p, const ynode *m, ops_source *s, size_t index)
{
        if (!want_map(p, m, "a source"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "name"))
                        s->name = str(p, v, k);
                else if (streq(k, "url"))
                        s->src.url_or_path = str(p, v, k);
                else if (streq(k, "ref"))
                        s->src.ref = str(p, v, k);
                else if (streq(k, "path"))
                        s->src.subpath = str(p, v, k);
                else if (streq(k, "interval"))
                        s->interval_ms = duration(p, v, k, 1000);
                else if (streq(k, "target"))
                        s->target = target_name(p, v);
                else if (streq(k, "credentials"))
                        parse_credentials(p, v, &s->src);
                else if (streq(k, "signatures"))
                        parse_signatures(p, v, &s->src);
                else if (streq(k, "commitStatus"))
                        parse_commit_status(p, v, &s->status);
                else if (streq(k, "webhook"))
                        parse_source_webhook(p, v, s);
                else if (streq(k, "kubernetes"))
                        parse_source_kubernetes(p, v, s);
                else if (streq(k, "policy"))
                        p->source_policy[index] = v; /* once the top-level one is known */
                else
                        err(p, m->keys[i], "unknown key '%s' in a source", k);
        }
        if (!s->name)
                err(p, m, "a source needs a name");
        if (!s->src.url_or_path)
                err(p, m, "source %s needs a url", s->name ? s->name : "");
        check_webhook(p, m, s);
}

static void parse_sources(parser *p, const ynode *seq)
{
        ops_config *c = p->cfg;
        if (seq->kind != YNODE_SEQ) {
                err(p, seq, "sources must be a sequence, not %s", ynode_type_name(seq));
                return;
        }
        c->sources = xcalloc(seq->n + 1, sizeof(ops_source));
        p->source_policy = xcalloc(seq->n + 1, sizeof(ynode *));
        for (size_t i = 0; i < seq->n; i++) {
                ops_source *s = &c->sources[c->n_sources++];
                parse_source(p, seq->values[i], s, i);
                for (size_t j = 0; s->name && j + 1 < c->n_sources; j++)
                        if (c->sources[j].name && streq(c->sources[j].name, s->name))
                                err(p, seq->values[i], "a second source named '%s'", s->name);
        }
}

static void parse_listen(parser *p, const ynode *m)
{
        ops_config *c = p->cfg;
        if (m->kind == YNODE_SCALAR) {
                c->listen = str(p, m, "listen");
                return;
        }
        if (!want_map(p, m, "listen"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "address"))
                        c->listen = str(p, v, k);
                else if (streq(k, "tlsCert"))
                        c->tls_cert_file = str(p, v, k);
                else if (streq(k, "tlsKey"))
                        c->tls_key_file = str(p, v, k);
                else if (streq(k, "tokenFile"))
                        c->token_file = str(p, v, k);
                else
                        err(p, m->keys[i], "unknown key '%s' in listen", k);
        }
        if (!c->listen)
                err(p, m, "listen needs an address (host:port)");
        if (!c->tls_cert_file != !c->tls_key_file)
                err(p, m, "listen: tlsCert and tlsKey go together");
}

static void parse_webhook(parser *p, const ynode *m, ops_webhook *w)
{
        w->max_age_ms = 24LL * 3600 * 1000;
        if (!want_map(p, m, "a webhook"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "name")) {
                        w->name = str(p, v, k);
                } else if (streq(k, "url")) {
                        w->url = str(p, v, k);
                        if (w->url && strncmp(w->url, "http://", 7) != 0 &&
                            strncmp(w->url, "https://", 8) != 0)
                                err(p, v, "url must start with http:// or https://");
                        else if (w->url)
                                note_url(p, v, "url");
                } else if (streq(k, "format")) {
                        const char *f = str(p, v, k);
                        if (f && streq(f, "slack"))
                                w->format = OPS_WEBHOOK_SLACK;
                        else if (f && !streq(f, "json"))
                                err(p, v, "unknown format '%s' (available: json, slack)", f);
                } else if (streq(k, "secretFile")) {
                        w->secret_file = str(p, v, k);
                } else if (streq(k, "caFile")) {
                        w->ca_file = str(p, v, k);
                } else if (streq(k, "minSeverity")) {
                        const char *s = str(p, v, k);
                        if (s && ops_severity_from_string(s, &w->min_severity) < 0)
                                err(p, v, "unknown severity '%s' (info, warning, critical)", s);
                } else if (streq(k, "maxAge")) {
                        w->max_age_ms = duration(p, v, k, 1000);
                } else if (streq(k, "clusters")) {
                        if (v->kind != YNODE_SEQ) {
                                err(p, v, "clusters must be a sequence of namespace/name");
                                continue;
                        }
                        w->clusters = xcalloc(v->n + 1, sizeof(char *));
                        for (size_t j = 0; j < v->n; j++) {
                                const char *c = str(p, v->values[j], "a cluster");
                                if (c && !strchr(c, '/'))
                                        err(p, v->values[j], "a cluster is namespace/name");
                                if (c)
                                        w->clusters[w->n_clusters++] = c;
                        }
                } else if (streq(k, "secret")) {
                        err(p, m->keys[i], "secrets are not kept in this file; use secretFile");
                } else {
                        err(p, m->keys[i], "unknown key '%s' in a webhook", k);
                }
        }
        if (!w->name)
                err(p, m, "a webhook needs a name");
        if (!w->url)
                err(p, m, "webhook %s needs a url", w->name ? w->name : "");
}

static void parse_notifications(parser *p, const ynode *m)
{
        ops_config *c = p->cfg;
        if (!want_map(p, m, "notifications"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (!streq(k, "webhooks")) {
                        err(p, m->keys[i], "unknown key '%s' in notifications", k);
                        continue;
                }
                if (v->kind != YNODE_SEQ) {
                        err(p, v, "webhooks must be a sequence");
                        continue;
                }
                c->webhooks = xcalloc(v->n + 1, sizeof(ops_webhook));
                for (size_t j = 0; j < v->n; j++) {
                        ops_webhook *w = &c->webhooks[c->n_webhooks++];
                        parse_webhook(p, v->values[j], w);
                        for (size_t l = 0; w->name && l + 1 < c->n_webhooks; l++)
                                if (c->webhooks[l].name && streq(c->webhooks[l].name, w->name))
                                        err(p, v->values[j], "a second webhook named '%s'",
                                            w->name);
                }
        }
}

static void parse_kubernetes(parser *p, const ynode *m)
{
        ops_config *c = p->cfg;
        if (!want_map(p, m, "kubernetes"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "kubeconfig"))
                        c->kubeconfig = str(p, v, k);
                else if (streq(k, "context"))
                        c->kube_context = str(p, v, k);
                else if (streq(k, "clusterDomain"))
                        c->cluster_domain = str(p, v, k);
                else if (streq(k, "snapshotImage"))
                        c->snapshot_image = str(p, v, k);
                else
                        err(p, m->keys[i], "unknown key '%s' in kubernetes", k);
        }
}

static int port(parser *p, const ynode *n, const char *key)
{
        const char *s = str(p, n, key);
        char *end = NULL;
        long v = s ? strtol(s, &end, 10) : 0;
        if (!s || !end || *end || v < 1 || v > 65535) {
                if (s)
                        err(p, n, "%s must be a port number (1-65535)", key);
                return 0;
        }
        return (int)v;
}

/* A setting of the hosts target's preflight: a duration of at least min_ms (said as least). */
static int64_t threshold(parser *p, const ynode *n, const char *key, int64_t min_ms,
                         const char *least)
{
        int64_t ms = 0;
        if (n->kind != YNODE_SCALAR || parse_duration_ms(n->str, &ms) < 0 || ms < min_ms) {
                err(p, n, "%s must be a duration of at least %s (e.g. 10ms, 1s, 10m)", key, least);
                return 0;
        }
        return ms;
}

static void parse_hosts(parser *p, const ynode *m)
{
        ops_hosts *h = &p->cfg->hosts;
        if (!want_map(p, m, "hosts"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "sshKey"))
                        h->ssh_key = str(p, v, k);
                else if (streq(k, "passphraseFile"))
                        h->passphrase_file = str(p, v, k);
                else if (streq(k, "knownHosts"))
                        h->known_hosts = str(p, v, k);
                else if (streq(k, "clientPort"))
                        h->client_port = port(p, v, k);
                else if (streq(k, "peerPort"))
                        h->peer_port = port(p, v, k);
                else if (streq(k, "metricsPort"))
                        h->metrics_port = port(p, v, k);
                else if (streq(k, "preflight"))
                        h->preflight = boolean(p, v, k);
                else if (streq(k, "preflightSyncP99"))
                        h->preflight_sync_p99_ms = threshold(p, v, k, 1, "1ms");
                else if (streq(k, "preflightClockOffset"))
                        h->preflight_clock_offset_ms = threshold(p, v, k, 1, "1ms");
                else if (streq(k, "preflightInterval"))
                        h->preflight_interval_ms = threshold(p, v, k, 10000, "10s");
                else
                        err(p, m->keys[i], "unknown key '%s' in hosts", k);
        }
}

static void parse_log(parser *p, const ynode *m)
{
        if (!want_map(p, m, "log"))
                return;
        for (size_t i = 0; i < m->n; i++) {
                const char *k = m->keys[i]->str;
                const ynode *v = m->values[i];
                if (streq(k, "level")) {
                        const char *l = str(p, v, k);
                        if (l && !streq(l, "debug") && !streq(l, "info") && !streq(l, "warn") &&
                            !streq(l, "error"))
                                err(p, v, "unknown log level '%s' (debug, info, warn, error)", l);
                        else
                                p->cfg->log_level = l;
                } else {
                        err(p, m->keys[i], "unknown key '%s' in log", k);
                }
        }
}

/*
 * The top-level policy over the built-in one, then each source's over it;
 * approvals need the source's commits to be verified.
 */
static void parse_policies(parser *p)
{
        ops_config *c = p->cfg;
        policy *top = NULL;
        if (p->policy && policy_parse(p->policy, p->file, NULL, &top, p->diags) == 0) {
                policy_free(c->policy);
                c->policy = top;
        }
        for (size_t i = 0; i < c->n_sources; i++) {
                ops_source *s = &c->sources[i];
                s->policy = c->policy;
                const ynode *own = p->source_policy ? p->source_policy[i] : NULL;
                policy *mine = NULL;
                if (own && policy_parse(own, p->file, c->policy, &mine, p->diags) == 0) {
                        c->owned_policies = xrealloc(c->owned_policies,
                                                     (c->n_owned_policies + 1) * sizeof(policy *));
                        c->owned_policies[c->n_owned_policies++] = mine;
                        s->policy = mine;
                }
                const policy_at *at = NULL;
                if (policy_wants_approvals(s->policy, &at) && !s->src.verify_signatures)
                        diag_add(p->diags, DIAG_ERROR, at->file, at->line, at->col,
                                 "policy.approvals: source %s does not verify signatures "
                                 "(signatures: verify: true, allowedSigners FILE), and approvals "
                                 "are counted in trusted commit signatures",
                                 s->name ? s->name : "");
        }
}

/* The sections of the file, each read by a parser of its own. */
typedef struct config_section {
        const char *key;
        void (*parse)(parser *p, const ynode *v);
} config_section;

static const config_section sections[] = {
    {"kubernetes", parse_kubernetes},
    {"hosts", parse_hosts},
    {"listen", parse_listen},
    {"sources", parse_sources},
    {"notifications", parse_notifications},
    {"log", parse_log},
    {"allowPlainHTTP", parse_plain_http},
};

static const config_section *section(const char *key)
{
        for (size_t i = 0; i < ARRAY_SIZE(sections); i++)
                if (streq(key, sections[i].key))
                        return &sections[i];
        return NULL;
}

static void parse_root(parser *p, const ynode *root)
{
        ops_config *c = p->cfg;
        const config_section *sec;
        if (!want_map(p, root, "the configuration"))
                return;
        for (size_t i = 0; i < root->n; i++) {
                const char *k = root->keys[i]->str;
                const ynode *v = root->values[i];
                if (streq(k, "state"))
                        c->state = str(p, v, k);
                else if (streq(k, "target"))
                        c->target = target_name(p, v);
                else if (streq(k, "etcdDir"))
                        c->etcd_dir = str(p, v, k);
                else if (streq(k, "cacheDir"))
                        c->cache_dir = str(p, v, k);
                else if (streq(k, "prune"))
                        c->prune = boolean(p, v, k);
                else if (streq(k, "interval"))
                        c->interval_ms = duration(p, v, k, 1000);
                else if (streq(k, "observeInterval"))
                        c->observe_interval_ms = duration(p, v, k, 1000);
                else if (streq(k, "workers"))
                        c->workers = workers(p, v);
                else if (streq(k, "policy"))
                        p->policy = v;
                else if ((sec = section(k)))
                        sec->parse(p, v);
                else
                        err(p, root->keys[i], "unknown key '%s'", k);
        }
        parse_policies(p);
        check_urls(p);
}

static int parse_docs(const char *path, ydoc_list *docs, diag_list *local, ops_config **ret,
                      diag_list *diags)
{
        ops_config *cfg = ops_config_new();
        cfg->file = xstrdup(path);
        parser p = {.cfg = cfg, .file = path, .diags = local};
        if (docs->n != 1 || !docs->docs[0].root)
                diag_add(local, DIAG_ERROR, path, docs->n > 1 ? docs->docs[1].line : 0, 0,
                         "the configuration is one YAML document");
        else
                parse_root(&p, docs->docs[0].root);
        free(p.source_policy);
        free(p.urls);
        ydoc_list_release(docs);
        bool bad = diag_has_errors(local);
        diag_move(diags, local);
        if (bad) {
                ops_config_free(cfg);
                return -EINVAL;
        }
        *ret = cfg;
        return 0;
}

int ops_config_load_buffer(const char *path, const char *buf, size_t len, ops_config **ret,
                           diag_list *diags)
{
        ydoc_list docs = {0};
        diag_list local = DIAG_LIST_INIT;
        int k = yaml_parse(path, buf, len, &yaml_config_limits, &docs, &local);
        if (k < 0) {
                diag_move(diags, &local);
                ydoc_list_release(&docs);
                return k;
        }
        return parse_docs(path, &docs, &local, ret, diags);
}

int ops_config_load(const char *path, ops_config **ret, diag_list *diags)
{
        ydoc_list docs = {0};
        diag_list local = DIAG_LIST_INIT;
        int k = yaml_load_file(path, &yaml_config_limits, &docs, &local);
        if (k < 0) {
                diag_move(diags, &local);
                ydoc_list_release(&docs);
                return k;
        }
        return parse_docs(path, &docs, &local, ret, diags);
}
