/*
 * Git over SSH against a real sshd started on 127.0.0.1 (its own host keys,
 * Ed25519, ECDSA and RSA as a distribution's sshd has them, config and
 * authorized_keys, serving git-upload-pack as the current user), listed in
 * known_hosts by its Ed25519 key only (the SSH library's own order would
 * ask for the ECDSA one), or by what `ssh-keyscan -t ed25519` writes:
 * fetching with a key file, with a passphrase from a file or an environment
 * variable, through an ssh-agent; refusing an unknown host, a changed host
 * key, and a client key the server does not accept, with clear messages.
 * sshd and ssh-agent are killed at the end, also when a test fails.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include <cmocka.h>

#include "sources/source.h"
#include "tests/sources/gitfix.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define SSHD "/usr/sbin/sshd"

/*
 * libgit2 1.5.1's SSH transport leaks on every connection: the
 * LIBSSH2_KNOWNHOSTS it loads from ~/.ssh/known_hosts (which gitcd does not
 * use: our certificate callback decides) and two path buffers, plus
 * libssh2 1.10's auth-method list after a refused key. The library is
 * stripped, so LeakSanitizer can only tell these apart by module; this
 * test alone therefore ignores leaks inside libgit2 and libssh2. The
 * file:// and HTTPS tests run the same adapter code without suppressions.
 */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
        return "leak:libssh2_knownhost_init\n"
               "leak:libssh2_userauth_list\n"
               "leak:libgit2.so\n"
               "leak:libssh2.so\n";
}

static pid_t sshd_pid, agent_pid;
static int port;
static char *dir, *cache, *url, *commit;
static char *kh_good, *kh_wrong, *kh_empty;

static void kill_children(void)
{
        if (sshd_pid > 0) {
                kill(-sshd_pid, SIGTERM);
                kill(sshd_pid, SIGTERM);
                waitpid(sshd_pid, NULL, 0);
                sshd_pid = 0;
        }
        if (agent_pid > 0) {
                kill(agent_pid, SIGTERM);
                waitpid(agent_pid, NULL, 0);
                agent_pid = 0;
        }
}

static void on_signal(int sig)
{
        kill_children();
        signal(sig, SIG_DFL);
        raise(sig);
}

static int free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM, 0), p = -1;

        if (fd < 0)
                return -1;
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0)
                p = ntohs(a.sin_port);
        close(fd);
        return p;
}

static bool port_open(int p)
{
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                .sin_port = htons((uint16_t)p)};
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        bool ok;

        if (fd < 0)
                return false;
        ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        return ok;
}

/* Start a program in its own process group with output to log; returns its pid. */
static pid_t spawn(const char *log, char *const argv[])
{
        pid_t pid = fork();

        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

                setpgid(0, 0);
                /* die with the test, whatever kills it */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execv(argv[0], argv);
                _exit(127);
        }
        return pid;
}

static void sleep_ms(long ms)
{
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

        nanosleep(&ts, NULL);
}

static char *known_hosts_line(const char *pub)
{
        _cleanup_free_ char *k = fix_sh_out("cut -d' ' -f1,2 '%s'", pub);

        return xasprintf("[127.0.0.1]:%d %s\n", port, k);
}

/* Start sshd on a free port and wait until it listens; sshd_pid stays 0 on failure. */
static void start_sshd(void)
{
        _cleanup_free_ char *config = NULL, *log = xasprintf("%s/sshd.log", dir);
        _cleanup_free_ char *cfg_path = xasprintf("%s/sshd_config", dir);
        char *argv[] = {SSHD, "-D", "-e", "-f", cfg_path, NULL};

        port = free_port();
        config = xasprintf("Port %d\n"
                           "ListenAddress 127.0.0.1\n"
                           "HostKey %s/hostkey\n"
                           "HostKey %s/hostkey_ecdsa\n"
                           "HostKey %s/hostkey_rsa\n"
                           "AuthorizedKeysFile %s/authorized_keys\n"
                           "PidFile %s/sshd.pid\n"
                           "StrictModes no\n"
                           "UsePAM no\n"
                           "PermitRootLogin yes\n"
                           "PasswordAuthentication no\n"
                           "KbdInteractiveAuthentication no\n"
                           "PubkeyAuthentication yes\n"
                           "LogLevel VERBOSE\n",
                           port, dir, dir, dir, dir, dir);
        fix_write(dir, "sshd_config", config);
        sshd_pid = spawn(log, argv);
        for (int i = 0; i < 1200 && !port_open(port); i++) {
                if (waitpid(sshd_pid, NULL, WNOHANG) == sshd_pid) {
                        sshd_pid = 0;
                        fix_sh("cat '%s' >&2", log);
                        return;
                }
                sleep_ms(50);
        }
        if (!port_open(port))
                kill_children();
}

