/*
 * The process's etcd connections, shared by all of its etcd clients
 * (etcd/client.c) and by the /health GET of https:// members (etcd/health.c,
 * grpc_conn_get): a connection is opened on a call's demand, handed back
 * after the call, reused by the next call of any client of the process to
 * the same endpoint with the same TLS identity, and closed once it has been
 * idle for etcd_pool_idle_ms() (shorter for plain http:// than for TLS).
 *
 * A connection (a grpc_conn: a libcurl handle and its HTTP/2 session) is
 * used by one call at a time: etcd_pool_take() hands it out, etcd_pool_give()
 * takes it back. Calls to one endpoint at the same moment (two threads) each
 * get a connection of their own; the spare one is closed when it has been
 * idle long enough. Thread-safe: one lock, held only to look a connection up
 * or hand it back, never during a call.
 *
 * Sharing is keyed by the endpoint URL and the TLS identity: the paths of
 * the CA bundle, the client certificate and its key, and each file's
 * identity on disk (device, inode, size, modification time), so that two
 * clusters with different certificates or CAs never share a connection, and
 * a certificate or CA replaced in place is used by the next connection
 * rather than hidden behind one opened with the old files. Auth tokens are
 * per call (gRPC metadata), never part of a connection.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/grpc.h"

/*
 * The default idle times after which a connection nobody uses is closed,
 * chosen against the daemon's observe interval (30 s, jittered up to 20%)
 * from bench-many's figures (docs/performance.md): both are kept from one
 * pass of an idle cluster to the next. Opening a TLS connection again costs
 * about 1.8 ms of CPU (the handshake), a plain one about 0.13 ms and a
 * round of packets more each pass; 400 clusters keeping theirs used no more
 * resident memory than 400 opening theirs each pass (glibc keeps what a
 * short-lived connection used), and 12% less CPU.
 */
#define ETCD_POOL_IDLE_MS_PLAIN (45 * 1000)
#define ETCD_POOL_IDLE_MS_TLS   (45 * 1000)

typedef struct etcd_pool_conn etcd_pool_conn;

/*
 * A connection to url (as the client normalized it) with the TLS identity
 * tls (NULL: none): an idle one of the process's, else a new one, which
 * connects on its first call. -EINVAL for a URL that is not http:// or
 * https://.
 */
int etcd_pool_take(const char *url, const grpc_tls_opts *tls, etcd_pool_conn **ret_conn);
grpc_conn *etcd_pool_conn_grpc(etcd_pool_conn *pc);
/*
 * Hand a connection back after a call. keep false (the call ended without a
 * gRPC answer: the connection may be broken or mid-stream) closes it at
 * once. NULL is a no-op.
 */
void etcd_pool_give(etcd_pool_conn *pc, bool keep);

/* Close the connections idle for longer than the idle time; how many were closed. */
size_t etcd_pool_sweep(void);
/* Close every idle connection (tests; a process about to exit). */
size_t etcd_pool_close_idle(void);
/*
 * Close the idle connections to one endpoint, whatever their TLS identity
 * (before its member is stopped: etcd's graceful stop waits for each open
 * HTTP/2 connection); how many were closed.
 */
size_t etcd_pool_close_url(const char *url);

/* The idle time of a connection to an https:// (tls) or http:// endpoint. */
int64_t etcd_pool_idle_ms(bool tls);
/* Change both idle times (ms > 0; 0 restores the defaults) for the whole process: tests. */
void etcd_pool_set_idle_ms(int64_t ms);

typedef struct etcd_pool_stats {
        uint64_t opened;      /* TCP connections the process's etcd calls opened, ever */
        uint64_t closed_idle; /* connections closed by the pool after their idle time */
        size_t open;          /* connections that exist now: in a call or idle */
        size_t idle;          /* of those, the idle ones kept for the next call */
} etcd_pool_stats;

void etcd_pool_stats_get(etcd_pool_stats *ret_stats);
