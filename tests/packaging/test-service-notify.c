/*
 * `gitcd run` under systemd's Type=notify, end to end: the test plays the
 * service manager with a real AF_UNIX datagram socket as $NOTIFY_SOCKET and
 * checks what systemd would see. READY=1 arrives only once the first pass
 * has taken the source in (the cluster is then in the state store); with
 * $WATCHDOG_USEC set, WATCHDOG=1 keeps arriving; SIGTERM brings STOPPING=1
 * and a clean exit. The etcd member gitcd starts must not inherit
 * $NOTIFY_SOCKET, or its own READY=1 would reach gitcd's service manager.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* The manager's end: a datagram socket bound at path. */
static int manager_socket(const char *path)
{
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        assert_true(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

/*
 * Wait up to timeout_s for a datagram holding `want` as one of its lines;
 * every datagram seen on the way is appended to *seen. True when it came.
 */
static bool wait_for(int fd, const char *want, int timeout_s, char **seen)
{
        int64_t deadline = now_mono_ms() + (int64_t)timeout_s * 1000;
        for (;;) {
                int64_t left = deadline - now_mono_ms();
                if (left <= 0)
                        return false;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int k = poll(&p, 1, (int)left);
                if (k < 0 && errno == EINTR)
                        continue;
                assert_true(k >= 0);
                if (k == 0)
                        return false;
                char buf[4096];
                ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
                assert_true(n >= 0);
                buf[n] = '\0';
                char *old = *seen;
                *seen = xasprintf("%s%s\n", old ? old : "", buf);
                free(old);
                for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
                        if (streq(line, want))
                                return true;
        }
}

/* Whether /proc/<pid>/environ holds a variable named name. */
static bool process_has_env(pid_t pid, const char *name)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
        char *text = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &text, &len) < 0)
                fail_msg("cannot read %s", path);
        size_t nl = strlen(name);
        bool found = false;
        for (size_t i = 0; i < len; i += strlen(text + i) + 1)
                if (strneq(text + i, name, nl) && text[i + nl] == '=')
                        found = true;
        free(text);
        return found;
}

static void test_notify(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        char *sock_path = path_join(e->root, "notify.sock");
        int fd = manager_socket(sock_path);

        setenv("NOTIFY_SOCKET", sock_path, 1);
        setenv("WATCHDOG_USEC", "1000000", 1);
        pid_t d = e2e_start_daemon(e, NULL);
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");

        char *seen = NULL;
        if (!wait_for(fd, "READY=1", 90, &seen))
                fail_msg("no READY=1 from gitcd run; got:\n%s", seen ? seen : "(nothing)");
        /* READY came after the first pass: the source's cluster is known. */
        json_t *st = e2e_status(e, "alpha");
        assert_non_null(st);
        json_decref(st);

        /* Watchdog pings keep coming while the daemon runs. */
        for (int i = 0; i < 3; i++)
                if (!wait_for(fd, "WATCHDOG=1", 30, &seen))
                        fail_msg("watchdog ping %d missing; got:\n%s", i + 1, seen);

        /* The member does not talk to gitcd's service manager. */
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        pid_t m = e2e_member_pid(e, "alpha", "alpha-0");
        assert_true(m > 0);
        assert_false(process_has_env(m, "NOTIFY_SOCKET"));
        assert_false(process_has_env(m, "WATCHDOG_USEC"));

        assert_int_equal(kill(d, SIGTERM), 0);
        if (!wait_for(fd, "STOPPING=1", 60, &seen))
                fail_msg("no STOPPING=1 after SIGTERM; got:\n%s", seen);
        assert_int_equal(e2e_wait_exit(d), 0);
        /* READY=1 is sent once, however many passes ran. */
        const char *first = strstr(seen, "READY=1");
        assert_non_null(first);
        assert_null(strstr(first + 1, "READY=1"));

        free(seen);
        close(fd);
        free(sock_path);
        e2e_free(e);
}

/* Without $NOTIFY_SOCKET the daemon runs and stops as before. */
static void test_no_socket(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        unsetenv("NOTIFY_SOCKET");
        pid_t d = e2e_start_daemon(e, NULL);
        int64_t t0 = now_mono_ms();
        char *log = NULL;
        while (now_mono_ms() - t0 < 30000) {
                free(log);
                log = e2e_read_log(e, "daemon.log");
                if (strstr(log, "running"))
                        break;
                usleep(50 * 1000);
        }
        assert_non_null(strstr(log, "running"));
        free(log);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_notify),
            cmocka_unit_test(test_no_socket),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
