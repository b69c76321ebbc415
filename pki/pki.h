/*
 * A small X.509 toolkit for `tls.provider: auto` and for tests: ECDSA P-256
 * keys, a self-signed CA, leaf certificates (server and/or client) signed by
 * it, PEM files on disk, and the few facts about a certificate that rotation
 * decisions need (notAfter, SANs, whether it chains to a CA).
 *
 * Errors: every function that can fail returns 0 or a negative errno and
 * leaves a message for pki_last_error() (per thread; OpenSSL's own error
 * text is never passed on). Expected ones: -EINVAL for a bad request
 * (empty or over-long CN, a malformed DNS name or IP address, days out of
 * range), -ENOENT / -EACCES for files, -EBADMSG for a file that holds no
 * usable PEM certificate or key, -EIO when OpenSSL fails. Private keys never
 * appear in a message or a log line.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pki_key pki_key;   /* a private key (ECDSA P-256) */
typedef struct pki_cert pki_cert; /* an X.509 certificate */

/* OpenSSL's types, for callers that need them (tests, TLS setup). */
struct x509_st;
struct evp_pkey_st;

#define PKI_MAX_DAYS 36500

typedef struct pki_cert_request {
        const char *cn;                  /* subject commonName, 1..64 bytes */
        const char *const *dns_names;    /* NULL-terminated; NULL for none */
        const char *const *ip_addresses; /* NULL-terminated IPv4/IPv6 literals; NULL for none */
        int days;                        /* validity, 1..PKI_MAX_DAYS (unless seconds) */
        int64_t seconds;                 /* > 0: validity in seconds instead of days */
        bool server;                     /* extendedKeyUsage serverAuth */
        bool client;                     /* extendedKeyUsage clientAuth */
} pki_cert_request;

/* The message for the last failure in this thread ("" when none). */
const char *pki_last_error(void);
/* Set that message (for pki's own modules) and return err. */
int pki_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new ECDSA P-256 key. */
int pki_key_generate(pki_key **ret);
void pki_key_free(pki_key *k);

/*
 * A self-signed CA: basicConstraints CA:TRUE (critical), keyUsage
 * keyCertSign and cRLSign (critical), subject and authority key identifiers,
 * a random 128-bit serial; valid from five minutes ago for `days` days.
 */
int pki_ca_create(const char *cn, int days, pki_key **ret_key, pki_cert **ret_cert);

/*
 * A leaf certificate for a fresh key, signed by the CA: CA:FALSE, keyUsage
 * digitalSignature, the requested extended key usages (at least one of
 * server or client), DNS and IP subject alternative names.
 */
int pki_cert_issue(const pki_cert *ca_cert, const pki_key *ca_key, const pki_cert_request *req,
                   pki_key **ret_key, pki_cert **ret_cert);
void pki_cert_free(pki_cert *c);

/*
 * Write PEM files atomically: the certificate with mode 0644, the key
 * (unencrypted PKCS#8) with mode 0600. Either path may be NULL to skip it.
 */
int pki_write_pem(const char *cert_path, const char *key_path, const pki_cert *cert,
                  const pki_key *key);
/* PEM text in memory (for Secrets and ConfigMaps). Wipe and free key PEM after use. */
int pki_cert_to_pem(const pki_cert *c, char **ret_pem);
int pki_key_to_pem(const pki_key *k, char **ret_pem);

/* Load the first certificate / the private key of a PEM file. Encrypted keys are refused. */
int pki_cert_load(const char *path, pki_cert **ret);
int pki_key_load(const char *path, pki_key **ret);
/* Parse PEM text in memory; `what` names it in error messages. */
int pki_cert_from_pem(const char *pem, size_t len, const char *what, pki_cert **ret);
int pki_key_from_pem(const char *pem, size_t len, const char *what, pki_key **ret);

/* Validity bounds in milliseconds since the epoch. */
int pki_cert_not_after(const pki_cert *c, int64_t *ret_wall_ms);
int pki_cert_not_before(const pki_cert *c, int64_t *ret_wall_ms);
/* The subject commonName ("" when there is none). */
int pki_cert_common_name(const pki_cert *c, char **ret_cn);
/*
 * The subject alternative names, as two NULL-terminated lists (either
 * output may be NULL; free each with strv_free()). IP addresses in their
 * usual text form.
 */
