/*
 * Self-test of the real-etcd harness, for etcd 3.4 and 3.5: a plain
 * 3-member cluster starts healthy, keeps serving when one member is
 * killed, takes it back after a restart, accepts a fourth member added with
 * etcdctl and started with harness_member_start_joining(), and stops; a
 * 1-member TLS cluster with client certificate auth answers /health with the
 * client certificate and refuses a client without one. Afterwards no etcd
 * process of the run is left, and the same holds when a test process dies
 * on abort() (the signal handlers) or on SIGKILL (the parent-death signal).
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness/harness.h"
#include "tests/harness/kubelet.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAX_PIDS 64

/* Every etcd pid any test saw, checked at the end of each test. */
static pid_t seen_pids[MAX_PIDS];
static size_t n_seen;
/* The cluster of the running test, freed by teardown also when the test fails. */
static harness_cluster *current;

static int teardown(void **state)
{
        harness_cluster_free(current);
        current = NULL;
        n_seen = 0;
        return 0;
}

static void remember_pids(const harness_cluster *c)
{
        for (size_t i = 0; i < c->n; i++) {
                pid_t pid = c->members[i].pid;
                if (pid <= 0)
                        continue;
                bool known = false;
                for (size_t j = 0; j < n_seen; j++)
                        known = known || seen_pids[j] == pid;
                if (!known && n_seen < MAX_PIDS)
                        seen_pids[n_seen++] = pid;
        }
}

/* Gone: no such process, or a zombie nobody has reaped yet. */
static bool process_gone(pid_t pid)
{
        if (kill(pid, 0) < 0 && errno == ESRCH)
                return true;
        _cleanup_free_ char *path = xasprintf("/proc/%d/stat", (int)pid);
        _cleanup_free_ char *stat = NULL;
        size_t len = 0;
        if (read_file(path, 4096, &stat, &len) < 0)
                return true;
        const char *close_paren = strrchr(stat, ')');
        return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

/* Wait (generously: this is about correctness, not speed) for a killed process to vanish. */
static bool wait_gone(pid_t pid)
{
        int64_t deadline = now_mono_ms() + 30000;
        while (!process_gone(pid)) {
                if (now_mono_ms() > deadline)
                        return false;
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return true;
}

static void assert_no_etcd_left(void)
{
        for (size_t i = 0; i < n_seen; i++)
                assert_true(process_gone(seen_pids[i]));
        n_seen = 0;
}

static size_t body_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
        sb_append_len(userdata, data, size * nmemb);
        return size * nmemb;
}

/* GET url/health; the curl result, with the body in *ret_body. */
static CURLcode get_health(const char *client_url, const harness_tls *tls, bool with_cert,
                           char **ret_body)
{
        CURL *curl = curl_easy_init();
        assert_non_null(curl);
        _cleanup_free_ char *url = xasprintf("%s/health", client_url);
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, body_cb);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
        if (tls) {
                curl_easy_setopt(curl, CURLOPT_CAINFO, tls->ca_cert);
                if (with_cert) {
                        curl_easy_setopt(curl, CURLOPT_SSLCERT, tls->client_cert);
                        curl_easy_setopt(curl, CURLOPT_SSLKEY, tls->client_key);
                }
        }
        CURLcode rc = curl_easy_perform(curl);
        curl_easy_cleanup(curl);
        *ret_body = sb_detach(&body);
        return rc;
}

static void assert_healthy(const harness_cluster *c, size_t i)
{
        _cleanup_free_ char *body = NULL;
        assert_int_equal(get_health(c->members[i].client_url, c->tls, true, &body), CURLE_OK);
        assert_non_null(strstr(body, "\"health\":\"true\""));
}

