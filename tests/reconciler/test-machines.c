/*
 * The machines members run on (reconciler/machines.h): MachineHealthy
 * judged from each machine's last preflight (machines_judge, table-driven),
 * and on the fake world the whole path of a pass: the preflights the
 * target hands out recorded in the state store, a new verdict audited once
 * (machine.preflight), a member's machine that degrades turning
 * MachineHealthy False with the machine, its member and the measurement
 * (condition.changed audited once, the pass result saying so for the
 * daemon's alert), no member stopped, moved or restarted for it, and True
 * again once it recovers; then what `gitcd status` and `gitcd plan
 * --target hosts` show of it. And etcd's timeouts derived from the peer
 * RTT the preflights measured (reconciler/timeouts.h): loopback figures
 * keep etcd's defaults (no restart), a slow link derives larger ones that
 * reach every member by one rolling restart, a figure wandering within a
 * factor of two restarts nothing, the spec's own values and the preflight
 * turned off drop the derived ones; plan shows them with the measurement.
 *
 * The fake world's target has no machines: the test gives it machine
 * operations of its own (a copy of its operation table), which measure
 * each running member's machine when its last preflight is older than the
 * hosts target's interval and fail the machines the test marks slow. The
 * hosts target's own side (what it measures, when) is covered by
 * tests/targets/test-hosts.c and test-hosts-preflight.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reconciler/machines.h"
#include "targets/hosts-preflight.h"
#include "tests/fake/fixture.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* ---- machines_judge, pure ------------------------------------------------ */

static state_preflight *pf(const char *machine, const char *member, const char *verdict,
                           const char *reason)
{
        state_preflight *p = XNEW(state_preflight);
        p->cluster = xstrdup("default/demo");
        p->machine = xstrdup(machine);
        p->member = xstrdup_null(member);
        p->verdict = xstrdup(verdict);
        p->reason = xstrdup_null(reason);
        p->time_ms = 1795874700000; /* 2026-11-28T14:05:00Z */
        return p;
}

static void test_judge(void **state)
{
        (void)state;
        char *names[] = {"demo-0", "demo-1", "demo-2"};
        struct {
                const char *verdicts[3]; /* machines a, b, c: NULL no record */
                const char *members[3];
                int want;          /* machines_judge's answer */
                bool healthy;      /* when 1 */
                const char *words; /* in the message */
        } cases[] = {
            /* nothing measured yet, or only free machines: no condition */
            {{NULL, NULL, NULL}, {NULL, NULL, NULL}, 0, false, NULL},
            {{"failed", "passed", NULL}, {NULL, NULL, NULL}, 0, false, NULL},
            /* a machine that could not be measured counts neither way */
            {{"unmeasured", NULL, NULL}, {"demo-0", NULL, NULL}, 0, false, NULL},
            {{"passed", "passed", "unmeasured"},
             {"demo-0", "demo-1", "demo-2"},
             1,
             true,
             "each of the 2 machines"},
            /* a failed free machine (placement refused it) is not the members' */
            {{"passed", "failed", NULL}, {"demo-0", NULL, NULL}, 1, true, "each of the 1 machines"},
            {{"passed", "failed", "passed"},
             {"demo-0", "demo-1", "demo-2"},
             1,
             false,
             "b:22 (member demo-1, measured 2026-11-28T14:05:00Z): fdatasync p99 42.0 ms > 10.0 "
             "ms"},
            /* a machine whose member is gone (removed) does not count */
            {{"failed", "passed", NULL}, {"demo-9", "demo-1", NULL}, 1, true, "each of the 1"},
            {{"failed", "failed", NULL}, {"demo-0", "demo-2", NULL}, 1, false, "; b:22 (member"},
        };
        const char *machines[] = {"a:22", "b:22", "c:22"};
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                state_preflight_list l = {0};
                for (size_t m = 0; m < 3; m++) {
                        if (!cases[i].verdicts[m])
                                continue;
                        l.items = xrealloc(l.items, (l.n + 1) * sizeof(state_preflight *));
                        l.items[l.n++] = pf(machines[m], cases[i].members[m], cases[i].verdicts[m],
                                            streq(cases[i].verdicts[m], "failed")
                                                ? "fdatasync p99 42.0 ms > 10.0 ms"
                                                : NULL);
                }
                bool healthy = !cases[i].healthy;
                char *msg = NULL;
                int k = machines_judge(&l, names, 3, &healthy, &msg);
                if (k != cases[i].want)
                        fail_msg("case %zu: %d, want %d", i, k, cases[i].want);
                if (k == 1) {
                        assert_int_equal(healthy, cases[i].healthy);
                        if (!strstr(msg, cases[i].words))
                                fail_msg("case %zu: '%s' does not say '%s'", i, msg,
                                         cases[i].words);
                } else {
                        assert_null(msg);
                }
                free(msg);
                state_preflight_list_release(&l);
        }
}

