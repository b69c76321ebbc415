/*
 * gitcd's etcd client against a one-member etcd of the version in argv[1]
 * that serves clients over TLS and requires client certificates (mTLS),
 * with certificates made fresh by the harness: the good path (and that
 * the TLS connection is reused between calls), a CA that did not sign the
 * server's certificate, a missing client certificate, and plain HTTP
 * against the TLS port. Each failure must be a TLS error with a message
 * a person understands, never curl's wording.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "etcd/health.h"
#include "etcd/pool.h"
#include "pki/pki.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

static const char *version = "3.5.16";
static harness_cluster *cluster;

static int setup(void **state)
{
        harness_opts o = {.version = version, .members = 1, .tls = true, .client_cert_auth = true};
        int r = harness_cluster_start(&o, &cluster);
        if (r < 0) {
                fprintf(stderr, "cannot start etcd %s with TLS: %s\n", version, strerror(-r));
                return -1;
        }
        return 0;
}

static int teardown(void **state)
{
        harness_cluster_free(cluster);
        return 0;
}

static etcd_client *tls_client(const char *endpoints, const char *cacert, const char *cert,
                               const char *key)
{
        etcd_client_opts o = {.endpoints = endpoints,
                              .cacert = cacert,
                              .cert = cert,
                              .key = key,
                              .call_timeout_ms = 5000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

static void test_mtls_ok(void **state)
{
        harness_tls *t = cluster->tls;
        assert_true(strneq(cluster->endpoints, "https://", 8));
        etcd_client *c = tls_client(cluster->endpoints, t->ca_cert, t->client_cert, t->client_key);
        for (int i = 0; i < 3; i++) { /* several calls on the kept connection */
                etcd_members *l = NULL;
                int r = etcd_member_list(c, &l);
                if (r < 0)
                        fail_msg("member list: %s", etcd_client_last_error(c));
                assert_int_equal(l->n, 1);
                assert_string_equal(l->members[0].peer_urls[0], cluster->members[0].peer_url);
                etcd_members_free(l);
        }
        etcd_endpoint_status *s = NULL;
        assert_int_equal(etcd_status(c, cluster->members[0].client_url, &s), 0);
        assert_string_equal(s->version, version);
        etcd_endpoint_status_free(s);
        assert_int_equal(etcd_put(c, "/tls", "yes", 3, NULL), 0);
        etcd_client_free(c);
}

static void test_wrong_ca(void **state)
{
        char *dir = harness_tmpdir("etcd-wrong-ca");
        char *ca_path = xasprintf("%s/other-ca.crt", dir);
        pki_key *k = NULL;
        pki_cert *ca = NULL;
        assert_int_equal(pki_ca_create("some other CA", 30, &k, &ca), 0);
        assert_int_equal(pki_write_pem(ca_path, NULL, ca, NULL), 0);
        harness_tls *t = cluster->tls;
        etcd_client *c = tls_client(cluster->endpoints, ca_path, t->client_cert, t->client_key);
        etcd_members *l = NULL;
        assert_int_equal(etcd_member_list(c, &l), ETCD_ERR_TLS);
        const char *msg = etcd_client_last_error(c);
        assert_non_null(strstr(msg, "not trusted"));
        assert_non_null(strstr(msg, cluster->members[0].client_url));
        assert_null(strstr(msg, "curl"));
        etcd_client_free(c);
        pki_key_free(k);
        pki_cert_free(ca);
        free(ca_path);
        free(dir);
}

static void test_missing_client_cert(void **state)
{
        etcd_client *c = tls_client(cluster->endpoints, cluster->tls->ca_cert, NULL, NULL);
        etcd_members *l = NULL;
        assert_int_equal(etcd_member_list(c, &l), ETCD_ERR_TLS);
        const char *msg = etcd_client_last_error(c);
        assert_non_null(strstr(msg, "client certificate"));
        assert_null(strstr(msg, "curl"));
        etcd_client_free(c);
}

static void test_unreadable_ca(void **state)
{
        etcd_client *c = tls_client(cluster->endpoints, "/nonexistent/ca.crt",
                                    cluster->tls->client_cert, cluster->tls->client_key);
        etcd_members *l = NULL;
        assert_int_equal(etcd_member_list(c, &l), ETCD_ERR_TLS_FILES);
        assert_non_null(strstr(etcd_client_last_error(c), "/nonexistent/ca.crt"));
        etcd_client_free(c);
}

