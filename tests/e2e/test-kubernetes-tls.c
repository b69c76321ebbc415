/*
 * TLS on the Kubernetes target, against the real kube-apiserver and the
 * node simulator of tests/harness/kubeapi.h (a kubelet simulator: no real
 * kubelet can run here; skipped, 77, without them or without root).
 *
 * Leaf renewal: `gitcd run --target kubernetes` with 40 s certificates
 * renewed 30 s early (every ~10 s, 30 s to spare beside the simulated
 * kubelet's 5 s Secret sync) updates the cluster's TLS Secrets with certificates
 * from the same CA and a new serial, twice, without touching a member Pod;
 * once the simulated kubelet synced the Secret volumes, every member
 * serves the new serial on its client and peer ports; `gitcd status`
 * shows the new expiry.
 *
 * CA rotation: a rotateCA token committed for a running 3-member cluster
 * goes through its three phases; phase 3 starts only after every member
 * serves its reissued leaf (the kubelet delivers Secrets late), the
 * cluster stays writable, every key written before is still there, and
 * each member serves a leaf of the new CA, which alone is in the Secrets.
 *
 * TLS switched on: a plain-http 3-member cluster given tls.provider auto
 * ends with https peer URLs in etcd's membership, every member serving
 * the leaves of its Secrets, and every key written before still there.
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
#include "tests/e2e/kube-lab.h"
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
static kube_lab *lab; /* api, sim, admin and root are its */
static char *root;

static const kube_gvr secrets = {"", "v1", "secrets", true};
static const kube_gvr pods = {"", "v1", "pods", true};

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

/* A Secret's tls.crt, tls.key and ca.crt written into dir (gitcd's operator identity). */
static void secret_files(const char *name, const char *dir)
{
        json_t *s = NULL;
        if (kube_get(admin, &secrets, NS, name, &s) < 0)
                fail_msg("get secret %s: %s", name, kube_client_last_error(admin));
        static const char *const keys[] = {"tls.crt", "tls.key", "ca.crt"};
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                const char *b64 =
                    json_string_value(json_object_get(json_object_get(s, "data"), keys[i]));
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                assert_non_null(b64);
                assert_int_equal(kube_base64_decode(b64, &data, &len), 0);
                _cleanup_free_ char *path = path_join(dir, keys[i]);
                assert_int_equal(write_file_atomic(path, data, len, 0600), 0);
        }
        json_decref(s);
}

/*
 * Wait until every member of cluster serves, on its client and peer
 * URLs (from `gitcd status`), the serials its Secrets hold now.
 */
static bool members_serve_secrets(e2e *e, const char *cluster, const char *opdir, int timeout_s)
{
        _cleanup_free_ char *crt = path_join(opdir, "tls.crt");
        _cleanup_free_ char *key = path_join(opdir, "tls.key");
        int64_t end = now_mono_ms() + timeout_s * 1000LL;
        for (;;) {
                _cleanup_free_ char *cs = xasprintf("%s-client-tls", cluster);
                _cleanup_free_ char *ps = xasprintf("%s-peer-tls", cluster);
                _cleanup_free_ char *want_client = secret_serial(cs, NULL);
                _cleanup_free_ char *want_peer = secret_serial(ps, NULL);
                json_t *st = e2e_status(e, cluster);
                bool all = want_client && want_peer &&
                           json_array_size(json_object_get(st, "members")) == 3;
                size_t i;
                json_t *m;
                json_array_foreach(json_object_get(st, "members"), i, m)
                {
                        const char *urls[] = {json_string_value(json_object_get(m, "client_url")),
                                              json_string_value(json_object_get(m, "peer_url"))};
                        const char *want[] = {want_client, want_peer};
                        for (size_t j = 0; all && j < 2; j++) {
                                char *got = NULL;
                                all = urls[j] &&
                                      pki_served_serial(urls[j], crt, key, 3000, &got) == 0 &&
                                      streq(got, want[j]);
                                free(got);
                        }
                }
                json_decref(st);
                if (all)
                        return true;
                if (now_mono_ms() > end)
                        return false;
                usleep(500 * 1000);
        }
}

#define AUTO_TLS                                                                                   \
        "  tls:\n"                                                                                 \
        "    provider: auto\n"                                                                     \
        "    client:\n"                                                                            \
        "      enabled: true\n"                                                                    \
        "    peer:\n"                                                                              \
        "      enabled: true\n"

