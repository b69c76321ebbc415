/*
 * The libcurl handle builder (util/http.h). Every option is checked:
 * an option libcurl refuses (a build without the pinned-key check, say)
 * fails the set-up instead of leaving a handle that quietly checks less
 * than its caller asked for.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdatomic.h>
#include <stdio.h>

#include "util/filememo.h"
#include "util/http.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define DEFAULT_USER_AGENT "gitcd/" GITCD_VERSION

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
        /*
         * OpenSSL frees its global tables from an atexit handler unless told
         * not to: a command that exits while a thread of its own is still
         * in a TLS call (the snapshot's Status calls to members that have
         * not answered) would have that thread use freed tables.
         */
        (void)OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
        global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void set_blob(CURL *h, CURLoption opt, const char *data, size_t len, CURLcode *rc)
{
        struct curl_blob blob = {.data = (void *)data, .len = len, .flags = CURL_BLOB_COPY};
        if (*rc == CURLE_OK)
                *rc = curl_easy_setopt(h, opt, &blob);
}

#define SET(h, opt, value, rc)                                                                     \
        do {                                                                                       \
                if (*(rc) == CURLE_OK)                                                             \
                        *(rc) = curl_easy_setopt((h), (opt), (value));                             \
        } while (0)

static void setup_tls(CURL *h, const http_tls *t, CURLcode *rc)
{
        bool verify = !t->insecure && !t->pinned_key;
        SET(h, CURLOPT_SSL_VERIFYPEER, verify ? 1L : 0L, rc);
        SET(h, CURLOPT_SSL_VERIFYHOST, verify ? 2L : 0L, rc);
        if (t->pinned_key)
                SET(h, CURLOPT_PINNEDPUBLICKEY, t->pinned_key, rc);
        if (t->ca_pem)
                set_blob(h, CURLOPT_CAINFO_BLOB, t->ca_pem, t->ca_pem_len, rc);
        else if (t->ca_file)
                SET(h, CURLOPT_CAINFO, t->ca_file, rc);
        if (t->cert_pem) {
                SET(h, CURLOPT_SSLCERTTYPE, "PEM", rc);
                set_blob(h, CURLOPT_SSLCERT_BLOB, t->cert_pem, t->cert_pem_len, rc);
        } else if (t->cert_file) {
                SET(h, CURLOPT_SSLCERT, t->cert_file, rc);
        }
        if (t->key_pem) {
                SET(h, CURLOPT_SSLKEYTYPE, "PEM", rc);
                set_blob(h, CURLOPT_SSLKEY_BLOB, t->key_pem, t->key_pem_len, rc);
        } else if (t->key_file) {
                SET(h, CURLOPT_SSLKEY, t->key_file, rc);
        }
}

int http_setup(CURL *h, const http_opts *o)
{
        assert(h && o);
        assert(o->connect_timeout_ms >= 0 && o->timeout_ms >= 0);
        CURLcode rc = CURLE_OK;
        SET(h, CURLOPT_NOSIGNAL, 1L, &rc);
        SET(h, CURLOPT_PROTOCOLS_STR, o->https_only ? "https" : "http,https", &rc);
        SET(h, CURLOPT_FOLLOWLOCATION, 0L, &rc);
        /* "" turns the environment's proxy off; NULL is libcurl's default: the environment's. */
        SET(h, CURLOPT_PROXY, o->proxy == HTTP_PROXY_NONE ? "" : (const char *)NULL, &rc);
        SET(h, CURLOPT_TCP_NODELAY, 1L, &rc);
        SET(h, CURLOPT_TCP_KEEPALIVE, 1L, &rc);
        SET(h, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms, &rc);
        SET(h, CURLOPT_TIMEOUT_MS, o->timeout_ms, &rc);
        SET(h, CURLOPT_LOW_SPEED_LIMIT, o->stall_bytes_per_s, &rc);
        SET(h, CURLOPT_LOW_SPEED_TIME, o->stall_s, &rc);
        SET(h, CURLOPT_HTTP_VERSION, o->http_version, &rc);
        SET(h, CURLOPT_USERAGENT, o->user_agent ? o->user_agent : DEFAULT_USER_AGENT, &rc);
        SET(h, CURLOPT_ERRORBUFFER, o->errbuf, &rc);
        if (o->errbuf)
                o->errbuf[0] = '\0';
        setup_tls(h, &o->tls, &rc);
        if (rc != CURLE_OK) {
                log_debug("http: libcurl refused an option: %s", curl_easy_strerror(rc));
                return -EINVAL;
        }
        return 0;
}

int http_global_init(void)
{
        pthread_once(&global_once, global_init);
        return global_rc == CURLE_OK ? 0 : -EIO;
}

CURL *http_handle_new(const http_opts *o)
{
        if (http_global_init() < 0)
                return NULL;
        CURL *h = curl_easy_init();
        if (!h)
                return NULL;
        if (http_setup(h, o) < 0) {
                curl_easy_cleanup(h);
                return NULL;
        }
        return h;
}

/* ---- TLS files parsed once ------------------------------------------------ */

