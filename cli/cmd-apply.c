/*
 * gitcd apply: take in the source's revision and reconcile every cluster in
 * it until each converges or fails. The exit status is 0 when every cluster
 * converged, 1 otherwise.
 *
 * Three ways to show progress (-o/--output):
 * - tty (the default on a terminal): one line per cluster -- its state,
 *   the current step, members ready/desired, elapsed time -- redrawn in
 *   place with ANSI cursor movements, cut to the terminal's width;
 * - plain (the default when stdout is not a terminal): one timestamped line
 *   per step, scrolling, as before;
 * - json: one JSON object per line and event, for tools.
 * The final summary line is the same in tty and plain.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd apply --source SRC [options]\n\n"
    "Reconcile every EtcdCluster in SRC until each converges or fails.\n"
    "Members run on the local target (etcd processes on this host) by\n"
    "default; they keep running after gitcd exits.\n\n";

static const char footer_text[] =
    "\n"
    "The policy (docs/operating.md): a cluster it refuses is not taken in (one\n"
    "that exists keeps its accepted spec), with the policy's line; a change it\n"
    "holds for approvals waits for more trusted signers. Of the file, apply takes\n"
    "only the policy: that of its source whose url is SRC, else the top-level one.\n\n"
    "Clusters with spec.dependsOn (docs/api.md) are taken in in order: a changed\n"
    "or new one waits until every cluster it depends on converged on the same\n"
    "revision and stayed healthy for its spec.rollout.soakSeconds; apply waits for\n"
    "the soaks (within --timeout), --no-wait leaves the rest held for the next\n"
    "apply or gitcd run. One held by a failed upstream counts as failed.\n\n"
    "Only one apply or run works on a state at a time (a lock in the state\n"
    "folder); another exits 1 at once: \"another gitcd (pid N) holds DIR\".\n\n"
    "Exit status: 0 every cluster converged; 1 a cluster failed, was\n"
    "rejected (by a rule or the policy), has a change held for approvals or by\n"
    "a failed upstream, is blocked (the target refused a step, or the cluster is\n"
    "frozen because its members hold different data: gitcd status says which\n"
    "and the gitcd repair to run) or did not converge in time, or the state is\n"
    "locked; 64 bad usage.\n";

typedef enum output { OUTPUT_TTY, OUTPUT_PLAIN, OUTPUT_JSON } output;

/* The last thing known about a cluster, for the tty display. */
typedef struct row {
        char *cluster;
        pass_outcome outcome;
        char *message;
        char *phase;
        int ready;
        int desired;
        int64_t done_ms; /* when it converged or failed (its elapsed time stops); 0 */
} row;

typedef struct display {
        output mode;
        bool quiet;
        int64_t start_ms;
        runner *r;
        row *rows;
        size_t n_rows;
        size_t drawn; /* lines on screen from the last redraw */
} display;

static const char *mark(pass_outcome o)
{
        switch (o) {
        case PASS_FAILED:
        case PASS_BLOCKED:
                return "✗";
        case PASS_CONVERGED:
                return "✓";
        case PASS_WAITING:
                return "…";
        default:
                return "→";
        }
}

/* Members ready and desired, and the phase, as the state store has them now. */
static void facts(display *d, row *w)
{
        state_cluster *sc = NULL;
        if (d->r->db && state_cluster_get(d->r->db, w->cluster, &sc) == 0) {
                w->desired = sc->desired_replicas;
                free(w->phase);
                w->phase = xstrdup_null(sc->phase);
        }
        state_cluster_free(sc);
        state_member_list ml = {0};
        if (d->r->db && state_member_list_for(d->r->db, w->cluster, false, &ml) == 0) {
                w->ready = 0;
                for (size_t i = 0; i < ml.n; i++)
                        w->ready += ml.items[i]->state && streq(ml.items[i]->state, "ready");
        }
        state_member_list_release(&ml);
}

