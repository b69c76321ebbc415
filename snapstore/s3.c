/*
 * The S3 client behind S3 snapshot destinations (see s3.h).
 *
 * Decisions:
 * - Signing is libcurl's (CURLOPT_AWS_SIGV4, "aws:amz:<region>:s3"); this
 *   file only hands it what it cannot know. libcurl 7.88 signs the request
 *   path and query exactly as given and hashes only an in-memory body, so
 *   every request here is built in canonical form already: keys are
 *   URI-encoded the AWS way (unreserved bytes and '/' kept), query strings are
 *   written sorted with "name=value" pairs ("uploads=", "partNumber=1&uploadId=..."),
 *   and x-amz-content-sha256 is always set (S3 requires the header; libcurl
 *   7.88 does not add it, and uses its value as the payload hash when present).
 * - Payload hashes: uploads are streamed from the file, never held in memory,
 *   so the SHA-256 of each body is computed beforehand (for a single PUT the
 *   file's SHA-256 given by the caller, computed here when not given; for each
 *   multipart part a pass over that part): every byte sent is covered by the
 *   signature and S3 itself refuses a body that does not match. No
 *   UNSIGNED-PAYLOAD.
 * - Up to the threshold (64 MiB) an upload is one PUT; above it a multipart
 *   upload: parts are sent one after the other, each retried on its own; any
 *   failure aborts the upload (AbortMultipartUpload, best effort), and
 *   CompleteMultipartUpload is sent only after every part succeeded, so a
 *   failed upload never becomes an object.
 * - Retries: connection failures, timeouts, 5xx, 408 and 429 are retried with
 *   exponential backoff (doubling from 500 ms, capped at 20 s, with a little
 *   jitter), at most max_attempts times per request. Everything else fails at
 *   once: 403 (-EACCES), 404 (-ENOENT), TLS verification (-EPROTO).
 * - Secrets go to libcurl only (CURLOPT_PASSWORD, a header for the session
 *   token). Messages are built from the method, the s3:// location, the HTTP
 *   status and S3's <Code>/<Message>, or libcurl's error buffer, none of
 *   which carries them.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapstore/dest-internal.h"
#include "snapstore/s3.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/http.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MIB                 (1024 * 1024LL)
#define DEFAULT_THRESHOLD   (64 * MIB)
#define DEFAULT_PART_SIZE   (16 * MIB)
#define MAX_PARTS           10000
#define ERROR_BODY_MAX      (64 * 1024)
#define EMPTY_SHA256        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define CONNECT_TIMEOUT_MS  10000L
#define STALL_SECONDS       60L
#define STALL_BYTES_PER_SEC 1024L

struct s3_client {
        char *scheme;    /* "http" or "https" */
        char *host;      /* host[:port] */
        char *base_path; /* "" or "/path" */
        char *bucket;
        char *region;
        bool path_style;
        s3_credentials creds;
        struct curl_slist *resolve;
        int64_t threshold;
        int64_t part_size;
        int max_attempts;
        int backoff_ms;
        int backoff_max_ms;
        void (*on_retry)(void *userdata, int attempt, const char *why);
        void (*on_progress)(void *userdata, int64_t bytes_sent, int64_t bytes_total);
        void *userdata;
        CURL *h;
};

/* One request and what came back; reused across its attempts. */
typedef struct request {
        const char *method; /* GET, HEAD, PUT, POST, DELETE */
        const char *key;
        const char *query; /* canonical query string, or NULL */
        const char *what;  /* for messages: "PUT", "UploadPart 3 of 7", ... */
        /* body: in memory (POST) or a range of a file (PUT) */
        const char *body;
        size_t body_len;
        int in_fd;
        int64_t in_offset;
        int64_t in_length;
        const char *payload_sha256; /* NULL: the SHA-256 of body (or of nothing) */
        const char *meta_sha256;    /* x-amz-meta-sha256 to store */
        const char *content_type;
        int out_fd; /* GET: a 2xx body goes here */
        int max_attempts;
        /* progress over a whole upload */
        int64_t progress_base;
        int64_t progress_total;

        /* results of the last attempt */
        long status;
        strbuf resp; /* bodies not written to out_fd, capped */
        char *etag;
        char *resp_sha256;
        int64_t in_pos;
        int read_errno;
        int write_errno;
        struct s3_client *c;
} request;

