/*
 * Kubeconfig and in-cluster configuration for the Kubernetes client.
 *
 * The file is read with the project's YAML loader (api/yaml.h) and turned
 * into JSON, so the kubeconfig structure is walked with jansson; there is no
 * YAML handling here. Only the first file of a $KUBECONFIG list is read:
 * gitcd does not merge kubeconfig files the way kubectl does, and says so in
 * kubeconfig.h. Data fields (certificate-authority-data, ...) win over file
 * fields, as in kubectl; file fields are resolved against the kubeconfig's
 * folder and checked for readability here, so a bad path is reported with
 * its cluster or user rather than as a TLS failure later.
 */
#include "kube/kubeconfig.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/yaml.h"
#include "util/diag.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define KUBECONFIG_MAX_BYTES (4u << 20)
#define TOKEN_MAX_BYTES      (64u << 10)

_printf_(3, 4) static int fail(char **ret_error, int r, const char *fmt, ...)
{
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                *ret_error = xvasprintf(fmt, ap);
                va_end(ap);
        }
        return r;
}

void kube_config_free(kube_config *cfg)
{
        if (!cfg)
                return;
        free(cfg->source);
        free(cfg->context);
        free(cfg->server);
        free(cfg->namespace);
        free(cfg->ca_file);
        free(cfg->ca_data);
        free(cfg->cert_file);
        free(cfg->cert_data);
        free(cfg->key_file);
        if (cfg->key_data) {
                explicit_bzero(cfg->key_data, cfg->key_len);
                free(cfg->key_data);
        }
        if (cfg->token) {
                explicit_bzero(cfg->token, strlen(cfg->token));
                free(cfg->token);
        }
        free(cfg->token_file);
        free(cfg);
}

static void kube_config_freep(kube_config **p)
{
        kube_config_free(*p);
}

int kube_base64_decode(const char *in, char **ret_data, size_t *ret_len)
{
        _cleanup_free_ char *clean = xmalloc(strlen(in) + 1);
        _cleanup_free_ char *out = NULL;
        size_t n = 0, pad = 0;
        int len;

        for (const char *p = in; *p; p++)
                if (!strchr(" \t\r\n", *p))
                        clean[n++] = *p;
        clean[n] = '\0';
        if (n == 0 || n % 4 != 0)
                return -EINVAL;
        if (clean[n - 1] == '=')
                pad++;
        if (clean[n - 2] == '=')
                pad++;
        out = xmalloc(n / 4 * 3 + 1);
        len = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)clean, (int)n);
        if (len < 0 || (size_t)len < pad)
                return -EINVAL;
        len -= (int)pad;
        out[len] = '\0';
        *ret_data = TAKE_PTR(out);
        *ret_len = (size_t)len;
        return 0;
}

char *kube_base64_encode(const void *data, size_t len)
{
        char *out = xmalloc(4 * ((len + 2) / 3) + 1);
        EVP_EncodeBlock((unsigned char *)out, data, (int)len);
        return out;
}

char *kube_config_default_path(void)
{
        const char *env = getenv("KUBECONFIG");
        const char *home;

        if (!isempty(env)) {
                /* The first non-empty entry of the list. */
                for (const char *p = env; *p;) {
                        size_t n = strcspn(p, ":");
                        if (n > 0)
                                return xstrndup(p, n);
                        p += n + (p[n] == ':');
                }
        }
        home = getenv("HOME");
        if (isempty(home))
                return NULL;
        return xasprintf("%s/.kube/config", home);
}

/* "a, b" of the names in root[list][*].name, or "none". */
static char *list_names(const json_t *root, const char *list)
{
        strbuf sb = STRBUF_INIT;
        const json_t *arr = json_object_get(root, list), *item;
        size_t i;

        json_array_foreach(arr, i, item)
        {
                const char *name = json_string_value(json_object_get(item, "name"));
                if (!name)
                        continue;
                if (sb.len > 0)
                        sb_append(&sb, ", ");
                sb_append(&sb, name);
        }
        if (sb.len == 0)
                sb_append(&sb, "none");
        return sb_detach(&sb);
}

/*
 * The entry root[list][i] whose name matches, or NULL. Its `inner` object
 * ("context", "cluster", "user") may be absent: json_object_get(NULL, ...)
 * is NULL, so an empty entry reads as one without fields.
 */
static const json_t *find_named(const json_t *root, const char *list, const char *name)
{
        const json_t *arr = json_object_get(root, list), *item;
        size_t i;

        json_array_foreach(arr, i, item)
        {
                if (streq_ptr(json_string_value(json_object_get(item, "name")), name))
                        return item;
        }
        return NULL;
}

