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
#include "util/timeutil.h"
#include "util/xalloc.h"

#define CLI_OPT_BASE 2000
/* The width of the help's name column, after two spaces. */
#define NAME_WIDTH 21

static void help_row(FILE *out, const char *left, const char *help)
{
        fprintf(out, "  %s", left);
        int used = (int)strlen(left);
        const char *line = help;
        if (used > NAME_WIDTH - 2) {
                fputc('\n', out);
                used = -2;
        }
        fprintf(out, "%*s", NAME_WIDTH - used, "");
        for (;;) {
                const char *nl = strchr(line, '\n');
                fwrite(line, 1, nl ? (size_t)(nl - line) : strlen(line), out);
                fputc('\n', out);
                if (!nl)
                        break;
                line = nl + 1;
                fprintf(out, "%*s", NAME_WIDTH + 2, "");
        }
}

void cli_help(const cli_command *c, FILE *out)
{
        fputs(c->usage, out);
        for (size_t i = 0; i < c->n_opts; i++) {
                const cli_opt *o = &c->opts[i];
                if (o->kind == CLI_OPT_TEXT) {
                        if (o->help)
                                help_row(out, o->name, o->help);
                        else
                                fprintf(out, "  %s\n", o->name);
                        continue;
                }
                _cleanup_free_ char *left = o->kind == CLI_OPT_HELP ? xstrdup("-h, --help")
                                            : o->arg ? xasprintf("--%s %s", o->name, o->arg)
                                                     : xasprintf("--%s", o->name);
                help_row(out, left, o->help);
        }
        fputs(c->footer, out);
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
                if (parse_duration_ms(arg, &ms) < 0 || ms <= 0 || ms < o->min) {
                        fprintf(stderr, "%s: %s\n", c->prog, o->bad);
                        return -EINVAL;
                }
                *(int64_t *)o->dest = ms;
                return 0;
        }
        case CLI_OPT_TEXT:
        case CLI_OPT_HELP:
                break;
        }
        return 0;
}

int cli_parse(const cli_command *c, int argc, char **argv)
{
        struct option *own = xcalloc(c->n_opts + 1, sizeof(*own));
        size_t n_own = 0;
        for (size_t i = 0; i < c->n_opts; i++) {
                const cli_opt *o = &c->opts[i];
                if (o->kind == CLI_OPT_TEXT)
                        continue;
                bool has_arg = o->kind == CLI_OPT_STRING || o->kind == CLI_OPT_DURATION;
                own[n_own++] =
                    (struct option){.name = o->kind == CLI_OPT_HELP ? "help" : o->name,
                                    .has_arg = has_arg ? required_argument : no_argument,
                                    .val = o->kind == CLI_OPT_HELP ? 'h' : CLI_OPT_BASE + (int)i};
        }
        /* the options of cli/runner.h only for a command that takes them */
        _cleanup_free_ struct option *opts = c->shared ? runner_options(own, n_own) : NULL;
        if (opts)
                free(own);
        else
                opts = own;
        int ch;
        optind = 1;
        while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (ch == 'h') {
                        cli_help(c, stdout);
                        return EXIT_OK;
                }
                if (ch >= CLI_OPT_BASE && ch < CLI_OPT_BASE + (int)c->n_opts) {
                        if (take(c, &c->opts[ch - CLI_OPT_BASE], optarg) < 0)
                                return EXIT_USAGE;
                        continue;
                }
                if (c->shared && runner_flag(c->shared, ch, optarg))
                        continue;
                cli_help(c, stderr);
                return EXIT_USAGE;
        }
        return -1;
}
