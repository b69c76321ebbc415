/*
 * What `gitcd plan` and `gitcd diff` share: reading a source's revision
 * into a temporary mirror (or --cache-dir's) and the operator's policy.
 */
#pragma once

#include <stdbool.h>

#include "cli/runner.h"
#include "intake/policy.h"
#include "sources/source.h"

/* A temporary folder removed (with its contents) when it goes out of scope. */
void cli_tmpdir_removep(char **dir);

/*
 * Open the source of f and fetch its revision (--ref's, else the remote's
 * HEAD). The source and its temporary cache (*ret_tmp, NULL with
 * --cache-dir) stay for the caller: approvals are counted, and other
 * revisions read, in the mirror. A head refused for its signature or as a
 * rollback fails (-EPERM, said as plan says it) unless refusal_ok, when
 * *ret is the refused revision's description. Messages start with prog.
 */
int cli_source_fetch(const runner_flags *f, bool plain, const char *prog, bool refusal_ok,
                     char **ret_tmp, source **ret_src, source_revision **ret);

/*
 * The policy (runner_policy), and approvals only with signatures verified:
 * -1 to go on, else the exit status.
 */
int cli_plan_policy(const runner_flags *f, const char *prog, policy **ret);

/*
 * Revision spec of src (source_read_at): 0, or -errno with the reason
 * printed after prog. HEAD (alone or as the start of an expression, HEAD~1)
 * is head, the revision fetched: --ref's, else the remote's default branch
 * (a mirror has no HEAD of its own).
 */
int cli_read_revision(source *src, const source_revision *head, const char *spec, const char *prog,
                      source_revision **ret);
