/*
 * Leadership moved off a slow disk (spec.leadership) through whole passes
 * on the fake world: the members' /metrics are made up here (each scrape
 * adds 100 wal fsyncs and 100 backend commits, a slow member's at 200 ms, a
 * fast one's at 2 ms), read through reconciler_opts.member_metrics. A slow
 * leader loses leadership once its second scrape shows it, audited with
 * reason SlowDisk; not again within the interval; a slow follower is left
 * alone; avoidSlowMembers: false and a suspension keep leadership where it
 * is; a single voter is never scraped; after a restart the first window only
 * measures.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/fake/fixture.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static const double bounds[] = {0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064,
                                0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192};
#define NB (sizeof(bounds) / sizeof(bounds[0]))

/* Per member (by name): how many scrapes it served, and how many of them were slow. */
static struct {
        char name[64];
        unsigned fast, slow;
        bool is_slow;
} disks[FAKE_MAX_MEMBERS];
static int scrapes;

static unsigned *counts_of(const char *name, bool **ret_slow, unsigned **ret_slow_n)
{
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (!disks[i].name[0] || streq(disks[i].name, name)) {
                        snprintf(disks[i].name, sizeof(disks[i].name), "%s", name);
                        *ret_slow = &disks[i].is_slow;
                        *ret_slow_n = &disks[i].slow;
                        return &disks[i].fast;
                }
        fail_msg("too many members");
        return NULL;
}

static void set_slow(const char *name, bool slow)
{
        bool *s;
        unsigned *n;
        (void)counts_of(name, &s, &n);
        *s = slow;
}

static int metrics(void *userdata, const char *client_url, char **ret_text, char **ret_error)
{
        fake_world *w = userdata;
        const char *name = NULL;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (w->procs[i].present && streq(w->procs[i].client_url, client_url))
                        name = w->procs[i].name;
        if (!name) {
                *ret_error = xasprintf("no member at %s", client_url);
                return -EIO;
        }
        scrapes++;
        bool *slow;
        unsigned *slow_n;
        unsigned *fast = counts_of(name, &slow, &slow_n);
        if (*slow)
                *slow_n += 100;
        else
                *fast += 100;
        strbuf b = STRBUF_INIT;
        const char *names[] = {"etcd_disk_wal_fsync_duration_seconds",
                               "etcd_disk_backend_commit_duration_seconds"};
        for (int h = 0; h < 2; h++) {
                for (size_t i = 0; i < NB; i++)
                        sb_printf(&b, "%s_bucket{le=\"%g\"} %u\n", names[h], bounds[i],
                                  (bounds[i] >= 0.002 ? *fast : 0) +
                                      (bounds[i] >= 0.256 ? *slow_n : 0));
                sb_printf(&b, "%s_bucket{le=\"+Inf\"} %u\n", names[h], *fast + *slow_n);
        }
        *ret_text = sb_detach(&b);
        return 0;
}

static const fx_config config = {.name = "slowleader", .member_metrics = metrics};

static int setup(void **state)
{
        memset(disks, 0, sizeof(disks));
        scrapes = 0;
        return fx_setup(state, &config);
}

static const char *leader_name(fx *f)
{
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->members[i].used && f->w->members[i].id == f->w->leader)
                        return f->w->members[i].name;
        fail_msg("no leader");
        return NULL;
}

/* Converged passes after the clock moved on by ms: each may scrape once its window is over. */
static pass_result idle(fx *f, int64_t ms)
{
        fake_world_advance(f->w, ms);
        return fx_pass(f);
}

#define WINDOW_MS 15000 /* intervalSeconds 60: a quarter */

static void converge(fx *f, const char *leadership)
{
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n%s", leadership);
        fx_converge(f, NULL);
}