/* ---- the pass on the fake world ------------------------------------------ */

static struct {
        target_ops ops;
        fake_world *w;
        char slow[FAKE_NAME_MAX]; /* the member whose machine's disk is slow ("": none) */
        int64_t measured_ms[FAKE_MAX_MEMBERS];
        int measurements;
        int64_t rtt_us; /* the slowest peer's median each machine measures (0: no RTT figure) */
        bool off;       /* the preflight is off: the operation says so (0) */
} mx;

static int fake_preflights(target *t, const etcd_cluster *c, const state_preflight_list *known,
                           int64_t now_ms, state_preflight_list *ret)
{
        (void)t;
        (void)c;
        (void)known;
        fake_world *w = mx.w;
        state_preflight_list out = {0};
        if (mx.off) {
                *ret = out;
                return 0;
        }
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                const fake_proc *p = &w->procs[i];
                if (!p->present || !p->running ||
                    !preflight_due(mx.measured_ms[i], now_ms, PREFLIGHT_INTERVAL_MS))
                        continue;
                mx.measured_ms[i] = now_ms;
                mx.measurements++;
                bool slow = streq(p->name, mx.slow);
                state_preflight *r = XNEW(state_preflight);
                r->cluster = xstrdup("default/demo");
                r->machine = xasprintf("machine-%zu:22", i);
                r->member = xstrdup(p->name);
                r->time_ms = now_ms;
                r->verdict = xstrdup(slow ? "failed" : "passed");
                r->reason = slow ? xstrdup("fdatasync p99 42.0 ms > 10.0 ms (p50 30.1 ms, max "
                                           "51.0 ms, 100 samples, ext2/ext3)")
                                 : NULL;
                r->n_sync = 100;
                r->sync_p50_us = slow ? 30100 : 900;
                r->sync_p99_us = slow ? 42000 : 2100;
                r->sync_max_us = slow ? 51000 : 3000;
                r->free_bytes = 5LL << 30;
                r->quota_bytes = 2LL << 30;
                r->fstype = xstrdup("ext2/ext3");
                r->kernel = xstrdup("6.1.0");
                if (mx.rtt_us > 0) {
                        r->rtt_samples = 10;
                        r->rtt_peers = 2;
                        r->rtt_slowest_us = mx.rtt_us;
                        r->rtt_max_us = mx.rtt_us + mx.rtt_us / 4;
                }
                out.items = xrealloc(out.items, (out.n + 1) * sizeof(state_preflight *));
                out.items[out.n++] = r;
        }
        *ret = out;
        return 1;
}

static const target_machine_ops fake_machine_ops = {.preflights = fake_preflights};

static const fx_config config = {.name = "machines"};

static int setup(void **state)
{
        int k = fx_setup(state, &config);
        fx *f = *state;
        memset(&mx, 0, sizeof(mx));
        mx.ops = *f->t->ops;
        mx.ops.machines = &fake_machine_ops;
        mx.w = f->w;
        f->t->ops = &mx.ops;
        return k;
}

static const state_condition *condition(const state_cluster *sc, const char *type)
{
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq(sc->conditions[i].type, type))
                        return &sc->conditions[i];
        return NULL;
}