void s3_object_info_release(s3_object_info *o)
{
        if (!o)
                return;
        free(o->sha256_hex);
        free(o->etag);
        *o = (s3_object_info){0};
}

/* ---- encoding and XML ---- */

/* AWS URI encoding: unreserved bytes stay, '/' stays when keep_slash, the rest %XX. */
static void uri_encode(strbuf *sb, const char *s, bool keep_slash)
{
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || strchr("-._~", *p) || (keep_slash && *p == '/'))
                        sb_appendc(sb, (char)*p);
                else
                        sb_printf(sb, "%%%02X", *p);
        }
}

static char *uri_encoded(const char *s, bool keep_slash)
{
        strbuf sb = STRBUF_INIT;
        uri_encode(&sb, s, keep_slash);
        return sb_detach(&sb);
}

char *s3_xml_value(const char *xml, size_t len, const char *tag)
{
        if (!xml || !tag)
                return NULL;
        _cleanup_free_ char *open = xasprintf("<%s>", tag);
        _cleanup_free_ char *close = xasprintf("</%s>", tag);
        const char *end = xml + len;
        const char *a = memmem(xml, len, open, strlen(open));
        if (!a)
                return NULL;
        a += strlen(open);
        const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
        if (!b)
                return NULL;
        static const struct {
                const char *entity;
                char c;
        } entities[] = {
            {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        strbuf sb = STRBUF_INIT;
        for (const char *p = a; p < b;) {
                bool done = false;
                if (*p == '&')
                        for (size_t i = 0; i < ARRAY_SIZE(entities) && !done; i++) {
                                size_t n = strlen(entities[i].entity);
                                if ((size_t)(b - p) >= n && memcmp(p, entities[i].entity, n) == 0) {
                                        sb_appendc(&sb, entities[i].c);
                                        p += n;
                                        done = true;
                                }
                        }
                if (!done)
                        sb_appendc(&sb, *p++);
        }
        return sb_detach(&sb);
}

/* ---- the client ---- */

static bool bucket_name_valid(const char *b)
{
        size_t n = strlen(b);
        return n >= 3 && n <= 63 && strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-_") == n &&
               b[0] != '.' && b[0] != '-';
}

/*
 * The handle set-up of every request (util/http.h): S3 is a service outside
 * what gitcd runs, reached through the environment's proxy when it names
 * one; a transfer that stalls is cut, not the one that is merely long.
 */
static http_opts handle_opts(const s3_client *c, char *errbuf)
{
        return (http_opts){.proxy = HTTP_PROXY_ENV,
                           .connect_timeout_ms = CONNECT_TIMEOUT_MS,
                           .stall_bytes_per_s = STALL_BYTES_PER_SEC,
                           .stall_s = STALL_SECONDS,
                           .errbuf = errbuf,
                           .tls = {.ca_file = c->creds.ca_file}};
}

int s3_client_new(const s3_config *cfg, s3_client **ret, char **ret_error)
{
        assert(cfg && ret);
        if (isempty(cfg->bucket) || !bucket_name_valid(cfg->bucket))
                return dest_fail(
                    ret_error, -EINVAL,
                    "S3 bucket \"%s\" is not a valid bucket name (3-63 of a-z 0-9 . - _)",
                    cfg->bucket ? cfg->bucket : "");
        if (!cfg->credentials || isempty(cfg->credentials->access_key_id) ||
            isempty(cfg->credentials->secret_access_key))
                return dest_fail(ret_error, -ENOKEY, "S3 client without credentials");
        const char *region = isempty(cfg->region) ? "us-east-1" : cfg->region;
        if (strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region) ||
            strlen(region) > 64)
                return dest_fail(ret_error, -EINVAL, "S3 region \"%s\" is not a region name",
                                 region);

        _cleanup_free_ char *scheme = NULL, *host = NULL, *path = NULL;
        if (isempty(cfg->endpoint)) {
                scheme = xstrdup("https");
                host = xasprintf("s3.%s.amazonaws.com", region);
                path = xstrdup("");
        } else {
                const char *e = cfg->endpoint;
                if (strneq(e, "https://", 8)) {
                        scheme = xstrdup("https");
                        e += 8;
                } else if (strneq(e, "http://", 7)) {
                        scheme = xstrdup("http");
                        e += 7;
                } else if (strstr(e, "://")) {
                        return dest_fail(ret_error, -EINVAL,
                                         "S3 endpoint \"%s\": only http:// and https:// are "
                                         "supported",
                                         cfg->endpoint);
                } else {
                        scheme = xstrdup("https");
                }
                size_t hl = strcspn(e, "/");
                host = xstrndup(e, hl);
                path = xstrdup(e + hl);
                size_t pl = strlen(path);
                while (pl > 0 && path[pl - 1] == '/')
                        path[--pl] = '\0';
                if (isempty(host) || strpbrk(host, "@?# \t\r\n") || strpbrk(path, "?# \t\r\n"))
                        return dest_fail(ret_error, -EINVAL,
                                         "S3 endpoint \"%s\" is not scheme://host[:port][/path]",
                                         cfg->endpoint);
        }

        s3_client *c = XNEW(s3_client);
        c->scheme = TAKE_PTR(scheme);
        c->host = TAKE_PTR(host);
        c->base_path = TAKE_PTR(path);
        c->bucket = xstrdup(cfg->bucket);
        c->region = xstrdup(region);
        c->path_style = cfg->path_style;
        c->creds.access_key_id = xstrdup(cfg->credentials->access_key_id);
        c->creds.secret_access_key = xstrdup(cfg->credentials->secret_access_key);
        c->creds.session_token = xstrdup_null(cfg->credentials->session_token);
        c->creds.ca_file = xstrdup_null(cfg->credentials->ca_file);
        for (const char *const *r = cfg->resolve; r && *r; r++)
                c->resolve = curl_slist_append(c->resolve, *r);
        c->threshold = cfg->multipart_threshold > 0 ? cfg->multipart_threshold : DEFAULT_THRESHOLD;
        c->part_size = cfg->part_size > 0 ? cfg->part_size : DEFAULT_PART_SIZE;
        c->max_attempts = cfg->max_attempts > 0 ? cfg->max_attempts : 5;
        c->backoff_ms = cfg->backoff_ms > 0 ? cfg->backoff_ms : 500;
        c->backoff_max_ms = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : 20000;
        c->on_retry = cfg->on_retry;
        c->on_progress = cfg->on_progress;
        c->userdata = cfg->userdata;
        http_opts o = handle_opts(c, NULL);
        c->h = http_handle_new(&o);
        if (!c->h) {
                s3_client_free(c);
                return dest_fail(ret_error, -ENOMEM, "cannot start libcurl");
        }
        *ret = c;
        return 0;
}

void s3_client_free(s3_client *c)
{
        if (!c)
                return;
        if (c->h)
                curl_easy_cleanup(c->h);
        curl_slist_free_all(c->resolve);
        s3_credentials_release(&c->creds);
        free(c->scheme);
        free(c->host);
        free(c->base_path);
        free(c->bucket);
        free(c->region);
        free(c);
}

char *s3_object_location(const s3_client *c, const char *key)
{
        return xasprintf("s3://%s/%s", c->bucket, key);
}

static char *object_url(const s3_client *c, const char *key, const char *query)
{
        strbuf sb = STRBUF_INIT;
        if (c->path_style)
                sb_printf(&sb, "%s://%s%s/%s/", c->scheme, c->host, c->base_path, c->bucket);
        else
                sb_printf(&sb, "%s://%s.%s%s/", c->scheme, c->bucket, c->host, c->base_path);
        uri_encode(&sb, key, true);
        if (query)
                sb_printf(&sb, "?%s", query);
        return sb_detach(&sb);
}

void s3_sign_setup(CURL *h, const char *region, const char *service, const s3_credentials *creds,
                   struct curl_slist **headers)
{
        _cleanup_free_ char *sigv4 = xasprintf("aws:amz:%s:%s", region, service);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
        curl_easy_setopt(h, CURLOPT_USERNAME, creds->access_key_id);
        curl_easy_setopt(h, CURLOPT_PASSWORD, creds->secret_access_key);
        if (!isempty(creds->session_token)) {
                _cleanup_free_ char *tok =
                    xasprintf("x-amz-security-token: %s", creds->session_token);
                *headers = curl_slist_append(*headers, tok);
                explicit_bzero(tok, strlen(tok));
        }
}

/* ---- one attempt ---- */

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
        request *rq = userdata;
        size_t len = size * n;
        _cleanup_free_ char *line = xstrndup(data, len);
        size_t l = strlen(line);
        while (l > 0 && strchr(" \t\r\n", line[l - 1]))
                line[--l] = '\0';
        if (strneq(line, "HTTP/", 5)) { /* a new response (after 100 Continue, too) */
                free(rq->etag);
                free(rq->resp_sha256);
                rq->etag = rq->resp_sha256 = NULL;
                return len;
        }
        char *colon = strchr(line, ':');
        if (!colon)
                return len;
        *colon = '\0';
        char *v = colon + 1;
        v += strspn(v, " \t");
        if (strcasecmp(line, "etag") == 0) {
                free(rq->etag);
                size_t vl = strlen(v);
                if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"')
                        rq->etag = xstrndup(v + 1, vl - 2);
                else
                        rq->etag = xstrdup(v);
        } else if (strcasecmp(line, "x-amz-meta-sha256") == 0) {
                free(rq->resp_sha256);
                rq->resp_sha256 = xstrdup(v);
        }
        return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
        request *rq = userdata;
        size_t len = size * n;
        long status = 0;
        curl_easy_getinfo(rq->c->h, CURLINFO_RESPONSE_CODE, &status);
        if (rq->out_fd >= 0 && status >= 200 && status < 300) {
                int r = write_all(rq->out_fd, data, len);
                if (r < 0) {
                        rq->write_errno = -r;
                        return 0; /* CURLE_WRITE_ERROR */
                }
                return len;
        }
        if (rq->resp.len < ERROR_BODY_MAX)
                sb_append_len(&rq->resp, data, MIN(len, ERROR_BODY_MAX - rq->resp.len));
        return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *userdata)
{
        request *rq = userdata;
        size_t want = size * n;
        int64_t left = rq->in_length - rq->in_pos;
        if (left <= 0)
                return 0;
        if ((int64_t)want > left)
                want = (size_t)left;
        ssize_t r;
        do
                r = pread(rq->in_fd, buf, want, rq->in_offset + rq->in_pos);
        while (r < 0 && errno == EINTR);
        if (r <= 0) {
                rq->read_errno = r < 0 ? errno : EIO; /* 0: the file shrank */
                return CURL_READFUNC_ABORT;
        }
        rq->in_pos += r;
        if (rq->c->on_progress)
                rq->c->on_progress(rq->c->userdata, rq->progress_base + rq->in_pos,
                                   rq->progress_total);
        return (size_t)r;
}

