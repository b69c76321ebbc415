/*
 * The four old operators' layouts (tests/harness/layouts.h) come up as real
 * 3-member etcd clusters on a real kube-apiserver v1.20.2 with a real
 * kube-controller-manager (StatefulSet, ReplicaSet, garbage collector) and
 * the node simulator playing kubelet: coreos (bare Pods, with TLS from the
 * test's CA), etcd-io and cozystack (StatefulSets; cozystack twice: with
 * peer auto-TLS, and with TLS Secrets from the test's CA and client
 * certificates), improbable (one ReplicaSet per peer). For each: etcd's
 * member list holds three started members named and addressed as the
 * operator names them, and a write and a read through the client Service's
 * Pods work. For the StatefulSet ones, a deleted Pod is recreated by the
 * controller and its member rejoins with its data. A member removed from
 * etcd exits, and its Pod follows its restartPolicy: a coreos Pod (Never)
 * ends, a StatefulSet Pod (Always) is restarted. The garbage collector
 * acts on the operators' ownerReferences: deleting etcd-io's custom
 * resource with propagation Orphan leaves its StatefulSet and Pods running
 * without the reference, deleting cozystack's in the background takes its
 * StatefulSet and member Pods with it.
 *
 * Needs root (a private /etc/hosts for the Pods' DNS names), the
 * kube-apiserver and kube-controller-manager binaries
 * (scripts/build-kube-apiserver) and etcd 3.5.16; skipped (77) without
 * them. Slow suite: fifteen etcd processes on two cores.
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
#include "etcd/errors.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "tests/harness/layouts.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define WAIT_S 180

static char *tmp, *hosts_path;
static kubeapi *api;
static nodesim *sim;
static kube_client *admin;
static pki_key *ca_key;
static pki_cert *ca;
static const kube_gvr pods = {"", "v1", "pods", true};

typedef struct fixture {
        layout_kind kind;
        layout_opts opts;
        const char *member0_peer_url; /* what etcd must know member NAME-0 by; NULL: random names */
} fixture;

static fixture fixtures[] = {
    {LAYOUT_COREOS, {.name = "co", .ns = "l-coreos", .operator_replicas = 1}, NULL},
    {LAYOUT_ETCDIO,
     {.name = "eio", .ns = "l-etcdio"},
     "http://eio-0.eio.l-etcdio.svc.cluster.local:2380"},
    {LAYOUT_IMPROBABLE, {.name = "imp", .ns = "l-improbable"}, "http://imp-0.imp:2380"},
    {LAYOUT_COZYSTACK,
     {.name = "cozy", .ns = "l-cozystack", .operator_namespace = "cozy-operator-system"},
     "https://cozy-0.cozy-headless.l-cozystack.svc:2380"},
    {LAYOUT_COZYSTACK,
     {.name = "cozyt", .ns = "l-cozytls", .operator_namespace = "cozy-operator-system"},
     "https://cozyt-0.cozyt-headless.l-cozytls.svc:2380"},
};

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static int setup(void **state)
{
        assert_int_equal(kubeapi_start(&api), 0);
        assert_int_equal(kubeapi_start_controllers(api), 0);
        admin = kubeapi_client(api, "admin");
        _cleanup_free_ char *work = path_join(tmp, "node");
        assert_int_equal(nodesim_start(api, "node-a", work, hosts_path, &sim), 0);
        assert_int_equal(pki_ca_create("layouts-test-ca", 2, &ca_key, &ca), 0);
        /* coreos with TLS: its three Secrets, https for clients and peers */
        fixtures[0].opts.ca = ca;
        fixtures[0].opts.ca_key = ca_key;
        fixtures[4].opts.ca = ca;
        fixtures[4].opts.ca_key = ca_key;
        return 0;
}

static int teardown(void **state)
{
        kube_client_free(admin);
        nodesim_free(sim);
        kubeapi_free(api);
        pki_key_free(ca_key);
        pki_cert_free(ca);
        return 0;
}

static etcd_client *client_for(const fixture *f)
{
        etcd_client *ec = NULL;

        assert_int_equal(layout_etcd_client(admin, f->kind, &f->opts, &ec), 0);
        return ec;
}

