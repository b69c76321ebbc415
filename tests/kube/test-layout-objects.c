/*
 * Without an apiserver: the kubelet's $(VAR) expansion the node simulator
 * applies (tests/harness/podenv.h), and the objects tests/harness/layouts.h
 * builds for each old operator, held to the facts read from the operators'
 * sources (names, labels and selectors, the member Pods' commands and
 * environment, owners before dependents, TLS Secrets). The slow
 * kube-layouts test runs the same objects for real; this one runs under
 * the sanitizers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/harness/layouts.h"
#include "tests/harness/podenv.h"
#include "util/macro.h"
#include "util/xalloc.h"

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

static void expect(const char *in, const char *out)
{
        char *const vars[] = {"A=alpha", "EMPTY=", "B=one", "B=two"};
        char *got = podenv_expand(in, vars, ARRAY_SIZE(vars));

        assert_string_equal(got, out);
        free(got);
}

static void test_expand(void **state)
{
        expect("", "");
        expect("plain", "plain");
        expect("$(A)", "alpha");
        expect("--name=$(A).x", "--name=alpha.x");
        expect("$(A)$(A)", "alphaalpha");
        expect("[$(EMPTY)]", "[]");
        expect("$(B)", "two");        /* the later definition wins */
        expect("$(NOPE)", "$(NOPE)"); /* undefined: as written */
        expect("$$(A)", "$(A)");      /* escaped */
        expect("$$", "$");
        expect("$$$(A)", "$alpha");
        expect("cost $5", "cost $5"); /* a lone $ stays */
        expect("end$", "end$");
        expect("$(A", "$(A"); /* unclosed */
        expect("x$(A)y$(NOPE)z", "xalphay$(NOPE)z");
        assert_string_equal(podenv_get((char *const[]){"X=1", "X=2"}, 2, "X"), "2");
        assert_null(podenv_get((char *const[]){"XY=1"}, 1, "X"));
}

/* The entries of a layout with its defaults (NAME "demo", NS "ns1", size 3). */
static json_t *objects(layout_kind kind, const pki_cert *ca, const pki_key *key)
{
        layout_opts o = {
            .name = "demo", .ns = "ns1", .ca = ca, .ca_key = key, .operator_replicas = 1};
        json_t *e = NULL;

        assert_int_equal(layout_objects(kind, &o, &e), 0);
        return e;
}

/* The objects of a kind, in order. */
static size_t of_kind(json_t *entries, const char *kind, json_t **ret, size_t max)
{
        size_t i, n = 0;
        json_t *e;

        json_array_foreach(entries, i, e)
        {
                if (streq_ptr(jstr(e, "object.kind"), kind) && n < max)
                        ret[n++] = jget(e, "object");
        }
        return n;
}

static json_t *named(json_t *entries, const char *kind, const char *name)
{
        size_t i;
        json_t *e;

        json_array_foreach(entries, i, e)
        {
                if (streq_ptr(jstr(e, "object.kind"), kind) &&
                    streq_ptr(jstr(e, "object.metadata.name"), name))
                        return jget(e, "object");
        }
        fail_msg("no %s %s", kind, name);
        return NULL;
}

/* Every owner is created before what it owns; every object has a kind, a name, an apiVersion. */
static void check_order(json_t *entries)
{
        size_t i, j;
        json_t *e, *prev;

        json_array_foreach(entries, i, e)
        {
                json_t *owner = json_object_get(e, "owner");
                bool seen = false;
                assert_non_null(jstr(e, "object.apiVersion"));
                assert_non_null(jstr(e, "object.kind"));
                assert_non_null(jstr(e, "object.metadata.name"));
                assert_non_null(jstr(e, "resource"));
                if (!owner)
                        continue;
                json_array_foreach(entries, j, prev)
                {
                        if (j >= i)
                                break;
                        if (streq_ptr(jstr(prev, "object.kind"), jstr(owner, "kind")) &&
                            streq_ptr(jstr(prev, "object.metadata.name"), jstr(owner, "name")) &&
                            streq_ptr(jstr(prev, "object.apiVersion"), jstr(owner, "apiVersion")))
                                seen = true;
                }
                assert_true(seen);
        }
}

