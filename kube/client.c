/*
 * The Kubernetes REST client: URL mapping, server-side apply, list, watch,
 * delete and discovery over one reused libcurl easy handle.
 *
 * Every call goes through request(): it sends one HTTP request, retries
 * what is safe to retry (429 honouring Retry-After, 5xx, a lost or refused
 * connection; 100 ms doubling to 2 s, 5 tries) and never a 4xx. A 401 with
 * a token file re-reads the file once and tries again, because projected
 * service-account tokens rotate under a running process. Failed responses
 * are turned into one sentence by kube_status_error(), a pure function, so
 * the wording for RBAC denials and apply conflicts is tested without a
 * server. Watches use the same path with a streaming body: the response is
 * split into JSON lines as it arrives and each event goes to the caller.
 */
#include "kube/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/escape.h"
#include "util/http.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define KUBE_TRIES            5
#define KUBE_BACKOFF_FIRST_MS 100
#define KUBE_BACKOFF_MAX_MS   2000
#define KUBE_RETRY_AFTER_MAX  10 /* seconds */
#define KUBE_CALL_TIMEOUT_MS  30000
#define KUBE_MAX_BODY         (64u << 20)
#define KUBE_MAX_MESSAGE      600

struct kube_client {
        kube_config *cfg;
        CURL *curl;
        char *token; /* secret */
        strbuf error;
        int http_version;
        json_t *core;            /* GET /api */
        json_t *groups;          /* GET /apis */
        json_t *resources;       /* "group/version" -> APIResourceList, or null when absent */
        bool (*interrupt)(void); /* ends a kube_watch_for early (NULL: none) */
};

/* ---- pure functions ---- */

static const struct kind_entry {
        const char *api_version;
        const char *kind;
        kube_gvr gvr;
} kinds[] = {
    {"v1", "Pod", {"", "v1", "pods", true}},
    {"v1", "PersistentVolumeClaim", {"", "v1", "persistentvolumeclaims", true}},
    {"v1", "Service", {"", "v1", "services", true}},
    {"v1", "Secret", {"", "v1", "secrets", true}},
    {"v1", "ConfigMap", {"", "v1", "configmaps", true}},
    {"v1", "Namespace", {"", "v1", "namespaces", false}},
    {"v1", "Node", {"", "v1", "nodes", false}},
    {"v1", "ServiceAccount", {"", "v1", "serviceaccounts", true}},
    {"apps/v1", "Deployment", {"apps", "v1", "deployments", true}},
    {"rbac.authorization.k8s.io/v1", "Role", {"rbac.authorization.k8s.io", "v1", "roles", true}},
    {"rbac.authorization.k8s.io/v1",
     "RoleBinding",
     {"rbac.authorization.k8s.io", "v1", "rolebindings", true}},
    {"rbac.authorization.k8s.io/v1",
     "ClusterRole",
     {"rbac.authorization.k8s.io", "v1", "clusterroles", false}},
    {"rbac.authorization.k8s.io/v1",
     "ClusterRoleBinding",
     {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", false}},
    {"policy/v1", "PodDisruptionBudget", {"policy", "v1", "poddisruptionbudgets", true}},
    {"policy/v1beta1", "PodDisruptionBudget", {"policy", "v1beta1", "poddisruptionbudgets", true}},
    {"cert-manager.io/v1", "Certificate", {"cert-manager.io", "v1", "certificates", true}},
    {"cert-manager.io/v1", "Issuer", {"cert-manager.io", "v1", "issuers", true}},
};

int kube_gvr_for_kind(const char *api_version, const char *kind, kube_gvr *ret_gvr)
{
        for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
                if (streq_ptr(kinds[i].api_version, api_version) &&
                    streq_ptr(kinds[i].kind, kind)) {
                        *ret_gvr = kinds[i].gvr;
                        return 0;
                }
        }
        return -ENOENT;
}

char *kube_group_version_path(const char *group, const char *version)
{
        if (isempty(group))
                return xasprintf("/api/%s", version);
        return xasprintf("/apis/%s/%s", group, version);
}

/* A DNS subdomain or label: lowercase alphanumerics, '-' and '.'. */
static bool valid_name(const char *s)
{
        if (isempty(s) || strlen(s) > 253)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
                      *p == '.'))
                        return false;
        return true;
}

int kube_resource_path(const kube_gvr *gvr, const char *ns, const char *name, char **ret_path)
{
        _cleanup_free_ char *gv = NULL;
        strbuf sb = STRBUF_INIT;

        if (!gvr || isempty(gvr->version) || !valid_name(gvr->resource) ||
            (gvr->group && *gvr->group && !valid_name(gvr->group)))
                return -EINVAL;
        if ((ns && !valid_name(ns)) || (name && !valid_name(name)))
                return -EINVAL;
        gv = kube_group_version_path(gvr->group, gvr->version);
        sb_append(&sb, gv);
        if (ns && gvr->namespaced)
                sb_printf(&sb, "/namespaces/%s", ns);
        sb_printf(&sb, "/%s", gvr->resource);
        if (name)
                sb_printf(&sb, "/%s", name);
        *ret_path = sb_detach(&sb);
        return 0;
}

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

