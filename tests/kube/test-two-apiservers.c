/*
 * Two harness API servers in one test, side by side: each kubeapi_start()
 * has its own folder, ports and etcd, each its own node simulator (both
 * writing their Pods' names into the test's one /etc/hosts), and pausing
 * one leaves the other serving and its simulator acting.
 *
 * Each runs one etcd Pod (a bare Pod whose data folder is on no volume: the
 * simulator keeps it in the Pod's own folder) reachable by its DNS name.
 * Needs root (the private /etc/hosts) and the kube-apiserver binary;
 * skipped (77) without them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "etcd/client.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define NS     KUBEAPI_NAMESPACE
#define WAIT_S 90

static char *tmp, *hosts_path;
static const kube_gvr pods = {"", "v1", "pods", true};

typedef struct side {
        const char *pod, *node;
        kubeapi *api;
        nodesim *sim;
        kube_client *admin;
} side;

static side a = {.pod = "one-0", .node = "node-a"}, b = {.pod = "two-0", .node = "node-b"};

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static void start_side(side *s)
{
        _cleanup_free_ char *work = xasprintf("%s/%s", tmp, s->node);
        _cleanup_free_ char *adv =
            xasprintf("--advertise-client-urls=http://%s.sub." NS ".svc:2379", s->pod);
        json_t *pod;

        assert_int_equal(kubeapi_start(&s->api), 0);
        s->admin = kubeapi_client(s->api, "admin");
        assert_int_equal(nodesim_start(s->api, s->node, work, hosts_path, &s->sim), 0);
        pod = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:[{s:s, s:s, s:[s, s, s, s, s, s], "
                        "s:[{s:s, s:{s:{s:s}}}]}]}}",
                        "apiVersion", "v1", "kind", "Pod", "metadata", "name", s->pod, "namespace",
                        NS, "spec", "hostname", s->pod, "subdomain", "sub", "containers", "name",
                        "etcd", "image", "quay.io/coreos/etcd:v3.5.16", "command", "etcd",
                        "--name=$(POD_NAME)", "--data-dir=/var/lib/etcd",
                        "--listen-client-urls=http://0.0.0.0:2379", adv,
                        "--listen-peer-urls=http://0.0.0.0:2380", "env", "name", "POD_NAME",
                        "valueFrom", "fieldRef", "fieldPath", "metadata.name");
        assert_int_equal(kube_request(s->admin, "POST", "/api/v1/namespaces/" NS "/pods", NULL, pod,
                                      "create", "pods", NS, NULL),
                         0);
        json_decref(pod);
}

static void stop_side(side *s)
{
        kube_client_free(s->admin);
        nodesim_free(s->sim);
        kubeapi_free(s->api);
}

/* Until etcd answers a write and a read through the Pod's DNS name (the shared hosts file). */
static void wait_serving(const side *s)
{
        _cleanup_free_ char *endpoint = xasprintf("http://%s.sub." NS ".svc:2379", s->pod);
        etcd_client_opts eo = {.endpoints = endpoint, .call_timeout_ms = 2000};
        time_t deadline = time(NULL) + WAIT_S;
        etcd_client *ec;

        assert_int_equal(etcd_client_new(&eo, &ec), 0);
        while (etcd_put(ec, "k", "v", 1, NULL) < 0) {
                if (time(NULL) > deadline)
                        fail_msg("%s does not serve after %d s: %s", endpoint, WAIT_S,
                                 etcd_client_last_error(ec));
                sleep_ms(250);
        }
        etcd_client_free(ec);
}

static int setup(void **state)
{
        start_side(&a);
        start_side(&b);
        return 0;
}

static int teardown(void **state)
{
        stop_side(&b);
        stop_side(&a);
        return 0;
}

static void test_side_by_side(void **state)
{
        assert_string_not_equal(kubeapi_server(a.api), kubeapi_server(b.api));
        assert_string_not_equal(kubeapi_dir(a.api), kubeapi_dir(b.api));
        wait_serving(&a);
        wait_serving(&b);
        /* each API server holds only its own Pod */
        json_t *pod = NULL;
        assert_int_equal(kube_get(a.admin, &pods, NS, b.pod, &pod), -ENOENT);
        assert_int_equal(kube_get(b.admin, &pods, NS, a.pod, &pod), -ENOENT);
}

static void test_pause_one(void **state)
{
        time_t deadline;
        json_t *items = NULL, *pod = NULL;
        int r;

        kubeapi_pause(a.api);
        assert_int_not_equal(kube_list(a.admin, &pods, NS, NULL, &items, NULL), 0);
        /* b serves, and its simulator acts: a deleted Pod is stopped and goes */
        assert_int_equal(kube_list(b.admin, &pods, NS, NULL, &items, NULL), 0);
        assert_int_equal(json_array_size(items), 1);
        json_decref(items);
        wait_serving(&b);
        assert_int_equal(kube_delete(b.admin, &pods, NS, b.pod, NULL), 0);
        deadline = time(NULL) + WAIT_S;
        while ((r = kube_get(b.admin, &pods, NS, b.pod, &pod)) == 0) {
                json_decref(pod);
                pod = NULL;
                if (time(NULL) > deadline)
                        fail_msg("%s still exists after %d s", b.pod, WAIT_S);
                sleep_ms(200);
        }
        assert_int_equal(r, -ENOENT);
        /* a's etcd Pod kept running while its API server was down */
        wait_serving(&a);
        kubeapi_resume(a.api);
        assert_int_equal(kube_get(a.admin, &pods, NS, a.pod, &pod), 0);
        json_decref(pod);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_side_by_side),
            cmocka_unit_test(test_pause_one),
        };
        char *bin = kubeapi_find_binary();
        int r;

        if (!bin || !harness_have_etcd("3.5.16")) {
                printf("skipped: no kube-apiserver or etcd 3.5.16 (run "
                       "scripts/build-kube-apiserver)\n");
                free(bin);
                return 77;
        }
        free(bin);
        tmp = harness_tmpdir("gitcd-two-apiservers");
        r = kubeapi_private_hosts(tmp, &hosts_path);
        if (r == -EPERM) {
                printf("skipped: a private /etc/hosts needs root (CLONE_NEWNS)\n");
                free(tmp);
                return 77;
        }
        if (r < 0) {
                fprintf(stderr, "cannot make a private /etc/hosts: %s\n", strerror(-r));
                free(tmp);
                return 1;
        }
        r = cmocka_run_group_tests(tests, setup, teardown);
        free(hosts_path);
        free(tmp);
        return r;
}
