/*
 * The option tables of cli/options.h: getopt_long does the matching, the
 * table does the rest. An option's getopt code is its index in the table
 * plus CLI_OPT_BASE, above the codes of cli/runner.h, so one getopt table
 * holds both and a code alone says whose option it is.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define CLI_OPT_BASE 2000
/* The width of the help's name column, after two spaces, unless the command says. */
#define NAME_WIDTH 21

/* "  LEFT" padded to the name column, then the help's lines, each further one indented. */
static void help_row(FILE *out, int width, const char *left, const char *help)
{
        fprintf(out, "  %s", left);
        int used = (int)strlen(left);
        const char *line = help;
        if (used > width - 1) {
                fputc('\n', out);
                used = -2;
        }
        fprintf(out, "%*s", width - used, "");
        for (;;) {
                const char *nl = strchr(line, '\n');
                fwrite(line, 1, nl ? (size_t)(nl - line) : strlen(line), out);
                fputc('\n', out);
                if (!nl)
                        break;
                line = nl + 1;
                fprintf(out, "%*s", width + 2, "");
        }
}

void cli_help(const cli_command *c, FILE *out)
{
        int width = c->width > 0 ? c->width : NAME_WIDTH;
        fputs(c->usage, out);
        for (size_t i = 0; i < c->n_opts; i++) {
                const cli_opt *o = &c->opts[i];
                if (o->kind == CLI_OPT_HEADING) {
                        fprintf(out, "%s\n", o->name);
                        continue;
                }
                if (o->kind == CLI_OPT_TEXT) {
                        if (o->help)
                                help_row(out, width, o->name, o->help);
                        else
                                fprintf(out, "  %s\n", o->name);
                        continue;
                }
                if (!o->help)
                        continue;
                _cleanup_free_ char *shrt = o->short_name   ? xasprintf("-%c, ", o->short_name)
                                            : c->align_long ? xstrdup("    ")
                                                            : xstrdup("");
                _cleanup_free_ char *left = o->kind == CLI_OPT_HELP ? xstrdup("-h, --help")
                                            : o->arg ? xasprintf("%s--%s %s", shrt, o->name, o->arg)
                                                     : xasprintf("%s--%s", shrt, o->name);
                help_row(out, width, left, o->help);
        }
        fputs(c->footer, out);
}

const char *const cli_output_formats[] = {"table", "json", NULL};

/* A bad value of option o: its message. -EINVAL. */
static int bad_value(const cli_command *c, const cli_opt *o, const char *arg)
{
        const char *at = o->bad ? strstr(o->bad, "%s") : NULL;
        if (!o->bad)
                ; /* the reader said why */
        else if (at)
                fprintf(stderr, "%s: %.*s%s%s\n", c->prog, (int)(at - o->bad), o->bad, arg, at + 2);
        else if (o->show_arg)
                fprintf(stderr, "%s: %s, not '%s'\n", c->prog, o->bad, arg);
        else
                fprintf(stderr, "%s: %s\n", c->prog, o->bad);
        return -EINVAL;
}

/* The value of option o from arg: 0, or -EINVAL with o->bad printed. */
static int take(const cli_command *c, const cli_opt *o, const char *arg)
{
        switch (o->kind) {
        case CLI_OPT_SET:
                *(bool *)o->dest = true;
                return 0;
        case CLI_OPT_CLEAR:
                *(bool *)o->dest = false;
                return 0;
        case CLI_OPT_STRING:
                *(const char **)o->dest = arg;
                return 0;
        case CLI_OPT_DURATION: {
                int64_t ms = 0;
                if (parse_duration_ms(arg, &ms) < 0 || ms <= 0 || ms < o->min)
                        return bad_value(c, o, arg);
                *(int64_t *)o->dest = ms;
                return 0;
        }
        case CLI_OPT_CHOICE:
                for (int i = 0; o->choices[i]; i++)
                        if (streq(arg, o->choices[i])) {
                                *(int *)o->dest = i;
                                return 0;
                        }
                return bad_value(c, o, arg);
        case CLI_OPT_CUSTOM:
                return o->parse(arg, o->dest) < 0 ? bad_value(c, o, arg) : 0;
        case CLI_OPT_TEXT:
        case CLI_OPT_HEADING:
        case CLI_OPT_HELP:
                break;
        }
        return 0;
}

/*
 * A missing value or an unknown option, said by the command (quiet_getopt):
 * EXIT_USAGE, the help on stderr.
 */
