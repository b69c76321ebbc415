/*
 * The real-etcd test harness (see harness.h): starts etcd members as child
 * processes on free 127.0.0.1 ports, waits for their /health endpoint with
 * libcurl, and makes sure nothing outlives the test.
 *
 * The design decision to know is how cleanup is guaranteed. Each member runs
 * in its own process group with PR_SET_PDEATHSIG(SIGKILL), so even a test
 * killed with SIGKILL takes its etcd processes along (note: the death signal
 * fires when the *thread* that forked exits, so start clusters from a thread
 * that lives as long as they do). On top of that every started process is
 * recorded in a fixed-size, signal-safe registry; an atexit handler and
 * handlers for SIGINT, SIGTERM, SIGHUP, SIGABRT (failed asserts and
 * sanitizer reports end in abort) and the crash signals kill every recorded
 * process group and remove the registered temporary folders before the
 * signal is re-raised with the previous disposition (cmocka's and ASan's own
 * crash handlers still run).
 * Each process only acts on the entries it registered itself, so a forked
 * child that happens to exit never kills its parent's etcd.
 *
 * Ports come from binding 127.0.0.1:0; ports handed out are remembered so a
 * process never gets the same one twice, and claimed by a lock file shared
 * with the other test processes, so two tests running at once never get the
 * same one either (the hosts target's labs bind them on 127.0.0.2 and up,
 * where the kernel's probe on 127.0.0.1 cannot see them). Processes that
 * are not tests (gitcd's local target, etcd itself) may still grab a port
 * between our probe and etcd's bind, so a cluster start that fails with
 * "address already in use" is retried with new ports.
 *
 * harness_member_restart() waits for health only when enough members run
 * for the cluster to have a quorum; otherwise (e.g. restarting members of a
 * fully stopped cluster one by one) it returns once the process is started.
 * harness_member_start_joining() never waits (a learner may not report
 * healthy): call harness_member_wait_healthy() when needed. Both append to or
 * reuse c->members, which start_joining may reallocate.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/model.h"
#include "etcd/health.h"
#include "pki/pki.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define DEFAULT_VERSION    "3.5.16"
#define DEFAULT_TIMEOUT_MS 20000
#define STOP_TIMEOUT_MS    10000
#define START_ATTEMPTS     5
#define MAX_TRACKED_PIDS   512
#define MAX_TRACKED_DIRS   256
#define MAX_USED_PORTS     4096
#define LOG_TAIL_BYTES     3000
#define HEALTH_POLL_MS     100
#define TLS_CERT_DAYS      2

extern char **environ;

/* ---- registry of processes and folders, readable from signal handlers ---- */

/*
 * Each entry records the process that registered it: a forked child inherits
 * the arrays and the handlers but only ever acts on its own entries.
 */
