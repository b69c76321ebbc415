/*
 * The host agent (see hostagent.h): a forked process with a polling loop,
 * so the test's own threads (libcurl, libssh2) never share its state. It
 * keeps one record per watched file: the content it started, the pid,
 * and when to restart after an exit. SIGTERM stops every process it runs
 * and then the agent.
 *
 * Readiness, as systemd has it for Type=notify: each start of such a unit
 * gets a fresh datagram socket in the abstract namespace, named to the
 * process in NOTIFY_SOCKET (etcd calls sd_notify("READY=1") once it
 * serves, which for a member of a new static cluster is once a quorum
 * formed); the agent reads it every pass and publishes <dir>/.U.ready
 * when READY=1 came, which the simulated systemctl's start and restart
 * wait for. The socket goes with the process, so a late message of a
 * stopped process never marks its successor ready.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/harness/harness.h"
#include "tests/harness/hostagent.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

struct hostagent {
        pid_t pid;
};

typedef struct unit {
        char *path;
        char *content;
        pid_t pid;
        int64_t restart_at;    /* monotonic ms; 0: not waiting */
        int64_t gone_since;    /* monotonic ms its file was first missed; 0: present */
        int64_t changed_since; /* monotonic ms a changed content was first seen; 0: none */
        int notify_fd;         /* the running process's NOTIFY_SOCKET (Type=notify); -1: none */
        bool ready;            /* READY=1 came from the running process */
        bool seen;
        bool held; /* a unit stopped by the simulated systemctl (its .inactive mark) */
} unit;

/* how late a kubelet acts on a changed or removed static Pod manifest */
#define MANIFEST_LAG_MS 1000

static bool is_manifest(const char *path)
{
        size_t len = strlen(path);
        return len > 5 && streq(path + len - 5, ".yaml");
}

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
        (void)sig;
        stopping = 1;
}

/* A word as systemd passes it on: "%%" and "$$" stand for '%' and '$' (gitcd doubles them). */
static char *undouble(const char *w)
{
        char *out = xstrdup(w), *o = out;
        for (const char *p = w; *p; p++) {
                *o++ = *p;
                if ((*p == '%' || *p == '$') && p[1] == *p)
                        p++;
        }
        *o = 0;
        return out;
}

/*
 * ExecStart= words: double quotes with backslash escapes inside (what
 * gitcd writes: \\, \", \'), single quotes (the tests' hand-written
 * units, and gitcd's before), backslash outside quotes, spaces between,
 * "%%" and "$$" undoubled (no other specifier or variable is replaced:
 * gitcd's units use none).
 */
static char **parse_exec(const char *text)
{
        const char *p = strstr(text, "\nExecStart=");
        if (!p)
                return NULL;
        p += strlen("\nExecStart=");
        char **argv = xcalloc(1, sizeof(char *));
        size_t n = 0, alloc = 1;
        strbuf w = STRBUF_INIT;
        bool in_word = false;
        for (; *p && *p != '\n'; p++) {
                if (*p == '\'') {
                        const char *end = strchr(p + 1, '\'');
                        if (!end)
                                break;
                        sb_append_len(&w, p + 1, (size_t)(end - p - 1));
                        p = end;
                        in_word = true;
                } else if (*p == '"') {
                        for (p++; *p && *p != '"' && *p != '\n'; p++) {
                                if (*p == '\\' && p[1] && p[1] != '\n')
                                        p++;
                                sb_appendc(&w, *p);
                        }
                        if (*p != '"')
                                break;
                        in_word = true;
                } else if (*p == '\\' && p[1]) {
                        sb_appendc(&w, *++p);
                        in_word = true;
                } else if (*p == ' ') {
                        if (in_word) {
                                argv = xgrow(argv, &alloc, n + 2, sizeof(char *));
                                argv[n++] = undouble(sb_str(&w));
                                argv[n] = NULL;
                                sb_reset(&w);
                                in_word = false;
                        }
                } else {
                        sb_appendc(&w, *p);
                        in_word = true;
                }
        }
        if (in_word) {
                argv = xgrow(argv, &alloc, n + 2, sizeof(char *));
                argv[n++] = undouble(sb_str(&w));
                argv[n] = NULL;
        }
        sb_release(&w);
        return argv;
}

static char **parse_pod(const char *text, const char *etcd_bin)
{
        const char *p = text;
        while (*p == '#') {
                p = strchr(p, '\n');
                if (!p)
                        return NULL;
                p++;
        }
        json_t *pod = json_loads(p, 0, NULL);
        json_t *cmd = json_object_get(
            json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0),
            "command");
        size_t n = json_array_size(cmd);
        char **argv = n ? xcalloc(n + 1, sizeof(char *)) : NULL;
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(cmd, i));
                argv[i] = xstrdup(i == 0 && streq_ptr(s, "etcd") ? etcd_bin : s ? s : "");
        }
        json_decref(pod);
        return argv;
}