/* Write source/<name>.yaml: 3 members of VERSION in NS, then the spec's tls part (may be ""). */
static void write_cluster(e2e *e, const char *name, const char *tls)
{
        _cleanup_free_ char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                                              "kind: EtcdCluster\n"
                                              "metadata:\n"
                                              "  name: %s\n"
                                              "  namespace: " NS "\n"
                                              "spec:\n"
                                              "  replicas: 3\n"
                                              "  version: \"" VERSION "\"\n"
                                              "  progressDeadlineSeconds: 300\n"
                                              "%s",
                                              name, tls);
        _cleanup_free_ char *file = xasprintf("%s.yaml", name);
        e2e_write_file(e, file, text);
}

/* `gitcd run` on the Kubernetes target of the test's apiserver. */
static pid_t start_daemon(e2e *e)
{
        const char *args[] = {
            "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(api), "--context",
            "gitcd",    NULL};
        return e2e_start_daemon(e, args);
}

/* The audit log's events of one action for NS/name, as `gitcd log -o json` prints them. */
static char *audit_log(e2e *e, const char *name, const char *action)
{
        _cleanup_free_ char *id = xasprintf(NS "/%s", name);
        char *out = NULL;
        assert_int_equal(
            e2e_run(e, &out, "log", "-o", "json", "--cluster", id, "--action", action, NULL), 0);
        return out;
}

/* Keys /before/000 .. /before/<n-1>, written or checked. */
static void put_keys(etcd_client *c, int n)
{
        for (int i = 0; i < n; i++) {
                _cleanup_free_ char *k = xasprintf("/before/%03d", i);
                assert_int_equal(etcd_put(c, k, "v", 1, NULL), 0);
        }
}

static void check_keys(etcd_client *c, int n)
{
        etcd_kv_list *l = NULL;
        if (etcd_get(c, "/before/", true, &l) < 0)
                fail_msg("read back: %s", etcd_client_last_error(c));
        assert_int_equal((int)l->n, n);
        etcd_kv_list_free(l);
}

/* gitcd's operator identity, from its Secret, in opdir. */
static e2e_tls_files operator_files(const char *name, const char *opdir)
{
        _cleanup_free_ char *secret = xasprintf("%s-operator-tls", name);
        secret_files(secret, opdir);
        return (e2e_tls_files){path_join(opdir, "ca.crt"), path_join(opdir, "tls.crt"),
                               path_join(opdir, "tls.key")};
}