static volatile pid_t tracked_pids[MAX_TRACKED_PIDS];
static volatile pid_t tracked_pid_owner[MAX_TRACKED_PIDS];
static char *volatile tracked_dirs[MAX_TRACKED_DIRS];
static volatile pid_t tracked_dir_owner[MAX_TRACKED_DIRS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static const int caught_signals[] = {SIGINT,  SIGTERM, SIGHUP, SIGABRT,
                                     SIGSEGV, SIGBUS,  SIGFPE, SIGILL};
static struct sigaction old_actions[ARRAY_SIZE(caught_signals)];

static int used_ports[MAX_USED_PORTS];
static size_t n_used_ports;
static unsigned cluster_counter;

/* Kill every tracked process group; reap our children when asked. Async-signal-safe. */
static void kill_tracked(bool reap)
{
        pid_t me = getpid();
        for (size_t i = 0; i < MAX_TRACKED_PIDS; i++) {
                pid_t pid = tracked_pids[i];
                if (pid <= 0 || tracked_pid_owner[i] != me)
                        continue;
                (void)kill(-pid, SIGKILL);
                (void)kill(pid, SIGKILL);
        }
        if (!reap)
                return;
        for (size_t i = 0; i < MAX_TRACKED_PIDS; i++) {
                pid_t pid = tracked_pids[i];
                if (pid <= 0 || tracked_pid_owner[i] != me)
                        continue;
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                tracked_pids[i] = 0;
        }
}

/*
 * Remove the tracked folders from a signal handler: a raw fork (no atfork
 * handlers, no allocator locks) running rm -rf.
 */
static void remove_dirs_signal_safe(void)
{
        char *argv[MAX_TRACKED_DIRS + 4];
        size_t n = 0;
        argv[n++] = (char *)"rm";
        argv[n++] = (char *)"-rf";
        argv[n++] = (char *)"--";
        pid_t me = getpid();
        for (size_t i = 0; i < MAX_TRACKED_DIRS; i++)
                if (tracked_dirs[i] && tracked_dir_owner[i] == me)
                        argv[n++] = tracked_dirs[i];
        if (n == 3)
                return;
        argv[n] = NULL;
        long pid = syscall(SYS_fork);
        if (pid == 0) {
                syscall(SYS_execve, "/bin/rm", argv, environ);
                syscall(SYS_exit, 127);
        }
        if (pid > 0)
                while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
                        ;
}

static void on_fatal_signal(int sig)
{
        int saved_errno = errno;
        kill_tracked(true);
        remove_dirs_signal_safe();
        for (size_t i = 0; i < ARRAY_SIZE(caught_signals); i++)
                if (caught_signals[i] == sig)
                        (void)sigaction(sig, &old_actions[i], NULL);
        errno = saved_errno;
        /* Delivered with the previous disposition once this handler returns. */
        (void)raise(sig);
}

static void on_exit_cleanup(void)
{
        pid_t me = getpid();
        kill_tracked(true);
        pthread_mutex_lock(&registry_lock);
        for (size_t i = 0; i < MAX_TRACKED_DIRS; i++) {
                char *d = tracked_dirs[i];
                if (!d || tracked_dir_owner[i] != me)
                        continue;
                tracked_dirs[i] = NULL;
                (void)rm_rf(d);
                free(d);
        }
        pthread_mutex_unlock(&registry_lock);
}

static void registry_init_once(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
        atexit(on_exit_cleanup);
        for (size_t i = 0; i < ARRAY_SIZE(caught_signals); i++) {
                struct sigaction sa = {.sa_handler = on_fatal_signal};
                sigfillset(&sa.sa_mask);
                (void)sigaction(caught_signals[i], &sa, &old_actions[i]);
        }
}

static void registry_init(void)
{
        pthread_once(&registry_once, registry_init_once);
}

void harness_track_pid(pid_t pid)
{
        if (pid <= 0)
                return;
        registry_init();
        pthread_mutex_lock(&registry_lock);
        size_t i;
        pid_t me = getpid();
        for (i = 0; i < MAX_TRACKED_PIDS; i++)
                if (tracked_pids[i] == pid && tracked_pid_owner[i] == me)
                        break;
        if (i == MAX_TRACKED_PIDS)
                for (i = 0; i < MAX_TRACKED_PIDS; i++)
                        if (tracked_pids[i] == 0) {
                                tracked_pid_owner[i] = me;
                                tracked_pids[i] = pid;
                                break;
                        }
        pthread_mutex_unlock(&registry_lock);
        if (i == MAX_TRACKED_PIDS) {
                fprintf(stderr, "harness: too many tracked processes\n");
                abort();
        }
}

void harness_untrack_pid(pid_t pid)
{
        pthread_mutex_lock(&registry_lock);
        pid_t me = getpid();
        for (size_t i = 0; i < MAX_TRACKED_PIDS; i++)
                if (tracked_pids[i] == pid && tracked_pid_owner[i] == me)
                        tracked_pids[i] = 0;
        pthread_mutex_unlock(&registry_lock);
}

static void track_dir(const char *path)
{
        registry_init();
        pthread_mutex_lock(&registry_lock);
        size_t i;
        for (i = 0; i < MAX_TRACKED_DIRS; i++)
                if (!tracked_dirs[i]) {
                        tracked_dir_owner[i] = getpid();
                        tracked_dirs[i] = xstrdup(path);
                        break;
                }
        pthread_mutex_unlock(&registry_lock);
        if (i == MAX_TRACKED_DIRS) {
                fprintf(stderr, "harness: too many temporary folders\n");
                abort();
        }
}

static void untrack_dir(const char *path)
{
        pthread_mutex_lock(&registry_lock);
        for (size_t i = 0; i < MAX_TRACKED_DIRS; i++) {
                char *d = tracked_dirs[i];
                if (d && tracked_dir_owner[i] == getpid() && streq(d, path)) {
                        tracked_dirs[i] = NULL;
                        free(d);
                }
        }
        pthread_mutex_unlock(&registry_lock);
}

/* ---- binaries, ports, folders ---- */

char *harness_cache_path(const char *rel)
{
        const char *cache = getenv("GITCD_CACHE_DIR");
        if (!isempty(cache))
                return path_join(cache, rel);
        const char *xdg = getenv("XDG_CACHE_HOME");
        if (!isempty(xdg))
                return xasprintf("%s/gitcd/%s", xdg, rel);
        const char *home = getenv("HOME");
        if (isempty(home)) {
                struct passwd *pw = getpwuid(getuid());
                if (!pw)
                        return NULL;
                home = pw->pw_dir;
        }
        return xasprintf("%s/.cache/gitcd/%s", home, rel);
}

char *harness_etcd_path(const char *version, const char *binary)
{
        if (isempty(version))
                version = DEFAULT_VERSION;
        if (isempty(binary))
                binary = "etcd";
        _cleanup_free_ char *p = NULL;
        const char *dir = getenv("GITCD_ETCD_DIR");
        if (!isempty(dir)) {
                p = xasprintf("%s/%s/%s", dir, version, binary);
        } else {
                _cleanup_free_ char *rel = xasprintf("etcd/%s/%s", version, binary);
                p = harness_cache_path(rel);
                if (!p)
                        return NULL;
        }
        if (p[0] != '/') {
                char cwd[4096];
                if (!getcwd(cwd, sizeof(cwd)))
                        return NULL;
                char *abs = path_join(cwd, p);
                free(p);
                p = abs;
        }
        if (access(p, X_OK) < 0)
                return NULL;
        return TAKE_PTR(p);
}

bool harness_have_etcd(const char *version)
{
        _cleanup_free_ char *p = harness_etcd_path(version, "etcd");
        return p != NULL;
}

char *harness_etcd_dir(void)
{
        const char *dir = getenv("GITCD_ETCD_DIR");
        if (!isempty(dir))
                return xstrdup(dir);
        return harness_cache_path("etcd");
}

char *harness_etcd_newest(const char *series)
{
        _cleanup_free_ char *dir = harness_etcd_dir();
        DIR *d = dir ? opendir(dir) : NULL;
        if (!d)
                return NULL;
        char *best = NULL;
        semver bv = {0};
        size_t n = series ? strlen(series) : 0;
        for (struct dirent *e = readdir(d); e; e = readdir(d)) {
                semver v;
                if (semver_parse(e->d_name, &v) < 0)
                        continue;
                if (n && !(strneq(e->d_name, series, n) && e->d_name[n] == '.'))
                        continue;
                if (best && semver_cmp(&v, &bv) <= 0)
                        continue;
                if (!harness_have_etcd(e->d_name))
                        continue;
                free(best);
                best = xstrdup(e->d_name);
                bv = v;
        }
        closedir(d);
        return best;
}

static bool port_used(int port)
{
        for (size_t i = 0; i < n_used_ports; i++)
                if (used_ports[i] == port)
                        return true;
        return false;
}

/*
 * Claim port across the test processes of this user: a lock file
 * <tmp>/gitcd-test-ports-<uid>/<port> held (flock) until this process
 * exits. Tests that run at the same time (meson runs two or more) thus
 * never hand out the same port, even one that is not bound yet, and a
 * process that dies frees its ports. false when another process holds it.
 */
static bool claim_port_across_processes(int port)
{
        const char *base = getenv("TMPDIR");
        if (isempty(base))
                base = "/tmp";
        _cleanup_free_ char *dir = xasprintf("%s/gitcd-test-ports-%ld", base, (long)getuid());
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return true; /* no shared folder: the process's own registry is all there is */
        _cleanup_free_ char *path = xasprintf("%s/%d", dir, port);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return true;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                close(fd);
                return false;
        }
        return true; /* fd stays open (and locked) for the life of the process */
}

