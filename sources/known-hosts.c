/*
 * known_hosts checking (see known-hosts.h). The file is read whole on each
 * check: it is small and re-reading picks up an operator's edits without a
 * restart. A line applies to the host when one of its patterns matches and
 * none of its negated patterns does, exactly as OpenSSH decides; the verdict
 * is "known" only when an applicable, non-revoked line carries the very key
 * the server offered. @cert-authority lines are ignored (host certificates
 * are not supported), so they never make a host trusted; so are lines with
 * any other marker (markers match exactly: "@revokedx" is not "@revoked"),
 * as OpenSSH does.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sources/known-hosts.h"
#include "sources/sshwire.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define KNOWN_HOSTS_MAX_SIZE (16u * 1024u * 1024u)

char *known_hosts_name(const char *host, int port)
{
        if (port <= 0 || port == 22)
                return xstrdup(host);
        return xasprintf("[%s]:%d", host, port);
}

/*
 * OpenSSH's wildcard match: '*' and '?', case-insensitive, no character
 * classes. Iterative with one backtrack point, so hostile patterns
 * ("*a*a*a*...") stay linear-ish instead of exponential.
 */
static bool wildcard_match(const char *pat, size_t pat_len, const char *s)
{
        size_t pi = 0, si = 0, star = SIZE_MAX, mark = 0, len = strlen(s);

        while (si < len) {
                if (pi < pat_len && pat[pi] == '*') {
                        star = pi++;
                        mark = si;
                } else if (pi < pat_len && (pat[pi] == '?' || tolower((unsigned char)pat[pi]) ==
                                                                  tolower((unsigned char)s[si]))) {
                        pi++;
                        si++;
                } else if (star != SIZE_MAX) {
                        pi = star + 1;
                        si = ++mark;
                } else {
                        return false;
                }
        }
        while (pi < pat_len && pat[pi] == '*')
                pi++;
        return pi == pat_len;
}

static bool hashed_match(const char *entry, size_t len, const char *name)
{
        /* |1|base64(salt)|base64(HMAC-SHA1(salt, name)) */
        const char *salt = entry + 3, *bar = memchr(salt, '|', len - 3);
        _cleanup_free_ uint8_t *salt_raw = NULL, *hash_raw = NULL;
        size_t salt_len, hash_len;
        uint8_t md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;

        if (!bar)
                return false;
        if (base64_decode(salt, (size_t)(bar - salt), &salt_raw, &salt_len) < 0 ||
            base64_decode(bar + 1, len - (size_t)(bar + 1 - entry), &hash_raw, &hash_len) < 0)
                return false;
        if (!HMAC(EVP_sha1(), salt_raw, (int)salt_len, (const uint8_t *)name, strlen(name), md,
                  &md_len))
                return false;
        return hash_len == md_len && CRYPTO_memcmp(md, hash_raw, md_len) == 0;
}

/* Whether a comma-separated host list applies to name. */
static bool hosts_match(const char *list, size_t len, const char *name)
{
        bool matched = false;

        if (len > 3 && strneq(list, "|1|", 3))
                return hashed_match(list, len, name);

        while (len > 0) {
                const char *comma = memchr(list, ',', len);
                size_t n = comma ? (size_t)(comma - list) : len;
                bool negate = n > 0 && list[0] == '!';

                if (negate) {
                        if (wildcard_match(list + 1, n - 1, name))
                                return false;
                } else if (n > 0 && wildcard_match(list, n, name)) {
                        matched = true;
                }
                if (!comma)
                        break;
                len -= n + 1;
                list = comma + 1;
        }
        return matched;
}

/* Split off the next whitespace-separated field of a line. */
static bool next_field(const char **p, const char **ret, size_t *ret_len)
{
        const char *s = *p;

        while (*s == ' ' || *s == '\t')
                s++;
        if (*s == '\0' || *s == '\n' || *s == '#')
                return false;
        *ret = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\n')
                s++;
        *ret_len = (size_t)(s - *ret);
        *p = s;
        return true;
}

/* Whether the marker field (len bytes) is exactly name. */
static bool marker_is(const char *field, size_t len, const char *name)
{
        return len == strlen(name) && memcmp(field, name, len) == 0;
}

