/*
 * The node simulator against a real kube-apiserver v1.20.2 and real etcd
 * processes: a PersistentVolumeClaim and a Pod rendered by gitcd's own
 * renderer for a one-member cluster are scheduled to the simulated node,
 * run as a local etcd on the Pod's own 127.0.0.x address, answer through
 * the Pod's DNS name (a private /etc/hosts), restart after a crash, stop
 * and vanish when the Pod is deleted, and the claim's folder goes with the
 * PVC. Then emptyDir and Secret volumes, and the states of Pods that cannot
 * run: a missing claim, an unknown image version, a crash loop.
 *
 * The cases run in order and share one apiserver, one simulator and one
 * Pod. Needs root for the private mount namespace of /etc/hosts and the
 * kube-apiserver binary (scripts/build-kube-apiserver); skipped (77)
 * without either.
 */
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "etcd/client.h"
#include "render/render.h"
#include "api/spec.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define NS       KUBEAPI_NAMESPACE
#define NODE     "node-a"
#define POD      "demo-0"
#define PVC      "data-demo-0"
#define DNS_NAME POD ".demo-headless." NS ".svc.cluster.local"
#define WAIT_S   60

static char *tmp, *hosts_path, *work_dir;
static kubeapi *api;
static nodesim *sim;
static kube_client *admin;
static const kube_gvr pods = {"", "v1", "pods", true};
static const kube_gvr pvcs = {"", "v1", "persistentvolumeclaims", true};

static json_t *jget(json_t *v, const char *path)
{
        _cleanup_free_ char *copy = xstrdup(path);
        char *save = NULL;

        for (char *t = strtok_r(copy, ".", &save); t && v; t = strtok_r(NULL, ".", &save))
                v = json_is_array(v) ? json_array_get(v, strtoul(t, NULL, 10))
                                     : json_object_get(v, t);
        return v;
}

static const char *jstr(json_t *v, const char *path)
{
        return json_string_value(jget(v, path));
}

static bool pod_ready(json_t *pod)
{
        size_t i;
        json_t *c;

        json_array_foreach(jget(pod, "status.conditions"), i, c)
        {
                if (streq_ptr(jstr(c, "type"), "Ready"))
                        return streq_ptr(jstr(c, "status"), "True");
        }
        return false;
}

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

typedef bool (*pod_check)(json_t *pod, int restarts);

static bool running_and_ready(json_t *pod, int restarts)
{
        json_t *rc = jget(pod, "status.containerStatuses.0.restartCount");

        return streq_ptr(jstr(pod, "spec.nodeName"), NODE) &&
               streq_ptr(jstr(pod, "status.phase"), "Running") && pod_ready(pod) &&
               json_integer_value(rc) == restarts;
}

/* The Pod once check() holds; fails the test after WAIT_S seconds. */
static json_t *wait_pod(pod_check check, int restarts, const char *what)
{
        time_t deadline = time(NULL) + WAIT_S;
        json_t *pod = NULL;
        char *dump;

        for (;;) {
                json_decref(pod);
                pod = NULL;
                if (kube_get(admin, &pods, NS, POD, &pod) == 0 && check(pod, restarts))
                        return pod;
                if (time(NULL) > deadline)
                        break;
                sleep_ms(200);
        }
        dump = pod ? json_dumps(jget(pod, "status"), JSON_INDENT(2)) : NULL;
        fprintf(stderr, "status: %s\n", dump ? dump : "(no pod)");
        free(dump);
        json_decref(pod);
        fail_msg("the Pod is not %s after %d s", what, WAIT_S);
        return NULL;
}

static void wait_gone(const kube_gvr *gvr, const char *name)
{
        time_t deadline = time(NULL) + WAIT_S;
        json_t *obj = NULL;
        int r;

        while ((r = kube_get(admin, gvr, NS, name, &obj)) == 0) {
                json_decref(obj);
                obj = NULL;
                if (time(NULL) > deadline)
                        fail_msg("%s \"%s\" still exists after %d s", gvr->resource, name, WAIT_S);
                sleep_ms(200);
        }
        assert_int_equal(r, -ENOENT);
}

