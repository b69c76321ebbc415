/*
 * gitcd's entry point: global flags, then dispatch to a subcommand.
 *
 * Two things happen here for every subcommand. First, secrets on the
 * command line: any process on the host can read /proc/PID/cmdline, so a
 * password in `--user NAME:PASS` or in a URL (`https://user:pass@host/...`)
 * is copied for the subcommand's parser and then overwritten in place with
 * '*', and a warning says it was visible until then; environment variables
 * and files are the documented way. Second, the audit log: when an audit
 * event could not be written during the command, the command exits 1 even
 * if everything else went well (state_audit_append() counts the failures).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "state/state.h"
#include "util/http.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/xalloc.h"

struct command {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
};

static const struct command commands[] = {
    {"validate", cmd_validate, "check EtcdCluster files and print every problem"},
    {"render", cmd_render, "print the Kubernetes objects for EtcdCluster files"},
    {"plan", cmd_plan, "show what applying a source would change, without touching anything"},
    {"diff", cmd_diff, "show what changed between two revisions of a source, and its steps"},
    {"apply", cmd_apply, "reconcile the clusters in a source until they converge"},
    {"run", cmd_run, "run the reconciler as a daemon"},
    {"etcd", cmd_etcd, "talk to an etcd cluster directly (members, status, snapshot, ...)"},
    {"log", cmd_log, "show the audit log: who changed what, when, and what it did"},
    {"status", cmd_status, "show clusters, members and conditions from the state store"},
    {"snapshot", cmd_snapshot, "take, list and restore snapshots of a cluster"},
    {"recover", cmd_recover, "recover a cluster that lost quorum, from a member or a snapshot"},
    {"repair", cmd_repair, "replace a member whose data differs from the majority's, or recheck"},
    {"suspend", cmd_suspend, "hold every voluntary step of a cluster until gitcd resume"},
    {"resume", cmd_resume, "lift a suspension gitcd suspend recorded"},
    {"debug", cmd_debug, "collect an incident bundle of a cluster (gitcd debug bundle)"},
    {"completion", cmd_completion, "print the bash or zsh completion script"},
};

size_t cli_subcommand_count(void)
{
        return ARRAY_SIZE(commands);
}

const char *cli_subcommand_name(size_t i)
{
        return i < ARRAY_SIZE(commands) ? commands[i].name : NULL;
}

const char *cli_subcommand_summary(size_t i)
{
        return i < ARRAY_SIZE(commands) ? commands[i].summary : NULL;
}

int cli_subcommand_run(size_t i, int argc, char **argv)
{
        assert(i < ARRAY_SIZE(commands));
        return commands[i].run(argc, argv);
}

static void usage(FILE *out)
{
        fprintf(out, "usage: gitcd [--log-level LEVEL] <command> [options]\n\n"
                     "A declarative GitOps reconciler for etcd clusters.\n\n"
                     "Commands:\n");
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
        fprintf(out,
                "\nGlobal options:\n"
                "  --log-level LEVEL  debug, info, warn, error or quiet (also GITCD_LOG_LEVEL)\n"
                "  -h, --help         show this help; `gitcd <command> --help` for a command\n"
                "  --version          print the version\n\n"
                "Passwords and tokens belong in environment variables or files (see each\n"
                "command's --help), not on the command line, where every user of the host\n"
                "can read them; gitcd blanks them out of its command line at start-up.\n");
}

/* ---- secrets on the command line ---- */

/* Overwrite the password of every URL in s ("scheme://user:PASS@host", also in a
 * comma-separated list) with '*'; returns how many there were. */
static int mask_url_passwords(char *s)
{
        int n = 0;
        for (char *p = strstr(s, "://"); p; p = strstr(p, "://")) {
                char *auth = p + 3;
                size_t len = strcspn(auth, "/,?#");
                char *at = NULL;
                for (size_t i = 0; i < len; i++)
                        if (auth[i] == '@')
                                at = auth + i; /* the last '@' ends the user info */
                char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
                if (colon && colon + 1 < at) {
                        memset(colon + 1, '*', (size_t)(at - colon - 1));
                        n++;
                }
                p = auth + len;
        }
        return n;
}

/* True for a long option that getopt_long would take as etcd's --user (an
 * abbreviation included): "--u", "--us", "--use", "--user", with or without "=". */
static bool is_user_flag(const char *arg, bool etcd)
{
        if (!etcd || !strneq(arg, "--u", 3))
                return false;
        size_t n = strcspn(arg + 2, "=");
        return n <= 4 && strneq(arg + 2, "user", n);
}

typedef struct argv_copies {
        char **v;
        size_t n;
} argv_copies;

