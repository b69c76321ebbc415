/*
 * Tests for pki/: a CA, a server and a client certificate form a chain that
 * OpenSSL verifies (in-process with X509_verify_cert and with the real
 * `openssl verify` command on the written files), carry the SANs, key
 * usages and extensions etcd and Go expect, round-trip through PEM files
 * (keys with mode 0600), and bad requests or files are refused with a clear
 * message instead of OpenSSL's raw error text.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "pki/auto.h"
#include "pki/pki.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define DAY_MS   (24LL * 3600 * 1000)
#define NOW_MS() ((int64_t)time(NULL) * 1000)

typedef struct fixture {
        char *dir;
        pki_key *ca_key;
        pki_cert *ca;
        pki_key *server_key;
        pki_cert *server;
        pki_key *client_key;
        pki_cert *client;
} fixture;

static const char *const server_dns[] = {"localhost", "etcd-0.etcd.default.svc", NULL};
static const char *const server_ips[] = {"127.0.0.1", "::1", NULL};

static int setup(void **state)
{
        fixture *f = XNEW(fixture);
        f->dir = xstrdup("/tmp/gitcd-test-pki-XXXXXX");
        const char *tmp = getenv("TMPDIR");
        if (!isempty(tmp)) {
                free(f->dir);
                f->dir = xasprintf("%s/gitcd-test-pki-XXXXXX", tmp);
        }
        assert_non_null(mkdtemp(f->dir));
        assert_int_equal(pki_ca_create("gitcd test CA", 30, &f->ca_key, &f->ca), 0);
        pki_cert_request server = {
            .cn = "etcd-server",
            .dns_names = server_dns,
            .ip_addresses = server_ips,
            .days = 10,
            .server = true,
            .client = true,
        };
        assert_int_equal(pki_cert_issue(f->ca, f->ca_key, &server, &f->server_key, &f->server), 0);
        pki_cert_request client = {.cn = "root", .days = 10, .client = true};
        assert_int_equal(pki_cert_issue(f->ca, f->ca_key, &client, &f->client_key, &f->client), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        fixture *f = *state;
        (void)rm_rf(f->dir);
        free(f->dir);
        pki_key_free(f->ca_key);
        pki_cert_free(f->ca);
        pki_key_free(f->server_key);
        pki_cert_free(f->server);
        pki_key_free(f->client_key);
        pki_cert_free(f->client);
        free(f);
        return 0;
}

/* X509_verify_cert of leaf against ca for an SSL purpose; the verify error or 0. */
static int verify_for(const pki_cert *ca, const pki_cert *leaf, int purpose)
{
        X509_STORE *store = X509_STORE_new();
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        assert_non_null(store);
        assert_non_null(ctx);
        assert_int_equal(X509_STORE_add_cert(store, pki_cert_x509(ca)), 1);
        assert_int_equal(X509_STORE_CTX_init(ctx, store, pki_cert_x509(leaf), NULL), 1);
        assert_int_equal(X509_STORE_CTX_set_purpose(ctx, purpose), 1);
        int ok = X509_verify_cert(ctx);
        int err = ok == 1 ? 0 : X509_STORE_CTX_get_error(ctx);
        if (ok != 1 && err == 0)
                err = -1;
        X509_STORE_CTX_free(ctx);
        X509_STORE_free(store);
        return err;
}

static void test_chain_verifies(void **state)
{
        fixture *f = *state;
        assert_int_equal(verify_for(f->ca, f->server, X509_PURPOSE_SSL_SERVER), 0);
        assert_int_equal(verify_for(f->ca, f->server, X509_PURPOSE_SSL_CLIENT), 0);
        assert_int_equal(verify_for(f->ca, f->client, X509_PURPOSE_SSL_CLIENT), 0);
        /* A client-only certificate must not pass as a server. */
        assert_int_not_equal(verify_for(f->ca, f->client, X509_PURPOSE_SSL_SERVER), 0);

        assert_int_equal(pki_cert_verify(f->ca, f->server), 0);
        assert_int_equal(pki_cert_verify(f->ca, f->client), 0);

        /* Another CA does not vouch for these. */
        pki_key *other_key = NULL;
        pki_cert *other = NULL;
        assert_int_equal(pki_ca_create("another CA", 1, &other_key, &other), 0);
        assert_int_not_equal(verify_for(other, f->server, X509_PURPOSE_SSL_SERVER), 0);
        assert_int_equal(pki_cert_verify(other, f->server), -EKEYREJECTED);
        assert_non_null(strstr(pki_last_error(), "does not verify"));
        pki_cert_free(other);
        pki_key_free(other_key);
}

