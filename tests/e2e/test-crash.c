/*
 * Crash safety: gitcd is killed with SIGKILL at each step boundary of
 * bootstrap (seed and learners, and two points of the static bootstrap:
 * its records written, its first member started), scale up, scale down,
 * replacement and pause (failpoints,
 * util/failpoint.h), then started again. Each time the cluster must
 * converge to the right member count, with no stray member in etcd or on
 * the target, every voter named, and the key written before the crash still
 * there.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define VERSION "3.5.16"
#define KILLED  (128 + SIGKILL)

enum scenario {
        BOOTSTRAP,  /* nothing → 3, seed then learners (bootstrap.mode learners) */
        STATIC,     /* nothing → 3, all at once (the default static bootstrap) */
        SCALE_DOWN, /* 3 → 1 */
        REPLACE,    /* 3 with one member's data lost */
        PAUSE,      /* 3 → 0 */
};

struct crash_case {
        const char *failpoint;
        enum scenario scenario;
};

static const struct crash_case cases[] = {
    {"bootstrap.after-first-start", STATIC},
    {"bootstrap.after-records", STATIC},
    {"start-seed.after-record", BOOTSTRAP},
    {"start-seed.after-start", BOOTSTRAP},
    {"add-learner.after-record", BOOTSTRAP},
    {"add-learner.after-journal", BOOTSTRAP},
    {"add-learner.after-etcd", BOOTSTRAP},
    {"start.before-target", BOOTSTRAP},
    {"start.after-target", BOOTSTRAP},
    {"promote.before-etcd", BOOTSTRAP},
    {"promote.after-etcd", BOOTSTRAP},
    {"remove.before-etcd", SCALE_DOWN},
    {"remove.after-etcd", SCALE_DOWN},
    {"delete.after-target", SCALE_DOWN},
    {"remove.after-etcd", REPLACE},
    {"add-learner.after-etcd", REPLACE},
    {"stop.after-target", PAUSE},
};

/* A cluster that bootstraps seed-then-learners (spec.bootstrap.mode learners). */
static void write_learners_cluster(e2e *e, const char *name, int replicas)
{
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "  namespace: default\n"
                                              "spec:\n"
                                              "  replicas: %d\n"
                                              "  version: \"%s\"\n"
                                              "  progressDeadlineSeconds: 120\n"
                                              "  bootstrap:\n"
                                              "    mode: learners\n",
                                              name, replicas, VERSION);
        e2e_write_file(e, "c.yaml", text);
}

static int count_member_dirs(e2e *e, const char *name)
{
        char *dir = xasprintf("%s/clusters/default/%s", e->state_dir, name);
        char *out = NULL;
        int n = 0;
        (void)out;
        for (int i = 0; i < 64; i++) {
                char *m = xasprintf("%s/%s-%d/member.json", dir, name, i);
                if (path_exists(m))
                        n++;
                free(m);
        }
        free(dir);
        return n;
}

static void check_converged(e2e *e, const char *name, int replicas)
{
        int k = e2e_apply(e, NULL, 90);
        if (k != 0) {
                char *out = NULL;
                e2e_run(e, &out, "status", "default/crash", NULL);
                fail_msg("restart did not converge (exit %d):\n%s", k, out);
        }
        int want = replicas > 0 ? replicas : 1;
        if (replicas == 0) {
                json_t *st = e2e_status(e, name);
                assert_string_equal(json_string_value(json_object_get(st, "phase")), "Paused");
                assert_int_equal(json_array_size(json_object_get(st, "members")), 1);
                json_decref(st);
                assert_int_equal(count_member_dirs(e, name), 1);
                return;
        }
        etcd_members *l = e2e_members(e, name);
        if (l->n != (size_t)want)
                fail_msg("%zu members in etcd, want %d", l->n, want);
        json_t *st = e2e_status(e, name);
        json_t *members = json_object_get(st, "members");
        assert_int_equal(json_array_size(members), want);
        for (size_t i = 0; i < l->n; i++) {
                assert_false(l->members[i].is_learner);
                bool recorded = false;
                size_t j;
                json_t *m;
                json_array_foreach(members, j, m)
                {
                        if (streq(json_string_value(json_object_get(m, "name")),
                                  l->members[i].name))
                                recorded = true;
                }
                if (!recorded)
                        fail_msg("etcd member %s is not recorded", l->members[i].name);
        }
        json_decref(st);
        etcd_members_free(l);
        assert_int_equal(count_member_dirs(e, name), want);

        etcd_client *c = e2e_client(e, name);
        etcd_kv_list *kv = NULL;
        assert_int_equal(etcd_get(c, "before-crash", false, &kv), 0);
        assert_int_equal(kv->n, 1);
        etcd_kv_list_free(kv);
        etcd_client_free(c);
}

