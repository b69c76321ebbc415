/*
 * The operator's policy on the hosts target, end to end through the real
 * `gitcd apply --target hosts` and `gitcd plan`: three real sshd machines
 * on 127.0.0.2-4 (tests/harness/sshd.h), the host agent playing kubelet
 * (a simulator: no kubelet runs here), real etcd 3.5.16.
 *
 * The policy lets the source place members on 127.0.0.2 and .3 only, with
 * every folder under the lab's and the etcd binaries of the test cache;
 * images stay the built-in ones. One revision defines five clusters: one
 * within the policy (it runs), one on 127.0.0.4 (policy.hosts.machines),
 * one whose dataDir lies outside the data root (policy.hosts.dataRoot),
 * one running another image repository in a static Pod (policy.images)
 * and a systemd one whose etcdBinary is another program
 * (policy.hosts.etcdBinaries). Each refused cluster is refused alone, with
 * the policy's line, audited, shown by plan and status, and nothing of it
 * is written on any machine; the program named as etcdBinary (a script
 * that leaves a mark when it runs) never runs, not even as
 * `etcdBinary --version`.
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

#define MACHINES 3
#define VERSION  "3.5.16"

static hosts_lab *L;

#define assert_contains(s, sub)                                                                    \
        do {                                                                                       \
                if (!strstr((s), (sub)))                                                           \
                        fail_msg("expected \"%s\" in:\n%s", (sub), (s));                           \
        } while (0)

/* A one-member static Pod cluster on machine i, with extra lines in its spec and machine entry. */
static void write_cluster(e2e *e, const char *name, size_t i, const char *spec_extra,
                          const char *data_dir)
{
        _cleanup_free_ char *pods = hosts_lab_manifests(L, i);
        _cleanup_free_ char *own = hosts_lab_data_dir(L, i, name);
        _cleanup_free_ char *rel = xasprintf("/etc/etcd/default-%s/pki", name);
        _cleanup_free_ char *tls = hosts_lab_path(L, i, rel);
        _cleanup_free_ char *text =
            xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: %s\n"
                      "spec:\n  replicas: 1\n  version: \"" VERSION "\"\n%s"
                      "  hosts:\n    mode: staticPod\n    machines:\n"
                      "    - address: %s\n      ssh: {port: %d}\n      dataDir: %s\n"
                      "      manifestDir: %s\n      tlsDir: %s\n",
                      name, spec_extra ? spec_extra : "", L->ssh->machines[i].address,
                      L->ssh->machines[i].port, data_dir ? data_dir : own, pods, tls);
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, text);
}

/*
 * A one-member systemd cluster on machine i whose etcdBinary is program, a
 * script that creates marker whenever it runs (as etcd would answer
 * --version, so that only the policy stops it).
 */
static void write_systemd_cluster(e2e *e, const char *name, size_t i, const char *program,
                                  const char *marker)
{
        _cleanup_free_ char *script = xasprintf("#!/bin/sh\ntouch '%s'\n"
                                                "echo 'etcd Version: " VERSION "'\n",
                                                marker);
        assert_int_equal(write_file_atomic(program, script, strlen(script), 0755), 0);
        _cleanup_free_ char *units = hosts_lab_units(L, i);
        _cleanup_free_ char *own = hosts_lab_data_dir(L, i, name);
        _cleanup_free_ char *rel = xasprintf("/etc/etcd/default-%s/pki", name);
        _cleanup_free_ char *tls = hosts_lab_path(L, i, rel);
        _cleanup_free_ char *text = xasprintf(
            "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: %s\n"
            "spec:\n  replicas: 1\n  version: \"" VERSION "\"\n"
            "  hosts:\n    mode: systemd\n    machines:\n"
            "    - address: %s\n      ssh: {port: %d}\n      dataDir: %s\n"
            "      unitDir: %s\n      etcdBinary: %s\n      tlsDir: %s\n",
            name, L->ssh->machines[i].address, L->ssh->machines[i].port, own, units, program, tls);
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, text);
}

static int audited(e2e *e, const char *name, const char *action)
{
        return e2e_audit_count(e, name, action);
}

static void assert_refused(e2e *e, const char *name, const char *line)
{
        json_t *st = e2e_status(e, name);
        json_t *v = json_array_get(json_object_get(st, "intake"), 0);
        assert_non_null(v);
        assert_string_equal(json_string_value(json_object_get(v, "verdict")), "refused");
        assert_contains(json_string_value(json_object_get(v, "message")), line);
        json_decref(st);
        assert_int_equal(audited(e, name, "spec.refused"), 1);
        /* nothing of it on any machine: no manifest, no data folder */
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *pods = hosts_lab_manifests(L, i);
                _cleanup_free_ char *manifest = xasprintf("%s/etcd-default-%s.yaml", pods, name);
                _cleanup_free_ char *data = hosts_lab_data_dir(L, i, name);
                assert_false(path_exists(manifest));
                assert_false(path_exists(data));
        }
}

