/*
 * spec.bootstrap.restore end to end through the real binary on the local
 * target, with real etcd: a cluster holding many keys is snapshotted with
 * `gitcd snapshot save`, and `gitcd apply` of a new cluster whose
 * spec.bootstrap.restore names that snapshot creates a new cluster (another
 * cluster ID) holding every key and value on every member, each member
 * restored from the snapshot and all started together; a damaged copy of the snapshot is refused
 * with nothing created (no member folder, RestoreRefused in status).
 *
 * etcd 3.5.16: 100,000 keys, three members. etcd 3.4.23 (etcdctl's
 * restore): 10,000 keys, one member (the refusal is not repeated).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define APPLY_TIMEOUT 90
static void write_cluster(e2e *e, const char *name, int replicas, const char *version,
                          const char *snapshot)
{
        char *file = xasprintf("%s.yaml", name);
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: %s\n"
                               "spec:\n"
                               "  replicas: %d\n"
                               "  version: \"%s\"\n"
                               "  storage:\n"
                               "    size: 1Gi\n"
                               "%s%s%s",
                               name, replicas, version,
                               snapshot ? "  bootstrap:\n    restore:\n      source:\n"
                                          "        local:\n          path: "
                                        : "",
                               snapshot ? snapshot : "", snapshot ? "\n" : "");
        e2e_write_file(e, file, text);
        free(text);
        free(file);
}

/* `gitcd snapshot save` into a folder; returns the snapshot file. */
static char *save_snapshot(e2e *e, const char *name)
{
        char *folder = xasprintf("%s/backups", e->root);
        char *id = xasprintf("default/%s", name);
        char *out = NULL;
        const char *args[] = {"snapshot", "save", id, "--to", folder, NULL};
        char *err = NULL;
        int k = e2e_runv(e, &out, &err, args);
        if (k != 0)
                fail_msg("snapshot save: %s%s", out, err);
        free(out);
        free(err);
        out = NULL;
        assert_int_equal(e2e_run(e, &out, "snapshot", "list", id, "-o", "json", NULL), 0);
        json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "result")), "succeeded");
        char *location = xstrdup(json_string_value(json_object_get(j, "location")));
        assert_true(path_exists(location));
        json_decref(j);
        free(out);
        free(id);
        free(folder);
        return location;
}

static char *cluster_id_of(e2e *e, const char *name)
{
        etcd_client *c = e2e_client(e, name);
        etcd_members *l = NULL;
        assert_int_equal(etcd_member_list(c, &l), 0);
        char *id = xasprintf("%016llx", (unsigned long long)l->cluster_id);
        etcd_members_free(l);
        etcd_client_free(c);
        return id;
}

/* A damaged copy of the snapshot: refused, nothing created. */
static void damaged_refused(e2e *e, const char *version, const char *snap)
{
        char *bad = xasprintf("%s/backups/damaged.db", e->root);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(snap, (size_t)1 << 30, &data, &len), 0);
        data[len / 2] ^= 0x5a;
        assert_int_equal(write_file_atomic(bad, data, len, 0600), 0);
        free(data);
        write_cluster(e, "bad", 1, version, bad);
        assert_int_not_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        json_t *st = e2e_status(e, "bad");
        char *text = json_dumps(st, 0);
        assert_non_null(strstr(text, "RestoreRefused"));
        assert_non_null(strstr(text, "is damaged"));
        free(text);
        json_decref(st);
        char *dir = e2e_member_dir(e, "bad", "");
        assert_false(path_exists(dir));
        free(dir);
        assert_int_equal(e2e_audit_count(e, "bad", "restore.refused"), 1);
        assert_int_equal(e2e_audit_count(e, "bad", "member.restore"), 0);
        char *file = xasprintf("%s/bad.yaml", e->source);
        assert_int_equal(unlink(file), 0);
        free(file);

        free(bad);
}

static void restore_case(const char *version, int keys, int replicas, bool refusal)
{
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        /* the snapshot files the specs restore from: on the gitcd host, under root */
        e2e_set_policy(e, "localSnapshotRoots: [%s]", e->root);
        write_cluster(e, "src", 1, version, NULL);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        char *eps = e2e_endpoints(e, "src");
        e2e_fill_keys(eps, keys);
        free(eps);
        char *snap = save_snapshot(e, "src");

        if (refusal)
                damaged_refused(e, version, snap);

        /* The new cluster from the snapshot: every key, another cluster ID. */
        write_cluster(e, "copy", replicas, version, snap);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_true(e2e_wait_ready(e, "copy", replicas, 30));
        char *copy_eps = e2e_endpoints(e, "copy");
        e2e_check_keys(copy_eps, keys);
        free(copy_eps);
        char *a = cluster_id_of(e, "src"), *b = cluster_id_of(e, "copy");
        assert_string_not_equal(a, b);
        free(a);
        free(b);
        /* Every member restored from the snapshot (a static bootstrap, the default). */
        assert_int_equal(e2e_audit_count(e, "copy", "member.restore"), replicas);
        etcd_members *l = e2e_members(e, "copy");
        assert_int_equal(l->n, (size_t)replicas);
        for (size_t i = 0; i < l->n; i++)
                assert_false(l->members[i].is_learner);
        etcd_members_free(l);

        /* Applied again: converged, nothing restored again. */
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(e2e_audit_count(e, "copy", "member.restore"), replicas);

        free(snap);
        e2e_free(e);
}

static void test_restore_35(void **state)
{
        (void)state;
        restore_case("3.5.16", 100000, 3, true);
}

static void test_restore_34(void **state)
{
        (void)state;
        restore_case("3.4.23", 10000, 1, false);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_restore_35),
            cmocka_unit_test(test_restore_34),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
