/*
 * Git over HTTPS against a real smart-HTTP server on 127.0.0.1 (git
 * http-backend behind TLS with a test CA made by the openssl command, and
 * HTTP basic authentication): a certificate the trust store does not know is
 * refused; with the CA bundle, a token from a file, from an environment
 * variable or from the URL is accepted; a wrong or missing token is refused
 * with a clear message; no token ever appears in a message or a returned URL.
 * A redirect to another server gets no token, a server that accepts and
 * stalls is abandoned when the time budget is spent, and a repository over
 * the size budget is not fetched.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sources/source.h"
#include "tests/sources/gitfix.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define TOKEN "s3cr3t-t0ken"

static pid_t server_pid, redirect_pid;
static char *server_log, *redirect_url;
static char *dir, *cache, *url, *commit, *ca, *token_file, *bad_token_file;

static void kill_server(void)
{
        if (server_pid > 0) {
                kill(server_pid, SIGTERM);
                waitpid(server_pid, NULL, 0);
                server_pid = 0;
        }
        if (redirect_pid > 0) {
                kill(redirect_pid, SIGTERM);
                waitpid(redirect_pid, NULL, 0);
                redirect_pid = 0;
        }
}

static void on_signal(int sig)
{
        kill_server();
        signal(sig, SIG_DFL);
        raise(sig);
}

/*
 * Start git-https-server.py (redirecting to redirect when not NULL) with its
 * output in dir/server.log; returns its port, or NULL.
 */
static char *start_server(const char *script, const char *root, const char *cert, const char *key,
                          const char *port_name, const char *redirect, pid_t *ret_pid)
{
        _cleanup_free_ char *port_file = xasprintf("%s/%s", dir, port_name);
        _cleanup_free_ char *log = xasprintf("%s/server.log", dir);
        pid_t pid = fork();

        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

                prctl(PR_SET_PDEATHSIG, SIGTERM); /* die with the test, whatever kills it */
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execl("/usr/bin/python3", "python3", script, root, cert, key, port_file, "git",
                      TOKEN, redirect, (char *)NULL);
                _exit(127);
        }
        *ret_pid = pid;
        for (int i = 0; i < 2400 && !path_exists(port_file); i++) {
                struct timespec ts = {0, 25 * 1000000L};

                if (waitpid(pid, NULL, WNOHANG) == pid) {
                        *ret_pid = 0;
                        fix_sh("cat '%s' >&2", log);
                        return NULL;
                }
                nanosleep(&ts, NULL);
        }
        return fix_sh_out("cat '%s'", port_file);
}

static int group_setup(void **state)
{
        _cleanup_free_ char *work = NULL, *script = NULL, *port = NULL;
        _cleanup_free_ char *log = NULL, *cert = NULL, *key = NULL, *root = NULL;
        const char *src = getenv("GITCD_SOURCE_ROOT");

        if (access("/usr/bin/python3", X_OK) < 0 ||
            access("/usr/lib/git-core/git-http-backend", X_OK) < 0) {
                fprintf(stderr, "python3 or git-http-backend is missing\n");
                exit(77);
        }
        fix_init();
        atexit(kill_server);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        signal(SIGABRT, on_signal);
        dir = fix_tmpdir("https");
        cache = fix_tmpdir("cache");
        work = fix_tmpdir("work");
        root = xasprintf("%s/repos", dir);

        if (fix_sh("cd '%s' && "
                   "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                   "-keyout ca.key -out ca.crt -days 2 -subj /CN=gitcd-test-ca 2>/dev/null && "
                   "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                   "-keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null && "
                   "printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\n"
                   "extendedKeyUsage=serverAuth\\n' > ext && "
                   "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
                   "-out srv.crt -days 2 -extfile ext 2>/dev/null && "
                   "printf '%%s\\n' '%s' > token && printf 'wrong\\n' > bad_token && "
                   "chmod 600 token bad_token",
                   dir, TOKEN) != 0)
                return -1;
        ca = xasprintf("%s/ca.crt", dir);
        token_file = xasprintf("%s/token", dir);
        bad_token_file = xasprintf("%s/bad_token", dir);

        if (fix_sh("git init -q '%s'", work) != 0)
                return -1;
        fix_write(work, "clusters/a.yaml", "name: a\n");
        commit = fix_commit(work, "over https");
        if (!commit || fix_sh("mkdir -p '%s' && git clone -q --bare '%s' '%s/repo.git'", root, work,
                              root) != 0)
                return -1;

        if (fix_sh("git clone -q --bare '%s' '%s/redir.git'", work, root) != 0)
                return -1;
        script = xasprintf("%s/tests/sources/git-https-server.py", src ? src : ".");
        cert = xasprintf("%s/srv.crt", dir);
        key = xasprintf("%s/srv.key", dir);
        log = xasprintf("%s/server.log", dir);
        server_log = xstrdup(log);
        port = start_server(script, root, cert, key, "port", NULL, &server_pid);
        if (!port)
                return -1;
        {
                /* The redirector: every request is sent on to the real server. */
                _cleanup_free_ char *base = xasprintf("https://localhost:%s", port);
                _cleanup_free_ char *p2 =
                    start_server(script, root, cert, key, "redirect-port", base, &redirect_pid);

                if (!p2)
                        return -1;
                redirect_url = xasprintf("https://localhost:%s/redir.git", p2);
        }
        url = xasprintf("https://localhost:%s/repo.git", port);
        return 0;
}

