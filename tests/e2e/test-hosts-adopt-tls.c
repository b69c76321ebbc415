/*
 * Adoption of a cluster with TLS on the hosts target, end to end: three
 * real sshd "machines" with the host agent playing kubelet (a simulator:
 * no kubelet runs here; SSH, the files and etcd are real), and a 3-member
 * etcd 3.5.16 cluster started the way kubeadm runs stacked etcd with TLS
 * (each member named after its node, cp-1, cp-2, cp-3):
 * an RSA etcd CA made with the openssl tool, laid out as kubeadm does
 * under <root>/etc/kubernetes/pki/etcd on every machine (ca.crt, ca.key,
 * server and peer certificates for the machine's address, issued with the
 * repo's pki module), and static Pod manifests with kubeadm's TLS flags
 * and https URLs. Keys are written by a client holding a certificate of
 * that CA, as the kube-apiserver does.
 *
 * Refused, with nothing written on the machines and no CA kept on the
 * gitcd host: a spec without TLS (the message says what to set), a
 * machine whose CA files are another CA's, and one whose ca.key is not
 * the CA's key. `gitcd plan` says the CA is imported; then `gitcd apply`
 * adopts, killed once after moving the first member (the next apply
 * finishes the others): the CA on the gitcd host is kubeadm's, the member
 * IDs and the cluster ID stay (each member now listed under gitcd's name
 * for its machine, kube-0 for cp-1's), every key is still there, the "apiserver"
 * certificate is still accepted by every member, and every member runs
 * gitcd's manifest and serves a leaf gitcd issued from kubeadm's CA.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pki/pki.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/hosts-lab.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define MACHINES 3
#define VERSION  "3.5.16"
#define CL       "kube"
#define KEYS     200

static hosts_lab *L;

/* kubeadm names each member after its node */
static const char *const node_name[] = {"cp-1", "cp-2", "cp-3"};
static char *apiserver_dir; /* ca.crt, tls.crt, tls.key of the "kube-apiserver" */

static char *url(size_t i, int port)
{
        return xasprintf("https://%s:%d", L->ssh->machines[i].address, port);
}

static char *kubeadm_pki(size_t i)
{
        return hosts_lab_path(L, i, "/etc/kubernetes/pki/etcd");
}

/* A leaf of the CA for machine i (or a client-only one when i < 0) into crt and key. */
static void issue(const pki_cert *ca, const pki_key *ca_key, const char *cn, int i, const char *crt,
                  const char *key)
{
        const char *dns[] = {"localhost", NULL};
        const char *ips[] = {"127.0.0.1", i >= 0 ? L->ssh->machines[i].address : NULL, NULL};
        pki_cert_request req = {.cn = cn,
                                .dns_names = i >= 0 ? dns : NULL,
                                .ip_addresses = i >= 0 ? ips : NULL,
                                .days = 365,
                                .server = i >= 0,
                                .client = true};
        pki_key *k = NULL;
        pki_cert *c = NULL;
        assert_int_equal(pki_cert_issue(ca, ca_key, &req, &k, &c), 0);
        assert_int_equal(pki_write_pem(crt, key, c, k), 0);
        pki_key_free(k);
        pki_cert_free(c);
}

/*
 * kubeadm's etcd CA (RSA 2048, the key in PKCS#1 PEM, made with the openssl
 * tool as kubeadm's files are) copied byte for byte onto every machine, and
 * each machine's server and peer certificates.
 */
