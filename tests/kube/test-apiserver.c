/*
 * The Kubernetes client against a real kube-apiserver v1.20.2 on loopback,
 * beside a real etcd: discovery (policy/v1beta1 is the PodDisruptionBudget
 * version of 1.20), server-side apply twice (the second changes nothing),
 * dry run, a field owned by another manager, list by label, watch from a
 * list's resourceVersion, delete, and an RBAC denial with a token that has
 * no permissions.
 *
 * The client is configured from a real kubeconfig file (CA as
 * certificate-authority-data, a bearer token). One apiserver serves every
 * case. Without the kube-apiserver binary ($GITCD_KUBE_APISERVER or
 * ~/.cache/gitcd/kube/v1.20.2/kube-apiserver, built by
 * scripts/build-kube-apiserver) the test is skipped (exit 77).
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "kube/adapt.h"
#include "kube/client.h"
#include "pki/pki.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define NS "gitcd-test"

static char *apiserver_bin;
static harness_cluster *etcd;
static char *tmp, *log_path, *kubeconfig;
static pid_t apiserver_pid;
static kube_client *admin, *limited;

static char *find_apiserver(void)
{
        const char *env = getenv("GITCD_KUBE_APISERVER");
        const char *home = getenv("HOME");
        char *p;

        if (!isempty(env))
                return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
        /* Where scripts/build-kube-apiserver puts it: the same cache as scripts/setup. */
        const char *cache = getenv("GITCD_CACHE_DIR");
        const char *xdg = getenv("XDG_CACHE_HOME");
        if (!isempty(cache))
                p = xasprintf("%s/kube/v1.20.2/kube-apiserver", cache);
        else if (!isempty(xdg))
                p = xasprintf("%s/gitcd/kube/v1.20.2/kube-apiserver", xdg);
        else if (!isempty(home))
                p = xasprintf("%s/.cache/gitcd/kube/v1.20.2/kube-apiserver", home);
        else
                return NULL;
        if (access(p, X_OK) == 0)
                return p;
        free(p);
        return NULL;
}

static char *base64(const char *s)
{
        size_t n = strlen(s);
        char *out = xmalloc(4 * ((n + 2) / 3) + 1);

        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
        return out;
}

static char *write_text(const char *name, const char *text)
{
        char *p = path_join(tmp, name);
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0600), 0);
        return p;
}

/* The public half of a PEM private key, for --service-account-key-file. */
static void write_public_key(const char *key_path, const char *pub_path)
{
        FILE *in = fopen(key_path, "r"), *out;
        EVP_PKEY *pkey;

        assert_non_null(in);
        pkey = PEM_read_PrivateKey(in, NULL, NULL, NULL);
        fclose(in);
        assert_non_null(pkey);
        out = fopen(pub_path, "w");
        assert_non_null(out);
        assert_int_equal(PEM_write_PUBKEY(out, pkey), 1);
        fclose(out);
        EVP_PKEY_free(pkey);
}

