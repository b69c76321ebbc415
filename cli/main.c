/*
 * gitcd's entry point: global flags, then dispatch to a subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/log.h"
#include "util/macro.h"

struct command {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
};

static const struct command commands[] = {
    {"validate", cmd_validate, "check EtcdCluster files and print every problem"},
    {"render", cmd_render, "print the Kubernetes objects for EtcdCluster files"},
    {"plan", cmd_plan, "show what applying a source would change, without touching anything"},
    {"apply", cmd_apply, "reconcile the clusters in a source until they converge"},
    {"run", cmd_run, "run the reconciler as a daemon"},
    {"etcd", cmd_etcd, "talk to an etcd cluster directly (members, status, snapshot, ...)"},
    {"log", cmd_log, "show the audit log: who changed what, when, and what it did"},
    {"status", cmd_status, "show clusters, members and conditions from the state store"},
    {"snapshot", cmd_snapshot, "take, list and restore snapshots of a cluster"},
};

static void usage(FILE *out)
{
        fprintf(out, "usage: gitcd [--log-level LEVEL] <command> [options]\n\n"
                     "A declarative GitOps reconciler for etcd clusters.\n\n"
                     "Commands:\n");
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
        fprintf(out,
                "\nGlobal options:\n"
                "  --log-level LEVEL  debug, info, warn, error or quiet (also GITCD_LOG_LEVEL)\n"
                "  -h, --help         show this help; `gitcd <command> --help` for a command\n"
                "  --version          print the version\n");
}

int main(int argc, char **argv)
{
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i];
                if (streq(a, "-h") || streq(a, "--help")) {
                        usage(stdout);
                        return EXIT_OK;
                } else if (streq(a, "--version")) {
                        printf("gitcd %s\n", GITCD_VERSION);
                        return EXIT_OK;
                } else if (streq(a, "--log-level") || strneq(a, "--log-level=", 12)) {
                        const char *v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : NULL);
                        enum log_level l;
                        if (log_level_from_string(v, &l) < 0) {
                                fprintf(stderr, "gitcd: --log-level takes debug, info, warn, "
                                                "error or quiet\n");
                                return EXIT_USAGE;
                        }
                        log_set_level(l);
                } else {
                        fprintf(stderr, "gitcd: unknown option '%s'\n", a);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (i >= argc) {
                usage(stderr);
                return EXIT_USAGE;
        }
        for (size_t c = 0; c < ARRAY_SIZE(commands); c++)
                if (streq(argv[i], commands[c].name))
                        return commands[c].run(argc - i, argv + i);
        if (streq(argv[i], "help")) {
                usage(stdout);
                return EXIT_OK;
        }
        fprintf(stderr, "gitcd: unknown command '%s'\n", argv[i]);
        usage(stderr);
        return EXIT_USAGE;
}
