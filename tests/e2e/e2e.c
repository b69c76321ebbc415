/*
 * End-to-end helpers; see e2e.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAX_ENVS 8
static e2e *live[MAX_ENVS];

static void kill_pidfiles(const char *dir, int depth)
{
        if (depth > 6)
                return;
        DIR *d = opendir(dir);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                char *p = path_join(dir, de->d_name);
                if (streq(de->d_name, "pid")) {
                        char *data = NULL;
                        size_t len = 0;
                        if (read_file(p, 64, &data, &len) == 0) {
                                pid_t pid = (pid_t)atoi(data);
                                if (pid > 1)
                                        kill(pid, SIGKILL);
                                free(data);
                        }
                } else if (path_is_dir(p))
                        kill_pidfiles(p, depth + 1);
                free(p);
        }
        closedir(d);
}

void e2e_kill_members(e2e *e)
{
        kill_pidfiles(e->state_dir, 0);
}

static void kill_all_at_exit(void)
{
        for (int i = 0; i < MAX_ENVS; i++)
                if (live[i])
                        kill_pidfiles(live[i]->state_dir, 0);
}

static void on_fatal(int sig)
{
        kill_all_at_exit();
        signal(sig, SIG_DFL);
        raise(sig);
}

e2e *e2e_new(void)
{
        static bool hooked;
        if (!hooked) {
                atexit(kill_all_at_exit);
                signal(SIGABRT, on_fatal);
                signal(SIGTERM, on_fatal);
                signal(SIGINT, on_fatal);
                hooked = true;
        }
        e2e *e = XNEW(e2e);
        e->root = harness_tmpdir("gitcd-e2e");
        assert_non_null(e->root);
        e->source = path_join(e->root, "source");
        e->state_dir = path_join(e->root, "state");
        assert_int_equal(mkdir_p(e->source, 0755), 0);
        e->bin = getenv("GITCD_BIN");
        assert_non_null(e->bin);
        for (int i = 0; i < MAX_ENVS; i++)
                if (!live[i]) {
                        live[i] = e;
                        break;
                }
        return e;
}

void e2e_free(e2e *e)
{
        if (!e)
                return;
        e2e_kill_members(e);
        for (int i = 0; i < MAX_ENVS; i++)
                if (live[i] == e)
                        live[i] = NULL;
        usleep(100 * 1000);
        /* GITCD_E2E_KEEP=1 keeps the folder (logs, state) for a person to read after a failure. */
        if (!getenv("GITCD_E2E_KEEP"))
                (void)rm_rf(e->root);
        else
                fprintf(stderr, "e2e: kept %s\n", e->root);
        free(e->root);
        free(e->source);
        free(e->state_dir);
        free(e->config);
        free(e);
}

void e2e_set_policy(e2e *e, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *keys = xvasprintf(fmt, ap);
        va_end(ap);
        _cleanup_free_ char *text = xasprintf("policy: {%s}\n", keys);
        free(e->config);
        e->config = path_join(e->root, "gitcd.yaml");
        assert_int_equal(write_file_atomic(e->config, text, strlen(text), 0644), 0);
}

/*
 * argv (argv[0] the binary, argv[1] the command) with --config <e->config>
 * after the command when the test set a policy, the command reads one
 * (apply, plan, run) and names no file of its own. A new array of the same
 * strings; free() it.
 */
static const char **with_config(const e2e *e, const char *const *argv)
{
        size_t n = 0;
        bool has = false;
        for (; argv[n]; n++)
                if (streq(argv[n], "--config"))
                        has = true;
        const char **out = xcalloc(n + 3, sizeof(char *));
        const char *cmd = n > 1 ? argv[1] : "";
        bool add =
            e->config && !has && (streq(cmd, "apply") || streq(cmd, "plan") || streq(cmd, "run"));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                out[k++] = argv[i];
                if (i == 1 && add) {
                        out[k++] = "--config";
                        out[k++] = e->config;
                }
        }
        return out;
}

void e2e_write_file(e2e *e, const char *file, const char *text)
{
        char *p = path_join(e->source, file);
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0644), 0);
        free(p);
}

