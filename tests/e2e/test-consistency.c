/*
 * Members proven to hold the same data, end to end on real etcd (the
 * version given as argv[1]: 3.5.16 or 3.4.23), local target, through the
 * real `gitcd` binary:
 *
 *  1. the report this answers: three members under an acknowledged-writes
 *     writer with etcd's own checks off (spec.consistency, with a reason)
 *     and gitcd's check every 2 s; one member stopped, one byte of a stored
 *     value changed in its bbolt file, the member started again by `gitcd
 *     run`: it serves the changed value. Within one check interval the
 *     cluster is frozen (phase Frozen, DataConsistent False naming the
 *     member, a webhook event, audited); a scale-up committed meanwhile
 *     does not happen; `gitcd repair --replace` of a majority member is
 *     refused; `gitcd repair --replace` of the minority member, carried
 *     out by the running daemon, replaces it from the majority, the next
 *     check agrees, the freeze lifts and the scale-up goes on; every
 *     acknowledged write is there and every member serves the value
 *     written;
 *  2. etcd's CORRUPT alarm (raised through etcd's Alarm API, as etcd's own
 *     periodic check does) on a cluster with etcd's checks on (their flags
 *     on every member's command line, as the version spells them): the
 *     same freeze, through `gitcd apply`; `gitcd repair --recheck` finds
 *     every member agreeing, disarms the alarm and the held scale-up runs.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAX_KEYS 100000
#define CANARY   "canaryvalue-0123456789"
#define CHANGED  "canaryvalue-X123456789"

static const char *version = "3.5.16";

static void write_spec(e2e *e, const char *name, int replicas, const char *consistency)
{
        _cleanup_free_ char *text =
            xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                      "kind: EtcdCluster\n"
                      "metadata:\n"
                      "  name: %s\n"
                      "  namespace: default\n"
                      "spec:\n"
                      "  replicas: %d\n"
                      "  version: \"%s\"\n"
                      "  progressDeadlineSeconds: 120\n"
                      "%s",
                      name, replicas, version, consistency ? consistency : "");
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, text);
}

/* The client URL of one member, from gitcd status. */
static char *client_url(e2e *e, const char *name, const char *member)
{
        json_t *st = e2e_status(e, name);
        size_t i;
        json_t *m;
        char *url = NULL;
        json_array_foreach(json_object_get(st, "members"), i, m)
        {
                if (streq_ptr(json_string_value(json_object_get(m, "name")), member))
                        url = xstrdup(json_string_value(json_object_get(m, "client_url")));
        }
        json_decref(st);
        if (!url)
                fail_msg("%s has no member %s", name, member);
        return url;
}

/* The canary's value as one member serves it from its own data. */
static char *canary_at(const char *url)
{
        etcd_client_opts o = {.endpoints = url};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        etcd_kv_list *l = NULL;
        int k = etcd_get(c, "canary", false, &l);
        if (k < 0)
                fail_msg("get canary at %s: %s", url, etcd_client_last_error(c));
        assert_int_equal(l->n, 1);
        char *v = xstrdup(l->kvs[0].value);
        etcd_kv_list_free(l);
        etcd_client_free(c);
        return v;
}

/* Stop a member's process the way a machine's shutdown does (SIGTERM), and wait for it. */
static void stop_member(e2e *e, const char *name, const char *member)
{
        pid_t pid = e2e_member_pid(e, name, member);
        assert_true(pid > 0);
        assert_int_equal(kill(pid, SIGTERM), 0);
        for (int i = 0; i < 500 && kill(pid, 0) == 0; i++)
                usleep(20 * 1000);
        assert_int_not_equal(kill(pid, 0), 0);
}

/* Change one byte of every copy of the canary's value in the member's bbolt file. */
static void flip_canary(e2e *e, const char *name, const char *member)
{
        _cleanup_free_ char *dir = e2e_member_dir(e, name, member);
        _cleanup_free_ char *db = path_join(dir, "data/member/snap/db");
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(db, 1 << 30, &data, &len), 0);
        int n = 0;
        for (char *p = memmem(data, len, CANARY, strlen(CANARY)); p;
             p = memmem(p + 1, len - (size_t)(p + 1 - data), CANARY, strlen(CANARY))) {
                p[strlen("canaryvalue-")] = 'X';
                n++;
        }
        assert_true(n >= 1);
        FILE *f = fopen(db, "r+b");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
        free(data);
}

static const char *phase_of(json_t *st)
{
        return json_string_value(json_object_get(st, "phase"));
}

static json_t *condition(json_t *st, const char *type)
{
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(st, "conditions"), i, c)
        {
                if (streq_ptr(json_string_value(json_object_get(c, "type")), type))
                        return c;
        }
        return NULL;
}