int harness_free_port(void)
{
        for (int attempt = 0; attempt < 200; attempt++) {
                _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return -errno;
                struct sockaddr_in sa = {
                    .sin_family = AF_INET,
                    .sin_port = 0,
                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                };
                if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                        return -errno;
                socklen_t len = sizeof(sa);
                if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
                        return -errno;
                int port = ntohs(sa.sin_port);
                pthread_mutex_lock(&registry_lock);
                bool fresh = !port_used(port) && n_used_ports < MAX_USED_PORTS;
                if (fresh)
                        used_ports[n_used_ports++] = port;
                pthread_mutex_unlock(&registry_lock);
                if (fresh && claim_port_across_processes(port))
                        return port;
        }
        return -EADDRNOTAVAIL;
}

char *harness_tmpdir(const char *prefix)
{
        const char *base = getenv("TMPDIR");
        if (isempty(base))
                base = "/tmp";
        _cleanup_free_ char *tmpl =
            xasprintf("%s/%s-XXXXXX", base, isempty(prefix) ? "gitcd-test" : prefix);
        if (!mkdtemp(tmpl)) {
                fprintf(stderr, "harness: cannot create a temporary folder in %s: %s\n", base,
                        strerror(errno));
                return NULL;
        }
        track_dir(tmpl);
        return TAKE_PTR(tmpl);
}

/* ---- clusters ---- */

typedef struct cluster_priv {
        harness_cluster pub; /* first: harness_cluster * converts to cluster_priv * */
        char ***argvs;       /* per member, NULL-terminated, reused on restart */
        long *log_starts;    /* per member: log size when it was last started */
        size_t alloc;
        bool client_cert_auth;
        int64_t quota_backend_bytes;
        char *extra_arg;
        char *token;
} cluster_priv;

static cluster_priv *priv(harness_cluster *c)
{
        return (cluster_priv *)c;
}

static void tls_free(harness_tls *t)
{
        if (!t)
                return;
        free(t->dir);
        free(t->ca_cert);
        free(t->ca_key);
        free(t->server_cert);
        free(t->server_key);
        free(t->peer_cert);
        free(t->peer_key);
        free(t->client_cert);
        free(t->client_key);
        free(t);
}

static void member_release(harness_member *m)
{
        free(m->name);
        free(m->client_url);
        free(m->peer_url);
        free(m->data_dir);
        free(m->log_path);
        memset(m, 0, sizeof(*m));
}

