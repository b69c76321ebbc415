/*
 * gitcd's own systemd unit (targets/hosts-unit.c hosts_unit_render) read
 * back by real systemd: for a corpus of hostile values (quotes, '\', '%',
 * '$', ';', backticks, spaces, '=', C escapes written out, UTF-8, words
 * systemd gives a meaning to at the start of a command) in every field the
 * unit carries (the command's words as render_member_command writes them,
 * the program's path, the member and cluster names in Description=),
 * `systemd-analyze verify` must accept the unit, and `systemd --test`'s dump
 * of it must show exactly the argv gitcd meant as its one command (no other
 * Exec*= line) and the description. The same text through gitcd's own unit
 * reader (hosts_unit_parse, used for adoption) gives the same argv. A value
 * with a control character is refused and no text is written.
 *
 * systemd 252 refuses --test as root, so as root it runs as nobody (uid
 * 65534, through setpriv) on a folder nobody can read; skipped (77) without
 * systemd, setpriv, or a folder nobody reaches.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "targets/hosts-adopt.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define SYSTEMD "/lib/systemd/systemd"
#define SETPRIV "/usr/bin/setpriv"
#define NOBODY  "65534"

/* Values with no control character: each must come back from systemd exactly. */
static const char *const hostile[] = {
    "\\",      "'",     "\"",
    "%",       "%%",    "%n",
    "%i",      "%H",    "$",
    "$$",      "$$$",   "${HOME}",
    "$HOME",   "${",    ";",
    " ; ",     "\\;",   "`id`",
    "$(id)",   "a b",   "  lead",
    "trail  ", "=",     "a=b=c",
    "\\n",     "\\x41", "\\101",
    "\\u00e9", "#",     "!",
    "!!",      "&&",    "|",
    "<>",      "()",    "{}",
    "*?[",     "~",     "\xc3\xa9t\xc3\xa9",
    "-",       "@",     ":",
    "+",       "",      "x\\",
    "'\"'",    "\"\"",  "it's \"odd\" \\ 100% $$ ;`",
};

/* Values with a control character: the unit is refused. */
static const char *const controls[] = {
    "\n", "a\nExecStartPre=/bin/sh -c id", "\r", "\t", "\x01", "\x1b[31m", "\x7f", "a\\\n",
};

static char *lab;     /* the folder the units are written to (nobody can read it) */
static char *program; /* an executable whose path needs quoting */
static bool as_nobody;

/* Run argv, its standard output in *ret_out (may be NULL); the exit status, or -1. */
static int run(char *const argv[], char **ret_out)
{
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(fds[1], 1);
                dup2(null, 2);
                close(fds[0]);
                if (chdir("/") < 0)
                        _exit(127);
                execv(argv[0], argv);
                _exit(127);
        }
        close(fds[1]);
        strbuf sb = STRBUF_INIT;
        char buf[65536];
        ssize_t n;
        while ((n = read(fds[0], buf, sizeof(buf))) > 0)
                sb_append_len(&sb, buf, (size_t)n);
        close(fds[0]);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (ret_out)
                *ret_out = sb_detach(&sb);
        else
                sb_release(&sb);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* argv for running systemd's own tools as nobody when this is root. */
static void push(char **v, size_t *n, const char *s)
{
        v[(*n)++] = (char *)s;
        v[*n] = NULL;
}

static int setup(void **state)
{
        (void)state;
        if (access(SYSTEMD, X_OK) < 0 || access("/usr/bin/systemd-analyze", X_OK) < 0) {
                fprintf(stderr, "skip: no systemd\n");
                exit(77);
        }
        as_nobody = geteuid() == 0;
        if (as_nobody && access(SETPRIV, X_OK) < 0) {
                fprintf(stderr, "skip: root without setpriv (systemd --test refuses root)\n");
                exit(77);
        }
        lab = harness_tmpdir("unit-systemd");
        assert_non_null(lab);
        assert_int_equal(chmod(lab, 0755), 0);
        /* the program's folder needs quoting in a unit; systemd checks it is executable */
        _cleanup_free_ char *dir = xasprintf("%s/b i%%n;`=@+", lab);
        assert_int_equal(mkdir(dir, 0755), 0);
        program = xasprintf("%s/e t c", dir);
        assert_int_equal(write_file_atomic(program, "#!/bin/sh\n", 10, 0755), 0);
        assert_int_equal(chmod(program, 0755), 0);
        if (as_nobody) {
                char *v[16];
                size_t n = 0;
                push(v, &n, SETPRIV);
                push(v, &n, "--reuid=" NOBODY);
                push(v, &n, "--regid=" NOBODY);
                push(v, &n, "--clear-groups");
                push(v, &n, "/usr/bin/test");
                push(v, &n, "-x");
                push(v, &n, program);
                if (run(v, NULL) != 0) {
                        fprintf(stderr, "skip: nobody cannot reach %s (a private TMPDIR)\n", lab);
                        exit(77);
                }
        }
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        if (lab)
                (void)rm_rf(lab);
        free(lab);
        free(program);
        return 0;
}

