/*
 * Snapshots end to end through the gitcd binary on the local target, real
 * etcd 3.5.16: a cluster with `spec.snapshots` (every minute, gzip,
 * retention count 2, a local folder) under `gitcd run`:
 *   - scheduled snapshots are taken and recorded; `gitcd snapshot save`
 *     takes one by hand next to the running daemon;
 *   - retention keeps two, and a file gitcd did not write survives;
 *   - a cozystack EtcdSnapshot document beside the cluster is taken once
 *     (trigger declared), and retention never deletes it;
 *   - SnapshotsHealthy is True in `gitcd status`;
 *   - SIGTERM stops the daemon cleanly with no record left running;
 *   - `gitcd snapshot restore` restores a kept snapshot into a new data
 *     directory and prints a spec for it, and refuses a deleted one;
 *   - `gitcd snapshot save --to` of a cluster with client TLS (tls.provider
 *     auto) dials the members with gitcd's own client certificate;
 *   - gitcd killed in the middle of a scheduled snapshot: the record is
 *     closed as failed when it starts again, nothing partial is stored, and
 *     the next slot is taken.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* `gitcd snapshot list -o json default/snapc`, one JSON object per line, as an array. */
static json_t *snapshot_records(e2e *e)
{
        char *out = NULL;
        const char *args[] = {"snapshot", "list", "-o", "json", "default/snapc", NULL};
        assert_int_equal(e2e_runv(e, &out, NULL, args), 0);
        json_t *all = json_array();
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_t *j = json_loads(line, 0, NULL);
                assert_non_null(j);
                json_array_append_new(all, j);
        }
        free(out);
        return all;
}

static size_t count(json_t *records, const char *trigger, const char *result)
{
        size_t n = 0, i;
        json_t *r;
        json_array_foreach(records, i, r)
        {
                if ((!trigger ||
                     streq(json_string_value(json_object_get(r, "trigger")), trigger)) &&
                    streq(json_string_value(json_object_get(r, "result")), result))
                        n++;
        }
        return n;
}

static size_t files_in(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

static const char *condition(json_t *status, const char *type)
{
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(status, "conditions"), i, c)
        {
                if (streq(json_string_value(json_object_get(c, "type")), type))
                        return json_string_value(json_object_get(c, "status"));
        }
        return NULL;
}

/* A kept snapshot restored into a new folder, and as a spec; a deleted one refused. */
static void restore_kept_and_deleted(e2e *e, json_t *recs)
{
        char kept_id[32] = "", deleted_id[32] = "";
        size_t i;
        json_t *r;
        json_array_foreach(recs, i, r)
        {
                if (!streq(json_string_value(json_object_get(r, "result")), "succeeded") ||
                    streq(json_string_value(json_object_get(r, "trigger")), "declared"))
                        continue;
                char *id = kept_id;
                if (json_is_string(json_object_get(r, "deleted")))
                        id = deleted_id;
                snprintf(id, sizeof(kept_id), "%lld",
                         (long long)json_integer_value(json_object_get(r, "id")));
        }
        assert_true(kept_id[0] && deleted_id[0]);
        char *into = path_join(e->root, "restored");
        const char *restore[] = {"snapshot", "restore", kept_id, "--into", into, NULL};
        char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, restore);
        if (k != 0)
                fail_msg("snapshot restore: exit %d: %s", k, err);
        assert_non_null(strstr(out, "restored "));
        char *member = path_join(into, "member");
        assert_true(path_is_dir(member));
        free(member);
        free(out);
        free(err);
        const char *spec[] = {"snapshot", "restore", kept_id, "--print-spec", NULL};
        out = err = NULL;
        assert_int_equal(e2e_runv(e, &out, &err, spec), 0);
        assert_non_null(strstr(out, "  bootstrap:\n    restore:\n      source:\n        local:\n"));
        free(out);
        free(err);
        const char *gone[] = {"snapshot", "restore", deleted_id, "--print-spec", NULL};
        out = err = NULL;
        assert_int_equal(e2e_runv(e, &out, &err, gone), 1);
        assert_non_null(strstr(err, "deleted by retention"));
        free(out);
        free(err);
        free(into);
}

