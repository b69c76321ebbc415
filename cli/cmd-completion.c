/*
 * gitcd completion bash|zsh: the shell completion script, generated from
 * the command table (cli/main.c) and each command's option table
 * (cli/options.h), so a command or an option added there is completed
 * without touching this file.
 *
 * Design decision: each command is run once with the option tables'
 * collector set (cli_collect): its cli_parse() hands over the table it
 * would parse by and returns at once, before the command does anything.
 * Rows of text (options said together, "--ssh-key FILE") give the words
 * that start with '-'. A value's completion is its choices when the row
 * has them, else file names. Nothing of the user's input reaches the
 * script: every word comes from gitcd's own tables, and the help text in
 * zsh's descriptions is cut to safe characters.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* One option of one command as the scripts need it. */
typedef struct comp_opt {
        char *word;    /* "--output", "-o" */
        bool arg;      /* takes a value */
        char *choices; /* "text json" (space-separated), or NULL: files */
        char *help;    /* the first line of its help, safe characters only, or NULL */
} comp_opt;

typedef struct comp_command {
        const char *name;
        const char *summary;
        comp_opt *opts;
        size_t n;
        char *operands; /* "save list ..." or NULL */
} comp_command;

static bool known(const comp_command *c, const char *word)
{
        for (size_t i = 0; i < c->n; i++)
                if (streq(c->opts[i].word, word))
                        return true;
        return false;
}

/* Letters, digits and a few marks: what is left of a help line in zsh's quotes. */
static char *safe_text(const char *help)
{
        if (!help)
                return NULL;
        size_t len = strcspn(help, "\n");
        char *s = xstrndup(help, len);
        for (char *p = s; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr(" ,.()/-+_", *p))
                        *p = ' ';
        return s;
}

static void add(comp_command *c, const char *word, bool arg, const char *choices, const char *help)
{
        if (known(c, word))
                return;
        c->opts = xrealloc(c->opts, (c->n + 1) * sizeof(*c->opts));
        c->opts[c->n++] = (comp_opt){.word = xstrdup(word),
                                     .arg = arg,
                                     .choices = xstrdup_null(choices),
                                     .help = safe_text(help)};
}

/* "--ssh-key FILE, --ssh-passphrase-file F": each word that starts with '-'. */
static void add_text_row(comp_command *c, const char *text, const char *help)
{
        _cleanup_free_ char *copy = xstrdup(text);
        char *save = NULL;
        for (char *w = strtok_r(copy, " ,|[]=", &save); w; w = strtok_r(NULL, " ,|[]=", &save)) {
                if (w[0] != '-' || strlen(w) < 2)
                        continue;
                /* a value follows when the next word is upper-case (FILE, N) */
                const char *rest = save ? save + strspn(save, " =") : "";
                add(c, w, isupper((unsigned char)rest[0]), NULL, help);
        }
}

static void collect(const cli_command *cmd, void *userdata)
{
        comp_command *c = userdata;
        for (size_t i = 0; i < cmd->n_opts; i++) {
                const cli_opt *o = &cmd->opts[i];
                if (o->kind == CLI_OPT_HEADING)
                        continue;
                if (o->kind == CLI_OPT_TEXT) {
                        add_text_row(c, o->name, o->help);
                        continue;
                }
                if (o->kind == CLI_OPT_HELP) {
                        add(c, "--help", false, NULL, "show this help");
                        add(c, "-h", false, NULL, "show this help");
                        continue;
                }
                bool arg = o->kind == CLI_OPT_STRING || o->kind == CLI_OPT_DURATION ||
                           o->kind == CLI_OPT_CHOICE || o->kind == CLI_OPT_CUSTOM;
                strbuf ch = STRBUF_INIT;
                for (size_t k = 0; o->kind == CLI_OPT_CHOICE && o->choices[k]; k++)
                        sb_printf(&ch, "%s%s", k ? " " : "", o->choices[k]);
                const char *choices = ch.len ? sb_str(&ch) : NULL;
                _cleanup_free_ char *lng = xasprintf("--%s", o->name);
                add(c, lng, arg, choices, o->help);
                if (o->short_name) {
                        char s[3] = {'-', o->short_name, '\0'};
                        add(c, s, arg, choices, o->help);
                }
                sb_release(&ch);
        }
        if (cmd->operands && !c->operands) {
                strbuf w = STRBUF_INIT;
                for (size_t k = 0; cmd->operands[k]; k++)
                        sb_printf(&w, "%s%s", k ? " " : "", cmd->operands[k]);
                c->operands = sb_detach(&w);
        }
}