static void kubeadm_certs(void)
{
        _cleanup_free_ char *made = xasprintf("%s/etcd-ca", L->ssh->dir);
        assert_int_equal(mkdir_p(made, 0700), 0);
        _cleanup_free_ char *cmd = xasprintf(
            "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout k8 -out ca.crt "
            "-days 3650 -subj /CN=etcd-ca -addext basicConstraints=critical,CA:TRUE "
            "-addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature 2>/dev/null && "
            "openssl rsa -traditional -in k8 -out ca.key 2>/dev/null && rm k8",
            made);
        assert_int_equal(system(cmd), 0);
        _cleanup_free_ char *made_crt = path_join(made, "ca.crt");
        _cleanup_free_ char *made_key = path_join(made, "ca.key");
        pki_key *ca_key = NULL;
        pki_cert *ca = NULL;
        assert_int_equal(pki_cert_load(made_crt, &ca), 0);
        assert_int_equal(pki_key_load(made_key, &ca_key), 0);
        _cleanup_free_ char *crt_pem = NULL, *key_pem = NULL;
        size_t crt_len = 0, key_len = 0;
        assert_int_equal(read_file(made_crt, 1 << 20, &crt_pem, &crt_len), 0);
        assert_int_equal(read_file(made_key, 1 << 20, &key_pem, &key_len), 0);
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *dir = kubeadm_pki(i);
                assert_int_equal(mkdir_p(dir, 0755), 0);
                _cleanup_free_ char *crt = path_join(dir, "ca.crt");
                _cleanup_free_ char *key = path_join(dir, "ca.key");
                assert_int_equal(write_file_atomic(crt, crt_pem, crt_len, 0644), 0);
                assert_int_equal(write_file_atomic(key, key_pem, key_len, 0600), 0);
                char cn[16];
                snprintf(cn, sizeof(cn), "cp%zu", i);
                static const char *const leaves[] = {"server", "peer"};
                for (size_t j = 0; j < 2; j++) {
                        _cleanup_free_ char *lc = xasprintf("%s/%s.crt", dir, leaves[j]);
                        _cleanup_free_ char *lk = xasprintf("%s/%s.key", dir, leaves[j]);
                        issue(ca, ca_key, cn, (int)i, lc, lk);
                }
        }
        /* the kube-apiserver's etcd client certificate (apiserver-etcd-client.crt) */
        _cleanup_free_ char *crt = path_join(apiserver_dir, "tls.crt");
        _cleanup_free_ char *key = path_join(apiserver_dir, "tls.key");
        _cleanup_free_ char *cacrt = path_join(apiserver_dir, "ca.crt");
        issue(ca, ca_key, "kube-apiserver-etcd-client", -1, crt, key);
        assert_int_equal(pki_write_pem(cacrt, NULL, ca, NULL), 0);
        pki_key_free(ca_key);
        pki_cert_free(ca);
}

/* kubeadm's etcd.yaml with TLS for member i of 3, as JSON (the host agent reads JSON). */
static void write_kubeadm_manifest(size_t i)
{
        strbuf ic = STRBUF_INIT;
        for (size_t j = 0; j < 3; j++) {
                _cleanup_free_ char *p = url(j, L->peer_port);
                sb_printf(&ic, "%s%s=%s", j ? "," : "", node_name[j], p);
        }
        _cleanup_free_ char *c = url(i, L->client_port), *p = url(i, L->peer_port);
        _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
        _cleanup_free_ char *pki = kubeadm_pki(i);
        _cleanup_free_ char *text = xasprintf(
            "# written by hand, as kubeadm does\n"
            "{\"apiVersion\": \"v1\", \"kind\": \"Pod\",\n"
            " \"metadata\": {\"name\": \"etcd\", \"namespace\": \"kube-system\"},\n"
            " \"spec\": {\"hostNetwork\": true, \"containers\": [{\"name\": \"etcd\",\n"
            "  \"image\": \"registry.k8s.io/etcd:" VERSION "-0\", \"command\": [\"etcd\",\n"
            "   \"--name=%s\", \"--data-dir=%s\",\n"
            "   \"--listen-client-urls=%s\", \"--advertise-client-urls=%s\",\n"
            "   \"--listen-peer-urls=%s\", \"--initial-advertise-peer-urls=%s\",\n"
            "   \"--initial-cluster=%s\", \"--initial-cluster-state=new\",\n"
            "   \"--cert-file=%s/server.crt\", \"--key-file=%s/server.key\",\n"
            "   \"--trusted-ca-file=%s/ca.crt\", \"--client-cert-auth=true\",\n"
            "   \"--peer-cert-file=%s/peer.crt\", \"--peer-key-file=%s/peer.key\",\n"
            "   \"--peer-trusted-ca-file=%s/ca.crt\", \"--peer-client-cert-auth=true\",\n"
            "   \"--snapshot-count=10000\"]}]}}\n",
            node_name[i], data, c, c, p, p, sb_str(&ic), pki, pki, pki, pki, pki, pki);
        sb_release(&ic);
        _cleanup_free_ char *dir = hosts_lab_manifests(L, i);
        _cleanup_free_ char *path = xasprintf("%s/etcd.yaml", dir);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
}

