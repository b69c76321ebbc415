/*
 * Helpers for the operations tests (see ops-test.h).
 */
#include <libgen.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/ops/ops-test.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

char *ops_test_write(e2e *e, const char *rel, const char *text)
{
        char *path = path_join(e->root, rel);
        _cleanup_free_ char *copy = xstrdup(path);
        assert_int_equal(mkdir_p(dirname(copy), 0755), 0);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
        return path;
}

char *ops_test_write_cluster(e2e *e, const char *rel, const char *name, int replicas)
{
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "  namespace: default\n"
                                              "spec:\n"
                                              "  replicas: %d\n"
                                              "  version: \"3.5.16\"\n"
                                              "  progressDeadlineSeconds: 120\n",
                                              name, replicas);
        return ops_test_write(e, rel, text);
}

bool ops_test_wait_log(e2e *e, const char *log, const char *needle, int timeout_s)
{
        int64_t t0 = now_mono_ms();
        while (now_mono_ms() - t0 < (int64_t)timeout_s * 1000) {
                _cleanup_free_ char *text = e2e_read_log(e, log);
                if (strstr(text, needle))
                        return true;
                usleep(100 * 1000);
        }
        _cleanup_free_ char *text = e2e_read_log(e, log);
        fprintf(stderr, "--- %s (waiting for \"%s\") ---\n%s\n", log, needle, text);
        return false;
}
