/*
 * gitcd apply: take in the source's revision and reconcile every cluster in
 * it until each converges or fails, printing one line per step. The exit
 * status is 0 when every cluster converged, 1 otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/runner.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static void usage(FILE *out)
{
        fprintf(out,
                "usage: gitcd apply --source SRC [options]\n\n"
                "Reconcile every EtcdCluster in SRC until each converges or fails.\n"
                "Members run on the local target (etcd processes on this host) by\n"
                "default; they keep running after gitcd exits.\n\n"
                "  --wait                   wait for convergence (the default)\n"
                "  --no-wait                take in the revision, act while steps complete\n"
                "                           at once, then exit without waiting\n"
                "  --timeout D              give up after D (default 10m; e.g. 90s, 5m)\n"
                "  -q, --quiet              print only errors and the summary\n"
                "  -h, --help               show this help\n\n"
                "%s\n"
                "Only one apply or run works on a state at a time (a lock in the state\n"
                "folder); another exits 1 at once: \"another gitcd (pid N) holds DIR\".\n\n"
                "Exit status: 0 every cluster converged; 1 a cluster failed, was\n"
                "rejected or did not converge in time, or the state is locked; 64 bad usage.\n",
                runner_options_help);
}

static int64_t start_ms;

static void progress(const char *cluster, const pass_result *res, void *userdata)
{
        bool quiet = *(bool *)userdata;
        bool failed = res->outcome == PASS_FAILED || res->outcome == PASS_BLOCKED;
        if (quiet && !failed)
                return;
        double t = (double)(now_mono_ms() - start_ms) / 1000.0;
        const char *mark = failed                           ? "✗"
                           : res->outcome == PASS_CONVERGED ? "✓"
                           : res->outcome == PASS_WAITING   ? "…"
                                                            : "→";
        printf("[%6.1fs] %s %s: %s\n", t, mark, cluster, res->message);
        fflush(stdout);
}

int cmd_apply(int argc, char **argv)
{
        runner_flags f = {0};
        bool wait = true, quiet = false;
        int64_t timeout_ms = 10 * 60 * 1000;
        enum { OPT_WAIT = RUNNER_OPT_LAST + 1, OPT_NO_WAIT, OPT_TIMEOUT };
        static const struct option own[] = {
            {"help", no_argument, NULL, 'h'},
            {"quiet", no_argument, NULL, 'q'},
            {"wait", no_argument, NULL, OPT_WAIT},
            {"no-wait", no_argument, NULL, OPT_NO_WAIT},
            {"timeout", required_argument, NULL, OPT_TIMEOUT},
        };
        _cleanup_free_ struct option *opts = runner_options(own, ARRAY_SIZE(own));
        optind = 1;
        int c;
        while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
                if (runner_flag(&f, c, optarg))
                        continue;
                switch (c) {
                case 'h':
                        usage(stdout);
                        return EXIT_OK;
                case 'q':
                        quiet = true;
                        break;
                case OPT_WAIT:
                        wait = true;
                        break;
                case OPT_NO_WAIT:
                        wait = false;
                        break;
                case OPT_TIMEOUT:
                        if (parse_duration_ms(optarg, &timeout_ms) < 0 || timeout_ms <= 0) {
                                fprintf(stderr, "gitcd apply: --timeout takes a duration such "
                                                "as 90s or 5m\n");
                                return EXIT_USAGE;
                        }
                        break;
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "gitcd apply: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (!f.src.url_or_path) {
                fprintf(stderr, "gitcd apply: --source is required\n");
                usage(stderr);
                return EXIT_USAGE;
        }

        /* The progress lines tell the story; library logging only for warnings. */
        if (!log_level_is_explicit())
                log_set_level(LOG_WARN);
        start_ms = now_mono_ms();
        runner r;
        if (runner_open(&f, progress, &quiet, &r) < 0)
                return EXIT_FAIL;

        diag_list diags = DIAG_LIST_INIT;
        int k = driver_sync(r.drv, &diags);
        diag_sort(&diags);
        diag_print(&diags, stderr);
        bool rejected = diag_has_errors(&diags);
        diag_list_release(&diags);
        if (k < 0 && k != -EINVAL) {
                fprintf(stderr, "gitcd apply: %s\n", driver_last_error(r.drv));
                runner_close(&r);
                return EXIT_FAIL;
        }
        if (driver_cluster_count(r.drv) == 0) {
                if (rejected)
                        printf("no EtcdCluster in %s was taken in\n", f.src.url_or_path);
                else
                        printf("no EtcdCluster definitions in %s\n", f.src.url_or_path);
                runner_close(&r);
                return rejected ? EXIT_FAIL : EXIT_OK;
        }

        driver_summary sum = {0};
        int64_t deadline = start_ms + timeout_ms;
        for (;;) {
                k = driver_step(r.drv, &sum);
                if (k < 0 || sum.waiting == 0 || !wait)
                        break;
                int64_t left = deadline - now_mono_ms();
                if (left <= 0)
                        break;
                int w = (int)MIN((int64_t)sum.wait_ms, left);
                if (w > 0)
                        (void)r.target->ops->wait_event(r.target, w);
        }
        double t = (double)(now_mono_ms() - start_ms) / 1000.0;
        printf("%d converged, %d failed, %d not converged (%.1fs)\n", sum.converged, sum.failed,
               sum.waiting, t);
        runner_close(&r);
        if (sum.waiting > 0 && wait)
                fprintf(stderr, "gitcd apply: timed out; `gitcd status` shows where each "
                                "cluster stands\n");
        return sum.converged == sum.clusters && !rejected ? EXIT_OK : EXIT_FAIL;
}
