/*
 * Unit tests for the pieces under the sources: location parsing and
 * credential redaction, base64, and known_hosts matching (plain,
 * [host]:port, wildcard, negated, hashed with the real `ssh-keygen -H`,
 * @revoked, @cert-authority) with fingerprints compared to ssh-keygen's;
 * and the request a fetch's own process reads back.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sources/fetch-request.h"
#include "sources/known-hosts.h"
#include "sources/source.h"
#include "sources/sshwire.h"
#include "sources/url.h"
#include "tests/sources/gitfix.h"
#include "util/xalloc.h"

static void parse_ok(const char *s, source_url *u)
{
        _cleanup_free_ char *err = NULL;

        if (source_url_parse(s, u, &err) < 0)
                fail_msg("%s: %s", s, err);
}

static void test_url_parse(void **state)
{
        source_url u;
        char *err = NULL;

        parse_ok("https://user:t0ken@git.example.org:8443/org/repo.git", &u);
        assert_int_equal(u.kind, SOURCE_URL_HTTPS);
        assert_string_equal(u.user, "user");
        assert_string_equal(u.password, "t0ken");
        assert_string_equal(u.host, "git.example.org");
        assert_int_equal(u.port, 8443);
        assert_string_equal(u.path, "/org/repo.git");
        assert_string_equal(u.fetch_url, "https://git.example.org:8443/org/repo.git");
        assert_string_equal(u.display, "https://git.example.org:8443/org/repo.git");
        source_url_release(&u);

        parse_ok("ssh://git:pw@[::1]:2222/srv/r.git", &u);
        assert_int_equal(u.kind, SOURCE_URL_SSH);
        assert_string_equal(u.host, "::1");
        assert_int_equal(u.port, 2222);
        assert_string_equal(u.fetch_url, "ssh://git@[::1]:2222/srv/r.git");
        source_url_release(&u);

        parse_ok("git@github.com:org/repo.git", &u);
        assert_int_equal(u.kind, SOURCE_URL_SSH);
        assert_string_equal(u.user, "git");
        assert_string_equal(u.host, "github.com");
        assert_int_equal(u.port, 0);
        assert_string_equal(u.path, "org/repo.git");
        assert_string_equal(u.display, "git@github.com:org/repo.git");
        source_url_release(&u);

        parse_ok("u:secret@host:path/r.git", &u);
        assert_string_equal(u.display, "u@host:path/r.git");
        assert_string_equal(u.password, "secret");
        source_url_release(&u);

        parse_ok("file:///srv/repo.git", &u);
        assert_int_equal(u.kind, SOURCE_URL_FILE);
        source_url_release(&u);

        parse_ok("./clusters/prod", &u);
        assert_int_equal(u.kind, SOURCE_URL_LOCAL);
        source_url_release(&u);

        parse_ok("/srv/a:b", &u); /* a slash before the colon: a path */
        assert_int_equal(u.kind, SOURCE_URL_LOCAL);
        source_url_release(&u);

        assert_int_equal(source_url_parse("ftp://host/x", &u, &err), -EINVAL);
        assert_non_null(strstr(err, "unsupported URL scheme \"ftp\""));
        free(err);
        assert_int_equal(source_url_parse("https://host:99999/x", &u, &err), -EINVAL);
        free(err);
        assert_int_equal(source_url_parse("ssh://user:pw@/x", &u, &err), -EINVAL);
        assert_null(strstr(err, "pw"));
        free(err);
}

static void test_redact(void **state)
{
        static const char *const cases[][2] = {
            {"https://x-access-token:ghp_SECRET@github.com/o/r.git", "https://github.com/o/r.git"},
            {"https://ghp_SECRET@github.com/o/r.git", "https://github.com/o/r.git"},
            {"ssh://git:SECRET@host:22/r.git", "ssh://git@host:22/r.git"},
            {"git@host:o/r.git", "git@host:o/r.git"},
            {"weird://a:SECRET@h/x", "weird://h/x"},
            {"/srv/repo", "/srv/repo"},
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *r = source_redact_url(cases[i][0]);

                assert_string_equal(r, cases[i][1]);
                assert_null(strstr(r, "SECRET"));
        }
        assert_null(source_redact_url(NULL));
}

