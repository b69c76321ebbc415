/*
 * Migrations: a database created at every earlier schema version, holding
 * data, opens with the full set of migrations and keeps that data. Also the
 * refusals: a newer schema, and an older one in read-only mode.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tests/state/state-test.h"

#define T0 1790000000000LL

static void exec_sql(const char *path, const char *sql)
{
        sqlite3 *raw;
        assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
        char *err = NULL;
        int rc = sqlite3_exec(raw, sql, NULL, NULL, &err);
        if (rc != SQLITE_OK)
                fprintf(stderr, "sql failed: %s\n", err);
        assert_int_equal(rc, SQLITE_OK);
        sqlite3_free(err);
        sqlite3_close(raw);
}

/* Data written the way a gitcd of schema version v would have written it. */
static void insert_at_version(const char *path, int v)
{
        exec_sql(path,
                 "INSERT INTO revisions (repository, ref, commit_id, author_name, fetched_ms) "
                 "VALUES ('repo', 'refs/heads/main', 'abcdef0123456789', 'Ada', 1);"
                 "INSERT INTO clusters (name, created_ms, updated_ms, desired_json, desired_hash, "
                 "desired_commit, cluster_id, phase) VALUES ('prod/main', 1, 1, "
                 "'{\"spec\":{\"replicas\":3}}', 'h', 'abcdef0123456789', '0123456789abcdef', "
                 "'Running');"
                 "INSERT INTO conditions VALUES ('prod/main', 'Available', 'True', 'Ok', NULL, 7);"
                 "INSERT INTO members (cluster, name, ordinal, member_id, created_ms) "
                 "VALUES ('prod/main', 'main-0', 0, 'fedcba9876543210', 1);");
        if (v >= 2)
                exec_sql(path, "INSERT INTO operations (cluster, kind, subject, started_ms) "
                               "VALUES ('prod/main', 'member.add-learner', 'main-1', 2);"
                               "INSERT INTO audit (time_ms, cluster, action, outcome) "
                               "VALUES (3, 'prod/main', 'member.add-learner', 'success');");
        if (v >= 3)
                exec_sql(path, "INSERT INTO objects (cluster, kind, namespace, name, hash, "
                               "applied_ms) VALUES ('prod/main', 'Service', 'prod', 'main', "
                               "'h1', 4);");
}

static void test_every_earlier_version(void **state)
{
        (void)state;
        int latest = state_schema_version();
        assert_true(latest >= 3);
        for (int k = 1; k < latest; k++) {
                _cleanup_free_ char *path = test_db_path();
                state_db *db = NULL;
                assert_int_equal(state_open_at_version(path, k, &db), 0);
                state_close(db);
                insert_at_version(path, k);

                /* read-only mode does not migrate: a clear refusal */
                assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), -EPROTO);
                assert_non_null(strstr(state_last_error(), "older than this gitcd"));

                assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
                state_cluster *c = NULL;
                assert_int_equal(state_cluster_get(db, "prod/main", &c), 0);
                assert_string_equal(c->cluster_id, "0123456789abcdef");
                assert_string_equal(c->phase, "Running");
                assert_int_equal(c->desired_replicas, 3);
                assert_int_equal(c->n_conditions, 1);
                assert_int_equal(c->conditions[0].last_transition_ms, 7);
                state_cluster_free(c);
                state_member *m = NULL;
                assert_int_equal(state_member_get(db, "prod/main", "main-0", &m), 0);
                assert_string_equal(m->member_id, "fedcba9876543210");
                state_member_free(m);
                state_revision *rev = NULL;
                assert_int_equal(state_revision_get(db, "abcdef01", &rev), 0);
                assert_string_equal(rev->author_name, "Ada");
                state_revision_free(rev);

                state_op_list ops = {0};
                assert_int_equal(state_op_list_pending(db, NULL, &ops), 0);
                assert_int_equal(ops.n, k >= 2 ? 1 : 0);
                state_op_list_release(&ops);
                state_audit_list al = {0};
                assert_int_equal(state_audit_query(db, NULL, &al), 0);
                assert_int_equal(al.n, k >= 2 ? 1 : 0);
                state_audit_list_release(&al);
                state_object_list ol = {0};
                assert_int_equal(state_object_list_for(db, "prod/main", &ol), 0);
                assert_int_equal(ol.n, k >= 3 ? 1 : 0);
                state_object_list_release(&ol);

                /* and the migrated database works like a new one */
                state_object o = {.cluster = "prod/main",
                                  .kind = "PodDisruptionBudget",
                                  .name = "main",
                                  .hash = "h",
                                  .applied_ms = T0};
                assert_int_equal(state_object_record(db, &o), 0);
                state_audit_event ev = {.time_ms = T0, .action = "spec.applied"};
                assert_int_equal(state_audit_append(db, &ev, NULL), 0);
                assert_int_equal(state_check_integrity(db), 0);
                state_close(db);
                assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), 0);
                state_close(db);
        }
        state_db *db = NULL;
        assert_int_equal(state_open_at_version("/nonexistent/x.db", 0, &db), -EINVAL);
        assert_int_equal(state_open_at_version("/nonexistent/x.db", latest + 1, &db), -EINVAL);
}

