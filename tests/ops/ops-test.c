/*
 * Helpers for the operations tests (see ops-test.h).
 */
#include <arpa/inet.h>
#include <libgen.h>
#include <netinet/in.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <microhttpd.h>
#include <pthread.h>
#include <curl/curl.h>

#include "tests/ops/ops-test.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static char *write_mode(e2e *e, const char *rel, const char *text, mode_t mode)
{
        char *path = path_join(e->root, rel);
        _cleanup_free_ char *copy = xstrdup(path);
        assert_int_equal(mkdir_p(dirname(copy), 0755), 0);
        assert_int_equal(write_file_atomic(path, text, strlen(text), mode), 0);
        return path;
}

char *ops_test_write(e2e *e, const char *rel, const char *text)
{
        return write_mode(e, rel, text, 0644);
}

char *ops_test_write_secret(e2e *e, const char *rel, const char *text)
{
        return write_mode(e, rel, text, 0600);
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

/* ---- the webhook receiver -------------------------------------------------- */

struct ops_receiver {
        struct MHD_Daemon *mhd;
        pthread_mutex_t lock;
        int fail_left;
        ops_request *reqs;
        size_t n;
};

typedef struct upload {
        strbuf body;
} upload;

static char *dup_header(struct MHD_Connection *c, const char *name)
{
        const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
        return v ? xstrdup(v) : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
        ops_receiver *r = cls;
        (void)version;
        upload *u = *con_cls;
        if (!u) {
                u = xcalloc(1, sizeof(upload));
                *con_cls = u;
                return MHD_YES;
        }
        if (*size) {
                sb_append_len(&u->body, data, *size);
                *size = 0;
                return MHD_YES;
        }
        pthread_mutex_lock(&r->lock);
        unsigned status = MHD_HTTP_OK;
        if (r->fail_left > 0) {
                r->fail_left--;
                status = MHD_HTTP_SERVICE_UNAVAILABLE;
        }
        r->reqs = xrealloc(r->reqs, (r->n + 1) * sizeof(ops_request));
        ops_request *q = &r->reqs[r->n++];
        memset(q, 0, sizeof(*q));
        q->path = xstrdup(url);
        q->body = xstrdup(sb_str(&u->body));
        q->signature = dup_header(conn, "X-Gitcd-Signature-256");
        q->event = dup_header(conn, "X-Gitcd-Event");
        q->authorization = dup_header(conn, "Authorization");
        q->private_token = dup_header(conn, "PRIVATE-TOKEN");
        _cleanup_free_ char *d = dup_header(conn, "X-Gitcd-Delivery");
        q->delivery = d ? strtol(d, NULL, 10) : -1;
        q->status = streq(method, "POST") ? status : MHD_HTTP_METHOD_NOT_ALLOWED;
        status = q->status;
        pthread_mutex_unlock(&r->lock);
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ret = MHD_queue_response(conn, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code)
{
        (void)cls, (void)conn, (void)code;
        upload *u = *con_cls;
        if (u) {
                sb_release(&u->body);
                free(u);
        }
        *con_cls = NULL;
}

ops_receiver *ops_receiver_start(int port, int fail_first)
{
        ops_receiver *r = xcalloc(1, sizeof(ops_receiver));
        pthread_mutex_init(&r->lock, NULL);
        r->fail_left = fail_first;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        r->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL,
                                  on_request, r, MHD_OPTION_SOCK_ADDR, &sa,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
        assert_non_null(r->mhd);
        return r;
}

static void request_release(ops_request *q)
{
        free(q->path);
        free(q->body);
        free(q->signature);
        free(q->event);
        free(q->authorization);
        free(q->private_token);
}

void ops_request_free(ops_request *q)
{
        if (q)
                request_release(q);
        free(q);
}

void ops_request_list_free(ops_request *l, size_t n)
{
        for (size_t i = 0; i < n; i++)
                request_release(&l[i]);
        free(l);
}

static void request_copy(ops_request *dst, const ops_request *src)
{
        *dst = *src;
        dst->path = xstrdup(src->path);
        dst->body = xstrdup(src->body);
        dst->signature = src->signature ? xstrdup(src->signature) : NULL;
        dst->event = src->event ? xstrdup(src->event) : NULL;
        dst->authorization = src->authorization ? xstrdup(src->authorization) : NULL;
        dst->private_token = src->private_token ? xstrdup(src->private_token) : NULL;
}

ops_request *ops_receiver_requests(ops_receiver *r, size_t *ret_n)
{
        pthread_mutex_lock(&r->lock);
        ops_request *l = xcalloc(r->n + 1, sizeof(ops_request));
        for (size_t i = 0; i < r->n; i++)
                request_copy(&l[i], &r->reqs[i]);
        *ret_n = r->n;
        pthread_mutex_unlock(&r->lock);
        return l;
}

ops_request *ops_receiver_wait(ops_receiver *r, long delivery, int timeout_s)
{
        int64_t t0 = now_mono_ms();
        while (now_mono_ms() - t0 < (int64_t)timeout_s * 1000) {
                pthread_mutex_lock(&r->lock);
                for (size_t i = 0; i < r->n; i++)
                        if (r->reqs[i].delivery == delivery && r->reqs[i].status == 200) {
                                ops_request *q = xcalloc(1, sizeof(ops_request));
                                request_copy(q, &r->reqs[i]);
                                pthread_mutex_unlock(&r->lock);
                                return q;
                        }
                pthread_mutex_unlock(&r->lock);
                usleep(50 * 1000);
        }
        return NULL;
}

void ops_receiver_stop(ops_receiver *r)
{
        if (!r)
                return;
        MHD_stop_daemon(r->mhd);
        ops_request_list_free(r->reqs, r->n);
        pthread_mutex_destroy(&r->lock);
        free(r);
}
