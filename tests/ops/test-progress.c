/*
 * The progress display of `gitcd apply` through the real binary: on a
 * terminal (tmux, 80 columns) one line per cluster redrawn in place, never
 * wider than the terminal; piped, the timestamped lines; with -o json, one
 * JSON object per line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/ops/ops-test.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static size_t columns(const char *line, size_t len)
{
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
                n += ((unsigned char)line[i] & 0xC0) != 0x80;
        return n;
}

static char *capture(const char *sock)
{
        _cleanup_free_ char *cmd = xasprintf("tmux -L %s capture-pane -p -t apply", sock);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char *text = NULL;
        size_t cap = 0;
        ssize_t n = getdelim(&text, &cap, '\0', p);
        pclose(p);
        if (n < 0) {
                free(text);
                return xstrdup("");
        }
        return text;
}

static int count_lines_with(const char *text, const char *needle)
{
        int n = 0;
        for (const char *p = text; p && *p;) {
                const char *end = strchr(p, '\n');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                _cleanup_free_ char *line = xstrndup(p, len);
                n += strstr(line, needle) != NULL;
                p = end ? end + 1 : NULL;
        }
        return n;
}

static void test_tty(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16") || system("command -v tmux >/dev/null 2>&1") != 0)
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 3, "3.5.16");
        e2e_write_cluster(e, "b.yaml", "beta", 1, "3.5.16");
        _cleanup_free_ char *sock = xasprintf("gitcd-test-%d", (int)getpid());
        _cleanup_free_ char *start = xasprintf(
            "tmux -L %s new-session -d -s apply -x 80 -y 24 "
            "\"env GITCD_STATE_DIR=%s %s apply --source %s --timeout 120s; echo EXIT=\\$?; "
            "sleep 600\"",
            sock, e->state_dir, e->bin, e->source);
        assert_int_equal(system(start), 0);
        char *text = NULL;
        int64_t t0 = now_mono_ms();
        bool seen_progress = false, one_line = true;
        while (now_mono_ms() - t0 < 150000) {
                free(text);
                text = capture(sock);
                /* While it works, every cluster keeps exactly one line. */
                if (strstr(text, "default/alpha") && !strstr(text, "EXIT=")) {
                        one_line = one_line && count_lines_with(text, "default/alpha") == 1;
                        seen_progress = true;
                }
                if (strstr(text, "EXIT="))
                        break;
                usleep(100 * 1000);
        }
        _cleanup_free_ char *kill_cmd = xasprintf("tmux -L %s kill-server", sock);
        assert_int_equal(system(kill_cmd), 0);
        fprintf(stderr, "--- the pane ---\n%s\n", text);
        assert_true(seen_progress);
        assert_true(one_line);
        assert_non_null(strstr(text, "EXIT=0"));
        assert_non_null(strstr(text, "2 converged, 0 failed, 0 not converged"));
        assert_int_equal(count_lines_with(text, "default/alpha"), 1);
        assert_int_equal(count_lines_with(text, "default/beta"), 1);
        assert_int_equal(count_lines_with(text, "Running         3/3"), 1);
        assert_int_equal(count_lines_with(text, "Running         1/1"), 1);
        assert_int_equal(count_lines_with(text, "✓ default/"), 2);
        for (const char *p = text; *p;) {
                const char *end = strchr(p, '\n');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                assert_true(columns(p, len) <= 80);
                p = end ? end + 1 : p + len;
        }
        free(text);
        e2e_free(e);
}

static void test_plain_and_json(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        char *out = NULL;
        /* Piped: the timestamped lines, no terminal escapes. */
        const char *plain[] = {"apply", "--source", e->source, "--timeout", "60s", NULL};
        assert_int_equal(e2e_runv(e, &out, NULL, plain), 0);
        assert_null(strstr(out, "\033["));
        assert_true(count_lines_with(out, "] → default/alpha: ") >= 1);
        assert_true(count_lines_with(out, "] ✓ default/alpha: ") == 1);
        assert_non_null(strstr(out, "1 converged, 0 failed"));
        free(out);

        /* -o json after a change: one object per line, a summary last. */
        e2e_write_cluster(e, "a.yaml", "alpha", 3, "3.5.16");
        const char *json[] = {"apply", "--source", e->source, "--timeout",
                              "90s",   "-o",       "json",    NULL};
        assert_int_equal(e2e_runv(e, &out, NULL, json), 0);
        int passes = 0, converged = 0, summaries = 0;
        for (char *p = out, *save = NULL, *line; (line = strtok_r(p, "\n", &save)); p = NULL) {
                json_error_t err;
                json_t *o = json_loads(line, 0, &err);
                assert_non_null(o);
                const char *ev = json_string_value(json_object_get(o, "event"));
                assert_non_null(ev);
                if (streq(ev, "pass")) {
                        passes++;
                        assert_string_equal(json_string_value(json_object_get(o, "cluster")),
                                            "default/alpha");
                        const char *oc = json_string_value(json_object_get(o, "outcome"));
                        if (streq(oc, "converged")) {
                                converged++;
                                assert_int_equal(json_integer_value(json_object_get(o, "ready")),
                                                 3);
                                assert_int_equal(json_integer_value(json_object_get(o, "desired")),
                                                 3);
                        }
                } else {
                        assert_string_equal(ev, "summary");
                        assert_int_equal(json_integer_value(json_object_get(o, "converged")), 1);
                        summaries++;
                }
                json_decref(o);
        }
        assert_true(passes >= 3);
        assert_int_equal(converged, 1);
        assert_int_equal(summaries, 1);
        free(out);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_plain_and_json),
            cmocka_unit_test(test_tty),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
