/*
 * s3rver on loopback for the snapshot tests; see s3rver.h.
 *
 * The server is a node program: it is started with its own process group and
 * a parent-death signal, tracked with harness_track_pid() so the harness's
 * exit and signal handlers kill it, and its folder comes from harness_tmpdir()
 * so it is removed at exit. Readiness is an HTTP answer (any status) on its
 * port; a start that loses its port to another process is retried on a new one.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pki/pki.h"
#include "tests/harness/harness.h"
#include "tests/harness/s3rver.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define START_TIMEOUT_MS 30000
#define SERVICE_ENDPOINT "gitcd.test"

extern char **environ;

char *harness_s3rver_path(void)
{
        const char *env = getenv("GITCD_S3RVER");
        _cleanup_free_ char *p = NULL;
        if (!isempty(env)) {
                p = xstrdup(env);
        } else {
                /* The cache scripts/setup fills: $GITCD_CACHE_DIR, else $XDG_CACHE_HOME/gitcd,
                 * else ~/.cache/gitcd. */
                _cleanup_free_ char *cache = NULL;
                if (!isempty(getenv("GITCD_CACHE_DIR"))) {
                        cache = xstrdup(getenv("GITCD_CACHE_DIR"));
                } else if (!isempty(getenv("XDG_CACHE_HOME"))) {
                        cache = xasprintf("%s/gitcd", getenv("XDG_CACHE_HOME"));
                } else {
                        const char *home = getenv("HOME");
                        if (isempty(home)) {
                                struct passwd *pw = getpwuid(getuid());
                                if (!pw)
                                        return NULL;
                                home = pw->pw_dir;
                        }
                        cache = xasprintf("%s/.cache/gitcd", home);
                }
                p = xasprintf("%s/s3rver/%s/node_modules/.bin/s3rver", cache,
                              HARNESS_S3RVER_VERSION);
        }
        return access(p, X_OK) == 0 ? TAKE_PTR(p) : NULL;
}

static void sleep_ms(int ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int tls_generate(harness_s3rver *s, char **ret_cert, char **ret_key)
{
        _cleanup_free_ char *dir = path_join(s->dir, "tls");
        int r = mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        pki_key *ca_key = NULL, *key = NULL;
        pki_cert *ca = NULL, *cert = NULL;
        _cleanup_free_ char *ca_path = path_join(dir, "ca.crt");
        _cleanup_free_ char *cert_path = path_join(dir, "server.crt");
        _cleanup_free_ char *key_path = path_join(dir, "server.key");
        const char *dns[] = {"s3." SERVICE_ENDPOINT, "*.s3." SERVICE_ENDPOINT, "localhost", NULL};
        const char *ips[] = {"127.0.0.1", NULL};
        pki_cert_request req = {
            .cn = "s3rver",
            .dns_names = dns,
            .ip_addresses = ips,
            .days = 2,
            .server = true,
        };
        r = pki_ca_create("gitcd s3 test CA", 2, &ca_key, &ca);
        if (r == 0)
                r = pki_write_pem(ca_path, NULL, ca, NULL);
        if (r == 0)
                r = pki_cert_issue(ca, ca_key, &req, &key, &cert);
        if (r == 0)
                r = pki_write_pem(cert_path, key_path, cert, key);
        if (r < 0)
                fprintf(stderr, "harness: cannot make TLS material for s3rver: %s\n",
                        pki_last_error());
        pki_cert_free(ca);
        pki_cert_free(cert);
        pki_key_free(ca_key);
        pki_key_free(key);
        if (r < 0)
                return r;
        s->ca_file = TAKE_PTR(ca_path);
        *ret_cert = TAKE_PTR(cert_path);
        *ret_key = TAKE_PTR(key_path);
        return 0;
}

static int spawn(harness_s3rver *s)
{
        _cleanup_free_ char *port = xasprintf("%d", s->port);
        _cleanup_free_ char *cert = NULL, *key = NULL;
        if (s->tls) {
                _cleanup_free_ char *dir = path_join(s->dir, "tls");
                cert = path_join(dir, "server.crt");
                key = path_join(dir, "server.key");
        }
        const char *argv[] = {s->bin,
                              "--directory",
                              s->data_dir,
                              "--address",
                              "127.0.0.1",
                              "--port",
                              port,
                              "--service-endpoint",
                              SERVICE_ENDPOINT,
                              "--configure-bucket",
                              s->bucket,
                              s->tls ? "--cert" : NULL,
                              cert,
                              "--key",
                              key,
                              NULL};
        int log = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log < 0)
                return -errno;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid == 0) {
                (void)setpgid(0, 0);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                int devnull = open("/dev/null", O_RDONLY);
                if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
                        _exit(127);
                (void)close_range(3, ~0U, 0);
                execve(argv[0], (char **)argv, environ);
                dprintf(2, "harness: cannot execute %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        int e = errno;
        close(log);
        if (pid < 0)
                return -e;
        (void)setpgid(pid, pid);
        harness_track_pid(pid);
        s->pid = pid;
        return 0;
}

static size_t discard(char *data, size_t size, size_t n, void *userdata)
{
        return size * n;
}

/* Any HTTP answer on the port means s3rver listens (it creates the bucket first). */
static bool answers(const harness_s3rver *s)
{
        CURL *h = curl_easy_init();
        if (!h)
                return false;
        _cleanup_free_ char *url = xasprintf("%s/", s->endpoint_ip);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        if (s->ca_file)
                curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_file);
        long status = 0;
        if (curl_easy_perform(h) == CURLE_OK)
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        return status > 0;
}