static void write_pki(int port)
{
        const char *const ips[] = {"127.0.0.1", NULL};
        const char *const dns[] = {"localhost", NULL};
        pki_cert_request req = {.cn = "kube-apiserver",
                                .dns_names = dns,
                                .ip_addresses = ips,
                                .days = 1,
                                .server = true};
        pki_key *ca_key = NULL, *key = NULL, *sa_key = NULL;
        pki_cert *ca = NULL, *cert = NULL;
        _cleanup_free_ char *ca_pem = NULL, *ca_b64 = NULL, *config = NULL;
        _cleanup_free_ char *p1 = path_join(tmp, "ca.crt"), *p2 = path_join(tmp, "server.crt"),
                            *p3 = path_join(tmp, "server.key"), *p4 = path_join(tmp, "sa.key"),
                            *p5 = path_join(tmp, "sa.pub");

        assert_int_equal(pki_ca_create("kube-ca", 1, &ca_key, &ca), 0);
        assert_int_equal(pki_cert_issue(ca, ca_key, &req, &key, &cert), 0);
        assert_int_equal(pki_key_generate(&sa_key), 0);
        assert_int_equal(pki_write_pem(p1, NULL, ca, NULL), 0);
        assert_int_equal(pki_write_pem(p2, p3, cert, key), 0);
        assert_int_equal(pki_write_pem(NULL, p4, NULL, sa_key), 0);
        write_public_key(p4, p5);
        free(write_text("tokens.csv", "admin-token,admin,1,\"system:masters\"\n"
                                      "limited-token,limited,2\n"));

        assert_int_equal(pki_cert_to_pem(ca, &ca_pem), 0);
        ca_b64 = base64(ca_pem);
        config =
            xasprintf("apiVersion: v1\nkind: Config\ncurrent-context: admin\n"
                      "clusters:\n- name: local\n  cluster:\n"
                      "    server: https://127.0.0.1:%d\n"
                      "    certificate-authority-data: %s\n"
                      "users:\n- name: admin\n  user: {token: admin-token}\n"
                      "- name: limited\n  user: {tokenFile: limited.token}\n"
                      "contexts:\n"
                      "- name: admin\n  context: {cluster: local, user: admin, namespace: " NS "}\n"
                      "- name: limited\n  context: {cluster: local, user: limited, "
                      "namespace: " NS "}\n",
                      port, ca_b64);
        kubeconfig = write_text("kubeconfig", config);
        free(write_text("limited.token", "limited-token\n"));
        pki_key_free(ca_key);
        pki_key_free(key);
        pki_key_free(sa_key);
        pki_cert_free(ca);
        pki_cert_free(cert);
}

static void start_apiserver(int port)
{
        char *argv[40];
        size_t n = 0;
        int fd;

        log_path = path_join(tmp, "kube-apiserver.log");
        argv[n++] = apiserver_bin;
        argv[n++] = xasprintf("--etcd-servers=%s", etcd->endpoints);
        argv[n++] = xasprintf("--secure-port=%d", port);
        argv[n++] = xstrdup("--bind-address=127.0.0.1");
        argv[n++] = xstrdup("--advertise-address=127.0.0.1");
        argv[n++] = xstrdup("--insecure-port=0");
        argv[n++] = xstrdup("--endpoint-reconciler-type=none");
        argv[n++] = xstrdup("--disable-admission-plugins=ServiceAccount");
        argv[n++] = xasprintf("--tls-cert-file=%s/server.crt", tmp);
        argv[n++] = xasprintf("--tls-private-key-file=%s/server.key", tmp);
        argv[n++] = xasprintf("--client-ca-file=%s/ca.crt", tmp);
        argv[n++] = xasprintf("--service-account-key-file=%s/sa.pub", tmp);
        argv[n++] = xasprintf("--service-account-signing-key-file=%s/sa.key", tmp);
        argv[n++] = xstrdup("--service-account-issuer=https://kubernetes.default.svc");
        argv[n++] = xstrdup("--api-audiences=https://kubernetes.default.svc");
        argv[n++] = xasprintf("--token-auth-file=%s/tokens.csv", tmp);
        argv[n++] = xstrdup("--authorization-mode=RBAC");
        argv[n++] = xstrdup("--service-cluster-ip-range=10.96.0.0/24");
        argv[n++] = xasprintf("--cert-dir=%s/certs", tmp);
        argv[n++] = xstrdup("--etcd-prefix=/gitcd-kube-test");
        argv[n] = NULL;

        fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        apiserver_pid = fork();
        assert_true(apiserver_pid >= 0);
        if (apiserver_pid == 0) {
                /* kube-apiserver never outlives the test, however the test ends. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                dup2(fd, 1);
                dup2(fd, 2);
                execv(apiserver_bin, argv);
                _exit(127);
        }
        harness_track_pid(apiserver_pid);
        close(fd);
        for (size_t i = 1; i < n; i++)
                free(argv[i]);
}

static void print_log_tail(void)
{
        _cleanup_free_ char *data = NULL;
        size_t len = 0;

        if (read_file(log_path, 64u << 20, &data, &len) == 0)
                fprintf(stderr, "--- kube-apiserver log (end) ---\n%s\n",
                        len > 4000 ? data + len - 4000 : data);
}

/* Ready when the admin client can read the "default" namespace (bootstrap done). */
static void wait_ready(void)
{
        kube_gvr ns = {"", "v1", "namespaces", false};
        time_t deadline = time(NULL) + 120;
        int status;

        for (;;) {
                json_t *obj = NULL;
                if (kube_get(admin, &ns, NULL, "default", &obj) == 0) {
                        json_decref(obj);
                        return;
                }
                if (waitpid(apiserver_pid, &status, WNOHANG) == apiserver_pid) {
                        harness_untrack_pid(apiserver_pid);
                        apiserver_pid = 0;
                        print_log_tail();
                        fail_msg("kube-apiserver exited during start-up");
                }
                if (time(NULL) > deadline) {
                        print_log_tail();
                        fail_msg("kube-apiserver not ready after 120 s: %s",
                                 kube_client_last_error(admin));
                }
                usleep(250 * 1000);
        }
}

static kube_client *client_for(const char *context)
{
        kube_config *cfg = NULL;
        kube_client *c = NULL;
        char *err = NULL;

        if (kube_config_load(kubeconfig, context, &cfg, &err) < 0)
                fail_msg("%s", err);
        assert_int_equal(kube_client_new(cfg, &c, &err), 0);
        kube_config_free(cfg);
        return c;
}

static int setup(void **state)
{
        harness_opts opts = {.version = harness_have_etcd("3.4.23") ? "3.4.23" : "3.5.16"};
        int port = harness_free_port();

        tmp = harness_tmpdir("gitcd-kube-apiserver");
        assert_int_equal(harness_cluster_start(&opts, &etcd), 0);
        write_pki(port);
        start_apiserver(port);
        admin = client_for("admin");
        limited = client_for("limited");
        wait_ready();
        return 0;
}

static int teardown(void **state)
{
        kube_client_free(admin);
        kube_client_free(limited);
        if (apiserver_pid > 0) {
                /* SIGTERM, and SIGKILL if it has not exited after 20 s. */
                kill(apiserver_pid, SIGTERM);
                for (int i = 0; waitpid(apiserver_pid, NULL, WNOHANG) == 0; i++) {
                        if (i == 200)
                                kill(apiserver_pid, SIGKILL);
                        usleep(100 * 1000);
                }
                harness_untrack_pid(apiserver_pid);
        }
        harness_cluster_free(etcd);
        free(log_path);
        free(kubeconfig);
        free(tmp);
        return 0;
}

static json_t *config_map(const char *name, const char *label, const char *value)
{
        json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s, s:{}}, s:{s:s}}", "apiVersion", "v1",
                               "kind", "ConfigMap", "metadata", "name", name, "namespace", NS,
                               "labels", "data", "key", value);
        if (label)
                json_object_set_new(json_object_get(json_object_get(cm, "metadata"), "labels"),
                                    "app", json_string(label));
        return cm;
}