static void test_ca_extensions(void **state)
{
        fixture *f = *state;
        X509 *ca = pki_cert_x509(f->ca);
        assert_true(pki_cert_is_ca(f->ca));
        assert_false(pki_cert_is_ca(f->server));
        assert_false(pki_cert_is_ca(f->client));

        int idx = X509_get_ext_by_NID(ca, NID_basic_constraints, -1);
        assert_true(idx >= 0);
        assert_int_equal(X509_EXTENSION_get_critical(X509_get_ext(ca, idx)), 1);
        idx = X509_get_ext_by_NID(ca, NID_key_usage, -1);
        assert_true(idx >= 0);
        assert_int_equal(X509_EXTENSION_get_critical(X509_get_ext(ca, idx)), 1);
        assert_int_equal(X509_get_key_usage(ca), KU_KEY_CERT_SIGN | KU_CRL_SIGN);

        /* Key identifiers: the leaf's authority key id is the CA's subject key id. */
        const ASN1_OCTET_STRING *ca_skid = X509_get0_subject_key_id(ca);
        assert_non_null(ca_skid);
        assert_non_null(X509_get0_authority_key_id(ca));
        const ASN1_OCTET_STRING *leaf_akid = X509_get0_authority_key_id(pki_cert_x509(f->server));
        assert_non_null(leaf_akid);
        assert_int_equal(ASN1_OCTET_STRING_cmp(ca_skid, leaf_akid), 0);
        assert_non_null(X509_get0_subject_key_id(pki_cert_x509(f->server)));

        /* ECDSA P-256 keys, SHA-256 signatures. */
        EVP_PKEY *pk = pki_key_evp(f->server_key);
        assert_int_equal(EVP_PKEY_get_base_id(pk), EVP_PKEY_EC);
        assert_int_equal(EVP_PKEY_get_bits(pk), 256);
        assert_int_equal(X509_get_signature_nid(pki_cert_x509(f->server)), NID_ecdsa_with_SHA256);
        assert_true(pki_key_matches(f->server_key, f->server));
        assert_false(pki_key_matches(f->client_key, f->server));

        _cleanup_free_ char *cn = NULL;
        assert_int_equal(pki_cert_common_name(f->client, &cn), 0);
        assert_string_equal(cn, "root");
}

static void test_sans_and_ekus(void **state)
{
        fixture *f = *state;
        char **dns = NULL, **ips = NULL;
        assert_int_equal(pki_cert_sans(f->server, &dns, &ips), 0);
        assert_non_null(dns[0]);
        assert_string_equal(dns[0], "localhost");
        assert_string_equal(dns[1], "etcd-0.etcd.default.svc");
        assert_null(dns[2]);
        assert_string_equal(ips[0], "127.0.0.1");
        assert_string_equal(ips[1], "::1");
        assert_null(ips[2]);
        strv_free(dns);
        strv_free(ips);

        /* The client certificate has no SANs at all. */
        assert_int_equal(pki_cert_sans(f->client, &dns, &ips), 0);
        assert_null(dns[0]);
        assert_null(ips[0]);
        strv_free(dns);
        strv_free(ips);

        X509 *server = pki_cert_x509(f->server);
        X509 *client = pki_cert_x509(f->client);
        assert_int_equal(X509_get_extended_key_usage(server), XKU_SSL_SERVER | XKU_SSL_CLIENT);
        assert_int_equal(X509_get_extended_key_usage(client), XKU_SSL_CLIENT);
        assert_int_equal(X509_get_key_usage(server), KU_DIGITAL_SIGNATURE);
        assert_int_equal(X509_check_host(server, "localhost", 0, 0, NULL), 1);
        assert_int_equal(X509_check_ip_asc(server, "127.0.0.1", 0), 1);
        assert_int_equal(X509_check_ip_asc(server, "10.0.0.1", 0), 0);
}

static void test_serials_and_validity(void **state)
{
        fixture *f = *state;
        BIGNUM *a = ASN1_INTEGER_to_BN(X509_get0_serialNumber(pki_cert_x509(f->server)), NULL);
        BIGNUM *b = ASN1_INTEGER_to_BN(X509_get0_serialNumber(pki_cert_x509(f->client)), NULL);
        assert_non_null(a);
        assert_non_null(b);
        assert_false(BN_is_negative(a));
        assert_true(BN_num_bits(a) >= 120);
        assert_int_not_equal(BN_cmp(a, b), 0);
        BN_free(a);
        BN_free(b);

        int64_t now = now_wall_ms(), not_after = 0, not_before = 0;
        assert_int_equal(pki_cert_not_after(f->server, &not_after), 0);
        assert_int_equal(pki_cert_not_before(f->server, &not_before), 0);
        assert_true(not_before <= now);
        assert_true(not_after > now + 10 * DAY_MS - 3600 * 1000);
        assert_true(not_after <= now + 10 * DAY_MS + 3600 * 1000);
        assert_int_equal(pki_cert_not_after(f->ca, &not_after), 0);
        assert_true(not_after > now + 29 * DAY_MS);
}

/* Run a command; its exit status (or -1). */
static int run(const char *const *argv)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                execvp(argv[0], (char *const *)argv);
                _exit(127);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static mode_t file_mode(const char *path)
{
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        return st.st_mode & 07777;
}