static void print_log_tail(const harness_s3rver *s)
{
        char *data = NULL;
        size_t len = 0;
        if (read_file(s->log_path, 1 << 20, &data, &len) < 0)
                return;
        const char *tail = len > 3000 ? data + len - 3000 : data;
        fprintf(stderr, "harness: s3rver log (%s), last lines:\n%s\n", s->log_path, tail);
        free(data);
}

static bool log_says_port_taken(const harness_s3rver *s)
{
        char *data = NULL;
        size_t len = 0;
        if (read_file(s->log_path, 1 << 20, &data, &len) < 0)
                return false;
        bool taken = strstr(data, "EADDRINUSE") != NULL;
        free(data);
        return taken;
}

/* Wait for an answer; -ECHILD when the process died, -ETIMEDOUT. */
static int wait_ready(harness_s3rver *s)
{
        int64_t deadline = now_mono_ms() + START_TIMEOUT_MS;
        while (now_mono_ms() < deadline) {
                int status;
                if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
                        harness_untrack_pid(s->pid);
                        s->pid = 0;
                        return -ECHILD;
                }
                if (answers(s))
                        return 0;
                sleep_ms(100);
        }
        return -ETIMEDOUT;
}

static void set_port(harness_s3rver *s, int port)
{
        const char *scheme = s->tls ? "https" : "http";
        s->port = port;
        free(s->endpoint_ip);
        free(s->endpoint_host);
        free(s->resolve[0]);
        free(s->resolve[1]);
        s->endpoint_ip = xasprintf("%s://127.0.0.1:%d", scheme, port);
        s->endpoint_host = xasprintf("%s://s3.%s:%d", scheme, SERVICE_ENDPOINT, port);
        s->resolve[0] = xasprintf("s3.%s:%d:127.0.0.1", SERVICE_ENDPOINT, port);
        s->resolve[1] = xasprintf("%s.s3.%s:%d:127.0.0.1", s->bucket, SERVICE_ENDPOINT, port);
        s->resolve[2] = NULL;
}

int harness_s3rver_start(const harness_s3rver_opts *opts, harness_s3rver **ret)
{
        harness_s3rver_opts o = opts ? *opts : (harness_s3rver_opts){0};
        _cleanup_free_ char *bin = harness_s3rver_path();
        if (!bin) {
                fprintf(stderr, "harness: s3rver %s is not installed (run scripts/setup)\n",
                        HARNESS_S3RVER_VERSION);
                return -ENOENT;
        }
        harness_s3rver *s = XNEW(harness_s3rver);
        s->bin = TAKE_PTR(bin);
        s->tls = o.tls;
        s->bucket = xstrdup(isempty(o.bucket) ? "snaps" : o.bucket);
        s->dir = harness_tmpdir("gitcd-s3rver");
        if (!s->dir) {
                harness_s3rver_free(s);
                return -EIO;
        }
        s->data_dir = path_join(s->dir, "data");
        s->log_path = path_join(s->dir, "s3rver.log");
        int r = mkdir_p(s->data_dir, 0700);
        if (r == 0 && s->tls) {
                _cleanup_free_ char *cert = NULL, *key = NULL;
                r = tls_generate(s, &cert, &key);
        }
        for (int attempt = 0; r == 0 && attempt < 5; attempt++) {
                int port = harness_free_port();
                if (port < 0) {
                        r = port;
                        break;
                }
                set_port(s, port);
                r = spawn(s);
                if (r == 0)
                        r = wait_ready(s);
                if (r == -ECHILD && log_says_port_taken(s)) {
                        r = 0;
                        continue;
                }
                break;
        }
        if (r < 0) {
                fprintf(stderr, "harness: s3rver did not start: %s\n", strerror(-r));
                print_log_tail(s);
                harness_s3rver_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

int harness_s3rver_kill(harness_s3rver *s)
{
        if (!s || s->pid <= 0)
                return 0;
        (void)kill(-s->pid, SIGKILL);
        (void)kill(s->pid, SIGKILL);
        int status;
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(s->pid);
        s->pid = 0;
        return 0;
}

int harness_s3rver_restart(harness_s3rver *s)
{
        harness_s3rver_kill(s);
        int r = spawn(s);
        if (r == 0)
                r = wait_ready(s);
        if (r < 0) {
                fprintf(stderr, "harness: s3rver did not restart: %s\n", strerror(-r));
                print_log_tail(s);
        }
        return r;
}

void harness_s3rver_free(harness_s3rver *s)
{
        if (!s)
                return;
        harness_s3rver_kill(s);
        if (s->dir)
                (void)rm_rf(s->dir);
        free(s->bin);
        free(s->dir);
        free(s->data_dir);
        free(s->log_path);
        free(s->bucket);
        free(s->endpoint_ip);
        free(s->endpoint_host);
        free(s->resolve[0]);
        free(s->resolve[1]);
        free(s->ca_file);
        free(s);
}
