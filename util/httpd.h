/*
 * Starting one of gitcd's HTTP servers on libmicrohttpd: the daemon's
 * endpoints (ops/http.h) and the snapshot receiver (snapstore/receiver.h).
 * What they share lives here once: the listen address's forms, reading a
 * certificate, key or token file, the daemon's options (own polling
 * thread, IPv6 when the address is one, TLS from memory, libmicrohttpd's
 * messages into gitcd's log at debug level), the guard that keeps idle and
 * slow connections from filling the server (httpd_config) and the one
 * error message for an address that cannot be served. What each serves
 * stays with it.
 */
#pragma once

#include <stdbool.h>

#include <microhttpd.h>

struct addrinfo;

/* libmicrohttpd's unescaper (MHD_OPTION_UNESCAPE_CALLBACK), which it names no type for. */
typedef size_t (*httpd_unescape_fn)(void *cls, struct MHD_Connection *conn, char *s);

typedef struct httpd httpd;

/*
 * Who may hold a connection. A connection is "pending" from its accept
 * until a request on it was found authorized (the handler calls
 * httpd_trust(); the first call of the access handler has the request
 * line and every header, before any body): a pending connection holds a
 * slot without having shown the token, so pending connections are
 * bounded, per client address and in all, and each has a deadline. When
 * a new connection comes in, every pending one past its deadline is
 * closed, then the oldest pending connection of its client address if
 * that address holds more than per_peer_pending, then the oldest pending
 * one of the address holding the most when more than max_pending are
 * pending in all: idle or slow connections can make room for a client
 * with the token, never keep it out. Trusted connections are bounded by
 * connection_limit and their own idle timeout.
 */
typedef struct httpd_config {
        const char *listen;   /* "host:port", "[v6]:port" or ":port" (every address) */
        const char *cert_pem; /* with key_pem: serve https; NULL: plain http */
        const char *key_pem;
        unsigned timeout_s;         /* idle timeout of a pending connection */
        unsigned trusted_timeout_s; /* idle timeout once trusted; 0: timeout_s */
        unsigned deadline_s;        /* a pending connection is closed this long after its
                                      * accept, when another one comes in */
        unsigned max_pending;       /* pending connections in all */
        unsigned per_peer_pending;  /* pending connections of one client address */
        unsigned per_ip_limit;      /* libmicrohttpd's hard limit per client address; 0: none */
        unsigned connection_limit;  /* every connection (hard); 0: max_pending + 16 */
        const char *log_prefix;     /* "http", "receiver": prefix of logged messages */
        MHD_AccessHandlerCallback handler;
        void *handler_cls;
        MHD_RequestCompletedCallback completed; /* optional */
        void *completed_cls;
        httpd_unescape_fn unescape; /* optional */
} httpd_config;

/* What the guard did so far (tests, benchmarks). */
typedef struct httpd_stats {
        unsigned long accepted; /* connections accepted */
        unsigned long evicted;  /* pending ones closed to make room for a newer one */
        unsigned long expired;  /* pending ones closed past their deadline */
        unsigned long trusted;  /* connections that made an authorized request */
} httpd_stats;

/*
 * A listen address, "host:port", "[v6]:port" or ":port" (every address),
 * for bind(); -EINVAL when it is none of them. Free with freeaddrinfo().
 */
int httpd_parse_listen(const char *listen, struct addrinfo **ret);

/*
 * Read a file of at most 1 MiB that a server is configured with (what:
 * "TLS certificate", "TLS key", "token file"). 0, or -errno with ret_err
 * naming the file (newly allocated).
 */
int httpd_read_file(const char *path, const char *what, char **ret, char **ret_err);
/*
 * The same for a file holding a secret ("TLS key"): it must be gitcd's own
 * (read_secret_file, util/fs.h); -EPERM with the chmod or chown to run.
 */
int httpd_read_secret(const char *path, const char *what, char **ret, char **ret_err);
/*
 * Read a bearer token: the file's first line, which must not be empty;
 * the file is checked as httpd_read_secret() does. 0, or -errno / -EINVAL
 * / -EPERM with ret_err (no secret in it).
 */
int httpd_read_token(const char *path, char **ret, char **ret_err);

/*
 * Start serving c->listen on a thread of libmicrohttpd's (epoll, so
 * descriptors past FD_SETSIZE are served too). -EINVAL for an address
 * that is not one of the forms above, -EADDRNOTAVAIL when it cannot be
 * served (in use, not local, or a certificate and key that do not load);
 * ret_err says which. The strings of c must outlive the server.
 * ret_port: the port bound (useful with port 0).
 */
int httpd_start(const httpd_config *c, httpd **ret, int *ret_port, char **ret_err);
/* Stop serving (waits for the server's thread); httpd_stop(NULL) is a no-op. */
void httpd_stop(httpd *h);
/*
 * From the access handler: the request on conn is authorized, so its
 * connection is no longer pending (no deadline, the trusted idle timeout).
 */
void httpd_trust(struct MHD_Connection *conn);

/*
 * Queue body (newly allocated, taken; freed even on failure) as the answer
 * to conn with status and Content-Type type; a 401 also names the scheme
 * (WWW-Authenticate: Bearer realm="gitcd"). libmicrohttpd's result.
 */
enum MHD_Result httpd_reply(struct MHD_Connection *conn, unsigned status, const char *type,
                            char *body);
/*
 * Whether the request on conn carries "Authorization: Bearer <token>",
 * compared in constant time.
 */
bool httpd_bearer_ok(struct MHD_Connection *conn, const char *token);
void httpd_get_stats(const httpd *h, httpd_stats *ret);
