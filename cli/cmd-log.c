/*
 * gitcd log: the audit log from the state store, newest first.
 *
 * The table is for people at a terminal: it fits the terminal's width (100
 * columns when stdout is not a terminal) by truncating the free-text reason
 * last, and every text field has its control characters escaped
 * (util/escape.h; the audit log stores them escaped already, this covers
 * older rows), because authors and reasons come from Git commits and must
 * not be able to drive the terminal. `-o json` is for programs: one object per line with stable
 * field names. The database is opened read-only; this never creates state.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "state/state.h"
#include "util/escape.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd log [options] [--follow]\n\n"
    "Show the audit log (who changed what, when, and what it did), newest first;\n"
    "with --follow, then each event appended as it comes, until Ctrl-C.\n\n"
    "Options:\n";

/* "2026-11-01", "2026-11-01T12:00:00Z", "2026-11-01T12:00:00+02:00" -> epoch ms. */
static int parse_date_ms(const char *s, int64_t *ret_ms)
{
        struct tm tm = {0};
        const char *end = strptime(s, "%Y-%m-%d", &tm);
        if (!end)
                return -EINVAL;
        long offset = 0;
        if (*end == 'T' || *end == ' ') {
                end = strptime(end + 1, "%H:%M:%S", &tm);
                if (!end)
                        return -EINVAL;
                if (*end == '.') /* fractional seconds are ignored */
                        for (end++; isdigit((unsigned char)*end); end++)
                                ;
                if (*end == 'Z' || *end == 'z')
                        end++;
                else if (*end == '+' || *end == '-') {
                        int hh, mm, n = 0;
                        if (sscanf(end + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5)
                                return -EINVAL;
                        offset = (hh * 60L + mm) * 60L * (*end == '+' ? 1 : -1);
                        end += 1 + n;
                }
        }
        if (*end != '\0')
                return -EINVAL;
        time_t t = timegm(&tm);
        if (t == (time_t)-1)
                return -EINVAL;
        *ret_ms = ((int64_t)t - offset) * 1000;
        return 0;
}

static int parse_since(const char *s, int64_t now_ms, int64_t *ret_ms)
{
        int64_t d;
        if (parse_duration_ms(s, &d) == 0) {
                *ret_ms = now_ms - d;
                return 0;
        }
        return parse_date_ms(s, ret_ms);
}

/* Printable copy: control characters escaped; at most max code points ("..." if cut). */
static char *cell(const char *raw, size_t max)
{
        _cleanup_free_ char *s = str_escape(raw);
        strbuf sb = STRBUF_INIT;
        size_t cps = 0, total = 0;
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
                if ((*p & 0xc0) != 0x80)
                        total++;
        bool cut = total > max;
        size_t keep = cut ? (max >= 3 ? max - 3 : 0) : max;
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
                bool lead = (*p & 0xc0) != 0x80;
                if (lead && cps == keep)
                        break;
                if (lead)
                        cps++;
                sb_appendc(&sb, (char)*p);
        }
        if (cut)
                sb_append(&sb, max >= 3 ? "..." : "");
        if (!s || !*s)
                sb_append(&sb, "-");
        return sb_detach(&sb);
}

static size_t width_of(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                if ((*s & 0xc0) != 0x80)
                        n++;
        return n;
}

static void pad(strbuf *sb, const char *s, size_t w)
{
        sb_append(sb, s);
        for (size_t n = width_of(s); n < w; n++)
                sb_appendc(sb, ' ');
        sb_append(sb, "  ");
}

static size_t terminal_width(void)
{
        struct winsize ws;
        if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                return ws.ws_col;
        return 100;
}

/* The author's name without the email, which is in the json output. */
static char *author_name(const char *author)
{
        if (!author)
                return NULL;
        const char *lt = strchr(author, '<');
        if (!lt || lt == author)
                return xstrdup(author);
        size_t n = (size_t)(lt - author);
        while (n > 0 && author[n - 1] == ' ')
                n--;
        return xstrndup(author, n);
}

