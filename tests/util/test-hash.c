/*
 * util/hash: SHA-256 and HMAC-SHA-256 against published vectors (FIPS
 * 180-2's examples, RFC 4231's HMAC cases), a stream fed in every split
 * giving the digest of the whole, files and ranges of files, and the hex
 * form every digest gitcd records is written in.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/xalloc.h"

#define EMPTY        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ABC          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define ABC56        "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
#define ABC56_SHA256 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
#define MILLION_A    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

static void test_vectors(void **state)
{
        (void)state;
        char hex[HASH_SHA256_HEX];
        hash_sha256_hex("", 0, hex);
        assert_string_equal(hex, EMPTY);
        hash_sha256_hex(NULL, 0, hex);
        assert_string_equal(hex, EMPTY);
        hash_sha256_hex("abc", 3, hex);
        assert_string_equal(hex, ABC);
        hash_sha256_hex(ABC56, strlen(ABC56), hex);
        assert_string_equal(hex, ABC56_SHA256);
        char *a = xmalloc(1000000);
        memset(a, 'a', 1000000);
        char *big = hash_sha256_hex_new(a, 1000000);
        assert_string_equal(big, MILLION_A);
        free(big);
        free(a);

        uint8_t raw[HASH_SHA256_LEN];
        hash_sha256("abc", 3, raw);
        assert_int_equal(raw[0], 0xba);
        assert_int_equal(raw[31], 0xad);
}

static void test_stream_in_any_split(void **state)
{
        (void)state;
        size_t n = strlen(ABC56);
        for (size_t cut1 = 0; cut1 <= n; cut1++)
                for (size_t cut2 = cut1; cut2 <= n; cut2 += 7) {
                        hash_ctx *h = hash_sha256_new();
                        hash_update(h, ABC56, cut1);
                        hash_update(h, ABC56 + cut1, cut2 - cut1);
                        hash_update(h, ABC56 + cut2, n - cut2);
                        char hex[HASH_SHA256_HEX];
                        hash_final_hex(h, hex);
                        hash_free(h);
                        assert_string_equal(hex, ABC56_SHA256);
                }
        hash_ctx *h = hash_sha256_new();
        uint8_t raw[HASH_SHA256_LEN];
        hash_final(h, raw);
        hash_free(h);
        char hex[HASH_SHA256_HEX];
        hex_encode(raw, sizeof(raw), hex);
        assert_string_equal(hex, EMPTY);
        hash_free(NULL);
}

/* RFC 4231, test cases 1 and 2. */
static void test_hmac(void **state)
{
        (void)state;
        uint8_t key[20];
        memset(key, 0x0b, sizeof(key));
        char *mac = hash_hmac_sha256_hex(key, sizeof(key), "Hi There", 8);
        assert_string_equal(mac,
                            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        free(mac);
        const char *what = "what do ya want for nothing?";
        mac = hash_hmac_sha256_hex("Jefe", 4, what, strlen(what));
        assert_string_equal(mac,
                            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        free(mac);
}

static void test_hex(void **state)
{
        (void)state;
        const uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff, 0x7e};
        char hex[11];
        hex_encode(bytes, sizeof(bytes), hex);
        assert_string_equal(hex, "000fa0ff7e");
        char *s = hex_encode_new(bytes, 0);
        assert_string_equal(s, "");
        free(s);

        assert_true(hash_sha256_hex_valid(EMPTY));
        assert_false(hash_sha256_hex_valid(NULL));
        assert_false(hash_sha256_hex_valid(""));
        assert_false(hash_sha256_hex_valid(EMPTY "0"));
        char upper[] = EMPTY;
        upper[0] = 'E';
        assert_false(hash_sha256_hex_valid(upper));
        char short_one[] = EMPTY;
        short_one[63] = '\0';
        assert_false(hash_sha256_hex_valid(short_one));
        char space[] = EMPTY;
        space[10] = ' ';
        assert_false(hash_sha256_hex_valid(space));
}

static void test_files(void **state)
{
        (void)state;
        char dir[] = "/tmp/gitcd-hash-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char *path = path_join(dir, "data");
        /* Larger than one read, so the pieces meet. */
        size_t n = 600 * 1024 + 3;
        char *data = xmalloc(n);
        for (size_t i = 0; i < n; i++)
                data[i] = (char)(i * 31 + 7);
        assert_int_equal(write_file_atomic(path, data, n, 0600), 0);

        char want[HASH_SHA256_HEX], got[HASH_SHA256_HEX];
        hash_sha256_hex(data, n, want);
        int64_t size = -1;
        assert_int_equal(hash_file_sha256_hex(path, got, &size), 0);
        assert_string_equal(got, want);
        assert_int_equal(size, (int64_t)n);

        /* A range, read without moving the descriptor's offset. */
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(lseek(fd, 5, SEEK_SET), 5);
        hash_sha256_hex(data + 1000, 300000, want);
        assert_int_equal(hash_fd_sha256_hex(fd, 1000, 300000, got, &size), 0);
        assert_string_equal(got, want);
        assert_int_equal(size, 300000);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 5);
        /* To the end from an offset. */
        hash_sha256_hex(data + 7, n - 7, want);
        assert_int_equal(hash_fd_sha256_hex(fd, 7, -1, got, NULL), 0);
        assert_string_equal(got, want);
        /* A range past the end: the file shrank under the reader. */
        strcpy(got, "untouched");
        assert_int_equal(hash_fd_sha256_hex(fd, (int64_t)n - 10, 11, got, NULL), -EIO);
        assert_string_equal(got, "untouched");
        close(fd);

        /* An empty file. */
        assert_int_equal(write_file_atomic(path, "", 0, 0600), 0);
        assert_int_equal(hash_file_sha256_hex(path, got, &size), 0);
        assert_string_equal(got, EMPTY);
        assert_int_equal(size, 0);

        char *missing = path_join(dir, "missing");
        assert_int_equal(hash_file_sha256_hex(missing, got, NULL), -ENOENT);
        free(missing);
        assert_int_equal(rm_rf(dir), 0);
        free(path);
        free(data);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_vectors), cmocka_unit_test(test_stream_in_any_split),
            cmocka_unit_test(test_hmac),    cmocka_unit_test(test_hex),
            cmocka_unit_test(test_files),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
