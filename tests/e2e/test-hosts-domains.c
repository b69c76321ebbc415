/*
 * Failure domains and the truth about machines on the hosts target, end
 * to end through the real CLI: four real sshd machines on 127.0.0.2-5
 * (tests/harness/sshd.h), the host agent playing kubelet (a simulator: no
 * kubelet runs here), real etcd 3.5.16.
 *
 * Three machines in one rack are refused by validate and plan (strict, the
 * default) and only warned about with placement: preferred, the rack, its
 * value and the members named. A 3-member cluster on machines whose racks
 * are r1, r1, r2, r3 is placed on r1, r2 and r3 (the second r1 machine,
 * next in list order, stays empty). Then one member's machine stops
 * answering (its sshd is stopped; its etcd keeps running): a pass of
 * `gitcd apply` cannot see it, and `gitcd status` shows that member
 * unknown with what was last seen of it and when, and Degraded names the
 * machine. The logic is also covered under the sanitizers by spec-domains
 * (placement, judgement and intake).
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/e2e/hosts-lab.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define MACHINES 4
#define VERSION  "3.5.16"

static hosts_lab *L;

#define assert_contains(s, sub)                                                                    \
        do {                                                                                       \
                if (!strstr((s), (sub)))                                                           \
                        fail_msg("expected \"%s\" in:\n%s", (sub), (s));                           \
        } while (0)

/* name.yaml: replicas members on the lab's first n machines, machine i in racks[i]. */
static void write_cluster(e2e *e, const char *name, int replicas, const char *const *racks,
                          size_t n, const char *placement)
{
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb,
                  "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: %s\n"
                  "spec:\n  replicas: %d\n  version: \"" VERSION "\"\n"
                  "  hosts:\n    mode: staticPod\n",
                  name, replicas);
        if (placement)
                sb_printf(&sb, "    placement: %s\n", placement);
        sb_append(&sb, "    machines:\n");
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *data = hosts_lab_data_dir(L, i, name);
                _cleanup_free_ char *pods = hosts_lab_manifests(L, i);
                _cleanup_free_ char *rel = xasprintf("/etc/etcd/default-%s/pki", name);
                _cleanup_free_ char *tls = hosts_lab_path(L, i, rel);
                sb_printf(&sb,
                          "    - address: %s\n      ssh: {port: %d}\n      dataDir: %s\n"
                          "      manifestDir: %s\n      tlsDir: %s\n"
                          "      domains: {rack: %s, power: pdu-%zu}\n",
                          L->ssh->machines[i].address, L->ssh->machines[i].port, data, pods, tls,
                          racks[i], i);
        }
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, sb_str(&sb));
        sb_release(&sb);
}

/* gitcd validate <name>.yaml: its exit status, and what it printed (both streams). */
static int validate(e2e *e, const char *name, char **ret_text)
{
        _cleanup_free_ char *file = xasprintf("%s/%s.yaml", e->source, name);
        _cleanup_free_ char *out = NULL, *err = NULL;
        const char *args[] = {"validate", file, NULL};
        int k = e2e_runv(e, &out, &err, args);
        *ret_text = xasprintf("%s%s", out ? out : "", err ? err : "");
        return k;
}

