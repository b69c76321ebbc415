/*
 * `gitcd plan` run as users run it (the real binary) over real Git
 * repositories built with the git command and a state database filled
 * through the state API from an earlier revision: create, change, revert,
 * delete and rename clusters across commits; text and JSON output; a plain
 * directory; rejected transitions and documents with their locations;
 * duplicates; secrets never shown; exit statuses; no state at all.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/plan/plan-fixture.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

static char *repo;
static char *db;

static char *cluster_yaml(const char *name, int replicas, const char *version, const char *extra)
{
        return xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                         "kind: EtcdCluster\n"
                         "metadata:\n"
                         "  name: %s\n"
                         "%s"
                         "spec:\n"
                         "  replicas: %d\n"
                         "  version: \"%s\"\n",
                         name, extra ? extra : "", replicas, version);
}

static void write_cluster(const char *file, const char *name, int replicas, const char *version,
                          const char *extra)
{
        _cleanup_free_ char *y = cluster_yaml(name, replicas, version, extra);
        pf_write(repo, file, y);
}

static int setup(void **state)
{
        (void)state;
        pf_init();
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        pf_cleanup();
        return 0;
}

/* Each test starts with a fresh repository and no state database. */
static int test_setup(void **state)
{
        (void)state;
        free(repo);
        free(db);
        static int n;
        _cleanup_free_ char *r = xasprintf("repo-%d", ++n);
        _cleanup_free_ char *d = xasprintf("state-%d/state.db", n);
        repo = pf_path(r);
        db = pf_path(d);
        assert_int_equal(pf_sh("git init -q -b main '%s'", repo), 0);
        return 0;
}

static int test_teardown(void **state)
{
        (void)state;
        free(repo);
        free(db);
        repo = db = NULL;
        return 0;
}

static void assert_contains(const char *hay, const char *needle)
{
        if (!strstr(hay, needle))
                fail_msg("expected to find\n  %s\nin:\n%s", needle, hay);
}

static void assert_lacks(const char *hay, const char *needle)
{
        if (strstr(hay, needle))
                fail_msg("did not expect\n  %s\nin:\n%s", needle, hay);
}

static json_t *find_cluster(json_t *plan, const char *name)
{
        json_t *cs = json_object_get(plan, "clusters");
        size_t i;
        json_t *c;
        json_array_foreach(cs, i, c)
        {
                if (streq(json_string_value(json_object_get(c, "name")), name))
                        return c;
        }
        fail_msg("cluster %s not in the plan", name);
        return NULL;
}

static const char *action_of(json_t *plan, const char *name)
{
        return json_string_value(json_object_get(find_cluster(plan, name), "action"));
}

static json_t *plan_json(int want_status, const char *extra)
{
        _cleanup_free_ char *out = NULL, *err = NULL;
        int st = pf_plan(&out, &err, "--source '%s' --ref main --state '%s' -o json %s", repo, db,
                         extra ? extra : "");
        if (st != want_status)
                fail_msg("exit %d, wanted %d; stderr: %s\nstdout: %s", st, want_status, err, out);
        json_error_t e;
        json_t *j = json_loads(out, 0, &e);
        if (!j)
                fail_msg("not JSON (%s): %s", e.text, out);
        return j;
}

/* A first revision with no state: everything is a create; statuses 0 / 2. */
static void test_create_without_state(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.4.23", NULL);
        write_cluster("clusters/b.yaml", "b", 1, "3.5.16", NULL);
        _cleanup_free_ char *commit = pf_commit(repo, "two clusters");

        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s'", repo, db), 0);
        assert_contains(out, "nothing applied yet");
        assert_contains(out, "+ create default/a");
        assert_contains(out, "+ create default/b");
        assert_contains(out, "start all 3 members at once on etcd 3.4.23 with a static initial "
                             "cluster");
        assert_contains(out, "Plan: 2 to create, 0 to change, 0 to delete, 0 rejected.\n");
        _cleanup_free_ char *shortid = xstrndup(commit, 12);
        assert_contains(out, shortid);
        assert_contains(out, "Ada Operator <ada@example.com>: two clusters");
        assert_false(path_exists(db)); /* nothing was created */

        assert_int_equal(pf_plan(NULL, NULL,
                                 "--source '%s' --ref main --state '%s' "
                                 "--detailed-exitcode",
                                 repo, db),
                         2);
        json_t *j = plan_json(2, "--detailed-exitcode");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(j, "revision"), "commit")), commit);
        assert_string_equal(action_of(j, "default/a"), "create");
        json_t *sum = json_object_get(j, "summary");
        assert_int_equal(json_integer_value(json_object_get(sum, "create")), 2);
        assert_true(json_is_false(json_object_get(json_object_get(j, "state"), "exists")));
        json_decref(j);

        /* The temporary mirror is gone. */
        assert_int_equal(pf_sh("test -z \"$(ls -A tmp)\""), 0);
}

