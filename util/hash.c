/*
 * Digests (util/hash.h). One EVP context per stream; a file is read in
 * 256 KiB pieces with pread, so hashing a snapshot of gigabytes holds one
 * piece in memory, and a range of a file (an S3 multipart part) is hashed
 * without moving the offset another reader of the same descriptor uses.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util/hash.h"
#include "util/xalloc.h"

#define READ_CHUNK (256 * 1024)

struct hash_ctx {
        EVP_MD_CTX *md;
};

void hex_encode(const void *data, size_t len, char *ret_hex)
{
        static const char digits[] = "0123456789abcdef";
        const uint8_t *d = data;
        assert(ret_hex && (data || len == 0));
        for (size_t i = 0; i < len; i++) {
                ret_hex[2 * i] = digits[d[i] >> 4];
                ret_hex[2 * i + 1] = digits[d[i] & 0xf];
        }
        ret_hex[2 * len] = '\0';
}

char *hex_encode_new(const void *data, size_t len)
{
        char *hex = xmalloc(2 * len + 1);
        hex_encode(data, len, hex);
        return hex;
}

bool hash_sha256_hex_valid(const char *s)
{
        return s && strlen(s) == 2 * HASH_SHA256_LEN &&
               strspn(s, "0123456789abcdef") == 2 * HASH_SHA256_LEN;
}

void hash_sha256(const void *data, size_t len, uint8_t ret[HASH_SHA256_LEN])
{
        unsigned int n = 0;
        assert(data || len == 0);
        if (EVP_Digest(data ? data : "", len, ret, &n, EVP_sha256(), NULL) != 1 ||
            n != HASH_SHA256_LEN)
                abort(); /* out of memory, as xmalloc would */
}

void hash_sha256_hex(const void *data, size_t len, char ret_hex[HASH_SHA256_HEX])
{
        uint8_t md[HASH_SHA256_LEN];
        hash_sha256(data, len, md);
        hex_encode(md, sizeof(md), ret_hex);
}

char *hash_sha256_hex_new(const void *data, size_t len)
{
        char *hex = xmalloc(HASH_SHA256_HEX);
        hash_sha256_hex(data, len, hex);
        return hex;
}

char *hash_hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len)
{
        uint8_t mac[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        assert(key_len <= INT32_MAX);
        if (!HMAC(EVP_sha256(), key ? key : "", (int)key_len, data ? data : (const void *)"", len,
                  mac, &n) ||
            n != HASH_SHA256_LEN)
                abort(); /* out of memory, as xmalloc would */
        return hex_encode_new(mac, n);
}

/*
 * SHA-256 fetched from OpenSSL's provider once: EVP_sha256() makes every
 * init look the algorithm up again (an idle pass hashes a few rendered
 * configurations per cluster). Never freed: the process's own.
 */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
        sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

hash_ctx *hash_sha256_new(void)
{
        pthread_once(&sha256_once, sha256_fetch);
        hash_ctx *h = XNEW(hash_ctx);
        h->md = EVP_MD_CTX_new();
        if (!h->md || EVP_DigestInit_ex(h->md, sha256_md ? sha256_md : EVP_sha256(), NULL) != 1)
                abort(); /* out of memory, as xmalloc would */
        return h;
}

void hash_update(hash_ctx *h, const void *data, size_t len)
{
        assert(h && (data || len == 0));
        if (len > 0 && EVP_DigestUpdate(h->md, data, len) != 1)
                abort();
}

void hash_final(hash_ctx *h, uint8_t ret[HASH_SHA256_LEN])
{
        unsigned int n = 0;
        assert(h);
        if (EVP_DigestFinal_ex(h->md, ret, &n) != 1 || n != HASH_SHA256_LEN)
                abort();
}

void hash_final_hex(hash_ctx *h, char ret_hex[HASH_SHA256_HEX])
{
        uint8_t md[HASH_SHA256_LEN];
        hash_final(h, md);
        hex_encode(md, sizeof(md), ret_hex);
}

void hash_free(hash_ctx *h)
{
        if (!h)
                return;
        EVP_MD_CTX_free(h->md);
        free(h);
}

int hash_fd_sha256_hex(int fd, int64_t offset, int64_t len, char ret_hex[HASH_SHA256_HEX],
                       int64_t *ret_size)
{
        assert(fd >= 0 && offset >= 0 && ret_hex);
        _cleanup_(hash_freep) hash_ctx *h = hash_sha256_new();
        _cleanup_free_ uint8_t *buf = xmalloc(READ_CHUNK);
        int64_t done = 0;
        while (len < 0 || done < len) {
                size_t want = len < 0 ? READ_CHUNK : (size_t)MIN(len - done, READ_CHUNK);
                ssize_t n = pread(fd, buf, want, offset + done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0) {
                        if (len < 0)
                                break;
                        return -EIO; /* the file ended before len bytes: it shrank */
                }
                hash_update(h, buf, (size_t)n);
                done += n;
        }
        hash_final_hex(h, ret_hex);
        if (ret_size)
                *ret_size = done;
        return 0;
}

int hash_file_sha256_hex(const char *path, char ret_hex[HASH_SHA256_HEX], int64_t *ret_size)
{
        assert(path);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return hash_fd_sha256_hex(fd, 0, -1, ret_hex, ret_size);
}
