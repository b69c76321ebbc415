/*
 * Fixtures for the plan tests: a temporary root, the real `git` with a
 * fixed identity and clock, a state database filled through the state API
 * from what a revision defines, and the real gitcd binary run as users run
 * it.
 */
#pragma once

#include <stdbool.h>

/* Make the temporary root, set HOME and the git identity; call first. */
void pf_init(void);
/* Remove the temporary root and everything in it. */
void pf_cleanup(void);
/* A path inside the temporary root (newly allocated). */
char *pf_path(const char *rel);
/* Run a shell command (printf-style) in the temporary root; its exit status. */
int pf_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Write a file under dir (creating folders). */
void pf_write(const char *dir, const char *rel, const char *content);
/* `git add -A && git commit` in repo; returns the new commit id (newly allocated). */
char *pf_commit(const char *repo, const char *message);
/*
 * Record, through the state API, every cluster the revision `ref` of the
 * source defines as the accepted spec (what `gitcd apply` would have
 * recorded). With latched, the reconciler's target is set to it as well
 * (applying finished); otherwise it is "still being applied".
 */
void pf_state_from_revision(const char *db, const char *source, const char *ref,
                            const char *subpath, bool latched);
/* Set a cluster's phase ("Orphaned", "Pruned", ...) as the reconciler would. */
void pf_state_set_phase(const char *db, const char *cluster, const char *phase);
/*
 * Run `$GITCD_BIN plan <args>` (a shell fragment, run in the temporary
 * root); returns the exit status and the standard output in *ret_out and
 * the standard error in *ret_err (either may be NULL).
 */
int pf_plan(char **ret_out, char **ret_err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Run `$GITCD_BIN <args>` (any command) the same way. */
int pf_gitcd(char **ret_out, char **ret_err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
