/*
 * Location parsing (see url.h). The rule for telling URLs, scp-like
 * addresses and paths apart is git's: "scheme://" is a URL; otherwise a
 * colon before the first slash makes it scp-like ("git@host:org/repo");
 * anything else is a local path. Credentials found in a URL are kept in
 * memory for authentication but never copied into fetch_url or display, so
 * nothing derived from this struct can leak them.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sources/source.h"
#include "sources/url.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* A host name or address: letters, digits, '.', '-', '_', and ':' and '%' for IPv6. */
static bool valid_host(const char *h)
{
        if (isempty(h))
                return false;
        for (const char *p = h; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr(".-_:%", *p))
                        return false;
        return true;
}

static int parse_authority(const char *a, size_t n, source_url *u, char **ret_error)
{
        const char *at = NULL, *hp, *end = a + n, *colon;

        for (const char *p = a; p < end; p++)
                if (*p == '@')
                        at = p; /* the last '@': passwords may contain '@' */
        hp = a;
        if (at) {
                const char *c = memchr(a, ':', (size_t)(at - a));

                if (c) {
                        u->user = xstrndup(a, (size_t)(c - a));
                        u->password = xstrndup(c + 1, (size_t)(at - c - 1));
                } else {
                        u->user = xstrndup(a, (size_t)(at - a));
                }
                hp = at + 1;
        }
        if (hp < end && *hp == '[') {
                const char *close = memchr(hp, ']', (size_t)(end - hp));

                if (!close) {
                        *ret_error = xstrdup("malformed URL: unterminated '[' in the host");
                        return -EINVAL;
                }
                u->host = xstrndup(hp + 1, (size_t)(close - hp - 1));
                colon = close + 1 < end && close[1] == ':' ? close + 1 : NULL;
        } else {
                colon = memchr(hp, ':', (size_t)(end - hp));
                u->host = xstrndup(hp, (size_t)((colon ? colon : end) - hp));
        }
        if (colon) {
                char *e;
                long port = strtol(colon + 1, &e, 10);

                if (e != end || port <= 0 || port > 65535) {
                        *ret_error = xstrdup("malformed URL: bad port number");
                        return -EINVAL;
                }
                u->port = (int)port;
        }
        if (!valid_host(u->host)) {
                *ret_error = xstrdup("malformed URL: missing or invalid host");
                return -EINVAL;
        }
        return 0;
}

static char *host_port(const source_url *u)
{
        bool v6 = strchr(u->host, ':') != NULL;

        if (u->port)
                return xasprintf(v6 ? "[%s]:%d" : "%s:%d", u->host, u->port);
        return xasprintf(v6 ? "[%s]" : "%s", u->host);
}

