/*
 * gitcd suspend and gitcd resume: a person's hold on every voluntary step
 * of one cluster (reconciler/hold.h), recorded in the state store
 * (state/holds.h) with who asked, when and why, and audited
 * (cluster.suspended, cluster.resumed). The reconciler that holds the
 * state reads it on its next pass (within 30 s of a held step); nothing is
 * driven from here.
 *
 * A suspension here and spec.suspend are separate: the cluster is
 * suspended when either says so, and `gitcd resume` lifts only this one
 * (it says so when the spec still suspends the cluster).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "state/holds.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char suspend_usage[] =
    "usage: gitcd suspend CLUSTER [--reason TEXT] [options]\n\n"
    "Suspend a cluster: gitcd takes no voluntary step on it (no membership\n"
    "change, no restart or upgrade, no CA rotation or TLS switch, no\n"
    "defragmentation, no recovery or restore) until `gitcd resume`.\n"
    "Certificate renewal and scheduled snapshots go on; so do observation,\n"
    "conditions, metrics and alerts. Spec changes are taken in and acted on\n"
    "after the resume. CLUSTER is NAME or NAMESPACE/NAME.\n\n";

static const char resume_usage[] =
    "usage: gitcd resume CLUSTER [options]\n\n"
    "Lift a suspension `gitcd suspend` recorded: the reconciler acts again,\n"
    "on the spec it took in meanwhile. A cluster whose spec says\n"
    "suspend: true (or coreos paused: true) stays suspended until a commit\n"
    "changes it. CLUSTER is NAME or NAMESPACE/NAME.\n\n";

static const char footer_text[] =
    "\nAudited with who asked (gitcd log --action cluster.suspended,\n"
    "cluster.resumed); `gitcd status` and `gitcd plan` show the suspension.\n\n"
    "Exit status: 0 done (or nothing to do); 1 the cluster is unknown or the\n"
    "state cannot be written; 64 bad usage.\n";

/*
 * The cluster the store knows by CLUSTER: "ns/name" as is, a bare name
 * when exactly one namespace has it. Newly allocated, or NULL (said why).
 */
static char *resolve(state_db *db, const char *prog, const char *arg)
{
        state_cluster_list l = {0};
        if (state_cluster_list_all(db, &l) < 0) {
                fprintf(stderr, "%s: %s\n", prog, state_last_error());
                return NULL;
        }
        char *found = NULL;
        size_t matches = 0;
        bool qualified = strchr(arg, '/') != NULL;
        for (size_t i = 0; i < l.n; i++) {
                const char *name = l.items[i]->name;
                const char *slash = strchr(name, '/');
                if (qualified ? streq(name, arg) : (slash && streq(slash + 1, arg))) {
                        matches++;
                        if (!found)
                                found = xstrdup(name);
                }
        }
        state_cluster_list_release(&l);
        if (matches == 1)
                return found;
        free(found);
        if (matches == 0)
                fprintf(stderr,
                        "%s: gitcd does not know a cluster %s (gitcd status lists the clusters "
                        "it knows)\n",
                        prog, arg);
        else
                fprintf(stderr, "%s: %zu clusters are named %s: say which one as NAMESPACE/NAME\n",
                        prog, matches, arg);
        return NULL;
}

