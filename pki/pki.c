/*
 * X.509 keys and certificates with OpenSSL 3's EVP and X509 APIs (see
 * pki.h). This file is the OpenSSL adapter: nothing outside it sees an
 * OpenSSL error queue. Every failure clears the queue and leaves one message
 * of ours in a per-thread buffer, so a caller shows "certificate in X: not a
 * PEM certificate" rather than "error:0480006C:PEM routines::no start line".
 *
 * Design decisions: keys are ECDSA P-256 (accepted by every etcd and Go TLS
 * stack; Ed25519 X.509 is not), certificates are signed with SHA-256,
 * serials are 128 bits long (random but for the two top bits, which keep
 * the value positive and its length fixed), and notBefore is set five
 * minutes in the past so a freshly issued certificate is not rejected by a
 * peer whose clock is slightly behind. Subject alternative names are built as GENERAL_NAMEs from
 * validated strings, never through OpenSSL's config-string parser, so a
 * name can never smuggle in another extension. Key material lives only in
 * OpenSSL objects and in buffers that are cleansed before they are freed.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "pki/pki.h"
#include "util/failpoint.h"
#include "util/filememo.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/http.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define PEM_MAX_SIZE    (1024 * 1024)
#define CN_MAX_LEN      64
#define DNS_MAX_LEN     253
#define BACKDATE_SECS   300
#define SERIAL_BYTES    16
#define ERROR_BUF_BYTES 512

struct pki_key {
        EVP_PKEY *pkey;
};

struct pki_cert {
        X509 *x509;
};

static __thread char last_error[ERROR_BUF_BYTES];

const char *pki_last_error(void)
{
        return last_error;
}

/* Record a message, drop OpenSSL's queue, and return err (a negative errno). */
static int _printf_(2, 3) fail(int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(last_error, sizeof(last_error), fmt, ap);
        va_end(ap);
        ERR_clear_error();
        return err;
}
/* Also a macro, so that the static analyzer (which does not follow variadic calls)
 * sees err come back. */
#define fail(err, ...)                                                                             \
        ({                                                                                         \
                int fail_err_ = (err);                                                             \
                (fail)(fail_err_, __VA_ARGS__);                                                    \
                fail_err_;                                                                         \
        })

int pki_error(int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(last_error, sizeof(last_error), fmt, ap);
        va_end(ap);
        return err;
}

static pki_key *key_wrap(EVP_PKEY *pkey)
{
        pki_key *k = XNEW(pki_key);
        k->pkey = pkey;
        return k;
}

static pki_cert *cert_wrap(X509 *x)
{
        pki_cert *c = XNEW(pki_cert);
        c->x509 = x;
        return c;
}

void pki_key_free(pki_key *k)
{
        if (!k)
                return;
        EVP_PKEY_free(k->pkey);
        free(k);
}

void pki_cert_free(pki_cert *c)
{
        if (!c)
                return;
        X509_free(c->x509);
        free(c);
}

struct x509_st *pki_cert_x509(const pki_cert *c)
{
        return c ? c->x509 : NULL;
}

struct evp_pkey_st *pki_key_evp(const pki_key *k)
{
        return k ? k->pkey : NULL;
}

int pki_key_generate(pki_key **ret)
{
        EVP_PKEY *pkey = EVP_EC_gen("P-256");
        if (!pkey)
                return fail(-EIO, "cannot generate an ECDSA P-256 key");
        *ret = key_wrap(pkey);
        return 0;
}

/* ---- validation of requests ---- */

static int check_cn(const char *cn)
{
        if (isempty(cn))
                return fail(-EINVAL, "the certificate's common name is empty");
        size_t len = strlen(cn);
        if (len > CN_MAX_LEN)
                return fail(-EINVAL, "the common name \"%.20s...\" is longer than %d bytes", cn,
                            CN_MAX_LEN);
        for (const unsigned char *s = (const unsigned char *)cn; *s; s++)
                if (*s < 0x20 || *s == 0x7f)
                        return fail(-EINVAL, "the common name contains a control character");
        return 0;
}

static int check_days(int days)
{
        if (days < 1 || days > PKI_MAX_DAYS)
                return fail(-EINVAL, "validity of %d days is out of range (1..%d)", days,
                            PKI_MAX_DAYS);
        return 0;
}

