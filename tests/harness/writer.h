/*
 * The acknowledged-writes writer of the integration and e2e tests: a
 * thread putting <prefix>00000, <prefix>00001, ... in order (each value is
 * its key) through a real etcd client, one put every interval. A put that
 * fails is counted and tried again under the same key (the most tries
 * one key needed is kept too: a move that should cost each client at most
 * one failed call asserts max_retries <= 1), so keys
 * <prefix>00000 .. acked-1 are exactly the acknowledged ones, and each
 * acknowledged put's revision is kept: a test reads them back after a
 * rolling restart, a recovery or an upgrade to prove no acknowledged write
 * was lost (harness_writer_check) or to tell which of them a restored
 * revision kept (harness_writer_kept).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "etcd/client.h"

typedef struct harness_writer_opts {
        const char *endpoints; /* comma-separated client URLs */
        const char *prefix;    /* NULL: "w/" */
        int max;               /* stop after this many acknowledged puts; 0: until stopped */
        int interval_ms;       /* between puts; 0: 20 */
        int call_timeout_ms;   /* of each put; 0: 3000 */
        /*
         * A client of the test's own making (credentials, TLS), or NULL
         * for a plain one to endpoints; made again after a put that
         * reconnect_on (NULL: none) says to.
         */
        etcd_client *(*connect)(void *data);
        void *data;
        bool (*reconnect_on)(int error);
} harness_writer_opts;

typedef struct harness_writer {
        pthread_t thread;
        harness_writer_opts o;
        char *endpoints, *prefix;
        volatile int stop;
        volatile int acked;       /* keys <prefix>00000 .. acked-1 were acknowledged, in order */
        volatile int failed;      /* puts that failed (not acknowledged: allowed) */
        volatile int max_retries; /* the most failed puts of one key before it was acknowledged */
        volatile int max_latency_ms; /* the longest from a key's first try to its acknowledgement */
        int reconnects;              /* clients made again (reconnect_on) */
        int64_t *revisions;          /* the revision each acknowledged put was given */
        size_t alloc;
} harness_writer;

harness_writer *harness_writer_start(const harness_writer_opts *o);
/* Wait (at most a minute, asserted) until n puts were acknowledged. */
void harness_writer_wait(harness_writer *w, int n);
/* Stop the thread (idempotent); acked, failed and revisions are final after. */
void harness_writer_stop(harness_writer *w);
/*
 * Stop it, then: more than min_acked puts were acknowledged, and every
 * acknowledged key is in c's data, in order (a put whose
 * acknowledgement was lost may be there too).
 */
void harness_writer_check(harness_writer *w, etcd_client *c, int min_acked);
/*
 * Stop it, then: every acknowledged key whose put revision is at most rev
 * is in c's data; returns how many.
 */
int harness_writer_kept(harness_writer *w, etcd_client *c, int64_t rev);
void harness_writer_free(harness_writer *w);
