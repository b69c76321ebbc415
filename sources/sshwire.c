/*
 * OpenSSH wire-format helpers (see sshwire.h). Everything here reads
 * untrusted bytes (host keys offered by a server, signatures in commits), so
 * every read is bounds-checked through the sshbuf cursor and fails with
 * -EBADMSG instead of reading past the end.
 */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "sources/sshwire.h"
#include "util/hash.h"
#include "util/xalloc.h"

static int b64_value(char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int base64_decode(const char *s, size_t len, uint8_t **ret, size_t *ret_len)
{
        _cleanup_free_ uint8_t *out = xmalloc(len / 4 * 3 + 3);
        size_t n = 0, bits = 0;
        uint32_t acc = 0;
        bool padding = false;

        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                int v;

                if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
                        continue;
                if (c == '=') {
                        padding = true;
                        continue;
                }
                if (padding)
                        return -EINVAL; /* data after padding */
                v = b64_value(c);
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (uint8_t)(acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        if (bits >= 6)
                return -EINVAL; /* a lone trailing character */
        *ret = TAKE_PTR(out);
        *ret_len = n;
        return 0;
}

char *base64_encode_nopad(const uint8_t *data, size_t len)
{
        char *out = xmalloc(4 * ((len + 2) / 3) + 1);
        int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);

        while (n > 0 && out[n - 1] == '=')
                n--;
        out[n] = '\0';
        return out;
}

int sshbuf_u32(sshbuf *b, uint32_t *ret)
{
        if (b->left < 4)
                return -EBADMSG;
        *ret = (uint32_t)b->p[0] << 24 | (uint32_t)b->p[1] << 16 | (uint32_t)b->p[2] << 8 |
               (uint32_t)b->p[3];
        b->p += 4;
        b->left -= 4;
        return 0;
}

int sshbuf_string(sshbuf *b, const uint8_t **ret, size_t *ret_len)
{
        uint32_t n;
        int r = sshbuf_u32(b, &n);

        if (r < 0)
                return r;
        if (n > b->left)
                return -EBADMSG;
        *ret = b->p;
        *ret_len = n;
        b->p += n;
        b->left -= n;
        return 0;
}

bool sshbuf_string_eq(sshbuf *b, const char *expected)
{
        const uint8_t *s;
        size_t n;

        if (sshbuf_string(b, &s, &n) < 0)
                return false;
        return n == strlen(expected) && memcmp(s, expected, n) == 0;
}

int ssh_private_key_encrypted(const char *text, size_t len)
{
        static const char begin[] = "-----BEGIN OPENSSH PRIVATE KEY-----";
        static const char end[] = "-----END OPENSSH PRIVATE KEY-----";
        static const char magic[] = "openssh-key-v1"; /* followed by a NUL byte */
        const char *b = memmem(text, len, begin, strlen(begin)), *e;
        _cleanup_free_ uint8_t *raw = NULL;
        size_t raw_len;
        sshbuf buf;

        if (!b) {
                /* Classic PEM: "-----BEGIN RSA PRIVATE KEY-----" with Proc-Type headers, or PKCS#8. */
                if (memmem(text, len, "-----BEGIN ENCRYPTED PRIVATE KEY-----", 37) ||
                    memmem(text, len, "Proc-Type: 4,ENCRYPTED", 22))
                        return 1;
                if (memmem(text, len, "PRIVATE KEY-----", 16))
                        return 0;
                return -EINVAL;
        }
        b += strlen(begin);
        e = memmem(b, len - (size_t)(b - text), end, strlen(end));
        if (!e || base64_decode(b, (size_t)(e - b), &raw, &raw_len) < 0 ||
            raw_len < sizeof(magic) || memcmp(raw, magic, sizeof(magic)) != 0)
                return -EINVAL;
        buf = (sshbuf){raw + sizeof(magic), raw_len - sizeof(magic)};
        {
                const uint8_t *cipher;
                size_t n;

                if (sshbuf_string(&buf, &cipher, &n) < 0)
                        return -EINVAL;
                return !(n == 4 && memcmp(cipher, "none", 4) == 0);
        }
}

char *ssh_fingerprint(const uint8_t *blob, size_t len)
{
        uint8_t md[HASH_SHA256_LEN];
        _cleanup_free_ char *b64 = NULL;

        hash_sha256(blob, len, md);
        b64 = base64_encode_nopad(md, sizeof(md));
        return xasprintf("SHA256:%s", b64);
}

char *ssh_key_type(const uint8_t *blob, size_t len)
{
        sshbuf b = {blob, len};
        const uint8_t *s;
        size_t n;

        if (sshbuf_string(&b, &s, &n) < 0 || n == 0 || n > 64)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (s[i] < 0x21 || s[i] > 0x7e)
                        return NULL;
        return xstrndup((const char *)s, n);
}
