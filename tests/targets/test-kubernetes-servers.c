/*
 * The Kubernetes target as its kind opens it (targets/kubernetes-servers.c),
 * without an API server: a kubeconfig whose contexts name servers on
 * loopback ports nothing listens on, so every call fails at once as
 * unreachable. What a user would notice, fast and under the sanitizers
 * (e2e-kubernetes-multi shows the same against two real API servers):
 * each cluster goes to its own context's server, two contexts of one
 * server and credentials share it (one client, one warning, one down
 * mark), a server that failed as unreachable makes its clusters fail at
 * once naming it while another server's are still tried, an unknown
 * context is an error naming what the file has, list_members follows the
 * cluster, a takeover's survey goes to its cluster's server, and
 * wait_event neither hangs on dead servers nor swallows the
 * daemon's wake.
 */
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness/harness.h"
#include "api/model.h"
#include "targets/kubernetes.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* A loopback port nothing listens on (bound, read, closed). */
static int closed_port(void)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(a);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        close(fd);
        return ntohs(a.sin_port);
}

static int warnings;

static void count_warning(void *userdata, const char *message)
{
        (void)userdata;
        assert_non_null(strstr(message, "insecure-skip-tls-verify"));
        warnings++;
}

static etcd_cluster *cluster(const char *name, const char *context)
{
        etcd_cluster *c = etcd_cluster_new();
        c->name = xstrdup(name);
        c->namespace_ = xstrdup("default");
        c->kube_context = xstrdup_null(context);
        return c;
}

static int status_of(target *t, const etcd_cluster *c)
{
        target_member_status st = {0};
        _cleanup_free_ char *member = xasprintf("%s-0", c->name);
        int r = t->ops->member_status(t, c, member, &st);
        if (r >= 0)
                target_member_status_release(&st);
        return r;
}

static void test_servers(void **state)
{
        (void)state;
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-kube-servers");
        assert_non_null(dir);
        int pa = closed_port(), pb = closed_port();
        _cleanup_free_ char *kc = xasprintf(
            "apiVersion: v1\nkind: Config\ncurrent-context: b\n"
            "clusters:\n"
            "- name: one\n  cluster: {server: \"https://127.0.0.1:%d\", insecure-skip-tls-verify: "
            "true}\n"
            "- name: two\n  cluster: {server: \"https://127.0.0.1:%d\", insecure-skip-tls-verify: "
            "true}\n"
            "users:\n- name: u\n  user: {token: t}\n"
            "contexts:\n"
            "- name: a\n  context: {cluster: one, user: u}\n"
            "- name: \"a too\"\n  context: {cluster: one, user: u}\n"
            "- name: b\n  context: {cluster: two, user: u}\n",
            pa, pb);
        _cleanup_free_ char *path = path_join(dir, "kubeconfig");
        assert_int_equal(write_file_atomic(path, kc, strlen(kc), 0600), 0);

        _cleanup_free_ char *why = NULL;
        assert_int_equal(kubernetes_context_check(path, "a too", &why), 0);
        assert_int_equal(kubernetes_context_check(path, "nope", &why), -ENOENT);
        assert_non_null(strstr(why, "context \"nope\" not found"));

        kubernetes_servers_opts o = {
            .kubeconfig = path, .context = "a", .state_dir = dir, .warn = count_warning};
        target *t = NULL;
        char *err = NULL;
        assert_int_equal(kubernetes_servers_new(&o, &t, &err), 0);
        assert_string_equal(t->ops->name, "kubernetes");
        assert_true(t->ops->caps & TARGET_CAP_KUBE_CONTEXTS);
        assert_int_equal(warnings, 1); /* the default context's server, made at once */

        etcd_cluster *dflt = cluster("dflt", NULL), *same = cluster("same", "a too"),
                     *other = cluster("other", "b"), *lost = cluster("lost", "nope");

        /* the default context's server does not answer: -EIO, after the client's retries */
        assert_int_equal(status_of(t, dflt), -EIO);
        /* "a too" is the same server and credentials: marked down with it, failing at once */
        int64_t t0 = now_mono_ms();
        assert_int_equal(status_of(t, same), -EHOSTUNREACH);
        assert_true(now_mono_ms() - t0 < 1000);
        assert_non_null(strstr(target_last_error(t), "context \"a too\""));
        assert_non_null(strstr(target_last_error(t), "is unreachable"));
        assert_int_equal(warnings, 1); /* no second client for it */
        /* another server is not held by that one's mark: it is tried */
        assert_int_equal(status_of(t, other), -EIO);
        assert_int_equal(warnings, 2);
        assert_int_equal(status_of(t, other), -EHOSTUNREACH);
        assert_non_null(strstr(target_last_error(t), "context \"b\""));
        /* list_members names no spec: the server its cluster went to */
        char **names = NULL;
        size_t n = 0;
        assert_int_equal(t->ops->list_members(t, "default", "other", &names, &n), -EHOSTUNREACH);
        assert_non_null(strstr(target_last_error(t), "context \"b\""));
        /* a takeover (spec.adopt) is surveyed on its cluster's own server */
        assert_non_null(t->ops->takeover);
        other->adopt.from = ADOPT_FROM_ETCDIO;
        other->adopt.name = xstrdup("old");
        takeover_survey sv = {0};
        char *refusal = NULL;
        assert_int_equal(t->ops->takeover->survey(t, other, &sv, &refusal), -EHOSTUNREACH);
        assert_null(refusal);
        assert_non_null(strstr(target_last_error(t), "context \"b\""));
        /* an unknown context: the cluster's error names it and what the file has */
        assert_int_equal(status_of(t, lost), -ENOENT);
        assert_non_null(strstr(target_last_error(t), "cluster default/lost"));
        assert_non_null(strstr(target_last_error(t), "context \"nope\" not found"));

        /* Events: no server answers, and the wait still ends on time, and on a wake. */
        t0 = now_mono_ms();
        assert_int_equal(t->ops->wait_event(t, 300), 0);
        assert_true(now_mono_ms() - t0 < 2000);
        target_wake();
        t0 = now_mono_ms();
        assert_int_equal(t->ops->wait_event(t, 20000), 0);
        assert_true(now_mono_ms() - t0 < 2000);
        char **ids = NULL;
        assert_int_equal(t->ops->take_events(t, &ids, &n), 0);
        assert_int_equal(n, 0);
        free(ids);

        etcd_cluster_free(dflt);
        etcd_cluster_free(same);
        etcd_cluster_free(other);
        etcd_cluster_free(lost);
        target_free(t);
        free(err);
        assert_int_equal(rm_rf(dir), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_servers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
