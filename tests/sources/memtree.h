/*
 * An in-memory Git tree for driving tree_walk() without a repository (the
 * tree-walk fuzz target and its unit test). A description is text, one
 * entry per line:
 *
 *   <tree> <octal mode> <name> <rest>
 *
 * <tree> is the number of the tree holding the entry (0 is the root); for
 * mode 40000 <rest> is the number of the tree the entry names (which may be
 * named any number of times, so a description can be a tree bomb), for the
 * other modes <rest> is the blob's content ("\n" in it is a newline). Lines
 * that do not parse are ignored; a tree other than the root that is named
 * but never described is a missing object (reading it fails, as in a
 * damaged repository). Numbers go up to MEMTREE_MAX_TREES - 1.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "sources/tree-walk.h"

#define MEMTREE_MAX_TREES   4096u
#define MEMTREE_MAX_ENTRIES 65536u

typedef struct memtree memtree;

memtree *memtree_parse(const char *text, size_t len);
void memtree_free(memtree *t);
/* The operations for tree_walk() (userdata: the memtree) and the root's id. */
extern const tree_walk_ops memtree_ops;
void memtree_root(uint8_t ret_id[TREE_WALK_ID_SIZE]);