/* Percent-encode a query value. */
static void append_query_value(strbuf *sb, const char *v)
{
        static const char hex[] = "0123456789ABCDEF";

        for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
                        sb_appendc(sb, (char)*p);
                } else {
                        sb_appendc(sb, '%');
                        sb_appendc(sb, hex[*p >> 4]);
                        sb_appendc(sb, hex[*p & 15]);
                }
        }
}

int kube_apply_request(const json_t *obj, const char *default_ns, const char *field_manager,
                       bool force, bool dry_run, char **ret_path, char **ret_body, char **ret_error)
{
        _cleanup_free_ char *path = NULL, *body = NULL;
        const char *api_version, *kind, *name, *ns;
        const json_t *meta;
        strbuf sb = STRBUF_INIT;
        kube_gvr gvr;

        if (!json_is_object(obj))
                return fail(ret_error, -EINVAL, "cannot apply: the object is not a JSON object");
        api_version = json_string_value(json_object_get(obj, "apiVersion"));
        kind = json_string_value(json_object_get(obj, "kind"));
        meta = json_object_get(obj, "metadata");
        name = json_string_value(json_object_get(meta, "name"));
        ns = json_string_value(json_object_get(meta, "namespace"));
        if (isempty(api_version) || isempty(kind) || isempty(name))
                return fail(ret_error, -EINVAL,
                            "cannot apply: the object lacks apiVersion, kind or metadata.name");
        if (kube_gvr_for_kind(api_version, kind, &gvr) < 0)
                return fail(ret_error, -EINVAL, "cannot apply %s %s: unknown kind for gitcd", kind,
                            api_version);
        if (gvr.namespaced && isempty(ns))
                ns = default_ns;
        if (gvr.namespaced && isempty(ns))
                return fail(ret_error, -EINVAL, "cannot apply %s \"%s\": no namespace", kind, name);
        if (kube_resource_path(&gvr, gvr.namespaced ? ns : NULL, name, &path) < 0)
                return fail(ret_error, -EINVAL,
                            "cannot apply %s \"%s\": the name or namespace is not a valid "
                            "Kubernetes name",
                            kind, name);
        body = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!body)
                return fail(ret_error, -EINVAL, "cannot apply %s \"%s\": cannot encode it", kind,
                            name);

        sb_append(&sb, path);
        sb_append(&sb, "?fieldManager=");
        append_query_value(&sb, isempty(field_manager) ? "gitcd" : field_manager);
        if (force)
                sb_append(&sb, "&force=true");
        if (dry_run)
                sb_append(&sb, "&dryRun=All");
        *ret_path = sb_detach(&sb);
        *ret_body = TAKE_PTR(body);
        return 0;
}

/* A server message, cut to a readable length, control characters escaped. */
static char *short_message(const char *m)
{
        if (!m)
                return xstrdup("");
        _cleanup_free_ char *cut =
            strlen(m) > KUBE_MAX_MESSAGE ? xasprintf("%.*s...", KUBE_MAX_MESSAGE, m) : xstrdup(m);
        return str_escape(cut);
}

/* "conflict with \"kubectl\" at .spec.replicas, ..." from a Status's details.causes. */
static char *conflict_causes(const json_t *status)
{
        const json_t *causes = json_object_get(json_object_get(status, "details"), "causes");
        const json_t *cause;
        strbuf sb = STRBUF_INIT;
        size_t i;

        json_array_foreach(causes, i, cause)
        {
                const char *m = json_string_value(json_object_get(cause, "message"));
                const char *f = json_string_value(json_object_get(cause, "field"));
                if (!m && !f)
                        continue;
                if (sb.len > 0)
                        sb_append(&sb, "; ");
                if (sb.len > KUBE_MAX_MESSAGE) {
                        sb_append(&sb, "...");
                        break;
                }
                sb_printf(&sb, "%s%s%s", m ? m : "conflict", f ? " at " : "", f ? f : "");
        }
        if (sb.len == 0) {
                sb_release(&sb);
                return NULL;
        }
        _cleanup_free_ char *text = sb_detach(&sb);
        return str_escape(text);
}

