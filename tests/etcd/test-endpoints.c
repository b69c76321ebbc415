/*
 * Which endpoints gitcd's etcd client talks to, and what reaches the user
 * from them, against a real etcd of the version given as argv[1] (3.5.16 or
 * 3.4.23), through the client API and the real gitcd binary ($GITCD_BIN):
 *
 *  - a dead or silent first endpoint fails over to a live second one within
 *    the call's deadline (`gitcd etcd member list --endpoints DEAD,LIVE`);
 *  - the client never dials a URL a member advertises (the member here
 *    advertises a fake server as its client URL) and never changes the
 *    configured scheme, so neither the token nor the password can go
 *    anywhere else;
 *  - a kept connection the server closes under a call is replaced by a
 *    new one to the same member, not taken for a dead member;
 *  - a grpc-message with control characters is shown escaped;
 *  - a password on the command line (--user NAME:PASS, a URL) is gone from
 *    /proc/PID/cmdline while the command runs, with a warning.
 *
 * The etcd member is started here rather than by the harness because it
 * needs an --advertise-client-urls of its own; it is tracked by the harness
 * all the same, so it never outlives the test. The fake servers are
 * listening sockets: a silent one never answers (the kernel accepts), a
 * gRPC one speaks just enough HTTP/2 to end every call with a status.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "etcd/pool.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char *version = "3.5.16";
static const char *gitcd_bin;
static char *tmp;
static pid_t etcd_pid;
static char *live_url; /* the member's real client URL */

/* ---- fake servers ---- */

typedef struct fake_server {
        int fd;
        int port;
        char *url;
        const char *grpc_message; /* NULL: silent; else every call ends with it (percent-encoded) */
        pthread_t thread;
        volatile int stop;
        volatile int connections; /* connections accepted by the gRPC server */
        volatile int requests;    /* requests seen by the gRPC server */
        int drop_request;         /* 0, or the request (1, 2, ...) it drops with its connection */
} fake_server;

static int listen_loopback(int *ret_port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(fd, 64), 0);
        socklen_t len = sizeof(a);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

/* Read exactly n bytes; false on EOF, error or when the server is told to stop. */
static bool read_full(fake_server *s, int fd, uint8_t *buf, size_t n)
{
        size_t got = 0;
        while (got < n) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int k = poll(&p, 1, 100);
                if (s->stop)
                        return false;
                if (k <= 0)
                        continue;
                ssize_t r = read(fd, buf + got, n - got);
                if (r <= 0)
                        return false;
                got += (size_t)r;
        }
        return true;
}

static void write_frame(int fd, uint8_t type, uint8_t flags, uint32_t stream, const uint8_t *data,
                        size_t len)
{
        uint8_t h[9] = {(uint8_t)(len >> 16),
                        (uint8_t)(len >> 8),
                        (uint8_t)len,
                        type,
                        flags,
                        (uint8_t)(stream >> 24),
                        (uint8_t)(stream >> 16),
                        (uint8_t)(stream >> 8),
                        (uint8_t)stream};
        if (write(fd, h, 9) != 9 || (len && write(fd, data, len) != (ssize_t)len))
                return; /* the client went away */
}

/* HPACK: a literal header field without indexing, with a literal name (no Huffman). */
static size_t hpack_literal(uint8_t *out, const char *name, const char *value)
{
        size_t n = 0, nl = strlen(name), vl = strlen(value);
        assert_true(nl < 127 && vl < 127);
        out[n++] = 0x00;
        out[n++] = (uint8_t)nl;
        memcpy(out + n, name, nl);
        n += nl;
        out[n++] = (uint8_t)vl;
        memcpy(out + n, value, vl);
        return n + vl;
}

