/*
 * `gitcd log` and `gitcd status` run as users run them (the real binary),
 * over a store filled through the state API: filters, table and JSON
 * output, widths, the default path, the daemon's configuration file
 * (--config) and its precedence, and clear errors for bad usage, a bad
 * configuration file and missing state.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/state/state-test.h"
#include "util/timeutil.h"

#define MIN_MS (60 * 1000LL)

static char *db_path;
static char *commit_a = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678";
static char *commit_b = "ffee0011223344556677889900aabbccddeeff00";

static int setup(void **state)
{
        (void)state;
        db_path = test_db_path();
        state_db *db = NULL;
        if (state_open(db_path, STATE_OPEN_READ_WRITE, &db) < 0)
                return -1;
        int64_t now = now_wall_ms();
        int r = 0;
        r |= state_cluster_set_desired(db, "prod/main",
                                       "{\"spec\":{\"replicas\":3,\"version\":\"3.5.16\"}}", NULL,
                                       commit_a, now - 90 * MIN_MS) < 0;
        r |= state_cluster_set_desired(db, "dev/aux", "{\"spec\":{\"replicas\":1}}", NULL, commit_b,
                                       now - 5 * MIN_MS) < 0;
        r |= state_cluster_set_id(db, "prod/main", "8e9e05c52164694d", now) < 0;
        r |= state_cluster_set_phase(db, "prod/main", "Running", now) < 0;
        r |= state_cluster_set_condition(db, "prod/main", "Available", "True", "QuorumHealthy",
                                         "3 of 3 voters healthy", now - 60 * MIN_MS) < 0;
        r |= state_cluster_set_condition(db, "prod/main", "Progressing", "False", "Stable", NULL,
                                         now - 60 * MIN_MS) < 0;
        const char *names[] = {"main-0", "main-1", "main-2"};
        const char *ids[] = {"0000000000000a01", "0000000000000a02", "0000000000000a03"};
        for (int i = 0; i < 3; i++) {
                state_member m = {.cluster = "prod/main",
                                  .name = (char *)names[i],
                                  .ordinal = i,
                                  .member_id = (char *)ids[i],
                                  .peer_url = "http://127.0.0.1:2380",
                                  .version = "3.5.16",
                                  .seed = i == 0,
                                  .learner = i == 2,
                                  .state = i == 2 ? "starting" : "ready"};
                r |= state_member_put(db, &m, now) < 0;
        }
        struct {
                int64_t ago;
                char *cluster, *commit, *author, *action, *reason, *outcome;
        } evs[] = {
            {80 * MIN_MS, "prod/main", commit_a, "Ada Lovelace <ada@example.org>",
             "member.add-learner", "spec wants 3 voters, 2 ready", "success"},
            {70 * MIN_MS, "prod/main", commit_a, "Ada Lovelace <ada@example.org>", "member.promote",
             "learner main-2 caught up", "success"},
            {3 * 24 * 60 * MIN_MS, "dev/aux", commit_b, "Grace Hopper <grace@example.org>",
             "spec.rejected",
             "storage size may not shrink (10Gi -> 5Gi); this is a long reason that goes on and "
             "on and on so that it must be cut to fit the width of the terminal it is shown on",
             "rejected"},
            {1 * MIN_MS, "dev/aux", commit_b, "G\x1b[31m\nH <grace@example.org>",
             "deadline.exceeded", "stalled\nfor 600s", "failure"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(evs); i++) {
                state_audit_event ev = {.time_ms = now - evs[i].ago,
                                        .cluster = evs[i].cluster,
                                        .commit = evs[i].commit,
                                        .author = evs[i].author,
                                        .action = evs[i].action,
                                        .reason = evs[i].reason,
                                        .before_json = "{\"voters\":2,\"token\":\"abc\"}",
                                        .after_json = "{\"voters\":3}",
                                        .outcome = evs[i].outcome,
                                        .duration_ms = 1234};
                r |= state_audit_append(db, &ev, NULL) < 0;
        }
        state_close(db);
        return r ? -1 : 0;
}

static int teardown(void **state)
{
        (void)state;
        free(db_path);
        return 0;
}

static run_result run(char *a0, char *a1, char *a2, char *a3, char *a4, char *a5)
{
        char *args[] = {a0, a1, a2, a3, a4, a5, NULL};
        run_result r = {0};
        assert_int_equal(run_gitcd(args, &r), 0);
        return r;
}

static size_t max_line_width(const char *s)
{
        size_t best = 0, cur = 0;
        for (; *s; s++) {
                if (*s == '\n') {
                        best = MAX(best, cur);
                        cur = 0;
                } else if ((*s & 0xc0) != 0x80)
                        cur++;
        }
        return MAX(best, cur);
}

static void test_log_table(void **state)
{
        (void)state;
        run_result r = run("log", "--state", db_path, NULL, NULL, NULL);
        assert_int_equal(r.status, 0);
        fputs(r.out, stdout);
        assert_int_equal(count_lines(r.out), 5);
        assert_true(strneq(r.out, "TIME", 4));
        assert_non_null(strstr(r.out, "CLUSTER"));
        assert_non_null(strstr(r.out, "REASON"));
        /* newest first: the deadline event is on the first data line */
        const char *line1 = strchr(r.out, '\n') + 1;
        assert_true(strneq(line1, "60s ago", 7) || strneq(line1, "61s ago", 7));
        /* older than a day: the date instead of an age */
        const char *last = r.out + strlen(r.out) - 1;
        while (last > r.out && last[-1] != '\n')
                last--;
        assert_true(strlen(last) > 12);
        assert_true((last[3] == ' ' && last[9] == ':') || (last[4] == '-' && last[7] == '-'));
        assert_non_null(strstr(last, "spec.rejected"));
        assert_non_null(strstr(r.out, "ffee0011 "));
        assert_null(strstr(r.out, "ffee00112")); /* commit cut to 8 */
        assert_non_null(strstr(r.out, "Ada Lovelace "));
        assert_null(strstr(r.out, "ada@example.org")); /* the name only */
        assert_null(strchr(r.out, '\x1b'));            /* no terminal escapes: they show escaped */
        assert_non_null(strstr(r.out, "G\\x1b[31m\\nH "));
        assert_non_null(strstr(r.out, "stalled\\nfor 600s"));
        assert_non_null(strstr(r.out, "member.add-learner"));
        assert_non_null(strstr(r.out, "..."));
        assert_true(max_line_width(r.out) <= 100); /* not a tty: 100 columns */
        run_result_release(&r);
}

