/*
 * The libgit2 functions the adapter calls, reached through a table filled
 * when the first source is opened (git2_load, util/dload.h) instead of
 * libgit2 being linked: it and what it brings (mbedTLS, http-parser, PCRE2)
 * were mapped and relocated at every start of gitcd, about a fifth of the
 * start of a command that reads no Git source. Each name below is defined as its
 * table entry, typed by git2.h (`__typeof__`), so the adapter's code reads
 * as plain libgit2 calls. Only git.c and git-approvals.c include this, after
 * <git2.h>; no libgit2 function may be called before git2_load() succeeded.
 * The list is checked at build time: a libgit2 function called without an
 * entry here fails to link, since gitcd does not link libgit2.
 */
#pragma once

#include <git2.h>

/* libgit2's soname, as its headers name it ("libgit2.so.1.5") */
#define GIT2_SONAME "libgit2.so." LIBGIT2_SOVERSION

#define GIT2_FUNCS(X)                                                                              \
        X(git_blob_free)                                                                           \
        X(git_blob_lookup)                                                                         \
        X(git_blob_rawcontent)                                                                     \
        X(git_blob_rawsize)                                                                        \
        X(git_buf_dispose)                                                                         \
        X(git_commit_author)                                                                       \
        X(git_commit_committer)                                                                    \
        X(git_commit_extract_signature)                                                            \
        X(git_commit_free)                                                                         \
        X(git_commit_id)                                                                           \
        X(git_commit_lookup)                                                                       \
        X(git_commit_message)                                                                      \
        X(git_commit_parent)                                                                       \
        X(git_commit_parentcount)                                                                  \
        X(git_commit_tree)                                                                         \
        X(git_credential_ssh_key_from_agent)                                                       \
        X(git_credential_ssh_key_new)                                                              \
        X(git_credential_username_new)                                                             \
        X(git_credential_userpass_plaintext_new)                                                   \
        X(git_error_last)                                                                          \
        X(git_graph_descendant_of)                                                                 \
        X(git_libgit2_features)                                                                    \
        X(git_libgit2_init)                                                                        \
        X(git_libgit2_opts)                                                                        \
        X(git_libgit2_shutdown)                                                                    \
        X(git_object_free)                                                                         \
        X(git_object_id)                                                                           \
        X(git_object_lookup)                                                                       \
        X(git_object_peel)                                                                         \
        X(git_object_type)                                                                         \
        X(git_odb_exists)                                                                          \
        X(git_odb_free)                                                                            \
        X(git_odb_object_data)                                                                     \
        X(git_odb_object_free)                                                                     \
        X(git_odb_object_size)                                                                     \
        X(git_odb_read)                                                                            \
        X(git_odb_read_header)                                                                     \
        X(git_oid_cpy)                                                                             \
        X(git_oid_equal)                                                                           \
        X(git_oid_fromraw)                                                                         \
        X(git_oid_fromstr)                                                                         \
        X(git_oid_tostr)                                                                           \
        X(git_reference_free)                                                                      \
        X(git_reference_name)                                                                      \
        X(git_reference_name_to_id)                                                                \
        X(git_remote_connect_ext)                                                                  \
        X(git_remote_create_with_opts)                                                             \
        X(git_remote_default_branch)                                                               \
        X(git_remote_disconnect)                                                                   \
        X(git_remote_fetch)                                                                        \
        X(git_remote_free)                                                                         \
        X(git_remote_ls)                                                                           \
        X(git_remote_stats)                                                                        \
        X(git_repository_free)                                                                     \
        X(git_repository_init)                                                                     \
        X(git_repository_odb)                                                                      \
        X(git_repository_open_bare)                                                                \
        X(git_repository_open_ext)                                                                 \
        X(git_revparse_ext)                                                                        \
        X(git_tag_name)                                                                            \
        X(git_tag_tagger)                                                                          \
        X(git_tree_entry_byindex)                                                                  \
        X(git_tree_entry_bypath)                                                                   \
        X(git_tree_entry_filemode)                                                                 \
        X(git_tree_entry_free)                                                                     \
        X(git_tree_entry_id)                                                                       \
        X(git_tree_entry_name)                                                                     \
        X(git_tree_entry_type)                                                                     \
        X(git_tree_entrycount)                                                                     \
        X(git_tree_free)                                                                           \
        X(git_tree_id)                                                                             \
        X(git_tree_lookup)

#define GIT2_FIELD(f) __typeof__(f) *f;
struct git2_fns {
        GIT2_FUNCS(GIT2_FIELD)
};
#undef GIT2_FIELD
extern struct git2_fns git2;

/* Load libgit2 and fill git2, once per process: 0, or -ENOENT with *ret_error. */
int git2_load(char **ret_error);

