/*
 * SSHSIG verification (see sshsig.h). The design decision: the signature is
 * checked with the public key it carries first, and only then is that key
 * looked up in allowed_signers, so the verdict can say precisely "invalid
 * signature" or "valid signature by an untrusted key SHA256:...". Like git
 * (which runs `ssh-keygen -Y find-principals` then `-Y verify`), any
 * principal of a matching line is accepted; namespaces= must include "git"
 * when present, and valid-after/valid-before are compared with the commit
 * time. cert-authority lines are not supported and never grant trust.
 *
 * Signed message (PROTOCOL.sshsig): "SSHSIG" || string(namespace) ||
 * string(reserved) || string(hash_alg) || string(H(data)).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "sources/sshsig.h"
#include "sources/sshwire.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define ARMOR_BEGIN          "-----BEGIN SSH SIGNATURE-----"
#define ARMOR_END            "-----END SSH SIGNATURE-----"
#define ALLOWED_SIGNERS_MAX  (16u * 1024u * 1024u)
#define SSHSIG_NAMESPACE     "git"
#define RSA_MIN_MODULUS_BITS 1024

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY *, EVP_PKEY_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY_CTX *, EVP_PKEY_CTX_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(OSSL_PARAM_BLD *, OSSL_PARAM_BLD_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(OSSL_PARAM *, OSSL_PARAM_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(BIGNUM *, BN_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(ECDSA_SIG *, ECDSA_SIG_free)

static bool str_eq(const uint8_t *s, size_t n, const char *lit)
{
        return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static EVP_PKEY *pkey_from_params(const char *type, OSSL_PARAM *params)
{
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx =
            EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
        EVP_PKEY *pkey = NULL;

        if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
            EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
                return NULL;
        return pkey;
}

static EVP_PKEY *rsa_key(sshbuf *b)
{
        _cleanup_(OSSL_PARAM_BLD_freep) OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        _cleanup_(OSSL_PARAM_freep) OSSL_PARAM *params = NULL;
        _cleanup_(BN_freep) BIGNUM *e = NULL;
        _cleanup_(BN_freep) BIGNUM *n = NULL;
        const uint8_t *es, *ns;
        size_t el, nl;

        if (sshbuf_string(b, &es, &el) < 0 || sshbuf_string(b, &ns, &nl) < 0)
                return NULL;
        e = BN_bin2bn(es, (int)el, NULL);
        n = BN_bin2bn(ns, (int)nl, NULL);
        if (!bld || !e || !n || BN_num_bits(n) < RSA_MIN_MODULUS_BITS)
                return NULL;
        if (!OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) ||
            !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e))
                return NULL;
        params = OSSL_PARAM_BLD_to_param(bld);
        if (!params)
                return NULL;
        return pkey_from_params("RSA", params);
}

static const char *ec_group(const uint8_t *curve, size_t len)
{
        if (str_eq(curve, len, "nistp256"))
                return "prime256v1";
        if (str_eq(curve, len, "nistp384"))
                return "secp384r1";
        if (str_eq(curve, len, "nistp521"))
                return "secp521r1";
        return NULL;
}

static EVP_PKEY *ec_key(sshbuf *b)
{
        _cleanup_(OSSL_PARAM_BLD_freep) OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        _cleanup_(OSSL_PARAM_freep) OSSL_PARAM *params = NULL;
        const uint8_t *curve, *q;
        size_t cl, ql;
        const char *group;

        if (sshbuf_string(b, &curve, &cl) < 0 || sshbuf_string(b, &q, &ql) < 0)
                return NULL;
        group = ec_group(curve, cl);
        if (!bld || !group)
                return NULL;
        if (!OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0) ||
            !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, q, ql))
                return NULL;
        params = OSSL_PARAM_BLD_to_param(bld);
        if (!params)
                return NULL;
        return pkey_from_params("EC", params);
}

/* The OpenSSL key for a public-key blob; NULL if unsupported or malformed. */
static EVP_PKEY *load_public_key(const uint8_t *blob, size_t len, char **ret_type)
{
        sshbuf b = {blob, len};
        const uint8_t *type, *pk;
        size_t tl, pl;
        EVP_PKEY *pkey = NULL;

        if (sshbuf_string(&b, &type, &tl) < 0)
                return NULL;
        if (str_eq(type, tl, "ssh-ed25519")) {
                if (sshbuf_string(&b, &pk, &pl) == 0 && pl == 32)
                        pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pk, pl);
        } else if (str_eq(type, tl, "ssh-rsa")) {
                pkey = rsa_key(&b);
        } else if (tl > 11 && memcmp(type, "ecdsa-sha2-", 11) == 0) {
                pkey = ec_key(&b);
        }
        if (pkey)
                *ret_type = xstrndup((const char *)type, tl);
        return pkey;
}

