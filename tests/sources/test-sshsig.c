/*
 * SSH signature verification against signatures made by the real
 * `ssh-keygen -Y sign`, and its behaviour on hostile input: every single
 * byte of a valid signature flipped, every truncation, oversized length
 * fields, garbage and other armor types must give a clear "not verified"
 * verdict, never a crash, a leak or a false "verified".
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sources/sshsig.h"
#include "sources/sshwire.h"
#include "tests/sources/gitfix.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static char *dir, *allowed;
static const char *const key_types[][2] = {
    {"ed25519", "-t ed25519"},
    {"ecdsa", "-t ecdsa -b 384"},
    {"rsa", "-t rsa -b 2048"},
};
static const char payload[] = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
                              "author A <a@example.org> 1700000000 +0000\n"
                              "committer A <a@example.org> 1700000000 +0000\n\nsigned\n";

static int setup(void **state)
{
        strbuf sb = STRBUF_INIT;

        fix_init();
        dir = fix_tmpdir("sshsig");
        fix_write(dir, "payload", payload);
        for (size_t i = 0; i < ARRAY_SIZE(key_types); i++) {
                _cleanup_free_ char *pub = NULL;

                if (fix_sh("cd '%s' && ssh-keygen -q %s -N '' -f %s && "
                           "ssh-keygen -q -Y sign -n git -f %s payload && mv payload.sig %s.sig",
                           dir, key_types[i][1], key_types[i][0], key_types[i][0],
                           key_types[i][0]) != 0)
                        return -1;
                pub = fix_sh_out("cut -d' ' -f1,2 '%s/%s.pub'", dir, key_types[i][0]);
                sb_printf(&sb, "%s@example.org %s\n", key_types[i][0], pub);
        }
        fix_sh("cd '%s' && ssh-keygen -q -t ed25519 -N '' -f other && "
               "ssh-keygen -q -Y sign -n file -f ed25519 payload && mv payload.sig file-ns.sig",
               dir);
        fix_write(dir, "allowed_signers", sb_str(&sb));
        sb_release(&sb);
        allowed = xasprintf("%s/allowed_signers", dir);
        return 0;
}

static int teardown(void **state)
{
        free(dir);
        free(allowed);
        fix_cleanup();
        return 0;
}

static char *load(const char *name, size_t *ret_len)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        char *data = NULL;

        assert_int_equal(read_file(path, 1 << 20, &data, ret_len), 0);
        return data;
}

/* Verify; asserts the call itself succeeds and returns the verdict. */
static bool verify(const char *armored, size_t len, const char *data, sshsig_verdict *v)
{
        char *err = NULL;
        int r = sshsig_verify(armored, len, data, strlen(data), allowed, 1700000000, v, &err);

        if (r < 0)
                fail_msg("sshsig_verify: %s", err);
        assert_non_null(v->reason);
        return v->verified;
}

static char *armor(const uint8_t *blob, size_t len)
{
        _cleanup_free_ char *b64 = base64_encode_nopad(blob, len);

        return xasprintf("-----BEGIN SSH SIGNATURE-----\n%s\n-----END SSH SIGNATURE-----\n", b64);
}

static void test_real_signatures(void **state)
{
        for (size_t i = 0; i < ARRAY_SIZE(key_types); i++) {
                _cleanup_free_ char *name = xasprintf("%s.sig", key_types[i][0]);
                _cleanup_free_ char *fp = NULL, *who = NULL;
                size_t len;
                _cleanup_free_ char *sig = load(name, &len);
                sshsig_verdict v = {0};

                assert_true(verify(sig, len, payload, &v));
                fp = fix_sh_out("ssh-keygen -lf '%s/%s.pub' | cut -d' ' -f2", dir, key_types[i][0]);
                who = xasprintf("%s@example.org", key_types[i][0]);
                assert_string_equal(v.fingerprint, fp);
                assert_string_equal(v.identity, who);
                sshsig_verdict_release(&v);

                /* the same signature over other data */
                assert_false(verify(sig, len, "other data", &v));
                assert_non_null(strstr(v.reason, "invalid"));
                sshsig_verdict_release(&v);
        }
}

static void test_wrong_namespace(void **state)
{
        size_t len;
        _cleanup_free_ char *sig = load("file-ns.sig", &len);
        sshsig_verdict v = {0};

        assert_false(verify(sig, len, payload, &v));
        assert_non_null(strstr(v.reason, "namespace \"file\""));
        sshsig_verdict_release(&v);
}

static void test_every_byte_flipped(void **state)
{
        for (size_t k = 0; k < ARRAY_SIZE(key_types); k++) {
                _cleanup_free_ char *name = xasprintf("%s.sig", key_types[k][0]);
                size_t len, blob_len;
                _cleanup_free_ char *sig = load(name, &len);
                _cleanup_free_ uint8_t *blob = NULL;
                const char *b = strchr(sig, '\n') + 1, *e = strstr(sig, "-----END");

                assert_int_equal(base64_decode(b, (size_t)(e - b), &blob, &blob_len), 0);
                for (size_t i = 0; i < blob_len; i++) {
                        _cleanup_free_ char *a = NULL;
                        sshsig_verdict v = {0};

                        blob[i] ^= 0x01;
                        a = armor(blob, blob_len);
                        if (verify(a, strlen(a), payload, &v))
                                fail_msg("%s: flipping byte %zu still verified", key_types[k][0],
                                         i);
                        sshsig_verdict_release(&v);
                        blob[i] ^= 0x01;
                }
                for (size_t n = 0; n < blob_len; n++) {
                        _cleanup_free_ char *a = armor(blob, n);
                        sshsig_verdict v = {0};

                        assert_false(verify(a, strlen(a), payload, &v));
                        sshsig_verdict_release(&v);
                }
        }
}

static void test_garbage(void **state)
{
        static const uint8_t huge_len[] = {'S', 'S', 'H',  'S',  'I',  'G',  0,  0,
                                           0,   1,   0xff, 0xff, 0xff, 0xff, 'x'};
        static const char *const texts[] = {
            "",
            "not a signature",
            "-----BEGIN SSH SIGNATURE-----\n",
            "-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----\n",
            "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n",
            "-----BEGIN PGP SIGNATURE-----\n\niQEz\n-----END PGP SIGNATURE-----\n",
        };
        _cleanup_free_ char *a = armor(huge_len, sizeof(huge_len));
        sshsig_verdict v = {0};

        for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
                assert_false(verify(texts[i], strlen(texts[i]), payload, &v));
                sshsig_verdict_release(&v);
        }
        assert_false(verify(a, strlen(a), payload, &v));
        assert_string_equal(v.reason, "malformed SSH signature");
        sshsig_verdict_release(&v);
        assert_false(verify(texts[5], strlen(texts[5]), payload, &v));
        assert_string_equal(v.reason, "OpenPGP signatures are not supported; sign with an SSH key");
        sshsig_verdict_release(&v);
}

static void test_allowed_signers_missing(void **state)
{
        size_t len;
        _cleanup_free_ char *sig = load("ed25519.sig", &len);
        sshsig_verdict v = {0};
        char *err = NULL;

        assert_int_equal(sshsig_verify(sig, len, payload, strlen(payload), "/nonexistent/as",
                                       1700000000, &v, &err),
                         -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/as"));
        free(err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_real_signatures),         cmocka_unit_test(test_wrong_namespace),
            cmocka_unit_test(test_every_byte_flipped),      cmocka_unit_test(test_garbage),
            cmocka_unit_test(test_allowed_signers_missing),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