/* A string field: 0 with *ret NULL when absent; -EINVAL (with message) when not a string. */
static int get_str(const json_t *obj, const char *key, const char *what, const char *path,
                   const char **ret, char **ret_error)
{
        const json_t *v = json_object_get(obj, key);

        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return fail(ret_error, -EINVAL, "%s in %s: field %s must be a string", what, path,
                            key);
        *ret = json_string_value(v);
        if (**ret == '\0')
                *ret = NULL;
        return 0;
}

static char *resolve_path(const char *dir, const char *p)
{
        if (p[0] == '/' || !dir)
                return xstrdup(p);
        return path_join(dir, p);
}

/*
 * One credential: `data_key` (base64 PEM) wins over `file_key` (a path,
 * resolved and checked). `secret` keeps a bad field's content out of messages.
 */
static int load_credential(const json_t *obj, const char *file_key, const char *data_key,
                           const char *dir, const char *what, const char *path, char **ret_file,
                           char **ret_data, size_t *ret_len, char **ret_error)
{
        const char *file, *data;
        int r;

        r = get_str(obj, data_key, what, path, &data, ret_error);
        if (r < 0)
                return r;
        if (data) {
                if (kube_base64_decode(data, ret_data, ret_len) < 0)
                        return fail(ret_error, -EINVAL, "%s in %s: %s is not valid base64", what,
                                    path, data_key);
                return 0;
        }
        r = get_str(obj, file_key, what, path, &file, ret_error);
        if (r < 0)
                return r;
        if (file) {
                _cleanup_free_ char *full = resolve_path(dir, file);
                if (access(full, R_OK) < 0)
                        return fail(ret_error, -errno, "%s in %s: %s %s: %s", what, path, file_key,
                                    full, strerror(errno));
                *ret_file = TAKE_PTR(full);
        }
        return 0;
}

/* libcurl's own URL parser decides whether the server names a host: a
 * server of "https://" or "https:///x" would otherwise lose its slashes and
 * turn into a scheme alone. */
static bool server_has_host(const char *server)
{
        CURLU *u = curl_url();
        char *host = NULL;
        bool ok;

        if (!u)
                return false;
        ok = curl_url_set(u, CURLUPART_URL, server, 0) == CURLUE_OK &&
             curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && host && *host;
        curl_free(host);
        curl_url_cleanup(u);
        return ok;
}

static int load_cluster(kube_config *cfg, const json_t *cluster, const char *dir, const char *what,
                        char **ret_error)
{
        const json_t *insecure = json_object_get(cluster, "insecure-skip-tls-verify");
        const char *server;
        size_t n;
        int r;

        r = get_str(cluster, "server", what, cfg->source, &server, ret_error);
        if (r < 0)
                return r;
        if (!server)
                return fail(ret_error, -EINVAL, "%s in %s has no server", what, cfg->source);
        if (!strneq(server, "https://", 8) && !strneq(server, "http://", 7))
                return fail(ret_error, -EINVAL,
                            "%s in %s: server \"%s\" must start with https:// or http://", what,
                            cfg->source, server);
        if (!server_has_host(server))
                return fail(ret_error, -EINVAL, "%s in %s: server \"%s\" names no host", what,
                            cfg->source, server);
        cfg->server = xstrdup(server);
        n = strlen(cfg->server);
        while (n > 0 && cfg->server[n - 1] == '/')
                cfg->server[--n] = '\0';

        if (insecure && !json_is_boolean(insecure))
                return fail(ret_error, -EINVAL,
                            "%s in %s: insecure-skip-tls-verify must be true or false", what,
                            cfg->source);
        cfg->insecure_skip_tls_verify = json_is_true(insecure);

        return load_credential(cluster, "certificate-authority", "certificate-authority-data", dir,
                               what, cfg->source, &cfg->ca_file, &cfg->ca_data, &cfg->ca_len,
                               ret_error);
}