static void test_policy(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        /* The lab's policy, narrowed to two of its machines. */
        _cleanup_free_ char *policy =
            xasprintf("# the hosts policy end-to-end test\n"
                      "policy:\n"
                      "  hosts:\n"
                      "    machines: [\"%s\", \"%s\"]\n"
                      "    dataRoot: %s\n    tlsRoot: %s\n    unitRoot: %s\n    manifestRoot: %s\n"
                      "    etcdBinaries: [\"%s\"]\n",
                      L->ssh->machines[0].address, L->ssh->machines[1].address, L->ssh->dir,
                      L->ssh->dir, L->ssh->dir, L->ssh->dir, L->etcd_binaries);
        assert_int_equal(write_file_atomic(L->config, policy, strlen(policy), 0644), 0);

        write_cluster(e, "good", 0, NULL, NULL);
        write_cluster(e, "stranger", 2, NULL, NULL);
        /* outside the lab, so outside the data root (and never created: it is refused first) */
        write_cluster(e, "faraway", 1, NULL, "/var/lib/etcd-gitcd-policy-test/faraway");
        write_cluster(e, "image", 1, "  repository: registry.example.com/etcd\n", NULL);
        /* a program of the lab's folder as etcd: within every root, outside etcdBinaries */
        _cleanup_free_ char *program = path_join(L->ssh->dir, "not-etcd");
        _cleanup_free_ char *marker = path_join(L->ssh->dir, "not-etcd.ran");
        write_systemd_cluster(e, "binary", 1, program, marker);

        char *out = NULL, *err = NULL;
        assert_int_equal(hosts_lab_cmd(L, e, "plan", NULL, &out, &err, NULL, NULL), 1);
        assert_contains(out, "+ create default/good");
        assert_contains(out, "! rejected default/stranger");
        assert_contains(out, "gitcd.yaml:4:5: error: policy.hosts.machines: default/stranger "
                             "(stranger.yaml:11:16) places a member on 127.0.0.4, a machine this "
                             "source may not use");
        assert_contains(out, "! rejected default/faraway");
        assert_contains(out,
                        "gitcd.yaml:5:5: error: policy.hosts.dataRoot: default/faraway "
                        "(faraway.yaml:13:16) has dataDir "
                        "/var/lib/etcd-gitcd-policy-test/faraway on 127.0.0.3, which is not in ");
        assert_contains(out, "! rejected default/image");
        assert_contains(out, "(built-in policy): error: policy.images: default/image "
                             "(image.yaml:8:15) runs the image repository "
                             "registry.example.com/etcd, which this source may not run (allowed: "
                             "quay.io/coreos/etcd)");
        assert_contains(out, "! rejected default/binary");
        _cleanup_free_ char *binary_line =
            xasprintf("gitcd.yaml:9:5: error: policy.hosts.etcdBinaries: default/binary "
                      "(binary.yaml:15:19) runs %s as etcd on 127.0.0.3, a program this source "
                      "may not run there (allowed: %s); the cluster is not taken in",
                      program, L->etcd_binaries);
        assert_contains(out, binary_line);
        assert_contains(out, "Plan: 1 to create, 0 to change, 0 to delete, 4 rejected.");
        free(out), free(err), out = err = NULL;

        int k = hosts_lab_cmd(L, e, "apply", NULL, &out, &err, "--timeout", "120s");
        assert_int_equal(k, 1);
        assert_contains(err, "error: policy.hosts.machines: default/stranger");
        assert_contains(err, "error: policy.hosts.dataRoot: default/faraway");
        assert_contains(err, "error: policy.images: default/image");
        assert_contains(err, "error: policy.hosts.etcdBinaries: default/binary");
        free(out), free(err), out = err = NULL;

        /* the cluster within the policy runs; the others are refused, each alone */
        assert_true(e2e_wait_ready(e, "good", 1, 60));
        assert_refused(e, "stranger", "policy.hosts.machines");
        assert_refused(e, "faraway", "policy.hosts.dataRoot");
        assert_refused(e, "image", "policy.images");
        assert_refused(e, "binary", "policy.hosts.etcdBinaries");
        /* the program never ran (not even as --version) and no unit names it */
        assert_false(path_exists(marker));
        _cleanup_free_ char *units = hosts_lab_units(L, 1);
        _cleanup_free_ char *unit = path_join(units, "etcd-default-binary.service");
        assert_false(path_exists(unit));
        assert_false(path_exists("/var/lib/etcd-gitcd-policy-test"));

        /* applied again at the same head: audited once */
        assert_int_equal(hosts_lab_cmd(L, e, "apply", NULL, &out, &err, "--timeout", "120s"), 1);
        free(out), free(err), out = err = NULL;
        assert_int_equal(audited(e, "stranger", "spec.refused"), 1);
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
            cmocka_unit_test(test_policy),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
