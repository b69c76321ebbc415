/*
 * Unit tests for the state store's records on real SQLite files: open
 * modes, revisions, clusters, members, applied objects and transactions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "state/recovery.h"
#include "state/restores.h"
#include "tests/state/state-test.h"

#define T0 1790000000000LL /* 2026-09-21 */

static const char *spec3 = "{\"apiVersion\":\"gitcd.io/v1alpha1\",\"kind\":\"EtcdCluster\","
                           "\"spec\":{\"replicas\":3,\"version\":\"3.5.16\"}}";
static const char *spec5 = "{\"apiVersion\":\"gitcd.io/v1alpha1\",\"kind\":\"EtcdCluster\","
                           "\"spec\":{\"replicas\":5,\"version\":\"3.5.16\"}}";

static state_db *open_rw(const char *path)
{
        state_db *db = NULL;
        int r = state_open(path, STATE_OPEN_READ_WRITE, &db);
        if (r < 0)
                fprintf(stderr, "%s\n", state_last_error());
        assert_int_equal(r, 0);
        return db;
}

static void test_read_only_missing_creates_nothing(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        _cleanup_free_ char *dir = xstrdup(path);
        *strrchr(dir, '/') = '\0';
        _cleanup_free_ char *nested = path_join(dir, "sub/state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(nested, STATE_OPEN_READ_ONLY, &db), -ENOENT);
        assert_null(db);
        _cleanup_free_ char *want =
            xasprintf("no state at %s (nothing has been applied yet)", nested);
        assert_non_null(strstr(state_last_error(), want));
        _cleanup_free_ char *sub = path_join(dir, "sub");
        assert_false(path_exists(sub));
        assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), -ENOENT);
        assert_false(path_exists(path));
}

static void test_read_write_creates_folder_and_schema(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        _cleanup_free_ char *nested = xasprintf("%s.d/deeper/state.db", path);
        state_db *db = open_rw(nested);
        assert_true(path_exists(nested));
        assert_string_equal(state_path(db), nested);
        state_close(db);

        sqlite3 *raw;
        assert_int_equal(sqlite3_open(nested, &raw), SQLITE_OK);
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &st, NULL), 0);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(st, 0), state_schema_version());
        sqlite3_finalize(st);
        assert_int_equal(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, NULL), 0);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
        sqlite3_finalize(st);
        sqlite3_close(raw);

        /* reopening an up-to-date database changes nothing; read-only refuses writes */
        db = open_rw(nested);
        state_close(db);
        assert_int_equal(state_open(nested, STATE_OPEN_READ_ONLY, &db), 0);
        assert_int_equal(state_cluster_set_desired(db, "ns/a", spec3, NULL, "abcd", T0), -EROFS);
        assert_non_null(strstr(state_last_error(), "read-only"));
        state_close(db);
        state_close(NULL);
}

static void test_revisions(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        state_revision rev = {
            .repository = "ssh://git@127.0.0.1/clusters.git",
            .ref = "refs/heads/main",
            .commit = "0123456789abcdef0123456789abcdef01234567",
            .author_name = "Ada Lovelace",
            .author_email = "ada@example.org",
            .committer = "Ada Lovelace <ada@example.org>",
            .commit_time_ms = T0,
            .message = "scale main to 5",
            .fetched_ms = T0 + 1000,
        };
        assert_int_equal(state_revision_record(db, &rev), 0);
        rev.commit = "0123ffff89abcdef0123456789abcdef01234567";
        rev.fetched_ms = T0 + 2000;
        assert_int_equal(state_revision_record(db, &rev), 0);

        state_revision *got = NULL;
        assert_int_equal(state_revision_get(db, "0123", &got), -EINVAL);
        assert_non_null(strstr(state_last_error(), "ambiguous"));
        assert_int_equal(state_revision_get(db, "01234567", &got), 0);
        assert_string_equal(got->author_name, "Ada Lovelace");
        assert_string_equal(got->message, "scale main to 5");
        assert_false(got->signature_verified);
        state_revision_free(got);
        assert_int_equal(state_revision_get(db, "012", &got), -EINVAL);
        assert_int_equal(state_revision_get(db, "beef", &got), -ENOENT);

        /* seen again, now with a verified signature */
        rev.commit = "0123456789abcdef0123456789abcdef01234567";
        rev.fetched_ms = T0 + 3000;
        rev.signature_verified = true;
        rev.signature_key = "SHA256:abcdefgh";
        assert_int_equal(state_revision_record(db, &rev), 0);
        assert_int_equal(state_revision_latest(db, rev.repository, rev.ref, &got), 0);
        assert_string_equal(got->commit, rev.commit);
        assert_true(got->signature_verified);
        assert_string_equal(got->signature_key, "SHA256:abcdefgh");
        state_revision_free(got);
        assert_int_equal(state_revision_latest(db, rev.repository, "refs/heads/x", &got), -ENOENT);
        state_close(db);
}

