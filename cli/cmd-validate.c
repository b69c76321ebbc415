/*
 * gitcd validate PATH...: load EtcdCluster definitions from files and
 * directories, print every diagnostic (sorted by file, line, column) and a
 * one-line summary, and exit 1 when any error was found.
 *
 * Design: the command is a thin shell over the spec intake apply, run and
 * plan use (intake/intake.h), in its validate mode: the files are read from
 * disk instead of a revision, and what needs a target or a state store is
 * left out, so `validate` in CI and the reconciler reading Git report
 * exactly the same messages. What it checks: YAML syntax, every dialect's
 * fields and values, the spec's rules, clusters defined twice, and fields
 * gitcd does not act on yet (a warning: apply, run and plan refuse them).
 * What it cannot check: the target's rules (spec.hosts needs --target
 * hosts), transitions from the spec gitcd accepted last (gitcd plan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "api/spec.h"
#include "intake/intake.h"

static const char usage_text[] =
    "Usage: gitcd validate [--quiet] PATH...\n"
    "\n"
    "Check EtcdCluster definitions (files, or directories searched recursively for\n"
    "*.yaml and *.yml) in any supported dialect. Prints each problem as\n"
    "file:line:column: severity: message, then a summary on stderr. A file found\n"
    "in a directory with no apiVersion or kind in any document (a CI workflow) is\n"
    "skipped with a note; a file named directly is always checked.\n"
    "\n"
    "It runs the intake gitcd plan, apply and run use, without a target or a\n"
    "state: syntax, every field and rule of the spec, clusters defined twice,\n"
    "and fields gitcd does not act on yet (a warning: apply refuses them). What\n"
    "needs a target, the accepted specs or the operator's configuration (spec.hosts\n"
    "on the hosts target only, transitions, the policy) is checked by gitcd plan.\n"
    "\n"
    "Options:\n";

static const char footer_text[] =
    "\n"
    "Exit status: 0 when every cluster is valid (warnings allowed), 1 on any error,\n"
    "64 on bad usage.\n";

static void summary(size_t clusters, size_t errors, size_t warnings)
{
        if (errors == 0 && warnings == 0) {
                fprintf(stderr, "%zu cluster%s valid\n", clusters, clusters == 1 ? "" : "s");
                return;
        }
        if (errors == 0) {
                fprintf(stderr, "%zu cluster%s valid, %zu warning%s\n", clusters,
                        clusters == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
                return;
        }
        fprintf(stderr, "%zu error%s, %zu warning%s\n", errors, errors == 1 ? "" : "s", warnings,
                warnings == 1 ? "" : "s");
}

int cmd_validate(int argc, char **argv)
{
        bool quiet = false;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_SET,
             .name = "quiet",
             .short_name = 'q',
             .dest = &quiet,
             .help = "print only errors and warnings, no summary"},
            {.kind = CLI_OPT_HELP, .help = "show this help"},
        };
        const cli_command cmd = {.prog = "gitcd validate",
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 14};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind >= argc) {
                fputs("gitcd validate: no PATH given\n", stderr);
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }

        spec_file_list files = {0};
        diag_list diags = DIAG_LIST_INIT;
        (void)spec_read_paths(argv + optind, (size_t)(argc - optind), &files, &diags);
        intake_input in = {.files = files.items, .n_files = files.n, .mode = INTAKE_VALIDATE};
        intake_result taken = {.diags = DIAG_LIST_INIT};
        (void)spec_intake(&in, &taken);
        spec_file_list_release(&files);
        diag_move(&diags, &taken.diags);
        diag_sort(&diags);
        for (size_t i = 0; i < diags.n; i++) {
                if (quiet && diags.items[i].severity == DIAG_NOTE)
                        continue;
                char *line = diag_format(&diags.items[i]);
                printf("%s\n", line);
                free(line);
        }
        fflush(stdout);
        size_t errors = diag_count(&diags, DIAG_ERROR);
        if (!quiet)
                summary(taken.n, errors, diag_count(&diags, DIAG_WARNING));
        diag_list_release(&diags);
        intake_result_release(&taken);
        return errors ? EXIT_FAIL : EXIT_OK;
}