/* A change: the field-by-field diff, sorted by path, with its steps. */
static void test_change_and_revert(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.4.23", NULL);
        write_cluster("clusters/b.yaml", "b", 1, "3.5.16", NULL);
        write_cluster("clusters/c.yaml", "c", 1, "3.5.16", NULL);
        _cleanup_free_ char *first = pf_commit(repo, "first");
        pf_state_from_revision(db, repo, first, NULL, true);

        write_cluster("clusters/a.yaml", "a", 5, "3.5.16", "  labels:\n    team: db\n");
        _cleanup_free_ char *second = pf_commit(repo, "grow a and upgrade it");

        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s'", repo, db), 0);
        assert_contains(out, "~ update default/a  (clusters/a.yaml:1)\n"
                             "    metadata.labels.team: (none) → db\n"
                             "    spec.replicas: 3 → 5\n"
                             "    spec.version: 3.4.23 → 3.5.16\n"
                             "    Steps:\n"
                             "      1. add 2 learners one at a time, each promoted to voter once "
                             "it has started\n"
                             "      2. restart 3 members one at a time on 3.5.16, followers "
                             "first, the leader last\n"
                             "      3. after each: wait until it serves 3.5.16, has caught up "
                             "with the leader's raft index and the cluster has stayed healthy "
                             "for the settle time;");
        assert_lacks(out, "default/b"); /* unchanged: listed only with -v */
        assert_contains(out, "Plan: 0 to create, 1 to change, 0 to delete, 0 rejected.");
        free(out);
        out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s' -v", repo, db),
                         0);
        assert_contains(out, "= unchanged default/b");

        json_t *j = plan_json(2, "--detailed-exitcode");
        json_t *a = find_cluster(j, "default/a");
        json_t *ch = json_object_get(a, "changes");
        assert_int_equal(json_array_size(ch), 3);
        assert_string_equal(json_string_value(json_object_get(json_array_get(ch, 1), "path")),
                            "spec.replicas");
        assert_int_equal(json_integer_value(json_object_get(json_array_get(ch, 1), "from")), 3);
        assert_int_equal(json_integer_value(json_object_get(json_array_get(ch, 1), "to")), 5);
        assert_true(json_is_null(json_object_get(json_array_get(ch, 0), "from")));
        assert_int_equal(json_array_size(json_object_get(a, "steps")), 3);
        assert_string_equal(action_of(j, "default/b"), "unchanged");
        json_decref(j);

        /* Applied; then the change is reverted and c deleted: 3.5 → 3.4 is refused. */
        pf_state_from_revision(db, repo, second, NULL, true);
        assert_int_equal(pf_sh("cd '%s' && git revert --no-edit HEAD >/dev/null && git rm -q "
                               "clusters/c.yaml && git commit -q -m 'drop c'",
                               repo),
                         0);
        free(out);
        out = NULL;
        assert_int_equal(pf_plan(&out, NULL,
                                 "--source '%s' --ref main --state '%s' --detailed-exitcode", repo,
                                 db),
                         1);
        assert_contains(out, "! rejected default/a\n");
        assert_contains(out, "    spec.replicas: 5 → 3\n");
        assert_contains(out, "clusters/a.yaml:7:12: error: spec.version: 3.5.16 → 3.4.23 is a "
                             "downgrade etcd does not support");
        assert_contains(out, "the last accepted spec stays in force");
        assert_contains(out, "- delete default/c\n"
                             "    orphaned: members keep running (use --prune to stop them; data "
                             "is kept)\n");
        assert_contains(out, "Plan: 0 to create, 0 to change, 1 to delete, 1 rejected.");
}

