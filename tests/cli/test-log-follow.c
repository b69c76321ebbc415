/*
 * `gitcd log --follow` run as users run it (the real binary) over a real
 * SQLite state file written through the state API while it runs: the
 * events there at the start are printed, then an event appended after it
 * started is printed as it comes, one of another cluster is not (the
 * filters hold), and SIGINT ends it with exit status 0. Deadlines are
 * generous (60 s): the command reads the store every 500 ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "state/state.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define DEADLINE_MS 60000

static void append(state_db *db, const char *cluster, const char *action)
{
        state_audit_event ev = {.time_ms = now_wall_ms(),
                                .cluster = (char *)cluster,
                                .action = (char *)action,
                                .reason = (char *)"from the test",
                                .outcome = (char *)"success"};
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
}

/* Read from fd into out until needle appears or the deadline passes; true when it did. */
static bool read_until(int fd, strbuf *out, const char *needle)
{
        int64_t end = now_mono_ms() + DEADLINE_MS;
        while (!strstr(sb_str(out), needle) && now_mono_ms() < end) {
                char buf[4096];
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n > 0)
                        sb_append_len(out, buf, (size_t)n);
                else if (n == 0)
                        return false;
                else if (errno == EAGAIN)
                        msleep(20);
                else if (errno != EINTR)
                        return false;
        }
        return strstr(sb_str(out), needle) != NULL;
}

static void test_follow(void **state)
{
        (void)state;
        _cleanup_free_ char *dir = harness_tmpdir("log-follow");
        _cleanup_free_ char *path = path_join(dir, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        append(db, "default/a", "spec.accepted");

        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(p[1], 1);
                close(p[0]);
                close(p[1]);
                execl(getenv("GITCD_BIN"), "gitcd", "log", "--follow", "--cluster", "default/a",
                      "-o", "json", "--state", path, (char *)NULL);
                _exit(127);
        }
        harness_track_pid(pid);
        close(p[1]);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        strbuf out = STRBUF_INIT;
        assert_true(read_until(p[0], &out, "\"spec.accepted\""));

        /* appended after it started: printed; another cluster's: not */
        append(db, "default/b", "member.add-learner");
        append(db, "default/a", "member.promote");
        assert_true(read_until(p[0], &out, "\"member.promote\""));
        assert_null(strstr(sb_str(&out), "member.add-learner"));
        assert_null(strstr(sb_str(&out), "default/b"));
        /* each event once */
        const char *first = strstr(sb_str(&out), "spec.accepted");
        assert_null(strstr(first + 1, "spec.accepted"));

        state_close(db);

        assert_int_equal(kill(pid, SIGINT), 0);
        int st = 0;
        int64_t end = now_mono_ms() + DEADLINE_MS;
        pid_t w;
        while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_mono_ms() < end)
                msleep(20);
        assert_int_equal(w, pid);
        harness_untrack_pid(pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        close(p[0]);
        sb_release(&out);
        (void)rm_rf(dir);
}

/* The table form: the heading once, then the rows appended. */
static void test_follow_table(void **state)
{
        (void)state;
        _cleanup_free_ char *dir = harness_tmpdir("log-follow-table");
        _cleanup_free_ char *path = path_join(dir, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        append(db, "default/a", "spec.accepted");
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(p[1], 1);
                close(p[0]);
                close(p[1]);
                execl(getenv("GITCD_BIN"), "gitcd", "log", "-f", "--state", path, (char *)NULL);
                _exit(127);
        }
        harness_track_pid(pid);
        close(p[1]);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        strbuf out = STRBUF_INIT;
        assert_true(read_until(p[0], &out, "spec.accepted"));
        append(db, "default/a", "member.remove");
        assert_true(read_until(p[0], &out, "member.remove"));
        const char *head = strstr(sb_str(&out), "REASON");
        assert_non_null(head);
        assert_null(strstr(head + 1, "REASON"));
        state_close(db);
        assert_int_equal(kill(pid, SIGINT), 0);
        int st = 0;
        int64_t end = now_mono_ms() + DEADLINE_MS;
        pid_t w;
        while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_mono_ms() < end)
                msleep(20);
        assert_int_equal(w, pid);
        harness_untrack_pid(pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        close(p[0]);
        sb_release(&out);
        (void)rm_rf(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_follow),
            cmocka_unit_test(test_follow_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