static etcd_cluster *load_cluster(void)
{
        const char *yaml = "apiVersion: gitcd.io/v1alpha1\n"
                           "kind: EtcdCluster\n"
                           "metadata:\n"
                           "  name: demo\n"
                           "  namespace: " NS "\n"
                           "spec:\n"
                           "  replicas: 1\n"
                           "  version: \"3.5.16\"\n"
                           "  storage:\n"
                           "    size: 1Gi\n";
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        etcd_cluster *c;
        int r = spec_load_buffer("demo.yaml", yaml, strlen(yaml), &set, &diags);

        if (r < 0)
                diag_print(&diags, stderr);
        assert_int_equal(r, 0);
        assert_int_equal(set.n, 1);
        c = set.items[0];
        set.n = 0;
        cluster_set_release(&set);
        diag_list_release(&diags);
        return c;
}

/* Processes whose command line mentions the test's folder (the simulated etcd). */
static int processes_under(const char *dir)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        int n = 0;

        assert_non_null(d);
        while ((e = readdir(d))) {
                _cleanup_free_ char *path = NULL, *data = NULL;
                size_t len = 0;
                if (e->d_name[0] < '0' || e->d_name[0] > '9')
                        continue;
                path = xasprintf("/proc/%s/cmdline", e->d_name);
                if (read_file(path, 1 << 20, &data, &len) < 0)
                        continue;
                for (size_t i = 0; i < len; i++)
                        if (data[i] == '\0')
                                data[i] = ' ';
                if (strstr(data, dir))
                        n++;
        }
        closedir(d);
        return n;
}

static int setup(void **state)
{
        assert_int_equal(kubeapi_start(&api), 0);
        admin = kubeapi_client(api, "admin");
        work_dir = path_join(tmp, "node");
        assert_int_equal(nodesim_start(api, NODE, work_dir, hosts_path, &sim), 0);
        return 0;
}

static int teardown(void **state)
{
        nodesim_free(sim);
        /* Nothing the simulator started may outlive it. */
        int left = processes_under(work_dir);
        kube_client_free(admin);
        kubeapi_free(api);
        free(work_dir);
        assert_int_equal(left, 0);
        return 0;
}

/* Scheduled, started as a local etcd on its own address, Running and Ready. */
static void test_pod_runs(void **state)
{
        etcd_cluster *c = load_cluster();
        membership_plan *plan = membership_plan_steady(c, "cluster.local");
        json_t *pvc = render_member_pvc(c, plan, 0);
        json_t *pod = render_member_pod(c, plan, 0);
        _cleanup_free_ char *addr = NULL, *folder = NULL;
        json_t *got;

        if (kube_apply(admin, pvc, NULL, false, false, NULL) < 0 ||
            kube_apply(admin, pod, NULL, false, false, NULL) < 0)
                fail_msg("%s", kube_client_last_error(admin));
        got = wait_pod(running_and_ready, 0, "Running and Ready");
        addr = nodesim_pod_address(sim, NS, POD);
        assert_non_null(addr);
        assert_true(strneq(addr, "127.0.0.", 8));
        assert_string_equal(jstr(got, "status.podIP"), addr);
        assert_string_equal(jstr(got, "status.hostIP"), "127.0.0.1");
        assert_true(json_is_true(jget(got, "status.containerStatuses.0.ready")));
        /* The data directory lives in the claim's folder. */
        folder = xasprintf("%s/volumes/" NS "/" PVC "/data", work_dir);
        assert_true(path_is_dir(folder));
        json_decref(got);
        json_decref(pvc);
        json_decref(pod);
        membership_plan_free(plan);
        etcd_cluster_free(c);
}

