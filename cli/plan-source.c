/*
 * The source and the policy of `gitcd plan` and `gitcd diff` (see
 * plan-source.h). Design decision: without --cache-dir the mirror is a
 * fresh temporary folder, so neither command writes anything of gitcd's
 * and every branch and tag is as the remote has it now.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/plan-source.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *default_known_hosts(void)
{
        const char *home = getenv("HOME");
        return home ? xasprintf("%s/.ssh/known_hosts", home) : NULL;
}

void cli_tmpdir_removep(char **dir)
{
        if (*dir)
                (void)rm_rf(*dir);
        free(*dir);
}

int cli_source_fetch(const runner_flags *f, bool plain, const char *prog, bool refusal_ok,
                     char **ret_tmp, source **ret_src, source_revision **ret)
{
        source_opts so = f->src;
        so.plain_directory = plain;
        _cleanup_(cli_tmpdir_removep) char *tmp = NULL;
        if (f->cache_dir) {
                so.cache_dir = f->cache_dir;
        } else {
                const char *t = getenv("TMPDIR");
                char *dir = xasprintf("%s/gitcd-plan-XXXXXX", isempty(t) ? "/tmp" : t);
                if (!mkdtemp(dir)) {
                        int k = -errno;
                        fprintf(stderr, "%s: cannot create a temporary folder %s: %s\n", prog, dir,
                                strerror(-k));
                        free(dir);
                        return k;
                }
                tmp = dir;
                so.cache_dir = tmp;
        }
        _cleanup_free_ char *kh = NULL;
        if (!so.known_hosts_path) {
                kh = default_known_hosts();
                so.known_hosts_path = kh;
        }

        _cleanup_(source_freep) source *src = NULL;
        _cleanup_free_ char *err = NULL;
        int k = source_open(&so, &src, &err);
        if (k < 0) {
                fprintf(stderr, "%s: %s\n", prog, err ? err : strerror(-k));
                return k;
        }
        _cleanup_(source_revision_freep) source_revision *rev = NULL;
        k = source_fetch(src, &rev);
        if (k == -EPERM && rev && !refusal_ok) {
                fprintf(stderr,
                        "%s: commit %s refused: %s; gitcd would keep applying the last "
                        "good revision\n",
                        prog, rev->commit_id,
                        rev->refusal            ? rev->refusal
                        : rev->signature_reason ? rev->signature_reason
                                                : "signature not verified");
                return k;
        }
        if (k < 0 && !(k == -EPERM && rev)) {
                fprintf(stderr, "%s: %s\n", prog, source_last_error(src));
                return k;
        }
        *ret = TAKE_PTR(rev);
        *ret_src = TAKE_PTR(src);
        *ret_tmp = TAKE_PTR(tmp);
        return 0;
}

int cli_plan_policy(const runner_flags *f, const char *prog, policy **ret)
{
        if (runner_policy(f, prog, ret) < 0)
                return EXIT_FAIL;
        const policy_at *approvals = NULL;
        if (policy_wants_approvals(*ret, &approvals) && !f->src.verify_signatures) {
                fprintf(stderr,
                        "%s: %s:%d:%d: policy.approvals: approvals are counted in "
                        "trusted commit signatures; give --verify-signatures --allowed-signers "
                        "FILE\n",
                        prog, approvals->file, approvals->line, approvals->col);
                return EXIT_USAGE;
        }
        return -1;
}

int cli_read_revision(source *src, const source_revision *head, const char *spec, const char *prog,
                      source_revision **ret)
{
        _cleanup_free_ char *own = NULL;
        if (strneq(spec, "HEAD", 4) && (spec[4] == '\0' || strchr("~^@", spec[4])) &&
            head->commit_id[0])
                own = xasprintf("%s%s", head->commit_id, spec + 4);
        int k = source_read_at(src, own ? own : spec, ret);
        if (k < 0)
                fprintf(stderr, "%s: %s\n", prog, source_last_error(src));
        return k;
}
