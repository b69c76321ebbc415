/*
 * What the S3 client puts on the wire, seen by a small scripted HTTP server
 * on loopback:
 *
 * - The signer: libcurl's SigV4, set up by s3_sign_setup() exactly as every
 *   S3 request is, must reproduce AWS's published signatures: the SigV4 test
 *   suite's get-vanilla and post-vanilla (AKIDEXAMPLE, 20150830T123600Z,
 *   us-east-1, service "service") and the S3 documentation's GET Object
 *   (ranged, payload hash from x-amz-content-sha256) and PUT Object (a
 *   streamed body with its SHA-256 precomputed, a key with '$'). libcurl
 *   7.88 honours a caller-set X-Amz-Date header, which pins the time.
 * - Our requests: x-amz-content-sha256 is the SHA-256 of what is sent and is
 *   signed, with x-amz-meta-sha256; the session token travels signed.
 * - Multipart failure handling s3rver cannot show (it has no
 *   AbortMultipartUpload): a refused part aborts the upload and never
 *   completes it; a 503 is retried; an error hidden in a 200 answer to
 *   CompleteMultipartUpload fails the upload and aborts it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <openssl/evp.h>

#include "snapstore/s3.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* ---- a scripted HTTP/1.1 server: one connection at a time, closed after each answer ---- */

typedef struct wire_request {
        char *method;
        char *target;  /* path?query as sent */
        char *headers; /* raw header block, lower-cased names kept as sent */
        strbuf body;
} wire_request;

typedef struct wire_answer {
        int status;
        const char *headers; /* extra "Name: value\r\n" lines, or NULL */
        const char *body;
} wire_answer;

typedef wire_answer (*wire_script)(const wire_request *rq, int n, void *userdata);

typedef struct wire_server {
        int fd;
        int port;
        pthread_t thread;
        wire_script script;
        void *userdata;
        pthread_mutex_t lock;
        strbuf log;      /* "METHOD TARGET\n" per request */
        char *last_auth; /* Authorization of the last request */
        char *last_headers;
        int n;
        bool stop;
} wire_server;

static char *header_value(const char *headers, const char *name)
{
        size_t n = strlen(name);
        for (const char *l = headers; l && *l;) {
                const char *end = strstr(l, "\r\n");
                if (!end)
                        break;
                if ((size_t)(end - l) > n && strncasecmp(l, name, n) == 0 && l[n] == ':') {
                        const char *v = l + n + 1;
                        while (*v == ' ')
                                v++;
                        return xstrndup(v, (size_t)(end - v));
                }
                l = end + 2;
        }
        return NULL;
}

