/*
 * A real kube-apiserver v1.20.2 for tests, beside its own one-member etcd
 * 3.5.16 (harness_cluster), in a fresh temporary folder: a CA and a serving
 * certificate from pki/, a service-account key pair, a static token file
 * (admin in system:masters, limited without groups, gitcd's ServiceAccount
 * user) and a kubeconfig with the CA inlined as certificate-authority-data.
 *
 * The apiserver is a plain child process (PR_SET_PDEATHSIG SIGKILL, tracked
 * by harness_track_pid) so it never outlives the test however the test ends.
 * Its command line is kept, so kubeapi_pause()/kubeapi_resume() can stop it
 * and start it again on the same port with the same flags. Readiness is the
 * apiserver's own /readyz (every post-start hook, the RBAC bootstrap roles
 * included), asked through a kube client as admin.
 *
 * kubeapi_start_controllers() adds a real kube-controller-manager v1.20.2
 * (the same source build) with only the controllers the tests need:
 * statefulset, replicaset and garbagecollector. It talks to the apiserver
 * with the admin kubeconfig (--use-service-account-credentials=false, so no
 * ServiceAccount tokens are needed), without leader election, and serves
 * its own /healthz on a harness port (the insecure port is off), which is
 * how its readiness is seen. It is tracked and stopped like the apiserver;
 * kubeapi_pause() leaves it running: it retries on its own, as a real
 * controller-manager does while the apiserver is away.
 *
 * kubeapi_private_hosts() gives the test process a private mount namespace
 * in which /etc/hosts is bind-mounted from a file in the test's folder. The
 * node simulator (nodesim.c) writes Pod DNS names into that file. glibc's
 * resolver opens /etc/hosts afresh on every lookup ("files" in
 * nsswitch.conf; no nscd runs on the test machine), so a rewrite takes effect
 * at once for every process, which is why it is rewritten in place and never
 * renamed over (a rename would replace the bind mount's source, not the file
 * the mount shows).
 */
#include "tests/harness/kubeapi.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "pki/pki.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define KUBEAPI_VERSION         "v1.20.2"
#define KUBEAPI_ETCD_VERSION    "3.5.16"
#define KUBEAPI_READY_TIMEOUT_S 120
#define KUBEAPI_STOP_TIMEOUT_S  20
#define KUBEAPI_MAX_ARGS        40
#define KUBECM_CONTROLLERS      "statefulset,replicaset,garbagecollector"

struct kubeapi {
        char *dir;
        char *bin;
        char *kubeconfig;
        char *server;
        char *log_path;
        harness_cluster *etcd;
        char *argv[KUBEAPI_MAX_ARGS];
        int port;
        pid_t pid;
        /* kube-controller-manager, when started */
        char *cm_bin;
        char *cm_log_path;
        char *cm_argv[KUBEAPI_MAX_ARGS];
        int cm_port;
        pid_t cm_pid;
};

char *kubeapi_find_binary(void)
{
        const char *env = getenv("GITCD_KUBE_APISERVER");
        if (!isempty(env))
                return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
        /* Where scripts/build-kube-apiserver puts it: the same cache as scripts/setup. */
        char *p = harness_cache_path("kube/" KUBEAPI_VERSION "/kube-apiserver");
        if (!p)
                return NULL;
        if (access(p, X_OK) == 0)
                return p;
        free(p);
        return NULL;
}

char *kubeapi_find_controller_manager(void)
{
        const char *env = getenv("GITCD_KUBE_CONTROLLER_MANAGER");
        if (!isempty(env))
                return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
        /* scripts/build-kube-apiserver builds it beside kube-apiserver. */
        char *p = harness_cache_path("kube/" KUBEAPI_VERSION "/kube-controller-manager");
        if (!p)
                return NULL;
        if (access(p, X_OK) == 0)
                return p;
        free(p);
        return NULL;
}

const char *kubeapi_dir(const kubeapi *k)
{
        return k->dir;
}

const char *kubeapi_kubeconfig(const kubeapi *k)
{
        return k->kubeconfig;
}

const char *kubeapi_server(const kubeapi *k)
{
        return k->server;
}

static char *base64(const char *s)
{
        size_t n = strlen(s);
        char *out = xmalloc(4 * ((n + 2) / 3) + 1);

        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
        return out;
}

