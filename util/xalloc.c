/*
 * Allocation helpers that abort on exhaustion; see util/xalloc.h for why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

_noreturn_ static void oom(void)
{
        fputs("gitcd: out of memory\n", stderr);
        abort();
}

void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);
        if (!p)
                oom();
        return p;
}

void *xcalloc(size_t n, size_t size)
{
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p)
                oom();
        return p;
}

void *xrealloc(void *p, size_t n)
{
        void *q = realloc(p, n ? n : 1);
        if (!q)
                oom();
        return q;
}

void *xgrow(void *p, size_t *alloc, size_t need, size_t size)
{
        if (need <= *alloc)
                return p;
        size_t n = *alloc ? *alloc : 8;
        while (n < need) {
                if (n > ((size_t)-1) / 2 / size)
                        oom();
                n *= 2;
        }
        p = xrealloc(p, n * size);
        memset((char *)p + *alloc * size, 0, (n - *alloc) * size);
        *alloc = n;
        return p;
}

char *xstrdup(const char *s)
{
        char *d = strdup(s);
        if (!d)
                oom();
        return d;
}

char *xstrdup_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

char *xstrndup(const char *s, size_t n)
{
        char *d = strndup(s, n);
        if (!d)
                oom();
        return d;
}

char *xvasprintf(const char *fmt, va_list ap)
{
        char *s;
        if (vasprintf(&s, fmt, ap) < 0)
                oom();
        return s;
}

char *xasprintf(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *s = xvasprintf(fmt, ap);
        va_end(ap);
        return s;
}

void str_assign(char **slot, char *value)
{
        free(*slot);
        *slot = value;
}

void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}