/* A host name (RFC 1123 labels), optionally starting with one "*." wildcard label. */
static bool dns_name_valid(const char *name)
{
        size_t len = strlen(name);
        if (len == 0 || len > DNS_MAX_LEN)
                return false;
        const char *s = name;
        if (strneq(s, "*.", 2))
                s += 2;
        size_t label = 0;
        for (; *s; s++) {
                char ch = *s;
                if (ch == '.') {
                        if (label == 0 || s[-1] == '-')
                                return false;
                        label = 0;
                        continue;
                }
                bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                             (ch >= '0' && ch <= '9');
                if (!alnum && !(ch == '-' && label > 0))
                        return false;
                if (++label > 63)
                        return false;
        }
        return label > 0 && s[-1] != '-';
}

/* ---- building certificates ---- */

static int set_random_serial(X509 *x)
{
        unsigned char bytes[SERIAL_BYTES];
        if (RAND_bytes(bytes, sizeof(bytes)) != 1)
                return fail(-EIO, "cannot draw random bytes for a serial number");
        bytes[0] &= 0x7f; /* positive */
        bytes[0] |= 0x40; /* and a full 128-bit-long value, never zero */
        BIGNUM *bn = BN_bin2bn(bytes, sizeof(bytes), NULL);
        if (!bn)
                return fail(-EIO, "cannot set a serial number");
        ASN1_INTEGER *serial = X509_get_serialNumber(x);
        bool ok = BN_to_ASN1_INTEGER(bn, serial) != NULL;
        BN_free(bn);
        return ok ? 0 : fail(-EIO, "cannot set a serial number");
}

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
        if (!ext)
                return fail(-EIO, "cannot build the %s extension", OBJ_nid2sn(nid));
        int ok = X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
        return ok ? 0 : fail(-EIO, "cannot add the %s extension", OBJ_nid2sn(nid));
}

/* The parts every certificate shares: version, serial, validity, subject, key. */
static int cert_skeleton(const char *cn, int64_t seconds, EVP_PKEY *pubkey, X509 **ret)
{
        X509 *x = X509_new();
        if (!x)
                return fail(-EIO, "cannot allocate a certificate");
        int r = -EIO;
        if (!X509_set_version(x, 2)) {
                r = fail(-EIO, "cannot set the certificate version");
                goto out;
        }
        r = set_random_serial(x);
        if (r < 0)
                goto out;
        if (!X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE_SECS) ||
            !X509_time_adj_ex(X509_getm_notAfter(x), (int)(seconds / 86400),
                              (long)(seconds % 86400), NULL)) {
                r = fail(-EIO, "cannot set the validity period");
                goto out;
        }
        X509_NAME *name = X509_get_subject_name(x);
        if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
                                        -1, 0)) {
                r = fail(-EINVAL, "the common name is not valid UTF-8 text");
                goto out;
        }
        if (!X509_set_pubkey(x, pubkey)) {
                r = fail(-EIO, "cannot set the certificate's public key");
                goto out;
        }
        r = 0;
out:
        if (r < 0) {
                X509_free(x);
                return r;
        }
        *ret = x;
        return 0;
}

static int sign(X509 *x, EVP_PKEY *signer)
{
        if (X509_sign(x, signer, EVP_sha256()) <= 0)
                return fail(-EIO, "cannot sign the certificate");
        return 0;
}

int pki_ca_create(const char *cn, int days, pki_key **ret_key, pki_cert **ret_cert)
{
        int r = check_cn(cn);
        if (r < 0)
                return r;
        r = check_days(days);
        if (r < 0)
                return r;
        pki_key *key = NULL;
        X509 *x = NULL;
        r = pki_key_generate(&key);
        if (r < 0)
                goto out;
        r = cert_skeleton(cn, (int64_t)days * 86400, key->pkey, &x);
        if (r < 0)
                goto out;
        if (!X509_set_issuer_name(x, X509_get_subject_name(x))) {
                r = fail(-EIO, "cannot set the issuer name");
                goto out;
        }
        X509V3_CTX ctx;
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        r = add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE");
        if (r >= 0)
                r = add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
        if (r >= 0)
                r = add_ext(x, &ctx, NID_subject_key_identifier, "hash");
        if (r >= 0)
                r = add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always");
        if (r >= 0)
                r = sign(x, key->pkey);
out:
        if (r < 0) {
                X509_free(x);
                pki_key_free(key);
                return r;
        }
        *ret_key = key;
        *ret_cert = cert_wrap(x);
        return 0;
}

static int add_general_name(GENERAL_NAMES *names, int type, ASN1_STRING *value)
{
        GENERAL_NAME *gn = GENERAL_NAME_new();
        if (!gn) {
                ASN1_STRING_free(value);
                return fail(-EIO, "cannot allocate a subject alternative name");
        }
        GENERAL_NAME_set0_value(gn, type, value);
        if (!sk_GENERAL_NAME_push(names, gn)) {
                GENERAL_NAME_free(gn);
                return fail(-EIO, "cannot add a subject alternative name");
        }
        return 0;
}