/* Scaling down, pausing, resuming, pruning and renames. */
static void test_scale_pause_prune_rename(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 5, "3.5.16", NULL);
        write_cluster("clusters/b.yaml", "b", 3, "3.5.16", NULL);
        write_cluster("clusters/p.yaml", "p", 0, "3.5.16", NULL);
        write_cluster("clusters/old.yaml", "old", 3, "3.5.16", NULL);
        _cleanup_free_ char *first = pf_commit(repo, "first");
        pf_state_from_revision(db, repo, first, NULL, true);

        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        write_cluster("clusters/b.yaml", "b", 0, "3.5.16", NULL);
        write_cluster("clusters/p.yaml", "p", 3, "3.5.16", NULL);
        assert_int_equal(pf_sh("cd '%s' && git rm -q clusters/old.yaml", repo), 0);
        _cleanup_free_ char *second = pf_commit(repo, "reshape");
        _cleanup_free_ char *out = NULL;
        assert_int_equal(
            pf_plan(&out, NULL, "--source '%s' --ref main --state '%s' --prune", repo, db), 0);
        assert_contains(out, "remove 2 members one at a time, newest first, moving leadership "
                             "away first");
        assert_contains(out, "~ update default/b");
        assert_contains(out, "scale down to 1 member (remove 2, newest first, moving leadership "
                             "away first), then stop it; data kept");
        assert_contains(out, "resume: start the stopped member again with its data");
        assert_contains(out, "- delete default/old\n    Steps:\n      1. stop its 3 members; data "
                             "is kept\n");
        pf_state_from_revision(db, repo, second, NULL, true);
        pf_state_set_phase(db, "default/old", "Orphaned");

        /* A file renamed: the same cluster, nothing to do. */
        assert_int_equal(pf_sh("cd '%s' && git mv clusters/a.yaml clusters/alpha.yaml && git "
                               "commit -q -m rename-file",
                               repo),
                         0);
        free(out);
        out = NULL;
        assert_int_equal(pf_plan(&out, NULL,
                                 "--source '%s' --ref main --state '%s' --detailed-exitcode", repo,
                                 db),
                         0);
        assert_contains(out, "No changes: nothing to create, change or delete.");
        /* Reported as orphaned by the apply of the previous revision: nothing more to do. */
        assert_contains(out, "= unchanged default/old\n    orphaned: members keep running");

        /* A cluster renamed: a new cluster and an orphan. */
        write_cluster("clusters/alpha.yaml", "alpha", 3, "3.5.16", NULL);
        _cleanup_free_ char *third = pf_commit(repo, "rename a to alpha");
        json_t *j = plan_json(2, "--detailed-exitcode");
        assert_string_equal(action_of(j, "default/alpha"), "create");
        assert_string_equal(action_of(j, "default/a"), "delete");
        json_decref(j);
}

