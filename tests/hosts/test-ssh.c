/*
 * The hosts target's SSH transport (targets/ssh.c) against real sshd
 * machines on 127.0.0.2 and 127.0.0.3 (tests/harness/sshd.h): commands
 * with their output and exit status, atomic uploads with the requested
 * mode, reading files back, strict host-key checks (a wrong or unknown
 * key refuses the machine and nothing is written), key-file and ssh-agent
 * credentials, and the timeouts that keep a down or slow machine from
 * blocking: a machine that accepts TCP but never speaks SSH, a command
 * that never ends, a stopped sshd. The short timeouts those tests set are
 * seconds, far above what a working exchange on loopback needs even on a
 * loaded machine: the tests assert what times out, never how fast.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "targets/ssh.h"
#include "tests/harness/harness.h"
#include "tests/harness/sshd.h"
#include "util/fs.h"
#include "util/xalloc.h"

static sshd_lab *lab;

static ssh_opts opts(void)
{
        return (ssh_opts){.known_hosts = lab->known_hosts,
                          .key_file = lab->client_key,
                          .connect_timeout_ms = 5000,
                          .command_timeout_ms = 20000};
}

static ssh_conn *connect_to(size_t i)
{
        ssh_opts o = opts();
        ssh_conn *c = NULL;
        _cleanup_free_ char *err = NULL;
        int k = ssh_connect(&o, lab->machines[i].address, lab->machines[i].port, "root", &c, &err);
        if (k < 0)
                fail_msg("connect: %s", err);
        return c;
}

static char *under_root(size_t i, const char *path)
{
        return xasprintf("%s%s", lab->machines[i].root, path);
}

static void test_exec(void **state)
{
        (void)state;
        _cleanup_(ssh_conn_freep) ssh_conn *c = connect_to(0);
        _cleanup_free_ char *out = NULL, *err = NULL;
        int status;

        assert_int_equal(
            ssh_exec(c, "echo out; echo err >&2; exit 3", NULL, 0, &status, &out, &err), 0);
        assert_int_equal(status, 3);
        assert_string_equal(out, "out\n");
        assert_string_equal(err, "err\n");

        /* the connection is reused: input goes in, a second command runs */
        free(out);
        out = NULL;
        assert_int_equal(ssh_exec(c, "tr a-z A-Z", "hello", 5, &status, &out, NULL), 0);
        assert_int_equal(status, 0);
        assert_string_equal(out, "HELLO");

        /* much output on both streams at once does not deadlock */
        free(out);
        out = NULL;
        assert_int_equal(ssh_exec(c,
                                  "i=0; while [ $i -lt 3000 ]; do echo line $i; echo e$i >&2; "
                                  "i=$((i+1)); done",
                                  NULL, 0, &status, &out, NULL),
                         0);
        assert_int_equal(status, 0);
        assert_non_null(strstr(out, "line 2999\n"));
}

/*
 * Output streamed into a file: more than a collected output may hold
 * (16 MiB), byte for byte, with the exit status and standard error; more
 * than the caller allows is -EFBIG.
 */
static void test_exec_to_fd(void **state)
{
        (void)state;
        _cleanup_(ssh_conn_freep) ssh_conn *c = connect_to(0);
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-ssh-stream");
        _cleanup_free_ char *path = path_join(dir, "out");
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        _cleanup_free_ char *err = NULL;
        int status = -1;
        /* 20 MiB of a byte pattern, and a word on stderr */
        assert_int_equal(ssh_exec_to_fd(c,
                                        "head -c 20971520 /dev/zero | tr '\\0' 'g'; echo done >&2; "
                                        "exit 4",
                                        fd, UINT64_C(64) << 20, &status, &err),
                         0);
        close(fd);
        assert_int_equal(status, 4);
        assert_string_equal(err, "done\n");
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 20971520);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 32 << 20, &data, &len), 0);
        for (size_t i = 0; i < len; i += 4096)
                assert_int_equal(data[i], 'g');
        free(data);

        fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(ssh_exec_to_fd(c, "head -c 100000 /dev/zero", fd, 1000, &status, NULL),
                         -EFBIG);
        close(fd);
        (void)rm_rf(dir);
}

/* How many entries of dir start with prefix. */
static int count_temporaries(const char *dir, const char *prefix)
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

