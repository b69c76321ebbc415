/*
 * What `gitcd apply` and `gitcd run` refuse, end to end through the real
 * binary on the local target: clusters that use a field this target does
 * not act on (spec.snapshots.destination.pvc, the Kubernetes target's) are
 * not created, an existing cluster that gains one is not changed, and the other
 * clusters of the same folder are created and keep running; and a commit
 * that adds `force-new-cluster` to a live 3-member cluster is refused with
 * nothing restarted, removed or deleted.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define APPLY_TIMEOUT "90s"

static void assert_contains(const char *hay, const char *needle)
{
        if (!hay || !strstr(hay, needle))
                fail_msg("expected to find\n  %s\nin:\n%s", needle, hay ? hay : "(null)");
}

/* A native one-member cluster with `spec_extra` appended under spec (from line 8 on). */
static void write_native(e2e *e, const char *file, const char *name, const char *spec_extra)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: %s\n"
                               "spec:\n"
                               "  replicas: 1\n"
                               "  version: \"3.5.16\"\n"
                               "%s",
                               name, spec_extra);
        e2e_write_file(e, file, text);
        free(text);
}

static int apply_capture(e2e *e, char **ret_err)
{
        const char *args[] = {"apply",     "-q",          "--source", e->source,
                              "--timeout", APPLY_TIMEOUT, NULL};
        char *out = NULL;
        int k = e2e_runv(e, &out, ret_err, args);
        free(out);
        return k;
}

/* Whether `gitcd status default/<name>` knows the cluster. */
static bool cluster_known(e2e *e, const char *name)
{
        char *id = xasprintf("default/%s", name);
        char *out = NULL;
        int k = e2e_run(e, &out, "status", "-o", "json", id, NULL);
        free(out);
        free(id);
        return k == 0;
}

/* Count of `action` events in the whole audit log (any cluster). */
static int audit_count_all(e2e *e, const char *action)
{
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "log", "-o", "json", "--action", action, NULL), 0);
        int n = 0;
        for (const char *p = out; (p = strchr(p, '\n')); p++)
                n++;
        free(out);
        return n;
}

static void test_unsupported_fields(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        /* Written explicitly off: asks for nothing, created. */
        write_native(e, "plain.yaml", "plain",
                     "  auth:\n    enabled: false\n  snapshots:\n    enabled: false\n");
        write_native(e, "snap.yaml", "snap",
                     "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n"
                     "      pvc:\n        claimName: backups\n");

        char *err = NULL;
        assert_int_equal(apply_capture(e, &err), 1);
        assert_contains(err, "snap.yaml:11:7: error: spec.snapshots.destination.pvc (snapshots "
                             "stored in a PersistentVolumeClaim) needs --target kubernetes");
        free(err);

        /* The refused clusters do not exist; the other one runs. */
        assert_true(e2e_wait_ready(e, "plain", 1, 30));
        static const char *const refused[] = {"snap"};
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
                assert_false(cluster_known(e, refused[i]));
                char *dir = e2e_member_dir(e, refused[i], "");
                assert_false(path_exists(dir));
                free(dir);
        }
        assert_true(audit_count_all(e, "spec.rejected") >= 1);

        /* validate reads the same folder as valid, without a warning for the PVC. */
        const char *vargs[] = {"validate", e->source, NULL};
        char *vout = NULL;
        assert_int_equal(e2e_runv(e, &vout, NULL, vargs), 0);
        assert_null(strstr(vout, "warning: spec.snapshots.destination.pvc"));
        free(vout);

        /* An existing cluster that gains an unsupported field is not changed. */
        pid_t before = e2e_member_pid(e, "plain", "plain-0");
        assert_true(before > 0);
        write_native(e, "plain.yaml", "plain",
                     "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n"
                     "      pvc:\n        claimName: backups\n");
        assert_int_equal(apply_capture(e, &err), 1);
        assert_contains(err, "plain.yaml:11:7: error: spec.snapshots.destination.pvc (snapshots "
                             "stored in a PersistentVolumeClaim) needs --target kubernetes");
        free(err);
        assert_int_equal(e2e_member_pid(e, "plain", "plain-0"), before);
        assert_true(e2e_wait_ready(e, "plain", 1, 10));

        /* The daemon refuses the same way, and leaves the cluster running. */
        pid_t d = e2e_start_daemon(e, NULL);
        char *log = xasprintf("%s/daemon.log", e->root);
        bool seen = false;
        for (int64_t t0 = now_mono_ms(); !seen && now_mono_ms() - t0 < 30000;) {
                char *text = NULL;
                size_t len = 0;
                if (read_file(log, 1 << 20, &text, &len) == 0)
                        seen = strstr(text, "plain.yaml:11:7: error: "
                                            "spec.snapshots.destination.pvc (snapshots stored in "
                                            "a PersistentVolumeClaim) needs --target "
                                            "kubernetes") != NULL;
                free(text);
                if (!seen)
                        usleep(100 * 1000);
        }
        assert_true(seen);
        free(log);
        assert_int_equal(kill(d, SIGTERM), 0);
        int status = 0;
        assert_int_equal(waitpid(d, &status, 0), d);
        harness_untrack_pid(d);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(e2e_member_pid(e, "plain", "plain-0"), before);
        e2e_free(e);
}

