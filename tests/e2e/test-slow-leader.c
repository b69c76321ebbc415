/*
 * A leader whose disk turns slow under a writer loses leadership (real
 * gitcd run, local target, three members of real etcd 3.5.16): within one
 * interval gitcd moves leadership to another member, audited
 * member.move-leader with reason SlowDisk, and no acknowledged write is
 * lost.
 *
 * The slow disk is simulated: strace attaches to the leader's etcd process
 * and delays every fdatasync and fsync it makes by SLOW_US on entry
 * (`-e inject=...:delay_enter`), so etcd's own wal fsync and backend commit
 * histograms show it, as on a failing disk. An LD_PRELOAD shim would not:
 * etcd is Go, and Go makes these system calls directly, not through libc.
 * strace also stops the process at its other system calls, which makes the
 * member a little slower overall; the fast members are untouched. The test
 * is skipped where strace or etcd 3.5.16 is missing.
 *
 * spec.leadership.intervalSeconds is 20 and gitcd run observes converged
 * clusters every 2 s (the figures read every 5 s): the
 * move comes about 5 s after the disk turned slow, the test takes about 7 s
 * (the pass logic also runs under the sanitizers in
 * tests/reconciler/test-slowleader.c).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define SLOW_US "150000"

static bool have_strace(void)
{
        return access("/usr/bin/strace", X_OK) == 0;
}

/* The leader's id as one member sees it, and its member name; 0 when none is known yet. */
static uint64_t leader_of(e2e *e, const char *cluster, char **ret_name)
{
        etcd_client *c = e2e_client(e, cluster);
        etcd_endpoint_status *st = NULL;
        uint64_t leader = 0;
        if (etcd_status(c, NULL, &st) >= 0) {
                leader = st->leader;
                etcd_endpoint_status_free(st);
        }
        etcd_members *ms = NULL;
        *ret_name = NULL;
        if (leader && etcd_member_list(c, &ms) >= 0) {
                for (size_t i = 0; i < ms->n; i++)
                        if (ms->members[i].id == leader)
                                *ret_name = xstrdup(ms->members[i].name);
                etcd_members_free(ms);
        }
        etcd_client_free(c);
        return *ret_name ? leader : 0;
}

static pid_t slow_down(pid_t etcd_pid)
{
        char pid[32];
        snprintf(pid, sizeof(pid), "%ld", (long)etcd_pid);
        pid_t p = fork();
        assert_true(p >= 0);
        if (p == 0) {
                execl("/usr/bin/strace", "strace", "-f", "-qq", "-o", "/dev/null", "-e",
                      "trace=fdatasync,fsync", "-e", "inject=fdatasync,fsync:delay_enter=" SLOW_US,
                      "-p", pid, (char *)NULL);
                _exit(127);
        }
        return p;
}

static void test_slow_leader_loses_leadership(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16") || !have_strace())
                skip();
        e2e *e = e2e_new();
        e2e_write_file(e, "slow.yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n  name: slow\n  namespace: default\n"
                       "spec:\n  replicas: 3\n  version: \"3.5.16\"\n"
                       "  progressDeadlineSeconds: 120\n"
                       "  leadership:\n    intervalSeconds: 20\n");
        e2e_apply_ok(e, 120);
        const char *run_args[] = {"--observe-interval", "2s", NULL};
        pid_t daemon = e2e_start_daemon(e, run_args);
        assert_true(e2e_wait_ready(e, "slow", 3, 60));

        char *endpoints = e2e_endpoints(e, "slow");
        harness_writer_opts wo = {.endpoints = endpoints, .interval_ms = 5};
        harness_writer *w = harness_writer_start(&wo);
        harness_writer_wait(w, 50);

        char *was = NULL;
        uint64_t leader = 0;
        for (int i = 0; i < 100 && !leader; i++, msleep(100))
                leader = leader_of(e, "slow", &was);
        assert_true(leader != 0);
        pid_t etcd_pid = e2e_member_pid(e, "slow", was);
        assert_true(etcd_pid > 0);
        int64_t t0 = now_mono_ms();
        pid_t tracer = slow_down(etcd_pid);

        /* within the interval (20 s) and a few windows of the figures: the move, audited */
        int moves = 0;
        while (moves == 0 && now_mono_ms() - t0 < 90000) {
                msleep(500);
                moves = e2e_audit_count(e, "slow", "member.move-leader");
        }
        int64_t took = now_mono_ms() - t0;
        kill(tracer, SIGINT);
        assert_int_equal(waitpid(tracer, NULL, 0), tracer);
        print_message("leadership moved off %s %.1f s after its disk turned slow\n", was,
                      (double)took / 1000);
        assert_int_equal(moves, 1);
        assert_true(took <= 40000);

        char *out = NULL;
        assert_int_equal(
            e2e_run(e, &out, "log", "-o", "json", "--action", "member.move-leader", NULL), 0);
        char *from = xasprintf("move leadership from %s to ", was);
        assert_non_null(strstr(out, from));
        free(from);
        /* the figures, in the event's JSON too */
        char *json = xasprintf("\"from\":\"%s\",\"reason\":\"SlowDisk\"", was);
        assert_non_null(strstr(out, json));
        assert_non_null(strstr(out, "\"p99_ms\":"));
        free(json);
        free(out);

        char *now = NULL;
        uint64_t after = 0;
        for (int i = 0; i < 50 && !after; i++, msleep(100))
                after = leader_of(e, "slow", &now);
        assert_true(after != 0 && after != leader);

        e2e_writer_check(w, e, "slow", 50);
        harness_writer_free(w);
        kill(daemon, SIGTERM);
        (void)e2e_wait_exit(daemon);
        free(now);
        free(was);
        free(endpoints);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_slow_leader_loses_leadership),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