/* Last bytes of a member's log, starting at a line boundary; never NULL. */
static char *log_tail(const char *path)
{
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return xasprintf("(no log at %s: %s)", path, strerror(errno));
        if (fseek(f, 0, SEEK_END) < 0)
                return xstrdup("(unreadable log)");
        long size = ftell(f);
        long start = size > LOG_TAIL_BYTES ? size - LOG_TAIL_BYTES : 0;
        if (fseek(f, start, SEEK_SET) < 0)
                return xstrdup("(unreadable log)");
        char *buf = xcalloc(1, LOG_TAIL_BYTES + 1);
        size_t n = fread(buf, 1, LOG_TAIL_BYTES, f);
        buf[n] = '\0';
        if (start > 0) {
                char *nl = strchr(buf, '\n');
                if (nl)
                        memmove(buf, nl + 1, strlen(nl + 1) + 1);
        }
        return buf;
}

static void add_arg(char ***v, size_t *n, char *arg)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(char *));
        (*v)[(*n)++] = arg;
        (*v)[*n] = NULL;
}

static char **member_argv(cluster_priv *p, const harness_member *m, const char *initial_cluster,
                          const char *state)
{
        harness_cluster *c = &p->pub;
        char **v = NULL;
        size_t n = 0;
        add_arg(&v, &n, xstrdup(c->etcd_bin));
        add_arg(&v, &n, xasprintf("--name=%s", m->name));
        add_arg(&v, &n, xasprintf("--data-dir=%s", m->data_dir));
        add_arg(&v, &n, xasprintf("--listen-client-urls=%s", m->client_url));
        add_arg(&v, &n, xasprintf("--advertise-client-urls=%s", m->client_url));
        add_arg(&v, &n, xasprintf("--listen-peer-urls=%s", m->peer_url));
        add_arg(&v, &n, xasprintf("--initial-advertise-peer-urls=%s", m->peer_url));
        add_arg(&v, &n, xasprintf("--initial-cluster=%s", initial_cluster));
        add_arg(&v, &n, xasprintf("--initial-cluster-state=%s", state));
        add_arg(&v, &n, xasprintf("--initial-cluster-token=%s", p->token));
        add_arg(&v, &n, xstrdup("--heartbeat-interval=100"));
        add_arg(&v, &n, xstrdup("--election-timeout=1000"));
        add_arg(&v, &n, xstrdup("--logger=zap"));
        add_arg(&v, &n, xstrdup("--log-outputs=stderr"));
        if (p->quota_backend_bytes > 0)
                add_arg(&v, &n,
                        xasprintf("--quota-backend-bytes=%lld", (long long)p->quota_backend_bytes));
        if (p->extra_arg)
                add_arg(&v, &n, xstrdup(p->extra_arg));
        if (c->tls) {
                add_arg(&v, &n, xasprintf("--cert-file=%s", c->tls->server_cert));
                add_arg(&v, &n, xasprintf("--key-file=%s", c->tls->server_key));
                if (p->client_cert_auth) {
                        add_arg(&v, &n, xstrdup("--client-cert-auth"));
                        add_arg(&v, &n, xasprintf("--trusted-ca-file=%s", c->tls->ca_cert));
                }
                add_arg(&v, &n, xasprintf("--peer-cert-file=%s", c->tls->peer_cert));
                add_arg(&v, &n, xasprintf("--peer-key-file=%s", c->tls->peer_key));
                add_arg(&v, &n, xasprintf("--peer-trusted-ca-file=%s", c->tls->ca_cert));
                add_arg(&v, &n, xstrdup("--peer-client-cert-auth"));
        }
        return v;
}

/*
 * Our environment minus ETCD_* variables: etcd refuses to start when one of
 * them shadows a flag we pass. Shallow: free only the array.
 */
static char **child_environ(void)
{
        size_t n = 0;
        for (char **e = environ; e && *e; e++)
                n++;
        char **v = xcalloc(n + 1, sizeof(char *));
        size_t k = 0;
        for (char **e = environ; e && *e; e++)
                if (!strneq(*e, "ETCD_", 5))
                        v[k++] = *e;
        return v;
}

/*
 * Fork and exec argv with stdout/stderr appended to log_path, in a new
 * process group, killed when we die. The pid is tracked before any signal
 * can interrupt us.
 */
