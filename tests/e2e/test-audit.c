/*
 * The audit log against hostile commit content, end to end: a Git
 * repository whose commit author carries a PEM private key marker and a
 * terminal escape, applied with the real `gitcd apply` on the local target
 * (etcd 3.5.16). Every event of that commit is written (the marker
 * redacted, the escape shown escaped by `gitcd log`); and when the audit
 * table refuses writes, `gitcd apply` exits 1 although the cluster
 * converged, and `gitcd status` shows how many events were lost and why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define VERSION       "3.5.16"
#define APPLY_TIMEOUT 90
#define AUTHOR        "Mallory \033[31m -----BEGIN PRIVATE KEY-----"

/* git add -A && git commit in e->source with AUTHOR; returns the commit id. */
static char *commit_all(e2e *e, const char *message)
{
        setenv("GIT_AUTHOR_NAME", AUTHOR, 1);
        setenv("GIT_AUTHOR_EMAIL", "mallory@evil.example", 1);
        setenv("GIT_COMMITTER_NAME", "CI", 1);
        setenv("GIT_COMMITTER_EMAIL", "ci@example.org", 1);
        _cleanup_free_ char *head = path_join(e->root, "head");
        _cleanup_free_ char *cmd =
            xasprintf("cd '%s' && (test -d .git || git init -q -b main) && git add -A && "
                      "git -c commit.gpgsign=false commit -q -m '%s' && git rev-parse HEAD > '%s'",
                      e->source, message, head);
        assert_int_equal(system(cmd), 0);
        char *id = NULL;
        size_t len = 0;
        assert_int_equal(read_file(head, 100, &id, &len), 0);
        id[strcspn(id, "\n")] = '\0';
        return id;
}

/* Run gitcd with the arguments (NULL-terminated), capturing stdout and stderr. */
static int run_capture(e2e *e, char **ret_out, char **ret_err, const char *arg, ...)
{
        const char *args[16] = {arg};
        size_t n = 1;
        va_list ap;
        va_start(ap, arg);
        while (n < ARRAY_SIZE(args) - 1 && (args[n] = va_arg(ap, const char *)))
                n++;
        va_end(ap);
        args[n] = NULL;
        return e2e_runv(e, ret_out, ret_err, args);
}

static void test_hostile_author(void **state)
{
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "pem", 1, VERSION);
        _cleanup_free_ char *commit = commit_all(e, "one member");
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);

        /* the events of that commit are all there, the author redacted and escaped */
        char *out = NULL;
        assert_int_equal(run_capture(e, &out, NULL, "log", "-o", "json", "--commit", commit, NULL),
                         0);
        assert_non_null(strstr(out, "\"action\":\"spec.accepted\""));
        assert_non_null(strstr(out, "Mallory \\\\x1b[31m [redacted] <mallory@evil.example>"));
        assert_null(strstr(out, "BEGIN PRIVATE"));
        free(out);
        assert_int_equal(run_capture(e, &out, NULL, "log", NULL), 0);
        assert_non_null(strstr(out, "spec.accepted"));
        assert_non_null(strstr(out, "Mallory \\x1b"));
        assert_null(strchr(out, '\033'));
        free(out);
        /* nothing was lost */
        assert_int_equal(run_capture(e, &out, NULL, "status", NULL), 0);
        assert_null(strstr(out, "Audit log:"));
        free(out);

        /* the audit table refuses writes from now on (standing in for a broken disk) */
        _cleanup_free_ char *db_path = path_join(e->state_dir, "state.db");
        sqlite3 *raw;
        assert_int_equal(sqlite3_open(db_path, &raw), SQLITE_OK);
        assert_int_equal(sqlite3_exec(raw,
                                      "CREATE TRIGGER broken BEFORE INSERT ON audit BEGIN "
                                      "SELECT RAISE(ABORT, 'audit disk on fire'); END",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(raw);

        /* a second cluster converges, but its events are lost: apply says so and fails */
        e2e_write_cluster(e, "b.yaml", "lost", 1, VERSION);
        free(commit_all(e, "another cluster"));
        char *err = NULL;
        const char *apply[] = {"apply", "-q", "--source", e->source, "--timeout", "90s", NULL};
        assert_int_equal(e2e_runv(e, NULL, &err, apply), 1);
        assert_non_null(strstr(err, "audit event"));
        free(err);
        assert_true(e2e_wait_ready(e, "lost", 1, 30));

        assert_int_equal(run_capture(e, &out, NULL, "status", NULL), 0);
        assert_non_null(strstr(out, "Audit log: "));
        assert_non_null(strstr(out, "could not be written"));
        assert_non_null(strstr(out, "audit disk on fire"));
        free(out);
        json_t *st = e2e_status(e, "lost");
        json_t *af = json_object_get(st, "audit_failures");
        assert_true(json_integer_value(json_object_get(af, "count")) >= 1);
        assert_non_null(
            strstr(json_string_value(json_object_get(af, "last_error")), "audit disk on fire"));
        json_decref(st);
        e2e_free(e);
}

int main(void)
{
        if (!e2e_have_version(VERSION)) {
                fprintf(stderr, "etcd %s is not installed\n", VERSION);
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hostile_author),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
