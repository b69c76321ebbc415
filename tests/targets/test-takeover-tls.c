/*
 * The TLS checks of a coreos takeover (targets/takeover-tls.h, pure) and
 * the spec that asks for one (spec.adopt.ca, api/): the old members' CAs
 * must be one CA, the CA handed to gitcd must be that CA with its key, the
 * spec's Secrets must carry it (tls.provider secrets), and the surfaces
 * with TLS must be the same on both sides; every refusal says what
 * differs. Certificates are made here with pki/; no I/O.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/spec.h"
#include "pki/pki.h"
#include "targets/takeover-tls.h"
#include "util/xalloc.h"

typedef struct ca_pems {
        char *cert;
        char *key;
} ca_pems;

static ca_pems old_ca, other_ca;
static char *leaf_pem; /* a leaf of old_ca: no CA */

static void make_ca(const char *cn, ca_pems *ret)
{
        pki_key *k = NULL;
        pki_cert *c = NULL;
        assert_int_equal(pki_ca_create(cn, 30, &k, &c), 0);
        assert_int_equal(pki_cert_to_pem(c, &ret->cert), 0);
        assert_int_equal(pki_key_to_pem(k, &ret->key), 0);
        if (!leaf_pem) {
                pki_cert_request req = {.cn = "etcd-server", .days = 2, .server = true};
                pki_key *lk = NULL;
                pki_cert *lc = NULL;
                assert_int_equal(pki_cert_issue(c, k, &req, &lk, &lc), 0);
                assert_int_equal(pki_cert_to_pem(lc, &leaf_pem), 0);
                pki_key_free(lk);
                pki_cert_free(lc);
        }
        pki_key_free(k);
        pki_cert_free(c);
}

static int setup(void **state)
{
        (void)state;
        make_ca("coreos etcd CA", &old_ca);
        make_ca("another CA", &other_ca);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        free(old_ca.cert), free(old_ca.key), free(other_ca.cert), free(other_ca.key);
        free(leaf_pem);
        return 0;
}

/* A cluster as the spec would give it: provider and surfaces. */
static etcd_cluster cluster(tls_provider p, bool client, bool peer)
{
        etcd_cluster c = {.name = "kc", .namespace_ = "default"};
        c.tls.provider = p;
        c.tls.client.enabled = client;
        c.tls.peer.enabled = peer;
        c.adopt.from = ADOPT_FROM_COREOS;
        return c;
}

/* The coreos layout with TLS on both surfaces, every CA old_ca, and old_ca handed to gitcd. */
static takeover_tls_facts coreos_facts(void)
{
        takeover_tls_facts f = {.client_tls = true, .peer_tls = true};
        f.old_ca[0] =
            (takeover_pem){"Secret default/old-server-tls key server-ca.crt", old_ca.cert};
        f.old_ca[1] = (takeover_pem){"Secret default/old-peer-tls key peer-ca.crt", old_ca.cert};
        f.old_ca[2] =
            (takeover_pem){"Secret default/old-client-tls key etcd-client-ca.crt", old_ca.cert};
        f.given_cert = (takeover_pem){"Secret default/old-ca key tls.crt", old_ca.cert};
        f.given_key = (takeover_pem){"Secret default/old-ca key tls.key", old_ca.key};
        return f;
}

/* Refused with -EPERM, the reason holding each of the NULL-ended fragments, no key in it. */
static void refused(const takeover_tls_facts *f, const etcd_cluster *c, ...)
{
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        char *why = NULL;
        assert_int_equal(takeover_tls_judge(f, c, &ca, &key, &why), -EPERM);
        assert_null(ca);
        assert_null(key);
        assert_non_null(why);
        va_list ap;
        va_start(ap, c);
        for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
                if (!strstr(why, s))
                        fail_msg("\"%s\" not in: %s", s, why);
        va_end(ap);
        assert_null(strstr(why, "PRIVATE KEY"));
        free(why);
}