#define git_blob_free                         (git2.git_blob_free)
#define git_blob_lookup                       (git2.git_blob_lookup)
#define git_blob_rawcontent                   (git2.git_blob_rawcontent)
#define git_blob_rawsize                      (git2.git_blob_rawsize)
#define git_buf_dispose                       (git2.git_buf_dispose)
#define git_commit_author                     (git2.git_commit_author)
#define git_commit_committer                  (git2.git_commit_committer)
#define git_commit_extract_signature          (git2.git_commit_extract_signature)
#define git_commit_free                       (git2.git_commit_free)
#define git_commit_id                         (git2.git_commit_id)
#define git_commit_lookup                     (git2.git_commit_lookup)
#define git_commit_message                    (git2.git_commit_message)
#define git_commit_parent                     (git2.git_commit_parent)
#define git_commit_parentcount                (git2.git_commit_parentcount)
#define git_commit_tree                       (git2.git_commit_tree)
#define git_credential_ssh_key_from_agent     (git2.git_credential_ssh_key_from_agent)
#define git_credential_ssh_key_new            (git2.git_credential_ssh_key_new)
#define git_credential_username_new           (git2.git_credential_username_new)
#define git_credential_userpass_plaintext_new (git2.git_credential_userpass_plaintext_new)
#define git_error_last                        (git2.git_error_last)
#define git_graph_descendant_of               (git2.git_graph_descendant_of)
#define git_libgit2_features                  (git2.git_libgit2_features)
#define git_libgit2_init                      (git2.git_libgit2_init)
#define git_libgit2_opts                      (git2.git_libgit2_opts)
#define git_libgit2_shutdown                  (git2.git_libgit2_shutdown)
#define git_object_free                       (git2.git_object_free)
#define git_object_id                         (git2.git_object_id)
#define git_object_lookup                     (git2.git_object_lookup)
#define git_object_peel                       (git2.git_object_peel)
#define git_object_type                       (git2.git_object_type)
#define git_odb_exists                        (git2.git_odb_exists)
#define git_odb_free                          (git2.git_odb_free)
#define git_odb_object_data                   (git2.git_odb_object_data)
#define git_odb_object_free                   (git2.git_odb_object_free)
#define git_odb_object_size                   (git2.git_odb_object_size)
#define git_odb_read                          (git2.git_odb_read)
#define git_odb_read_header                   (git2.git_odb_read_header)
#define git_oid_cpy                           (git2.git_oid_cpy)
#define git_oid_equal                         (git2.git_oid_equal)
#define git_oid_fromraw                       (git2.git_oid_fromraw)
#define git_oid_fromstr                       (git2.git_oid_fromstr)
#define git_oid_tostr                         (git2.git_oid_tostr)
#define git_reference_free                    (git2.git_reference_free)
#define git_reference_name                    (git2.git_reference_name)
#define git_reference_name_to_id              (git2.git_reference_name_to_id)
#define git_remote_connect_ext                (git2.git_remote_connect_ext)
#define git_remote_create_with_opts           (git2.git_remote_create_with_opts)
#define git_remote_default_branch             (git2.git_remote_default_branch)
#define git_remote_disconnect                 (git2.git_remote_disconnect)
#define git_remote_fetch                      (git2.git_remote_fetch)
#define git_remote_free                       (git2.git_remote_free)
#define git_remote_ls                         (git2.git_remote_ls)
#define git_remote_stats                      (git2.git_remote_stats)
#define git_repository_free                   (git2.git_repository_free)
#define git_repository_init                   (git2.git_repository_init)
#define git_repository_odb                    (git2.git_repository_odb)
#define git_repository_open_bare              (git2.git_repository_open_bare)
#define git_repository_open_ext               (git2.git_repository_open_ext)
#define git_revparse_ext                      (git2.git_revparse_ext)
#define git_tag_name                          (git2.git_tag_name)
#define git_tag_tagger                        (git2.git_tag_tagger)
#define git_tree_entry_byindex                (git2.git_tree_entry_byindex)
#define git_tree_entry_bypath                 (git2.git_tree_entry_bypath)
#define git_tree_entry_filemode               (git2.git_tree_entry_filemode)
#define git_tree_entry_free                   (git2.git_tree_entry_free)
#define git_tree_entry_id                     (git2.git_tree_entry_id)
#define git_tree_entry_name                   (git2.git_tree_entry_name)
#define git_tree_entry_type                   (git2.git_tree_entry_type)
#define git_tree_entrycount                   (git2.git_tree_entrycount)
#define git_tree_free                         (git2.git_tree_free)
#define git_tree_id                           (git2.git_tree_id)
#define git_tree_lookup                       (git2.git_tree_lookup)
