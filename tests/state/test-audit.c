/*
 * The audit log: secrets are scrubbed and private keys cut out (never a
 * reason to drop an event), control characters are escaped, a failed append
 * is counted where `gitcd status` finds it, the database itself keeps the
 * log append-only, retention is the only way rows leave, and queries filter
 * and order the way `gitcd log` presents them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tests/state/state-test.h"
#include "util/strbuf.h"

#define T0   1790000000000LL
#define HOUR (3600 * 1000LL)

static state_db *open_rw(const char *path)
{
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        return db;
}

static size_t count_events(state_db *db)
{
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        size_t n = l.n;
        state_audit_list_release(&l);
        return n;
}

static void test_secret_keys(void **state)
{
        (void)state;
        assert_true(state_key_looks_secret("password"));
        assert_true(state_key_looks_secret("rootPassword"));
        assert_true(state_key_looks_secret("token"));
        assert_true(state_key_looks_secret("AccessToken"));
        assert_true(state_key_looks_secret("client_secret"));
        assert_true(state_key_looks_secret("credentials"));
        assert_true(state_key_looks_secret("key"));
        assert_true(state_key_looks_secret("privateKey"));
        assert_true(state_key_looks_secret("tls.key"));
        assert_false(state_key_looks_secret("replicas"));
        assert_false(state_key_looks_secret("keyId"));
        assert_false(state_key_looks_secret("version"));
        assert_false(state_key_looks_secret(""));
        assert_true(state_text_has_private_key("x -----BEGIN RSA PRIVATE KEY-----\nabc"));
        assert_true(state_text_has_private_key("-----BEGIN OPENSSH PRIVATE KEY-----"));
        assert_true(state_text_has_private_key("-----BEGIN ENCRYPTED PRIVATE KEY-----"));
        assert_false(state_text_has_private_key("-----BEGIN CERTIFICATE-----\nMIIB"));
        assert_false(state_text_has_private_key("-----BEGIN PUBLIC KEY-----"));
        assert_false(state_text_has_private_key(NULL));
}

static void test_scrubbing(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        state_audit_event ev = {
            .time_ms = T0,
            .cluster = "prod/main",
            .action = "spec.applied",
            .before_json = "{\"replicas\":3,\"auth\":{\"rootPassword\":\"hunter2\"}}",
            .after_json = "{\"replicas\":5,\"tls\":{\"key\":\"c2VjcmV0\",\"keyId\":\"k1\"},"
                          "\"s3\":[{\"token\":\"t0k3n\",\"bucket\":\"b\"}],"
                          "\"apiKey\":{\"nested\":\"x\"},\"password\":null}",
            .outcome = "success",
        };
        int64_t id = 0;
        assert_int_equal(state_audit_append(db, &ev, &id), 0);
        assert_true(id > 0);
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        assert_int_equal(l.n, 1);
        const char *before = l.items[0]->before_json, *after = l.items[0]->after_json;
        assert_null(strstr(before, "hunter2"));
        assert_non_null(strstr(before, "\"rootPassword\":\"[redacted]\""));
        assert_non_null(strstr(before, "\"replicas\":3"));
        assert_null(strstr(after, "c2VjcmV0"));
        assert_null(strstr(after, "t0k3n"));
        assert_null(strstr(after, "nested"));
        assert_non_null(strstr(after, "\"keyId\":\"k1\""));
        assert_non_null(strstr(after, "\"bucket\":\"b\""));
        assert_non_null(strstr(after, "\"password\":null"));
        state_audit_list_release(&l);

        /* a JSON string summary is fine; text that is not JSON is refused */
        ev.before_json = "\"3 voters\"";
        ev.after_json = NULL;
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        ev.before_json = "3 voters";
        assert_int_equal(state_audit_append(db, &ev, NULL), -EINVAL);
        assert_non_null(strstr(state_last_error(), "not JSON"));
        ev.before_json = NULL;
        ev.action = NULL;
        assert_int_equal(state_audit_append(db, &ev, NULL), -EINVAL);

        /* a private key anywhere is cut out, and the event is kept */
        static const char *pem =
            "see -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
            "-----END PRIVATE KEY-----\n for details";
        _cleanup_free_ char *as_json = xasprintf("{\"note\":\"%s\"}", "-----BEGIN PRIVATE "
                                                                      "KEY-----\\nMIIEvQIBADAN");
        ev.action = "spec.applied";
        ev.reason = (char *)pem;
        ev.after_json = as_json;
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        /* escaped in JSON so that the raw text does not show it; and in a key name */
        ev.reason = NULL;
        ev.after_json = "{\"note\":\"-----BEGIN \\u0050RIVATE KEY-----\"}";
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        ev.after_json = "{\"-----BEGIN PRIVATE KEY-----MIIEvQ\":1}";
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        assert_int_equal(l.n, 5);
        for (size_t i = 0; i < l.n; i++) {
                const state_audit_event *e = l.items[i];
                assert_false(state_text_has_private_key(e->reason));
                assert_false(state_text_has_private_key(e->after_json));
                assert_null(strstr(e->after_json ? e->after_json : "", "MIIEvQ"));
                assert_null(strstr(e->reason ? e->reason : "", "MIIEvQ"));
        }
        assert_string_equal(l.items[0]->after_json, "\"[redacted]\"");
        assert_string_equal(l.items[1]->after_json, "{\"note\":\"[redacted]\"}");
        assert_string_equal(l.items[2]->reason, "see [redacted]\\n for details");
        assert_string_equal(l.items[2]->after_json, "{\"note\":\"[redacted]\"}");
        state_audit_list_release(&l);
        state_close(db);
}