static void test_clusters(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", spec3, NULL, "aaaa1111", T0),
                         1);
        assert_int_equal(
            state_cluster_set_desired(db, "prod/main", spec3, NULL, "aaaa1111", T0 + 10), 0);
        /* same spec from a later commit: not a change, but the commit is recorded */
        assert_int_equal(
            state_cluster_set_desired(db, "prod/main", spec3, NULL, "bbbb2222", T0 + 20), 0);
        assert_int_equal(
            state_cluster_set_desired(db, "dev/aux", spec5, "explicit-hash", "cccc", T0), 1);
        assert_int_equal(state_cluster_set_desired(db, "main", spec3, NULL, "x", T0), -EINVAL);
        assert_non_null(strstr(state_last_error(), "namespace/name"));
        assert_int_equal(state_cluster_set_desired(db, "a/B", spec3, NULL, "x", T0), -EINVAL);
        assert_int_equal(state_cluster_set_desired(db, "a/b", "[1]", NULL, "x", T0), -EINVAL);

        state_cluster *c = NULL;
        assert_int_equal(state_cluster_get(db, "prod/main", &c), 0);
        assert_string_equal(c->desired_commit, "bbbb2222");
        assert_int_equal(strlen(c->desired_hash), 64);
        assert_int_equal(c->desired_ms, T0);
        assert_int_equal(c->desired_replicas, 3);
        assert_string_equal(c->desired_version, "3.5.16");
        assert_null(c->observed_json);
        assert_null(c->cluster_id);
        state_cluster_free(c);

        assert_int_equal(state_cluster_latch(db, "prod/main", spec3, NULL, T0 + 600000, T0), 0);
        assert_int_equal(state_cluster_latch(db, "prod/none", spec3, NULL, 0, T0), -ENOENT);
        assert_int_equal(state_cluster_set_id(db, "prod/main", "8e9e05c52164694d", T0), 0);
        assert_int_equal(state_cluster_set_id(db, "prod/main", "8E9E05C52164694D", T0), -EINVAL);
        assert_int_equal(state_cluster_set_id(db, "prod/main", "1234", T0), -EINVAL);
        assert_int_equal(state_cluster_set_phase(db, "prod/main", "Running", T0), 0);
        assert_int_equal(state_cluster_set_version(db, "prod/main", "3.5.16", T0), 0);
        assert_int_equal(state_cluster_set_phase(db, "prod/none", "Running", T0), -ENOENT);

        assert_int_equal(state_cluster_get(db, "prod/main", &c), 0);
        assert_string_equal(c->observed_json, spec3);
        assert_string_equal(c->observed_hash, c->desired_hash);
        assert_int_equal(c->progress_deadline_ms, T0 + 600000);
        assert_string_equal(c->cluster_id, "8e9e05c52164694d");
        assert_string_equal(c->phase, "Running");
        state_cluster_free(c);
        assert_int_equal(state_cluster_get(db, "prod/none", &c), -ENOENT);

        /* brief: everything but the specs' texts (a pass's read), which come on demand */
        assert_int_equal(state_cluster_get_brief(db, "prod/main", &c), 0);
        assert_null(c->desired_json);
        assert_null(c->observed_json);
        assert_int_equal(c->desired_replicas, -1);
        assert_null(c->desired_version);
        assert_int_equal(strlen(c->desired_hash), 64);
        assert_string_equal(c->observed_hash, c->desired_hash);
        assert_string_equal(c->desired_commit, "bbbb2222");
        assert_int_equal(c->progress_deadline_ms, T0 + 600000);
        assert_string_equal(c->phase, "Running");
        assert_int_equal(state_cluster_get_specs(db, c), 0);
        assert_string_equal(c->desired_json, spec3);
        assert_string_equal(c->observed_json, spec3);
        state_cluster_free(c);
        /* the deadline alone, by the latched spec's hash (a pass that read brief) */
        assert_int_equal(state_cluster_get_brief(db, "prod/main", &c), 0);
        assert_int_equal(state_cluster_latch(db, "prod/main", NULL, c->observed_hash, 0, T0), 0);
        assert_int_equal(state_cluster_latch(db, "prod/main", NULL, "other-hash", T0 + 1, T0),
                         -ENOENT);
        state_cluster_free(c);
        assert_int_equal(state_cluster_get(db, "prod/main", &c), 0);
        assert_int_equal(c->progress_deadline_ms, 0);
        assert_string_equal(c->observed_json, spec3);
        state_cluster_free(c);
        assert_int_equal(state_cluster_get_brief(db, "prod/none", &c), -ENOENT);

        /* the target its members run on: none until recorded, then the last one recorded */
        char *t = NULL;
        assert_int_equal(state_cluster_target(db, "prod/main", &t), 0);
        assert_null(t);
        assert_int_equal(state_cluster_set_target(db, "prod/main", "kubernetes"), 0);
        assert_int_equal(state_cluster_set_target(db, "prod/main", "kubernetes"), 0);
        assert_int_equal(state_cluster_target(db, "prod/main", &t), 0);
        assert_string_equal(t, "kubernetes");
        free(t);
        assert_int_equal(state_cluster_target(db, "dev/aux", &t), 0);
        assert_null(t);
        assert_int_equal(state_cluster_set_target(db, "prod/none", "local"), -ENOENT);
        assert_int_equal(state_cluster_target(db, "prod/none", &t), -ENOENT);

        state_cluster_list l = {0};
        assert_int_equal(state_cluster_list_all(db, &l), 0);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.items[0]->name, "dev/aux");
        assert_string_equal(l.items[0]->desired_hash, "explicit-hash");
        assert_int_equal(l.items[0]->desired_replicas, 5);
        assert_string_equal(l.items[1]->name, "prod/main");
        state_cluster_list_release(&l);
        state_close(db);
}