static int spawn(char **argv, const char *log_path, pid_t *ret_pid, long *ret_log_start)
{
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        {
                strbuf sb = STRBUF_INIT;
                sb_append(&sb, "=== harness: starting");
                for (char **a = argv; *a; a++)
                        sb_printf(&sb, " %s", *a);
                sb_append(&sb, "\n");
                if (write(fd, sb.buf, sb.len) < 0) {
                        /* The log is only for people; carry on. */
                }
                sb_release(&sb);
        }
        off_t log_start = lseek(fd, 0, SEEK_END);
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        pid_t parent = getpid();
        _cleanup_free_ char **envp = child_environ();
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        pid_t pid = fork();
        if (pid == 0) {
                (void)setpgid(0, 0);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                for (size_t i = 0; i < ARRAY_SIZE(caught_signals); i++)
                        (void)signal(caught_signals[i], SIG_DFL);
                if (dup2(devnull, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(127);
                (void)close_range(3, ~0U, 0);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                execve(argv[0], argv, envp);
                dprintf(2, "harness: cannot execute %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        int e = errno;
        if (pid > 0) {
                (void)setpgid(pid, pid);
                harness_track_pid(pid);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        close(fd);
        close(devnull);
        if (pid < 0)
                return -e;
        *ret_pid = pid;
        *ret_log_start = log_start < 0 ? 0 : (long)log_start;
        return 0;
}

static size_t body_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
        strbuf *sb = userdata;
        if (sb->len < 4 * 1024 * 1024)
                sb_append_len(sb, data, size * nmemb);
        return size * nmemb;
}

/* GET <client_url><path>; true on a 200 answer, with the body in *body. */
static bool http_get(harness_cluster *c, const harness_member *m, const char *path, strbuf *body)
{
        CURL *curl = curl_easy_init();
        if (!curl)
                return false;
        _cleanup_free_ char *url = xasprintf("%s%s", m->client_url, path);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 3000L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, body_cb);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
        if (c->tls) {
                curl_easy_setopt(curl, CURLOPT_CAINFO, c->tls->ca_cert);
                curl_easy_setopt(curl, CURLOPT_SSLCERT, c->tls->client_cert);
                curl_easy_setopt(curl, CURLOPT_SSLKEY, c->tls->client_key);
        }
        CURLcode rc = curl_easy_perform(curl);
        long status = 0;
        if (rc == CURLE_OK)
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(curl);
        return rc == CURLE_OK && status == 200;
}

/* One GET /health; true when the member says "health":"true". */
static bool health_once(harness_cluster *c, const harness_member *m)
{
        strbuf body = STRBUF_INIT;
        bool ok = http_get(c, m, "/health", &body) &&
                  strstr(sb_str(&body), "\"health\":\"true\"") != NULL;
        sb_release(&body);
        return ok;
}

/* True when the log, from offset start on, contains needle. */
static bool log_has_since(const char *path, long start, const char *needle)
{
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f || fseek(f, start, SEEK_SET) < 0)
                return false;
        strbuf sb = STRBUF_INIT;
        char chunk[65536];
        size_t n;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && sb.len < 64 * 1024 * 1024)
                sb_append_len(&sb, chunk, n);
        bool found = strstr(sb_str(&sb), needle) != NULL;
        sb_release(&sb);
        return found;
}

/*
 * Healthy, and it is really our process answering: its log since the last
 * start says it serves clients. (Another test's etcd may hold the port
 * ours failed to bind, for the moment before ours exits.)
 */
static bool member_healthy(harness_cluster *c, size_t i)
{
        harness_member *m = &c->members[i];
        return health_once(c, m) &&
               log_has_since(m->log_path, priv(c)->log_starts[i], "serving client traffic");
}

/* True when the member's /metrics say it is the raft leader. */
static bool is_leader(harness_cluster *c, const harness_member *m)
{
        strbuf body = STRBUF_INIT;
        bool ok = http_get(c, m, "/metrics", &body) &&
                  strstr(sb_str(&body), "\netcd_server_is_leader 1") != NULL;
        sb_release(&body);
        return ok;
}

/* Reap member i if it exited; true when it is gone. */
static bool member_exited(harness_member *m, int *ret_status)
{
        if (m->pid <= 0)
                return true;
        int status = 0;
        pid_t r = waitpid(m->pid, &status, WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR))
                return false;
        harness_untrack_pid(m->pid);
        m->pid = 0;
        *ret_status = status;
        return true;
}

static void sleep_ms(int ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/*
 * Wait until members [from, to) are healthy. -EADDRINUSE when one died
 * because a port was taken, -ECHILD when one died otherwise, -ETIMEDOUT.
 * Failures are explained on stderr with the tail of the member's log.
 */
static int wait_healthy_range(harness_cluster *c, size_t from, size_t to, int timeout_ms)
{
        int64_t deadline = now_mono_ms() + timeout_ms;
        size_t next = from;
        for (;;) {
                while (next < to) {
                        harness_member *m = &c->members[next];
                        int status = 0;
                        if (m->pid <= 0 || member_exited(m, &status)) {
                                _cleanup_free_ char *tail = log_tail(m->log_path);
                                bool in_use = strstr(tail, "address already in use") != NULL;
                                if (!in_use)
                                        fprintf(stderr,
                                                "harness: etcd member %s is not running "
                                                "(status %d); last lines of %s:\n%s\n",
                                                m->name, status, m->log_path, tail);
                                return in_use ? -EADDRINUSE : -ECHILD;
                        }
                        if (!member_healthy(c, next))
                                break;
                        next++;
                }
                if (next >= to)
                        return 0;
                /* Members that died while we waited on another one fail fast too. */
                for (size_t i = next + 1; i < to; i++) {
                        int status = 0;
                        harness_member *m = &c->members[i];
                        if (m->pid > 0 && member_exited(m, &status)) {
                                _cleanup_free_ char *tail = log_tail(m->log_path);
                                if (strstr(tail, "address already in use"))
                                        return -EADDRINUSE;
                                fprintf(stderr,
                                        "harness: etcd member %s exited (status %d); last lines "
                                        "of %s:\n%s\n",
                                        m->name, status, m->log_path, tail);
                                return -ECHILD;
                        }
                }
                if (now_mono_ms() >= deadline) {
                        harness_member *m = &c->members[next];
                        _cleanup_free_ char *tail = log_tail(m->log_path);
                        fprintf(stderr,
                                "harness: etcd member %s (%s) not healthy after %d ms; last "
                                "lines of %s:\n%s\n",
                                m->name, m->client_url, timeout_ms, m->log_path, tail);
                        return -ETIMEDOUT;
                }
                sleep_ms(HEALTH_POLL_MS);
        }
}

static void update_endpoints(harness_cluster *c)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < c->n; i++)
                sb_printf(&sb, "%s%s", i ? "," : "", c->members[i].client_url);
        free(c->endpoints);
        c->endpoints = sb_detach(&sb);
}

