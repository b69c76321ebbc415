/*
 * Allocation that cannot fail. gitcd treats an out-of-memory condition as
 * fatal (like git does): the process aborts with a message rather than
 * threading -ENOMEM through every string operation. Limits on input sizes
 * (see api/yaml.h) keep memory bounded for hostile inputs.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "util/macro.h"

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* Grow an array to hold at least `need` items of `size` bytes; doubles. */
void *xgrow(void *p, size_t *alloc, size_t need, size_t size);
char *xstrdup(const char *s);
/* xstrdup(NULL) returns NULL. */
char *xstrdup_null(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) _printf_(1, 2);
char *xvasprintf(const char *fmt, va_list ap) _printf_(1, 0);

#define XNEW(type) ((type *)xcalloc(1, sizeof(type)))

/* Replace the string in *slot with value (owned), freeing the old one. */
void str_assign(char **slot, char *value);
/* Free a NULL-terminated vector of strings and the vector; strv_free(NULL) is a no-op. */
void strv_free(char **v);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