static int add_sans(X509 *x, const pki_cert_request *req)
{
        size_t n = 0;
        GENERAL_NAMES *names = sk_GENERAL_NAME_new_null();
        if (!names)
                return fail(-EIO, "cannot allocate subject alternative names");
        int r = 0;
        for (const char *const *d = req->dns_names; d && *d && r >= 0; d++, n++) {
                if (!dns_name_valid(*d)) {
                        r = fail(-EINVAL, "\"%s\" is not a valid DNS name", *d);
                        break;
                }
                ASN1_IA5STRING *s = ASN1_IA5STRING_new();
                if (!s || !ASN1_STRING_set(s, *d, (int)strlen(*d))) {
                        ASN1_IA5STRING_free(s);
                        r = fail(-EIO, "cannot encode the DNS name \"%s\"", *d);
                        break;
                }
                r = add_general_name(names, GEN_DNS, s);
        }
        for (const char *const *ip = req->ip_addresses; ip && *ip && r >= 0; ip++, n++) {
                unsigned char raw[16];
                int len;
                if (inet_pton(AF_INET, *ip, raw) == 1)
                        len = 4;
                else if (inet_pton(AF_INET6, *ip, raw) == 1)
                        len = 16;
                else {
                        r = fail(-EINVAL, "\"%s\" is not an IPv4 or IPv6 address", *ip);
                        break;
                }
                ASN1_OCTET_STRING *s = ASN1_OCTET_STRING_new();
                if (!s || !ASN1_OCTET_STRING_set(s, raw, len)) {
                        ASN1_OCTET_STRING_free(s);
                        r = fail(-EIO, "cannot encode the IP address %s", *ip);
                        break;
                }
                r = add_general_name(names, GEN_IPADD, s);
        }
        if (r >= 0 && n > 0 && !X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0, 0))
                r = fail(-EIO, "cannot add the subject alternative names");
        GENERAL_NAMES_free(names);
        return r;
}

static int check_request(const pki_cert_request *req)
{
        if (!req)
                return fail(-EINVAL, "no certificate request");
        int r = check_cn(req->cn);
        if (r < 0)
                return r;
        if (req->seconds < 0 || req->seconds > (int64_t)PKI_MAX_DAYS * 86400)
                return fail(-EINVAL, "validity of %" PRId64 " seconds is out of range",
                            req->seconds);
        r = req->seconds > 0 ? 0 : check_days(req->days);
        if (r < 0)
                return r;
        if (!req->server && !req->client)
                return fail(-EINVAL, "certificate for \"%s\" is neither for servers nor clients",
                            req->cn);
        return 0;
}

int pki_cert_issue(const pki_cert *ca_cert, const pki_key *ca_key, const pki_cert_request *req,
                   pki_key **ret_key, pki_cert **ret_cert)
{
        if (!ca_cert || !ca_key)
                return fail(-EINVAL, "no CA to sign with");
        int r = check_request(req);
        if (r < 0)
                return r;
        if (!pki_key_matches(ca_key, ca_cert))
                return fail(-EINVAL, "the CA key does not belong to the CA certificate");
        pki_key *key = NULL;
        X509 *x = NULL;
        r = pki_key_generate(&key);
        if (r < 0)
                goto out;
        r = cert_skeleton(req->cn, req->seconds > 0 ? req->seconds : (int64_t)req->days * 86400,
                          key->pkey, &x);
        if (r < 0)
                goto out;
        if (!X509_set_issuer_name(x, X509_get_subject_name(ca_cert->x509))) {
                r = fail(-EIO, "cannot set the issuer name");
                goto out;
        }
        X509V3_CTX ctx;
        X509V3_set_ctx(&ctx, ca_cert->x509, x, NULL, NULL, 0);
        const char *eku = req->server && req->client ? "serverAuth,clientAuth"
                          : req->server              ? "serverAuth"
                                                     : "clientAuth";
        r = add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE");
        if (r >= 0)
                r = add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature");
        if (r >= 0)
                r = add_ext(x, &ctx, NID_ext_key_usage, eku);
        if (r >= 0)
                r = add_ext(x, &ctx, NID_subject_key_identifier, "hash");
        if (r >= 0)
                r = add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always");
        if (r >= 0)
                r = add_sans(x, req);
        if (r >= 0)
                r = sign(x, ca_key->pkey);
out:
        if (r < 0) {
                X509_free(x);
                pki_key_free(key);
                return r;
        }
        *ret_key = key;
        *ret_cert = cert_wrap(x);
        return 0;
}

