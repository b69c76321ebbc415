/*
 * The last commit applied from each ref of a Git source, kept in a small
 * text file beside the source's mirror in the cache directory: one line
 * "<40 hex> <refname>" per ref. Rollback protection reads it (a new head
 * must descend from it) and source_mark_applied() writes it.
 */
#pragma once

/* The commit recorded for ref: 0 with ret_hex filled, -ENOENT when none, or -errno. */
int heads_get(const char *path, const char *ref, char ret_hex[41]);
/* Record hex for ref (replacing the old line), atomically. 0 or -errno. */
int heads_set(const char *path, const char *ref, const char *hex);