void e2e_write_cluster(e2e *e, const char *file, const char *name, int replicas,
                       const char *version)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: %s\n"
                               "  namespace: default\n"
                               "spec:\n"
                               "  replicas: %d\n"
                               "  version: \"%s\"\n"
                               "  progressDeadlineSeconds: 120\n",
                               name, replicas, version);
        e2e_write_file(e, file, text);
        free(text);
}

static int run_argv(e2e *e, const char *failpoint, char **args, char **ret_stdout,
                    char **ret_stderr)
{
        _cleanup_free_ const char **argv = with_config(e, (const char *const *)args);
        int out[2] = {-1, -1};
        _cleanup_free_ char *err_path = ret_stderr ? path_join(e->root, "stderr.txt") : NULL;
        if (ret_stdout)
                assert_int_equal(pipe(out), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("GITCD_STATE_DIR", e->state_dir, 1);
                setenv("NO_COLOR", "1", 1);
                if (err_path) {
                        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                        if (fd < 0)
                                _exit(126);
                        dup2(fd, STDERR_FILENO);
                        close(fd);
                }
                if (failpoint)
                        setenv("GITCD_FAILPOINT", failpoint, 1);
                else
                        unsetenv("GITCD_FAILPOINT");
                if (ret_stdout) {
                        dup2(out[1], STDOUT_FILENO);
                        close(out[0]);
                        close(out[1]);
                } else {
                        int devnull = open("/dev/null", O_WRONLY);
                        if (getenv("GITCD_E2E_VERBOSE") == NULL)
                                dup2(devnull, STDOUT_FILENO);
                }
                execv(e->bin, (char **)argv);
                _exit(127);
        }
        strbuf sb = STRBUF_INIT;
        if (ret_stdout) {
                close(out[1]);
                char buf[4096];
                ssize_t n;
                while ((n = read(out[0], buf, sizeof(buf))) > 0)
                        sb_append_len(&sb, buf, (size_t)n);
                close(out[0]);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (ret_stdout)
                *ret_stdout = sb_detach(&sb);
        if (ret_stderr) {
                size_t len = 0;
                *ret_stderr = NULL;
                if (read_file(err_path, 1 << 20, ret_stderr, &len) < 0)
                        *ret_stderr = xstrdup("");
                (void)unlink(err_path);
        }
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return WEXITSTATUS(status);
}

int e2e_apply(e2e *e, const char *failpoint, int timeout_s)
{
        char t[32];
        snprintf(t, sizeof(t), "%ds", timeout_s);
        char *argv[] = {(char *)e->bin, "apply", "-q", "--source", e->source, "--timeout", t, NULL};
        return run_argv(e, failpoint, argv, NULL, NULL);
}

void e2e_apply_ok(e2e *e, int timeout_s)
{
        int k = e2e_apply(e, NULL, timeout_s);
        if (k != 0) {
                char *out = NULL;
                e2e_run(e, &out, "status", NULL);
                fail_msg("gitcd apply exited %d; status:\n%s", k, out);
        }
}

int e2e_runv_failpoint(e2e *e, const char *failpoint, char **ret_stdout, char **ret_stderr,
                       const char *const *args)
{
        char *argv[64];
        int n = 0;
        argv[n++] = (char *)e->bin;
        for (size_t i = 0; args[i] && n < 63; i++)
                argv[n++] = (char *)args[i];
        argv[n] = NULL;
        return run_argv(e, failpoint, argv, ret_stdout, ret_stderr);
}

int e2e_runv(e2e *e, char **ret_stdout, char **ret_stderr, const char *const *args)
{
        return e2e_runv_failpoint(e, NULL, ret_stdout, ret_stderr, args);
}

int e2e_run(e2e *e, char **ret_stdout, const char *arg, ...)
{
        const char *args[64];
        size_t n = 0;
        va_list ap;
        va_start(ap, arg);
        for (const char *a = arg; a && n < 63; a = va_arg(ap, const char *))
                args[n++] = a;
        va_end(ap);
        args[n] = NULL;
        return e2e_runv(e, ret_stdout, NULL, args);
}

pid_t e2e_start_daemon(e2e *e, const char *const *extra_args)
{
        const char *argv[48] = {e->bin, "run", "--source", e->source, "--interval", "1s"};
        size_t n = 6;
        for (size_t i = 0; extra_args && extra_args[i] && n < ARRAY_SIZE(argv) - 1; i++)
                argv[n++] = extra_args[i];
        argv[n] = NULL;
        _cleanup_free_ const char **full = with_config(e, argv);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("GITCD_STATE_DIR", e->state_dir, 1);
                char *log = xasprintf("%s/daemon.log", e->root);
                if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout))
                        _exit(126);
                execv(e->bin, (char **)full);
                _exit(127);
        }
        harness_track_pid(pid);
        return pid;
}

