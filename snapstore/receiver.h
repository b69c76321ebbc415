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
 * Store mode (--store-dir, receiver_opts.store_dir): the receiver keeps
 * snapshot files in a folder of a volume (the snapshot destination in a
 * PersistentVolumeClaim, snapstore/dest-pvc.c). KEY is checked as above,
 * every folder on the way is opened with O_NOFOLLOW, and there is no
 * staging folder, /state or /commit:
 *
 *   PUT    /files/KEY    as above, but the file is renamed to KEY in the
 *                        store folder itself (hidden temporary ".NAME.part",
 *                        size and SHA-256 checked, fsync, rename, fsync of
 *                        the folder), replacing it; the SHA-256 is also
 *                        kept in the user.gitcd.sha256 attribute where the
 *                        file system takes one. 201 {"sha256":HEX}.
 *   HEAD   /files/KEY    200 with Content-Length, X-Gitcd-Sha256 (of the
 *                        bytes on the volume, computed for the answer) and
 *                        X-Gitcd-Mtime-Ms; 404 when absent.
 *   GET    /files/KEY    the same headers and the bytes.
 *   DELETE /files/KEY    removes that one file (never a folder) and fsyncs
 *                        its folder: 200; 404 when absent. Nothing lists.
 *
 * The staging folder is <data dir>.receive beside the data directory (the
 * same volume, so the rename is atomic), made with the first file; it is
 * removed when the receiver starts and when it stops without a commit, so
 * a delivery cut short leaves nothing that is used. Connections: one that
 * has not shown the token within 15 s of its accept, or sends nothing for
 * 10 s, is closed; one client address holds at most 4 such connections
 * and all of them together 32 (the oldest is closed for a new one), and
 * at most 16 connections in all; once a request carried the token, its
 * connection may stay silent 120 s. Refusals:
 * 401 (token), 400 (a bad key or header), 411 (no Content-Length), 413
 * (more than max_bytes in all), 422 (the SHA-256 or size does not match:
 * nothing of that file is kept), 409 (after the commit, nothing more is
 * taken).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define RECEIVER_HEADER_SHA256 "X-Gitcd-Sha256"
#define RECEIVER_HEADER_MTIME  "X-Gitcd-Mtime-Ms"

typedef struct receiver receiver;

typedef struct receiver_opts {
        const char *data_dir;  /* etcd's data directory to create (absolute) */
        const char *store_dir; /* instead of data_dir: store mode's folder (absolute) */
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

/*
 * The checks of a HEAD, GET or DELETE of /files/KEY in store mode, before
 * anything on the volume is opened: 0 when the request may go ahead,
 * otherwise the HTTP status refusing it (400 for a bad key, 405 for another
 * method) with *ret_why (static text).
 */
unsigned receiver_check_key(const char *method, const char *key, const char **ret_why);

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

/*
 * The client of store mode. Keys are checked with snapshot_dest_key_valid
 * by the caller (the destination seam). Every call returns 0 or -errno with
 * ret_error (no secret in it).
 *
 * receiver_put: send the file at path as key; sha256_hex (NULL: computed
 * here) must be the file's, and the receiver's answer must name the same
 * hash (-EBADMSG otherwise). -EFBIG when the receiver takes no more bytes.
 * receiver_stat: HEAD; -ENOENT when absent. ret_sha256 is the hash of the
 * bytes on the volume.
 * receiver_fetch: GET into fd (a new, empty file) and check that the bytes
 * received have the size and SHA-256 the receiver announced (-EBADMSG
 * otherwise); the caller makes the file durable. -ENOENT when absent.
 * receiver_remove: DELETE; -ENOENT when absent.
 */
int receiver_put(const receiver_peer *peer, const char *key, const char *path,
                 const char *sha256_hex, char **ret_error);
int receiver_stat(const receiver_peer *peer, const char *key, int64_t *ret_size,
                  int64_t *ret_mtime_ms, char ret_sha256[65], char **ret_error);
int receiver_fetch(const receiver_peer *peer, const char *key, int fd, char **ret_error);
int receiver_remove(const receiver_peer *peer, const char *key, char **ret_error);

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