static int seek_read(void *userdata, curl_off_t offset, int origin)
{
        request *rq = userdata;
        if (origin != SEEK_SET || offset < 0 || offset > rq->in_length)
                return CURL_SEEKFUNC_FAIL;
        rq->in_pos = offset;
        return CURL_SEEKFUNC_OK;
}

static CURLcode attempt(s3_client *c, request *rq, char *errbuf)
{
        CURL *h = c->h;
        curl_easy_reset(h);
        http_opts o = handle_opts(c, errbuf);
        if (http_setup(h, &o) < 0)
                return CURLE_FAILED_INIT;
        sb_reset(&rq->resp);
        free(rq->etag);
        free(rq->resp_sha256);
        rq->etag = rq->resp_sha256 = NULL;
        rq->status = 0;
        rq->in_pos = 0;
        rq->read_errno = rq->write_errno = 0;
        if (rq->out_fd >= 0 &&
            (ftruncate(rq->out_fd, 0) < 0 || lseek(rq->out_fd, 0, SEEK_SET) < 0)) {
                rq->write_errno = errno;
                return CURLE_WRITE_ERROR;
        }

        _cleanup_free_ char *url = object_url(c, rq->key, rq->query);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_FILETIME, 1L);
        if (c->resolve)
                curl_easy_setopt(h, CURLOPT_RESOLVE, c->resolve);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, rq);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, rq);

        struct curl_slist *headers = NULL;
        char body_sha[65];
        const char *payload = rq->payload_sha256;
        if (!payload) {
                hash_sha256_hex(rq->body, rq->body ? rq->body_len : 0, body_sha);
                payload = body_sha;
        }
        _cleanup_free_ char *h_payload = xasprintf("x-amz-content-sha256: %s", payload);
        headers = curl_slist_append(headers, h_payload);
        if (rq->meta_sha256) {
                _cleanup_free_ char *m = xasprintf("x-amz-meta-sha256: %s", rq->meta_sha256);
                headers = curl_slist_append(headers, m);
        }
        if (rq->content_type) {
                _cleanup_free_ char *m = xasprintf("Content-Type: %s", rq->content_type);
                headers = curl_slist_append(headers, m);
        }
        s3_sign_setup(h, c->region, "s3", &c->creds, &headers);

        if (streq(rq->method, "PUT")) {
                curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(h, CURLOPT_READDATA, rq);
                curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_read);
                curl_easy_setopt(h, CURLOPT_SEEKDATA, rq);
                curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->in_length);
        } else if (streq(rq->method, "POST")) {
                curl_easy_setopt(h, CURLOPT_POST, 1L);
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                                 (curl_off_t)(rq->body ? rq->body_len : 0));
        } else if (streq(rq->method, "HEAD")) {
                curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        } else if (streq(rq->method, "DELETE")) {
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
        } else {
                assert(streq(rq->method, "GET"));
                curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

        CURLcode cc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rq->status);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        /* The list may hold the session token: wipe it before it is freed. */
        for (struct curl_slist *l = headers; l; l = l->next)
                explicit_bzero(l->data, strlen(l->data));
        curl_slist_free_all(headers);
        return cc;
}

