/*
 * A minimal gRPC client transport over libcurl's HTTP/2: unary and
 * server-streaming calls to one endpoint, framing (1-byte compressed flag,
 * 4-byte big-endian length), deadlines, TLS/mTLS, and the grpc-status /
 * grpc-message of the reply (from trailers, or from headers for a
 * "trailers-only" reply). Messages are opaque bytes here; protobuf encoding
 * is the client's business (etcd/client.c).
 *
 * One grpc_conn wraps one CURL easy handle and the multi handle that drives
 * it, for one endpoint, and is reused for every call to it, so the TCP/TLS
 * connection and its HTTP/2 session stay open between calls. A grpc_conn is
 * not thread-safe: one call at a time; the process's connections are shared
 * between its etcd clients, one call at a time each, by etcd/pool.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct grpc_conn grpc_conn;

typedef struct grpc_tls_opts {
        const char *cacert; /* PEM CA bundle; NULL = system store */
        const char *cert;   /* client certificate (mTLS), PEM */
        const char *key;    /* client key, PEM */
} grpc_tls_opts;

/*
 * Called for each complete response message, in order. Return 0 to go on,
 * a negative code to abort the call (grpc_call then returns that code).
 */
typedef int (*grpc_msg_fn)(const uint8_t *msg, size_t len, void *userdata);

typedef struct grpc_call_opts {
        const char *token;          /* etcd auth token, sent as "token" metadata; NULL = none */
        int64_t timeout_ms;         /* whole call, also sent as grpc-timeout */
        int64_t connect_timeout_ms; /* TCP + TLS handshake */
        size_t max_message;         /* largest accepted response message */
} grpc_call_opts;

typedef struct grpc_result {
        int grpc_status;    /* -1 when the server sent none */
        char *grpc_message; /* grpc-message, percent-decoded and escaped; or NULL */
        char *detail;       /* for transport failures: what went wrong, for a person */
        bool failover_ok;   /* nothing reached the server's handler: another endpoint may try */
        bool no_connection; /* the TCP connection could not be made at all */
        uint64_t bytes_in;  /* response body bytes received */
} grpc_result;

/* url: "http://host:port" (HTTP/2 prior knowledge) or "https://host:port" (ALPN). */
int grpc_conn_new(const char *url, const grpc_tls_opts *tls, grpc_conn **ret_conn);
void grpc_conn_free(grpc_conn *conn);
const char *grpc_conn_url(const grpc_conn *conn);
/*
 * How many times a call on conn waited on the socket until a timer ran out
 * while libcurl already held part of the answer (see etcd/grpc.c, drive):
 * time lost to a timer. 0 when the transport works as designed; tests and
 * benchmarks read it.
 */
uint64_t grpc_conn_timer_wakeups(const grpc_conn *conn);
/* How many TCP connections calls of this process have opened (every grpc_conn, ever). */
uint64_t grpc_connections_opened(void);

/*
 * A plain HTTP GET of path ("/health") on conn's connection, multiplexed
 * beside its gRPC calls: an https:// member serves its HTTP endpoints and
 * gRPC on one port and tells them apart by content type (etcd's
 * grpcHandlerFunc), so the kept TLS connection answers both and no new
 * handshake is made. (A plain http:// member hands every HTTP/2 stream to
 * its gRPC server: -EPROTONOSUPPORT.) The body, at most max bytes, in
 * *ret_body and the HTTP status in *ret_status; 0, or -EIO with a sentence
 * in *ret_error when nothing was answered (the connection is then not to
 * be kept).
 */
int grpc_conn_get(grpc_conn *conn, const char *path, long timeout_ms, size_t max, char **ret_body,
                  size_t *ret_len, long *ret_status, char **ret_error);

/*
 * Call `path` ("/etcdserverpb.Cluster/MemberList") with one request message.
 * Returns 0 when the server answered with grpc-status 0; otherwise a
 * negative etcd_err (etcd/errors.h): the mapped gRPC status, or a transport
 * error (ETCD_ERR_UNREACHABLE, ETCD_ERR_TIMEOUT, ETCD_ERR_TLS, ...), or
 * the code on_msg returned. `res` is always filled; release it with
 * grpc_result_release().
 */
int grpc_call(grpc_conn *conn, const char *path, const uint8_t *req, size_t req_len,
              const grpc_call_opts *opts, grpc_msg_fn on_msg, void *userdata, grpc_result *res);
void grpc_result_release(grpc_result *res);

/*
 * The response framing parser, usable on its own (tests, fuzzing): bytes go
 * in in any split, complete messages come out through on_msg. Pure: no I/O.
 */
typedef struct grpc_frames {
        uint8_t prefix[5]; /* compressed flag + 4-byte big-endian length */
        size_t prefix_len;
        bool in_message; /* prefix read, collecting the message */
        uint8_t *msg;
        size_t msg_len;
        size_t msg_have;
        size_t msg_alloc;
        size_t max_message;
} grpc_frames;

void grpc_frames_init(grpc_frames *f, size_t max_message);
void grpc_frames_release(grpc_frames *f);
/*
 * 0, or ETCD_ERR_PROTOCOL for a compressed message (never requested),
 * ETCD_ERR_RESOURCE_EXHAUSTED for a message over max_message, or the
 * negative code on_msg returned. The parser must not be fed after an error.
 */
int grpc_frames_feed(grpc_frames *f, const uint8_t *data, size_t len, grpc_msg_fn on_msg,
                     void *userdata);
/* True when the bytes so far end inside a frame (a truncated reply). */
bool grpc_frames_partial(const grpc_frames *f);

/* Percent-decode a grpc-message value (newly allocated). */
char *grpc_percent_decode(const char *s);
