/*
 * The commands the hosts target runs on a machine, built for the SSH user
 * of spec.hosts: as root they run as they are; as another user through
 * `sudo -n sh -c '...'`, never prompting. The command strings are checked
 * word for word, then run by a real /bin/sh on this host: the file
 * installer (used instead of SFTP for users other than root) writes its
 * standard input atomically with the mode asked for. For the `sudo` case a
 * stand-in `sudo` on PATH (a simulator: it checks for -n and runs the rest
 * as the current user) stands for the machine's sudo, so this runs without
 * any account but the current one; what is checked is the command gitcd
 * builds and that it works through `sudo -n`. The real sudo, logged in as
 * another user, is tests/targets/test-hosts.c's.
 *
 * Also: `gitcd plan --target hosts`'s lines per machine (the files and
 * commands apply writes and runs), with sudo for other users, and what
 * adoption would read and do on a systemd machine.
 *
 * And the one quoting function every command goes through (ssh_quote):
 * a hostile corpus (every byte but NUL on its own, quotes, escapes,
 * expansions, globs, separators, newlines) quoted into a command line is
 * run by a real /bin/sh, directly and nested in `sudo -n sh -c` as
 * hosts_command builds it for other users, and the argv this test
 * receives back (it re-runs itself as the program, --dump-argv) must be
 * the corpus byte for byte.
 */
#include <dirent.h>
#include <errno.h>
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

#include "api/spec.h"
#include "targets/hosts.h"
#include "targets/ssh.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static etcd_cluster *load(const char *user)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata: {name: demo}\nspec:\n  replicas: 1\n  hosts:\n"
                               "    mode: systemd\n    ssh: {user: %s}\n    machines:\n"
                               "    - address: cp1.example.com\n",
                               user);
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        int k = spec_load_buffer("c.yaml", text, strlen(text), &set, &d);
        if (k < 0)
                diag_print(&d, stderr);
        assert_int_equal(k, 0);
        etcd_cluster *c = set.items[0];
        set.n = 0;
        cluster_set_release(&set);
        diag_list_release(&d);
        free(text);
        return c;
}

