/*
 * The operations journal: pending -> done | failed | abandoned, finished
 * rows never change again, and what was in flight survives a restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tests/state/state-test.h"

#define T0 1790000000000LL

static void test_lifecycle(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);

        int64_t add, promote, other;
        assert_int_equal(state_op_begin(db, "prod/main", "member.add-learner", "main-3",
                                        "{\"peer_url\":\"http://127.0.0.1:2380\"}", T0, &add),
                         0);
        assert_int_equal(
            state_op_begin(db, "prod/main", "member.promote", "main-3", NULL, T0 + 1, &promote), 0);
        assert_int_equal(
            state_op_begin(db, "dev/aux", "object.apply", "Service/aux", NULL, T0 + 2, &other), 0);
        assert_true(add < promote && promote < other);
        assert_int_equal(state_op_begin(db, "prod/main", "", NULL, NULL, T0, NULL), -EINVAL);
        assert_int_equal(state_op_begin(db, "prod/main", "x", NULL, "{oops", T0, NULL), -EINVAL);

        state_op_list l = {0};
        assert_int_equal(state_op_list_pending(db, "prod/main", &l), 0);
        assert_int_equal(l.n, 2);
        assert_int_equal(l.items[0]->id, add);
        assert_string_equal(l.items[0]->kind, "member.add-learner");
        assert_string_equal(l.items[0]->subject, "main-3");
        assert_int_equal(l.items[0]->state, STATE_OP_PENDING);
        assert_non_null(strstr(l.items[0]->payload_json, "127.0.0.1:2380"));
        state_op_list_release(&l);

        assert_int_equal(state_op_finish(db, add, STATE_OP_DONE, NULL, T0 + 100), 0);
        assert_int_equal(state_op_finish(db, add, STATE_OP_FAILED, "late", T0 + 200), -EALREADY);
        assert_non_null(strstr(state_last_error(), "already done"));
        assert_int_equal(state_op_finish(db, promote, STATE_OP_PENDING, NULL, T0), -EINVAL);
        assert_int_equal(state_op_finish(db, 424242, STATE_OP_DONE, NULL, T0), -ENOENT);
        assert_int_equal(
            state_op_finish(db, promote, STATE_OP_FAILED, "learner not caught up", T0 + 300), 0);

        state_op *op = NULL;
        assert_int_equal(state_op_get(db, add, &op), 0);
        assert_int_equal(op->state, STATE_OP_DONE);
        assert_int_equal(op->finished_ms, T0 + 100);
        assert_null(op->error);
        state_op_free(op);
        assert_int_equal(state_op_get(db, promote, &op), 0);
        assert_int_equal(op->state, STATE_OP_FAILED);
        assert_string_equal(op->error, "learner not caught up");
        assert_string_equal(state_op_state_to_string(op->state), "failed");
        state_op_free(op);

        assert_int_equal(state_op_list_pending(db, NULL, &l), 0);
        assert_int_equal(l.n, 1);
        assert_int_equal(l.items[0]->id, other);
        state_op_list_release(&l);
        state_close(db);

        /* a finished row cannot be rewritten, even with sqlite3 directly */
        sqlite3 *raw;
        assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
        char *err = NULL;
        assert_int_not_equal(
            sqlite3_exec(raw, "UPDATE operations SET state = 'pending'", NULL, NULL, &err),
            SQLITE_OK);
        assert_non_null(strstr(err, "operation already finished"));
        sqlite3_free(err);
        sqlite3_close(raw);
}

static void test_restart_sees_in_flight(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        int64_t id;
        assert_int_equal(state_op_begin(db, "prod/main", "member.remove", "main-4", NULL, T0, &id),
                         0);
        /* the process dies here (no finish); a new one opens the store */
        state_close(db);
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        state_op_list l = {0};
        assert_int_equal(state_op_list_pending(db, NULL, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->kind, "member.remove");
        state_op_list_release(&l);
        assert_int_equal(state_op_abandon_pending(db, "dev/other", "restart", T0 + 1), 0);
        assert_int_equal(state_op_abandon_pending(db, "prod/main", "restart", T0 + 1), 1);
        assert_int_equal(state_op_list_pending(db, NULL, &l), 0);
        assert_int_equal(l.n, 0);
        state_op_list_release(&l);
        state_op *op = NULL;
        assert_int_equal(state_op_get(db, id, &op), 0);
        assert_int_equal(op->state, STATE_OP_ABANDONED);
        assert_string_equal(op->error, "restart");
        state_op_free(op);
        state_close(db);
}

static void test_intent_and_audit_are_atomic(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_begin(db), 0);
        int64_t id;
        assert_int_equal(
            state_op_begin(db, "prod/main", "member.add-learner", "main-3", NULL, T0, &id), 0);
        state_audit_event ev = {.time_ms = T0,
                                .cluster = "prod/main",
                                .action = "member.add-learner",
                                .outcome = "started"};
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        /* a failed append in the same transaction makes the caller roll everything back */
        ev.action = NULL;
        assert_int_equal(state_audit_append(db, &ev, NULL), -EINVAL);
        assert_int_equal(state_rollback(db), 0);
        state_op_list l = {0};
        assert_int_equal(state_op_list_pending(db, NULL, &l), 0);
        assert_int_equal(l.n, 0);
        state_audit_list al = {0};
        assert_int_equal(state_audit_query(db, NULL, &al), 0);
        assert_int_equal(al.n, 0);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_lifecycle),
            cmocka_unit_test(test_restart_sees_in_flight),
            cmocka_unit_test(test_intent_and_audit_are_atomic),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