static void test_files(void **state)
{
        fixture *f = *state;
        _cleanup_free_ char *ca_crt = path_join(f->dir, "ca.crt");
        _cleanup_free_ char *ca_key = path_join(f->dir, "ca.key");
        _cleanup_free_ char *srv_crt = path_join(f->dir, "server.crt");
        _cleanup_free_ char *srv_key = path_join(f->dir, "server.key");
        _cleanup_free_ char *cli_crt = path_join(f->dir, "client.crt");
        _cleanup_free_ char *cli_key = path_join(f->dir, "client.key");
        assert_int_equal(pki_write_pem(ca_crt, ca_key, f->ca, f->ca_key), 0);
        assert_int_equal(pki_write_pem(srv_crt, srv_key, f->server, f->server_key), 0);
        assert_int_equal(pki_write_pem(cli_crt, cli_key, f->client, f->client_key), 0);

        assert_int_equal(file_mode(ca_key), 0600);
        assert_int_equal(file_mode(srv_key), 0600);
        assert_int_equal(file_mode(cli_key), 0600);
        assert_int_equal(file_mode(srv_crt) & 0600, 0600);
        /* Rewriting an existing key keeps it private. */
        assert_int_equal(chmod(srv_key, 0644), 0);
        assert_int_equal(pki_write_pem(NULL, srv_key, NULL, f->server_key), 0);
        assert_int_equal(file_mode(srv_key), 0600);

        /* The real openssl command agrees. */
        const char *verify[] = {"openssl", "verify", "-CAfile", ca_crt, srv_crt, cli_crt, NULL};
        assert_int_equal(run(verify), 0);
        const char *as_server[] = {"openssl", "verify", "-purpose", "sslserver",
                                   "-CAfile", ca_crt,   srv_crt,    NULL};
        assert_int_equal(run(as_server), 0);
        const char *client_as_server[] = {"openssl", "verify", "-purpose", "sslserver",
                                          "-CAfile", ca_crt,   cli_crt,    NULL};
        assert_int_not_equal(run(client_as_server), 0);
        const char *key_check[] = {"openssl", "pkey", "-in", srv_key, "-noout", NULL};
        assert_int_equal(run(key_check), 0);

        /* And loading gives back the same certificate and a matching key. */
        pki_cert *loaded = NULL;
        pki_key *key = NULL;
        assert_int_equal(pki_cert_load(srv_crt, &loaded), 0);
        assert_int_equal(X509_cmp(pki_cert_x509(loaded), pki_cert_x509(f->server)), 0);
        assert_int_equal(pki_key_load(srv_key, &key), 0);
        assert_true(pki_key_matches(key, loaded));
        assert_int_equal(pki_cert_verify(f->ca, loaded), 0);
        pki_cert_free(loaded);
        pki_key_free(key);

        /* PEM text in memory round-trips too. */
        _cleanup_free_ char *pem = NULL;
        assert_int_equal(pki_cert_to_pem(f->client, &pem), 0);
        assert_true(strneq(pem, "-----BEGIN CERTIFICATE-----", 27));
        assert_int_equal(pki_cert_from_pem(pem, strlen(pem), "client PEM", &loaded), 0);
        assert_int_equal(X509_cmp(pki_cert_x509(loaded), pki_cert_x509(f->client)), 0);
        pki_cert_free(loaded);
        char *key_pem = NULL;
        assert_int_equal(pki_key_to_pem(f->client_key, &key_pem), 0);
        assert_true(strneq(key_pem, "-----BEGIN PRIVATE KEY-----", 27));
        free(key_pem);
}

/* A CA kept in a folder, and the check that a leaf folder is still good. */
static void test_folders(void **state)
{
        fixture *f = *state;
        _cleanup_free_ char *ca_dir = path_join(f->dir, "ca-store");
        _cleanup_free_ char *leaf = path_join(f->dir, "leaf");
        pki_key *k1 = NULL, *k2 = NULL;
        pki_cert *c1 = NULL, *c2 = NULL;

        /* created on first use, loaded (the same CA) afterwards */
        assert_int_equal(pki_ca_load_or_create(ca_dir, "store CA", 30, &k1, &c1), 0);
        _cleanup_free_ char *key_path = path_join(ca_dir, "ca.key");
        assert_int_equal(file_mode(key_path), 0600);
        assert_int_equal(pki_ca_load_or_create(ca_dir, "other", 30, &k2, &c2), 0);
        assert_int_equal(X509_cmp(pki_cert_x509(c1), pki_cert_x509(c2)), 0);
        assert_true(pki_key_matches(k2, c1));
        pki_key_free(k2);
        pki_cert_free(c2);
        k2 = NULL;
        c2 = NULL;

        /* a leaf from it: current, with its names; not for other names, another CA, or soon */
        assert_int_equal(mkdir_p(leaf, 0700), 0);
        _cleanup_free_ char *crt = path_join(leaf, "tls.crt");
        _cleanup_free_ char *key = path_join(leaf, "tls.key");
        _cleanup_free_ char *cacrt = path_join(leaf, "ca.crt");
        const char *const dns[] = {"a.example", NULL};
        const char *const ips[] = {"127.0.0.1", NULL};
        pki_cert_request req = {
            .cn = "a", .dns_names = dns, .ip_addresses = ips, .days = 10, .server = true};
        assert_int_equal(pki_cert_issue(c1, k1, &req, &k2, &c2), 0);
        assert_int_equal(pki_write_pem(crt, key, c2, k2), 0);
        assert_false(
            pki_leaf_is_current(leaf, c1, NULL, NULL, 86400, NOW_MS())); /* no ca.crt yet */
        assert_int_equal(pki_write_pem(cacrt, NULL, c1, NULL), 0);
        assert_true(pki_leaf_is_current(leaf, c1, NULL, NULL, 86400, NOW_MS()));
        assert_true(pki_leaf_is_current(leaf, c1, dns, ips, 86400, NOW_MS()));
        const char *const other_dns[] = {"b.example", NULL};
        assert_false(pki_leaf_is_current(leaf, c1, other_dns, NULL, 86400, NOW_MS()));
        assert_false(pki_leaf_is_current(leaf, f->ca, NULL, NULL, 86400, NOW_MS()));
        assert_false(pki_leaf_is_current(leaf, c1, NULL, NULL, 20 * 86400,
                                         NOW_MS())); /* renew window reached */

        /* a CA key that does not belong to its certificate is refused */
        assert_int_equal(pki_write_pem(NULL, key_path, NULL, k2), 0);
        pki_key *k3 = NULL;
        pki_cert *c3 = NULL;
        assert_int_equal(pki_ca_load_or_create(ca_dir, "store CA", 30, &k3, &c3), -EBADMSG);
        assert_non_null(strstr(pki_last_error(), "does not belong"));
        assert_null(k3);
        pki_key_free(k1);
        pki_cert_free(c1);
        pki_key_free(k2);
        pki_cert_free(c2);
}