/*
 * One word of systemd's "Command Line:" (quote_command_line): bare, or in
 * double quotes with C escapes and '\' before '"', '\', '`' and '$'. The
 * unescaped word in *ret, p advanced; -EINVAL when malformed.
 */
static int dump_word(const char **pp, char **ret)
{
        const char *p = *pp;
        strbuf w = STRBUF_INIT;
        if (*p != '"') {
                while (*p && *p != ' ')
                        sb_appendc(&w, *p++);
                *pp = p;
                *ret = sb_detach(&w);
                return 0;
        }
        for (p++; *p != '"'; p++) {
                if (!*p)
                        goto bad;
                if (*p != '\\') {
                        sb_appendc(&w, *p);
                        continue;
                }
                p++;
                static const char from[] = "abfnrtv\\\"'`$", to[] = "\a\b\f\n\r\t\v\\\"'`$";
                const char *c = *p ? strchr(from, *p) : NULL;
                if (c) {
                        sb_appendc(&w, to[c - from]);
                } else if (*p == 'x' && p[1] && p[2]) {
                        char hex[3] = {p[1], p[2], 0};
                        sb_appendc(&w, (char)strtol(hex, NULL, 16));
                        p += 2;
                } else {
                        goto bad;
                }
        }
        *pp = p + 1;
        *ret = sb_detach(&w);
        return 0;
bad:
        sb_release(&w);
        return -EINVAL;
}

/*
 * The argv of a "Command Line:" as the process gets it: systemd replaces
 * variables when it runs the command, so "$$" is still "$$" in the dump
 * and stands for '$'; a '$' alone would be a variable, which gitcd never
 * means (-EINVAL).
 */
static int parse_command_line(const char *line, char ***ret, size_t *ret_n)
{
        char **v = xcalloc(1, sizeof(char *));
        size_t n = 0;
        for (const char *p = line; *p;) {
                char *w = NULL;
                if (dump_word(&p, &w) < 0)
                        goto bad;
                strbuf out = STRBUF_INIT;
                for (const char *q = w; *q; q++) {
                        if (*q == '$' && q[1] != '$') {
                                free(w);
                                sb_release(&out);
                                goto bad;
                        }
                        sb_appendc(&out, *q);
                        q += *q == '$';
                }
                free(w);
                v = xrealloc(v, (n + 2) * sizeof(char *));
                v[n++] = sb_detach(&out);
                v[n] = NULL;
                if (*p == ' ')
                        p++;
                else if (*p)
                        goto bad;
        }
        *ret = v;
        *ret_n = n;
        return 0;
bad:
        strv_free(v);
        return -EINVAL;
}

/* The value after "key" on its own line of the unit's section of the dump; NULL when none. */
static char *dump_value(const char *section, const char *key)
{
        for (const char *l = section; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
                const char *s = l + strspn(l, "\t ");
                if (strneq(s, key, strlen(key)))
                        return xstrndup(s + strlen(key), strcspn(s + strlen(key), "\n"));
        }
        return NULL;
}

/*
 * Write the unit for meta and argv, have systemd verify and dump it, and
 * check systemd's command and description, and gitcd's reader's command.
 */
