/*
 * Small helpers the operations tests share on top of tests/e2e/e2e.h:
 * writing files outside the source folder and waiting for a log line.
 */
#pragma once

#include <stdbool.h>

#include "tests/e2e/e2e.h"

/* Write <root>/<rel> (folders created); returns the absolute path, newly allocated. */
char *ops_test_write(e2e *e, const char *rel, const char *text);
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