static void test_upload_atomic(void **state)
{
        (void)state;
        _cleanup_(ssh_conn_freep) ssh_conn *c = connect_to(0);
        _cleanup_free_ char *dir = under_root(0, "/etc/etcd/pki");
        _cleanup_free_ char *path = xasprintf("%s/peer.key", dir);
        _cleanup_free_ char *data = NULL;
        struct stat st;
        size_t n;

        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_int_equal(ssh_upload(c, path, "first", 5, 0600), 0);
        assert_int_equal(read_file(path, 1024, &data, &n), 0);
        assert_string_equal(data, "first");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);

        /*
         * Replacing an existing file, with a symbolic link planted at the
         * temporary name gitcd used to write (as root) to: the file it
         * points to is never written, and no temporary is left behind.
         */
        _cleanup_free_ char *victim = under_root(0, "/etc/victim");
        assert_int_equal(write_file_atomic(victim, "precious", 8, 0644), 0);
        _cleanup_free_ char *planted = xasprintf("%s/.peer.key.gitcd-tmp", dir);
        assert_int_equal(symlink(victim, planted), 0);
        assert_int_equal(ssh_upload(c, path, "second", 6, 0600), 0);
        free(data);
        data = NULL;
        assert_int_equal(read_file(path, 1024, &data, &n), 0);
        assert_string_equal(data, "second");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        free(data);
        data = NULL;
        assert_int_equal(read_file(victim, 1024, &data, &n), 0);
        assert_string_equal(data, "precious");
        assert_int_equal(lstat(planted, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(count_temporaries(dir, ".peer.key.gitcd-"), 1); /* the planted link */

        /* a name that needs quoting */
        _cleanup_free_ char *odd = xasprintf("%s/it's $HOME.yaml", dir);
        assert_int_equal(ssh_upload(c, odd, "x", 1, 0644), 0);
        assert_true(path_exists(odd));

        /* a missing directory: refused, nothing created */
        _cleanup_free_ char *missing = under_root(0, "/nowhere/etcd.yaml");
        assert_int_equal(ssh_upload(c, missing, "x", 1, 0644), -ENOENT);
        assert_non_null(strstr(ssh_last_error(c), "nowhere"));
        assert_true(ssh_conn_usable(c));
}

static void test_read_file(void **state)
{
        (void)state;
        _cleanup_(ssh_conn_freep) ssh_conn *c = connect_to(1);
        _cleanup_free_ char *path = under_root(1, "/marker");
        _cleanup_free_ char *data = NULL, *missing = under_root(1, "/absent");
        size_t len = 0;

        assert_int_equal(write_file_atomic(path, "id=42\n", 6, 0644), 0);
        assert_int_equal(ssh_read_file(c, path, 1024, &data, &len), 0);
        assert_int_equal(len, 6);
        assert_string_equal(data, "id=42\n");
        free(data);
        data = NULL;
        assert_int_equal(ssh_read_file(c, missing, 1024, &data, &len), -ENOENT);
        assert_null(data);
        assert_int_equal(ssh_read_file(c, path, 3, &data, &len), -EFBIG);
}

static void test_wrong_host_key(void **state)
{
        (void)state;
        _cleanup_free_ char *kh = sshd_lab_known_hosts_with_wrong_key(lab, 1);
        ssh_opts o = opts();
        o.known_hosts = kh;
        _cleanup_(ssh_pool_freep) ssh_pool *p = ssh_pool_new(&o);
        ssh_conn *c = NULL;
        char *err = NULL;
        _cleanup_free_ char *target = under_root(1, "/written-through-wrong-key");

        assert_int_equal(
            ssh_pool_get(p, lab->machines[1].address, lab->machines[1].port, "root", &c, &err),
            -EACCES);
        assert_null(c);
        assert_non_null(err);
        assert_non_null(strstr(err, "SHA256:"));
        free(err);
        assert_false(path_exists(target));

        /* the other machine, whose key is right, is reachable through the same pool */
        assert_int_equal(
            ssh_pool_get(p, lab->machines[0].address, lab->machines[0].port, "root", &c, &err), 0);
        int status;
        assert_int_equal(ssh_exec(c, "true", NULL, 0, &status, NULL, NULL), 0);
        assert_int_equal(status, 0);
        ssh_pool_put(p, c);
}

static void test_unknown_host(void **state)
{
        (void)state;
        _cleanup_free_ char *kh = xasprintf("%s/kh-only-0", lab->dir);
        ssh_opts o = opts();
        ssh_conn *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(write_file_atomic(kh, lab->machines[0].host_key_line,
                                           strlen(lab->machines[0].host_key_line), 0600),
                         0);
        o.known_hosts = kh;
        assert_int_equal(
            ssh_connect(&o, lab->machines[1].address, lab->machines[1].port, "root", &c, &err),
            -EACCES);
        assert_null(c);
        assert_non_null(strstr(err, "127.0.0.3"));
}

/* Connect to machine i with known_hosts text kh; 0 or the error, its message in *ret_err. */
static int connect_with(size_t i, const char *name, const char *kh, char **ret_err)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", lab->dir, name);
        assert_int_equal(write_file_atomic(path, kh, strlen(kh), 0600), 0);
        ssh_opts o = opts();
        o.known_hosts = path;
        ssh_conn *c = NULL;
        int k =
            ssh_connect(&o, lab->machines[i].address, lab->machines[i].port, "root", &c, ret_err);
        if (k == 0) {
                int status = -1;
                assert_int_equal(ssh_exec(c, "true", NULL, 0, &status, NULL, NULL), 0);
                assert_int_equal(status, 0);
        }
        ssh_conn_free(c);
        return k;
}