static void check_through_systemd(const char *name, const hosts_unit_meta *m, char *const *argv)
{
        _cleanup_free_ char *text = NULL, *why = NULL;
        if (hosts_unit_render(m, argv, &text, &why) < 0)
                fail_msg("%s: refused: %s", name, why);
        _cleanup_free_ char *unit = xasprintf("%s.service", name);
        _cleanup_free_ char *path = xasprintf("%s/%s", lab, unit);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
        assert_int_equal(chmod(path, 0644), 0);

        char *verify[] = {"/usr/bin/systemd-analyze", "verify", "--man=no", path, NULL};
        if (run(verify, NULL) != 0)
                fail_msg("systemd-analyze verify refuses %s:\n%s", path, text);

        _cleanup_free_ char *unit_path = xasprintf("SYSTEMD_UNIT_PATH=%s:/lib/systemd/system", lab);
        _cleanup_free_ char *unit_arg = xasprintf("--unit=%s", unit);
        char *v[20];
        size_t n = 0;
        if (as_nobody) {
                push(v, &n, SETPRIV);
                push(v, &n, "--reuid=" NOBODY);
                push(v, &n, "--regid=" NOBODY);
                push(v, &n, "--clear-groups");
        }
        push(v, &n, "/usr/bin/env");
        push(v, &n, unit_path);
        push(v, &n, SYSTEMD);
        push(v, &n, "--test");
        push(v, &n, "--system");
        push(v, &n, unit_arg);
        push(v, &n, "--no-pager");
        _cleanup_free_ char *dump = NULL;
        (void)run(v, &dump);
        _cleanup_free_ char *head = xasprintf("-> Unit %s:\n", unit);
        const char *sec = strstr(dump, head);
        if (!sec)
                fail_msg("systemd did not dump %s:\n%s", unit, text);
        sec += strlen(head);
        const char *end = strstr(sec, "-> Unit ");
        _cleanup_free_ char *section = end ? xstrndup(sec, (size_t)(end - sec)) : xstrdup(sec);

        /* one command, ExecStart=, and nothing else that systemd would run */
        size_t execs = 0, lines = 0;
        for (const char *l = section; (l = strstr(l, "-> Exec")); l++)
                if (!strneq(l, "-> ExecStart:", 13))
                        fail_msg("%s: systemd reads another command: %.40s\n%s", unit, l, text);
                else
                        execs++;
        for (const char *l = section; (l = strstr(l, "Command Line: ")); l++)
                lines++;
        assert_int_equal(execs, 1);
        assert_int_equal(lines, 1);

        _cleanup_free_ char *cmd = dump_value(section, "Command Line: ");
        assert_non_null(cmd);
        char **got = NULL;
        size_t n_got = 0;
        if (parse_command_line(cmd, &got, &n_got) < 0)
                fail_msg("%s: systemd's command line does not parse (a lone '$'?): %s", unit, cmd);
        size_t n_argv = 0;
        while (argv[n_argv])
                n_argv++;
        if (n_got != n_argv)
                fail_msg("%s: systemd runs %zu words, gitcd meant %zu: %s", unit, n_got, n_argv,
                         cmd);
        for (size_t i = 0; i < n_argv; i++)
                if (!streq(got[i], argv[i]))
                        fail_msg("%s: word %zu: systemd runs \"%s\", gitcd meant \"%s\"", unit, i,
                                 got[i], argv[i]);
        strv_free(got);

        _cleanup_free_ char *want_desc =
            xasprintf("etcd member %s of %s (managed by gitcd)", m->member, m->cluster);
        _cleanup_free_ char *desc = dump_value(section, "Description: ");
        if (!streq_ptr(desc, want_desc))
                fail_msg("%s: systemd's description \"%s\", gitcd meant \"%s\"", unit,
                         desc ? desc : "(none)", want_desc);

        /* gitcd's own reader (adoption) reads the same command */
        hosts_unit u = {0};
        diag_list d = DIAG_LIST_INIT;
        hosts_unit_context ctx = {.unit_name = unit, .hostname = "host"};
        if (hosts_unit_parse(unit, text, strlen(text), &ctx, &u, &d) < 0)
                fail_msg("%s: gitcd's reader refuses its own unit: %s", unit,
                         d.n ? d.items[0].message : "");
        char **mine = NULL, *rwhy = NULL;
        assert_int_equal(hosts_unit_command(&u, NULL, 0, &mine, &rwhy), 0);
        for (size_t i = 0; i < n_argv; i++)
                if (!streq_ptr(mine[i], argv[i]))
                        fail_msg("%s: word %zu: gitcd's reader reads \"%s\", gitcd meant \"%s\"",
                                 unit, i, mine[i] ? mine[i] : "(none)", argv[i]);
        assert_null(mine[n_argv]);
        strv_free(mine);
        hosts_unit_release(&u);
        diag_list_release(&d);
        (void)unlink(path);
}