/* Give the parser a private copy of argv[i] and blank the original with mask. */
static void replace_arg(char **argv, int i, argv_copies *copies, const char *masked_copy)
{
        char *orig = argv[i];
        assert(orig && masked_copy && strlen(orig) == strlen(masked_copy));
        copies->v = xrealloc(copies->v, (copies->n + 1) * sizeof(char *));
        copies->v[copies->n++] = xstrdup(orig);
        /* the original bytes are what /proc/PID/cmdline shows */
        memcpy(orig, masked_copy, strlen(masked_copy));
        argv[i] = copies->v[copies->n - 1];
}

/*
 * Find the secrets in argv[first..argc) of the subcommand cmd and blank
 * them out in place; the parser sees copies (argv's pointers are moved to
 * them). Warns once per kind of secret found.
 */
static void wipe_secrets(const char *cmd, int first, int argc, char **argv, argv_copies *copies)
{
        bool etcd = streq(cmd, "etcd");
        bool user_pw = false, url_pw = false;
        for (int i = first; i < argc; i++) {
                _cleanup_free_ char *masked = xstrdup(argv[i]);
                bool changed = mask_url_passwords(masked) > 0;
                url_pw |= changed;
                /* --user NAME:PASS, --user=NAME:PASS */
                char *value = NULL;
                if (i > first && is_user_flag(argv[i - 1], etcd) && !strchr(argv[i - 1], '='))
                        value = masked;
                else if (is_user_flag(argv[i], etcd) && strchr(masked, '='))
                        value = strchr(masked, '=') + 1;
                char *colon = value ? strchr(value, ':') : NULL;
                if (colon && colon[1]) {
                        memset(colon + 1, '*', strlen(colon + 1));
                        changed = user_pw = true;
                }
                if (changed)
                        replace_arg(argv, i, copies, masked);
        }
        if (user_pw)
                log_warn("the password given with --user was readable by every user of this "
                         "host in the process list until now; set $GITCD_ETCD_PASSWORD or use "
                         "--password-file FILE instead");
        if (url_pw)
                log_warn("the password in a URL on the command line was readable by every user "
                         "of this host in the process list until now; use --token-file FILE or "
                         "--token-env VAR for sources, --user NAME with $GITCD_ETCD_PASSWORD "
                         "for etcd");
}

static void copies_release(argv_copies *copies)
{
        for (size_t i = 0; i < copies->n; i++) {
                explicit_bzero(copies->v[i], strlen(copies->v[i]));
                free(copies->v[i]);
        }
        free(copies->v);
        *copies = (argv_copies){0};
}

/* The command's exit status, made 1 when an audit event was lost on the way. */
static int check_audit(int r)
{
        unsigned lost = state_audit_failures_in_process();
        if (lost == 0)
                return r;
        log_error("%u audit event%s could not be written (`gitcd status` shows the last "
                  "reason)",
                  lost, lost == 1 ? "" : "s");
        return r == EXIT_OK || r == EXIT_CHANGES ? EXIT_FAIL : r;
}

int main(int argc, char **argv)
{
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i];
                if (streq(a, "-h") || streq(a, "--help")) {
                        usage(stdout);
                        return EXIT_OK;
                } else if (streq(a, "--version")) {
                        printf("gitcd %s\n", GITCD_VERSION);
                        return EXIT_OK;
                } else if (streq(a, "--log-level") || strneq(a, "--log-level=", 12)) {
                        const char *v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : NULL);
                        enum log_level l;
                        if (log_level_from_string(v, &l) < 0) {
                                fprintf(stderr, "gitcd: --log-level takes debug, info, warn, "
                                                "error or quiet\n");
                                return EXIT_USAGE;
                        }
                        log_set_level(l);
                } else {
                        fprintf(stderr, "gitcd: unknown option '%s'\n", a);
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (i >= argc) {
                usage(stderr);
                return EXIT_USAGE;
        }
        /* libcurl (and through it OpenSSL and libssh2) set up before a command starts a thread */
        if (http_global_init() < 0) {
                fprintf(stderr, "gitcd: libcurl could not be set up\n");
                return EXIT_FAIL;
        }
        for (size_t c = 0; c < ARRAY_SIZE(commands); c++)
                if (streq(argv[i], commands[c].name)) {
                        argv_copies copies = {0};
                        wipe_secrets(argv[i], i + 1, argc, argv, &copies);
                        /* every command but the daemon opens the state, works and exits */
                        state_set_short_lived(commands[c].run != cmd_run);
                        int r = commands[c].run(argc - i, argv + i);
                        copies_release(&copies);
                        return check_audit(r);
                }
        if (streq(argv[i], "help")) {
                usage(stdout);
                return EXIT_OK;
        }
        fprintf(stderr, "gitcd: unknown command '%s'\n", argv[i]);
        usage(stderr);
        return EXIT_USAGE;
}