static int load_user(kube_config *cfg, const json_t *user, const char *dir, const char *what,
                     char **ret_error)
{
        const char *token, *token_file;
        int r;

        if (json_object_get(user, "exec") || json_object_get(user, "auth-provider"))
                return fail(ret_error, -EINVAL,
                            "%s in %s uses a credential plugin (exec/auth-provider), which gitcd "
                            "does not support; use a token, a tokenFile or a client certificate",
                            what, cfg->source);
        if (json_object_get(user, "username") || json_object_get(user, "password"))
                return fail(ret_error, -EINVAL,
                            "%s in %s uses basic authentication, which gitcd does not support; "
                            "use a token, a tokenFile or a client certificate",
                            what, cfg->source);

        r = load_credential(user, "client-certificate", "client-certificate-data", dir, what,
                            cfg->source, &cfg->cert_file, &cfg->cert_data, &cfg->cert_len,
                            ret_error);
        if (r < 0)
                return r;
        r = load_credential(user, "client-key", "client-key-data", dir, what, cfg->source,
                            &cfg->key_file, &cfg->key_data, &cfg->key_len, ret_error);
        if (r < 0)
                return r;
        if ((cfg->cert_file || cfg->cert_data) != (cfg->key_file || cfg->key_data))
                return fail(ret_error, -EINVAL,
                            "%s in %s has a client certificate without a client key or the "
                            "other way round; both are needed",
                            what, cfg->source);

        r = get_str(user, "token", what, cfg->source, &token, ret_error);
        if (r < 0)
                return r;
        r = get_str(user, "tokenFile", what, cfg->source, &token_file, ret_error);
        if (r < 0)
                return r;
        if (token)
                cfg->token = xstrdup(token);
        else if (token_file)
                cfg->token_file = resolve_path(dir, token_file);
        return 0;
}

/*
 * Parse a kubeconfig, from the file at path or (when buf is not NULL) from
 * buf, and pick the context. path names the file in messages and relative
 * paths are resolved against its folder either way.
 */
static int load_file(const char *path, const char *buf, size_t len, const char *context,
                     kube_config **ret_config, char **ret_error)
{
        _cleanup_(kube_config_freep) kube_config *cfg = NULL;
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_free_ char *dir = NULL, *names = NULL, *ctx_what = NULL, *cl_what = NULL,
                            *user_what = NULL;
        ydoc_list docs = {0};
        diag_list diags = DIAG_LIST_INIT;
        const json_t *entry, *ctx, *cluster, *user;
        const char *cluster_name, *user_name, *ns, *slash;
        int r;

        r = buf ? yaml_parse(path, buf, len, &yaml_config_limits, &docs, &diags)
                : yaml_load_file(path, &yaml_config_limits, &docs, &diags);
        if (r < 0) {
                _cleanup_free_ char *msg = diags.n > 0 ? diag_format(&diags.items[0]) : NULL;
                ydoc_list_release(&docs);
                diag_list_release(&diags);
                if (r == -ENOENT)
                        return fail(ret_error, r, "kubeconfig %s does not exist", path);
                return fail(ret_error, r, "cannot read kubeconfig %s: %s", path,
                            msg ? msg : strerror(-r));
        }
        diag_list_release(&diags);
        if (docs.n > 0 && docs.docs[0].root)
                root = ynode_to_json(docs.docs[0].root);
        ydoc_list_release(&docs);
        if (!json_is_object(root))
                return fail(ret_error, -EINVAL, "kubeconfig %s is empty or not a mapping", path);

        cfg = XNEW(kube_config);
        cfg->source = xstrdup(path);
        slash = strrchr(path, '/');
        dir = slash ? xstrndup(path, (size_t)(slash - path) + (slash == path)) : xstrdup(".");

        if (isempty(context)) {
                context = json_string_value(json_object_get(root, "current-context"));
                if (isempty(context)) {
                        names = list_names(root, "contexts");
                        return fail(ret_error, -ENOENT,
                                    "kubeconfig %s has no current-context and no context was "
                                    "given (contexts: %s)",
                                    path, names);
                }
        }
        cfg->context = xstrdup(context);
        entry = find_named(root, "contexts", context);
        if (!entry) {
                names = list_names(root, "contexts");
                return fail(ret_error, -ENOENT, "context \"%s\" not found in %s (contexts: %s)",
                            context, path, names);
        }
        ctx = json_object_get(entry, "context");
        ctx_what = xasprintf("context \"%s\"", context);
        r = get_str(ctx, "cluster", ctx_what, path, &cluster_name, ret_error);
        if (r < 0)
                return r;
        if (!cluster_name)
                return fail(ret_error, -EINVAL, "context \"%s\" in %s names no cluster", context,
                            path);
        entry = find_named(root, "clusters", cluster_name);
        if (!entry) {
                names = list_names(root, "clusters");
                return fail(ret_error, -ENOENT,
                            "cluster \"%s\" of context \"%s\" not found in %s (clusters: %s)",
                            cluster_name, context, path, names);
        }
        cluster = json_object_get(entry, "cluster");
        cl_what = xasprintf("cluster \"%s\" of context \"%s\"", cluster_name, context);
        r = load_cluster(cfg, cluster, dir, cl_what, ret_error);
        if (r < 0)
                return r;

        r = get_str(ctx, "user", ctx_what, path, &user_name, ret_error);
        if (r < 0)
                return r;
        if (user_name) {
                entry = find_named(root, "users", user_name);
                if (!entry) {
                        names = list_names(root, "users");
                        return fail(ret_error, -ENOENT,
                                    "user \"%s\" of context \"%s\" not found in %s (users: %s)",
                                    user_name, context, path, names);
                }
                user = json_object_get(entry, "user");
                user_what = xasprintf("user \"%s\" of context \"%s\"", user_name, context);
                r = load_user(cfg, user, dir, user_what, ret_error);
                if (r < 0)
                        return r;
        }

        r = get_str(ctx, "namespace", ctx_what, path, &ns, ret_error);
        if (r < 0)
                return r;
        cfg->namespace = xstrdup(ns ? ns : "default");
        *ret_config = TAKE_PTR(cfg);
        return 0;
}