int kube_status_error(long status, const char *body, const char *verb, const char *resource,
                      const char *ns, char **ret_message)
{
        _cleanup_free_ char *where = NULL, *reason_text = NULL, *causes = NULL;
        json_t *st = body ? json_loads(body, 0, NULL) : NULL;
        const char *reason = json_string_value(json_object_get(st, "reason"));
        int r;

        reason_text = short_message(json_string_value(json_object_get(st, "message")));
        if (!*reason_text && body && !st) {
                free(reason_text);
                reason_text = short_message(body);
        }
        where = isempty(ns) ? xstrdup("") : xasprintf(" in namespace \"%s\"", ns);
        if (!verb)
                verb = "access";
        if (!resource)
                resource = "resources";

        switch (status) {
        case 401:
                r = fail(ret_message, -EACCES,
                         "unauthorized: the Kubernetes API server did not accept gitcd's "
                         "credentials to %s %s%s (%s); check the token or client certificate",
                         verb, resource, where, *reason_text ? reason_text : "Unauthorized");
                break;
        case 403:
                r = fail(ret_message, -EACCES,
                         "forbidden: gitcd cannot %s %s%s (%s); grant it in the %s", verb, resource,
                         where, *reason_text ? reason_text : "Forbidden",
                         isempty(ns) ? "ClusterRole" : "Role");
                break;
        case 404:
                r = fail(ret_message, -ENOENT, "cannot %s %s%s: not found (%s)", verb, resource,
                         where, *reason_text ? reason_text : "NotFound");
                break;
        case 409:
                if (streq_ptr(reason, "AlreadyExists")) {
                        r = fail(ret_message, -EEXIST, "cannot %s %s%s: already exists (%s)", verb,
                                 resource, where, reason_text);
                        break;
                }
                causes = conflict_causes(st);
                if (causes)
                        r = fail(ret_message, -EBUSY,
                                 "cannot %s %s%s: fields are owned by another field manager "
                                 "(%s); gitcd never takes over fields it does not own: change "
                                 "them with the tool that owns them, or drop them there",
                                 verb, resource, where, causes);
                else
                        r = fail(ret_message, -EBUSY, "cannot %s %s%s: conflict (%s)", verb,
                                 resource, where, reason_text);
                break;
        case 410:
                r = fail(ret_message, -ESTALE,
                         "cannot %s %s%s: the resource version is too old (%s); list again", verb,
                         resource, where, reason_text);
                break;
        case 400:
        case 422:
                r = fail(ret_message, -EINVAL, "the Kubernetes API server rejected %s %s%s: %s",
                         verb, resource, where, reason_text);
                break;
        default:
                r = fail(ret_message, (status == 429 || status >= 500) ? -EIO : -EPROTO,
                         "cannot %s %s%s: HTTP %ld from the Kubernetes API server%s%s%s", verb,
                         resource, where, status, *reason_text ? " (" : "", reason_text,
                         *reason_text ? ")" : "");
                break;
        }
        json_decref(st);
        return r;
}

/* ---- the client ---- */

static char *dup_mem(const char *p, size_t n)
{
        char *d;

        if (!p)
                return NULL;
        d = xmalloc(n + 1);
        memcpy(d, p, n);
        d[n] = '\0';
        return d;
}

static kube_config *config_dup(const kube_config *s)
{
        kube_config *d = XNEW(kube_config);

        d->source = xstrdup_null(s->source);
        d->context = xstrdup_null(s->context);
        d->server = xstrdup_null(s->server);
        d->namespace = xstrdup(s->namespace ? s->namespace : "default");
        d->ca_file = xstrdup_null(s->ca_file);
        d->ca_data = dup_mem(s->ca_data, s->ca_len);
        d->ca_len = s->ca_len;
        d->cert_file = xstrdup_null(s->cert_file);
        d->cert_data = dup_mem(s->cert_data, s->cert_len);
        d->cert_len = s->cert_len;
        d->key_file = xstrdup_null(s->key_file);
        d->key_data = dup_mem(s->key_data, s->key_len);
        d->key_len = s->key_len;
        d->token = xstrdup_null(s->token);
        d->token_file = xstrdup_null(s->token_file);
        d->insecure_skip_tls_verify = s->insecure_skip_tls_verify;
        return d;
}

static void free_token(kube_client *c)
{
        if (c->token) {
                explicit_bzero(c->token, strlen(c->token));
                free(c->token);
                c->token = NULL;
        }
}

void kube_client_free(kube_client *c)
{
        if (!c)
                return;
        if (c->curl)
                curl_easy_cleanup(c->curl);
        free_token(c);
        kube_config_free(c->cfg);
        sb_release(&c->error);
        json_decref(c->core);
        json_decref(c->groups);
        json_decref(c->resources);
        free(c);
}

int kube_client_new(const kube_config *cfg, kube_client **ret_client, char **ret_error)
{
        kube_client *c;
        char *token = NULL;
        CURL *curl;
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (!cfg || isempty(cfg->server))
                return fail(ret_error, -EINVAL, "no Kubernetes API server configured");
        r = kube_config_read_token(cfg, &token, ret_error);
        if (r < 0)
                return r;
        /* An API server is reached directly, never through a proxy (util/http.h). */
        http_opts o = {
            .proxy = HTTP_PROXY_NONE,
            .connect_timeout_ms = 10000,
            .http_version = CURL_HTTP_VERSION_2TLS,
            .tls = {.insecure = cfg->insecure_skip_tls_verify,
                    .ca_file = cfg->ca_file,
                    .ca_pem = cfg->ca_data,
                    .ca_pem_len = cfg->ca_len,
                    .cert_file = cfg->cert_file,
                    .cert_pem = cfg->cert_data,
                    .cert_pem_len = cfg->cert_len,
                    .key_file = cfg->key_file,
                    .key_pem = cfg->key_data,
                    .key_pem_len = cfg->key_len},
        };
        curl = http_handle_new(&o);
        if (!curl) {
                if (token)
                        explicit_bzero(token, strlen(token));
                free(token);
                return fail(ret_error, -ENOMEM, "cannot create an HTTP client");
        }
        c = XNEW(kube_client);
        c->cfg = config_dup(cfg);
        c->curl = curl;
        c->token = token;
        c->resources = json_object();
        *ret_client = c;
        return 0;
}

const char *kube_client_last_error(const kube_client *c)
{
        return sb_str(&c->error);
}