/* MachineHealthy as stored: its status, and its message in *ret_message (allocated). */
static const char *machine_healthy(fx *f, char **ret_message)
{
        state_cluster *sc = NULL;
        assert_int_equal(state_cluster_get(f->db, "default/demo", &sc), 0);
        const state_condition *c = condition(sc, "MachineHealthy");
        const char *status = !c ? "none" : streq(c->status, "True") ? "True" : "False";
        if (ret_message)
                *ret_message = c ? xstrdup(c->message) : NULL;
        state_cluster_free(sc);
        return status;
}

/* What `gitcd <args>` prints (both streams), asserting it exits 0. */
static char *gitcd_output(const char *args)
{
        _cleanup_free_ char *cmd = xasprintf("'%s' %s 2>&1", getenv("GITCD_BIN"), args);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        strbuf sb = STRBUF_INIT;
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                sb_append_len(&sb, buf, n);
        int k = pclose(p);
        if (k != 0)
                fail_msg("%s: exit %d:\n%s", cmd, k, sb_str(&sb));
        return sb_detach(&sb);
}

/* What `gitcd status` prints for the cluster (args: "-o json" or ""). */
static char *status_output(fx *f, const char *args)
{
        _cleanup_free_ char *a = xasprintf("status --state '%s' default/demo %s", f->db_path, args);
        return gitcd_output(a);
}

/*
 * What `gitcd plan --target hosts` prints (args: "-o json" or "") for the
 * cluster defined with spec.hosts on the fake machines' names.
 */
static char *plan_output(fx *f, const char *args)
{
        _cleanup_free_ char *src = xasprintf("%s/source", f->dir);
        _cleanup_free_ char *file = xasprintf("%s/demo.yaml", src);
        const char *yaml = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                           "  name: demo\nspec:\n  replicas: 3\n  version: \"3.5.16\"\n"
                           "  hosts:\n    mode: systemd\n    machines:\n"
                           "    - {address: machine-0, dataDir: /var/lib/etcd/demo}\n"
                           "    - {address: machine-1, dataDir: /var/lib/etcd/demo}\n"
                           "    - {address: machine-2, dataDir: /var/lib/etcd/demo}\n"
                           "    - {address: machine-3, dataDir: /var/lib/etcd/demo}\n";
        assert_int_equal(mkdir_p(src, 0700), 0);
        assert_int_equal(write_file_atomic(file, yaml, strlen(yaml), 0600), 0);
        _cleanup_free_ char *a =
            xasprintf("plan --target hosts --source '%s' --state '%s' %s", src, f->db_path, args);
        return gitcd_output(a);
}