pid_t e2e_start(e2e *e, const char *const *args, const char *log_name)
{
        const char *argv[48] = {e->bin};
        size_t n = 1;
        for (size_t i = 0; args[i] && n < ARRAY_SIZE(argv) - 1; i++)
                argv[n++] = args[i];
        argv[n] = NULL;
        _cleanup_free_ const char **full = with_config(e, argv);
        char *log = path_join(e->root, log_name);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("GITCD_STATE_DIR", e->state_dir, 1);
                setenv("NO_COLOR", "1", 1);
                unsetenv("GITCD_FAILPOINT");
                if (!freopen(log, "w", stderr) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
                        _exit(126);
                execv(e->bin, (char **)full);
                _exit(127);
        }
        free(log);
        harness_track_pid(pid);
        return pid;
}

int e2e_wait_exit(pid_t pid)
{
        int status = 0;
        pid_t r;
        while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
                ;
        assert_int_equal(r, pid);
        harness_untrack_pid(pid);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return WEXITSTATUS(status);
}

char *e2e_read_log(e2e *e, const char *log_name)
{
        char *path = path_join(e->root, log_name);
        char *text = NULL;
        size_t len = 0;
        if (read_file(path, 16 << 20, &text, &len) < 0)
                text = xstrdup("");
        free(path);
        return text;
}

pid_t e2e_lock_pid(e2e *e)
{
        char *path = path_join(e->state_dir, "gitcd.lock");
        char *text = NULL;
        size_t len = 0;
        pid_t pid = 0;
        if (read_file(path, 64, &text, &len) == 0)
                pid = (pid_t)atoi(text);
        free(text);
        free(path);
        return pid;
}

/* Seconds since boot (/proc/uptime), or -1. */
static double uptime_s(void)
{
        _cleanup_free_ char *text = NULL;
        size_t n = 0;
        return read_file("/proc/uptime", 256, &text, &n) == 0 ? atof(text) : -1;
}

/*
 * Print pid and every process under it: its state, how long it has run
 * and its command line (a daemon, its fetches, its members), so that a
 * wait that failed shows what was still running, and for how long.
 */
static void tell_processes(pid_t pid, int depth, double now)
{
        _cleanup_free_ char *stat_path = xasprintf("/proc/%d/stat", (int)pid);
        _cleanup_free_ char *cmd_path = xasprintf("/proc/%d/cmdline", (int)pid);
        _cleanup_free_ char *stat = NULL, *cmd = NULL;
        size_t n = 0, cn = 0;
        if (depth > 4 || read_file(stat_path, 4096, &stat, &n) < 0)
                return;
        (void)read_file(cmd_path, 4096, &cmd, &cn);
        for (size_t i = 0; cmd && i + 1 < cn; i++)
                if (!cmd[i])
                        cmd[i] = ' ';
        /* after the command's name in parentheses: state, then field 22 is the start time */
        const char *rest = strrchr(stat, ')');
        char state = '?';
        unsigned long long start = 0;
        if (rest)
                (void)sscanf(rest + 2,
                             "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                             "%*s %*s %*s %*s %llu",
                             &state, &start);
        double age = now - (double)start / (double)sysconf(_SC_CLK_TCK);
        fprintf(stderr, "e2e: %*spid %d, %c, %.0f s: %s\n", 2 * depth, "", (int)pid, state, age,
                cmd ? cmd : "?");
        _cleanup_free_ char *tasks_path = xasprintf("/proc/%d/task", (int)pid);
        DIR *d = opendir(tasks_path);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *path = xasprintf("%s/%s/children", tasks_path, de->d_name);
                _cleanup_free_ char *kids = NULL;
                size_t kn = 0;
                if (read_file(path, 65536, &kids, &kn) < 0)
                        continue;
                for (char *p = kids, *end; p && *p; p = end) {
                        long child = strtol(p, &end, 10);
                        if (end == p)
                                break;
                        tell_processes((pid_t)child, depth + 1, now);
                }
        }
        closedir(d);
}

