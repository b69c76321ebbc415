/*
 * The revision bump of a restore (reconciler/bump.h), table-driven: a
 * number is used as written; auto is etcd's recommended 1,000,000,000
 * unless the write rate between the two newest snapshots times the
 * snapshot's age (or a revision the cluster reached past it), times the safety
 * factor, asks for more; never past GITCD_MAX_REVISION_BUMP; and the
 * sentence recorded says how.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "reconciler/bump.h"

#define HOUR  (3600 * INT64_C(1000))
#define DAY   (24 * HOUR)
#define NOW   INT64_C(1800000000000)
#define FLOOR BUMP_AUTO_FLOOR

static const revision_bump AUTO = {.mode = BUMP_AUTO};

typedef struct bump_case {
        const char *what;
        bump_inputs in;
        int64_t want;
        const char *says; /* a part of the sizing sentence */
} bump_case;

static void test_table(void **state)
{
        (void)state;
        const bump_case cases[] = {
            {"a number as written",
             {.want = {.mode = BUMP_FIXED, .amount = 5000}, .asked_by = "spec"},
             5000,
             "5000 (spec)"},
            {"0: none", {.want = {.mode = BUMP_FIXED}, .asked_by = "spec"}, 0, "none (spec)"},
            {"a number short of a revision the cluster reached: said",
             {.want = {.mode = BUMP_FIXED, .amount = 50},
              .asked_by = "spec",
              .snapshot_revision = 10,
              .seen_revision = 100},
             50,
             "50 (spec; short of revision 100, which the cluster reached)"},
            {"auto, nothing known: etcd's recommended bump",
             {.want = AUTO, .snapshot_revision = 42, .now_ms = NOW},
             FLOOR,
             "no write rate known (a snapshot gitcd did not take)"},
            {"auto, one snapshot: no rate",
             {.want = AUTO,
              .snapshot_ms = NOW - HOUR,
              .now_ms = NOW,
              .newer_revision = 42,
              .newer_ms = NOW - HOUR},
             FLOOR,
             "fewer than two snapshots"},
            /* 100 revisions/s for a day: 8,640,000 × 10 = 86,400,000, below the floor */
            {"auto, a quiet cluster: the floor",
             {.want = AUTO,
              .snapshot_revision = 1000000,
              .snapshot_ms = NOW - DAY,
              .now_ms = NOW,
              .newer_revision = 1000000,
              .newer_ms = NOW - DAY,
              .older_revision = 640000,
              .older_ms = NOW - DAY - HOUR},
             FLOOR,
             "100.0 revisions/s between its two newest snapshots × 24 h since this one"},
            /* 2,000 revisions/s for 10 days: 1,728,000,000 × 10 */
            {"auto, a busy cluster and an old snapshot: above the floor",
             {.want = AUTO,
              .snapshot_revision = 5,
              .snapshot_ms = NOW - 10 * DAY,
              .now_ms = NOW,
              .newer_revision = 7200005,
              .newer_ms = NOW - HOUR,
              .older_revision = 5,
              .older_ms = NOW - 2 * HOUR},
             INT64_C(17280000000),
             "2000.0 revisions/s"},
            /* seen 3,000,000,000 past the snapshot: × 10 */
            {"auto, a revision seen past the snapshot",
             {.want = AUTO,
              .snapshot_revision = 100,
              .now_ms = NOW,
              .seen_revision = INT64_C(3000000100)},
             INT64_C(30000000000),
             "the cluster reached revision 3000000100, 3000000000 past the snapshot"},
            {"auto, never past the maximum",
             {.want = AUTO,
              .snapshot_revision = 1,
              .now_ms = NOW,
              .seen_revision = INT64_C(900000000000)},
             GITCD_MAX_REVISION_BUMP,
             "× 10"},
            {"auto, a clock that went back: no negative age",
             {.want = AUTO,
              .snapshot_revision = 9,
              .snapshot_ms = NOW + HOUR,
              .now_ms = NOW,
              .newer_revision = 9,
              .newer_ms = NOW + HOUR,
              .older_revision = 1,
              .older_ms = NOW},
             FLOOR,
             "0 s since this one"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                bump_decision d = {0};
                bump_decide(&cases[i].in, &d);
                if (d.amount != cases[i].want || !strstr(d.sizing, cases[i].says))
                        print_message("%s: %lld, \"%s\"\n", cases[i].what, (long long)d.amount,
                                      d.sizing);
                assert_int_equal(d.amount, cases[i].want);
                assert_non_null(strstr(d.sizing, cases[i].says));
                bump_decision_release(&d);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