/* One HTTP/2 connection: every request stream ends with grpc-status 2 and the message. */
static void serve_grpc(fake_server *s, int fd)
{
        uint8_t preface[24];
        if (!read_full(s, fd, preface, sizeof(preface)))
                return;
        write_frame(fd, 0x4, 0, 0, NULL, 0); /* our SETTINGS */
        for (;;) {
                uint8_t h[9];
                if (!read_full(s, fd, h, 9))
                        return;
                size_t len = ((size_t)h[0] << 16) | ((size_t)h[1] << 8) | h[2];
                uint8_t type = h[3], flags = h[4];
                uint32_t stream = ((uint32_t)(h[5] & 0x7f) << 24) | ((uint32_t)h[6] << 16) |
                                  ((uint32_t)h[7] << 8) | h[8];
                uint8_t *payload = xmalloc(len + 1);
                bool ok = read_full(s, fd, payload, len);
                free(payload);
                if (!ok)
                        return;
                if (type == 0x4 && !(flags & 0x1)) /* SETTINGS: acknowledge */
                        write_frame(fd, 0x4, 0x1, 0, NULL, 0);
                bool end_stream = (type == 0x0 || type == 0x1) && (flags & 0x1);
                if (!end_stream)
                        continue;
                /* a kept connection that breaks under a request: no answer at all */
                if (__atomic_add_fetch(&s->requests, 1, __ATOMIC_SEQ_CST) == s->drop_request)
                        return;
                /* trailers-only answer: :status 200, content-type, grpc-status, grpc-message */
                uint8_t block[512];
                size_t n = 0;
                block[n++] = 0x88; /* :status: 200 (static table entry 8) */
                n += hpack_literal(block + n, "content-type", "application/grpc");
                n += hpack_literal(block + n, "grpc-status", "2");
                n += hpack_literal(block + n, "grpc-message", s->grpc_message);
                write_frame(fd, 0x1, 0x4 | 0x1, stream, block, n);
        }
}

static void *fake_main(void *arg)
{
        fake_server *s = arg;
        while (!s->stop) {
                struct pollfd p = {.fd = s->fd, .events = POLLIN};
                if (poll(&p, 1, 100) <= 0)
                        continue;
                int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        continue;
                __atomic_add_fetch(&s->connections, 1, __ATOMIC_SEQ_CST);
                serve_grpc(s, c);
                close(c);
        }
        return NULL;
}

/* A silent server (grpc_message NULL: the kernel accepts, nobody answers) or a gRPC one. */
static fake_server *fake_start(const char *grpc_message)
{
        fake_server *s = XNEW(fake_server);
        s->fd = listen_loopback(&s->port);
        s->url = xasprintf("http://127.0.0.1:%d", s->port);
        s->grpc_message = grpc_message;
        if (grpc_message)
                assert_int_equal(pthread_create(&s->thread, NULL, fake_main, s), 0);
        return s;
}

static void fake_stop(fake_server *s)
{
        if (!s)
                return;
        s->stop = 1;
        if (s->grpc_message)
                pthread_join(s->thread, NULL);
        close(s->fd);
        free(s->url);
        free(s);
}

/*
 * Wait for a silent server's next connection (bounded, so a broken test
 * cannot hang) and return it, still open: the client keeps waiting until
 * the caller closes it.
 */
static int silent_wait_connection(fake_server *s)
{
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (poll(&p, 1, 30000) <= 0)
                return -1;
        return accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
}

/* ---- the etcd member and the gitcd binary ---- */

