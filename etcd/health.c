/*
 * Whether one etcd member is healthy (etcd/health.h).
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/health.h"
#include "etcd/grpc.h"
#include "etcd/pool.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define HEALTH_BODY_MAX 65536

/*
 * One libcurl handle per thread for these GETs, set up afresh for each one
 * (curl_easy_reset, then o): the handle and the multi handle libcurl keeps
 * inside it (with its wake-up socket pair) are made once per thread, not
 * once per GET, which an idle pass of every cluster makes. What a GET
 * leaves is not carried to the next: each opens and closes its own
 * connection (CURLOPT_FORBID_REUSE) and resumes no TLS session, so a thread
 * holds no socket to any member between GETs and every GET verifies the
 * member's certificate. The TLS files are parsed once while they stay the
 * same (http_creds_get), not at each GET: the thread keeps its reference
 * to the last GET's until the next one. A thread's handle is freed when it
 * ends.
 */
typedef struct thread_http {
        CURL *h;
        http_creds *creds;
} thread_http;

static pthread_key_t handle_key;
static pthread_once_t handle_once = PTHREAD_ONCE_INIT;

static void handle_free(void *userdata)
{
        thread_http *th = userdata;
        curl_easy_cleanup(th->h);
        http_creds_unref(th->creds);
        free(th);
}

static void handle_key_make(void)
{
        if (pthread_key_create(&handle_key, handle_free) != 0)
                abort();
}

static CURL *thread_handle(const http_opts *o)
{
        pthread_once(&handle_once, handle_key_make);
        thread_http *th = pthread_getspecific(handle_key);
        if (!th) {
                CURL *h = http_handle_new(o);
                if (!h)
                        return NULL;
                th = XNEW(thread_http);
                th->h = h;
                if (pthread_setspecific(handle_key, th) != 0) {
                        curl_easy_cleanup(h);
                        free(th);
                        return NULL;
                }
        }
        http_creds_unref(th->creds);
        th->creds = http_creds_get(&o->tls);
        http_opts files = *o;
        if (th->creds)
                files.tls.ca_file = files.tls.cert_file = files.tls.key_file = NULL;
        curl_easy_reset(th->h);
        if (http_setup(th->h, &files) < 0)
                return NULL;
        if (th->creds && http_use_creds(th->h, th->creds) < 0) {
                /* libcurl without an SSL_CTX to hand over: it reads the files itself */
                http_creds_unref(th->creds);
                th->creds = NULL;
                curl_easy_reset(th->h);
                if (http_setup(th->h, o) < 0)
                        return NULL;
        }
        curl_easy_setopt(th->h, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(th->h, CURLOPT_SSL_SESSIONID_CACHE, 0L);
        return th->h;
}

CURLcode etcd_http_perform(CURL *h, const char *url, strbuf *body)
{
        CURLcode cr = curl_easy_perform(h);
        if (cr != CURLE_SSL_CONNECT_ERROR || !strneq(url, "https://", 8))
                return cr;
        _cleanup_free_ char *plain = xasprintf("http://%s", url + 8);
        sb_reset(body);
        curl_easy_setopt(h, CURLOPT_URL, plain);
        return curl_easy_perform(h);
}

static size_t collect_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        strbuf *sb = userdata;
        size_t n = size * nmemb;
        if (sb->len + n > HEALTH_BODY_MAX)
                return 0;
        sb_append_len(sb, ptr, n);
        return n;
}

/* What etcd's answer says: 1 healthy, 0 not, with the reason. */
static int judge(const strbuf *body, long code, char **ret_detail)
{
        json_t *o = json_loadb(sb_str(body), body->len, 0, NULL);
        json_t *hv = json_object_get(o, "health");
        int healthy = 0;
        if ((json_is_string(hv) && streq(json_string_value(hv), "true")) || json_is_true(hv)) {
                healthy = 1;
                *ret_detail = xstrdup("healthy");
        } else if (hv) {
                const char *reason = json_string_value(json_object_get(o, "reason"));
                if (isempty(reason) || strstr(reason, "NO LEADER"))
                        *ret_detail = xstrdup("no leader");
                else
                        *ret_detail = xasprintf("unhealthy: %s", reason);
        } else {
                *ret_detail = xasprintf("unexpected /health answer (HTTP %ld)", code);
        }
        json_decref(o);
        return healthy;
}

/*
 * The GET on the process's kept connection to an https:// member
 * (etcd/pool.h), the one its gRPC calls use when the identity is the same:
 * no new handshake each pass. 1 healthy, 0 not (etcd's answer judged), -1
 * when nothing was answered there (then asked on a connection of its own).
 */