static void test_bad_requests(void **state)
{
        fixture *f = *state;
        pki_key *k = NULL;
        pki_cert *c = NULL;
        assert_int_equal(pki_ca_create("", 10, &k, &c), -EINVAL);
        assert_non_null(strstr(pki_last_error(), "common name"));
        assert_int_equal(pki_ca_create("x", 0, &k, &c), -EINVAL);
        assert_non_null(strstr(pki_last_error(), "days"));
        assert_int_equal(pki_ca_create("x", PKI_MAX_DAYS + 1, &k, &c), -EINVAL);
        char long_cn[80];
        memset(long_cn, 'a', sizeof(long_cn) - 1);
        long_cn[sizeof(long_cn) - 1] = '\0';
        assert_int_equal(pki_ca_create(long_cn, 10, &k, &c), -EINVAL);
        assert_int_equal(pki_ca_create("bad\ncn", 10, &k, &c), -EINVAL);
        assert_null(k);
        assert_null(c);

        const char *bad_ip[] = {"300.1.1.1", NULL};
        pki_cert_request req = {.cn = "x", .ip_addresses = bad_ip, .days = 1, .server = true};
        assert_int_equal(pki_cert_issue(f->ca, f->ca_key, &req, &k, &c), -EINVAL);
        assert_non_null(strstr(pki_last_error(), "300.1.1.1"));

        const char *const bad_dns[][2] = {{"a,IP:1.2.3.4", NULL},
                                          {"foo bar", NULL},
                                          {"-lead.example", NULL},
                                          {"a..b", NULL},
                                          {"", NULL}};
        for (size_t i = 0; i < ARRAY_SIZE(bad_dns); i++) {
                pki_cert_request r = {
                    .cn = "x", .dns_names = bad_dns[i], .days = 1, .client = true};
                assert_int_equal(pki_cert_issue(f->ca, f->ca_key, &r, &k, &c), -EINVAL);
                assert_non_null(strstr(pki_last_error(), "DNS name"));
        }
        const char *wild[] = {"*.etcd.svc", NULL};
        pki_cert_request ok = {.cn = "x", .dns_names = wild, .days = 1, .server = true};
        assert_int_equal(pki_cert_issue(f->ca, f->ca_key, &ok, &k, &c), 0);
        pki_cert_free(c);
        pki_key_free(k);
        k = NULL;
        c = NULL;

        pki_cert_request neither = {.cn = "x", .days = 1};
        assert_int_equal(pki_cert_issue(f->ca, f->ca_key, &neither, &k, &c), -EINVAL);
        /* A CA certificate with somebody else's key is refused. */
        pki_cert_request fine = {.cn = "x", .days = 1, .client = true};
        assert_int_equal(pki_cert_issue(f->ca, f->server_key, &fine, &k, &c), -EINVAL);
        assert_null(k);
        assert_null(c);
}

static void test_bad_files(void **state)
{
        fixture *f = *state;
        pki_cert *c = NULL;
        pki_key *k = NULL;
        _cleanup_free_ char *missing = path_join(f->dir, "missing.crt");
        assert_int_equal(pki_cert_load(missing, &c), -ENOENT);
        assert_non_null(strstr(pki_last_error(), missing));

        _cleanup_free_ char *junk = path_join(f->dir, "junk.pem");
        const char *text = "-----BEGIN CERTIFICATE-----\nnot base64 at all\n"
                           "-----END CERTIFICATE-----\n";
        assert_int_equal(write_file_atomic(junk, text, strlen(text), 0644), 0);
        assert_int_equal(pki_cert_load(junk, &c), -EBADMSG);
        assert_non_null(strstr(pki_last_error(), "not a PEM certificate"));
        /* OpenSSL's own error strings never leak. */
        assert_null(strstr(pki_last_error(), "error:"));
        assert_int_equal(pki_key_load(junk, &k), -EBADMSG);
        assert_null(strstr(pki_last_error(), "error:"));

        /* A certificate is not a key, and an encrypted key is refused, not prompted for. */
        _cleanup_free_ char *crt = path_join(f->dir, "only.crt");
        assert_int_equal(pki_write_pem(crt, NULL, f->client, NULL), 0);
        assert_int_equal(pki_key_load(crt, &k), -EBADMSG);
        _cleanup_free_ char *enc = path_join(f->dir, "enc.key");
        const char *genkey[] = {"openssl", "genpkey",  "-algorithm",
                                "EC",      "-pkeyopt", "ec_paramgen_curve:P-256",
                                "-aes256", "-pass",    "pass:secret-passphrase",
                                "-out",    enc,        NULL};
        assert_int_equal(run(genkey), 0);
        assert_int_equal(pki_key_load(enc, &k), -EBADMSG);
        assert_null(strstr(pki_last_error(), "secret-passphrase"));
        assert_null(c);
        assert_null(k);

        /* Writing into a folder that does not exist fails cleanly. */
        _cleanup_free_ char *nowhere = path_join(f->dir, "no/such/dir/x.crt");
        assert_int_equal(pki_write_pem(nowhere, NULL, f->client, NULL), -ENOENT);
        assert_non_null(strstr(pki_last_error(), "cannot write"));
}