static void test_members_and_objects(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", spec3, NULL, "aaaa", T0), 1);
        state_member m = {
            .cluster = "prod/main",
            .name = "main-0",
            .ordinal = 0,
            .peer_url = "http://127.0.0.1:23801",
            .client_url = "http://127.0.0.1:23791",
            .seed = true,
            .state = "starting",
            .runtime_json = "{\"pid\":1234,\"data_dir\":\"/var/lib/gitcd/main-0\"}",
        };
        assert_int_equal(state_member_put(db, &m, T0), 0);
        m.member_id = "aabbccddeeff0011";
        m.state = "ready";
        m.version = "3.5.16";
        assert_int_equal(state_member_put(db, &m, T0 + 5000), 0);
        state_member m1 = {.cluster = "prod/main", .name = "main-1", .ordinal = 1, .learner = true};
        assert_int_equal(state_member_put(db, &m1, T0 + 6000), 0);

        state_member bad = m1;
        bad.member_id = "xyz";
        assert_int_equal(state_member_put(db, &bad, T0), -EINVAL);
        bad = m1;
        bad.runtime_json = "pid=3";
        assert_int_equal(state_member_put(db, &bad, T0), -EINVAL);
        bad = m1;
        bad.cluster = "prod/none";
        assert_int_equal(state_member_put(db, &bad, T0), -ENOENT);

        state_member *got = NULL;
        assert_int_equal(state_member_get(db, "prod/main", "main-0", &got), 0);
        assert_int_equal(got->created_ms, T0); /* kept from the first write */
        assert_string_equal(got->member_id, "aabbccddeeff0011");
        assert_string_equal(got->state, "ready");
        assert_true(got->seed);
        assert_false(got->learner);
        assert_non_null(strstr(got->runtime_json, "\"pid\":1234"));
        state_member_free(got);

        assert_int_equal(state_member_mark_removed(db, "prod/main", "main-1", T0 + 7000), 0);
        assert_int_equal(state_member_mark_removed(db, "prod/main", "main-1", T0 + 8000), -ENOENT);
        state_member_list ml = {0};
        assert_int_equal(state_member_list_for(db, "prod/main", false, &ml), 0);
        assert_int_equal(ml.n, 1);
        assert_string_equal(ml.items[0]->name, "main-0");
        state_member_list_release(&ml);
        assert_int_equal(state_member_list_for(db, "prod/main", true, &ml), 0);
        assert_int_equal(ml.n, 2);
        assert_int_equal(ml.items[1]->removed_ms, T0 + 7000);
        state_member_list_release(&ml);

        state_object o = {.cluster = "prod/main",
                          .kind = "Service",
                          .namespace_ = "prod",
                          .name = "main",
                          .hash = "h1",
                          .commit = "aaaa",
                          .applied_ms = T0};
        assert_int_equal(state_object_record(db, &o), 0);
        o.hash = "h2";
        assert_int_equal(state_object_record(db, &o), 0);
        o.kind = "PodDisruptionBudget";
        assert_int_equal(state_object_record(db, &o), 0);
        state_object_list ol = {0};
        assert_int_equal(state_object_list_for(db, "prod/main", &ol), 0);
        assert_int_equal(ol.n, 2);
        assert_string_equal(ol.items[1]->kind, "Service");
        assert_string_equal(ol.items[1]->hash, "h2");
        state_object_list_release(&ol);
        assert_int_equal(state_object_forget(db, "prod/main", "Service", "prod", "main"), 0);
        assert_int_equal(state_object_forget(db, "prod/main", "Service", "prod", "main"), -ENOENT);

        /* deleting a cluster takes its members, conditions and objects, not the audit log */
        assert_int_equal(
            state_cluster_set_condition(db, "prod/main", "Available", "True", "Ok", NULL, T0), 1);
        state_audit_event ev = {.time_ms = T0, .cluster = "prod/main", .action = "spec.applied"};
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        assert_int_equal(state_cluster_delete(db, "prod/main"), 0);
        assert_int_equal(state_cluster_delete(db, "prod/main"), -ENOENT);
        assert_int_equal(state_member_get(db, "prod/main", "main-0", &got), -ENOENT);
        assert_int_equal(state_object_list_for(db, "prod/main", &ol), 0);
        assert_int_equal(ol.n, 0);
        state_audit_list al = {0};
        assert_int_equal(state_audit_query(db, NULL, &al), 0);
        assert_int_equal(al.n, 1);
        state_audit_list_release(&al);
        state_close(db);
}

