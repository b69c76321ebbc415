/*
 * TLS switched on and off again for a running cluster on the hosts target:
 * three members as static Pods on real sshd machines (127.0.0.2-4, a host
 * agent playing kubelet in their manifest folders, since no kubelet can run
 * here), real etcd 3.5.16, under a writer on plain http.
 *
 * A commit turns on tls.provider auto for clients and peers with
 * tls.client.allowPlainHTTP, and `gitcd apply --target hosts` carries the
 * switch out (audited tls.enable): etcd then lists https peer URLs only and
 * every member serves TLS on its client and peer ports, to gitcd's client
 * identity. A commit back to plain http switches it off (tls.disable): etcd
 * lists http peer URLs and no member answers a TLS handshake. The writer on
 * plain http goes on throughout and every write it had acknowledged is
 * there at the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pki/pki.h"
#include "tests/e2e/hosts-lab.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define MACHINES 3
#define VERSION  "3.5.16"
#define CL       "sw"

/* Does url (its scheme aside) complete a TLS handshake with gitcd's client identity? */
static bool serves_tls(const char *url, const char *crt, const char *key)
{
        const char *addr = strstr(url, "://");
        _cleanup_free_ char *https = xasprintf("https://%s", addr ? addr + 3 : url);
        char *serial = NULL;
        bool yes = pki_served_serial(https, crt, key, 3000, &serial) == 0;
        free(serial);
        return yes;
}

/* etcd's member list through endpoints (plain http); every peer URL has scheme. */
static void assert_peer_scheme(const char *endpoints, const char *scheme, const char *crt,
                               const char *key)
{
        etcd_client_opts o = {.endpoints = endpoints, .call_timeout_ms = 5000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        etcd_members *ms = NULL;
        if (etcd_member_list(c, &ms) < 0)
                fail_msg("member list: %s", etcd_client_last_error(c));
        etcd_client_free(c);
        assert_int_equal((int)ms->n, MACHINES);
        bool tls = streq(scheme, "https");
        for (size_t i = 0; i < ms->n; i++) {
                const etcd_member *m = &ms->members[i];
                assert_int_equal((int)m->n_peer_urls, 1);
                if (!strneq(m->peer_urls[0], scheme, strlen(scheme)) ||
                    m->peer_urls[0][strlen(scheme)] != ':')
                        fail_msg("member %s lists peer URL %s, not %s", m->name, m->peer_urls[0],
                                 scheme);
                assert_true(m->n_client_urls >= 1);
                if (serves_tls(m->peer_urls[0], crt, key) != tls ||
                    serves_tls(m->client_urls[0], crt, key) != tls)
                        fail_msg("member %s %s TLS", m->name, tls ? "does not serve" : "serves");
        }
        etcd_members_free(ms);
}

static int count_events(e2e *e, const char *action)
{
        return e2e_audit_count(e, CL, action);
}

static void test_switch_on_and_off(void **state)
{
        (void)state;
        hosts_lab *L = hosts_lab_start(MACHINES, VERSION);
        assert_non_null(L);
        e2e *e = e2e_new();
        hosts_lab_write_cluster(L, e, CL, VERSION, MACHINES, 0, MACHINES);
        hosts_lab_apply_ok(L, e, "180s");

        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < MACHINES; i++)
                sb_printf(&eps, "%shttp://%s:%d", i ? "," : "", L->ssh->machines[i].address,
                          L->client_port);
        harness_writer *w = harness_writer_start(&(harness_writer_opts){.endpoints = sb_str(&eps)});

        /* on: plain http served beside https, so the writer goes on */
        hosts_lab_write_cluster_tls_allow_plain(L, e, CL, VERSION, MACHINES, 0, MACHINES);
        hosts_lab_apply_ok(L, e, "300s");
        assert_true(count_events(e, "tls.enable") > 0);
        _cleanup_free_ char *op =
            xasprintf("%s/hosts/default/" CL "/" CL "-0/tls/operator", e->state_dir);
        _cleanup_free_ char *crt = path_join(op, "tls.crt");
        _cleanup_free_ char *key = path_join(op, "tls.key");
        assert_true(path_exists(crt));
        assert_peer_scheme(sb_str(&eps), "https", crt, key);

        /* off again */
        hosts_lab_write_cluster(L, e, CL, VERSION, MACHINES, 0, MACHINES);
        hosts_lab_apply_ok(L, e, "300s");
        assert_true(count_events(e, "tls.disable") > 0);
        assert_peer_scheme(sb_str(&eps), "http", crt, key);

        e2e_writer_check(w, e, CL, 10);
        harness_writer_free(w);
        sb_release(&eps);
        e2e_free(e);
        hosts_lab_free(L);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_switch_on_and_off),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