/* Recent events by age ("5m ago"); older ones like ls -l: "Nov 19 12:39", or "2025-11-19". */
static void time_cell(int64_t t, int64_t now, char *buf, size_t size)
{
        if (now - t < 24 * 3600 * 1000LL && now >= t) {
                char age[32];
                format_age(now - t, age, sizeof(age));
                snprintf(buf, size, "%s ago", age);
                return;
        }
        time_t tt = (time_t)(t / 1000), tn = (time_t)(now / 1000);
        struct tm tm, tmn;
        gmtime_r(&tt, &tm);
        gmtime_r(&tn, &tmn);
        strftime(buf, size, tm.tm_year == tmn.tm_year ? "%b %d %H:%M" : "%Y-%m-%d", &tm);
}

enum { COL_TIME, COL_CLUSTER, COL_ACTION, COL_OUTCOME, COL_COMMIT, COL_AUTHOR, N_COLS };

#define REASON_MIN 20

static void print_table(const state_audit_list *l, int64_t now, bool header)
{
        static const char *const heads[N_COLS] = {"TIME",    "CLUSTER", "ACTION",
                                                  "OUTCOME", "COMMIT",  "AUTHOR"};
        static const size_t caps[N_COLS] = {12, 32, 26, 10, 8, 20};
        /* when the terminal is narrow, these give up width first, down to mins */
        static const int shrink_order[] = {COL_AUTHOR, COL_CLUSTER, COL_ACTION};
        static const size_t mins[N_COLS] = {12, 12, 14, 7, 8, 8};
        size_t w[N_COLS];
        for (int c = 0; c < N_COLS; c++)
                w[c] = strlen(heads[c]);
        char **raw = xcalloc(l->n * N_COLS, sizeof(char *));
        for (size_t i = 0; i < l->n; i++) {
                const state_audit_event *ev = l->items[i];
                char t[40], short_commit[9] = "";
                time_cell(ev->time_ms, now, t, sizeof(t));
                if (ev->commit)
                        snprintf(short_commit, sizeof(short_commit), "%s", ev->commit);
                char **row = raw + i * N_COLS;
                row[COL_TIME] = xstrdup(t);
                row[COL_CLUSTER] = xstrdup_null(ev->cluster);
                row[COL_ACTION] = xstrdup_null(ev->action);
                row[COL_OUTCOME] = xstrdup_null(ev->outcome);
                row[COL_COMMIT] = xstrdup(short_commit);
                row[COL_AUTHOR] = author_name(ev->author);
                for (int c = 0; c < N_COLS; c++) {
                        _cleanup_free_ char *cut = cell(row[c], caps[c]);
                        w[c] = MAX(w[c], width_of(cut));
                }
        }
        size_t total = terminal_width(), used = 0;
        for (int c = 0; c < N_COLS; c++)
                used += w[c] + 2;
        for (size_t k = 0; k < ARRAY_SIZE(shrink_order) && used + REASON_MIN > total; k++) {
                int c = shrink_order[k];
                size_t give = MIN(w[c] - MIN(w[c], mins[c]), used + REASON_MIN - total);
                w[c] -= give;
                used -= give;
        }
        size_t reason_w = total > used + 10 ? total - used : 10;

        strbuf sb = STRBUF_INIT;
        for (int c = 0; header && c < N_COLS; c++)
                pad(&sb, heads[c], w[c]);
        if (header)
                sb_append(&sb, "REASON\n");
        for (size_t i = 0; i < l->n; i++) {
                for (int c = 0; c < N_COLS; c++) {
                        _cleanup_free_ char *x = cell(raw[i * N_COLS + c], w[c]);
                        pad(&sb, x, w[c]);
                        free(raw[i * N_COLS + c]);
                }
                _cleanup_free_ char *reason = cell(l->items[i]->reason, reason_w);
                sb_append(&sb, reason);
                sb_appendc(&sb, '\n');
                fputs(sb_str(&sb), stdout);
                sb_reset(&sb);
        }
        fputs(sb_str(&sb), stdout);
        sb_release(&sb);
        free(raw);
}

static json_t *json_str_or_null(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *json_value_or_null(const char *text)
{
        json_t *j = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
        return j ? j : json_null();
}

static void print_json(const state_audit_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                const state_audit_event *ev = l->items[i];
                char t[40];
                format_rfc3339(ev->time_ms, t, sizeof(t));
                json_t *o = json_object();
                json_object_set_new(o, "time", json_string(t));
                json_object_set_new(o, "cluster", json_str_or_null(ev->cluster));
                json_object_set_new(o, "commit", json_str_or_null(ev->commit));
                json_object_set_new(o, "author", json_str_or_null(ev->author));
                json_object_set_new(o, "action", json_str_or_null(ev->action));
                json_object_set_new(o, "reason", json_str_or_null(ev->reason));
                json_object_set_new(o, "before", json_value_or_null(ev->before_json));
                json_object_set_new(o, "after", json_value_or_null(ev->after_json));
                json_object_set_new(o, "outcome", json_str_or_null(ev->outcome));
                json_object_set_new(o, "duration_ms", json_integer(ev->duration_ms));
                char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
                if (s)
                        puts(s);
                free(s);
                json_decref(o);
        }
}

