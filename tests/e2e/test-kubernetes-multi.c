/*
 * Several API servers from one gitcd, end to end: two real kube-apiservers
 * (tests/harness/kubeapi.h), each with its own node simulator playing
 * kubelet and scheduler (they share the test's private /etc/hosts), and one
 * `gitcd run` whose kubeconfig has a context for each ("east", the
 * default, and "west"). Cluster "ea" names no context (it runs on the
 * default's server), "we" names spec.kubernetes.context west, and "lost"
 * names a context the kubeconfig does not have.
 *
 * In order: ea and we come up, each on its own server only; lost is
 * refused at its file:line:col and holds up neither. West's API server is
 * stopped (kubeapi_pause), and both clusters are scaled 1 → 3: ea converges
 * while we's status says its API server is unreachable; west comes back
 * (kubeapi_resume) and we converges too. A move of we to east is refused
 * with the reason, and nothing changes.
 */
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

#include "kube/kubeconfig.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NS      "default"
#define VERSION "3.5.16"

static kube_lab east, west; /* api, sim, admin: each server's */
static char *root, *hosts, *kubeconfig;

static const kube_gvr pods = {"", "v1", "pods", true};

static void write_spec(e2e *e, const char *name, int replicas, const char *context)
{
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        _cleanup_free_ char *ctx =
            context ? xasprintf("  kubernetes:\n    context: %s\n", context) : xstrdup("");
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "  namespace: " NS "\n"
                                              "spec:\n"
                                              "  replicas: %d\n"
                                              "  version: \"" VERSION "\"\n"
                                              "  progressDeadlineSeconds: 300\n"
                                              "%s",
                                              name, replicas, ctx);
        e2e_write_file(e, file, text);
}

/* gitcd's identity on server k, as a kubeconfig entry named name. */
static void add_context(strbuf *sb_clusters, strbuf *sb_users, strbuf *sb_contexts,
                        const kube_lab *k, const char *name)
{
        kube_config *cfg = NULL;
        char *err = NULL;
        if (kube_config_load(kubeapi_kubeconfig(k->api), "gitcd", &cfg, &err) < 0)
                fail_msg("the harness kubeconfig: %s", err);
        _cleanup_free_ char *ca = kube_base64_encode(cfg->ca_data, cfg->ca_len);
        sb_printf(sb_clusters,
                  "- name: %s\n  cluster:\n    server: %s\n"
                  "    certificate-authority-data: %s\n",
                  name, cfg->server, ca);
        sb_printf(sb_users, "- name: %s\n  user: {token: %s}\n", name, cfg->token);
        sb_printf(sb_contexts, "- name: %s\n  context: {cluster: %s, user: %s}\n", name, name,
                  name);
        kube_config_free(cfg);
}

static void write_kubeconfig(void)
{
        strbuf cl = STRBUF_INIT, us = STRBUF_INIT, cx = STRBUF_INIT;
        add_context(&cl, &us, &cx, &east, "east");
        add_context(&cl, &us, &cx, &west, "west");
        _cleanup_free_ char *text =
            xasprintf("apiVersion: v1\nkind: Config\ncurrent-context: east\nclusters:\n%s"
                      "users:\n%scontexts:\n%s",
                      sb_str(&cl), sb_str(&us), sb_str(&cx));
        sb_release(&cl);
        sb_release(&us);
        sb_release(&cx);
        kubeconfig = path_join(root, "kubeconfig");
        assert_int_equal(write_file_atomic(kubeconfig, text, strlen(text), 0600), 0);
}

static size_t pods_of(kube_lab *k, const char *cluster)
{
        _cleanup_free_ char *sel = xasprintf("gitcd.io/cluster=%s", cluster);
        return kube_lab_count(k, &pods, NS, sel);
}

/* Wait until the status of name, as JSON text, holds what. */
static bool status_says(e2e *e, const char *name, const char *what, int timeout_s)
{
        int64_t end = now_mono_ms() + timeout_s * 1000LL;
        do {
                json_t *st = e2e_status(e, name);
                char *text = json_dumps(st, JSON_COMPACT);
                bool found = text && strstr(text, what);
                free(text);
                json_decref(st);
                if (found)
                        return true;
                usleep(500 * 1000);
        } while (now_mono_ms() < end);
        return false;
}