int source_url_parse(const char *s, source_url *ret, char **ret_error)
{
        source_url u = {0};
        const char *sep = strstr(s, "://"), *slash = strchr(s, '/'), *colon = strchr(s, ':');
        int r;

        if (isempty(s)) {
                *ret_error = xstrdup("empty source location");
                return -EINVAL;
        }
        if (sep) {
                size_t sl = (size_t)(sep - s);
                const char *auth = sep + 3, *path = strchr(auth, '/');
                _cleanup_free_ char *hp = NULL;

                if (sl == 4 && strneq(s, "file", 4)) {
                        u.kind = SOURCE_URL_FILE;
                        u.path = xstrdup(auth);
                        u.fetch_url = xstrdup(s);
                        u.display = xstrdup(s);
                        *ret = u;
                        return 0;
                }
                if (sl == 3 && strneq(s, "ssh", 3))
                        u.kind = SOURCE_URL_SSH;
                else if ((sl == 7 && strneq(s, "git+ssh", 7)) ||
                         (sl == 7 && strneq(s, "ssh+git", 7)))
                        u.kind = SOURCE_URL_SSH;
                else if (sl == 5 && strneq(s, "https", 5))
                        u.kind = SOURCE_URL_HTTPS;
                else if (sl == 4 && strneq(s, "http", 4))
                        u.kind = SOURCE_URL_HTTP;
                else {
                        *ret_error = xasprintf("unsupported URL scheme \"%.*s\" (use ssh://, "
                                               "https://, http://, file:// or a path)",
                                               (int)MIN(sl, 32), s);
                        return -EINVAL;
                }
                if (!path)
                        path = auth + strlen(auth);
                r = parse_authority(auth, (size_t)(path - auth), &u, ret_error);
                if (r < 0) {
                        source_url_release(&u);
                        return r;
                }
                u.path = xstrdup(*path ? path : "/");
                hp = host_port(&u);
                if (u.kind == SOURCE_URL_SSH && u.user)
                        u.fetch_url = xasprintf("ssh://%s@%s%s", u.user, hp, u.path);
                else if (u.kind == SOURCE_URL_SSH)
                        u.fetch_url = xasprintf("ssh://%s%s", hp, u.path);
                else
                        u.fetch_url = xasprintf(
                            "%s://%s%s", u.kind == SOURCE_URL_HTTPS ? "https" : "http", hp, u.path);
                u.display = xstrdup(u.fetch_url);
                *ret = u;
                return 0;
        }
        if (colon && (!slash || colon < slash) && colon != s) {
                /* scp-like: [user[:password]@]host:path */
                size_t head = slash ? (size_t)(slash - s) : strlen(s);
                const char *at = NULL, *hs = s, *hc;

                for (const char *p = s; p < s + head; p++)
                        if (*p == '@')
                                at = p;
                u.kind = SOURCE_URL_SSH;
                if (at) {
                        const char *c = memchr(s, ':', (size_t)(at - s));

                        u.user = xstrndup(s, (size_t)((c ? c : at) - s));
                        if (c)
                                u.password = xstrndup(c + 1, (size_t)(at - c - 1));
                        hs = at + 1;
                }
                hc = strchr(hs, ':');
                if (hc)
                        u.host = xstrndup(hs, (size_t)(hc - hs));
                if (!hc || !valid_host(u.host) || isempty(hc + 1)) {
                        source_url_release(&u);
                        *ret_error = xstrdup("malformed scp-like address (expected "
                                             "user@host:path)");
                        return -EINVAL;
                }
                u.path = xstrdup(hc + 1);
                if (u.user)
                        u.fetch_url = xasprintf("%s@%s:%s", u.user, u.host, u.path);
                else
                        u.fetch_url = xasprintf("%s:%s", u.host, u.path);
                u.display = xstrdup(u.fetch_url);
                *ret = u;
                return 0;
        }
        u.kind = SOURCE_URL_LOCAL;
        u.path = xstrdup(s);
        u.fetch_url = xstrdup(s);
        u.display = xstrdup(s);
        *ret = u;
        return 0;
}

void source_url_release(source_url *u)
{
        if (!u)
                return;
        free(u->user);
        if (u->password)
                explicit_bzero(u->password, strlen(u->password));
        free(u->password);
        free(u->host);
        free(u->path);
        free(u->fetch_url);
        free(u->display);
        *u = (source_url){0};
}

char *source_redact_url(const char *url)
{
        source_url u;
        _cleanup_free_ char *err = NULL;
        char *out;

        if (!url)
                return NULL;
        if (source_url_parse(url, &u, &err) < 0) {
                /* Unparseable: drop everything between "://" and the last '@' of the authority. */
                const char *sep = strstr(url, "://");
                const char *auth = sep ? sep + 3 : url, *end = auth + strcspn(auth, "/");
                const char *at = NULL;

                for (const char *p = auth; p < end; p++)
                        if (*p == '@')
                                at = p;
                if (!at)
                        return xstrdup(url);
                return xasprintf("%.*s%s", (int)(auth - url), url, at + 1);
        }
        out = TAKE_PTR(u.display);
        source_url_release(&u);
        return out;
}