static void test_base64(void **state)
{
        _cleanup_free_ uint8_t *out = NULL;
        _cleanup_free_ char *enc = NULL;
        size_t n;

        assert_int_equal(base64_decode("aGVsbG8=", 8, &out, &n), 0);
        assert_int_equal(n, 5);
        assert_memory_equal(out, "hello", 5);
        free(out);
        out = NULL;
        assert_int_equal(base64_decode("aGVs\nbG8", 8, &out, &n), 0); /* no padding, newline */
        assert_int_equal(n, 5);
        assert_int_equal(base64_decode("a$==", 4, &out, &n), -EINVAL);
        assert_int_equal(base64_decode("aGVsbG8=x", 9, &out, &n), -EINVAL);
        enc = base64_encode_nopad((const uint8_t *)"hello", 5);
        assert_string_equal(enc, "aGVsbG8");
}

/* known_hosts fixtures */
static char *dir;
static uint8_t *key, *other;
static size_t key_len, other_len;
static char *key_line, *other_line, *key_fp, *same_type_line;

static uint8_t *load_pub(const char *name, size_t *ret_len, char **ret_line)
{
        _cleanup_free_ char *b64 = fix_sh_out("cut -d' ' -f2 '%s/%s.pub'", dir, name);
        uint8_t *blob = NULL;

        *ret_line = fix_sh_out("cut -d' ' -f1,2 '%s/%s.pub'", dir, name);
        assert_int_equal(base64_decode(b64, strlen(b64), &blob, ret_len), 0);
        return blob;
}

static int kh_setup(void **state)
{
        fix_init();
        dir = fix_tmpdir("kh");
        if (fix_sh("ssh-keygen -q -t ed25519 -N '' -f '%s/host'", dir) != 0 ||
            fix_sh("ssh-keygen -q -t ecdsa -N '' -f '%s/other'", dir) != 0 ||
            fix_sh("ssh-keygen -q -t ed25519 -N '' -f '%s/host2'", dir) != 0)
                return -1;
        same_type_line = fix_sh_out("cut -d' ' -f1,2 '%s/host2.pub'", dir);
        key = load_pub("host", &key_len, &key_line);
        other = load_pub("other", &other_len, &other_line);
        key_fp = fix_sh_out("ssh-keygen -lf '%s/host.pub' | cut -d' ' -f2", dir);
        return 0;
}

static int kh_teardown(void **state)
{
        free(dir);
        free(key);
        free(other);
        free(key_line);
        free(other_line);
        free(same_type_line);
        free(key_fp);
        fix_cleanup();
        return 0;
}

/* Check key for host:port against a known_hosts text; returns the result, message in *msg. */
static int check(const char *text, const char *host, int port, char **msg)
{
        _cleanup_free_ char *path = xasprintf("%s/known_hosts", dir);

        fix_write(dir, "known_hosts", text);
        *msg = NULL;
        return known_hosts_check(path, host, port, key, key_len, msg);
}

static void test_known_hosts_plain(void **state)
{
        _cleanup_free_ char *t1 = xasprintf("# comment\n\n127.0.0.1 %s\n", key_line);
        _cleanup_free_ char *t2 = xasprintf("[127.0.0.1]:2222 %s\n", key_line);
        _cleanup_free_ char *t3 = xasprintf("[127.0.0.1]:2222 %s\n", same_type_line);
        _cleanup_free_ char *t5 = xasprintf("[127.0.0.1]:2222 %s\n", other_line);
        _cleanup_free_ char *t4 = xasprintf("*.example.org,!bad.example.org %s\n", key_line);
        _cleanup_free_ char *expect = NULL;
        char *msg;

        assert_int_equal(check(t1, "127.0.0.1", 22, &msg), 0);
        assert_int_equal(check(t1, "127.0.0.1", 2222, &msg), -EACCES);
        expect =
            xasprintf("host key for [127.0.0.1]:2222 is not in known_hosts (offered %s)", key_fp);
        assert_string_equal(msg, expect);
        free(msg);
        assert_int_equal(check(t2, "127.0.0.1", 2222, &msg), 0);
        assert_int_equal(check(t3, "127.0.0.1", 2222, &msg), -EACCES);
        free(expect);
        expect = xasprintf("host key for [127.0.0.1]:2222 does not match known_hosts: possible "
                           "man-in-the-middle (offered %s)",
                           key_fp);
        assert_string_equal(msg, expect);
        free(msg);
        /* only a key of another type listed: not a man-in-the-middle alarm, but refused */
        assert_int_equal(check(t5, "127.0.0.1", 2222, &msg), -EACCES);
        free(expect);
        expect = xasprintf("host key for [127.0.0.1]:2222 is not in known_hosts (offered %s, a "
                           "ssh-ed25519 key; known_hosts lists only ecdsa-sha2-nistp256 keys for "
                           "it: add its ssh-ed25519 key, e.g. from ssh-keyscan)",
                           key_fp);
        assert_string_equal(msg, expect);
        free(msg);
        assert_int_equal(check(t4, "git.EXAMPLE.org", 22, &msg), 0);
        assert_int_equal(check(t4, "bad.example.org", 22, &msg), -EACCES);
        assert_non_null(strstr(msg, "is not in known_hosts"));
        free(msg);
        assert_int_equal(check("", "127.0.0.1", 22, &msg), -EACCES);
        free(msg);
}