/*
 * docs/hosts.md step 3 exactly, `ssh-keyscan -t ed25519 HOST >>
 * known_hosts`, for machines with the stock set of host keys: gitcd asks
 * for the Ed25519 key (libssh2's own order asks for ECDSA, which the file
 * does not list, and every machine was refused).
 */
static void test_keyscan_ed25519_recipe(void **state)
{
        (void)state;
        _cleanup_free_ char *kh = xasprintf("%s/kh-keyscan", lab->dir);
        _cleanup_free_ char *cmd =
            xasprintf("ssh-keyscan -t ed25519 -p %d %s > '%s' 2>/dev/null && grep -q ssh-ed25519 "
                      "'%s' && ! grep -q -e ecdsa -e ssh-rsa '%s'",
                      lab->machines[0].port, lab->machines[0].address, kh, kh, kh);
        assert_int_equal(system(cmd), 0);
        ssh_opts o = opts();
        o.known_hosts = kh;
        ssh_conn *c = NULL;
        _cleanup_free_ char *err = NULL;
        if (ssh_connect(&o, lab->machines[0].address, lab->machines[0].port, "root", &c, &err) < 0)
                fail_msg("connect: %s", err);
        ssh_conn_free(c);

        /* the ECDSA line alone works too: the type listed is the one asked for */
        char *msg = NULL;
        if (connect_with(1, "kh-ecdsa", lab->machines[1].ecdsa_key_line, &msg) < 0)
                fail_msg("connect: %s", msg);
}

/*
 * A machine listed by its RSA key only. gitcd asks for RSA first, but its
 * SSH library (libssh2 1.10) checks RSA host keys only through ssh-rsa
 * (SHA-1) signatures, which a stock OpenSSH 8.8 or later does not make: the
 * machine shows another key and is refused with a message that says so and
 * what to add. A machine whose sshd allows ssh-rsa (HostKeyAlgorithms
 * +ssh-rsa) is reached with its RSA key.
 */
static void test_rsa_only(void **state)
{
        (void)state;
        char *msg = NULL;
        assert_int_equal(connect_with(0, "kh-rsa", lab->machines[0].rsa_key_line, &msg), -EACCES);
        if (!strstr(msg, "known_hosts lists only ssh-rsa keys for it") ||
            !strstr(msg, "ssh-rsa (SHA-1) signatures"))
                fail_msg("unexpected: %s", msg);
        free(msg);
        msg = NULL;

        assert_int_equal(sshd_machine_set_config(lab, 0, "HostKeyAlgorithms +ssh-rsa\n"), 0);
        int k = connect_with(0, "kh-rsa", lab->machines[0].rsa_key_line, &msg);
        assert_int_equal(sshd_machine_set_config(lab, 0, NULL), 0);
        if (k < 0)
                fail_msg("connect with the RSA key: %s", msg);
}

static void test_refused_key(void **state)
{
        (void)state;
        _cleanup_free_ char *key = xasprintf("%s/otherkey", lab->dir);
        ssh_opts o = opts();
        ssh_conn *c = NULL;
        _cleanup_free_ char *err = NULL;

        o.key_file = key;
        assert_int_equal(
            ssh_connect(&o, lab->machines[0].address, lab->machines[0].port, "root", &c, &err),
            -EACCES);
        assert_non_null(strstr(err, "refused the key"));
}