/* A cluster terminal before schema 6 (Progressing False, DeadlineExceeded) stays terminal. */
static void test_terminal_state_survives_migration_6(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open_at_version(path, 5, &db), 0);
        state_close(db);
        exec_sql(path, "INSERT INTO clusters (name, created_ms, updated_ms, progress_deadline_ms) "
                       "VALUES ('prod/stuck', 1, 1, 5), ('prod/fine', 1, 1, 5);"
                       "INSERT INTO conditions VALUES ('prod/stuck', 'Progressing', 'False', "
                       "'DeadlineExceeded', 'no convergence within 60s: x', 7);"
                       "INSERT INTO conditions VALUES ('prod/fine', 'Progressing', 'True', "
                       "'ScalingUp', 'add a learner', 7);");
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        state_cluster *c = NULL;
        assert_int_equal(state_cluster_get(db, "prod/stuck", &c), 0);
        assert_string_equal(c->terminal_reason, "DeadlineExceeded");
        assert_string_equal(c->terminal_message, "no convergence within 60s: x");
        state_cluster_free(c);
        assert_int_equal(state_cluster_get(db, "prod/fine", &c), 0);
        assert_null(c->terminal_reason);
        state_cluster_free(c);
        /* Cleared like any other field. */
        assert_int_equal(state_cluster_set_terminal(db, "prod/stuck", NULL, NULL, T0), 0);
        assert_int_equal(state_cluster_get(db, "prod/stuck", &c), 0);
        assert_null(c->terminal_reason);
        state_cluster_free(c);
        assert_int_equal(state_cluster_set_terminal(db, "prod/none", "DeadlineExceeded", "m", T0),
                         -ENOENT);
        state_close(db);
}

/* Schema 7: the member facts kept in the runtime JSON move to their own columns. */
static void test_member_record_columns_migration_7(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open_at_version(path, 6, &db), 0);
        state_close(db);
        exec_sql(path,
                 "INSERT INTO clusters (name, created_ms, updated_ms) VALUES ('prod/main', 1, 1);"
                 "INSERT INTO members (cluster, name, ordinal, member_id, state, runtime, "
                 "created_ms) VALUES ('prod/main', 'main-1', 1, 'fedcba9876543210', 'ready', "
                 "'{\"initial_cluster\":\"main-0=http://a:2380,main-1=http://b:2380\","
                 "\"initial_cluster_state\":\"existing\",\"command\":\"etcd --name=main-1\"}', "
                 "1), ('prod/main', 'main-2', 2, NULL, 'absent', NULL, 1);");
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        state_member *m = NULL;
        assert_int_equal(state_member_get(db, "prod/main", "main-1", &m), 0);
        assert_string_equal(m->initial_cluster, "main-0=http://a:2380,main-1=http://b:2380");
        assert_string_equal(m->initial_cluster_state, "existing");
        assert_true(m->initialized);
        assert_null(m->config_hash);
        /* Only what an older gitcd kept there is left in the runtime JSON. */
        assert_string_equal(m->runtime_json, "{\"command\":\"etcd --name=main-1\"}");
        state_member_free(m);
        assert_int_equal(state_member_get(db, "prod/main", "main-2", &m), 0);
        assert_false(m->initialized);
        assert_null(m->initial_cluster);
        /* Written and read back like any other column. */
        free(m->config_hash);
        m->config_hash = xstrdup("abc");
        m->initial_cluster_state = xstrdup("new");
        assert_int_equal(state_member_put(db, m, T0), 0);
        state_member_free(m);
        assert_int_equal(state_member_get(db, "prod/main", "main-2", &m), 0);
        assert_string_equal(m->config_hash, "abc");
        assert_string_equal(m->initial_cluster_state, "new");
        free(m->initial_cluster_state);
        m->initial_cluster_state = xstrdup("sideways");
        assert_int_equal(state_member_put(db, m, T0), -EINVAL);
        state_member_free(m);
        state_close(db);
}

static void test_newer_schema_is_refused(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        state_close(db);
        _cleanup_free_ char *bump =
            xasprintf("PRAGMA user_version = %d", state_schema_version() + 1);
        exec_sql(path, bump);
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), -EPROTO);
        assert_non_null(strstr(state_last_error(), "newer than this gitcd"));
        assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), -EPROTO);
}

static void test_other_programs_database_is_refused(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        exec_sql(path, "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('hello')");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), -EBADMSG);
        assert_non_null(strstr(state_last_error(), "not a gitcd state database"));
        /* and it was left alone */
        exec_sql(path, "SELECT body FROM notes");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_earlier_version),
            cmocka_unit_test(test_terminal_state_survives_migration_6),
            cmocka_unit_test(test_member_record_columns_migration_7),
            cmocka_unit_test(test_newer_schema_is_refused),
            cmocka_unit_test(test_other_programs_database_is_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
