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
 * another user, is tests/hosts/test-target.c's.
 *
 * Also: `gitcd plan --target hosts`'s lines per machine (the files and
 * commands apply writes and runs), with sudo for other users, and what
 * adoption would read and do on a systemd machine.
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
#include "tests/harness/harness.h"
#include "util/fs.h"
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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_root_runs_commands_as_they_are),
            cmocka_unit_test(test_other_users_go_through_sudo_n),
            cmocka_unit_test(test_installer_writes_atomically),
            cmocka_unit_test(test_plan_lines_per_machine),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