static void serve_one(wire_server *s, int c)
{
        strbuf in = STRBUF_INIT;
        char buf[4096];
        char *hdr_end = NULL;
        while (!(hdr_end = strstr(sb_str(&in), "\r\n\r\n"))) {
                ssize_t r = read(c, buf, sizeof(buf));
                if (r <= 0) {
                        sb_release(&in);
                        return;
                }
                sb_append_len(&in, buf, (size_t)r);
        }
        size_t head_len = (size_t)(hdr_end - in.buf) + 4;
        wire_request rq = {.body = STRBUF_INIT};
        const char *line_end = strstr(in.buf, "\r\n");
        const char *sp1 = memchr(in.buf, ' ', (size_t)(line_end - in.buf));
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1)) : NULL;
        assert_non_null(sp2);
        rq.method = xstrndup(in.buf, (size_t)(sp1 - in.buf));
        rq.target = xstrndup(sp1 + 1, (size_t)(sp2 - sp1 - 1));
        rq.headers = xstrndup(line_end + 2, head_len - (size_t)(line_end + 2 - in.buf) - 2);
        _cleanup_free_ char *cl = header_value(rq.headers, "Content-Length");
        _cleanup_free_ char *expect = header_value(rq.headers, "Expect");
        size_t want = cl ? strtoul(cl, NULL, 10) : 0;
        sb_append_len(&rq.body, in.buf + head_len, in.len - head_len);
        if (expect && strcasecmp(expect, "100-continue") == 0 && rq.body.len < want)
                (void)!write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        while (rq.body.len < want) {
                ssize_t r = read(c, buf, sizeof(buf));
                if (r <= 0)
                        break;
                sb_append_len(&rq.body, buf, (size_t)r);
        }
        pthread_mutex_lock(&s->lock);
        int n = ++s->n;
        sb_printf(&s->log, "%s %s\n", rq.method, rq.target);
        free(s->last_auth);
        s->last_auth = header_value(rq.headers, "Authorization");
        free(s->last_headers);
        s->last_headers = xstrdup(rq.headers);
        pthread_mutex_unlock(&s->lock);

        wire_answer a = s->script ? s->script(&rq, n, s->userdata) : (wire_answer){200};
        const char *body = a.body ? a.body : "";
        _cleanup_free_ char *out =
            xasprintf("HTTP/1.1 %d X\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n%s\r\n%s",
                      a.status, strlen(body), a.headers ? a.headers : "", body);
        (void)!write(c, out, strlen(out));
        free(rq.method);
        free(rq.target);
        free(rq.headers);
        sb_release(&rq.body);
        sb_release(&in);
}

static void *serve(void *arg)
{
        wire_server *s = arg;
        for (;;) {
                int c = accept(s->fd, NULL, NULL);
                if (c < 0)
                        return NULL;
                pthread_mutex_lock(&s->lock);
                bool stop = s->stop;
                pthread_mutex_unlock(&s->lock);
                if (stop) {
                        close(c);
                        return NULL;
                }
                serve_one(s, c);
                close(c);
        }
}

static wire_server *wire_start(wire_script script, void *userdata)
{
        wire_server *s = XNEW(wire_server);
        s->script = script;
        s->userdata = userdata;
        pthread_mutex_init(&s->lock, NULL);
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s->fd >= 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        socklen_t len = sizeof(sa);
        assert_int_equal(getsockname(s->fd, (struct sockaddr *)&sa, &len), 0);
        s->port = ntohs(sa.sin_port);
        assert_int_equal(listen(s->fd, 16), 0);
        assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
        return s;
}

static void wire_stop(wire_server *s)
{
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_mutex_unlock(&s->lock);
        /* Wake the accept() with one last connection. */
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)s->port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        (void)connect(c, (struct sockaddr *)&sa, sizeof(sa));
        pthread_join(s->thread, NULL);
        close(c);
        close(s->fd);
        sb_release(&s->log);
        free(s->last_auth);
        free(s->last_headers);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

/* ---- the published signatures ---- */

static size_t discard(char *d, size_t size, size_t n, void *u)
{
        return size * n;
}

typedef struct vector {
        const char *name;
        const char *access_key;
        const char *secret;
        const char *region;
        const char *service;
        const char *method;
        const char *url;            /* on the example host, port 80 */
        const char *const *headers; /* NULL-terminated */
        const char *body;           /* PUT: streamed from a file */
        const char *want;           /* the Authorization header AWS publishes */
} vector;

static const char *read_body;
static size_t read_pos;

static size_t read_cb(char *buf, size_t size, size_t n, void *u)
{
        size_t left = strlen(read_body) - read_pos;
        size_t k = MIN(left, size * n);
        memcpy(buf, read_body + read_pos, k);
        read_pos += k;
        return k;
}

