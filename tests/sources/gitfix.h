/*
 * Test fixtures for the sources tests: temporary folders, files, and the
 * real `git` (and ssh-keygen) run through the shell with a fixed identity
 * and clock, so commit ids are reproducible within a test.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Set HOME to a fresh folder, fix GIT_AUTHOR_and GIT_COMMITTER_ variables; call first. */
void fix_init(void);
/* A new empty folder under the test's temporary root (removed by fix_cleanup). */
char *fix_tmpdir(const char *name);
/* Remove every folder fix_tmpdir made. */
void fix_cleanup(void);

/* Run a shell command (printf-style); returns its exit status (or -1). */
int fix_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same without reporting a failure (for commands expected to fail). */
int fix_sh_quiet(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Run a shell command and return its standard output without the trailing newline. */
char *fix_sh_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Write a file (creating its folders). */
void fix_write(const char *dir, const char *rel, const char *content);
/* Commit everything in repo with a message; returns the new commit id. */
char *fix_commit(const char *repo, const char *message);
/* Number of *.pack files in a bare repository. */
size_t fix_count_packs(const char *bare);