/* Append a member with fresh (or given) ports; returns its index. */
static int member_add(cluster_priv *p, const char *name, int peer_port, int client_port,
                      size_t *ret_index)
{
        harness_cluster *c = &p->pub;
        if (peer_port <= 0)
                peer_port = harness_free_port();
        if (peer_port < 0)
                return peer_port;
        if (client_port <= 0)
                client_port = harness_free_port();
        if (client_port < 0)
                return client_port;
        if (c->n == p->alloc) {
                size_t alloc = p->alloc;
                c->members = xgrow(c->members, &alloc, c->n + 1, sizeof(harness_member));
                p->argvs = xrealloc(p->argvs, alloc * sizeof(char **));
                p->log_starts = xrealloc(p->log_starts, alloc * sizeof(long));
                for (size_t i = p->alloc; i < alloc; i++) {
                        memset(&c->members[i], 0, sizeof(harness_member));
                        p->argvs[i] = NULL;
                        p->log_starts[i] = 0;
                }
                p->alloc = alloc;
        }
        const char *scheme = c->tls ? "https" : "http";
        harness_member *m = &c->members[c->n];
        m->name = xstrdup(name);
        m->client_port = client_port;
        m->peer_port = peer_port;
        m->client_url = xasprintf("%s://127.0.0.1:%d", scheme, client_port);
        m->peer_url = xasprintf("%s://127.0.0.1:%d", scheme, peer_port);
        m->data_dir = xasprintf("%s/%s.data", c->root_dir, name);
        m->log_path = xasprintf("%s/%s.log", c->root_dir, name);
        m->pid = 0;
        *ret_index = c->n++;
        update_endpoints(c);
        return 0;
}

/* Write one PEM pair of a fresh key and a certificate issued by the CA. */
static int tls_issue(const pki_cert *ca_cert, const pki_key *ca_key, const pki_cert_request *req,
                     const char *cert_path, const char *key_path)
{
        pki_key *key = NULL;
        pki_cert *cert = NULL;
        int r = pki_cert_issue(ca_cert, ca_key, req, &key, &cert);
        if (r < 0)
                goto out;
        r = pki_write_pem(cert_path, key_path, cert, key);
out:
        pki_cert_free(cert);
        pki_key_free(key);
        return r;
}

/* Generate the run's CA, server, peer and client certificates under root_dir/tls. */
static int tls_generate(harness_cluster *c)
{
        harness_tls *t = XNEW(harness_tls);
        pki_key *ca_key = NULL;
        pki_cert *ca_cert = NULL;
        c->tls = t;
        t->dir = path_join(c->root_dir, "tls");
        t->ca_cert = path_join(t->dir, "ca.crt");
        t->ca_key = path_join(t->dir, "ca.key");
        t->server_cert = path_join(t->dir, "server.crt");
        t->server_key = path_join(t->dir, "server.key");
        t->peer_cert = path_join(t->dir, "peer.crt");
        t->peer_key = path_join(t->dir, "peer.key");
        t->client_cert = path_join(t->dir, "client.crt");
        t->client_key = path_join(t->dir, "client.key");
        int r = mkdir_p(t->dir, 0700);
        if (r < 0)
                goto out;
        r = pki_ca_create("gitcd test CA", TLS_CERT_DAYS, &ca_key, &ca_cert);
        if (r < 0)
                goto out;
        r = pki_write_pem(t->ca_cert, t->ca_key, ca_cert, ca_key);
        if (r < 0)
                goto out;
        const char *dns[] = {"localhost", NULL};
        const char *ips[] = {"127.0.0.1", NULL};
        pki_cert_request server = {
            .cn = "etcd-server",
            .dns_names = dns,
            .ip_addresses = ips,
            .days = TLS_CERT_DAYS,
            .server = true,
            .client = true,
        };
        r = tls_issue(ca_cert, ca_key, &server, t->server_cert, t->server_key);
        if (r < 0)
                goto out;
        pki_cert_request peer = server;
        peer.cn = "etcd-peer";
        r = tls_issue(ca_cert, ca_key, &peer, t->peer_cert, t->peer_key);
        if (r < 0)
                goto out;
        pki_cert_request client = {
            .cn = "root",
            .days = TLS_CERT_DAYS,
            .client = true,
        };
        r = tls_issue(ca_cert, ca_key, &client, t->client_cert, t->client_key);
out:
        if (r < 0)
                fprintf(stderr, "harness: cannot generate TLS material: %s\n", pki_last_error());
        pki_cert_free(ca_cert);
        pki_key_free(ca_key);
        return r;
}