/* Invalid documents and duplicates are rejected; the rest is still planned. */
static void test_rejections(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        write_cluster("clusters/gone.yaml", "gone", 3, "3.5.16", NULL);
        _cleanup_free_ char *first = pf_commit(repo, "first");
        pf_state_from_revision(db, repo, first, NULL, true);

        assert_int_equal(pf_sh("cd '%s' && git rm -q clusters/gone.yaml", repo), 0);
        write_cluster("clusters/a.yaml", "a", 5, "3.5.16", NULL);
        pf_write(repo, "clusters/bad.yaml",
                 "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: bad\n"
                 "spec:\n  replicas: many\n");
        write_cluster("clusters/d1.yaml", "dup", 1, "3.5.16", NULL);
        write_cluster("clusters/d2.yaml", "dup", 3, "3.5.16", NULL);
        pf_write(repo, "clusters/broken.yaml", "apiVersion: [unclosed\n");
        /* A valid document before a syntax error in the same file is still taken in. */
        _cleanup_free_ char *ok = cluster_yaml("m-ok", 1, "3.5.16", NULL);
        _cleanup_free_ char *multi = xasprintf("%s---\nkind: EtcdCluster\nspec: [1\n", ok);
        pf_write(repo, "clusters/multi.yaml", multi);
        _cleanup_free_ char *second = pf_commit(repo, "mixed");

        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL,
                                 "--source '%s' --ref main --state '%s' --detailed-exitcode", repo,
                                 db),
                         1);
        assert_contains(out, "~ update default/a");
        assert_contains(out, "! rejected default/bad\n    clusters/bad.yaml:6:13: error:");
        assert_contains(out, "! rejected default/dup\n");
        assert_contains(out, "cluster default/dup is defined twice");
        assert_contains(out, "! rejected clusters/broken.yaml\n    clusters/broken.yaml:");
        assert_contains(out, "+ create default/m-ok  (clusters/multi.yaml:1)\n    Steps:");
        assert_contains(out, "! rejected clusters/multi.yaml\n    clusters/multi.yaml:");
        /* A revision with errors removes nothing. */
        assert_contains(out, "= unchanged default/gone");
        assert_lacks(out, "delete default/gone");
        assert_contains(out, "Plan: 1 to create, 1 to change, 0 to delete, 4 rejected.");

        json_t *j = plan_json(1, NULL);
        json_t *bad = find_cluster(j, "default/bad");
        json_t *d = json_array_get(json_object_get(bad, "diagnostics"), 0);
        assert_string_equal(json_string_value(json_object_get(d, "file")), "clusters/bad.yaml");
        assert_int_equal(json_integer_value(json_object_get(d, "line")), 6);
        assert_string_equal(json_string_value(json_object_get(d, "severity")), "error");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(j, "summary"), "rejected")), 4);
        json_decref(j);
}

/* Secret-looking values never appear; an accepted spec not yet latched is noted. */
static void test_secrets_and_in_progress(void **state)
{
        (void)state;
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        write_cluster("clusters/b.yaml", "b", 3, "3.5.16", NULL);
        _cleanup_free_ char *first = pf_commit(repo, "first");
        pf_state_from_revision(db, repo, first, NULL, false);

        write_cluster("clusters/a.yaml", "a", 3, "3.5.16",
                      "  labels:\n    api-token: s3cr3t-value\n    team: db\n"
                      "    app.kubernetes.io/part-of: shop\n");
        _cleanup_free_ char *second = pf_commit(repo, "label");
        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s'", repo, db), 0);
        assert_contains(out, "    metadata.labels.api-token: (none) → (redacted)\n");
        assert_contains(out, "    metadata.labels.team: (none) → db\n");
        assert_contains(out, "    metadata.labels[\"app.kubernetes.io/part-of\"]: (none) → shop\n");
        assert_contains(out, "no member restarts");
        assert_lacks(out, "s3cr3t");
        /* b is unchanged but still being applied: listed with the note. */
        assert_contains(out, "= unchanged default/b");
        assert_contains(out, "still being applied");

        json_t *j = plan_json(0, NULL);
        _cleanup_free_ char *dump = json_dumps(j, 0);
        assert_lacks(dump, "s3cr3t");
        json_decref(j);
}

