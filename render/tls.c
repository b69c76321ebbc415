/*
 * TLS in rendered objects: the Secret volumes every member mounts, and the
 * cert-manager Certificates that fill those Secrets.
 *
 * Layout under the plan's tls_dir (each folder one kubernetes.io/tls
 * Secret with tls.crt, tls.key, ca.crt, mounted read-only, mode 0400):
 *
 *   client/     the client-facing server certificate  (client TLS on)
 *   peer/       the member-to-member certificate      (peer TLS on)
 *   operator/   gitcd's client identity, CN "root"    (client TLS on), so
 *               `kubectl exec ... etcdctl` works inside a member
 *   ca-bundle/  spec.tls.caBundleSecret, when set: its ca.crt replaces the
 *               surfaces' own ca.crt as etcd's trusted CA file
 *
 * Which Secret backs each folder depends on the provider:
 *   secrets       the user's Secrets, named in the spec; nothing rendered.
 *   cert-manager  "<name>-client-tls", "<name>-peer-tls", "<name>-operator-tls",
 *                 filled by the Certificates rendered here (the operator
 *                 certificate uses the client issuer unless its own is set).
 *   auto          the same three names, but gitcd itself issues a CA and the
 *                 leaf certificates and creates the Secrets when it applies:
 *                 private keys are not pure output, so they are never rendered.
 *
 * Certificate names (DNS SANs) come from the plan's advertised URLs, so
 * they always match what members dial: every member's host name, the
 * wildcard of the headless Service, the client Service's short and full
 * names, localhost, and 127.0.0.1 as an IP SAN.
 */
#include <arpa/inet.h>
#include <string.h>

#include "render/render-internal.h"
#include "util/xalloc.h"

static const char *const tls_subdirs[] = {
    TLS_SUBDIR_CLIENT,
    TLS_SUBDIR_PEER,
    TLS_SUBDIR_OPERATOR,
    TLS_SUBDIR_CA_BUNDLE,
};

void render_tls_volumes(const etcd_cluster *c, const member_plan *m, json_t *volumes,
                        json_t *mounts)
{
        const char *dir = isempty(m->tls_dir) ? RENDER_STEADY_TLS_DIR : m->tls_dir;
        for (size_t i = 0; i < ARRAY_SIZE(tls_subdirs); i++) {
                _cleanup_free_ char *secret = render_tls_secret_name(c, tls_subdirs[i]);
                if (!secret)
                        continue;
                _cleanup_free_ char *vol = xasprintf("%s-tls", tls_subdirs[i]);
                _cleanup_free_ char *path = xasprintf("%s/%s", dir, tls_subdirs[i]);
                json_array_append_new(volumes,
                                      json_pack("{s:s, s:{s:s, s:i}}", "name", vol, "secret",
                                                "secretName", secret, "defaultMode", 0400));
                json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "name", vol, "mountPath",
                                                        path, "readOnly", 1));
        }
}

/* "scheme://host:port/..." -> host (without brackets), newly allocated; NULL if none. */
static char *url_host(const char *url)
{
        if (isempty(url))
                return NULL;
        const char *h = strstr(url, "://");
        h = h ? h + 3 : url;
        if (*h == '[') {
                const char *e = strchr(h, ']');
                return e ? xstrndup(h + 1, (size_t)(e - h - 1)) : NULL;
        }
        size_t len = strcspn(h, ":/");
        return len ? xstrndup(h, len) : NULL;
}

static bool is_ip(const char *s)
{
        unsigned char buf[16];
        return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static void add_unique(json_t *arr, const char *s)
{
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) if (streq(json_string_value(v), s)) return;
        json_array_append_new(arr, json_string(s));
}

/* Sort a JSON array of strings (wildcards and names in a stable order). */
static int cmp_json_str(const void *a, const void *b)
{
        return strcmp(json_string_value(*(json_t *const *)a),
                      json_string_value(*(json_t *const *)b));
}

static void sort_strings(json_t *arr)
{
        size_t n = json_array_size(arr);
        json_t **items = xcalloc(n ? n : 1, sizeof(json_t *));
        for (size_t i = 0; i < n; i++)
                items[i] = json_incref(json_array_get(arr, i));
        qsort(items, n, sizeof(json_t *), cmp_json_str);
        json_array_clear(arr);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, items[i]);
        free(items);
}

/*
 * If host is "<member>.<headless>.<ns>.svc.<domain>", the "<headless>...<domain>"
 * part (for the wildcard) and the domain; else both NULL.
 */
static void split_member_host(const char *host, const char *member, const char *headless_prefix,
                              const char **ret_rest, const char **ret_domain)
{
        size_t ml = strlen(member), hl = strlen(headless_prefix);
        *ret_rest = NULL;
        *ret_domain = NULL;
        if (!strneq(host, member, ml) || host[ml] != '.')
                return;
        *ret_rest = host + ml + 1;
        if (strneq(*ret_rest, headless_prefix, hl) && (*ret_rest)[hl])
                *ret_domain = *ret_rest + hl;
}

/* A Service's names: short, namespaced and (when the domain is known) fully qualified. */
static void service_names(const char *svc, const char *ns, const char *domain, json_t *dns)
{
        _cleanup_free_ char *svc_ns = xasprintf("%s.%s", svc, ns);
        _cleanup_free_ char *svc_svc = xasprintf("%s.%s.svc", svc, ns);
        add_unique(dns, svc);
        add_unique(dns, svc_ns);
        add_unique(dns, svc_svc);
        if (domain) {
                _cleanup_free_ char *full = xasprintf("%s.%s", svc_svc, domain);
                add_unique(dns, full);
        }
}