static void test_member_machine_degrades_then_recovers(void **state)
{
        fx *f = *state;
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n");
        fx_converge(f, NULL);
        pass_result res = fx_pass(f);
        assert_int_equal(res.outcome, PASS_CONVERGED);
        assert_int_equal(res.machines, 1);
        assert_string_equal(machine_healthy(f, NULL), "True");
        state_preflight_list l = {0};
        assert_int_equal(state_preflight_list_get(f->db, "default/demo", &l), 0);
        assert_int_equal(l.n, 3);
        for (size_t i = 0; i < l.n; i++)
                assert_string_equal(l.items[i]->verdict, "passed");
        state_preflight_list_release(&l);
        int audited = fx_audit_count(f, "machine.preflight");
        assert_int_equal(audited, 3); /* each machine's first verdict */
        int changed = fx_audit_count(f, "condition.changed");

        /* within the interval nothing is measured again */
        int measured = mx.measurements;
        for (int i = 0; i < 5; i++)
                assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        assert_int_equal(mx.measurements, measured);

        /* demo-1's disk degrades: seen at the next preflight, one interval on */
        snprintf(mx.slow, sizeof(mx.slow), "demo-1");
        int starts = fx_total_starts(f), adds = f->w->adds, removes = f->w->removes,
            moves = f->w->leader_moves;
        fake_world_advance(f->w, PREFLIGHT_INTERVAL_MS);
        res = fx_pass(f);
        assert_int_equal(res.outcome, PASS_CONVERGED); /* the cluster itself is fine */
        assert_int_equal(res.machines, -1);
        assert_non_null(strstr(res.machines_message, "(member demo-1, measured "));
        assert_non_null(strstr(res.machines_message, "fdatasync p99 42.0 ms > 10.0 ms"));
        _cleanup_free_ char *msg = NULL;
        assert_string_equal(machine_healthy(f, &msg), "False");
        assert_non_null(strstr(msg, "member demo-1"));
        assert_int_equal(fx_audit_count(f, "machine.preflight"), audited + 1);
        assert_int_equal(fx_audit_count(f, "condition.changed"), changed + 1);

        /* still slow at the next preflights: nothing new audited, nothing done to the member */
        for (int i = 0; i < 3; i++) {
                fake_world_advance(f->w, PREFLIGHT_INTERVAL_MS);
                res = fx_pass(f);
                assert_int_equal(res.machines, -1);
        }
        assert_int_equal(fx_audit_count(f, "machine.preflight"), audited + 1);
        assert_int_equal(fx_audit_count(f, "condition.changed"), changed + 1);
        assert_int_equal(fx_total_starts(f), starts);
        assert_int_equal(f->w->adds, adds);
        assert_int_equal(f->w->removes, removes);
        assert_int_equal(f->w->leader_moves, moves);

        /* what gitcd status shows */
        _cleanup_free_ char *text = status_output(f, "");
        assert_non_null(strstr(text, "Machines (last preflight):"));
        assert_non_null(strstr(text, "(demo-1): FAILED, measured "));
        assert_non_null(strstr(text, "fdatasync p99 42.0 ms > 10.0 ms"));
        assert_non_null(strstr(text, "(demo-0): passed, measured "));
        assert_non_null(strstr(text, "MachineHealthy"));
        _cleanup_free_ char *json = status_output(f, "-o json");
        assert_non_null(strstr(json, "\"machines\": [") ? json : strstr(json, "\"machines\":["));
        assert_non_null(
            strstr(json, "\"sync_p99_us\":42000") ? json : strstr(json, "\"sync_p99_us\": 42000"));

        /* and gitcd plan --target hosts, from the state store */
        _cleanup_free_ char *plan = plan_output(f, "");
        assert_non_null(strstr(plan, "The machines' last preflights (from the state store; no "
                                     "machine was contacted):"));
        assert_non_null(strstr(plan, "machine-1 (demo-1): FAILED, measured "));
        assert_non_null(strstr(plan, "machine-0 (demo-0): passed, measured "));
        assert_non_null(strstr(plan, "machine-3: never measured"));
        _cleanup_free_ char *plan_json = plan_output(f, "-o json");
        assert_non_null(strstr(plan_json, "\"preflights\": ["));
        assert_non_null(strstr(plan_json, "\"verdict\": \"failed\""));

        /* it recovers: True again, audited once */
        mx.slow[0] = '\0';
        fake_world_advance(f->w, PREFLIGHT_INTERVAL_MS);
        res = fx_pass(f);
        assert_int_equal(res.machines, 1);
        assert_string_equal(machine_healthy(f, NULL), "True");
        assert_int_equal(fx_audit_count(f, "machine.preflight"), audited + 2);
        assert_int_equal(fx_audit_count(f, "condition.changed"), changed + 2);
}

/* The derived timeouts stored for the cluster: heartbeat ms (0: none). */
static int derived_heartbeat(fx *f)
{
        state_timeouts t;
        int k = state_timeouts_get(f->db, "default/demo", &t);
        assert_true(k >= 0);
        return k > 0 ? t.heartbeat_ms : 0;
}

/* The members' config hashes, joined. */
static char *config_hashes(fx *f)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present)
                        sb_printf(&sb, "%s,", f->w->procs[i].config_hash);
        return sb_detach(&sb);
}