static int member_spawn(cluster_priv *p, size_t i)
{
        harness_member *m = &p->pub.members[i];
        pid_t pid = 0;
        int r = spawn(p->argvs[i], m->log_path, &pid, &p->log_starts[i]);
        if (r < 0) {
                fprintf(stderr, "harness: cannot start etcd member %s: %s\n", m->name,
                        strerror(-r));
                return r;
        }
        m->pid = pid;
        return 0;
}

/* One attempt at a new cluster: -EADDRINUSE means try again with new ports. */
static int cluster_try_start(const harness_opts *o, const char *etcd_bin, cluster_priv **ret)
{
        cluster_priv *p = XNEW(cluster_priv);
        harness_cluster *c = &p->pub;
        int r = 0;
        c->version = xstrdup(o->version);
        c->etcd_bin = xstrdup(etcd_bin);
        c->etcdctl_bin = harness_etcd_path(o->version, "etcdctl");
        c->etcdutl_bin = harness_etcd_path(o->version, "etcdutl");
        p->client_cert_auth = o->client_cert_auth;
        p->quota_backend_bytes = o->quota_backend_bytes;
        p->extra_arg = o->extra_arg ? xstrdup(o->extra_arg) : NULL;
        p->token = xasprintf("gitcd-test-%ld-%u-%lld", (long)getpid(), cluster_counter++,
                             (long long)now_wall_ms());
        c->root_dir = harness_tmpdir("gitcd-etcd");
        if (!c->root_dir) {
                r = -EIO;
                goto out;
        }
        if (o->tls) {
                r = tls_generate(c);
                if (r < 0)
                        goto out;
        }
        for (size_t i = 0; i < o->members; i++) {
                char name[32];
                snprintf(name, sizeof(name), "m%zu", i);
                size_t idx;
                r = member_add(p, name, 0, 0, &idx);
                if (r < 0)
                        goto out;
        }
        strbuf ic = STRBUF_INIT;
        for (size_t i = 0; i < c->n; i++)
                sb_printf(&ic, "%s%s=%s", i ? "," : "", c->members[i].name, c->members[i].peer_url);
        for (size_t i = 0; i < c->n; i++)
                p->argvs[i] = member_argv(p, &c->members[i], sb_str(&ic), "new");
        sb_release(&ic);
        for (size_t i = 0; i < c->n; i++) {
                r = member_spawn(p, i);
                if (r < 0)
                        goto out;
        }
        r = wait_healthy_range(c, 0, c->n, o->start_timeout_ms);
out:
        if (r < 0) {
                harness_cluster_free(c);
                return r;
        }
        *ret = p;
        return 0;
}

int harness_cluster_start(const harness_opts *opts, harness_cluster **ret)
{
        harness_opts o = opts ? *opts : (harness_opts){0};
        if (isempty(o.version))
                o.version = DEFAULT_VERSION;
        if (o.members == 0)
                o.members = 1;
        if (o.start_timeout_ms <= 0)
                o.start_timeout_ms = DEFAULT_TIMEOUT_MS;
        if (o.client_cert_auth && !o.tls)
                return -EINVAL;
        registry_init();
        _cleanup_free_ char *bin = harness_etcd_path(o.version, "etcd");
        if (!bin) {
                fprintf(stderr, "harness: etcd %s is not installed (run scripts/setup)\n",
                        o.version);
                return -ENOENT;
        }
        int r = -EADDRINUSE;
        for (int attempt = 0; attempt < START_ATTEMPTS && r == -EADDRINUSE; attempt++) {
                if (attempt > 0)
                        fprintf(stderr, "harness: a port was taken; retrying with new ports\n");
                cluster_priv *p = NULL;
                r = cluster_try_start(&o, bin, &p);
                if (r == 0) {
                        *ret = &p->pub;
                        return 0;
                }
        }
        return r;
}

static int member_kill(harness_member *m)
{
        if (m->pid <= 0)
                return 0;
        (void)kill(-m->pid, SIGKILL);
        (void)kill(m->pid, SIGKILL);
        while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(m->pid);
        m->pid = 0;
        return 0;
}

void harness_cluster_free(harness_cluster *c)
{
        if (!c)
                return;
        cluster_priv *p = priv(c);
        for (size_t i = 0; i < c->n; i++)
                (void)member_kill(&c->members[i]);
        if (c->root_dir) {
                (void)rm_rf(c->root_dir);
                untrack_dir(c->root_dir);
        }
        for (size_t i = 0; i < c->n; i++) {
                member_release(&c->members[i]);
                strv_free(p->argvs[i]);
        }
        free(c->members);
        free(p->argvs);
        free(p->log_starts);
        tls_free(c->tls);
        free(c->version);
        free(c->etcd_bin);
        free(c->etcdctl_bin);
        free(c->etcdutl_bin);
        free(c->root_dir);
        free(c->endpoints);
        free(p->token);
        free(p->extra_arg);
        free(p);
}

