/*
 * The signers of an unchanged state (git.h, git_adapter_signers): the
 * first-parent commits since a cluster's files last changed, each signer
 * counted once when its SSH signature verifies against the allowed
 * signers. Part of the libgit2 adapter, in a file of its own.
 */
#include <errno.h>
#include <string.h>

#include <git2.h>

#include "sources/git.h"
#include "sources/git-internal.h"
#include "sources/sshsig.h"
#include "util/macro.h"
#include "util/xalloc.h"

/* ---- approvals: the signers of an unchanged state ------------------------ */

DEFINE_TRIVIAL_CLEANUP_FUNC(git_commit *, git_commit_free)

/* The ids of the objects at paths in commit's tree (zero: absent), or of the subpath's tree. */
static int state_ids(git_repository *repo, const git_commit *commit, const char *subpath,
                     const char *const *paths, size_t n, git_oid *ret_ids, char **ret_error)
{
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        int r = git_commit_tree(&tree, commit);
        if (r < 0)
                return git_error_to_errno(r, ret_error, "cannot read a commit's tree");
        size_t count = n ? n : 1;
        for (size_t i = 0; i < count; i++) {
                const char *path = n ? paths[i] : subpath;
                memset(&ret_ids[i], 0, sizeof(git_oid));
                if (!path) {
                        git_oid_cpy(&ret_ids[i], git_tree_id(tree));
                        continue;
                }
                _cleanup_(git_tree_entry_freep) git_tree_entry *e = NULL;
                r = git_tree_entry_bypath(&e, tree, path);
                if (r == GIT_ENOTFOUND)
                        continue;
                if (r < 0)
                        return git_error_to_errno(r, ret_error, "cannot read a commit's tree");
                git_oid_cpy(&ret_ids[i], git_tree_entry_id(e));
        }
        return 0;
}

/* The trusted signer of commit, or NULL (unsigned, untrusted, invalid). */
static char *commit_signer(git_repository *repo, const git_commit *commit,
                           const char *allowed_signers, char **ret_error, int *ret_r)
{
        _cleanup_(git_buf_disposep) git_buf sig = {0};
        _cleanup_(git_buf_disposep) git_buf data = {0};
        sshsig_verdict v = {0};
        char *who = NULL;

        *ret_r = 0;
        int r =
            git_commit_extract_signature(&sig, &data, repo, (git_oid *)git_commit_id(commit), NULL);
        if (r == GIT_ENOTFOUND)
                return NULL;
        if (r < 0) {
                *ret_r = git_error_to_errno(r, ret_error, "cannot read a commit's signature");
                return NULL;
        }
        if (sig.size > SIGNATURE_MAX_SIZE)
                return NULL;
        r = sshsig_verify(sig.ptr, sig.size, data.ptr, data.size, allowed_signers,
                          (int64_t)git_commit_committer(commit)->when.time, &v, ret_error);
        if (r < 0) {
                *ret_r = r;
                return NULL;
        }
        if (v.verified)
                who = xstrdup(v.identity ? v.identity : v.fingerprint ? v.fingerprint : "?");
        sshsig_verdict_release(&v);
        return who;
}

int git_adapter_signers(const char *mirror_path, const source_opts *opts, const char *subpath,
                        const char *head, const char *const *paths, size_t n_paths,
                        const char *since_commit, unsigned max_commits, source_signer_list *ret,
                        char **ret_error)
{
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        source_signer_list out = {0};
        git_oid head_oid, since_oid;
        bool have_since = since_commit && git_oid_fromstr(&since_oid, since_commit) == 0;
        size_t count = n_paths ? n_paths : 1;
        _cleanup_free_ git_oid *want = xcalloc(count, sizeof(git_oid));
        _cleanup_free_ git_oid *have = xcalloc(count, sizeof(git_oid));
        int r;

        r = git_repository_open_bare(&repo, mirror_path);
        if (r < 0)
                return git_error_to_errno(r, ret_error, "cannot open the mirror");
        if (git_oid_fromstr(&head_oid, head) < 0 ||
            git_commit_lookup(&commit, repo, &head_oid) < 0) {
                *ret_error = xasprintf("commit %s is not in the mirror", head);
                return -ENOENT;
        }
        r = state_ids(repo, commit, subpath, paths, n_paths, want, ret_error);
        if (r < 0)
                return r;
        while (commit) {
                if (out.walked == max_commits) {
                        out.bounded = true;
                        break;
                }
                if (have_since && git_oid_equal(git_commit_id(commit), &since_oid))
                        break;
                r = state_ids(repo, commit, subpath, paths, n_paths, have, ret_error);
                if (r < 0)
                        goto fail;
                if (memcmp(want, have, count * sizeof(git_oid)) != 0)
                        break;
                out.walked++;
                char *who = commit_signer(repo, commit, opts->allowed_signers_path, ret_error, &r);
                if (r < 0)
                        goto fail;
                bool seen = !who;
                for (size_t i = 0; who && i < out.n && !seen; i++)
                        seen = streq(out.names[i], who);
                if (seen) {
                        free(who);
                } else {
                        out.names = xrealloc(out.names, (out.n + 1) * sizeof(char *));
                        out.names[out.n++] = who;
                }
                git_commit *parent = NULL;
                if (git_commit_parentcount(commit) == 0)
                        break;
                r = git_commit_parent(&parent, commit, 0);
                if (r < 0) {
                        /* a shallow or damaged mirror: what was seen counts, no further */
                        break;
                }
                git_commit_free(commit);
                commit = parent;
        }
        *ret = out;
        return 0;
fail:
        source_signer_list_release(&out);
        return r;
}
