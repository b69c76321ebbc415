/*
 * Starting one of gitcd's HTTP servers on libmicrohttpd: the daemon's
 * endpoints (ops/http.h) and the snapshot receiver (snapshots/receiver.h).
 * What they share lives here once: the listen address's forms, reading a
 * certificate, key or token file, the daemon's options (own polling
 * thread, IPv6 when the address is one, TLS from memory, libmicrohttpd's
 * messages into gitcd's log at debug level) and the one error message for
 * an address that cannot be served. What each serves stays with it.
 */
#pragma once

#include <microhttpd.h>

struct addrinfo;

/* libmicrohttpd's unescaper (MHD_OPTION_UNESCAPE_CALLBACK), which it names no type for. */
typedef size_t (*httpd_unescape_fn)(void *cls, struct MHD_Connection *conn, char *s);

typedef struct httpd_config {
        const char *listen;   /* "host:port", "[v6]:port" or ":port" (every address) */
        const char *cert_pem; /* with key_pem: serve https; NULL: plain http */
        const char *key_pem;
        unsigned timeout_s;        /* idle connection timeout */
        unsigned connection_limit; /* 0: libmicrohttpd's own */
        const char *log_prefix;    /* "http", "receiver": prefix of logged messages */
        MHD_AccessHandlerCallback handler;
        void *handler_cls;
        MHD_RequestCompletedCallback completed; /* optional */
        void *completed_cls;
        httpd_unescape_fn unescape; /* optional */
} httpd_config;

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
 * Start serving c->listen. -EINVAL for an address that is not one of the
 * forms above, -EADDRNOTAVAIL when it cannot be served (in use, not local,
 * or a certificate and key that do not load); ret_err says which. The
 * strings of c must outlive the daemon. ret_port: the port bound (useful
 * with port 0).
 */
int httpd_start(const httpd_config *c, struct MHD_Daemon **ret, int *ret_port, char **ret_err);