static row *row_for(display *d, const char *cluster)
{
        for (size_t i = 0; i < d->n_rows; i++)
                if (streq(d->rows[i].cluster, cluster))
                        return &d->rows[i];
        d->rows = xrealloc(d->rows, (d->n_rows + 1) * sizeof(row));
        row *w = &d->rows[d->n_rows++];
        memset(w, 0, sizeof(*w));
        w->cluster = xstrdup(cluster);
        w->outcome = PASS_WAITING;
        w->message = xstrdup("");
        w->desired = -1;
        return w;
}

static int term_width(void)
{
        struct winsize ws;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                return ws.ws_col;
        const char *c = getenv("COLUMNS");
        return c && atoi(c) > 0 ? atoi(c) : 80;
}

/* Append s to sb, at most `cols` columns (UTF-8 aware); returns the columns used. */
static int append_cols(strbuf *sb, const char *s, int cols)
{
        int used = 0;
        for (const char *p = s; *p && used < cols; used++) {
                const char *q = p + 1;
                while ((*q & 0xC0) == 0x80)
                        q++;
                /* Control characters never reach the terminal. */
                if ((unsigned char)*p < 0x20)
                        sb_appendc(sb, ' ');
                else
                        sb_append_len(sb, p, (size_t)(q - p));
                p = q;
        }
        return used;
}

static void redraw(display *d)
{
        int width = term_width();
        size_t name_w = 0;
        for (size_t i = 0; i < d->n_rows; i++)
                name_w = MAX(name_w, strlen(d->rows[i].cluster));
        name_w = MIN(name_w, (size_t)32);
        int64_t now = now_mono_ms();
        strbuf out = STRBUF_INIT;
        if (d->drawn)
                sb_printf(&out, "\r\033[%zuA", d->drawn);
        for (size_t i = 0; i < d->n_rows; i++) {
                row *w = &d->rows[i];
                char ready[32];
                if (w->desired >= 0)
                        snprintf(ready, sizeof(ready), "%d/%d", w->ready, w->desired);
                else
                        snprintf(ready, sizeof(ready), "-");
                double t = (double)((w->done_ms ? w->done_ms : now) - d->start_ms) / 1000.0;
                _cleanup_free_ char *head =
                    xasprintf("%-*.*s %-13.13s %5s %6.1fs ", (int)name_w, (int)name_w, w->cluster,
                              w->phase ? w->phase : pass_outcome_name(w->outcome), ready, t);
                sb_append(&out, "\033[2K");
                int used = append_cols(&out, mark(w->outcome), 1);
                sb_appendc(&out, ' ');
                used++;
                used += append_cols(&out, head, width - 1 - used);
                append_cols(&out, w->message, width - 1 - used);
                sb_appendc(&out, '\n');
        }
        fputs(sb_str(&out), stdout);
        fflush(stdout);
        sb_release(&out);
        d->drawn = d->n_rows;
}

static void print_json(display *d, const char *cluster, const pass_result *res, row *w)
{
        char when[64];
        format_rfc3339(now_wall_ms(), when, sizeof(when));
        json_t *o = json_object();
        json_object_set_new(o, "time", json_string(when));
        json_object_set_new(o, "elapsed_ms", json_integer(now_mono_ms() - d->start_ms));
        json_object_set_new(o, "event", json_string("pass"));
        json_object_set_new(o, "cluster", json_string(cluster));
        json_object_set_new(o, "outcome", json_string(pass_outcome_name(res->outcome)));
        json_object_set_new(o, "step", json_string(step_kind_name(res->step)));
        if (res->member[0])
                json_object_set_new(o, "member", json_string(res->member));
        json_object_set_new(o, "message", json_string(res->message));
        if (w->phase)
                json_object_set_new(o, "phase", json_string(w->phase));
        json_object_set_new(o, "ready", json_integer(w->ready));
        if (w->desired >= 0)
                json_object_set_new(o, "desired", json_integer(w->desired));
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        fflush(stdout);
        free(s);
        json_decref(o);
}

