/*
 * The hosts target end to end, through the real `gitcd plan`, `gitcd
 * apply --target hosts` and `gitcd status`: five real sshd "machines" on
 * 127.0.0.2-6 (tests/harness/sshd.h), real etcd 3.5.16 members, host keys
 * checked against a real known_hosts file. The host agent
 * (tests/harness/hostagent.h) is a simulator: it plays kubelet for each
 * machine's static Pod manifest folder, because no kubelet runs here.
 *
 * One lifecycle under a writer whose every acknowledged key is read back:
 * the refusals (spec.hosts with another target, --target hosts without
 * spec.hosts), the plan per machine, bootstrap 3 across three machines,
 * 3 → 5 → 3, a machine's data disk wiped (the member is replaced, quorum
 * kept), a machine that stops answering SSH (quorum kept, another cluster
 * still changes); and, first, a machine with a wrong host key (refused,
 * nothing written on it), and a spec whose values would have become unit
 * file syntax or removed a system folder (refused by validate, plan and
 * apply at file:line:col, nothing written or run on the machine).
 */
#include <pthread.h>
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
#include "tests/e2e/hosts-lab.h"
#include "tests/harness/harness.h"
#include "tests/harness/hostagent.h"
#include "tests/harness/sshd.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MACHINES 5
#define VERSION  "3.5.16"

static hosts_lab *L;

static char *machine_path(size_t i, const char *path)
{
        return hosts_lab_path(L, i, path);
}

static void write_cluster(e2e *e, const char *name, int replicas, size_t first, size_t n)
{
        hosts_lab_write_cluster(L, e, name, VERSION, replicas, first, n);
}

static int hosts_cmd(e2e *e, const char *cmd, const char *known_hosts, char **ret_out,
                     char **ret_err, const char *extra1, const char *extra2)
{
        return hosts_lab_cmd(L, e, cmd, known_hosts, ret_out, ret_err, extra1, extra2);
}

/* The lab machine a member's client URL points at. */
static size_t machine_of(e2e *e, const char *name, const char *member)
{
        json_t *st = e2e_status(e, name);
        size_t i, found = (size_t)-1;
        json_t *m;
        json_array_foreach(json_object_get(st, "members"), i, m)
        {
                if (!streq_ptr(json_string_value(json_object_get(m, "name")), member))
                        continue;
                const char *u = json_string_value(json_object_get(m, "client_url"));
                for (size_t j = 0; u && j < MACHINES; j++) {
                        _cleanup_free_ char *pre =
                            xasprintf("http://%s:", L->ssh->machines[j].address);
                        if (strneq(u, pre, strlen(pre)))
                                found = j;
                }
        }
        json_decref(st);
        if (found == (size_t)-1)
                fail_msg("member %s of %s is on no machine", member, name);
        return found;
}

/* Progress on stderr, with the seconds since the test started (never asserted). */
static void stage(const char *what)
{
        static int64_t start;
        if (!start)
                start = now_mono_ms();
        fprintf(stderr, "[%5.1fs] %s\n", (double)(now_mono_ms() - start) / 1000.0, what);
}

