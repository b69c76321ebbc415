/*
 * The hosts target's machine preflights in the state store
 * (state/preflights.h) on a real SQLite file: one row per cluster and
 * machine, replaced at each preflight with every measurement kept (and
 * the member the machine held); a
 * verdict is new when it or its reason changes (so it is audited once),
 * not when only the figures move; a cluster's rows cleared together. The
 * peer RTT kept with them, and a cluster's derived timeouts (set, read
 * back, replaced, forgotten).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "state/preflights.h"
#include "tests/state/state-test.h"

static void test_preflights(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);

        state_preflight p = {.cluster = "prod/main",
                             .machine = "10.0.0.1:22",
                             .member = "main-0",
                             .time_ms = 1,
                             .verdict = "passed",
                             .kernel = "6.1.0",
                             .fstype = "ext2/ext3",
                             .free_bytes = 5LL << 30,
                             .quota_bytes = 2LL << 30,
                             .n_sync = 100,
                             .sync_p50_us = 900,
                             .sync_p99_us = 2100,
                             .sync_max_us = 3000,
                             .offset_ms = -12,
                             .offset_bound_ms = 1,
                             .rtt_samples = 10,
                             .rtt_peers = 2,
                             .rtt_failed = 1,
                             .rtt_slowest_us = 230000,
                             .rtt_max_us = 1010000};
        assert_int_equal(state_preflight_set(db, &p), 1);
        p.time_ms = 2;
        p.sync_p99_us = 2500; /* only the figures moved: not new */
        assert_int_equal(state_preflight_set(db, &p), 0);
        p.time_ms = 3;
        p.verdict = "failed";
        p.reason = "fdatasync p99 42.0 ms > 10.0 ms";
        p.sync_p99_us = 42000;
        assert_int_equal(state_preflight_set(db, &p), 1);
        p.machine = "10.0.0.2:22";
        p.verdict = "unmeasured";
        p.reason = "connection refused";
        assert_int_equal(state_preflight_set(db, &p), 1);
        p.cluster = "prod/other";
        assert_int_equal(state_preflight_set(db, &p), 1);
        /* no verdict, or a bad cluster name, is refused */
        p.verdict = "";
        assert_int_equal(state_preflight_set(db, &p), -EINVAL);
        p.verdict = "maybe";
        assert_true(state_preflight_set(db, &p) < 0);
        p.cluster = "nonamespace";
        p.verdict = "passed";
        assert_int_equal(state_preflight_set(db, &p), -EINVAL);

        state_preflight *g = NULL;
        assert_int_equal(state_preflight_get(db, "prod/main", "10.0.0.1:22", &g), 1);
        assert_string_equal(g->verdict, "failed");
        assert_string_equal(g->reason, "fdatasync p99 42.0 ms > 10.0 ms");
        assert_int_equal(g->sync_p99_us, 42000);
        assert_int_equal(g->free_bytes, 5LL << 30);
        assert_int_equal(g->offset_ms, -12);
        assert_string_equal(g->fstype, "ext2/ext3");
        assert_int_equal(g->time_ms, 3);
        assert_string_equal(g->member, "main-0");
        assert_int_equal(g->rtt_samples, 10);
        assert_int_equal(g->rtt_peers, 2);
        assert_int_equal(g->rtt_failed, 1);
        assert_int_equal(g->rtt_slowest_us, 230000);
        assert_int_equal(g->rtt_max_us, 1010000);
        state_preflight *d = state_preflight_dup(g);
        state_preflight_free(g);
        assert_string_equal(d->member, "main-0"); /* a copy of its own */
        assert_string_equal(d->reason, "fdatasync p99 42.0 ms > 10.0 ms");
        state_preflight_free(d);
        g = NULL;
        assert_int_equal(state_preflight_get(db, "prod/main", "10.0.0.9:22", &g), 0);
        assert_null(g);

        state_preflight_list l = {0};
        assert_int_equal(state_preflight_list_get(db, "prod/main", &l), 0);
        assert_int_equal(l.n, 2);
        assert_string_equal(l.items[1]->machine, "10.0.0.2:22");
        assert_string_equal(l.items[1]->verdict, "unmeasured");
        state_preflight_list_release(&l);

        assert_int_equal(state_preflight_clear(db, "prod/main"), 0);
        assert_int_equal(state_preflight_list_get(db, NULL, &l), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->cluster, "prod/other");
        state_preflight_list_release(&l);
        state_close(db);
}

static void test_timeouts(void **state)
{
        (void)state;
        _cleanup_free_ char *path = test_db_path();
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        state_timeouts t = {0};
        assert_int_equal(state_timeouts_get(db, "prod/main", &t), 0);
        state_timeouts a = {
            .heartbeat_ms = 250, .election_ms = 2500, .rtt_us = 231000, .time_ms = 7};
        assert_int_equal(state_timeouts_set(db, "prod/main", &a), 0);
        assert_int_equal(state_timeouts_get(db, "prod/main", &t), 1);
        assert_int_equal(t.heartbeat_ms, 250);
        assert_int_equal(t.election_ms, 2500);
        assert_int_equal(t.rtt_us, 231000);
        assert_int_equal(t.time_ms, 7);
        a.heartbeat_ms = 600;
        a.election_ms = 6000;
        assert_int_equal(state_timeouts_set(db, "prod/main", &a), 0);
        assert_int_equal(state_timeouts_get(db, "prod/main", &t), 1);
        assert_int_equal(t.heartbeat_ms, 600);
        a.heartbeat_ms = 0; /* refused */
        assert_int_equal(state_timeouts_set(db, "prod/main", &a), -EINVAL);
        assert_int_equal(state_timeouts_set(db, "nonamespace", &t), -EINVAL);
        assert_int_equal(state_timeouts_clear(db, "prod/main"), 0);
        assert_int_equal(state_timeouts_get(db, "prod/main", &t), 0);
        state_close(db);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_preflights),
            cmocka_unit_test(test_timeouts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
