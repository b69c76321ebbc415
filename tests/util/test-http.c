/*
 * util/http: the libcurl handle builder every HTTP client of gitcd uses,
 * against servers on loopback. A small server of this file's own (a thread
 * answering from a script: a redirect, silence, a stalled body, or a proxy
 * that records what it was asked) shows what a handle does on the wire: no
 * redirect followed, no protocol but http and https, the whole-transfer
 * and the stall deadlines applied, the proxy used exactly when the policy
 * says so, gitcd's user agent, libcurl's words in the error buffer. An
 * https server (util/httpd over libmicrohttpd, with a certificate from
 * pki/) shows the TLS choices: a CA checked, a pinned key, no check.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "pki/pki.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/http.h"
#include "util/httpd.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* ---- a scripted plain-HTTP server ---- */

typedef enum script {
        ANSWER,  /* send answer, close */
        SILENT,  /* read the request, answer nothing until stopped */
        STALLED, /* headers and one byte of a longer body, then nothing */
} script;

typedef struct server {
        int fd;
        int port;
        script what;
        const char *answer;
        pthread_t thread;
        atomic_bool stop;
        atomic_int requests;
        pthread_mutex_t lock;
        char *request_line; /* of the last request */
        char *user_agent;   /* its User-Agent, or NULL */
} server;

static char *header_value(const char *req, const char *name)
{
        size_t n = strlen(name);
        for (const char *l = strstr(req, "\r\n"); l; l = strstr(l + 2, "\r\n"))
                if (strncasecmp(l + 2, name, n) == 0 && l[2 + n] == ':') {
                        const char *v = l + 3 + n + strspn(l + 3 + n, " ");
                        return xstrndup(v, strcspn(v, "\r\n"));
                }
        return NULL;
}

/* Wait until fd can be read or the server is stopped; false when stopped. */
static bool wait_readable(server *s, int fd)
{
        while (!atomic_load(&s->stop)) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, 50) > 0)
                        return true;
        }
        return false;
}

static void serve_one(server *s, int c)
{
        strbuf req = STRBUF_INIT;
        char buf[4096];
        while (!strstr(sb_str(&req), "\r\n\r\n") && wait_readable(s, c)) {
                ssize_t n = read(c, buf, sizeof(buf));
                if (n <= 0)
                        break;
                sb_append_len(&req, buf, (size_t)n);
        }
        pthread_mutex_lock(&s->lock);
        free(s->request_line);
        free(s->user_agent);
        s->request_line = xstrndup(sb_str(&req), strcspn(sb_str(&req), "\r\n"));
        s->user_agent = header_value(sb_str(&req), "User-Agent");
        pthread_mutex_unlock(&s->lock);
        atomic_fetch_add(&s->requests, 1);
        sb_release(&req);
        if (s->what == STALLED) {
                const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nx";
                (void)!write(c, head, strlen(head));
        } else if (s->what == ANSWER) {
                (void)!write(c, s->answer, strlen(s->answer));
                return;
        }
        while (wait_readable(s, c) && read(c, buf, sizeof(buf)) > 0)
                ;
}

static void *server_main(void *arg)
{
        server *s = arg;
        while (wait_readable(s, s->fd)) {
                int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        continue;
                serve_one(s, c);
                close(c);
        }
        return NULL;
}

static server *server_start(script what, const char *answer)
{
        server *s = XNEW(server);
        s->what = what;
        s->answer = answer;
        pthread_mutex_init(&s->lock, NULL);
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s->fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(s->fd, 16), 0);
        socklen_t len = sizeof(a);
        assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &len), 0);
        s->port = ntohs(a.sin_port);
        assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
        return s;
}

static void server_stop(server *s)
{
        atomic_store(&s->stop, true);
        pthread_join(s->thread, NULL);
        close(s->fd);
        free(s->request_line);
        free(s->user_agent);
        pthread_mutex_destroy(&s->lock);
        free(s);
}

static char *server_url(const server *s, const char *path)
{
        return xasprintf("http://127.0.0.1:%d%s", s->port, path);
}