/* ---- PEM in and out ---- */

/* The contents of a memory BIO as a NUL-terminated string. */
static char *bio_to_string(BIO *bio)
{
        char *data = NULL;
        long len = BIO_get_mem_data(bio, &data);
        char *s = xmalloc((size_t)len + 1);
        memcpy(s, data, (size_t)len);
        s[len] = '\0';
        return s;
}

int pki_cert_to_pem(const pki_cert *c, char **ret_pem)
{
        BIO *bio = BIO_new(BIO_s_mem());
        if (!bio)
                return fail(-EIO, "cannot allocate a buffer");
        if (!PEM_write_bio_X509(bio, c->x509)) {
                BIO_free(bio);
                return fail(-EIO, "cannot encode the certificate as PEM");
        }
        *ret_pem = bio_to_string(bio);
        BIO_free(bio);
        return 0;
}

int pki_key_to_pem(const pki_key *k, char **ret_pem)
{
        /* A secure memory BIO would be nicer; we cleanse what we copy instead. */
        BIO *bio = BIO_new(BIO_s_mem());
        if (!bio)
                return fail(-EIO, "cannot allocate a buffer");
        if (!PEM_write_bio_PrivateKey(bio, k->pkey, NULL, NULL, 0, NULL, NULL)) {
                BIO_free(bio);
                return fail(-EIO, "cannot encode the private key as PEM");
        }
        char *data = NULL;
        long len = BIO_get_mem_data(bio, &data);
        char *s = bio_to_string(bio);
        OPENSSL_cleanse(data, (size_t)len);
        BIO_free(bio);
        *ret_pem = s;
        return 0;
}

static int write_pem(const char *path, const char *pem, mode_t mode, const char *what)
{
        int r = write_file_atomic(path, pem, strlen(pem), mode);
        if (r < 0)
                return fail(r, "cannot write the %s to %s: %s", what, path, strerror(-r));
        return 0;
}

int pki_write_pem(const char *cert_path, const char *key_path, const pki_cert *cert,
                  const pki_key *key)
{
        if ((cert_path && !cert) || (key_path && !key))
                return fail(-EINVAL, "nothing to write");
        if (cert_path) {
                _cleanup_free_ char *pem = NULL;
                int r = pki_cert_to_pem(cert, &pem);
                if (r < 0)
                        return r;
                r = write_pem(cert_path, pem, 0644, "certificate");
                if (r < 0)
                        return r;
        }
        if (key_path) {
                char *pem = NULL;
                int r = pki_key_to_pem(key, &pem);
                if (r < 0)
                        return r;
                r = write_pem(key_path, pem, 0600, "private key");
                OPENSSL_cleanse(pem, strlen(pem));
                free(pem);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
        return -1;
}

int pki_cert_from_pem(const char *pem, size_t len, const char *what, pki_cert **ret)
{
        if (len > PEM_MAX_SIZE)
                return fail(-EBADMSG, "%s: too large for a certificate", what);
        BIO *bio = BIO_new_mem_buf(pem, (int)len);
        if (!bio)
                return fail(-EIO, "cannot allocate a buffer");
        X509 *x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL);
        BIO_free(bio);
        if (!x)
                return fail(-EBADMSG, "%s: not a PEM certificate", what);
        ERR_clear_error();
        *ret = cert_wrap(x);
        return 0;
}

static int read_pem_file(const char *path, const char *what, char **ret_data, size_t *ret_len)
{
        int r = read_file(path, PEM_MAX_SIZE, ret_data, ret_len);
        if (r == -EFBIG)
                return fail(-EBADMSG, "%s %s is too large", what, path);
        if (r < 0)
                return fail(r, "cannot read %s %s: %s", what, path, strerror(-r));
        return 0;
}

int pki_cert_load(const char *path, pki_cert **ret)
{
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_pem_file(path, "certificate", &data, &len);
        if (r < 0)
                return r;
        _cleanup_free_ char *what = xasprintf("certificate %s", path);
        return pki_cert_from_pem(data, len, what, ret);
}

int pki_key_from_pem(const char *pem, size_t len, const char *what, pki_key **ret)
{
        if (len > PEM_MAX_SIZE)
                return fail(-EBADMSG, "%s: too large for a private key", what);
        BIO *bio = BIO_new_mem_buf(pem, (int)len);
        EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
        BIO_free(bio);
        if (!pkey)
                return fail(-EBADMSG, "%s: not an unencrypted PEM private key", what);
        ERR_clear_error();
        *ret = key_wrap(pkey);
        return 0;
}

