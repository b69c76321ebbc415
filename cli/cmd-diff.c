/*
 * gitcd diff: what changed between two revisions of a source, cluster by
 * cluster, and what each change would make gitcd do.
 *
 * Design decision: the second revision is planned against the clusters the
 * first defines (plan/revdiff.h), so the steps and refusals are the plan's
 * own; no state store, target or etcd member is read or contacted. The
 * source is mirrored as plan mirrors it (a temporary folder unless
 * --cache-dir), and both revisions are read from that mirror by libgit2's
 * revparse: a commit id (or a unique prefix), a branch, a tag, "main~2".
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/plan-source.h"
#include "cli/runner.h"
#include "plan/revdiff.h"
#include "targets/registry.h"
#include "util/log.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd diff --source SRC [--path P] [-o text|json] [options] REV1 REV2\n\n"
    "Show what changed from revision REV1 to revision REV2 of a Git source,\n"
    "cluster by cluster: clusters added, removed, changed, or refused (an\n"
    "invalid document, or a cluster the policy refuses: the reason is shown),\n"
    "each change as its fields (from → to), the steps it implies when REV2\n"
    "follows REV1 (learners added one at a time, rolling restarts, a CA\n"
    "rotation...) and a unified diff of the normalized specs, so a change of\n"
    "dialect or formatting is no change. REV is a commit id (or a unique\n"
    "prefix), a branch, a tag or a Git revision expression (main~1); HEAD is\n"
    "the revision --ref names (default: the remote's default branch). Nothing\n"
    "is touched: no state store, target or etcd member is read.\n\n";

static const char footer_text[] =
    "\n"
    "The steps are those `gitcd apply` would take if the clusters of REV1 had\n"
    "been applied and REV2 came next; what only the live cluster knows (which\n"
    "member leads, the versions members run) is not read. --target chooses\n"
    "the kind whose rules the specs are taken in by (spec.hosts only on\n"
    "hosts); nothing is contacted. The operator's policy applies as for plan.\n\n"
    "A Git source is mirrored into a temporary folder removed on exit, unless\n"
    "--cache-dir names a cache to reuse (whose branches and tags other than\n"
    "--ref are then as its last fetch left them). The rollback check does not\n"
    "apply (any two commits may be compared), so --allow-rollback changes\n"
    "nothing; --state, --etcd-dir and the target's settings (--kubeconfig,\n"
    "--hosts-*...) are accepted, so the same flags work for plan and diff,\n"
    "and ignored: diff reads no state and contacts no target.\n\n"
    "Exit status: 0 no changes; 2 changes; 1 errors: a revision that cannot be\n"
    "read, or a cluster REV2 refuses; 64 bad usage.\n";

typedef struct diff_args {
        runner_flags f;
        int json;
        bool verbose, summary;
        const char *from, *to;
} diff_args;

static const char *const diff_formats[] = {"text", "json", NULL};

/* The options into a: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, diff_args *a)
{
        runner_flags *f = &a->f;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FORMAT",
             .dest = &a->json,
             .choices = diff_formats,
             .help = "text (default) or json",
             .bad = "-o takes text or json"},
            {.kind = CLI_OPT_SET,
             .name = "summary",
             .dest = &a->summary,
             .help = "the changed fields and steps, without the\n"
                     "unified diffs of the specs"},
            {.kind = CLI_OPT_SET,
             .name = "verbose",
             .short_name = 'v',
             .dest = &a->verbose,
             .help = "also list unchanged clusters"},
            {.kind = CLI_OPT_TEXT,
             .name = "--prune",
             .help = "say removed clusters are stopped (data kept),\n"
                     "as `gitcd apply --prune` would"},
            {.kind = CLI_OPT_STRING,
             .name = "config",
             .arg = "FILE",
             .dest = &f->config,
             .help = "the configuration file whose policy bounds what\n"
                     "SRC may do, as for plan (default:\n" OPS_CONFIG_DEFAULT_PATH
                     " when present, else\n"
                     "gitcd's built-in policy)"},
            {.kind = CLI_OPT_HELP, .help = "show this help"},
            CLI_RUNNER_ROWS(f),
        };
        const cli_command cmd = {.prog = "gitcd diff",
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 25};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (argc - optind != 2) {
                fprintf(stderr, "gitcd diff: give two revisions, REV1 and REV2 (%d given)\n",
                        argc - optind);
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        a->from = argv[optind];
        a->to = argv[optind + 1];
        if (isempty(f->src.url_or_path)) {
                fprintf(stderr, "gitcd diff: --source is required\n");
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        if (f->src.verify_signatures && isempty(f->src.allowed_signers_path)) {
                fprintf(stderr, "gitcd diff: --verify-signatures needs --allowed-signers FILE\n");
                return EXIT_USAGE;
        }
        return -1;
}

int cmd_diff(int argc, char **argv)
{
        diff_args a = {0};
        int status = parse_args(argc, argv, &a);
        if (status >= 0)
                return status;
        runner_flags *f = &a.f;
        if (!log_level_is_explicit())
                log_set_level(LOG_WARN);
        if (f->target && !target_kind_find(f->target)) {
                runner_unknown_target("gitcd diff", f->target);
                return EXIT_USAGE;
        }
        _cleanup_(policy_freep) policy *pol = NULL;
        status = cli_plan_policy(f, "gitcd diff", &pol);
        if (status >= 0)
                return status;

        /* Freed in the reverse order: the revisions, the source, then its temporary cache. */
        _cleanup_(cli_tmpdir_removep) char *tmp = NULL;
        _cleanup_(source_freep) source *src = NULL;
        _cleanup_(source_revision_freep) source_revision *head = NULL;
        if (cli_source_fetch(f, false, "gitcd diff", true, &tmp, &src, &head) < 0)
                return EXIT_FAIL;
        _cleanup_(source_revision_freep) source_revision *from = NULL;
        _cleanup_(source_revision_freep) source_revision *to = NULL;
        if (cli_read_revision(src, head, a.from, "gitcd diff", &from) < 0 ||
            cli_read_revision(src, head, a.to, "gitcd diff", &to) < 0)
                return EXIT_FAIL;

        const target_kind *kind = target_kind_or_default(f->target);
        revdiff_input in = {.from = from,
                            .to = to,
                            .prune = f->prune,
                            .caps = kind->caps,
                            .target = kind->name,
                            .policy = pol,
                            .src = src};
        _cleanup_(revdiff_freep) revdiff *d = NULL;
        int k = revdiff_compute(&in, &d);
        if (k < 0) {
                fprintf(stderr, "gitcd diff: %s\n", strerror(-k));
                return EXIT_FAIL;
        }
        if (a.json) {
                json_t *j = revdiff_to_json(d, from, to);
                json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                fputc('\n', stdout);
                json_decref(j);
        } else {
                revdiff_print_opts po = {
                    .color = cli_color(), .verbose = a.verbose, .lines = !a.summary, .steps = true};
                revdiff_print_text(d, from, to, &po, stdout);
        }
        fflush(stdout);
        if (revdiff_has_errors(d))
                return EXIT_FAIL;
        return revdiff_has_changes(d) ? EXIT_CHANGES : EXIT_OK;
}