/*
 * A takeover of a coreos cluster (spec.adopt): its client Service
 * <old>-client (targets/kubernetes-takeover.c) comes to select gitcd's
 * voters, and its clients keep verifying the server by that name, so
 * gitcd's server certificates carry it too.
 */
static void old_client_service_names(const etcd_cluster *c, const char *ns, const char *domain,
                                     json_t *dns)
{
        if (c->adopt.from != ADOPT_FROM_COREOS || !c->adopt.name)
                return;
        _cleanup_free_ char *svc = xasprintf("%s-client", c->adopt.name);
        service_names(svc, ns, domain, dns);
}

/* DNS and IP SANs for the server certificates, derived from the plan. */
static void server_names(const etcd_cluster *c, const membership_plan *p, json_t *dns, json_t *ips)
{
        const char *ns = render_namespace(c);
        _cleanup_free_ char *headless = render_headless_service_name(c);
        _cleanup_free_ char *svc = render_client_service_name(c);
        _cleanup_free_ char *headless_prefix = xasprintf("%s.%s.svc.", headless, ns);
        _cleanup_free_ char *domain = NULL;
        json_t *members = json_array();

        for (size_t i = 0; i < p->n; i++) {
                const member_plan *m = &p->members[i];
                const char *urls[] = {m->peer_url, m->client_url};
                for (size_t u = 0; u < ARRAY_SIZE(urls); u++) {
                        _cleanup_free_ char *host = url_host(urls[u]);
                        if (!host)
                                continue;
                        if (is_ip(host)) {
                                add_unique(ips, host);
                                continue;
                        }
                        add_unique(members, host);
                        const char *rest, *dom;
                        split_member_host(host, m->name, headless_prefix, &rest, &dom);
                        if (rest) {
                                _cleanup_free_ char *wild = xasprintf("*.%s", rest);
                                add_unique(members, wild);
                        }
                        if (dom && !domain)
                                domain = xstrdup(dom);
                }
        }
        sort_strings(members);

        service_names(svc, ns, domain, dns);
        old_client_service_names(c, ns, domain, dns);
        size_t i;
        json_t *v;
        json_array_foreach(members, i, v) add_unique(dns, json_string_value(v));
        json_decref(members);
        add_unique(dns, "localhost");
        add_unique(ips, "127.0.0.1");
}

static json_t *issuer_json(const issuer_ref *r)
{
        return json_pack("{s:s, s:s, s:s}", "name", r->name ?: "", "kind",
                         isempty(r->kind) ? "Issuer" : r->kind, "group",
                         isempty(r->group) ? "cert-manager.io" : r->group);
}

static json_t *certificate(const etcd_cluster *c, const char *subdir, const issuer_ref *issuer,
                           const char *common_name, json_t *dns, json_t *ips, bool server)
{
        _cleanup_free_ char *name = xasprintf("%s-%s", c->name, subdir);
        _cleanup_free_ char *secret = render_tls_secret_name(c, subdir);
        json_t *spec = json_object();
        json_object_set_new(spec, "secretName", json_string(secret));
        if (common_name)
                json_object_set_new(spec, "commonName", json_string(common_name));
        if (dns)
                json_object_set(spec, "dnsNames", dns);
        if (ips)
                json_object_set(spec, "ipAddresses", ips);
        json_object_set_new(spec, "usages",
                            server ? json_pack("[s,s]", "server auth", "client auth")
                                   : json_pack("[s]", "client auth"));
        json_object_set_new(spec, "privateKey",
                            json_pack("{s:s, s:i, s:s}", "algorithm", "ECDSA", "size", 256,
                                      "rotationPolicy", "Always"));
        json_object_set_new(spec, "issuerRef", issuer_json(issuer));

        json_t *o = json_object();
        json_object_set_new(o, "apiVersion", json_string("cert-manager.io/v1"));
        json_object_set_new(o, "kind", json_string("Certificate"));
        json_object_set_new(o, "metadata",
                            render_metadata(c, name, COMPONENT_CERTIFICATE, NULL, false));
        json_object_set_new(o, "spec", spec);
        return o;
}

void render_certificates(const etcd_cluster *c, const membership_plan *p, json_t *out)
{
        if (c->tls.provider != TLS_PROVIDER_CERT_MANAGER)
                return;
        bool client = render_client_tls(c), peer = render_peer_tls(c);
        if (!client && !peer)
                return;
        json_t *dns = json_array(), *ips = json_array();
        server_names(c, p, dns, ips);
        if (client) {
                json_array_append_new(out, certificate(c, TLS_SUBDIR_CLIENT, &c->tls.client.issuer,
                                                       NULL, dns, ips, true));
        }
        if (peer) {
                json_array_append_new(out, certificate(c, TLS_SUBDIR_PEER, &c->tls.peer.issuer,
                                                       NULL, dns, ips, true));
        }
        if (client) {
                const issuer_ref *op = isempty(c->tls.operator_client_issuer.name)
                                           ? &c->tls.client.issuer
                                           : &c->tls.operator_client_issuer;
                json_array_append_new(
                    out, certificate(c, TLS_SUBDIR_OPERATOR, op, "root", NULL, NULL, false));
        }
        json_decref(dns);
        json_decref(ips);
}