/* The command line of gitcd log. */
typedef struct log_args {
        state_audit_filter filter;
        const char *state_flag, *config;
        int json;    /* -o: 0 table, 1 json */
        int64_t now; /* what --since counts back from */
        bool follow; /* -f: then the events appended, until SIGINT */
} log_args;

/* --cluster NS/NAME */
static int parse_cluster(const char *arg, void *dest)
{
        if (!state_cluster_name_valid(arg))
                return -EINVAL;
        *(const char **)dest = arg;
        return 0;
}

/* --since WHEN, counted back from the log_args' now */
static int parse_since_arg(const char *arg, void *dest)
{
        log_args *a = dest;
        return parse_since(arg, a->now, &a->filter.since_ms);
}

/* --commit SHA: a prefix of at least 4 hex digits */
static int parse_commit(const char *arg, void *dest)
{
        if (!state_commit_prefix_valid(arg))
                return -EINVAL;
        *(const char **)dest = arg;
        return 0;
}

/* --limit N: a positive number */
static int parse_limit(const char *arg, void *dest)
{
        char *end;
        errno = 0;
        long long n = strtoll(arg, &end, 10);
        if (errno || *end || end == arg || n < 1)
                return -EINVAL;
        *(size_t *)dest = (size_t)n;
        return 0;
}

/* The options into a: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, log_args *a)
{
        const cli_opt opts[] = {
            {.kind = CLI_OPT_CUSTOM,
             .name = "cluster",
             .arg = "NS/NAME",
             .dest = &a->filter.cluster,
             .parse = parse_cluster,
             .help = "only events of this cluster",
             .bad = "--cluster takes namespace/name",
             .show_arg = true},
            {.kind = CLI_OPT_CUSTOM,
             .name = "since",
             .arg = "WHEN",
             .dest = a,
             .parse = parse_since_arg,
             .help = "only events since a duration ago (30m, 2h, 7d) or a\n"
                     "date (2026-11-01, 2026-11-01T12:00:00Z)",
             .bad = "--since takes a duration (30m, 2h, 7d) or a date (2026-11-01, "
                    "2026-11-01T12:00:00Z)",
             .show_arg = true},
            {.kind = CLI_OPT_CUSTOM,
             .name = "commit",
             .arg = "SHA",
             .dest = &a->filter.commit_prefix,
             .parse = parse_commit,
             .help = "only events caused by this commit (4+ hex digits)",
             .bad = "--commit takes at least 4 hex digits of a commit id",
             .show_arg = true},
            {.kind = CLI_OPT_STRING,
             .name = "action",
             .arg = "ACTION",
             .dest = &a->filter.action,
             .help = "only this action (e.g. member.add-learner)"},
            {.kind = CLI_OPT_CUSTOM,
             .name = "limit",
             .arg = "N",
             .dest = &a->filter.limit,
             .parse = parse_limit,
             .help = "at most N events",
             .bad = "--limit takes a positive number",
             .show_arg = true},
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FMT",
             .dest = &a->json,
             .choices = cli_output_formats,
             .help = "table (default) or json (one object per line)",
             .bad = "-o takes table or json",
             .show_arg = true},
            {.kind = CLI_OPT_SET,
             .name = "follow",
             .short_name = 'f',
             .dest = &a->follow,
             .help = "then print each event appended, oldest first,\n"
                     "as it comes (the filters apply, --limit only to\n"
                     "what is printed first); Ctrl-C ends it"},
            CLI_RECORDS_ROWS(&a->state_flag, &a->config),
        };
        const cli_command cmd = {.prog = "gitcd log",
                                 .usage = usage_text,
                                 .footer = "",
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 20,
                                 .stop_at_operand = true};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind < argc) {
                fprintf(stderr, "gitcd log: unexpected argument '%s'\n", argv[optind]);
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        return -1;
}

/* ---- --follow ---- */

