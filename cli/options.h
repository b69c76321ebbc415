/*
 * One option table per command: each option's name, argument, help lines,
 * where its value goes and how it is read. Parsing, the options block of
 * `--help` and the message for a bad value all come from the table, so they
 * cannot disagree. The options of cli/runner.h (the source, the state, the
 * target and its settings) are rows written once (CLI_RUNNER_ROWS) for the
 * commands that show them all (apply, plan, run); a command that takes
 * them with a shorter help (recover, repair) gives its runner_flags for
 * runner_flag() to parse, and says them in rows of text.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/runner.h"

typedef enum cli_opt_kind {
        CLI_OPT_TEXT,     /* a help row only: options described together, or of runner.h */
        CLI_OPT_HEADING,  /* a line of the help as it is ("Source:"), before the rows it heads */
        CLI_OPT_HELP,     /* -h, --help: the help on stdout, exit 0 */
        CLI_OPT_SET,      /* *(bool *)dest = true */
        CLI_OPT_CLEAR,    /* *(bool *)dest = false */
        CLI_OPT_STRING,   /* *(const char **)dest = the argument */
        CLI_OPT_DURATION, /* *(int64_t *)dest = milliseconds, at least min (> 0) */
        CLI_OPT_CHOICE,   /* *(int *)dest = the index of the argument in choices */
        CLI_OPT_CUSTOM,   /* parse(arg, dest): 0, or < 0 for a bad value */
} cli_opt_kind;

typedef struct cli_opt {
        cli_opt_kind kind;
        const char *name; /* the long name without "--"; for CLI_OPT_TEXT, the row's left side */
        const char *arg;  /* the argument's name in --help ("D", "FILE"), or NULL */
        const char *help; /* the help, lines separated by \n; NULL: no row (said in another's) */
        void *dest;
        int64_t min;     /* CLI_OPT_DURATION: the least value in ms */
        const char *bad; /* what a bad value is told, after "PROG: " */
        bool show_arg;   /* the bad value is told too: "BAD, not 'ARG'" */
        char short_name; /* -X as well as --name, or 0 */
        /* A row of CLI_RUNNER_ROWS: matched after the command's own, in cli/runner.c's order. */
        bool runner;
        const char *const *choices;                /* CLI_OPT_CHOICE: NULL-terminated */
        int (*parse)(const char *arg, void *dest); /* CLI_OPT_CUSTOM */
        /* The command that parses it: the one of the same cli_command.group. */
        unsigned char group;
} cli_opt;

typedef struct cli_command {
        const char *prog;   /* "gitcd repair": the start of every message */
        const char *usage;  /* the help before the options */
        const char *footer; /* the help after them */
        const cli_opt *opts;
        size_t n_opts;
        runner_flags *shared; /* the options of cli/runner.h too, or NULL */
        int width;            /* of the help's name column after two spaces (0: 21) */
        bool stop_at_operand; /* options only before the first operand */
        /* A long-only option's row under the long names of those with a short one. */
        bool align_long;
        /*
         * getopt says nothing: the command says "PROG: OPT needs a value" and
         * "PROG: unknown option 'OPT'", then the help.
         */
        bool quiet_getopt;
        /*
         * The rows it parses: those of this group (and the help). The others
         * are shown, as for the verbs of one command sharing one help.
         */
        unsigned char group;
        /* The words the first operand may be (a verb: "save", "list"...), or NULL. */
        const char *const *operands;
} cli_command;

/* The command's help: usage, one row per option, footer. */
void cli_help(const cli_command *c, FILE *out);

/*
 * Parse argv (argv[0] the subcommand's name) by c's table into the table's
 * destinations and c->shared. -1 to go on, with optind at the first
 * operand; else the exit status: EXIT_OK after --help, EXIT_USAGE after a
 * bad value (its message printed) or an unknown option (getopt's message
 * and the help on stderr).
 */
int cli_parse(const cli_command *c, int argc, char **argv);

/*
 * While fn is set (not NULL), cli_parse() hands fn the command's table and
 * returns EXIT_OK without parsing: `gitcd completion` runs each command so
 * to learn its options from the one table that parses them.
 */
typedef void (*cli_collect_fn)(const cli_command *c, void *userdata);
void cli_collect(cli_collect_fn fn, void *userdata);

/* The help of --state, one rule for every command (cli_state_path). */
#define CLI_STATE_HELP                                                                             \
        "the state database (default: the configuration's\n"                                       \
        "state, else $GITCD_STATE_DIR/state.db, else\n"                                            \
        "./.gitcd/state.db)"

/* table, json: the choices of -o for the commands that print records. */
extern const char *const cli_output_formats[];

/*
 * The rows of the commands that read gitcd's records beside the daemon
 * (status, log): --state PATH into state_dest, --config FILE into
 * config_dest, --help.
 */