static int group_teardown(void **state)
{
        kill_server();
        free(dir);
        free(cache);
        free(url);
        free(redirect_url);
        free(server_log);
        free(commit);
        free(ca);
        free(token_file);
        free(bad_token_file);
        fix_cleanup();
        return 0;
}

static int fetch(const source_opts *o, source_revision **ret, char **ret_msg)
{
        _cleanup_(source_freep) source *s = NULL;
        int r;

        *ret = NULL;
        r = source_open(o, &s, ret_msg);
        if (r < 0)
                return r;
        r = source_fetch(s, ret);
        *ret_msg = xstrdup(source_last_error(s));
        return r;
}

/* Runs first: nothing has pointed libgit2 at the test CA yet. */
static void test_untrusted_certificate(void **state)
{
        source_opts o = {.url_or_path = url, .cache_dir = cache, .https_token_file = token_file};
        source_revision *rev;
        char *msg = NULL;

        assert_int_equal(fetch(&o, &rev, &msg), -EACCES);
        if (!strstr(msg, "the TLS certificate of localhost is not trusted"))
                fail_msg("unexpected message: %s", msg);
        free(msg);
}

static void test_token_file(void **state)
{
        source_opts o = {.url_or_path = url,
                         .cache_dir = cache,
                         .https_ca_file = ca,
                         .https_token_file = token_file};
        source_revision *rev;
        char *msg = NULL;

        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        free(msg);
        assert_string_equal(rev->commit_id, commit);
        assert_string_equal(rev->repository, url);
        assert_int_equal(rev->n_files, 1);
        source_revision_free(rev);

        /* an unchanged remote: refs listed, nothing downloaded */
        assert_int_equal(fetch(&o, &rev, &msg), 0);
        free(msg);
        assert_true(rev->fetch_skipped);
        source_revision_free(rev);
}

static void test_token_env_and_url(void **state)
{
        _cleanup_free_ char *with_token = NULL;
        source_opts o = {.url_or_path = url,
                         .cache_dir = cache,
                         .https_ca_file = ca,
                         .https_token_env = "GITCD_TEST_TOKEN"};
        source_revision *rev;
        char *msg = NULL;

        setenv("GITCD_TEST_TOKEN", TOKEN, 1);
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        free(msg);
        source_revision_free(rev);
        unsetenv("GITCD_TEST_TOKEN");

        /* credentials in the URL are used, and never shown */
        with_token = xasprintf("https://git:%s@%s", TOKEN, url + strlen("https://"));
        o.url_or_path = with_token;
        o.https_token_env = NULL;
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        free(msg);
        assert_string_equal(rev->repository, url);
        assert_null(strstr(rev->repository, TOKEN));
        source_revision_free(rev);
}