static void test_scheduled_snapshots_under_run(void **unused)
{
        (void)unused;
        e2e *e = e2e_new();
        e2e_set_policy(e, "localSnapshotRoots: [%s]", e->root);
        char *backups = path_join(e->root, "backups");
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata:\n  name: snapc\nspec:\n  replicas: 3\n"
                               "  version: \"3.5.16\"\n"
                               "  snapshots:\n    schedule: \"* * * * *\"\n"
                               "    compression: gzip\n"
                               "    retention:\n      count: 2\n"
                               "    destination:\n      local:\n        path: %s\n",
                               backups);
        e2e_write_file(e, "snapc.yaml", text);
        free(text);
        e2e_write_file(e, "snapc-once.yaml",
                       "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdSnapshot\n"
                       "metadata:\n  name: before-migration\nspec:\n  clusterRef:\n"
                       "    name: snapc\n");
        char *folder = path_join(backups, "default/snapc");
        char *foreign = path_join(folder, "made-by-hand.db");
        assert_int_equal(mkdir_p(folder, 0700), 0);
        assert_int_equal(write_file_atomic(foreign, "keep me", 7, 0600), 0);

        pid_t d = e2e_start_daemon(e, NULL);
        assert_true(e2e_wait_ready(e, "snapc", 3, 120));
        etcd_client *c = e2e_client(e, "snapc");
        for (int i = 0; i < 50; i++) {
                char key[16];
                snprintf(key, sizeof(key), "k%d", i);
                assert_int_equal(etcd_put(c, key, "v", 1, NULL), 0);
        }
        etcd_client_free(c);

        /* by hand, next to the daemon */
        char *out = NULL, *err = NULL;
        const char *save[] = {"snapshot", "save", "default/snapc", NULL};
        int k = e2e_runv(e, &out, &err, save);
        if (k != 0)
                fail_msg("snapshot save: exit %d: %s", k, err);
        assert_non_null(strstr(out, "stored at "));
        free(out);
        free(err);

        /* two scheduled snapshots (the first at once, the next at a minute boundary) */
        json_t *recs = NULL;
        for (int64_t t0 = now_mono_ms(); now_mono_ms() - t0 < 200 * 1000;) {
                json_decref(recs);
                recs = snapshot_records(e);
                if (count(recs, "schedule", "succeeded") >= 2)
                        break;
                usleep(500 * 1000);
        }
        if (count(recs, "schedule", "succeeded") < 2) {
                char *log = e2e_read_log(e, "daemon.log");
                fail_msg("no two scheduled snapshots:\n%s", log);
        }
        assert_int_equal(count(recs, NULL, "failed"), 0);
        assert_int_equal(count(recs, "declared", "succeeded"), 1); /* once, over many ticks */
        json_decref(recs);

        /* SnapshotsHealthy, set by the reconciler's passes */
        bool healthy = false;
        for (int64_t t0 = now_mono_ms(); !healthy && now_mono_ms() - t0 < 30 * 1000;) {
                json_t *st = e2e_status(e, "snapc");
                const char *s = condition(st, "SnapshotsHealthy");
                healthy = s && streq(s, "True");
                json_decref(st);
                if (!healthy)
                        usleep(200 * 1000);
        }
        assert_true(healthy);

        assert_int_equal(kill(d, SIGTERM), 0);
        int status = 0;
        assert_int_equal(waitpid(d, &status, 0), d);
        harness_untrack_pid(d);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        /* retention: at most two snapshots kept (three or more were taken), the foreign file too */
        recs = snapshot_records(e);
        assert_int_equal(count(recs, NULL, "running"), 0);
        size_t kept = 0, i;
        json_t *r;
        json_array_foreach(recs, i, r)
        {
                if (!streq(json_string_value(json_object_get(r, "result")), "succeeded"))
                        continue;
                bool gone = json_is_string(json_object_get(r, "deleted"));
                const char *loc = json_string_value(json_object_get(r, "location"));
                assert_true(path_exists(loc) == !gone);
                assert_non_null(strstr(loc, ".db.gz"));
                if (streq(json_string_value(json_object_get(r, "trigger")), "declared")) {
                        assert_false(gone);
                        assert_string_equal(json_string_value(json_object_get(r, "declared_by")),
                                            "EtcdSnapshot default/before-migration");
                        continue;
                }
                if (!gone)
                        kept++;
        }
        assert_true(json_array_size(recs) >= 4);
        assert_true(kept <= 2 && kept >= 1);
        assert_true(path_exists(foreign));
        assert_int_equal(files_in(folder), kept + 2); /* and the declared one */
        assert_true(e2e_audit_count(e, "snapc", "snapshot.save") >= 3);

        /* restore: a kept snapshot into a new folder, and as a spec; a deleted one refused */
        restore_kept_and_deleted(e, recs);
        json_decref(recs);

        free(foreign);
        free(folder);
        free(backups);
        e2e_free(e);
}