#define CLI_RECORDS_ROWS(state_dest, config_dest)                                                  \
        {.kind = CLI_OPT_STRING,                                                                   \
         .name = "state",                                                                          \
         .arg = "PATH",                                                                            \
         .dest = (state_dest),                                                                     \
         .help = CLI_STATE_HELP},                                                                  \
            {.kind = CLI_OPT_STRING,                                                               \
             .name = "config",                                                                     \
             .arg = "FILE",                                                                        \
             .dest = (config_dest),                                                                \
             .help = "the daemon's configuration file, for its state\n"                            \
                     "(default: " OPS_CONFIG_DEFAULT_PATH " when present)"},                       \
        {                                                                                          \
                .kind = CLI_OPT_HELP, .help = "show this help"                                     \
        }

/*
 * The rows of the options of cli/runner.h that apply, plan and run share
 * (the source, the state, the target and its settings), into the
 * runner_flags at f, under their headings; the help starts at
 * RUNNER_HELP_COLUMN (the command's width 25). Rows without help are said
 * in the row before them.
 */
#define CLI_RUNNER_SOURCE_ROWS(f)                                                                  \
        {.kind = CLI_OPT_HEADING, .name = "\nSource:"},                                            \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "source",                                                                     \
             .arg = "SRC",                                                                         \
             .dest = &(f)->src.url_or_path,                                                        \
             .help = "a directory, a repository path, file://, ssh://,\n"                          \
                     "git@host:path or https:// URL (required)"},                                  \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "ref",                                                                        \
             .arg = "REF",                                                                         \
             .dest = &(f)->src.ref,                                                                \
             .help = "branch, tag or commit id (default: the remote's HEAD)"},                     \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "path",                                                                       \
             .arg = "DIR",                                                                         \
             .dest = &(f)->src.subpath,                                                            \
             .help = "folder inside the repository"},                                              \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "cache-dir",                                                                  \
             .arg = "DIR",                                                                         \
             .dest = &(f)->cache_dir,                                                              \
             .help = "where bare mirrors live (default: <state dir>/cache)"},                      \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "ssh-key",                                                                    \
             .arg = "FILE",                                                                        \
             .dest = &(f)->src.ssh_key_path,                                                       \
             .help = "SSH private key; passphrase from --ssh-passphrase-file FILE\n"               \
                     "or --ssh-passphrase-env VAR, or --ssh-agent"},                               \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "ssh-passphrase-file",                                                        \
             .dest = &(f)->src.ssh_key_passphrase_file},                                           \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "ssh-passphrase-env",                                                         \
             .dest = &(f)->src.ssh_key_passphrase_env},                                            \
            {.kind = CLI_OPT_SET,                                                                  \
             .runner = true,                                                                       \
             .name = "ssh-agent",                                                                  \
             .dest = &(f)->src.use_ssh_agent},                                                     \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "known-hosts",                                                                \
             .arg = "FILE",                                                                        \
             .dest = &(f)->src.known_hosts_path,                                                   \
             .help = "host keys, checked strictly (default: ~/.ssh/known_hosts)"},                 \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "https-ca",                                                                   \
             .arg = "FILE",                                                                        \
             .dest = &(f)->src.https_ca_file,                                                      \
             .help = "CA bundle for https:// sources"},                                            \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "token-file",                                                                 \
             .arg = "FILE",                                                                        \
             .dest = &(f)->src.https_token_file,                                                   \
             .help = "token or password for https://, or --token-env VAR;\n"                       \
                     "--username NAME"},                                                           \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "token-env",                                                                  \
             .dest = &(f)->src.https_token_env},                                                   \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "username",                                                                   \
             .dest = &(f)->src.https_username},                                                    \
            {.kind = CLI_OPT_SET,                                                                  \
             .runner = true,                                                                       \
             .name = "verify-signatures",                                                          \
             .dest = &(f)->src.verify_signatures,                                                  \
             .help = "apply only commits signed by a key in --allowed-signers FILE"},              \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "allowed-signers",                                                            \
             .dest = &(f)->src.allowed_signers_path},                                              \
        {                                                                                          \
                .kind = CLI_OPT_SET, .runner = true, .name = "allow-rollback",                     \
                .dest = &(f)->src.allow_rollback,                                                  \
                .help = "accept a head that does not descend from the last commit\n"               \
                        "applied from the ref (refused by default; see\n"                          \
                        "docs/security.md)"                                                        \
        }

