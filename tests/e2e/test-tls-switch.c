/*
 * TLS switched on for a running cluster, end to end (local target, real
 * etcd 3.5.16; 3.4 is refused by the transition rules): three plain-http members under a writer, then a
 * commit that turns on tls.provider auto for clients and peers with
 * tls.client.allowPlainHTTP (clients not moved yet keep plain http). gitcd
 * is killed with SIGKILL once the first member's peer side moved, and
 * started again. Then the writer moves to https and a commit drops plain
 * http.
 *
 * What a user would notice, and what is asserted: the switch finishes
 * (every step audited as tls.enable); the writer on plain http never needs
 * more than one retry through the switch, nor on https afterwards, and
 * every acknowledged write is there; etcd's membership lists https peer
 * URLs only; every member serves TLS on its client and peer ports; plain
 * http is answered while allowPlainHTTP is set and refused once it is not.
 *
 * Then TLS is switched off again (tls.provider none) under the https
 * writer, which moves to plain http once gitcd did (audited), and gitcd is
 * killed once more when the first member's peer side went plain: the
 * switch finishes (tls.disable), no write needs more than one retry, every
 * acknowledged write is there, etcd lists http URLs only and no member
 * answers a TLS handshake on its client or peer port.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "pki/pki.h"
#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MEMBERS 3

/* tls: 0 plain, 1 TLS with plain http allowed besides, 2 TLS only. */
static void write_cluster(e2e *e, const char *name, const char *version, int tls)
{
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "spec:\n"
                                              "  replicas: %d\n"
                                              "  version: \"%s\"\n"
                                              "  progressDeadlineSeconds: 300\n"
                                              "%s%s",
                                              name, MEMBERS, version,
                                              tls ? "  tls:\n"
                                                    "    provider: auto\n"
                                                    "    peer:\n"
                                                    "      enabled: true\n"
                                                    "    client:\n"
                                                    "      enabled: true\n"
                                                  : "",
                                              tls == 1 ? "      allowPlainHTTP: true\n" : "");
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, text);
}

/* The audit log's events of action (tls.enable, tls.disable), as `gitcd log -o json` prints them. */
static char *action_log(e2e *e, const char *name, const char *action)
{
        _cleanup_free_ char *id = xasprintf("default/%s", name);
        char *out = NULL;
        assert_int_equal(
            e2e_run(e, &out, "log", "-o", "json", "--cluster", id, "--action", action, NULL), 0);
        return out;
}

static char *switch_log(e2e *e, const char *name)
{
        return action_log(e, name, "tls.enable");
}

static int count(const char *text, const char *what)
{
        int n = 0;
        for (const char *p = text; (p = strstr(p, what)); p++)
                n++;
        return n;
}

/* Does a plain http GET of url/health get an answer? */
static bool answers_plain(const char *https_url)
{
        _cleanup_free_ char *url = xasprintf("http://%s/health", https_url + strlen("https://"));
        CURL *h = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 3000L);
        FILE *null = fopen("/dev/null", "w");
        curl_easy_setopt(h, CURLOPT_WRITEDATA, null);
        CURLcode cr = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(h);
        fclose(null);
        return cr == CURLE_OK && code == 200;
}

/* Write until done() says so; fail on a write that needs more than one retry. */
typedef bool (*done_fn)(e2e *e, const char *name, void *userdata);

static int write_until(e2e *e, const char *name, etcd_client *c, int acked, done_fn done,
                       void *userdata, int timeout_s)
{
        _cleanup_free_ char *error = NULL;
        int64_t end = now_mono_ms() + timeout_s * 1000LL, next_look = 0;
        for (;;) {
                _cleanup_free_ char *key = xasprintf("/w/%06d", acked);
                if (!e2e_put_retry(c, key, &error))
                        fail_msg("write %d failed twice: %s", acked, error);
                acked++;
                if (now_mono_ms() < next_look)
                        continue;
                next_look = now_mono_ms() + 500;
                if (done(e, name, userdata))
                        return acked;
                if (now_mono_ms() > end)
                        fail_msg("not done after %d s (%d writes)", timeout_s, acked);
        }
}

