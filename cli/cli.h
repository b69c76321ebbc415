/*
 * The gitcd command line: one executable, one file per subcommand
 * (cli/cmd-<name>.c), each a thin layer that parses flags, calls the
 * library and prints. Exit statuses are shared by every subcommand.
 */
#pragma once

#include <stdbool.h>

enum {
        EXIT_OK = 0,      /* success; for plan: no changes */
        EXIT_FAIL = 1,    /* errors, invalid input, rejections */
        EXIT_CHANGES = 2, /* plan --detailed-exitcode: changes pending */
        EXIT_USAGE = 64,  /* bad command line */
};

/* Each subcommand gets argv with argv[0] = the subcommand's name. */
int cmd_validate(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_etcd(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_apply(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_recover(int argc, char **argv);

/*
 * The state database path: --state if given, else $GITCD_STATE_DIR/state.db,
 * else ./.gitcd/state.db. Newly allocated.
 */
char *cli_state_path(const char *flag_value);

/* True when stdout is a terminal and NO_COLOR is unset. */
bool cli_color(void);