static void test_layouts_healthy(void **state)
{
        time_t start = time(NULL);

        for (size_t i = 0; i < ARRAY_SIZE(fixtures); i++)
                assert_int_equal(layout_create(admin, fixtures[i].kind, &fixtures[i].opts), 0);
        for (size_t i = 0; i < ARRAY_SIZE(fixtures); i++) {
                const fixture *f = &fixtures[i];
                etcd_client *ec;
                etcd_members *ml = NULL;
                etcd_kv_list *kvs = NULL;
                _cleanup_free_ char *key = xasprintf("written-through/%s", f->opts.name);
                bool found = false;

                assert_int_equal(layout_wait_healthy(admin, f->kind, &f->opts, WAIT_S), 0);
                ec = client_for(f);
                assert_int_equal(etcd_member_list(ec, &ml), 0);
                assert_int_equal(ml->n, 3);
                for (size_t m = 0; m < ml->n; m++) {
                        assert_true(!isempty(ml->members[m].name));
                        assert_int_equal(ml->members[m].n_client_urls, 1);
                        if (f->member0_peer_url &&
                            streq(ml->members[m].peer_urls[0], f->member0_peer_url))
                                found = true;
                }
                assert_true(!f->member0_peer_url || found);
                assert_int_equal(etcd_put(ec, key, "v", 1, NULL), 0);
                assert_int_equal(etcd_get(ec, key, false, &kvs), 0);
                assert_int_equal(kvs->n, 1);
                etcd_kv_list_free(kvs);
                etcd_members_free(ml);
                etcd_client_free(ec);
        }
        fprintf(stderr, "%zu layouts healthy in %lld s\n", ARRAY_SIZE(fixtures),
                (long long)(time(NULL) - start));
}