static int group_setup(void **state)
{
        _cleanup_free_ char *work = NULL;
        _cleanup_free_ char *auth = NULL, *l1 = NULL, *l2 = NULL, *pub = NULL;

        if (access(SSHD, X_OK) < 0) {
                fprintf(stderr, "sshd is not installed\n");
                exit(77);
        }
        fix_init();
        atexit(kill_children);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        signal(SIGABRT, on_signal);

        dir = fix_tmpdir("ssh");
        cache = fix_tmpdir("cache");
        work = fix_tmpdir("work");
        mkdir("/run/sshd", 0755);
        /* the stock set of host keys, as a distribution's sshd has them; known_hosts
         * lists the Ed25519 one (ssh-keyscan -t ed25519, as docs/hosts.md says) */
        if (fix_sh("cd '%s' && ssh-keygen -q -t ed25519 -N '' -f hostkey && "
                   "ssh-keygen -q -t ecdsa -N '' -f hostkey_ecdsa && "
                   "ssh-keygen -q -t rsa -N '' -f hostkey_rsa && "
                   "ssh-keygen -q -t ed25519 -N '' -f otherhost && "
                   "ssh-keygen -q -t ed25519 -N '' -f client && "
                   "ssh-keygen -q -t ed25519 -N 'correct horse' -f client_pw && "
                   "ssh-keygen -q -t ed25519 -N '' -f wrong && "
                   "cat client.pub client_pw.pub > authorized_keys && "
                   "printf 'correct horse\\n' > passphrase && printf 'nope\\n' > badpass && "
                   "chmod 600 passphrase badpass",
                   dir) != 0)
                return -1;

        /* the repository served over SSH */
        if (fix_sh("git init -q '%s'", work) != 0)
                return -1;
        fix_write(work, "clusters/a.yaml", "name: a\n");
        commit = fix_commit(work, "over ssh");
        if (!commit || fix_sh("git clone -q --bare '%s' '%s/repo.git'", work, dir) != 0)
                return -1;

        /* a free port can be taken by someone else before sshd binds it: try a few */
        for (int attempt = 0; attempt < 5 && sshd_pid <= 0; attempt++)
                start_sshd();
        if (sshd_pid <= 0)
                return -1;

        url = xasprintf("ssh://root@127.0.0.1:%d%s/repo.git", port, dir);
        pub = xasprintf("%s/hostkey.pub", dir);
        l1 = known_hosts_line(pub);
        free(pub);
        pub = xasprintf("%s/otherhost.pub", dir);
        l2 = known_hosts_line(pub);
        fix_write(dir, "kh_good", l1);
        fix_write(dir, "kh_wrong", l2);
        fix_write(dir, "kh_empty", "");
        kh_good = xasprintf("%s/kh_good", dir);
        kh_wrong = xasprintf("%s/kh_wrong", dir);
        kh_empty = xasprintf("%s/kh_empty", dir);
        return 0;
}

static int group_teardown(void **state)
{
        kill_children();
        free(dir);
        free(cache);
        free(url);
        free(commit);
        free(kh_good);
        free(kh_wrong);
        free(kh_empty);
        fix_cleanup();
        return 0;
}

static source_opts opts_with(const char *key, const char *known_hosts)
{
        static char key_path[4096];

        snprintf(key_path, sizeof(key_path), "%s/%s", dir, key ? key : "client");
        return (source_opts){
            .url_or_path = url,
            .cache_dir = cache,
            .ssh_key_path = key_path,
            .known_hosts_path = known_hosts,
        };
}

/* Fetch; returns the result and the revision or message. */
static int fetch(const source_opts *o, source_revision **ret, char **ret_msg)
{
        _cleanup_(source_freep) source *s = NULL;
        int r;

        *ret = NULL;
        r = source_open(o, &s, ret_msg);
        if (r < 0)
                return r;
        r = source_fetch(s, ret);
        *ret_msg = xstrdup(source_last_error(s));
        return r;
}

