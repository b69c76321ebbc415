/*
 * Conditions in the state store: lastTransitionTime changes only when a
 * condition's status changes, however often it is re-asserted; and
 * re-asserting what is already recorded (every idle pass does) writes
 * nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tests/state/state-test.h"

#define T0 1790000000000LL

static const state_condition *find(const state_cluster *c, const char *type)
{
        for (size_t i = 0; i < c->n_conditions; i++)
                if (streq(c->conditions[i].type, type))
                        return &c->conditions[i];
        return NULL;
}

static state_cluster *get(state_db *db, const char *name)
{
        state_cluster *c = NULL;
        assert_int_equal(state_cluster_get(db, name, &c), 0);
        return c;
}

static void test_transition_time_moves_only_on_status_change(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", "{}", NULL, "aaaa", T0), 1);

        /* new condition: a transition at T0 */
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "False",
                                                     "WaitingForSeed", "seed not ready", T0),
                         1);
        state_cluster *c = get(db, "prod/main");
        const state_condition *k = find(c, "Available");
        assert_non_null(k);
        assert_string_equal(k->status, "False");
        assert_int_equal(k->last_transition_ms, T0);
        state_cluster_free(c);

        /* same status, new reason and message: no transition */
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "False",
                                                     "Bootstrapping", "1 of 3 members", T0 + 5000),
                         0);
        c = get(db, "prod/main");
        k = find(c, "Available");
        assert_string_equal(k->reason, "Bootstrapping");
        assert_string_equal(k->message, "1 of 3 members");
        assert_int_equal(k->last_transition_ms, T0);
        state_cluster_free(c);

        /* status changes: transition now */
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "True",
                                                     "QuorumHealthy", NULL, T0 + 9000),
                         1);
        /* re-asserted many times later: unchanged */
        for (int i = 1; i <= 5; i++)
                assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "True",
                                                             "QuorumHealthy", NULL,
                                                             T0 + 9000 + i * 30000),
                                 0);
        c = get(db, "prod/main");
        k = find(c, "Available");
        assert_string_equal(k->status, "True");
        assert_null(k->message);
        assert_int_equal(k->last_transition_ms, T0 + 9000);
        state_cluster_free(c);

        /* conditions are independent of each other */
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Degraded", "Unknown", NULL,
                                                     NULL, T0 + 100000),
                         1);
        c = get(db, "prod/main");
        assert_int_equal(c->n_conditions, 2);
        assert_int_equal(find(c, "Available")->last_transition_ms, T0 + 9000);
        assert_int_equal(find(c, "Degraded")->last_transition_ms, T0 + 100000);
        state_cluster_free(c);

        /* it survives a restart of the process (reopen) */
        state_close(db);
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "True",
                                                     "QuorumHealthy", "ok", T0 + 999999),
                         0);
        c = get(db, "prod/main");
        assert_int_equal(find(c, "Available")->last_transition_ms, T0 + 9000);
        state_cluster_free(c);
        state_close(db);
}

static void test_bad_conditions(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", "{}", NULL, "aaaa", T0), 1);
        assert_int_equal(
            state_cluster_set_condition(db, "prod/main", "Available", "yes", NULL, NULL, T0),
            -EINVAL);
        assert_non_null(strstr(state_last_error(), "True, False or Unknown"));
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "", "True", NULL, NULL, T0),
                         -EINVAL);
        assert_int_equal(
            state_cluster_set_condition(db, "prod/other", "Available", "True", NULL, NULL, T0),
            -ENOENT);
        state_cluster *c = get(db, "prod/main");
        assert_int_equal(c->n_conditions, 0);
        state_cluster_free(c);
        state_close(db);
}

/*
 * An idle pass re-asserts its conditions, the phase and the certificate set
 * as they are: none of that takes the write lock, so it goes through while
 * another writer holds it (it would wait out the busy timeout and fail with
 * -EBUSY otherwise). A changed message still reaches the store.
 */
static void test_unchanged_facts_write_nothing(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", "{}", NULL, "aaaa", T0), 1);
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "True",
                                                     "QuorumHealthy", "3 of 3 voters healthy", T0),
                         1);
        assert_int_equal(state_cluster_set_phase(db, "prod/main", "Running", T0), 0);
        state_cert cert = {
            .member = "main-0", .surface = "peer", .not_after_ms = T0, .serial = "01"};
        assert_int_equal(state_certs_replace(db, "prod/main", &cert, 1), 1);

        sqlite3 *other = NULL;
        assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
        assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "True",
                                                     "QuorumHealthy", "3 of 3 voters healthy",
                                                     T0 + 1000),
                         0);
        assert_int_equal(state_cluster_set_phase(db, "prod/main", "Running", T0 + 1000), 0);
        assert_int_equal(state_certs_replace(db, "prod/main", &cert, 1), 0);
        assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(other);

        /* a member went: the message differs and is stored */
        assert_int_equal(state_cluster_set_condition(db, "prod/main", "Available", "True",
                                                     "QuorumHealthy", "2 of 3 voters healthy",
                                                     T0 + 2000),
                         0);
        state_cluster *c = get(db, "prod/main");
        assert_string_equal(find(c, "Available")->message, "2 of 3 voters healthy");
        assert_int_equal(find(c, "Available")->last_transition_ms, T0);
        assert_string_equal(c->phase, "Running");
        state_cluster_free(c);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_transition_time_moves_only_on_status_change),
            cmocka_unit_test(test_bad_conditions),
            cmocka_unit_test(test_unchanged_facts_write_nothing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