static void test_bad_credentials(void **state)
{
        source_opts o = {.url_or_path = url,
                         .cache_dir = cache,
                         .https_ca_file = ca,
                         .https_token_file = bad_token_file};
        source_revision *rev;
        char *msg = NULL;

        assert_int_equal(fetch(&o, &rev, &msg), -EACCES);
        if (!strstr(msg, "authentication to localhost failed: the server rejected the "
                         "credentials for user \"git\""))
                fail_msg("unexpected message: %s", msg);
        assert_null(strstr(msg, "wrong"));
        free(msg);

        o.https_token_file = NULL;
        assert_int_equal(fetch(&o, &rev, &msg), -EACCES);
        if (!strstr(msg, "localhost requires authentication"))
                fail_msg("unexpected message: %s", msg);
        assert_null(strstr(msg, TOKEN));
        free(msg);
}

/*
 * A server that redirects to another port of the same host: the token is
 * never sent there (the credential callback checks the URL), so the fetch
 * fails and the other server never serves the redirected repository.
 */
static void test_redirect_to_another_server(void **state)
{
        source_opts o = {.url_or_path = redirect_url,
                         .cache_dir = cache,
                         .https_ca_file = ca,
                         .https_token_file = token_file};
        _cleanup_free_ char *served = NULL;
        source_revision *rev = NULL;
        char *msg = NULL;
        int r;

        r = fetch(&o, &rev, &msg);
        if (r == 0)
                fail_msg("the redirected fetch succeeded: the token was sent to another server");
        assert_true(r == -EACCES || r == -EIO);
        assert_null(strstr(msg, TOKEN));
        free(msg);
        /* the real server never answered a request for redir.git with content */
        served = fix_sh_out("grep -c 'GET /redir.git.* 200' '%s' || true", server_log);
        assert_string_equal(served, "0");
}

/* A server that accepts the connection and never answers: the time budget ends the fetch. */
static void test_stalled_server(void **state)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        _cleanup_free_ char *stall_url = NULL;
        source_revision *rev = NULL;
        char *msg = NULL;

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 8), 0); /* the kernel accepts; nobody ever answers */
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        stall_url = xasprintf("https://localhost:%d/repo.git", ntohs(sa.sin_port));

        source_opts o = {.url_or_path = stall_url,
                         .cache_dir = cache,
                         .https_ca_file = ca,
                         .https_token_file = token_file,
                         .fetch_timeout_s = 2};
        assert_int_equal(fetch(&o, &rev, &msg), -ETIMEDOUT);
        if (!strstr(msg, "took longer than 2 s and was aborted"))
                fail_msg("unexpected message: %s", msg);
        free(msg);
}

/* A repository larger than the size budget: the fetch is aborted, nothing is read. */
static void test_size_budget(void **state)
{
        _cleanup_free_ char *budget_cache = fix_tmpdir("budget-cache");
        source_opts o = {.url_or_path = url,
                         .cache_dir = budget_cache,
                         .https_ca_file = ca,
                         .https_token_file = token_file,
                         .max_fetch_objects = 2};
        source_revision *rev = NULL;
        char *msg = NULL;

        assert_int_equal(fetch(&o, &rev, &msg), -EFBIG);
        if (!strstr(msg, "exceeds the budget of 2 objects"))
                fail_msg("unexpected message: %s", msg);
        free(msg);

        o.max_fetch_objects = 0;
        o.max_fetch_bytes = 64;
        assert_int_equal(fetch(&o, &rev, &msg), -EFBIG);
        if (!strstr(msg, "exceeds the budget of 64 bytes"))
                fail_msg("unexpected message: %s", msg);
        free(msg);

        /* within the default budgets the same mirror fetches fine */
        o.max_fetch_bytes = 0;
        if (fetch(&o, &rev, &msg) < 0)
                fail_msg("%s", msg);
        free(msg);
        assert_string_equal(rev->commit_id, commit);
        source_revision_free(rev);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_untrusted_certificate),
            cmocka_unit_test(test_token_file),
            cmocka_unit_test(test_token_env_and_url),
            cmocka_unit_test(test_bad_credentials),
            cmocka_unit_test(test_redirect_to_another_server),
            cmocka_unit_test(test_stalled_server),
            cmocka_unit_test(test_size_budget),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
