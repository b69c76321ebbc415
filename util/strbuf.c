/*
 * strbuf: growable strings. Allocation failure aborts (util/xalloc.h).
 */
#include <stdio.h>
#include <string.h>

#include "util/strbuf.h"
#include "util/xalloc.h"

static void sb_reserve(strbuf *sb, size_t extra)
{
        size_t need = sb->len + extra + 1;
        if (need > sb->alloc) {
                size_t n = sb->alloc ? sb->alloc : 64;
                while (n < need)
                        n *= 2;
                sb->buf = xrealloc(sb->buf, n);
                sb->alloc = n;
        }
}

void sb_append_len(strbuf *sb, const void *data, size_t n)
{
        sb_reserve(sb, n);
        if (n)
                memcpy(sb->buf + sb->len, data, n);
        sb->len += n;
        sb->buf[sb->len] = '\0';
}

void sb_append(strbuf *sb, const char *s)
{
        sb_append_len(sb, s, strlen(s));
}

void sb_appendc(strbuf *sb, char c)
{
        sb_append_len(sb, &c, 1);
}

void sb_vprintf(strbuf *sb, const char *fmt, va_list ap)
{
        va_list cp;
        va_copy(cp, ap);
        int n = vsnprintf(NULL, 0, fmt, cp);
        va_end(cp);
        if (n <= 0)
                return;
        sb_reserve(sb, (size_t)n);
        vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
        sb->len += (size_t)n;
}

void sb_printf(strbuf *sb, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        sb_vprintf(sb, fmt, ap);
        va_end(ap);
}

void sb_reset(strbuf *sb)
{
        sb->len = 0;
        if (sb->buf)
                sb->buf[0] = '\0';
}

char *sb_detach(strbuf *sb)
{
        char *s = sb->buf ? sb->buf : xstrdup("");
        sb->buf = NULL;
        sb->len = sb->alloc = 0;
        return s;
}

const char *sb_str(const strbuf *sb)
{
        return sb->buf ? sb->buf : "";
}

void sb_release(strbuf *sb)
{
        free(sb->buf);
        sb->buf = NULL;
        sb->len = sb->alloc = 0;
}
