/*
 * A request recorded in the state and seen through: what `gitcd recover`
 * and `gitcd repair` share. Each records its request (a recovery, a
 * repair) for one cluster; then either another gitcd holds the state and
 * carries it out, and the command waits for the record's result, or the
 * command takes the state's lock and runs the reconciler's passes for the
 * cluster itself, until the request ended and the cluster converged.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cli/options.h"
#include "cli/runner.h"
#include "ops/config.h"
#include "state/state.h"

/* What differs between the commands that record a request. */
typedef struct request_kind {
        const char *prog; /* "gitcd repair": the start of every message */
        const char *noun; /* "repair": "repair 7 still running", "carries the repair out" */
        /* "did not ... in time" before the request finished: "finish its repair" */
        const char *undone;
        /* A pass blocked (not frozen) after the request finished fails the command. */
        bool blocked_fails;
        /* Record id of cluster: 1 still running, 0 finished (printed, *ret_ok set), -errno. */
        int (*report)(state_db *db, const char *cluster, int64_t id, bool *ret_ok);
} request_kind;

/* The state and the cluster's target a request command works with. */
typedef struct request_ctx {
        ops_config *file; /* the daemon's configuration file, or NULL */
        char *path;       /* the state database */
        state_db *db;
        ops_config target; /* the cluster's target; its strings point into f and file */
} request_ctx;

/*
 * Refuse an unknown --target, read the daemon's configuration (config, or
 * the default file), open the state read-write and find the target
 * cluster runs on, before anything is recorded. EXIT_OK, else the exit
 * status (EXIT_USAGE for the unknown target, EXIT_FAIL) with why printed;
 * request_close() in any case.
 */
int request_open(const request_kind *k, const char *config, const runner_flags *f,
                 const char *cluster, request_ctx *ret);
void request_close(request_ctx *ctx);

/* The message for a request that could not be recorded (r from the recorder). */
void request_record_failed(const request_kind *k, int r);

/*
 * See request id of cluster through (see above) for at most timeout_ms.
 * EXIT_OK when it succeeded (and the cluster converged, when this command
 * did the work), else EXIT_FAIL; says what happened.
 */
int request_see_through(const request_kind *k, request_ctx *ctx, const char *cluster, int64_t id,
                        int64_t timeout_ms);

/*
 * The option rows recover and repair share after their own (cli/options.h):
 * --state, --config FILE into config_dest, --target and the target's
 * settings, --help.
 */
#define REQUEST_OPTION_ROWS(config_dest)                                                           \
        {.kind = CLI_OPT_TEXT, .name = "--state PATH", .help = CLI_STATE_HELP},                    \
            {.kind = CLI_OPT_STRING,                                                               \
             .name = "config",                                                                     \
             .arg = "FILE",                                                                        \
             .dest = (config_dest),                                                                \
             .help = "the daemon's configuration file (default:\n" OPS_CONFIG_DEFAULT_PATH         \
                     " when present): the state\n"                                                 \
                     "and the settings of the cluster's target that the\n"                         \
                     "command line leaves out"},                                                   \
            {.kind = CLI_OPT_TEXT,                                                                 \
             .name = "--target T",                                                                 \
             .help = "where the members run (default: the target recorded\n"                       \
                     "when gitcd took the cluster's spec in, else the\n"                           \
                     "configuration's target, else local)"},                                       \
            {.kind = CLI_OPT_TEXT,                                                                 \
             .name = "--etcd-dir DIR",                                                             \
             .help = "etcd binaries by version (local and hosts targets)"},                        \
            {.kind = CLI_OPT_TEXT,                                                                 \
             .name = "--kubeconfig PATH, --context NAME, --cluster-domain D,"},                    \
            {.kind = CLI_OPT_TEXT,                                                                 \
             .name = "--snapshot-image IMAGE (kubernetes target, as for apply)"},                  \
            {.kind = CLI_OPT_TEXT,                                                                 \
             .name = "--hosts-ssh-key F, --hosts-passphrase-file F, --hosts-known-hosts F,"},      \
            {.kind = CLI_OPT_TEXT,                                                                 \
             .name = "--hosts-ports C,P,M",                                                        \
             .help = "(hosts target, as for apply)"},                                              \
        {                                                                                          \
                .kind = CLI_OPT_HELP, .help = "show this help"                                     \
        }

/* --no-wait and --timeout D into wait_dest and timeout_dest, as recover and repair say them. */
#define REQUEST_WAIT_ROWS(wait_dest, timeout_dest)                                                 \
        {.kind = CLI_OPT_CLEAR,                                                                    \
         .name = "no-wait",                                                                        \
         .dest = (wait_dest),                                                                      \
         .help = "record the request and exit (gitcd run, or the\n"                                \
                 "next gitcd apply, carries it out)"},                                             \
        {                                                                                          \
                .kind = CLI_OPT_DURATION, .name = "timeout", .arg = "D", .dest = (timeout_dest),   \
                .help = "stop waiting after D (default 10m; e.g. 90s, 5m)",                        \
                .bad = "--timeout takes a duration such as 90s or 5m"                              \
        }