static void test_domains(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        static const char *const one_rack[] = {"r1", "r1", "r1"};
        char *text = NULL, *out = NULL, *err = NULL;

        /* three machines in one rack: refused, the rack, its value and the members named */
        write_cluster(e, "onerack", 3, one_rack, 3, NULL);
        assert_int_not_equal(validate(e, "onerack", &text), 0);
        assert_contains(text, "error: spec.hosts.placement strict: rack=r1 holds onerack-0, "
                              "onerack-1, onerack-2 of 3 members: losing r1 loses quorum");
        free(text);
        assert_int_equal(hosts_lab_cmd(L, e, "plan", NULL, &out, &err, NULL, NULL), 1);
        assert_contains(out, "! rejected default/onerack");
        assert_contains(out, "rack=r1 holds onerack-0, onerack-1, onerack-2 of 3 members");
        free(out), free(err), out = err = NULL;

        /* preferred: a warning, and the spec is valid */
        write_cluster(e, "onerack", 3, one_rack, 3, "preferred");
        assert_int_equal(validate(e, "onerack", &text), 0);
        assert_contains(text, "warning: spec.hosts.placement preferred: rack=r1 holds");
        free(text);
        _cleanup_free_ char *gone = xasprintf("%s/onerack.yaml", e->source);
        assert_int_equal(unlink(gone), 0);

        /* spread: r1, r1, r2, r3 in list order; the members go on r1, r2 and r3 */
        static const char *const racks[] = {"r1", "r1", "r2", "r3"};
        write_cluster(e, "racks", 3, racks, MACHINES, NULL);
        assert_int_equal(validate(e, "racks", &text), 0);
        free(text);
        hosts_lab_apply_ok(L, e, "120s");
        assert_true(e2e_wait_ready(e, "racks", 3, 60));
        static const bool used[MACHINES] = {true, false, true, true};
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *pods = hosts_lab_manifests(L, i);
                _cleanup_free_ char *pod = path_join(pods, "etcd-default-racks.yaml");
                if (used[i] != path_exists(pod))
                        fail_msg("machine %zu (rack %s): a member %s, and should%s", i, racks[i],
                                 path_exists(pod) ? "runs there" : "does not run there",
                                 used[i] ? "" : " not");
        }

        /* machine 2 (racks-1) stops answering; its etcd keeps running */
        assert_int_equal(sshd_machine_stop(L->ssh, 2), 0);
        int k = hosts_lab_cmd(L, e, "apply", NULL, &out, &err, "--timeout", "10s");
        assert_int_not_equal(k, 0);
        free(out), free(err), out = err = NULL;
        json_t *st = e2e_status(e, "racks");
        json_t *members = json_object_get(st, "members");
        bool found = false;
        for (size_t i = 0; i < json_array_size(members); i++) {
                json_t *m = json_array_get(members, i);
                const char *name = json_string_value(json_object_get(m, "name"));
                const char *mstate = json_string_value(json_object_get(m, "state"));
                if (!streq(name, "racks-1")) {
                        assert_string_equal(mstate, "ready");
                        continue;
                }
                found = true;
                assert_string_equal(mstate, "unknown");
                assert_string_equal(json_string_value(json_object_get(m, "last_seen_state")),
                                    "ready");
                assert_true(json_integer_value(json_object_get(m, "last_seen_ms")) > 0);
                assert_contains(json_string_value(json_object_get(m, "unreachable")),
                                L->ssh->machines[2].address);
        }
        assert_true(found);
        json_t *conds = json_object_get(st, "conditions");
        bool degraded = false;
        for (size_t i = 0; i < json_array_size(conds); i++) {
                json_t *c = json_array_get(conds, i);
                if (!streq(json_string_value(json_object_get(c, "type")), "Degraded"))
                        continue;
                degraded = true;
                assert_string_equal(json_string_value(json_object_get(c, "status")), "True");
                assert_string_equal(json_string_value(json_object_get(c, "reason")),
                                    "MachineUnreachable");
                const char *msg = json_string_value(json_object_get(c, "message"));
                assert_contains(msg, "member racks-1 is unknown: ");
                assert_contains(msg, L->ssh->machines[2].address);
                assert_contains(msg, "last observed ready at ");
        }
        assert_true(degraded);
        json_decref(st);

        /* the text form says it too */
        assert_int_equal(e2e_run(e, &out, "status", "default/racks", NULL), 0);
        assert_contains(out, "racks-1 is unknown: ");
        assert_contains(out, "; last seen ready at ");
        free(out), out = NULL;

        /* the machine answers again: the next pass sees the member, the marks go */
        assert_int_equal(sshd_machine_start(L->ssh, 2), 0);
        hosts_lab_apply_ok(L, e, "120s");
        st = e2e_status(e, "racks");
        members = json_object_get(st, "members");
        for (size_t i = 0; i < json_array_size(members); i++)
                assert_string_equal(
                    json_string_value(json_object_get(json_array_get(members, i), "state")),
                    "ready");
        json_decref(st);
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
            cmocka_unit_test(test_domains),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