static etcd_client *client_on(const char *endpoints, int timeout_ms)
{
        etcd_client_opts o = {.endpoints = endpoints, .call_timeout_ms = timeout_ms};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

#define assert_ok(c, expr)                                                                         \
        do {                                                                                       \
                int _r = (expr);                                                                   \
                if (_r != 0)                                                                       \
                        fail_msg("%s = %d (%s): %s", #expr, _r, etcd_strerror(_r),                 \
                                 etcd_client_last_error(c));                                       \
        } while (0)

static fake_server *advertised; /* what the member claims as its client URL */

/* One etcd member listening on live_url but advertising the fake server's URL. */
static int start_member(void)
{
        _cleanup_free_ char *bin = harness_etcd_path(version, "etcd");
        if (!bin)
                return -ENOENT;
        int client_port = harness_free_port(), peer_port = harness_free_port();
        live_url = xasprintf("http://127.0.0.1:%d", client_port);
        _cleanup_free_ char *peer = xasprintf("http://127.0.0.1:%d", peer_port);
        _cleanup_free_ char *cluster = xasprintf("m0=%s", peer);
        _cleanup_free_ char *data = xasprintf("%s/m0.etcd", tmp);
        _cleanup_free_ char *log = xasprintf("%s/m0.log", tmp);
        const char *argv[] = {bin,
                              "--name",
                              "m0",
                              "--data-dir",
                              data,
                              "--listen-client-urls",
                              live_url,
                              "--advertise-client-urls",
                              advertised->url,
                              "--listen-peer-urls",
                              peer,
                              "--initial-advertise-peer-urls",
                              peer,
                              "--initial-cluster",
                              cluster,
                              NULL};
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execv(bin, (char **)argv);
                _exit(127);
        }
        etcd_pid = pid;
        harness_track_pid(pid);
        /* ready when a call through the live URL succeeds */
        etcd_client *c = client_on(live_url, 1000);
        int64_t until = now_mono_ms() + 20000;
        int r;
        do {
                etcd_members *l = NULL;
                r = etcd_member_list(c, &l);
                etcd_members_free(l);
                if (r < 0)
                        usleep(100 * 1000);
        } while (r < 0 && now_mono_ms() < until);
        etcd_client_free(c);
        return r;
}

static int setup(void **state)
{
        gitcd_bin = getenv("GITCD_BIN");
        if (isempty(gitcd_bin))
                return -1;
        tmp = harness_tmpdir("etcd-endpoints");
        if (!tmp)
                return -1;
        advertised = fake_start("etcdserver: invalid auth token");
        int r = start_member();
        if (r < 0) {
                fprintf(stderr, "cannot start etcd %s: %s\n", version, etcd_strerror(r));
                return -1;
        }
        return 0;
}

static int teardown(void **state)
{
        if (etcd_pid > 0) {
                kill(-etcd_pid, SIGKILL);
                waitpid(etcd_pid, NULL, 0);
                harness_untrack_pid(etcd_pid);
        }
        fake_stop(advertised);
        free(live_url);
        free(tmp);
        return 0;
}

struct run {
        int status;
        char *out;
        char *err;
};

static void run_release(struct run *r)
{
        free(r->out);
        free(r->err);
}

/* Start gitcd with argv (NULL-terminated, without the binary), its output in files. */
static pid_t spawn_gitcd(const char *const *args)
{
        const char *argv[32] = {gitcd_bin};
        size_t n = 1;
        while (args[n - 1] && n < ARRAY_SIZE(argv) - 1) {
                argv[n] = args[n - 1];
                n++;
        }
        argv[n] = NULL;
        _cleanup_free_ char *out = xasprintf("%s/out", tmp), *err = xasprintf("%s/err", tmp);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (o < 0 || e < 0)
                        _exit(127);
                dup2(o, 1);
                dup2(e, 2);
                unsetenv("GITCD_ETCD_PASSWORD");
                execv(gitcd_bin, (char **)argv);
                _exit(127);
        }
        return pid;
}

static struct run wait_gitcd(pid_t pid)
{
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        struct run r = {.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)};
        _cleanup_free_ char *out = xasprintf("%s/out", tmp), *err = xasprintf("%s/err", tmp);
        size_t len;
        assert_int_equal(read_file(out, 1 << 24, &r.out, &len), 0);
        assert_int_equal(read_file(err, 1 << 24, &r.err, &len), 0);
        return r;
}

static struct run run_gitcd(const char *const *args)
{
        return wait_gitcd(spawn_gitcd(args));
}

/* ---- fail-over ---- */

static void check_member_list(etcd_client *c)
{
        etcd_members *l = NULL;
        assert_ok(c, etcd_member_list(c, &l));
        assert_int_equal(l->n, 1);
        assert_string_equal(l->members[0].name, "m0");
        etcd_members_free(l);
}