/* Poll gitcd status until the cluster's phase is phase (false on timeout). */
static bool wait_phase(e2e *e, const char *name, const char *phase, int timeout_s)
{
        int64_t end = now_mono_ms() + timeout_s * 1000;
        while (now_mono_ms() < end) {
                char *out = NULL;
                _cleanup_free_ char *id = xasprintf("default/%s", name);
                if (e2e_run(e, &out, "status", "-o", "json", id, NULL) == 0) {
                        json_t *j = json_loads(out, 0, NULL);
                        bool ok = streq_ptr(phase_of(j), phase);
                        json_decref(j);
                        free(out);
                        if (ok)
                                return true;
                } else
                        free(out);
                usleep(200 * 1000);
        }
        return false;
}

static bool wait_log(e2e *e, const char *log, const char *needle, int timeout_s)
{
        int64_t end = now_mono_ms() + timeout_s * 1000;
        while (now_mono_ms() < end) {
                _cleanup_free_ char *text = e2e_read_log(e, log);
                if (strstr(text, needle))
                        return true;
                usleep(200 * 1000);
        }
        return false;
}

static bool cmdline_has(pid_t pid, const char *word)
{
        _cleanup_free_ char *p = xasprintf("/proc/%ld/cmdline", (long)pid);
        char *data = NULL;
        size_t len = 0;
        if (read_file(p, 1 << 16, &data, &len) < 0)
                return false;
        bool found = false;
        for (size_t i = 0; i < len; i += strlen(data + i) + 1)
                found = found || streq(data + i, word);
        free(data);
        return found;
}

/* etcd's checks are off as the spec says (none of their flags); every member agrees. */
static void assert_agree_without_etcd_checks(e2e *e, const char *name)
{
        pid_t pid0 = e2e_member_pid(e, name, "demo-0");
        assert_false(cmdline_has(pid0, "--experimental-initial-corrupt-check=true"));
        json_t *st = e2e_status(e, name);
        json_t *cons = json_object_get(st, "consistency");
        assert_non_null(cons);
        assert_true(json_is_true(json_object_get(cons, "agree")));
        assert_string_equal(
            json_string_value(json_object_get(condition(st, "DataConsistent"), "status")), "True");
        json_decref(st);
}

/* Every member of name serves the canary's value as written. */
static void assert_canary_everywhere(e2e *e, const char *name)
{
        _cleanup_free_ char *all = e2e_endpoints(e, name);
        char *save = NULL;
        for (char *ep = strtok_r(all, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
                _cleanup_free_ char *v = canary_at(ep);
                assert_string_equal(v, CANARY);
        }
}

/*
 * Frozen on demo-1: the member really serves the changed value, the others
 * the one written; status, the audit log and the webhook say so.
 */
static void assert_frozen_on_demo1(e2e *e, const char *name)
{
        _cleanup_free_ char *url1 = client_url(e, name, "demo-1");
        _cleanup_free_ char *url0 = client_url(e, name, "demo-0");
        _cleanup_free_ char *v1 = canary_at(url1);
        _cleanup_free_ char *v0 = canary_at(url0);
        assert_string_equal(v1, CHANGED);
        assert_string_equal(v0, CANARY);
        json_t *st = e2e_status(e, name);
        json_t *dc = condition(st, "DataConsistent");
        assert_string_equal(json_string_value(json_object_get(dc, "status")), "False");
        assert_string_equal(json_string_value(json_object_get(dc, "reason")), "Mismatch");
        const char *msg = json_string_value(json_object_get(dc, "message"));
        assert_non_null(strstr(msg, "data of demo-1 differs from demo-0, demo-2"));
        assert_non_null(strstr(msg, "gitcd repair default/demo --replace demo-1"));
        json_t *cons = json_object_get(st, "consistency");
        assert_true(json_is_true(json_object_get(cons, "frozen")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(cons, "minority"), 0)),
                            "demo-1");
        assert_string_equal(json_string_value(json_object_get(condition(st, "Degraded"), "reason")),
                            "DataInconsistent");
        json_decref(st);
        assert_true(e2e_audit_count(e, name, "consistency.diverged") >= 1);
        assert_int_equal(e2e_audit_count(e, name, "consistency.frozen"), 1);
        /* the webhook event (its receiver is down: the attempt is logged) */
        assert_true(wait_log(e, "daemon.log", "(cluster.data-inconsistent) to webhook ops", 30));
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", "default/demo", NULL), 0);
        assert_non_null(strstr(out, "FROZEN since"));
        assert_non_null(strstr(out, "minority: demo-1"));
        free(out);
}