static const char *const shells[] = {"bash", "zsh", NULL};

/* Every command's options, from its own table. */
static comp_command *collect_all(size_t *ret_n)
{
        size_t n = cli_subcommand_count();
        comp_command *v = xcalloc(n + 1, sizeof(*v));
        for (size_t i = 0; i < n; i++) {
                v[i] = (comp_command){.name = cli_subcommand_name(i),
                                      .summary = cli_subcommand_summary(i)};
                if (streq(v[i].name, "completion")) {
                        v[i].operands = xstrdup("bash zsh");
                        add(&v[i], "--help", false, NULL, "show this help");
                        add(&v[i], "-h", false, NULL, "show this help");
                        continue;
                }
                /*
                 * a verb first, for the commands that take one (snapshot); --help
                 * so that a command that parsed without its table would only
                 * print its help
                 */
                char *argv[] = {(char *)v[i].name, (char *)"save", (char *)"--help", NULL};
                cli_collect(collect, &v[i]);
                (void)cli_subcommand_run(i, 3, argv);
                cli_collect(NULL, NULL);
        }
        *ret_n = n;
        return v;
}

static void release_all(comp_command *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                for (size_t k = 0; k < v[i].n; k++) {
                        free(v[i].opts[k].word);
                        free(v[i].opts[k].choices);
                        free(v[i].opts[k].help);
                }
                free(v[i].opts);
                free(v[i].operands);
        }
        free(v);
}

/* ---- bash ---- */

static void print_bash(const comp_command *v, size_t n, FILE *out)
{
        fputs("# bash completion for gitcd, generated by `gitcd completion bash`\n"
              "# from gitcd's command and option tables.\n"
              "_gitcd()\n"
              "{\n"
              "    local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
              "    local prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
              "    local i cmd=\"\" nargs=0\n"
              "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
              "        case \"${COMP_WORDS[i]}\" in\n"
              "            --log-level) ((i++)) ;;\n"
              "            -*) ;;\n"
              "            *) cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
              "        esac\n"
              "    done\n"
              "    if [[ -z $cmd ]]; then\n"
              "        if [[ $prev == --log-level ]]; then\n"
              "            COMPREPLY=($(compgen -W \"debug info warn error quiet\" -- \"$cur\"))\n"
              "            return\n"
              "        fi\n"
              "        COMPREPLY=($(compgen -W \"",
              out);
        for (size_t i = 0; i < n; i++)
                fprintf(out, "%s ", v[i].name);
        fputs("help --log-level --help --version\" -- \"$cur\"))\n"
              "        return\n"
              "    fi\n"
              "    for ((i = i + 1; i < COMP_CWORD; i++)); do\n"
              "        [[ ${COMP_WORDS[i]} == -* ]] || ((nargs++))\n"
              "    done\n"
              "    local opts=\"\" operands=\"\"\n"
              "    case \"$cmd\" in\n",
              out);
        for (size_t i = 0; i < n; i++) {
                const comp_command *c = &v[i];
                fprintf(out, "    %s)\n        case \"$prev\" in\n", c->name);
                for (size_t k = 0; k < c->n; k++) {
                        const comp_opt *o = &c->opts[k];
                        if (!o->arg)
                                continue;
                        if (o->choices)
                                fprintf(out,
                                        "            %s) COMPREPLY=($(compgen -W \"%s\" -- "
                                        "\"$cur\")); return ;;\n",
                                        o->word, o->choices);
                        else
                                fprintf(out,
                                        "            %s) COMPREPLY=($(compgen -f -- \"$cur\")); "
                                        "return ;;\n",
                                        o->word);
                }
                fputs("        esac\n        opts=\"", out);
                for (size_t k = 0; k < c->n; k++)
                        fprintf(out, "%s%s", k ? " " : "", c->opts[k].word);
                fprintf(out, "\"\n        operands=\"%s\"\n        ;;\n",
                        c->operands ? c->operands : "");
        }
        fputs("    esac\n"
              "    if [[ $cur == -* ]]; then\n"
              "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
              "    elif [[ -n $operands && $nargs -eq 0 ]]; then\n"
              "        COMPREPLY=($(compgen -W \"$operands\" -- \"$cur\"))\n"
              "    else\n"
              "        COMPREPLY=($(compgen -f -- \"$cur\"))\n"
              "    fi\n"
              "}\n"
              "complete -o filenames -F _gitcd gitcd\n",
              out);
}

