/*
 * The slow-disk judgement (reconciler/slowdisk.h), pure: etcd's histogram
 * lines read strictly (malformed bucket lines named by their line), the
 * p99 of a window from two scrapes, and the table of when a leader is an
 * outlier and which voter takes over.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reconciler/slowdisk.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static const double bounds[] = {0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064,
                                0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192};
#define NB (sizeof(bounds) / sizeof(bounds[0]))

/* etcd's text for both histograms, every observation in the bucket of `at` (s). */
static char *metrics(const char *extra, double wal_at, unsigned wal_n, double commit_at,
                     unsigned commit_n)
{
        strbuf b = STRBUF_INIT;
        sb_printf(&b,
                  "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\n"
                  "go_goroutines 42\n%s",
                  extra ? extra : "");
        const char *names[] = {"etcd_disk_wal_fsync_duration_seconds",
                               "etcd_disk_backend_commit_duration_seconds"};
        double at[] = {wal_at, commit_at};
        unsigned n[] = {wal_n, commit_n};
        for (int h = 0; h < 2; h++) {
                sb_printf(&b, "# TYPE %s histogram\n", names[h]);
                for (size_t i = 0; i < NB; i++)
                        sb_printf(&b, "%s_bucket{le=\"%g\"} %u\n", names[h], bounds[i],
                                  at[h] <= bounds[i] ? n[h] : 0);
                sb_printf(&b, "%s_bucket{le=\"+Inf\"} %u\n%s_sum 1.5\n%s_count %u\n", names[h],
                          n[h], names[h], names[h], n[h]);
        }
        return sb_detach(&b);
}

static void test_reads_etcd_histograms(void **state)
{
        (void)state;
        char *t = metrics(NULL, 0.003, 10, 0.02, 7);
        disk_scrape s;
        char *err = NULL;
        assert_int_equal(slowdisk_parse(t, strlen(t), &s, &err), 0);
        assert_int_equal(s.wal.n, NB + 1);
        assert_true(isinf(s.wal.le[NB]));
        assert_true(s.wal.count[NB] == 10 && s.wal.count[1] == 0 && s.wal.count[2] == 10);
        assert_true(s.commit.count[NB] == 7);
        free(t);
}

static void test_refuses_malformed_buckets(void **state)
{
        (void)state;
        static const struct {
                const char *line, *why;
        } cases[] = {
            {"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"x\"} 1\n", "bound"},
            {"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.5\"} -1\n", "count"},
            {"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.5\"} nan\n", "count"},
            {"etcd_disk_wal_fsync_duration_seconds_bucket{foo=\"0.5\"} 1\n", "a bucket line"},
            {"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.5\"}\n", "a bucket line"},
            {"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.5\"} 5\n"
             "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.1\"} 5\n",
             "do not increase"},
            {"etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.1\"} 5\n"
             "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.5\"} 4\n",
             "decreases"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                disk_scrape s;
                char *err = NULL;
                char *t = metrics(cases[i].line, 0.003, 1, 0.003, 1);
                assert_int_equal(slowdisk_parse(t, strlen(t), &s, &err), -EBADMSG);
                assert_non_null(strstr(err, cases[i].why));
                /* the go_goroutines lines come first: a single bad line is line 4 */
                const char *at = strchr(cases[i].line, '\n')[1] ? "line 5" : "line 4";
                assert_non_null(strstr(err, at));
                free(err);
                free(t);
        }
        disk_scrape s;
        char *err = NULL;
        const char *none = "go_goroutines 1\n";
        assert_int_equal(slowdisk_parse(none, strlen(none), &s, &err), -EBADMSG);
        assert_non_null(strstr(err, "etcd_disk_wal_fsync_duration_seconds"));
        free(err);
}

/* The fuzz seeds: etcd 3.4.23's and 3.5.16's own /metrics lines read, every bad- seed refused. */
static void test_seeds(void **state)
{
        (void)state;
        const char *root = getenv("GITCD_SOURCE_ROOT");
        if (!root)
                skip();
        static const char *const seeds[] = {"ok-etcd-3.4.23", "ok-etcd-3.5.16", "ok-timestamp",
                                            "bad-bounds",     "bad-decreasing", "bad-empty",
                                            "bad-no-inf",     "bad-no-wal",     "bad-nul",
                                            "bad-overflow",   "bad-truncated"};
        for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
                char *path = xasprintf("%s/fuzz/corpus/slowdisk/%s", root, seeds[i]);
                char *text = NULL;
                size_t len = 0;
                assert_int_equal(read_file(path, 1 << 20, &text, &len), 0);
                disk_scrape s;
                char *err = NULL;
                int k = slowdisk_parse(text, len, &s, &err);
                if ((k == 0) != (strncmp(seeds[i], "ok-", 3) == 0))
                        fail_msg("%s: %d (%s)", seeds[i], k, err ? err : "");
                free(err);
                free(text);
                free(path);
        }
}

static disk_scrape scrape_of(double wal_at, unsigned wal_n, double commit_at, unsigned commit_n)
{
        char *t = metrics(NULL, wal_at, wal_n, commit_at, commit_n);
        disk_scrape s;
        char *err = NULL;
        assert_int_equal(slowdisk_parse(t, strlen(t), &s, &err), 0);
        free(t);
        return s;
}