/*
 * The environment systemd gives a unit's process, in the plain forms the
 * tests write: Environment=NAME=VALUE (one unquoted assignment a line) and
 * EnvironmentFile=[-]PATH (NAME=VALUE or NAME="VALUE" lines, # comments),
 * the files' assignments after Environment='s. Entries "NAME=VALUE".
 */
static char **unit_env(const char *text, size_t *ret_n)
{
        char **env = xcalloc(1, sizeof(char *));
        size_t n = 0, alloc = 1;
        strbuf files = STRBUF_INIT;
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                size_t len = strcspn(p, "\n");
                if (strneq(p, "Environment=", 12)) {
                        env = xgrow(env, &alloc, n + 2, sizeof(char *));
                        env[n++] = xstrndup(p + 12, len - 12);
                        env[n] = NULL;
                } else if (strneq(p, "EnvironmentFile=", 16)) {
                        const char *f = p + 16 + (p[16] == '-');
                        sb_append_len(&files, f, len - (size_t)(f - p));
                        sb_appendc(&files, '\n');
                }
        }
        for (const char *f = sb_str(&files); *f; f += strcspn(f, "\n") + 1) {
                _cleanup_free_ char *path = xstrndup(f, strcspn(f, "\n"));
                _cleanup_free_ char *body = NULL;
                size_t blen;
                if (read_file(path, 1 << 20, &body, &blen) < 0)
                        continue;
                for (char *l = strtok(body, "\n"); l; l = strtok(NULL, "\n")) {
                        char *eq = strchr(l, '=');
                        if (l[0] == '#' || !eq)
                                continue;
                        size_t vlen = strlen(eq + 1);
                        bool quoted = vlen >= 2 && eq[1] == '"' && eq[vlen] == '"';
                        env = xgrow(env, &alloc, n + 2, sizeof(char *));
                        env[n++] = quoted ? xasprintf("%.*s=%.*s", (int)(eq - l), l,
                                                      (int)(vlen - 2), eq + 2)
                                          : xstrdup(l);
                        env[n] = NULL;
                }
        }
        sb_release(&files);
        *ret_n = n;
        return env;
}

/* argv with each word that is $NAME replaced by NAME's words in env (systemd's rule). */
static char **expand_argv(char **argv, char *const *env, size_t n_env)
{
        char **out = xcalloc(1, sizeof(char *));
        size_t n = 0, alloc = 1;
        for (size_t i = 0; argv[i]; i++) {
                if (argv[i][0] != '$') {
                        out = xgrow(out, &alloc, n + 2, sizeof(char *));
                        out[n++] = xstrdup(argv[i]);
                        out[n] = NULL;
                        continue;
                }
                const char *name = argv[i] + 1, *v = "";
                for (size_t j = 0; j < n_env; j++)
                        if (strneq(env[j], name, strlen(name)) && env[j][strlen(name)] == '=')
                                v = env[j] + strlen(name) + 1;
                _cleanup_free_ char *copy = xstrdup(v);
                for (char *w = strtok(copy, " \t"); w; w = strtok(NULL, " \t")) {
                        out = xgrow(out, &alloc, n + 2, sizeof(char *));
                        out[n++] = xstrdup(w);
                        out[n] = NULL;
                }
        }
        strv_free(argv);
        return out;
}

/* Does the unit file say Type=notify (a line of its own, as gitcd writes it)? */
static bool notify_type(const char *text)
{
        return strneq(text, "Type=notify\n", 12) || strstr(text, "\nType=notify\n");
}

/*
 * A datagram socket in the abstract namespace for one start of u; its name
 * (with systemd's leading '@') in ret_name. -1 when none could be made:
 * then the process starts without NOTIFY_SOCKET and is never ready.
 */
static int notify_socket(char **ret_name)
{
        static unsigned serial;
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        _cleanup_free_ char *name = xasprintf("gitcd-hostagent-%ld-%u", (long)getpid(), serial++);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t len = strlen(name);
        assert(len + 1 < sizeof(sa.sun_path));
        memcpy(sa.sun_path + 1, name, len); /* sun_path[0] 0: abstract */
        if (bind(fd, (struct sockaddr *)&sa,
                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) < 0) {
                close(fd);
                return -1;
        }
        *ret_name = xasprintf("@%s", name);
        return fd;
}