/* A plain directory; the working tree of a checkout; no state at all. */
static void test_plain_directory(void **state)
{
        (void)state;
        _cleanup_free_ char *dir = pf_path("plain");
        _cleanup_free_ char *y = cluster_yaml("d", 3, "3.5.16", NULL);
        pf_write(dir, "x/d.yaml", y);
        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL,
                                 "--source '%s' --path x --state '%s' "
                                 "--detailed-exitcode",
                                 dir, db),
                         2);
        assert_contains(out, "Directory ");
        assert_contains(out, "+ create default/d  (x/d.yaml:1)");
        assert_lacks(out, "\033[");

        /* Colours on a terminal (script(1) provides one), unless NO_COLOR is set. */
        if (pf_sh("command -v script >/dev/null") == 0) {
                _cleanup_free_ char *tty = pf_path("tty.out");
                _cleanup_free_ char *cmd =
                    xasprintf("script -qec \"'%s' plan --source '%s' --path x --state '%s'\" "
                              "/dev/null > '%s'",
                              getenv("GITCD_BIN"), dir, db, tty);
                assert_int_equal(pf_sh("env -u NO_COLOR %s", cmd), 0);
                char *data = NULL;
                size_t len = 0;
                assert_int_equal(read_file(tty, 1u << 20, &data, &len), 0);
                assert_contains(data, "\033[32m+ create default/d\033[0m");
                free(data);
                assert_int_equal(pf_sh("NO_COLOR=1 %s", cmd), 0);
                assert_int_equal(read_file(tty, 1u << 20, &data, &len), 0);
                assert_lacks(data, "\033[");
                free(data);
        }

        /* In a checkout, --plain-directory reads the files as they are on disk. */
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        _cleanup_free_ char *first = pf_commit(repo, "first");
        write_cluster("clusters/uncommitted.yaml", "wip", 1, "3.5.16", NULL);
        free(out);
        out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --state '%s'", repo, db), 0);
        assert_lacks(out, "default/wip");
        free(out);
        out = NULL;
        assert_int_equal(
            pf_plan(&out, NULL, "--source '%s' --plain-directory --state '%s'", repo, db), 0);
        assert_contains(out, "+ create default/wip");
}

/* A native cluster (name, 3 members, 3.5.16) with spec_extra appended under spec. */
static void write_with_spec(const char *file, const char *name, const char *spec_extra)
{
        _cleanup_free_ char *base = cluster_yaml(name, 3, "3.5.16", NULL);
        _cleanup_free_ char *y = xasprintf("%s%s", base, spec_extra);
        pf_write(repo, file, y);
}

/*
 * Fields gitcd reads but does not act on yet are refused, in the native and
 * cozystack dialects, at file:line:col; a new cluster "is not created", an
 * existing one "is not changed" (and not deleted); a field written off is
 * accepted; the other clusters are still planned; validate only warns.
 */