/* Half a CA (a writer killed between ca.crt and ca.key) is absent unless members rely on it. */
static void test_half_a_ca(void **state)
{
        fixture *f = *state;
        pki_key *k = NULL;
        pki_cert *c = NULL;
        for (int lone = 0; lone < 2; lone++) {
                _cleanup_free_ char *dir = xasprintf("%s/half-%d", f->dir, lone);
                _cleanup_free_ char *crt = path_join(dir, "ca.crt");
                _cleanup_free_ char *key = path_join(dir, "ca.key");
                assert_int_equal(mkdir_p(dir, 0700), 0);
                if (lone == 0)
                        assert_int_equal(pki_write_pem(crt, NULL, f->ca, NULL), 0);
                else
                        assert_int_equal(pki_write_pem(NULL, key, NULL, f->ca_key), 0);

                /* Members hold certificates it signed: a clear error, nothing replaced. */
                assert_int_equal(pki_ca_open(dir, "half CA", 30, true, &k, &c), -EBADMSG);
                assert_non_null(strstr(pki_last_error(), "incomplete"));
                assert_true(path_exists(lone == 0 ? crt : key));
                assert_false(path_exists(lone == 0 ? key : crt));

                /* Nobody relies on it: a new, whole CA. */
                assert_int_equal(pki_ca_open(dir, "half CA", 30, false, &k, &c), 0);
                assert_true(path_exists(crt) && path_exists(key));
                assert_true(pki_key_matches(k, c));
                assert_int_not_equal(X509_cmp(pki_cert_x509(c), pki_cert_x509(f->ca)), 0);
                pki_key_free(k);
                pki_cert_free(c);
                k = NULL;
                c = NULL;
        }
}

/*
 * The CA writer killed between its two files (failpoint, SIGKILL): no half
 * CA is ever visible, so the next start creates a whole one even when
 * members depend on the folder.
 */
static void test_ca_writer_killed_between_files(void **state)
{
        fixture *f = *state;
        _cleanup_free_ char *dir = path_join(f->dir, "killed");
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("GITCD_FAILPOINT", "pki.ca.between-files", 1);
                pki_key *k = NULL;
                pki_cert *c = NULL;
                (void)pki_ca_open(dir, "killed CA", 30, false, &k, &c);
                _exit(0);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
        _cleanup_free_ char *crt = path_join(dir, "ca.crt");
        _cleanup_free_ char *key = path_join(dir, "ca.key");
        assert_false(path_exists(crt));
        assert_false(path_exists(key));

        pki_key *k = NULL;
        pki_cert *c = NULL;
        assert_int_equal(pki_ca_open(dir, "killed CA", 30, true, &k, &c), 0);
        assert_true(path_exists(crt) && path_exists(key));
        assert_true(pki_key_matches(k, c));
        _cleanup_free_ char *tmp = xasprintf("%s.new", dir);
        assert_false(path_exists(tmp));
        pki_key_free(k);
        pki_cert_free(c);
}

/*
 * An existing CA imported (kubeadm's etcd CA: RSA, its key in PKCS#1 PEM,
 * made here with the openssl tool as kubeadm's layout has it): written
 * whole with the key 0600, opened as pki_ca_open() keeps it, and leaves
 * issued from it chain to it. Never over another CA, never a leaf or a
 * key that is not the CA's.
 */