static size_t keep_body(char *data, size_t size, size_t n, void *userdata)
{
        sb_append_len(userdata, data, size * n);
        return size * n;
}

/* GET url on a handle set up with o; the CURLcode, the status in *ret_status. */
static CURLcode get(const http_opts *o, const char *url, long *ret_status)
{
        CURL *h = http_handle_new(o);
        assert_non_null(h);
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        CURLcode cc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (ret_status)
                *ret_status = status;
        curl_easy_cleanup(h);
        sb_release(&body);
        return cc;
}

/* ---- plain HTTP ---- */

static void test_no_redirect_followed(void **state)
{
        (void)state;
        server *elsewhere =
            server_start(ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret");
        _cleanup_free_ char *target = server_url(elsewhere, "/secret");
        _cleanup_free_ char *answer = xasprintf("HTTP/1.1 302 Found\r\nLocation: %s\r\n"
                                                "Content-Length: 0\r\n\r\n",
                                                target);
        server *first = server_start(ANSWER, answer);
        _cleanup_free_ char *url = server_url(first, "/");

        long status = 0;
        assert_int_equal(get(&(http_opts){0}, url, &status), CURLE_OK);
        assert_int_equal(status, 302);
        assert_int_equal(atomic_load(&first->requests), 1);
        assert_int_equal(atomic_load(&elsewhere->requests), 0);

        /* Even on a handle that asked for it before: a set-up again turns it off. */
        CURL *h = http_handle_new(&(http_opts){0});
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        assert_int_equal(http_setup(h, &(http_opts){0}), 0);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_body);
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        assert_int_equal(curl_easy_perform(h), CURLE_OK);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        assert_int_equal(status, 302);
        assert_int_equal(atomic_load(&elsewhere->requests), 0);
        sb_release(&body);
        curl_easy_cleanup(h);
        server_stop(first);
        server_stop(elsewhere);
}

static void test_protocols(void **state)
{
        (void)state;
        server *s = server_start(ANSWER, "HTTP/1.1 204 No Content\r\n\r\n");
        _cleanup_free_ char *url = server_url(s, "/");
        assert_int_equal(get(&(http_opts){0}, url, NULL), CURLE_OK);
        assert_int_equal(get(&(http_opts){.https_only = true}, url, NULL),
                         CURLE_UNSUPPORTED_PROTOCOL);
        assert_int_equal(atomic_load(&s->requests), 1);
        assert_int_equal(get(&(http_opts){0}, "file:///etc/hostname", NULL),
                         CURLE_UNSUPPORTED_PROTOCOL);
        server_stop(s);
}

static void test_user_agent(void **state)
{
        (void)state;
        server *s = server_start(ANSWER, "HTTP/1.1 204 No Content\r\n\r\n");
        _cleanup_free_ char *url = server_url(s, "/");
        assert_int_equal(get(&(http_opts){0}, url, NULL), CURLE_OK);
        assert_string_equal(s->user_agent, "gitcd/" GITCD_VERSION);
        assert_int_equal(get(&(http_opts){.user_agent = "gitcd/test grpc-c"}, url, NULL), CURLE_OK);
        assert_string_equal(s->user_agent, "gitcd/test grpc-c");
        server_stop(s);
}

/* A server that never answers: the whole-transfer deadline ends the wait, with words for it. */
static void test_timeout(void **state)
{
        (void)state;
        server *s = server_start(SILENT, NULL);
        _cleanup_free_ char *url = server_url(s, "/");
        char errbuf[CURL_ERROR_SIZE] = "left over";
        http_opts o = {.timeout_ms = 300, .errbuf = errbuf};
        assert_int_equal(get(&o, url, NULL), CURLE_OPERATION_TIMEDOUT);
        assert_non_null(strstr(errbuf, "timed out"));
        assert_ptr_equal(http_error_text(CURLE_OPERATION_TIMEDOUT, errbuf), errbuf);
        assert_string_equal(http_error_text(CURLE_COULDNT_CONNECT, ""),
                            curl_easy_strerror(CURLE_COULDNT_CONNECT));
        assert_string_equal(http_error_text(CURLE_COULDNT_CONNECT, NULL),
                            curl_easy_strerror(CURLE_COULDNT_CONNECT));
        server_stop(s);
}