/* How often --follow reads the store for new events. */
#define FOLLOW_INTERVAL_MS 500

static volatile sig_atomic_t follow_stop;

static void on_interrupt(int sig)
{
        (void)sig;
        follow_stop = 1;
}

/* The newest id in l (newest first), or since when l is empty. */
static int64_t last_id(const state_audit_list *l, int64_t since)
{
        for (size_t i = 0; i < l->n; i++)
                since = MAX(since, l->items[i]->id);
        return since;
}

/* Oldest first: the order events are appended in, for a log that grows downwards. */
static void reverse(state_audit_list *l)
{
        for (size_t i = 0; i < l->n / 2; i++) {
                state_audit_event *t = l->items[i];
                l->items[i] = l->items[l->n - 1 - i];
                l->items[l->n - 1 - i] = t;
        }
}

/*
 * Read the store (read-only, each query its own read transaction) every
 * FOLLOW_INTERVAL_MS for events after last and print them, until SIGINT
 * or SIGTERM: EXIT_OK, or EXIT_FAIL when the store or stdout fails.
 */
static int follow(state_db *db, const log_args *a, int64_t last, bool header)
{
        struct sigaction sa = {.sa_handler = on_interrupt}, old_int, old_term;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        state_audit_filter f = a->filter;
        f.limit = 0;
        int status = EXIT_OK;
        while (!follow_stop) {
                struct timespec ts = {FOLLOW_INTERVAL_MS / 1000,
                                      (FOLLOW_INTERVAL_MS % 1000) * 1000000L};
                if (nanosleep(&ts, NULL) < 0 && follow_stop)
                        break;
                f.after_id = last;
                state_audit_list l = {0};
                if (state_audit_query(db, &f, &l) < 0) {
                        fprintf(stderr, "gitcd log: %s\n", state_last_error());
                        status = EXIT_FAIL;
                        break;
                }
                last = last_id(&l, last);
                reverse(&l);
                if (a->json)
                        print_json(&l);
                else if (l.n > 0)
                        print_table(&l, now_wall_ms(), header);
                header = header && l.n == 0;
                state_audit_list_release(&l);
                if (fflush(stdout) != 0 || ferror(stdout)) {
                        fprintf(stderr, "gitcd log: writing the output failed\n");
                        status = EXIT_FAIL;
                        break;
                }
        }
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        return status;
}

int cmd_log(int argc, char **argv)
{
        log_args a = {.now = now_wall_ms()};
        int status = parse_args(argc, argv, &a);
        if (status >= 0)
                return status;
        _cleanup_(ops_config_freep) ops_config *file = NULL;
        if (cli_daemon_config(a.config, OPS_CONFIG_DEFAULT_PATH, a.state_flag != NULL, "gitcd log",
                              &file) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *path = cli_state_path(a.state_flag, file);
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_ONLY, &db);
        if (r < 0) {
                fprintf(stderr, "gitcd log: %s\n", state_last_error());
                return EXIT_FAIL;
        }
        state_audit_list l = {0};
        r = state_audit_query(db, &a.filter, &l);
        if (r < 0) {
                fprintf(stderr, "gitcd log: %s\n", state_last_error());
                state_close(db);
                return EXIT_FAIL;
        }
        if (a.json)
                print_json(&l);
        else if (l.n == 0 && !a.follow)
                fprintf(stderr, "gitcd log: no events match\n");
        else if (l.n > 0)
                print_table(&l, a.now, true);
        /* The newest event of the whole log, so --limit does not make --follow repeat any. */
        int64_t last = 0;
        if (a.follow) {
                state_audit_filter newest = {.limit = 1};
                state_audit_list n = {0};
                r = state_audit_query(db, &newest, &n);
                last = last_id(&n, last_id(&l, 0));
                state_audit_list_release(&n);
        }
        bool header = l.n == 0;
        state_audit_list_release(&l);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "gitcd log: writing the output failed\n");
                state_close(db);
                return EXIT_FAIL;
        }
        status = EXIT_OK;
        if (a.follow && r >= 0)
                status = follow(db, &a, last, header);
        else if (r < 0) {
                fprintf(stderr, "gitcd log: %s\n", state_last_error());
                status = EXIT_FAIL;
        }
        state_close(db);
        return status;
}
