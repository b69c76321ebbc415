/*
 * The one way gitcd sets up a libcurl handle: every HTTP client it has
 * (etcd's gRPC, the Kubernetes API, S3, the snapshot receiver's client,
 * webhooks and commit statuses, the targets' health GETs, the served
 * certificate probe) states what it needs in an http_opts and gets the
 * same safe defaults for everything else.
 *
 * Decisions, the same for every client:
 * - Redirects are never followed, and a handle speaks http and https only
 *   (or https only): a Location answered by a server gitcd sends a token,
 *   a signature or a snapshot to is not somewhere else it sends them.
 * - The proxy is a stated choice, never left to chance (http_proxy below).
 * - No signals (CURLOPT_NOSIGNAL: gitcd is threaded), TCP keep-alive on.
 * - TLS: the peer's certificate chain and name are checked unless the
 *   caller pins the server's key instead (a certificate of its own making,
 *   the snapshot receiver) or asks for no check at all (a kubeconfig's
 *   insecure-skip-tls-verify, or reading which certificate a server shows).
 * - User agent "gitcd/<version>" unless the caller names another.
 * - libcurl's global set-up is done once, before the first handle: by
 *   http_global_init(), which every program calls in main() before it
 *   starts a thread (curl_global_init also sets up OpenSSL and libssh2,
 *   whose own global set-ups are not safe beside another thread's use of
 *   them); http_handle_new() calls it too, for a program that did not.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

/*
 * Whether a request may go through a proxy. The rule: endpoints gitcd
 * reaches directly, inside what it runs, never do: etcd members (gRPC,
 * health, the certificate a member serves), the snapshot receiver Pod, a
 * Kubernetes API server. Services outside do as the environment says:
 * S3 snapshot destinations, webhooks and forges' commit status APIs
 * (docs/operating.md, "Proxies").
 */
typedef enum http_proxy {
        HTTP_PROXY_NONE = 0, /* never, whatever the environment says */
        HTTP_PROXY_ENV,      /* libcurl's reading of http_proxy, https_proxy, all_proxy, no_proxy */
} http_proxy;

typedef struct http_tls {
        /* The CAs to trust (a file, or PEM in memory); neither: the system's. */
        const char *ca_file;
        const char *ca_pem;
        size_t ca_pem_len;
        /* A client certificate and key (files, or PEM in memory); NULL: none. */
        const char *cert_file;
        const char *cert_pem;
        size_t cert_pem_len;
        const char *key_file;
        const char *key_pem;
        size_t key_pem_len;
        /* "sha256//BASE64": the server's key, checked instead of a chain and a name. */
        const char *pinned_key;
        /* Check nothing about the server (its certificate is read, not trusted). */
        bool insecure;
} http_tls;

typedef struct http_opts {
        http_proxy proxy;
        bool https_only;         /* refuse http:// */
        long connect_timeout_ms; /* TCP and TLS handshake; 0: libcurl's (300 s) */
        long timeout_ms;         /* the whole transfer; 0: none */
        /* A transfer slower than stall_bytes_per_s for stall_s seconds is cut; 0: never. */
        long stall_bytes_per_s;
        long stall_s;
        long http_version;      /* CURL_HTTP_VERSION_*; 0: libcurl's (HTTP/2 over TLS) */
        const char *user_agent; /* NULL: "gitcd/<version>" */
        char *errbuf;           /* CURL_ERROR_SIZE bytes for libcurl's words; NULL: none */
        http_tls tls;
} http_opts;

/*
 * Apply o to h: a new handle, one after curl_easy_reset(), or one set up
 * again for its next call with the same TLS settings (etcd's gRPC sets
 * each call's deadlines this way; TLS files are set only when given, so a
 * handle reused with other ones must be reset first). 0, or -EINVAL when
 * libcurl refuses an option (a libcurl built without what it needs).
 */
int http_setup(CURL *h, const http_opts *o);

/*
 * libcurl's global set-up (and through it OpenSSL's and libssh2's), once
 * per process; later calls return the first one's result. 0, or -EIO when
 * libcurl could not set itself up.
 */
int http_global_init(void);

/* A new handle set up with o; NULL when out of memory or http_setup failed. */
CURL *http_handle_new(const http_opts *o);

/*
 * TLS files parsed once: the store of a CA file, a client certificate (with
 * the chain after it in its file) and its key, kept while the files stay as
 * they were (util/filememo.h) and handed to each new connection's SSL_CTX,
 * instead of libcurl reading and parsing the three files again for every
 * connection. For a handle that opens a connection per request to many
 * servers (etcd/health.c: each member's /health, each pass). Each
 * connection still verifies the server's chain and name in full.
 */
typedef struct http_creds http_creds;

/*
 * t's files, parsed (a reference for the caller): NULL when t names no CA
 * file, gives PEM in memory, or a file does not parse (libcurl then reads
 * the files and says what is wrong with them).
 */
http_creds *http_creds_get(const http_tls *t);
void http_creds_unref(http_creds *c);
/*
 * h's next connections use c (the caller keeps its reference until h's
 * transfers are over): after http_setup() with a tls that names no files.
 * 0, or -EINVAL when libcurl cannot hand over an SSL_CTX (not OpenSSL).
 */
int http_use_creds(CURL *h, http_creds *c);

/* What went wrong with a transfer, for a message: libcurl's words, else the code's. */
const char *http_error_text(CURLcode cc, const char *errbuf);