static void test_killed_mid_snapshot(void **unused)
{
        (void)unused;
        e2e *e = e2e_new();
        e2e_set_policy(e, "localSnapshotRoots: [%s]", e->root);
        char *backups = path_join(e->root, "backups");
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                               "metadata:\n  name: snapc\nspec:\n  replicas: 1\n"
                               "  version: \"3.5.16\"\n"
                               "  snapshots:\n    schedule: \"* * * * *\"\n"
                               "    destination:\n      local:\n        path: %s\n",
                               backups);
        e2e_write_file(e, "snapc.yaml", text);
        free(text);
        setenv("GITCD_FAILPOINT", "snapshot.streaming", 1);
        pid_t d = e2e_start_daemon(e, NULL);
        unsetenv("GITCD_FAILPOINT");
        int status = 0;
        assert_int_equal(waitpid(d, &status, 0), d); /* killed by its failpoint */
        harness_untrack_pid(d);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        json_t *recs = snapshot_records(e);
        assert_int_equal(json_array_size(recs), 1);
        assert_int_equal(count(recs, "schedule", "running"), 1);
        json_decref(recs);
        char *tmp = path_join(e->state_dir, "snapshots-tmp");
        assert_int_equal(files_in(tmp), 1); /* the partial stream */

        d = e2e_start_daemon(e, NULL);
        for (int64_t t0 = now_mono_ms(); now_mono_ms() - t0 < 150 * 1000;) {
                recs = snapshot_records(e);
                if (count(recs, "schedule", "succeeded") >= 1)
                        break;
                json_decref(recs);
                recs = NULL;
                usleep(500 * 1000);
        }
        if (!recs) {
                char *log = e2e_read_log(e, "daemon.log");
                fail_msg("no scheduled snapshot after the restart:\n%s", log);
        }
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(waitpid(d, &status, 0), d);
        harness_untrack_pid(d);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        /* newest first: the later slot succeeded; the killed one failed, nothing of it stored */
        size_t n = json_array_size(recs);
        json_t *first = json_array_get(recs, n - 1);
        assert_string_equal(json_string_value(json_object_get(first, "result")), "failed");
        assert_string_equal(json_string_value(json_object_get(first, "error")),
                            "gitcd stopped while it ran");
        assert_true(json_is_null(json_object_get(first, "location")));
        assert_int_equal(count(recs, NULL, "running"), 0);
        char *folder = path_join(backups, "default/snapc");
        assert_int_equal(files_in(folder), count(recs, NULL, "succeeded"));
        assert_int_equal(files_in(tmp), 0);
        json_decref(recs);
        free(folder);
        free(tmp);
        free(backups);
        e2e_free(e);
}

static void test_save_with_client_tls(void **unused)
{
        (void)unused;
        e2e *e = e2e_new();
        e2e_write_file(e, "tls.yaml",
                       "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                       "metadata:\n  name: tlsc\nspec:\n  replicas: 1\n"
                       "  version: \"3.5.16\"\n  tls:\n    provider: auto\n");
        assert_int_equal(e2e_apply(e, NULL, 120), 0);
        json_t *st = e2e_status(e, "tlsc");
        const char *url = json_string_value(
            json_object_get(json_array_get(json_object_get(st, "members"), 0), "client_url"));
        assert_non_null(url);
        assert_true(strneq(url, "https://", 8));
        json_decref(st);
        char *to = path_join(e->root, "copies");
        const char *save[] = {"snapshot", "save", "default/tlsc", "--to", to, NULL};
        char *out = NULL, *err = NULL;
        int k = e2e_runv(e, &out, &err, save);
        if (k != 0)
                fail_msg("snapshot save: exit %d: %s", k, err);
        char *folder = path_join(to, "default/tlsc");
        assert_int_equal(files_in(folder), 1);
        free(folder);
        free(out);
        free(err);
        free(to);
        e2e_free(e);
}

int main(void)
{
        if (!e2e_have_version("3.5.16")) {
                fprintf(stderr, "etcd 3.5.16 not installed; skipping\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_scheduled_snapshots_under_run),
            cmocka_unit_test(test_save_with_client_tls),
            cmocka_unit_test(test_killed_mid_snapshot),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
