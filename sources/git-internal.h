/*
 * What the files of the libgit2 adapter share (git.c, git-approvals.c).
 * Nothing outside sources/ includes it.
 */
#pragma once

#include <git2.h>

#include "sources/git2-fns.h"
#include "util/macro.h"

/* The largest commit or tag signature read. */
#define SIGNATURE_MAX_SIZE (1024u * 1024u)

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_remote *, git_remote_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree_entry *, git_tree_entry_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_blob *, git_blob_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb *, git_odb_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb_object *, git_odb_object_free)

void git_buf_disposep(git_buf *b);

/* A failed libgit2 call (its return gerr) as -errno, with "what: libgit2's message". */
int git_error_to_errno(int gerr, char **ret_error, const char *what);