/* The member answers through its DNS name, as gitcd would reach it. */
static void test_dns_name(void **state)
{
        etcd_client_opts opts = {.endpoints = "http://" DNS_NAME ":2379"};
        _cleanup_free_ char *addr = nodesim_pod_address(sim, NS, POD);
        struct addrinfo hints = {.ai_family = AF_INET}, *ai = NULL;
        etcd_endpoint_status *st = NULL;
        etcd_kv_list *kvs = NULL;
        etcd_client *ec = NULL;
        char ip[64];

        assert_int_equal(getaddrinfo(DNS_NAME, NULL, &hints, &ai), 0);
        assert_int_equal(
            getnameinfo(ai->ai_addr, ai->ai_addrlen, ip, sizeof(ip), NULL, 0, NI_NUMERICHOST), 0);
        freeaddrinfo(ai);
        assert_string_equal(ip, addr);

        assert_int_equal(etcd_client_new(&opts, &ec), 0);
        assert_int_equal(etcd_status(ec, opts.endpoints, &st), 0);
        assert_string_equal(st->version, "3.5.16");
        etcd_endpoint_status_free(st);
        assert_int_equal(etcd_put(ec, "/k", "v", 1, NULL), 0);
        assert_int_equal(etcd_get(ec, "/k", false, &kvs), 0);
        assert_int_equal(kvs->n, 1);
        assert_string_equal(kvs->kvs[0].value, "v");
        etcd_kv_list_free(kvs);
        etcd_client_free(ec);
}

/* kill -9: restarted with its data, restartCount 1, Ready again. */
static void test_crash_restart(void **state)
{
        pid_t pid = nodesim_pod_pid(sim, NS, POD);
        etcd_client_opts opts = {.endpoints = "http://" DNS_NAME ":2379"};
        etcd_kv_list *kvs = NULL;
        etcd_client *ec = NULL;
        json_t *got;

        assert_true(pid > 0);
        assert_int_equal(kill(pid, SIGKILL), 0);
        got = wait_pod(running_and_ready, 1, "Ready again with restartCount 1");
        assert_non_null(jget(got, "status.containerStatuses.0.lastState.terminated"));
        assert_true(nodesim_pod_pid(sim, NS, POD) != pid);
        json_decref(got);

        assert_int_equal(etcd_client_new(&opts, &ec), 0);
        assert_int_equal(etcd_get(ec, "/k", false, &kvs), 0);
        assert_int_equal(kvs->n, 1);
        etcd_kv_list_free(kvs);
        etcd_client_free(ec);
}

/* Deleting the Pod stops the process and removes the object (grace period honoured). */
static void test_delete_pod(void **state)
{
        pid_t pid = nodesim_pod_pid(sim, NS, POD);

        assert_true(pid > 0);
        assert_int_equal(kube_delete(admin, &pods, NS, POD, NULL), 0);
        wait_gone(&pods, POD);
        /* The simulator reaped it before deleting the object. */
        assert_int_equal(kill(pid, 0), -1);
        assert_int_equal(errno, ESRCH);
        assert_int_equal(processes_under(work_dir), 0);
}

/* Deleting the claim (no Pod uses it any more): the object and its folder go. */
static void test_delete_pvc(void **state)
{
        _cleanup_free_ char *folder = xasprintf("%s/volumes/" NS "/" PVC, work_dir);
        time_t deadline = time(NULL) + WAIT_S;

        assert_true(path_is_dir(folder));
        assert_int_equal(kube_delete(admin, &pvcs, NS, PVC, NULL), 0);
        wait_gone(&pvcs, PVC);
        while (path_exists(folder)) {
                if (time(NULL) > deadline)
                        fail_msg("%s still exists after %d s", folder, WAIT_S);
                sleep_ms(200);
        }
}