static void test_ca_import(void **state)
{
        fixture *f = *state;
        _cleanup_free_ char *src = path_join(f->dir, "kubeadm");
        assert_int_equal(mkdir_p(src, 0700), 0);
        _cleanup_free_ char *cmd = xasprintf(
            "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout k8 -out ca.crt "
            "-days 3650 -subj /CN=etcd-ca -addext basicConstraints=critical,CA:TRUE "
            "-addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature 2>/dev/null && "
            "openssl rsa -traditional -in k8 -out ca.key 2>/dev/null",
            src);
        if (system(cmd) != 0)
                skip();
        _cleanup_free_ char *crt_file = path_join(src, "ca.crt");
        _cleanup_free_ char *key_file = path_join(src, "ca.key");
        _cleanup_free_ char *key_pem = NULL;
        size_t key_len = 0;
        assert_int_equal(read_file(key_file, 1 << 20, &key_pem, &key_len), 0);
        assert_non_null(strstr(key_pem, "BEGIN RSA PRIVATE KEY"));
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        assert_int_equal(pki_cert_load(crt_file, &ca), 0);
        assert_int_equal(pki_key_from_pem(key_pem, key_len, "ca.key", &key), 0);
        assert_true(pki_key_matches(key, ca));

        /* refused: a leaf, a key that is not the CA's */
        _cleanup_free_ char *dir = path_join(f->dir, "imported");
        assert_int_equal(pki_ca_import(dir, f->server, f->server_key), -EBADMSG);
        assert_int_equal(pki_ca_import(dir, ca, f->ca_key), -EBADMSG);
        assert_false(path_exists(dir));

        assert_int_equal(pki_ca_import(dir, ca, key), 0);
        assert_true(pki_ca_imported(dir)); /* never rotated by gitcd */
        _cleanup_free_ char *kf = path_join(dir, "ca.key");
        struct stat st;
        assert_int_equal(stat(kf, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        pki_key *k = NULL;
        pki_cert *c = NULL;
        assert_int_equal(pki_ca_open(dir, "not used", 30, true, &k, &c), 0);
        assert_int_equal(X509_cmp(pki_cert_x509(c), pki_cert_x509(ca)), 0);
        pki_cert_request req = {.cn = "m", .days = 1, .server = true, .client = true};
        pki_key *lk = NULL;
        pki_cert *lc = NULL;
        assert_int_equal(pki_cert_issue(c, k, &req, &lk, &lc), 0);
        assert_int_equal(pki_cert_verify(ca, lc), 0);
        pki_key_free(lk);
        pki_cert_free(lc);
        pki_key_free(k);
        pki_cert_free(c);

        /* never over a CA that is there */
        assert_int_equal(pki_ca_import(dir, f->ca, f->ca_key), -EEXIST);
        assert_int_equal(pki_ca_open(dir, "not used", 30, true, &k, &c), 0);
        assert_int_equal(X509_cmp(pki_cert_x509(c), pki_cert_x509(ca)), 0);
        pki_key_free(k);
        pki_cert_free(c);

        /* a key that is no PEM key */
        assert_int_equal(pki_key_from_pem("nope", 4, "ca.key", &k), -EBADMSG);
        assert_non_null(strstr(pki_last_error(), "ca.key"));
        explicit_bzero(key_pem, key_len);
        pki_key_free(key);
        pki_cert_free(ca);
}

/* The auto-TLS module: a leaf is issued once, kept while current, reissued for other names. */
static void test_auto_leaves(void **state)
{
        fixture *f = *state;
        etcd_cluster *c = etcd_cluster_new();
        c->namespace_ = xstrdup("prod");
        c->name = xstrdup("main");
        _cleanup_free_ char *cdir = path_join(f->dir, "cluster");
        _cleanup_free_ char *leaf = path_join(cdir, "tls/client");
        pki_auto *a = NULL;
        assert_int_equal(pki_auto_open(cdir, c, false, &a), 0);
        const char *const dns[] = {"main-0.example", NULL};
        const char *const ips[] = {"127.0.0.1", NULL};
        assert_false(pki_auto_leaf_exists(leaf));
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", dns, ips, true, true, NOW_MS()), 1);
        assert_true(pki_auto_leaf_exists(leaf));
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", dns, ips, true, true, NOW_MS()), 0);
        const char *const other[] = {"main-1.example", NULL};
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", other, ips, true, true, NOW_MS()), 1);
        assert_true(strstr(pki_auto_ca_pem(a), "BEGIN CERTIFICATE") != NULL);
        pki_auto_free(a);
        /* The same CA next time. */
        a = NULL;
        assert_int_equal(pki_auto_open(cdir, c, true, &a), 0);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", other, ips, true, true, NOW_MS()), 0);
        pki_auto_free(a);
        etcd_cluster_free(c);
}

/* How many certificates a PEM text holds. */
static int pem_count(const char *pem)
{
        int n = 0;
        for (const char *p = pem; (p = strstr(p, "BEGIN CERTIFICATE")); p++)
                n++;
        return n;
}

static pki_cert *leaf_cert(const char *dir)
{
        _cleanup_free_ char *crt = path_join(dir, "tls.crt");
        pki_cert *cert = NULL;
        assert_int_equal(pki_cert_load(crt, &cert), 0);
        return cert;
}

static pki_cert *ca_cert_in(const char *cdir, const char *sub)
{
        _cleanup_free_ char *crt = xasprintf("%s/%s/ca.crt", cdir, sub);
        pki_cert *cert = NULL;
        assert_int_equal(pki_cert_load(crt, &cert), 0);
        return cert;
}

static pki_auto *open_in_phase(const char *cdir, etcd_cluster *c, int phase)
{
        c->tls.ca_rotation_phase = phase;
        pki_auto *a = NULL;
        assert_int_equal(pki_auto_open(cdir, c, true, &a), 0);
        return a;
}

/*
 * CA rotation's folders and trust bundle: phase 1 adds a new CA to the
 * bundle (same leaf, ca.crt rewritten), phase 2 makes it the signer with
 * the same bundle (old leaves kept unless renewing), phase 3 drops the old
 * CA; a promotion killed between its two renames is finished.
 */
static void test_auto_ca_rotation(void **state)
{
        fixture *f = *state;
        etcd_cluster *c = etcd_cluster_new();
        c->namespace_ = xstrdup("prod");
        c->name = xstrdup("main");
        c->tls.provider = TLS_PROVIDER_AUTO;
        c->tls.client.enabled = true;
        _cleanup_free_ char *cdir = path_join(f->dir, "rotation");
        _cleanup_free_ char *leaf = path_join(cdir, "tls/client");
        _cleanup_free_ char *cacrt = path_join(leaf, "ca.crt");
        const char *const ips[] = {"127.0.0.1", NULL};
        pki_auto *a = open_in_phase(cdir, c, 0);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, false, NOW_MS()), 1);
        assert_int_equal(pem_count(pki_auto_ca_pem(a)), 1);
        pki_auto_free(a);
        pki_cert *old = ca_cert_in(cdir, "pki");
        _cleanup_free_ char *v0 = NULL, *v1 = NULL, *v2 = NULL, *v3 = NULL;
        c->tls.ca_rotation_phase = 0;
        assert_int_equal(pki_auto_trust_version(cdir, c, true, &v0), 0);

        /* 1: the bundle old+new; the leaf stays, its ca.crt becomes the bundle. */
        a = open_in_phase(cdir, c, 1);
        assert_int_equal(pem_count(pki_auto_ca_pem(a)), 2);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, false, NOW_MS()), 0);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(cacrt, 1 << 20, &text, &len), 0);
        assert_string_equal(text, pki_auto_ca_pem(a));
        pki_auto_free(a);
        pki_cert *incoming = ca_cert_in(cdir, "pki-next");
        assert_int_equal(pki_auto_trust_version(cdir, c, true, &v1), 0);
        assert_string_not_equal(v0, v1);

        /* 2: the new CA signs; the bundle (so the trust version) is the same. */
        a = open_in_phase(cdir, c, 2);
        assert_int_equal(pem_count(pki_auto_ca_pem(a)), 2);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, false, NOW_MS()), 0);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, true, NOW_MS()), 1);
        pki_cert *l = leaf_cert(leaf);
        assert_int_equal(pki_cert_verify(incoming, l), 0);
        assert_int_not_equal(pki_cert_verify(old, l), 0);
        pki_cert_free(l);
        pki_auto_free(a);
        assert_int_equal(pki_auto_trust_version(cdir, c, true, &v2), 0);
        assert_string_equal(v1, v2);

        /* A promotion killed between its renames: pki/ missing, finished on the next open. */
        _cleanup_free_ char *cur = path_join(cdir, "pki");
        _cleanup_free_ char *nxt = path_join(cdir, "pki-next");
        _cleanup_free_ char *ret = path_join(cdir, "pki-old");
        assert_int_equal(rename(cur, nxt), 0);
        assert_false(path_exists(cur));
        a = open_in_phase(cdir, c, 2);
        assert_false(path_exists(nxt));
        assert_true(path_exists(ret));
        pki_auto_free(a);

        /* 3: the old CA and its key are gone; the bundle is the new CA alone. */
        a = open_in_phase(cdir, c, 3);
        assert_false(path_exists(ret));
        assert_int_equal(pem_count(pki_auto_ca_pem(a)), 1);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, false, NOW_MS()), 0);
        free(text);
        text = NULL;
        assert_int_equal(read_file(cacrt, 1 << 20, &text, &len), 0);
        assert_string_equal(text, pki_auto_ca_pem(a));
        pki_auto_free(a);
        pki_cert *signer = ca_cert_in(cdir, "pki");
        pki_cert *l2 = leaf_cert(leaf);
        assert_int_equal(pki_cert_verify(signer, l2), 0);
        pki_cert_free(l2);
        assert_int_equal(pki_auto_trust_version(cdir, c, true, &v3), 0);
        assert_string_not_equal(v2, v3);

        /* Finished (phase 0 again): nothing moves; a second rotation starts like the first. */
        a = open_in_phase(cdir, c, 0);
        assert_int_equal(pem_count(pki_auto_ca_pem(a)), 1);
        pki_auto_free(a);
        a = open_in_phase(cdir, c, 1);
        assert_int_equal(pem_count(pki_auto_ca_pem(a)), 2);
        assert_true(path_exists(nxt));
        pki_auto_free(a);

        pki_cert_free(signer);
        pki_cert_free(incoming);
        pki_cert_free(old);
        etcd_cluster_free(c);
}