/* The words render_member_command writes, each carrying v. */
static char **command_with(const char *v)
{
        char **argv = xcalloc(12, sizeof(char *));
        size_t n = 0;
        argv[n++] = xstrdup(program);
        argv[n++] = xasprintf("--name=%s", v);
        argv[n++] = xasprintf("--data-dir=/var/lib/etcd/%s", v);
        argv[n++] = xasprintf("--advertise-client-urls=http://%s:2379", v);
        argv[n++] = xasprintf("--initial-cluster=%s=http://%s:2380", v, v);
        argv[n++] = xasprintf("--initial-cluster-token=%s", v);
        argv[n++] = xasprintf("--cert-file=/etc/etcd/%s/pki/client/tls.crt", v);
        argv[n++] = xasprintf("--log-level=%s", v);
        argv[n++] = xasprintf("--%s", v);
        argv[n++] = xstrdup(v);
        argv[n] = NULL;
        return argv;
}

static void test_hostile_values_come_back_exactly(void **state)
{
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(hostile); i++) {
                _cleanup_(strv_freep) char **argv = command_with(hostile[i]);
                _cleanup_free_ char *member = xasprintf("m%s", hostile[i]);
                _cleanup_free_ char *cluster = xasprintf("ns/%s", hostile[i]);
                hosts_unit_meta m = {.member = member, .config_hash = "abc", .cluster = cluster};
                _cleanup_free_ char *name = xasprintf("gitcd-syntax-%zu", i);
                check_through_systemd(name, &m, argv);
        }
        /* every hostile value in one command, as one unit */
        char **all = xcalloc(ARRAY_SIZE(hostile) + 2, sizeof(char *));
        all[0] = xstrdup(program);
        for (size_t i = 0; i < ARRAY_SIZE(hostile); i++)
                all[i + 1] = xstrdup(hostile[i]);
        hosts_unit_meta m = {.member = "demo-0", .config_hash = NULL, .cluster = "default/demo"};
        check_through_systemd("gitcd-syntax-all", &m, all);
        strv_free(all);
}

static void refused(const hosts_unit_meta *m, char *const *argv)
{
        char *text = NULL, *why = NULL;
        assert_int_equal(hosts_unit_render(m, argv, &text, &why), -EINVAL);
        assert_null(text);
        assert_non_null(why);
        free(why);
}

static void test_control_characters_are_refused(void **state)
{
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(controls); i++) {
                _cleanup_(strv_freep) char **argv = command_with(controls[i]);
                hosts_unit_meta ok = {.member = "demo-0", .config_hash = "h", .cluster = "d/demo"};
                refused(&ok, argv);
                _cleanup_(strv_freep) char **plain = command_with("x");
                hosts_unit_meta m1 = {.member = controls[i], .config_hash = "h", .cluster = "d/x"};
                hosts_unit_meta m2 = {
                    .member = "demo-0", .config_hash = controls[i], .cluster = "d"};
                hosts_unit_meta m3 = {
                    .member = "demo-0", .config_hash = "h", .cluster = controls[i]};
                refused(&m1, plain);
                refused(&m2, plain);
                refused(&m3, plain);
                assert_null(hosts_unit_word(controls[i]));
        }
        /* a program path systemd would refuse, or run without replacing its '$' */
        static const char *const programs[] = {
            "etcd", "/usr/bin/e'tcd", "/usr/bin/e\"tcd", "/usr/bin/e\\tcd", "/usr/bin/$ETCD", ""};
        for (size_t i = 0; i < ARRAY_SIZE(programs); i++) {
                char *argv[] = {(char *)programs[i], "--name=x", NULL};
                hosts_unit_meta m = {.member = "demo-0", .config_hash = "h", .cluster = "d/demo"};
                refused(&m, argv);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hostile_values_come_back_exactly),
            cmocka_unit_test(test_control_characters_are_refused),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