static void test_agent(void **state)
{
        (void)state;
        _cleanup_free_ char *sock = xasprintf("%s/agent.sock", lab->dir);
        _cleanup_free_ char *cmd = xasprintf("exec ssh-agent -a '%s' -D", sock);
        pid_t agent = fork();
        if (agent == 0) {
                int devnull = open("/dev/null", O_WRONLY);
                dup2(devnull, 1);
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
        }
        harness_track_pid(agent);
        for (int i = 0; i < 200 && !path_exists(sock); i++)
                usleep(20000);
        assert_true(path_exists(sock));
        setenv("SSH_AUTH_SOCK", sock, 1);

        ssh_opts o = opts();
        o.key_file = NULL;
        ssh_conn *c = NULL;
        _cleanup_free_ char *err = NULL;
        /* an empty agent: no key is accepted */
        assert_int_equal(
            ssh_connect(&o, lab->machines[0].address, lab->machines[0].port, "root", &c, &err),
            -EACCES);
        free(err);
        err = NULL;

        _cleanup_free_ char *add = xasprintf("ssh-add -q '%s' 2>/dev/null", lab->client_key);
        assert_int_equal(system(add), 0);
        assert_int_equal(
            ssh_connect(&o, lab->machines[0].address, lab->machines[0].port, "root", &c, &err), 0);
        int status;
        assert_int_equal(ssh_exec(c, "true", NULL, 0, &status, NULL, NULL), 0);
        assert_int_equal(status, 0);
        ssh_conn_free(c);

        unsetenv("SSH_AUTH_SOCK");
        kill(agent, SIGTERM);
        waitpid(agent, NULL, 0);
        harness_untrack_pid(agent);
}

/* A listener on 127.0.0.9 that accepts TCP (backlog) but never speaks SSH. */
static int silent_listener(int *ret_port)
{
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        inet_pton(AF_INET, "127.0.0.9", &a.sin_addr);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 16), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

/* How many connections reached the listener (accepting them now). */
static int count_connections(int fd)
{
        int n = 0, s;
        fcntl(fd, F_SETFL, O_NONBLOCK);
        while ((s = accept(fd, NULL, NULL)) >= 0) {
                close(s);
                n++;
        }
        return n;
}

static void test_slow_host_times_out_once_per_pass(void **state)
{
        (void)state;
        int port;
        _cleanup_close_ int fd = silent_listener(&port);
        ssh_opts o = opts();
        o.connect_timeout_ms = 2000;
        _cleanup_(ssh_pool_freep) ssh_pool *p = ssh_pool_new(&o);
        ssh_conn *c = NULL;
        char *err = NULL;

        assert_int_equal(ssh_pool_get(p, "127.0.0.9", port, "root", &c, &err), -ETIMEDOUT);
        assert_non_null(strstr(err, "timed out"));
        free(err);
        /* the same pass: no second attempt on that machine */
        assert_int_equal(ssh_pool_get(p, "127.0.0.9", port, "root", &c, &err), -ETIMEDOUT);
        free(err);
        assert_int_equal(count_connections(fd), 1);
        /* the other machines still answer */
        assert_int_equal(
            ssh_pool_get(p, lab->machines[0].address, lab->machines[0].port, "root", &c, &err), 0);
        ssh_pool_put(p, c);
        /* the next pass tries again */
        ssh_pool_new_pass(p);
        assert_int_equal(ssh_pool_get(p, "127.0.0.9", port, "root", &c, &err), -ETIMEDOUT);
        free(err);
        assert_int_equal(count_connections(fd), 1);
}

/* Threads: a machine's connection is lent to one thread at a time; other machines go on. */
typedef struct borrower {
        ssh_pool *p;
        int port;
        const char *address;
        atomic_bool got;
        int exec_result;
} borrower;

static void *borrow_main(void *arg)
{
        borrower *b = arg;
        ssh_conn *c = NULL;
        char *err = NULL;
        int status = -1;
        if (ssh_pool_get(b->p, b->address, b->port, "root", &c, &err) < 0) {
                free(err);
                b->exec_result = -1;
                return NULL;
        }
        atomic_store(&b->got, true);
        b->exec_result = ssh_exec(c, "true", NULL, 0, &status, NULL, NULL) < 0 ? -1 : status;
        ssh_pool_put(b->p, c);
        return NULL;
}

static void test_pool_lends_one_thread_at_a_time(void **state)
{
        (void)state;
        ssh_opts o = opts();
        _cleanup_(ssh_pool_freep) ssh_pool *p = ssh_pool_new(&o);
        ssh_conn *c0 = NULL, *c1 = NULL;
        char *err = NULL;
        int status = -1;
        assert_int_equal(
            ssh_pool_get(p, lab->machines[0].address, lab->machines[0].port, "root", &c0, &err), 0);
        borrower b = {.p = p, .port = lab->machines[0].port, .address = lab->machines[0].address};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, borrow_main, &b), 0);
        /* Another machine is lent at once, while machine 0 is out. */
        assert_int_equal(
            ssh_pool_get(p, lab->machines[1].address, lab->machines[1].port, "root", &c1, &err), 0);
        assert_int_equal(ssh_exec(c1, "true", NULL, 0, &status, NULL, NULL), 0);
        assert_int_equal(status, 0);
        ssh_pool_put(p, c1);
        /* The other thread waits for machine 0 until it is given back. */
        assert_false(atomic_load(&b.got));
        assert_int_equal(ssh_exec(c0, "true", NULL, 0, &status, NULL, NULL), 0);
        ssh_pool_put(p, c0);
        pthread_join(t, NULL);
        assert_true(atomic_load(&b.got));
        assert_int_equal(b.exec_result, 0);
}

