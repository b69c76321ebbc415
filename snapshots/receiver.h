/*
 * `gitcd snapshot receive`: the server side of a delivery into a volume
 * gitcd cannot write itself (a Kubernetes PersistentVolumeClaim), run in a
 * short-lived Pod that mounts it; and the client gitcd sends with.
 *
 * The protocol (HTTPS only, every request but /healthz with the bearer
 * token, compared in constant time):
 *
 *   GET  /healthz        200 "ok": the readiness probe (no token, says nothing)
 *   GET  /state          200 {"hasData":BOOL}: whether the data directory
 *                        already holds etcd data (a write-ahead log)
 *   PUT  /files/KEY      one file of the new data directory, with
 *                        Content-Length (no chunked bodies) and
 *                        X-Gitcd-Sha256 (64 hex digits); KEY is a plain
 *                        relative path (snapshot_dest_key_valid: no "..",
 *                        no component starting with ".", no control
 *                        characters). Written to a hidden temporary in
 *                        the staging folder, checked for size and
 *                        SHA-256, fsynced and renamed. 201 {"sha256":HEX}
 *                        of what was written.
 *   POST /commit         the staging folder becomes the data directory
 *                        (one rename, then an fsync of the folder): 200.
 *                        409 when the data directory holds etcd data.
 *
 * The staging folder is <data dir>.receive beside the data directory (the
 * same volume, so the rename is atomic), made with the first file; it is
 * removed when the receiver starts and when it stops without a commit, so
 * a delivery cut short leaves nothing that is used. Refusals:
 * 401 (token), 400 (a bad key or header), 411 (no Content-Length), 413
 * (more than max_bytes in all), 422 (the SHA-256 or size does not match:
 * nothing of that file is kept), 409 (after the commit, nothing more is
 * taken).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define RECEIVER_HEADER_SHA256 "X-Gitcd-Sha256"

typedef struct receiver receiver;

typedef struct receiver_opts {
        const char *data_dir;  /* etcd's data directory to create (absolute) */
        const char *listen;    /* "host:port", "[v6]:port" or ":port" */
        const char *cert_file; /* PEM certificate and key: HTTPS (required) */
        const char *key_file;
        const char *token_file; /* the bearer token (required) */
        int64_t max_bytes;      /* the most bytes taken in all; 0: no limit */
} receiver_opts;

/* Start serving on a thread of libmicrohttpd's. ret_err: why not (no secret in it). */
int receiver_start(const receiver_opts *o, receiver **ret, char **ret_err);
int receiver_port(const receiver *r);
/* Stop serving; receiver_stop(NULL) is a no-op. */
void receiver_stop(receiver *r);

/*
 * The checks of a PUT made before a byte of it is read, on what the request
 * says: key (the path after /files/, as libmicrohttpd unescaped it), the
 * Content-Length, Transfer-Encoding and X-Gitcd-Sha256 headers (NULL when
 * absent), and room, the bytes the receiver still takes (negative: no
 * limit). 0 with *ret_size when the upload may go ahead; otherwise the HTTP
 * status refusing it, with *ret_why (static text).
 */
unsigned receiver_check_put(const char *key, const char *content_length,
                            const char *transfer_encoding, const char *sha256, int64_t room,
                            int64_t *ret_size, const char **ret_why);

/* How gitcd reaches one receiver. */
typedef struct receiver_peer {
        const char *url; /* "https://ADDRESS:PORT" */
        const char *token;
        const char *pin; /* "sha256//BASE64" of its public key (receiver_pin_of_cert) */
        int timeout_s;   /* per request without progress; 0: 60 */
} receiver_peer;

/*
 * Send every file under src_dir (a restored data directory) and commit it.
 * -EEXIST (nothing sent) when the receiver's data directory holds etcd data
 * already; other -errno with ret_error naming the file and the answer.
 */
int receiver_deliver(const receiver_peer *peer, const char *src_dir, char **ret_error);

/* The curl pin ("sha256//BASE64") of a PEM certificate's public key. */
int receiver_pin_of_cert(const char *cert_pem, char **ret_pin);

/* What one receiver is started with, made afresh for each (receiver_secret_new). */
typedef struct receiver_secret {
        char *cert_pem; /* tls.crt: issued by a throw-away CA, for a day */
        char *key_pem;  /* tls.key */
        char *token;    /* token: 64 hex digits from the system's random source */
        char *pin;      /* what the client pins: receiver_pin_of_cert(cert_pem) */
} receiver_secret;

int receiver_secret_new(receiver_secret *ret);
/* Wipes the key and the token; receiver_secret_release on zeroes is a no-op. */
void receiver_secret_release(receiver_secret *s);
