/*
 * Escaping of untrusted text (see util/escape.h). The design decision: the
 * escape is idempotent. Its output contains no byte it would escape, and a
 * backslash is not itself escaped, so a string that passed through one
 * layer (etcd/errors.c, state/audit.c) comes out of the next (util/log.c)
 * unchanged. The price is that a literal "\n" typed into an author name
 * reads the same as an escaped newline; what matters here is that no
 * outside string can move the cursor, recolour the terminal or start a
 * line that looks like gitcd's own.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/escape.h"
#include "util/xalloc.h"

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0 when it is not valid. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
        size_t len;
        uint32_t cp;
        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf) {
                len = 2;
                cp = p[0] & 0x1f;
        } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
                len = 3;
                cp = p[0] & 0x0f;
        } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                len = 4;
                cp = p[0] & 0x07;
        } else {
                return 0;
        }
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        /* overlong forms, surrogates and code points past U+10FFFF */
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

static void append_hex(strbuf *sb, const char *prefix, unsigned v, int digits)
{
        static const char hex[] = "0123456789abcdef";
        char buf[8];
        size_t k = 0;
        for (int d = digits - 1; d >= 0; d--)
                buf[k++] = hex[(v >> (4 * d)) & 0xf];
        sb_append(sb, prefix);
        sb_append_len(sb, buf, k);
}

void sb_append_escaped(strbuf *sb, const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0, plain = 0; /* p[plain..i) is copied as it is */
        while (i < len) {
                unsigned char ch = p[i];
                size_t n = utf8_len(p + i, len - i);
                bool c1 = n == 2 && ch == 0xc2 && p[i + 1] < 0xa0;
                if (n > 1 && !c1) {
                        i += n;
                        continue;
                }
                if (n == 1 && ch >= 0x20 && ch != 0x7f) {
                        i++;
                        continue;
                }
                sb_append_len(sb, p + plain, i - plain);
                if (ch == '\n')
                        sb_append(sb, "\\n");
                else if (ch == '\r')
                        sb_append(sb, "\\r");
                else if (ch == '\t')
                        sb_append(sb, "\\t");
                else if (c1)
                        append_hex(sb, "\\u", p[i + 1], 4);
                else
                        append_hex(sb, "\\x", ch, 2);
                i += c1 ? 2 : 1;
                plain = i;
        }
        sb_append_len(sb, p + plain, i - plain);
}

bool str_needs_escape(const char *s)
{
        if (!s)
                return false;
        const unsigned char *p = (const unsigned char *)s;
        size_t len = strlen(s);
        for (size_t i = 0; i < len;) {
                size_t n = utf8_len(p + i, len - i);
                if (n == 0 || (n == 1 && (p[i] < 0x20 || p[i] == 0x7f)) ||
                    (n == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0))
                        return true;
                i += n;
        }
        return false;
}

char *str_escape(const char *s)
{
        if (!s)
                return NULL;
        if (!str_needs_escape(s))
                return xstrdup(s);
        strbuf sb = STRBUF_INIT;
        sb_append_escaped(&sb, s, strlen(s));
        return sb_detach(&sb);
}

char *str_cut(const char *s, size_t max)
{
        if (!s)
                return NULL;
        size_t len = strlen(s);
        if (len <= max)
                return xstrdup(s);
        size_t keep = max;
        /* back to the start of a UTF-8 sequence (at most 3 continuation bytes) */
        for (int i = 0; i < 3 && keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80; i++)
                keep--;
        return xasprintf("%.*s [cut: %zu bytes in all]", (int)keep, s, len);
}
