/*
 * Which target `gitcd snapshot save` opens, through the real binary and a
 * state store written here (no etcd, no API server): the one recorded for
 * the cluster when no --target is given -- so a cluster recorded on
 * Kubernetes reaches for the Kubernetes configuration, not the local
 * target's folders -- and clear refusals, with nothing recorded, for a
 * --target that contradicts the record, another target's options, an
 * unknown target, and target options outside save. The daemon's
 * configuration file (--config) gives the state and the settings of the
 * cluster's own target; its other targets' settings are ignored, and an
 * invalid file is refused with its diagnostics. `gitcd recover` finds the
 * state and the target the same way.
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

/* A state store at path with one cluster, recorded on `target` (NULL: none recorded). */
static void record_cluster_at(const char *path, const char *cluster, const char *target)
{
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_true(state_cluster_set_desired(db, cluster, spec, NULL, "c0ffee", 1000) >= 0);
        if (target)
                assert_int_equal(state_cluster_set_target(db, cluster, target), 0);
        state_close(db);
}

static void record_cluster(e2e *e, const char *cluster, const char *target)
{
        _cleanup_free_ char *path = path_join(e->state_dir, "state.db");
        record_cluster_at(path, cluster, target);
}

static size_t n_records_at(const char *path, const char *cluster)
{
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_ONLY, &db), 0);
        state_snapshot_list l = {0};
        assert_int_equal(state_snapshot_list_for(db, cluster, 0, &l), 0);
        size_t n = l.n;
        state_snapshot_list_release(&l);
        state_close(db);
        return n;
}

static size_t n_records(e2e *e, const char *cluster)
{
        _cleanup_free_ char *path = path_join(e->state_dir, "state.db");
        return n_records_at(path, cluster);
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
        assert_non_null(strstr(err, "--hosts-ports are for the hosts target"));
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
        /* a file is restored on gitcd's host: no target to name */
        const char *file[] = {"snapshot", "restore",  "/no/such.db", "--into",
                              "/no/dir",  "--target", "kubernetes",  NULL};
        assert_int_equal(run(e, &err, file), 64);
        assert_non_null(strstr(err, "for restore of a recorded snapshot (by id)"));
        free(err);
        record_cluster(e, "prod/x", "fake");
        const char *odd[] = {"snapshot", "save", "prod/x", NULL};
        assert_int_equal(run(e, &err, odd), 1);
        assert_non_null(strstr(err, "runs on the target 'fake', which this command cannot open"));
        free(err);
        e2e_free(e);
}

/* A configuration file beside the state folder; its path. */
static char *write_config(e2e *e, const char *name, const char *text)
{
        char *path = path_join(e->root, name);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
        return path;
}

/*
 * The daemon's file gives what the command line leaves out: its state (not
 * the one $GITCD_STATE_DIR names, which e2e_runv sets) and the settings of
 * the target each cluster runs on.
 */