static void test_known_hosts_hashed(void **state)
{
        _cleanup_free_ char *t =
            xasprintf("[localhost]:2200 %s\ngit.example.org %s\n", key_line, key_line);
        _cleanup_free_ char *path = xasprintf("%s/known_hosts", dir), *hashed = NULL;
        char *msg = NULL;

        fix_write(dir, "known_hosts", t);
        assert_int_equal(fix_sh("ssh-keygen -q -H -f '%s' >/dev/null 2>&1", path), 0);
        hashed = fix_sh_out("cat '%s'", path);
        assert_non_null(strstr(hashed, "|1|"));
        assert_null(strstr(hashed, "localhost"));
        assert_int_equal(known_hosts_check(path, "localhost", 2200, key, key_len, &msg), 0);
        assert_int_equal(known_hosts_check(path, "git.example.org", 22, key, key_len, &msg), 0);
        assert_int_equal(known_hosts_check(path, "localhost", 2201, key, key_len, &msg), -EACCES);
        free(msg);
        assert_int_equal(known_hosts_check(path, "localhost", 2200, other, other_len, &msg),
                         -EACCES);
        assert_non_null(strstr(msg, "lists only ssh-ed25519 keys"));
        free(msg);
}

/*
 * Which host key to ask for: the types known_hosts lists for the host
 * (hashed names too, markers never), Ed25519 before ECDSA before RSA, then
 * whatever else the library implements, without certificates.
 */
static void test_known_hosts_algorithms(void **state)
{
        _cleanup_free_ char *t = xasprintf("[localhost]:2200 ssh-rsa AAAArsa\n"
                                           "@revoked [localhost]:2200 ssh-dss AAAAdss\n"
                                           "other.example %s\n"
                                           "[localhost]:2200 %s\n"
                                           "[localhost]:2200 %s\n",
                                           key_line, other_line, key_line);
        _cleanup_free_ char *path = xasprintf("%s/known_hosts", dir);
        fix_write(dir, "known_hosts", t);
        assert_int_equal(fix_sh("ssh-keygen -q -H -f '%s' >/dev/null 2>&1", path), 0);
        _cleanup_free_ char *hashed = fix_sh_out("cat '%s'", path);
        assert_non_null(strstr(hashed, "|1|")); /* the real keys' names are hashed now */

        _cleanup_free_ char *lines = known_hosts_lines(hashed, strlen(hashed), "localhost", 2200);
        _cleanup_free_ char *want = xasprintf("[localhost]:2200 %s\n[localhost]:2200 %s\n"
                                              "[localhost]:2200 ssh-rsa AAAArsa\n",
                                              key_line, other_line);
        assert_string_equal(lines, want);
        _cleanup_free_ char *none = known_hosts_lines(hashed, strlen(hashed), "localhost", 22);
        assert_string_equal(none, "");

        /* libssh2 1.10's list, in its order */
        static const char *const supported[] = {"ecdsa-sha2-nistp256",
                                                "ecdsa-sha2-nistp384",
                                                "ecdsa-sha2-nistp521",
                                                "ecdsa-sha2-nistp256-cert-v01@openssh.com",
                                                "ssh-ed25519",
                                                "ssh-rsa",
                                                "ssh-dss"};
        _cleanup_free_ char *algs =
            known_hosts_algorithms(path, "localhost", 2200, supported, ARRAY_SIZE(supported));
        assert_string_equal(algs, "ssh-ed25519,ecdsa-sha2-nistp256,ssh-rsa,ecdsa-sha2-nistp384,"
                                  "ecdsa-sha2-nistp521,ssh-dss");
        /* an RSA key: the SHA-2 signatures first when the library has them */
        static const char *const with_sha2[] = {"rsa-sha2-512", "rsa-sha2-256", "ssh-rsa",
                                                "ssh-ed25519"};
        _cleanup_free_ char *only_rsa = xasprintf("%s/kh-rsa", dir);
        fix_write(dir, "kh-rsa", "h ssh-rsa AAAArsa\n");
        _cleanup_free_ char *rsa =
            known_hosts_algorithms(only_rsa, "h", 22, with_sha2, ARRAY_SIZE(with_sha2));
        assert_string_equal(rsa, "rsa-sha2-512,rsa-sha2-256,ssh-rsa,ssh-ed25519");
        /* nothing listed, or no file: the library's own order */
        assert_null(
            known_hosts_algorithms(path, "elsewhere", 22, supported, ARRAY_SIZE(supported)));
        assert_null(
            known_hosts_algorithms("/nonexistent/kh", "h", 22, supported, ARRAY_SIZE(supported)));
}

