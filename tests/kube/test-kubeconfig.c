/*
 * Kubeconfig and in-cluster loading: real files written to a temporary
 * folder, every field gitcd reads, and every error message (which must name
 * the file, the context and the missing piece, and never a secret).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "kube/kubeconfig.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *tmp;

static char *write_in(const char *name, const char *text)
{
        char *p = path_join(tmp, name);
        _cleanup_free_ char *dir = xstrdup(p);

        *strrchr(dir, '/') = '\0';
        assert_int_equal(mkdir_p(dir, 0700), 0);
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0600), 0);
        return p;
}

/* "-----BEGIN CERTIFICATE-----\nCA\n" etc. in base64. */
#define CA_PEM   "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
#define CA_B64   "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define SECRET   "s3cr3t-t0ken-value"
#define KEY_B64  "c2VjcmV0LWtleS1ieXRlcw==" /* "secret-key-bytes" */
#define CERT_B64 "Y2VydC1ieXRlcw=="         /* "cert-bytes" */

static const char *config_text = "apiVersion: v1\n"
                                 "kind: Config\n"
                                 "current-context: prod\n"
                                 "clusters:\n"
                                 "- name: prod-cluster\n"
                                 "  cluster:\n"
                                 "    server: https://10.0.0.1:6443/\n"
                                 "    certificate-authority-data: " CA_B64 "\n"
                                 "- name: dev-cluster\n"
                                 "  cluster:\n"
                                 "    server: https://dev.example:443\n"
                                 "    certificate-authority: pki/ca.crt\n"
                                 "- name: lab-cluster\n"
                                 "  cluster:\n"
                                 "    server: https://lab.example\n"
                                 "    insecure-skip-tls-verify: true\n"
                                 "users:\n"
                                 "- name: admin\n"
                                 "  user:\n"
                                 "    client-certificate-data: " CERT_B64 "\n"
                                 "    client-key-data: " KEY_B64 "\n"
                                 "- name: dev\n"
                                 "  user:\n"
                                 "    client-certificate: pki/dev.crt\n"
                                 "    client-key: pki/dev.key\n"
                                 "- name: robot\n"
                                 "  user:\n"
                                 "    tokenFile: tokens/robot\n"
                                 "- name: inline\n"
                                 "  user:\n"
                                 "    token: " SECRET "\n"
                                 "contexts:\n"
                                 "- name: prod\n"
                                 "  context: {cluster: prod-cluster, user: admin, namespace: db}\n"
                                 "- name: dev\n"
                                 "  context: {cluster: dev-cluster, user: dev}\n"
                                 "- name: lab\n"
                                 "  context: {cluster: lab-cluster, user: robot, namespace: lab}\n"
                                 "- name: lab-inline\n"
                                 "  context: {cluster: lab-cluster, user: inline}\n"
                                 "- name: orphan\n"
                                 "  context: {cluster: nowhere, user: admin}\n"
                                 "- name: nouser\n"
                                 "  context: {cluster: prod-cluster, user: ghost}\n";

static char *config_path;

static int setup(void **state)
{
        char tmpl[] = "/tmp/gitcd-kubeconfig-XXXXXX";

        tmp = xstrdup(mkdtemp(tmpl));
        config_path = write_in("kube/config", config_text);
        free(write_in("kube/pki/ca.crt", CA_PEM));
        free(write_in("kube/pki/dev.crt", "cert"));
        free(write_in("kube/pki/dev.key", "key"));
        free(write_in("kube/tokens/robot", "  robot-token-1\n"));
        return 0;
}

static int teardown(void **state)
{
        rm_rf(tmp);
        free(tmp);
        free(config_path);
        return 0;
}

static void test_current_context_data_fields(void **state)
{
        kube_config *cfg = NULL;
        char *err = NULL;

        assert_int_equal(kube_config_load(config_path, NULL, &cfg, &err), 0);
        assert_null(err);
        assert_string_equal(cfg->context, "prod");
        assert_string_equal(cfg->server, "https://10.0.0.1:6443");
        assert_string_equal(cfg->namespace, "db");
        assert_int_equal(cfg->ca_len, strlen(CA_PEM));
        assert_memory_equal(cfg->ca_data, CA_PEM, cfg->ca_len);
        assert_null(cfg->ca_file);
        assert_string_equal(cfg->cert_data, "cert-bytes");
        assert_string_equal(cfg->key_data, "secret-key-bytes");
        assert_int_equal(cfg->key_len, 16);
        assert_null(cfg->token);
        assert_false(cfg->insecure_skip_tls_verify);
        kube_config_free(cfg);
}

static void test_context_override_relative_paths(void **state)
{
        _cleanup_free_ char *ca = path_join(tmp, "kube/pki/ca.crt");
        _cleanup_free_ char *crt = path_join(tmp, "kube/pki/dev.crt");
        _cleanup_free_ char *key = path_join(tmp, "kube/pki/dev.key");
        kube_config *cfg = NULL;

        assert_int_equal(kube_config_load(config_path, "dev", &cfg, NULL), 0);
        assert_string_equal(cfg->server, "https://dev.example:443");
        assert_string_equal(cfg->namespace, "default");
        assert_string_equal(cfg->ca_file, ca);
        assert_string_equal(cfg->cert_file, crt);
        assert_string_equal(cfg->key_file, key);
        assert_null(cfg->ca_data);
        kube_config_free(cfg);
}