/* Convert an SSH ECDSA signature (mpint r, mpint s) to DER. */
static int ecdsa_sig_der(const uint8_t *raw, size_t len, uint8_t **ret, size_t *ret_len)
{
        sshbuf b = {raw, len};
        const uint8_t *rs, *ss;
        size_t rl, sl;
        _cleanup_(ECDSA_SIG_freep) ECDSA_SIG *sig = ECDSA_SIG_new();
        BIGNUM *r, *s;
        uint8_t *der = NULL;
        int n;

        if (!sig || sshbuf_string(&b, &rs, &rl) < 0 || sshbuf_string(&b, &ss, &sl) < 0 || b.left)
                return -EBADMSG;
        r = BN_bin2bn(rs, (int)rl, NULL);
        s = BN_bin2bn(ss, (int)sl, NULL);
        if (!r || !s || !ECDSA_SIG_set0(sig, r, s)) {
                BN_free(r);
                BN_free(s);
                return -EBADMSG;
        }
        n = i2d_ECDSA_SIG(sig, &der);
        if (n <= 0)
                return -EBADMSG;
        *ret = der;
        *ret_len = (size_t)n;
        return 0;
}

/*
 * Check the signature blob (string sig_type, string sig) over tbs with pkey.
 * Returns 1 valid, 0 invalid, -EBADMSG malformed or mismatched algorithm.
 */
static int check_signature(EVP_PKEY *pkey, const char *key_type, const uint8_t *sig_blob,
                           size_t sig_len, const uint8_t *tbs, size_t tbs_len)
{
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        _cleanup_free_ uint8_t *der = NULL;
        sshbuf b = {sig_blob, sig_len};
        const uint8_t *st, *sig;
        size_t stl, sl;
        const EVP_MD *md = NULL;

        if (!ctx || sshbuf_string(&b, &st, &stl) < 0 || sshbuf_string(&b, &sig, &sl) < 0)
                return -EBADMSG;
        if (streq(key_type, "ssh-ed25519")) {
                if (!str_eq(st, stl, "ssh-ed25519") || sl != 64)
                        return -EBADMSG;
        } else if (streq(key_type, "ssh-rsa")) {
                if (str_eq(st, stl, "rsa-sha2-256"))
                        md = EVP_sha256();
                else if (str_eq(st, stl, "rsa-sha2-512"))
                        md = EVP_sha512();
                else
                        return -EBADMSG; /* ssh-rsa (SHA-1) is not accepted */
        } else {
                if (!str_eq(st, stl, key_type))
                        return -EBADMSG;
                if (streq(key_type, "ecdsa-sha2-nistp256"))
                        md = EVP_sha256();
                else if (streq(key_type, "ecdsa-sha2-nistp384"))
                        md = EVP_sha384();
                else if (streq(key_type, "ecdsa-sha2-nistp521"))
                        md = EVP_sha512();
                else
                        return -EBADMSG;
                if (ecdsa_sig_der(sig, sl, &der, &sl) < 0)
                        return -EBADMSG;
                sig = der;
        }
        if (EVP_DigestVerifyInit(ctx, NULL, md, NULL, pkey) <= 0)
                return -EBADMSG;
        return EVP_DigestVerify(ctx, sig, sl, tbs, tbs_len) == 1 ? 1 : 0;
}

