/*
 * The walk over a Git tree that collects the YAML files of a revision,
 * separated from libgit2 by a small operation table so that it can be driven
 * by an in-memory tree (the fuzz target) as well as by a repository (git.c).
 *
 * The walk is bounded, because the tree comes from whoever can push:
 * folders nest at most SOURCE_MAX_DEPTH deep, at most SOURCE_MAX_ENTRIES
 * entries are visited in all, a folder whose tree was already read may be
 * read again at most SOURCE_MAX_REPEATED_TREES times (a tree of 64 levels,
 * each naming the next twice, would otherwise be walked 2^64 times), and at
 * most SOURCE_MAX_NOTES notes are kept (see revision.h).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "sources/source.h"

#define TREE_WALK_ID_SIZE 20 /* a SHA-1 object id */

/* Entry modes, as Git writes them. */
#define TREE_WALK_MODE_TREE       0040000u
#define TREE_WALK_MODE_BLOB       0100644u
#define TREE_WALK_MODE_EXECUTABLE 0100755u
#define TREE_WALK_MODE_LINK       0120000u
#define TREE_WALK_MODE_COMMIT     0160000u /* a submodule */

typedef struct tree_walk_entry {
        const char *name; /* valid until the tree is closed */
        uint32_t mode;
        uint8_t id[TREE_WALK_ID_SIZE];
} tree_walk_entry;

/*
 * How the walk reads objects. Each function returns 0 or a negative errno
 * with *ret_error set (a message naming the object, never a secret).
 */
typedef struct tree_walk_ops {
        /* Open the tree with this id; *ret_n entries, in Git's order. */
        int (*open_tree)(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], void **ret_tree,
                         size_t *ret_n, char **ret_error);
        void (*entry)(void *userdata, void *tree, size_t i, tree_walk_entry *ret);
        void (*close_tree)(void *userdata, void *tree);
        /* The size of a blob, without reading it. */
        int (*blob_size)(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], size_t *ret_size,
                         char **ret_error);
        /* A blob's content, NUL-terminated (the NUL not counted in *ret_len). */
        int (*blob_read)(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], char **ret_content,
                         size_t *ret_len, char **ret_error);
} tree_walk_ops;

typedef struct tree_walk_limits {
        size_t max_file_size;  /* larger files are skipped with a note */
        size_t max_total_size; /* more in all: -EFBIG */
        size_t max_entries;    /* 0: SOURCE_MAX_ENTRIES */
        size_t max_repeated;   /* 0: SOURCE_MAX_REPEATED_TREES */
} tree_walk_limits;

/*
 * Add the YAML files under the tree root (whose path is prefix, "" for the
 * repository's root) to rev, with notes for what was skipped, then sort
 * rev. Returns 0, or -EFBIG (a limit above, with *ret_error saying which)
 * or the error of an operation; rev may then hold part of the files.
 */
int tree_walk(const tree_walk_ops *ops, void *userdata, const uint8_t root[TREE_WALK_ID_SIZE],
              const char *prefix, const tree_walk_limits *limits, source_revision *rev,
              char **ret_error);