/* What a failed attempt means: an errno, whether to try again, and why (for messages). */
static int classify(const s3_client *c, request *rq, CURLcode cc, const char *errbuf,
                    bool *ret_retry, char **ret_why)
{
        *ret_retry = false;
        if (cc != CURLE_OK) {
                const char *detail = http_error_text(cc, errbuf);
                int r;
                switch (cc) {
                case CURLE_READ_ERROR:
                case CURLE_ABORTED_BY_CALLBACK:
                        *ret_why = xasprintf("cannot read the file: %s",
                                             strerror(rq->read_errno ? rq->read_errno : EIO));
                        return -(rq->read_errno ? rq->read_errno : EIO);
                case CURLE_WRITE_ERROR:
                        *ret_why = xasprintf("cannot write the download: %s",
                                             strerror(rq->write_errno ? rq->write_errno : EIO));
                        return -(rq->write_errno ? rq->write_errno : EIO);
                case CURLE_PEER_FAILED_VERIFICATION:
                case CURLE_SSL_CACERT_BADFILE:
                case CURLE_SSL_CERTPROBLEM:
                case CURLE_SSL_ISSUER_ERROR:
                        *ret_why =
                            xasprintf("TLS: %s (is the endpoint's CA bundle given?)", detail);
                        return -EPROTO;
                case CURLE_COULDNT_CONNECT:
                        r = -ECONNREFUSED;
                        break;
                case CURLE_COULDNT_RESOLVE_HOST:
                        r = -EHOSTUNREACH;
                        break;
                case CURLE_OPERATION_TIMEDOUT:
                        r = -ETIMEDOUT;
                        break;
                case CURLE_SEND_ERROR:
                case CURLE_RECV_ERROR:
                case CURLE_GOT_NOTHING:
                case CURLE_PARTIAL_FILE:
                case CURLE_SSL_CONNECT_ERROR:
                case CURLE_HTTP2:
                case CURLE_HTTP2_STREAM:
                        r = -EIO;
                        break;
                default:
                        *ret_why = xasprintf("%s", detail);
                        return -EIO;
                }
                *ret_why = xasprintf("%s://%s: %s", c->scheme, c->host, detail);
                *ret_retry = true;
                return r;
        }
        if (rq->status >= 200 && rq->status < 300)
                return 0;
        _cleanup_free_ char *code = s3_xml_value(sb_str(&rq->resp), rq->resp.len, "Code");
        _cleanup_free_ char *msg = s3_xml_value(sb_str(&rq->resp), rq->resp.len, "Message");
        if (code && msg)
                *ret_why = xasprintf("HTTP %ld %s: %s", rq->status, code, msg);
        else if (code)
                *ret_why = xasprintf("HTTP %ld %s", rq->status, code);
        else if (rq->status == 404)
                *ret_why = xasprintf("HTTP 404: no such object");
        else if (rq->status == 403)
                *ret_why = xasprintf("HTTP 403: access denied");
        else
                *ret_why = xasprintf("HTTP %ld", rq->status);
        if (rq->status == 404)
                return -ENOENT;
        if (rq->status == 403)
                return -EACCES;
        if (rq->status >= 500 || rq->status == 429 || rq->status == 408) {
                *ret_retry = true;
                return -EIO;
        }
        return rq->status >= 400 ? -EIO : -EBADMSG;
}