static void check_vector(const vector *v)
{
        wire_server *s = wire_start(NULL, NULL);
        CURL *h = curl_easy_init();
        const char *host_start = strstr(v->url, "://") + 3;
        _cleanup_free_ char *host = xstrndup(host_start, strcspn(host_start, "/"));
        _cleanup_free_ char *connect_to = xasprintf("%s:80:127.0.0.1:%d", host, s->port);
        struct curl_slist *ct = curl_slist_append(NULL, connect_to);
        struct curl_slist *headers = NULL;
        for (const char *const *hd = v->headers; *hd; hd++)
                headers = curl_slist_append(headers, *hd);
        s3_credentials creds = {.access_key_id = (char *)v->access_key,
                                .secret_access_key = (char *)v->secret};
        curl_easy_setopt(h, CURLOPT_URL, v->url);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, ct);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        s3_sign_setup(h, v->region, v->service, &creds, &headers);
        if (streq(v->method, "POST")) {
                curl_easy_setopt(h, CURLOPT_POST, 1L);
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        } else if (streq(v->method, "PUT")) {
                read_body = v->body;
                read_pos = 0;
                curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
                curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)strlen(v->body));
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        assert_int_equal(curl_easy_perform(h), CURLE_OK);
        curl_easy_cleanup(h);
        curl_slist_free_all(headers);
        curl_slist_free_all(ct);
        if (!s->last_auth || !streq(s->last_auth, v->want))
                fail_msg("%s: got  %s\nwant %s", v->name, s->last_auth ? s->last_auth : "(none)",
                         v->want);
        wire_stop(s);
}