int kube_client_http_version(const kube_client *c)
{
        return c->http_version;
}

const char *kube_client_namespace(const kube_client *c)
{
        return c->cfg->namespace;
}

_printf_(3, 4) static int set_error(kube_client *c, int r, const char *fmt, ...)
{
        va_list ap;

        sb_reset(&c->error);
        va_start(ap, fmt);
        sb_vprintf(&c->error, fmt, ap);
        va_end(ap);
        return r;
}

/* One request: what it does (for messages) and how it is sent. */
struct req {
        const char *method; /* "GET", "PATCH", "DELETE" */
        const char *path;   /* with query */
        const char *content_type;
        const char *body;
        const char *verb; /* "get", "list", "patch", "delete", "watch" */
        const char *resource;
        const char *ns;
        /* Streaming: called with each complete line of a 200 response. */
        int (*on_line)(const char *line, size_t len, void *userdata);
        void *userdata;
        const char *accept;       /* NULL = "application/json" */
        size_t max_body;          /* 0 = KUBE_MAX_BODY */
        bool cut_at_max;          /* a larger body is cut at max_body, not refused */
        int timeout_ms;           /* 0 = KUBE_CALL_TIMEOUT_MS; -1 = none */
        bool timeout_ends_stream; /* a streaming request's timeout is its normal end */
};

struct resp {
        CURL *curl;
        const struct req *rq;
        long status;
        strbuf body;
        long retry_after; /* seconds, -1 = none */
        size_t delivered; /* lines given to on_line */
        int stop;         /* on_line's non-zero result */
        bool too_big;
        bool cut; /* the body was cut at rq->max_body (cut_at_max) */
};

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
        struct resp *rs = userdata;
        size_t len = size * n;

        if (len > 12 && strncasecmp(data, "retry-after:", 12) == 0) {
                char *end;
                long v = strtol(data + 12, &end, 10);
                if (end != data + 12 && v >= 0)
                        rs->retry_after = v;
        }
        return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
        struct resp *rs = userdata;
        size_t len = size * n;
        long status = 0;

        size_t max = rs->rq->max_body ? rs->rq->max_body : KUBE_MAX_BODY;
        if (rs->body.len + len > max) {
                curl_easy_getinfo(rs->curl, CURLINFO_RESPONSE_CODE, &status);
                if (rs->rq->cut_at_max && status >= 200 && status < 300) {
                        sb_append_len(&rs->body, data, max - rs->body.len);
                        rs->cut = true;
                        return 0;
                }
                rs->too_big = true;
                return 0;
        }
        sb_append_len(&rs->body, data, len);
        if (!rs->rq->on_line)
                return len;
        curl_easy_getinfo(rs->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status != 200)
                return len;
        for (;;) {
                char *nl = memchr(rs->body.buf, '\n', rs->body.len);
                size_t line_len, rest;
                int r;

                if (!nl)
                        break;
                line_len = (size_t)(nl - rs->body.buf);
                *nl = '\0';
                r = line_len > 0 ? rs->rq->on_line(rs->body.buf, line_len, rs->rq->userdata) : 0;
                rs->delivered++;
                rest = rs->body.len - line_len - 1;
                memmove(rs->body.buf, nl + 1, rest);
                rs->body.len = rest;
                rs->body.buf[rest] = '\0';
                if (r != 0) {
                        rs->stop = r;
                        return 0;
                }
        }
        return len;
}

static bool transient(CURLcode cc)
{
        switch (cc) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_OPERATION_TIMEDOUT:
                return true;
        default:
                return false;
        }
}

/* One attempt. Returns the CURLcode; the response lands in rs. */
/* libcurl's progress callback of an interruptible watch: non-zero ends it. */
static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
        const kube_client *c = userdata;
        (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
        return c->interrupt() ? 1 : 0;
}

static CURLcode perform(kube_client *c, const struct req *rq, struct resp *rs, char *errbuf)
{
        _cleanup_free_ char *url = xasprintf("%s%s", c->cfg->server, rq->path);
        struct curl_slist *headers = NULL;
        CURLcode cc;
        long version = 0;

        _cleanup_free_ char *accept =
            xasprintf("Accept: %s", rq->accept ? rq->accept : "application/json");
        headers = curl_slist_append(headers, accept);
        if (rq->content_type) {
                _cleanup_free_ char *ct = xasprintf("Content-Type: %s", rq->content_type);
                headers = curl_slist_append(headers, ct);
        }
        if (c->token) {
                size_t n = strlen(c->token) + 32;
                char *auth = xmalloc(n);
                snprintf(auth, n, "Authorization: Bearer %s", c->token);
                headers = curl_slist_append(headers, auth);
                explicit_bzero(auth, n);
                free(auth);
        }

        curl_easy_setopt(c->curl, CURLOPT_URL, url);
        if (streq(rq->method, "GET")) {
                curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
                curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, NULL);
        } else if (rq->body) {
                curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, rq->body);
                curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                                 (curl_off_t)strlen(rq->body));
                curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, rq->method);
        } else {
                curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
                curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, rq->method);
        }
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, rs);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, rs);
        curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
        bool interruptible = rq->timeout_ends_stream && c->interrupt;
        curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, interruptible ? 0L : 1L);
        curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, interruptible ? on_progress : NULL);
        curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, interruptible ? c : NULL);
        curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS,
                         rq->timeout_ms < 0
                             ? 0L
                             : (long)(rq->timeout_ms ? rq->timeout_ms : KUBE_CALL_TIMEOUT_MS));

        cc = curl_easy_perform(c->curl);
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &rs->status);
        curl_easy_getinfo(c->curl, CURLINFO_HTTP_VERSION, &version);
        c->http_version = version == CURL_HTTP_VERSION_2_0 ? 2 : version ? 1 : c->http_version;

        /* Nothing below may point at this call's stack or the headers. */
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
        curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, NULL);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, NULL);
        curl_slist_free_all(headers);
        return cc;
}

