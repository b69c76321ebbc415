/*
 * A real S3-compatible server on loopback for the snapshot tests: s3rver
 * (npm, pinned; installed by scripts/setup under
 * ~/.cache/gitcd/s3rver/<version>/, or $GITCD_S3RVER naming its executable),
 * on a free 127.0.0.1 port with a fresh data folder and one bucket, plain or
 * behind TLS with a CA generated for the run.
 *
 * Host names: s3rver runs with --service-endpoint gitcd.test, so
 * "s3.gitcd.test" is the endpoint for path-style requests and
 * "<bucket>.s3.gitcd.test" addresses the bucket virtual-hosted style; `resolve`
 * maps both to 127.0.0.1 for libcurl (CURLOPT_RESOLVE). Requests to
 * 127.0.0.1 itself are path-style.
 *
 * s3rver checks that the access key is its own ("S3RVER") but not the
 * signature. The process is tracked by the harness: killed at exit, on
 * signals, and when the test dies.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#define HARNESS_S3RVER_VERSION "3.7.1"
#define HARNESS_S3RVER_KEY     "S3RVER" /* access key ID and secret s3rver knows */

typedef struct harness_s3rver_opts {
        bool tls;
        const char *bucket; /* created at start; default "snaps" */
} harness_s3rver_opts;

typedef struct harness_s3rver {
        char *bin;      /* the s3rver executable */
        char *dir;      /* temporary folder: data/, tls/, s3rver.log */
        char *data_dir; /* the objects, as s3rver stores them */
        char *log_path;
        char *bucket;
        int port;
        pid_t pid;           /* 0 when stopped */
        char *endpoint_ip;   /* http(s)://127.0.0.1:PORT */
        char *endpoint_host; /* http(s)://s3.gitcd.test:PORT */
        char *resolve[3];    /* CURLOPT_RESOLVE entries for both names, NULL-terminated */
        char *ca_file;       /* with TLS: the CA that signed the server's certificate */
        bool tls;
} harness_s3rver;

/* The s3rver executable; NULL when it is not installed (tests skip then). */
char *harness_s3rver_path(void);

/* Start and wait until it answers. 0 or -errno (reasons on stderr). */
int harness_s3rver_start(const harness_s3rver_opts *opts, harness_s3rver **ret);
/* SIGKILL and reap (the data folder stays). */
int harness_s3rver_kill(harness_s3rver *s);
/* Start again on the same port with the same data; waits until it answers. */
int harness_s3rver_restart(harness_s3rver *s);
/* Kill, reap, remove the files. NULL is a no-op. */
void harness_s3rver_free(harness_s3rver *s);