static int write_text(const kubeapi *k, const char *name, const char *text, char **ret_path)
{
        _cleanup_free_ char *p = path_join(k->dir, name);
        int r = write_file_atomic(p, text, strlen(text), 0600);

        if (r < 0) {
                fprintf(stderr, "kubeapi: cannot write %s: %s\n", p, strerror(-r));
                return r;
        }
        if (ret_path)
                *ret_path = TAKE_PTR(p);
        return 0;
}

/* The public half of a PEM private key, for --service-account-key-file. */
static int write_public_key(const char *key_path, const char *pub_path)
{
        FILE *in = fopen(key_path, "re"), *out = NULL;
        EVP_PKEY *pkey = NULL;
        int r = -EIO;

        if (!in)
                return -errno;
        pkey = PEM_read_PrivateKey(in, NULL, NULL, NULL);
        if (!pkey)
                goto out;
        out = fopen(pub_path, "we");
        if (!out) {
                r = -errno;
                goto out;
        }
        if (PEM_write_PUBKEY(out, pkey) == 1)
                r = 0;
out:
        if (out && fclose(out) != 0 && r == 0)
                r = -EIO;
        fclose(in);
        EVP_PKEY_free(pkey);
        return r;
}

/* CA, serving certificate, service-account keys, tokens and the kubeconfig. */
static int write_pki(kubeapi *k)
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
        char *ca_pem = NULL, *ca_b64 = NULL, *config = NULL;
        char *p1 = path_join(k->dir, "ca.crt"), *p2 = path_join(k->dir, "server.crt"),
             *p3 = path_join(k->dir, "server.key"), *p4 = path_join(k->dir, "sa.key"),
             *p5 = path_join(k->dir, "sa.pub");
        int r;

        r = pki_ca_create("kube-ca", 1, &ca_key, &ca);
        if (r >= 0)
                r = pki_cert_issue(ca, ca_key, &req, &key, &cert);
        if (r >= 0)
                r = pki_key_generate(&sa_key);
        if (r >= 0)
                r = pki_write_pem(p1, NULL, ca, NULL);
        if (r >= 0)
                r = pki_write_pem(p2, p3, cert, key);
        if (r >= 0)
                r = pki_write_pem(NULL, p4, NULL, sa_key);
        if (r >= 0)
                r = pki_cert_to_pem(ca, &ca_pem);
        if (r < 0) {
                fprintf(stderr, "kubeapi: certificates: %s\n", pki_last_error());
                goto out;
        }
        r = write_public_key(p4, p5);
        if (r < 0) {
                fprintf(stderr, "kubeapi: cannot write %s: %s\n", p5, strerror(-r));
                goto out;
        }
        r = write_text(k, "tokens.csv",
                       "admin-token,admin,1,\"system:masters\"\n"
                       "limited-token,limited,2\n"
                       "gitcd-token,system:serviceaccount:gitcd:gitcd,3,"
                       "\"system:serviceaccounts,system:serviceaccounts:gitcd\"\n",
                       NULL);
        if (r < 0)
                goto out;
        r = write_text(k, "limited.token", "limited-token\n", NULL);
        if (r < 0)
                goto out;

        ca_b64 = base64(ca_pem);
        config = xasprintf(
            "apiVersion: v1\nkind: Config\ncurrent-context: admin\n"
            "clusters:\n- name: local\n  cluster:\n"
            "    server: %s\n"
            "    certificate-authority-data: %s\n"
            "users:\n- name: admin\n  user: {token: admin-token}\n"
            "- name: limited\n  user: {tokenFile: limited.token}\n"
            "- name: gitcd\n  user: {token: gitcd-token}\n"
            "contexts:\n"
            "- name: admin\n  context: {cluster: local, user: admin, namespace: " KUBEAPI_NAMESPACE
            "}\n"
            "- name: limited\n  context: {cluster: local, user: limited, "
            "namespace: " KUBEAPI_NAMESPACE "}\n"
            "- name: gitcd\n  context: {cluster: local, user: gitcd, "
            "namespace: " KUBEAPI_NAMESPACE "}\n",
            k->server, ca_b64);
        r = write_text(k, "kubeconfig", config, &k->kubeconfig);
out:
        pki_key_free(ca_key);
        pki_key_free(key);
        pki_key_free(sa_key);
        pki_cert_free(ca);
        pki_cert_free(cert);
        free(ca_pem);
        free(ca_b64);
        free(config);
        free(p1);
        free(p2);
        free(p3);
        free(p4);
        free(p5);
        return r;
}