int harness_member_stop(harness_cluster *c, size_t i)
{
        if (!c || i >= c->n)
                return -EINVAL;
        harness_member *m = &c->members[i];
        if (m->pid <= 0)
                return 0;
        if (kill(m->pid, SIGTERM) < 0 && errno != ESRCH)
                return -errno;
        int64_t deadline = now_mono_ms() + STOP_TIMEOUT_MS;
        while (now_mono_ms() < deadline) {
                int status;
                if (member_exited(m, &status))
                        return 0;
                sleep_ms(20);
        }
        fprintf(stderr, "harness: etcd member %s ignored SIGTERM for %d ms; killing it\n", m->name,
                STOP_TIMEOUT_MS);
        return member_kill(m);
}

/*
 * Followers first, all at once, then the leader: a leader stopping while
 * its peers run hands leadership over, and it waits for a peer that is
 * itself shutting down for up to 7 s; with no peer left it skips that.
 */
int harness_cluster_stop(harness_cluster *c)
{
        if (!c)
                return -EINVAL;
        bool *leader = xcalloc(c->n ? c->n : 1, sizeof(bool));
        for (size_t i = 0; i < c->n; i++)
                leader[i] = c->members[i].pid > 0 && is_leader(c, &c->members[i]);
        int r = 0;
        for (int pass = 0; pass < 2; pass++) {
                bool leaders = pass == 1;
                for (size_t i = 0; i < c->n; i++)
                        if (leader[i] == leaders && c->members[i].pid > 0)
                                (void)kill(c->members[i].pid, SIGTERM);
                for (size_t i = 0; i < c->n; i++) {
                        if (leader[i] != leaders)
                                continue;
                        int k = harness_member_stop(c, i);
                        if (k < 0 && r == 0)
                                r = k;
                }
        }
        free(leader);
        return r;
}

int harness_member_kill(harness_cluster *c, size_t i)
{
        if (!c || i >= c->n)
                return -EINVAL;
        return member_kill(&c->members[i]);
}

static size_t members_running(harness_cluster *c)
{
        size_t n = 0;
        for (size_t i = 0; i < c->n; i++) {
                int status;
                if (!member_exited(&c->members[i], &status))
                        n++;
        }
        return n;
}

int harness_member_restart(harness_cluster *c, size_t i)
{
        if (!c || i >= c->n)
                return -EINVAL;
        cluster_priv *p = priv(c);
        harness_member *m = &c->members[i];
        int status;
        if (!member_exited(m, &status))
                return -EBUSY;
        int r = member_spawn(p, i);
        if (r < 0)
                return r;
        if (members_running(c) < c->n / 2 + 1)
                return 0;
        r = wait_healthy_range(c, i, i + 1, DEFAULT_TIMEOUT_MS);
        return r < 0 ? -ETIMEDOUT : 0;
}

int harness_member_wipe(harness_cluster *c, size_t i)
{
        if (!c || i >= c->n)
                return -EINVAL;
        harness_member *m = &c->members[i];
        int status;
        if (!member_exited(m, &status))
                return -EBUSY;
        return rm_rf(m->data_dir);
}

long harness_grpc_handled(harness_cluster *c, size_t i, const char *method)
{
        if (!c || i >= c->n)
                return -1;
        etcd_health_opts o = {.timeout_ms = 20000};
        _cleanup_free_ char *text = NULL, *error = NULL;
        if (etcd_member_metrics(c->members[i].client_url, &o, 16 << 20, &text, &error) < 0)
                return -1;
        _cleanup_free_ char *label = xasprintf("grpc_method=\"%s\"", method);
        long n = 0;
        for (const char *p = text; (p = strstr(p, "grpc_server_handled_total{")); p++) {
                const char *eol = strchr(p, '\n');
                const char *m = strstr(p, label);
                const char *close = strchr(p, '}');
                if (m && close && (!eol || m < eol))
                        n += strtol(close + 1, NULL, 10);
        }
        return n;
}

int harness_member_wait_healthy(harness_cluster *c, size_t i, int timeout_ms)
{
        if (!c || i >= c->n)
                return -EINVAL;
        if (timeout_ms <= 0)
                timeout_ms = DEFAULT_TIMEOUT_MS;
        int r = wait_healthy_range(c, i, i + 1, timeout_ms);
        return r < 0 ? -ETIMEDOUT : 0;
}

int harness_member_start_joining(harness_cluster *c, const char *name, int peer_port,
                                 int client_port, const char *initial_cluster, size_t *ret_index)
{
        if (!c || isempty(name) || isempty(initial_cluster))
                return -EINVAL;
        for (size_t i = 0; i < c->n; i++)
                if (streq(c->members[i].name, name))
                        return -EEXIST;
        cluster_priv *p = priv(c);
        size_t idx;
        int r = member_add(p, name, peer_port, client_port, &idx);
        if (r < 0)
                return r;
        p->argvs[idx] = member_argv(p, &c->members[idx], initial_cluster, "existing");
        r = member_spawn(p, idx);
        if (r < 0)
                return r;
        *ret_index = idx;
        return 0;
}
