/*
 * Unit tests of the client's endpoint order (etcd/select.c): a member whose
 * gRPC health said NOT_SERVING is tried last while its mark lasts, never
 * dropped, and asked again before a call once the mark has run out; an
 * endpoint never marked is never asked first (no extra round trip). How
 * long an attempt may take: only a small read's first try is cut early, a
 * large read and a write are not. And the process's marks (etcd/marks.c):
 * a defragmentation's hold puts its member last for writes and reads until
 * it is released, health marks expire, and nothing marked costs nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "etcd/marks.h"
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

static void test_only_a_small_reads_first_try_is_cut(void **state)
{
        (void)state;
        const int64_t now = 1000, deadline = 11000; /* 10 s left */
        /* a small read's first try: the short cut */
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_SMALL_READ, true, true, now, deadline, 1000),
            2000);
        /* a large read's first try: half of the time left, as any later try */
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_LARGE_READ, true, true, now, deadline, 1000),
            6000);
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_SMALL_READ, false, true, now, deadline, 1000),
            6000);
        /* a write, and the last endpoint: the whole deadline */
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_WRITE, true, true, now, deadline, 1000), 0);
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_SMALL_READ, true, false, now, deadline, 1000),
            0);
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_LARGE_READ, false, false, now, deadline, 1000),
            0);
        /* the cut never exceeds half of what is left */
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_SMALL_READ, true, true, now, now + 1200, 1000),
            1600);
        /* a deadline passed still gives a try of 1 ms, never 0 (the whole deadline) */
        assert_int_equal(
            etcd_select_attempt_deadline(ETCD_CALL_LARGE_READ, true, true, now, now, 1000),
            now + 1);
}

#define A "http://127.0.0.1:1"
#define B "http://127.0.0.1:2"
#define C "http://127.0.0.1:3"

static void order_of(etcd_mark *const *m, size_t n, size_t start, int64_t now, size_t *order)
{
        int64_t down[8];
        for (size_t i = 0; i < n; i++)
                down[i] = etcd_mark_until(m[i]);
        etcd_select_order(n, start, down, now, order);
}

static void test_a_defragmentation_holds_its_member_last(void **state)
{
        (void)state;
        etcd_mark *m[3] = {etcd_marks_ref(A), etcd_marks_ref(B), etcd_marks_ref(C)};
        etcd_mark *other = etcd_marks_ref(A); /* a second client of the same member */
        assert_ptr_equal(other, m[0]);
        size_t order[3];
        assert_int_equal(etcd_mark_until(m[0]), 0);
        etcd_mark_hold(m[0]);
        assert_int_equal(etcd_mark_until(other), INT64_MAX);
        assert_int_equal(etcd_marks_until(A), INT64_MAX);
        assert_int_equal(etcd_mark_until(m[1]), 0);
        /* whatever the clock says, a held member goes last, and is not probed */
        order_of(m, 3, 0, 1000, order);
        assert_order(order, (size_t[]){1, 2, 0}, 3);
        order_of(m, 3, 0, INT64_MAX - 1, order);
        assert_order(order, (size_t[]){1, 2, 0}, 3);
        assert_false(etcd_select_probe_first(etcd_mark_until(m[0]), 1000));
        /* holds nest: two defragmentations at once, the member is back after both */
        etcd_mark_hold(m[0]);
        etcd_mark_release(m[0], true);
        assert_int_equal(etcd_mark_until(m[0]), INT64_MAX);
        etcd_mark_release(m[0], true);
        assert_int_equal(etcd_mark_until(m[0]), 0);
        order_of(m, 3, 0, 1000, order);
        assert_order(order, (size_t[]){0, 1, 2}, 3);
        for (size_t i = 0; i < 3; i++)
                etcd_marks_unref(m[i]);
        assert_int_equal(etcd_marks_until(A), 0); /* still held by `other` */
        etcd_marks_unref(other);
        etcd_marks_unref(NULL);
}

static void test_a_failed_defragmentation_is_asked_again(void **state)
{
        (void)state;
        etcd_mark *b = etcd_marks_ref(B);
        etcd_mark_hold(b);
        etcd_mark_release(b, false);
        /* no answer: the member may still defragment; asked before the next call */
        assert_true(etcd_select_probe_first(etcd_mark_until(b), 1000));
        etcd_mark_up(b); /* the health question said SERVING */
        assert_int_equal(etcd_mark_until(b), 0);
        /* a health mark made during a hold outlives a failed release */
        etcd_mark_hold(b);
        etcd_mark_down(b, 9000);
        etcd_mark_release(b, false);
        assert_int_equal(etcd_mark_until(b), 9000);
        etcd_marks_unref(b);
        assert_int_equal(etcd_marks_until(B), 0); /* no client holds it: gone */
}

static void test_health_marks_are_shared_and_expire(void **state)
{
        (void)state;
        etcd_mark *m[3] = {etcd_marks_ref(A), etcd_marks_ref(B), etcd_marks_ref(C)};
        size_t order[3];
        etcd_mark_down(m[2], 4000);
        etcd_mark_down(m[2], 3000); /* the later mark wins */
        assert_int_equal(etcd_marks_until(C), 4000);
        /* a write starting on C goes to A first while the mark lasts */
        order_of(m, 3, 2, 1000, order);
        assert_order(order, (size_t[]){0, 1, 2}, 3);
        /* then C is first again, asked before the call */
        order_of(m, 3, 2, 4000, order);
        assert_order(order, (size_t[]){2, 0, 1}, 3);
        assert_true(etcd_select_probe_first(etcd_mark_until(m[2]), 4000));
        etcd_mark_up(m[2]);
        assert_int_equal(etcd_mark_until(m[2]), 0);
        assert_false(etcd_select_probe_first(etcd_mark_until(m[2]), 4000));
        for (size_t i = 0; i < 3; i++)
                etcd_marks_unref(m[i]);
}

static void test_drain_waits_for_calls_in_flight(void **state)
{
        (void)state;
        etcd_mark *a = etcd_marks_ref(A);
        assert_true(etcd_mark_drain(a, 0)); /* nothing in flight: at once */
        etcd_mark_enter(a);
        assert_false(etcd_mark_drain(a, 0)); /* a call in flight: until the deadline */
        etcd_mark_leave(a);
        assert_true(etcd_mark_drain(a, 0));
        /* a call about to be sent sees a hold taken before it, and is not counted */
        assert_true(etcd_mark_enter_unless_held(a));
        etcd_mark_hold(a);
        assert_false(etcd_mark_drain(a, 0)); /* the call counted before the hold */
        etcd_mark_leave(a);
        assert_false(etcd_mark_enter_unless_held(a));
        assert_true(etcd_mark_drain(a, 0));
        etcd_mark_release(a, true);
        assert_true(etcd_mark_enter_unless_held(a));
        etcd_mark_leave(a);
        etcd_marks_unref(a);
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
            cmocka_unit_test(test_only_a_small_reads_first_try_is_cut),
            cmocka_unit_test(test_a_defragmentation_holds_its_member_last),
            cmocka_unit_test(test_a_failed_defragmentation_is_asked_again),
            cmocka_unit_test(test_health_marks_are_shared_and_expire),
            cmocka_unit_test(test_drain_waits_for_calls_in_flight),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