static void build_argv(kubeapi *k)
{
        size_t n = 0;

        k->argv[n++] = xstrdup(k->bin);
        k->argv[n++] = xasprintf("--etcd-servers=%s", k->etcd->endpoints);
        k->argv[n++] = xasprintf("--secure-port=%d", k->port);
        k->argv[n++] = xstrdup("--bind-address=127.0.0.1");
        k->argv[n++] = xstrdup("--advertise-address=127.0.0.1");
        k->argv[n++] = xstrdup("--insecure-port=0");
        k->argv[n++] = xstrdup("--endpoint-reconciler-type=none");
        k->argv[n++] = xstrdup("--disable-admission-plugins=ServiceAccount");
        k->argv[n++] = xasprintf("--tls-cert-file=%s/server.crt", k->dir);
        k->argv[n++] = xasprintf("--tls-private-key-file=%s/server.key", k->dir);
        k->argv[n++] = xasprintf("--client-ca-file=%s/ca.crt", k->dir);
        k->argv[n++] = xasprintf("--service-account-key-file=%s/sa.pub", k->dir);
        k->argv[n++] = xasprintf("--service-account-signing-key-file=%s/sa.key", k->dir);
        k->argv[n++] = xstrdup("--service-account-issuer=https://kubernetes.default.svc");
        k->argv[n++] = xstrdup("--api-audiences=https://kubernetes.default.svc");
        k->argv[n++] = xasprintf("--token-auth-file=%s/tokens.csv", k->dir);
        k->argv[n++] = xstrdup("--authorization-mode=RBAC");
        k->argv[n++] = xstrdup("--service-cluster-ip-range=10.96.0.0/24");
        k->argv[n++] = xasprintf("--cert-dir=%s/certs", k->dir);
        k->argv[n++] = xstrdup("--etcd-prefix=/gitcd-kube-test");
        /* pods/log dials the node simulator's kubelet endpoint at the Node's InternalIP */
        k->argv[n++] = xstrdup("--kubelet-preferred-address-types=InternalIP");
        k->argv[n] = NULL;
}