static void test_sigv4_published_examples(void **state)
{
        static const char *const suite_date[] = {"X-Amz-Date: 20150830T123600Z", NULL};
        static const char *const s3_get[] = {
            "Range: bytes=0-9",
            "x-amz-content-sha256: "
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "x-amz-date: 20130524T000000Z", NULL};
        static const char *const s3_put[] = {
            "Date: Fri, 24 May 2013 00:00:00 GMT", "x-amz-date: 20130524T000000Z",
            "x-amz-storage-class: REDUCED_REDUNDANCY",
            "x-amz-content-sha256: "
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
            NULL};
        static const vector vectors[] = {
            {"get-vanilla", "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1",
             "service", "GET", "http://example.amazonaws.com/", suite_date, NULL,
             "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
             "SignedHeaders=host;x-amz-date, "
             "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
            {"post-vanilla", "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1",
             "service", "POST", "http://example.amazonaws.com/", suite_date, NULL,
             "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
             "SignedHeaders=host;x-amz-date, "
             "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
            {"s3 GET Object", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
             "us-east-1", "s3", "GET", "http://examplebucket.s3.amazonaws.com/test.txt", s3_get,
             NULL,
             "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
             "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
             "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
            {"s3 PUT Object", "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
             "us-east-1", "s3", "PUT", "http://examplebucket.s3.amazonaws.com/test%24file.text",
             s3_put, "Welcome to Amazon S3.",
             "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
             "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
             "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(vectors); i++)
                check_vector(&vectors[i]);
}

/* ---- our own requests ---- */

static char *tmp;

static int setup(void **state)
{
        tmp = harness_tmpdir("gitcd-s3wire");
        return tmp ? 0 : -1;
}

static s3_client *client(const wire_server *s, const s3_credentials *creds, int64_t part_size)
{
        _cleanup_free_ char *endpoint = xasprintf("http://127.0.0.1:%d", s->port);
        s3_config cfg = {.endpoint = endpoint,
                         .bucket = "snaps",
                         .region = "eu-central-1",
                         .path_style = true,
                         .credentials = creds,
                         .multipart_threshold = part_size ? part_size : 0,
                         .part_size = part_size,
                         .max_attempts = 3,
                         .backoff_ms = 10};
        s3_client *c = NULL;
        assert_int_equal(s3_client_new(&cfg, &c, NULL), 0);
        return c;
}

static char *sha256_hex(const char *data, size_t len)
{
        unsigned char md[32];
        unsigned int n = 0;
        EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
        strbuf sb = STRBUF_INIT;
        for (int i = 0; i < 32; i++)
                sb_printf(&sb, "%02x", md[i]);
        return sb_detach(&sb);
}

static wire_answer ok_script(const wire_request *rq, int n, void *userdata)
{
        char **body_sha = userdata;
        free(*body_sha);
        *body_sha = sha256_hex(rq->body.buf ? rq->body.buf : "", rq->body.len);
        return (wire_answer){200, "ETag: \"abc\"\r\n", NULL};
}

static void test_payload_hash_and_signed_headers(void **state)
{
        char *body_sha = NULL;
        wire_server *s = wire_start(ok_script, &body_sha);
        s3_credentials creds = {.access_key_id = (char *)"AKIDEXAMPLE",
                                .secret_access_key = (char *)"secret-never-shown",
                                .session_token = (char *)"token-of-the-session"};
        s3_client *c = client(s, &creds, 0);
        static const char content[] = "a snapshot body\n";
        _cleanup_free_ char *src = path_join(tmp, "wire.db");
        assert_int_equal(write_file_atomic(src, content, strlen(content), 0600), 0);
        _cleanup_free_ char *want_sha = sha256_hex(content, strlen(content));
        assert_int_equal(s3_put_file(c, "dir/a b$.db", src, NULL, NULL), 0);

        assert_string_equal(body_sha, want_sha);
        _cleanup_free_ char *sent_sha = header_value(s->last_headers, "x-amz-content-sha256");
        assert_string_equal(sent_sha, want_sha);
        _cleanup_free_ char *token = header_value(s->last_headers, "x-amz-security-token");
        assert_string_equal(token, "token-of-the-session");
        assert_non_null(strstr(s->last_auth, "/eu-central-1/s3/aws4_request"));
        assert_non_null(strstr(s->last_auth, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                                             "x-amz-security-token,"));
        assert_non_null(strstr(sb_str(&s->log), "PUT /snaps/dir/a%20b%24.db\n"));

        /* With the caller's SHA-256: sent as the payload hash and stored as metadata. */
        assert_int_equal(s3_put_file(c, "b.db", src, want_sha, NULL), 0);
        _cleanup_free_ char *meta = header_value(s->last_headers, "x-amz-meta-sha256");
        assert_string_equal(meta, want_sha);
        assert_non_null(strstr(s->last_auth, "x-amz-meta-sha256"));
        s3_client_free(c);
        wire_stop(s);
        free(body_sha);
}

/* A multipart upload whose second part is refused (400), or retried after a 503. */
typedef struct mp {
        int refuse_part; /* 400 for this part number */
        int busy_part;   /* 503 once for this part number */
        bool busy_done;
        bool complete_error; /* 200 with <Error> for Complete */
} mp;

static wire_answer multipart_script(const wire_request *rq, int n, void *userdata)
{
        mp *m = userdata;
        if (streq(rq->method, "POST") && strstr(rq->target, "?uploads="))
                return (wire_answer){200, NULL,
                                     "<InitiateMultipartUploadResult><UploadId>up/1+x&amp;y"
                                     "</UploadId></InitiateMultipartUploadResult>"};
        if (streq(rq->method, "PUT")) {
                int part = atoi(strstr(rq->target, "partNumber=") + 11);
                if (part == m->refuse_part)
                        return (wire_answer){400, NULL,
                                             "<Error><Code>InvalidArgument</Code><Message>Part "
                                             "refused</Message></Error>"};
                if (part == m->busy_part && !m->busy_done) {
                        m->busy_done = true;
                        return (wire_answer){503, NULL, "<Error><Code>SlowDown</Code></Error>"};
                }
                return (wire_answer){200, "ETag: \"e\"\r\n", NULL};
        }
        if (streq(rq->method, "POST") && m->complete_error)
                return (wire_answer){200, NULL,
                                     "<Error><Code>InternalError</Code><Message>We "
                                     "encountered an internal error</Message></Error>"};
        if (streq(rq->method, "DELETE"))
                return (wire_answer){204, NULL, NULL};
        return (wire_answer){200, NULL, "<CompleteMultipartUploadResult/>"};
}

static void test_multipart_failures_abort(void **state)
{
        static const char *const enc_id = "uploadId=up%2F1%2Bx%26y";
        _cleanup_free_ char *src = path_join(tmp, "mp.db");
        _cleanup_free_ char *data = xmalloc(10000);
        memset(data, 'x', 10000);
        assert_int_equal(write_file_atomic(src, data, 10000, 0600), 0);
        s3_credentials creds = {.access_key_id = (char *)"AKID",
                                .secret_access_key = (char *)"secret-never-shown"};

        /* Part 2 refused: no retry, an abort, never a complete. */
        mp m = {.refuse_part = 2};
        wire_server *s = wire_start(multipart_script, &m);
        s3_client *c = client(s, &creds, 4000);
        char *err = NULL;
        assert_int_equal(s3_put_file(c, "k.db", src, NULL, &err), -EIO);
        assert_non_null(strstr(err, "UploadPart 2 of 3"));
        assert_non_null(strstr(err, "InvalidArgument"));
        assert_non_null(strstr(err, "no object was created"));
        assert_null(strstr(err, "secret-never-shown"));
        free(err);
        err = NULL;
        _cleanup_free_ char *abort_line = xasprintf("DELETE /snaps/k.db?%s\n", enc_id);
        _cleanup_free_ char *part3 = xasprintf("PUT /snaps/k.db?partNumber=3&%s\n", enc_id);
        _cleanup_free_ char *complete = xasprintf("POST /snaps/k.db?%s\n", enc_id);
        assert_non_null(strstr(sb_str(&s->log), abort_line));
        assert_null(strstr(sb_str(&s->log), part3));
        assert_null(strstr(sb_str(&s->log), complete));
        s3_client_free(c);
        wire_stop(s);

        /* A 503 on part 2 is retried and the upload completes. */
        m = (mp){.busy_part = 2};
        s = wire_start(multipart_script, &m);
        c = client(s, &creds, 4000);
        assert_int_equal(s3_put_file(c, "k.db", src, NULL, &err), 0);
        assert_true(m.busy_done);
        assert_non_null(strstr(sb_str(&s->log), complete));
        assert_null(strstr(sb_str(&s->log), "DELETE"));
        s3_client_free(c);
        wire_stop(s);

        /* An error inside a 200 answer to CompleteMultipartUpload is a failure. */
        m = (mp){.complete_error = true};
        s = wire_start(multipart_script, &m);
        c = client(s, &creds, 4000);
        assert_true(s3_put_file(c, "k.db", src, NULL, &err) < 0);
        assert_non_null(strstr(err, "InternalError"));
        assert_non_null(strstr(sb_str(&s->log), abort_line));
        free(err);
        s3_client_free(c);
        wire_stop(s);
}

static void test_xml_value(void **state)
{
        static const char xml[] = "<Error><Code>NoSuchKey</Code><Message>a &lt;b&gt; &amp; "
                                  "&quot;c&quot; &apos;d&apos; &bogus;</Message></Error>";
        _cleanup_free_ char *code = s3_xml_value(xml, strlen(xml), "Code");
        _cleanup_free_ char *msg = s3_xml_value(xml, strlen(xml), "Message");
        assert_string_equal(code, "NoSuchKey");
        assert_string_equal(msg, "a <b> & \"c\" 'd' &bogus;");
        assert_null(s3_xml_value(xml, strlen(xml), "UploadId"));
        /* Length-bounded: a tag cut by the length is not found. */
        assert_null(s3_xml_value(xml, 20, "Code"));
        assert_null(s3_xml_value("<Code>open", 10, "Code"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sigv4_published_examples),
            cmocka_unit_test(test_payload_hash_and_signed_headers),
            cmocka_unit_test(test_multipart_failures_abort),
            cmocka_unit_test(test_xml_value),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