/* The defect: a dead first endpoint made every call fail with "cannot connect". */
static void test_dead_first_endpoint(void **state)
{
        _cleanup_free_ char *dead = xasprintf("http://127.0.0.1:%d", harness_free_port());
        _cleanup_free_ char *eps = xasprintf("%s,%s", dead, live_url);
        etcd_client *c = client_on(eps, 5000);
        check_member_list(c);
        /* a refused connection carried nothing: a write fails over too */
        assert_ok(c, etcd_put(c, "/failover", "1", 1, NULL));
        etcd_client_free(c);

        /* two dead ones before the live one: each is tried once, in order */
        _cleanup_free_ char *dead2 = xasprintf("http://127.0.0.1:%d", harness_free_port());
        _cleanup_free_ char *eps3 = xasprintf("%s,%s,%s", dead, dead2, live_url);
        c = client_on(eps3, 5000);
        check_member_list(c);
        check_member_list(c); /* and again, starting from the one that answered */
        etcd_client_free(c);

        /* the live one first, then a dead one: the client stays on the live one */
        _cleanup_free_ char *eps_rev = xasprintf("%s,%s", live_url, dead);
        c = client_on(eps_rev, 5000);
        check_member_list(c);
        etcd_client_free(c);

        /* the same through the binary, as the issue reported it */
        const char *args[] = {"etcd", "member", "list", "-o", "json", "--endpoints", eps, NULL};
        struct run r = run_gitcd(args);
        if (r.status != 0)
                fail_msg("gitcd etcd member list: exit %d: %s", r.status, r.err);
        assert_non_null(strstr(r.out, "\"name\": \"m0\""));
        run_release(&r);
}

/* A first endpoint that accepts connections and never answers: a read still succeeds. */
static void test_silent_first_endpoint(void **state)
{
        fake_server *silent = fake_start(NULL);
        _cleanup_free_ char *eps = xasprintf("%s,%s", silent->url, live_url);
        etcd_client *c = client_on(eps, 4000);
        check_member_list(c);
        etcd_client_free(c);

        const char *args[] = {"etcd", "member",    "list", "--endpoints",
                              eps,    "--timeout", "4s",   NULL};
        struct run r = run_gitcd(args);
        if (r.status != 0)
                fail_msg("gitcd etcd member list: exit %d: %s", r.status, r.err);
        assert_non_null(strstr(r.out, "m0"));
        run_release(&r);
        fake_stop(silent);
}

/* ---- what a server says reaches the user escaped ---- */

static void test_grpc_message_escaped(void **state)
{
        fake_server *g = fake_start("evil%1B[31mred%0Agitcd: error: forged line%07");
        etcd_client *c = client_on(g->url, 5000);
        etcd_members *l = NULL;
        assert_int_equal(etcd_member_list(c, &l), ETCD_ERR_UNKNOWN);
        const char *msg = etcd_client_last_error(c);
        assert_non_null(strstr(msg, "evil\\x1b[31mred\\ngitcd: error: forged line\\x07"));
        for (const char *p = msg; *p; p++)
                assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
        etcd_client_free(c);
        /* the process keeps the connection for its next client (etcd/pool.h);
         * this server serves one connection at a time: close it for gitcd's */
        assert_true(etcd_pool_close_idle() >= 1);

        const char *args[] = {"etcd", "member", "list", "--endpoints", g->url, NULL};
        struct run r = run_gitcd(args);
        assert_int_equal(r.status, 1);
        assert_non_null(strstr(r.err, "evil\\x1b[31mred\\ngitcd: error: forged line"));
        assert_null(strchr(r.err, '\033'));
        assert_null(strstr(r.err, "\ngitcd: error: forged"));
        run_release(&r);
        fake_stop(g);
}

/* ---- a kept connection that breaks is replaced, not taken for a dead member ---- */

static void test_kept_connection_breaks(void **state)
{
        fake_server *g = fake_start("answered");
        g->drop_request = 2;
        etcd_client *c = client_on(g->url, 5000);
        etcd_members *l = NULL;
        /* the first call opens the connection and is answered on it */
        assert_int_equal(etcd_member_list(c, &l), ETCD_ERR_UNKNOWN);
        /* the second goes on the kept connection, which the server closes
         * without a word: asked again on a new one, it is answered */
        assert_int_equal(etcd_member_list(c, &l), ETCD_ERR_UNKNOWN);
        assert_non_null(strstr(etcd_client_last_error(c), "answered"));
        assert_int_equal(__atomic_load_n(&g->requests, __ATOMIC_SEQ_CST), 3);
        assert_int_equal(__atomic_load_n(&g->connections, __ATOMIC_SEQ_CST), 2);
        assert_null(l);
        etcd_client_free(c);
        fake_stop(g);
}