/* The SHA256 fingerprint of a host key of the server ("hostkey", "hostkey_ecdsa", ...). */
static char *fingerprint_of(const char *key)
{
        return fix_sh_out("ssh-keygen -lf '%s/%s.pub' | cut -d' ' -f2", dir, key);
}

static char *host_fingerprint(void)
{
        return fingerprint_of("hostkey");
}

static void test_fetch_with_key(void **state)
{
        source_opts o = opts_with("client", kh_good);
        source_revision *rev;
        char *msg = NULL;
        int r;

        r = fetch(&o, &rev, &msg);
        if (r < 0)
                fail_msg("%s", msg);
        free(msg);
        assert_string_equal(rev->commit_id, commit);
        assert_string_equal(rev->repository, url);
        assert_int_equal(rev->n_files, 1);
        assert_string_equal(rev->files[0].path, "clusters/a.yaml");
        assert_false(rev->fetch_skipped);
        source_revision_free(rev);

        /* polling again over SSH: only the refs are listed */
        assert_int_equal(fetch(&o, &rev, &msg), 0);
        free(msg);
        assert_true(rev->fetch_skipped);
        assert_string_equal(rev->commit_id, commit);
        source_revision_free(rev);
}

static void test_passphrase(void **state)
{
        _cleanup_free_ char *pass = xasprintf("%s/passphrase", dir);
        _cleanup_free_ char *bad = xasprintf("%s/badpass", dir);
        source_opts o = opts_with("client_pw", kh_good);
        source_revision *rev;
        char *msg = NULL;

        o.ssh_key_passphrase_file = pass;
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        assert_string_equal(rev->commit_id, commit);
        source_revision_free(rev);
        free(msg);

        setenv("GITCD_TEST_PASSPHRASE", "correct horse", 1);
        o.ssh_key_passphrase_file = NULL;
        o.ssh_key_passphrase_env = "GITCD_TEST_PASSPHRASE";
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        source_revision_free(rev);
        free(msg);

        /* a wrong passphrase fails, and the message does not show the passphrase */
        o.ssh_key_passphrase_env = NULL;
        o.ssh_key_passphrase_file = bad;
        assert_true(fetch(&o, &rev, &msg) < 0);
        assert_null(rev);
        assert_null(strstr(msg, "nope"));
        assert_null(strstr(msg, "correct horse"));
        assert_non_null(strstr(msg, "or the key's passphrase is wrong"));
        free(msg);

        /* an encrypted key without a passphrase is refused before any connection */
        o.ssh_key_passphrase_file = NULL;
        assert_int_equal(fetch(&o, &rev, &msg), -EINVAL);
        assert_non_null(strstr(msg, "is protected by a passphrase"));
        free(msg);

        /* a file that is not a private key */
        o = opts_with("client.pub", kh_good);
        assert_int_equal(fetch(&o, &rev, &msg), -EINVAL);
        assert_non_null(strstr(msg, "is not an SSH private key"));
        free(msg);
}

/* A known_hosts file hashed by `ssh-keygen -H` works the same. */
static void test_hashed_known_hosts(void **state)
{
        _cleanup_free_ char *hashed = xasprintf("%s/kh_hashed", dir);
        source_opts o = opts_with("client", hashed);
        source_revision *rev;
        char *msg = NULL;

        assert_int_equal(fix_sh("cp '%s' '%s' && ssh-keygen -q -H -f '%s' >/dev/null 2>&1 && "
                                "! grep -q 127.0.0.1 '%s'",
                                kh_good, hashed, hashed, hashed),
                         0);
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        free(msg);
        assert_string_equal(rev->commit_id, commit);
        source_revision_free(rev);
}

/*
 * docs/hosts.md's recipe, `ssh-keyscan -t ed25519 ... >> known_hosts`, for
 * a server that has the stock set of host keys: the fetch asks for the
 * Ed25519 key (the SSH library's own order asks for ECDSA, which the file
 * does not list) and succeeds.
 */