static int pooled_health(const char *base, const etcd_health_opts *o, int timeout,
                         char **ret_detail)
{
        if (!strneq(base, "https://", 8) || !o->tls.ca_file || o->tls.ca_pem || o->tls.cert_pem ||
            o->tls.key_pem)
                return -1;
        grpc_tls_opts tls = {
            .cacert = o->tls.ca_file, .cert = o->tls.cert_file, .key = o->tls.key_file};
        etcd_pool_conn *pc = NULL;
        if (etcd_pool_take(base, &tls, &pc) < 0)
                return -1;
        _cleanup_free_ char *text = NULL, *error = NULL;
        size_t len = 0;
        long code = 0;
        if (o->wait_begin)
                o->wait_begin();
        int k = grpc_conn_get(etcd_pool_conn_grpc(pc), ETCD_HEALTH_PATH, timeout, HEALTH_BODY_MAX,
                              &text, &len, &code, &error);
        if (o->wait_end)
                o->wait_end();
        etcd_pool_give(pc, k == 0);
        if (k < 0) {
                log_debug("etcd: %s: %s; asking on a connection of its own", base, error);
                return -1;
        }
        strbuf body = STRBUF_INIT;
        sb_append_len(&body, text, len);
        int healthy = judge(&body, code, ret_detail);
        sb_release(&body);
        return healthy;
}

int etcd_member_health(const char *client_url, const etcd_health_opts *o, char **ret_detail)
{
        if (isempty(client_url)) {
                *ret_detail = xstrdup("no client URL recorded");
                return 0;
        }
        _cleanup_free_ char *base = xstrndup(client_url, strcspn(client_url, ","));
        size_t n = strlen(base);
        while (n > 0 && base[n - 1] == '/')
                base[--n] = '\0';
        _cleanup_free_ char *url = xasprintf("%s" ETCD_HEALTH_PATH, base);
        int timeout = o->timeout_ms > 0 ? o->timeout_ms : 2000;
        int pooled = pooled_health(base, o, timeout, ret_detail);
        if (pooled >= 0)
                return pooled;
        /* A member is asked directly, never through a proxy (util/http.h). */
        http_opts ho = {.proxy = HTTP_PROXY_NONE,
                        .timeout_ms = timeout,
                        .connect_timeout_ms = timeout,
                        .tls = o->tls};
        CURL *h = thread_handle(&ho);
        if (!h) {
                *ret_detail = xstrdup("cannot create an HTTP handle");
                return 0;
        }
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        if (o->wait_begin)
                o->wait_begin();
        CURLcode cr = etcd_http_perform(h, url, &body);
        if (o->wait_end)
                o->wait_end();
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        int healthy = 0;
        if (cr != CURLE_OK)
                *ret_detail = xasprintf("not answering yet (%s)", curl_easy_strerror(cr));
        else
                healthy = judge(&body, code, ret_detail);
        sb_release(&body);
        return healthy;
}

typedef struct capped_body {
        strbuf *sb;
        size_t max;
        bool cut;
} capped_body;

static size_t collect_capped(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        capped_body *b = userdata;
        size_t n = size * nmemb;
        size_t room = b->max > b->sb->len ? b->max - b->sb->len : 0;
        if (n > room) {
                sb_append_len(b->sb, ptr, room);
                b->cut = true;
                return 0; /* ends the transfer: the rest is not wanted */
        }
        sb_append_len(b->sb, ptr, n);
        return n;
}

int etcd_member_metrics(const char *client_url, const etcd_health_opts *o, size_t max_bytes,
                        char **ret_text, char **ret_error)
{
        if (isempty(client_url)) {
                *ret_error = xstrdup("no client URL recorded");
                return -EINVAL;
        }
        _cleanup_free_ char *base = xstrndup(client_url, strcspn(client_url, ","));
        _cleanup_free_ char *url = xasprintf("%s/metrics", base);
        int timeout = o->timeout_ms > 0 ? o->timeout_ms : 2000;
        http_opts ho = {.proxy = HTTP_PROXY_NONE,
                        .timeout_ms = timeout,
                        .connect_timeout_ms = timeout,
                        .tls = o->tls};
        CURL *h = thread_handle(&ho);
        if (!h) {
                *ret_error = xstrdup("cannot create an HTTP handle");
                return -ENOMEM;
        }
        strbuf body = STRBUF_INIT;
        capped_body cb = {.sb = &body, .max = max_bytes};
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_capped);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &cb);
        CURLcode cr = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (cr != CURLE_OK && !(cr == CURLE_WRITE_ERROR && cb.cut)) {
                *ret_error = xasprintf("GET %s: %s", url, curl_easy_strerror(cr));
                sb_release(&body);
                return -EIO;
        }
        if (code != 200) {
                *ret_error = xasprintf("GET %s: HTTP status %ld", url, code);
                sb_release(&body);
                return -EIO;
        }
        if (cb.cut)
                sb_printf(&body, "\n# gitcd: cut at %zu bytes\n", max_bytes);
        *ret_text = sb_detach(&body);
        return 0;
}