/* Run etcdctl of the cluster's version against its endpoints; the exit status. */
static int etcdctl_run(const harness_cluster *c, const char *const *args, bool quiet)
{
        const char *argv[16];
        size_t n = 0;
        _cleanup_free_ char *endpoints = xasprintf("--endpoints=%s", c->endpoints);
        argv[n++] = c->etcdctl_bin;
        argv[n++] = endpoints;
        for (; *args && n < ARRAY_SIZE(argv) - 1; args++)
                argv[n++] = *args;
        argv[n] = NULL;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("ETCDCTL_API", "3", 1);
                int devnull = open("/dev/null", O_WRONLY);
                if (quiet && devnull >= 0) {
                        dup2(devnull, 1);
                        dup2(devnull, 2);
                }
                execv(argv[0], (char *const *)argv);
                _exit(127);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int etcdctl(const harness_cluster *c, const char *const *args)
{
        return etcdctl_run(c, args, false);
}

static void plain_cluster(const char *version)
{
        if (!harness_have_etcd(version))
                skip();
        harness_cluster *c = NULL;
        harness_opts opts = {.version = version, .members = 3};
        assert_int_equal(harness_cluster_start(&opts, &c), 0);
        current = c;
        assert_string_equal(c->version, version);
        assert_int_equal(c->n, 3);
        assert_null(c->tls);
        assert_non_null(c->etcdctl_bin);
        assert_true(path_is_dir(c->root_dir));
        remember_pids(c);
        for (size_t i = 0; i < c->n; i++) {
                assert_true(c->members[i].pid > 0);
                assert_true(strneq(c->members[i].client_url, "http://127.0.0.1:", 17));
                assert_healthy(c, i);
        }
        assert_non_null(strstr(c->endpoints, c->members[2].client_url));

        /* One member down: the other two still serve. */
        pid_t killed = c->members[1].pid;
        assert_int_equal(harness_member_kill(c, 1), 0);
        assert_int_equal(c->members[1].pid, 0);
        assert_true(process_gone(killed));
        assert_int_equal(harness_member_wait_healthy(c, 0, 20000), 0);
        assert_int_equal(harness_member_wait_healthy(c, 2, 20000), 0);
        assert_healthy(c, 0);
        assert_int_equal(harness_member_wipe(c, 0), -EBUSY); /* running */

        /* Back with its data. */
        assert_int_equal(harness_member_restart(c, 1), 0);
        assert_true(c->members[1].pid > 0);
        remember_pids(c);
        assert_int_equal(harness_member_wait_healthy(c, 1, 20000), 0);
        assert_healthy(c, 1);
        assert_int_equal(harness_member_restart(c, 1), -EBUSY);

        /* A fourth member joins after a MemberAdd. */
        int peer_port = harness_free_port();
        assert_true(peer_port > 0);
        _cleanup_free_ char *peer_url = xasprintf("http://127.0.0.1:%d", peer_port);
        _cleanup_free_ char *peer_flag = xasprintf("--peer-urls=%s", peer_url);
        const char *add[] = {"member", "add", "m3", peer_flag, NULL};
        /*
         * etcd refuses a MemberAdd ("unhealthy cluster") until the member
         * taking it has been connected to a quorum for 5 s; wait for that.
         */
        int64_t deadline = now_mono_ms() + 30000;
        while (etcdctl_run(c, add, true) != 0) {
                assert_true(now_mono_ms() < deadline);
                struct timespec ts = {0, 500 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < c->n; i++)
                sb_printf(&ic, "%s=%s,", c->members[i].name, c->members[i].peer_url);
        sb_printf(&ic, "m3=%s", peer_url);
        size_t idx = 0;
        assert_int_equal(harness_member_start_joining(c, "m3", peer_port, 0, sb_str(&ic), &idx), 0);
        sb_release(&ic);
        assert_int_equal(idx, 3);
        assert_int_equal(c->n, 4);
        remember_pids(c);
        assert_int_equal(harness_member_wait_healthy(c, 3, 20000), 0);
        assert_non_null(strstr(c->endpoints, c->members[3].client_url));
        const char *put[] = {"put", "harness-key", "v", NULL};
        assert_int_equal(etcdctl(c, put), 0);

        /* Stop everything, gracefully. */
        assert_int_equal(harness_member_stop(c, 3), 0);
        assert_int_equal(c->members[3].pid, 0);
        assert_int_equal(harness_cluster_stop(c), 0);
        for (size_t i = 0; i < c->n; i++)
                assert_int_equal(c->members[i].pid, 0);
        assert_true(path_is_dir(c->members[3].data_dir));
        assert_int_equal(harness_member_wipe(c, 3), 0);
        assert_false(path_exists(c->members[3].data_dir));
        _cleanup_free_ char *root = xstrdup(c->root_dir);
        harness_cluster_free(c);
        current = NULL;
        assert_false(path_exists(root));
        assert_no_etcd_left();
}

static void tls_cluster(const char *version)
{
        if (!harness_have_etcd(version))
                skip();
        harness_cluster *c = NULL;
        harness_opts opts = {.version = version, .tls = true, .client_cert_auth = true};
        /* An ETCD_* variable in the test's environment must not reach etcd. */
        setenv("ETCD_NAME", "shadowed", 1);
        int r = harness_cluster_start(&opts, &c);
        unsetenv("ETCD_NAME");
        assert_int_equal(r, 0);
        current = c;
        remember_pids(c);
        assert_int_equal(c->n, 1);
        assert_non_null(c->tls);
        assert_true(strneq(c->members[0].client_url, "https://127.0.0.1:", 18));
        assert_true(strneq(c->members[0].peer_url, "https://127.0.0.1:", 18));
        struct stat st;
        assert_int_equal(stat(c->tls->client_key, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);

        _cleanup_free_ char *body = NULL;
        assert_int_equal(get_health(c->members[0].client_url, c->tls, true, &body), CURLE_OK);
        assert_non_null(strstr(body, "\"health\":\"true\""));
        free(body);
        body = NULL;
        /* Without a client certificate the server refuses the handshake. */
        assert_int_not_equal(get_health(c->members[0].client_url, c->tls, false, &body), CURLE_OK);
        free(body);
        body = NULL;
        /* Plain HTTP to the TLS port gets no health answer either. */
        _cleanup_free_ char *http_url = xasprintf("http://127.0.0.1:%d", c->members[0].client_port);
        CURLcode rc = get_health(http_url, NULL, false, &body);
        assert_true(rc != CURLE_OK || !strstr(body, "\"health\":\"true\""));

        /* etcdctl with the client certificate works as well. */
        _cleanup_free_ char *cacert = xasprintf("--cacert=%s", c->tls->ca_cert);
        _cleanup_free_ char *cert = xasprintf("--cert=%s", c->tls->client_cert);
        _cleanup_free_ char *key = xasprintf("--key=%s", c->tls->client_key);
        const char *health[] = {cacert, cert, key, "endpoint", "health", NULL};
        assert_int_equal(etcdctl(c, health), 0);

        harness_cluster_free(c);
        current = NULL;
        assert_no_etcd_left();
}

static void test_plain_3_5(void **state)
{
        plain_cluster("3.5.16");
}

static void test_plain_3_4(void **state)
{
        plain_cluster("3.4.23");
}

static void test_tls_3_5(void **state)
{
        tls_cluster("3.5.16");
}

static void test_tls_3_4(void **state)
{
        tls_cluster("3.4.23");
}

static void test_free_ports_unique(void **state)
{
        int ports[100];
        for (size_t i = 0; i < ARRAY_SIZE(ports); i++) {
                ports[i] = harness_free_port();
                assert_true(ports[i] > 0 && ports[i] < 65536);
                for (size_t j = 0; j < i; j++)
                        assert_int_not_equal(ports[i], ports[j]);
        }
}

static void test_paths(void **state)
{
        assert_false(harness_have_etcd("0.0.1"));
        assert_null(harness_etcd_path("0.0.1", "etcd"));

        /* GITCD_ETCD_DIR decides where binaries are looked up. */
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-harness-paths");
        assert_non_null(dir);
        assert_true(path_is_dir(dir));
        _cleanup_free_ char *vdir = path_join(dir, "9.9.9");
        assert_int_equal(mkdir_p(vdir, 0755), 0);
        _cleanup_free_ char *fake = path_join(vdir, "etcd");
        assert_int_equal(write_file_atomic(fake, "#!/bin/sh\n", 10, 0755), 0);
        _cleanup_free_ char *saved = xstrdup_null(getenv("GITCD_ETCD_DIR"));
        setenv("GITCD_ETCD_DIR", dir, 1);
        _cleanup_free_ char *found = harness_etcd_path("9.9.9", "etcd");
        _cleanup_free_ char *no_ctl = harness_etcd_path("9.9.9", "etcdctl");
        /* The newest installed version of a series: a folder without etcd does not count. */
        const char *versions[] = {"9.9.10", "9.10.0", "9.9.2"};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *d = path_join(dir, versions[i]);
                assert_int_equal(mkdir_p(d, 0755), 0);
                _cleanup_free_ char *b = path_join(d, "etcd");
                if (i != 1)
                        assert_int_equal(write_file_atomic(b, "#!/bin/sh\n", 10, 0755), 0);
        }
        _cleanup_free_ char *newest_99 = harness_etcd_newest("9.9");
        _cleanup_free_ char *newest_910 = harness_etcd_newest("9.10");
        _cleanup_free_ char *newest_9 = harness_etcd_newest("9");
        if (saved)
                setenv("GITCD_ETCD_DIR", saved, 1);
        else
                unsetenv("GITCD_ETCD_DIR");
        assert_non_null(found);
        assert_string_equal(found, fake);
        assert_string_equal(newest_99, "9.9.10");
        assert_null(newest_910);
        assert_string_equal(newest_9, "9.9.10");
        assert_null(no_ctl);
}

/* Run fn with stderr captured into a string. */
static int capture_stderr(int (*fn)(void *), void *arg, char **ret_text)
{
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-harness-stderr");
        assert_non_null(dir);
        _cleanup_free_ char *path = path_join(dir, "stderr");
        fflush(stderr);
        int saved = dup(2);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(saved >= 0 && fd >= 0);
        dup2(fd, 2);
        close(fd);
        int r = fn(arg);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        size_t len = 0;
        assert_int_equal(read_file(path, 1 << 20, ret_text, &len), 0);
        return r;
}

static int start_version(void *version)
{
        harness_cluster *c = NULL;
        harness_opts opts = {.version = version, .start_timeout_ms = 1500};
        int r = harness_cluster_start(&opts, &c);
        if (r == 0) {
                current = c;
                remember_pids(c);
        }
        return r;
}

/* A fake etcd version under a GITCD_ETCD_DIR folder: a shell script. */
static void fake_etcd(const char *dir, const char *version, const char *script)
{
        _cleanup_free_ char *vdir = xasprintf("%s/%s", dir, version);
        assert_int_equal(mkdir_p(vdir, 0755), 0);
        _cleanup_free_ char *bin = path_join(vdir, "etcd");
        assert_int_equal(write_file_atomic(bin, script, strlen(script), 0755), 0);
}

static void test_start_failures(void **state)
{
        if (!harness_have_etcd("3.5.16"))
                skip();
        _cleanup_free_ char *real = harness_etcd_path("3.5.16", "etcd");
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-harness-fake");
        assert_non_null(dir);
        _cleanup_free_ char *exits =
            xstrdup("#!/bin/sh\necho \"fake etcd gives up: $1\"\nexit 3\n");
        _cleanup_free_ char *hangs =
            xasprintf("#!/bin/sh\necho $$ > %s/hang.pid\nexec sleep 600\n", dir);
        /* Loses a port race once, then runs the real etcd. */
        _cleanup_free_ char *clash = xasprintf(
            "#!/bin/sh\nif [ ! -e %s/clashed ]; then\n  touch %s/clashed\n"
            "  echo 'listen tcp 127.0.0.1:1: bind: address already in use'\n  exit 1\nfi\n"
            "exec %s \"$@\"\n",
            dir, dir, real);
        fake_etcd(dir, "0.0.0-exits", exits);
        fake_etcd(dir, "0.0.0-hangs", hangs);
        fake_etcd(dir, "0.0.0-clash", clash);
        _cleanup_free_ char *saved = xstrdup_null(getenv("GITCD_ETCD_DIR"));
        setenv("GITCD_ETCD_DIR", dir, 1);

        /* A member that exits: a fast failure that shows its log. */
        _cleanup_free_ char *err1 = NULL;
        int r1 = capture_stderr(start_version, (void *)"0.0.0-exits", &err1);
        /* One that never becomes healthy: a timeout that shows its log, and no process left. */
        _cleanup_free_ char *err2 = NULL;
        int r2 = capture_stderr(start_version, (void *)"0.0.0-hangs", &err2);
        /* One that loses a port race: retried with new ports, and healthy. */
        _cleanup_free_ char *err3 = NULL;
        int r3 = capture_stderr(start_version, (void *)"0.0.0-clash", &err3);

        if (saved)
                setenv("GITCD_ETCD_DIR", saved, 1);
        else
                unsetenv("GITCD_ETCD_DIR");
        assert_int_equal(r1, -ECHILD);
        assert_non_null(strstr(err1, "fake etcd gives up: --name=m0"));
        assert_int_equal(r2, -ETIMEDOUT);
        assert_non_null(strstr(err2, "not healthy after 1500 ms"));
        _cleanup_free_ char *pid_path = path_join(dir, "hang.pid");
        _cleanup_free_ char *pid_text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(pid_path, 64, &pid_text, &len), 0);
        assert_true(process_gone(atoi(pid_text)));
        assert_int_equal(r3, 0);
        assert_non_null(strstr(err3, "retrying with new ports"));
        assert_non_null(current);
        assert_healthy(current, 0);
}

/*
 * A child process starts a cluster, reports the etcd pid and the cluster's
 * folder, then dies the given way; the etcd process must not survive it.
 */
static void child_dies(int how)
{
        if (!harness_have_etcd("3.5.16"))
                skip();
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                close(fds[0]);
                struct rlimit no_core = {0, 0};
                setrlimit(RLIMIT_CORE, &no_core);
                harness_cluster *c = NULL;
                if (harness_cluster_start(NULL, &c) < 0)
                        _exit(1);
                char line[4200];
                int len =
                    snprintf(line, sizeof(line), "%d %s\n", (int)c->members[0].pid, c->root_dir);
                if (write(fds[1], line, (size_t)len) != len)
                        _exit(1);
                close(fds[1]);
                if (how == SIGABRT)
                        abort();
                raise(how);
                _exit(2);
        }
        close(fds[1]);
        char buf[4200] = {0};
        size_t got = 0;
        ssize_t r;
        while ((r = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
                got += (size_t)r;
        close(fds[0]);
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), how);

        int pid = 0;
        char root[4100] = {0};
        assert_int_equal(sscanf(buf, "%d %4095s", &pid, root), 2);
        assert_true(pid > 0);
        assert_true(wait_gone(pid));
        if (how == SIGKILL) {
                /* Nothing ran in the child; its folder is ours to remove. */
                assert_int_equal(rm_rf(root), 0);
        } else {
                assert_false(path_exists(root));
        }
}