static void test_p99_of_the_window(void **state)
{
        (void)state;
        disk_scrape a = scrape_of(0.003, 100, 0.003, 100);
        /* 100 more in the 64-128 ms bucket: the p99 lies in it */
        disk_scrape b = a;
        for (size_t i = 7; i <= NB; i++)
                b.wal.count[i] += 100;
        double p99;
        uint64_t n;
        assert_int_equal(slowdisk_p99(&a.wal, &b.wal, &p99, &n), 0);
        assert_int_equal(n, 100);
        assert_true(p99 > 0.064 && p99 <= 0.128);
        /* nothing in the window: no figure, no samples */
        assert_int_equal(slowdisk_p99(&a.commit, &b.commit, &p99, &n), 0);
        assert_int_equal(n, 0);
        /* all in +Inf: the largest finite bound */
        disk_scrape c = a;
        c.wal.count[NB] += 10;
        assert_int_equal(slowdisk_p99(&a.wal, &c.wal, &p99, &n), 0);
        assert_true(p99 == 8.192 && n == 10);
        /* etcd restarted: counts went down, the window does not fit */
        assert_int_equal(slowdisk_p99(&b.wal, &a.wal, &p99, &n), -ERANGE);
}

#define FAST(name, id)                                                                             \
        {                                                                                          \
                name, id, true, true, true, 0.002, 0.004, 500, 200                                 \
        }

static void test_judgement_table(void **state)
{
        (void)state;
        static const struct {
                const char *what;
                slow_member m[3];
                slow_kind want;
                const char *to, *metric;
        } cases[] = {
            {"all fast", {FAST("a", 1), FAST("b", 2), FAST("c", 3)}, SLOW_NONE, NULL, NULL},
            {"leader's wal fsync slow",
             {{"a", 1, true, true, true, 0.200, 0.004, 500, 200},
              FAST("b", 2),
              {"c", 3, true, true, true, 0.001, 0.004, 500, 200}},
             SLOW_MOVE,
             "c",
             "wal fsync"},
            {"leader's commit slow",
             {{"a", 1, true, true, true, 0.002, 0.400, 500, 200}, FAST("b", 2), FAST("c", 3)},
             SLOW_MOVE,
             "b",
             "backend commit"},
            {"over the floor but not 3x the others (all slow)",
             {{"a", 1, true, true, true, 0.200, 0.004, 500, 200},
              {"b", 2, true, true, true, 0.090, 0.004, 500, 200},
              {"c", 3, true, true, true, 0.080, 0.004, 500, 200}},
             SLOW_NONE,
             NULL,
             NULL},
            {"an outlier under the floor",
             {{"a", 1, true, true, true, 0.040, 0.004, 500, 200}, FAST("b", 2), FAST("c", 3)},
             SLOW_NONE,
             NULL,
             NULL},
            {"too few samples",
             {{"a", 1, true, true, true, 0.500, 0.004, 5, 200}, FAST("b", 2), FAST("c", 3)},
             SLOW_NONE,
             NULL,
             NULL},
            {"a slow follower is not judged",
             {FAST("a", 1), {"b", 2, true, true, true, 0.900, 0.900, 500, 200}, FAST("c", 3)},
             SLOW_NONE,
             NULL,
             NULL},
            {"no healthy voter to take over",
             {{"a", 1, true, true, true, 0.300, 0.004, 500, 200},
              {"b", 2, true, false, true, 0.002, 0.004, 500, 200},
              {"c", 3, false, true, true, 0.002, 0.004, 500, 200}},
             SLOW_NO_TARGET,
             NULL,
             "wal fsync"},
            {"the other voter is slow too (over the floor): no target",
             {{"a", 1, true, true, true, 0.900, 0.004, 500, 200},
              {"b", 2, true, true, true, 0.060, 0.004, 500, 200},
              {"c", 3, true, true, true, 0.002, 0.004, 500, 200}},
             SLOW_MOVE,
             "c",
             "wal fsync"},
            {"the leader not measured yet",
             {{"a", 1, true, true, false, 0, 0, 0, 0}, FAST("b", 2), FAST("c", 3)},
             SLOW_NONE,
             NULL,
             NULL},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                slow_verdict v;
                slowdisk_judge(cases[i].m, 3, 1, &v);
                if (v.kind != cases[i].want)
                        fail_msg("%s: kind %d, want %d (%s)", cases[i].what, v.kind, cases[i].want,
                                 v.message);
                if (cases[i].to)
                        assert_string_equal(v.to->name, cases[i].to);
                if (cases[i].metric)
                        assert_string_equal(v.metric, cases[i].metric);
                if (v.kind == SLOW_MOVE)
                        assert_non_null(strstr(v.message, "SlowDisk"));
        }
        /* no leader known: nothing */
        slow_member m[] = {FAST("a", 1), FAST("b", 2)};
        slow_verdict v;
        slowdisk_judge(m, 2, 0, &v);
        assert_int_equal(v.kind, SLOW_NONE);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_reads_etcd_histograms),
            cmocka_unit_test(test_refuses_malformed_buckets),
            cmocka_unit_test(test_p99_of_the_window),
            cmocka_unit_test(test_seeds),
            cmocka_unit_test(test_judgement_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