/* A member's data identity: none until recorded, then read back as written, also when cleared. */
static void test_member_data_identity(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", spec3, NULL, "aaaa", T0), 1);
        state_member m = {.cluster = "prod/main", .name = "main-0", .state = "starting"};
        assert_int_equal(state_member_put(db, &m, T0), 0);
        state_member *got = NULL;
        assert_int_equal(state_member_get(db, "prod/main", "main-0", &got), 0);
        assert_null(got->data_identity);
        state_member_free(got);

        m.initialized = true;
        m.data_identity = "3f2b8c1e-9d4a-4e0b-8a51-7c2d6e1f0a93";
        assert_int_equal(state_member_put(db, &m, T0 + 1000), 0);
        state_member_list ml = {0};
        assert_int_equal(state_member_list_for(db, "prod/main", false, &ml), 0);
        assert_int_equal(ml.n, 1);
        assert_string_equal(ml.items[0]->data_identity, "3f2b8c1e-9d4a-4e0b-8a51-7c2d6e1f0a93");
        state_member_list_release(&ml);

        /* A state store reopened (gitcd restarted) still knows it. */
        state_close(db);
        db = open_rw(path);
        assert_int_equal(state_member_get(db, "prod/main", "main-0", &got), 0);
        assert_string_equal(got->data_identity, "3f2b8c1e-9d4a-4e0b-8a51-7c2d6e1f0a93");
        assert_true(got->initialized);
        state_member_free(got);
        state_close(db);
}

/*
 * Restore records: a cluster's bootstrap restore, and a recovery's, are
 * recorded once (a second request gets the first record back, bump and
 * all); the newest is the latest; they go with the cluster.
 */