/* Run cmd with /bin/sh, data on its standard input, PATH starting with path_dir. */
static int sh(const char *cmd, const char *data, const char *path_dir)
{
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(fds[0], 0);
                close(fds[1]);
                if (path_dir) {
                        char *p = xasprintf("%s:%s", path_dir, getenv("PATH"));
                        setenv("PATH", p, 1);
                }
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        close(fds[0]);
        if (data)
                assert_true(write(fds[1], data, strlen(data)) == (ssize_t)strlen(data));
        close(fds[1]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Run cmd with /bin/sh (PATH starting with path_dir): its standard output in *ret_out. */
static int sh_out(const char *cmd, const char *path_dir, char **ret_out, size_t *ret_len)
{
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(fds[1], 1);
                close(fds[0]);
                if (path_dir) {
                        char *p = xasprintf("%s:%s", path_dir, getenv("PATH"));
                        setenv("PATH", p, 1);
                }
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        close(fds[1]);
        strbuf sb = STRBUF_INIT;
        char buf[4096];
        ssize_t n;
        while ((n = read(fds[0], buf, sizeof(buf))) > 0)
                sb_append_len(&sb, buf, (size_t)n);
        close(fds[0]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        *ret_len = sb.len;
        *ret_out = sb_detach(&sb);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A stand-in sudo in dir/bin that insists on -n and runs the rest as this user. */
static char *stand_in_sudo(const char *dir)
{
        char *bin = xasprintf("%s/bin", dir);
        assert_int_equal(mkdir_p(bin, 0755), 0);
        _cleanup_free_ char *sudo = xasprintf("%s/sudo", bin);
        const char *script = "#!/bin/sh\n[ \"$1\" = -n ] || { echo 'sudo: a password is "
                             "required' >&2; exit 1; }\nshift\nexec \"$@\"\n";
        assert_int_equal(write_file_atomic(sudo, script, strlen(script), 0755), 0);
        return bin;
}

/* The words the shell handed to this program (--dump-argv), each NUL-terminated, equal corpus. */
static void assert_argv_back(const char *out, size_t len, char *const *corpus, size_t n)
{
        size_t i = 0;
        for (const char *p = out; p < out + len; p += strlen(p) + 1, i++) {
                if (i >= n)
                        fail_msg("more words came back than %zu", n);
                if (!streq(p, corpus[i]))
                        fail_msg("word %zu came back as \"%s\", not \"%s\"", i, p, corpus[i]);
        }
        assert_int_equal(i, n);
}

static void test_shell_quoting_is_exact(void **state)
{
        (void)state;
        static const char *const words[] = {
            "'",      "''",    "'\\''", "\\",  "\"",       "\"'\"",   "$(id)", "`id`", "$HOME",
            "${IFS}", "$1",    "$@",    "$$",  ";",        "&&",      "|",     "||",   ">/tmp/x",
            "<",      "&",     "(",     ")",   "{",        "}",       "*",     "?",    "[a]",
            "~",      "~root", "#",     "!",   " ",        "  a  b ", "\t",    "\n",   "a\nb",
            "",       "-n",    "--",    "-",   "%",        "%%",      "=",     "a=b",  "\xc3\xa9",
            "\x01",   "\x7f",  "\xff",  "\\n", "'\\''\\'", "x'\n'y",  "\r\n",
        };
        size_t n = 0;
        char **corpus = xcalloc(ARRAY_SIZE(words) + 256, sizeof(char *));
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                corpus[n++] = xstrdup(words[i]);
        for (int b = 1; b < 256; b++)
                corpus[n++] = xasprintf("%c", b);

        char self[4096];
        ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
        assert_true(sl > 0);
        self[sl] = '\0';
        strbuf cmd = STRBUF_INIT;
        _cleanup_free_ char *qself = ssh_quote(self);
        sb_printf(&cmd, "exec %s --dump-argv", qself);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *q = ssh_quote(corpus[i]);
                sb_printf(&cmd, " %s", q);
        }

        /* root: the command as it is */
        _cleanup_(etcd_cluster_freep) etcd_cluster *root = load("root");
        _cleanup_free_ char *as_root = hosts_command(&root->hosts.items[0], sb_str(&cmd));
        char *out = NULL;
        size_t len = 0;
        assert_int_equal(sh_out(as_root, NULL, &out, &len), 0);
        assert_argv_back(out, len, corpus, n);
        free(out);

        /* another user: quoted once more, into `sudo -n sh -c` */
        _cleanup_free_ char *dir = harness_tmpdir("hosts-quoting");
        _cleanup_free_ char *bin = stand_in_sudo(dir);
        _cleanup_(etcd_cluster_freep) etcd_cluster *other = load("deploy");
        _cleanup_free_ char *via_sudo = hosts_command(&other->hosts.items[0], sb_str(&cmd));
        assert_true(strneq(via_sudo, "sudo -n sh -c '", 15));
        assert_int_equal(sh_out(via_sudo, bin, &out, &len), 0);
        assert_argv_back(out, len, corpus, n);
        free(out);

        sb_release(&cmd);
        strv_free(corpus);
        (void)rm_rf(dir);
}

static void test_root_runs_commands_as_they_are(void **state)
{
        (void)state;
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = load("root");
        const host_spec *h = &c->hosts.items[0];
        _cleanup_free_ char *cmd =
            hosts_command(h, "systemctl restart 'etcd-default-demo.service'");
        assert_string_equal(cmd, "systemctl restart 'etcd-default-demo.service'");
}

static void test_other_users_go_through_sudo_n(void **state)
{
        (void)state;
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = load("deploy");
        const host_spec *h = &c->hosts.items[0];
        _cleanup_free_ char *cmd =
            hosts_command(h, "systemctl restart 'etcd-default-demo.service'");
        /* one shell under sudo, the command quoted once more; -n: never a password prompt */
        assert_string_equal(
            cmd, "sudo -n sh -c 'systemctl restart '\\''etcd-default-demo.service'\\'''");
        _cleanup_free_ char *inst = hosts_install_command(h, "/etc/etcd/pki/tls.key", 0600);
        assert_true(strneq(inst, "sudo -n sh -c ", 14));
        assert_non_null(strstr(inst, "umask 077"));
        assert_non_null(strstr(inst, "chmod 0600"));
        assert_non_null(strstr(inst, "mktemp '\\''/etc/etcd/pki/.tls.key.gitcd-XXXXXXXXXX'\\''"));
}

/* How many entries of dir start with prefix. */
static int count_entries(const char *dir, const char *prefix)
{
        DIR *d = opendir(dir);
        assert_non_null(d);
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
                n += strneq(e->d_name, prefix, strlen(prefix));
        closedir(d);
        return n;
}

static void test_installer_writes_atomically(void **state)
{
        (void)state;
        _cleanup_free_ char *dir = harness_tmpdir("hosts-commands");
        _cleanup_free_ char *path = xasprintf("%s/unit file.service", dir);

        /* root: the command itself */
        _cleanup_(etcd_cluster_freep) etcd_cluster *root = load("root");
        _cleanup_free_ char *cmd = hosts_install_command(&root->hosts.items[0], path, 0644);
        assert_int_equal(sh(cmd, "first\n", NULL), 0);
        _cleanup_free_ char *got = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 1024, &got, &len), 0);
        assert_string_equal(got, "first\n");
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);

        /* another user: through `sudo -n` (the stand-in insists on -n) */
        _cleanup_free_ char *bin = xasprintf("%s/bin", dir);
        assert_int_equal(mkdir_p(bin, 0755), 0);
        _cleanup_free_ char *sudo = xasprintf("%s/sudo", bin);
        const char *script = "#!/bin/sh\n[ \"$1\" = -n ] || { echo 'sudo: a password is "
                             "required' >&2; exit 1; }\nshift\nexec \"$@\"\n";
        assert_int_equal(write_file_atomic(sudo, script, strlen(script), 0755), 0);
        _cleanup_(etcd_cluster_freep) etcd_cluster *other = load("deploy");
        _cleanup_free_ char *key = xasprintf("%s/tls.key", dir);
        _cleanup_free_ char *cmd2 = hosts_install_command(&other->hosts.items[0], key, 0600);
        /* a symbolic link planted at the temporary name gitcd used to write to */
        _cleanup_free_ char *victim = xasprintf("%s/victim", dir);
        assert_int_equal(write_file_atomic(victim, "precious", 8, 0644), 0);
        _cleanup_free_ char *planted = xasprintf("%s/.tls.key.gitcd-tmp", dir);
        assert_int_equal(symlink(victim, planted), 0);
        assert_int_equal(sh(cmd2, "secret\n", bin), 0);
        free(got);
        got = NULL;
        assert_int_equal(read_file(key, 1024, &got, &len), 0);
        assert_string_equal(got, "secret\n");
        assert_int_equal(stat(key, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        /* the link's target is untouched, and no temporary file is left behind */
        free(got);
        got = NULL;
        assert_int_equal(read_file(victim, 1024, &got, &len), 0);
        assert_string_equal(got, "precious");
        assert_int_equal(count_entries(dir, ".tls.key.gitcd-"), 1); /* the planted link */

        /* a failed write leaves the old file whole and no temporary */
        _cleanup_free_ char *bad = xasprintf("%s/missing/tls.key", dir);
        _cleanup_free_ char *cmd3 = hosts_install_command(&other->hosts.items[0], bad, 0600);
        assert_int_not_equal(sh(cmd3, "x", bin), 0);
        /* a rename that fails (an mv that refuses): the temporary is removed */
        _cleanup_free_ char *mv = xasprintf("%s/mv", bin);
        assert_int_equal(write_file_atomic(mv, "#!/bin/sh\nexit 1\n", 17, 0755), 0);
        _cleanup_free_ char *cmd4 = hosts_install_command(&other->hosts.items[0], key, 0600);
        assert_int_not_equal(sh(cmd4, "other\n", bin), 0);
        free(got);
        got = NULL;
        assert_int_equal(read_file(key, 1024, &got, &len), 0);
        assert_string_equal(got, "secret\n");
        assert_int_equal(count_entries(dir, ".tls.key.gitcd-"), 1);
        (void)rm_rf(dir);
}

static void test_plan_lines_per_machine(void **state)
{
        (void)state;
        _cleanup_(etcd_cluster_freep) etcd_cluster *c = load("deploy");
        char **l = hosts_machine_effects(c, 0);
        size_t n = 0;
        bool unit = false, systemctl = false, marker = false;
        for (; l[n]; n++) {
                unit = unit || strstr(l[n], "/etc/systemd/system/etcd-default-demo.service");
                systemctl = systemctl || (strstr(l[n], "systemctl daemon-reload") &&
                                          strstr(l[n], "through sudo -n"));
                marker = marker || strstr(l[n], "/var/lib/etcd/default-demo/gitcd-member");
        }
        assert_true(unit && systemctl && marker);
        assert_non_null(strstr(l[0], "deploy@cp1.example.com port 22"));
        strv_free(l);

        /* a cluster with no records: what adoption reads and does on a systemd machine */
        _cleanup_free_ char *a = hosts_machine_adoption(c, 0);
        assert_non_null(strstr(a, "etcd.service as `systemctl cat` shows it"));
        assert_non_null(strstr(a, "EnvironmentFile="));
        assert_non_null(strstr(a, "systemctl disable --now etcd.service (through sudo -n)"));
        assert_non_null(strstr(a, "as demo-0"));
        assert_null(strstr(a, "not supported"));
}

int main(int argc, char **argv)
{
        if (argc >= 2 && streq(argv[1], "--dump-argv")) {
                for (int i = 2; i < argc; i++)
                        if (fwrite(argv[i], 1, strlen(argv[i]) + 1, stdout) != strlen(argv[i]) + 1)
                                return 1;
                return fflush(stdout) == 0 ? 0 : 1;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_shell_quoting_is_exact),
            cmocka_unit_test(test_root_runs_commands_as_they_are),
            cmocka_unit_test(test_other_users_go_through_sudo_n),
            cmocka_unit_test(test_installer_writes_atomically),
            cmocka_unit_test(test_plan_lines_per_machine),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
