/*
 * The consistency row and the repair records (state/consistency.h): the
 * row (the last check, the freeze) survives a reopen whole; one repair runs
 * per cluster, a token is used once whatever its result, and a finished
 * repair never changes again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "state/consistency.h"
#include "tests/state/state-test.h"

#define T0 1790000000000LL

static void test_row(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        state_consistency *v = NULL;
        assert_int_equal(state_consistency_get(db, "prod/main", &v), -ENOENT);

        state_consistency w = {
            .cluster = "prod/main",
            .checked_ms = T0,
            .revision = 1207,
            .compact_revision = 900,
            .verdict = "minority",
            .hashes = "{\"main-0\":\"9e1b44d0\",\"main-1\":\"3a0f12cc\",\"main-2\":\"9e1b44d0\"}",
            .minority = "main-1",
            .duration_ms = 42,
            .attempt_ms = T0,
            .due = true,
            .frozen_ms = T0,
            .frozen_cause = "hashes",
            .frozen_message = "data of main-1 differs",
            .held = "add a learner (3 -> 4)",
            .lifted_ms = T0 - 5,
        };
        assert_int_equal(state_consistency_put(db, &w), 0);
        state_close(db);

        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_consistency_get(db, "prod/main", &v), 0);
        assert_int_equal(v->checked_ms, T0);
        assert_int_equal(v->revision, 1207);
        assert_int_equal(v->compact_revision, 900);
        assert_string_equal(v->verdict, "minority");
        assert_string_equal(v->minority, "main-1");
        assert_non_null(strstr(v->hashes, "3a0f12cc"));
        assert_int_equal(v->duration_ms, 42);
        assert_true(v->due);
        assert_int_equal(v->frozen_ms, T0);
        assert_string_equal(v->frozen_cause, "hashes");
        assert_string_equal(v->held, "add a learner (3 -> 4)");
        assert_int_equal(v->lifted_ms, T0 - 5);
        assert_null(v->attempt_error);

        /* written whole: a lifted freeze leaves nothing behind */
        v->frozen_ms = 0;
        free(v->frozen_cause);
        free(v->frozen_message);
        free(v->held);
        v->frozen_cause = v->frozen_message = v->held = NULL;
        v->due = false;
        assert_int_equal(state_consistency_put(db, v), 0);
        state_consistency_free(v);
        assert_int_equal(state_consistency_get(db, "prod/main", &v), 0);
        assert_int_equal(v->frozen_ms, 0);
        assert_null(v->frozen_cause);
        assert_false(v->due);
        state_consistency_free(v);

        w.cluster = "not a cluster";
        assert_int_equal(state_consistency_put(db, &w), -EINVAL);
        state_close(db);
}

static void test_repairs(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);

        state_repair req = {.cluster = "prod/main",
                            .kind = "replace",
                            .member = "main-1",
                            .token = "incident-7",
                            .requested_by = "Ada <ada@example.com>",
                            .commit = "abcdef0123456789"};
        int64_t id = 0;
        assert_int_equal(state_repair_request(db, &req, T0, &id), 0);
        assert_true(id > 0);
        assert_int_equal(state_repair_token_used(db, "prod/main", "incident-7"), 1);
        assert_int_equal(state_repair_token_used(db, "prod/other", "incident-7"), 0);

        /* one running per cluster; another cluster is another story */
        state_repair recheck = {.cluster = "prod/main", .kind = "recheck"};
        assert_int_equal(state_repair_request(db, &recheck, T0, NULL), -EBUSY);
        recheck.cluster = "prod/other";
        assert_int_equal(state_repair_request(db, &recheck, T0, NULL), 0);

        /* kinds and members that do not go together */
        state_repair bad = {.cluster = "prod/x", .kind = "replace"};
        assert_int_equal(state_repair_request(db, &bad, T0, NULL), -EINVAL);
        bad.kind = "recheck";
        bad.member = "x-0";
        assert_int_equal(state_repair_request(db, &bad, T0, NULL), -EINVAL);
        bad.kind = "rebuild";
        assert_int_equal(state_repair_request(db, &bad, T0, NULL), -EINVAL);

        state_repair *r = NULL;
        assert_int_equal(state_repair_running(db, "prod/main", &r), 0);
        assert_string_equal(r->phase, "requested");
        assert_string_equal(r->member, "main-1");
        assert_string_equal(r->requested_by, "Ada <ada@example.com>");
        free(r->phase);
        r->phase = xstrdup("replacing");
        r->replacement = xstrdup("main-3");
        assert_int_equal(state_repair_update(db, r), 0);
        state_repair_free(r);
        assert_int_equal(state_repair_running(db, "prod/main", &r), 0);
        assert_string_equal(r->phase, "replacing");
        assert_string_equal(r->replacement, "main-3");

        assert_int_equal(state_repair_finish(db, id, "succeeded", NULL, T0 + 9), 0);
        assert_int_equal(state_repair_finish(db, id, "failed", "late", T0 + 10), -EALREADY);
        assert_int_equal(state_repair_update(db, r), -EALREADY);
        assert_int_equal(state_repair_finish(db, id, "running", NULL, T0), -EINVAL);
        state_repair_free(r);
        assert_int_equal(state_repair_running(db, "prod/main", &r), -ENOENT);

        /* the token stays used after the repair ended */
        req.kind = "recheck";
        req.member = NULL;
        assert_int_equal(state_repair_request(db, &req, T0 + 20, NULL), -EALREADY);
        assert_non_null(strstr(state_last_error(), "token already used"));

        state_repair_list l = {0};
        assert_int_equal(state_repair_list_for(db, "prod/main", 0, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->result, "succeeded");
        assert_int_equal(l.items[0]->finished_ms, T0 + 9);
        state_repair_list_release(&l);
        assert_int_equal(state_repair_list_for(db, NULL, 0, &l), 0);
        assert_int_equal(l.n, 2);
        state_repair_list_release(&l);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_row),
            cmocka_unit_test(test_repairs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