static void test_token_file_and_insecure(void **state)
{
        _cleanup_free_ char *tf = path_join(tmp, "kube/tokens/robot");
        _cleanup_free_ char *token = NULL;
        kube_config *cfg = NULL;

        assert_int_equal(kube_config_load(config_path, "lab", &cfg, NULL), 0);
        assert_true(cfg->insecure_skip_tls_verify);
        assert_string_equal(cfg->namespace, "lab");
        assert_string_equal(cfg->token_file, tf);
        assert_null(cfg->token);
        assert_int_equal(kube_config_read_token(cfg, &token, NULL), 0);
        assert_string_equal(token, "robot-token-1");
        kube_config_free(cfg);

        assert_int_equal(kube_config_load(config_path, "lab-inline", &cfg, NULL), 0);
        assert_string_equal(cfg->token, SECRET);
        kube_config_free(cfg);
}

static void test_env_and_default_path(void **state)
{
        _cleanup_free_ char *list = xasprintf("%s:/nonexistent/second", config_path);
        _cleanup_free_ char *home = xstrdup(getenv("HOME") ? getenv("HOME") : "");
        _cleanup_free_ char *p = NULL, *q = NULL;
        kube_config *cfg = NULL;

        setenv("KUBECONFIG", list, 1);
        p = kube_config_default_path();
        assert_string_equal(p, config_path);
        assert_int_equal(kube_config_load(NULL, "dev", &cfg, NULL), 0);
        assert_string_equal(cfg->source, config_path);
        kube_config_free(cfg);

        setenv("KUBECONFIG", "::", 1);
        setenv("HOME", "/home/someone", 1);
        q = kube_config_default_path();
        assert_string_equal(q, "/home/someone/.kube/config");
        unsetenv("KUBECONFIG");
        setenv("HOME", home, 1);
}

/* Load expecting failure; the message must contain every needle and not the secret. */
static void expect_error(const char *path, const char *context, int want, ...)
{
        kube_config *cfg = NULL;
        char *err = NULL;
        const char *needle;
        va_list ap;

        assert_int_equal(kube_config_load(path, context, &cfg, &err), want);
        assert_null(cfg);
        assert_non_null(err);
        va_start(ap, want);
        while ((needle = va_arg(ap, const char *))) {
                if (!strstr(err, needle))
                        fail_msg("message \"%s\" lacks \"%s\"", err, needle);
        }
        va_end(ap);
        assert_null(strstr(err, SECRET));
        assert_null(strstr(err, KEY_B64));
        assert_null(strstr(err, "secret-key-bytes"));
        free(err);
}

static void test_errors(void **state)
{
        _cleanup_free_ char *missing = path_join(tmp, "nope/config");
        _cleanup_free_ char *empty = write_in("empty", "");
        _cleanup_free_ char *bad = write_in("bad", "clusters: [\n");
        _cleanup_free_ char *nocur = write_in(
            "nocur", "contexts:\n- name: a\n  context: {cluster: c}\n- name: b\n  context: {}\n");
        _cleanup_free_ char *noserver = write_in(
            "noserver", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\n"
                        "clusters:\n- name: c\n  cluster: {}\n");
        _cleanup_free_ char *badb64 = write_in(
            "badb64", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
                      "clusters:\n- name: c\n  cluster: {server: 'https://x'}\n"
                      "users:\n- name: u\n  user: {client-key-data: '" SECRET "!', "
                      "client-certificate-data: " CERT_B64 "}\n");
        _cleanup_free_ char *nokey = write_in(
            "nokey", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
                     "clusters:\n- name: c\n  cluster: {server: 'https://x'}\n"
                     "users:\n- name: u\n  user: {client-certificate-data: " CERT_B64 "}\n");
        _cleanup_free_ char *badca =
            write_in("badca", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\n"
                              "clusters:\n- name: c\n  cluster: {server: 'https://x', "
                              "certificate-authority: missing/ca.crt}\n");
        _cleanup_free_ char *exec = write_in(
            "exec", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"
                    "clusters:\n- name: c\n  cluster: {server: 'https://x'}\n"
                    "users:\n- name: u\n  user: {exec: {command: aws}}\n");
        _cleanup_free_ char *scheme =
            write_in("scheme", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\n"
                               "clusters:\n- name: c\n  cluster: {server: 'ftp://x'}\n");
        _cleanup_free_ char *nohost =
            write_in("nohost", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\n"
                               "clusters:\n- name: c\n  cluster: {server: 'https://'}\n");

        expect_error(config_path, "x", -ENOENT, "context \"x\" not found in ", config_path,
                     "(contexts: prod, dev, lab, lab-inline, orphan, nouser)", NULL);
        expect_error(config_path, "orphan", -ENOENT,
                     "cluster \"nowhere\" of context \"orphan\" not found in ", config_path,
                     "(clusters: prod-cluster, dev-cluster, lab-cluster)", NULL);
        expect_error(config_path, "nouser", -ENOENT,
                     "user \"ghost\" of context \"nouser\" not found in ", config_path,
                     "(users: admin, dev, robot, inline)", NULL);
        expect_error(missing, NULL, -ENOENT, "kubeconfig ", missing, "does not exist", NULL);
        expect_error(empty, NULL, -EINVAL, empty, "empty", NULL);
        expect_error(bad, NULL, -EINVAL, "cannot read kubeconfig", bad, NULL);
        expect_error(nocur, NULL, -ENOENT, "no current-context", "(contexts: a, b)", NULL);
        expect_error(nocur, "b", -EINVAL, "context \"b\"", "names no cluster", NULL);
        expect_error(noserver, NULL, -EINVAL, "cluster \"c\" of context \"a\"", noserver,
                     "has no server", NULL);
        expect_error(badb64, NULL, -EINVAL, "user \"u\" of context \"a\"",
                     "client-key-data is not valid base64", NULL);
        expect_error(nokey, NULL, -EINVAL, "user \"u\"", "without a client key", NULL);
        expect_error(badca, NULL, -ENOENT, "certificate-authority", "missing/ca.crt",
                     "No such file", NULL);
        expect_error(exec, NULL, -EINVAL, "credential plugin", NULL);
        expect_error(scheme, NULL, -EINVAL, "ftp://x", "https://", NULL);
        expect_error(nohost, NULL, -EINVAL, "server \"https://\" names no host", NULL);
}