static void test_redaction(void **state)
{
        (void)state;
        static const struct {
                const char *in, *want;
        } cases[] = {
            /* a marker alone in an author name: the name and the email stay */
            {"Mallory -----BEGIN PRIVATE KEY----- <m@evil.example>",
             "Mallory [redacted] <m@evil.example>"},
            {"-----BEGIN RSA PRIVATE KEY-----\nMIIB\nAAAA==\n-----END RSA PRIVATE KEY-----",
             "[redacted]"},
            {"a -----BEGIN EC PRIVATE KEY-----\nMHcC\n", "a [redacted]\n"},
            /* two blocks, and a certificate that is not a secret */
            {"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE----- and "
             "-----BEGIN PRIVATE KEY-----x-----END PRIVATE KEY----- and "
             "-----BEGIN OPENSSH PRIVATE KEY-----",
             "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE----- and [redacted] and "
             "[redacted]"},
            /* cutting one block out must not leave a new one behind */
            {"-----BEGIN -----BEGIN PRIVATE KEY-----x-----END PRIVATE KEY----- PRIVATE KEY-----",
             "[redacted]"},
            {"no key here", "no key here"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *got = state_redact_private_keys(cases[i].in);
                assert_string_equal(got, cases[i].want);
                assert_false(state_text_has_private_key(got));
        }
        assert_null(state_redact_private_keys(NULL));

        /* through the log: an author with a PEM marker and control characters */
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        state_audit_event ev = {
            .time_ms = T0,
            .cluster = "prod/main",
            .commit = "aaaa1111bbbb",
            .author = "Ev\033[2J\nil -----BEGIN PRIVATE KEY----- <e@x>",
            .action = "spec.accepted",
            .reason = "line one\nline two\r\x7f",
            .outcome = "success",
        };
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->author, "Ev\\x1b[2J\\nil [redacted] <e@x>");
        assert_string_equal(l.items[0]->reason, "line one\\nline two\\r\\x7f");
        state_audit_list_release(&l);
        state_close(db);
}

/* n copies of unit in a new string. */
static char *repeat(const char *unit, size_t n)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < n; i++)
                sb_append(&sb, unit);
        return sb_detach(&sb);
}

/*
 * Texts built to make the redaction slow: blocks nested so that cutting
 * one out makes the one around it a key block ("-----BEGIN A" before,
 * "-PRIVATE KEY-----" after, 300,000 deep: 8.7 MB), and many blocks
 * without an END line. The redaction is one pass: these take milliseconds
 * (a pass per level took hours on the first; the test would time out).
 */
