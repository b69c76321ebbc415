/*
 * The push receiver's lab (see push-lab.h). The Git server is the one the
 * sources tests use (tests/sources/git-https-server.py), with its own CA;
 * gitcd reads it with httpsCA and a token file, exactly as an operator's
 * configuration would.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "tests/harness/harness.h"
#include "tests/ops/ops-test.h"
#include "tests/ops/push-lab.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define GIT_TOKEN "lab-git-token"

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *cmd = xvasprintf(fmt, ap);
        va_end(ap);
        int k = system(cmd);
        return WIFEXITED(k) ? WEXITSTATUS(k) : -1;
}

static char *sh_out(const char *cmd)
{
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        strbuf sb = STRBUF_INIT;
        char buf[256];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                sb_append_len(&sb, buf, n);
        pclose(f);
        char *s = sb_detach(&sb);
        s[strcspn(s, "\n")] = 0;
        return s;
}

/* Start the Git server on the bare repositories under dir/repos; its port. */
static int start_server(push_lab *l)
{
        const char *src = getenv("GITCD_SOURCE_ROOT");
        _cleanup_free_ char *script =
            xasprintf("%s/tests/sources/git-https-server.py", src ? src : ".");
        _cleanup_free_ char *port_file = xasprintf("%s/port", l->dir);
        _cleanup_free_ char *log = xasprintf("%s/git-server.log", l->dir);
        _cleanup_free_ char *root = xasprintf("%s/repos", l->dir);
        _cleanup_free_ char *cert = xasprintf("%s/srv.crt", l->dir);
        _cleanup_free_ char *key = xasprintf("%s/srv.key", l->dir);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
                prctl(PR_SET_PDEATHSIG, SIGTERM); /* dies with the test */
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execl("/usr/bin/python3", "python3", script, root, cert, key, port_file, "git",
                      GIT_TOKEN, (char *)NULL);
                _exit(127);
        }
        l->server = pid;
        for (int64_t t0 = now_mono_ms(); !path_exists(port_file);) {
                if (waitpid(pid, NULL, WNOHANG) == pid || now_mono_ms() - t0 > 60000) {
                        l->server = 0;
                        (void)sh("cat '%s' >&2", log);
                        fail_msg("the Git server did not start");
                }
                usleep(25 * 1000);
        }
        _cleanup_free_ char *cmd = xasprintf("cat '%s'", port_file);
        _cleanup_free_ char *port = sh_out(cmd);
        return atoi(port);
}

push_lab *push_lab_new(void)
{
        if (access("/usr/bin/python3", X_OK) < 0 ||
            access("/usr/lib/git-core/git-http-backend", X_OK) < 0) {
                fprintf(stderr, "python3 or git-http-backend is missing\n");
                return NULL;
        }
        push_lab *l = XNEW(push_lab);
        l->e = e2e_new();
        l->dir = path_join(l->e->root, "lab");
        l->work = path_join(l->dir, "work");
        assert_int_equal(
            sh("mkdir -p '%s/repos' && cd '%s' && "
               "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
               "-keyout ca.key -out ca.crt -days 2 -subj /CN=gitcd-test-ca 2>/dev/null && "
               "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
               "-keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null && "
               "printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\n"
               "extendedKeyUsage=serverAuth\\n' > ext && "
               "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
               "-out srv.crt -days 2 -extfile ext 2>/dev/null && "
               "printf '%%s\\n' '%s' > git.token && printf '%%s\\n' '%s' > hook.secret && "
               "chmod 600 git.token hook.secret && "
               "git init -q -b main '%s' && printf 'fleet\\n' > '%s/README' && "
               "git -C '%s' add -A && git -C '%s' -c user.name=t -c user.email=t@example.com "
               "commit -q -m first && git clone -q --bare '%s' repos/fleet.git && "
               "git -C '%s' remote add origin \"$PWD/repos/fleet.git\"",
               l->dir, l->dir, GIT_TOKEN, PUSH_LAB_SECRET, l->work, l->work, l->work, l->work,
               l->work, l->work),
            0);
        int port = start_server(l);
        l->url = xasprintf("https://localhost:%d/fleet.git", port);
        return l;
}

int push_lab_stop_daemon(push_lab *l)
{
        if (l->daemon <= 0)
                return 0;
        kill(l->daemon, SIGTERM);
        int status = e2e_wait_exit(l->daemon);
        l->daemon = 0;
        return status;
}

void push_lab_free(push_lab *l)
{
        if (!l)
                return;
        (void)push_lab_stop_daemon(l);
        if (l->server > 0) {
                kill(l->server, SIGTERM);
                waitpid(l->server, NULL, 0);
        }
        e2e_free(l->e);
        free(l->dir);
        free(l->work);
        free(l->url);
        free(l->hooks);
        free(l->config);
        free(l);
}