int pki_cert_sans(const pki_cert *c, char ***ret_dns, char ***ret_ips);
/* True when the certificate is a CA (basicConstraints CA:TRUE). */
bool pki_cert_is_ca(const pki_cert *c);
/* True when the key is the private half of the certificate's public key. */
bool pki_key_matches(const pki_key *k, const pki_cert *c);
/*
 * Verify that cert was issued by ca and is valid now. -EKEYREJECTED (with
 * the reason in pki_last_error()) when it is not.
 */
int pki_cert_verify(const pki_cert *ca, const pki_cert *cert);

/*
 * A CA kept on disk as <dir>/ca.crt and <dir>/ca.key: loaded, or created
 * on first use (folder 0700, key 0600) with the given commonName and
 * lifetime. The two files become visible together: a new CA is written
 * into <dir>.new and renamed to <dir>. A lone ca.crt or ca.key (left by a
 * writer killed between the files) counts as absent and is replaced, unless
 * members_depend (members hold certificates it signed): then -EBADMSG with
 * what to do. -EBADMSG also when the key does not belong to the certificate.
 */
int pki_ca_open(const char *dir, const char *cn, int days, bool members_depend, pki_key **ret_key,
                pki_cert **ret_cert);
/*
 * Make <dir> hold an existing CA (one taken over from elsewhere) as
 * pki_ca_open() keeps it: both files or neither, key mode 0600. -EEXIST
 * when <dir> holds a CA (or half of one) already; -EBADMSG when cert is
 * not a CA or key is not its key.
 */
#define PKI_CA_IMPORTED_FILE "imported"
int pki_ca_import(const char *dir, const pki_cert *cert, const pki_key *key);
/*
 * Was the CA in <dir> taken over by pki_ca_import() (a marker written
 * before the CA itself)? Others may hold certificates it signed (a
 * kube-apiserver's etcd client certificate), so gitcd does not rotate it.
 */
bool pki_ca_imported(const char *dir);
/* pki_ca_open() assuming members depend on the CA: never replaces half a CA. */
int pki_ca_load_or_create(const char *dir, const char *cn, int days, pki_key **ret_key,
                          pki_cert **ret_cert);
/*
 * Whether <dir> holds a usable leaf from ca: tls.crt with its tls.key,
 * ca.crt beside them, signed by ca, valid at now_ms and for more than
 * renew_seconds after it, and carrying every DNS and IP SAN listed (dns /
 * ips may be NULL).
 */
bool pki_leaf_is_current(const char *dir, const pki_cert *ca, const char *const *dns,
                         const char *const *ips, int64_t renew_seconds, int64_t now_ms);

/*
 * The notAfter (ms since the epoch) and serial (upper-case hex) of
 * <dir>/tls.crt. -ENOENT when there is none; errors as pki_cert_load().
 */
int pki_leaf_info(const char *dir, int64_t *ret_not_after_ms, char **ret_serial);
/* The same for the CA of pki_ca_open(): <dir>/ca.crt. */
int pki_ca_info(const char *dir, int64_t *ret_not_after_ms, char **ret_serial);
/* The serial of a certificate, upper-case hex as pki_leaf_info() gives it. */
int pki_cert_serial(const pki_cert *c, char **ret_hex);

/*
 * The serial (as pki_leaf_info) of the leaf certificate the TLS server at
 * url ("https://host:port") serves right now, presenting the client
 * identity cert/key (both may be NULL) since etcd asks every client for
 * one. The chain is not verified: callers compare the exact serial with
 * the one they hold. Waits at most timeout_ms. -EHOSTUNREACH when no TLS
 * handshake completed (message in pki_last_error()).
 */
int pki_served_serial(const char *url, const char *cert, const char *key, int timeout_ms,
                      char **ret_serial);

/*
 * The fingerprint of a CA bundle: sha256 over the DER of every certificate
 * in pem, in order, as 64 hex digits. Re-encoding the PEM (line breaks,
 * comments) does not change it; adding, removing or replacing a
 * certificate does. -EBADMSG when pem holds no certificate.
 */
int pki_bundle_fingerprint(const char *pem, size_t len, char **ret_hex);

/* Borrowed OpenSSL handles (valid as long as the pki object). */
struct x509_st *pki_cert_x509(const pki_cert *c);
struct evp_pkey_st *pki_key_evp(const pki_key *k);