static json_t *simple_pod(const char *name, const char *image, json_t *args, json_t *mounts,
                          json_t *volumes)
{
        json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:[{s:s, s:s, s:o, s:o}], "
                                "s:o}}",
                                "apiVersion", "v1", "kind", "Pod", "metadata", "name", name,
                                "namespace", NS, "spec", "hostname", name, "subdomain", "scratch",
                                "containers", "name", "etcd", "image", image, "command", args,
                                "volumeMounts", mounts, "volumes", volumes);
        return pod;
}

static bool is_waiting_for(json_t *pod, const char *reason)
{
        return streq_ptr(jstr(pod, "spec.nodeName"), NODE) &&
               streq_ptr(jstr(pod, "status.phase"), "Pending") &&
               streq_ptr(jstr(pod, "status.containerStatuses.0.state.waiting.reason"), reason) &&
               !jget(pod, "status.podIP");
}

static json_t *wait_named(const char *name, bool (*check)(json_t *, const char *), const char *arg)
{
        time_t deadline = time(NULL) + WAIT_S;
        json_t *pod = NULL;

        for (;;) {
                if (kube_get(admin, &pods, NS, name, &pod) == 0 && check(pod, arg))
                        return pod;
                json_decref(pod);
                pod = NULL;
                if (time(NULL) > deadline)
                        fail_msg("Pod %s: not %s after %d s", name, arg, WAIT_S);
                sleep_ms(200);
        }
}

static bool crash_looping(json_t *pod, const char *unused)
{
        return streq_ptr(jstr(pod, "status.phase"), "Running") &&
               streq_ptr(jstr(pod, "status.containerStatuses.0.state.waiting.reason"),
                         "CrashLoopBackOff") &&
               json_integer_value(jget(pod, "status.containerStatuses.0.restartCount")) >= 3;
}

static bool running(json_t *pod, const char *unused)
{
        return streq_ptr(jstr(pod, "status.phase"), "Running") && pod_ready(pod) &&
               jget(pod, "status.containerStatuses.0.state.running");
}

/*
 * Volumes and the ways a Pod fails to run: emptyDir and Secret folders with
 * rewritten flags, listen URLs on the Pod's address; a missing claim keeps a
 * Pod Pending; an unknown image version is ErrImagePull; a process that keeps
 * exiting ends in CrashLoopBackOff.
 */