static void test_divergent_member(void **unused)
{
        (void)unused;
        if (!e2e_have_version(version))
                skip();
        const char *name = "demo";
        e2e *e = e2e_new();
        const char *consistency = "  consistency:\n"
                                  "    etcdChecks: false\n"
                                  "    reason: \"the report: etcd's own checks were off\"\n"
                                  "    checkInterval: 2s\n";
        write_spec(e, name, 3, consistency);
        assert_int_equal(e2e_apply(e, NULL, 120), 0);
        e2e_assert_voters(e, name, 3);
        assert_agree_without_etcd_checks(e, name);

        /* 1. a writer of acknowledged puts, and the canary */
        _cleanup_free_ char *eps = e2e_endpoints(e, name);
        etcd_client *c = e2e_client(e, name);
        assert_int_equal(etcd_put(c, "canary", CANARY, strlen(CANARY), NULL), 0);
        etcd_client_free(c);
        harness_writer *w = harness_writer_start(&(harness_writer_opts){
            .endpoints = eps, .max = MAX_KEYS, .interval_ms = 5, .call_timeout_ms = 2000});
        harness_writer_wait(w, 100);

        /* 2. demo-1 stopped; one byte of the canary's value changed in its bbolt file */
        stop_member(e, name, "demo-1");
        flip_canary(e, name, "demo-1");
        harness_writer_wait(w, w->acked + 50);

        /* 3. gitcd run starts it again (its pid file says it died while gitcd was down) */
        int hook = harness_free_port();
        _cleanup_free_ char *cfg_text = xasprintf("interval: 1s\n"
                                                  "allowPlainHTTP: [127.0.0.1]\n"
                                                  "sources:\n"
                                                  "  - name: main\n"
                                                  "    url: %s\n"
                                                  "notifications:\n"
                                                  "  webhooks:\n"
                                                  "    - name: ops\n"
                                                  "      url: http://127.0.0.1:%d/hook\n",
                                                  e->source, hook);
        _cleanup_free_ char *cfg = path_join(e->root, "gitcd.yaml");
        assert_int_equal(write_file_atomic(cfg, cfg_text, strlen(cfg_text), 0600), 0);
        const char *run[] = {"run", "--config", cfg, NULL};
        pid_t d = e2e_start(e, run, "daemon.log");
        if (!wait_phase(e, name, "Frozen", 90)) {
                _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
                fail_msg("not frozen:\n%s", log);
        }
        assert_frozen_on_demo1(e, name);

        /* 4. a scale-up committed meanwhile does not happen; the audit log says why */
        write_spec(e, name, 4, consistency);
        for (int i = 0; i < 300 && e2e_audit_count(e, name, "consistency.held") < 1; i++)
                usleep(100 * 1000);
        assert_int_equal(e2e_audit_count(e, name, "consistency.held"), 1);
        sleep(3);
        e2e_assert_voters(e, name, 3);

        /* 5. a repair that names a member of the majority is refused */
        char *err = NULL;
        char *out = NULL;
        const char *bad[] = {"repair",    "default/demo", "--replace", "demo-0",
                             "--timeout", "60s",          NULL};
        assert_int_equal(e2e_runv(e, &out, &err, bad), 1);
        assert_non_null(strstr(err, "demo-0 is not in the minority (demo-1)"));
        free(out);
        free(err);
        assert_int_equal(e2e_audit_count(e, name, "repair.refused"), 1);

        /* 6. the repair: the daemon replaces demo-1 from the majority; this command waits */
        out = err = NULL;
        const char *fix[] = {"repair",    "default/demo", "--replace", "demo-1",
                             "--timeout", "180s",         NULL};
        int k = e2e_runv(e, &out, &err, fix);
        if (k != 0)
                fail_msg("gitcd repair exited %d:\n%s\n%s", k, out, err);
        assert_non_null(strstr(out, "demo-1 replaced by demo-3"));
        free(out);
        free(err);
        /* the freeze lifted by itself; the scale-up that waited goes on */
        if (!e2e_wait_ready(e, name, 4, 180)) {
                _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
                fail_msg("not 4 ready:\n%s", log);
        }
        e2e_assert_voters(e, name, 4);
        etcd_members *l = e2e_members(e, name);
        for (size_t i = 0; i < l->n; i++)
                assert_string_not_equal(l->members[i].name, "demo-1");
        etcd_members_free(l);
        json_t *st = e2e_status(e, name);
        json_t *dc = condition(st, "DataConsistent");
        assert_string_equal(json_string_value(json_object_get(dc, "status")), "True");
        assert_false(json_is_true(json_object_get(json_object_get(st, "consistency"), "frozen")));
        json_t *rep = json_array_get(json_object_get(st, "repairs"), 0);
        assert_string_equal(json_string_value(json_object_get(rep, "result")), "succeeded");
        assert_string_equal(json_string_value(json_object_get(rep, "replacement")), "demo-3");
        json_decref(st);
        assert_int_equal(e2e_audit_count(e, name, "repair.succeeded"), 1);
        assert_int_equal(e2e_audit_count(e, name, "consistency.unfrozen"), 1);
        assert_true(wait_log(e, "daemon.log", "(cluster.data-consistent) to webhook ops", 30));

        /* 7. every member serves the value written; no acknowledged write is lost */
        harness_writer_stop(w);
        assert_canary_everywhere(e, name);
        assert_int_equal(e2e_writer_kept(w, e, name, INT64_MAX), w->acked);
        harness_writer_free(w);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

static void test_corrupt_alarm(void **unused)
{
        (void)unused;
        if (!e2e_have_version(version))
                skip();
        const char *name = "alarm";
        e2e *e = e2e_new();
        write_spec(e, name, 3, NULL);
        assert_int_equal(e2e_apply(e, NULL, 120), 0);
        /* etcd's own checks, on by default, as this version spells them */
        pid_t pid = e2e_member_pid(e, name, "alarm-0");
        assert_true(cmdline_has(pid, "--experimental-initial-corrupt-check=true"));
        assert_true(cmdline_has(pid, "--experimental-corrupt-check-time=4h"));
        assert_int_equal(cmdline_has(pid, "--experimental-compact-hash-check-enabled=true"),
                         streq(version, "3.5.16"));

        etcd_client *c = e2e_client(e, name);
        assert_int_equal(etcd_put(c, "before", "1", 1, NULL), 0);
        /* as etcd's own checks raise it: for no member in particular (ID 0) */
        assert_int_equal(etcd_alarm_activate(c, 0, ETCD_ALARM_CORRUPT), 0);
        assert_int_not_equal(etcd_put(c, "during", "1", 1, NULL), 0);

        /* apply stops and says why: frozen */
        char *out = NULL, *err = NULL;
        const char *apply[] = {"apply", "--source", e->source, "--timeout",
                               "60s",   "-o",       "plain",   NULL};
        assert_int_equal(e2e_runv(e, &out, &err, apply), 1);
        assert_non_null(strstr(out, "etcd raised a CORRUPT alarm"));
        free(out);
        free(err);
        json_t *st = e2e_status(e, name);
        assert_string_equal(phase_of(st), "Frozen");
        json_t *dc = condition(st, "DataConsistent");
        assert_string_equal(json_string_value(json_object_get(dc, "reason")), "CorruptAlarm");
        assert_string_equal(
            json_string_value(json_object_get(condition(st, "CorruptAlarm"), "status")), "True");
        json_decref(st);

        /* a scale-up waits */
        write_spec(e, name, 4, NULL);
        out = err = NULL;
        assert_int_equal(e2e_runv(e, &out, &err, apply), 1);
        free(out);
        free(err);
        e2e_assert_voters(e, name, 3);
        assert_true(e2e_audit_count(e, name, "consistency.held") >= 1);

        /* the recheck: every member agrees, the alarm is disarmed, the scale-up runs */
        out = err = NULL;
        const char *recheck[] = {"repair", "default/alarm", "--recheck", "--timeout", "180s", NULL};
        int k = e2e_runv(e, &out, &err, recheck);
        if (k != 0)
                fail_msg("gitcd repair --recheck exited %d:\n%s\n%s", k, out, err);
        assert_non_null(strstr(out, "every member agrees"));
        assert_non_null(strstr(out, "converged"));
        free(out);
        free(err);
        e2e_assert_voters(e, name, 4);
        etcd_alarm *alarms = NULL;
        size_t n = 0;
        assert_int_equal(etcd_alarm_list(c, &alarms, &n), 0);
        assert_int_equal(n, 0);
        free(alarms);
        assert_int_equal(etcd_put(c, "after", "1", 1, NULL), 0);
        st = e2e_status(e, name);
        assert_string_equal(phase_of(st), "Running");
        assert_string_equal(
            json_string_value(json_object_get(condition(st, "DataConsistent"), "status")), "True");
        assert_string_equal(
            json_string_value(json_object_get(condition(st, "CorruptAlarm"), "status")), "False");
        json_decref(st);
        assert_int_equal(e2e_audit_count(e, name, "alarm.disarmed"), 1);
        etcd_client_free(c);
        e2e_free(e);
}

int main(int argc, char **argv)
{
        if (argc > 1)
                version = argv[1];
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_divergent_member),
            cmocka_unit_test(test_corrupt_alarm),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