/* Run a shell command in the source folder (a Git repository); its exit status. */
static int git_in_source(e2e *e, const char *cmd)
{
        char *full = xasprintf("cd '%s' && %s", e->source, cmd);
        int st = system(full);
        free(full);
        return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The commit at HEAD of the source repository (newly allocated). */
static char *source_head(e2e *e)
{
        char *path = path_join(e->root, "head.txt");
        char *cmd = xasprintf("git rev-parse HEAD > '%s'", path);
        assert_int_equal(git_in_source(e, cmd), 0);
        char *id = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 128, &id, &len), 0);
        id[strcspn(id, "\n")] = '\0';
        free(cmd);
        free(path);
        return id;
}

static const char *const members3[] = {"fnc-0", "fnc-1", "fnc-2"};

/*
 * The scenario the deny-list exists for: a live 3-member cluster applied from
 * a Git repository, then one commit that adds `force-new-cluster: "true"`.
 * gitcd refuses the spec (error at file:line:col, audited with the commit),
 * restarts and removes no member, deletes no data, and the cluster stays
 * healthy with its 3 members and its keys.
 */
static void test_force_new_cluster(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        setenv("GIT_AUTHOR_NAME", "Mallory", 1);
        setenv("GIT_AUTHOR_EMAIL", "mallory@example.com", 1);
        setenv("GIT_COMMITTER_NAME", "Mallory", 1);
        setenv("GIT_COMMITTER_EMAIL", "mallory@example.com", 1);
        e2e_write_cluster(e, "fnc.yaml", "fnc", 3, "3.5.16");
        assert_int_equal(git_in_source(e, "git init -q -b main && git add -A && "
                                          "git commit -q -m 'three members'"),
                         0);
        assert_int_equal(e2e_apply(e, NULL, 120), 0);
        assert_true(e2e_wait_ready(e, "fnc", 3, 30));

        etcd_client *c = e2e_client(e, "fnc");
        assert_int_equal(etcd_put(c, "precious", "data", 4, NULL), 0);
        etcd_client_free(c);
        etcd_members *before = e2e_members(e, "fnc");
        assert_int_equal(before->n, 3);
        pid_t pids[3];
        for (size_t i = 0; i < 3; i++) {
                pids[i] = e2e_member_pid(e, "fnc", members3[i]);
                assert_true(pids[i] > 0);
        }

        e2e_write_file(e, "fnc.yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: fnc\n"
                       "  namespace: default\n"
                       "spec:\n"
                       "  replicas: 3\n"
                       "  version: \"3.5.16\"\n"
                       "  progressDeadlineSeconds: 120\n"
                       "  options:\n"
                       "    extraFlags:\n"
                       "      force-new-cluster: \"true\"\n");
        assert_int_equal(git_in_source(e, "git commit -q -am 'force a new cluster'"), 0);
        char *head = source_head(e);
        int rejected_before = audit_count_all(e, "spec.rejected");

        char *err = NULL;
        assert_int_equal(apply_capture(e, &err), 1);
        assert_contains(err, "fnc.yaml:12:26: error: spec.options.extraFlags.force-new-cluster: "
                             "--force-new-cluster is refused:");
        free(err);

        /* Audited, with the commit that carried it. */
        assert_int_equal(audit_count_all(e, "spec.rejected"), rejected_before + 1);
        char *log = NULL;
        assert_int_equal(e2e_run(e, &log, "log", "-o", "json", "--action", "spec.rejected",
                                 "--limit", "1", NULL),
                         0);
        assert_contains(log, head);
        assert_contains(log, "force-new-cluster");
        free(log);
        free(head);

        /* Nothing restarted, removed or deleted; still 3 healthy members with the data. */
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(e2e_member_pid(e, "fnc", members3[i]), pids[i]);
                char *dir = e2e_member_dir(e, "fnc", members3[i]);
                char *data = xasprintf("%s/data/member", dir);
                assert_true(path_exists(data));
                free(data);
                free(dir);
        }
        assert_int_equal(e2e_audit_count(e, "fnc", "member.remove"), 0);
        assert_int_equal(e2e_audit_count(e, "fnc", "member.restart"), 0);
        etcd_members *after = e2e_members(e, "fnc");
        assert_int_equal(after->n, 3);
        assert_true(after->cluster_id == before->cluster_id);
        for (size_t i = 0; i < before->n; i++)
                assert_non_null(etcd_members_find(after, before->members[i].id));
        etcd_members_free(after);
        etcd_members_free(before);
        c = e2e_client(e, "fnc");
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, "precious", false, &l), 0);
        assert_int_equal(l->n, 1);
        etcd_kv_list_free(l);
        etcd_client_free(c);
        assert_true(e2e_wait_ready(e, "fnc", 3, 10));
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_unsupported_fields),
            cmocka_unit_test(test_force_new_cluster),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
