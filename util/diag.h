/*
 * Diagnostics: problems in a user's input. They are not errno values; they
 * are collected, every one of them, with a location, and printed as
 *
 *     file:line:column: error: message
 *     file:line:column: warning: message
 *     file:line:column: note: message
 *
 * Lines and columns are 1-based; 0 means "unknown" and is left out.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util/macro.h"

enum diag_severity { DIAG_NOTE = 0, DIAG_WARNING = 1, DIAG_ERROR = 2 };

typedef struct diag {
        enum diag_severity severity;
        char *file;
        int line;
        int col;
        char *message;
} diag;

typedef struct diag_list {
        diag *items;
        size_t n;
        size_t alloc;
} diag_list;

#define DIAG_LIST_INIT                                                                             \
        {                                                                                          \
                NULL, 0, 0                                                                         \
        }

void diag_add(diag_list *l, enum diag_severity sev, const char *file, int line, int col,
              const char *fmt, ...) _printf_(6, 7);
size_t diag_count(const diag_list *l, enum diag_severity sev);
bool diag_has_errors(const diag_list *l);
/* Stable sort by file, line, column (insertion order among equals). */
void diag_sort(diag_list *l);
/* One diagnostic in the canonical one-line form (control characters escaped), newly allocated. */
char *diag_format(const diag *d);
/* Print every diagnostic, one per line. */
void diag_print(const diag_list *l, FILE *out);
/* Move all diagnostics from src to the end of dst. */
void diag_move(diag_list *dst, diag_list *src);
void diag_list_release(diag_list *l);
