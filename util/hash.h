/*
 * Digests, written once: SHA-256 of a buffer, of a stream fed piece by
 * piece, of a file or a range of one; HMAC-SHA-256; and the hex form every
 * digest gitcd shows, records or compares is written in (lowercase, two
 * digits a byte).
 *
 * OpenSSL's EVP does the arithmetic. A digest cannot fail but for memory,
 * and gitcd treats that as fatal (util/xalloc.h): these functions abort
 * rather than return -ENOMEM. Only reading a file can fail.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define HASH_SHA256_LEN 32 /* bytes */
#define HASH_SHA256_HEX 65 /* 64 hex digits and a NUL: the size of a buffer for one */

/* Write len bytes as 2 * len lowercase hex digits and a NUL into ret_hex. */
void hex_encode(const void *data, size_t len, char *ret_hex);
/* The same, newly allocated. */
char *hex_encode_new(const void *data, size_t len);

/* Whether s is a SHA-256 in gitcd's form: exactly 64 lowercase hex digits. */
bool hash_sha256_hex_valid(const char *s);

/* One shot: the SHA-256 of len bytes at data, raw or in hex (or newly allocated hex). */
void hash_sha256(const void *data, size_t len, uint8_t ret[HASH_SHA256_LEN]);
void hash_sha256_hex(const void *data, size_t len, char ret_hex[HASH_SHA256_HEX]);
char *hash_sha256_hex_new(const void *data, size_t len);

/* HMAC-SHA-256 of data under key, newly allocated hex. */
char *hash_hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len);

/*
 * Streaming: hash_sha256_new(), any number of hash_update(), then one
 * hash_final() (or hash_final_hex()), then hash_free(). Feeding a stream
 * in any split gives the digest of the whole. hash_free(NULL) is a no-op.
 */
typedef struct hash_ctx hash_ctx;

hash_ctx *hash_sha256_new(void);
void hash_update(hash_ctx *h, const void *data, size_t len);
void hash_final(hash_ctx *h, uint8_t ret[HASH_SHA256_LEN]);
void hash_final_hex(hash_ctx *h, char ret_hex[HASH_SHA256_HEX]);
void hash_free(hash_ctx *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(hash_ctx *, hash_free);

/*
 * The SHA-256 of what fd holds from offset: len bytes, or everything to
 * its end when len < 0. Read with pread, so fd's own offset does not move.
 * *ret_size (optional) is the number of bytes hashed. 0, -errno from
 * reading, or -EIO when the file ends before len bytes (it shrank).
 */
int hash_fd_sha256_hex(int fd, int64_t offset, int64_t len, char ret_hex[HASH_SHA256_HEX],
                       int64_t *ret_size);
/* The SHA-256 of a whole file: 0, or -errno from opening or reading it. */
int hash_file_sha256_hex(const char *path, char ret_hex[HASH_SHA256_HEX], int64_t *ret_size);
