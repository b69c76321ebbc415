/*
 * spec.auth end to end, on the local target with real etcd: a live
 * 3-member cluster under a writer gets auth switched on by a new spec;
 * etcdctl is then refused without credentials and accepted with root's
 * password from the state folder; a new root-password changes etcd's; a
 * member is added while auth is on; auth
 * is switched off again; no acknowledged write is lost on the way, and a
 * snapshot taken while auth is on succeeds, as do `gitcd etcd --cluster`
 * calls that bring no credentials of their own.
 *
 * The writer learns the credentials the way gitcd's own clients do
 * (auth_credentials over the state folder), again whenever etcd refuses
 * it, so it keeps writing across the switch and the password change.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "reconciler/auth.h"
#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define APPLY_TIMEOUT 90
#define CLUSTER       "default/sec"

/* What the writer logs in with: the credentials gitcd keeps for the cluster, read again. */
typedef struct writer_login {
        const char *endpoints;
        const char *state_dir;
} writer_login;

static bool auth_refusal(int k)
{
        return k == ETCD_ERR_UNAUTHENTICATED || k == ETCD_ERR_AUTH_FAILED ||
               k == ETCD_ERR_INVALID_TOKEN || k == ETCD_ERR_PERMISSION_DENIED;
}

static etcd_client *writer_client(void *data)
{
        const writer_login *w = data;
        auth_creds cr = {0};
        if (auth_credentials(w->state_dir, CLUSTER, &cr) < 0)
                return NULL;
        etcd_client_opts o = {.endpoints = w->endpoints,
                              .user = cr.user,
                              .password = cr.password,
                              .fallback_password = cr.fallback_password,
                              .call_timeout_ms = 3000,
                              .dial_timeout_ms = 500};
        etcd_client *c = NULL;
        int k = etcd_client_new(&o, &c);
        auth_creds_release(&cr);
        return k < 0 ? NULL : c;
}

/* Wait until the writer acknowledged `more` keys beyond what it had. */
static void writer_progress(harness_writer *w, int more)
{
        harness_writer_wait(w, w->acked + more);
}

static void write_spec(e2e *e, const char *version, int replicas, bool auth)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: sec\n"
                               "spec:\n"
                               "  replicas: %d\n"
                               "  version: \"%s\"\n"
                               "%s",
                               replicas, version, auth ? "  auth:\n    enabled: true\n" : "");
        e2e_write_file(e, "sec.yaml", text);
        free(text);
}

/*
 * `etcdctl put` against the cluster, credentials (user:password) passed in
 * ETCDCTL_USER, not argv. Its exit status.
 */
static int etcdctl_put(const char *version, const char *endpoints, const char *user_password)
{
        _cleanup_free_ char *dir = harness_etcd_dir();
        assert_non_null(dir);
        _cleanup_free_ char *tool = xasprintf("%s/%s/etcdctl", dir, version);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("ETCDCTL_API", "3", 1);
                if (user_password)
                        setenv("ETCDCTL_USER", user_password, 1);
                else
                        unsetenv("ETCDCTL_USER");
                _cleanup_free_ char *eps = xasprintf("--endpoints=%s", endpoints);
                int null = open("/dev/null", O_WRONLY);
                if (null >= 0) {
                        dup2(null, 1);
                        dup2(null, 2);
                }
                execl(tool, "etcdctl", eps, "--command-timeout=5s", "put", "etcdctl-key", "v",
                      (char *)NULL);
                _exit(127);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *root_password(e2e *e, const char *file)
{
        _cleanup_free_ char *path = xasprintf("%s/auth/%s/%s", e->state_dir, CLUSTER, file);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 4096, &data, &len), 0);
        data[strcspn(data, "\n")] = '\0';
        return data;
}

/* The AuthEnabled condition's status as `gitcd status` shows it ("" when absent). */
static char *auth_condition(e2e *e)
{
        json_t *st = e2e_status(e, "sec");
        char *status = xstrdup("");
        size_t i;
        json_t *k;
        json_array_foreach(json_object_get(st, "conditions"), i, k)
        {
                if (streq(json_string_value(json_object_get(k, "type")), "AuthEnabled")) {
                        free(status);
                        status = xstrdup(json_string_value(json_object_get(k, "status")));
                }
        }
        json_decref(st);
        return status;
}

