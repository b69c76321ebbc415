/*
 * The etcd version policy (api/versions.c): every row of its table and
 * every kind of move, allowed and refused, with the reason a user reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/versions.h"

static semver V(const char *s)
{
        semver v;
        assert_int_equal(semver_parse(s, &v), 0);
        return v;
}

/* from → to with the versions members run ("" for none); want_reason: a substring, or NULL. */
static version_move move(const char *from, const char *to, const char *running, const char *want)
{
        semver run[8];
        size_t n = 0;
        char *copy = strdup(running), *save = NULL;
        for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
                run[n++] = V(t);
        free(copy);
        semver a = V(from), b = V(to);
        char *why = NULL;
        version_move m = version_check_move(&a, &b, run, n, &why);
        if (want) {
                assert_int_equal(m, VERSION_REFUSED);
                assert_non_null(why);
                if (!strstr(why, want))
                        fail_msg("reason \"%s\" lacks \"%s\"", why, want);
        } else {
                if (why)
                        fail_msg("refused: %s", why);
        }
        free(why);
        return m;
}

static void test_supported(void **state)
{
        (void)state;
        semver v = V("3.4.23");
        assert_true(version_supported(&v));
        v = V("3.5.30");
        assert_true(version_supported(&v));
        v = V("3.6.0");
        assert_true(version_supported(&v));
        v = V("3.3.27");
        assert_false(version_supported(&v));
        v = V("3.7.0");
        assert_false(version_supported(&v));
        assert_string_equal(version_supported_list(), "3.4, 3.5 and 3.6");
}

static void test_patches(void **state)
{
        (void)state;
        assert_int_equal(move("3.5.16", "3.5.16", "", NULL), VERSION_SAME);
        assert_int_equal(move("3.5.16", "3.5.30", "", NULL), VERSION_PATCH_UPGRADE);
        assert_int_equal(move("3.5.30", "3.5.16", "", NULL), VERSION_PATCH_DOWNGRADE);
        assert_int_equal(move("3.4.20", "3.4.23", "3.4.20 3.4.20 3.4.20", NULL),
                         VERSION_PATCH_UPGRADE);
}

static void test_minor_up(void **state)
{
        (void)state;
        assert_int_equal(move("3.4.23", "3.5.16", "", NULL), VERSION_MINOR_UPGRADE);
        /* 3.5 → 3.6 needs 3.5.26 or later on every member. */
        assert_int_equal(move("3.5.26", "3.6.0", "", NULL), VERSION_MINOR_UPGRADE);
        assert_int_equal(move("3.5.30", "3.6.4", "3.5.30 3.5.30", NULL), VERSION_MINOR_UPGRADE);
        move("3.5.16", "3.6.0", "", "3.5.26 or later before 3.6");
        move("3.5.25", "3.6.0", "", "upgrade to 3.5.26 or a later 3.5 patch first");
        /* The spec says 3.5.30 but a member still runs 3.5.16: not yet. */
        move("3.5.30", "3.6.0", "3.5.30 3.5.16 3.5.30", "members still run 3.5.16");
        /* A half-finished 3.4 → 3.5 cannot go on to 3.6. */
        move("3.5.30", "3.6.0", "3.4.23 3.5.30", "skips minor 3.5");
}

static void test_skips_and_majors(void **state)
{
        (void)state;
        move("3.4.23", "3.6.0", "", "3.4.23 → 3.6.0 skips minor 3.5; upgrade to 3.5.x first");
        move("3.5.16", "4.0.0", "", "changes the major version");
}

static void test_downgrades(void **state)
{
        (void)state;
        move("3.5.16", "3.4.23", "", "is a downgrade etcd does not support");
        move("3.6.0", "3.5.30", "", "only through its downgrade API");
        move("3.6.0", "3.4.23", "", "downgrades more than one minor version");
        /* Completed upgrade: every member runs 3.5.16, going back is a downgrade. */
        move("3.5.16", "3.4.23", "3.5.16 3.5.16 3.5.16", "is a downgrade etcd does not support");
}

static void test_rollback_of_unfinished_upgrade(void **state)
{
        (void)state;
        /* One member moved to 3.5.16 and failed; the others still run 3.4.23. */
        assert_int_equal(move("3.5.16", "3.4.23", "3.4.23 3.4.23 3.5.16", NULL), VERSION_ROLLBACK);
        assert_int_equal(move("3.6.0", "3.5.30", "3.5.30 3.6.0 3.5.30", NULL), VERSION_ROLLBACK);
        /* Only back to what members run, never further. */
        move("3.5.16", "3.4.20", "3.4.23 3.5.16", "is a downgrade etcd does not support");
        assert_string_equal(version_move_name(VERSION_ROLLBACK),
                            "rollback of an unfinished upgrade");
}

/* etcd's restore tool takes --bump-revision from 3.4.27 and 3.5.10 on, and in every 3.6. */
static void test_restore_bump(void **state)
{
        (void)state;
        static const struct {
                semver v;
                bool bumps;
                const char *first;
        } cases[] = {
            {{3, 4, 23}, false, "3.4.27"}, {{3, 4, 26}, false, "3.4.27"}, {{3, 4, 27}, true, NULL},
            {{3, 5, 0}, false, "3.5.10"},  {{3, 5, 9}, false, "3.5.10"},  {{3, 5, 10}, true, NULL},
            {{3, 5, 16}, true, NULL},      {{3, 6, 0}, true, NULL},       {{3, 3, 30}, false, NULL},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *first = (char *)1;
                assert_int_equal(version_has_restore_bump(&cases[i].v, &first), cases[i].bumps);
                if (cases[i].first)
                        assert_string_equal(first, cases[i].first);
                else
                        assert_null(first);
                free(first);
                assert_int_equal(version_has_restore_bump(&cases[i].v, NULL), cases[i].bumps);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_supported),
            cmocka_unit_test(test_patches),
            cmocka_unit_test(test_minor_up),
            cmocka_unit_test(test_skips_and_majors),
            cmocka_unit_test(test_downgrades),
            cmocka_unit_test(test_rollback_of_unfinished_upgrade),
            cmocka_unit_test(test_restore_bump),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