static void test_volumes_and_failures(void **state)
{
        kube_gvr secrets = {"", "v1", "secrets", true};
        json_t *secret = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
                                   "Secret", "metadata", "name", "scratch-tls", "stringData",
                                   "ca.crt", "not really a certificate\n");
        json_t *mounts = json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "scratch", "mountPath",
                                   "/scratch", "name", "tls", "mountPath", "/etc/tls");
        json_t *volumes =
            json_pack("[{s:s, s:{}}, {s:s, s:{s:s, s:i}}]", "name", "scratch", "emptyDir", "name",
                      "tls", "secret", "secretName", "scratch-tls", "defaultMode", 0400);
        json_t *args = json_pack("[s, s, s, s, s, s, s]", "etcd", "--data-dir=/scratch/data",
                                 "--listen-client-urls=http://0.0.0.0:2379",
                                 "--advertise-client-urls=http://scratch-0.scratch." NS ".svc:2379",
                                 "--listen-peer-urls=http://0.0.0.0:2380",
                                 "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                                 "--initial-cluster=default=http://127.0.0.1:2380");
        json_t *objs[] = {
            simple_pod("scratch-0", "quay.io/coreos/etcd:v3.5.16", args, mounts, volumes),
            simple_pod("noclaim-0", "quay.io/coreos/etcd:v3.5.16", json_pack("[s]", "etcd"),
                       json_pack("[{s:s, s:s}]", "name", "data", "mountPath", "/var/lib/etcd"),
                       json_pack("[{s:s, s:{s:s}}]", "name", "data", "persistentVolumeClaim",
                                 "claimName", "no-such-claim")),
            simple_pod("badimage-0", "quay.io/coreos/etcd:v9.9.9", json_pack("[s]", "etcd"),
                       json_array(), json_array()),
            simple_pod("crash-0", "quay.io/coreos/etcd:v3.5.16",
                       json_pack("[s, s]", "etcd", "--no-such-flag"), json_array(), json_array()),
        };
        _cleanup_free_ char *addr = NULL, *cmdline_path = NULL, *cmdline = NULL, *want = NULL;
        _cleanup_free_ char *ca = NULL, *ca_path = NULL, *listen = NULL;
        struct stat st;
        json_t *pod;
        size_t len;
        pid_t pid;

        assert_int_equal(kube_apply(admin, secret, NULL, false, false, NULL), 0);
        for (size_t i = 0; i < ARRAY_SIZE(objs); i++)
                if (kube_apply(admin, objs[i], NULL, false, false, NULL) < 0)
                        fail_msg("%s", kube_client_last_error(admin));

        /* A running process whose folders and addresses were mapped to the host. */
        pod = wait_named("scratch-0", running, "running");
        addr = nodesim_pod_address(sim, NS, "scratch-0");
        assert_non_null(addr);
        pid = nodesim_pod_pid(sim, NS, "scratch-0");
        assert_true(pid > 0);
        cmdline_path = xasprintf("/proc/%d/cmdline", (int)pid);
        assert_int_equal(read_file(cmdline_path, 1 << 20, &cmdline, &len), 0);
        for (size_t i = 0; i < len; i++)
                if (cmdline[i] == '\0')
                        cmdline[i] = ' ';
        want = xasprintf("--data-dir=%s/pods/" NS "/scratch-0-%s/scratch/data", work_dir,
                         jstr(pod, "metadata.uid"));
        listen = xasprintf("--listen-client-urls=http://%s:2379 ", addr);
        if (!strstr(cmdline, want) || !strstr(cmdline, listen))
                fail_msg("unexpected command line: %s", cmdline);
        ca_path = xasprintf("%s/pods/" NS "/scratch-0-%s/tls/ca.crt", work_dir,
                            jstr(pod, "metadata.uid"));
        assert_int_equal(read_file(ca_path, 4096, &ca, &len), 0);
        assert_string_equal(ca, "not really a certificate\n");
        assert_int_equal(stat(ca_path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0400);
        json_decref(pod);

        pod = wait_named("noclaim-0", is_waiting_for, "ContainerCreating");
        assert_non_null(
            strstr(jstr(pod, "status.containerStatuses.0.state.waiting.message"), "no-such-claim"));
        json_decref(pod);
        pod = wait_named("badimage-0", is_waiting_for, "ErrImagePull");
        json_decref(pod);
        pod = wait_named("crash-0", crash_looping, "in CrashLoopBackOff");
        json_decref(pod);

        for (size_t i = 0; i < ARRAY_SIZE(objs); i++) {
                const char *name = jstr(objs[i], "metadata.name");
                assert_int_equal(kube_delete(admin, &pods, NS, name, NULL), 0);
        }
        for (size_t i = 0; i < ARRAY_SIZE(objs); i++) {
                wait_gone(&pods, jstr(objs[i], "metadata.name"));
                json_decref(objs[i]);
        }
        assert_int_equal(kill(pid, 0), -1);
        assert_int_equal(kube_delete(admin, &secrets, NS, "scratch-tls", NULL), 0);
        json_decref(secret);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pod_runs),      cmocka_unit_test(test_dns_name),
            cmocka_unit_test(test_crash_restart), cmocka_unit_test(test_delete_pod),
            cmocka_unit_test(test_delete_pvc),    cmocka_unit_test(test_volumes_and_failures),
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
        tmp = harness_tmpdir("gitcd-nodesim");
        /* Before any thread starts: the whole process gets the private /etc/hosts. */
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
