/* The acknowledged-writes writer (see writer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/harness/writer.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static etcd_client *writer_connect(harness_writer *w)
{
        if (w->o.connect)
                return w->o.connect(w->o.data);
        etcd_client_opts o = {.endpoints = w->endpoints,
                              .call_timeout_ms = w->o.call_timeout_ms,
                              .dial_timeout_ms = 500};
        etcd_client *c = NULL;
        return etcd_client_new(&o, &c) < 0 ? NULL : c;
}

static void key_of(const harness_writer *w, int i, char *buf, size_t size)
{
        snprintf(buf, size, "%s%05d", w->prefix, i);
}

static void *writer_main(void *arg)
{
        harness_writer *w = arg;
        etcd_client *c = writer_connect(w);
        int retries = 0;        /* of the key being put */
        int64_t first_try = -1; /* of the key being put */
        while (c && !w->stop && (!w->o.max || w->acked < w->o.max)) {
                char key[64];
                key_of(w, w->acked, key, sizeof(key));
                int64_t rev = 0;
                if (first_try < 0)
                        first_try = now_mono_ms();
                int k = etcd_put(c, key, key, strlen(key), &rev);
                if (k == 0) {
                        w->revisions =
                            xgrow(w->revisions, &w->alloc, (size_t)w->acked + 1, sizeof(int64_t));
                        w->revisions[w->acked] = rev;
                        w->acked = w->acked + 1;
                        int ms = (int)(now_mono_ms() - first_try);
                        if (ms > w->max_latency_ms)
                                w->max_latency_ms = ms;
                        retries = 0;
                        first_try = -1;
                } else {
                        w->failed = w->failed + 1;
                        /* what a failed put met, for a test that counts them */
                        fprintf(stderr, "writer: put %s failed (try %d): %s\n", key, retries + 1,
                                etcd_client_last_error(c));
                        if (++retries > w->max_retries)
                                w->max_retries = retries;
                        if (w->o.reconnect_on && w->o.reconnect_on(k)) {
                                etcd_client_free(c);
                                c = writer_connect(w);
                                w->reconnects++;
                        }
                }
                usleep((useconds_t)w->o.interval_ms * 1000);
        }
        etcd_client_free(c);
        return NULL;
}

harness_writer *harness_writer_start(const harness_writer_opts *o)
{
        harness_writer *w = XNEW(harness_writer);
        w->o = *o;
        w->endpoints = xstrdup_null(o->endpoints);
        w->prefix = xstrdup(o->prefix ? o->prefix : "w/");
        w->o.endpoints = w->endpoints;
        w->o.prefix = w->prefix;
        if (!w->o.interval_ms)
                w->o.interval_ms = 20;
        if (!w->o.call_timeout_ms)
                w->o.call_timeout_ms = 3000;
        assert_int_equal(pthread_create(&w->thread, NULL, writer_main, w), 0);
        return w;
}

void harness_writer_wait(harness_writer *w, int n)
{
        for (int i = 0; i < 6000 && w->acked < n; i++)
                usleep(10 * 1000);
        if (w->acked < n)
                fail_msg("the writer had %d puts acknowledged after a minute, want %d (%d failed)",
                         w->acked, n, w->failed);
}

void harness_writer_stop(harness_writer *w)
{
        if (w->stop)
                return;
        w->stop = 1;
        pthread_join(w->thread, NULL);
}

void harness_writer_check(harness_writer *w, etcd_client *c, int min_acked)
{
        harness_writer_stop(w);
        if (w->acked <= min_acked)
                fail_msg("the writer had only %d puts acknowledged (%d failed), want more than %d",
                         w->acked, w->failed, min_acked);
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, w->prefix, true, &l), 0);
        assert_true(l->n >= (size_t)w->acked);
        for (int i = 0; i < w->acked; i++) {
                char key[64];
                key_of(w, i, key, sizeof(key));
                assert_string_equal(l->kvs[i].key, key);
        }
        etcd_kv_list_free(l);
}

int harness_writer_kept(harness_writer *w, etcd_client *c, int64_t rev)
{
        harness_writer_stop(w);
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, w->prefix, true, &l), 0);
        int kept = 0;
        for (int i = 0; i < w->acked; i++) {
                if (w->revisions[i] > rev)
                        break;
                char key[64];
                key_of(w, i, key, sizeof(key));
                if ((size_t)i >= l->n || !streq(l->kvs[i].key, key))
                        fail_msg("acknowledged key %s (revision %lld <= %lld) is missing", key,
                                 (long long)w->revisions[i], (long long)rev);
                assert_string_equal(l->kvs[i].value, key);
                kept++;
        }
        etcd_kv_list_free(l);
        return kept;
}

void harness_writer_free(harness_writer *w)
{
        if (!w)
                return;
        harness_writer_stop(w);
        free(w->endpoints);
        free(w->prefix);
        free(w->revisions);
        free(w);
}
