/*
 * Helpers for the operations tests (see ops-test.h).
 */
#include <libgen.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "tests/ops/ops-test.h"
#include "util/fs.h"
#include "util/strbuf.h"
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

static size_t collect(char *data, size_t size, size_t n, void *userdata)
{
        sb_append_len(userdata, data, size * n);
        return size * n;
}

long ops_test_get(const char *url, const char *token, char **ret_body)
{
        CURL *c = curl_easy_init();
        assert_non_null(c);
        strbuf body = STRBUF_INIT;
        struct curl_slist *h = NULL;
        _cleanup_free_ char *auth = token ? xasprintf("Authorization: Bearer %s", token) : NULL;
        if (auth)
                h = curl_slist_append(h, auth);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        if (ret_body)
                *ret_body = sb_detach(&body);
        else
                sb_release(&body);
        return status;
}

double ops_test_metric(const char *text, const char *series)
{
        size_t n = strlen(series);
        for (const char *p = text; p && *p;) {
                if (strncmp(p, series, n) == 0 && p[n] == ' ')
                        return strtod(p + n + 1, NULL);
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
        return -1;
}