static void test_log_filters(void **state)
{
        (void)state;
        run_result r = run("log", "--state", db_path, "--cluster", "prod/main", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 3);
        assert_null(strstr(r.out, "dev/aux"));
        run_result_release(&r);

        r = run("log", "--state", db_path, "--commit", "A1B2", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 3);
        run_result_release(&r);

        r = run("log", "--state", db_path, "--since", "2h", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 4); /* not the 3-day-old rejection */
        run_result_release(&r);

        r = run("log", "--state", db_path, "--since", "2020-01-01", NULL);
        assert_int_equal(count_lines(r.out), 5);
        run_result_release(&r);
        r = run("log", "--state", db_path, "--since", "2020-01-01T00:00:00+02:00", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 5);
        run_result_release(&r);
        r = run("log", "--state", db_path, "--since", "2999-01-01T00:00:00Z", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 0);
        assert_non_null(strstr(r.err, "no events match"));
        run_result_release(&r);

        r = run("log", "--state", db_path, "--action", "member.promote", NULL);
        assert_int_equal(count_lines(r.out), 2);
        run_result_release(&r);

        char *args[] = {"log", "--state", db_path, "--limit", "2", "-o", "json", NULL};
        assert_int_equal(run_gitcd(args, &r), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 2);
        run_result_release(&r);
}

static void test_log_json(void **state)
{
        (void)state;
        run_result r = run("log", "--state", db_path, "-o", "json", NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 4);
        char *save = NULL;
        int n = 0;
        for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_error_t jerr;
                json_t *o = json_loads(line, 0, &jerr);
                assert_non_null(o);
                static const char *const keys[] = {"time",    "cluster",    "commit", "author",
                                                   "action",  "reason",     "before", "after",
                                                   "outcome", "duration_ms"};
                assert_int_equal(json_object_size(o), ARRAY_SIZE(keys));
                for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                        assert_non_null(json_object_get(o, keys[i]));
                const char *t = json_string_value(json_object_get(o, "time"));
                assert_int_equal(strlen(t), 20);
                assert_int_equal(t[19], 'Z');
                assert_int_equal(json_integer_value(json_object_get(o, "duration_ms")), 1234);
                json_t *before = json_object_get(o, "before");
                assert_true(json_is_object(before));
                assert_string_equal(json_string_value(json_object_get(before, "token")),
                                    "[redacted]");
                if (n == 0) {
                        assert_string_equal(json_string_value(json_object_get(o, "action")),
                                            "deadline.exceeded");
                        assert_string_equal(json_string_value(json_object_get(o, "author")),
                                            "G\\x1b[31m\\nH <grace@example.org>");
                        assert_string_equal(json_string_value(json_object_get(o, "commit")),
                                            commit_b);
                }
                json_decref(o);
                n++;
        }
        assert_int_equal(n, 4);
        run_result_release(&r);
}