int kube_config_load(const char *path, const char *context, kube_config **ret_config,
                     char **ret_error)
{
        _cleanup_free_ char *def = NULL;

        if (ret_error)
                *ret_error = NULL;
        if (isempty(path)) {
                def = kube_config_default_path();
                if (!def)
                        return fail(ret_error, -ENOENT,
                                    "no kubeconfig: neither --kubeconfig, $KUBECONFIG nor $HOME "
                                    "is set");
                path = def;
        }
        return load_file(path, NULL, 0, context, ret_config, ret_error);
}

int kube_config_load_buffer(const char *path, const char *buf, size_t len, const char *context,
                            kube_config **ret_config, char **ret_error)
{
        if (ret_error)
                *ret_error = NULL;
        return load_file(path, buf, len, context, ret_config, ret_error);
}

int kube_config_in_cluster(const char *base, kube_config **ret_config, char **ret_error)
{
        _cleanup_(kube_config_freep) kube_config *cfg = NULL;
        _cleanup_free_ char *token = NULL, *ca = NULL, *nsfile = NULL, *ns = NULL;
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        size_t len;

        if (ret_error)
                *ret_error = NULL;
        if (!base)
                base = KUBE_SERVICEACCOUNT_DIR;
        if (isempty(host) || isempty(port))
                return fail(ret_error, -ENOENT,
                            "not running inside a Kubernetes pod: KUBERNETES_SERVICE_HOST and "
                            "KUBERNETES_SERVICE_PORT must both be set");
        token = path_join(base, "token");
        if (access(token, R_OK) < 0)
                return fail(ret_error, -ENOENT, "in-cluster service account token %s: %s", token,
                            strerror(errno));
        cfg = XNEW(kube_config);
        cfg->source = xstrdup("in-cluster");
        cfg->server = strchr(host, ':') ? xasprintf("https://[%s]:%s", host, port)
                                        : xasprintf("https://%s:%s", host, port);
        cfg->token_file = TAKE_PTR(token);
        ca = path_join(base, "ca.crt");
        if (access(ca, R_OK) == 0)
                cfg->ca_file = TAKE_PTR(ca);
        nsfile = path_join(base, "namespace");
        if (read_file(nsfile, 4096, &ns, &len) == 0) {
                while (len > 0 && strchr(" \t\r\n", ns[len - 1]))
                        ns[--len] = '\0';
        }
        cfg->namespace = xstrdup(!isempty(ns) ? ns : "default");
        *ret_config = TAKE_PTR(cfg);
        return 0;
}

int kube_config_read_token(const kube_config *cfg, char **ret_token, char **ret_error)
{
        _cleanup_free_ char *data = NULL;
        size_t len, start = 0;
        int r;

        if (cfg->token) {
                *ret_token = xstrdup(cfg->token);
                return 0;
        }
        if (!cfg->token_file) {
                *ret_token = NULL;
                return 0;
        }
        r = read_file(cfg->token_file, TOKEN_MAX_BYTES, &data, &len);
        if (r < 0)
                return fail(ret_error, r, "cannot read token file %s (from %s): %s",
                            cfg->token_file, cfg->source, strerror(-r));
        while (len > 0 && strchr(" \t\r\n", data[len - 1]))
                data[--len] = '\0';
        while (start < len && strchr(" \t\r\n", data[start]))
                start++;
        if (start == len) {
                explicit_bzero(data, len);
                return fail(ret_error, -EINVAL, "token file %s (from %s) is empty", cfg->token_file,
                            cfg->source);
        }
        *ret_token = xstrdup(data + start);
        explicit_bzero(data, len);
        return 0;
}

int kube_config_resolve(const char *path, const char *context, kube_config **ret_config,
                        char **ret_error)
{
        if (isempty(path) && isempty(context) && !isempty(getenv("KUBERNETES_SERVICE_HOST")))
                return kube_config_in_cluster(NULL, ret_config, ret_error);
        return kube_config_load(isempty(path) ? NULL : path, isempty(context) ? NULL : context,
                                ret_config, ret_error);
}