/*
 * What a failed wait leaves for the person reading the test's log: the last
 * status seen, the processes this test started (tell_processes) and the end
 * of every log file in the test's folder (a daemon's), which the folder's
 * removal at exit would otherwise take.
 */
static void tell_why_not_ready(e2e *e, const char *id, const char *last_status)
{
        fprintf(stderr, "e2e: %s not ready; its last status: %s\n", id,
                last_status ? last_status : "(none)");
        tell_processes(getpid(), 0, uptime_s());
        DIR *d = opendir(e->root);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len < 5 || !streq(de->d_name + len - 4, ".log"))
                        continue;
                _cleanup_free_ char *path = path_join(e->root, de->d_name);
                _cleanup_free_ char *text = NULL;
                size_t n = 0;
                if (read_file(path, 64 << 20, &text, &n) < 0)
                        continue;
                const char *tail = n > 8192 ? text + n - 8192 : text;
                fprintf(stderr, "e2e: the end of %s:\n%s\n", de->d_name, tail);
        }
        closedir(d);
}

bool e2e_wait_ready(e2e *e, const char *name, int n, int timeout_s)
{
        int64_t end = now_mono_ms() + timeout_s * 1000;
        _cleanup_free_ char *id = xasprintf("default/%s", name);
        _cleanup_free_ char *last = NULL;
        while (now_mono_ms() < end) {
                char *out = NULL;
                if (e2e_run(e, &out, "status", "-o", "json", id, NULL) == 0) {
                        json_t *j = json_loads(out, 0, NULL);
                        int ready = (int)json_integer_value(json_object_get(j, "ready"));
                        const char *phase = json_string_value(json_object_get(j, "phase"));
                        bool ok = ready == n && streq_ptr(phase, "Running");
                        json_decref(j);
                        if (ok) {
                                free(out);
                                return true;
                        }
                        free(last);
                        last = out;
                        out = NULL;
                }
                free(out);
                usleep(200 * 1000);
        }
        tell_why_not_ready(e, id, last);
        return false;
}

json_t *e2e_status(e2e *e, const char *name)
{
        char *id = xasprintf("default/%s", name);
        char *out = NULL;
        int k = e2e_run(e, &out, "status", "-o", "json", id, NULL);
        free(id);
        assert_int_equal(k, 0);
        json_error_t err;
        json_t *j = json_loads(out, 0, &err);
        if (!j)
                fail_msg("status output is not JSON: %s", out);
        free(out);
        return j;
}

char *e2e_endpoints(e2e *e, const char *name)
{
        json_t *st = e2e_status(e, name);
        strbuf sb = STRBUF_INIT;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(st, "members"), i, m)
        {
                const char *u = json_string_value(json_object_get(m, "client_url"));
                if (!u)
                        continue;
                if (sb.len)
                        sb_appendc(&sb, ',');
                sb_append(&sb, u);
        }
        json_decref(st);
        return sb_detach(&sb);
}

