/*
 * One option table per command: each option's name, argument, help lines,
 * where its value goes and how it is read. Parsing, the options block of
 * `--help` and the message for a bad value all come from the table, so they
 * cannot disagree. The options of cli/runner.h (the source, the state, the
 * target and its settings) are parsed by runner_flag() when the command
 * gives its runner_flags; their help lines are rows of text in the table.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/runner.h"

typedef enum cli_opt_kind {
        CLI_OPT_TEXT,     /* a help row only: options described together, or of runner.h */
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
        const char *help; /* the help, lines separated by \n */
        void *dest;
        int64_t min;                               /* CLI_OPT_DURATION: the least value in ms */
        const char *bad;                           /* what a bad value is told, after "PROG: " */
        bool show_arg;                             /* the bad value is told too: "BAD, not 'ARG'" */
        char short_name;                           /* -X as well as --name, or 0 */
        const char *const *choices;                /* CLI_OPT_CHOICE: NULL-terminated */
        int (*parse)(const char *arg, void *dest); /* CLI_OPT_CUSTOM */
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