static void progress(const char *cluster, const pass_result *res, void *userdata)
{
        display *d = userdata;
        bool failed = res->outcome == PASS_FAILED || res->outcome == PASS_BLOCKED;
        row *w = row_for(d, cluster);
        w->outcome = res->outcome;
        free(w->message);
        w->message = xstrdup(res->message);
        bool done = res->outcome == PASS_CONVERGED || failed;
        if (done && !w->done_ms)
                w->done_ms = now_mono_ms();
        else if (!done)
                w->done_ms = 0;
        if (d->mode != OUTPUT_PLAIN)
                facts(d, w);
        switch (d->mode) {
        case OUTPUT_JSON:
                print_json(d, cluster, res, w);
                return;
        case OUTPUT_TTY:
                if (!d->quiet || failed)
                        redraw(d);
                return;
        case OUTPUT_PLAIN:
                break;
        }
        if (d->quiet && !failed)
                return;
        double t = (double)(now_mono_ms() - d->start_ms) / 1000.0;
        printf("[%6.1fs] %s %s: %s\n", t, mark(res->outcome), cluster, res->message);
        fflush(stdout);
}

static void display_release(display *d)
{
        for (size_t i = 0; i < d->n_rows; i++) {
                free(d->rows[i].cluster);
                free(d->rows[i].message);
                free(d->rows[i].phase);
        }
        free(d->rows);
}

static void print_summary(display *d, const driver_summary *sum)
{
        double t = (double)(now_mono_ms() - d->start_ms) / 1000.0;
        if (d->mode == OUTPUT_JSON) {
                printf("{\"event\":\"summary\",\"clusters\":%d,\"converged\":%d,\"failed\":%d,"
                       "\"not_converged\":%d,\"elapsed_ms\":%lld}\n",
                       sum->clusters, sum->converged, sum->failed, sum->waiting,
                       (long long)(now_mono_ms() - d->start_ms));
                return;
        }
        printf("%d converged, %d failed, %d not converged (%.1fs)\n", sum->converged, sum->failed,
               sum->waiting, t);
}

/* The command line of gitcd apply. */
typedef struct apply_args {
        runner_flags f;
        bool wait;
        int64_t timeout_ms;
} apply_args;

/* tty, plain, json: the values of -o, in the order of enum output. */
static const char *const output_names[] = {"tty", "plain", "json", NULL};

/* The options into a and d: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, apply_args *a, display *d)
{
        int mode = (int)d->mode;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_SET,
             .name = "wait",
             .dest = &a->wait,
             .help = "wait for convergence (the default)"},
            {.kind = CLI_OPT_CLEAR,
             .name = "no-wait",
             .dest = &a->wait,
             .help = "take in the revision, act while steps complete\n"
                     "at once, then exit without waiting"},
            {.kind = CLI_OPT_DURATION,
             .name = "timeout",
             .arg = "D",
             .dest = &a->timeout_ms,
             .help = "give up after D (default 10m; e.g. 90s, 5m)",
             .bad = "--timeout takes a duration such as 90s or 5m"},
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FMT",
             .dest = &mode,
             .choices = output_names,
             .help = "tty: one line per cluster, redrawn in place (the\n"
                     "default on a terminal); plain: timestamped lines\n"
                     "(the default otherwise); json: one JSON event per\n"
                     "line",
             .bad = "-o takes tty, plain or json",
             .show_arg = true},
            {.kind = CLI_OPT_SET,
             .name = "quiet",
             .short_name = 'q',
             .dest = &d->quiet,
             .help = "print only errors and the summary"},
            {.kind = CLI_OPT_STRING,
             .name = "config",
             .arg = "FILE",
             .dest = &a->f.config,
             .help = "the configuration file whose policy bounds what\n"
                     "SRC may do (default: " OPS_CONFIG_DEFAULT_PATH "\n"
                     "when present, else gitcd's built-in policy)"},
            {.kind = CLI_OPT_HELP, .help = "show this help"},
            CLI_RUNNER_ROWS(&a->f),
        };
        const cli_command cmd = {.prog = "gitcd apply",
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 25};
        int status = cli_parse(&cmd, argc, argv);
        d->mode = (output)mode;
        if (status >= 0)
                return status;
        if (optind < argc) {
                fprintf(stderr, "gitcd apply: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (!a->f.src.url_or_path) {
                fprintf(stderr, "gitcd apply: --source is required\n");
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        return -1;
}

/*
 * The source's clusters taken in (the diagnostics printed): -1 to go on,
 * else the exit status, when the sync failed or took no cluster in.
 */