static void test_known_hosts_markers(void **state)
{
        _cleanup_free_ char *t1 = xasprintf("host1 %s\n@revoked * %s\n", key_line, key_line);
        _cleanup_free_ char *t2 = xasprintf("@cert-authority host1 %s\n", key_line);
        char *msg;

        assert_int_equal(check(t1, "host1", 22, &msg), -EACCES);
        assert_non_null(strstr(msg, "@revoked"));
        free(msg);
        assert_int_equal(check(t2, "host1", 22, &msg), -EACCES);
        assert_non_null(strstr(msg, "is not in known_hosts"));
        free(msg);
        /* an unknown marker voids its line: the key is not trusted through it */
        {
                _cleanup_free_ char *t3 = xasprintf("@trusted host1 %s\n", key_line);
                _cleanup_free_ char *t4 = xasprintf("@cert-authorityx host1 %s\n", key_line);
                _cleanup_free_ char *t5 =
                    xasprintf("@revoked-not host1 %s\nhost1 %s\n", key_line, key_line);

                assert_int_equal(check(t3, "host1", 22, &msg), -EACCES);
                assert_non_null(strstr(msg, "is not in known_hosts"));
                free(msg);
                assert_int_equal(check(t4, "host1", 22, &msg), -EACCES);
                free(msg);
                /* "@revoked-not" is not @revoked: skipped, the plain line still counts */
                assert_int_equal(check(t5, "host1", 22, &msg), 0);
        }
        assert_int_equal(known_hosts_check("/nonexistent/kh", "h", 22, key, key_len, &msg),
                         -ENOENT);
        assert_non_null(strstr(msg, "/nonexistent/kh"));
        free(msg);
}

