/*
 * Maintenance against a real 3-member etcd 3.5 cluster (tests/harness/),
 * driven the way the reconciler drives it (maintenance_pass() until it is
 * idle):
 *
 *   1. a fragmented database (keys written, deleted, compacted) crosses
 *      spec.defrag.freeSpaceAbove: every member is defragmented, one at a
 *      time, while a writer keeps writing; no acknowledged write is lost,
 *      the followers go first and the leader last, after leadership was
 *      moved away from it (the run's record and the audit log say so), and
 *      every member's file shrank;
 *   2. with a 16 MiB --quota-backend-bytes, a writer fills the database
 *      until etcd raises NOSPACE for real and refuses writes: the
 *      NoSpaceAlarm condition turns True (audited), and with
 *      spec.defrag.disarmNoSpace gitcd compacts, defragments and disarms,
 *      after which writes are accepted again and the condition is False.
 *
 * The data stays small (a few MiB); the 500 MB case is bench/defrag.c.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "maintenance/maintenance.h"
#include "state/maintenance.h"
#include "tests/harness/harness.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define QUOTA (INT64_C(16) << 20)

static int64_t clock_offset_ms;
static int64_t test_wall(void)
{
        return now_wall_ms() + clock_offset_ms;
}

typedef struct writer {
        const char *endpoints;
        pthread_t thread;
        atomic_bool stop;
        int acked; /* w/000000 .. w/(acked-1) were acknowledged */
        int failed;
} writer;

static void *write_loop(void *userdata)
{
        writer *w = userdata;
        etcd_client *c = NULL;
        etcd_client_opts o = {.endpoints = w->endpoints, .call_timeout_ms = 3000};
        if (etcd_client_new(&o, &c) < 0)
                return NULL;
        int next = 0;
        while (!atomic_load(&w->stop)) {
                char key[32], val[64];
                snprintf(key, sizeof(key), "w/%06d", next);
                snprintf(val, sizeof(val), "value %d", next);
                if (etcd_put(c, key, val, strlen(val), NULL) == 0)
                        w->acked = ++next;
                else
                        w->failed++; /* not acknowledged: tried again with the same key */
        }
        etcd_client_free(c);
        return NULL;
}

static etcd_client *client_for(harness_cluster *hc)
{
        etcd_client *c = NULL;
        etcd_client_opts o = {.endpoints = hc->endpoints, .call_timeout_ms = 10000};
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

static int64_t db_size(etcd_client *c, const char *url)
{
        etcd_endpoint_status *s = NULL;
        assert_int_equal(etcd_status(c, url, &s), 0);
        int64_t n = s->db_size;
        etcd_endpoint_status_free(s);
        return n;
}

/* The name of the member that leads now. */
static const char *leader_name(harness_cluster *hc, etcd_client *c)
{
        etcd_endpoint_status *s = NULL;
        assert_int_equal(etcd_status(c, hc->members[0].client_url, &s), 0);
        uint64_t leader = s->leader;
        etcd_endpoint_status_free(s);
        for (size_t i = 0; i < hc->n; i++) {
                assert_int_equal(etcd_status(c, hc->members[i].client_url, &s), 0);
                bool is = s->member_id == leader;
                etcd_endpoint_status_free(s);
                if (is)
                        return hc->members[i].name;
        }
        fail_msg("no leader");
        return NULL;
}

typedef struct fixture {
        harness_cluster *hc;
        state_db *db;
        char *dir;
        maintenance *m;
        etcd_cluster *spec;
        const char *names[3];
        const char *urls[3];
        const etcd_endpoint_status *looked; /* the pass's look, handed to maintenance */
} fixture;

/* maintenance_pass() until it is idle; returns the number of steps taken. */
static int run_until_idle(fixture *f)
{
        int steps = 0;
        for (int guard = 0; guard < 200; guard++) {
                state_cluster *sc = NULL;
                assert_int_equal(state_cluster_get(f->db, "default/main", &sc), 0);
                maint_cluster mc = {.cluster = "default/main",
                                    .spec = f->spec,
                                    .sc = sc,
                                    .names = f->names,
                                    .client_urls = f->urls,
                                    .n = 3,
                                    .looked = f->looked,
                                    .commit = "0123456789abcdef0123456789abcdef01234567"};
                maint_result r = {0};
                assert_int_equal(maintenance_pass(f->m, &mc, &r), 0);
                state_cluster_free(sc);
                maint_result_release(&r);
                if (r.outcome == MAINT_OUT_IDLE)
                        return steps;
                steps++;
                if (r.outcome == MAINT_OUT_WAITING)
                        usleep(200 * 1000);
        }
        fail_msg("maintenance never became idle");
        return steps;
}

static const state_condition *condition(state_cluster *sc, const char *type)
{
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, type))
                        return &sc->conditions[i];
        return NULL;
}