/*
 * Send rq with retries. On success (2xx) returns 0 with the body in
 * ret_body (may be NULL), or 1 when rq->cut_at_max cut the body at
 * rq->max_body. On failure sets the client's error.
 */
static int request(kube_client *c, const struct req *rq, strbuf *ret_body)
{
        char errbuf[CURL_ERROR_SIZE];
        long backoff = KUBE_BACKOFF_FIRST_MS;
        bool token_reread = false;
        int r;

        sb_reset(&c->error);
        for (int attempt = 1;; attempt++) {
                struct resp rs = {.curl = c->curl, .rq = rq, .retry_after = -1};
                _cleanup_free_ char *msg = NULL;
                bool retry = false;
                CURLcode cc;

                errbuf[0] = '\0';
                cc = perform(c, rq, &rs, errbuf);
                log_debug("kube: %s %s: curl %d, HTTP %ld", rq->method, rq->path, (int)cc,
                          rs.status);
                if (rs.stop) {
                        sb_release(&rs.body);
                        return rs.stop;
                }
                if (rs.cut) {
                        /* what fits is the answer; the rest was not read */
                        if (ret_body) {
                                sb_release(ret_body);
                                *ret_body = rs.body;
                        } else {
                                sb_release(&rs.body);
                        }
                        return 1;
                }
                if (rs.too_big) {
                        size_t max = rq->max_body ? rq->max_body : KUBE_MAX_BODY;
                        sb_release(&rs.body);
                        return set_error(c, -EPROTO,
                                         "cannot %s %s: the response is larger than %zu bytes",
                                         rq->verb, rq->resource, max);
                }
                if ((cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_ABORTED_BY_CALLBACK) &&
                    rq->timeout_ends_stream) {
                        sb_release(&rs.body);
                        return 0;
                }
                if (cc != CURLE_OK) {
                        if (!transient(cc) || rs.delivered > 0 || attempt >= KUBE_TRIES) {
                                sb_release(&rs.body);
                                return set_error(
                                    c, -EIO, "cannot %s %s: Kubernetes API server %s: %s%s",
                                    rq->verb, rq->resource, c->cfg->server,
                                    http_error_text(cc, errbuf),
                                    transient(cc) && rs.delivered == 0 ? " (after retries)" : "");
                        }
                        retry = true;
                } else if (rs.status >= 200 && rs.status < 300) {
                        if (ret_body) {
                                sb_release(ret_body);
                                *ret_body = rs.body;
                        } else {
                                sb_release(&rs.body);
                        }
                        return 0;
                } else if (rs.status == 401 && c->cfg->token_file && !token_reread) {
                        _cleanup_free_ char *terr = NULL;
                        char *token = NULL;

                        token_reread = true;
                        r = kube_config_read_token(c->cfg, &token, &terr);
                        if (r < 0) {
                                sb_release(&rs.body);
                                return set_error(c, r, "%s", terr);
                        }
                        free_token(c);
                        c->token = token;
                        sb_release(&rs.body);
                        attempt--; /* a fresh token is not a retry */
                        continue;
                } else if ((rs.status == 429 || rs.status >= 500) && attempt < KUBE_TRIES) {
                        retry = true;
                        if (rs.retry_after >= 0)
                                backoff =
                                    MAX(backoff, MIN(rs.retry_after, KUBE_RETRY_AFTER_MAX) * 1000L);
                } else {
                        r = kube_status_error(rs.status, sb_str(&rs.body), rq->verb, rq->resource,
                                              rq->ns, &msg);
                        sb_release(&rs.body);
                        sb_reset(&c->error);
                        sb_append(&c->error, msg);
                        return r;
                }
                sb_release(&rs.body);
                if (retry) {
                        msleep(backoff);
                        backoff = MIN(backoff * 2, KUBE_BACKOFF_MAX_MS);
                }
        }
}

static int parse_body(kube_client *c, const struct req *rq, strbuf *body, json_t **ret)
{
        json_error_t jerr;
        json_t *j = json_loadb(body->buf ? body->buf : "", body->len, 0, &jerr);

        sb_release(body);
        if (!j)
                return set_error(c, -EPROTO,
                                 "cannot %s %s: the Kubernetes API server sent invalid JSON (%s)",
                                 rq->verb, rq->resource, jerr.text);
        *ret = j;
        return 0;
}

