/*
 * The hosts target's preflight, the pure half (targets/hosts-preflight.h):
 * the reader of what the script printed (strict: a line it does not know,
 * a number that is not one, output cut short are errors naming the line),
 * percentiles over samples less dd's start-up, the clock offset and its
 * bound, the threshold judgement; and the script itself run here with sh
 * on a temporary directory, once with the real dd and once with a dd
 * wrapper that sleeps 20 ms before each synchronous write (the test's slow
 * disk: a wrapper binary, not a slow device), which the judgement refuses
 * naming the measured p99; and when a preflight is due again (the
 * interval placement reuses a verdict for and a member's machine is
 * measured again after).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/harness/harness.h"
#include "targets/hosts-preflight.h"
#include "util/macro.h"
#include "util/xalloc.h"

static const preflight_limits defaults = {
    .sync_p99_max_us = PREFLIGHT_SYNC_P99_MAX_US,
    .offset_max_ms = PREFLIGHT_OFFSET_MAX_MS,
    .quota_bytes = 2LL << 30,
};

static int parse(const char *text, preflight_result *r, char **why)
{
        return preflight_parse(text, strlen(text), r, why);
}

static void test_parse_and_percentiles(void **state)
{
        (void)state;
        char *text = xstrdup("gitcd-preflight 1\nkernel=6.1.0-18-amd64\nfstype=ext2/ext3\n"
                             "free=10737418240\n");
        for (int i = 1; i <= 100; i++) {
                char *t = xasprintf("%ssync=%d\n", text, i * 100);
                free(text);
                text = t;
        }
        char *t = xasprintf("%send\n", text);
        free(text);
        preflight_result r = {0};
        char *why = NULL;
        assert_int_equal(parse(t, &r, &why), 0);
        assert_string_equal(r.kernel, "6.1.0-18-amd64");
        assert_string_equal(r.fstype, "ext2/ext3");
        assert_int_equal(r.free_bytes, 10737418240LL);
        assert_int_equal(r.n_sync, 100);
        assert_int_equal(r.sync_p50_us, 5000);
        assert_int_equal(r.sync_p99_us, 9900);
        assert_int_equal(r.sync_max_us, 10000);
        char *reason = NULL;
        assert_int_equal(preflight_judge(&r, 0, 1, &defaults, &reason), 0);
        assert_null(reason);
        preflight_result_release(&r);
        free(t);
}

/* dd's start-up, timed without dsync, is taken off every sample */
static void test_baseline(void **state)
{
        (void)state;
        preflight_result r = {0};
        char *why = NULL;
        assert_int_equal(parse("gitcd-preflight 1\nfree=1\nbase=3000\nbase=2000\nsync=2500\n"
                               "sync=12000\nsync=1000\nend\n",
                               &r, &why),
                         0);
        assert_int_equal(r.base_us, 2000);
        assert_int_equal(r.sync_p50_us, 500);
        assert_int_equal(r.sync_p99_us, 10000);
        assert_int_equal(r.sync_max_us, 10000);
        preflight_result_release(&r);
}

