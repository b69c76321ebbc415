/*
 * Readers next to a writer: `gitcd log` and `gitcd status` (the real
 * binary) run again and again while another process commits to the same
 * database. WAL lets them read the last committed state without waiting
 * for the writer, and the busy timeout covers the brief moments of a
 * checkpoint. Every run must succeed and show only whole transactions
 * (the writer appends audit events in pairs).
 */
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/state/state-test.h"
#include "util/timeutil.h"

#define CLUSTER "live/main"
#define RUNS    15

static _noreturn_ void writer(const char *path, int progress_fd)
{
        state_db *db = NULL;
        if (state_open(path, STATE_OPEN_READ_WRITE, &db) < 0)
                _exit(2);
        for (unsigned n = 0;; n++) {
                int64_t now = now_wall_ms();
                char member[32], reason[32];
                snprintf(member, sizeof(member), "main-%u", n % 5);
                snprintf(reason, sizeof(reason), "pair %u", n);
                int r = state_begin(db);
                if (r >= 0)
                        r = state_cluster_set_desired(db, CLUSTER, "{\"spec\":{\"replicas\":5}}",
                                                      NULL, "abcdef01", now);
                for (int i = 0; r >= 0 && i < 2; i++) {
                        state_audit_event ev = {.time_ms = now,
                                                .cluster = CLUSTER,
                                                .action = "test.pair",
                                                .reason = reason,
                                                .outcome = "success"};
                        r = state_audit_append(db, &ev, NULL);
                }
                if (r >= 0) {
                        state_member m = {.cluster = CLUSTER,
                                          .name = member,
                                          .ordinal = (int)(n % 5),
                                          .state = n % 2 ? "ready" : "starting"};
                        r = state_member_put(db, &m, now);
                }
                if (r >= 0)
                        r = state_cluster_set_condition(db, CLUSTER, "Progressing",
                                                        n % 2 ? "True" : "False", "Test", NULL,
                                                        now);
                if (r >= 0)
                        r = state_commit(db);
                else
                        (void)state_rollback(db);
                if (r < 0) {
                        fprintf(stderr, "writer: %s\n", state_last_error());
                        _exit(4);
                }
                if (n == 0 && write(progress_fd, "x", 1) != 1)
                        _exit(5);
                /* a busy writer, not a flood: on a loaded machine (and under the
                 * sanitizers) back-to-back commits only measure the disk */
                usleep(2000);
        }
}

static void test_readers_during_writes(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(fds[0]);
                writer(path, fds[1]);
        }
        harness_track_pid(pid);
        close(fds[1]);
        char c;
        assert_int_equal(read(fds[0], &c, 1), 1); /* the first commit is in */
        close(fds[0]);

        int64_t slowest = 0;
        for (int i = 0; i < RUNS; i++) {
                run_result r = {0};
                int64_t t = now_mono_ms();
                char *log_args[] = {"log", "--state", path, "-o", "json", NULL};
                assert_int_equal(run_gitcd(log_args, &r), 0);
                if (r.status != 0)
                        fail_msg("gitcd log failed during writes: %s", r.err);
                /* only whole transactions: events come in pairs */
                size_t lines = count_lines(r.out);
                assert_true(lines >= 2);
                assert_int_equal(lines % 2, 0);
                json_t *first = json_loads(strtok(r.out, "\n"), 0, NULL);
                assert_non_null(first);
                json_decref(first);
                run_result_release(&r);

                char *table_args[] = {"log", "--state", path, "--limit", "5", NULL};
                assert_int_equal(run_gitcd(table_args, &r), 0);
                if (r.status != 0)
                        fail_msg("gitcd log failed during writes: %s", r.err);
                run_result_release(&r);

                char *status_args[] = {"status", "--state", path, NULL};
                assert_int_equal(run_gitcd(status_args, &r), 0);
                if (r.status != 0)
                        fail_msg("gitcd status failed during writes: %s", r.err);
                assert_non_null(strstr(r.out, CLUSTER));
                run_result_release(&r);

                char *one_args[] = {"status", CLUSTER, "--state", path, "-o", "json", NULL};
                assert_int_equal(run_gitcd(one_args, &r), 0);
                if (r.status != 0)
                        fail_msg("gitcd status %s failed during writes: %s", CLUSTER, r.err);
                json_t *o = json_loads(r.out, 0, NULL);
                assert_non_null(o);
                assert_int_equal(json_integer_value(json_object_get(o, "replicas")), 5);
                json_decref(o);
                run_result_release(&r);
                slowest = MAX(slowest, now_mono_ms() - t);
        }
        /* the writer never stopped: it is still running */
        int st;
        assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
        kill(pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(pid);
        printf("# %d rounds of 4 commands next to a writer; slowest round %lld ms\n", RUNS,
               (long long)slowest);

        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), 0);
        assert_int_equal(state_check_integrity(db), 0);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_readers_during_writes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