static void test_secrets_renewed(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        write_cluster(e, "kr",
                      AUTO_TLS "    auto:\n"
                               "      validity: 40s\n"
                               "      renewBefore: 30s\n");
        pid_t d = start_daemon(e);
        assert_true(e2e_wait_ready(e, "kr", 3, 240));

        _cleanup_free_ char *ca0 = NULL;
        char *first = secret_serial("kr-peer-tls", &ca0);
        assert_non_null(first);
        _cleanup_free_ char *uids = pod_uids();

        /* Two renewals (every ~10 s): a new serial in the Secret, from the same CA. */
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

        /* Once the kubelet synced the Secret volumes, the members serve the new leaves. */
        _cleanup_free_ char *opdir = harness_tmpdir("gitcd-kt-op");
        secret_files("kr-operator-tls", opdir);
        assert_true(members_serve_secrets(e, "kr", opdir, 30));
        (void)rm_rf(opdir);

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

static void write_rotating(e2e *e, const char *token)
{
        _cleanup_free_ char *rot =
            token ? xasprintf(AUTO_TLS "    auto:\n      rotateCA: \"%s\"\n", token) : NULL;
        write_cluster(e, "kc", rot ? rot : AUTO_TLS);
}

static void test_ca_rotated(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        write_rotating(e, NULL);
        pid_t d = start_daemon(e);
        assert_true(e2e_wait_ready(e, "kc", 3, 240));

        _cleanup_free_ char *opdir = harness_tmpdir("gitcd-kt-op");
        _cleanup_free_ char *old_ca = NULL;
        _cleanup_free_ char *peer0 = secret_serial("kc-peer-tls", &old_ca);
        assert_non_null(old_ca);
        e2e_tls_files f = operator_files("kc", opdir);
        etcd_client *c = e2e_tls_client(e, "kc", &f);
        put_keys(c, 100);
        etcd_client_free(c);

        /*
         * The rotation by `gitcd apply`, stopped by a failpoint the moment phase 3 is
         * recorded and before it restarts anything: by then every member must serve the
         * leaves reissued in phase 2 (which the simulated kubelet delivers up to 5 s late).
         */
        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        write_rotating(e, "rotate-1");
        const char *apply[] = {
            "apply",     "-q",       "--source",   e->source,      "--timeout",
            "400s",      "--target", "kubernetes", "--kubeconfig", kubeapi_kubeconfig(api),
            "--context", "gitcd",    NULL};
        _cleanup_free_ char *out = NULL, *err = NULL;
        int rc = e2e_runv_failpoint(e, "ca-rotate.phase-3", &out, &err, apply);
        json_t *st = e2e_status(e, "kc");
        json_int_t phase =
            json_integer_value(json_object_get(json_object_get(st, "ca_rotation"), "phase"));
        json_decref(st);
        if (rc == 0 || phase != 3)
                fail_msg("apply (%d) did not stop at phase 3 (%d): %s%s", rc, (int)phase, out, err);
        secret_files("kc-operator-tls", opdir);
        assert_true(members_serve_secrets(e, "kc", opdir, 1));

        /* gitcd run finishes it. */
        d = start_daemon(e);
        bool finished = false;
        int64_t end = now_mono_ms() + 300 * 1000;
        while (!finished && now_mono_ms() < end) {
                _cleanup_free_ char *l = audit_log(e, "kc", "tls.ca-rotate");
                finished = strstr(l, "phase 3 (drop old CA): done") != NULL;
                if (!finished)
                        sleep(1);
        }
        if (!finished)
                fail_msg("the CA rotation did not finish");
        assert_true(e2e_wait_ready(e, "kc", 3, 120));

        /* The new CA alone in the Secrets; every member serves a leaf of it. */
        _cleanup_free_ char *new_ca = NULL;
        _cleanup_free_ char *peer1 = secret_serial("kc-peer-tls", &new_ca);
        assert_non_null(new_ca);
        assert_string_not_equal(new_ca, old_ca);
        assert_string_not_equal(peer0, peer1);
        secret_files("kc-operator-tls", opdir);
        assert_true(members_serve_secrets(e, "kc", opdir, 30));

        /* Writable, and every key written before the rotation is there. */
        c = e2e_tls_client(e, "kc", &f);
        assert_int_equal(etcd_put(c, "/after", "v", 1, NULL), 0);
        check_keys(c, 100);
        etcd_client_free(c);

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        e2e_tls_files_release(&f);
        (void)rm_rf(opdir);
        e2e_free(e);
}

/* TLS switched on for a running cluster: etcd lists https peer URLs, the keys stay. */
static void test_tls_switched_on(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        write_cluster(e, "kp", "");
        pid_t d = start_daemon(e);
        assert_true(e2e_wait_ready(e, "kp", 3, 240));
        etcd_client *c = e2e_client(e, "kp");
        put_keys(c, 100);
        etcd_client_free(c);

        write_cluster(e, "kp", AUTO_TLS);
        _cleanup_free_ char *out = NULL;
        int64_t end = now_mono_ms() + 360 * 1000;
        int updated = 0;
        while (updated < 3 && now_mono_ms() < end) {
                free(out);
                out = audit_log(e, "kp", "tls.enable");
                updated = 0;
                for (const char *p = out; (p = strstr(p, "etcd's membership now lists")); p++)
                        updated++;
                if (updated < 3)
                        sleep(1);
        }
        if (updated < 3)
                fail_msg("the switch did not finish: %s", out);
        assert_true(e2e_wait_ready(e, "kp", 3, 120));

        _cleanup_free_ char *opdir = harness_tmpdir("gitcd-kt-op");
        e2e_tls_files f = operator_files("kp", opdir);
        c = e2e_tls_client(e, "kp", &f);
        etcd_members *ms = NULL;
        if (etcd_member_list(c, &ms) < 0)
                fail_msg("member list: %s", etcd_client_last_error(c));
        for (size_t i = 0; i < ms->n; i++)
                assert_true(strneq(ms->members[i].peer_urls[0], "https://", 8));
        assert_int_equal((int)ms->n, 3);
        etcd_members_free(ms);
        check_keys(c, 100);
        etcd_client_free(c);
        assert_true(members_serve_secrets(e, "kp", opdir, 30));

        kill(d, SIGTERM);
        waitpid(d, NULL, 0);
        e2e_tls_files_release(&f);
        (void)rm_rf(opdir);
        e2e_free(e);
}

int main(void)
{
        lab = kube_lab_start(NS, VERSION);
        if (!lab)
                return 77;
        api = lab->api;
        sim = lab->sim;
        admin = lab->admin;
        root = lab->root;

        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_secrets_renewed),
            cmocka_unit_test(test_ca_rotated),
            cmocka_unit_test(test_tls_switched_on),
        };
        int failed = cmocka_run_group_tests(tests, NULL, NULL);

        kube_lab_free(lab);
        return failed;
}