int pki_key_load(const char *path, pki_key **ret)
{
        char *data = NULL;
        size_t len = 0;
        int r = read_pem_file(path, "private key", &data, &len);
        if (r < 0)
                return r;
        _cleanup_free_ char *what = xasprintf("private key %s", path);
        r = pki_key_from_pem(data, len, what, ret);
        OPENSSL_cleanse(data, len);
        free(data);
        return r;
}

/* ---- facts about a certificate ---- */

static int asn1_time_ms(const ASN1_TIME *t, const char *what, int64_t *ret_wall_ms)
{
        struct tm tm = {0};
        if (!t || !ASN1_TIME_to_tm(t, &tm))
                return fail(-EBADMSG, "the certificate's %s time is malformed", what);
        time_t secs = timegm(&tm);
        *ret_wall_ms = (int64_t)secs * 1000;
        return 0;
}

int pki_cert_not_after(const pki_cert *c, int64_t *ret_wall_ms)
{
        return asn1_time_ms(X509_get0_notAfter(c->x509), "notAfter", ret_wall_ms);
}

int pki_cert_not_before(const pki_cert *c, int64_t *ret_wall_ms)
{
        return asn1_time_ms(X509_get0_notBefore(c->x509), "notBefore", ret_wall_ms);
}

int pki_cert_common_name(const pki_cert *c, char **ret_cn)
{
        X509_NAME *name = X509_get_subject_name(c->x509);
        int idx = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
        if (idx < 0) {
                *ret_cn = xstrdup("");
                return 0;
        }
        ASN1_STRING *data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx));
        unsigned char *utf8 = NULL;
        int len = ASN1_STRING_to_UTF8(&utf8, data);
        if (len < 0)
                return fail(-EBADMSG, "the certificate's common name is malformed");
        *ret_cn = xstrndup((const char *)utf8, (size_t)len);
        OPENSSL_free(utf8);
        return 0;
}

static void strv_push(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(char *));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

int pki_cert_sans(const pki_cert *c, char ***ret_dns, char ***ret_ips)
{
        char **dns = xcalloc(1, sizeof(char *));
        char **ips = xcalloc(1, sizeof(char *));
        size_t n_dns = 0, n_ips = 0;
        int crit = 0;
        GENERAL_NAMES *names = X509_get_ext_d2i(c->x509, NID_subject_alt_name, &crit, NULL);
        if (!names && crit != -1) {
                strv_free(dns);
                strv_free(ips);
                return fail(-EBADMSG, "the certificate's subject alternative names are malformed");
        }
        for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
                const GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);
                if (gn->type == GEN_DNS) {
                        const ASN1_IA5STRING *s = gn->d.dNSName;
                        strv_push(&dns, &n_dns,
                                  xstrndup((const char *)ASN1_STRING_get0_data(s),
                                           (size_t)ASN1_STRING_length(s)));
                } else if (gn->type == GEN_IPADD) {
                        const ASN1_OCTET_STRING *s = gn->d.iPAddress;
                        int len = ASN1_STRING_length(s);
                        char text[INET6_ADDRSTRLEN];
                        int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
                        if (family &&
                            inet_ntop(family, ASN1_STRING_get0_data(s), text, sizeof(text)))
                                strv_push(&ips, &n_ips, xstrdup(text));
                }
        }
        GENERAL_NAMES_free(names);
        ERR_clear_error();
        if (ret_dns)
                *ret_dns = dns;
        else
                strv_free(dns);
        if (ret_ips)
                *ret_ips = ips;
        else
                strv_free(ips);
        return 0;
}

bool pki_cert_is_ca(const pki_cert *c)
{
        bool ca = c && X509_check_ca(c->x509) == 1;
        ERR_clear_error();
        return ca;
}

bool pki_key_matches(const pki_key *k, const pki_cert *c)
{
        if (!k || !c)
                return false;
        bool ok = X509_check_private_key(c->x509, k->pkey) == 1;
        ERR_clear_error();
        return ok;
}