static int take_in(display *d, runner *r, const char *where, bool *ret_rejected)
{
        diag_list diags = DIAG_LIST_INIT;
        int k = driver_sync(r->drv, &diags);
        diag_sort(&diags);
        diag_print(&diags, stderr);
        bool rejected = diag_has_errors(&diags);
        diag_list_release(&diags);
        *ret_rejected = rejected;
        if (k < 0 && k != -EINVAL) {
                fprintf(stderr, "gitcd apply: %s\n", driver_last_error(r->drv));
                return EXIT_FAIL;
        }
        if (driver_cluster_count(r->drv) == 0) {
                if (rejected)
                        printf("no EtcdCluster in %s was taken in\n", where);
                else
                        printf("no EtcdCluster definitions in %s\n", where);
                return rejected ? EXIT_FAIL : EXIT_OK;
        }
        /* On a terminal every cluster has its line from the start. */
        for (size_t i = 0; d->mode == OUTPUT_TTY && i < driver_cluster_count(r->drv); i++)
                facts(d, row_for(d, driver_cluster_name(r->drv, i)));
        if (d->mode == OUTPUT_TTY && !d->quiet)
                redraw(d);
        return -1;
}

/* Every row's facts again, redrawn (a terminal, not quiet). */
static void refresh(display *d)
{
        if (d->mode != OUTPUT_TTY || d->quiet)
                return;
        for (size_t i = 0; i < d->n_rows; i++)
                facts(d, &d->rows[i]);
        redraw(d);
}

/* The driver's steps until every cluster is done, the deadline, or at once without wait. */
static void drive(display *d, runner *r, bool wait, int64_t deadline, driver_summary *sum)
{
        for (;;) {
                int k = driver_step(r->drv, sum);
                if (k < 0 || sum->waiting == 0 || !wait)
                        break;
                int64_t left = deadline - now_mono_ms();
                if (left <= 0)
                        break;
                int w = (int)MIN((int64_t)sum->wait_ms, left);
                /* The elapsed times on a terminal move on at least every second. */
                if (d->mode == OUTPUT_TTY)
                        w = MIN(w, 1000);
                if (w > 0)
                        (void)r->target->ops->wait_event(r->target, w);
                refresh(d);
        }
        refresh(d);
}

int cmd_apply(int argc, char **argv)
{
        apply_args a = {.wait = true, .timeout_ms = 10 * 60 * 1000};
        display d = {.mode = isatty(STDOUT_FILENO) && !streq_ptr(getenv("TERM"), "dumb")
                                 ? OUTPUT_TTY
                                 : OUTPUT_PLAIN};
        int status = parse_args(argc, argv, &a, &d);
        if (status >= 0)
                return status;

        /* The progress lines tell the story; library logging only for warnings. */
        if (!log_level_is_explicit())
                log_set_level(LOG_WARN);
        d.start_ms = now_mono_ms();
        runner r;
        d.r = &r;
        if (runner_open(&a.f, progress, &d, &r) < 0)
                return EXIT_FAIL;
        bool rejected = false;
        status = take_in(&d, &r, a.f.src.url_or_path, &rejected);
        if (status >= 0) {
                runner_close(&r);
                display_release(&d);
                return status;
        }
        driver_summary sum = {0};
        drive(&d, &r, a.wait, d.start_ms + a.timeout_ms, &sum);
        print_summary(&d, &sum);
        size_t held = driver_held(r.drv);
        runner_close(&r);
        display_release(&d);
        if (sum.waiting > 0 && a.wait)
                fprintf(stderr, "gitcd apply: timed out; `gitcd status` shows where each "
                                "cluster stands\n");
        if (held > 0)
                fprintf(stderr,
                        "gitcd apply: %zu change%s held waiting for approvals (above): the "
                        "cluster%s stay%s on the spec accepted last\n",
                        held, held == 1 ? "" : "s", held == 1 ? "" : "s", held == 1 ? "s" : "");
        return sum.converged == sum.clusters && !rejected && held == 0 ? EXIT_OK : EXIT_FAIL;
}
