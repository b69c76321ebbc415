/*
 * `gitcd run`, the daemon, end to end: it takes in a new cluster file and a
 * later edit without being restarted (polling its source), notices a
 * member's death at once, and on SIGTERM finishes its step and exits 0 while
 * the members keep running. Two clusters are reconciled side by side.
 *
 * A source whose remote accepts connections and never answers stalls its
 * fetch until the time budget (120 s) is spent; meanwhile the daemon keeps
 * reconciling the other source, a Git repository (a dead member is
 * restarted, a new commit is fetched and taken in), and SIGHUP and SIGTERM
 * end the stalled fetch.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static void test_daemon(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        /* started with a low soft limit on descriptors, the daemon raises it to the hard one */
        struct rlimit mine, low, its;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &mine), 0);
        low = mine;
        if (low.rlim_max > 512)
                low.rlim_cur = 512;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
        pid_t d = e2e_start_daemon(e, NULL);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &mine), 0);
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        assert_int_equal(prlimit(d, RLIMIT_NOFILE, NULL, &its), 0);
        assert_true(its.rlim_cur == its.rlim_max || its.rlim_cur == (rlim_t)1 << 20);

        /* New file and an edit, taken in by polling. */
        e2e_write_cluster(e, "b.yaml", "beta", 1, "3.5.16");
        e2e_write_cluster(e, "a.yaml", "alpha", 3, "3.5.16");
        assert_true(e2e_wait_ready(e, "beta", 1, 60));
        assert_true(e2e_wait_ready(e, "alpha", 3, 90));

        /* A member dies: restarted by the daemon, same member. */
        pid_t m = e2e_member_pid(e, "alpha", "alpha-1");
        assert_true(m > 0);
        kill(m, SIGKILL);
        int64_t t0 = now_mono_ms();
        pid_t m2 = 0;
        while (now_mono_ms() - t0 < 30000 &&
               ((m2 = e2e_member_pid(e, "alpha", "alpha-1")) == 0 || m2 == m))
                usleep(50 * 1000);
        assert_true(m2 > 0 && m2 != m);
        assert_true(e2e_wait_ready(e, "alpha", 3, 60));
        assert_int_equal(e2e_audit_count(e, "alpha", "member.remove"), 0);

        /* SIGHUP re-reads the configuration files; the daemon carries on. */
        assert_int_equal(kill(d, SIGHUP), 0);
        usleep(500 * 1000);
        assert_int_equal(waitpid(d, NULL, WNOHANG), 0);

        /* A cluster removed from the source is orphaned: reported, left running. */
        char *b = xasprintf("%s/b.yaml", e->source);
        assert_int_equal(unlink(b), 0);
        free(b);
        int64_t t2 = now_mono_ms();
        bool orphaned = false;
        while (!orphaned && now_mono_ms() - t2 < 30000) {
                orphaned = e2e_audit_count(e, "beta", "cluster.orphaned") == 1;
                usleep(200 * 1000);
        }
        assert_true(orphaned);
        assert_true(e2e_member_pid(e, "beta", "beta-0") > 0);

        /* SIGTERM: a clean exit; members keep running. */
        assert_int_equal(kill(d, SIGTERM), 0);
        int status = 0;
        int64_t t1 = now_mono_ms();
        while (waitpid(d, &status, WNOHANG) == 0 && now_mono_ms() - t1 < 15000)
                usleep(50 * 1000);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        harness_untrack_pid(d);
        assert_true(e2e_member_pid(e, "alpha", "alpha-0") > 0);
        assert_true(e2e_member_pid(e, "beta", "beta-0") > 0);

        /* Only an explicit prune stops an orphan's members; its data is kept. */
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "apply", "-q", "--prune", "--source", e->source,
                                 "--timeout", "60s", NULL),
                         0);
        free(out);
        /* a converged cluster's line says what gitcd found, never an empty message */
        out = NULL;
        assert_int_equal(e2e_run(e, &out, "apply", "-o", "plain", "--source", e->source,
                                 "--timeout", "60s", NULL),
                         0);
        if (!strstr(out, "✓ default/alpha: 3 of 3 voters healthy"))
                fprintf(stderr, "apply said:\n%s\n", out);
        assert_non_null(strstr(out, "✓ default/alpha: 3 of 3 voters healthy"));
        free(out);
        assert_int_equal(e2e_member_pid(e, "beta", "beta-0"), 0);
        assert_true(e2e_member_pid(e, "alpha", "alpha-0") > 0);
        char *bdir = e2e_member_dir(e, "beta", "beta-0");
        char *bdata = xasprintf("%s/data/member", bdir);
        assert_int_equal(access(bdata, F_OK), 0);
        free(bdir);
        free(bdata);
        assert_int_equal(e2e_audit_count(e, "beta", "cluster.pruned"), 1);
        e2e_free(e);
}