/* The message for a key that is not accepted; 0 when it is. */
static int verdict(const char *name, const char *fp, const char *type, bool key_listed,
                   bool same_type_listed, bool revoked, const char *other_types, char **ret_message)
{
        if (revoked) {
                *ret_message = xasprintf("host key for %s is marked @revoked in known_hosts "
                                         "(offered %s)",
                                         name, fp);
                return -EACCES;
        }
        if (key_listed)
                return 0;
        if (same_type_listed)
                *ret_message = xasprintf("host key for %s does not match known_hosts: possible "
                                         "man-in-the-middle (offered %s)",
                                         name, fp);
        else if (*other_types)
                /* the server has none of the listed types, or will not sign with it */
                *ret_message = xasprintf(
                    "host key for %s is not in known_hosts (offered %s, a %s key; known_hosts "
                    "lists only %s keys for it%s: add its %s key, e.g. from ssh-keyscan)",
                    name, fp, type ? type : "unknown", other_types,
                    streq(other_types, "ssh-rsa")
                        ? ", and gitcd's SSH library checks an RSA host key only through ssh-rsa "
                          "(SHA-1) signatures, which OpenSSH 8.8 and later servers do not make "
                          "unless HostKeyAlgorithms allows them"
                        : "",
                    type ? type : "offered");
        else
                *ret_message =
                    xasprintf("host key for %s is not in known_hosts (offered %s)", name, fp);
        return -EACCES;
}

int known_hosts_check(const char *path, const char *host, int port, const uint8_t *key,
                      size_t key_len, char **ret_message)
{
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r;

        r = read_file(path, KNOWN_HOSTS_MAX_SIZE, &data, &len);
        if (r < 0) {
                *ret_message = xasprintf("cannot read known_hosts file %s: %s", path, strerror(-r));
                return r == -ENOENT ? -ENOENT : -EIO;
        }
        return known_hosts_check_buffer(data, len, host, port, key, key_len, ret_message);
}

int known_hosts_check_buffer(const char *text, size_t text_len, const char *host, int port,
                             const uint8_t *key, size_t key_len, char **ret_message)
{
        _cleanup_free_ char *data = xstrndup(text, text_len), *name = known_hosts_name(host, port);
        _cleanup_free_ char *fp = ssh_fingerprint(key, key_len);
        _cleanup_free_ char *type = ssh_key_type(key, key_len);
        bool same_type_listed = false, key_listed = false, revoked = false;
        strbuf other_types = STRBUF_INIT;
        int r;

        for (char *line = data, *next; line; line = next) {
                const char *p = line, *f, *hosts, *b64;
                size_t n, hosts_len, b64_len;
                const char *marker = NULL;
                size_t marker_len = 0;
                _cleanup_free_ uint8_t *blob = NULL;
                size_t blob_len;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (!next_field(&p, &f, &n))
                        continue;
                if (f[0] == '@') {
                        marker = f;
                        marker_len = n;
                        if (!next_field(&p, &f, &n))
                                continue;
                }
                hosts = f;
                hosts_len = n;
                if (!next_field(&p, &f, &n)) /* key type */
                        continue;
                if (!next_field(&p, &b64, &b64_len))
                        continue;
                /* As OpenSSH: a marker other than these two makes the line void. */
                if (marker && !marker_is(marker, marker_len, "@revoked"))
                        continue; /* @cert-authority (unsupported) or unknown */
                if (!hosts_match(hosts, hosts_len, name))
                        continue;
                if (base64_decode(b64, b64_len, &blob, &blob_len) < 0)
                        continue;
                if (marker) { /* @revoked */
                        if (blob_len == key_len && memcmp(blob, key, key_len) == 0)
                                revoked = true;
                        continue;
                }
                if (blob_len == key_len && memcmp(blob, key, key_len) == 0) {
                        key_listed = true;
                } else {
                        _cleanup_free_ char *t = ssh_key_type(blob, blob_len);

                        if (streq_ptr(t, type))
                                same_type_listed = true;
                        else if (t && !strstr(sb_str(&other_types), t))
                                sb_printf(&other_types, "%s%s", other_types.len ? ", " : "", t);
                }
        }
        r = verdict(name, fp, type, key_listed, same_type_listed, revoked, sb_str(&other_types),
                    ret_message);
        sb_release(&other_types);
        return r;
}