#define CLI_RUNNER_TARGET_ROWS(f)                                                                  \
        {.kind = CLI_OPT_HEADING, .name = "State and target:"},                                    \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "state",                                                                      \
             .arg = "PATH",                                                                        \
             .dest = &(f)->state,                                                                  \
             .help = "state database (default: for run, the configuration's\n"                     \
                     "state; else $GITCD_STATE_DIR/state.db, else\n"                               \
                     "./.gitcd/state.db); members of the local target live beside it"},            \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "target",                                                                     \
             .arg = "TARGET",                                                                      \
             .dest = &(f)->target,                                                                 \
             .help = runner_target_help()},                                                        \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "kubeconfig",                                                                 \
             .arg = "FILE",                                                                        \
             .dest = &(f)->kubeconfig,                                                             \
             .help = "kubernetes target: the kubeconfig (default: in-cluster\n"                    \
                     "configuration inside a Pod, else $KUBECONFIG or ~/.kube/config)"},           \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "context",                                                                    \
             .arg = "NAME",                                                                        \
             .dest = &(f)->kube_context,                                                           \
             .help = "kubernetes target: the kubeconfig context (default: current)"},              \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "cluster-domain",                                                             \
             .arg = "DOMAIN",                                                                      \
             .dest = &(f)->cluster_domain,                                                         \
             .help = "kubernetes target: the DNS domain of Services\n"                             \
                     "(default: cluster.local)"},                                                  \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "snapshot-image",                                                             \
             .arg = "IMAGE",                                                                       \
             .dest = &(f)->snapshot_image,                                                         \
             .help = "kubernetes target: the image of the Pods that put a restored\n"              \
                     "snapshot into a member's volume (gitcd snapshot receive;\n"                  \
                     "default: " TARGET_DEFAULT_SNAPSHOT_IMAGE ")"},                               \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "hosts-ssh-key",                                                              \
             .arg = "FILE",                                                                        \
             .dest = &(f)->hosts.ssh_key,                                                          \
             .help = "hosts target: the SSH private key (default: the keys of\n"                   \
                     "the ssh-agent at $SSH_AUTH_SOCK); its passphrase from\n"                     \
                     "--hosts-passphrase-file FILE"},                                              \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "hosts-passphrase-file",                                                      \
             .dest = &(f)->hosts.passphrase_file},                                                 \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "hosts-known-hosts",                                                          \
             .arg = "FILE",                                                                        \
             .dest = &(f)->hosts.known_hosts,                                                      \
             .help = "hosts target: the machines' host keys, checked strictly,\n"                  \
                     "never trusted on first use (default: ~/.ssh/known_hosts)"},                  \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "hosts-ports",                                                                \
             .arg = "C,P,M",                                                                       \
             .dest = &(f)->hosts_ports,                                                            \
             .help = "hosts target: the members' client, peer and metrics ports\n"                 \
                     "(default: 2379,2380,2381)"},                                                 \
            {.kind = CLI_OPT_STRING,                                                               \
             .runner = true,                                                                       \
             .name = "etcd-dir",                                                                   \
             .arg = "DIR",                                                                         \
             .dest = &(f)->etcd_dir,                                                               \
             .help = "etcd binaries as DIR/<version>/etcd (default: $GITCD_ETCD_DIR,\n"            \
                     "then ~/.cache/gitcd/etcd, then etcd on PATH)"},                              \
        {                                                                                          \
                .kind = CLI_OPT_SET, .runner = true, .name = "prune", .dest = &(f)->prune,         \
                .help = "stop the members of clusters removed from the source\n"                   \
                        "(their data is kept)"                                                     \
        }

/* Both, as apply, plan and run show them. */
#define CLI_RUNNER_ROWS(f) CLI_RUNNER_SOURCE_ROWS(f), CLI_RUNNER_TARGET_ROWS(f)

/*
 * --target and the target's settings into the runner_flags at f, as rows
 * without help of their own, for the commands that open a recorded
 * cluster's target and say these options in another row's help (etcd
 * --cluster, snapshot save); runner_target_given() says whether any was.
 */
#define CLI_TARGET_HIDDEN_ROWS(f)                                                                  \
        {.kind = CLI_OPT_STRING, .name = "target", .dest = &(f)->target},                          \
            {.kind = CLI_OPT_STRING, .name = "kubeconfig", .dest = &(f)->kubeconfig},              \
            {.kind = CLI_OPT_STRING, .name = "context", .dest = &(f)->kube_context},               \
            {.kind = CLI_OPT_STRING, .name = "cluster-domain", .dest = &(f)->cluster_domain},      \
            {.kind = CLI_OPT_STRING, .name = "snapshot-image", .dest = &(f)->snapshot_image},      \
            {.kind = CLI_OPT_STRING, .name = "hosts-ssh-key", .dest = &(f)->hosts.ssh_key},        \
            {.kind = CLI_OPT_STRING,                                                               \
             .name = "hosts-passphrase-file",                                                      \
             .dest = &(f)->hosts.passphrase_file},                                                 \
            {.kind = CLI_OPT_STRING,                                                               \
             .name = "hosts-known-hosts",                                                          \
             .dest = &(f)->hosts.known_hosts},                                                     \
        {                                                                                          \
                .kind = CLI_OPT_STRING, .name = "hosts-ports", .dest = &(f)->hosts_ports           \
        }
