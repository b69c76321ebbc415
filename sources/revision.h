/*
 * Building a source_revision: shared by the directory reader (source.c) and
 * the Git reader (git.c) so both produce the same sorted files and notes.
 */
#pragma once

#include <stdbool.h>

#include "sources/source.h"
#include "util/macro.h"

/* Whether a file name is one gitcd reads: *.yaml or *.yml. */
bool source_name_is_yaml(const char *name);
/* Take ownership of content (NUL-terminated, len bytes before the NUL). */
void revision_add_file(source_revision *r, const char *path, char *content, size_t len);
void revision_add_note(source_revision *r, const char *path, const char *reason_fmt, ...)
    _printf_(3, 4);
/* Sort files and notes by path (byte order). */
void revision_sort(source_revision *r);