static void test_plain_http_to_tls_port(void **state)
{
        char *url = xasprintf("http://127.0.0.1:%d", cluster->members[0].client_port);
        etcd_client_opts o = {.endpoints = url, .call_timeout_ms = 3000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        etcd_members *l = NULL;
        int r = etcd_member_list(c, &l);
        assert_true(r < 0);
        assert_null(l);
        assert_non_null(strstr(etcd_client_last_error(c), "https://"));
        etcd_client_free(c);
        free(url);
}

static int health(const char *ca, const char *cert, const char *key, char **ret_detail)
{
        etcd_health_opts o = {.timeout_ms = 5000,
                              .tls = {.ca_file = ca, .cert_file = cert, .key_file = key}};
        return etcd_member_health(cluster->members[0].client_url, &o, ret_detail);
}

/*
 * /health of a TLS member on the process's kept connection to it: GETs
 * after the first open none, and gRPC calls with the same identity use the
 * same one (no handshake per pass). Files replaced on disk are read again:
 * a CA that did not sign the member's certificate is refused at once, and
 * the right one is trusted again.
 */
static void test_health_kept_connection(void **state)
{
        harness_tls *t = cluster->tls;
        char *dir = harness_tmpdir("etcd-health-tls");
        char *ca = xasprintf("%s/ca.crt", dir), *other = xasprintf("%s/other.crt", dir);
        char *pem = NULL;
        size_t len = 0;
        assert_int_equal(read_file(t->ca_cert, 1 << 20, &pem, &len), 0);
        assert_int_equal(write_file_atomic(ca, pem, len, 0644), 0);
        pki_key *k = NULL;
        pki_cert *oca = NULL;
        assert_int_equal(pki_ca_create("some other CA", 30, &k, &oca), 0);
        assert_int_equal(pki_write_pem(other, NULL, oca, NULL), 0);

        etcd_pool_stats before, after;
        etcd_pool_stats_get(&before);
        for (int i = 0; i < 5; i++) {
                char *detail = NULL;
                assert_int_equal(health(ca, t->client_cert, t->client_key, &detail), 1);
                assert_string_equal(detail, "healthy");
                free(detail);
        }
        etcd_client *c =
            tls_client(cluster->members[0].client_url, ca, t->client_cert, t->client_key);
        etcd_endpoint_status *st = NULL;
        assert_int_equal(etcd_status(c, NULL, &st), 0);
        etcd_endpoint_status_free(st);
        etcd_client_free(c);
        etcd_pool_stats_get(&after);
        assert_int_equal(after.opened - before.opened, 1);

        /* the CA file replaced by one that did not sign the member's certificate */
        char *other_pem = NULL;
        size_t other_len = 0;
        assert_int_equal(read_file(other, 1 << 20, &other_pem, &other_len), 0);
        assert_int_equal(write_file_atomic(ca, other_pem, other_len, 0644), 0);
        char *detail = NULL;
        assert_int_equal(health(ca, t->client_cert, t->client_key, &detail), 0);
        assert_non_null(strstr(detail, "not answering"));
        free(detail);
        assert_int_equal(write_file_atomic(ca, pem, len, 0644), 0);
        assert_int_equal(health(ca, t->client_cert, t->client_key, &detail), 1);
        free(detail);
        /* without the client certificate the member requires: refused */
        assert_int_equal(health(ca, NULL, NULL, &detail), 0);
        free(detail);

        etcd_pool_close_idle();
        free(pem);
        free(other_pem);
        pki_key_free(k);
        pki_cert_free(oca);
        free(ca);
        free(other);
        free(dir);
}

int main(int argc, char **argv)
{
        if (argc > 1)
                version = argv[1];
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed\n", version);
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_mtls_ok),
            cmocka_unit_test(test_wrong_ca),
            cmocka_unit_test(test_missing_client_cert),
            cmocka_unit_test(test_unreadable_ca),
            cmocka_unit_test(test_plain_http_to_tls_port),
            cmocka_unit_test(test_health_kept_connection),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