static void test_auto_keeps_the_old_ca(void **state)
{
        (void)state;
        takeover_tls_facts f = coreos_facts();
        etcd_cluster c = cluster(TLS_PROVIDER_AUTO, true, true);
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        char *why = NULL;
        assert_int_equal(takeover_tls_judge(&f, &c, &ca, &key, &why), 1);
        assert_null(why);
        assert_non_null(ca);
        assert_non_null(key);
        assert_true(pki_key_matches(key, ca));
        char *pem = NULL;
        assert_int_equal(pki_cert_to_pem(ca, &pem), 0);
        assert_string_equal(pem, old_ca.cert);
        free(pem);
        pki_cert_free(ca);
        pki_key_free(key);
}

static void test_old_cas_must_be_one(void **state)
{
        (void)state;
        etcd_cluster c = cluster(TLS_PROVIDER_AUTO, true, true);
        takeover_tls_facts f = coreos_facts();
        f.old_ca[1].pem = other_ca.cert;
        refused(&f, &c, "old-peer-tls key peer-ca.crt is not the CA of",
                "old-server-tls key server-ca.crt", NULL);
        f = coreos_facts();
        f.old_ca[2].pem = other_ca.cert;
        refused(&f, &c, "etcd-client-ca.crt is not the CA of", NULL);
        /* a Secret without its CA, a leaf instead of a CA, a bundle of two */
        f = coreos_facts();
        f.old_ca[0].pem = NULL;
        refused(&f, &c, "server-ca.crt is missing", NULL);
        f = coreos_facts();
        f.old_ca[0].pem = leaf_pem;
        refused(&f, &c, "server-ca.crt is not a CA certificate", NULL);
        _cleanup_free_ char *two = xasprintf("%s%s", old_ca.cert, other_ca.cert);
        f = coreos_facts();
        f.old_ca[1].pem = two;
        refused(&f, &c, "peer-ca.crt holds several certificates", NULL);
        f = coreos_facts();
        f.old_ca[1].pem = "not a certificate";
        refused(&f, &c, "peer-ca.crt holds no PEM certificate", NULL);
        /* the same CA written another way is one CA */
        _cleanup_free_ char *crlf = xstrdup(old_ca.cert);
        size_t n = strlen(crlf);
        crlf = xrealloc(crlf, n + 2);
        memcpy(crlf + n, "\n", 2);
        f = coreos_facts();
        f.old_ca[2].pem = crlf;
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        char *why = NULL;
        assert_int_equal(takeover_tls_judge(&f, &c, &ca, &key, &why), 1);
        pki_cert_free(ca);
        pki_key_free(key);
}

static void test_given_ca_and_key_must_match(void **state)
{
        (void)state;
        etcd_cluster c = cluster(TLS_PROVIDER_AUTO, true, true);
        takeover_tls_facts f = coreos_facts();
        f.given_cert.pem = other_ca.cert;
        f.given_key.pem = other_ca.key;
        refused(&f, &c, "old-ca key tls.crt is not the old cluster's CA",
                "(the CA of Secret default/old-server-tls key server-ca.crt)", NULL);
        f = coreos_facts();
        f.given_key.pem = other_ca.key;
        refused(&f, &c, "old-ca key tls.key is not the key of the CA certificate", NULL);
        f = coreos_facts();
        f.given_key.pem = NULL;
        refused(&f, &c, "old-ca key tls.key is missing", "needs the CA's key", NULL);
        f = coreos_facts();
        f.given_cert.pem = NULL;
        refused(&f, &c, "old-ca key tls.crt is missing", NULL);
        f = coreos_facts();
        f.given_key.pem = "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n";
        refused(&f, &c, "tls.key holds no PEM private key", NULL);
}