/* The member selector picks exactly the labels the Pods (or their template) carry. */
static void check_selector(layout_kind kind, json_t *labels)
{
        layout_opts o = {.name = "demo", .ns = "ns1"};
        _cleanup_free_ char *sel = layout_member_selector(kind, &o);
        char *save = NULL;

        for (char *t = strtok_r(sel, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(t, '=');
                assert_non_null(eq);
                *eq = '\0';
                assert_string_equal(json_string_value(json_object_get(labels, t)), eq + 1);
        }
}

static bool array_has(json_t *arr, const char *s)
{
        size_t i;
        json_t *v;

        json_array_foreach(arr, i, v)
        {
                if (streq_ptr(json_string_value(v), s))
                        return true;
        }
        return false;
}

static void test_coreos(void **state)
{
        pki_key *key = NULL;
        pki_cert *ca = NULL;
        json_t *pods[4], *e, *secret;

        assert_int_equal(pki_ca_create("test-ca", 1, &key, &ca), 0);
        e = objects(LAYOUT_COREOS, ca, key);
        check_order(e);
        assert_int_equal(of_kind(e, "Pod", pods, 4), 3);
        for (size_t i = 0; i < 3; i++) {
                const char *name = jstr(pods[i], "metadata.name");
                _cleanup_free_ char *addr = xasprintf("https://%s.demo.ns1.svc:2380", name);
                _cleanup_free_ char *flag = xasprintf("--initial-advertise-peer-urls=%s", addr);
                assert_int_equal(strlen(name), strlen("demo-") + 10);
                assert_true(strncmp(name, "demo-", 5) == 0);
                assert_string_equal(jstr(pods[i], "spec.hostname"), name);
                assert_string_equal(jstr(pods[i], "spec.subdomain"), "demo");
                assert_string_equal(jstr(pods[i], "spec.restartPolicy"), "Never");
                assert_string_equal(jstr(pods[i], "spec.containers.0.command.0"),
                                    "/usr/local/bin/etcd");
                assert_true(array_has(jget(pods[i], "spec.containers.0.command"), flag));
                assert_string_equal(jstr(pods[i], "metadata.labels.etcd_node"), name);
                /* the member's claim is named after it */
                assert_string_equal(jstr(pods[i], "spec.volumes.0.persistentVolumeClaim.claimName"),
                                    name);
                named(e, "PersistentVolumeClaim", name);
                check_selector(LAYOUT_COREOS, jget(pods[i], "metadata.labels"));
        }
        assert_string_equal(jstr(named(e, "Service", "demo"), "spec.clusterIP"), "None");
        assert_string_equal(jstr(named(e, "Service", "demo-client"), "spec.ports.0.name"),
                            "client");
        named(e, "CustomResourceDefinition", "etcdclusters.etcd.database.coreos.com");
        assert_int_equal(
            json_integer_value(jget(named(e, "Deployment", "etcd-operator"), "spec.replicas")), 1);
        secret = named(e, "Secret", "demo-peer-tls");
        assert_non_null(json_object_get(jget(secret, "data"), "peer-ca.crt"));
        secret = named(e, "Secret", "demo-client-tls");
        assert_non_null(json_object_get(jget(secret, "data"), "etcd-client.key"));
        assert_string_equal(jstr(named(e, "EtcdCluster", "demo"), "spec.TLS.static.operatorSecret"),
                            "demo-client-tls");
        json_decref(e);
        pki_key_free(key);
        pki_cert_free(ca);
}

static void test_etcdio(void **state)
{
        json_t *e = objects(LAYOUT_ETCDIO, NULL, NULL), *sts, *cm, *ctr;

        check_order(e);
        sts = named(e, "StatefulSet", "demo");
        assert_string_equal(jstr(sts, "spec.serviceName"), "demo");
        assert_null(jget(sts, "spec.podManagementPolicy")); /* OrderedReady, the default */
        check_selector(LAYOUT_ETCDIO, jget(sts, "spec.template.metadata.labels"));
        check_selector(LAYOUT_ETCDIO, jget(sts, "spec.selector.matchLabels"));
        assert_string_equal(jstr(sts, "spec.volumeClaimTemplates.0.metadata.name"), "etcd-data");
        ctr = jget(sts, "spec.template.spec.containers.0");
        assert_string_equal(jstr(ctr, "command.0"), "/usr/local/bin/etcd");
        assert_true(array_has(jget(ctr, "args"), "--name=$(POD_NAME)"));
        assert_string_equal(jstr(ctr, "volumeMounts.0.subPathExpr"), "$(POD_NAME)");
        assert_string_equal(jstr(ctr, "envFrom.0.configMapRef.name"), "demo-state");
        assert_string_equal(jstr(ctr, "image"), "gcr.io/etcd-development/etcd:v3.5.16");
        cm = named(e, "ConfigMap", "demo-state");
        assert_string_equal(jstr(cm, "data.ETCD_INITIAL_CLUSTER"),
                            "demo-0=http://demo-0.demo.ns1.svc.cluster.local:2380,"
                            "demo-1=http://demo-1.demo.ns1.svc.cluster.local:2380,"
                            "demo-2=http://demo-2.demo.ns1.svc.cluster.local:2380");
        assert_null(jget(named(e, "Service", "demo"), "spec.ports"));
        named(e, "Deployment", "etcd-operator-controller-manager");
        json_decref(e);
}

static void test_improbable(void **state)
{
        layout_opts o = {.name = "demo", .ns = "ns1"};
        json_t *e = objects(LAYOUT_IMPROBABLE, NULL, NULL), *rs[4], *peer, *ctr;
        pki_key *key = NULL;
        pki_cert *ca = NULL;

        check_order(e);
        assert_int_equal(of_kind(e, "ReplicaSet", rs, 4), 3);
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("demo-%zu", i);
                _cleanup_free_ char *url = xasprintf("http://demo-%zu.demo:2380", i);
                size_t j;
                json_t *v, *entries = e, *entry;
                assert_string_equal(jstr(rs[i], "metadata.name"), name);
                assert_string_equal(jstr(rs[i], "spec.template.spec.hostname"), name);
                assert_string_equal(jstr(rs[i], "spec.template.spec.subdomain"), "demo");
                check_selector(LAYOUT_IMPROBABLE, jget(rs[i], "spec.template.metadata.labels"));
                ctr = jget(rs[i], "spec.template.spec.containers.0");
                assert_null(json_object_get(ctr, "command")); /* the image's entrypoint */
                bool found = false;
                json_array_foreach(json_object_get(ctr, "env"), j, v)
                {
                        if (streq_ptr(jstr(v, "name"), "ETCD_INITIAL_ADVERTISE_PEER_URLS"))
                                found = streq_ptr(jstr(v, "value"), url);
                }
                assert_true(found);
                peer = named(e, "EtcdPeer", name);
                assert_string_equal(jstr(peer, "metadata.finalizers.0"),
                                    "etcdpeer.etcd.improbable.io/pvc-cleanup");
                named(e, "PersistentVolumeClaim", name);
                /* each ReplicaSet is owned by its peer */
                json_array_foreach(entries, j, entry)
                {
                        if (jget(entry, "object") == rs[i])
                                assert_string_equal(jstr(entry, "owner.kind"), "EtcdPeer");
                }
        }
        json_decref(e);
        /* this operator has no TLS */
        assert_int_equal(pki_ca_create("test-ca", 1, &key, &ca), 0);
        o.ca = ca;
        o.ca_key = key;
        e = NULL;
        assert_int_equal(layout_objects(LAYOUT_IMPROBABLE, &o, &e), -EOPNOTSUPP);
        o.ca_key = NULL;
        assert_int_equal(layout_objects(LAYOUT_COREOS, &o, &e), -EINVAL);
        o.ca = NULL;
        o.name = "";
        assert_int_equal(layout_objects(LAYOUT_COREOS, &o, &e), -EINVAL);
        assert_null(e);
        pki_key_free(key);
        pki_cert_free(ca);
}

