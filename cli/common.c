/*
 * Helpers shared by the subcommands: where the state lives, the daemon's
 * configuration file as the commands beside the daemon read it, and
 * whether to colour output, the JSON form of a string or a time in the
 * records' JSON output, and a machine's last preflight as status and plan
 * show it.
 *
 * The state path has one rule for every command, `gitcd run` included
 * (cli_state_path). The commands that read gitcd's records next to the
 * daemon (status, log, snapshot, etcd --cluster, recover) read the
 * daemon's configuration file for what their command line leaves out, so
 * that on a server they find the daemon's state and target settings by
 * themselves. A file named with --config must be usable; the default file
 * only matters when the command has no --state, so an unusable default
 * file is forgiven (with a warning) when --state is given.
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "state/preflights.h"
#include "util/strbuf.h"
#include "util/escape.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/macro.h"
#include "util/xalloc.h"

char *cli_state_path(const char *flag_value, const ops_config *cfg)
{
        if (!isempty(flag_value))
                return xstrdup(flag_value);
        if (cfg && !isempty(cfg->state))
                return xstrdup(cfg->state);
        const char *dir = getenv("GITCD_STATE_DIR");
        if (!isempty(dir))
                return path_join(dir, "state.db");
        return xstrdup("./.gitcd/state.db");
}

const char *cli_config_path(const char *flag, const char *default_path)
{
        if (flag)
                return flag;
        return default_path && path_exists(default_path) ? default_path : NULL;
}

int cli_daemon_config(const char *flag, const char *default_path, bool state_given,
                      const char *prog, ops_config **ret)
{
        const char *path = cli_config_path(flag, default_path);
        if (!path) {
                *ret = NULL;
                return 0;
        }
        ops_config *c = NULL;
        diag_list diags = DIAG_LIST_INIT;
        int k = ops_config_load(path, &c, &diags);
        diag_sort(&diags);
        diag_print(&diags, stderr);
        diag_list_release(&diags);
        if (k >= 0) {
                *ret = c;
                return 0;
        }
        if (flag)
                return k; /* the diagnostics name the file and say why */
        if (state_given) {
                fprintf(stderr,
                        "%s: warning: %s (the daemon's configuration, read by default) cannot "
                        "be used; going on with --state and the command line's settings only\n",
                        prog, path);
                *ret = NULL;
                return 0;
        }
        fprintf(stderr,
                "%s: %s, the daemon's configuration (read by default), cannot be used; give "
                "the state database with --state PATH, or another file with --config FILE\n",
                prog, path);
        return k;
}

json_t *cli_json_string(const char *s)
{
        return s ? json_string(s) : json_null();
}

json_t *cli_json_time(int64_t ms)
{
        char buf[40];
        if (ms <= 0)
                return json_null();
        format_rfc3339(ms, buf, sizeof(buf));
        return json_string(buf);
}

bool cli_color(void)
{
        const char *nc = getenv("NO_COLOR");
        return isatty(STDOUT_FILENO) && isempty(nc);
}

char *cli_who_asks(const char *command)
{
        const struct passwd *pw = getpwuid(getuid());
        char host[256] = "";
        if (gethostname(host, sizeof(host) - 1) < 0)
                host[0] = '\0';
        return xasprintf("%s@%s (%s)", pw ? pw->pw_name : "?", host[0] ? host : "?", command);
}

char *cli_preflight_text(const state_preflight *p)
{
        char when[40] = "";
        format_rfc3339(p->time_ms, when, sizeof(when));
        strbuf sb = STRBUF_INIT;
        bool measured = !streq_ptr(p->verdict, "unmeasured");
        sb_printf(&sb, "%s, %s %s", streq_ptr(p->verdict, "failed") ? "FAILED" : p->verdict,
                  measured ? "measured" : "tried", when);
        if (p->reason)
                sb_printf(&sb, ": %s", p->reason);
        if (measured)
                sb_printf(&sb,
                          "%s fdatasync p50 %.1f ms, p99 %.1f ms, max %.1f ms (%lld samples), "
                          "free %.1f GiB (quota %.1f GiB), clock offset %lld ms (±%lld), %s, "
                          "kernel %s",
                          p->reason ? ";" : ":", p->sync_p50_us / 1000.0, p->sync_p99_us / 1000.0,
                          p->sync_max_us / 1000.0, (long long)p->n_sync,
                          (double)p->free_bytes / (1LL << 30), (double)p->quota_bytes / (1LL << 30),
                          (long long)p->offset_ms, (long long)p->offset_bound_ms,
                          p->fstype ? p->fstype : "?", p->kernel ? p->kernel : "?");
        if (measured && p->rtt_peers > 0) {
                sb_printf(&sb,
                          "; peer RTT: slowest peer's median %.1f ms, max %.1f ms (%lld connects "
                          "to %lld peers",
                          p->rtt_slowest_us / 1000.0, p->rtt_max_us / 1000.0,
                          (long long)p->rtt_samples, (long long)p->rtt_peers);
                if (p->rtt_failed)
                        sb_printf(&sb, ", %lld not reached", (long long)p->rtt_failed);
                sb_printf(&sb, ")");
        } else if (measured && p->rtt_failed > 0)
                sb_printf(&sb, "; peer RTT: none of %lld peers reached", (long long)p->rtt_failed);
        _cleanup_free_ char *text = sb_detach(&sb);
        return str_escape(text);
}

json_t *cli_preflight_json(const state_preflight *p)
{
        json_t *o = json_object();
        json_object_set_new(o, "machine", cli_json_string(p->machine));
        json_object_set_new(o, "member", cli_json_string(p->member));
        json_object_set_new(o, "verdict", cli_json_string(p->verdict));
        json_object_set_new(o, "reason", cli_json_string(p->reason));
        json_object_set_new(o, "measured", cli_json_time(p->time_ms));
        json_object_set_new(o, "sync_samples", json_integer(p->n_sync));
        json_object_set_new(o, "sync_p50_us", json_integer(p->sync_p50_us));
        json_object_set_new(o, "sync_p99_us", json_integer(p->sync_p99_us));
        json_object_set_new(o, "sync_max_us", json_integer(p->sync_max_us));
        json_object_set_new(o, "free_bytes", json_integer(p->free_bytes));
        json_object_set_new(o, "quota_bytes", json_integer(p->quota_bytes));
        json_object_set_new(o, "clock_offset_ms", json_integer(p->offset_ms));
        json_object_set_new(o, "clock_offset_bound_ms", json_integer(p->offset_bound_ms));
        json_object_set_new(o, "fstype", cli_json_string(p->fstype));
        json_object_set_new(o, "kernel", cli_json_string(p->kernel));
        json_object_set_new(o, "rtt_samples", json_integer(p->rtt_samples));
        json_object_set_new(o, "rtt_peers", json_integer(p->rtt_peers));
        json_object_set_new(o, "rtt_failed", json_integer(p->rtt_failed));
        json_object_set_new(o, "rtt_slowest_us", json_integer(p->rtt_slowest_us));
        json_object_set_new(o, "rtt_max_us", json_integer(p->rtt_max_us));
        return o;
}