/* ---- a password on the command line ---- */

static char *cmdline_of(pid_t pid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%d/cmdline", (int)pid);
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 1 << 20, &data, &len), 0);
        for (size_t i = 0; i < len; i++)
                if (data[i] == '\0')
                        data[i] = ' ';
        return data;
}

static void test_password_wiped_from_argv(void **state)
{
        fake_server *silent = fake_start(NULL);
        const char *args[] = {"etcd",   "--endpoints",        silent->url, "--timeout", "20s",
                              "--user", "root:top-secret-pw", "member",    "list",      NULL};
        pid_t pid = spawn_gitcd(args);
        /* once it has connected, the command runs: argv was handled long before */
        int conn = silent_wait_connection(silent);
        assert_true(conn >= 0);
        char *cmdline = cmdline_of(pid);
        assert_null(strstr(cmdline, "top-secret-pw"));
        assert_non_null(strstr(cmdline, "--user root:"));
        assert_non_null(strstr(cmdline, "member list"));
        kill(pid, SIGTERM);
        close(conn);
        struct run r = wait_gitcd(pid);
        assert_non_null(strstr(r.err, "--user"));
        assert_non_null(strstr(r.err, "GITCD_ETCD_PASSWORD"));
        assert_non_null(strstr(r.err, "until now"));
        assert_null(strstr(r.err, "top-secret-pw"));
        run_release(&r);

        /* --user=NAME:PASS and a password inside an endpoint URL, in one command line */
        _cleanup_free_ char *with_pw =
            xasprintf("http://root:url-secret-pw@127.0.0.1:%d,%s", silent->port, silent->url);
        const char *args2[] = {"etcd",   "--endpoints", with_pw, "--user=root:eq-secret-pw",
                               "status", NULL};
        r = run_gitcd(args2);
        assert_int_equal(r.status, 64); /* etcd endpoints take no user info */
        assert_null(strstr(r.err, "url-secret-pw"));
        assert_null(strstr(r.err, "eq-secret-pw"));
        assert_non_null(strstr(r.err, "password in a URL"));
        run_release(&r);

        /* a password in a source URL, while gitcd apply waits for the (silent) remote */
        _cleanup_free_ char *state_dir = xasprintf("%s/state", tmp);
        _cleanup_free_ char *source =
            xasprintf("https://ci:src-secret-pw@127.0.0.1:%d/repo.git", silent->port);
        setenv("GITCD_STATE_DIR", state_dir, 1);
        const char *apply[] = {"apply", "--source", source, "--timeout", "20s", NULL};
        pid = spawn_gitcd(apply);
        unsetenv("GITCD_STATE_DIR");
        conn = silent_wait_connection(silent);
        assert_true(conn >= 0);
        free(cmdline);
        cmdline = cmdline_of(pid);
        assert_null(strstr(cmdline, "src-secret-pw"));
        assert_non_null(strstr(cmdline, "https://ci:*************@127.0.0.1:"));
        kill(pid, SIGTERM);
        close(conn);
        r = wait_gitcd(pid);
        assert_non_null(strstr(r.err, "password in a URL"));
        assert_null(strstr(r.err, "src-secret-pw"));
        run_release(&r);

        /* the documented ways: a file, or the environment; no warning */
        _cleanup_free_ char *pwfile = xasprintf("%s/pw", tmp);
        assert_int_equal(write_file_atomic(pwfile, "from-file-pw\n", 13, 0600), 0);
        const char *args3[] = {
            "etcd", "--endpoints", live_url, "--user", "nobody", "--password-file",
            pwfile, "member",      "list",   NULL};
        r = run_gitcd(args3);
        assert_int_equal(r.status, 0); /* auth is off: the credentials are not needed */
        assert_null(strstr(r.err, "warn"));
        run_release(&r);
        free(cmdline);
        fake_stop(silent);
}

