/*
 * The small pieces of OpenSSH's formats that known_hosts checking and SSH
 * signature verification share: base64, the wire encoding of strings and
 * integers (RFC 4251), public-key blobs and their SHA256 fingerprints.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A read cursor over a wire-encoded buffer; reads fail once it runs out. */
typedef struct sshbuf {
        const uint8_t *p;
        size_t left;
} sshbuf;

/* Decode base64 (whitespace ignored, padding optional). -EINVAL on bad input. */
int base64_decode(const char *s, size_t len, uint8_t **ret, size_t *ret_len);
/* Encode without '=' padding, as OpenSSH prints fingerprints. */
char *base64_encode_nopad(const uint8_t *data, size_t len);

int sshbuf_u32(sshbuf *b, uint32_t *ret);
/* A length-prefixed string; the result points into the buffer. */
int sshbuf_string(sshbuf *b, const uint8_t **ret, size_t *ret_len);
/* Same, compared with an expected text. */
bool sshbuf_string_eq(sshbuf *b, const char *expected);

/*
 * Whether a private key file's text (OpenSSH or PEM format) is protected by a
 * passphrase: 1 yes, 0 no, -EINVAL when it is not a private key we recognise.
 */
int ssh_private_key_encrypted(const char *text, size_t len);

/* "SHA256:<base64>" of a public-key blob, as `ssh-keygen -l` prints it. */
char *ssh_fingerprint(const uint8_t *blob, size_t len);
/* The key type named at the start of a public-key blob ("ssh-ed25519"), or NULL. */
char *ssh_key_type(const uint8_t *blob, size_t len);