static void test_timeouts_from_rtt(void **state)
{
        fx *f = *state;
        mx.rtt_us = 300; /* loopback */
        fx_offer(f, NULL, "  replicas: 3\n  version: \"3.5.16\"\n");
        fx_converge(f, NULL);
        assert_int_equal(fx_pass(f).outcome, PASS_CONVERGED);
        /* etcd's defaults, kept with their measurement; nothing rendered differently */
        assert_int_equal(derived_heartbeat(f), 100);
        assert_int_equal(fx_audit_count(f, "timeouts.derived"), 0);
        int starts = fx_total_starts(f);
        _cleanup_free_ char *hashes = config_hashes(f);

        /* a slow link: 250 ms derived, one rolling restart brings it to every member */
        mx.rtt_us = 243000;
        fake_world_advance(f->w, PREFLIGHT_INTERVAL_MS);
        fx_converge(f, NULL);
        assert_int_equal(derived_heartbeat(f), 250);
        assert_int_equal(fx_audit_count(f, "timeouts.derived"), 1);
        assert_int_equal(fx_total_starts(f), starts + 3);
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (f->w->procs[i].present)
                        assert_null(strstr(hashes, f->w->procs[i].config_hash));
        state_timeouts t;
        assert_int_equal(state_timeouts_get(f->db, "default/demo", &t), 1);
        assert_int_equal(t.election_ms, 2500);
        assert_int_equal(t.rtt_us, 243000);

        /* plan shows them with the measurement */
        _cleanup_free_ char *plan = plan_output(f, "");
        assert_non_null(strstr(plan, "etcd's heartbeat interval and election timeout:"));
        assert_non_null(strstr(plan, "default/demo: 250 ms, 2500 ms (derived from the peer RTT: "
                                     "slowest link's median 243.0 ms, measured "));
        _cleanup_free_ char *plan_json = plan_output(f, "-o json");
        assert_non_null(strstr(plan_json, "\"from\": \"derived\""));
        assert_non_null(strstr(plan_json, "\"rtt_us\": 243000"));
        _cleanup_free_ char *status = status_output(f, "");
        assert_non_null(strstr(status, "peer RTT: slowest peer's median 243.0 ms"));
        assert_non_null(strstr(status, "etcd's timeouts from the peer RTT: heartbeat 250 ms, "
                                       "election 2500 ms (slowest link's median 243.0 ms"));
        _cleanup_free_ char *status_json = status_output(f, "-o json");
        assert_non_null(strstr(status_json, "\"heartbeat_ms\": 250")
                            ? status_json
                            : strstr(status_json, "\"heartbeat_ms\":250"));

        /* wandering within a factor of two: nothing restarts, ever */
        const int64_t wander[] = {400000, 150000, 480000, 130000};
        starts = fx_total_starts(f);
        for (size_t i = 0; i < ARRAY_SIZE(wander); i++) {
                mx.rtt_us = wander[i];
                fake_world_advance(f->w, PREFLIGHT_INTERVAL_MS);
                fx_converge(f, NULL);
        }
        assert_int_equal(derived_heartbeat(f), 250);
        assert_int_equal(fx_total_starts(f), starts);
        assert_int_equal(fx_audit_count(f, "timeouts.derived"), 1);

        /* the preflight turned off: forgotten, etcd's defaults by a rolling restart */
        mx.off = true;
        fx_converge(f, NULL);
        fx_converge(f, NULL);
        assert_int_equal(derived_heartbeat(f), 0);
        assert_int_equal(fx_total_starts(f), starts + 3);
        _cleanup_free_ char *hashes3 = config_hashes(f);
        assert_string_equal(hashes3, hashes);

        /* on again, but the spec sets its own: the spec's stand, nothing derived */
        mx.off = false;
        mx.rtt_us = 900000;
        fx_offer(f, NULL,
                 "  replicas: 3\n  version: \"3.5.16\"\n  options:\n"
                 "    heartbeatInterval: 200\n    electionTimeout: 2000\n");
        fake_world_advance(f->w, PREFLIGHT_INTERVAL_MS);
        fx_converge(f, NULL);
        assert_int_equal(derived_heartbeat(f), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_judge),
            cmocka_unit_test_setup_teardown(test_member_machine_degrades_then_recovers, setup,
                                            fx_teardown),
            cmocka_unit_test_setup_teardown(test_timeouts_from_rtt, setup, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