static void test_lifecycle(void **state)
{
        (void)state;
        stage("refusals and plan");
        e2e *e = e2e_new();
        const char *cl = "hostly";

        /* Refusals first, on a fresh state: nothing is created by either. */
        write_cluster(e, cl, 3, 0, MACHINES);
        _cleanup_free_ char *out = NULL, *err = NULL;
        const char *local[] = {"apply", "--source", e->source, "--timeout", "20s", NULL};
        assert_int_not_equal(e2e_runv(e, &out, &err, local), 0);
        assert_non_null(strstr(err, "spec.hosts"));
        assert_non_null(strstr(err, "needs --target hosts"));
        free(out), free(err), out = err = NULL;
        e2e_write_file(
            e, "plain.yaml",
            "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: plain}\n");
        assert_int_not_equal(hosts_cmd(e, "plan", NULL, &out, &err, NULL, NULL), 0);
        if (!strstr(out, "default/plain has none") && !strstr(err, "default/plain has none"))
                fail_msg("plan --target hosts took in a cluster without spec.hosts:\n%s%s", out,
                         err);
        free(out), free(err), out = err = NULL;
        _cleanup_free_ char *plain = xasprintf("%s/plain.yaml", e->source);
        assert_int_equal(unlink(plain), 0);

        /* The plan lists, per machine, the files and commands apply writes and runs. */
        assert_int_equal(hosts_cmd(e, "plan", NULL, &out, &err, NULL, NULL), 0);
        assert_non_null(strstr(out, "no machine was contacted"));
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *manifest =
                    machine_path(i, "/etc/kubernetes/manifests/etcd-default-hostly.yaml");
                assert_non_null(strstr(out, manifest));
        }
        free(out), free(err), out = err = NULL;
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *data = machine_path(i, "/var/lib/etcd");
                assert_false(path_exists(data)); /* neither refusals nor the plan wrote */
        }

        /* Bootstrap 3 across three machines, then 3 → 5 → 3 under a writer. */
        stage("bootstrap 3");
        hosts_lab_apply_ok(L, e, "90s");
        e2e_assert_voters(e, cl, 3);
        _cleanup_free_ char *eps = e2e_endpoints(e, cl);
        harness_writer *w = harness_writer_start(&(harness_writer_opts){.endpoints = eps});
        write_cluster(e, cl, 5, 0, MACHINES);
        stage("scale to 5");
        hosts_lab_apply_ok(L, e, "90s");
        e2e_assert_voters(e, cl, 5);
        write_cluster(e, cl, 3, 0, MACHINES);
        stage("scale to 3");
        hosts_lab_apply_ok(L, e, "90s");
        e2e_assert_voters(e, cl, 3);

        /* Member 1's machine gets a new data disk: replaced, never restarted empty. */
        size_t wiped = machine_of(e, cl, "hostly-1");
        _cleanup_free_ char *dir = machine_path(wiped, "/var/lib/etcd/hostly");
        assert_int_equal(rm_rf(dir), 0);
        stage("data disk wiped");
        hosts_lab_apply_ok(L, e, "90s");
        e2e_assert_voters(e, cl, 3);
        etcd_members *l = e2e_members(e, cl);
        for (size_t i = 0; i < l->n; i++)
                assert_string_not_equal(l->members[i].name, "hostly-1");
        etcd_members_free(l);
        int removes = e2e_audit_count(e, cl, "member.remove");
        assert_true(removes >= 3);

        /*
         * Machine of member 0 stops answering SSH: the cluster keeps quorum
         * (its etcd still runs, nothing is removed or replaced on the
         * strength of a machine that does not answer) and another cluster
         * on other machines is still created.
         */
        size_t down = machine_of(e, cl, "hostly-0");
        size_t other = down == MACHINES - 1 ? MACHINES - 2 : MACHINES - 1;
        /* the other cluster gets a machine no hostly member uses */
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *marker = machine_path(i, "/var/lib/etcd/hostly/gitcd-member");
                if (!path_exists(marker) && i != down)
                        other = i;
        }
        stage("a machine down");
        write_cluster(e, "solo", 1, other, 1);
        assert_int_equal(sshd_machine_stop(L->ssh, down), 0);
        (void)hosts_cmd(e, "apply", NULL, &out, &err, "--timeout", "40s");
        free(out), free(err), out = err = NULL;
        assert_true(e2e_wait_ready(e, "solo", 1, 10));
        e2e_assert_voters(e, cl, 3);
        _cleanup_free_ char *m0 = machine_path(down, "/var/lib/etcd/hostly/gitcd-member");
        assert_true(path_exists(m0)); /* its member was left alone */
        assert_int_equal(e2e_audit_count(e, cl, "member.remove"), removes);
        assert_int_equal(sshd_machine_start(L->ssh, down), 0);
        hosts_lab_apply_ok(L, e, "90s");
        e2e_writer_check(w, e, cl, 10);
        harness_writer_free(w);

        stage("done");
        e2e_free(e);
}

/*
 * A machine whose host key is not the one known_hosts lists: refused before
 * anything is sent, nothing written on it, and the user is told why. Its
 * own state and source, before the lifecycle.
 */
static void test_wrong_host_key(void **state)
{
        (void)state;
        stage("wrong host key");
        e2e *e = e2e_new();
        size_t spare = MACHINES - 1;
        _cleanup_free_ char *bad_kh = sshd_lab_known_hosts_with_wrong_key(L->ssh, spare);
        write_cluster(e, "keyed", 1, spare, 1);
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_not_equal(hosts_cmd(e, "apply", bad_kh, &out, &err, "--timeout", "8s"), 0);
        /* the reason reaches the user: apply's output or the cluster's status */
        _cleanup_free_ char *st = NULL, *st_json = NULL;
        e2e_run(e, &st, "status", NULL);
        e2e_run(e, &st_json, "status", "-o", "json", "default/keyed", NULL);
        if (!strstr(out, "host key") && !strstr(err, "host key") && !strstr(st_json, "host key"))
                fail_msg("no word of the host key:\n%s%s\nstatus:\n%s%s", out, err, st, st_json);
        _cleanup_free_ char *keyed = machine_path(spare, "/var/lib/etcd/keyed");
        assert_false(path_exists(keyed));
        _cleanup_free_ char *keyed_pod =
            machine_path(spare, "/etc/kubernetes/manifests/etcd-default-keyed.yaml");
        assert_false(path_exists(keyed_pod));
        e2e_free(e);
}