static const char *rv_of(const json_t *obj)
{
        return json_string_value(
            json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

static void test_discovery(void **state)
{
        char *v = NULL;

        assert_int_equal(kube_preferred_version(admin, "policy", "poddisruptionbudgets", &v), 0);
        assert_string_equal(v, "v1beta1");
        free(v);
        assert_int_equal(kube_preferred_version(admin, "", "pods", &v), 0);
        assert_string_equal(v, "v1");
        free(v);
        assert_int_equal(kube_has_resource(admin, "policy", "v1beta1", "poddisruptionbudgets"), 1);
        assert_int_equal(kube_has_resource(admin, "cert-manager.io", "v1", "certificates"), 0);
        /* a rendered policy/v1 PodDisruptionBudget becomes policy/v1beta1 here */
        json_t *pdb = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "policy/v1", "kind",
                                "PodDisruptionBudget", "metadata", "name", "etcd");
        char *err = NULL;
        assert_int_equal(kube_adapt_object(admin, pdb, &err), 0);
        assert_string_equal(json_string_value(json_object_get(pdb, "apiVersion")),
                            "policy/v1beta1");
        json_object_set_new(pdb, "apiVersion", json_string("cert-manager.io/v1"));
        json_object_set_new(pdb, "kind", json_string("Certificate"));
        assert_int_equal(kube_adapt_object(admin, pdb, &err), -ENOENT);
        assert_non_null(strstr(err, "does not serve certificates in group cert-manager.io"));
        free(err);
        json_decref(pdb);
        /* kube-apiserver offers HTTP/2 over TLS (ALPN). */
        assert_int_equal(kube_client_http_version(admin), 2);
}

static void test_apply_idempotent(void **state)
{
        json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", NS);
        json_t *svc =
            json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:s, s:[{s:s, s:i, s:s}], s:{s:s}}}",
                      "apiVersion", "v1", "kind", "Service", "metadata", "name", "etcd", "labels",
                      "app", "etcd", "spec", "clusterIP", "None", "ports", "name", "client", "port",
                      2379, "protocol", "TCP", "selector", "app", "etcd");
        json_t *pdb =
            json_pack("{s:s, s:s, s:{s:s}, s:{s:i, s:{s:{s:s}}}}", "apiVersion", "policy/v1beta1",
                      "kind", "PodDisruptionBudget", "metadata", "name", "etcd", "spec",
                      "minAvailable", 2, "selector", "matchLabels", "app", "etcd");
        json_t *first = NULL, *second = NULL, *dry = NULL;
        _cleanup_free_ char *rv1 = NULL;

        assert_int_equal(kube_apply(admin, ns, NULL, false, false, NULL), 0);
        if (kube_apply(admin, svc, NULL, false, false, &first) < 0)
                fail_msg("%s", kube_client_last_error(admin));
        rv1 = xstrdup(rv_of(first));
        assert_int_equal(kube_apply(admin, svc, NULL, false, false, &second), 0);
        /* Nothing changed: the server kept the same resourceVersion. */
        assert_string_equal(rv_of(second), rv1);
        json_decref(second);

        /* A dry run of a change returns the changed object without storing it. */
        json_object_set_new(json_object_get(json_object_get(svc, "metadata"), "labels"), "tier",
                            json_string("db"));
        assert_int_equal(kube_apply(admin, svc, NULL, false, true, &dry), 0);
        assert_string_equal(
            json_string_value(json_object_get(
                json_object_get(json_object_get(dry, "metadata"), "labels"), "tier")),
            "db");
        assert_int_equal(kube_apply(admin, svc, NULL, false, false, NULL), 0);
        json_decref(dry);

        if (kube_apply(admin, pdb, NULL, false, false, NULL) < 0)
                fail_msg("%s", kube_client_last_error(admin));
        json_decref(first);
        json_decref(ns);
        json_decref(svc);
        json_decref(pdb);
}

