/*
 * gitcd debug bundle: the incident bundle of a recorded cluster
 * (cli/bundle.h), taken now. It reads what gitcd recorded beside the
 * daemon (the state store opened read-only, as gitcd status does) and
 * asks the cluster's members and its target, never changing anything.
 * The state and the target's settings come from the command line, else
 * the daemon's configuration file, as for gitcd etcd --cluster.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ops/bundle.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "state/state.h"
#include "targets/registry.h"
#include "util/macro.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd debug bundle NS/NAME|NAME [-o FILE.tar.gz] [options]\n\n"
    "Collect an incident bundle of a cluster gitcd runs: each member's status\n"
    "(version, db size, raft index and term, applied index, leader, errors),\n"
    "the member list, alarms, each member's /metrics and last log lines, the\n"
    "machine's disk errors and clock offset (hosts target), gitcd's conditions,\n"
    "last audit events and operations in flight, and the desired spec with\n"
    "its secrets redacted. A member that does not answer gets an error.txt;\n"
    "the bundle is still written (docs/incidents.md).\n\n"
    "Without -o it goes to <state dir>/bundles/, where the newest 10 of each\n"
    "cluster are kept. Written with mode 0600.\n\n"
    "Options:\n";

static const char *const verbs[] = {"bundle", NULL};

int cmd_debug(int argc, char **argv)
{
        const char *out = NULL, *state_flag = NULL, *config = NULL;
        runner_flags tf = {0};
        const cli_opt opts[] = {
            {.kind = CLI_OPT_STRING,
             .name = "output",
             .short_name = 'o',
             .arg = "FILE",
             .dest = &out,
             .help = "write the bundle to FILE (a .tar.gz)"},
            {.kind = CLI_OPT_STRING,
             .name = "state",
             .arg = "PATH",
             .dest = &state_flag,
             .help = CLI_STATE_HELP},
            {.kind = CLI_OPT_STRING,
             .name = "config",
             .arg = "FILE",
             .dest = &config,
             .help = "the daemon's configuration file, for its state and the\n"
                     "settings of the target the cluster runs on that the\n"
                     "command line leaves out (default: " OPS_CONFIG_DEFAULT_PATH "\n"
                     "when present); --target and the target's options as for apply"},
            CLI_TARGET_HIDDEN_ROWS(&tf),
            {.kind = CLI_OPT_HELP, .help = "show this help"},
        };
        cli_command cmd = {.prog = "gitcd debug",
                           .usage = usage_text,
                           .footer = "",
                           .opts = opts,
                           .n_opts = ARRAY_SIZE(opts),
                           .width = 20,
                           .operands = verbs};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind >= argc || !streq(argv[optind], "bundle") || optind + 2 != argc) {
                fprintf(stderr, "gitcd debug: usage: gitcd debug bundle NS/NAME [-o FILE]\n");
                return EXIT_USAGE;
        }
        const char *arg = argv[optind + 1];
        if (tf.target && !target_kind_find(tf.target)) {
                runner_unknown_target("gitcd debug", tf.target);
                return EXIT_USAGE;
        }
        _cleanup_free_ char *cluster =
            strchr(arg, '/') ? xstrdup(arg) : xasprintf("default/%s", arg);

        _cleanup_(ops_config_freep) ops_config *file = NULL;
        if (cli_daemon_config(config, OPS_CONFIG_DEFAULT_PATH, state_flag != NULL, "gitcd debug",
                              &file) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *path = cli_state_path(state_flag, file);
        state_db *db = NULL;
        if (state_open(path, STATE_OPEN_READ_ONLY, &db) < 0) {
                fprintf(stderr, "gitcd debug: %s\n", state_last_error());
                return EXIT_FAIL;
        }
        _cleanup_free_ char *state_dir = runner_state_dir(path);
        target *t = NULL;
        if (runner_open_cluster_target(db, cluster, &tf, file, state_dir, "gitcd debug", &t) < 0)
                fprintf(stderr,
                        "gitcd debug: %s: the target is not opened: the bundle has no "
                        "logs\n",
                        cluster);
        _cleanup_free_ char *who = cli_who_asks("debug bundle");
        _cleanup_free_ char *reason = xasprintf("asked for by %s", who);
        bundle_request rq = {.db = db,
                             .state_dir = state_dir,
                             .cluster = cluster,
                             .t = t,
                             .reason = reason,
                             .path = out,
                             .status_json = cli_status_cluster_json};
        char *written = NULL, *error = NULL;
        int r = bundle_take(&rq, &written, &error);
        if (r < 0)
                fprintf(stderr, "gitcd debug: %s: %s\n", cluster, error);
        else
                printf("%s\n", written);
        free(written);
        free(error);
        target_free(t);
        state_close(db);
        return r < 0 ? EXIT_FAIL : EXIT_OK;
}