int pki_cert_verify(const pki_cert *ca, const pki_cert *cert)
{
        if (!ca || !cert)
                return fail(-EINVAL, "no certificate to verify");
        X509_STORE *store = X509_STORE_new();
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        int r = 0;
        if (!store || !ctx || !X509_STORE_add_cert(store, ca->x509) ||
            !X509_STORE_CTX_init(ctx, store, cert->x509, NULL)) {
                r = fail(-EIO, "cannot set up certificate verification");
                goto out;
        }
        if (X509_verify_cert(ctx) != 1) {
                int err = X509_STORE_CTX_get_error(ctx);
                r = fail(-EKEYREJECTED, "the certificate does not verify against the CA: %s",
                         X509_verify_cert_error_string(err));
                goto out;
        }
out:
        X509_STORE_CTX_free(ctx);
        X509_STORE_free(store);
        ERR_clear_error();
        return r;
}

/* ---- keys and certificates kept in folders ---- */

static bool strv_has(char **v, const char *s)
{
        for (size_t i = 0; v && v[i]; i++)
                if (streq(v[i], s))
                        return true;
        return false;
}

/*
 * Write a CA into a fresh sibling folder, then rename it to dir: both files
 * or neither; with the imported marker (PKI_CA_IMPORTED_FILE) when mark is set.
 */
static int ca_write_atomic(const char *dir, const pki_cert *cert, const pki_key *k,
                           const char *mark)
{
        _cleanup_free_ char *tmp = xasprintf("%s.new", dir);
        _cleanup_free_ char *tmp_crt = path_join(tmp, "ca.crt");
        _cleanup_free_ char *tmp_key = path_join(tmp, "ca.key");
        int r = rm_rf(tmp); /* what a writer killed earlier left */
        if (r >= 0)
                r = mkdir_p(tmp, 0700);
        if (r < 0)
                return fail(r, "cannot create %s: %s", tmp, strerror(-r));
        r = pki_write_pem(tmp_crt, NULL, cert, NULL);
        FAILPOINT("pki.ca.between-files");
        if (r >= 0)
                r = pki_write_pem(NULL, tmp_key, NULL, k);
        if (r >= 0 && mark) {
                _cleanup_free_ char *marker = path_join(tmp, PKI_CA_IMPORTED_FILE);
                r = write_file_atomic(marker, mark, strlen(mark), 0644);
                if (r < 0)
                        r = fail(r, "cannot write %s: %s", marker, strerror(-r));
        }
        if (r >= 0 && rmdir(dir) < 0 && errno != ENOENT)
                r = fail(-errno, "cannot replace %s: %s", dir, strerror(errno));
        if (r >= 0 && rename(tmp, dir) < 0)
                r = fail(-errno, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
        if (r >= 0)
                (void)fsync_parent_dir(dir);
        if (r < 0)
                (void)rm_rf(tmp);
        return r;
}

/* A new CA written as ca_write_atomic() does. */
static int ca_create_atomic(const char *dir, const char *cn, int days, pki_key **ret_key,
                            pki_cert **ret_cert)
{
        pki_key *k = NULL;
        pki_cert *cert = NULL;
        int r = pki_ca_create(cn, days, &k, &cert);
        if (r >= 0)
                r = ca_write_atomic(dir, cert, k, NULL);
        if (r < 0) {
                pki_key_free(k);
                pki_cert_free(cert);
                return r;
        }
        *ret_key = k;
        *ret_cert = cert;
        return 0;
}

int pki_ca_import(const char *dir, const pki_cert *cert, const pki_key *key)
{
        if (!pki_cert_is_ca(cert))
                return fail(-EBADMSG, "the certificate to import is not a CA certificate");
        if (!pki_key_matches(key, cert))
                return fail(-EBADMSG, "the key to import does not belong to the CA certificate");
        _cleanup_free_ char *crt = path_join(dir, "ca.crt");
        _cleanup_free_ char *keyf = path_join(dir, "ca.key");
        if (path_exists(crt) || path_exists(keyf))
                return fail(-EEXIST, "%s already holds a CA", dir);
        return ca_write_atomic(dir, cert, key,
                               "taken over from elsewhere: others may hold certificates it "
                               "signed; gitcd does not rotate it\n");
}

bool pki_ca_imported(const char *dir)
{
        _cleanup_free_ char *marker = path_join(dir, PKI_CA_IMPORTED_FILE);
        return path_exists(marker);
}

int pki_ca_open(const char *dir, const char *cn, int days, bool members_depend, pki_key **ret_key,
                pki_cert **ret_cert)
{
        _cleanup_free_ char *crt = path_join(dir, "ca.crt");
        _cleanup_free_ char *key = path_join(dir, "ca.key");
        bool have_crt = path_exists(crt), have_key = path_exists(key);

        if (have_crt && have_key) {
                pki_key *k = NULL;
                pki_cert *cert = NULL;
                int r = pki_cert_load(crt, &cert);
                if (r >= 0)
                        r = pki_key_load(key, &k);
                if (r >= 0 && !pki_key_matches(k, cert))
                        r = fail(-EBADMSG, "%s does not belong to %s", key, crt);
                if (r < 0) {
                        pki_key_free(k);
                        pki_cert_free(cert);
                        return r;
                }
                *ret_key = k;
                *ret_cert = cert;
                return 0;
        }
        if (have_crt || have_key) {
                /* Half a CA (a writer killed between the two files): absent, unless relied on. */
                if (members_depend)
                        return fail(-EBADMSG,
                                    "the CA in %s is incomplete (%s without %s) and members hold "
                                    "certificates it signed; restore %s, or remove %s and every "
                                    "member's certificates to issue a new CA",
                                    dir, have_crt ? "ca.crt" : "ca.key",
                                    have_crt ? "ca.key" : "ca.crt", have_crt ? "ca.key" : "ca.crt",
                                    dir);
                int r = rm_rf(dir);
                if (r < 0)
                        return fail(r, "cannot remove the incomplete CA in %s: %s", dir,
                                    strerror(-r));
        }
        return ca_create_atomic(dir, cn, days, ret_key, ret_cert);
}

int pki_ca_load_or_create(const char *dir, const char *cn, int days, pki_key **ret_key,
                          pki_cert **ret_cert)
{
        return pki_ca_open(dir, cn, days, true, ret_key, ret_cert);
}

bool pki_leaf_is_current(const char *dir, const pki_cert *ca, const char *const *dns,
                         const char *const *ips, int64_t renew_seconds, int64_t now_ms)
{
        _cleanup_free_ char *crt = path_join(dir, "tls.crt");
        _cleanup_free_ char *key = path_join(dir, "tls.key");
        _cleanup_free_ char *cacrt = path_join(dir, "ca.crt");
        pki_cert *cert = NULL;
        pki_key *k = NULL;
        char **have_dns = NULL, **have_ips = NULL;
        int64_t not_after = 0, not_before = 0;
        bool ok;

        ok = path_exists(cacrt) && pki_cert_load(crt, &cert) >= 0 && pki_key_load(key, &k) >= 0 &&
             pki_key_matches(k, cert) && pki_cert_verify(ca, cert) >= 0 &&
             pki_cert_not_after(cert, &not_after) >= 0 &&
             pki_cert_not_before(cert, &not_before) >= 0 && not_before <= now_ms &&
             not_after - now_ms > renew_seconds * 1000;
        if (ok && (dns || ips))
                ok = pki_cert_sans(cert, &have_dns, &have_ips) >= 0;
        for (size_t i = 0; ok && dns && dns[i]; i++)
                ok = strv_has(have_dns, dns[i]);
        for (size_t i = 0; ok && ips && ips[i]; i++)
                ok = strv_has(have_ips, ips[i]);
        strv_free(have_dns);
        strv_free(have_ips);
        pki_key_free(k);
        pki_cert_free(cert);
        return ok;
}

int pki_cert_serial(const pki_cert *c, char **ret_hex)
{
        BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(pki_cert_x509(c)), NULL);
        char *h = bn ? BN_bn2hex(bn) : NULL;
        BN_free(bn);
        if (!h)
                return fail(-EIO, "cannot read the serial number of a certificate");
        *ret_hex = xstrdup(h);
        OPENSSL_free(h);
        return 0;
}