struct http_creds {
        atomic_int refs;
        STACK_OF(X509) * cas;   /* the CA file's certificates */
        X509 *cert;             /* NULL: no client certificate */
        STACK_OF(X509) * chain; /* the certificates after it in its file */
        EVP_PKEY *key;
};

static void *creds_ref(void *value)
{
        http_creds *c = value;
        atomic_fetch_add(&c->refs, 1);
        return c;
}

void http_creds_unref(http_creds *c)
{
        if (!c || atomic_fetch_sub(&c->refs, 1) > 1)
                return;
        sk_X509_pop_free(c->cas, X509_free);
        X509_free(c->cert);
        sk_X509_pop_free(c->chain, X509_free);
        EVP_PKEY_free(c->key);
        free(c);
}

static void creds_unref(void *value)
{
        http_creds_unref(value);
}

static filememo creds_memo = FILEMEMO_INIT(creds_ref, creds_unref);

/* Every certificate of a PEM file, in order; NULL when it has none or cannot be read. */
static STACK_OF(X509) * read_certs(const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        STACK_OF(X509) *v = sk_X509_new_null();
        X509 *x;
        while (v && (x = PEM_read_X509(f, NULL, NULL, NULL)))
                if (!sk_X509_push(v, x)) {
                        X509_free(x);
                        break;
                }
        fclose(f);
        ERR_clear_error(); /* the end of the file reads as an error */
        if (v && sk_X509_num(v) == 0) {
                sk_X509_free(v);
                v = NULL;
        }
        return v;
}

static EVP_PKEY *read_key(const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
        fclose(f);
        return k;
}

static http_creds *creds_read(const http_tls *t)
{
        http_creds *c = XNEW(http_creds);
        atomic_init(&c->refs, 1);
        c->cas = read_certs(t->ca_file);
        bool ok = c->cas != NULL;
        if (ok && t->cert_file) {
                c->chain = read_certs(t->cert_file);
                c->cert = c->chain ? sk_X509_shift(c->chain) : NULL;
                c->key = c->cert ? read_key(t->key_file ? t->key_file : t->cert_file) : NULL;
                ok = c->key != NULL;
        }
        ERR_clear_error();
        if (!ok) {
                http_creds_unref(c);
                return NULL;
        }
        return c;
}

http_creds *http_creds_get(const http_tls *t)
{
        if (!t->ca_file || t->ca_pem || t->cert_pem || t->key_pem || t->pinned_key || t->insecure ||
            (t->key_file && !t->cert_file))
                return NULL;
        _cleanup_free_ char *key =
            xasprintf("%s\n%s\n%s", t->ca_file, t->cert_file ? t->cert_file : "",
                      t->key_file ? t->key_file : "");
        const char *paths[] = {t->ca_file, t->cert_file ? t->cert_file : t->ca_file,
                               t->key_file ? t->key_file : t->ca_file};
        http_creds *c = NULL;
        if (filememo_get(&creds_memo, key, paths, ARRAY_SIZE(paths), (void **)&c))
                return c;
        file_id ids[ARRAY_SIZE(paths)];
        filememo_ids(paths, ARRAY_SIZE(paths), ids);
        c = creds_read(t);
        if (c)
                filememo_put(&creds_memo, key, ids, ARRAY_SIZE(paths), c);
        return c;
}

/* libcurl's last call before a connection's handshake: the parsed files go in. */
static CURLcode creds_to_ctx(CURL *h, void *ssl_ctx, void *userdata)
{
        (void)h;
        SSL_CTX *ctx = ssl_ctx;
        http_creds *c = userdata;
        /* into the connection's own store: certificates are shared, stores are not */
        X509_STORE *store = SSL_CTX_get_cert_store(ctx);
        for (int i = 0; i < sk_X509_num(c->cas); i++)
                if (X509_STORE_add_cert(store, sk_X509_value(c->cas, i)) != 1) {
                        ERR_clear_error();
                        return CURLE_SSL_CACERT_BADFILE;
                }
        if (c->cert && SSL_CTX_use_cert_and_key(ctx, c->cert, c->key, c->chain, 1) != 1) {
                ERR_clear_error();
                return CURLE_SSL_CERTPROBLEM;
        }
        return CURLE_OK;
}

int http_use_creds(CURL *h, http_creds *c)
{
        CURLcode rc = CURLE_OK;
        /* no file of libcurl's own, not even its default bundle: the store is c's */
        SET(h, CURLOPT_CAINFO, (const char *)NULL, &rc);
        SET(h, CURLOPT_CAPATH, (const char *)NULL, &rc);
        /* libcurl's cached store (one per file name, here none) would replace the CAs */
        SET(h, CURLOPT_CA_CACHE_TIMEOUT, 0L, &rc);
        SET(h, CURLOPT_SSL_CTX_FUNCTION, creds_to_ctx, &rc);
        SET(h, CURLOPT_SSL_CTX_DATA, c, &rc);
        if (rc != CURLE_OK) {
                log_debug("http: libcurl refused an option: %s", curl_easy_strerror(rc));
                return -EINVAL;
        }
        return 0;
}

const char *http_error_text(CURLcode cc, const char *errbuf)
{
        return errbuf && errbuf[0] ? errbuf : curl_easy_strerror(cc);
}
