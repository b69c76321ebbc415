/*
 * The libgit2 adapter: the only code in gitcd that calls libgit2. It keeps a
 * bare mirror per source up to date and reads a revision from it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sources/source.h"
#include "sources/url.h"

/*
 * Reference-counted libgit2 initialisation; pair every successful init with
 * a shutdown. Loads libgit2 the first time (sources/git2-fns.h): -ENOENT
 * with *ret_error when it cannot be loaded.
 */
int git_adapter_init(char **ret_error);
void git_adapter_shutdown(void);

/* Whether path is a Git repository itself (bare, or with a .git inside). */
bool git_adapter_is_repository(const char *path);

typedef struct git_fetch_request {
        const source_opts *opts; /* budgets already defaulted (non-zero) */
        const source_url *url;
        const char *mirror_path;
        const char *subpath;      /* normalised, or NULL for the root */
        const char *heads_path;   /* the last applied commit per ref (heads.h) */
        const char *refused_head; /* 40 hex: the object the ref named when the previous
                                     fetch refused it, or NULL */
} git_fetch_request;

/*
 * A fetch in flight (the network part, in a child process): started by
 * git_adapter_fetch_start(), watched without blocking by
 * git_adapter_fetch_poll(), and either read by git_adapter_fetch_finish()
 * or killed by git_adapter_fetch_abort(). The job holds the mirror's lock
 * and borrows req->opts and req->url, which must outlive it.
 */
typedef struct git_fetch_job git_fetch_job;

/*
 * Take the mirror's lock (waiting for it only when block is true) and start
 * the child. 0 with *ret set, or a negative errno with *ret_error set:
 * -EAGAIN the lock is held (by another process, or by another job of this
 * one on the same mirror) and block is false; -EOPNOTSUPP; a lock or pipe
 * error.
 */
int git_adapter_fetch_start(const git_fetch_request *req, bool block, git_fetch_job **ret,
                            char **ret_error);

/*
 * 0 once the child has ended (its report read, or killed because the time
 * budget is spent), -EAGAIN while it runs. Never blocks unless wait is
 * true, in which case it returns only when the child has ended.
 */
int git_adapter_fetch_poll(git_fetch_job *job, bool wait);

/*
 * Take in the outcome of an ended job (git_adapter_fetch_poll() returned
 * 0), then free it: the mirror is up to date (the lock is held until the
 * end); fill rev (whose repository field is already set) with the commit
 * req->opts->ref names: first its description and signature verdict, then
 * the rollback check, and only for an accepted commit its files under
 * subpath. ret_head gets the id of the object the ref names (an annotated
 * tag's own id, else the commit's). Returns 0; 1 when that is still
 * refused_head (rev holds only ref and the fetch statistics, nothing was
 * evaluated); or a negative errno with *ret_error set (see source_fetch()
 * for the codes; -ETIMEDOUT when the child was killed for its time budget;
 * for -EPERM rev is described, without files, and ret_head is set).
 */
int git_adapter_fetch_finish(git_fetch_job *job, const git_fetch_request *req, source_revision *rev,
                             char ret_head[41], char **ret_error);

/*
 * source_signers() for a Git source: the walk over mirror_path (see
 * source.h). 0, or a negative errno with *ret_error set.
 */
int git_adapter_signers(const char *mirror_path, const source_opts *opts, const char *subpath,
                        const char *head, const char *const *paths, size_t n_paths,
                        const char *since_commit, unsigned max_commits, source_signer_list *ret,
                        char **ret_error);

/*
 * Read the revision spec names in the mirror of req (a commit id or an
 * abbreviation of one, a branch, a tag, or any libgit2 revparse
 * expression such as "main~2"), as fetched last: its description, the
 * signature verdict when req->opts->verify_signatures, and its files under
 * req->subpath; no rollback check. 0, or a negative errno with *ret_error
 * set: -ENOENT spec names nothing (or not a commit), -EINVAL it is
 * ambiguous or not a revision, -EPERM the signature is not trusted.
 */
int git_adapter_read_at(const git_fetch_request *req, const char *spec, source_revision *rev,
                        char **ret_error);

/* Kill the child if it still runs, clean the mirror after it, and free job (NULL: no-op). */
void git_adapter_fetch_abort(git_fetch_job *job);
static inline void git_adapter_fetch_abortp(git_fetch_job **job)
{
        git_adapter_fetch_abort(*job);
}
