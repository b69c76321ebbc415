/*
 * The intake's verdicts in the state store (state/verdicts.h) on a real
 * SQLite file: a verdict recorded once per head (the same again is not
 * new; another message or commit is), one row per source and cluster,
 * cleared when the cluster is taken in, and a source's stale rows dropped
 * without touching another source's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "state/verdicts.h"
#include "tests/state/state-test.h"

static void test_verdicts(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);

        /* new, then the same verdict at the same head: recorded already */
        assert_int_equal(state_verdict_set(db, "a", "prod/main", "held", "waiting", "c1", 1), 1);
        assert_int_equal(state_verdict_set(db, "a", "prod/main", "held", "waiting", "c1", 2), 0);
        /* another head or another message is new */
        assert_int_equal(state_verdict_set(db, "a", "prod/main", "held", "waiting", "c2", 3), 1);
        assert_int_equal(state_verdict_set(db, "a", "prod/main", "held", "more", "c2", 4), 1);
        /* a plain directory has no commit */
        assert_int_equal(state_verdict_set(db, "a", "prod/x", "refused", "no", NULL, 5), 1);
        assert_int_equal(state_verdict_set(db, "a", "prod/x", "refused", "no", NULL, 6), 0);
        assert_int_equal(state_verdict_set(db, "b", "prod/main", "refused", "other", "c9", 7), 1);
        /* nothing else is a verdict */
        assert_int_equal(state_verdict_set(db, "a", "prod/main", "maybe", "?", "c2", 8), -EINVAL);
        assert_int_equal(state_verdict_set(db, "a", "main", "held", "?", "c2", 8), -EINVAL);

        state_verdict_list l = {0};
        assert_int_equal(state_verdict_list_get(db, "prod/main", &l), 0);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.items[0]->source, "a");
        assert_string_equal(l.items[0]->message, "more");
        assert_string_equal(l.items[0]->commit, "c2");
        assert_int_equal(l.items[0]->time_ms, 4);
        assert_string_equal(l.items[1]->verdict, "refused");
        state_verdict_list_release(&l);

        /* source a keeps only prod/x; b's row stays */
        const char *keep[] = {"prod/x"};
        assert_int_equal(state_verdict_retain(db, "a", keep, 1), 0);
        assert_int_equal(state_verdict_list_get(db, NULL, &l), 0);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.items[0]->cluster, "prod/main");
        assert_string_equal(l.items[0]->source, "b");
        assert_string_equal(l.items[1]->cluster, "prod/x");
        assert_null(l.items[1]->commit);
        state_verdict_list_release(&l);

        assert_int_equal(state_verdict_clear(db, "a", "prod/x"), 0);
        assert_int_equal(state_verdict_list_get(db, "prod/x", &l), 0);
        assert_int_equal(l.n, 0);
        state_verdict_list_release(&l);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_verdicts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
