/*
 * spec.bootstrap.restore on the Kubernetes target, against the real
 * kube-apiserver and the node simulator (tests/e2e/kube-lab.h); skipped
 * (77) without them or without root. A local-target cluster holding 3,000
 * keys is snapshotted with `gitcd snapshot save`; `gitcd apply --target
 * kubernetes` of a 3-member cluster whose bootstrap.restore names that
 * file is killed once the first member's receiver Pod (`gitcd snapshot
 * receive`, mounting its PVC) is Ready: the receiver Pod and its Secret
 * are left, the PVC is marked pending and no member Pod exists. The next
 * apply is killed right after that member's data reached its volume (the
 * receiver and the pending mark still there). The last apply deletes what
 * was left, takes that volume as restored, restores the other members
 * through a receiver Pod each and starts them all: every member holds every key (read
 * through each member's own endpoint), the cluster ID is new, each member
 * was restored once, and nothing of the restore is left (no receiver Pod
 * or Secret, no pending PVC, no staging folder on the volumes, no
 * restored copy on gitcd's host).
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define NS      "default"
#define VERSION "3.5.16"
#define CL      "kr"
#define KEYS    3000

static kube_lab *lab;

static const kube_gvr PODS = {"", "v1", "pods", true};
static const kube_gvr SECRETS = {"", "v1", "secrets", true};
static const kube_gvr PVCS = {"", "v1", "persistentvolumeclaims", true};

static int kube_apply_gitcd(e2e *e, const char *failpoint, char **ret_stderr)
{
        const char *args[] = {
            "apply",     "-q",       "--source",   e->source,      "--timeout",
            "240s",      "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(lab->api),
            "--context", "gitcd",    NULL};
        return e2e_runv_failpoint(e, failpoint, NULL, ret_stderr, args);
}

static size_t count(const kube_gvr *gvr, const char *selector)
{
        return kube_lab_count(lab, gvr, NS, selector);
}

static size_t pending_pvcs(void)
{
        json_t *items = NULL;
        if (kube_list(lab->admin, &PVCS, NS, "gitcd.io/cluster=" CL, &items, NULL) < 0)
                fail_msg("list pvcs: %s", kube_client_last_error(lab->admin));
        size_t n = 0, i;
        json_t *o;
        json_array_foreach(items, i, o)
        {
                json_t *a = json_object_get(json_object_get(o, "metadata"), "annotations");
                if (json_object_get(a, "gitcd.io/restore"))
                        n++;
        }
        json_decref(items);
        return n;
}

/* A 1-member local cluster "src" holding KEYS keys, snapshotted; returns the file. */
static char *source_snapshot(e2e *e)
{
        e2e_write_cluster(e, "src.yaml", "src", 1, VERSION);
        assert_int_equal(e2e_apply(e, NULL, 90), 0);
        _cleanup_free_ char *eps = e2e_endpoints(e, "src");
        e2e_fill_keys(eps, KEYS);
        _cleanup_free_ char *folder = xasprintf("%s/backups", e->root);
        _cleanup_free_ char *out = NULL, *err = NULL;
        const char *args[] = {"snapshot", "save", "default/src", "--to", folder, NULL};
        if (e2e_runv(e, &out, &err, args) != 0)
                fail_msg("snapshot save: %s%s", out, err);
        free(out), out = NULL;
        assert_int_equal(e2e_run(e, &out, "snapshot", "list", "default/src", "-o", "json", NULL),
                         0);
        json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        assert_non_null(j);
        char *location = xstrdup(json_string_value(json_object_get(j, "location")));
        json_decref(j);
        assert_true(path_exists(location));
        return location;
}

static void test_restore(void **state)
{
        (void)state;
        e2e *src = e2e_new();
        _cleanup_free_ char *snap = source_snapshot(src);
        uint64_t src_id = e2e_assert_voters(src, "src", 1);
        e2e_kill_members(src);

        e2e *e = e2e_new();
        /* the snapshot file on the gitcd host, in the source cluster's folder */
        e2e_set_policy(e, "localSnapshotRoots: [%s]", src->root);
        _cleanup_free_ char *spec = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: " CL "\n"
                                              "  namespace: " NS "\n"
                                              "spec:\n"
                                              "  replicas: 3\n"
                                              "  version: \"" VERSION "\"\n"
                                              "  bootstrap:\n"
                                              "    restore:\n"
                                              "      source:\n"
                                              "        local:\n"
                                              "          path: %s\n",
                                              snap);
        e2e_write_file(e, CL ".yaml", spec);

        /* killed while the first receiver is Ready: it is left, and no member runs */
        _cleanup_free_ char *err = NULL;
        int k = kube_apply_gitcd(e, "kubernetes.restore.receiver-ready", &err);
        if (k != 128 + SIGKILL)
                fail_msg("apply was not killed at the receiver (%d): %s", k, err);
        const char *receivers = "app.kubernetes.io/component=snapshot-receiver";
        assert_int_equal(count(&PODS, receivers), 1);
        assert_int_equal(count(&SECRETS, receivers), 1);
        assert_int_equal(count(&PODS, "app.kubernetes.io/component=member"), 0);
        assert_int_equal(pending_pvcs(), 1);
        assert_int_equal(e2e_audit_count(e, CL, "member.restore"), 0);

        /* killed again once the data is in the volume, before the receiver went */
        free(err);
        err = NULL;
        k = kube_apply_gitcd(e, "kubernetes.restore.after-delivery", &err);
        if (k != 128 + SIGKILL)
                fail_msg("apply was not killed after the delivery (%d): %s", k, err);
        assert_int_equal(count(&PODS, receivers), 1);
        assert_int_equal(pending_pvcs(), 1);
        assert_int_equal(count(&PODS, "app.kubernetes.io/component=member"), 0);
        _cleanup_free_ char *first =
            xasprintf("%s/node/volumes/" NS "/data-" CL "-0/data/member/snap/db", lab->root);
        assert_true(path_exists(first));

        /* the next apply takes that volume as restored and goes on with the others */
        free(err);
        err = NULL;
        k = kube_apply_gitcd(e, NULL, &err);
        if (k != 0)
                fail_msg("gitcd apply exited %d: %s", k, err);

        _cleanup_free_ char *eps = e2e_endpoints(e, CL);
        e2e_check_keys(eps, KEYS);
        assert_true(e2e_assert_voters(e, CL, 3) != src_id);
        assert_int_equal(e2e_audit_count(e, CL, "member.restore"), 3);

        /* nothing of the restore is left */
        assert_int_equal(count(&PODS, receivers), 0);
        assert_int_equal(count(&SECRETS, receivers), 0);
        assert_int_equal(pending_pvcs(), 0);
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *vol =
                    xasprintf("%s/node/volumes/" NS "/data-" CL "-%d", lab->root, i);
                _cleanup_free_ char *stage = path_join(vol, "data.receive");
                _cleanup_free_ char *db = path_join(vol, "data/member/snap/db");
                assert_false(path_exists(stage));
                assert_true(path_exists(db));
        }
        _cleanup_free_ char *home = xasprintf("%s/kubernetes/" NS "/" CL, e->state_dir);
        DIR *d = opendir(home);
        for (struct dirent *de; d && (de = readdir(d));)
                assert_null(strstr(de->d_name, "restore-"));
        if (d)
                closedir(d);
        e2e_free(e);
        e2e_free(src);
}

int main(void)
{
        lab = kube_lab_start(NS, VERSION);
        if (!lab)
                return 77;
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_restore)};
        int failed = cmocka_run_group_tests(tests, NULL, NULL);
        kube_lab_free(lab);
        return failed;
}