static void test_status(void **state)
{
        (void)state;
        run_result r = run("status", "--state", db_path, NULL, NULL, NULL);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 3);
        assert_true(strneq(r.out, "NAME", 4));
        const char *dev = strstr(r.out, "dev/aux");
        const char *prod = strstr(r.out, "prod/main");
        assert_true(dev && prod && dev < prod);
        assert_non_null(strstr(prod, "2/3"));
        assert_non_null(strstr(prod, "3.5.16"));
        assert_non_null(strstr(prod, "8e9e05c52164694d"));
        assert_non_null(strstr(prod, "Running"));
        assert_non_null(strstr(prod, "Available=True,Progressing=False"));
        assert_non_null(strstr(dev, "0/1"));
        run_result_release(&r);

        r = run("status", "prod/main", "--state", db_path, NULL, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "Members:"));
        assert_non_null(strstr(r.out, "0000000000000a01"));
        assert_non_null(strstr(r.out, "voter (seed)"));
        assert_non_null(strstr(r.out, "learner"));
        assert_non_null(strstr(r.out, "http://127.0.0.1:2380"));
        assert_non_null(strstr(r.out, "Conditions:"));
        assert_non_null(strstr(r.out, "3 of 3 voters healthy"));
        assert_non_null(strstr(r.out, "QuorumHealthy"));
        run_result_release(&r);

        r = run("status", "prod/main", "--state", db_path, "-o", "json");
        assert_int_equal(r.status, 0);
        json_t *o = json_loads(r.out, 0, NULL);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "name")), "prod/main");
        assert_int_equal(json_integer_value(json_object_get(o, "ready")), 2);
        assert_int_equal(json_integer_value(json_object_get(o, "replicas")), 3);
        assert_int_equal(json_array_size(json_object_get(o, "members")), 3);
        assert_int_equal(json_array_size(json_object_get(o, "conditions")), 2);
        json_decref(o);
        run_result_release(&r);

        r = run("status", "prod/none", "--state", db_path, NULL, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "no cluster prod/none"));
        run_result_release(&r);
}

