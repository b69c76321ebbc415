/*
 * spec.bootstrap.restore on the hosts target, end to end: real sshd
 * "machines" on 127.0.0.2-4 with the host agent playing kubelet (the one
 * simulated part: it runs the static Pods' etcd), real etcd 3.5.16 (10,000
 * keys) and 3.4.23 (2,000 keys, restored by etcdctl). A local-target
 * cluster holding the keys is snapshotted with `gitcd
 * snapshot save`; `gitcd apply --target hosts` of a 3-member cluster whose
 * spec.bootstrap.restore names that snapshot is killed right after the
 * first member's data reached its machine, and the next apply restores the
 * others: every member holds every key (read through each member's own
 * endpoint), the cluster ID is new, no member was restored twice, and
 * nothing of the restore is left on the machines or on gitcd's host.
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/e2e/e2e.h"
#include "tests/e2e/hosts-lab.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define MACHINES 3
#define CL       "copy"

/* A 1-member local cluster "src" with keys keys, snapshotted into folder; returns the file. */
static char *source_snapshot(e2e *e, const char *version, int keys, const char *folder)
{
        _cleanup_free_ char *spec =
            xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                      "  name: src\nspec:\n  replicas: 1\n  version: \"%s\"\n",
                      version);
        e2e_write_file(e, "src.yaml", spec);
        assert_int_equal(e2e_apply(e, NULL, 90), 0);
        _cleanup_free_ char *eps = e2e_endpoints(e, "src");
        e2e_fill_keys(eps, keys);
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

/* The cluster ID through endpoints, asserting n voting members. */
static uint64_t cluster_id(const char *endpoints, size_t n)
{
        etcd_client_opts o = {.endpoints = endpoints};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        etcd_members *l = NULL;
        assert_int_equal(etcd_member_list(c, &l), 0);
        assert_int_equal(l->n, n);
        for (size_t i = 0; i < l->n; i++)
                assert_false(l->members[i].is_learner);
        uint64_t id = l->cluster_id;
        etcd_members_free(l);
        etcd_client_free(c);
        return id;
}

static void restore_case(const char *version, int keys)
{
        hosts_lab *L = hosts_lab_start(MACHINES, version);
        assert_non_null(L);
        e2e *src = e2e_new();
        /* in the lab's snapshots/, the folder its policy allows specs to restore from */
        _cleanup_free_ char *snap = source_snapshot(src, version, keys, L->snapshots);
        _cleanup_free_ char *src_eps = e2e_endpoints(src, "src");
        uint64_t src_id = cluster_id(src_eps, 1);

        e2e *e = e2e_new();
        hosts_lab_write_cluster(L, e, CL, version, MACHINES, 0, MACHINES);
        _cleanup_free_ char *file = xasprintf("%s/" CL ".yaml", e->source);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(file, 1 << 20, &text, &len), 0);
        _cleanup_free_ char *with = xasprintf("%s  bootstrap:\n    restore:\n      source:\n"
                                              "        local:\n          path: %s\n",
                                              text, snap);
        e2e_write_file(e, CL ".yaml", with);

        /* killed once the first member's data is on its machine */
        _cleanup_free_ char *out = NULL, *err = NULL;
        int k = hosts_lab_cmd_failpoint(L, e, "restore.after-target", "apply", NULL, &out, &err,
                                        "--timeout", "120s");
        if (k != 128 + SIGKILL)
                fail_msg("apply was not killed at restore.after-target (%d):\n%s%s", k, out, err);
        assert_int_equal(e2e_audit_count(e, CL, "member.restore"), 0);
        hosts_lab_apply_ok(L, e, "120s");

        _cleanup_free_ char *eps = e2e_endpoints(e, CL);
        e2e_check_keys(eps, keys);
        assert_true(cluster_id(eps, MACHINES) != src_id);
        /* each member restored once: the one killed after it was taken as restored */
        int restored = e2e_audit_count(e, CL, "member.restore");
        assert_true(restored >= MACHINES - 1 && restored <= MACHINES);
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
                _cleanup_free_ char *stage = xasprintf("%s/member.restore", data);
                _cleanup_free_ char *member = xasprintf("%s/member/snap/db", data);
                assert_false(path_exists(stage));
                assert_true(path_exists(member));
        }
        _cleanup_free_ char *local = xasprintf("%s/hosts/default/" CL, e->state_dir);
        DIR *d = opendir(local);
        for (struct dirent *de; d && (de = readdir(d));)
                assert_null(strstr(de->d_name, "restore-"));
        if (d)
                closedir(d);

        /* applied again: converged, nothing restored again */
        int before = e2e_audit_count(e, CL, "member.restore");
        hosts_lab_apply_ok(L, e, "60s");
        assert_int_equal(e2e_audit_count(e, CL, "member.restore"), before);
        e2e_free(e);
        e2e_free(src);
        hosts_lab_free(L);
}

static void test_restore_35(void **state)
{
        (void)state;
        restore_case("3.5.16", 10000);
}

/* etcd 3.4: etcdctl restores (3.4 has no etcdutl), and the hosts target drives 3.4 members */
static void test_restore_34(void **state)
{
        (void)state;
        restore_case("3.4.23", 2000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_restore_35),
                                           cmocka_unit_test(test_restore_34)};
        return cmocka_run_group_tests(tests, NULL, NULL);
}
