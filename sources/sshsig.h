/*
 * Verification of SSH signatures on commits and tags (`git -c gpg.format=ssh
 * commit -S`): the SSHSIG format from OpenSSH's PROTOCOL.sshsig, checked with
 * OpenSSL for ed25519, ECDSA (nistp256/384/521) and RSA (rsa-sha2-256/512),
 * against trusted keys listed in an OpenSSH allowed_signers file.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sshsig_verdict {
        bool verified;     /* a valid signature made by a trusted key */
        char *reason;      /* always set: what was verified, or why not */
        char *fingerprint; /* "SHA256:..." of the signing key, when the signature parsed */
        char *identity;    /* principals of the matching allowed_signers line, if trusted */
} sshsig_verdict;

/*
 * Verify an armored signature ("-----BEGIN SSH SIGNATURE-----...") over data
 * for namespace "git", made at time `when` (for valid-after/valid-before).
 * Returns 0 with *ret filled whatever the verdict; -ENOENT or -EIO when the
 * allowed_signers file cannot be read (*ret_error says so).
 */
int sshsig_verify(const char *armored, size_t armored_len, const void *data, size_t data_len,
                  const char *allowed_signers_path, int64_t when, sshsig_verdict *ret,
                  char **ret_error);
/* The same with the allowed_signers text in memory; it cannot fail. */
void sshsig_verify_buffer(const char *armored, size_t armored_len, const void *data,
                          size_t data_len, const char *signers, size_t signers_len, int64_t when,
                          sshsig_verdict *ret);
void sshsig_verdict_release(sshsig_verdict *v);