static void test_default_path_and_errors(void **state)
{
        (void)state;
        /* $GITCD_STATE_DIR/state.db is the default */
        _cleanup_free_ char *dir = xstrdup(db_path);
        *strrchr(dir, '/') = '\0';
        _cleanup_free_ char *env = xasprintf("GITCD_STATE_DIR=%s", dir);
        char *log_args[] = {"log", "--limit", "1", NULL};
        run_result r = {0};
        assert_int_equal(run_gitcd_env(env, log_args, &r), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 2);
        run_result_release(&r);

        /* missing state: a clear error, exit 1, nothing created */
        _cleanup_free_ char *missing = path_join(dir, "nothing/state.db");
        r = run("log", "--state", missing, NULL, NULL, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "nothing has been applied yet"));
        run_result_release(&r);
        r = run("status", "--state", missing, NULL, NULL, NULL);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "no state at"));
        run_result_release(&r);
        _cleanup_free_ char *missing_dir = path_join(dir, "nothing");
        assert_false(path_exists(missing_dir));

        /* bad usage: exit 64 with a message naming the flag */
        static const char *const bad[][3] = {
            {"--since", "yesterday", "--since"},
            {"--commit", "abc", "--commit"},
            {"--cluster", "main", "--cluster"},
            {"--limit", "0", "--limit"},
            {"-o", "yaml", "-o"},
            {"--bogus", "x", "usage"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                r = run("log", "--state", db_path, (char *)bad[i][0], (char *)bad[i][1], NULL);
                assert_int_equal(r.status, 64);
                assert_non_null(strstr(r.err, bad[i][2]));
                run_result_release(&r);
        }
        r = run("status", "notaname", "--state", db_path, NULL, NULL);
        assert_int_equal(r.status, 64);
        run_result_release(&r);
        r = run("status", "a/b", "c/d", NULL, NULL, NULL);
        assert_int_equal(r.status, 64);
        run_result_release(&r);

        r = run("log", "--help", NULL, NULL, NULL, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: gitcd log"));
        assert_non_null(strstr(r.out, "--since"));
        run_result_release(&r);
        r = run("status", "--help", NULL, NULL, NULL, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: gitcd status"));
        run_result_release(&r);
}

/* A daemon configuration file in the state's folder; its path. */
static char *write_config(const char *name, const char *text)
{
        _cleanup_free_ char *dir = xstrdup(db_path);
        *strrchr(dir, '/') = '\0';
        char *path = path_join(dir, name);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
        return path;
}

static void test_config_file(void **state)
{
        (void)state;
        _cleanup_free_ char *text = xasprintf("state: %s\n"
                                              "sources:\n"
                                              "  - name: platform\n"
                                              "    url: /srv/git/platform.git\n",
                                              db_path);
        _cleanup_free_ char *cfg = write_config("gitcd.yaml", text);
        /* $GITCD_STATE_DIR names a folder without a state: the file's state wins over it */
        _cleanup_free_ char *empty = harness_tmpdir("gitcd-nostate");
        _cleanup_free_ char *env = xasprintf("GITCD_STATE_DIR=%s", empty);
        run_result r = {0};
        char *status_args[] = {"status", "--config", cfg, NULL};
        assert_int_equal(run_gitcd_env(env, status_args, &r), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 3);
        assert_non_null(strstr(r.out, "prod/main"));
        run_result_release(&r);
        char *log_args[] = {"log", "--config", cfg, "--cluster", "prod/main", NULL};
        assert_int_equal(run_gitcd_env(env, log_args, &r), 0);
        assert_int_equal(r.status, 0);
        assert_int_equal(count_lines(r.out), 3);
        assert_non_null(strstr(r.out, "member.promote"));
        run_result_release(&r);
        char *list_args[] = {"snapshot", "list", "--config", cfg, NULL};
        assert_int_equal(run_gitcd_env(env, list_args, &r), 0);
        assert_int_equal(r.status, 0);
        run_result_release(&r);
        /* without the file, the same environment finds no state */
        char *bare_args[] = {"status", NULL};
        assert_int_equal(run_gitcd_env(env, bare_args, &r), 0);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "no state at"));
        run_result_release(&r);

        /* --state wins over the file */
        _cleanup_free_ char *other = path_join(empty, "other.db");
        char *both_args[] = {"status", "--config", cfg, "--state", other, NULL};
        assert_int_equal(run_gitcd_env(env, both_args, &r), 0);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, other));
        run_result_release(&r);
        char *both_log[] = {"log", "--state", other, "--config", cfg, NULL};
        assert_int_equal(run_gitcd_env(env, both_log, &r), 0);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "nothing has been applied yet"));
        run_result_release(&r);

        /* a file without state: the environment's */
        _cleanup_free_ char *dir = xstrdup(db_path);
        *strrchr(dir, '/') = '\0';
        _cleanup_free_ char *stateless =
            write_config("stateless.yaml", "sources:\n  - name: a\n    url: /srv/git/a.git\n");
        _cleanup_free_ char *env_here = xasprintf("GITCD_STATE_DIR=%s", dir);
        char *stateless_args[] = {"status", "--config", stateless, NULL};
        assert_int_equal(run_gitcd_env(env_here, stateless_args, &r), 0);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "prod/main"));
        run_result_release(&r);

        /* an invalid or missing file: its diagnostics, exit 1, nothing read or created */
        _cleanup_free_ char *bad_text = xasprintf("state: %s\n"
                                                  "verifySignature: true\n"
                                                  "sources:\n"
                                                  "  - name: platform\n"
                                                  "    url: /srv/git/platform.git\n",
                                                  other);
        _cleanup_free_ char *bad = write_config("bad.yaml", bad_text);
        _cleanup_free_ char *where = xasprintf("%s:2:1: error: unknown key 'verifySignature'", bad);
        char *status_bad[] = {"status", "--config", bad, NULL};
        char *log_bad[] = {"log", "--config", bad, NULL};
        char *list_bad[] = {"snapshot", "list", "--config", bad, NULL};
        char **cmds[] = {status_bad, log_bad, list_bad};
        for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
                assert_int_equal(run_gitcd_env(env, cmds[i], &r), 0);
                assert_int_equal(r.status, 1);
                if (!strstr(r.err, where))
                        fail_msg("%s: no diagnostic: %s", cmds[i][0], r.err);
                assert_string_equal(r.out, "");
                run_result_release(&r);
        }
        /* even beside --state: the file named must be usable */
        char *bad_state[] = {"status", "--state", db_path, "--config", bad, NULL};
        assert_int_equal(run_gitcd_env(env, bad_state, &r), 0);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, where));
        run_result_release(&r);
        _cleanup_free_ char *missing = path_join(empty, "missing.yaml");
        char *missing_args[] = {"log", "--config", missing, NULL};
        assert_int_equal(run_gitcd_env(env, missing_args, &r), 0);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, missing));
        assert_non_null(strstr(r.err, "cannot open"));
        run_result_release(&r);
        assert_false(path_exists(other));

        r = run("status", "--help", NULL, NULL, NULL, NULL);
        assert_non_null(strstr(r.out, "--config FILE"));
        assert_non_null(strstr(r.out, "/etc/gitcd/gitcd.yaml"));
        run_result_release(&r);
        r = run("log", "--help", NULL, NULL, NULL, NULL);
        assert_non_null(strstr(r.out, "--config FILE"));
        run_result_release(&r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_log_table),
            cmocka_unit_test(test_log_filters),
            cmocka_unit_test(test_log_json),
            cmocka_unit_test(test_status),
            cmocka_unit_test(test_default_path_and_errors),
            cmocka_unit_test(test_config_file),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
