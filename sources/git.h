/*
 * The libgit2 adapter: the only code in gitcd that calls libgit2. It keeps a
 * bare mirror per source up to date and reads a revision from it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sources/source.h"
#include "sources/url.h"

/* Reference-counted libgit2 initialisation; pair every init with a shutdown. */
void git_adapter_init(void);
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
 * Update the bare mirror (taking mirror_path.lock while doing so; the
 * network part runs in a child process under a watchdog) and fill rev
 * (whose repository field is already set) with the commit opts->ref names:
 * first its description and signature verdict, then the rollback check,
 * and only for an accepted commit its files under subpath. ret_head gets
 * the id of the object the ref names (an annotated tag's own id, else the
 * commit's). Returns 0; 1 when that is still refused_head (rev holds only
 * ref and the fetch statistics, nothing was evaluated); or a negative errno
 * with *ret_error set (see source_fetch() for the codes; for -EPERM rev is
 * described, without files, and ret_head is set).
 */
int git_adapter_fetch(const git_fetch_request *req, source_revision *rev, char ret_head[41],
                      char **ret_error);
