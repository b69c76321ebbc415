/*
 * A growable, always NUL-terminated byte buffer for building output.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "util/macro.h"

typedef struct strbuf {
        char *buf;
        size_t len;
        size_t alloc;
} strbuf;

#define STRBUF_INIT                                                                                \
        {                                                                                          \
                NULL, 0, 0                                                                         \
        }

void sb_append(strbuf *sb, const char *s);
void sb_append_len(strbuf *sb, const void *data, size_t n);
void sb_appendc(strbuf *sb, char c);
void sb_printf(strbuf *sb, const char *fmt, ...) _printf_(2, 3);
void sb_vprintf(strbuf *sb, const char *fmt, va_list ap) _printf_(2, 0);
void sb_reset(strbuf *sb);
/* Hand the string out (never NULL: "" for an empty buffer); the buffer is reset. */
char *sb_detach(strbuf *sb);
/* The current contents; "" when empty. Valid until the next append. */
const char *sb_str(const strbuf *sb);
void sb_release(strbuf *sb);
