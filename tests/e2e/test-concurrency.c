/*
 * `gitcd run` with several clusters, one of which hangs: its only member's
 * etcd process is stopped (SIGSTOP), so every pass of that cluster waits on
 * health probes and etcd calls that never answer. Meanwhile another
 * cluster scales from one member to three and converges, SIGHUP reloads
 * the configuration and a cluster created after it converges, and SIGTERM
 * ends the daemon, all before the hung member is continued.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static void test_hung_cluster_holds_up_no_other(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "alpha.yaml", "alpha", 1, "3.5.16");
        e2e_write_cluster(e, "beta.yaml", "beta", 1, "3.5.16");
        /* alpha is observed every second, so its passes keep running into the hang. */
        const char *const args[] = {"--observe-interval", "1s", NULL};
        pid_t d = e2e_start_daemon(e, args);
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        assert_true(e2e_wait_ready(e, "beta", 1, 60));

        /* alpha's member hangs: it stays up as a process and answers nothing. */
        pid_t hung = e2e_member_pid(e, "alpha", "alpha-0");
        assert_true(hung > 0);
        assert_int_equal(kill(hung, SIGSTOP), 0);

        /* beta scales 1 -> 3 meanwhile. */
        e2e_write_cluster(e, "beta.yaml", "beta", 3, "3.5.16");
        assert_true(e2e_wait_ready(e, "beta", 3, 90));
        assert_int_equal(waitpid(d, NULL, WNOHANG), 0);

        /* SIGHUP reloads; a cluster written after it is created, alpha still hung. */
        assert_int_equal(kill(d, SIGHUP), 0);
        e2e_write_cluster(e, "gamma.yaml", "gamma", 1, "3.5.16");
        assert_true(e2e_wait_ready(e, "gamma", 1, 60));
        char *log = e2e_read_log(e, "daemon.log");
        assert_non_null(strstr(log, "SIGHUP"));
        free(log);

        /* SIGTERM: the daemon exits 0 with alpha's pass still stuck. */
        assert_int_equal(kill(d, SIGTERM), 0);
        int status = 0;
        int64_t t0 = now_mono_ms();
        pid_t w = 0;
        while ((w = waitpid(d, &status, WNOHANG)) == 0 && now_mono_ms() - t0 < 30000)
                usleep(50 * 1000);
        assert_int_equal(w, d);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        harness_untrack_pid(d);

        /* alpha's member was never replaced or restarted: still the same, stopped, process. */
        assert_int_equal(e2e_member_pid(e, "alpha", "alpha-0"), hung);
        assert_int_equal(kill(hung, SIGCONT), 0);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hung_cluster_holds_up_no_other),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
