/*
 * The notification queue in the state store (state/notify-queue.c) on a
 * real SQLite file: what is due and in which order, retries moving the next
 * attempt, delivered and expired rows leaving the queue for good (an
 * outcome for a row already done is -ENOENT, so two senders never both
 * deliver one), a second connection seeing the same queue, and pruning.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "state/notify-queue.h"
#include "tests/state/state-test.h"

#define T0 1790000000000LL

static state_db *open_rw(const char *path)
{
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        return db;
}

static int64_t enqueue(state_db *db, const char *event, int64_t next_ms)
{
        state_notification n = {.webhook = "ops",
                                .url = "http://127.0.0.1:1/hook",
                                .event = (char *)event,
                                .cluster = "default/main",
                                .severity = "info",
                                .payload = "{\"event\":\"x\"}",
                                .created_ms = T0,
                                .expires_ms = T0 + 3600 * 1000,
                                .next_attempt_ms = next_ms};
        int64_t id = 0;
        assert_int_equal(state_notify_enqueue(db, &n, &id), 0);
        assert_true(id > 0);
        return id;
}

static size_t due(state_db *db, int64_t now, int64_t *ret_first)
{
        state_notification_list l = {0};
        assert_int_equal(state_notify_due(db, now, 10, &l), 0);
        size_t n = l.n;
        if (n && ret_first)
                *ret_first = l.items[0]->id;
        state_notification_list_release(&l);
        return n;
}

static void test_queue(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = open_rw(path);
        int64_t next = 0;
        assert_int_equal(state_notify_next_due(db, &next), -ENOENT);

        int64_t a = enqueue(db, "cluster.converged", T0);
        int64_t b = enqueue(db, "cluster.failed", T0 + 10);
        int64_t first = 0;
        assert_int_equal(due(db, T0, &first), 1);
        assert_int_equal(first, a);
        assert_int_equal(due(db, T0 + 10, NULL), 2);
        assert_int_equal(state_notify_next_due(db, &next), 0);
        assert_int_equal(next, T0);

        /* A failed attempt moves the row back in the queue and keeps the reason. */
        assert_int_equal(state_notify_retry(db, a, T0 + 1000, "HTTP 503"), 0);
        assert_int_equal(due(db, T0 + 10, &first), 1);
        assert_int_equal(first, b);
        state_notification_list l = {0};
        assert_int_equal(state_notify_due(db, T0 + 1000, 10, &l), 0);
        assert_int_equal(l.n, 2);
        assert_int_equal(l.items[1]->id, a);
        assert_int_equal(l.items[1]->attempts, 1);
        assert_string_equal(l.items[1]->last_error, "HTTP 503");
        state_notification_list_release(&l);

        /* Another connection (the sender's) sees the same queue and takes a row. */
        state_db *other = open_rw(path);
        assert_int_equal(state_notify_delivered(other, b, T0 + 20), 0);
        /* Done is done: a second outcome for it is refused. */
        assert_int_equal(state_notify_delivered(db, b, T0 + 30), -ENOENT);
        assert_int_equal(state_notify_retry(db, b, T0 + 40, "late"), -ENOENT);
        assert_int_equal(state_notify_expire(other, a, T0 + 2000, "too old"), 0);
        assert_int_equal(state_notify_delivered(db, a, T0 + 2001), -ENOENT);
        int64_t pending = -1;
        assert_int_equal(state_notify_pending(db, &pending), 0);
        assert_int_equal(pending, 0);
        assert_int_equal(due(db, T0 + 100000, NULL), 0);
        assert_int_equal(state_notify_next_due(db, &next), -ENOENT);

        /* Pruning forgets done rows older than the bound, never pending ones. */
        int64_t c = enqueue(db, "cluster.blocked", T0);
        assert_int_equal(state_notify_prune(db, T0 + 25), 1);     /* b, delivered at T0+20 */
        assert_int_equal(state_notify_prune(db, T0 + 100000), 1); /* a, expired */
        assert_int_equal(state_notify_pending(db, &pending), 0);
        assert_int_equal(pending, 1);
        assert_int_equal(due(db, T0, &first), 1);
        assert_int_equal(first, c);
        state_close(other);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_queue),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
