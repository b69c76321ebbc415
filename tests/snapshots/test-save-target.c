/*
 * Which target `gitcd snapshot save` opens, through the real binary and a
 * state store written here (no etcd, no API server): the one recorded for
 * the cluster when no --target is given -- so a cluster recorded on
 * Kubernetes reaches for the Kubernetes configuration, not the local
 * target's folders -- and clear refusals, with nothing recorded, for a
 * --target that contradicts the record, another target's options, an
 * unknown target, and target options outside save.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "state/snapshots.h"
#include "state/state.h"
#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/xalloc.h"

static const char spec[] = "{\"replicas\":1,\"version\":\"3.5.16\"}";

/* A state store with one cluster, recorded on `target` (NULL: none recorded). */
static void record_cluster(e2e *e, const char *cluster, const char *target)
{
        _cleanup_free_ char *path = path_join(e->state_dir, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_true(state_cluster_set_desired(db, cluster, spec, NULL, "c0ffee", 1000) >= 0);
        if (target)
                assert_int_equal(state_cluster_set_target(db, cluster, target), 0);
        state_close(db);
}

static size_t n_records(e2e *e, const char *cluster)
{
        _cleanup_free_ char *path = path_join(e->state_dir, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), 0);
        state_snapshot_list l = {0};
        assert_int_equal(state_snapshot_list_for(db, cluster, 0, &l), 0);
        size_t n = l.n;
        state_snapshot_list_release(&l);
        state_close(db);
        return n;
}

/* Run gitcd with args; its exit status, stderr in *ret_err. */
static int run(e2e *e, char **ret_err, const char *const *args)
{
        char *out = NULL;
        int k = e2e_runv(e, &out, ret_err, args);
        free(out);
        return k;
}

static void test_recorded_target_is_opened(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        record_cluster(e, "prod/kube", "kubernetes");
        _cleanup_free_ char *missing = path_join(e->root, "no-such-kubeconfig");
        setenv("KUBECONFIG", missing, 1);
        unsetenv("KUBERNETES_SERVICE_HOST");

        /* no --target: the Kubernetes target, whose configuration is missing here */
        char *err = NULL;
        const char *save[] = {"snapshot", "save", "prod/kube", NULL};
        assert_int_equal(run(e, &err, save), 1);
        if (!strstr(err, "cannot load the Kubernetes configuration"))
                fail_msg("not the kubernetes target: %s", err);
        free(err);

        /* the same target named: the same */
        const char *same[] = {"snapshot", "save", "prod/kube", "--target", "kubernetes", NULL};
        assert_int_equal(run(e, &err, same), 1);
        assert_non_null(strstr(err, "cannot load the Kubernetes configuration"));
        free(err);

        /* another one: refused before anything is opened or recorded */
        const char *local[] = {"snapshot", "save", "prod/kube", "--target", "local", NULL};
        assert_int_equal(run(e, &err, local), 1);
        assert_non_null(strstr(err, "prod/kube runs on the kubernetes target"));
        assert_non_null(strstr(err, "not on --target local"));
        free(err);

        /* the hosts target's options on a Kubernetes cluster */
        const char *hosts[] = {"snapshot", "save", "prod/kube", "--hosts-ports", "1,2,3", NULL};
        assert_int_equal(run(e, &err, hosts), 1);
        assert_non_null(strstr(err, "--hosts-* options are for the hosts target"));
        free(err);
        assert_int_equal(n_records(e, "prod/kube"), 0);
        unsetenv("KUBECONFIG");
        e2e_free(e);
}

static void test_unrecorded_cluster_is_local(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        record_cluster(e, "prod/old", NULL);
        char *err = NULL;
        /* no target recorded (taken in before the store kept it): the local target */
        const char *kube[] = {"snapshot", "save", "prod/old", "--kubeconfig", "/x", NULL};
        assert_int_equal(run(e, &err, kube), 1);
        assert_non_null(strstr(err, "prod/old runs on the local target: --kubeconfig"));
        free(err);
        /* and the local target takes the snapshot: it fails only for want of members */
        const char *save[] = {"snapshot", "save", "prod/old", NULL};
        assert_int_equal(run(e, &err, save), 1);
        assert_null(strstr(err, "Kubernetes"));
        free(err);
        e2e_free(e);
}

static void test_usage(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        char *err = NULL;
        const char *unknown[] = {"snapshot", "save", "prod/x", "--target", "nope", NULL};
        assert_int_equal(run(e, &err, unknown), 64);
        assert_non_null(strstr(err, "unknown target 'nope'"));
        free(err);
        const char *list[] = {"snapshot", "list", "--target", "kubernetes", NULL};
        assert_int_equal(run(e, &err, list), 64);
        assert_non_null(strstr(err, "are for save"));
        free(err);
        record_cluster(e, "prod/x", "fake");
        const char *odd[] = {"snapshot", "save", "prod/x", NULL};
        assert_int_equal(run(e, &err, odd), 1);
        assert_non_null(strstr(err, "runs on the target 'fake', which this command cannot open"));
        free(err);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_recorded_target_is_opened),
            cmocka_unit_test(test_unrecorded_cluster_is_local),
            cmocka_unit_test(test_usage),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