etcd_client *e2e_client(e2e *e, const char *name)
{
        char *eps = e2e_endpoints(e, name);
        etcd_client_opts o = {.endpoints = eps, .call_timeout_ms = 5000, .dial_timeout_ms = 1000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        free(eps);
        return c;
}

etcd_members *e2e_members(e2e *e, const char *name)
{
        etcd_client *c = e2e_client(e, name);
        etcd_members *l = NULL;
        int k = etcd_member_list(c, &l);
        if (k < 0)
                fail_msg("member list: %s", etcd_client_last_error(c));
        etcd_client_free(c);
        return l;
}

int e2e_audit_count(e2e *e, const char *name, const char *action)
{
        char *id = xasprintf("default/%s", name);
        char *out = NULL;
        int k = e2e_run(e, &out, "log", "-o", "json", "--cluster", id, "--action", action, NULL);
        free(id);
        assert_int_equal(k, 0);
        int n = 0;
        for (const char *p = out; (p = strchr(p, '\n')); p++)
                n++;
        free(out);
        return n;
}

char *e2e_member_dir(e2e *e, const char *name, const char *member)
{
        return xasprintf("%s/clusters/default/%s/%s", e->state_dir, name, member);
}

pid_t e2e_member_pid(e2e *e, const char *name, const char *member)
{
        char *dir = e2e_member_dir(e, name, member);
        char *p = path_join(dir, "pid");
        char *data = NULL;
        size_t len = 0;
        pid_t pid = 0;
        if (read_file(p, 64, &data, &len) == 0) {
                pid = (pid_t)atoi(data);
                free(data);
        }
        free(p);
        free(dir);
        if (pid > 0 && kill(pid, 0) < 0)
                pid = 0;
        return pid;
}

bool e2e_have_version(const char *version)
{
        return harness_have_etcd(version);
}
/* The serial of the certificate a member's client port presents, via openssl s_client. */
char *e2e_served_serial(const char *url, const char *ca)
{
        const char *hostport = strstr(url, "://");
        hostport = hostport ? hostport + 3 : url;
        _cleanup_free_ char *cmd =
            xasprintf("openssl s_client -connect %s -CAfile %s </dev/null 2>/dev/null | "
                      "openssl x509 -noout -serial 2>/dev/null",
                      hostport, ca);
        FILE *p = popen(cmd, "r");
        if (!p)
                return NULL;
        char line[256] = "";
        char *got = fgets(line, sizeof(line), p);
        pclose(p);
        if (!got || strncmp(line, "serial=", 7) != 0)
                return NULL;
        line[strcspn(line, "\r\n")] = '\0';
        return xstrdup(line + 7);
}

/* A member's operator/ folder: gitcd's own client identity, renewed with the member. */
e2e_tls_files e2e_operator_files(e2e *e, const char *name, const char *member)
{
        _cleanup_free_ char *mdir = e2e_member_dir(e, name, member);
        _cleanup_free_ char *dir = path_join(mdir, "tls/operator");
        return (e2e_tls_files){path_join(dir, "ca.crt"), path_join(dir, "tls.crt"),
                               path_join(dir, "tls.key")};
}

void e2e_tls_files_release(e2e_tls_files *f)
{
        free(f->ca);
        free(f->crt);
        free(f->key);
}

etcd_client *e2e_tls_client(e2e *e, const char *name, const e2e_tls_files *f)
{
        _cleanup_free_ char *eps = e2e_endpoints(e, name);
        etcd_client_opts o = {.endpoints = eps,
                              .cacert = f->ca,
                              .cert = f->crt,
                              .key = f->key,
                              .call_timeout_ms = 5000,
                              .dial_timeout_ms = 1000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        return c;
}

/* A put that may be retried once, after a short pause; false when both attempts failed. */
bool e2e_put_retry(etcd_client *c, const char *key, char **ret_error)
{
        for (int attempt = 0; attempt < 2; attempt++) {
                if (etcd_put(c, key, "v", 1, NULL) == 0)
                        return true;
                free(*ret_error);
                *ret_error = xstrdup(etcd_client_last_error(c));
                usleep(500 * 1000);
        }
        return false;
}

/* e2e_fill_keys / e2e_check_keys (e2e.h). */
#define FILL_WRITERS 8

typedef struct fill {
        pthread_t thread;
        const char *endpoints;
        int from, to;
        int failed;
} fill;

static void fill_key_of(int i, char key[static 32], char val[static 48])
{
        snprintf(key, 32, "k/%06d", i);
        snprintf(val, 48, "value-%d-%x", i, (unsigned)i * 2654435761u);
}

static void *fill_main(void *arg)
{
        fill *f = arg;
        etcd_client_opts o = {
            .endpoints = f->endpoints, .call_timeout_ms = 10000, .dial_timeout_ms = 1000};
        etcd_client *c = NULL;
        if (etcd_client_new(&o, &c) < 0) {
                f->failed = 1;
                return NULL;
        }
        for (int i = f->from; i < f->to && !f->failed; i++) {
                char key[32], val[48];
                fill_key_of(i, key, val);
                if (etcd_put(c, key, val, strlen(val), NULL) < 0)
                        f->failed = 1;
        }
        etcd_client_free(c);
        return NULL;
}

void e2e_fill_keys(const char *eps, int n)
{
        fill f[FILL_WRITERS];
        for (int i = 0; i < FILL_WRITERS; i++) {
                f[i] = (fill){.endpoints = eps,
                              .from = n * i / FILL_WRITERS,
                              .to = n * (i + 1) / FILL_WRITERS};
                assert_int_equal(pthread_create(&f[i].thread, NULL, fill_main, &f[i]), 0);
        }
        for (int i = 0; i < FILL_WRITERS; i++) {
                pthread_join(f[i].thread, NULL);
                assert_int_equal(f[i].failed, 0);
        }
}

/* Every key with its value, read in ranges of 1000 (k/000..., k/001..., ...). */
static void check_keys_on(etcd_client *c, int n)
{
        int seen = 0;
        for (int p = 0; p * 1000 < n; p++) {
                char prefix[32];
                snprintf(prefix, sizeof(prefix), "k/%03d", p);
                etcd_kv_list *l = NULL;
                assert_int_equal(etcd_get(c, prefix, true, &l), 0);
                assert_int_equal(l->n, (size_t)(n - p * 1000 < 1000 ? n - p * 1000 : 1000));
                for (size_t i = 0; i < l->n; i++) {
                        char key[32], val[48];
                        fill_key_of(p * 1000 + (int)i, key, val);
                        assert_string_equal(l->kvs[i].key, key);
                        assert_int_equal(l->kvs[i].value_len, strlen(val));
                        assert_memory_equal(l->kvs[i].value, val, strlen(val));
                        seen++;
                }
                etcd_kv_list_free(l);
        }
        assert_int_equal(seen, n);
}

void e2e_check_keys(const char *eps, int n)
{
        char *endpoints = xstrdup(eps);
        char *save = NULL;
        for (char *ep = strtok_r(endpoints, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
                etcd_client_opts o = {.endpoints = ep};
                etcd_client *c = NULL;
                assert_int_equal(etcd_client_new(&o, &c), 0);
                check_keys_on(c, n);
                etcd_client_free(c);
        }
        free(endpoints);
}

void e2e_writer_check(harness_writer *w, e2e *e, const char *name, int min_acked)
{
        etcd_client *c = e2e_client(e, name);
        harness_writer_check(w, c, min_acked);
        etcd_client_free(c);
}

int e2e_writer_kept(harness_writer *w, e2e *e, const char *name, int64_t rev)
{
        etcd_client *c = e2e_client(e, name);
        int kept = harness_writer_kept(w, c, rev);
        etcd_client_free(c);
        return kept;
}

uint64_t e2e_assert_voters(e2e *e, const char *name, size_t n)
{
        etcd_members *l = e2e_members(e, name);
        if (l->n != n)
                fail_msg("%s: %zu members in etcd, want %zu", name, l->n, n);
        for (size_t i = 0; i < l->n; i++) {
                assert_false(l->members[i].is_learner);
                assert_true(l->members[i].name && l->members[i].name[0] != '\0'); /* started */
        }
        uint64_t id = l->cluster_id;
        etcd_members_free(l);
        return id;
}

char *e2e_sh(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *cmd = xvasprintf(fmt, ap);
        va_end(ap);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        strbuf sb = STRBUF_INIT;
        char buf[4096];
        for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;)
                sb_append_len(&sb, buf, n);
        int st = pclose(p);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                fail_msg("`%s` failed", cmd);
        free(cmd);
        return sb_detach(&sb);
}