static int record(const char *prog, const char *state_flag, const char *config, const char *arg,
                  bool suspend, const char *reason)
{
        _cleanup_(ops_config_freep) ops_config *file = NULL;
        if (cli_daemon_config(config, OPS_CONFIG_DEFAULT_PATH, state_flag != NULL, prog, &file) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *path = cli_state_path(state_flag, file);
        state_db *db = NULL;
        /* nothing is made where nothing was applied: a state to write must exist */
        if (!path_exists(path)) {
                fprintf(stderr, "%s: no state at %s (nothing has been applied yet)\n", prog, path);
                return EXIT_FAIL;
        }
        if (state_open(path, STATE_OPEN_READ_WRITE, &db) < 0) {
                fprintf(stderr, "%s: %s\n", prog, state_last_error());
                return EXIT_FAIL;
        }
        _cleanup_free_ char *cluster = resolve(db, prog, arg);
        if (!cluster) {
                state_close(db);
                return EXIT_FAIL;
        }
        _cleanup_free_ char *who = cli_who_asks(prog);
        int64_t now = now_wall_ms();
        int r = suspend ? state_hold_suspend(db, cluster, who, reason, now)
                        : state_hold_resume(db, cluster);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", prog, state_last_error());
                state_close(db);
                return EXIT_FAIL;
        }
        bool spec_suspends = false;
        state_cluster *sc = NULL;
        if (state_cluster_get(db, cluster, &sc) == 0 && sc->desired_json) {
                json_t *j = json_loads(sc->desired_json, 0, NULL);
                spec_suspends =
                    json_is_true(json_object_get(json_object_get(j, "spec"), "suspend"));
                json_decref(j);
        }
        state_cluster_free(sc);
        if (suspend || r > 0) {
                _cleanup_free_ char *why =
                    suspend ? (reason ? xasprintf("suspended by %s: %s", who, reason)
                                      : xasprintf("suspended by %s", who))
                            : xasprintf("resumed by %s", who);
                state_audit_event ev = {.time_ms = now,
                                        .cluster = cluster,
                                        .author = who,
                                        .action = suspend ? "cluster.suspended" : "cluster.resumed",
                                        .reason = why,
                                        .outcome = "success"};
                if (state_audit_append(db, &ev, NULL) < 0)
                        fprintf(stderr, "%s: warning: the audit event was not written: %s\n", prog,
                                state_last_error());
        }
        state_close(db);
        if (suspend)
                printf("%s suspended by %s%s%s: no voluntary step until gitcd resume %s\n", cluster,
                       who, reason ? ": " : "", reason ? reason : "", cluster);
        else if (r > 0)
                printf("%s resumed by %s\n", cluster, who);
        else
                printf("%s was not suspended by gitcd suspend\n", cluster);
        if (!suspend && spec_suspends)
                printf("%s stays suspended: its spec says suspend: true\n", cluster);
        return EXIT_OK;
}

static int hold_command(int argc, char **argv, bool suspend)
{
        const char *prog = suspend ? "gitcd suspend" : "gitcd resume";
        const char *state_flag = NULL, *config = NULL, *reason = NULL;
        const cli_opt suspend_opts[] = {
            {.kind = CLI_OPT_STRING,
             .name = "reason",
             .arg = "TEXT",
             .dest = &reason,
             .help = "why (shown by gitcd status and plan, audited)"},
            CLI_RECORDS_ROWS(&state_flag, &config),
        };
        const cli_opt resume_opts[] = {CLI_RECORDS_ROWS(&state_flag, &config)};
        const cli_command cmd = {.prog = prog,
                                 .usage = suspend ? suspend_usage : resume_usage,
                                 .footer = footer_text,
                                 .opts = suspend ? suspend_opts : resume_opts,
                                 .n_opts =
                                     suspend ? ARRAY_SIZE(suspend_opts) : ARRAY_SIZE(resume_opts),
                                 .width = 20};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind + 1 != argc || isempty(argv[optind])) {
                fprintf(stderr, "%s: name one cluster (NAME or NAMESPACE/NAME)\n", prog);
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        if (reason && (isempty(reason) || strlen(reason) > 256 || strpbrk(reason, "\n\r\t"))) {
                fprintf(stderr, "%s: --reason takes one line of at most 256 characters\n", prog);
                return EXIT_USAGE;
        }
        return record(prog, state_flag, config, argv[optind], suspend, reason);
}

int cmd_suspend(int argc, char **argv)
{
        return hold_command(argc, argv, true);
}

int cmd_resume(int argc, char **argv)
{
        return hold_command(argc, argv, false);
}