/* ---- only configured endpoints, with the configured scheme ---- */

static void test_only_configured_endpoints(void **state)
{
        /* auth on, so every call carries a token and a stale one would make the client
         * authenticate again, sending the password */
        etcd_client *admin = client_on(live_url, 5000);
        assert_ok(admin, etcd_user_add(admin, "root", "s3cret-pw"));
        assert_ok(admin, etcd_role_add(admin, "root"));
        assert_ok(admin, etcd_user_grant_role(admin, "root", "root"));
        assert_ok(admin, etcd_auth_enable(admin));
        etcd_client_free(admin);

        etcd_client_opts o = {.endpoints = live_url,
                              .user = "root",
                              .password = "s3cret-pw",
                              .call_timeout_ms = 5000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        check_member_list(c);

        /* the member advertises the fake server as its client URL; MoveLeader must find
         * the leader among the configured endpoints and never dial that URL (where the
         * fake answers "invalid auth token", inviting the password) */
        assert_int_equal(etcd_move_leader(c, 0x1234), ETCD_ERR_BAD_LEADER_TRANSFEREE);
        assert_int_equal(__atomic_load_n(&advertised->connections, __ATOMIC_SEQ_CST), 0);

        /* a per-member call to a URL that is not configured is refused, and so is a
         * configured endpoint under another scheme */
        etcd_endpoint_status *s = NULL;
        assert_int_equal(etcd_status(c, advertised->url, &s), -EINVAL);
        assert_non_null(strstr(etcd_client_last_error(c), "not one of the configured"));
        _cleanup_free_ char *https = xasprintf("https://%s", live_url + strlen("http://"));
        assert_int_equal(etcd_status(c, https, &s), -EINVAL);
        assert_int_equal(__atomic_load_n(&advertised->connections, __ATOMIC_SEQ_CST), 0);
        /* without a scheme it names the configured endpoint, with its scheme */
        assert_ok(c, etcd_status(c, live_url + strlen("http://"), &s));
        assert_string_equal(s->version, version);
        etcd_endpoint_status_free(s);

        /* an https:// endpoint stays https: the plain member is not spoken to in clear */
        _cleanup_free_ char *https_eps = xasprintf("https://%s", live_url + strlen("http://"));
        etcd_client_opts t = {.endpoints = https_eps, .call_timeout_ms = 3000};
        etcd_client *tc = NULL;
        assert_int_equal(etcd_client_new(&t, &tc), 0);
        etcd_members *l = NULL;
        assert_true(etcd_member_list(tc, &l) < 0);
        assert_null(l);
        etcd_client_free(tc);

        /* the same through the binary */
        const char *args[] = {"etcd", "--endpoints", live_url, "--user",
                              "root", "move-leader", "1234",   NULL};
        setenv("GITCD_ETCD_PASSWORD", "s3cret-pw", 1);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                const char *argv[] = {gitcd_bin, args[0], args[1], args[2], args[3],
                                      args[4],   args[5], args[6], NULL};
                int devnull = open("/dev/null", O_WRONLY);
                dup2(devnull, 1);
                dup2(devnull, 2);
                execv(gitcd_bin, (char **)argv);
                _exit(127);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        unsetenv("GITCD_ETCD_PASSWORD");
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1); /* bad leader transferee */
        assert_int_equal(__atomic_load_n(&advertised->connections, __ATOMIC_SEQ_CST), 0);

        assert_ok(c, etcd_auth_disable(c));
        etcd_client_free(c);
}

int main(int argc, char **argv)
{
        if (argc > 1)
                version = argv[1];
        if (!harness_have_etcd(version)) {
                fprintf(stderr, "etcd %s is not installed\n", version);
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_dead_first_endpoint),
            cmocka_unit_test(test_kept_connection_breaks),
            cmocka_unit_test(test_silent_first_endpoint),
            cmocka_unit_test(test_grpc_message_escaped),
            cmocka_unit_test(test_password_wiped_from_argv),
            cmocka_unit_test(test_only_configured_endpoints),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