static void test_surfaces_must_match(void **state)
{
        (void)state;
        takeover_tls_facts f = coreos_facts();
        etcd_cluster c = cluster(TLS_PROVIDER_AUTO, true, false);
        refused(&f, &c, "client TLS on and peer TLS on", "client TLS on and peer TLS off",
                "switching it mid-move is not supported", NULL);
        c = cluster(TLS_PROVIDER_NONE, false, false);
        refused(&f, &c, "the spec asks for client TLS off and peer TLS off", NULL);
        /* a plain cluster and a plain spec: nothing to keep */
        takeover_tls_facts plain = {0};
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        char *why = NULL;
        assert_int_equal(takeover_tls_judge(&plain, &c, &ca, &key, &why), 0);
        assert_null(ca);
        /* a plain cluster and a spec with TLS */
        c = cluster(TLS_PROVIDER_AUTO, true, true);
        refused(&plain, &c, "the old members run with client TLS off and peer TLS off", NULL);
        /* peer TLS only, on both sides: the peer CA alone is the old CA */
        f = coreos_facts();
        f.client_tls = false;
        f.old_ca[0] = (takeover_pem){0};
        f.old_ca[2] = (takeover_pem){0};
        c = cluster(TLS_PROVIDER_AUTO, false, true);
        assert_int_equal(takeover_tls_judge(&f, &c, &ca, &key, &why), 1);
        pki_cert_free(ca);
        pki_key_free(key);
}

static void test_secrets_must_carry_the_old_ca(void **state)
{
        (void)state;
        etcd_cluster c = cluster(TLS_PROVIDER_SECRETS, true, true);
        takeover_tls_facts f = coreos_facts();
        f.given_cert = f.given_key = (takeover_pem){0};
        f.spec_ca[0] = (takeover_pem){"Secret default/kc-client-tls key ca.crt", old_ca.cert};
        f.spec_ca[1] = (takeover_pem){"Secret default/kc-peer-tls key ca.crt", old_ca.cert};
        f.spec_ca[2] = (takeover_pem){"Secret default/kc-operator-tls key ca.crt", old_ca.cert};
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        char *why = NULL;
        assert_int_equal(takeover_tls_judge(&f, &c, &ca, &key, &why), 1);
        assert_non_null(ca);
        assert_null(key); /* nothing to import */
        pki_cert_free(ca);
        f.spec_ca[1].pem = other_ca.cert;
        refused(&f, &c, "kc-peer-tls key ca.crt is not the old cluster's CA",
                "sign gitcd's certificates with the CA the old members trust", NULL);
        /* cert-manager cannot be checked against the old CA */
        c = cluster(TLS_PROVIDER_CERT_MANAGER, true, true);
        refused(&f, &c, "tls.provider cert-manager cannot keep the old cluster's CA", NULL);
}

/* ---- the spec ---- */

static const char head[] = "apiVersion: gitcd.io/v1alpha1\n"
                           "kind: EtcdCluster\n"
                           "metadata:\n  name: kc\n  namespace: default\n"
                           "spec:\n  replicas: 3\n";

/* Load head + body: the clusters taken in, the diagnostics into *d. */
static cluster_set load(const char *body, diag_list *d)
{
        _cleanup_free_ char *text = xasprintf("%s%s", head, body);
        cluster_set set = {0};
        (void)spec_load_buffer("kc.yaml", text, strlen(text), &set, d);
        return set;
}

static bool has_error(const diag_list *d, int line, const char *fragment)
{
        for (size_t i = 0; i < d->n; i++)
                if (d->items[i].severity == DIAG_ERROR && strstr(d->items[i].message, fragment) &&
                    (line == 0 || d->items[i].line == line))
                        return true;
        for (size_t i = 0; i < d->n; i++)
                fprintf(stderr, "%d:%d: %s\n", d->items[i].line, d->items[i].col,
                        d->items[i].message);
        return false;
}

