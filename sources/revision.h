/*
 * Building a source_revision: shared by the directory reader (source.c) and
 * the Git readers (git.c, tree-walk.c) so both produce the same sorted files
 * and notes. This module depends on nothing else in sources/: the readers
 * call it, never the other way round.
 */
#pragma once

#include <stdbool.h>

#include "sources/source.h"
#include "util/macro.h"

/* Whether a file name is one gitcd reads: *.yaml or *.yml. */
bool source_name_is_yaml(const char *name);
/* Take ownership of content (NUL-terminated, len bytes before the NUL). */
void revision_add_file(source_revision *r, const char *path, char *content, size_t len);
/*
 * Note a skipped entry. At most SOURCE_MAX_NOTES notes are kept (a flood of
 * symbolic links must not make a flood of notes); the others are counted in
 * notes_omitted and summed up in one last note by revision_sort().
 */
void revision_add_note(source_revision *r, const char *path, const char *reason_fmt, ...)
    _printf_(3, 4);
/* Sort files and notes by path (byte order); then add the omitted-notes summary. */
void revision_sort(source_revision *r);
/*
 * A copy of r's description (repository, ref, commit, people, message,
 * signature verdict, refusal) without its files and notes.
 */
source_revision *revision_copy_header(const source_revision *r);