static void test_redaction_hostile(void **state)
{
        (void)state;
        const size_t depth = 300000;
        _cleanup_free_ char *before = repeat("-----BEGIN A", depth);
        _cleanup_free_ char *after = repeat("-PRIVATE KEY-----", depth);
        _cleanup_free_ char *nested =
            xasprintf("Mallory %s-----BEGIN PRIVATE KEY-----%s <m@x>", before, after);
        _cleanup_free_ char *got = state_redact_private_keys(nested);
        assert_string_equal(got, "Mallory [redacted] <m@x>");

        /* one level less on the right: the outermost BEGIN line is no key block */
        _cleanup_free_ char *short_after = repeat("-PRIVATE KEY-----", depth - 1);
        _cleanup_free_ char *lopsided =
            xasprintf("%s-----BEGIN PRIVATE KEY-----%s", before, short_after);
        free(got);
        got = state_redact_private_keys(lopsided);
        assert_string_equal(got, "-----BEGIN A[redacted]");
        assert_false(state_text_has_private_key(got));

        _cleanup_free_ char *flat = repeat("-----BEGIN PRIVATE KEY-----x", depth);
        free(got);
        got = state_redact_private_keys(flat);
        _cleanup_free_ char *want = repeat("[redacted]", depth);
        assert_string_equal(got, want);
}