/* A tracked child running bin with argv, its output appended to log_path. */
static int spawn_process(const char *bin, char *const *argv, const char *log_path, pid_t *ret_pid)
{
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        pid_t pid;

        if (fd < 0)
                return -errno;
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        if (pid == 0) {
                /* It never outlives the test, however the test ends. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                setpgid(0, 0);
                dup2(fd, 1);
                dup2(fd, 2);
                execv(bin, argv);
                _exit(127);
        }
        harness_track_pid(pid);
        close(fd);
        *ret_pid = pid;
        return 0;
}

static int spawn(kubeapi *k)
{
        return spawn_process(k->bin, k->argv, k->log_path, &k->pid);
}

static void print_file_tail(const char *what, const char *path)
{
        _cleanup_free_ char *data = NULL;
        size_t len = 0;

        if (path && read_file(path, 64u << 20, &data, &len) == 0)
                fprintf(stderr, "--- %s log (end) ---\n%s\n", what,
                        len > 4000 ? data + len - 4000 : data);
}

static void print_log_tail(const kubeapi *k)
{
        print_file_tail("kube-apiserver", k->log_path);
}

/* Until /readyz answers 200 (every post-start hook done, RBAC roles bootstrapped). */
static int wait_ready(kubeapi *k)
{
        kube_client *admin = kubeapi_client(k, "admin");
        time_t deadline = time(NULL) + KUBEAPI_READY_TIMEOUT_S;
        int r = 0;

        for (;;) {
                if (kube_request(admin, "GET", "/readyz", NULL, NULL, "get", "/readyz", NULL,
                                 NULL) == 0)
                        break;
                if (waitpid(k->pid, NULL, WNOHANG) == k->pid) {
                        harness_untrack_pid(k->pid);
                        k->pid = 0;
                        print_log_tail(k);
                        fprintf(stderr, "kubeapi: kube-apiserver exited during start-up\n");
                        r = -ECHILD;
                        break;
                }
                if (time(NULL) > deadline) {
                        print_log_tail(k);
                        fprintf(stderr, "kubeapi: kube-apiserver not ready after %d s: %s\n",
                                KUBEAPI_READY_TIMEOUT_S, kube_client_last_error(admin));
                        r = -ETIMEDOUT;
                        break;
                }
                usleep(250 * 1000);
        }
        kube_client_free(admin);
        return r;
}

/* SIGTERM, and SIGKILL if it has not exited after KUBEAPI_STOP_TIMEOUT_S. */
static void stop_process(pid_t *pid)
{
        if (*pid <= 0)
                return;
        kill(*pid, SIGTERM);
        for (int i = 0; waitpid(*pid, NULL, WNOHANG) == 0; i++) {
                if (i == KUBEAPI_STOP_TIMEOUT_S * 10)
                        kill(*pid, SIGKILL);
                usleep(100 * 1000);
        }
        harness_untrack_pid(*pid);
        *pid = 0;
}

static void stop_apiserver(kubeapi *k)
{
        stop_process(&k->pid);
}

kube_client *kubeapi_client(const kubeapi *k, const char *context)
{
        kube_config *cfg = NULL;
        kube_client *c = NULL;
        char *err = NULL;

        if (kube_config_load(k->kubeconfig, context, &cfg, &err) < 0)
                fail_msg("kubeapi: %s", err);
        if (kube_client_new(cfg, &c, &err) < 0)
                fail_msg("kubeapi: %s", err);
        kube_config_free(cfg);
        return c;
}

int kubeapi_create_namespace(kubeapi *k, const char *ns)
{
        kube_client *admin = kubeapi_client(k, "admin");
        json_t *obj = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                                "metadata", "name", ns);
        int r = kube_apply(admin, obj, "gitcd-test-harness", false, false, NULL);

        if (r < 0)
                fprintf(stderr, "kubeapi: cannot create namespace %s: %s\n", ns,
                        kube_client_last_error(admin));
        json_decref(obj);
        kube_client_free(admin);
        return r;
}

void kubeapi_free(kubeapi *k)
{
        if (!k)
                return;
        stop_process(&k->cm_pid);
        stop_apiserver(k);
        harness_cluster_free(k->etcd);
        if (k->dir)
                (void)rm_rf(k->dir);
        for (size_t i = 0; k->argv[i]; i++)
                free(k->argv[i]);
        for (size_t i = 0; k->cm_argv[i]; i++)
                free(k->cm_argv[i]);
        free(k->cm_bin);
        free(k->cm_log_path);
        free(k->dir);
        free(k->bin);
        free(k->kubeconfig);
        free(k->server);
        free(k->log_path);
        free(k);
}

int kubeapi_start(kubeapi **ret)
{
        harness_opts opts = {.version = KUBEAPI_ETCD_VERSION};
        kubeapi *k = XNEW(kubeapi);
        int r;

        k->bin = kubeapi_find_binary();
        if (!k->bin || !harness_have_etcd(KUBEAPI_ETCD_VERSION)) {
                kubeapi_free(k);
                return -ENOENT;
        }
        k->dir = harness_tmpdir("gitcd-kubeapi");
        if (!k->dir) {
                r = -EIO;
                goto fail;
        }
        k->log_path = path_join(k->dir, "kube-apiserver.log");
        k->port = harness_free_port();
        k->server = xasprintf("https://127.0.0.1:%d", k->port);
        r = harness_cluster_start(&opts, &k->etcd);
        if (r < 0) {
                fprintf(stderr, "kubeapi: cannot start etcd: %s\n", strerror(-r));
                goto fail;
        }
        r = write_pki(k);
        if (r < 0)
                goto fail;
        build_argv(k);
        r = spawn(k);
        if (r < 0) {
                fprintf(stderr, "kubeapi: cannot start %s: %s\n", k->bin, strerror(-r));
                goto fail;
        }
        r = wait_ready(k);
        if (r < 0)
                goto fail;
        r = kubeapi_create_namespace(k, KUBEAPI_NAMESPACE);
        if (r < 0)
                goto fail;
        *ret = k;
        return 0;
fail:
        kubeapi_free(k);
        fail_msg("kubeapi: cannot start a kube-apiserver: %s", strerror(-r));
        return r;
}

void kubeapi_pause(kubeapi *k)
{
        stop_apiserver(k);
}

void kubeapi_resume(kubeapi *k)
{
        int r;

        if (k->pid > 0)
                return;
        r = spawn(k);
        if (r < 0)
                fail_msg("kubeapi: cannot start %s again: %s", k->bin, strerror(-r));
        r = wait_ready(k);
        if (r < 0)
                fail_msg("kubeapi: the restarted kube-apiserver is not ready: %s", strerror(-r));
}

int kubeapi_private_hosts(const char *dir, char **ret_hosts_path)
{
        _cleanup_free_ char *path = path_join(dir, "hosts"), *text = NULL;
        char host[256] = "";
        int fd, r;

        if (geteuid() != 0)
                return -EPERM;
        if (unshare(CLONE_NEWNS) < 0)
                return -EPERM;
        /* Keep our mounts from propagating back to the machine's namespace. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        if (gethostname(host, sizeof(host) - 1) < 0 || !*host)
                strcpy(host, "localhost");
        text = xasprintf("127.0.0.1 localhost\n::1 localhost\n127.0.0.1 %s\n", host);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        r = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -EIO;
        close(fd);
        if (r < 0)
                return r;
        if (mount(path, "/etc/hosts", NULL, MS_BIND, NULL) < 0)
                return -errno;
        *ret_hosts_path = TAKE_PTR(path);
        return 0;
}

static size_t discard(char *data, size_t size, size_t nmemb, void *userdata)
{
        (void)data;
        (void)userdata;
        return size * nmemb;
}

/* Does the controller-manager's /healthz (its own self-signed certificate) answer 200? */
static bool controller_manager_healthy(const kubeapi *k)
{
        _cleanup_free_ char *url = xasprintf("https://127.0.0.1:%d/healthz", k->cm_port);
        CURL *curl = curl_easy_init();
        long status = 0;

        if (!curl)
                return false;
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 2000L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
        if (curl_easy_perform(curl) == CURLE_OK)
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(curl);
        return status == 200;
}

int kubeapi_start_controllers(kubeapi *k)
{
        time_t deadline;
        size_t n = 0;
        int r;

        if (k->cm_pid > 0)
                return 0;
        if (!k->cm_bin) {
                k->cm_bin = kubeapi_find_controller_manager();
                if (!k->cm_bin)
                        return -ENOENT;
                k->cm_log_path = path_join(k->dir, "kube-controller-manager.log");
                k->cm_port = harness_free_port();
                k->cm_argv[n++] = xstrdup(k->cm_bin);
                k->cm_argv[n++] = xasprintf("--kubeconfig=%s", k->kubeconfig);
                k->cm_argv[n++] = xstrdup("--controllers=" KUBECM_CONTROLLERS);
                k->cm_argv[n++] = xstrdup("--leader-elect=false");
                k->cm_argv[n++] = xstrdup("--use-service-account-credentials=false");
                k->cm_argv[n++] = xstrdup("--port=0");
                k->cm_argv[n++] = xasprintf("--secure-port=%d", k->cm_port);
                k->cm_argv[n++] = xstrdup("--bind-address=127.0.0.1");
                k->cm_argv[n++] = xasprintf("--cert-dir=%s/kcm-certs", k->dir);
                /* Its own endpoints need no delegated authentication in a test. */
                k->cm_argv[n++] = xstrdup("--authentication-skip-lookup=true");
                k->cm_argv[n] = NULL;
        }
        r = spawn_process(k->cm_bin, k->cm_argv, k->cm_log_path, &k->cm_pid);
        if (r < 0) {
                fprintf(stderr, "kubeapi: cannot start %s: %s\n", k->cm_bin, strerror(-r));
                return r;
        }
        deadline = time(NULL) + KUBEAPI_READY_TIMEOUT_S;
        while (!controller_manager_healthy(k)) {
                if (waitpid(k->cm_pid, NULL, WNOHANG) == k->cm_pid) {
                        harness_untrack_pid(k->cm_pid);
                        k->cm_pid = 0;
                        print_file_tail("kube-controller-manager", k->cm_log_path);
                        fprintf(stderr,
                                "kubeapi: kube-controller-manager exited during start-up\n");
                        return -ECHILD;
                }
                if (time(NULL) > deadline) {
                        print_file_tail("kube-controller-manager", k->cm_log_path);
                        fprintf(stderr, "kubeapi: kube-controller-manager not healthy after %d s\n",
                                KUBEAPI_READY_TIMEOUT_S);
                        stop_process(&k->cm_pid);
                        return -ETIMEDOUT;
                }
                usleep(250 * 1000);
        }
        return 0;
}

void kubeapi_stop_controllers(kubeapi *k)
{
        stop_process(&k->cm_pid);
}
