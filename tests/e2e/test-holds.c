/*
 * Holds end to end on real etcd, through the real `gitcd apply`, `gitcd
 * suspend`, `gitcd resume`, `gitcd status` and `gitcd plan` on the local
 * target:
 *  - a suspended cluster takes no voluntary step across a spec change
 *    (replicas 1 → 3): apply reports it held and the cluster keeps one
 *    member; `gitcd resume` and the next apply grow it; both audited;
 *  - an upgrade (3.5.16 → 3.5.30) committed outside its maintenance window
 *    waits ("waits for the window at ..."), while a member killed and its
 *    data wiped is replaced at once; when the window opens the roll runs.
 *
 * The window is built from the real clock: it opens at the first whole
 * minute at least 50 s ahead (time for the replacement), so the test waits
 * up to a minute and a half for it. In the slow suite: it runs about two
 * minutes; its logic is covered under the sanitizers by
 * tests/reconciler/test-holds.c and test-hold.c.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CL            "held"
#define APPLY_TIMEOUT 120

static void write_spec(e2e *e, int replicas, const char *version, const char *extra)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                               "  name: %s\nspec:\n  replicas: %d\n  version: \"%s\"\n%s",
                               CL, replicas, version, extra ? extra : "");
        e2e_write_file(e, "held.yaml", text);
        free(text);
}

/* gitcd with arguments; stdout and stderr together. */
static char *run_all(e2e *e, int *ret_status, const char *const *args)
{
        char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, args);
        if (ret_status)
                *ret_status = k;
        char *all = xasprintf("%s%s", out ? out : "", err ? err : "");
        free(out);
        free(err);
        return all;
}

static void assert_says(const char *text, const char *what)
{
        if (!strstr(text, what))
                fprintf(stderr, "expected \"%s\" in:\n%s\n", what, text);
        assert_non_null(strstr(text, what));
}

static size_t voters(e2e *e)
{
        etcd_members *m = e2e_members(e, CL);
        size_t n = m->n;
        etcd_members_free(m);
        return n;
}

static void test_suspend_and_resume(e2e *e)
{
        write_spec(e, 1, "3.5.16", NULL);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, CL, 1);

        const char *suspend[] = {"suspend", CL, "--reason", "e2e incident", NULL};
        int status = 0;
        char *out = run_all(e, &status, suspend);
        assert_int_equal(status, 0);
        assert_says(out, "default/held suspended by ");
        free(out);
        const char *unknown[] = {"suspend", "nope", NULL};
        out = run_all(e, &status, unknown);
        assert_int_equal(status, 1);
        assert_says(out, "gitcd does not know a cluster nope");
        free(out);

        /* 1 → 3 while suspended: taken in, held, nothing added */
        write_spec(e, 3, "3.5.16", NULL);
        assert_int_equal(e2e_apply(e, NULL, 60), 1);
        assert_int_equal(voters(e), 1);
        const char *st[] = {"status", "default/" CL, NULL};
        out = run_all(e, NULL, st);
        assert_says(out, "Suspended: suspended (by ");
        assert_says(out, ": e2e incident)");
        assert_says(out, "Held:      a step held (Suspended)");
        free(out);
        json_t *js = e2e_status(e, CL);
        assert_true(json_is_true(json_object_get(js, "suspended")));
        json_decref(js);
        const char *plan[] = {"plan", "--source", e->source, NULL};
        out = run_all(e, NULL, plan);
        assert_says(out, "held (Suspended): suspended (by ");
        free(out);
        assert_int_equal(e2e_audit_count(e, CL, "cluster.suspended"), 1);
        assert_int_equal(e2e_audit_count(e, CL, "cluster.held"), 1);

        const char *resume[] = {"resume", CL, NULL};
        out = run_all(e, &status, resume);
        assert_int_equal(status, 0);
        assert_says(out, "default/held resumed by ");
        free(out);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, CL, 3);
        assert_int_equal(e2e_audit_count(e, CL, "cluster.resumed"), 1);
        assert_int_equal(e2e_audit_count(e, CL, "cluster.released"), 1);
}

/* The cron schedule of a daily window opening at the first whole minute >= 50 s ahead. */
static char *window_at(time_t *ret_start)
{
        time_t start = time(NULL) + 50;
        start += (60 - start % 60) % 60;
        struct tm tm;
        gmtime_r(&start, &tm);
        *ret_start = start;
        return xasprintf("  maintenance:\n    windows:\n      - schedule: \"%d %d * * *\"\n"
                         "        duration: 10m\n",
                         tm.tm_min, tm.tm_hour);
}

static void test_window(e2e *e)
{
        time_t start;
        _cleanup_free_ char *win = window_at(&start);
        write_spec(e, 3, "3.5.16", win);
        e2e_apply_ok(e, APPLY_TIMEOUT); /* nothing to do: the windows hold nothing */

        /* the upgrade waits for the window */
        write_spec(e, 3, "3.5.30", win);
        int status = 0;
        assert_int_equal(e2e_apply(e, NULL, 60), 1);
        const char *st[] = {"status", "default/" CL, NULL};
        char *out = run_all(e, &status, st);
        assert_says(out, "Windows:   outside the maintenance windows; disruptive steps wait "
                         "for the next at ");
        assert_says(out, "Held:      a step held (MaintenanceWindow)");
        free(out);
        assert_int_equal(e2e_audit_count(e, CL, "member.restart"), 0);

        /* a member killed and its data wiped is replaced at once */
        pid_t pid = e2e_member_pid(e, CL, "held-2");
        assert_true(pid > 0);
        kill(pid, SIGKILL);
        char *dir = e2e_member_dir(e, CL, "held-2");
        char *data = path_join(dir, "data");
        usleep(100 * 1000);
        assert_int_equal(rm_rf(data), 0);
        free(data);
        free(dir);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 1); /* replaced, then held */
        assert_true(time(NULL) < start);
        assert_int_equal(e2e_audit_count(e, CL, "member.remove"), 1);
        e2e_assert_voters(e, CL, 3);
        assert_int_equal(e2e_audit_count(e, CL, "member.restart"), 0);

        /* the window opens: the roll runs */
        while (time(NULL) < start + 1)
                sleep(1);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, CL, 3);
        assert_true(e2e_audit_count(e, CL, "member.restart") >= 2);
        etcd_client *c = e2e_client(e, CL);
        for (size_t i = 0; i < etcd_client_endpoint_count(c); i++) {
                etcd_endpoint_status *es = NULL;
                assert_int_equal(etcd_status(c, etcd_client_endpoint(c, i), &es), 0);
                assert_string_equal(es->version, "3.5.30");
                etcd_endpoint_status_free(es);
        }
        etcd_client_free(c);
}

static void test_holds(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16") || !e2e_have_version("3.5.30"))
                skip();
        e2e *e = e2e_new();
        test_suspend_and_resume(e);
        test_window(e);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_holds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