static void backoff_sleep(const s3_client *c, int attempt)
{
        int64_t ms = c->backoff_ms;
        for (int i = 1; i < attempt && ms < c->backoff_max_ms; i++)
                ms *= 2;
        ms = MIN(ms, (int64_t)c->backoff_max_ms);
        uint32_t jitter = 0;
        if (getrandom(&jitter, sizeof(jitter), GRND_NONBLOCK) == (ssize_t)sizeof(jitter))
                ms += jitter % (uint32_t)(ms / 4 + 1);
        msleep(ms);
}

/* Run a request with retries; on failure *ret_why says what happened (without the location). */
static int run(s3_client *c, request *rq, char **ret_why)
{
        char errbuf[CURL_ERROR_SIZE];
        rq->c = c;
        int max = rq->max_attempts > 0 ? rq->max_attempts : c->max_attempts;
        for (int n = 1;; n++) {
                CURLcode cc = attempt(c, rq, errbuf);
                bool retry = false;
                char *why = NULL;
                int r = classify(c, rq, cc, errbuf, &retry, &why);
                if (r == 0) {
                        free(why);
                        return 0;
                }
                if (!retry || n >= max) {
                        *ret_why =
                            n > 1 ? xasprintf("%s (after %d attempts)", why, n) : xstrdup(why);
                        free(why);
                        return r;
                }
                log_debug("s3: %s s3://%s/%s: %s; retrying", rq->what, c->bucket, rq->key, why);
                if (c->on_retry)
                        c->on_retry(c->userdata, n, why);
                free(why);
                backoff_sleep(c, n);
        }
}