/*
 * Lifetimes in seconds: a 60 s leaf in a 40 s window is reissued at once
 * (a new serial), the new set replaces the folder whole (no .next left),
 * and an expired leaf is reissued too.
 */
static void test_auto_seconds_and_renewal(void **state)
{
        fixture *f = *state;
        etcd_cluster *c = etcd_cluster_new();
        c->namespace_ = xstrdup("prod");
        c->name = xstrdup("main");
        c->tls.validity_seconds = 3600;
        c->tls.renew_before_seconds = 60;
        int64_t life, renew;
        pki_auto_lifetime(c, &life, &renew);
        assert_int_equal(life, 3600);
        assert_int_equal(renew, 60);
        _cleanup_free_ char *cdir = path_join(f->dir, "seconds");
        _cleanup_free_ char *leaf = path_join(cdir, "tls/peer");
        _cleanup_free_ char *next = path_join(cdir, "tls/peer.next");
        pki_auto *a = NULL;
        assert_int_equal(pki_auto_open(cdir, c, false, &a), 0);
        const char *const ips[] = {"127.0.0.1", NULL};
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, true, NOW_MS()), 1);
        int64_t not_after = 0;
        _cleanup_free_ char *serial1 = NULL;
        assert_int_equal(pki_leaf_info(leaf, &not_after, &serial1), 0);
        int64_t left = not_after - NOW_MS();
        assert_true(left > 3500 * 1000LL && left <= 3601 * 1000LL);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, true, NOW_MS()), 0);
        pki_auto_free(a);

        /* Inside the window: reissued, with a new serial, in one piece. */
        c->tls.validity_seconds = 60;
        c->tls.renew_before_seconds = 3500;
        pki_auto_lifetime(c, &life, &renew);
        assert_int_equal(renew, 20); /* a window not shorter than the life: a third */
        c->tls.renew_before_seconds = 40;
        a = NULL;
        assert_int_equal(pki_auto_open(cdir, c, true, &a), 0);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, true, NOW_MS()),
                         0); /* 3600 s left */
        pki_auto_free(a);
        c->tls.validity_seconds = 7200;
        c->tls.renew_before_seconds = 3600;
        a = NULL;
        assert_int_equal(pki_auto_open(cdir, c, true, &a), 0);
        /* Without renew (the pass-level sync), a leaf in its window is kept. */
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, false, NOW_MS()), 0);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", NULL, ips, true, true, NOW_MS()), 1);
        _cleanup_free_ char *serial2 = NULL;
        assert_int_equal(pki_leaf_info(leaf, &not_after, &serial2), 0);
        assert_string_not_equal(serial1, serial2);
        assert_false(path_exists(next));
        _cleanup_free_ char *key = path_join(leaf, "tls.key");
        _cleanup_free_ char *crt = path_join(leaf, "tls.crt");
        pki_key *k = NULL;
        pki_cert *cert = NULL;
        assert_int_equal(pki_key_load(key, &k), 0);
        assert_int_equal(pki_cert_load(crt, &cert), 0);
        assert_true(pki_key_matches(k, cert));
        pki_key_free(k);
        pki_cert_free(cert);

        /* The window is judged at the time given: later, the same leaf is due. */
        _cleanup_free_ char *cacrt = path_join(cdir, "pki/ca.crt");
        pki_cert *ca = NULL;
        assert_int_equal(pki_cert_load(cacrt, &ca), 0);
        assert_true(pki_leaf_is_current(leaf, ca, NULL, ips, 3600, NOW_MS()));
        assert_false(pki_leaf_is_current(leaf, ca, NULL, ips, 3600, NOW_MS() + 3601 * 1000LL));
        pki_cert_free(ca);
        pki_auto_free(a);
        etcd_cluster_free(c);
}