/* Read what u's process sent to its notify socket; true once READY=1 came. */
static bool read_notify(unit *u)
{
        char buf[4096];
        ssize_t n;
        while (u->notify_fd >= 0 && (n = recv(u->notify_fd, buf, sizeof(buf) - 1, 0)) >= 0) {
                buf[n] = 0;
                for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
                        if (streq(l, "READY=1"))
                                u->ready = true;
        }
        return u->ready;
}

static pid_t start(unit *u, const char *etcd_bin, const char *log_dir)
{
        bool service = strstr(u->path, ".service") != NULL;
        char **argv = service ? parse_exec(u->content) : parse_pod(u->content, etcd_bin);
        size_t n_env = 0;
        char **env = service ? unit_env(u->content, &n_env) : NULL;
        if (argv && service)
                argv = expand_argv(argv, env, n_env);
        if (!argv || !argv[0]) {
                strv_free(argv);
                strv_free(env);
                return 0;
        }
        /* one log per file, so the machines' members (same file name) do not interleave */
        _cleanup_free_ char *flat = xstrdup(u->path[0] == '/' ? u->path + 1 : u->path);
        for (char *c = flat; *c; c++)
                if (*c == '/')
                        *c = '_';
        _cleanup_free_ char *log = xasprintf("%s/%s.log", log_dir, flat);
        _cleanup_free_ char *notify = NULL;
        if (u->notify_fd >= 0) /* the socket of a process that exited */
                close(u->notify_fd);
        u->notify_fd = -1;
        u->ready = false;
        if (service && notify_type(u->content))
                u->notify_fd = notify_socket(&notify);
        pid_t pid = fork();
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                for (size_t i = 0; i < n_env; i++)
                        putenv(env[i]);
                if (notify)
                        setenv("NOTIFY_SOCKET", notify, 1);
                else
                        unsetenv("NOTIFY_SOCKET");
                execv(argv[0], argv);
                _exit(127);
        }
        strv_free(argv);
        strv_free(env);
        return pid > 0 ? pid : 0;
}

static void publish_mark(const char *path, const char *what, bool on);

static void stop(unit *u)
{
        if (u->notify_fd >= 0)
                close(u->notify_fd);
        u->notify_fd = -1;
        u->ready = false;
        if (!is_manifest(u->path))
                publish_mark(u->path, "ready", false);
        if (u->pid <= 0)
                return;
        kill(u->pid, SIGTERM);
        for (int i = 0; i < 100; i++) {
                if (waitpid(u->pid, NULL, WNOHANG) == u->pid) {
                        u->pid = 0;
                        return;
                }
                msleep(50);
        }
        kill(u->pid, SIGKILL);
        waitpid(u->pid, NULL, 0);
        u->pid = 0;
}

/* <dir>/.<name>.<what> beside the unit file <dir>/<name> (hostagent_write_systemctl). */
static char *beside(const char *path, const char *what)
{
        const char *slash = strrchr(path, '/');
        assert(slash);
        return xasprintf("%.*s/.%s.%s", (int)(slash - path), path, slash + 1, what);
}

/* The mark the simulated systemctl leaves for a unit it stopped. */
static bool held(const char *path)
{
        _cleanup_free_ char *mark = beside(path, "inactive");
        return path_exists(mark);
}

static void publish_mark(const char *path, const char *what, bool on)
{
        _cleanup_free_ char *mark = beside(path, what);
        if (on && !path_exists(mark))
                (void)write_file_atomic(mark, "", 0, 0644);
        else if (!on)
                (void)unlink(mark);
}

/*
 * The unit's <dir>/.<name>.running exists exactly while the agent runs its
 * process, so the simulated systemctl's stop returns once it stopped, as
 * systemd's does; <dir>/.<name>.ready while that process said READY=1, so
 * its start and restart return then.
 */
static void publish_running(unit *u)
{
        if (is_manifest(u->path))
                return;
        publish_mark(u->path, "running", u->pid > 0);
        publish_mark(u->path, "ready", u->pid > 0 && read_notify(u));
}

/*
 * The request the simulated systemctl's restart leaves for u
 * (<dir>/.<name>.restart). It is removed once acted on, after the old
 * process stopped and its .ready went, so a restart that sees it gone
 * waits for the new process's readiness only.
 */
static bool restart_requested(const unit *u)
{
        if (is_manifest(u->path))
                return false;
        _cleanup_free_ char *mark = beside(u->path, "restart");
        return path_exists(mark);
}

static void restart_done(const unit *u)
{
        _cleanup_free_ char *mark = beside(u->path, "restart");
        (void)unlink(mark);
}