static void run(const char *version)
{
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        write_spec(e, version, 3, false);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_true(e2e_wait_ready(e, "sec", 3, 30));
        _cleanup_free_ char *eps = e2e_endpoints(e, "sec");
        assert_int_equal(etcdctl_put(version, eps, NULL), 0);

        writer_login login = {.endpoints = eps, .state_dir = e->state_dir};
        harness_writer *w = harness_writer_start(&(harness_writer_opts){
            .connect = writer_client, .data = &login, .reconnect_on = auth_refusal});
        writer_progress(w, 10);

        /* auth on, by a new spec, under the writer */
        write_spec(e, version, 3, true);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(e2e_audit_count(e, "sec", "auth.enable"), 1);
        _cleanup_free_ char *cond = auth_condition(e);
        assert_string_equal(cond, "True");
        _cleanup_free_ char *pw = root_password(e, "root-password");
        _cleanup_free_ char *applied = root_password(e, "root-password.etcd");
        assert_string_equal(pw, applied);
        _cleanup_free_ char *root = xasprintf("root:%s", pw);
        assert_int_not_equal(etcdctl_put(version, eps, NULL), 0);
        assert_int_not_equal(etcdctl_put(version, eps, "root:wrong-password"), 0);
        assert_int_equal(etcdctl_put(version, eps, root), 0);
        writer_progress(w, 10);

        /* a new password: etcd's follows; the old one stops working */
        _cleanup_free_ char *path = xasprintf("%s/auth/%s/root-password", e->state_dir, CLUSTER);
        const char *next = "second-root-password-0123456789";
        _cleanup_free_ char *line = xasprintf("%s\n", next);
        assert_int_equal(write_file_atomic(path, line, strlen(line), 0600), 0);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(e2e_audit_count(e, "sec", "auth.password-change"), 1);
        _cleanup_free_ char *root2 = xasprintf("root:%s", next);
        assert_int_not_equal(etcdctl_put(version, eps, root), 0);
        assert_int_equal(etcdctl_put(version, eps, root2), 0);
        writer_progress(w, 10);
        /* `gitcd etcd --cluster` finds the members and root's current password by itself */
        _cleanup_free_ char *got = NULL;
        assert_int_equal(
            e2e_run(e, NULL, "etcd", "--cluster", CLUSTER, "put", "cli-key", "cli-value", NULL), 0);
        assert_int_equal(e2e_run(e, &got, "etcd", "--cluster", CLUSTER, "get", "cli-key", NULL), 0);
        assert_non_null(strstr(got, "cli-value"));
        assert_null(strstr(got, next)); /* never printed */
        /* a snapshot authenticates too (Snapshot needs root once auth is on) */
        if (strncmp(version, "3.5", 3) == 0) {
                _cleanup_free_ char *to = path_join(e->root, "snaps");
                assert_int_equal(mkdir_p(to, 0700), 0);
                assert_int_equal(e2e_run(e, NULL, "snapshot", "save", CLUSTER, "--to", to, NULL),
                                 0);
        }

        /* a member added with auth on: the learner's MemberAdd and promotion authenticate */
        write_spec(e, version, 4, true);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_true(e2e_wait_ready(e, "sec", 4, 30));
        assert_int_not_equal(etcdctl_put(version, eps, NULL), 0);
        writer_progress(w, 10);

        /* auth off again */
        write_spec(e, version, 4, false);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(e2e_audit_count(e, "sec", "auth.disable"), 1);
        _cleanup_free_ char *cond_off = auth_condition(e);
        assert_string_equal(cond_off, "False");
        assert_int_equal(etcdctl_put(version, eps, NULL), 0);
        writer_progress(w, 10);

        /* no acknowledged write lost */
        harness_writer_stop(w);
        assert_true(w->reconnects >= 1); /* it was refused once auth came on */
        e2e_writer_check(w, e, "sec", 0);
        harness_writer_free(w);
        e2e_free(e);
}

static void test_auth_3_5(void **state)
{
        (void)state;
        run("3.5.16");
}

static void test_auth_3_4(void **state)
{
        (void)state;
        run("3.4.23");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_auth_3_5),
            cmocka_unit_test(test_auth_3_4),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