static state_audit_list audit_of(state_db *db, const char *action)
{
        state_audit_list l = {0};
        state_audit_filter f = {.cluster = "default/main", .action = action};
        assert_int_equal(state_audit_query(db, &f, &l), 0);
        return l;
}

/* The run recorded: every member, the leader last. */
static void assert_run_leader_last(fixture *f, const char *leader)
{
        state_maint_run_list runs = {0};
        assert_int_equal(state_maint_run_list_for(f->db, "default/main", 0, &runs), 0);
        assert_int_equal(runs.n, 1);
        state_maint_run *run = runs.items[0];
        assert_string_equal(run->result, "succeeded");
        assert_string_equal(run->trigger, "free-space");
        assert_string_equal(run->leader, leader);
        const char *last = strrchr(run->members_done, ',');
        assert_non_null(last);
        assert_string_equal(last + 1, leader);
        assert_int_equal(strlen(run->members_done),
                         strlen(f->names[0]) + strlen(f->names[1]) + strlen(f->names[2]) + 2);
        state_maint_run_list_release(&runs);
}

/* The audit log tells the same order (newest first): leadership moved before the leader. */
static void assert_audit_leader_last(fixture *f, const char *leader)
{
        state_audit_list members = audit_of(f->db, "defrag.member");
        assert_int_equal(members.n, 3);
        assert_non_null(strstr(members.items[0]->after_json, leader));
        assert_null(strstr(members.items[1]->after_json, leader));
        assert_null(strstr(members.items[2]->after_json, leader));
        state_audit_list moved = audit_of(f->db, "defrag.leader-moved");
        assert_int_equal(moved.n, 1);
        assert_true(moved.items[0]->id < members.items[0]->id);
        assert_true(moved.items[0]->id > members.items[1]->id);
        assert_string_equal(members.items[0]->commit, "0123456789abcdef0123456789abcdef01234567");
        state_audit_list_release(&members);
        state_audit_list_release(&moved);
        state_audit_list fin = audit_of(f->db, "defrag.finished");
        assert_int_equal(fin.n, 1);
        state_audit_list_release(&fin);
}

/* NOSPACE recorded: its condition cleared, raised, compacted, disarmed and cleared in order. */
static void assert_nospace_recorded(fixture *f)
{
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, "default/main", &sc), 0);
        const state_condition *cond = condition(sc, "NoSpaceAlarm");
        assert_non_null(cond);
        assert_string_equal(cond->status, "False");
        assert_null(condition(sc, "CorruptAlarm"));
        state_cluster_free(sc);
        state_audit_list raised = audit_of(f->db, "alarm.raised");
        state_audit_list cleared = audit_of(f->db, "alarm.cleared");
        state_audit_list disarmed = audit_of(f->db, "alarm.disarmed");
        state_audit_list compacted = audit_of(f->db, "compaction");
        assert_int_equal(raised.n, 1);
        assert_int_equal(cleared.n, 1);
        assert_int_equal(disarmed.n, 1);
        assert_int_equal(compacted.n, 1);
        assert_true(raised.items[0]->id < compacted.items[0]->id);
        assert_true(compacted.items[0]->id < disarmed.items[0]->id);
        assert_true(disarmed.items[0]->id < cleared.items[0]->id);
        state_audit_list_release(&raised);
        state_audit_list_release(&cleared);
        state_audit_list_release(&disarmed);
        state_audit_list_release(&compacted);
}