static bool watched(const char *name)
{
        size_t n = strlen(name);
        return (streq(name, "etcd.yaml") || streq(name, "etcd.service") ||
                strneq(name, "etcd-", 5)) &&
               ((n > 8 && streq(name + n - 8, ".service")) ||
                (n > 5 && streq(name + n - 5, ".yaml")));
}

static void agent_loop(char **dirs, const char *etcd_bin, const char *log_dir)
{
        unit *units = NULL;
        size_t n = 0, alloc = 0;
        while (!stopping) {
                for (size_t i = 0; i < n; i++)
                        units[i].seen = false;
                for (size_t d = 0; dirs[d]; d++) {
                        DIR *dir = opendir(dirs[d]);
                        struct dirent *e;
                        while (dir && (e = readdir(dir))) {
                                if (!watched(e->d_name))
                                        continue;
                                _cleanup_free_ char *path = xasprintf("%s/%s", dirs[d], e->d_name);
                                _cleanup_free_ char *text = NULL;
                                size_t len;
                                if (read_file(path, 1 << 20, &text, &len) < 0)
                                        continue;
                                unit *u = NULL;
                                for (size_t i = 0; i < n && !u; i++)
                                        if (streq(units[i].path, path))
                                                u = &units[i];
                                if (!u) {
                                        units = xgrow(units, &alloc, n + 1, sizeof(*units));
                                        u = &units[n++];
                                        memset(u, 0, sizeof(*u));
                                        u->notify_fd = -1;
                                        u->path = xstrdup(path);
                                }
                                u->seen = true;
                                u->gone_since = 0;
                                bool changed = !streq_ptr(u->content, text);
                                if (!changed)
                                        u->changed_since = 0;
                                if (changed && is_manifest(path) && u->pid > 0) {
                                        if (!u->changed_since)
                                                u->changed_since = now_mono_ms();
                                        changed =
                                            now_mono_ms() - u->changed_since >= MANIFEST_LAG_MS;
                                }
                                bool hold = !is_manifest(path) && held(path);
                                /* systemctl restart: a new process, once not held */
                                bool again = !hold && restart_requested(u);
                                if (changed || again) {
                                        u->changed_since = 0;
                                        stop(u);
                                        free(u->content);
                                        u->content = TAKE_PTR(text);
                                        u->restart_at = 0;
                                        u->held = hold;
                                        if (!hold)
                                                u->pid = start(u, etcd_bin, log_dir);
                                } else if (hold && !u->held) {
                                        u->held = true; /* systemctl stop / disable --now */
                                        u->restart_at = 0;
                                        stop(u);
                                } else if (!hold && u->held) {
                                        u->held = false; /* systemctl start / restart */
                                        u->pid = start(u, etcd_bin, log_dir);
                                }
                                if (again)
                                        restart_done(u);
                        }
                        if (dir)
                                closedir(dir);
                }
                for (size_t i = 0; i < n; i++) {
                        unit *u = &units[i];
                        if (!u->seen) {
                                /* a kubelet stops a removed static Pod when it next looks */
                                if (!u->gone_since)
                                        u->gone_since = now_mono_ms();
                                if (is_manifest(u->path) && u->pid > 0 &&
                                    now_mono_ms() - u->gone_since < MANIFEST_LAG_MS)
                                        continue;
                                stop(u);
                                publish_running(u);
                                free(u->content);
                                u->content = NULL;
                                continue;
                        }
                        if (u->pid > 0 && waitpid(u->pid, NULL, WNOHANG) == u->pid) {
                                u->pid = 0;
                                u->restart_at = now_mono_ms() + 1000;
                        }
                        if (u->pid == 0 && u->restart_at && now_mono_ms() >= u->restart_at) {
                                u->restart_at = 0;
                                u->pid = start(u, etcd_bin, log_dir);
                        }
                        publish_running(u);
                }
                msleep(100);
        }
        for (size_t i = 0; i < n; i++)
                stop(&units[i]);
        _exit(0);
}

int hostagent_start(const char *const *dirs, const char *etcd_bin, const char *log_dir,
                    hostagent **ret)
{
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                size_t n = 0;
                while (dirs[n])
                        n++;
                char **copy = xcalloc(n + 1, sizeof(char *));
                for (size_t i = 0; i < n; i++)
                        copy[i] = xstrdup(dirs[i]);
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                signal(SIGTERM, on_term);
                signal(SIGINT, on_term);
                agent_loop(copy, etcd_bin, log_dir);
        }
        harness_track_pid(pid);
        hostagent *a = XNEW(hostagent);
        a->pid = pid;
        *ret = a;
        return 0;
}

