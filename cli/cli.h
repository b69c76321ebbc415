/*
 * The gitcd command line: one executable, one file per subcommand
 * (cli/cmd-<name>.c), each a thin layer that parses flags, calls the
 * library and prints. Exit statuses are shared by every subcommand.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/config.h"
#include "state/state.h"

enum {
        EXIT_OK = 0,      /* success; for plan: no changes */
        EXIT_FAIL = 1,    /* errors, invalid input, rejections */
        EXIT_CHANGES = 2, /* plan --detailed-exitcode, diff: changes pending */
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
int cmd_diff(int argc, char **argv);
int cmd_completion(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_recover(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_suspend(int argc, char **argv);
int cmd_resume(int argc, char **argv);

/* The subcommands of cli/main.c's table, in its order (gitcd completion). */
size_t cli_subcommand_count(void);
const char *cli_subcommand_name(size_t i);
const char *cli_subcommand_summary(size_t i);
int cli_subcommand_run(size_t i, int argc, char **argv);

/*
 * The state database path, one rule for every command: --state
 * (flag_value) if given, else the daemon configuration's `state:` (cfg, the
 * file with gitcd run's flags on top, or NULL), else
 * $GITCD_STATE_DIR/state.db, else ./.gitcd/state.db. Newly allocated.
 */
char *cli_state_path(const char *flag_value, const ops_config *cfg);

/*
 * Which daemon configuration file to read: `flag` (--config FILE), else
 * default_path (OPS_CONFIG_DEFAULT_PATH) when it exists, else none (NULL).
 */
const char *cli_config_path(const char *flag, const char *default_path);

/*
 * The daemon's configuration file for a command that reads gitcd's records
 * beside it (status, log, snapshot, etcd --cluster, recover), read from
 * cli_config_path(flag, default_path); none there: *ret = NULL. A file
 * that cannot be read or is invalid is printed as gitcd run prints it
 * (file:line:col: error: ...) and returns -EINVAL or the -errno of reading
 * it; only the default file is forgiven when state_given (--state): a
 * warning, and *ret = NULL. Other messages start with prog.
 */
int cli_daemon_config(const char *flag, const char *default_path, bool state_given,
                      const char *prog, ops_config **ret);

/* "user@host (command)": who asked, for the audit log of a request (recover, repair). */
char *cli_who_asks(const char *command);

/* One cluster's object as `gitcd status NAME -o json` prints it; NULL when not recorded. */
json_t *cli_status_cluster_json(state_db *db, const char *name);
int cmd_debug(int argc, char **argv);

/* JSON output of the records: s, or null for NULL. */
json_t *cli_json_string(const char *s);
/* JSON output of the records: a time in ms as RFC 3339, or null when unset (<= 0). */
json_t *cli_json_time(int64_t ms);

struct state_preflight;
/*
 * A machine's last preflight (state/preflights.h) as status and plan show
 * it: one line of text (control characters escaped; allocated), and its
 * JSON object ({"machine", "member", "verdict", "reason", "measured",
 * "sync_samples", "sync_p50_us", "sync_p99_us", "sync_max_us",
 * "free_bytes", "quota_bytes", "clock_offset_ms", "clock_offset_bound_ms",
 * "fstype", "kernel"}).
 */
char *cli_preflight_text(const struct state_preflight *p);
json_t *cli_preflight_json(const struct state_preflight *p);

/* True when stdout is a terminal and NO_COLOR is unset. */
bool cli_color(void);
