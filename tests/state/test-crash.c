/*
 * Crash safety: a writer killed with SIGKILL at random points, over
 * hundreds of transactions, never leaves a database that fails to open,
 * fails PRAGMA integrity_check, or shows half a transaction.
 *
 * The writer (a forked child) commits batches in a loop; each batch writes
 * one journal row, two audit events and one member row carrying the same
 * batch id, in one transaction, and reports each commit on a pipe. The
 * parent lets it commit a random number of batches (sometimes none, so the
 * kill can also land while the database is being created), waits a random
 * moment, kills it, reopens the database like a restarted reconciler and
 * checks that every batch id has all four rows or none.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tests/state/state-test.h"
#include "util/timeutil.h"

#define CLUSTER    "crash/test"
#define MIN_ROUNDS 25
#define MIN_BATCH  300

static _noreturn_ void writer(const char *path, int progress_fd, unsigned seed)
{
        state_db *db = NULL;
        if (state_open(path, STATE_OPEN_READ_WRITE, &db) < 0)
                _exit(2);
        if (state_cluster_set_desired(db, CLUSTER, "{\"spec\":{\"replicas\":3}}", NULL, "abcd",
                                      now_wall_ms()) < 0)
                _exit(3);
        for (uint64_t n = 0;; n++) {
                char batch[40], member[48];
                snprintf(batch, sizeof(batch), "%u-%llu", seed, (unsigned long long)n);
                snprintf(member, sizeof(member), "b%s", batch);
                int64_t now = now_wall_ms(), id;
                int r = state_begin(db);
                if (r >= 0)
                        r = state_op_begin(db, CLUSTER, "test.batch", batch, "{\"step\":\"add\"}",
                                           now, &id);
                for (int i = 0; r >= 0 && i < 2; i++) {
                        state_audit_event ev = {.time_ms = now,
                                                .cluster = CLUSTER,
                                                .action = "test.batch",
                                                .reason = batch,
                                                .after_json = "{\"voters\":3}",
                                                .outcome = "success"};
                        r = state_audit_append(db, &ev, NULL);
                }
                if (r >= 0) {
                        state_member m = {.cluster = CLUSTER,
                                          .name = member,
                                          .ordinal = (int)(n % 1000),
                                          .state = "ready",
                                          .runtime_json = "{\"pid\":1}"};
                        r = state_member_put(db, &m, now);
                }
                if (r >= 0)
                        r = state_op_finish(db, id, STATE_OP_DONE, NULL, now);
                if (r >= 0)
                        r = state_commit(db);
                else
                        (void)state_rollback(db);
                if (r < 0)
                        _exit(4);
                if (write(progress_fd, "x", 1) != 1)
                        _exit(5);
        }
}

/* Every batch id has exactly 2 audit rows, 1 member and 1 journal row. Returns the batch count. */
static size_t check_batches(const char *path)
{
        sqlite3 *raw;
        assert_int_equal(sqlite3_open_v2(path, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_stmt *st;
        assert_int_equal(
            sqlite3_prepare_v2(raw,
                               "SELECT b, sum(a), sum(m), sum(o) FROM ("
                               " SELECT reason AS b, 1 AS a, 0 AS m, 0 AS o FROM audit"
                               "  WHERE action = 'test.batch'"
                               " UNION ALL SELECT substr(name, 2), 0, 1, 0 FROM members"
                               "  WHERE cluster = '" CLUSTER "'"
                               " UNION ALL SELECT subject, 0, 0, 1 FROM operations"
                               "  WHERE kind = 'test.batch' AND state = 'done'"
                               " UNION ALL SELECT subject, 0, 0, 100 FROM operations"
                               "  WHERE kind = 'test.batch' AND state <> 'done'"
                               ") GROUP BY b",
                               -1, &st, NULL),
            SQLITE_OK);
        size_t n = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int a = sqlite3_column_int(st, 1), m = sqlite3_column_int(st, 2),
                    o = sqlite3_column_int(st, 3);
                if (a != 2 || m != 1 || o != 1)
                        fail_msg("batch %s is half-written: %d audit, %d member, %d journal",
                                 (const char *)sqlite3_column_text(st, 0), a, m, o);
                n++;
        }
        assert_int_equal(rc, SQLITE_DONE);
        sqlite3_finalize(st);
        sqlite3_close(raw);
        return n;
}

static void sleep_us(long us)
{
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void test_sigkill_at_random_points(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
        printf("# seed %u\n", seed);
        srand(seed);
        size_t batches = 0, committed_seen = 0;
        int rounds = 0;
        while (rounds < MIN_ROUNDS || batches < MIN_BATCH) {
                assert_true(rounds < 400);
                int fds[2];
                assert_int_equal(pipe(fds), 0);
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        close(fds[0]);
                        writer(path, fds[1], seed + (unsigned)rounds);
                }
                harness_track_pid(pid);
                close(fds[1]);
                /* let it commit 0..40 batches, then kill it a random moment later */
                int want = rounds == 0 ? 1 : rand() % 41;
                char buf[64];
                int got = 0;
                while (got < want) {
                        ssize_t k = read(fds[0], buf, MIN((size_t)(want - got), sizeof(buf)));
                        if (k <= 0)
                                break;
                        got += (int)k;
                }
                sleep_us(rand() % 4000);
                kill(pid, SIGKILL);
                int st;
                while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
                harness_untrack_pid(pid);
                while (read(fds[0], buf, sizeof(buf)) > 0)
                        got += 0; /* drain */
                close(fds[0]);
                if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
                        fail_msg("the writer exited on its own (status %d)", st);
                committed_seen += (size_t)got;

                /* restart: the database opens, is intact, and holds whole batches */
                state_db *db = NULL;
                int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
                if (r < 0)
                        fail_msg("reopening after kill %d: %s", rounds, state_last_error());
                assert_int_equal(state_check_integrity(db), 0);
                state_op_list pending = {0};
                assert_int_equal(state_op_list_pending(db, NULL, &pending), 0);
                assert_int_equal(pending.n, 0); /* begun and finished in one transaction */
                state_op_list_release(&pending);
                state_close(db);
                size_t n = check_batches(path);
                /* every batch the writer reported as committed is there */
                assert_true(n >= committed_seen);
                batches = n;
                rounds++;
        }
        printf("# %d kills, %zu whole batches (%zu rows), nothing half-written\n", rounds, batches,
               batches * 4);
}

static void test_sigkill_while_creating(void **state)
{
        (void)state;
        int complete = 0;
        for (int i = 0; i < 20; i++) {
                _cleanup_free_ char *path = test_db_path();
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        state_db *db = NULL;
                        _exit(state_open(path, STATE_OPEN_READ_WRITE, &db) < 0 ? 2 : 0);
                }
                harness_track_pid(pid);
                sleep_us(rand() % 20000);
                kill(pid, SIGKILL);
                int st;
                while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
                harness_untrack_pid(pid);
                if (WIFEXITED(st)) {
                        assert_int_equal(WEXITSTATUS(st), 0);
                        complete++;
                }
                /* whatever step the kill interrupted, the next open finishes the job */
                state_db *db = NULL;
                if (state_open(path, STATE_OPEN_READ_WRITE, &db) < 0)
                        fail_msg("reopening after a kill during creation: %s", state_last_error());
                assert_int_equal(state_check_integrity(db), 0);
                state_close(db);
                assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), 0);
                state_close(db);
        }
        printf("# 20 kills during creation (%d had finished first)\n", complete);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sigkill_at_random_points),
            cmocka_unit_test(test_sigkill_while_creating),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
