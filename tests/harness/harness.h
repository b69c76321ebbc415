/*
 * Test harness: real etcd clusters on loopback for integration and e2e
 * tests. Starts N members of a given etcd version (3.4.23 or 3.5.16 from
 * the cache laid out by scripts/setup: $GITCD_ETCD_DIR or
 * ~/.cache/gitcd/etcd/<version>/etcd), plain or with TLS (a CA, server,
 * peer and client certificates generated with OpenSSL for each run, via
 * the library's pki/ module), on free 127.0.0.1 ports, and waits for health.
 *
 * Every process started is registered for teardown: harness_cluster_free()
 * kills and reaps them, and an atexit handler plus SIGINT/SIGTERM/SIGABRT
 * handlers kill whatever is left, so a failing or interrupted test leaves no
 * etcd behind. Members run in their own process group.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct harness_tls {
        char *dir;         /* folder holding the files below */
        char *ca_cert;     /* ca.crt */
        char *ca_key;      /* ca.key */
        char *server_cert; /* server.crt: SANs 127.0.0.1, localhost */
        char *server_key;
        char *peer_cert; /* peer.crt */
        char *peer_key;
        char *client_cert; /* client.crt: CN=root (usable as etcd's root user) */
        char *client_key;
} harness_tls;

typedef struct harness_member {
        char *name; /* "m0", "m1", ... */
        int client_port;
        int peer_port;
        char *client_url; /* http(s)://127.0.0.1:port */
        char *peer_url;
        char *data_dir;
        char *log_path;
        pid_t pid; /* 0 when stopped */
} harness_member;

typedef struct harness_opts {
        const char *version;         /* "3.5.16" (default) or "3.4.23" */
        size_t members;              /* default 1 */
        bool tls;                    /* client and peer TLS */
        bool client_cert_auth;       /* require client certificates (mTLS) */
        int start_timeout_ms;        /* default 20000 */
        int64_t quota_backend_bytes; /* --quota-backend-bytes; 0: etcd's default */
        const char *extra_arg;       /* one more "--flag=value" for every member; NULL: none */
} harness_opts;

typedef struct harness_cluster {
        char *version;
        char *etcd_bin;    /* the etcd binary used */
        char *etcdctl_bin; /* etcdctl of the same version */
        char *etcdutl_bin; /* etcdutl (3.5+), or NULL */
        char *root_dir;    /* temporary folder for everything; removed on free */
        harness_tls *tls;  /* NULL without TLS */
        harness_member *members;
        size_t n;
        char *endpoints; /* comma-separated client URLs of all members */
} harness_cluster;

/* Absolute path of the etcd binary for a version; NULL when not installed. */
/*
 * A path under the cache scripts/setup fills: $GITCD_CACHE_DIR/rel, else
 * $XDG_CACHE_HOME/gitcd/rel, else ~/.cache/gitcd/rel. Newly allocated; NULL
 * when there is no home folder.
 */
char *harness_cache_path(const char *rel);
char *harness_etcd_path(const char *version, const char *binary);
/* True when that version is installed; tests skip cleanly when not. */
bool harness_have_etcd(const char *version);
/*
 * The folder of etcd binaries by version: $GITCD_ETCD_DIR, else the cache's
 * etcd/ (scripts/setup fills it: bookworm's 3.4, trixie's 3.5.16 and the
 * newest etcd Debian sid ships). Newly allocated; NULL without a home.
 */
char *harness_etcd_dir(void);
/*
 * The newest installed etcd whose version starts with `series` ("3.5" for
 * the newest 3.5 patch; NULL or "" for any), as "3.5.30"; NULL when none.
 * What sid ships is not known in advance: upgrade tests ask for it here.
 */
char *harness_etcd_newest(const char *series);

/* A free TCP port on 127.0.0.1 (not reused within this process). */
int harness_free_port(void);

/* Start a cluster and wait until every member answers /health. 0 or -errno. */
int harness_cluster_start(const harness_opts *opts, harness_cluster **ret);
void harness_cluster_free(harness_cluster *c); /* kills, reaps, removes files */

int harness_member_stop(harness_cluster *c, size_t i);    /* SIGTERM, wait */
int harness_member_kill(harness_cluster *c, size_t i);    /* SIGKILL, reap */
int harness_member_restart(harness_cluster *c, size_t i); /* start again with its data */
int harness_member_wipe(harness_cluster *c, size_t i);    /* remove its data dir (stopped) */
/* Wait until member i answers /health (or timeout_ms passes). 0 or -ETIMEDOUT. */
int harness_member_wait_healthy(harness_cluster *c, size_t i, int timeout_ms);
/*
 * How many calls of a gRPC method ("MemberList", "Alarm", "Status", ...) member
 * i has answered, with any code, from its /metrics (grpc_server_handled_total);
 * -1 when /metrics could not be read. Plain http members only.
 */
long harness_grpc_handled(harness_cluster *c, size_t i, const char *method);

/*
 * Start an extra etcd process joining an existing cluster (after a
 * MemberAdd done by the test): name, peer/client ports chosen here, with
 * --initial-cluster given by the caller and --initial-cluster-state=existing.
 * Appends to c->members and returns its index.
 */
int harness_member_start_joining(harness_cluster *c, const char *name, int peer_port,
                                 int client_port, const char *initial_cluster, size_t *ret_index);

/*
 * Register / forget a process the test started some other way, so the
 * teardown handlers kill it too.
 */
void harness_track_pid(pid_t pid);
void harness_untrack_pid(pid_t pid);

/* A fresh temporary directory under $TMPDIR, removed at exit. */
char *harness_tmpdir(const char *prefix);

/*
 * Stop every running member gracefully: SIGTERM to all followers at once,
 * then to the leader (found through /metrics), each waited for up to 10 s
 * (SIGKILL after that). Stopping a leader while its peers shut down makes
 * etcd wait 7 s for a leadership transfer; this order avoids it. 0 or -errno.
 */
int harness_cluster_stop(harness_cluster *c);