static void request_release(request *rq)
{
        sb_release(&rq->resp);
        free(rq->etag);
        free(rq->resp_sha256);
}

#define REQUEST_INIT(m, k)                                                                         \
        {                                                                                          \
                .method = (m), .key = (k), .what = (m), .in_fd = -1, .out_fd = -1                  \
        }

/* ---- operations ---- */

int s3_head(s3_client *c, const char *key, s3_object_info *ret, char **ret_error)
{
        assert(c && key && ret);
        request rq = REQUEST_INIT("HEAD", key);
        _cleanup_free_ char *why = NULL;
        int r = run(c, &rq, &why);
        if (r < 0) {
                request_release(&rq);
                return dest_fail(ret_error, r, "s3://%s/%s: HEAD: %s", c->bucket, key, why);
        }
        curl_off_t len = -1, mtime = -1;
        curl_easy_getinfo(c->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
        curl_easy_getinfo(c->h, CURLINFO_FILETIME_T, &mtime);
        *ret = (s3_object_info){
            .size = len,
            .mtime_ms = mtime >= 0 ? (int64_t)mtime * 1000 : 0,
            .sha256_hex = TAKE_PTR(rq.resp_sha256),
            .etag = TAKE_PTR(rq.etag),
        };
        request_release(&rq);
        return 0;
}

int s3_delete(s3_client *c, const char *key, char **ret_error)
{
        assert(c && key);
        s3_object_info info = {0};
        int r = s3_head(c, key, &info, ret_error);
        s3_object_info_release(&info);
        if (r < 0)
                return r;
        request rq = REQUEST_INIT("DELETE", key);
        _cleanup_free_ char *why = NULL;
        r = run(c, &rq, &why);
        request_release(&rq);
        if (r < 0)
                return dest_fail(ret_error, r, "s3://%s/%s: DELETE: %s", c->bucket, key, why);
        return 0;
}

int s3_get_file(s3_client *c, const char *key, const char *path, char **ret_error)
{
        assert(c && key && path);
        _cleanup_free_ char *part = xasprintf("%s.part", path);
        int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return dest_fail(ret_error, -errno, "cannot write %s: %s", part, strerror(errno));
        request rq = REQUEST_INIT("GET", key);
        rq.out_fd = fd;
        _cleanup_free_ char *why = NULL;
        int r = run(c, &rq, &why);
        request_release(&rq);
        if (r < 0) {
                close(fd);
                (void)unlink(part);
                return dest_fail(ret_error, r, "s3://%s/%s: GET: %s", c->bucket, key, why);
        }
        r = dest_commit_part(fd, part, path);
        if (r < 0)
                return dest_fail(ret_error, r, "cannot write %s: %s", path, strerror(-r));
        return 0;
}

static int put_single(s3_client *c, const char *key, int fd, int64_t size, const char *sha256_hex,
                      char **ret_why)
{
        char sha[65];
        if (!sha256_hex) {
                int r = hash_fd_sha256_hex(fd, 0, size, sha, NULL);
                if (r < 0) {
                        *ret_why = xasprintf("cannot read the file: %s", strerror(-r));
                        return r;
                }
        }
        request rq = REQUEST_INIT("PUT", key);
        rq.in_fd = fd;
        rq.in_length = size;
        rq.payload_sha256 = sha256_hex ? sha256_hex : sha;
        rq.meta_sha256 = sha256_hex;
        rq.progress_total = size;
        int r = run(c, &rq, ret_why);
        request_release(&rq);
        return r;
}

/* Give up a multipart upload so its parts never become an object; best effort. */
static void abort_upload(s3_client *c, const char *key, const char *upload_id_enc)
{
        _cleanup_free_ char *q = xasprintf("uploadId=%s", upload_id_enc);
        request rq = REQUEST_INIT("DELETE", key);
        rq.query = q;
        rq.what = "AbortMultipartUpload";
        rq.max_attempts = 2;
        _cleanup_free_ char *why = NULL;
        int r = run(c, &rq, &why);
        request_release(&rq);
        if (r < 0)
                log_debug("s3: abort of a multipart upload of s3://%s/%s failed: %s", c->bucket,
                          key, why);
}

/*
 * A CompleteMultipartUpload retried after a lost answer finds the upload gone
 * (NoSuchUpload): the object exists when it carries this upload's SHA-256.
 */
static bool completed_anyway(s3_client *c, const char *key, int64_t size, const char *sha256_hex)
{
        if (!sha256_hex)
                return false;
        s3_object_info info = {0};
        bool ok = s3_head(c, key, &info, NULL) == 0 && info.size == size && info.sha256_hex &&
                  streq(info.sha256_hex, sha256_hex);
        s3_object_info_release(&info);
        return ok;
}

static int put_multipart(s3_client *c, const char *key, int fd, int64_t size,
                         const char *sha256_hex, char **ret_why)
{
        int64_t part_size = c->part_size;
        if ((size + part_size - 1) / part_size > MAX_PARTS)
                part_size = ((size + MAX_PARTS - 1) / MAX_PARTS + MIB - 1) / MIB * MIB;
        int64_t n_parts = (size + part_size - 1) / part_size;
        /* S3 checks each part against the hash of that part read from the file;
         * the file (a temporary nobody fsynced) must first be the bytes whose
         * SHA-256 the caller took */
        if (sha256_hex) {
                char whole[65];
                int k = hash_fd_sha256_hex(fd, 0, size, whole, NULL);
                if (k < 0) {
                        *ret_why = xasprintf("cannot read the file: %s", strerror(-k));
                        return k;
                }
                if (!streq(whole, sha256_hex)) {
                        *ret_why = xasprintf("the file reads back with SHA-256 %s, not %s", whole,
                                             sha256_hex);
                        return -EBADMSG;
                }
        }

        request create = REQUEST_INIT("POST", key);
        create.query = "uploads=";
        create.what = "CreateMultipartUpload";
        create.meta_sha256 = sha256_hex;
        int r = run(c, &create, ret_why);
        _cleanup_free_ char *upload_id =
            r == 0 ? s3_xml_value(sb_str(&create.resp), create.resp.len, "UploadId") : NULL;
        request_release(&create);
        if (r < 0)
                return r;
        if (isempty(upload_id)) {
                *ret_why = xstrdup("CreateMultipartUpload: the answer holds no UploadId");
                return -EBADMSG;
        }
        _cleanup_free_ char *id_enc = uri_encoded(upload_id, false);

        strbuf done = STRBUF_INIT;
        sb_append(&done,
                  "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
        for (int64_t i = 0; i < n_parts && r == 0; i++) {
                int64_t off = i * part_size;
                int64_t len = MIN(part_size, size - off);
                char sha[65];
                r = hash_fd_sha256_hex(fd, off, len, sha, NULL);
                if (r < 0) {
                        *ret_why = xasprintf("cannot read the file: %s", strerror(-r));
                        break;
                }
                _cleanup_free_ char *q =
                    xasprintf("partNumber=%lld&uploadId=%s", (long long)i + 1, id_enc);
                _cleanup_free_ char *what =
                    xasprintf("UploadPart %lld of %lld", (long long)i + 1, (long long)n_parts);
                request rq = REQUEST_INIT("PUT", key);
                rq.query = q;
                rq.what = what;
                rq.in_fd = fd;
                rq.in_offset = off;
                rq.in_length = len;
                rq.payload_sha256 = sha;
                rq.progress_base = off;
                rq.progress_total = size;
                _cleanup_free_ char *why = NULL;
                r = run(c, &rq, &why);
                if (r == 0 && isempty(rq.etag)) {
                        r = -EBADMSG;
                        why = xstrdup("the answer holds no ETag");
                }
                if (r == 0)
                        sb_printf(&done,
                                  "<Part><PartNumber>%lld</PartNumber><ETag>\"%s\"</ETag></Part>",
                                  (long long)i + 1, rq.etag);
                else
                        *ret_why = xasprintf("%s: %s", what, why);
                request_release(&rq);
        }
        sb_append(&done, "</CompleteMultipartUpload>");

        if (r == 0) {
                _cleanup_free_ char *q = xasprintf("uploadId=%s", id_enc);
                request rq = REQUEST_INIT("POST", key);
                rq.query = q;
                rq.what = "CompleteMultipartUpload";
                rq.body = sb_str(&done);
                rq.body_len = done.len;
                rq.content_type = "application/xml";
                _cleanup_free_ char *why = NULL;
                r = run(c, &rq, &why);
                /* S3 may answer 200 and put the error in the body. */
                _cleanup_free_ char *code =
                    r == 0 ? s3_xml_value(sb_str(&rq.resp), rq.resp.len, "Code") : NULL;
                if (r == 0 && code && memmem(sb_str(&rq.resp), rq.resp.len, "<Error>", 7)) {
                        _cleanup_free_ char *msg =
                            s3_xml_value(sb_str(&rq.resp), rq.resp.len, "Message");
                        why = xasprintf("%s: %s", code, msg ? msg : "");
                        r = -EIO;
                }
                if (r == -ENOENT && completed_anyway(c, key, size, sha256_hex))
                        r = 0;
                if (r < 0)
                        *ret_why = xasprintf("CompleteMultipartUpload: %s", why);
                request_release(&rq);
        }
        sb_release(&done);
        if (r < 0)
                abort_upload(c, key, id_enc);
        return r;
}

int s3_put_file(s3_client *c, const char *key, const char *path, const char *sha256_hex,
                char **ret_error)
{
        assert(c && key && path);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return dest_fail(ret_error, -errno, "cannot read %s: %s", path, strerror(errno));
        struct stat st;
        if (fstat(fd, &st) < 0)
                return dest_fail(ret_error, -errno, "cannot read %s: %s", path, strerror(errno));
        if (!S_ISREG(st.st_mode))
                return dest_fail(ret_error, -EINVAL, "%s is not a regular file", path);
        _cleanup_free_ char *why = NULL;
        bool multipart = st.st_size > c->threshold;
        int r = multipart ? put_multipart(c, key, fd, st.st_size, sha256_hex, &why)
                          : put_single(c, key, fd, st.st_size, sha256_hex, &why);
        if (r < 0)
                return dest_fail(ret_error, r, "s3://%s/%s: upload of %s failed: %s%s", c->bucket,
                                 key, path, why,
                                 multipart ? "; the multipart upload was abandoned, no object "
                                             "was created"
                                           : "");
        return 0;
}
