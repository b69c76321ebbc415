/*
 * Leaf certificate renewal on the Kubernetes target, against the real
 * kube-apiserver and node simulator of tests/harness/kubeapi.h (skipped,
 * 77, without them or without root): `gitcd run --target kubernetes` with
 * 60 s certificates renewed 40 s early updates the cluster's TLS Secrets
 * with certificates from the same CA and a new serial, twice, without
 * touching a member Pod, and `gitcd status` shows the new expiry.
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

#include "api/yaml.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "pki/pki.h"
#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/harness/kubeapi.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NS      "default"
#define VERSION "3.5.16"
#define NODE    "node-1"

static kubeapi *api;
static nodesim *sim;
static kube_client *admin;
static char *root;

static const kube_gvr secrets = {"", "v1", "secrets", true};
static const kube_gvr pods = {"", "v1", "pods", true};

static void apply_yaml_file(const char *rel)
{
        const char *src = getenv("GITCD_SOURCE_ROOT");
        _cleanup_free_ char *path = path_join(src ? src : ".", rel);
        ydoc_list docs = {0};
        diag_list diags = {0};
        assert_int_equal(yaml_load_file(path, NULL, &docs, &diags), 0);
        for (size_t i = 0; i < docs.n; i++) {
                json_t *obj = ynode_to_json(docs.docs[i].root);
                if (json_is_object(obj) && kube_apply(admin, obj, "e2e", false, false, NULL) < 0)
                        fail_msg("%s: %s", rel, kube_client_last_error(admin));
                json_decref(obj);
        }
        ydoc_list_release(&docs);
        diag_list_release(&diags);
}

/* The serial of the certificate in a kubernetes.io/tls Secret; NULL when absent. */
static char *secret_serial(const char *name, char **ret_issuer_pem)
{
        json_t *s = NULL;
        if (kube_get(admin, &secrets, NS, name, &s) < 0)
                return NULL;
        const char *b64 = json_string_value(json_object_get(json_object_get(s, "data"), "tls.crt"));
        char *serial = NULL;
        size_t len = 0;
        char *pem = NULL;
        if (b64 && kube_base64_decode(b64, &pem, &len) < 0)
                pem = NULL;
        pki_cert *c = NULL;
        if (pem && pki_cert_from_pem(pem, len, name, &c) == 0) {
                _cleanup_free_ char *dir = harness_tmpdir("gitcd-kt-serial");
                _cleanup_free_ char *f = path_join(dir, "tls.crt");
                int64_t not_after = 0;
                if (pki_write_pem(f, NULL, c, NULL) == 0)
                        (void)pki_leaf_info(dir, &not_after, &serial);
                (void)rm_rf(dir);
        }
        if (ret_issuer_pem) {
                const char *ca =
                    json_string_value(json_object_get(json_object_get(s, "data"), "ca.crt"));
                *ret_issuer_pem = ca ? xstrdup(ca) : NULL;
        }
        pki_cert_free(c);
        free(pem);
        json_decref(s);
        return serial;
}

/* uid of every member Pod, joined: a Pod deleted or recreated changes it. */
static char *pod_uids(void)
{
        json_t *items = NULL;
        if (kube_list(admin, &pods, NS, "gitcd.io/cluster=kr", &items, NULL) < 0)
                fail_msg("list pods: %s", kube_client_last_error(admin));
        strbuf sb = STRBUF_INIT;
        size_t i;
        json_t *p;
        json_array_foreach(items, i, p)
        {
                sb_append(
                    &sb, json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")));
                sb_appendc(&sb, ',');
        }
        json_decref(items);
        return sb_detach(&sb);
}

static void test_secrets_renewed(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        e2e_write_file(e, "kr.yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: kr\n"
                       "  namespace: " NS "\n"
                       "spec:\n"
                       "  replicas: 3\n"
                       "  version: \"" VERSION "\"\n"
                       "  progressDeadlineSeconds: 240\n"
                       "  tls:\n"
                       "    provider: auto\n"
                       "    client:\n"
                       "      enabled: true\n"
                       "    peer:\n"
                       "      enabled: true\n"
                       "    auto:\n"
                       "      validity: 60s\n"
                       "      renewBefore: 40s\n");
        const char *args[] = {
            "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(api), "--context",
            "gitcd",    NULL};
        pid_t d = e2e_start_daemon(e, args);
        assert_true(e2e_wait_ready(e, "kr", 3, 240));

        _cleanup_free_ char *ca0 = NULL;
        char *first = secret_serial("kr-peer-tls", &ca0);
        assert_non_null(first);
        _cleanup_free_ char *uids = pod_uids();

        /* Two renewals (every ~20 s): a new serial in the Secret, from the same CA. */
        char *last = xstrdup(first);
        int renewals = 0;
        int64_t end = now_mono_ms() + 120 * 1000;
        while (renewals < 2 && now_mono_ms() < end) {
                _cleanup_free_ char *ca = NULL;
                char *s = secret_serial("kr-peer-tls", &ca);
                if (s && !streq(s, last)) {
                        renewals++;
                        assert_string_equal(ca, ca0);
                        free(last);
                        last = s;
                } else
                        free(s);
                usleep(500 * 1000);
        }
        if (renewals < 2)
                fail_msg("%d renewals of the peer Secret seen, 2 wanted", renewals);
        _cleanup_free_ char *client = secret_serial("kr-client-tls", NULL);
        _cleanup_free_ char *op = secret_serial("kr-operator-tls", NULL);
        assert_non_null(client);
        assert_non_null(op);

        /* The members were not touched for it. */
        _cleanup_free_ char *uids2 = pod_uids();
        assert_string_equal(uids, uids2);
        assert_true(e2e_audit_count(e, "kr", "tls.renew") >= 2);
        json_t *st = e2e_status(e, "kr");
        /* client, peer, operator, and the cluster CA */
        assert_true(json_array_size(json_object_get(st, "certificates")) == 4);
        json_decref(st);

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        free(first);
        free(last);
        e2e_free(e);
}

int main(void)
{
        if (!e2e_have_version(VERSION))
                return 77;
        _cleanup_free_ char *bin = kubeapi_find_binary();
        if (!bin)
                return 77;
        root = harness_tmpdir("gitcd-e2e-kube-tls");
        char *hosts = NULL;
        if (kubeapi_private_hosts(root, &hosts) < 0) {
                fprintf(stderr, "no private mount namespace (needs root): skipped\n");
                (void)rm_rf(root);
                return 77;
        }
        if (kubeapi_start(&api) < 0)
                return 77;
        admin = kubeapi_client(api, "admin");
        assert_int_equal(kubeapi_create_namespace(api, NS), 0);
        assert_int_equal(kubeapi_create_namespace(api, "gitcd"), 0);
        apply_yaml_file("deploy/rbac.yaml");
        _cleanup_free_ char *work = path_join(root, "node");
        assert_int_equal(nodesim_start(api, NODE, work, hosts, &sim), 0);

        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_secrets_renewed),
        };
        int failed = cmocka_run_group_tests(tests, NULL, NULL);

        nodesim_free(sim);
        kube_client_free(admin);
        kubeapi_free(api);
        free(hosts);
        (void)rm_rf(root);
        free(root);
        return failed;
}