static void put_string(strbuf *sb, const void *s, size_t n)
{
        uint8_t len[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};

        sb_append_len(sb, len, 4);
        sb_append_len(sb, s, n);
}

/* Parse "YYYYMMDD[HHMM[SS]][Z]" as OpenSSH does; times without Z are taken as UTC. */
static int parse_time(const char *s, size_t n, int64_t *ret)
{
        struct tm tm = {0};
        char buf[16];
        size_t digits = n;

        if (n > 0 && (s[n - 1] == 'Z' || s[n - 1] == 'z'))
                digits--;
        if (digits != 8 && digits != 12 && digits != 14)
                return -EINVAL;
        for (size_t i = 0; i < digits; i++)
                if (!isdigit((unsigned char)s[i]))
                        return -EINVAL;
        memcpy(buf, s, digits);
        buf[digits] = '\0';
        if (sscanf(buf, "%4d%2d%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3)
                return -EINVAL;
        if (digits >= 12 && sscanf(buf + 8, "%2d%2d", &tm.tm_hour, &tm.tm_min) != 2)
                return -EINVAL;
        if (digits == 14 && sscanf(buf + 12, "%2d", &tm.tm_sec) != 1)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        *ret = (int64_t)timegm(&tm);
        return 0;
}

/* One option value from an options field, quotes removed; NULL when absent. */
static char *option_value(const char *opts, size_t len, const char *name)
{
        size_t nl = strlen(name);
        size_t i = 0;

        while (i < len) {
                size_t start = i;
                bool quoted = false;

                while (i < len && (quoted || opts[i] != ',')) {
                        if (opts[i] == '"')
                                quoted = !quoted;
                        i++;
                }
                if (i - start > nl && strncasecmp(opts + start, name, nl) == 0 &&
                    opts[start + nl] == '=') {
                        const char *v = opts + start + nl + 1;
                        size_t vl = i - (start + nl + 1);

                        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
                                v++;
                                vl -= 2;
                        }
                        return xstrndup(v, vl);
                }
                i++; /* the comma */
        }
        return NULL;
}

static bool option_flag(const char *opts, size_t len, const char *name)
{
        size_t nl = strlen(name);

        for (size_t i = 0; i + nl <= len; i++)
                if ((i == 0 || opts[i - 1] == ',') && strncasecmp(opts + i, name, nl) == 0 &&
                    (i + nl == len || opts[i + nl] == ','))
                        return true;
        return false;
}

static bool list_contains(const char *list, const char *word)
{
        size_t wl = strlen(word);

        for (const char *p = list; p && *p;) {
                const char *c = strchr(p, ',');
                size_t n = c ? (size_t)(c - p) : strlen(p);

                if (n == wl && strncmp(p, word, n) == 0)
                        return true;
                p = c ? c + 1 : NULL;
        }
        return false;
}

static bool looks_like_key_type(const char *s, size_t n)
{
        return (n > 4 && strneq(s, "ssh-", 4)) || (n > 6 && strneq(s, "ecdsa-", 6)) ||
               (n > 3 && strneq(s, "sk-", 3));
}

static bool field(const char **p, const char **ret, size_t *ret_len)
{
        const char *s = *p;
        bool quoted = false;

        while (*s == ' ' || *s == '\t')
                s++;
        if (*s == '\0' || *s == '#')
                return false;
        *ret = s;
        while (*s && (quoted || (*s != ' ' && *s != '\t'))) {
                if (*s == '"')
                        quoted = !quoted;
                s++;
        }
        *ret_len = (size_t)(s - *ret);
        *p = s;
        return true;
}

/*
 * Look the key up in the allowed_signers text. Returns 1 trusted (identity
 * set), or 0 not trusted (*ret_why may say why a matching line did not apply).
 */
static int find_signer(const char *signers, size_t signers_len, const uint8_t *key, size_t key_len,
                       int64_t when, char **ret_identity, char **ret_why)
{
        _cleanup_free_ char *data = xstrndup(signers, signers_len);

        for (char *line = data, *next; line; line = next) {
                const char *p = line, *principals, *opts = NULL, *f, *b64;
                size_t pl, ol = 0, n, b64_len;
                _cleanup_free_ uint8_t *blob = NULL;
                _cleanup_free_ char *ns = NULL, *after = NULL, *before = NULL;
                size_t blob_len;
                int64_t t;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (!field(&p, &principals, &pl) || !field(&p, &f, &n))
                        continue;
                if (!looks_like_key_type(f, n)) {
                        opts = f;
                        ol = n;
                        if (!field(&p, &f, &n))
                                continue;
                }
                if (!field(&p, &b64, &b64_len) || base64_decode(b64, b64_len, &blob, &blob_len) < 0)
                        continue;
                if (blob_len != key_len || memcmp(blob, key, key_len) != 0)
                        continue;
                if (opts && option_flag(opts, ol, "cert-authority"))
                        continue;
                if (opts)
                        ns = option_value(opts, ol, "namespaces");
                if (ns && !list_contains(ns, SSHSIG_NAMESPACE)) {
                        free(*ret_why);
                        *ret_why = xasprintf("the key is not allowed to sign in namespace "
                                             "\"git\" (namespaces=\"%s\")",
                                             ns);
                        continue;
                }
                if (opts)
                        after = option_value(opts, ol, "valid-after");
                if (opts)
                        before = option_value(opts, ol, "valid-before");
                if (after && (parse_time(after, strlen(after), &t) < 0 || when < t)) {
                        free(*ret_why);
                        *ret_why = xasprintf("the key is only valid after %s", after);
                        continue;
                }
                if (before && (parse_time(before, strlen(before), &t) < 0 || when > t)) {
                        free(*ret_why);
                        *ret_why = xasprintf("the key is only valid before %s", before);
                        continue;
                }
                *ret_identity = xstrndup(principals, pl);
                return 1;
        }
        return 0;
}

static int verdict(sshsig_verdict *v, bool ok, const char *fmt, ...) _printf_(3, 4);
static int verdict(sshsig_verdict *v, bool ok, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        v->verified = ok;
        free(v->reason);
        v->reason = xvasprintf(fmt, ap);
        va_end(ap);
        return 0;
}

static void sb_releasep(strbuf *sb)
{
        sb_release(sb);
}

/* Fill *v; returns 0, or a negative errno when allowed_signers cannot be read. */
static int verify(const char *armored, size_t armored_len, const void *data, size_t data_len,
                  const char *signers, size_t signers_len, int64_t when, sshsig_verdict *v)
{
        _cleanup_free_ uint8_t *raw = NULL;
        _cleanup_free_ char *key_type = NULL, *identity = NULL, *why = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        _cleanup_(sb_releasep) strbuf tbs = STRBUF_INIT;
        const char *begin, *end;
        const uint8_t *pub, *ns, *reserved, *halg, *sig;
        size_t raw_len, pub_len, ns_len, res_len, halg_len, sig_len;
        uint8_t digest[EVP_MAX_MD_SIZE];
        unsigned digest_len = 0;
        const EVP_MD *md;
        uint32_t version;
        sshbuf b;
        int r;

        begin = memmem(armored, armored_len, ARMOR_BEGIN, strlen(ARMOR_BEGIN));
        if (begin)
                begin += strlen(ARMOR_BEGIN);
        /* the end marker is searched after the begin marker: they share "-----" */
        end = begin ? memmem(begin, armored_len - (size_t)(begin - armored), ARMOR_END,
                             strlen(ARMOR_END))
                    : NULL;
        if (!begin || !end) {
                if (memmem(armored, armored_len, "-----BEGIN PGP", 14))
                        return verdict(v, false,
                                       "OpenPGP signatures are not supported; sign "
                                       "with an SSH key");
                if (memmem(armored, armored_len, "-----BEGIN SIGNED MESSAGE", 25))
                        return verdict(v, false,
                                       "X.509 signatures are not supported; sign "
                                       "with an SSH key");
                return verdict(v, false, "the signature is not an SSH signature");
        }
        if (base64_decode(begin, (size_t)(end - begin), &raw, &raw_len) < 0 || raw_len < 6 ||
            memcmp(raw, "SSHSIG", 6) != 0)
                return verdict(v, false, "malformed SSH signature");
        b = (sshbuf){raw + 6, raw_len - 6};
        if (sshbuf_u32(&b, &version) < 0 || version != 1 || sshbuf_string(&b, &pub, &pub_len) < 0 ||
            sshbuf_string(&b, &ns, &ns_len) < 0 || sshbuf_string(&b, &reserved, &res_len) < 0 ||
            sshbuf_string(&b, &halg, &halg_len) < 0 || sshbuf_string(&b, &sig, &sig_len) < 0)
                return verdict(v, false, "malformed SSH signature");
        v->fingerprint = ssh_fingerprint(pub, pub_len);

        if (!str_eq(ns, ns_len, SSHSIG_NAMESPACE))
                return verdict(v, false, "the signature is for namespace \"%.*s\", not \"git\"",
                               (int)MIN(ns_len, 64), (const char *)ns);
        if (str_eq(halg, halg_len, "sha512"))
                md = EVP_sha512();
        else if (str_eq(halg, halg_len, "sha256"))
                md = EVP_sha256();
        else
                return verdict(v, false, "unsupported signature hash algorithm");
        pkey = load_public_key(pub, pub_len, &key_type);
        if (!pkey) {
                _cleanup_free_ char *t = ssh_key_type(pub, pub_len);

                return verdict(v, false, "unsupported or malformed signing key %s (%s)",
                               t ? t : "of unknown type", v->fingerprint);
        }
        if (!EVP_Digest(data, data_len, digest, &digest_len, md, NULL))
                return verdict(v, false, "cannot hash the signed data");
        sb_append_len(&tbs, "SSHSIG", 6);
        put_string(&tbs, ns, ns_len);
        put_string(&tbs, reserved, res_len);
        put_string(&tbs, halg, halg_len);
        put_string(&tbs, digest, digest_len);

        r = check_signature(pkey, key_type, sig, sig_len, (const uint8_t *)tbs.buf, tbs.len);
        if (r < 0)
                return verdict(v, false, "malformed %s signature by key %s", key_type,
                               v->fingerprint);
        if (r == 0)
                return verdict(v, false,
                               "invalid %s signature (key %s): the signed content "
                               "does not match",
                               key_type, v->fingerprint);

        r = find_signer(signers, signers_len, pub, pub_len, when, &identity, &why);
        if (r == 0 && why)
                return verdict(v, false, "valid %s signature by key %s, but %s", key_type,
                               v->fingerprint, why);
        if (r == 0)
                return verdict(v, false,
                               "valid %s signature by key %s, which is not in the "
                               "allowed signers",
                               key_type, v->fingerprint);
        v->identity = TAKE_PTR(identity);
        return verdict(v, true, "good %s signature by %s (key %s)", key_type, v->identity,
                       v->fingerprint);
}

int sshsig_verify(const char *armored, size_t armored_len, const void *data, size_t data_len,
                  const char *allowed_signers_path, int64_t when, sshsig_verdict *ret,
                  char **ret_error)
{
        _cleanup_free_ char *signers = NULL;
        size_t len;
        int r;

        r = read_file(allowed_signers_path, ALLOWED_SIGNERS_MAX, &signers, &len);
        if (r < 0) {
                *ret_error = xasprintf("cannot read allowed_signers file %s: %s",
                                       allowed_signers_path, strerror(-r));
                return r == -ENOENT ? -ENOENT : -EIO;
        }
        sshsig_verify_buffer(armored, armored_len, data, data_len, signers, len, when, ret);
        return 0;
}

void sshsig_verify_buffer(const char *armored, size_t armored_len, const void *data,
                          size_t data_len, const char *signers, size_t signers_len, int64_t when,
                          sshsig_verdict *ret)
{
        sshsig_verdict v = {0};

        verify(armored, armored_len, data, data_len, signers, signers_len, when, &v);
        *ret = v;
}

void sshsig_verdict_release(sshsig_verdict *v)
{
        if (!v)
                return;
        free(v->reason);
        free(v->fingerprint);
        free(v->identity);
        *v = (sshsig_verdict){0};
}
