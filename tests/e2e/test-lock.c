/*
 * Two gitcd processes on one state, through the real binary: `apply` and
 * `run` hold an exclusive lock on the state folder, so a second `apply`
 * exits 1 with "another gitcd (pid N) holds STATE" and touches nothing,
 * while `status`, `log` and `plan` keep reading beside the holder.
 *
 * To hold the first apply at a known point without relying on timing, its
 * etcd binary is a wrapper that waits for a gate file before it becomes the
 * real etcd: the apply waits for its member, holding the lock, until the
 * test opens the gate.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static void assert_contains(const char *hay, const char *needle)
{
        if (!hay || !strstr(hay, needle))
                fail_msg("expected to find\n  %s\nin:\n%s", needle, hay ? hay : "(null)");
}

/* Wait (bounded) until the lock file names pid; fails the test otherwise. */
static void wait_lock_holder(e2e *e, pid_t pid)
{
        int64_t t0 = now_mono_ms();
        while (e2e_lock_pid(e) != pid && now_mono_ms() - t0 < 60000)
                usleep(20 * 1000);
        assert_int_equal(e2e_lock_pid(e), pid);
}

/* <root>/etcd-gated/3.5.16/etcd: waits for <root>/gate, then runs the real etcd. */
static char *gated_etcd_dir(e2e *e, char **ret_gate)
{
        char *real = harness_etcd_path("3.5.16", "etcd");
        assert_non_null(real);
        char *dir = path_join(e->root, "etcd-gated");
        char *vdir = path_join(dir, "3.5.16");
        assert_int_equal(mkdir_p(vdir, 0755), 0);
        *ret_gate = path_join(e->root, "gate");
        char *script = xasprintf("#!/bin/sh\n"
                                 "while [ ! -e '%s' ]; do sleep 0.05; done\n"
                                 "exec '%s' \"$@\"\n",
                                 *ret_gate, real);
        char *bin = path_join(vdir, "etcd");
        assert_int_equal(write_file_atomic(bin, script, strlen(script), 0755), 0);
        free(bin);
        free(script);
        free(vdir);
        free(real);
        return dir;
}

/* Two `gitcd apply` at once on the same state: the second is refused, the first completes. */
static void test_two_applies(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        char *gate = NULL;
        char *etcd_dir = gated_etcd_dir(e, &gate);

        const char *first_args[] = {"apply",  "--source",  e->source, "--etcd-dir",
                                    etcd_dir, "--timeout", "120s",    NULL};
        pid_t first = e2e_start(e, first_args, "first.log");
        wait_lock_holder(e, first);

        /* The second apply on the same state: refused at once, nothing read or written. */
        const char *second_args[] = {"apply",     "-q",  "--source", e->source,
                                     "--timeout", "30s", NULL};
        char *out = NULL, *err = NULL;
        assert_int_equal(e2e_runv(e, &out, &err, second_args), 1);
        char *want =
            xasprintf("gitcd: another gitcd (pid %ld) holds %s", (long)first, e->state_dir);
        assert_contains(err, want);
        assert_contains(err, "stop it first, or use another --state");
        free(want);
        free(out);
        free(err);
        assert_int_equal(e2e_lock_pid(e), first);

        /* The first carries on once its member may start, and converges. */
        assert_int_equal(write_file_atomic(gate, "", 0, 0644), 0);
        int st = e2e_wait_exit(first);
        if (st != 0) {
                char *log = e2e_read_log(e, "first.log");
                fail_msg("the first apply exited %d:\n%s", st, log);
        }
        assert_true(e2e_wait_ready(e, "alpha", 1, 30));

        /* Its lock went with it: the next apply runs. */
        assert_int_equal(e2e_apply(e, NULL, 60), 0);
        free(gate);
        free(etcd_dir);
        e2e_free(e);
}

/* While `gitcd run` holds the lock: status, log and plan read; apply is refused, even after SIGHUP. */
static void test_readers_beside_run(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        pid_t d = e2e_start_daemon(e, NULL);
        wait_lock_holder(e, d);
        assert_true(e2e_wait_ready(e, "alpha", 1, 60)); /* `gitcd status`, beside the daemon */

        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", NULL), 0);
        assert_contains(out, "default/alpha");
        free(out);
        assert_int_equal(e2e_run(e, &out, "log", "-o", "json", NULL), 0);
        free(out);
        char *db = path_join(e->state_dir, "state.db");
        assert_int_equal(e2e_run(e, &out, "plan", "--source", e->source, "--state", db, NULL), 0);
        assert_contains(out, "0 to create, 0 to change, 0 to delete");
        free(out);
        free(db);

        char *want = xasprintf("gitcd: another gitcd (pid %ld) holds %s", (long)d, e->state_dir);
        const char *apply_args[] = {"apply", "-q", "--source", e->source, NULL};
        char *err = NULL;
        assert_int_equal(e2e_runv(e, &out, &err, apply_args), 1);
        assert_contains(err, want);
        free(out);
        free(err);

        /* SIGHUP re-reads the configuration but never lets go of the lock. */
        assert_int_equal(kill(d, SIGHUP), 0);
        int64_t t0 = now_mono_ms();
        char *log = NULL;
        for (;;) {
                log = e2e_read_log(e, "daemon.log");
                if (strstr(log, "SIGHUP") || now_mono_ms() - t0 > 30000)
                        break;
                free(log);
                usleep(50 * 1000);
        }
        assert_contains(log, "SIGHUP");
        free(log);
        assert_int_equal(e2e_runv(e, &out, &err, apply_args), 1);
        assert_contains(err, want);
        free(out);
        free(err);
        free(want);

        /* Once the daemon stops, apply takes the lock. */
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        assert_int_equal(e2e_apply(e, NULL, 60), 0);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_two_applies),
            cmocka_unit_test(test_readers_beside_run),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