/*
 * The expiry and serial of every certificate file read, as "NOT_AFTER_MS
 * SERIAL", kept while the file stays the same (util/filememo.h): an idle
 * pass asks for each member's leaves and the CA each time.
 */
static filememo cert_infos = FILEMEMO_INIT(filememo_strdup, filememo_free);

static void cert_info_out(const char *memo, int64_t *ret_not_after_ms, char **ret_serial)
{
        long long not_after = 0;
        int at = 0;
        if (sscanf(memo, "%lld %n", &not_after, &at) != 1)
                abort();
        *ret_not_after_ms = (int64_t)not_after;
        if (ret_serial)
                *ret_serial = xstrdup(memo + at);
}

/* notAfter and serial of the certificate file <dir>/<name> (pki_leaf_info, pki_ca_info). */
static int cert_file_info(const char *dir, const char *name, int64_t *ret_not_after_ms,
                          char **ret_serial)
{
        _cleanup_free_ char *crt = path_join(dir, name);
        const char *paths[] = {crt};
        _cleanup_free_ char *memo = NULL;
        if (filememo_get(&cert_infos, crt, paths, 1, (void **)&memo)) {
                cert_info_out(memo, ret_not_after_ms, ret_serial);
                return 0;
        }
        file_id id;
        filememo_ids(paths, 1, &id);
        if (!id.exists)
                return fail(-ENOENT, "%s does not exist", crt);
        pki_cert *cert = NULL;
        int r = pki_cert_load(crt, &cert);
        if (r < 0)
                return r;
        int64_t not_after = 0;
        r = pki_cert_not_after(cert, &not_after);
        char *hex = NULL;
        if (r >= 0)
                r = pki_cert_serial(cert, &hex);
        pki_cert_free(cert);
        if (r < 0)
                return r;
        _cleanup_free_ char *keep = xasprintf("%lld %s", (long long)not_after, hex);
        filememo_put(&cert_infos, crt, &id, 1, keep);
        *ret_not_after_ms = not_after;
        if (ret_serial)
                *ret_serial = hex;
        else
                free(hex);
        return 0;
}