static void test_two_servers(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        write_spec(e, "ea", 1, NULL);
        write_spec(e, "we", 1, "west");
        write_spec(e, "lost", 1, "nowhere");
        const char *args[] = {"--target", "kubernetes", "--kubeconfig", kubeconfig, NULL};
        pid_t d = e2e_start_daemon(e, args);
        assert_true(e2e_wait_ready(e, "ea", 1, 180));
        assert_true(e2e_wait_ready(e, "we", 1, 180));
        /* each on its own server only */
        assert_int_equal(pods_of(&east, "ea"), 1);
        assert_int_equal(pods_of(&west, "ea"), 0);
        assert_int_equal(pods_of(&west, "we"), 1);
        assert_int_equal(pods_of(&east, "we"), 0);
        /* status and plan name the context */
        assert_true(status_says(e, "we", "\"kube_context\":\"west\"", 30));
        /* the unknown context: refused where it is written, nothing of it anywhere */
        _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
        if (!strstr(log, "lost.yaml:11:14:") || !strstr(log, "context \"nowhere\" not found"))
                fail_msg("no refusal of lost.yaml's context in the daemon's log:\n%s", log);
        assert_int_equal(pods_of(&east, "lost") + pods_of(&west, "lost"), 0);

        /* West stops: east's cluster still converges a change, west's says why it cannot. */
        kubeapi_pause(west.api);
        write_spec(e, "ea", 3, NULL);
        write_spec(e, "we", 3, "west");
        assert_true(e2e_wait_ready(e, "ea", 3, 300));
        assert_true(status_says(e, "we", "Kubernetes API server of context", 120));
        kubeapi_resume(west.api);
        assert_true(e2e_wait_ready(e, "we", 3, 300));
        assert_int_equal(pods_of(&west, "we"), 3);
        assert_int_equal(pods_of(&east, "ea"), 3);

        /* A move to another server is refused, and nothing changes. */
        write_spec(e, "we", 3, "east");
        assert_true(status_says(e, "we", "a cluster stays on the API server", 60));
        assert_int_equal(pods_of(&east, "we"), 0);
        assert_int_equal(pods_of(&west, "we"), 3);

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        e2e_free(e);
}

static bool start_lab(kube_lab *k, const char *node)
{
        if (kubeapi_start(&k->api) < 0)
                return false;
        k->admin = kubeapi_client(k->api, "admin");
        assert_int_equal(kubeapi_create_namespace(k->api, "gitcd"), 0);
        kube_lab_apply_yaml_file(k, "deploy/rbac.yaml");
        _cleanup_free_ char *work = path_join(root, node);
        assert_int_equal(nodesim_start(k->api, node, work, hosts, &k->sim), 0);
        return true;
}

static void stop_lab(kube_lab *k)
{
        nodesim_free(k->sim);
        kube_client_free(k->admin);
        kubeapi_free(k->api);
}

int main(void)
{
        if (!e2e_have_version(VERSION))
                return 77;
        _cleanup_free_ char *bin = kubeapi_find_binary();
        if (!bin) {
                fprintf(stderr, "no kube-apiserver (scripts/setup builds it): skipped\n");
                return 77;
        }
        root = harness_tmpdir("gitcd-e2e-kube-multi");
        if (kubeapi_private_hosts(root, &hosts) < 0) {
                fprintf(stderr, "no private mount namespace (needs root): skipped\n");
                (void)rm_rf(root);
                return 77;
        }
        if (!start_lab(&east, "node-east") || !start_lab(&west, "node-west")) {
                fprintf(stderr, "the kube-apiservers did not start: skipped\n");
                stop_lab(&east);
                stop_lab(&west);
                (void)rm_rf(root);
                return 77;
        }
        write_kubeconfig();
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_two_servers),
        };
        int failed = cmocka_run_group_tests(tests, NULL, NULL);
        stop_lab(&west);
        stop_lab(&east);
        (void)rm_rf(root);
        free(root);
        free(hosts);
        free(kubeconfig);
        return failed ? 1 : 0;
}
