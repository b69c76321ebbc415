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

/*
 * Update the bare mirror at mirror_path from url (taking mirror_path.lock
 * while doing so) and fill rev (whose repository field is already set) with
 * the commit opts->ref names, its files under subpath and, when
 * opts->verify_signatures is on, the signature verdict. Returns 0, or a
 * negative errno with *ret_error set (see source_fetch() for the codes; for
 * -EPERM rev is complete).
 */
int git_adapter_fetch(const source_opts *opts, const source_url *url, const char *mirror_path,
                      const char *subpath, source_revision *rev, char **ret_error);
