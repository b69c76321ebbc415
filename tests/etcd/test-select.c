/*
 * Unit tests of the client's endpoint order (etcd/select.c): a member whose
 * gRPC health said NOT_SERVING is tried last while its mark lasts, never
 * dropped, and asked again before a call once the mark has run out; an
 * endpoint never marked is never asked first (no extra round trip).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "etcd/select.h"

static void assert_order(const size_t *got, const size_t *want, size_t n)
{
        for (size_t i = 0; i < n; i++)
                assert_int_equal(got[i], want[i]);
}

static void test_all_up_rotates_from_preferred(void **state)
{
        (void)state;
        int64_t down[3] = {0, 0, 0};
        size_t order[3];
        assert_int_equal(etcd_select_order(3, 1, down, 1000, order), 3);
        assert_order(order, (size_t[]){1, 2, 0}, 3);
        assert_int_equal(etcd_select_order(3, 0, down, 1000, order), 3);
        assert_order(order, (size_t[]){0, 1, 2}, 3);
}

static void test_down_preferred_goes_last(void **state)
{
        (void)state;
        int64_t down[3] = {5000, 0, 0};
        size_t order[3];
        assert_int_equal(etcd_select_order(3, 0, down, 1000, order), 2);
        assert_order(order, (size_t[]){1, 2, 0}, 3);
        /* a mark that has run out counts as up again */
        assert_int_equal(etcd_select_order(3, 0, down, 5000, order), 3);
        assert_order(order, (size_t[]){0, 1, 2}, 3);
}

static void test_rotation_kept_within_groups(void **state)
{
        (void)state;
        int64_t down[4] = {0, 9000, 0, 9000};
        size_t order[4];
        assert_int_equal(etcd_select_order(4, 2, down, 1000, order), 2);
        assert_order(order, (size_t[]){2, 0, 3, 1}, 4);
}

static void test_all_down_still_all_tried(void **state)
{
        (void)state;
        int64_t down[3] = {2000, 3000, 4000};
        size_t order[3];
        assert_int_equal(etcd_select_order(3, 2, down, 1000, order), 0);
        assert_order(order, (size_t[]){2, 0, 1}, 3);
}

static void test_single_endpoint(void **state)
{
        (void)state;
        int64_t down[1] = {9000};
        size_t order[1];
        assert_int_equal(etcd_select_order(1, 0, down, 1000, order), 0);
        assert_int_equal(order[0], 0);
}

static void test_probe_first_only_after_a_mark(void **state)
{
        (void)state;
        assert_false(etcd_select_probe_first(0, 1000));    /* never marked: no probe */
        assert_false(etcd_select_probe_first(5000, 1000)); /* still marked: tried last */
        assert_true(etcd_select_probe_first(5000, 5000));  /* run out: ask first */
        assert_true(etcd_select_probe_first(5000, 9000));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_all_up_rotates_from_preferred),
            cmocka_unit_test(test_down_preferred_goes_last),
            cmocka_unit_test(test_rotation_kept_within_groups),
            cmocka_unit_test(test_all_down_still_all_tried),
            cmocka_unit_test(test_single_endpoint),
            cmocka_unit_test(test_probe_first_only_after_a_mark),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