typedef struct switching {
        pid_t daemon;
        bool killed;
} switching;

/* Kill gitcd once the first member's peer side moved; done when all three did. */
static bool switched(e2e *e, const char *name, void *userdata)
{
        switching *sw = userdata;
        _cleanup_free_ char *log = switch_log(e, name);
        if (!sw->killed && strstr(log, "peer URL https://")) {
                kill(sw->daemon, SIGKILL);
                waitpid(sw->daemon, NULL, 0);
                sw->killed = true;
                sw->daemon = e2e_start_daemon(e, NULL);
        }
        return count(log, "etcd's membership now lists its peer URL") == MEMBERS;
}

/* Done when gitcd's own client moved to plain http. */
static bool clients_plain(e2e *e, const char *name, void *userdata)
{
        (void)userdata;
        _cleanup_free_ char *log = action_log(e, name, "tls.disable");
        return strstr(log, "client URL is http") != NULL;
}

/* Does anything answer a TLS handshake at url's address (its scheme aside)? */
static bool serves_tls(const char *url, const e2e_tls_files *f)
{
        const char *addr = strstr(url, "://");
        _cleanup_free_ char *https = xasprintf("https://%s", addr ? addr + 3 : url);
        char *serial = NULL;
        bool yes = pki_served_serial(https, f->crt, f->key, 3000, &serial) == 0;
        free(serial);
        return yes;
}

typedef struct switching_off {
        switching sw;
        const e2e_tls_files *f;
} switching_off;

/* Kill gitcd once the first member's peer side went plain; done when no port serves TLS. */
static bool tls_gone(e2e *e, const char *name, void *userdata)
{
        switching_off *so = userdata;
        _cleanup_free_ char *log = action_log(e, name, "tls.disable");
        if (!so->sw.killed && strstr(log, "peer URL http://")) {
                kill(so->sw.daemon, SIGKILL);
                waitpid(so->sw.daemon, NULL, 0);
                so->sw.killed = true;
                so->sw.daemon = e2e_start_daemon(e, NULL);
        }
        if (!strstr(log, "they restart without TLS"))
                return false;
        json_t *st = e2e_status(e, name);
        bool gone = json_array_size(json_object_get(st, "members")) == MEMBERS;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(st, "members"), i, m)
        {
                const char *cu = json_string_value(json_object_get(m, "client_url"));
                const char *pu = json_string_value(json_object_get(m, "peer_url"));
                gone = gone && cu && pu && strneq(cu, "http://", 7) && strneq(pu, "http://", 7) &&
                       !serves_tls(cu, so->f) && !serves_tls(pu, so->f);
        }
        json_decref(st);
        return gone;
}

/* Done when no member answers plain http any more. */
static bool plain_gone(e2e *e, const char *name, void *userdata)
{
        (void)userdata;
        json_t *st = e2e_status(e, name);
        bool gone = json_array_size(json_object_get(st, "members")) == MEMBERS;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(st, "members"), i, m)
        {
                const char *u = json_string_value(json_object_get(m, "client_url"));
                gone = gone && u && strneq(u, "https://", 8) && !answers_plain(u);
        }
        json_decref(st);
        return gone;
}