/* Durations print as the coarsest exact unit, as the normalized spec shows them. */
static void test_duration_format(void **state)
{
        (void)state;
        static const struct {
                int64_t s;
                const char *text;
        } cases[] = {{60, "1m"}, {40, "40s"}, {90 * 86400, "90d"}, {5400, "90m"}, {7200, "2h"}};
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *t = duration_format_s(cases[i].s);
                assert_string_equal(t, cases[i].text);
        }
}

/*
 * The TLS material version (what a member restart must pick up) follows
 * the CA only: a reissued leaf keeps it, a new CA changes it, and a
 * cluster without auto TLS has none.
 */
static void test_auto_trust_version(void **state)
{
        fixture *f = *state;
        etcd_cluster *c = etcd_cluster_new();
        c->namespace_ = xstrdup("prod");
        c->name = xstrdup("main");
        _cleanup_free_ char *cdir = path_join(f->dir, "trust");
        _cleanup_free_ char *leaf = path_join(cdir, "tls/peer");
        _cleanup_free_ char *sentinel = xstrdup("x");
        char *none = sentinel; /* overwritten with NULL: no auto TLS, no version */
        assert_int_equal(pki_auto_trust_version(cdir, c, false, &none), 0);
        assert_null(none);
        c->tls.provider = TLS_PROVIDER_AUTO;
        c->tls.peer.enabled = true;
        _cleanup_free_ char *v1 = NULL, *v2 = NULL, *v3 = NULL;
        assert_int_equal(pki_auto_trust_version(cdir, c, false, &v1), 0);
        assert_int_equal(strlen(v1), 64);

        pki_auto *a = NULL;
        assert_int_equal(pki_auto_open(cdir, c, false, &a), 0);
        const char *const dns[] = {"main-0.example", NULL};
        const char *const other[] = {"main-1.example", NULL};
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", dns, NULL, true, true, NOW_MS()), 1);
        assert_int_equal(pki_auto_leaf(a, leaf, "main-0", other, NULL, true, true, NOW_MS()), 1);
        pki_auto_free(a);
        assert_int_equal(pki_auto_trust_version(cdir, c, true, &v2), 0);
        assert_string_equal(v2, v1);

        _cleanup_free_ char *pki_dir = path_join(cdir, "pki");
        assert_int_equal(rm_rf(pki_dir), 0);
        assert_int_equal(pki_auto_trust_version(cdir, c, false, &v3), 0);
        assert_string_not_equal(v3, v1);
        etcd_cluster_free(c);
}

/* A bundle's fingerprint is of its certificates, not of their PEM text. */
static void test_bundle_fingerprint(void **state)
{
        (void)state;
        pki_key *k1 = NULL, *k2 = NULL;
        pki_cert *c1 = NULL, *c2 = NULL;
        assert_int_equal(pki_ca_create("one", 10, &k1, &c1), 0);
        assert_int_equal(pki_ca_create("two", 10, &k2, &c2), 0);
        _cleanup_free_ char *p1 = NULL, *p2 = NULL;
        assert_int_equal(pki_cert_to_pem(c1, &p1), 0);
        assert_int_equal(pki_cert_to_pem(c2, &p2), 0);
        _cleanup_free_ char *noted = xasprintf("# CA one\n%s", p1);
        _cleanup_free_ char *both = xasprintf("%s%s", p1, p2);
        _cleanup_free_ char *f1 = NULL, *f1n = NULL, *fb = NULL, *bad = NULL;
        assert_int_equal(pki_bundle_fingerprint(p1, strlen(p1), &f1), 0);
        assert_int_equal(pki_bundle_fingerprint(noted, strlen(noted), &f1n), 0);
        assert_int_equal(pki_bundle_fingerprint(both, strlen(both), &fb), 0);
        assert_string_equal(f1, f1n);
        assert_string_not_equal(f1, fb);
        assert_int_equal(pki_bundle_fingerprint("nothing", 7, &bad), -EBADMSG);
        assert_null(bad);
        pki_cert_free(c1);
        pki_cert_free(c2);
        pki_key_free(k1);
        pki_key_free(k2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_chain_verifies),
            cmocka_unit_test(test_ca_extensions),
            cmocka_unit_test(test_sans_and_ekus),
            cmocka_unit_test(test_serials_and_validity),
            cmocka_unit_test(test_files),
            cmocka_unit_test(test_bad_requests),
            cmocka_unit_test(test_bad_files),
            cmocka_unit_test(test_folders),
            cmocka_unit_test(test_half_a_ca),
            cmocka_unit_test(test_ca_writer_killed_between_files),
            cmocka_unit_test(test_ca_import),
            cmocka_unit_test(test_auto_leaves),
            cmocka_unit_test(test_auto_ca_rotation),
            cmocka_unit_test(test_auto_seconds_and_renewal),
            cmocka_unit_test(test_duration_format),
            cmocka_unit_test(test_auto_trust_version),
            cmocka_unit_test(test_bundle_fingerprint),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