/* git add -A && git commit in the source folder (a repository from the first call). */
static void commit_source(e2e *e, const char *message)
{
        char *cmd = xasprintf("cd '%s' && (test -d .git || git init -q -b main) && git add -A && "
                              "git -c user.name=CI -c user.email=ci@example.org "
                              "-c commit.gpgsign=false commit -q -m '%s'",
                              e->source, message);
        assert_int_equal(system(cmd), 0);
        free(cmd);
}

/* A connection to the stalled server, accepted within timeout_s; -1 when none came. */
static int accept_within(int lfd, int timeout_s)
{
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, timeout_s * 1000) <= 0)
                return -1;
        return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* Whether the peer (the fetch child) closes the connection within timeout_s. */
static bool closed_within(int fd, int timeout_s)
{
        int64_t end = now_mono_ms() + timeout_s * 1000;
        for (;;) {
                int64_t left = end - now_mono_ms();
                struct pollfd p = {.fd = fd, .events = POLLIN};
                char buf[4096];
                if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                        return false;
                ssize_t k = read(fd, buf, sizeof(buf)); /* the TLS hello, then the end */
                if (k == 0 || (k < 0 && errno == ECONNRESET))
                        return true;
                if (k < 0 && errno != EINTR && errno != EAGAIN)
                        return false;
        }
}

static void test_stalled_source(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        commit_source(e, "alpha");

        /* The kernel completes the handshake; nobody ever answers. */
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(lfd >= 0);
        assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(lfd, 8), 0);
        assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);

        char *text = xasprintf("interval: 1s\n"
                               "sources:\n"
                               "  - name: local\n"
                               "    url: %s\n"
                               "  - name: stalled\n"
                               "    url: https://127.0.0.1:%d/repo.git\n",
                               e->source, ntohs(sa.sin_port));
        char *cfg = path_join(e->root, "gitcd.yaml");
        assert_int_equal(write_file_atomic(cfg, text, strlen(text), 0600), 0);
        free(text);
        const char *args[] = {"run", "--config", cfg, NULL};
        pid_t d = e2e_start(e, args, "daemon.log");

        /* The Git source's cluster starts although the other source's fetch hangs. */
        int c1 = accept_within(lfd, 30);
        assert_true(c1 >= 0);
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));

        /* While that fetch hangs, a dead member is restarted. */
        pid_t m = e2e_member_pid(e, "alpha", "alpha-0");
        assert_true(m > 0);
        kill(m, SIGKILL);
        int64_t t0 = now_mono_ms();
        pid_t m2 = 0;
        while (now_mono_ms() - t0 < 30000 &&
               ((m2 = e2e_member_pid(e, "alpha", "alpha-0")) == 0 || m2 == m))
                usleep(50 * 1000);
        assert_true(m2 > 0 && m2 != m);

        /* ... and a new commit of the Git source is fetched and taken in. */
        e2e_write_cluster(e, "a.yaml", "alpha", 2, "3.5.16");
        commit_source(e, "alpha: 2 members");
        assert_true(e2e_wait_ready(e, "alpha", 2, 90));

        /* SIGHUP reopens the sources: the stalled fetch is killed and started again. */
        assert_int_equal(kill(d, SIGHUP), 0);
        assert_true(closed_within(c1, 15));
        close(c1);
        int c2 = accept_within(lfd, 30);
        assert_true(c2 >= 0);

        /* SIGTERM with a fetch in flight: a clean exit, the fetch ended. */
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        assert_true(closed_within(c2, 15));
        close(c2);
        close(lfd);
        assert_true(e2e_member_pid(e, "alpha", "alpha-0") > 0);
        free(cfg);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_daemon),
            cmocka_unit_test(test_stalled_source),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