/* An append that fails all the same is counted apart from the audit table. */
static void test_failed_append_counted(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        state_audit_failures f = {0};
        assert_int_equal(state_audit_failures_get(db, &f), 0);
        assert_int_equal(f.count, 0);
        assert_null(f.last_error);
        unsigned before = state_audit_failures_in_process();

        /* the database refuses the insert (standing in for a full disk) */
        sqlite3 *raw;
        assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
        assert_int_equal(sqlite3_exec(raw,
                                      "CREATE TRIGGER broken BEFORE INSERT ON audit BEGIN "
                                      "SELECT RAISE(ABORT, 'disk on fire'); END",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        state_audit_event ev = {.time_ms = T0, .cluster = "prod/main", .action = "member.remove"};
        assert_true(state_audit_append(db, &ev, NULL) < 0);
        assert_non_null(strstr(state_last_error(), "disk on fire"));
        ev.time_ms = T0 + HOUR;
        ev.action = "member.promote";
        assert_true(state_audit_append(db, &ev, NULL) < 0);
        /* inside a caller's transaction too */
        assert_int_equal(state_begin(db), 0);
        assert_true(state_audit_append(db, &ev, NULL) < 0);
        assert_int_equal(state_commit(db), 0);
        assert_int_equal(state_audit_failures_in_process(), before + 3);
        assert_int_equal(state_audit_failures_get(db, &f), 0);
        assert_int_equal(f.count, 3);
        assert_int_equal(f.last_ms, T0 + HOUR);
        assert_string_equal(f.last_action, "member.promote");
        assert_non_null(strstr(f.last_error, "disk on fire"));
        state_audit_failures_release(&f);

        /* a caller's mistake counts as well */
        ev.action = NULL;
        assert_int_equal(state_audit_append(db, &ev, NULL), -EINVAL);
        assert_int_equal(state_audit_failures_get(db, &f), 0);
        assert_int_equal(f.count, 4);
        state_audit_failures_release(&f);

        /* repaired: events are written again, the count of lost ones stays */
        assert_int_equal(sqlite3_exec(raw, "DROP TRIGGER broken", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(raw);
        ev.action = "member.remove";
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        assert_int_equal(count_events(db), 1);
        assert_int_equal(state_audit_failures_get(db, &f), 0);
        assert_int_equal(f.count, 4);
        state_audit_failures_release(&f);
        state_close(db);
}

static void test_append_only(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        state_audit_event ev = {.time_ms = T0, .action = "member.remove", .outcome = "success"};
        assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        state_close(db);

        sqlite3 *raw;
        assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
        static const char *const attempts[] = {
            "UPDATE audit SET outcome = 'failure'",
            "DELETE FROM audit",
            "DELETE FROM audit WHERE id = 1",
        };
        for (size_t i = 0; i < ARRAY_SIZE(attempts); i++) {
                char *err = NULL;
                assert_int_not_equal(sqlite3_exec(raw, attempts[i], NULL, NULL, &err), SQLITE_OK);
                assert_non_null(strstr(err, "append-only"));
                sqlite3_free(err);
        }
        sqlite3_close(raw);
        db = open_rw(path);
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->outcome, "success");
        state_audit_list_release(&l);
        state_close(db);
}

static void test_retention(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        /* 10 events, one per hour, T0 .. T0 + 9h */
        for (int i = 0; i < 10; i++) {
                char reason[32];
                snprintf(reason, sizeof(reason), "event %d", i);
                state_audit_event ev = {
                    .time_ms = T0 + i * HOUR, .action = "member.promote", .reason = reason};
                assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        }
        /* nothing older than 24 h at T0 + 10 h */
        assert_int_equal(state_audit_prune(db, 24 * HOUR, 0, T0 + 10 * HOUR), 0);
        /* keep the last 4 h: events 6..9 remain */
        assert_int_equal(state_audit_prune(db, 4 * HOUR + 1, 0, T0 + 10 * HOUR), 6);
        assert_int_equal(count_events(db), 4);
        /* keep at most 3 rows: event 6 goes */
        assert_int_equal(state_audit_prune(db, 0, 3, T0 + 10 * HOUR), 1);
        assert_int_equal(state_audit_prune(db, 0, 3, T0 + 10 * HOUR), 0);
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        assert_int_equal(l.n, 3);
        assert_string_equal(l.items[0]->reason, "event 9");
        assert_string_equal(l.items[2]->reason, "event 7");
        int64_t last_id = l.items[0]->id;
        state_audit_list_release(&l);
        /* retention leaves no grant behind: the log is append-only again */
        state_close(db);
        sqlite3 *raw;
        assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
        char *err = NULL;
        assert_int_not_equal(sqlite3_exec(raw, "DELETE FROM audit", NULL, NULL, &err), SQLITE_OK);
        sqlite3_free(err);
        sqlite3_close(raw);
        /* ids are never reused */
        db = open_rw(path);
        int64_t id;
        state_audit_event ev = {.time_ms = T0 + 11 * HOUR, .action = "member.promote"};
        assert_int_equal(state_audit_append(db, &ev, &id), 0);
        assert_true(id > last_id);
        state_close(db);
}

static void test_query_filters(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        struct {
                int64_t t;
                const char *cluster, *commit, *action;
        } rows[] = {
            {T0, "prod/main", "aaaa1111bbbb", "member.add-learner"},
            {T0 + HOUR, "prod/main", "aaaa1111bbbb", "member.promote"},
            {T0 + 2 * HOUR, "dev/aux", "ccccdddd0000", "spec.rejected"},
            {T0 + 3 * HOUR, "prod/main", "aaaa2222ffff", "member.remove"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                state_audit_event ev = {.time_ms = rows[i].t,
                                        .cluster = (char *)rows[i].cluster,
                                        .commit = (char *)rows[i].commit,
                                        .action = (char *)rows[i].action};
                assert_int_equal(state_audit_append(db, &ev, NULL), 0);
        }
        state_audit_list l = {0};
        assert_int_equal(state_audit_query(db, NULL, &l), 0);
        assert_int_equal(l.n, 4);
        assert_string_equal(l.items[0]->action, "member.remove"); /* newest first */
        state_audit_list_release(&l);

        state_audit_filter f = {.cluster = "prod/main"};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        assert_int_equal(l.n, 3);
        state_audit_list_release(&l);
        f = (state_audit_filter){.commit_prefix = "AAAA1111"};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        assert_int_equal(l.n, 2);
        state_audit_list_release(&l);
        f = (state_audit_filter){.commit_prefix = "aaaa"};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        assert_int_equal(l.n, 3);
        state_audit_list_release(&l);
        f = (state_audit_filter){.since_ms = T0 + HOUR, .cluster = "prod/main"};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        assert_int_equal(l.n, 2);
        state_audit_list_release(&l);
        f = (state_audit_filter){.action = "spec.rejected"};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->cluster, "dev/aux");
        state_audit_list_release(&l);
        f = (state_audit_filter){.limit = 2};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.items[1]->cluster, "dev/aux");
        state_audit_list_release(&l);
        f = (state_audit_filter){.commit_prefix = "aaa"};
        assert_int_equal(state_audit_query(db, &f, &l), -EINVAL);
        f = (state_audit_filter){.commit_prefix = "aaaz"};
        assert_int_equal(state_audit_query(db, &f, &l), -EINVAL);
        f = (state_audit_filter){.commit_prefix = "%' OR 1=1 --"};
        assert_int_equal(state_audit_query(db, &f, &l), -EINVAL);
        f = (state_audit_filter){.cluster = "x' OR '1'='1"};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        assert_int_equal(l.n, 0);
        state_audit_list_release(&l);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_secret_keys),
            cmocka_unit_test(test_scrubbing),
            cmocka_unit_test(test_redaction),
            cmocka_unit_test(test_redaction_hostile),
            cmocka_unit_test(test_failed_append_counted),
            cmocka_unit_test(test_append_only),
            cmocka_unit_test(test_retention),
            cmocka_unit_test(test_query_filters),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