/* Every namespaced core kind gitcd renders round-trips through its URL mapping. */
static void test_rendered_kinds(void **state)
{
        json_t *objs[] = {
            json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod",
                      "metadata", "name", "etcd-0", "spec", "containers", "name", "etcd", "image",
                      "quay.io/coreos/etcd:v3.5.16"),
            json_pack("{s:s, s:s, s:{s:s}, s:{s:[s], s:{s:{s:s}}}}", "apiVersion", "v1", "kind",
                      "PersistentVolumeClaim", "metadata", "name", "data-etcd-0", "spec",
                      "accessModes", "ReadWriteOnce", "resources", "requests", "storage", "1Gi"),
            json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "Secret",
                      "metadata", "name", "etcd-tls", "stringData", "ca.crt", "x"),
        };

        for (size_t i = 0; i < ARRAY_SIZE(objs); i++) {
                const char *kind = json_string_value(json_object_get(objs[i], "kind"));
                const char *name = json_string_value(
                    json_object_get(json_object_get(objs[i], "metadata"), "name"));
                json_t *got = NULL;
                kube_gvr gvr;

                if (kube_apply(admin, objs[i], NULL, false, false, NULL) < 0)
                        fail_msg("%s: %s", kind, kube_client_last_error(admin));
                assert_int_equal(kube_gvr_for_kind("v1", kind, &gvr), 0);
                assert_int_equal(kube_get(admin, &gvr, NS, name, &got), 0);
                assert_string_equal(json_string_value(json_object_get(got, "kind")), kind);
                json_decref(got);
                json_decref(objs[i]);
        }
}