static void test_command_timeout(void **state)
{
        (void)state;
        ssh_opts o = opts();
        o.command_timeout_ms = 3000;
        _cleanup_(ssh_pool_freep) ssh_pool *p = ssh_pool_new(&o);
        ssh_conn *c = NULL;
        char *err = NULL;
        int status;

        assert_int_equal(
            ssh_pool_get(p, lab->machines[0].address, lab->machines[0].port, "root", &c, &err), 0);
        assert_int_equal(ssh_exec(c, "sleep 30", NULL, 0, &status, NULL, NULL), -ETIMEDOUT);
        assert_non_null(strstr(ssh_last_error(c), "did not finish"));
        assert_false(ssh_conn_usable(c));
        ssh_pool_put(p, c);
        /* the pool replaces the broken connection */
        assert_int_equal(
            ssh_pool_get(p, lab->machines[0].address, lab->machines[0].port, "root", &c, &err), 0);
        assert_int_equal(ssh_exec(c, "exit 0", NULL, 0, &status, NULL, NULL), 0);
        assert_int_equal(status, 0);
        ssh_pool_put(p, c);
}

static void test_down_host(void **state)
{
        (void)state;
        ssh_opts o = opts();
        _cleanup_(ssh_pool_freep) ssh_pool *p = ssh_pool_new(&o);
        ssh_conn *c = NULL;
        char *err = NULL;
        int status;

        assert_int_equal(
            ssh_pool_get(p, lab->machines[1].address, lab->machines[1].port, "root", &c, &err), 0);
        assert_int_equal(sshd_machine_stop(lab, 1), 0);
        /* the established connection dies with the machine... */
        assert_true(ssh_exec(c, "true", NULL, 0, &status, NULL, NULL) < 0);
        assert_false(ssh_conn_usable(c));
        ssh_pool_put(p, c);
        /* ...and a new one is refused, with a message naming the machine */
        ssh_conn *fresh = NULL;
        _cleanup_free_ char *msg = NULL;
        assert_int_equal(
            ssh_connect(&o, lab->machines[1].address, lab->machines[1].port, "root", &fresh, &msg),
            -ECONNREFUSED);
        assert_non_null(strstr(msg, "127.0.0.3"));
        assert_int_equal(sshd_machine_start(lab, 1), 0);
        ssh_pool_new_pass(p);
        assert_int_equal(
            ssh_pool_get(p, lab->machines[1].address, lab->machines[1].port, "root", &c, &err), 0);
        ssh_pool_put(p, c);
}

static void test_quote(void **state)
{
        (void)state;
        _cleanup_free_ char *a = ssh_quote("plain"), *b = ssh_quote("it's"), *e = ssh_quote("");
        assert_string_equal(a, "'plain'");
        assert_string_equal(b, "'it'\\''s'");
        assert_string_equal(e, "''");
}

static int setup(void **state)
{
        (void)state;
        if (!sshd_available()) {
                fprintf(stderr, "sshd is not installed\n");
                exit(77);
        }
        signal(SIGPIPE, SIG_IGN);
        return sshd_lab_start(2, &lab) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
        (void)state;
        sshd_lab_free(lab);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_quote),
            cmocka_unit_test(test_exec),
            cmocka_unit_test(test_exec_to_fd),
            cmocka_unit_test(test_upload_atomic),
            cmocka_unit_test(test_read_file),
            cmocka_unit_test(test_wrong_host_key),
            cmocka_unit_test(test_unknown_host),
            cmocka_unit_test(test_keyscan_ed25519_recipe),
            cmocka_unit_test(test_rsa_only),
            cmocka_unit_test(test_refused_key),
            cmocka_unit_test(test_agent),
            cmocka_unit_test(test_slow_host_times_out_once_per_pass),
            cmocka_unit_test(test_pool_lends_one_thread_at_a_time),
            cmocka_unit_test(test_command_timeout),
            cmocka_unit_test(test_down_host),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