static void test_parse_refuses(void **state)
{
        (void)state;
        static const struct {
                const char *text, *why;
        } bad[] = {
            {"", "line 1: the machine printed nothing"},
            {"hello\n", "line 1: not a gitcd preflight"},
            {"gitcd-preflight 1\nfree=12\nsync=3\n", "stops before its end"},
            {"gitcd-preflight 1\nfree=-1\nsync=3\nend\n", "line 2: free space"},
            {"gitcd-preflight 1\nfree=12\nsync=3ms\nend\n", "line 3: a sync time"},
            {"gitcd-preflight 1\nfree=12\nsync=99999999999999999999\nend\n", "line 3:"},
            {"gitcd-preflight 1\nfree=12\nsudo: oops\nend\n", "line 3: unexpected line"},
            {"gitcd-preflight 1\nfree=12\nsync=1\nend\nsync=2\n", "line 5: text after"},
            {"gitcd-preflight 1\nsync=1\nend\n", "no free space"},
            {"gitcd-preflight 1\nfree=1\nend\n", "no sync sample"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                preflight_result r = {0};
                char *why = NULL;
                assert_int_equal(parse(bad[i].text, &r, &why), -EINVAL);
                assert_non_null(why);
                if (!strstr(why, bad[i].why))
                        fail_msg("%zu: \"%s\" does not say \"%s\"", i, why, bad[i].why);
                assert_null(r.kernel);
                free(why);
        }
}

static void test_judge(void **state)
{
        (void)state;
        preflight_result r = {.fstype = (char *)"xfs",
                              .free_bytes = 1LL << 30,
                              .n_sync = 100,
                              .sync_p50_us = 30000,
                              .sync_p99_us = 42000,
                              .sync_max_us = 51000};
        char *reason = NULL;
        assert_int_equal(preflight_judge(&r, -800, 100, &defaults, &reason), 1);
        assert_non_null(
            strstr(reason, "fdatasync p99 42.0 ms > 10.0 ms (p50 30.0 ms, max 51.0 ms"));
        assert_non_null(strstr(reason, "free space 1073741824 bytes < the backend quota"));
        assert_non_null(strstr(reason, "clock offset -800 ms (±100 ms) beyond ±500 ms"));
        free(reason);
        /* an offset within its bound of the threshold is not judged drifted */
        r.sync_p99_us = 10000;
        r.free_bytes = 3LL << 30;
        reason = NULL;
        assert_int_equal(preflight_judge(&r, 550, 60, &defaults, &reason), 0);
        assert_int_equal(preflight_judge(&r, 550, 40, &defaults, &reason), 1);
        free(reason);
        /* the script's own complaint fails */
        r.error = (char *)"a synchronous write of 8 KiB failed or took over 2 s";
        assert_int_equal(preflight_judge(&r, 0, 0, &defaults, &reason), 1);
        assert_non_null(strstr(reason, "failed or took over 2 s"));
        free(reason);
}

static void test_clock(void **state)
{
        (void)state;
        int64_t off = 0, bound = 0;
        char *why = NULL;
        assert_int_equal(preflight_clock_offset("1700000001500000000\n", 1700000000000LL,
                                                1700000000200LL, &off, &bound, &why),
                         0);
        assert_int_equal(off, 1400);
        assert_int_equal(bound, 100);
        assert_int_equal(preflight_clock_offset("%N\n", 0, 1, &off, &bound, &why), -EINVAL);
        free(why);
}

/* Run the script with sh here; its output read back. */
static void run_script(const char *tmp, const char *dir, const char *dd, preflight_result *r)
{
        char *script = preflight_script(dir, dd);
        char *path = xasprintf("%s.sh", tmp);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(script, f);
        fclose(f);
        char *cmd = xasprintf("sh %s", path);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char buf[65536];
        size_t n = fread(buf, 1, sizeof(buf) - 1, p);
        assert_int_equal(pclose(p), 0);
        char *why = NULL;
        if (preflight_parse(buf, n, r, &why) < 0)
                fail_msg("%s", why);
        unlink(path);
        free(cmd);
        free(path);
        free(script);
}

static void test_due(void **state)
{
        (void)state;
        const int64_t I = PREFLIGHT_INTERVAL_MS, T = 1795874700000;
        struct {
                int64_t last, now;
                bool due;
        } cases[] = {
            {0, T, true},          /* never measured */
            {T, T, false},         /* just measured */
            {T, T + I - 1, false}, /* within the interval */
            {T, T + I, true},      /* the interval has passed */
            {T + 5000, T, true},   /* measured "in the future": the clock stepped back */
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                if (preflight_due(cases[i].last, cases[i].now, I) != cases[i].due)
                        fail_msg("case %zu: due should be %d", i, cases[i].due);
        assert_int_equal(PREFLIGHT_INTERVAL_MS, 10 * 60 * 1000);
}

static void test_script_runs(void **state)
{
        (void)state;
        _cleanup_free_ char *tmpl = harness_tmpdir("gitcd-preflight");
        assert_non_null(tmpl);
        char *dir = xasprintf("%s/data dir; $(touch x)", tmpl);
        preflight_result r = {0};
        run_script(tmpl, dir, NULL, &r);
        assert_true(r.n_sync > 0 && r.n_sync <= PREFLIGHT_SAMPLES);
        assert_true(r.free_bytes > 0);
        assert_true(r.kernel[0] != '\0' && r.fstype[0] != '\0');
        assert_true(r.sync_p50_us <= r.sync_p99_us && r.sync_p99_us <= r.sync_max_us);
        preflight_result_release(&r);
        /* the probe file is gone and the quoted name made nothing else */
        char *probe = xasprintf("rmdir '%s' && rmdir %s", dir, tmpl);
        assert_int_equal(system(probe), 0);
        free(probe);
        free(dir);
}

static void test_slow_dd_refused(void **state)
{
        (void)state;
        _cleanup_free_ char *tmpl = harness_tmpdir("gitcd-preflight");
        assert_non_null(tmpl);
        char *dd = xasprintf("%s/slow-dd", tmpl);
        FILE *f = fopen(dd, "w");
        assert_non_null(f);
        fputs("#!/bin/sh\ncase \"$*\" in *oflag=dsync*) sleep 0.02;; esac\nexec dd \"$@\"\n", f);
        fclose(f);
        assert_int_equal(chmod(dd, 0755), 0);
        char *dir = xasprintf("%s/data", tmpl);
        preflight_result r = {0};
        run_script(tmpl, dir, dd, &r);
        assert_true(r.sync_p99_us >= 20000);
        char *reason = NULL;
        preflight_limits l = defaults;
        l.quota_bytes = 0;
        assert_int_equal(preflight_judge(&r, 0, 0, &l, &reason), 1);
        assert_non_null(strstr(reason, "fdatasync p99 "));
        assert_non_null(strstr(reason, " > 10.0 ms"));
        free(reason);
        preflight_result_release(&r);
        char *rm = xasprintf("rm -rf %s", tmpl);
        assert_int_equal(system(rm), 0);
        free(rm);
        free(dir);
        free(dd);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_and_percentiles),
            cmocka_unit_test(test_baseline),
            cmocka_unit_test(test_parse_refuses),
            cmocka_unit_test(test_judge),
            cmocka_unit_test(test_clock),
            cmocka_unit_test(test_due),
            cmocka_unit_test(test_script_runs),
            cmocka_unit_test(test_slow_dd_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