/* ---- zsh ---- */

static void print_zsh(const comp_command *v, size_t n, FILE *out)
{
        fputs("#compdef gitcd\n"
              "# zsh completion for gitcd, generated by `gitcd completion zsh`\n"
              "# from gitcd's command and option tables.\n"
              "_gitcd() {\n"
              "  local -a cmds\n"
              "  cmds=(\n",
              out);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *s = safe_text(v[i].summary);
                fprintf(out, "    '%s:%s'\n", v[i].name, s ? s : "");
        }
        fputs("  )\n"
              "  if (( CURRENT == 2 )); then\n"
              "    _describe -t commands 'gitcd command' cmds\n"
              "    return\n"
              "  fi\n"
              "  local cmd=$words[2]\n"
              "  shift words\n"
              "  (( CURRENT-- ))\n"
              "  case $cmd in\n",
              out);
        for (size_t i = 0; i < n; i++) {
                const comp_command *c = &v[i];
                fprintf(out, "  %s)\n    _arguments -s", c->name);
                for (size_t k = 0; k < c->n; k++) {
                        const comp_opt *o = &c->opts[k];
                        fprintf(out, " \\\n      '%s[%s]", o->word, o->help ? o->help : "");
                        if (o->arg && o->choices)
                                fprintf(out, ":value:(%s)", o->choices);
                        else if (o->arg)
                                fputs(":value:_files", out);
                        fputc('\'', out);
                }
                if (c->operands)
                        fprintf(out, " \\\n      '1:what:(%s)'", c->operands);
                fputs(" \\\n      '*:file:_files'\n    ;;\n", out);
        }
        fputs("  esac\n"
              "}\n"
              "_gitcd \"$@\"\n",
              out);
}

static const char usage_text[] =
    "usage: gitcd completion bash|zsh\n\n"
    "Print the shell completion script for gitcd's commands and their options,\n"
    "made from the same tables that parse them. Load it with\n"
    "  source <(gitcd completion bash)\n"
    "or install it as /usr/share/bash-completion/completions/gitcd (bash) or\n"
    "/usr/share/zsh/vendor-completions/_gitcd (zsh); the Debian package does.\n\n"
    "Options:\n";

int cmd_completion(int argc, char **argv)
{
        const cli_opt opts[] = {
            {.kind = CLI_OPT_HELP, .help = "show this help"},
        };
        const cli_command cmd = {.prog = "gitcd completion",
                                 .usage = usage_text,
                                 .footer = "",
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .operands = shells};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (argc - optind != 1 || (!streq(argv[optind], "bash") && !streq(argv[optind], "zsh"))) {
                fprintf(stderr, "gitcd completion: give the shell: bash or zsh\n");
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        size_t n = 0;
        comp_command *v = collect_all(&n);
        if (streq(argv[optind], "bash"))
                print_bash(v, n, stdout);
        else
                print_zsh(v, n, stdout);
        release_all(v, n);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "gitcd completion: writing the script failed\n");
                return EXIT_FAIL;
        }
        return EXIT_OK;
}
