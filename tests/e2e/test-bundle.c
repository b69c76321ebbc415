/*
 * gitcd debug bundle end to end, on the local target with real etcd: a
 * 3-member cluster with auth on (root's password chosen by the test) and
 * TLS by gitcd's own CA (private keys on disk), and a spec.repair token,
 * loses quorum (two members stopped with SIGSTOP). `gitcd debug bundle` still writes a
 * bundle (mode 0600), read back with tar: README.txt, gitcd's status and
 * spec, the surviving member's status (raft index and term), metrics and
 * log, and an error.txt for each stopped member; no byte of root's
 * password, no PEM private key header and no token in any file. Then
 * `gitcd run` takes one by itself for the quorum loss, under
 * <state>/bundles/ (mode 0600), audited (debug.bundle) with its path, and
 * only once for the episode however many passes see it. Retention and
 * members that do not answer without etcd: tests/ops/test-bundle.c. On the
 * hosts target (sshd machines, the host agent playing systemd) the log and
 * the machine's facts come back over SSH.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/e2e/hosts-lab.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define VERSION  "3.5.16"
#define PASSWORD "bundle-root-pw-6a1f0c93e7d24b58"
#define TOKEN    "bundle-token-c0ffee-4417"

static bool listed(const char *list, const char *file)
{
        _cleanup_free_ char *want = xasprintf("/%s\n", file);
        return strstr(list, want) != NULL;
}

static void test_quorum_lost(void **state)
{
        (void)state;
        if (!e2e_have_version(VERSION))
                skip();
        e2e *e = e2e_new();
        /* root's password, chosen before auth is on (docs/auth.md) */
        _cleanup_free_ char *adir = xasprintf("%s/auth/default/inc", e->state_dir);
        assert_int_equal(mkdir_p(adir, 0700), 0);
        _cleanup_free_ char *pwfile = xasprintf("%s/root-password", adir);
        assert_int_equal(write_file_atomic(pwfile, PASSWORD "\n", strlen(PASSWORD) + 1, 0600), 0);
        e2e_write_file(e, "inc.yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: inc\n"
                       "spec:\n"
                       "  replicas: 3\n"
                       "  version: \"" VERSION "\"\n"
                       "  auth:\n"
                       "    enabled: true\n"
                       "  tls:\n"
                       "    provider: auto\n"
                       "  repair:\n"
                       "    recheck: true\n"
                       "    token: " TOKEN "\n");
        e2e_apply_ok(e, 120);
        assert_true(e2e_wait_ready(e, "inc", 3, 60));

        /* quorum lost: two of three members stopped (SIGSTOP: they hold their port and never
           answer, and no target restarts them) */
        pid_t stopped[2];
        for (int i = 1; i <= 2; i++) {
                _cleanup_free_ char *m = xasprintf("inc-%d", i);
                stopped[i - 1] = e2e_member_pid(e, "inc", m);
                assert_true(stopped[i - 1] > 0);
                assert_int_equal(kill(stopped[i - 1], SIGSTOP), 0);
        }

        _cleanup_free_ char *out = xasprintf("%s/incident.tar.gz", e->root);
        _cleanup_free_ char *printed = NULL;
        assert_int_equal(e2e_run(e, &printed, "debug", "bundle", "default/inc", "-o", out, NULL),
                         0);
        assert_non_null(strstr(printed, out));
        struct stat st;
        assert_int_equal(stat(out, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);

        _cleanup_free_ char *list = e2e_sh("tar -tzf '%s'", out);
        const char *const want[] = {"README.txt",
                                    "cluster/spec.json",
                                    "gitcd/status.json",
                                    "gitcd/audit.json",
                                    "gitcd/journal.json",
                                    "members/inc-0/status.json",
                                    "members/inc-0/metrics.txt",
                                    "members/inc-0/log.txt",
                                    "members/inc-1/error.txt",
                                    "members/inc-2/error.txt",
                                    "members/inc-1/log.txt"};
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                if (!listed(list, want[i]))
                        fail_msg("%s is not in the bundle:\n%s", want[i], list);
        assert_false(listed(list, "members/inc-0/error.txt"));
        assert_false(listed(list, "members/inc-1/status.json"));

        _cleanup_free_ char *status =
            e2e_sh("tar -xzOf '%s' --wildcards '*/members/inc-0/status.json'", out);
        assert_non_null(strstr(status, "\"raftIndex\""));
        assert_non_null(strstr(status, "\"raftTerm\""));
        assert_non_null(strstr(status, "\"version\": \"" VERSION "\""));
        _cleanup_free_ char *err =
            e2e_sh("tar -xzOf '%s' --wildcards '*/members/inc-1/error.txt'", out);
        assert_non_null(strstr(err, "status"));
        _cleanup_free_ char *readme = e2e_sh("tar -xzOf '%s' --wildcards '*/README.txt'", out);
        assert_non_null(strstr(readme, "default/inc"));
        _cleanup_free_ char *log =
            e2e_sh("tar -xzOf '%s' --wildcards '*/members/inc-0/log.txt'", out);
        assert_non_null(strstr(log, "etcd.log"));
        _cleanup_free_ char *gitcd =
            e2e_sh("tar -xzOf '%s' --wildcards '*/gitcd/status.json'", out);
        assert_non_null(strstr(gitcd, "\"conditions\""));

        /* no secret in any file */
        _cleanup_free_ char *all = e2e_sh("tar -xzOf '%s'", out);
        assert_null(strstr(all, PASSWORD));
        assert_null(strstr(all, "PRIVATE KEY"));
        assert_null(strstr(all, TOKEN));
        /* the keys are there to be leaked: gitcd's client key on disk */
        _cleanup_free_ char *keys = e2e_sh("grep -rl 'PRIVATE KEY' '%s' | head -n 1", e->state_dir);
        assert_true(strlen(keys) > 0);

        /* gitcd run takes one by itself, once for the episode, audited with its path */
        const char *const args[] = {"--observe-interval", "1s", NULL};
        pid_t d = e2e_start_daemon(e, args);
        int64_t t0 = now_mono_ms();
        while (e2e_audit_count(e, "inc", "debug.bundle") < 1 && now_mono_ms() - t0 < 120000)
                usleep(200 * 1000);
        assert_int_equal(e2e_audit_count(e, "inc", "debug.bundle"), 1);
        _cleanup_free_ char *audit = NULL;
        assert_int_equal(e2e_run(e, &audit, "log", "-o", "json", "--action", "debug.bundle", NULL),
                         0);
        assert_non_null(strstr(audit, "QuorumLost"));
        const char *p = strstr(audit, "/bundles/default_inc-");
        assert_non_null(p);
        _cleanup_free_ char *auto_path =
            xasprintf("%s/bundles/%.*s", e->state_dir, (int)strcspn(p + 9, "\\\""), p + 9);
        assert_int_equal(stat(auto_path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        /* more passes see the same quorum loss: no second bundle */
        int64_t t1 = now_mono_ms();
        while (now_mono_ms() - t1 < 5000)
                usleep(200 * 1000);
        assert_int_equal(e2e_audit_count(e, "inc", "debug.bundle"), 1);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(kill(stopped[i], SIGCONT), 0);
        e2e_free(e);
}

/*
 * The hosts target: a member in systemd mode on a real sshd machine (the
 * host agent plays systemd). Its log comes from `journalctl -u UNIT` over
 * SSH; the test machines have no journal of the agent's units (the agent
 * keeps their output in files on its own side, which the target never
 * reads), so what is checked is that the command ran on the member's
 * machine and said so, and that the machine's facts (clock offset, dmesg)
 * came back.
 */
static void test_hosts(void **state)
{
        (void)state;
        hosts_lab *l = hosts_lab_start(1, VERSION);
        if (!l)
                fail_msg("the hosts lab did not start");
        e2e *e = e2e_new();
        hosts_lab_write_cluster_systemd(l, e, "hb", VERSION, 1, 0, 1);
        hosts_lab_apply_ok(l, e, "120s");
        _cleanup_free_ char *out = xasprintf("%s/hosts.tar.gz", e->root);
        _cleanup_free_ char *printed = NULL, *err = NULL;
        const char *const args[] = {"debug",
                                    "bundle",
                                    "default/hb",
                                    "-o",
                                    out,
                                    "--target",
                                    "hosts",
                                    "--hosts-ssh-key",
                                    l->ssh->client_key,
                                    "--hosts-known-hosts",
                                    l->ssh->known_hosts,
                                    "--hosts-ports",
                                    l->ports,
                                    NULL};
        int k = e2e_runv(e, &printed, &err, args);
        if (k != 0)
                fail_msg("gitcd debug bundle exited %d: %s", k, err);
        _cleanup_free_ char *list = e2e_sh("tar -tzf '%s'", out);
        assert_true(listed(list, "members/hb-0/status.json"));
        assert_true(listed(list, "members/hb-0/log.txt"));
        assert_true(listed(list, "members/hb-0/machine.txt"));
        _cleanup_free_ char *log =
            e2e_sh("tar -xzOf '%s' --wildcards '*/members/hb-0/log.txt'", out);
        assert_non_null(strstr(log, "# from journalctl -u etcd-default-hb.service on 127.0.0."));
        _cleanup_free_ char *facts =
            e2e_sh("tar -xzOf '%s' --wildcards '*/members/hb-0/machine.txt'", out);
        assert_non_null(strstr(facts, "machine: 127.0.0."));
        assert_non_null(strstr(facts, "clock offset: "));
        assert_null(strstr(facts, "clock offset: unknown"));
        assert_non_null(strstr(facts, "dmesg"));
        e2e_free(e);
        hosts_lab_free(l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_quorum_lost),
            cmocka_unit_test(test_hosts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