static void test_restores(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        assert_int_equal(state_cluster_set_desired(db, "prod/main", spec3, NULL, "aaaa", T0), 1);
        state_restore *got = NULL;
        assert_int_equal(state_restore_latest(db, "prod/main", &got), -ENOENT);

        state_restore boot = {.cluster = "prod/main",
                              .origin = "bootstrap",
                              .source = "snapshot 3 (/b/s.db)",
                              .snapshot_revision = 420,
                              .bump = 1000000000,
                              .sizing = "auto: 1000000000",
                              .revision = 1000000420,
                              .members = "main-0,main-1,main-2"};
        assert_int_equal(state_restore_record(db, &boot, T0, &got), 0);
        assert_true(got->id > 0);
        assert_int_equal(got->revision, 1000000420);
        assert_true(state_restore_is_for(got, "main-1"));
        assert_false(state_restore_is_for(got, "main-"));
        assert_false(state_restore_is_for(got, "main-3"));
        int64_t first = got->id;
        state_restore_free(got);
        /* asked again (another pass, after a crash): the first one, whatever is asked now */
        boot.bump = 5;
        boot.revision = 425;
        assert_int_equal(state_restore_record(db, &boot, T0 + 1000, &got), 1);
        assert_int_equal(got->id, first);
        assert_int_equal(got->bump, 1000000000);
        state_restore_free(got);
        /* a bad record: nothing written */
        boot.revision = 1;
        assert_int_equal(state_restore_record(db, &boot, T0, &got), -EINVAL);
        boot.revision = 425;

        state_recovery req = {.cluster = "prod/main",
                              .source_kind = "snapshot",
                              .source = "3",
                              .requested_by = "bob",
                              .bump_revision = "auto"};
        int64_t rid = 0;
        assert_int_equal(state_recovery_request(db, &req, T0, &rid), 0);
        state_recovery *rec = NULL;
        assert_int_equal(state_recovery_running(db, "prod/main", &rec), 0);
        assert_string_equal(rec->bump_revision, "auto");
        state_recovery_free(rec);
        state_restore rr = {.cluster = "prod/main",
                            .origin = "recovery",
                            .recovery_id = rid,
                            .source = "snapshot 3 (/b/s.db)",
                            .snapshot_revision = 420,
                            .bump = 0,
                            .revision = 420,
                            .members = "main-3"};
        assert_int_equal(state_restore_record(db, &rr, T0 + 2000, &got), 0);
        state_restore_free(got);
        assert_int_equal(state_restore_latest(db, "prod/main", &got), 0);
        assert_int_equal(got->recovery_id, rid);
        assert_string_equal(got->origin, "recovery");
        state_restore_free(got);
        rr.recovery_id = 0; /* a recovery's restore names its recovery */
        assert_int_equal(state_restore_record(db, &rr, T0, &got), -EINVAL);
        state_restore_list l = {0};
        assert_int_equal(state_restore_list_for(db, "prod/main", 0, &l), 0);
        assert_int_equal(l.n, 2);
        assert_int_equal(l.items[1]->id, first);
        state_restore_list_release(&l);

        /* the cluster forgotten: its restores too */
        assert_int_equal(state_cluster_delete(db, "prod/main"), 0);
        assert_int_equal(state_restore_latest(db, "prod/main", &got), -ENOENT);
        state_close(db);
}

static void test_transactions(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        /* a rolled back transaction leaves nothing */
        assert_int_equal(state_begin(db), 0);
        assert_int_equal(state_cluster_set_desired(db, "a/one", spec3, NULL, "aaaa", T0), 1);
        int64_t id;
        assert_int_equal(state_op_begin(db, "a/one", "member.add-learner", "one-1", NULL, T0, &id),
                         0);
        assert_int_equal(state_rollback(db), 0);
        state_cluster *c = NULL;
        assert_int_equal(state_cluster_get(db, "a/one", &c), -ENOENT);
        state_op_list ops = {0};
        assert_int_equal(state_op_list_pending(db, NULL, &ops), 0);
        assert_int_equal(ops.n, 0);

        /* a failing call inside a transaction undoes only itself */
        assert_int_equal(state_begin(db), 0);
        assert_int_equal(state_cluster_set_desired(db, "a/one", spec3, NULL, "aaaa", T0), 1);
        assert_int_equal(state_cluster_set_id(db, "a/two", "0000000000000001", T0), -ENOENT);
        assert_int_equal(state_commit(db), 0);
        assert_int_equal(state_cluster_get(db, "a/one", &c), 0);
        state_cluster_free(c);

        /* nested: the inner rollback keeps the outer work */
        assert_int_equal(state_begin(db), 0);
        assert_int_equal(state_cluster_set_phase(db, "a/one", "Running", T0), 0);
        assert_int_equal(state_begin(db), 0);
        assert_int_equal(state_cluster_set_version(db, "a/one", "3.5.16", T0), 0);
        assert_int_equal(state_rollback(db), 0);
        assert_int_equal(state_commit(db), 0);
        assert_int_equal(state_cluster_get(db, "a/one", &c), 0);
        assert_string_equal(c->phase, "Running");
        assert_null(c->version);
        state_cluster_free(c);
        assert_int_equal(state_commit(db), -EINVAL);

        /* closing with an open transaction rolls it back */
        assert_int_equal(state_begin(db), 0);
        assert_int_equal(state_cluster_set_phase(db, "a/one", "Paused", T0), 0);
        state_close(db);
        db = open_rw(path);
        assert_int_equal(state_cluster_get(db, "a/one", &c), 0);
        assert_string_equal(c->phase, "Running");
        state_cluster_free(c);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_read_only_missing_creates_nothing),
            cmocka_unit_test(test_read_write_creates_folder_and_schema),
            cmocka_unit_test(test_revisions),
            cmocka_unit_test(test_clusters),
            cmocka_unit_test(test_members_and_objects),
            cmocka_unit_test(test_member_data_identity),
            cmocka_unit_test(test_restores),
            cmocka_unit_test(test_transactions),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