static void test_conflict(void **state)
{
        json_t *theirs = config_map("shared", NULL, "theirs");
        json_t *ours = config_map("shared", NULL, "ours");
        const char *msg;

        assert_int_equal(kube_apply(admin, theirs, "other-tool", false, false, NULL), 0);
        assert_int_equal(kube_apply(admin, ours, NULL, false, false, NULL), -EBUSY);
        msg = kube_client_last_error(admin);
        if (!strstr(msg, "\"other-tool\"") || !strstr(msg, ".data.key") ||
            !strstr(msg, "in namespace \"" NS "\""))
                fail_msg("unclear conflict message: %s", msg);
        printf("# %s\n", msg);
        json_decref(theirs);
        json_decref(ours);
}

struct seen {
        char *name;
        char *type;
};

static int on_event(const char *type, const json_t *object, void *userdata)
{
        struct seen *s = userdata;
        const char *name =
            json_string_value(json_object_get(json_object_get(object, "metadata"), "name"));

        if (streq(type, "BOOKMARK") || !streq_ptr(name, "watched"))
                return 0;
        s->type = xstrdup(type);
        return 1;
}

static void test_list_watch_delete(void **state)
{
        kube_gvr cms = {"", "v1", "configmaps", true};
        json_t *a = config_map("labelled-a", "listed", "1");
        json_t *b = config_map("labelled-b", "listed", "2");
        json_t *c = config_map("unlabelled", NULL, "3");
        json_t *w = config_map("watched", "listed", "1");
        json_t *items = NULL, *obj = NULL;
        _cleanup_free_ char *rv = NULL;
        struct seen seen = {0};

        assert_int_equal(kube_apply(admin, a, NULL, false, false, NULL), 0);
        assert_int_equal(kube_apply(admin, b, NULL, false, false, NULL), 0);
        assert_int_equal(kube_apply(admin, c, NULL, false, false, NULL), 0);
        assert_int_equal(kube_list(admin, &cms, NS, "app=listed", &items, &rv), 0);
        assert_int_equal(json_array_size(items), 2);
        assert_true(strlen(rv) > 0);
        json_decref(items);

        /* A change after the list arrives through a watch from the list's version. */
        assert_int_equal(kube_apply(admin, w, NULL, false, false, NULL), 0);
        assert_int_equal(kube_watch(admin, &cms, NS, "app=listed", rv, 30, on_event, &seen), 1);
        assert_string_equal(seen.type, "ADDED");
        free(seen.type);

        assert_int_equal(kube_delete(admin, &cms, NS, "labelled-a", "Background"), 0);
        assert_int_equal(kube_get(admin, &cms, NS, "labelled-a", &obj), -ENOENT);
        assert_int_equal(kube_delete(admin, &cms, NS, "labelled-a", "Foreground"), -ENOENT);
        json_decref(a);
        json_decref(b);
        json_decref(c);
        json_decref(w);
}

static void test_rbac_denial(void **state)
{
        json_t *cm = config_map("denied", NULL, "x");
        const char *msg;

        assert_int_equal(kube_apply(limited, cm, NULL, false, false, NULL), -EACCES);
        msg = kube_client_last_error(limited);
        if (!strstr(msg, "forbidden: gitcd cannot patch configmaps \"denied\" in namespace "
                         "\"" NS "\"") ||
            !strstr(msg, "User \"limited\"") || !strstr(msg, "grant it in the Role"))
                fail_msg("unclear RBAC message: %s", msg);
        assert_null(strstr(msg, "limited-token"));
        printf("# %s\n", msg);
        json_decref(cm);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_discovery),         cmocka_unit_test(test_apply_idempotent),
            cmocka_unit_test(test_rendered_kinds),    cmocka_unit_test(test_conflict),
            cmocka_unit_test(test_list_watch_delete), cmocka_unit_test(test_rbac_denial),
        };

        apiserver_bin = find_apiserver();
        if (!apiserver_bin) {
                printf("skipped: no kube-apiserver (set GITCD_KUBE_APISERVER or run "
                       "scripts/build-kube-apiserver to build "
                       "~/.cache/gitcd/kube/v1.20.2/kube-apiserver)\n");
                return 77;
        }
        if (!harness_have_etcd("3.4.23") && !harness_have_etcd("3.5.16")) {
                printf("skipped: no etcd binary\n");
                free(apiserver_bin);
                return 77;
        }
        int r = cmocka_run_group_tests(tests, setup, teardown);
        free(apiserver_bin);
        return r;
}