void hostagent_hold(hostagent *a, bool hold)
{
        if (a && a->pid > 0)
                kill(a->pid, hold ? SIGSTOP : SIGCONT);
}

void hostagent_free(hostagent *a)
{
        if (!a)
                return;
        kill(a->pid, SIGTERM);
        while (waitpid(a->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(a->pid);
        free(a);
}

int hostagent_write_systemctl(const char *path, const char *unit_dir, const char *log)
{
        _cleanup_free_ char *text = xasprintf(
            "#!/bin/sh\n"
            "# systemctl of a lab machine (tests/harness/hostagent.h): no systemd runs here\n"
            "echo \"$*\" >> '%s'\n"
            "dir='%s'\n"
            "# no folder given: the machine's, found from the sshd listener this command\n"
            "# descends from (sshd -f <machine dir>/sshd_config; also through sudo)\n"
            "p=$$\n"
            "while [ -z \"$dir\" ] && [ \"${p:-0}\" -gt 1 ]; do\n"
            "  args=$(tr '\\0' ' ' < \"/proc/$p/cmdline\" 2>/dev/null)\n"
            "  case $args in *' -f '*/sshd_config*) m=${args#* -f }; "
            "dir=${m%%%%/sshd_config*}/root/etc/systemd/system ;; esac\n"
            "  p=$(sed 's/.*) //' \"/proc/$p/stat\" 2>/dev/null | cut -d' ' -f2)\n"
            "done\n"
            "[ -n \"$dir\" ] || { echo 'systemctl (lab): on no lab machine' >&2; exit 1; }\n"
            "# options anywhere, as systemctl takes them; unit names have no spaces\n"
            "cmd= flags=' ' units=\n"
            "for a; do case $a in --*) flags=\"$flags$a \" ;; *) if [ -z \"$cmd\" ]; then "
            "cmd=$a; else units=\"$units $a\"; fi ;; esac; done\n"
            "set -- $units\n"
            "has() { case $flags in *\" $1 \"*) return 0 ;; esac; return 1; }\n"
            "# stop returns once the agent stopped the unit (its .U.running gone), as\n"
            "# systemd's does; two minutes at most\n"
            "stop_units() {\n"
            "  for u; do\n"
            "    touch \"$dir/.$u.inactive\"; i=0\n"
            "    while [ -e \"$dir/.$u.running\" ]; do\n"
            "      i=$((i + 1)); [ $i -le 1200 ] || { echo \"systemctl (lab): $u still runs "
            "two minutes after stop\" >&2; exit 1; }\n"
            "      sleep 0.1\n"
            "    done\n"
            "  done\n"
            "}\n"
            "# start and restart of a Type=notify unit return once its process said\n"
            "# READY=1 (the agent's .U.ready), unless --no-block; a restart first waits\n"
            "# for the agent to take its request (.U.restart gone: the old process\n"
            "# stopped); systemd's TimeoutStartSec= default, 90 s, at most\n"
            "wait_ready() {\n"
            "  for u; do\n"
            "    grep -qx 'Type=notify' \"$dir/$u\" 2>/dev/null || continue; i=0\n"
            "    while [ -e \"$dir/.$u.restart\" ] || [ ! -e \"$dir/.$u.ready\" ]; do\n"
            "      i=$((i + 1)); [ $i -le 900 ] || { echo \"Job for $u failed because a "
            "timeout was exceeded.\" >&2; exit 1; }\n"
            "      sleep 0.1\n"
            "    done\n"
            "  done\n"
            "}\n"
            "case $cmd in\n"
            "stop) stop_units \"$@\" ;;\n"
            "disable) has --now && stop_units \"$@\" ;;\n"
            "start) for u; do rm -f \"$dir/.$u.inactive\"; done; has --no-block || wait_ready "
            "\"$@\" ;;\n"
            "restart) for u; do touch \"$dir/.$u.restart\"; rm -f \"$dir/.$u.inactive\"; done\n"
            "  has --no-block || wait_ready \"$@\" ;;\n"
            "is-active) [ -f \"$dir/$1\" ] && [ ! -e \"$dir/.$1.inactive\" ] ;;\n"
            "cat) for u; do [ -f \"$dir/$u\" ] || { echo \"No files found for $u.\" >&2; "
            "exit 1; }; echo \"# $dir/$u\"; cat \"$dir/$u\"; for f in \"$dir/$u.d\"/*.conf; do "
            "[ -f \"$f\" ] && { echo; echo \"# $f\"; cat \"$f\"; }; done; done ;;\n"
            "*) ;;\n"
            "esac\n",
            log, unit_dir ? unit_dir : "");
        return write_file_atomic(path, text, strlen(text), 0755);
}
