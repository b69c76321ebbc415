/*
 * Diagnostics collection and printing; see util/diag.h.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/diag.h"
#include "util/escape.h"
#include "util/xalloc.h"

void diag_add(diag_list *l, enum diag_severity sev, const char *file, int line, int col,
              const char *fmt, ...)
{
        l->items = xgrow(l->items, &l->alloc, l->n + 1, sizeof(diag));
        diag *d = &l->items[l->n++];
        d->severity = sev;
        d->file = xstrdup(file ? file : "<input>");
        d->line = line;
        d->col = col;
        va_list ap;
        va_start(ap, fmt);
        d->message = xvasprintf(fmt, ap);
        va_end(ap);
}

size_t diag_count(const diag_list *l, enum diag_severity sev)
{
        size_t n = 0;
        for (size_t i = 0; i < l->n; i++)
                if (l->items[i].severity == sev)
                        n++;
        return n;
}

bool diag_has_errors(const diag_list *l)
{
        return diag_count(l, DIAG_ERROR) > 0;
}

static int diag_cmp(const diag *a, const diag *b)
{
        int c = strcmp(a->file, b->file);
        if (c)
                return c;
        if (a->line != b->line)
                return a->line < b->line ? -1 : 1;
        if (a->col != b->col)
                return a->col < b->col ? -1 : 1;
        return 0;
}

void diag_sort(diag_list *l)
{
        /* Insertion sort: stable, and lists are short. */
        for (size_t i = 1; i < l->n; i++) {
                diag x = l->items[i];
                size_t j = i;
                while (j > 0 && diag_cmp(&l->items[j - 1], &x) > 0) {
                        l->items[j] = l->items[j - 1];
                        j--;
                }
                l->items[j] = x;
        }
}

static const char *sev_name(enum diag_severity s)
{
        switch (s) {
        case DIAG_ERROR:
                return "error";
        case DIAG_WARNING:
                return "warning";
        default:
                return "note";
        }
}

char *diag_format(const diag *d)
{
        /* file names and quoted input come from a commit: one line, no terminal control */
        _cleanup_free_ char *line = NULL;
        if (d->line > 0 && d->col > 0)
                line = xasprintf("%s:%d:%d: %s: %s", d->file, d->line, d->col,
                                 sev_name(d->severity), d->message);
        else if (d->line > 0)
                line =
                    xasprintf("%s:%d: %s: %s", d->file, d->line, sev_name(d->severity), d->message);
        else
                line = xasprintf("%s: %s: %s", d->file, sev_name(d->severity), d->message);
        return str_escape(line);
}

void diag_print(const diag_list *l, FILE *out)
{
        for (size_t i = 0; i < l->n; i++) {
                _cleanup_free_ char *s = diag_format(&l->items[i]);
                fprintf(out, "%s\n", s);
        }
}

void diag_move(diag_list *dst, diag_list *src)
{
        for (size_t i = 0; i < src->n; i++) {
                dst->items = xgrow(dst->items, &dst->alloc, dst->n + 1, sizeof(diag));
                dst->items[dst->n++] = src->items[i];
        }
        free(src->items);
        src->items = NULL;
        src->n = src->alloc = 0;
}

void diag_list_release(diag_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->items[i].file);
                free(l->items[i].message);
        }
        free(l->items);
        l->items = NULL;
        l->n = l->alloc = 0;
}