/* A client with the "apiserver" certificate of endpoints. */
static etcd_client *apiserver_client(const char *endpoints)
{
        _cleanup_free_ char *crt = path_join(apiserver_dir, "tls.crt");
        _cleanup_free_ char *key = path_join(apiserver_dir, "tls.key");
        _cleanup_free_ char *ca = path_join(apiserver_dir, "ca.crt");
        etcd_client_opts o = {.endpoints = endpoints,
                              .cacert = ca,
                              .cert = crt,
                              .key = key,
                              .call_timeout_ms = 5000,
                              .dial_timeout_ms = 1000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

static etcd_members *wait_started(const char *endpoints)
{
        etcd_client *c = apiserver_client(endpoints);
        for (int tries = 0; tries < 300; tries++) {
                etcd_members *l = NULL;
                if (etcd_member_list(c, &l) == 0) {
                        size_t started = 0;
                        for (size_t i = 0; i < l->n; i++)
                                started += !isempty(l->members[i].name);
                        if (l->n == 3 && started == 3) {
                                etcd_client_free(c);
                                return l;
                        }
                        etcd_members_free(l);
                }
                usleep(200 * 1000);
        }
        fail_msg("the hand-started cluster did not form: %s", etcd_client_last_error(c));
        return NULL;
}

/* Every key k/0000 .. through member i alone, with the "apiserver" certificate. */
static void check_keys_on(size_t i)
{
        _cleanup_free_ char *ep = url(i, L->client_port);
        etcd_client *c = apiserver_client(ep);
        etcd_kv_list *l = NULL;
        int k = -1;
        for (int tries = 0; tries < 50 && k < 0; tries++) {
                k = etcd_get(c, "k/", true, &l);
                if (k < 0)
                        usleep(200 * 1000);
        }
        if (k < 0)
                fail_msg("%s refuses the apiserver certificate: %s", ep, etcd_client_last_error(c));
        assert_int_equal(l->n, KEYS);
        for (size_t j = 0; j < l->n; j++) {
                char want[32];
                snprintf(want, sizeof(want), "v%zu", j);
                assert_int_equal(l->kvs[j].value_len, strlen(want));
                assert_memory_equal(l->kvs[j].value, want, strlen(want));
        }
        etcd_kv_list_free(l);
        /* and it may still write */
        assert_int_equal(etcd_put(c, "after/adoption", "1", 1, NULL), 0);
        etcd_client_free(c);
}

/* Nothing written on the machines, no CA kept on the gitcd host. */
static void assert_untouched(e2e *e)
{
        for (size_t i = 0; i < MACHINES; i++) {
                _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
                _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", data);
                assert_false(path_exists(marker));
                _cleanup_free_ char *dir = hosts_lab_manifests(L, i);
                _cleanup_free_ char *old = xasprintf("%s/etcd.yaml", dir);
                _cleanup_free_ char *own = xasprintf("%s/etcd-default-" CL ".yaml", dir);
                assert_true(path_exists(old));
                assert_false(path_exists(own));
        }
        _cleanup_free_ char *pki = xasprintf("%s/hosts/default/" CL "/pki", e->state_dir);
        assert_false(path_exists(pki));
        assert_int_equal(e2e_audit_count(e, CL, "member.bootstrap"), 0);
}

static void apply_refused(e2e *e, const char *want)
{
        _cleanup_free_ char *out = NULL, *err = NULL;
        assert_int_not_equal(hosts_lab_cmd(L, e, "apply", NULL, &out, &err, "--timeout", "20s"), 0);
        if (!strstr(err, "adoption refused") || !strstr(err, want))
                fail_msg("no refusal with \"%s\":\n%s%s", want, out, err);
}

/* Machine i after the adoption: on gitcd's manifest, with gitcd's leaves, every key kept. */
static void assert_machine_adopted(size_t i, const char *cafile)
{
        _cleanup_free_ char *dir = hosts_lab_manifests(L, i);
        _cleanup_free_ char *old = xasprintf("%s/etcd.yaml", dir);
        _cleanup_free_ char *own = xasprintf("%s/etcd-default-" CL ".yaml", dir);
        assert_false(path_exists(old));
        assert_true(path_exists(own));
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(own, 1 << 20, &text, &len), 0);
        _cleanup_free_ char *tls_dir = hosts_lab_path(L, i, "/etc/etcd/default-" CL "/pki");
        if (!strstr(text, tls_dir) || strstr(text, "/etc/kubernetes/pki"))
                fail_msg("%s does not run on gitcd's TLS files:\n%s", own, text);
        _cleanup_free_ char *leaf = xasprintf("%s/client", tls_dir);
        _cleanup_free_ char *serial = NULL;
        assert_int_equal(pki_leaf_info(leaf, &(int64_t){0}, &serial), 0);
        _cleanup_free_ char *ep = url(i, L->client_port);
        _cleanup_free_ char *served = e2e_served_serial(ep, cafile);
        if (!served || !streq(served, serial))
                fail_msg("%s serves %s, gitcd issued %s", ep, served ? served : "nothing", serial);
        _cleanup_free_ char *data = hosts_lab_data_dir(L, i, CL);
        _cleanup_free_ char *marker = xasprintf("%s/gitcd-member", data);
        assert_true(path_exists(marker));
        /* every key, and the kube-apiserver's certificate still accepted */
        check_keys_on(i);
}

static void test_adopt_tls(void **state)
{
        (void)state;
        kubeadm_certs();
        strbuf eps = STRBUF_INIT;
        for (size_t i = 0; i < MACHINES; i++) {
                write_kubeadm_manifest(i);
                _cleanup_free_ char *c = url(i, L->client_port);
                sb_printf(&eps, "%s%s", i ? "," : "", c);
        }
        etcd_members *before = wait_started(sb_str(&eps));
        etcd_client *api = apiserver_client(sb_str(&eps));
        for (int i = 0; i < KEYS; i++) {
                char key[16], value[16];
                snprintf(key, sizeof(key), "k/%04d", i);
                snprintf(value, sizeof(value), "v%d", i);
                assert_int_equal(etcd_put(api, key, value, strlen(value), NULL), 0);
        }
        etcd_client_free(api);

        /* a spec without TLS: refused, saying what to set */
        e2e *plain = e2e_new();
        hosts_lab_write_cluster(L, plain, CL, VERSION, 3, 0, MACHINES);
        apply_refused(plain, "runs etcd with TLS");
        apply_refused(plain, "set tls.provider: auto with tls.client.enabled and "
                             "tls.peer.enabled true");
        assert_untouched(plain);
        e2e_free(plain);

        /* another CA on the third machine (etcd there still runs with the first): refused */
        _cleanup_free_ char *pki2 = kubeadm_pki(2);
        _cleanup_free_ char *crt2 = path_join(pki2, "ca.crt"), *key2 = path_join(pki2, "ca.key");
        _cleanup_free_ char *saved_crt = NULL, *saved_key = NULL;
        size_t crt_len = 0, key_len = 0;
        assert_int_equal(read_file(crt2, 1 << 20, &saved_crt, &crt_len), 0);
        assert_int_equal(read_file(key2, 1 << 20, &saved_key, &key_len), 0);
        {
                pki_key *k = NULL;
                pki_cert *c = NULL;
                assert_int_equal(pki_ca_create("another-ca", 3650, &k, &c), 0);
                assert_int_equal(pki_write_pem(crt2, key2, c, k), 0);
                pki_key_free(k);
                pki_cert_free(c);
        }
        e2e *other = e2e_new();
        hosts_lab_write_cluster_tls(L, other, CL, VERSION, 3, 0, MACHINES);
        apply_refused(other, "which is not the CA the other members trust");
        assert_untouched(other);
        e2e_free(other);
        /* a key that is not the CA's: refused as well */
        assert_int_equal(write_file_atomic(crt2, saved_crt, crt_len, 0644), 0);
        other = e2e_new();
        hosts_lab_write_cluster_tls(L, other, CL, VERSION, 3, 0, MACHINES);
        apply_refused(other, "is not the key of the CA certificate");
        assert_untouched(other);
        e2e_free(other);
        assert_int_equal(write_file_atomic(key2, saved_key, key_len, 0600), 0);

        /* adopted */
        e2e *e = e2e_new();
        hosts_lab_write_cluster_tls(L, e, CL, VERSION, 3, 0, MACHINES);
        _cleanup_free_ char *pout = NULL, *perr = NULL;
        assert_int_equal(hosts_lab_cmd(L, e, "plan", NULL, &pout, &perr, NULL, NULL), 0);
        if (!strstr(pout, "imports the CA the running etcd trusts"))
                fail_msg("plan says nothing of the CA import:\n%s", pout);
        /* killed after the first member moved: the next apply finishes the others over TLS */
        _cleanup_free_ char *kout = NULL, *kerr = NULL;
        assert_int_equal(hosts_lab_cmd_failpoint(L, e, "adopt.after-first-move", "apply", NULL,
                                                 &kout, &kerr, "--timeout", "150s"),
                         128 + SIGKILL);
        hosts_lab_apply_ok(L, e, "150s");

        /* gitcd's CA for the cluster is kubeadm's, its key kept 0600 */
        _cleanup_free_ char *pki = xasprintf("%s/hosts/default/" CL "/pki", e->state_dir);
        _cleanup_free_ char *ours = NULL, *theirs = NULL, *fp_ours = NULL, *fp_theirs = NULL;
        size_t len_ours = 0;
        _cleanup_free_ char *ours_crt = path_join(pki, "ca.crt");
        _cleanup_free_ char *ours_key = path_join(pki, "ca.key");
        assert_int_equal(read_file(ours_crt, 1 << 20, &ours, &len_ours), 0);
        assert_int_equal(pki_bundle_fingerprint(ours, len_ours, &fp_ours), 0);
        assert_int_equal(pki_bundle_fingerprint(saved_crt, crt_len, &fp_theirs), 0);
        assert_string_equal(fp_ours, fp_theirs);
        struct stat st;
        assert_int_equal(stat(ours_key, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);

        /* the same members and cluster, nothing bootstrapped */
        api = apiserver_client(sb_str(&eps));
        etcd_members *after = NULL;
        assert_int_equal(etcd_member_list(api, &after), 0);
        etcd_client_free(api);
        hosts_lab_assert_adopted(e, CL, before, after, node_name);
        etcd_members_free(after);

        _cleanup_free_ char *cafile = path_join(apiserver_dir, "ca.crt");
        for (size_t i = 0; i < MACHINES; i++)
                assert_machine_adopted(i, cafile);
        etcd_members_free(before);
        sb_release(&eps);
        e2e_free(e);
}

static int setup(void **state)
{
        (void)state;
        L = hosts_lab_start(MACHINES, VERSION);
        if (!L)
                return -1;
        apiserver_dir = xasprintf("%s/apiserver", L->ssh->dir);
        return mkdir_p(apiserver_dir, 0700) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
        (void)state;
        hosts_lab_free(L);
        free(apiserver_dir);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_adopt_tls)};
        return cmocka_run_group_tests(tests, setup, teardown);
}