int kube_get_path(kube_client *c, const char *path, json_t **ret_obj)
{
        struct req rq = {.method = "GET", .path = path, .verb = "get", .resource = path};
        strbuf body = STRBUF_INIT;
        int r;

        r = request(c, &rq, &body);
        if (r < 0)
                return r;
        return parse_body(c, &rq, &body, ret_obj);
}

int kube_get_text(kube_client *c, const char *path, size_t max_bytes, int timeout_ms,
                  const char *verb, const char *resource, const char *ns, char **ret_text,
                  size_t *ret_len, bool *ret_cut)
{
        struct req rq = {.method = "GET",
                         .path = path,
                         /* kube-apiserver answers 406 unless its own JSON is acceptable
                            too (its errors are Status objects; the log itself is text) */
                         .accept = "text/plain, application/json",
                         .max_body = max_bytes,
                         .cut_at_max = true,
                         .timeout_ms = timeout_ms > 0 ? timeout_ms : 0,
                         .verb = verb ? verb : "get",
                         .resource = resource ? resource : path,
                         .ns = ns};
        strbuf body = STRBUF_INIT;

        if (isempty(path) || path[0] != '/' || max_bytes == 0)
                return set_error(c, -EINVAL, "invalid request: an absolute path and a size needed");
        int r = request(c, &rq, &body);
        if (r < 0)
                return r;
        if (ret_len)
                *ret_len = body.len;
        if (ret_cut)
                *ret_cut = r > 0;
        *ret_text = body.buf ? sb_detach(&body) : xstrdup("");
        return 0;
}

int kube_request(kube_client *c, const char *method, const char *path, const char *content_type,
                 const json_t *body, const char *verb, const char *resource, const char *ns,
                 json_t **ret_obj)
{
        _cleanup_free_ char *text = NULL;
        struct req rq = {.method = method,
                         .path = path,
                         .content_type = content_type,
                         .verb = verb ? verb : "request",
                         .resource = resource ? resource : path,
                         .ns = ns};
        strbuf resp = STRBUF_INIT;
        int r;

        if (isempty(method) || isempty(path) || path[0] != '/')
                return set_error(c, -EINVAL, "invalid request: method and an absolute path needed");
        if (body) {
                text = json_dumps(body, JSON_COMPACT);
                if (!text)
                        return set_error(c, -EINVAL, "cannot %s %s: the body is not valid JSON",
                                         rq.verb, rq.resource);
                rq.body = text;
                if (!rq.content_type)
                        rq.content_type = "application/json";
        }
        r = request(c, &rq, &resp);
        if (r < 0)
                return r;
        if (!ret_obj) {
                sb_release(&resp);
                return 0;
        }
        return parse_body(c, &rq, &resp, ret_obj);
}

int kube_get(kube_client *c, const kube_gvr *gvr, const char *ns, const char *name,
             json_t **ret_obj)
{
        _cleanup_free_ char *path = NULL;
        strbuf body = STRBUF_INIT;
        struct req rq = {.method = "GET", .verb = "get"};
        int r;

        if (kube_resource_path(gvr, ns, name, &path) < 0)
                return set_error(c, -EINVAL, "cannot get %s \"%s\": invalid name or namespace",
                                 gvr ? gvr->resource : "?", name ? name : "");
        rq.path = path;
        rq.resource = gvr->resource;
        rq.ns = gvr->namespaced ? ns : NULL;
        r = request(c, &rq, &body);
        if (r < 0)
                return r;
        return parse_body(c, &rq, &body, ret_obj);
}

/* path + "?" or "&" + key=value (value percent-encoded). */
static void add_query(strbuf *sb, const char *key, const char *value)
{
        sb_appendc(sb, strchr(sb_str(sb), '?') ? '&' : '?');
        sb_append(sb, key);
        sb_appendc(sb, '=');
        append_query_value(sb, value);
}