/* The uid of a Pod, NULL when it does not exist. */
static char *pod_uid(const char *ns, const char *name)
{
        json_t *pod = NULL;
        char *uid = NULL;

        if (kube_get(admin, &pods, ns, name, &pod) == 0)
                uid = xstrdup_null(
                    json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid")));
        json_decref(pod);
        return uid;
}

static void test_statefulset_recreates_pod(void **state)
{
        for (size_t i = 0; i < ARRAY_SIZE(fixtures); i++) {
                const fixture *f = &fixtures[i];
                _cleanup_free_ char *pod = NULL, *old_uid = NULL, *endpoint = NULL;
                _cleanup_free_ char *key = xasprintf("before-delete/%s", f->opts.name);
                etcd_client *ec, *one;
                etcd_kv_list *kvs = NULL;
                time_t deadline;

                if ((f->kind != LAYOUT_ETCDIO && f->kind != LAYOUT_COZYSTACK) || f->opts.ca)
                        continue;
                pod = xasprintf("%s-1", f->opts.name);
                ec = client_for(f);
                assert_int_equal(etcd_put(ec, key, "kept", 4, NULL), 0);
                etcd_client_free(ec);
                old_uid = pod_uid(f->opts.ns, pod);
                assert_non_null(old_uid);
                assert_int_equal(kube_delete(admin, &pods, f->opts.ns, pod, NULL), 0);

                /* the StatefulSet controller makes a new Pod of the same name */
                deadline = time(NULL) + WAIT_S;
                for (;;) {
                        _cleanup_free_ char *uid = pod_uid(f->opts.ns, pod);
                        if (uid && !streq(uid, old_uid))
                                break;
                        if (time(NULL) > deadline)
                                fail_msg("%s/%s was not recreated after %d s", f->opts.ns, pod,
                                         WAIT_S);
                        sleep_ms(300);
                }
                assert_int_equal(layout_wait_healthy(admin, f->kind, &f->opts, WAIT_S), 0);

                /* the member rejoined with its data: a read through it alone */
                if (f->kind == LAYOUT_ETCDIO)
                        endpoint = xasprintf("http://%s.%s.%s.svc.cluster.local:2379", pod,
                                             f->opts.name, f->opts.ns);
                else
                        endpoint = xasprintf("http://%s.%s-headless.%s.svc:2379", pod, f->opts.name,
                                             f->opts.ns);
                etcd_client_opts eo = {.endpoints = endpoint};
                assert_int_equal(etcd_client_new(&eo, &one), 0);
                deadline = time(NULL) + WAIT_S;
                while (etcd_get(one, key, false, &kvs) < 0 || kvs->n != 1) {
                        etcd_kv_list_free(kvs);
                        kvs = NULL;
                        if (time(NULL) > deadline)
                                fail_msg("%s does not serve %s: %s", endpoint, key,
                                         etcd_client_last_error(one));
                        sleep_ms(300);
                }
                assert_memory_equal(kvs->kvs[0].value, "kept", 4);
                etcd_kv_list_free(kvs);
                etcd_client_free(one);
        }
}

/* The Pod whose etcd member is named member, once check(pod) holds. */
static json_t *wait_member_pod(const fixture *f, const char *member, bool (*check)(json_t *),
                               const char *what)
{
        time_t deadline = time(NULL) + WAIT_S;
        json_t *pod = NULL;

        for (;;) {
                json_decref(pod);
                pod = NULL;
                if (kube_get(admin, &pods, f->opts.ns, member, &pod) == 0 && check(pod))
                        return pod;
                if (time(NULL) > deadline)
                        fail_msg("%s/%s is not %s after %d s", f->opts.ns, member, what, WAIT_S);
                sleep_ms(300);
        }
}

static bool ended(json_t *pod)
{
        const char *phase =
            json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
        return streq_ptr(phase, "Succeeded") || streq_ptr(phase, "Failed");
}

static bool restarted(json_t *pod)
{
        json_t *cs =
            json_array_get(json_object_get(json_object_get(pod, "status"), "containerStatuses"), 0);
        return json_integer_value(json_object_get(cs, "restartCount")) > 0;
}

/* Remove the member named after the fixture's last Pod from etcd; return that Pod's name. */
static char *remove_last_member(const fixture *f)
{
        etcd_client *ec = client_for(f);
        etcd_members *ml = NULL;
        char *name = NULL;

        assert_int_equal(etcd_member_list(ec, &ml), 0);
        for (size_t m = 0; m < ml->n; m++)
                if (!name || strcmp(ml->members[m].name, name) > 0) {
                        free(name);
                        name = xstrdup(ml->members[m].name);
                }
        for (size_t m = 0; m < ml->n; m++) {
                time_t deadline = time(NULL) + WAIT_S;
                int r;
                if (!streq(ml->members[m].name, name))
                        continue;
                /* etcd refuses ("unhealthy cluster") until it has had a quorum for 5 s */
                while ((r = etcd_member_remove(ec, ml->members[m].id)) == ETCD_ERR_UNHEALTHY &&
                       time(NULL) < deadline)
                        sleep_ms(500);
                assert_int_equal(r, 0);
        }
        etcd_members_free(ml);
        etcd_client_free(ec);
        return name;
}

static void test_removed_member_exits(void **state)
{
        /* coreos: restartPolicy Never, the Pod ends and stays ended */
        _cleanup_free_ char *co = remove_last_member(&fixtures[0]);
        json_t *pod = wait_member_pod(&fixtures[0], co, ended, "ended");
        json_t *cs =
            json_array_get(json_object_get(json_object_get(pod, "status"), "containerStatuses"), 0);
        assert_int_equal(json_integer_value(json_object_get(cs, "restartCount")), 0);
        json_decref(pod);
        /* etcd-io: a StatefulSet's Pod (Always) is restarted */
        _cleanup_free_ char *eio = remove_last_member(&fixtures[1]);
        assert_string_equal(eio, "eio-2");
        pod = wait_member_pod(&fixtures[1], eio, restarted, "restarted");
        json_decref(pod);
}

static bool gone(const kube_gvr *gvr, const char *ns, const char *name)
{
        json_t *obj = NULL;
        int r = kube_get(admin, gvr, ns, name, &obj);

        json_decref(obj);
        return r == -ENOENT;
}

static void wait_until(bool (*check)(const kube_gvr *, const char *, const char *),
                       const kube_gvr *gvr, const char *ns, const char *name, const char *what)
{
        time_t deadline = time(NULL) + WAIT_S;

        while (!check(gvr, ns, name)) {
                if (time(NULL) > deadline)
                        fail_msg("%s %s/%s: not %s after %d s", gvr->resource, ns, name, what,
                                 WAIT_S);
                sleep_ms(300);
        }
}

static bool unowned(const kube_gvr *gvr, const char *ns, const char *name)
{
        json_t *obj = NULL;
        bool r = kube_get(admin, gvr, ns, name, &obj) == 0 &&
                 json_array_size(
                     json_object_get(json_object_get(obj, "metadata"), "ownerReferences")) == 0;

        json_decref(obj);
        return r;
}

static void test_garbage_collector(void **state)
{
        const kube_gvr sts = {"apps", "v1", "statefulsets", true};
        const kube_gvr etcdio = {"operator.etcd.io", "v1alpha1", "etcdclusters", true};
        const kube_gvr cozy = {"etcd.aenix.io", "v1alpha1", "etcdclusters", true};
        const fixture *e = &fixtures[1], *c = &fixtures[3];

        /* Orphan: the collector strips the references, then lets the resource go */
        assert_int_equal(kube_delete(admin, &etcdio, e->opts.ns, e->opts.name, "Orphan"), 0);
        wait_until(gone, &etcdio, e->opts.ns, e->opts.name, "deleted");
        wait_until(unowned, &sts, e->opts.ns, e->opts.name, "orphaned");
        assert_false(gone(&pods, e->opts.ns, "eio-0"));
        /* Background: the StatefulSet goes, and its Pods with it */
        assert_int_equal(kube_delete(admin, &cozy, c->opts.ns, c->opts.name, "Background"), 0);
        wait_until(gone, &sts, c->opts.ns, c->opts.name, "deleted");
        wait_until(gone, &pods, c->opts.ns, "cozy-0", "deleted");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_layouts_healthy),
            cmocka_unit_test(test_statefulset_recreates_pod),
            cmocka_unit_test(test_removed_member_exits),
            cmocka_unit_test(test_garbage_collector),
        };
        char *bin = kubeapi_find_binary(), *cm = kubeapi_find_controller_manager();
        int r;

        if (!bin || !cm || !harness_have_etcd("3.5.16")) {
                printf("skipped: needs kube-apiserver, kube-controller-manager (run "
                       "scripts/build-kube-apiserver) and etcd 3.5.16\n");
                free(bin);
                free(cm);
                return 77;
        }
        free(bin);
        free(cm);
        tmp = harness_tmpdir("gitcd-layouts");
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