/* One key overwritten with 256 KiB values until etcd refuses: its NOSPACE alarm raised. */
static void fill_until_nospace(etcd_client *c)
{
        char *big = xmalloc(256 << 10);
        memset(big, 'y', 256 << 10);
        int k = 0;
        for (int i = 0; i < 400 && k == 0; i++)
                k = etcd_put(c, "big", big, 256 << 10, NULL);
        assert_int_equal(k, ETCD_ERR_NOSPACE);
        etcd_alarm *alarms = NULL;
        size_t n_alarms = 0;
        assert_int_equal(etcd_alarm_list(c, &alarms, &n_alarms), 0);
        assert_true(n_alarms >= 1);
        assert_int_equal(alarms[0].type, ETCD_ALARM_NOSPACE);
        free(alarms);
        free(big);
}

static long alarm_calls(fixture *f)
{
        long n = 0;
        for (size_t i = 0; i < 3; i++) {
                long k = harness_grpc_handled(f->hc, i, "Alarm");
                assert_true(k >= 0);
                n += k;
        }
        return n;
}

/*
 * An idle look makes no Alarm call (etcd puts its GET through raft: the
 * alarms come from the Status answers) and asks no Status of the member
 * whose Status the pass's look already read; the other members are asked.
 */
static void assert_idle_look_cheap(fixture *f, etcd_client *c)
{
        etcd_endpoint_status *st = NULL;
        assert_int_equal(etcd_status(c, f->urls[0], &st), 0);
        long alarms = alarm_calls(f);
        long status0 = harness_grpc_handled(f->hc, 0, "Status");
        long status1 = harness_grpc_handled(f->hc, 1, "Status");
        f->looked = st;
        clock_offset_ms += 31 * 1000;
        assert_int_equal(run_until_idle(f), 0);
        f->looked = NULL;
        assert_int_equal(alarm_calls(f), alarms);
        assert_int_equal(harness_grpc_handled(f->hc, 0, "Status"), status0);
        assert_true(harness_grpc_handled(f->hc, 1, "Status") > status1);
        etcd_endpoint_status_free(st);
}

/*
 * The daemon's workers take a cluster's passes in turn, each with its own
 * state connection, handed over with the reconciler's: from here on
 * maintenance writes through a second one (another file, so that what
 * lands where shows), never through the first, which belongs to another
 * thread by then. Returns the first.
 */
static state_db *hand_over_db(fixture *f)
{
        state_db *first = f->db;
        _cleanup_free_ char *path2 = xasprintf("%s/state2.db", f->dir);
        assert_int_equal(state_open(path2, STATE_OPEN_READ_WRITE, &f->db), 0);
        assert_int_equal(
            state_cluster_set_desired(f->db, "default/main", "{}", NULL, NULL, test_wall()), 1);
        maintenance_set_db(f->m, f->db);
        return first;
}

/* Nothing went through the connection maintenance was made with; closes it. */
static void assert_nothing_through(state_db *first)
{
        state_maint_run_list none = {0};
        assert_int_equal(state_maint_run_list_for(first, "default/main", 20, &none), 0);
        assert_int_equal(none.n, 0);
        state_maint_run_list_release(&none);
        state_close(first);
}

