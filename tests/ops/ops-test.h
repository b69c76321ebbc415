/*
 * Small helpers the operations tests share on top of tests/e2e/e2e.h:
 * writing files outside the source folder and waiting for a log line.
 */
#pragma once

#include <stdbool.h>

#include "tests/e2e/e2e.h"

/* Write <root>/<rel> (folders created); returns the absolute path, newly allocated. */
char *ops_test_write(e2e *e, const char *rel, const char *text);
/* The same for a token or secret: mode 0600, as gitcd requires of such files. */
char *ops_test_write_secret(e2e *e, const char *rel, const char *text);
/* Write a native EtcdCluster named `name` (namespace default) to <root>/<rel>. */
char *ops_test_write_cluster(e2e *e, const char *rel, const char *name, int replicas);
/* Wait until <root>/<log> contains `needle`; false after timeout_s. */
bool ops_test_wait_log(e2e *e, const char *log, const char *needle, int timeout_s);

/*
 * GET url with libcurl; token (may be NULL) as a bearer token. Returns the
 * HTTP status (0 when nothing answered) and the body (newly allocated) in
 * ret_body when not NULL.
 */
long ops_test_get(const char *url, const char *token, char **ret_body);
/*
 * The value of a sample in a Prometheus exposition: `series` is the metric
 * name with its labels exactly as gitcd writes them. -1 when absent.
 */
double ops_test_metric(const char *text, const char *series);

/* A webhook receiver on 127.0.0.1 (libmicrohttpd) that records every POST. */
typedef struct ops_request {
        char *path;
        char *body;
        char *signature;     /* X-Gitcd-Signature-256, or NULL */
        char *event;         /* X-Gitcd-Event */
        long delivery;       /* X-Gitcd-Delivery */
        char *authorization; /* Authorization, or NULL */
        char *private_token; /* PRIVATE-TOKEN (GitLab), or NULL */
        unsigned status;     /* what the receiver answered */
} ops_request;

typedef struct ops_receiver ops_receiver;

/* Listen on port; the first fail_first requests are answered 503. */
ops_receiver *ops_receiver_start(int port, int fail_first);
void ops_receiver_stop(ops_receiver *r);
/* Wait until a request with this delivery id was answered 200; a copy of it, or NULL on timeout. */
ops_request *ops_receiver_wait(ops_receiver *r, long delivery, int timeout_s);
/* Every request so far (copies; free with ops_request_list_free). */
ops_request *ops_receiver_requests(ops_receiver *r, size_t *ret_n);
void ops_request_free(ops_request *q);
void ops_request_list_free(ops_request *l, size_t n);