static void test_spec(void **state)
{
        (void)state;
        diag_list d = {0};
        /* good: auto with the CA's Secret, taken in by intake */
        cluster_set set = load("  tls:\n    provider: auto\n    client: {enabled: true}\n"
                               "    peer: {enabled: true}\n"
                               "  adopt:\n    from: coreos\n    name: old\n    ca:\n"
                               "      secret: old-ca\n",
                               &d);
        assert_int_equal(set.n, 1);
        assert_string_equal(set.items[0]->adopt.ca_secret, "old-ca");
        assert_int_equal(spec_refuse_unsupported(&set, NULL, NULL, &d), 0);
        assert_int_equal(set.n, 1);
        assert_int_equal(d.n, 0);
        cluster_set_release(&set);

        /* good: secrets, no CA key needed */
        set = load(
            "  tls:\n    provider: secrets\n    client: {enabled: true, secretRef: {name: a}}\n"
            "    peer: {enabled: true, secretRef: {name: b}}\n"
            "    operatorClient: {secretRef: {name: c}}\n"
            "  adopt: {from: coreos, name: old}\n",
            &d);
        assert_int_equal(set.n, 1);
        assert_int_equal(spec_refuse_unsupported(&set, NULL, NULL, &d), 0);
        assert_int_equal(d.n, 0);
        cluster_set_release(&set);

        /* bad: auto without the CA, pointing at spec.tls.provider */
        set = load("  tls:\n    provider: auto\n  adopt: {from: coreos, name: old}\n", &d);
        assert_int_equal(set.n, 0);
        assert_true(has_error(&d, 9, "auto with spec.adopt needs spec.adopt.ca.secret"));
        diag_list_release(&d);

        /* bad: spec.adopt.ca with secrets, and without a secret */
        set = load(
            "  tls:\n    provider: secrets\n    client: {enabled: true, secretRef: {name: a}}\n"
            "    operatorClient: {secretRef: {name: c}}\n"
            "  adopt:\n    from: coreos\n    ca: {secret: old-ca}\n",
            &d);
        assert_int_equal(set.n, 0);
        assert_true(has_error(&d, 14, "with tls.provider secrets it has nothing to act on"));
        diag_list_release(&d);
        set = load("  tls: {provider: auto}\n  adopt:\n    from: coreos\n    ca: {name: x}\n", &d);
        assert_int_equal(set.n, 0);
        assert_true(has_error(&d, 0, "spec.adopt.ca.secret is required"));
        assert_true(has_error(&d, 0, "name"));
        diag_list_release(&d);
        set = load(
            "  tls: {provider: auto}\n  adopt:\n    from: coreos\n    ca: {secret: Bad_Name}\n",
            &d);
        assert_int_equal(set.n, 0);
        assert_true(has_error(&d, 11, "is not a Secret name"));
        diag_list_release(&d);

        /* intake: TLS with the other operators, and cert-manager, stay refused */
        set = load("  tls: {provider: auto}\n  adopt: {from: etcd-io, name: old}\n", &d);
        assert_int_equal(set.n, 1);
        assert_int_equal(spec_refuse_unsupported(&set, NULL, NULL, &d), -EOPNOTSUPP);
        assert_int_equal(set.n, 0);
        assert_true(has_error(&d, 8, "spec.adopt with spec.tls"));
        diag_list_release(&d);
        cluster_set_release(&set);
        set = load("  tls:\n    provider: cert-manager\n    client: {enabled: true, issuerRef: "
                   "{name: i}}\n"
                   "    peer: {enabled: true, issuerRef: {name: i}}\n"
                   "    operatorClient: {issuerRef: {name: i}}\n"
                   "  adopt: {from: coreos, name: old}\n",
                   &d);
        assert_int_equal(set.n, 1);
        assert_int_equal(spec_refuse_unsupported(&set, NULL, NULL, &d), -EOPNOTSUPP);
        assert_true(has_error(&d, 0, "not supported yet"));
        diag_list_release(&d);
        cluster_set_release(&set);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_auto_keeps_the_old_ca),
            cmocka_unit_test(test_old_cas_must_be_one),
            cmocka_unit_test(test_given_ca_and_key_must_match),
            cmocka_unit_test(test_surfaces_must_match),
            cmocka_unit_test(test_secrets_must_carry_the_old_ca),
            cmocka_unit_test(test_spec),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