void push_lab_start_daemon(push_lab *l, const char *interval)
{
        int port = harness_free_port();
        l->hooks = xasprintf("http://127.0.0.1:%d/hooks", port);
        _cleanup_free_ char *text = xasprintf("interval: %s\n"
                                              "listen: 127.0.0.1:%d\n"
                                              "sources:\n"
                                              "  - name: fleet\n"
                                              "    url: %s\n"
                                              "    ref: main\n"
                                              "    credentials:\n"
                                              "      httpsCA: %s/ca.crt\n"
                                              "      tokenFile: %s/git.token\n"
                                              "      username: git\n"
                                              "    webhook:\n"
                                              "      secretFile: %s/hook.secret\n",
                                              interval, port, l->url, l->dir, l->dir, l->dir);
        l->config = ops_test_write(l->e, "gitcd.yaml", text);
        const char *args[] = {"run", "--config", l->config, NULL};
        l->daemon = e2e_start(l->e, args, "daemon.log");
        _cleanup_free_ char *healthz = xasprintf("http://127.0.0.1:%d/healthz", port);
        for (int64_t t0 = now_mono_ms(); ops_test_get(healthz, NULL, NULL) != 200;) {
                if (now_mono_ms() - t0 > 60000) {
                        _cleanup_free_ char *log = e2e_read_log(l->e, "daemon.log");
                        fail_msg("gitcd run did not serve /healthz:\n%s", log);
                }
                usleep(50 * 1000);
        }
}

char *push_lab_commit(push_lab *l, const char *rel, const char *text)
{
        _cleanup_free_ char *path = path_join(l->work, rel);
        _cleanup_free_ char *dir = xstrdup(path);
        *strrchr(dir, '/') = 0;
        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
        assert_int_equal(sh("git -C '%s' add -A && git -C '%s' -c user.name=t "
                            "-c user.email=t@example.com commit -q -m change && "
                            "git -C '%s' push -q origin main",
                            l->work, l->work, l->work),
                         0);
        _cleanup_free_ char *cmd = xasprintf("git -C '%s' rev-parse HEAD", l->work);
        return sh_out(cmd);
}

char *push_lab_github_payload(const push_lab *l, const char *ref, const char *commit)
{
        /* the shape of GitHub's push event, trimmed to what a reader may look at */
        return xasprintf("{\"ref\":\"%s\",\"before\":\"%040d\",\"after\":\"%s\","
                         "\"created\":false,\"deleted\":false,\"forced\":false,"
                         "\"repository\":{\"name\":\"fleet\",\"full_name\":\"acme/fleet\","
                         "\"private\":true,\"html_url\":\"%.*s\",\"clone_url\":\"%s\","
                         "\"default_branch\":\"main\"},"
                         "\"pusher\":{\"name\":\"t\",\"email\":\"t@example.com\"},"
                         "\"head_commit\":{\"id\":\"%s\",\"message\":\"change\"}}",
                         ref, 0, commit, (int)(strlen(l->url) - 4), l->url, l->url, commit);
}

static size_t collect(char *data, size_t size, size_t n, void *userdata)
{
        sb_append_len(userdata, data, size * n);
        return size * n;
}

long push_lab_post(const push_lab *l, const char *forge, const char *header, const char *body,
                   size_t len, char **ret_body)
{
        CURL *c = curl_easy_init();
        assert_non_null(c);
        _cleanup_free_ char *url = xasprintf("%s/%s", l->hooks, forge);
        strbuf reply = STRBUF_INIT;
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        h = curl_slist_append(h, "X-GitHub-Event: push");
        if (header)
                h = curl_slist_append(h, header);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        if (ret_body)
                *ret_body = sb_detach(&reply);
        else
                sb_release(&reply);
        return status;
}

typedef struct reader {
        const char *data;
        size_t left;
} reader;

static size_t feed(char *buf, size_t size, size_t n, void *userdata)
{
        reader *r = userdata;
        size_t k = MIN(size * n, r->left);
        memcpy(buf, r->data, k);
        r->data += k;
        r->left -= k;
        return k;
}

long push_lab_post_chunked(const push_lab *l, const char *forge, const char *body, size_t len)
{
        CURL *c = curl_easy_init();
        assert_non_null(c);
        _cleanup_free_ char *url = xasprintf("%s/%s", l->hooks, forge);
        reader r = {body, len};
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        h = curl_slist_append(h, "Transfer-Encoding: chunked");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, feed);
        curl_easy_setopt(c, CURLOPT_READDATA, &r);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return status;
}

long push_lab_github_push(const push_lab *l, const char *secret, const char *commit)
{
        _cleanup_free_ char *body = push_lab_github_payload(l, "refs/heads/main", commit);
        _cleanup_free_ char *hex = hash_hmac_sha256_hex(secret, strlen(secret), body, strlen(body));
        _cleanup_free_ char *header = xasprintf("X-Hub-Signature-256: sha256=%s", hex);
        return push_lab_post(l, "github", header, body, strlen(body), NULL);
}

char *push_lab_metrics(const push_lab *l)
{
        _cleanup_free_ char *url = xasprintf("%.*s/metrics", (int)(strlen(l->hooks) - 6), l->hooks);
        char *body = NULL;
        assert_int_equal(ops_test_get(url, NULL, &body), 200);
        return body;
}

int push_lab_fetches(const push_lab *l)
{
        _cleanup_free_ char *m = push_lab_metrics(l);
        double v =
            ops_test_metric(m, "gitcd_source_fetch_duration_seconds_count{source=\"fleet\"}");
        return v < 0 ? 0 : (int)v;
}

int push_lab_log_count(const push_lab *l, const char *needle)
{
        _cleanup_free_ char *log = e2e_read_log(l->e, "daemon.log");
        int n = 0;
        for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}