static void test_daemon_config(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        _cleanup_free_ char *db = path_join(e->root, "daemon/state.db");
        record_cluster_at(db, "prod/old", "local");
        record_cluster_at(db, "prod/kube", "kubernetes");
        record_cluster_at(db, "prod/unrecorded", NULL);
        _cleanup_free_ char *kubeconfig = path_join(e->root, "file-kubeconfig");
        _cleanup_free_ char *text = xasprintf("state: %s\n"
                                              "target: kubernetes\n"
                                              "kubernetes:\n"
                                              "  kubeconfig: %s\n"
                                              "hosts:\n"
                                              "  knownHosts: /nonexistent/known_hosts\n"
                                              "  clientPort: 12379\n"
                                              "sources:\n"
                                              "  - name: platform\n"
                                              "    url: /srv/git/platform.git\n",
                                              db, kubeconfig);
        _cleanup_free_ char *cfg = write_config(e, "gitcd.yaml", text);
        unsetenv("KUBECONFIG");
        unsetenv("KUBERNETES_SERVICE_HOST");
        char *err = NULL;

        /* a local cluster: the file's state; its kubernetes and hosts settings are not refused */
        const char *local[] = {"snapshot", "save", "prod/old", "--config", cfg, NULL};
        assert_int_equal(run(e, &err, local), 1);
        if (strstr(err, "no state at") || strstr(err, "are for the") || strstr(err, "Kubernetes") ||
            !strstr(err, "prod/old: snapshot 1 failed"))
                fail_msg("not the local target of the file's state: %s", err);
        free(err);

        /* a Kubernetes cluster: the file's kubeconfig (missing here) */
        const char *kube[] = {"snapshot", "save", "prod/kube", "--config", cfg, NULL};
        assert_int_equal(run(e, &err, kube), 1);
        assert_non_null(strstr(err, "cannot load the Kubernetes configuration"));
        if (!strstr(err, kubeconfig))
                fail_msg("not the file's kubeconfig: %s", err);
        free(err);
        /* the command line's wins over the file's */
        _cleanup_free_ char *flag_kc = path_join(e->root, "flag-kubeconfig");
        const char *flag[] = {"snapshot", "save",         "prod/kube", "--config",
                              cfg,        "--kubeconfig", flag_kc,     NULL};
        assert_int_equal(run(e, &err, flag), 1);
        if (!strstr(err, flag_kc) || strstr(err, kubeconfig))
                fail_msg("not --kubeconfig: %s", err);
        free(err);
        /* no target recorded: the file's target */
        const char *unrec[] = {"snapshot", "save", "prod/unrecorded", "--config", cfg, NULL};
        assert_int_equal(run(e, &err, unrec), 1);
        assert_non_null(strstr(err, "cannot load the Kubernetes configuration"));
        free(err);
        /* the command line's options of another target are still refused */
        const char *other[] = {"snapshot", "save",      "prod/old", "--config",
                               cfg,        "--context", "prod",     NULL};
        assert_int_equal(run(e, &err, other), 1);
        assert_non_null(strstr(err, "prod/old runs on the local target: --kubeconfig"));
        free(err);

        /* recover: a --target the record contradicts is refused before anything is recorded */
        const char *wrong[] = {"recover", "prod/kube", "--from-member", "kube-0", "--config",
                               cfg,       "--target",  "local",         NULL};
        assert_int_equal(run(e, &err, wrong), 1);
        assert_non_null(strstr(err, "prod/kube runs on the kubernetes target"));
        free(err);
        /* the file's state, and the target the cluster runs on with the file's settings */
        const char *recover[] = {"recover",   "prod/kube", "--from-member",
                                 "kube-0",    "--config",  cfg,
                                 "--timeout", "5s",        NULL};
        char *out = NULL;
        assert_int_equal(e2e_runv(e, &out, &err, recover), 1);
        /* the first request: the refused one recorded nothing */
        assert_non_null(strstr(out, "recovery 1 of prod/kube from member kube-0 requested"));
        if (!strstr(err, "cannot load the Kubernetes configuration") || !strstr(err, kubeconfig))
                fail_msg("recover: not the file's Kubernetes settings: %s", err);
        free(out);
        free(err);

        /* an invalid file: refused with its diagnostics, nothing recorded */
        _cleanup_free_ char *bad_text = xasprintf("state: %s\n"
                                                  "kubernetes:\n"
                                                  "  kubeconfig: %s\n"
                                                  "  namespace: etcd\n"
                                                  "sources:\n"
                                                  "  - name: platform\n"
                                                  "    url: /srv/git/platform.git\n",
                                                  db, kubeconfig);
        _cleanup_free_ char *bad = write_config(e, "bad.yaml", bad_text);
        size_t before = n_records_at(db, "prod/old"); /* the failed one above */
        const char *refused[] = {"snapshot", "save", "prod/old", "--config", bad, NULL};
        assert_int_equal(run(e, &err, refused), 1);
        _cleanup_free_ char *where = xasprintf("%s:4:3: error:", bad);
        if (!strstr(err, where) || !strstr(err, "namespace"))
                fail_msg("no diagnostic for the invalid file: %s", err);
        free(err);
        const char *etcd[] = {"etcd", "--cluster", "prod/old", "--config", bad, "status", NULL};
        assert_int_equal(run(e, &err, etcd), 1);
        assert_non_null(strstr(err, where));
        free(err);
        assert_int_equal(n_records_at(db, "prod/old"), before);

        const char *help[] = {"snapshot", "--help", NULL};
        assert_int_equal(e2e_runv(e, &out, NULL, help), 0);
        assert_non_null(strstr(out, "--config FILE"));
        free(out);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_recorded_target_is_opened),
            cmocka_unit_test(test_unrecorded_cluster_is_local),
            cmocka_unit_test(test_usage),
            cmocka_unit_test(test_daemon_config),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