/* A body that stops coming: cut by the stall rule, though no overall deadline is set. */
static void test_stall(void **state)
{
        (void)state;
        server *s = server_start(STALLED, NULL);
        _cleanup_free_ char *url = server_url(s, "/");
        http_opts o = {.stall_bytes_per_s = 1000, .stall_s = 1};
        assert_int_equal(get(&o, url, NULL), CURLE_OPERATION_TIMEDOUT);
        server_stop(s);
}

/*
 * The proxy policy, with http_proxy naming a proxy that records what it is
 * asked: HTTP_PROXY_ENV goes through it (an absolute URI on its request
 * line), HTTP_PROXY_NONE goes straight to the server.
 */
static void test_proxy_policy(void **state)
{
        (void)state;
        server *proxy = server_start(ANSWER, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nproxy");
        server *direct = server_start(ANSWER, "HTTP/1.1 204 No Content\r\n\r\n");
        _cleanup_free_ char *proxy_url = xasprintf("http://127.0.0.1:%d", proxy->port);
        _cleanup_free_ char *url = server_url(direct, "/member");
        unsetenv("no_proxy");
        unsetenv("NO_PROXY");
        setenv("http_proxy", proxy_url, 1);

        long status = 0;
        assert_int_equal(get(&(http_opts){.proxy = HTTP_PROXY_NONE}, url, &status), CURLE_OK);
        assert_int_equal(status, 204);
        assert_int_equal(atomic_load(&direct->requests), 1);
        assert_int_equal(atomic_load(&proxy->requests), 0);

        assert_int_equal(get(&(http_opts){.proxy = HTTP_PROXY_ENV}, url, &status), CURLE_OK);
        assert_int_equal(status, 200);
        assert_int_equal(atomic_load(&proxy->requests), 1);
        assert_int_equal(atomic_load(&direct->requests), 1);
        _cleanup_free_ char *want = xasprintf("GET %s HTTP/1.1", url);
        assert_string_equal(proxy->request_line, want);

        /* A handle set up again under the other policy follows the new one. */
        CURL *h = http_handle_new(&(http_opts){.proxy = HTTP_PROXY_ENV});
        assert_int_equal(http_setup(h, &(http_opts){.proxy = HTTP_PROXY_NONE}), 0);
        curl_easy_setopt(h, CURLOPT_URL, url);
        assert_int_equal(curl_easy_perform(h), CURLE_OK);
        curl_easy_cleanup(h);
        assert_int_equal(atomic_load(&direct->requests), 2);
        assert_int_equal(atomic_load(&proxy->requests), 1);

        unsetenv("http_proxy");
        server_stop(proxy);
        server_stop(direct);
}

/* ---- TLS ---- */

typedef struct tls_lab {
        char *dir;
        char *ca_file;
        char *other_ca_file;
        char *cert_pem, *key_pem;
        char *pin;
        httpd *server;
        char *url;
} tls_lab;

static enum MHD_Result answer_ok(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
        (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
        (void)con_cls;
        httpd_trust(conn);
        struct MHD_Response *r = MHD_create_response_from_buffer(2, "ok", MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ret = MHD_queue_response(conn, 200, r);
        MHD_destroy_response(r);
        return ret;
}

/* "sha256//BASE64" of the certificate's public key, as curl pins one. */
static char *pin_of(const char *cert_pem)
{
        BIO *bio = BIO_new_mem_buf(cert_pem, -1);
        X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
        BIO_free(bio);
        assert_non_null(x);
        unsigned char *der = NULL;
        int len = i2d_PUBKEY(X509_get0_pubkey(x), &der);
        assert_true(len > 0);
        uint8_t md[HASH_SHA256_LEN];
        hash_sha256(der, (size_t)len, md);
        OPENSSL_free(der);
        X509_free(x);
        unsigned char b64[48];
        EVP_EncodeBlock(b64, md, sizeof(md));
        return xasprintf("sha256//%s", b64);
}

static void tls_lab_start(tls_lab *l)
{
        char tmpl[] = "/tmp/gitcd-http-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        l->dir = xstrdup(tmpl);
        pki_key *ca_key = NULL, *key = NULL, *other_key = NULL;
        pki_cert *ca = NULL, *cert = NULL, *other = NULL;
        const char *ips[] = {"127.0.0.1", NULL};
        pki_cert_request req = {.cn = "server", .ip_addresses = ips, .days = 1, .server = true};
        assert_int_equal(pki_ca_create("test CA", 1, &ca_key, &ca), 0);
        assert_int_equal(pki_ca_create("another CA", 1, &other_key, &other), 0);
        assert_int_equal(pki_cert_issue(ca, ca_key, &req, &key, &cert), 0);
        l->ca_file = path_join(l->dir, "ca.crt");
        l->other_ca_file = path_join(l->dir, "other.crt");
        assert_int_equal(pki_write_pem(l->ca_file, NULL, ca, NULL), 0);
        assert_int_equal(pki_write_pem(l->other_ca_file, NULL, other, NULL), 0);
        assert_int_equal(pki_cert_to_pem(cert, &l->cert_pem), 0);
        assert_int_equal(pki_key_to_pem(key, &l->key_pem), 0);
        l->pin = pin_of(l->cert_pem);
        pki_cert_free(ca);
        pki_cert_free(other);
        pki_cert_free(cert);
        pki_key_free(ca_key);
        pki_key_free(other_key);
        pki_key_free(key);

        httpd_config c = {.listen = "127.0.0.1:0",
                          .cert_pem = l->cert_pem,
                          .key_pem = l->key_pem,
                          .timeout_s = 10,
                          .deadline_s = 10,
                          .max_pending = 8,
                          .per_peer_pending = 8,
                          .log_prefix = "test",
                          .handler = answer_ok};
        int port = 0;
        char *err = NULL;
        if (httpd_start(&c, &l->server, &port, &err) < 0)
                fail_msg("httpd_start: %s", err);
        l->url = xasprintf("https://127.0.0.1:%d/", port);
}

static void tls_lab_stop(tls_lab *l)
{
        httpd_stop(l->server);
        assert_int_equal(rm_rf(l->dir), 0);
        free(l->dir);
        free(l->ca_file);
        free(l->other_ca_file);
        free(l->cert_pem);
        free(l->key_pem);
        free(l->pin);
        free(l->url);
}

static void test_tls(void **state)
{
        (void)state;
        tls_lab l = {0};
        tls_lab_start(&l);
        long status = 0;

        /* Checked against the CA given, as a file or in memory. */
        assert_int_equal(get(&(http_opts){.tls.ca_file = l.ca_file}, l.url, &status), CURLE_OK);
        assert_int_equal(status, 200);
        char *ca_pem = NULL;
        size_t ca_len = 0;
        assert_int_equal(read_file(l.ca_file, 1 << 20, &ca_pem, &ca_len), 0);
        http_opts mem = {.tls = {.ca_pem = ca_pem, .ca_pem_len = ca_len}};
        assert_int_equal(get(&mem, l.url, NULL), CURLE_OK);
        free(ca_pem);
        /* Another CA, or the system's: refused. */
        assert_int_equal(get(&(http_opts){.tls.ca_file = l.other_ca_file}, l.url, NULL),
                         CURLE_PEER_FAILED_VERIFICATION);
        assert_int_equal(get(&(http_opts){0}, l.url, NULL), CURLE_PEER_FAILED_VERIFICATION);

        /* The server's key pinned: no CA needed; another key: refused. */
        assert_int_equal(get(&(http_opts){.tls.pinned_key = l.pin}, l.url, NULL), CURLE_OK);
        const char *wrong = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        assert_int_equal(get(&(http_opts){.tls.pinned_key = wrong}, l.url, NULL),
                         CURLE_SSL_PINNEDPUBKEYNOTMATCH);

        /* Asked for no check at all (a kubeconfig's insecure-skip-tls-verify). */
        assert_int_equal(get(&(http_opts){.tls.insecure = true}, l.url, NULL), CURLE_OK);
        tls_lab_stop(&l);
}

/* A GET whose TLS files are handed over parsed (http_creds_get): checked as the files would be. */
static CURLcode get_creds(const char *ca_file, const char *url)
{
        http_creds *cr = http_creds_get(&(http_tls){.ca_file = ca_file});
        assert_non_null(cr);
        CURL *h = http_handle_new(&(http_opts){0});
        assert_non_null(h);
        assert_int_equal(http_use_creds(h, cr), 0);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_body);
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        CURLcode cc = curl_easy_perform(h);
        curl_easy_cleanup(h);
        sb_release(&body);
        http_creds_unref(cr);
        return cc;
}

/*
 * TLS files parsed once (http_creds_get): the same files give the same
 * parsed set; a file replaced gives a new one, read from the new file; a
 * file that does not parse, none. Each connection checks the server
 * against the CA of the files it was given, whichever set was used before.
 */
static void test_tls_creds(void **state)
{
        (void)state;
        tls_lab l = {0};
        tls_lab_start(&l);
        _cleanup_free_ char *ca = path_join(l.dir, "memo-ca.crt");
        char *pem = NULL, *other_pem = NULL;
        size_t len = 0, other_len = 0;
        assert_int_equal(read_file(l.ca_file, 1 << 20, &pem, &len), 0);
        assert_int_equal(read_file(l.other_ca_file, 1 << 20, &other_pem, &other_len), 0);
        assert_int_equal(write_file_atomic(ca, pem, len, 0644), 0);

        http_creds *a = http_creds_get(&(http_tls){.ca_file = ca});
        http_creds *b = http_creds_get(&(http_tls){.ca_file = ca});
        assert_non_null(a);
        assert_ptr_equal(a, b); /* read once */
        http_creds_unref(b);
        assert_int_equal(get_creds(ca, l.url), CURLE_OK);
        /* another set in between does not stay in the next connection's checks */
        assert_int_equal(get_creds(l.other_ca_file, l.url), CURLE_PEER_FAILED_VERIFICATION);
        assert_int_equal(get_creds(ca, l.url), CURLE_OK);

        /* the file replaced by another CA: read again, and the server refused */
        assert_int_equal(write_file_atomic(ca, other_pem, other_len, 0644), 0);
        b = http_creds_get(&(http_tls){.ca_file = ca});
        assert_non_null(b);
        assert_ptr_not_equal(a, b);
        http_creds_unref(b);
        assert_int_equal(get_creds(ca, l.url), CURLE_PEER_FAILED_VERIFICATION);
        assert_int_equal(write_file_atomic(ca, pem, len, 0644), 0);
        assert_int_equal(get_creds(ca, l.url), CURLE_OK);
        http_creds_unref(a); /* the first set outlives its memo entry while referenced */

        /* not a certificate, not there, PEM in memory, or a pinned key: none */
        assert_int_equal(write_file_atomic(ca, "junk\n", 5, 0644), 0);
        assert_null(http_creds_get(&(http_tls){.ca_file = ca}));
        assert_null(http_creds_get(&(http_tls){.ca_file = "/nonexistent/ca.crt"}));
        assert_null(http_creds_get(&(http_tls){.ca_pem = pem, .ca_pem_len = len}));
        assert_null(http_creds_get(&(http_tls){.ca_file = l.ca_file, .pinned_key = l.pin}));
        free(pem);
        free(other_pem);
        tls_lab_stop(&l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_no_redirect_followed),
            cmocka_unit_test(test_protocols),
            cmocka_unit_test(test_user_agent),
            cmocka_unit_test(test_timeout),
            cmocka_unit_test(test_stall),
            cmocka_unit_test(test_proxy_policy),
            cmocka_unit_test(test_tls),
            cmocka_unit_test(test_tls_creds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