static void test_defrag_and_nospace(void **unused)
{
        (void)unused;
        if (!harness_have_etcd("3.5.16"))
                skip();
        fixture f = {0};
        harness_opts ho = {.version = "3.5.16", .members = 3, .quota_backend_bytes = QUOTA};
        assert_int_equal(harness_cluster_start(&ho, &f.hc), 0);
        for (size_t i = 0; i < 3; i++) {
                f.names[i] = f.hc->members[i].name;
                f.urls[i] = f.hc->members[i].client_url;
        }
        f.dir = harness_tmpdir("gitcd-maint");
        _cleanup_free_ char *path = xasprintf("%s/state.db", f.dir);
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &f.db), 0);
        assert_int_equal(
            state_cluster_set_desired(f.db, "default/main", "{}", NULL, NULL, test_wall()), 1);
        maintenance_opts mo = {.db = f.db, .wall_ms = test_wall};
        assert_int_equal(maintenance_new(&mo, &f.m), 0);
        f.spec = etcd_cluster_new();
        f.spec->defrag.enabled = true;
        f.spec->defrag.free_space_above = xstrdup("256Ki");
        f.spec->defrag.free_space_above_bytes = 256 << 10;
        f.spec->options.quota_backend_bytes = QUOTA;
        etcd_client *c = client_for(f.hc);

        /* nothing due on a fresh cluster */
        assert_int_equal(run_until_idle(&f), 0);
        assert_idle_look_cheap(&f, c);

        state_db *first = hand_over_db(&f);

        /* fragment: 2 MiB written, deleted, compacted */
        static char blob[8192];
        memset(blob, 'x', sizeof(blob));
        for (int i = 0; i < 256; i++) {
                char key[32];
                snprintf(key, sizeof(key), "frag/%04d", i);
                assert_int_equal(etcd_put(c, key, blob, sizeof(blob), NULL), 0);
        }
        int64_t rev = 0;
        assert_int_equal(etcd_delete(c, "frag/", true, NULL), 0);
        assert_int_equal(etcd_put(c, "marker", "1", 1, &rev), 0);
        assert_int_equal(etcd_compact(c, rev, true), 0);
        int64_t before[3];
        for (size_t i = 0; i < 3; i++)
                before[i] = db_size(c, f.urls[i]);
        const char *leader = leader_name(f.hc, c);

        /* defragment under a writer (thresholds are looked at every 30 s) */
        clock_offset_ms += 31 * 1000;
        writer w = {.endpoints = f.hc->endpoints};
        assert_int_equal(pthread_create(&w.thread, NULL, write_loop, &w), 0);
        usleep(300 * 1000);
        int steps = run_until_idle(&f);
        usleep(300 * 1000);
        atomic_store(&w.stop, true);
        pthread_join(w.thread, NULL);
        assert_true(steps >= 6); /* start, 2 followers, move leader, leader, finish */
        assert_true(w.acked > 0);

        /* no acknowledged write lost */
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, "w/", true, &l), 0);
        assert_true((int)l->n >= w.acked);
        for (int i = 0; i < w.acked; i++) {
                char key[32];
                snprintf(key, sizeof(key), "w/%06d", i);
                assert_string_equal(l->kvs[i].key, key);
        }
        etcd_kv_list_free(l);

        /* the run: every member, the leader last after leadership moved away */
        assert_run_leader_last(&f, leader);
        assert_string_not_equal(leader_name(f.hc, c), leader);
        for (size_t i = 0; i < 3; i++)
                assert_true(db_size(c, f.urls[i]) < before[i]);

        /* the audit log tells the same order (newest first) */
        assert_audit_leader_last(&f, leader);

        /* a threshold run is not repeated within the hour */
        clock_offset_ms += 31 * 1000;
        assert_int_equal(run_until_idle(&f), 0);

        /* NOSPACE for real: overwrite one key with 256 KiB values until etcd refuses */
        f.spec->defrag.disarm_nospace = true;
        clock_offset_ms += 2 * 3600 * 1000;
        fill_until_nospace(c);

        steps = run_until_idle(&f);
        assert_true(steps >= 8); /* start, compact, 3 defrags, move, disarm, finish */
        etcd_alarm *alarms = NULL;
        size_t n_alarms = 0;
        assert_int_equal(etcd_alarm_list(c, &alarms, &n_alarms), 0);
        assert_int_equal(n_alarms, 0);
        free(alarms);
        assert_int_equal(etcd_put(c, "after", "ok", 2, NULL), 0);

        state_maint_run_list runs = {0};
        assert_int_equal(state_maint_run_list_for(f.db, "default/main", 1, &runs), 0);
        state_maint_run *run = runs.items[0];
        assert_string_equal(run->trigger, "nospace");
        assert_string_equal(run->result, "succeeded");
        assert_true(run->compact_revision > rev);
        assert_true(run->disarmed);
        state_maint_run_list_release(&runs);

        assert_nospace_recorded(&f);

        assert_nothing_through(first);

        etcd_client_free(c);
        maintenance_free(f.m);
        etcd_cluster_free(f.spec);
        state_close(f.db);
        harness_cluster_free(f.hc);
        free(f.dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defrag_and_nospace),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
