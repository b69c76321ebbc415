/*
 * What `gitcd apply` and `gitcd run` refuse, end to end through the real
 * binary on the local target: clusters that use a field gitcd reads but does
 * not act on yet (spec.auth, spec.snapshots, spec.defrag,
 * spec.bootstrap.restore, in the native and cozystack dialects) are not
 * created, an existing cluster that gains one is not changed, and the other
 * clusters of the same folder are created and keep running.
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
        write_native(e, "auth.yaml", "authy", "  auth:\n    enabled: true\n");
        write_native(e, "snap.yaml", "snap",
                     "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n"
                     "      local:\n        path: /var/backups/snap\n");
        write_native(e, "defrag.yaml", "defrag", "  defrag:\n    quotaUsageAbovePercent: 80\n");
        write_native(e, "restore.yaml", "restore",
                     "  bootstrap:\n    restore:\n      source:\n        local:\n"
                     "          path: /var/backups/x.db\n");
        e2e_write_file(e, "cozy.yaml",
                       "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: cozy-auth\n"
                       "spec:\n"
                       "  replicas: 1\n"
                       "  auth:\n"
                       "    enabled: true\n"
                       "---\n"
                       "apiVersion: etcd-operator.cozystack.io/v1alpha2\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: cozy-restore\n"
                       "spec:\n"
                       "  replicas: 1\n"
                       "  bootstrap:\n"
                       "    restore:\n"
                       "      source:\n"
                       "        local:\n"
                       "          path: /var/backups/x.db\n");

        char *err = NULL;
        assert_int_equal(apply_capture(e, &err), 1);
        assert_contains(err, "auth.yaml:9:14: error: spec.auth (etcd authentication) is not "
                             "supported yet; the cluster is not created");
        assert_contains(err, "snap.yaml:8:3: error: spec.snapshots (scheduled snapshots) is not "
                             "supported yet; the cluster is not created");
        assert_contains(err, "defrag.yaml:8:3: error: spec.defrag (scheduled defragmentation) is "
                             "not supported yet; the cluster is not created");
        assert_contains(err, "restore.yaml:9:5: error: spec.bootstrap.restore (restoring a "
                             "snapshot at creation) is not supported yet; the cluster is not "
                             "created");
        assert_contains(err, "cozy.yaml:8:14: error: spec.auth (etcd authentication) is not "
                             "supported yet; the cluster is not created");
        assert_contains(err, "cozy.yaml:17:5: error: spec.bootstrap.restore");
        free(err);

        /* The refused clusters do not exist; the other one runs. */
        assert_true(e2e_wait_ready(e, "plain", 1, 30));
        static const char *const refused[] = {"authy",   "snap",      "defrag",
                                              "restore", "cozy-auth", "cozy-restore"};
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
                assert_false(cluster_known(e, refused[i]));
                char *dir = e2e_member_dir(e, refused[i], "");
                assert_false(path_exists(dir));
                free(dir);
        }
        assert_true(audit_count_all(e, "spec.rejected") >= 1);

        /* validate reads the same folder as valid, with warnings. */
        const char *vargs[] = {"validate", e->source, NULL};
        char *vout = NULL;
        assert_int_equal(e2e_runv(e, &vout, NULL, vargs), 0);
        assert_contains(vout, "auth.yaml:9:14: warning: spec.auth (etcd authentication) is not "
                              "supported yet; gitcd apply, run and plan refuse this cluster");
        free(vout);

        /* An existing cluster that gains an unsupported field is not changed. */
        pid_t before = e2e_member_pid(e, "plain", "plain-0");
        assert_true(before > 0);
        write_native(e, "plain.yaml", "plain",
                     "  snapshots:\n    schedule: \"0 * * * *\"\n    destination:\n"
                     "      local:\n        path: /var/backups/plain\n");
        assert_int_equal(apply_capture(e, &err), 1);
        assert_contains(err, "plain.yaml:8:3: error: spec.snapshots (scheduled snapshots) is not "
                             "supported yet; the cluster is not changed");
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
                        seen = strstr(text, "plain.yaml:8:3: error: spec.snapshots (scheduled "
                                            "snapshots) is not supported yet; the cluster is not "
                                            "changed") != NULL;
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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_unsupported_fields),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