static void test_child_abort_leaves_nothing(void **state)
{
        child_dies(SIGABRT);
}

static void test_child_sigterm_leaves_nothing(void **state)
{
        child_dies(SIGTERM);
}

static void test_child_sigkill_leaves_nothing(void **state)
{
        child_dies(SIGKILL);
}

/* What the simulated kubelet answers for tailLines and limitBytes, as a kubelet does. */
static void test_kubelet_select(void **state)
{
        (void)state;
        const struct {
                const char *text;
                long tail, limit;
                const char *want;
        } cases[] = {
            {"a\nb\nc\n", -1, -1, "a\nb\nc\n"},
            {"a\nb\nc\n", 2, -1, "b\nc\n"},
            {"a\nb\nc\n", 3, -1, "a\nb\nc\n"},
            {"a\nb\nc\n", 9, -1, "a\nb\nc\n"},
            {"a\nb\nc", 1, -1, "c"},
            {"a\nb\nc\n", 0, -1, ""},
            {"a\nb\nc\n", 2, 3, "b\nc"},
            {"a\nb\nc\n", -1, 0, ""},
            {"", 5, 5, ""},
            {"\n\n", 1, -1, "\n"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *got = kubelet_logs_select(cases[i].text, cases[i].tail, cases[i].limit);
                if (!streq(got, cases[i].want))
                        fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].want);
                free(got);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_free_ports_unique),
            cmocka_unit_test(test_paths),
            cmocka_unit_test(test_kubelet_select),
            cmocka_unit_test_teardown(test_plain_3_5, teardown),
            cmocka_unit_test_teardown(test_plain_3_4, teardown),
            cmocka_unit_test_teardown(test_tls_3_5, teardown),
            cmocka_unit_test_teardown(test_tls_3_4, teardown),
            cmocka_unit_test_teardown(test_start_failures, teardown),
            cmocka_unit_test(test_child_abort_leaves_nothing),
            cmocka_unit_test(test_child_sigterm_leaves_nothing),
            cmocka_unit_test(test_child_sigkill_leaves_nothing),
        };
        if (!harness_have_etcd("3.5.16") && !harness_have_etcd("3.4.23")) {
                fprintf(stderr, "no etcd installed (run scripts/setup)\n");
                return 77;
        }
        return cmocka_run_group_tests(tests, NULL, NULL);
}