int pki_leaf_info(const char *dir, int64_t *ret_not_after_ms, char **ret_serial)
{
        return cert_file_info(dir, "tls.crt", ret_not_after_ms, ret_serial);
}

int pki_ca_info(const char *dir, int64_t *ret_not_after_ms, char **ret_serial)
{
        return cert_file_info(dir, "ca.crt", ret_not_after_ms, ret_serial);
}

int pki_bundle_fingerprint(const char *pem, size_t len, char **ret_hex)
{
        assert(pem);
        BIO *bio = BIO_new_mem_buf(pem, (int)len);
        if (!bio)
                abort();
        hash_ctx *h = hash_sha256_new();
        size_t n = 0;
        X509 *x;
        while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
                unsigned char *der = NULL;
                int dlen = i2d_X509(x, &der);
                X509_free(x);
                if (dlen <= 0)
                        abort();
                hash_update(h, der, (size_t)dlen);
                OPENSSL_free(der);
                n++;
        }
        ERR_clear_error();
        BIO_free(bio);
        char hex[HASH_SHA256_HEX];
        hash_final_hex(h, hex);
        hash_free(h);
        if (n == 0)
                return pki_error(-EBADMSG, "no certificate in the CA bundle");
        *ret_hex = xstrdup(hex);
        return 0;
}

/*
 * Which leaf certificate a TLS server serves now (pki_served_serial).
 * libcurl does the connection and the handshake (CONNECT_ONLY: no request
 * is sent) and hands back the chain it was shown (CURLOPT_CERTINFO); the
 * leaf's serial is read as pki_leaf_info() reads a file's, so the two
 * compare as strings. etcd completes the handshake only with a client
 * that has a certificate when it checks client certificates, hence the
 * client identity.
 */
/* The "Cert:" entry (PEM) of the first certificate of the chain curl saw. */
static const char *leaf_pem(const struct curl_certinfo *ci)
{
        if (!ci || ci->num_of_certs < 1)
                return NULL;
        for (const struct curl_slist *l = ci->certinfo[0]; l; l = l->next)
                if (strncmp(l->data, "Cert:", 5) == 0)
                        return l->data + 5;
        return NULL;
}

int pki_served_serial(const char *url, const char *cert, const char *key, int timeout_ms,
                      char **ret_serial)
{
        *ret_serial = NULL;
        /* A member is reached directly, never through a proxy (util/http.h). */
        http_opts o = {.proxy = HTTP_PROXY_NONE,
                       .https_only = true,
                       .timeout_ms = timeout_ms,
                       .tls = {.insecure = true, .cert_file = cert, .key_file = key}};
        CURL *h = http_handle_new(&o);
        if (!h)
                return -ENOMEM;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
        curl_easy_setopt(h, CURLOPT_CERTINFO, 1L);
        CURLcode rc = curl_easy_perform(h);
        int r = 0;
        struct curl_certinfo *ci = NULL;
        const char *pem = NULL;
        if (rc != CURLE_OK)
                r = -EHOSTUNREACH;
        else if (curl_easy_getinfo(h, CURLINFO_CERTINFO, &ci) != CURLE_OK || !(pem = leaf_pem(ci)))
                r = -EBADMSG;
        pki_cert *c = NULL;
        if (r == 0)
                r = pki_cert_from_pem(pem, strlen(pem), url, &c);
        if (r == 0)
                r = pki_cert_serial(c, ret_serial);
        pki_cert_free(c);
        curl_easy_cleanup(h);
        if (rc != CURLE_OK)
                return fail(r, "%s: no TLS handshake: %s", url, curl_easy_strerror(rc));
        if (r == -EBADMSG)
                return fail(r, "%s: the server showed no certificate", url);
        return r;
}