static int own_error(const cli_command *c, int ch, char **argv)
{
        if (ch == ':')
                fprintf(stderr, "%s: %s needs a value\n", c->prog, argv[optind - 1]);
        else if (optopt)
                fprintf(stderr, "%s: unknown option '-%c'\n", c->prog, optopt);
        else
                fprintf(stderr, "%s: unknown option '%s'\n", c->prog, argv[optind - 1]);
        cli_help(c, stderr);
        return EXIT_USAGE;
}

/* The code getopt returned for ch: -1 to go on, else the exit status. */
static int one_option(const cli_command *c, int ch, const char *arg, char **argv)
{
        if (c->quiet_getopt && (ch == ':' || ch == '?'))
                return own_error(c, ch, argv);
        if (ch == 'h') {
                cli_help(c, stdout);
                return EXIT_OK;
        }
        if (ch >= CLI_OPT_BASE && ch < CLI_OPT_BASE + (int)c->n_opts)
                return take(c, &c->opts[ch - CLI_OPT_BASE], arg) < 0 ? EXIT_USAGE : -1;
        for (size_t i = 0; i < c->n_opts; i++)
                if (c->opts[i].short_name && ch == c->opts[i].short_name)
                        return take(c, &c->opts[i], arg) < 0 ? EXIT_USAGE : -1;
        if (c->shared && runner_flag(c->shared, ch, arg))
                return -1;
        cli_help(c, stderr);
        return EXIT_USAGE;
}

/* Row i of c's table into getopt's table opts (at *n) and its short name into shorts. */
static void add_option(const cli_command *c, size_t i, struct option *opts, size_t *n,
                       strbuf *shorts)
{
        const cli_opt *o = &c->opts[i];
        bool has_arg = o->kind == CLI_OPT_STRING || o->kind == CLI_OPT_DURATION ||
                       o->kind == CLI_OPT_CHOICE || o->kind == CLI_OPT_CUSTOM;
        opts[(*n)++] =
            (struct option){.name = o->kind == CLI_OPT_HELP ? "help" : o->name,
                            .has_arg = has_arg ? required_argument : no_argument,
                            .val = o->kind == CLI_OPT_HELP ? 'h' : CLI_OPT_BASE + (int)i};
        if (o->short_name)
                sb_printf(shorts, "%c%s", o->short_name, has_arg ? ":" : "");
}

/*
 * getopt's table: the command's own options in the table's order, then
 * its rows of cli/runner.h in runner_long_options' order (the order getopt
 * lists the options an abbreviation could mean).
 */
static struct option *getopt_table(const cli_command *c, size_t *ret_n, strbuf *shorts)
{
        struct option *opts = xcalloc(c->n_opts + 1, sizeof(*opts));
        size_t n = 0;
        for (size_t i = 0; i < c->n_opts; i++) {
                const cli_opt *o = &c->opts[i];
                if (o->kind == CLI_OPT_HELP ||
                    (o->kind != CLI_OPT_TEXT && o->kind != CLI_OPT_HEADING && !o->runner &&
                     o->group == c->group))
                        add_option(c, i, opts, &n, shorts);
        }
        for (size_t j = 0; j < runner_n_long_options; j++)
                for (size_t i = 0; i < c->n_opts; i++)
                        if (c->opts[i].runner &&
                            streq(c->opts[i].name, runner_long_options[j].name))
                                add_option(c, i, opts, &n, shorts);
        *ret_n = n;
        return opts;
}

static cli_collect_fn collect_fn;
static void *collect_userdata;

void cli_collect(cli_collect_fn fn, void *userdata)
{
        collect_fn = fn;
        collect_userdata = userdata;
}

int cli_parse(const cli_command *c, int argc, char **argv)
{
        if (collect_fn) {
                collect_fn(c, collect_userdata);
                return EXIT_OK;
        }
        strbuf shorts = STRBUF_INIT;
        sb_append(&shorts, c->stop_at_operand ? "+" : "");
        sb_append(&shorts, c->quiet_getopt ? ":" : "");
        size_t n_own = 0;
        struct option *own = getopt_table(c, &n_own, &shorts);
        /* the options of cli/runner.h only for a command that takes them */
        _cleanup_free_ struct option *opts = c->shared ? runner_options(own, n_own) : NULL;
        if (opts)
                free(own);
        else
                opts = own;
        sb_append(&shorts, "h");
        int ch;
        optind = 1;
        while ((ch = getopt_long(argc, argv, sb_str(&shorts), opts, NULL)) != -1) {
                int status = one_option(c, ch, optarg, argv);
                if (status >= 0) {
                        sb_release(&shorts);
                        return status;
                }
        }
        sb_release(&shorts);
        return -1;
}