int kube_list(kube_client *c, const kube_gvr *gvr, const char *ns, const char *label_selector,
              json_t **ret_items, char **ret_resource_version)
{
        _cleanup_free_ char *path = NULL;
        strbuf url = STRBUF_INIT, body = STRBUF_INIT;
        struct req rq = {.method = "GET", .verb = "list"};
        json_t *list = NULL, *items;
        const char *rv;
        int r;

        if (kube_resource_path(gvr, ns, NULL, &path) < 0)
                return set_error(c, -EINVAL, "cannot list %s: invalid namespace",
                                 gvr ? gvr->resource : "?");
        sb_append(&url, path);
        if (!isempty(label_selector))
                add_query(&url, "labelSelector", label_selector);
        rq.path = sb_str(&url);
        rq.resource = gvr->resource;
        rq.ns = gvr->namespaced ? ns : NULL;
        r = request(c, &rq, &body);
        if (r >= 0)
                r = parse_body(c, &rq, &body, &list);
        sb_release(&url);
        if (r < 0)
                return r;
        items = json_object_get(list, "items");
        rv = json_string_value(
            json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
        if (!json_is_array(items) && !json_is_null(items) && items) {
                json_decref(list);
                return set_error(c, -EPROTO, "cannot list %s: the response has no items",
                                 gvr->resource);
        }
        if (ret_resource_version)
                *ret_resource_version = xstrdup(rv ? rv : "");
        if (ret_items)
                *ret_items = json_is_array(items) ? json_incref(items) : json_array();
        json_decref(list);
        return 0;
}

int kube_apply(kube_client *c, const json_t *obj, const char *field_manager, bool force,
               bool dry_run, json_t **ret_obj)
{
        _cleanup_free_ char *path = NULL, *body = NULL, *err = NULL, *what = NULL;
        strbuf resp = STRBUF_INIT;
        struct req rq = {
            .method = "PATCH", .content_type = "application/apply-patch+yaml", .verb = "patch"};
        const json_t *meta = json_object_get(obj, "metadata");
        kube_gvr gvr = {0};
        json_t *result = NULL;
        int r;

        r = kube_apply_request(obj, c->cfg->namespace, field_manager, force, dry_run, &path, &body,
                               &err);
        if (r < 0)
                return set_error(c, r, "%s", err);
        (void)kube_gvr_for_kind(json_string_value(json_object_get(obj, "apiVersion")),
                                json_string_value(json_object_get(obj, "kind")), &gvr);
        what =
            xasprintf("%s \"%s\"", gvr.resource, json_string_value(json_object_get(meta, "name")));
        rq.path = path;
        rq.body = body;
        rq.resource = what;
        if (gvr.namespaced) {
                rq.ns = json_string_value(json_object_get(meta, "namespace"));
                if (isempty(rq.ns))
                        rq.ns = c->cfg->namespace;
        }
        r = request(c, &rq, &resp);
        if (r < 0)
                return r;
        r = parse_body(c, &rq, &resp, &result);
        if (r < 0)
                return r;
        if (ret_obj)
                *ret_obj = result;
        else
                json_decref(result);
        return 0;
}

int kube_delete(kube_client *c, const kube_gvr *gvr, const char *ns, const char *name,
                const char *propagation)
{
        _cleanup_free_ char *path = NULL, *what = NULL;
        strbuf url = STRBUF_INIT;
        struct req rq = {.method = "DELETE", .verb = "delete"};
        int r;

        if (kube_resource_path(gvr, ns, name, &path) < 0 || !name)
                return set_error(c, -EINVAL, "cannot delete %s \"%s\": invalid name or namespace",
                                 gvr ? gvr->resource : "?", name ? name : "");
        if (propagation && !streq(propagation, "Foreground") && !streq(propagation, "Background") &&
            !streq(propagation, "Orphan"))
                return set_error(c, -EINVAL,
                                 "cannot delete %s \"%s\": propagation must be Foreground, "
                                 "Background or Orphan",
                                 gvr->resource, name);
        sb_append(&url, path);
        if (propagation)
                add_query(&url, "propagationPolicy", propagation);
        what = xasprintf("%s \"%s\"", gvr->resource, name);
        rq.path = sb_str(&url);
        rq.resource = what;
        rq.ns = gvr->namespaced ? ns : NULL;
        r = request(c, &rq, NULL);
        sb_release(&url);
        return r;
}

struct watch_state {
        kube_client *c;
        const kube_gvr *gvr;
        kube_watch_fn fn;
        void *userdata;
        int error; /* negative: a protocol error or 410 seen in the stream */
};

static int on_watch_line(const char *line, size_t len, void *userdata)
{
        struct watch_state *ws = userdata;
        json_error_t jerr;
        json_t *ev = json_loadb(line, len, 0, &jerr);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const json_t *obj = json_object_get(ev, "object");
        int r;

        if (!type || !json_is_object(obj)) {
                json_decref(ev);
                ws->error = set_error(ws->c, -EPROTO,
                                      "cannot watch %s: the Kubernetes API server sent an "
                                      "invalid event",
                                      ws->gvr->resource);
                return ws->error;
        }
        if (streq(type, "ERROR")) {
                long code = (long)json_integer_value(json_object_get(obj, "code"));
                _cleanup_free_ char *body = json_dumps(obj, JSON_COMPACT), *msg = NULL;
                int er = kube_status_error(code ? code : 500, body, "watch", ws->gvr->resource,
                                           NULL, &msg);
                set_error(ws->c, er, "%s", msg);
                json_decref(ev);
                ws->error = er;
                return er;
        }
        r = ws->fn(type, obj, ws->userdata);
        json_decref(ev);
        return r;
}

/* A watch that the server ends after server_secs (0: its default) and we end after client_ms. */
static int watch(kube_client *c, const kube_gvr *gvr, const char *ns, const char *label_selector,
                 const char *resource_version, int server_secs, int client_ms, kube_watch_fn fn,
                 void *userdata)
{
        _cleanup_free_ char *path = NULL;
        strbuf url = STRBUF_INIT;
        struct watch_state ws = {.c = c, .gvr = gvr, .fn = fn, .userdata = userdata};
        struct req rq = {.method = "GET", .verb = "watch"};
        char num[32];
        int r;

        if (kube_resource_path(gvr, ns, NULL, &path) < 0)
                return set_error(c, -EINVAL, "cannot watch %s: invalid namespace",
                                 gvr ? gvr->resource : "?");
        sb_append(&url, path);
        add_query(&url, "watch", "1");
        add_query(&url, "allowWatchBookmarks", "true");
        if (!isempty(resource_version))
                add_query(&url, "resourceVersion", resource_version);
        if (!isempty(label_selector))
                add_query(&url, "labelSelector", label_selector);
        if (server_secs > 0) {
                snprintf(num, sizeof(num), "%d", server_secs);
                add_query(&url, "timeoutSeconds", num);
        }
        rq.path = sb_str(&url);
        rq.resource = gvr->resource;
        rq.ns = gvr->namespaced ? ns : NULL;
        rq.on_line = on_watch_line;
        rq.userdata = &ws;
        if (client_ms > 0) {
                rq.timeout_ms = client_ms;
                rq.timeout_ends_stream = true;
        } else
                rq.timeout_ms = server_secs > 0 ? (server_secs + 30) * 1000 : -1;
        r = request(c, &rq, NULL);
        sb_release(&url);
        if (ws.error < 0)
                return ws.error;
        if (r == 0)
                sb_reset(&c->error);
        return r;
}

int kube_watch(kube_client *c, const kube_gvr *gvr, const char *ns, const char *label_selector,
               const char *resource_version, int timeout_seconds, kube_watch_fn fn, void *userdata)
{
        return watch(c, gvr, ns, label_selector, resource_version, timeout_seconds, 0, fn,
                     userdata);
}

void kube_client_set_interrupt(kube_client *c, bool (*interrupt)(void))
{
        c->interrupt = interrupt;
}

int kube_watch_for(kube_client *c, const kube_gvr *gvr, const char *ns, const char *label_selector,
                   const char *resource_version, int timeout_ms, kube_watch_fn fn, void *userdata)
{
        if (timeout_ms <= 0)
                return 0;
        return watch(c, gvr, ns, label_selector, resource_version, (timeout_ms + 999) / 1000,
                     timeout_ms, fn, userdata);
}

/* ---- discovery ---- */

static int load_groups(kube_client *c)
{
        int r;

        if (!c->groups) {
                r = kube_get_path(c, "/apis", &c->groups);
                if (r < 0)
                        return r;
        }
        if (!c->core) {
                r = kube_get_path(c, "/api", &c->core);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The APIResourceList of group/version; NULL (0) when the server does not serve it. */
static int load_resources(kube_client *c, const char *group, const char *version, json_t **ret_list)
{
        _cleanup_free_ char *key = xasprintf("%s/%s", group, version);
        _cleanup_free_ char *path = kube_group_version_path(group, version);
        json_t *list = json_object_get(c->resources, key);
        int r;

        if (list) {
                *ret_list = json_is_null(list) ? NULL : list;
                return 0;
        }
        r = kube_get_path(c, path, &list);
        if (r == -ENOENT) {
                json_object_set_new(c->resources, key, json_null());
                sb_reset(&c->error);
                *ret_list = NULL;
                return 0;
        }
        if (r < 0)
                return r;
        json_object_set_new(c->resources, key, list);
        *ret_list = list;
        return 0;
}

int kube_has_resource(kube_client *c, const char *group, const char *version, const char *resource)
{
        const json_t *res;
        json_t *list;
        size_t i;
        int r;

        if (isempty(version) || isempty(resource))
                return set_error(c, -EINVAL, "a group version and a resource are needed");
        r = load_resources(c, group ? group : "", version, &list);
        if (r < 0)
                return r;
        json_array_foreach(json_object_get(list, "resources"), i, res)
        {
                if (streq_ptr(json_string_value(json_object_get(res, "name")), resource))
                        return 1;
        }
        return 0;
}

int kube_preferred_version(kube_client *c, const char *group, const char *resource,
                           char **ret_version)
{
        const json_t *g, *v, *versions = NULL;
        const char *preferred = NULL;
        size_t i;
        int r;

        if (!group)
                group = "";
        r = load_groups(c);
        if (r < 0)
                return r;
        if (!*group) {
                json_array_foreach(json_object_get(c->core, "versions"), i, v)
                {
                        r = kube_has_resource(c, "", json_string_value(v), resource);
                        if (r < 0)
                                return r;
                        if (r > 0) {
                                *ret_version = xstrdup(json_string_value(v));
                                return 0;
                        }
                }
                return set_error(c, -ENOENT,
                                 "the Kubernetes API server does not offer %s in the core group",
                                 resource);
        }
        json_array_foreach(json_object_get(c->groups, "groups"), i, g)
        {
                if (streq_ptr(json_string_value(json_object_get(g, "name")), group)) {
                        versions = json_object_get(g, "versions");
                        preferred = json_string_value(
                            json_object_get(json_object_get(g, "preferredVersion"), "version"));
                        break;
                }
        }
        /* The preferred version first, then the others in the server's order. */
        if (preferred) {
                r = kube_has_resource(c, group, preferred, resource);
                if (r < 0)
                        return r;
                if (r > 0) {
                        *ret_version = xstrdup(preferred);
                        return 0;
                }
        }
        json_array_foreach(versions, i, v)
        {
                const char *ver = json_string_value(json_object_get(v, "version"));
                if (!ver || streq_ptr(ver, preferred))
                        continue;
                r = kube_has_resource(c, group, ver, resource);
                if (r < 0)
                        return r;
                if (r > 0) {
                        *ret_version = xstrdup(ver);
                        return 0;
                }
        }
        return set_error(c, -ENOENT, "the Kubernetes API server does not offer %s in group %s",
                         resource, group);
}