static void test_unsupported_fields(void **state)
{
        (void)state;
        write_cluster("clusters/old.yaml", "old", 3, "3.5.16", NULL);
        _cleanup_free_ char *first = pf_commit(repo, "first");
        pf_state_from_revision(db, repo, first, NULL, true);

        /* cluster_yaml ends at line 7: the extra spec fields start at line 8. */
        write_with_spec(
            "clusters/old.yaml", "old",
            "  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: r\n");
        write_with_spec("clusters/snap.yaml", "snap",
                        "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n"
                        "      pvc:\n        claimName: backups\n");
        write_with_spec("clusters/restore.yaml", "restore",
                        "  bootstrap:\n    restore:\n      source:\n        local:\n"
                        "          path: /var/lib/gitcd/snapshots/x.db\n");
        write_with_spec("clusters/off.yaml", "off",
                        "  auth:\n    enabled: false\n  snapshots:\n    enabled: false\n"
                        "  defrag:\n    enabled: false\n");
        pf_write(repo, "clusters/cozy.yaml",
                 "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                 "kind: EtcdCluster\n"
                 "metadata:\n"
                 "  name: cozy-auth\n"
                 "spec:\n"
                 "  replicas: 3\n"
                 "  auth:\n"
                 "    enabled: true\n"
                 "    rootCredentialsSecretRef:\n"
                 "      name: r\n"
                 "---\n"
                 "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                 "kind: EtcdCluster\n"
                 "metadata:\n"
                 "  name: cozy-restore\n"
                 "spec:\n"
                 "  replicas: 3\n"
                 "  bootstrap:\n"
                 "    restore:\n"
                 "      source:\n"
                 "        pvc:\n"
                 "          claimName: backups\n"
                 "          subPath: snap.db\n");
        write_cluster("clusters/plain.yaml", "plain", 3, "3.5.16", NULL);
        _cleanup_free_ char *second = pf_commit(repo, "unsupported fields");

        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s'", repo, db), 1);
        /* rootCredentialsSecretRef is supported: auth with the root password from a Secret */
        assert_lacks(out, "! rejected default/old");
        /* a PVC destination needs the Kubernetes target's writer Pods */
        assert_contains(out, "! rejected default/snap\n    clusters/snap.yaml:11:7: error: "
                             "spec.snapshots.destination.pvc (snapshots stored in a "
                             "PersistentVolumeClaim) needs --target kubernetes");
        /* spec.bootstrap.restore is supported: those clusters are planned for creation. */
        assert_contains(out, "+ create default/restore  (clusters/restore.yaml:1)");
        assert_contains(out, "check the snapshot of spec.bootstrap.restore");
        assert_contains(out, "restore the snapshot into each of the");
        assert_contains(out, "+ create default/cozy-auth");
        assert_contains(out, "+ create default/cozy-restore");
        /* a general cluster keeps the snapshot's revision; cozystack's (a Kubernetes control
         * plane's datastore) bumps it by default */
        assert_contains(out, "keep the snapshot's revision (no bump");
        assert_contains(out, "raise the restored revision by a bump sized from the write rate "
                             "when it runs (auto: at least 1000000000)");
        assert_contains(out, "+ create default/off  (clusters/off.yaml:1)");
        assert_contains(out, "+ create default/plain  (clusters/plain.yaml:1)");
        assert_lacks(out, "delete default/old");
        assert_contains(out, "~ update default/old");
        assert_contains(out, "Plan: 5 to create, 1 to change, 0 to delete, 1 rejected.");

        json_t *j = plan_json(1, NULL);
        assert_string_equal(action_of(j, "default/snap"), "rejected");
        assert_string_equal(action_of(j, "default/plain"), "create");
        json_decref(j);

        /* validate reads the same files as valid; a PVC destination is not a warning */
        _cleanup_free_ char *vout = NULL, *verr = NULL;
        assert_int_equal(pf_gitcd(&vout, &verr, "validate '%s/clusters'", repo), 0);
        assert_lacks(vout, "warning: spec.snapshots.destination.pvc");
        assert_lacks(vout, "warning: spec.auth.rootCredentialsSecretRef");
        assert_lacks(vout, "warning: spec.bootstrap.restore");
        assert_lacks(vout, "off.yaml");
        /* two warnings that auth without client TLS is clear text */
        assert_contains(verr, "7 clusters valid, 2 warnings");
}

/* Bad usage and unreadable inputs: clear messages, nothing changed. */
static void test_usage_and_errors(void **state)
{
        (void)state;
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--help"), 0);
        assert_contains(out, "--detailed-exitcode");
        assert_int_equal(pf_plan(NULL, &err, "--state x.db"), 64);
        assert_contains(err, "--source is required");
        free(err);
        err = NULL;
        assert_int_equal(pf_plan(NULL, &err, "--source . -o yaml"), 64);
        assert_contains(err, "-o takes text or json");
        free(err);
        err = NULL;
        assert_int_equal(pf_plan(NULL, &err, "--source '%s' --ref nosuch --state '%s'", repo, db),
                         1);
        assert_contains(err, "nosuch");

        /* A file that is not a gitcd database is an error, and is left as it was. */
        _cleanup_free_ char *junk = pf_path("junk.db");
        assert_int_equal(pf_sh("printf 'not a database' > '%s'", junk), 0);
        write_cluster("clusters/a.yaml", "a", 3, "3.5.16", NULL);
        _cleanup_free_ char *c = pf_commit(repo, "first");
        free(err);
        err = NULL;
        assert_int_equal(pf_plan(NULL, &err, "--source '%s' --state '%s'", repo, junk), 1);
        assert_contains(err, "junk.db");
        assert_int_equal(pf_sh("test \"$(cat '%s')\" = 'not a database'", junk), 0);
}