/* The place of a key type in gitcd's order of preference (lower first). */
static int type_rank(const char *type, size_t len)
{
        static const char *const order[] = {"ssh-ed25519",
                                            "ecdsa-sha2-nistp256",
                                            "ecdsa-sha2-nistp384",
                                            "ecdsa-sha2-nistp521",
                                            "ssh-rsa",
                                            "ssh-dss"};
        for (size_t i = 0; i < ARRAY_SIZE(order); i++)
                if (len == strlen(order[i]) && memcmp(type, order[i], len) == 0)
                        return (int)i;
        return (int)ARRAY_SIZE(order);
}

typedef struct host_line {
        int rank;
        size_t seq; /* its place in the file: the order within a rank */
        char *text; /* "<name> <type> <key>\n" */
} host_line;

static int host_line_cmp(const void *a, const void *b)
{
        const host_line *x = a, *y = b;
        if (x->rank != y->rank)
                return x->rank < y->rank ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

char *known_hosts_lines(const char *text, size_t text_len, const char *host, int port)
{
        _cleanup_free_ char *data = xstrndup(text, text_len), *name = known_hosts_name(host, port);
        host_line *lines = NULL;
        size_t n = 0, alloc = 0;

        for (char *line = data, *next; line; line = next) {
                const char *p = line, *f, *hosts, *type, *b64;
                size_t len, hosts_len, type_len, b64_len;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (!next_field(&p, &f, &len) || f[0] == '@')
                        continue; /* blank, a comment, or a marker */
                hosts = f;
                hosts_len = len;
                if (!next_field(&p, &type, &type_len) || !next_field(&p, &b64, &b64_len))
                        continue;
                if (!hosts_match(hosts, hosts_len, name))
                        continue;
                lines = xgrow(lines, &alloc, n + 1, sizeof(*lines));
                lines[n] = (host_line){.rank = type_rank(type, type_len),
                                       .seq = n,
                                       .text = xasprintf("%s %.*s %.*s\n", name, (int)type_len,
                                                         type, (int)b64_len, b64)};
                n++;
        }
        if (n > 1)
                qsort(lines, n, sizeof(*lines), host_line_cmp);
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < n; i++) {
                sb_append(&sb, lines[i].text);
                free(lines[i].text);
        }
        free(lines);
        return sb_detach(&sb);
}

static bool listed(const char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (streq(v[i], s))
                        return true;
        return false;
}

/* Append alg to the list when the library implements it and it is not there yet. */
static void offer(strbuf *sb, const char *alg, const char *const *supported, size_t n_supported)
{
        if (!listed(supported, n_supported, alg))
                return;
        _cleanup_free_ char *with_commas = xasprintf(",%s,", sb_str(sb));
        _cleanup_free_ char *needle = xasprintf(",%s,", alg);
        if (strstr(with_commas, needle))
                return;
        sb_printf(sb, "%s%s", sb->len ? "," : "", alg);
}

char *known_hosts_algorithms(const char *path, const char *host, int port,
                             const char *const *supported, size_t n_supported)
{
        _cleanup_free_ char *data = NULL, *lines = NULL;
        size_t len;

        if (read_file(path, KNOWN_HOSTS_MAX_SIZE, &data, &len) < 0)
                return NULL;
        lines = known_hosts_lines(data, len, host, port);
        strbuf sb = STRBUF_INIT;
        for (const char *l = lines; *l;) {
                const char *type = strchr(l, ' ') + 1;
                size_t type_len = strcspn(type, " ");
                _cleanup_free_ char *t = xstrndup(type, type_len);
                if (streq(t, "ssh-rsa")) {
                        offer(&sb, "rsa-sha2-512", supported, n_supported);
                        offer(&sb, "rsa-sha2-256", supported, n_supported);
                }
                offer(&sb, t, supported, n_supported);
                l = strchr(l, '\n') + 1;
        }
        if (sb.len == 0) {
                sb_release(&sb);
                return NULL; /* nothing listed (or nothing the library implements) */
        }
        for (size_t i = 0; i < n_supported; i++)
                if (!strstr(supported[i], "-cert-"))
                        offer(&sb, supported[i], supported, n_supported);
        return sb_detach(&sb);
}