static void test_cozystack(void **state)
{
        pki_key *key = NULL;
        pki_cert *ca = NULL;
        json_t *e = objects(LAYOUT_COZYSTACK, NULL, NULL), *sts, *ctr;

        check_order(e);
        sts = named(e, "StatefulSet", "demo");
        assert_string_equal(jstr(sts, "spec.serviceName"), "demo-headless");
        assert_string_equal(jstr(sts, "spec.podManagementPolicy"), "Parallel");
        check_selector(LAYOUT_COZYSTACK, jget(sts, "spec.template.metadata.labels"));
        assert_string_equal(jstr(sts, "spec.volumeClaimTemplates.0.metadata.name"), "data");
        ctr = jget(sts, "spec.template.spec.containers.0");
        assert_string_equal(jstr(ctr, "command.0"), "etcd");
        assert_true(array_has(jget(ctr, "args"), "--peer-auto-tls"));
        assert_true(array_has(jget(ctr, "args"), "--listen-peer-urls=https://0.0.0.0:2380"));
        assert_true(array_has(jget(ctr, "args"), "--data-dir=/var/run/etcd/default.etcd"));
        assert_string_equal(jstr(ctr, "readinessProbe.httpGet.path"), "/readyz");
        assert_string_equal(
            jstr(named(e, "ConfigMap", "demo-cluster-state"), "data.ETCD_INITIAL_CLUSTER"),
            "demo-0=https://demo-0.demo-headless.ns1.svc:2380,"
            "demo-1=https://demo-1.demo-headless.ns1.svc:2380,"
            "demo-2=https://demo-2.demo-headless.ns1.svc:2380");
        assert_string_equal(jstr(named(e, "Service", "demo-headless"), "spec.clusterIP"), "None");
        assert_string_equal(jstr(named(e, "Service", "demo"), "spec.ports.1.name"), "metrics");
        json_decref(e);

        assert_int_equal(pki_ca_create("test-ca", 1, &key, &ca), 0);
        e = objects(LAYOUT_COZYSTACK, ca, key);
        check_order(e);
        ctr = jget(named(e, "StatefulSet", "demo"), "spec.template.spec.containers.0");
        assert_false(array_has(jget(ctr, "args"), "--peer-auto-tls"));
        assert_true(array_has(jget(ctr, "args"), "--client-cert-auth"));
        /* the CA issuer's Secret as cert-manager keeps it: the CA's key is there */
        assert_non_null(
            json_object_get(jget(named(e, "Secret", "demo-peer-ca"), "data"), "tls.key"));
        assert_non_null(
            json_object_get(jget(named(e, "Secret", "demo-server-cert"), "data"), "ca.crt"));
        json_decref(e);
        pki_key_free(key);
        pki_cert_free(ca);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_expand),    cmocka_unit_test(test_coreos),
            cmocka_unit_test(test_etcdio),    cmocka_unit_test(test_improbable),
            cmocka_unit_test(test_cozystack),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
