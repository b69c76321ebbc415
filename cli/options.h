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
} cli_opt_kind;

typedef struct cli_opt {
        cli_opt_kind kind;
        const char *name; /* the long name without "--"; for CLI_OPT_TEXT, the row's left side */
        const char *arg;  /* the argument's name in --help ("D", "FILE"), or NULL */
        const char *help; /* the help, lines separated by \n */
        void *dest;
        int64_t min;     /* CLI_OPT_DURATION: the least value in ms */
        const char *bad; /* what a bad value is told, after "PROG: " */
} cli_opt;

typedef struct cli_command {
        const char *prog;   /* "gitcd repair": the start of every message */
        const char *usage;  /* the help before the options */
        const char *footer; /* the help after them */
        const cli_opt *opts;
        size_t n_opts;
        runner_flags *shared; /* the options of cli/runner.h too, or NULL */
} cli_command;

/* The command's help: usage, one row per option (the name column 21 wide), footer. */
void cli_help(const cli_command *c, FILE *out);

/*
 * Parse argv (argv[0] the subcommand's name) by c's table into the table's
 * destinations and c->shared. -1 to go on, with optind at the first
 * operand; else the exit status: EXIT_OK after --help, EXIT_USAGE after a
 * bad value (its message printed) or an unknown option (getopt's message
 * and the help on stderr).
 */
int cli_parse(const cli_command *c, int argc, char **argv);
