/*
 * gitcd run: the daemon. Polls the source every --interval, takes in new
 * revisions, and reconciles continuously, waking at once when a member
 * process changes state. SIGTERM or SIGINT finish the current step and exit
 * cleanly (members keep running); SIGHUP re-reads the files named on the
 * command line (known_hosts, allowed_signers, keys) and polls the source at
 * once.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/notify-systemd.h"
#include "cli/runner.h"
#include "util/log.h"
#include "util/timeutil.h"

static volatile sig_atomic_t got_term;
static volatile sig_atomic_t got_hup;

static void on_signal(int sig)
{
        if (sig == SIGHUP)
                got_hup = 1;
        else
                got_term = 1;
}

static void usage(FILE *out)
{
        fprintf(out,
                "usage: gitcd run --source SRC [options]\n\n"
                "Run the reconciler as a daemon: poll SRC, take in new revisions and keep\n"
                "every cluster converged. The daemon's documented configuration keeps its\n"
                "state in /var/lib/gitcd/state.db (--state).\n\n"
                "  --interval D             how often to poll the source (default 30s)\n"
                "  -h, --help               show this help\n\n"
                "%s\n"
                "Signals: SIGTERM/SIGINT finish the current step and exit 0; SIGHUP\n"
                "re-reads the files named by the options and polls the source at once.\n"
                "The daemon holds a lock in the state folder while it runs: another\n"
                "apply or run on the same state exits 1; plan, status and log still read.\n",
                runner_options_help);
}

static void progress(const char *cluster, const pass_result *res, void *userdata)
{
        (void)userdata;
        enum log_level l =
            res->outcome == PASS_FAILED || res->outcome == PASS_BLOCKED ? LOG_ERROR : LOG_INFO;
        log_msg(l, "%s: %s: %s", cluster, pass_outcome_name(res->outcome), res->message);
}

int cmd_run(int argc, char **argv)
{
        runner_flags f = {0};
        int64_t interval_ms = 30 * 1000;
        enum { OPT_INTERVAL = RUNNER_OPT_LAST + 1 };
        static const struct option own[] = {
            {"help", no_argument, NULL, 'h'},
            {"interval", required_argument, NULL, OPT_INTERVAL},
        };
        _cleanup_free_ struct option *opts = runner_options(own, ARRAY_SIZE(own));
        optind = 1;
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (runner_flag(&f, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        usage(stdout);
                        return EXIT_OK;
                case OPT_INTERVAL:
                        if (parse_duration_ms(optarg, &interval_ms) < 0 || interval_ms < 1000) {
                                fprintf(stderr, "gitcd run: --interval takes a duration of at "
                                                "least 1s\n");
                                return EXIT_USAGE;
                        }
                        break;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc || !f.src.url_or_path) {
                usage(stderr);
                return EXIT_USAGE;
        }

        struct sigaction sa = {0};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);

        runner r;
        if (runner_open(&f, progress, NULL, &r) < 0)
                return EXIT_FAIL;
        log_info("gitcd %s running: source %s, state %s, polling every %llds", GITCD_VERSION,
                 source_display_url(r.src), r.state_path, (long long)(interval_ms / 1000));

        int64_t next_sync = 0;
        while (!got_term) {
                service_notify_watchdog();
                if (got_hup) {
                        got_hup = 0;
                        log_info("SIGHUP: re-reading configuration files and polling the source");
                        if (runner_reopen(&f, progress, NULL, &r) < 0)
                                return EXIT_FAIL;
                        next_sync = 0;
                }
                int64_t now = now_mono_ms();
                if (now >= next_sync) {
                        diag_list diags = DIAG_LIST_INIT;
                        int k = driver_sync(r.drv, &diags);
                        diag_sort(&diags);
                        for (size_t i = 0; i < diags.n; i++) {
                                _cleanup_free_ char *line = diag_format(&diags.items[i]);
                                log_msg(diags.items[i].severity == DIAG_ERROR ? LOG_ERROR
                                                                              : LOG_WARN,
                                        "%s", line);
                        }
                        diag_list_release(&diags);
                        if (k < 0 && k != -EINVAL && k != -EPERM)
                                log_error("source: %s (retrying in %llds)",
                                          driver_last_error(r.drv),
                                          (long long)(interval_ms / 1000));
                        next_sync = now_mono_ms() + interval_ms;
                }
                driver_summary sum = {0};
                (void)driver_step(r.drv, &sum);
                service_notify_ready();
                if (got_term)
                        break;
                int64_t until_sync = next_sync - now_mono_ms();
                int64_t w = sum.waiting ? sum.wait_ms : until_sync;
                w = MIN(w, until_sync);
                if (w > 0)
                        (void)r.target->ops->wait_event(r.target, (int)MIN(w, (int64_t)1000));
        }
        service_notify_stopping();
        log_info("stopping; members keep running");
        runner_close(&r);
        return EXIT_OK;
}