static void switch_under_writer(const char *version)
{
        e2e *e = e2e_new();
        const char *name = "sw";
        write_cluster(e, name, version, 0);
        switching sw = {.daemon = e2e_start_daemon(e, NULL)};
        assert_true(e2e_wait_ready(e, name, MEMBERS, 180));
        etcd_client *c = e2e_client(e, name);

        /* TLS on, plain http still allowed: the plain writer goes on through the switch. */
        write_cluster(e, name, version, 1);
        int acked = write_until(e, name, c, 0, switched, &sw, 300);
        assert_true(sw.killed);
        assert_true(e2e_wait_ready(e, name, MEMBERS, 120));
        _cleanup_free_ char *log = switch_log(e, name);
        assert_int_equal(count(log, "client URL is https"), 1);
        assert_int_equal(count(log, "it restarts onto TLS for its peers"), MEMBERS);

        /* The writer moves to https with gitcd's identity; plain http is dropped. */
        _cleanup_free_ char *member0 = xasprintf("%s-0", name);
        e2e_tls_files f = e2e_operator_files(e, name, member0);
        etcd_client_free(c);
        c = e2e_tls_client(e, name, &f);
        write_cluster(e, name, version, 2);
        acked = write_until(e, name, c, acked, plain_gone, NULL, 240);
        assert_true(e2e_wait_ready(e, name, MEMBERS, 120));

        /* Every acknowledged write is there. */
        etcd_kv_list *l = NULL;
        if (etcd_get(c, "/w/", true, &l) < 0)
                fail_msg("read back: %s", etcd_client_last_error(c));
        assert_int_equal((int)l->n, acked);
        etcd_kv_list_free(l);

        /* etcd's membership: https only; each member serves TLS on both ports. */
        etcd_members *ms = NULL;
        if (etcd_member_list(c, &ms) < 0)
                fail_msg("member list: %s", etcd_client_last_error(c));
        assert_int_equal((int)ms->n, MEMBERS);
        for (size_t i = 0; i < ms->n; i++) {
                const etcd_member *m = &ms->members[i];
                assert_int_equal((int)m->n_peer_urls, 1);
                assert_true(strneq(m->peer_urls[0], "https://", 8));
                assert_true(m->n_client_urls >= 1);
                assert_true(strneq(m->client_urls[0], "https://", 8));
                const char *urls[] = {m->peer_urls[0], m->client_urls[0]};
                for (size_t j = 0; j < 2; j++) {
                        char *serial = NULL;
                        if (pki_served_serial(urls[j], f.crt, f.key, 3000, &serial) < 0)
                                fail_msg("%s serves no TLS: %s", urls[j], pki_last_error());
                        free(serial);
                }
        }
        etcd_members_free(ms);

        /*
         * TLS off again under the https writer; it moves to plain http once
         * gitcd's own client did (every member serves both schemes by then).
         */
        write_cluster(e, name, version, 0);
        acked = write_until(e, name, c, acked, clients_plain, NULL, 240);
        etcd_client_free(c);
        c = e2e_client(e, name);
        switching_off so = {.sw = {.daemon = sw.daemon}, .f = &f};
        acked = write_until(e, name, c, acked, tls_gone, &so, 300);
        sw.daemon = so.sw.daemon;
        assert_true(so.sw.killed);
        assert_true(e2e_wait_ready(e, name, MEMBERS, 120));
        _cleanup_free_ char *off_log = action_log(e, name, "tls.disable");
        assert_int_equal(count(off_log, "client URL is http"), 1);
        assert_int_equal(count(off_log, "etcd's membership now lists its peer URL http://"),
                         MEMBERS);

        /* Every acknowledged write is there; etcd's membership: http only. */
        l = NULL;
        if (etcd_get(c, "/w/", true, &l) < 0)
                fail_msg("read back: %s", etcd_client_last_error(c));
        assert_int_equal((int)l->n, acked);
        etcd_kv_list_free(l);
        ms = NULL;
        if (etcd_member_list(c, &ms) < 0)
                fail_msg("member list: %s", etcd_client_last_error(c));
        etcd_client_free(c);
        assert_int_equal((int)ms->n, MEMBERS);
        for (size_t i = 0; i < ms->n; i++) {
                const etcd_member *m = &ms->members[i];
                assert_int_equal((int)m->n_peer_urls, 1);
                assert_true(strneq(m->peer_urls[0], "http://", 7));
                assert_true(m->n_client_urls >= 1);
                assert_true(strneq(m->client_urls[0], "http://", 7));
                assert_false(serves_tls(m->peer_urls[0], &f));
                assert_false(serves_tls(m->client_urls[0], &f));
        }
        etcd_members_free(ms);

        kill(sw.daemon, SIGTERM);
        waitpid(sw.daemon, NULL, 0);
        e2e_tls_files_release(&f);
        e2e_free(e);
}

static void test_switch_35(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        switch_under_writer("3.5.16");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_switch_35),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