static void test_a_slow_leader_loses_leadership_once_per_interval(void **state)
{
        fx *f = *state;
        converge(f, "  leadership:\n    intervalSeconds: 60\n");
        char was[64];
        snprintf(was, sizeof(was), "%s", leader_name(f));
        /* the first scrape is a baseline: nothing judged yet */
        assert_int_equal(idle(f, WINDOW_MS).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->leader_moves, 0);
        set_slow(was, true);
        pass_result res = idle(f, WINDOW_MS);
        assert_int_equal(res.outcome, PASS_PROGRESSED);
        assert_string_equal(res.reason, "SlowDisk");
        assert_int_equal(f->w->leader_moves, 1);
        assert_string_not_equal(leader_name(f), was);
        assert_int_equal(fx_audit_count(f, "member.move-leader"), 1);
        fx_assert_no_pending_ops(f);

        /* the new leader turns slow at once: not moved again within the interval */
        set_slow(was, false);
        char now[64];
        snprintf(now, sizeof(now), "%s", leader_name(f));
        set_slow(now, true);
        int64_t since = 0;
        while (f->w->leader_moves == 1 && since < 120000) {
                res = idle(f, WINDOW_MS);
                since += WINDOW_MS;
        }
        assert_int_equal(f->w->leader_moves, 2);
        assert_true(since >= 60000);
        assert_int_equal(fx_audit_count(f, "member.move-leader"), 2);
}

static void test_a_slow_follower_is_left_alone(void **state)
{
        fx *f = *state;
        converge(f, "");
        const char *follower = NULL;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->members[i].used && f->w->members[i].id != f->w->leader)
                        follower = f->w->members[i].name;
        set_slow(follower, true);
        for (int i = 0; i < 10; i++)
                assert_int_equal(idle(f, 30000).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->leader_moves, 0);
        assert_true(scrapes >= 9 * 3);
}

static void test_switched_off_or_suspended_nothing_moves(void **state)
{
        fx *f = *state;
        converge(f, "  leadership:\n    avoidSlowMembers: false\n");
        set_slow(leader_name(f), true);
        for (int i = 0; i < 6; i++)
                assert_int_equal(idle(f, 30000).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->leader_moves, 0);
        assert_int_equal(scrapes, 0);

        /* suspended: the figures are still read, leadership stays */
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n  suspend: true\n");
        for (int i = 0; i < 6; i++)
                (void)idle(f, 30000);
        assert_int_equal(f->w->leader_moves, 0);
        assert_int_equal(fx_audit_count(f, "member.move-leader"), 0);

        /* resumed: it moves */
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n");
        for (int i = 0; i < 6 && f->w->leader_moves == 0; i++)
                (void)idle(f, 30000);
        assert_int_equal(f->w->leader_moves, 1);
        assert_int_equal(fx_audit_count(f, "member.move-leader"), 1);
}

/* A single voter has nobody to hand leadership to: its /metrics are never read. */
static void test_a_single_voter_is_not_scraped(void **state)
{
        fx *f = *state;
        fx_offer(f, NULL, "  replicas: 1\n  version: \"3.5.16\"\n");
        fx_converge(f, NULL);
        set_slow(leader_name(f), true);
        for (int i = 0; i < 6; i++)
                assert_int_equal(idle(f, 30000).outcome, PASS_CONVERGED);
        assert_int_equal(scrapes, 0);
        assert_int_equal(f->w->leader_moves, 0);
}

/* gitcd restarted: the scrapes are gone, so its first window only measures, then it moves. */
static void test_after_a_restart_the_first_window_only_measures(void **state)
{
        fx *f = *state;
        converge(f, "  leadership:\n    intervalSeconds: 60\n");
        assert_int_equal(idle(f, WINDOW_MS).outcome, PASS_CONVERGED);
        /* the disk turns slow just as gitcd restarts: its scrapes from before are gone */
        set_slow(leader_name(f), true);
        fx_close(f);
        fx_open(f);
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n"
                 "  leadership:\n    intervalSeconds: 60\n");
        assert_int_equal(idle(f, WINDOW_MS).outcome, PASS_CONVERGED);
        assert_int_equal(f->w->leader_moves, 0);
        assert_int_equal(idle(f, WINDOW_MS).outcome, PASS_PROGRESSED);
        assert_int_equal(f->w->leader_moves, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_a_slow_leader_loses_leadership_once_per_interval,
                                            setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_slow_follower_is_left_alone, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_switched_off_or_suspended_nothing_moves, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_a_single_voter_is_not_scraped, setup, fx_teardown),
            cmocka_unit_test_setup_teardown(test_after_a_restart_the_first_window_only_measures,
                                            setup, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