/* A fetch request read back is what was written, bytes that are not UTF-8 included. */
static void test_fetch_request(void **state)
{
        source_url u;
        parse_ok("https://user:p%C3%A4ss@git.example.org:8443/org/repo.git", &u);
        source_opts o = {
            .ref = "refs/tags/v1",
            .https_ca_file = "/etc/gitcd/\xff\x01"
                             "ca.pem",
            .https_token_env = "GIT_TOKEN",
            .use_ssh_agent = true,
            .fetch_timeout_s = 7,
            .max_fetch_bytes = (size_t)1 << 40,
            .max_fetch_objects = 12,
        };
        _cleanup_free_ char *text = fetch_request_encode(&o, &u, "/var/cache/m\n.git", 2);
        /* no secret in the clear, even in a request only gitcd reads */
        assert_null(strstr(text, u.password));
        fetch_request r;
        char *err = NULL;
        assert_int_equal(fetch_request_decode(text, strlen(text), &r, &err), 0);
        assert_int_equal(r.url.kind, SOURCE_URL_HTTPS);
        assert_string_equal(r.url.user, u.user);
        assert_string_equal(r.url.password, u.password);
        assert_string_equal(r.url.host, "git.example.org");
        assert_int_equal(r.url.port, 8443);
        assert_string_equal(r.url.fetch_url, u.fetch_url);
        assert_string_equal(r.url.display, u.display);
        assert_string_equal(r.opts.ref, "refs/tags/v1");
        assert_string_equal(r.opts.https_ca_file, o.https_ca_file);
        assert_string_equal(r.opts.https_token_env, "GIT_TOKEN");
        assert_null(r.opts.https_token_file);
        assert_null(r.opts.ssh_key_path);
        assert_true(r.opts.use_ssh_agent);
        assert_int_equal(r.opts.fetch_timeout_s, 7);
        assert_int_equal(r.opts.max_fetch_bytes, (size_t)1 << 40);
        assert_int_equal(r.opts.max_fetch_objects, 12);
        assert_string_equal(r.mirror_path, "/var/cache/m\n.git");
        assert_int_equal(r.log_level, 2);
        fetch_request_release(&r);

        /* anything else is refused, and nothing is filled in */
        static const char *const bad[] = {
            "",
            "[]",
            "{\"url\":{},\"opts\":{}}",
            "{\"url\":{\"kind\":9,\"port\":0,\"fetch_url\":\"61\",\"display\":\"61\"},"
            "\"opts\":{\"use_ssh_agent\":false,\"fetch_timeout_s\":1,"
            "\"max_fetch_bytes\":1,\"max_fetch_objects\":1},\"mirror\":\"61\","
            "\"log_level\":0}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                err = NULL;
                assert_int_equal(fetch_request_decode(bad[i], strlen(bad[i]), &r, &err), -EINVAL);
                assert_non_null(err);
                free(err);
        }
        /* the same request with a valid kind is read: the refusal above was the kind's */
        const char *good =
            "{\"url\":{\"kind\":1,\"port\":0,\"fetch_url\":\"61\",\"display\":\"61\"},"
            "\"opts\":{\"use_ssh_agent\":false,\"fetch_timeout_s\":1,"
            "\"max_fetch_bytes\":1,\"max_fetch_objects\":1},\"mirror\":\"61\","
            "\"log_level\":0}";
        assert_int_equal(fetch_request_decode(good, strlen(good), &r, &err), 0);
        assert_string_equal(r.url.fetch_url, "a");
        fetch_request_release(&r);
        /* a NUL, an odd length or a digit that is not hex in a string */
        static const char *const strings[] = {"\"6100\"", "\"610\"", "\"6g\"", "\"6A\"", "1"};
        for (size_t i = 0; i < ARRAY_SIZE(strings); i++) {
                _cleanup_free_ char *t = xasprintf(
                    "{\"url\":{\"kind\":1,\"port\":0,\"fetch_url\":%s,\"display\":\"61\"},"
                    "\"opts\":{\"use_ssh_agent\":false,\"fetch_timeout_s\":1,"
                    "\"max_fetch_bytes\":1,\"max_fetch_objects\":1},\"mirror\":\"61\","
                    "\"log_level\":0}",
                    strings[i]);
                err = NULL;
                assert_int_equal(fetch_request_decode(t, strlen(t), &r, &err), -EINVAL);
                free(err);
        }
        source_url_release(&u);
}

int main(void)
{
        const struct CMUnitTest plain[] = {
            cmocka_unit_test(test_url_parse),
            cmocka_unit_test(test_redact),
            cmocka_unit_test(test_base64),
        };
        const struct CMUnitTest kh[] = {
            cmocka_unit_test(test_known_hosts_plain),
            cmocka_unit_test(test_known_hosts_hashed),
            cmocka_unit_test(test_known_hosts_markers),
            cmocka_unit_test(test_known_hosts_algorithms),
            cmocka_unit_test(test_fetch_request),
        };
        int r = cmocka_run_group_tests_name("url", plain, NULL, NULL);

        return r + cmocka_run_group_tests_name("known_hosts", kh, kh_setup, kh_teardown);
}