/*
 * A spec written to run a command of its own on the machine (a newline in
 * an extraFlags value, which systemd would read as a line of the unit),
 * with a system folder as its data directory and a flag that turns off
 * etcd's quorum guard: validate, plan and apply refuse it with each
 * place and reason, and nothing reaches the machine (no file, no
 * systemctl call, the injected command never ran).
 */
static void test_hostile_spec_refused(void **state)
{
        (void)state;
        stage("hostile spec");
        e2e *e = e2e_new();
        size_t spare = MACHINES - 1;
        hosts_lab_write_cluster_systemd(L, e, "hostile", VERSION, 1, spare, 1);
        _cleanup_free_ char *file = xasprintf("%s/hostile.yaml", e->source);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(file, 1 << 20, &text, &len), 0);
        _cleanup_free_ char *ran = machine_path(spare, "/injected");
        /* the hosts mapping goes on (dataDir at its level), then spec.options */
        _cleanup_free_ char *hostile =
            xasprintf("%s    dataDir: /etc\n  options:\n    extraFlags:\n"
                      "      log-level: \"info\\\\'\\nExecStartPre=/bin/sh -c 'touch %s'\\n#\"\n"
                      "      strict-reconfig-check: \"false\"\n",
                      text, ran);
        e2e_write_file(e, "hostile.yaml", hostile);
        int lines = 0;
        for (const char *p = hostile; *p; p++)
                lines += *p == '\n';
        _cleanup_free_ char *at_flag = xasprintf("hostile.yaml:%d:18: error: "
                                                 "spec.options.extraFlags.log-level: a control "
                                                 "character",
                                                 lines - 1);
        _cleanup_free_ char *at_quorum =
            xasprintf("hostile.yaml:%d:30: error: spec.options.extraFlags.strict-reconfig-check: "
                      "--strict-reconfig-check is refused",
                      lines);
        _cleanup_free_ char *at_dir =
            xasprintf("hostile.yaml:%d:14: error: spec.hosts.dataDir: \"/etc\" is a system "
                      "folder",
                      lines - 4);

        _cleanup_free_ char *out = NULL, *err = NULL;
        _cleanup_free_ char *path = xasprintf("%s/hostile.yaml", e->source);
        const char *validate[] = {"validate", path, NULL};
        assert_int_equal(e2e_runv(e, &out, &err, validate), 1);
        for (const char *want[] = {at_flag, at_quorum, at_dir, NULL}, **w = want; *w; w++)
                if (!strstr(out, *w))
                        fail_msg("validate does not say \"%s\":\n%s%s", *w, out, err);
        free(out), free(err), out = err = NULL;
        for (const char *cmd[] = {"plan", "apply", NULL}, **c = cmd; *c; c++) {
                bool apply = streq(*c, "apply");
                assert_int_not_equal(hosts_cmd(e, *c, NULL, &out, &err, apply ? "--timeout" : NULL,
                                               apply ? "8s" : NULL),
                                     0);
                for (const char *want[] = {at_flag, at_quorum, at_dir, NULL}, **w = want; *w; w++)
                        if (!strstr(out, *w) && !strstr(err, *w))
                                fail_msg("%s does not say \"%s\":\n%s%s", *c, *w, out, err);
                free(out), free(err), out = err = NULL;
        }

        _cleanup_free_ char *units = hosts_lab_units(L, spare);
        _cleanup_free_ char *unit = xasprintf("%s/etcd-default-hostile.service", units);
        _cleanup_free_ char *data = hosts_lab_data_dir(L, spare, "hostile");
        _cleanup_free_ char *calls = hosts_lab_systemctl_log(L, spare);
        _cleanup_free_ char *log = NULL;
        size_t log_len = 0;
        (void)read_file(calls, 1 << 20, &log, &log_len);
        assert_false(path_exists(unit));
        assert_false(path_exists(data));
        assert_false(path_exists(ran));
        if (log && strstr(log, "hostile"))
                fail_msg("systemctl was called for the refused cluster:\n%s", log);
        e2e_free(e);
}

static int setup(void **state)
{
        (void)state;
        L = hosts_lab_start(MACHINES, VERSION);
        return L ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        hosts_lab_free(L);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_wrong_host_key),
            cmocka_unit_test(test_hostile_spec_refused),
            cmocka_unit_test(test_lifecycle),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