static void test_keyscan_ed25519_recipe(void **state)
{
        _cleanup_free_ char *kh = xasprintf("%s/kh_keyscan", dir);
        assert_int_equal(fix_sh("ssh-keyscan -t ed25519 -p %d 127.0.0.1 > '%s' 2>/dev/null && "
                                "grep -q ssh-ed25519 '%s' && ! grep -q -e ecdsa -e ssh-rsa '%s'",
                                port, kh, kh, kh),
                         0);
        source_opts o = opts_with("client", kh);
        source_revision *rev;
        char *msg = NULL;
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        free(msg);
        assert_string_equal(rev->commit_id, commit);
        source_revision_free(rev);
}

static void test_unknown_host(void **state)
{
        source_opts o = opts_with("client", kh_empty);
        /* nothing listed: the SSH library's own order, which asks for the ECDSA key */
        _cleanup_free_ char *fp = fingerprint_of("hostkey_ecdsa"), *expect = NULL;
        source_revision *rev;
        char *msg = NULL;

        assert_int_equal(fetch(&o, &rev, &msg), -EACCES);
        expect =
            xasprintf("host key for [127.0.0.1]:%d is not in known_hosts (offered %s)", port, fp);
        if (!strstr(msg, expect))
                fail_msg("\"%s\" lacks \"%s\"", msg, expect);
        free(msg);
}

static void test_changed_host_key(void **state)
{
        source_opts o = opts_with("client", kh_wrong);
        _cleanup_free_ char *fp = host_fingerprint(), *expect = NULL;
        source_revision *rev;
        char *msg = NULL;

        assert_int_equal(fetch(&o, &rev, &msg), -EACCES);
        expect = xasprintf("host key for [127.0.0.1]:%d does not match known_hosts: possible "
                           "man-in-the-middle (offered %s)",
                           port, fp);
        if (!strstr(msg, expect))
                fail_msg("\"%s\" lacks \"%s\"", msg, expect);
        free(msg);
}

static void test_wrong_client_key(void **state)
{
        source_opts o = opts_with("wrong", kh_good);
        _cleanup_free_ char *fp = fix_sh_out("ssh-keygen -lf '%s/wrong.pub' | cut -d' ' -f2", dir);
        source_revision *rev;
        char *msg = NULL;

        assert_int_equal(fetch(&o, &rev, &msg), -EACCES);
        if (!strstr(msg, "SSH authentication as root@127.0.0.1 failed: the server refused the key"))
                fail_msg("unexpected message: %s", msg);
        assert_non_null(strstr(msg, fp));
        free(msg);
}

static void test_agent(void **state)
{
        _cleanup_free_ char *sock = xasprintf("%s/agent.sock", dir);
        _cleanup_free_ char *log = xasprintf("%s/agent.log", dir);
        source_opts o = opts_with("wrong", kh_good); /* the key file is not used */
        char *argv[] = {"/usr/bin/ssh-agent", "-D", "-a", sock, NULL};
        source_revision *rev;
        char *msg = NULL;

        if (access(argv[0], X_OK) < 0)
                skip();
        agent_pid = spawn(log, argv);
        for (int i = 0; i < 3000 && access(sock, F_OK) < 0; i++)
                sleep_ms(20);
        assert_int_equal(fix_sh("SSH_AUTH_SOCK='%s' ssh-add -q '%s/client' 2>/dev/null", sock, dir),
                         0);
        setenv("SSH_AUTH_SOCK", sock, 1);
        o.ssh_key_path = NULL;
        o.use_ssh_agent = true;
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        assert_string_equal(rev->commit_id, commit);
        source_revision_free(rev);
        free(msg);

        /* an agent without the right key is refused clearly */
        assert_int_equal(fix_sh("SSH_AUTH_SOCK='%s' ssh-add -q -D 2>/dev/null && "
                                "SSH_AUTH_SOCK='%s' ssh-add -q '%s/wrong' 2>/dev/null",
                                sock, sock, dir),
                         0);
        assert_int_equal(fetch(&o, &rev, &msg), -EACCES);
        assert_non_null(strstr(msg, "refused the keys offered by the SSH agent"));
        free(msg);
        unsetenv("SSH_AUTH_SOCK");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_fetch_with_key),
            cmocka_unit_test(test_passphrase),
            cmocka_unit_test(test_hashed_known_hosts),
            cmocka_unit_test(test_keyscan_ed25519_recipe),
            cmocka_unit_test(test_unknown_host),
            cmocka_unit_test(test_changed_host_key),
            cmocka_unit_test(test_wrong_client_key),
            cmocka_unit_test(test_agent),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