/* A new tls.auto.rotateCA token: the plan says the CA rotation starts at phase 1 of 3. */
static void test_ca_rotation(void **state)
{
        (void)state;
        const char *tls = "  tls:\n    provider: auto\n    client:\n      enabled: true\n";
        _cleanup_free_ char *before = xasprintf("%s", tls);
        _cleanup_free_ char *y1 = cluster_yaml("a", 3, "3.5.16", NULL);
        _cleanup_free_ char *t1 = xasprintf("%s%s", y1, before);
        pf_write(repo, "clusters/a.yaml", t1);
        _cleanup_free_ char *first = pf_commit(repo, "first");
        pf_state_from_revision(db, repo, first, NULL, true);

        _cleanup_free_ char *t2 =
            xasprintf("%s%s    auto:\n      rotateCA: \"2026-11\"\n", y1, tls);
        pf_write(repo, "clusters/a.yaml", t2);
        _cleanup_free_ char *second = pf_commit(repo, "rotate the CA");
        (void)second;
        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s'", repo, db), 0);
        assert_contains(out, "spec.tls.auto.rotateCA: (none) → 2026-11\n");
        assert_contains(out, "1. rotate the cluster CA (rotateCA 2026-11), starting at phase 1 of "
                             "3: create a new CA and restart 3 members one at a time to trust "
                             "the old and the new CA\n");
        assert_contains(out, "3. phase 3 of 3: delete the old CA and its key");
        assert_lacks(out, "no member restarts");
}

/* TLS switched on, then off again: the plan lists the switch's steps. */
static void test_tls_switch(void **state)
{
        (void)state;
        const char *tls = "  tls:\n    provider: auto\n";
        _cleanup_free_ char *y1 = cluster_yaml("a", 3, "3.5.16", NULL);
        pf_write(repo, "clusters/a.yaml", y1);
        _cleanup_free_ char *first = pf_commit(repo, "plain");
        pf_state_from_revision(db, repo, first, NULL, true);

        _cleanup_free_ char *t2 = xasprintf("%s%s", y1, tls);
        pf_write(repo, "clusters/a.yaml", t2);
        _cleanup_free_ char *second = pf_commit(repo, "TLS on");
        _cleanup_free_ char *out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s'", repo, db), 0);
        assert_contains(out, "1. switch TLS on (client and peer): restart 3 members one at a time "
                             "onto their certificates");
        assert_contains(out, "2. move gitcd's own client to https (no restart)\n");
        assert_contains(out, "3. then one member at a time, followers first");
        assert_lacks(out, "no member restarts");

        pf_state_from_revision(db, repo, second, NULL, true);
        pf_write(repo, "clusters/a.yaml", y1);
        _cleanup_free_ char *third = pf_commit(repo, "TLS off");
        (void)third;
        free(out);
        out = NULL;
        assert_int_equal(pf_plan(&out, NULL, "--source '%s' --ref main --state '%s'", repo, db), 0);
        assert_contains(out, "1. switch TLS off (client and peer): restart 3 members one at a "
                             "time serving clients on http beside https\n");
        assert_contains(out, "2. move gitcd's own client to http (no restart)\n");
        assert_contains(out, "3. then one member at a time, followers first, the leader last: "
                             "restart it onto a plain peer listener");
        assert_contains(out, "4. restart 3 members one at a time without TLS for client and peer "
                             "(the CA and the certificates stay on disk, unused)\n");
        assert_contains(out, "1 to change, 0 to delete, 0 rejected");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_create_without_state, test_setup, test_teardown),
            cmocka_unit_test_setup_teardown(test_change_and_revert, test_setup, test_teardown),
            cmocka_unit_test_setup_teardown(test_ca_rotation, test_setup, test_teardown),
            cmocka_unit_test_setup_teardown(test_tls_switch, test_setup, test_teardown),
            cmocka_unit_test_setup_teardown(test_scale_pause_prune_rename, test_setup,
                                            test_teardown),
            cmocka_unit_test_setup_teardown(test_rejections, test_setup, test_teardown),
            cmocka_unit_test_setup_teardown(test_secrets_and_in_progress, test_setup,
                                            test_teardown),
            cmocka_unit_test_setup_teardown(test_plain_directory, test_setup, test_teardown),
            cmocka_unit_test_setup_teardown(test_usage_and_errors, test_setup, test_teardown),
            cmocka_unit_test_setup_teardown(test_unsupported_fields, test_setup, test_teardown),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
