/*
 * `gitcd run`, the daemon, end to end: it takes in a new cluster file and a
 * later edit without being restarted (polling its source), notices a
 * member's death at once, and on SIGTERM finishes its step and exits 0 while
 * the members keep running. Two clusters are reconciled side by side.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static void test_daemon(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        pid_t d = e2e_start_daemon(e, NULL);
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));

        /* New file and an edit, taken in by polling. */
        e2e_write_cluster(e, "b.yaml", "beta", 1, "3.5.16");
        e2e_write_cluster(e, "a.yaml", "alpha", 3, "3.5.16");
        assert_true(e2e_wait_ready(e, "beta", 1, 60));
        assert_true(e2e_wait_ready(e, "alpha", 3, 90));

        /* A member dies: restarted by the daemon, same member. */
        pid_t m = e2e_member_pid(e, "alpha", "alpha-1");
        assert_true(m > 0);
        kill(m, SIGKILL);
        int64_t t0 = now_mono_ms();
        pid_t m2 = 0;
        while (now_mono_ms() - t0 < 30000 &&
               ((m2 = e2e_member_pid(e, "alpha", "alpha-1")) == 0 || m2 == m))
                usleep(50 * 1000);
        assert_true(m2 > 0 && m2 != m);
        assert_true(e2e_wait_ready(e, "alpha", 3, 60));
        assert_int_equal(e2e_audit_count(e, "alpha", "member.remove"), 0);

        /* SIGHUP re-reads the configuration files; the daemon carries on. */
        assert_int_equal(kill(d, SIGHUP), 0);
        usleep(500 * 1000);
        assert_int_equal(waitpid(d, NULL, WNOHANG), 0);

        /* A cluster removed from the source is orphaned: reported, left running. */
        char *b = xasprintf("%s/b.yaml", e->source);
        assert_int_equal(unlink(b), 0);
        free(b);
        int64_t t2 = now_mono_ms();
        bool orphaned = false;
        while (!orphaned && now_mono_ms() - t2 < 30000) {
                orphaned = e2e_audit_count(e, "beta", "cluster.orphaned") == 1;
                usleep(200 * 1000);
        }
        assert_true(orphaned);
        assert_true(e2e_member_pid(e, "beta", "beta-0") > 0);

        /* SIGTERM: a clean exit; members keep running. */
        assert_int_equal(kill(d, SIGTERM), 0);
        int status = 0;
        int64_t t1 = now_mono_ms();
        while (waitpid(d, &status, WNOHANG) == 0 && now_mono_ms() - t1 < 15000)
                usleep(50 * 1000);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        harness_untrack_pid(d);
        assert_true(e2e_member_pid(e, "alpha", "alpha-0") > 0);
        assert_true(e2e_member_pid(e, "beta", "beta-0") > 0);

        /* Only an explicit prune stops an orphan's members; its data is kept. */
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "apply", "-q", "--prune", "--source", e->source,
                                 "--timeout", "60s", NULL),
                         0);
        free(out);
        assert_int_equal(e2e_member_pid(e, "beta", "beta-0"), 0);
        assert_true(e2e_member_pid(e, "alpha", "alpha-0") > 0);
        char *bdir = e2e_member_dir(e, "beta", "beta-0");
        char *bdata = xasprintf("%s/data/member", bdir);
        assert_int_equal(access(bdata, F_OK), 0);
        free(bdir);
        free(bdata);
        assert_int_equal(e2e_audit_count(e, "beta", "cluster.pruned"), 1);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_daemon),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