static void test_token_file_errors(void **state)
{
        _cleanup_free_ char *empty = write_in("tokens/empty", " \n");
        kube_config cfg = {.source = (char *)"cfg", .token_file = empty};
        char *token = NULL, *err = NULL;

        assert_int_equal(kube_config_read_token(&cfg, &token, &err), -EINVAL);
        assert_non_null(strstr(err, "is empty"));
        free(err);
        err = NULL;
        cfg.token_file = (char *)"/nonexistent/token";
        assert_int_equal(kube_config_read_token(&cfg, &token, &err), -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/token"));
        assert_null(token);
        free(err);
}

static void test_in_cluster(void **state)
{
        _cleanup_free_ char *base = path_join(tmp, "sa");
        _cleanup_free_ char *tok = write_in("sa/token", "sa-token\n");
        _cleanup_free_ char *ca = write_in("sa/ca.crt", CA_PEM);
        _cleanup_free_ char *ns = write_in("sa/namespace", "etcd-system\n");
        _cleanup_free_ char *token = NULL;
        kube_config *cfg = NULL;
        char *err = NULL;

        unsetenv("KUBERNETES_SERVICE_HOST");
        setenv("KUBERNETES_SERVICE_PORT", "443", 1);
        assert_int_equal(kube_config_in_cluster(base, &cfg, &err), -ENOENT);
        assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
        free(err);

        setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
        assert_int_equal(kube_config_in_cluster(base, &cfg, &err), 0);
        assert_string_equal(cfg->server, "https://10.96.0.1:443");
        assert_string_equal(cfg->ca_file, ca);
        assert_string_equal(cfg->token_file, tok);
        assert_string_equal(cfg->namespace, "etcd-system");
        assert_int_equal(kube_config_read_token(cfg, &token, NULL), 0);
        assert_string_equal(token, "sa-token");
        kube_config_free(cfg);

        setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
        assert_int_equal(kube_config_in_cluster(base, &cfg, NULL), 0);
        assert_string_equal(cfg->server, "https://[fd00::1]:443");
        kube_config_free(cfg);

        unlink(tok);
        assert_int_equal(kube_config_in_cluster(base, &cfg, &err), -ENOENT);
        assert_non_null(strstr(err, tok));
        free(err);
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
}

static void test_base64(void **state)
{
        char *out = NULL;
        size_t len = 0;

        assert_int_equal(kube_base64_decode("aGVs\nbG8=\n", &out, &len), 0);
        assert_int_equal(len, 5);
        assert_string_equal(out, "hello");
        free(out);
        assert_int_equal(kube_base64_decode("aGk=", &out, &len), 0);
        assert_int_equal(len, 2);
        free(out);
        assert_int_equal(kube_base64_decode("aGVsbG8", &out, &len), -EINVAL);
        assert_int_equal(kube_base64_decode("a!==", &out, &len), -EINVAL);
        assert_int_equal(kube_base64_decode("", &out, &len), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_current_context_data_fields),
            cmocka_unit_test(test_context_override_relative_paths),
            cmocka_unit_test(test_token_file_and_insecure),
            cmocka_unit_test(test_env_and_default_path),
            cmocka_unit_test(test_errors),
            cmocka_unit_test(test_token_file_errors),
            cmocka_unit_test(test_in_cluster),
            cmocka_unit_test(test_base64),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
