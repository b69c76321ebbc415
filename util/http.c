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

#include "util/http.h"
#include "util/log.h"

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

const char *http_error_text(CURLcode cc, const char *errbuf)
{
        return errbuf && errbuf[0] ? errbuf : curl_easy_strerror(cc);
}
