/*
 * gitcd validate PATH...: load EtcdCluster definitions from files and
 * directories, print every diagnostic (sorted by file, line, column) and a
 * one-line summary, and exit 1 when any error was found.
 *
 * Design: the command is a thin shell over spec_load_paths(); everything a
 * user can get wrong is a diagnostic from the library, so `validate` in CI
 * and the reconciler reading Git report exactly the same messages.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "api/spec.h"

static void usage(FILE *out)
{
        fputs("Usage: gitcd validate [--quiet] PATH...\n"
              "\n"
              "Check EtcdCluster definitions (files, or directories searched recursively for\n"
              "*.yaml and *.yml) in any supported dialect. Prints each problem as\n"
              "file:line:column: severity: message, then a summary on stderr. A file found\n"
              "in a directory with no apiVersion or kind in any document (a CI workflow) is\n"
              "skipped with a note; a file named directly is always checked.\n"
              "\n"
              "Options:\n"
              "  -q, --quiet   print only errors and warnings, no summary\n"
              "  -h, --help    show this help\n"
              "\n"
              "Exit status: 0 when every cluster is valid (warnings allowed), 1 on any error,\n"
              "64 on bad usage.\n",
              out);
}

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
        static const struct option opts[] = {
            {"quiet", no_argument, NULL, 'q'},
            {"help", no_argument, NULL, 'h'},
            {0},
        };
        bool quiet = false;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
                switch (c) {
                case 'q':
                        quiet = true;
                        break;
                case 'h':
                        usage(stdout);
                        return EXIT_OK;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                fputs("gitcd validate: no PATH given\n", stderr);
                usage(stderr);
                return EXIT_USAGE;
        }

        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        spec_load_paths(argv + optind, (size_t)(argc - optind), &set, &diags);
        /* A valid file that apply would refuse is still valid: a warning, not an error. */
        for (size_t i = 0; i < set.n; i++)
                (void)spec_check_unsupported(set.items[i], SPEC_UNSUPPORTED_WARN, &diags);
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
                summary(set.n, errors, diag_count(&diags, DIAG_WARNING));
        diag_list_release(&diags);
        cluster_set_release(&set);
        return errors ? EXIT_FAIL : EXIT_OK;
}