static void put_marker(e2e *e, const char *name)
{
        etcd_client *c = e2e_client(e, name);
        assert_int_equal(etcd_put(c, "before-crash", "x", 1, NULL), 0);
        etcd_client_free(c);
}

static void run_case(const struct crash_case *cc)
{
        e2e *e = e2e_new();
        const char *name = "crash";
        int final = 3;
        switch (cc->scenario) {
        case BOOTSTRAP:
                /* The seed comes up first without a failpoint in the way of the marker. */
                e2e_write_cluster(e, "c.yaml", name, 1, VERSION);
                if (strncmp(cc->failpoint, "start-seed", 10) == 0) {
                        /* The seed path is asked for: a static bootstrap has no seed. */
                        write_learners_cluster(e, name, 3);
                        assert_int_equal(e2e_apply(e, cc->failpoint, 60), KILLED);
                        assert_int_equal(e2e_apply(e, NULL, 90), 0);
                        put_marker(e, name);
                        check_converged(e, name, 3);
                        e2e_free(e);
                        return;
                }
                assert_int_equal(e2e_apply(e, NULL, 60), 0);
                put_marker(e, name);
                e2e_write_cluster(e, "c.yaml", name, 3, VERSION);
                break;
        case STATIC:
                /* Killed mid-bootstrap, then started again: the same static set forms. */
                e2e_write_cluster(e, "c.yaml", name, 3, VERSION);
                assert_int_equal(e2e_apply(e, cc->failpoint, 60), KILLED);
                assert_int_equal(e2e_apply(e, NULL, 90), 0);
                put_marker(e, name);
                check_converged(e, name, 3);
                e2e_free(e);
                return;
        case SCALE_DOWN:
        case PAUSE:
        case REPLACE:
                e2e_write_cluster(e, "c.yaml", name, 3, VERSION);
                assert_int_equal(e2e_apply(e, NULL, 90), 0);
                put_marker(e, name);
                if (cc->scenario == SCALE_DOWN) {
                        e2e_write_cluster(e, "c.yaml", name, 1, VERSION);
                        final = 1;
                } else if (cc->scenario == PAUSE) {
                        e2e_write_cluster(e, "c.yaml", name, 0, VERSION);
                        final = 0;
                } else {
                        pid_t pid = e2e_member_pid(e, name, "crash-1");
                        kill(pid, SIGKILL);
                        usleep(100 * 1000);
                        char *dir = e2e_member_dir(e, name, "crash-1");
                        char *data = path_join(dir, "data");
                        assert_int_equal(rm_rf(data), 0);
                        free(dir);
                        free(data);
                }
                break;
        }
        int k = e2e_apply(e, cc->failpoint, 90);
        if (k != KILLED)
                fail_msg("%s: gitcd was not stopped at the failpoint (exit %d)", cc->failpoint, k);
        check_converged(e, name, final);
        e2e_free(e);
}

static void test_crash_points(void **state)
{
        (void)state;
        if (!e2e_have_version(VERSION))
                skip();
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                fprintf(stderr, "crash point %zu/%zu: %s\n", i + 1,
                        sizeof(cases) / sizeof(cases[0]), cases[i].failpoint);
                run_case(&cases[i]);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_crash_points),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
