/*
 * The local target: etcd members as supervised processes on this host
 * (layout on disk and restart policy: targets/local.h).
 *
 * The command line comes only from render_member_command(), the same
 * flags the Kubernetes Pod gets; argv[0] "etcd" becomes the binary for
 * the cluster's version. A member is started detached (util/process.h:
 * its own session and process group, stdin /dev/null, output appended to
 * etcd.log, every other descriptor closed), so it is our child while we
 * run and survives us when we exit. member.json records the command last
 * started; a process is "ours" only when /proc/<pid>/cmdline equals a
 * recorded or desired command, it runs as gitcd's user and its executable
 * is that command's binary (process_runs), so a recycled pid is never
 * signalled and another user's etcd with a member's flags is never taken
 * over.
 *
 * Exit notification uses pidfds for every member, children and adopted
 * processes alike: wait_event() polls them, so a death is seen at once,
 * not at the next reconciler pass. waitid(P_PIDFD) reaps our children and
 * gives their exit status; for an adopted process that is not our child
 * the status is unknown.
 *
 * Threads (targets/locked.h): the member table, the event list and every
 * record are the target's shared state. These waits let go of the shared
 * lock: a stop waiting for its process to exit (the member is marked
 * `stopping`, so that no other thread reaps or restarts it meanwhile), a
 * health probe (on copies of the URL and paths), and wait_event's poll,
 * after which every member is looked at again under the lock rather than
 * trusting what the poll saw (the table may have changed, several threads
 * may wait at once). A snapshot restore (etcd's tool, into this member's
 * folder) runs outside it too. A member started meanwhile wakes the waiters through
 * an eventfd, so that its exit is seen too.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "render/render.h"
#include "targets/health.h"
#include "targets/local-tls.h"
#include "targets/local.h"
#include "targets/locked.h"
#include "util/process.h"
#include "util/fs.h"
#include "util/http.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define CRASH_LOOP_EXITS     5
#define CRASH_LOOP_WINDOW_MS (5 * 60 * 1000)
#define BACKOFF_RESET_MS     (60 * 1000)
#define MAX_EXITS_KEPT       8
#define MEMBER_JSON_MAX      (1024 * 1024)
#define PORT_RANGE_LOW       20000
#define PORT_RANGE_HIGH      32000 /* below Linux's default ephemeral range */

typedef struct local_member {
        char *ns;
        char *cluster;
        char *name;
        char *dir; /* <state>/clusters/<ns>/<cluster>/<name> */

        /* Persisted in member.json. */
        int client_port;
        int peer_port;
        int metrics_port;
        char *client_url; /* advertised, for health checks */
        char *tls_dir;
        char **command;    /* last started; argv[0] is the binary */
        char *config_hash; /* the plan's config hash it was last started with, or NULL */
        char *version;
        int64_t created_ms;
        int restarts;
        int64_t exits[MAX_EXITS_KEPT]; /* wall ms of recent unexpected exits, oldest first */
        size_t n_exits;
        char *last_exit;

        /* Runtime. */
        /* Stopped by stop_member, or found without a process after a gitcd restart: tick()
         * restarts only what ensure_member started. Whether it should run is state/'s. */
        bool stopped;
        pid_t pid;
        int pidfd;
        int64_t started_mono;
        int64_t ready_mono; /* first seen ready in this run; 0 unknown */
        bool crashed;       /* exited on its own; a restart is pending */
        bool stopping;      /* stop_process waits for its exit outside the shared lock */
        int64_t restart_at_mono;
        int backoff_ms; /* next delay; 0: the base */
        bool have_state;
        member_runtime_state last_state;
        int64_t state_since_mono;
} local_member;

typedef struct etcd_binary {
        char *version;
        char *path;
} etcd_binary;

typedef struct local_target {
        target base;
        char *state_dir;
        char *etcd_dir;
        int health_timeout_ms;
        int backoff_base_ms;
        int backoff_max_ms;
        int stop_timeout_ms;
        local_member **members;
        size_t n_members;
        size_t alloc_members;
        etcd_binary *binaries;
        size_t n_binaries;
        size_t alloc_binaries;
        char **events; /* "ns/cluster" with a member event not taken yet (take_events) */
        size_t n_events;
        int wake_fd; /* eventfd: a member started, wait_event looks again; -1 without */
} local_target;

static local_target *LT(target *t)
{
        return (local_target *)t;
}

/* --- string vectors ---------------------------------------------------- */

static size_t strv_len(char *const *v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static char **strv_copy(char *const *v)
{
        size_t n = strv_len(v);
        char **r = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                r[i] = xstrdup(v[i]);
        return r;
}

static bool strv_equal(char *const *a, char *const *b)
{
        if (!a || !b)
                return a == b;
        size_t i = 0;
        for (; a[i] && b[i]; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return !a[i] && !b[i];
}

/* --- member records ---------------------------------------------------- */

static void local_member_free(local_member *m)
{
        if (!m)
                return;
        if (m->pidfd >= 0)
                close(m->pidfd);
        free(m->ns);
        free(m->cluster);
        free(m->name);
        free(m->dir);
        free(m->client_url);
        free(m->tls_dir);
        strv_free(m->command);
        free(m->config_hash);
        free(m->version);
        free(m->last_exit);
        free(m);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(local_member *, local_member_free);

static char *cluster_dir(local_target *lt, const char *ns, const char *cluster)
{
        return xasprintf("%s/clusters/%s/%s", lt->state_dir, ns, cluster);
}

static char *member_file(const local_member *m, const char *file)
{
        return xasprintf("%s/%s", m->dir, file);
}

static local_member *local_member_new(local_target *lt, const char *ns, const char *cluster,
                                      const char *name)
{
        local_member *m = XNEW(local_member);
        m->ns = xstrdup(ns);
        m->cluster = xstrdup(cluster);
        m->name = xstrdup(name);
        m->dir = xasprintf("%s/clusters/%s/%s/%s", lt->state_dir, ns, cluster, name);
        m->pidfd = -1;
        return m;
}

static int member_save(local_member *m)
{
        json_t *o = json_object();
        json_object_set_new(o, "namespace", json_string(m->ns));
        json_object_set_new(o, "cluster", json_string(m->cluster));
        json_object_set_new(o, "name", json_string(m->name));
        json_t *ports = json_object();
        json_object_set_new(ports, "client", json_integer(m->client_port));
        json_object_set_new(ports, "peer", json_integer(m->peer_port));
        json_object_set_new(ports, "metrics", json_integer(m->metrics_port));
        json_object_set_new(o, "ports", ports);
        if (m->client_url)
                json_object_set_new(o, "clientURL", json_string(m->client_url));
        if (m->tls_dir)
                json_object_set_new(o, "tlsDir", json_string(m->tls_dir));
        if (m->command) {
                json_t *cmd = json_array();
                for (size_t i = 0; m->command[i]; i++)
                        json_array_append_new(cmd, json_string(m->command[i]));
                json_object_set_new(o, "command", cmd);
        }
        if (m->config_hash)
                json_object_set_new(o, "configHash", json_string(m->config_hash));
        if (m->version)
                json_object_set_new(o, "version", json_string(m->version));
        char buf[64];
        format_rfc3339(m->created_ms, buf, sizeof(buf));
        json_object_set_new(o, "created", json_string(buf));
        json_object_set_new(o, "createdMs", json_integer(m->created_ms));
        json_object_set_new(o, "restarts", json_integer(m->restarts));
        json_t *exits = json_array();
        for (size_t i = 0; i < m->n_exits; i++)
                json_array_append_new(exits, json_integer(m->exits[i]));
        json_object_set_new(o, "exits", exits);
        if (m->last_exit)
                json_object_set_new(o, "lastExit", json_string(m->last_exit));

        char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!text)
                return -ENOMEM;
        _cleanup_free_ char *path = member_file(m, "member.json");
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, text);
        sb_appendc(&sb, '\n');
        free(text);
        int r = write_file_atomic(path, sb.buf, sb.len, 0644);
        sb_release(&sb);
        return r;
}

static const char *json_str(json_t *o, const char *key)
{
        return json_string_value(json_object_get(o, key));
}

/* Read member.json into a new record. -ENOENT when there is none, -EBADMSG when unreadable. */
static int member_load(local_target *lt, const char *ns, const char *cluster, const char *name,
                       local_member **ret)
{
        _cleanup_(local_member_freep) local_member *m = local_member_new(lt, ns, cluster, name);
        _cleanup_free_ char *path = member_file(m, "member.json");
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(path, MEMBER_JSON_MAX, &data, &len);
        if (r < 0)
                return r;
        json_t *o = json_loadb(data, len, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return -EBADMSG;
        }
        json_t *ports = json_object_get(o, "ports");
        m->client_port = (int)json_integer_value(json_object_get(ports, "client"));
        m->peer_port = (int)json_integer_value(json_object_get(ports, "peer"));
        m->metrics_port = (int)json_integer_value(json_object_get(ports, "metrics"));
        m->client_url = xstrdup_null(json_str(o, "clientURL"));
        m->tls_dir = xstrdup_null(json_str(o, "tlsDir"));
        json_t *cmd = json_object_get(o, "command");
        if (json_is_array(cmd) && json_array_size(cmd) > 0) {
                size_t n = json_array_size(cmd);
                m->command = xcalloc(n + 1, sizeof(char *));
                for (size_t i = 0; i < n; i++) {
                        const char *s = json_string_value(json_array_get(cmd, i));
                        m->command[i] = xstrdup(s ? s : "");
                }
        }
        m->config_hash = xstrdup_null(json_str(o, "configHash"));
        m->version = xstrdup_null(json_str(o, "version"));
        m->created_ms = json_integer_value(json_object_get(o, "createdMs"));
        m->restarts = (int)json_integer_value(json_object_get(o, "restarts"));
        json_t *exits = json_object_get(o, "exits");
        for (size_t i = 0; i < json_array_size(exits) && m->n_exits < MAX_EXITS_KEPT; i++)
                m->exits[m->n_exits++] = json_integer_value(json_array_get(exits, i));
        m->last_exit = xstrdup_null(json_str(o, "lastExit"));
        json_decref(o);
        *ret = TAKE_PTR(m);
        return 0;
}

/* --- processes --------------------------------------------------------- */

/* The pid in the member's pid file; 0 when there is none. */
static pid_t read_pid_file(local_member *m)
{
        _cleanup_free_ char *path = member_file(m, "pid");
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, 64, &data, &len) < 0)
                return 0;
        char *end = NULL;
        long v = strtol(data, &end, 10);
        if (end == data || v <= 0 || v >= INT32_MAX)
                return 0;
        return (pid_t)v;
}

static void remove_pid_file(local_member *m)
{
        _cleanup_free_ char *path = member_file(m, "pid");
        (void)unlink(path);
}

static int count_recent_exits(const local_member *m)
{
        int64_t now = now_wall_ms();
        int n = 0;
        for (size_t i = 0; i < m->n_exits; i++)
                if (now - m->exits[i] <= CRASH_LOOP_WINDOW_MS)
                        n++;
        return n;
}

static void record_exit(local_member *m, int64_t wall)
{
        if (m->n_exits == MAX_EXITS_KEPT) {
                memmove(m->exits, m->exits + 1, (MAX_EXITS_KEPT - 1) * sizeof(int64_t));
                m->n_exits--;
        }
        m->exits[m->n_exits++] = wall;
}

/* Remember that a member of m's cluster had an event, once per cluster until taken. */
static void note_event(local_target *lt, const local_member *m)
{
        _cleanup_free_ char *id = xasprintf("%s/%s", m->ns, m->cluster);
        for (size_t i = 0; i < lt->n_events; i++)
                if (streq(lt->events[i], id))
                        return;
        lt->events = xrealloc(lt->events, (lt->n_events + 1) * sizeof(char *));
        lt->events[lt->n_events++] = TAKE_PTR(id);
}

/*
 * The process behind m->pidfd has exited (or is exiting): reap it when it
 * is our child, forget it, and, unless the exit was asked for, schedule a
 * restart with backoff.
 */
static void handle_exit(local_target *lt, local_member *m, bool expected)
{
        char detail[128];
        siginfo_t si = {0};
        if (m->pidfd >= 0 && waitid(P_PIDFD, (id_t)m->pidfd, &si, WEXITED | WNOHANG) == 0 &&
            si.si_pid != 0) {
                if (si.si_code == CLD_EXITED)
                        snprintf(detail, sizeof(detail), "exit status %d", si.si_status);
                else
                        snprintf(detail, sizeof(detail), "killed by signal %d (%s)", si.si_status,
                                 strsignal(si.si_status));
        } else {
                snprintf(detail, sizeof(detail), "exited (status unknown: not our child)");
        }
        log_debug("local target: member %s/%s/%s (pid %ld) %s", m->ns, m->cluster, m->name,
                  (long)m->pid, detail);
        if (m->pidfd >= 0)
                close(m->pidfd);
        m->pidfd = -1;
        m->pid = 0;
        remove_pid_file(m);
        free(m->last_exit);
        m->last_exit = xstrdup(detail);
        if (!expected && !m->stopped) {
                int64_t now = now_mono_ms();
                int64_t since = m->ready_mono ? m->ready_mono : m->started_mono;
                if (since && now - since >= BACKOFF_RESET_MS)
                        m->backoff_ms = 0;
                int delay = m->backoff_ms ? m->backoff_ms : lt->backoff_base_ms;
                m->restart_at_mono = now + delay;
                m->backoff_ms = MIN(delay * 2, lt->backoff_max_ms);
                m->crashed = true;
                record_exit(m, now_wall_ms());
        }
        m->ready_mono = 0;
        m->started_mono = 0;
        (void)member_save(m);
        note_event(lt, m);
}

/* Non-blocking: has the member's process exited? Handles the exit when it has. */
static void poll_exit(local_target *lt, local_member *m)
{
        if (m->stopping)
                return; /* its stop reaps it */
        if (m->pidfd < 0) {
                /* No pidfd (it could not be opened): fall back to /proc. */
                if (m->pid > 0 && !process_runs(m->pid, m->command))
                        handle_exit(lt, m, false);
                return;
        }
        struct pollfd pfd = {.fd = m->pidfd, .events = POLLIN};
        if (poll(&pfd, 1, 0) > 0)
                handle_exit(lt, m, false);
}

/*
 * A record just loaded from disk: take over the process its pid file
 * names (or, without one, a process running the recorded command) when
 * it still runs. A pid file whose process is gone means the member died
 * while no gitcd ran: it is treated as crashed, so tick() restarts it.
 * Without a pid file it was stopped (on purpose, or before gitcd last
 * exited): it stays stopped until ensure_member; whether it should run is
 * the member record's (state/: dormant), which the reconciler acts on.
 */
static void adopt(local_target *lt, local_member *m)
{
        pid_t pid = read_pid_file(m);
        bool was_running = pid > 0;
        if (m->command && (pid <= 0 || !process_runs(pid, m->command))) {
                pid_t other = process_find(m->command);
                if (other > 0) {
                        char buf[32];
                        int len = snprintf(buf, sizeof(buf), "%ld\n", (long)other);
                        _cleanup_free_ char *pid_path = member_file(m, "pid");
                        (void)write_file_atomic(pid_path, buf, (size_t)len, 0644);
                        pid = other;
                }
        }
        if (pid > 0 && process_runs(pid, m->command)) {
                int fd = pidfd_open(pid, 0);
                /* Check again through the pidfd's lifetime: the pid cannot be recycled now. */
                if (fd >= 0 && process_runs(pid, m->command)) {
                        m->pid = pid;
                        m->pidfd = fd;
                        m->started_mono = now_mono_ms();
                        log_debug("local target: adopted member %s/%s/%s (pid %ld)", m->ns,
                                  m->cluster, m->name, (long)pid);
                        return;
                }
                if (fd >= 0)
                        close(fd);
        }
        if (pid > 0)
                remove_pid_file(m);
        m->stopped = !was_running;
        if (m->command && was_running) {
                m->crashed = true;
                m->restart_at_mono = now_mono_ms();
                if (!m->last_exit)
                        m->last_exit = xstrdup("not running");
        }
}

/* Does <dir>/data/member exist with something in it? */
static bool member_has_data(const local_member *m)
{
        _cleanup_free_ char *path = xasprintf("%s/data/member", m->dir);
        DIR *d = opendir(path);
        if (!d)
                return false;
        bool any = false;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (!streq(e->d_name, ".") && !streq(e->d_name, "..")) {
                        any = true;
                        break;
                }
        }
        closedir(d);
        return any;
}

/*
 * The data identity marker (TARGET_DATA_MARKER) in the member's data
 * directory: written before the member first starts, gone with a wiped
 * directory. Its id is the data identity member_status reports.
 */
static char *marker_path(const local_member *m)
{
        return xasprintf("%s/data/" TARGET_DATA_MARKER, m->dir);
}

/* The id in the member's marker; NULL without one (or one naming another member). */
static char *data_identity(const local_member *m)
{
        _cleanup_free_ char *path = marker_path(m), *text = NULL;
        size_t len = 0;
        if (read_file(path, 4096, &text, &len) < 0)
                return NULL;
        return target_data_marker_id(text, m->name);
}

static int write_marker(local_target *lt, const local_member *m)
{
        _cleanup_free_ char *data_dir = xasprintf("%s/data", m->dir);
        int r = mkdir_p(data_dir, 0700);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot create %s: %s", m->name,
                                   data_dir, strerror(-r));
        _cleanup_free_ char *text = target_data_marker_new(m->name);
        if (!text)
                return target_fail(&lt->base, -EIO,
                                   "member %s: no random bytes for a data identity", m->name);
        _cleanup_free_ char *path = marker_path(m);
        r = write_file_atomic(path, text, strlen(text), 0600);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot write %s: %s", m->name, path,
                                   strerror(-r));
        return 0;
}

static local_member *find_loaded(local_target *lt, const char *ns, const char *cluster,
                                 const char *name)
{
        for (size_t i = 0; i < lt->n_members; i++) {
                local_member *m = lt->members[i];
                if (streq(m->ns, ns) && streq(m->cluster, cluster) && streq(m->name, name))
                        return m;
        }
        return NULL;
}

static void add_loaded(local_target *lt, local_member *m)
{
        lt->members =
            xgrow(lt->members, &lt->alloc_members, lt->n_members + 1, sizeof(local_member *));
        lt->members[lt->n_members++] = m;
}

static void drop_loaded(local_target *lt, local_member *m)
{
        for (size_t i = 0; i < lt->n_members; i++) {
                if (lt->members[i] != m)
                        continue;
                memmove(lt->members + i, lt->members + i + 1,
                        (lt->n_members - i - 1) * sizeof(local_member *));
                lt->n_members--;
                break;
        }
        local_member_free(m);
}

/*
 * The member's record: from memory, or loaded from disk (and adopted).
 * -ENOENT when the member has no member.json.
 */
static int get_member(local_target *lt, const char *ns, const char *cluster, const char *name,
                      local_member **ret)
{
        if (!target_name_is_component(ns) || !target_name_is_component(cluster) ||
            !target_name_is_component(name))
                return target_fail(&lt->base, -EINVAL, "invalid member name \"%s/%s/%s\"", ns,
                                   cluster, name);
        local_member *m = find_loaded(lt, ns, cluster, name);
        if (!m) {
                int r = member_load(lt, ns, cluster, name, &m);
                if (r == -ENOENT)
                        return r;
                if (r < 0)
                        return target_fail(&lt->base, r,
                                           "cannot read %s/clusters/%s/%s/%s/member.json: %s",
                                           lt->state_dir, ns, cluster, name, strerror(-r));
                adopt(lt, m);
                add_loaded(lt, m);
                /* Data of an older gitcd, which wrote no marker: it is this member's. */
                _cleanup_free_ char *identity = data_identity(m);
                if (!identity && member_has_data(m) && write_marker(lt, m) >= 0)
                        log_debug("local target: member %s/%s/%s: data identity marker written", ns,
                                  cluster, name);
        }
        *ret = m;
        return 0;
}

/* The etcd binary for a version: <etcd_dir>/<version>/etcd, else a matching `etcd` on PATH. */
static int resolve_etcd(local_target *lt, const char *version, const char **ret_path)
{
        for (size_t i = 0; i < lt->n_binaries; i++)
                if (streq(lt->binaries[i].version, version)) {
                        *ret_path = lt->binaries[i].path;
                        return 0;
                }
        if (!target_name_is_component(version))
                return target_fail(&lt->base, -EINVAL, "invalid etcd version \"%s\"", version);
        _cleanup_free_ char *path = xasprintf("%s/%s/etcd", lt->etcd_dir, version);
        if (access(path, X_OK) != 0) {
                free(path);
                path = NULL;
                const char *env_path = getenv("PATH");
                _cleanup_free_ char *dirs = xstrdup(env_path ? env_path : "/usr/bin:/bin");
                char *save = NULL;
                for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                        _cleanup_free_ char *cand = xasprintf("%s/etcd", *d ? d : ".");
                        if (access(cand, X_OK) != 0)
                                continue;
                        char *argv[] = {cand, "--version", NULL};
                        _cleanup_free_ char *out = NULL;
                        if (process_run_capture(argv, &out) < 0)
                                continue;
                        _cleanup_free_ char *want = xasprintf("etcd Version: %s\n", version);
                        if (strstr(out, want)) {
                                path = TAKE_PTR(cand);
                                break;
                        }
                }
        }
        if (!path)
                return target_fail(&lt->base, -ENOENT,
                                   "etcd %s not found: no %s/%s/etcd and no etcd %s on PATH",
                                   version, lt->etcd_dir, version, version);
        /* Absolute (symlinks kept: the name says the version): members exec it from their dir. */
        if (path[0] != '/') {
                char cwd[4096];
                if (getcwd(cwd, sizeof(cwd))) {
                        char *abs_path = xasprintf("%s/%s", cwd, path);
                        free(path);
                        path = abs_path;
                }
        }
        lt->binaries =
            xgrow(lt->binaries, &lt->alloc_binaries, lt->n_binaries + 1, sizeof(etcd_binary));
        lt->binaries[lt->n_binaries].version = xstrdup(version);
        lt->binaries[lt->n_binaries].path = TAKE_PTR(path);
        *ret_path = lt->binaries[lt->n_binaries++].path;
        return 0;
}

/* Start m->command; record pid file and bookkeeping. */
static int start_member(local_target *lt, local_member *m)
{
        _cleanup_free_ char *data_dir = xasprintf("%s/data", m->dir);
        int r = mkdir_p(data_dir, 0700);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot create %s: %s", m->name,
                                   data_dir, strerror(-r));
        _cleanup_free_ char *log_path = member_file(m, "etcd.log");
        {
                _cleanup_close_ int fd =
                    open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
                if (fd >= 0) {
                        char when[64];
                        format_rfc3339(now_wall_ms(), when, sizeof(when));
                        _cleanup_free_ char *line =
                            xasprintf("---- %s gitcd: starting %s ----\n", when, m->command[0]);
                        (void)!write(fd, line, strlen(line));
                }
        }
        pid_t pid = 0;
        r = process_spawn_detached(m->dir, log_path, m->command, &pid);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot start %s: %s", m->name,
                                   m->command[0], strerror(-r));
        m->pid = pid;
        m->pidfd = pidfd_open(pid, 0);
        if (lt->wake_fd >= 0) {
                uint64_t one = 1; /* a thread in wait_event adds the new pidfd */
                (void)!write(lt->wake_fd, &one, sizeof(one));
        }
        m->started_mono = now_mono_ms();
        m->ready_mono = 0;
        m->crashed = false;
        m->stopped = false;
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "%ld\n", (long)pid);
        _cleanup_free_ char *pid_path = member_file(m, "pid");
        r = write_file_atomic(pid_path, buf, (size_t)len, 0644);
        if (r >= 0)
                r = member_save(m);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot record pid: %s", m->name,
                                   strerror(-r));
        log_debug("local target: started member %s/%s/%s (pid %ld)", m->ns, m->cluster, m->name,
                  (long)pid);
        return 0;
}

/* Wait until the pidfd is readable or timeout_ms passes; true when the process exited. */
static bool wait_pidfd(int pidfd, int timeout_ms)
{
        int64_t deadline = now_mono_ms() + timeout_ms;
        for (;;) {
                int64_t left = deadline - now_mono_ms();
                if (left < 0)
                        left = 0;
                struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
                target_blocking_begin();
                int r = poll(&pfd, 1, (int)left);
                target_blocking_end();
                if (r > 0)
                        return true;
                if (r == 0)
                        return false;
                if (errno != EINTR)
                        return false;
        }
}

/* SIGTERM, up to stop_timeout_ms, then SIGKILL. The exit is expected: no restart. */
static int stop_process(local_target *lt, local_member *m)
{
        if (!m->pid)
                return 0;
        if (m->pidfd < 0) {
                /* No pidfd (the process was gone when we tried): nothing to signal safely. */
                m->pid = 0;
                remove_pid_file(m);
                return 0;
        }
        (void)pidfd_send_signal(m->pidfd, SIGTERM, NULL, 0);
        /* Other threads leave the member alone while the shared lock is let go (poll_exit). */
        m->stopping = true;
        if (!wait_pidfd(m->pidfd, lt->stop_timeout_ms)) {
                log_debug("local target: member %s did not stop within %d ms; killing", m->name,
                          lt->stop_timeout_ms);
                (void)pidfd_send_signal(m->pidfd, SIGKILL, NULL, 0);
                if (!wait_pidfd(m->pidfd, 10000)) {
                        m->stopping = false;
                        return target_fail(&lt->base, -ETIMEDOUT,
                                           "member %s: process %ld does not exit after SIGKILL",
                                           m->name, (long)m->pid);
                }
        }
        m->stopping = false;
        handle_exit(lt, m, true);
        return 0;
}

/* --- health ------------------------------------------------------------ */

static size_t collect_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        strbuf *sb = userdata;
        size_t n = size * nmemb;
        if (sb->len + n > 65536)
                return 0;
        sb_append_len(sb, ptr, n);
        return n;
}

/*
 * GET <client_url>/health without the NOSPACE and CORRUPT alarms
 * (TARGET_HEALTH_PATH, targets/health.h): 1 healthy, 0 not (detail says
 * why).
 */
static int check_health(local_target *lt, local_member *m, char **ret_detail)
{
        if (!m->client_url) {
                *ret_detail = xstrdup("no client URL recorded");
                return 0;
        }
        _cleanup_free_ char *base = xstrdup(m->client_url);
        char *comma = strchr(base, ',');
        if (comma)
                *comma = '\0';
        _cleanup_free_ char *url = xasprintf("%s" TARGET_HEALTH_PATH, base);
        /* A member is asked directly, never through a proxy (util/http.h). */
        http_opts ho = {.proxy = HTTP_PROXY_NONE,
                        .timeout_ms = lt->health_timeout_ms,
                        .connect_timeout_ms = lt->health_timeout_ms};
        _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
        if (strneq(base, "https:", 6) && m->tls_dir) {
                const char *cas[] = {"operator/ca.crt", "client/ca.crt"};
                for (size_t i = 0; i < ARRAY_SIZE(cas) && !ca; i++) {
                        char *p = xasprintf("%s/%s", m->tls_dir, cas[i]);
                        if (path_exists(p))
                                ca = p;
                        else
                                free(p);
                }
                ho.tls.ca_file = ca;
                cert = xasprintf("%s/operator/tls.crt", m->tls_dir);
                key = xasprintf("%s/operator/tls.key", m->tls_dir);
                if (path_exists(cert) && path_exists(key)) {
                        ho.tls.cert_file = cert;
                        ho.tls.key_file = key;
                }
        }
        CURL *h = http_handle_new(&ho);
        if (!h) {
                *ret_detail = xstrdup("cannot create an HTTP handle");
                return 0;
        }
        strbuf body = STRBUF_INIT;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        /* The handle, URL and paths are this call's own: other clusters' operations go on. */
        target_blocking_begin();
        CURLcode cr = target_health_perform(h, url, &body);
        target_blocking_end();
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(h);
        int healthy = 0;
        if (cr != CURLE_OK) {
                *ret_detail = xasprintf("not answering yet (%s)", curl_easy_strerror(cr));
        } else {
                json_t *o = json_loadb(sb_str(&body), body.len, 0, NULL);
                json_t *hv = json_object_get(o, "health");
                if ((json_is_string(hv) && streq(json_string_value(hv), "true")) ||
                    json_is_true(hv)) {
                        healthy = 1;
                        *ret_detail = xstrdup("healthy");
                } else if (hv) {
                        const char *reason = json_string_value(json_object_get(o, "reason"));
                        if (isempty(reason) || strstr(reason, "NO LEADER"))
                                *ret_detail = xstrdup("no leader");
                        else
                                *ret_detail = xasprintf("unhealthy: %s", reason);
                } else {
                        *ret_detail = xasprintf("unexpected /health answer (HTTP %ld)", code);
                }
                json_decref(o);
        }
        sb_release(&body);
        return healthy;
}

/* --- ports ------------------------------------------------------------- */

static bool port_bindable(int port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return false;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        return ok;
}

typedef struct port_set {
        int *ports;
        size_t n;
        size_t alloc;
} port_set;

static void port_set_add(port_set *s, int port)
{
        if (port <= 0)
                return;
        s->ports = xgrow(s->ports, &s->alloc, s->n + 1, sizeof(int));
        s->ports[s->n++] = port;
}

static bool port_set_has(const port_set *s, int port)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->ports[i] == port)
                        return true;
        return false;
}

/* Names of the subdirectories of path (no dot entries), sorted. */
static int list_subdirs(const char *path, char ***ret, size_t *ret_n)
{
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        char **v = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *p = path_join(path, e->d_name);
                if (!path_is_dir(p))
                        continue;
                v = xgrow(v, &alloc, n + 2, sizeof(char *));
                v[n++] = xstrdup(e->d_name);
                v[n] = NULL;
        }
        closedir(d);
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
                        char *tmp = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = tmp;
                }
        if (!v)
                v = xcalloc(1, sizeof(char *));
        *ret = v;
        *ret_n = n;
        return 0;
}

/* Call fn for every <namespace>/<cluster>/<member> folder under state_dir/clusters. */
static void for_each_member_dir(local_target *lt,
                                void (*fn)(local_target *lt, const char *ns, const char *cluster,
                                           const char *member, void *userdata),
                                void *userdata)
{
        _cleanup_free_ char *root = xasprintf("%s/clusters", lt->state_dir);
        _cleanup_(strv_freep) char **nss = NULL;
        size_t n_ns = 0;
        if (list_subdirs(root, &nss, &n_ns) < 0)
                return;
        for (size_t i = 0; i < n_ns; i++) {
                _cleanup_free_ char *nsdir = path_join(root, nss[i]);
                _cleanup_(strv_freep) char **cls = NULL;
                size_t n_cl = 0;
                if (list_subdirs(nsdir, &cls, &n_cl) < 0)
                        continue;
                for (size_t j = 0; j < n_cl; j++) {
                        _cleanup_free_ char *cldir = path_join(nsdir, cls[j]);
                        _cleanup_(strv_freep) char **mems = NULL;
                        size_t n_m = 0;
                        if (list_subdirs(cldir, &mems, &n_m) < 0)
                                continue;
                        for (size_t k = 0; k < n_m; k++)
                                fn(lt, nss[i], cls[j], mems[k], userdata);
                }
        }
}

static void add_member_ports(local_target *lt, const char *ns, const char *cluster,
                             const char *member, void *userdata)
{
        port_set *used = userdata;
        local_member *m = find_loaded(lt, ns, cluster, member);
        _cleanup_(local_member_freep) local_member *tmp = NULL;
        if (!m && member_load(lt, ns, cluster, member, &tmp) == 0)
                m = tmp;
        if (!m)
                return;
        port_set_add(used, m->client_port);
        port_set_add(used, m->peer_port);
        port_set_add(used, m->metrics_port);
}

/* Every port recorded in a member.json under state_dir. */
static void collect_used_ports(local_target *lt, port_set *used)
{
        for_each_member_dir(lt, add_member_ports, used);
}

static int pick_port(port_set *used, unsigned *cursor)
{
        unsigned span = PORT_RANGE_HIGH - PORT_RANGE_LOW;
        for (unsigned tries = 0; tries < span; tries++) {
                int port = PORT_RANGE_LOW + (int)((*cursor)++ % span);
                if (port_set_has(used, port) || !port_bindable(port))
                        continue;
                port_set_add(used, port);
                return port;
        }
        return -EADDRINUSE;
}

/* Allocate the member's three ports under a lock on the state directory, and record them. */
static int allocate_ports(local_target *lt, local_member *m)
{
        _cleanup_free_ char *lock_path = xasprintf("%s/ports.lock", lt->state_dir);
        _cleanup_close_ int lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock_fd < 0)
                return target_fail(&lt->base, -errno, "cannot open %s: %s", lock_path,
                                   strerror(errno));
        while (flock(lock_fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return target_fail(&lt->base, -errno, "cannot lock %s: %s", lock_path,
                                           strerror(errno));
        port_set used = {0};
        collect_used_ports(lt, &used);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned cursor = (unsigned)getpid() * 7919u + (unsigned)ts.tv_nsec;
        int ports[3];
        int r = 0;
        for (size_t i = 0; i < 3 && r >= 0; i++) {
                r = pick_port(&used, &cursor);
                ports[i] = r;
        }
        free(used.ports);
        if (r < 0)
                return target_fail(&lt->base, r, "no free 127.0.0.1 port in %d-%d", PORT_RANGE_LOW,
                                   PORT_RANGE_HIGH - 1);
        m->client_port = ports[0];
        m->peer_port = ports[1];
        m->metrics_port = ports[2];
        r = member_save(m);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot write member.json: %s", m->name,
                                   strerror(-r));
        return 0;
}

/* --- operations -------------------------------------------------------- */

/* The member's record, created (folder and all) on first use. */
static int get_or_create_member(local_target *lt, const etcd_cluster *c, const char *name,
                                local_member **ret)
{
        local_member *m = NULL;
        int r = get_member(lt, c->namespace_, c->name, name, &m);
        if (r == -ENOENT) {
                m = local_member_new(lt, c->namespace_, c->name, name);
                r = mkdir_p(m->dir, 0700);
                if (r < 0) {
                        r = target_fail(&lt->base, r, "cannot create %s: %s", m->dir, strerror(-r));
                        local_member_free(m);
                        return r;
                }
                m->created_ms = now_wall_ms();
                add_loaded(lt, m);
        } else if (r < 0) {
                return r;
        }
        *ret = m;
        return 0;
}

static int local_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        local_target *lt = LT(t);
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");
        local_member *m = NULL;
        int r = get_or_create_member(lt, c, mp->name, &m);
        if (r < 0)
                return r;
        if (m->client_port <= 0 || m->peer_port <= 0 || m->metrics_port <= 0) {
                r = allocate_ports(lt, m);
                if (r < 0)
                        return r;
        }
        const char *cs = render_client_tls(c) ? "https" : "http";
        const char *ps = render_peer_tls(c) ? "https" : "http";
        str_assign(&mp->client_url, xasprintf("%s://127.0.0.1:%d", cs, m->client_port));
        str_assign(&mp->peer_url, xasprintf("%s://127.0.0.1:%d", ps, m->peer_port));
        str_assign(&mp->listen_client_url, xstrdup(mp->client_url));
        str_assign(&mp->listen_peer_url, xstrdup(mp->peer_url));
        str_assign(&mp->listen_metrics_url, xasprintf("http://127.0.0.1:%d", m->metrics_port));
        str_assign(&mp->data_dir, xasprintf("%s/data", m->dir));
        str_assign(&mp->tls_dir, xasprintf("%s/tls", m->dir));
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *tls_error = NULL;
        char *tls_version = NULL;
        r = local_tls_version(cdir, c, &tls_version, &tls_error);
        if (r < 0)
                return target_fail(t, r, "%s", tls_error);
        str_assign(&mp->tls_version, tls_version);
        if (!streq_ptr(m->client_url, mp->client_url) || !streq_ptr(m->tls_dir, mp->tls_dir)) {
                str_assign(&m->client_url, xstrdup(mp->client_url));
                str_assign(&m->tls_dir, xstrdup(mp->tls_dir));
                r = member_save(m);
                if (r < 0)
                        return target_fail(t, r, "member %s: cannot write member.json: %s", m->name,
                                           strerror(-r));
        }
        return 0;
}

/* "Service-demo-headless.json": a file name for a rendered object. */
static char *object_file_name(json_t *obj, size_t index)
{
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        const char *name =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        if (!target_name_is_component(kind) || !target_name_is_component(name))
                return xasprintf("object-%zu.json", index);
        strbuf sb = STRBUF_INIT;
        for (const char *p = kind; *p; p++)
                sb_appendc(&sb, (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p));
        sb_printf(&sb, "-%s.json", name);
        return sb_detach(&sb);
}

static int local_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        local_target *lt = LT(t);
        if (!target_name_is_component(c->namespace_) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", c->namespace_,
                                   c->name);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *odir = path_join(cdir, "objects");
        int r = mkdir_p(odir, 0755);
        if (r < 0)
                return target_fail(t, r, "cannot create %s: %s", odir, strerror(-r));
        _cleanup_free_ char *tls_error = NULL;
        r = local_tls_ensure(cdir, c, p, NULL, false, (int64_t)time(NULL) * 1000, &tls_error);
        if (r < 0)
                return target_fail(t, r, "cluster %s/%s: %s", c->namespace_, c->name,
                                   tls_error ? tls_error : "TLS material cannot be issued");
        r = 0;
        json_t *objs = render_shared_objects(c, p);
        if (!objs)
                return target_fail(t, -EINVAL, "cluster %s/%s: shared objects cannot be rendered",
                                   c->namespace_, c->name);
        if (json_is_object(objs)) {
                json_t *arr = json_array();
                json_array_append_new(arr, objs);
                objs = arr;
        }
        char **names = xcalloc(json_array_size(objs) + 1, sizeof(char *));
        size_t i;
        json_t *obj;
        json_array_foreach(objs, i, obj)
        {
                names[i] = object_file_name(obj, i);
                _cleanup_free_ char *path = path_join(odir, names[i]);
                char *text = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                if (!text)
                        continue;
                size_t len = strlen(text);
                _cleanup_free_ char *old = NULL;
                size_t old_len = 0;
                bool same = read_file(path, MEMBER_JSON_MAX, &old, &old_len) == 0 &&
                            old_len == len + 1 && memcmp(old, text, len) == 0;
                if (!same) {
                        strbuf sb = STRBUF_INIT;
                        sb_append(&sb, text);
                        sb_appendc(&sb, '\n');
                        int w = write_file_atomic(path, sb.buf, sb.len, 0644);
                        sb_release(&sb);
                        if (w < 0 && r >= 0)
                                r = target_fail(t, w, "cannot write %s: %s", path, strerror(-w));
                }
                free(text);
        }
        json_decref(objs);
        /* Prune files of objects the cluster no longer has. */
        DIR *d = opendir(odir);
        if (d) {
                struct dirent *e;
                while ((e = readdir(d))) {
                        size_t l = strlen(e->d_name);
                        if (e->d_name[0] == '.' || l < 5 || !streq(e->d_name + l - 5, ".json"))
                                continue;
                        bool keep = false;
                        for (size_t k = 0; names[k] && !keep; k++)
                                keep = streq(names[k], e->d_name);
                        if (!keep)
                                (void)unlinkat(dirfd(d), e->d_name, 0);
                }
                closedir(d);
        }
        strv_free(names);
        return r < 0 ? r : 0;
}

static int local_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p,
                               size_t idx)
{
        local_target *lt = LT(t);
        if (idx >= p->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");
        const char *bin = NULL;
        int r = resolve_etcd(lt, c->version, &bin);
        if (r < 0)
                return r;
        _cleanup_(strv_freep) char **argv = render_member_command(c, p, idx);
        if (!argv || !argv[0])
                return target_fail(t, -EINVAL, "member %s: no command rendered", mp->name);
        str_assign(&argv[0], xstrdup(bin));

        local_member *m = NULL;
        r = get_or_create_member(lt, c, mp->name, &m);
        if (r < 0)
                return r;

        poll_exit(lt, m);
        _cleanup_free_ char *identity = data_identity(m);
        if (mp->data_identity && !streq_ptr(identity, mp->data_identity))
                return target_fail(t, -ESTALE,
                                   "member %s: its data directory is %s; it cannot rejoin "
                                   "with the same identity and must be replaced",
                                   m->name, identity ? "not the one it ran with" : "gone");
        if (!identity && (r = write_marker(lt, m)) < 0)
                return r;
        /* Same command, other config hash: the TLS material it trusts changed (a new CA). */
        bool other_config =
            mp->config_hash && m->config_hash && !streq(m->config_hash, mp->config_hash);
        if (m->pid) {
                if (!other_config && process_runs(m->pid, argv)) {
                        /* Running this very command (started by an older gitcd): note its hash. */
                        if (mp->config_hash && !streq_ptr(m->config_hash, mp->config_hash)) {
                                str_assign(&m->config_hash, xstrdup(mp->config_hash));
                                r = member_save(m);
                                if (r < 0)
                                        return target_fail(
                                            t, r, "member %s: cannot write member.json: %s",
                                            m->name, strerror(-r));
                        }
                        return 0;
                }
                log_debug("local target: member %s runs an older command or config; restarting it",
                          m->name);
                r = stop_process(lt, m);
                if (r < 0)
                        return r;
        } else if (m->crashed && !m->stopped && !other_config && strv_equal(m->command, argv)) {
                /* Same command, waiting out its backoff: tick() restarts it. */
                return 0;
        }

        strv_free(m->command);
        m->command = strv_copy(argv);
        str_assign(&m->config_hash, xstrdup_null(mp->config_hash));
        str_assign(&m->version, xstrdup(c->version));
        if (mp->client_url)
                str_assign(&m->client_url, xstrdup(mp->client_url));
        if (mp->tls_dir)
                str_assign(&m->tls_dir, xstrdup(mp->tls_dir));
        return start_member(lt, m);
}

static int local_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = get_member(lt, c->namespace_, c->name, member, &m);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        poll_exit(lt, m);
        r = stop_process(lt, m);
        if (r < 0)
                return r;
        m->stopped = true;
        m->crashed = false;
        r = member_save(m);
        if (r < 0)
                return target_fail(t, r, "member %s: cannot write member.json: %s", member,
                                   strerror(-r));
        return 0;
}

static int local_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = get_member(lt, c->namespace_, c->name, member, &m);
        if (r < 0 && r != -ENOENT)
                return r;
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *mdir = path_join(cdir, member);
        if (m) {
                poll_exit(lt, m);
                r = stop_process(lt, m);
                if (r < 0)
                        return r;
                m->stopped = true;
        }
        if (keep_data) {
                _cleanup_free_ char *data = path_join(mdir, "data");
                if (path_is_dir(data)) {
                        _cleanup_free_ char *removed = path_join(cdir, ".removed");
                        r = mkdir_p(removed, 0700);
                        _cleanup_free_ char *dest =
                            xasprintf("%s/%s-%lld", removed, member, (long long)now_wall_ms());
                        if (r >= 0 && rename(data, dest) < 0)
                                r = -errno;
                        if (r < 0)
                                return target_fail(t, r, "member %s: cannot keep its data: %s",
                                                   member, strerror(-r));
                }
        }
        r = rm_rf(mdir);
        if (m)
                drop_loaded(lt, m);
        if (r < 0)
                return target_fail(t, r, "cannot remove %s: %s", mdir, strerror(-r));
        return 0;
}

/* The folders remove_member(keep_data) made for member: .removed/<member>-<ms>. */
static int local_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        local_target *lt = LT(t);
        if (!target_name_is_component(member))
                return target_fail(t, -EINVAL, "invalid member name \"%s\"", member);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *removed = path_join(cdir, ".removed");
        char **dirs = NULL;
        size_t n = 0;
        int r = list_subdirs(removed, &dirs, &n);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return target_fail(t, r, "cannot list %s: %s", removed, strerror(-r));
        _cleanup_free_ char *prefix = xasprintf("%s-", member);
        for (size_t i = 0; i < n; i++) {
                const char *rest =
                    strncmp(dirs[i], prefix, strlen(prefix)) == 0 ? dirs[i] + strlen(prefix) : NULL;
                /* "<member>-<ms>" only: demo-1 must not take demo-10's folder. */
                if (r >= 0 && rest && *rest && strspn(rest, "0123456789") == strlen(rest)) {
                        _cleanup_free_ char *p = path_join(removed, dirs[i]);
                        r = rm_rf(p);
                        if (r < 0)
                                (void)target_fail(t, r, "cannot remove %s: %s", p, strerror(-r));
                }
                free(dirs[i]);
        }
        free(dirs);
        return r < 0 ? r : 0;
}

static int local_member_status(target *t, const etcd_cluster *c, const char *member,
                               target_member_status *ret_status)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = get_member(lt, c->namespace_, c->name, member, &m);
        if (r == -ENOENT) {
                *ret_status = (target_member_status){.state = MEMBER_ABSENT,
                                                     .detail = xstrdup("no member directory")};
                return 0;
        }
        if (r < 0)
                return r;
        poll_exit(lt, m);

        member_runtime_state state;
        char *detail = NULL;
        bool has_data = member_has_data(m);
        int recent = count_recent_exits(m);
        if (m->pid) {
                _cleanup_free_ char *why = NULL;
                if (check_health(lt, m, &why)) {
                        state = MEMBER_READY;
                        if (!m->ready_mono)
                                m->ready_mono = now_mono_ms();
                        detail = TAKE_PTR(why);
                } else if (recent >= CRASH_LOOP_EXITS) {
                        state = MEMBER_CRASH_LOOP;
                        detail = xasprintf("%d exits in 5 minutes; running again, %s", recent, why);
                } else {
                        state = MEMBER_STARTING;
                        detail = TAKE_PTR(why);
                }
        } else if (m->crashed) {
                state = recent >= CRASH_LOOP_EXITS ? MEMBER_CRASH_LOOP : MEMBER_CRASHED;
                int64_t wait = m->restart_at_mono - now_mono_ms();
                detail = xasprintf("%s; %d exits in 5 minutes; restart in %lld ms",
                                   m->last_exit ? m->last_exit : "exited", recent,
                                   (long long)(wait > 0 ? wait : 0));
        } else if (!has_data) {
                state = MEMBER_ABSENT;
                detail = xstrdup(m->command ? "not running, no data" : "planned, not started");
        } else {
                state = MEMBER_STOPPED;
                detail = xstrdup(m->stopped ? "stopped" : "not running");
        }

        int64_t now = now_mono_ms();
        if (!m->have_state || m->last_state != state) {
                m->have_state = true;
                m->last_state = state;
                m->state_since_mono = now;
        }
        *ret_status = (target_member_status){
            .state = state,
            .restarts = m->restarts,
            .state_since_ms = m->state_since_mono,
            .config_hash = xstrdup_null(m->config_hash),
            .data_identity = data_identity(m),
            .detail = detail,
        };
        return 0;
}

static int local_list_members(target *t, const char *namespace_, const char *cluster,
                              char ***ret_names, size_t *ret_n)
{
        local_target *lt = LT(t);
        if (!target_name_is_component(namespace_) || !target_name_is_component(cluster))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", namespace_,
                                   cluster);
        _cleanup_free_ char *cdir = cluster_dir(lt, namespace_, cluster);
        char **dirs = NULL;
        size_t n = 0;
        int r = list_subdirs(cdir, &dirs, &n);
        if (r == -ENOENT) {
                *ret_names = xcalloc(1, sizeof(char *));
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return target_fail(t, r, "cannot list %s: %s", cdir, strerror(-r));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *mj = xasprintf("%s/%s/member.json", cdir, dirs[i]);
                if (path_exists(mj))
                        dirs[k++] = dirs[i];
                else
                        free(dirs[i]);
        }
        dirs[k] = NULL;
        *ret_names = dirs;
        *ret_n = k;
        return 0;
}

static int local_tick(target *t)
{
        local_target *lt = LT(t);
        int ret = 0;
        int64_t now = now_mono_ms();
        for (size_t i = 0; i < lt->n_members; i++) {
                local_member *m = lt->members[i];
                poll_exit(lt, m);
                if (m->stopping || !m->crashed || m->stopped || m->pid || !m->command ||
                    m->restart_at_mono > now)
                        continue;
                _cleanup_free_ char *identity = data_identity(m);
                if (!identity)
                        continue; /* its data was wiped: restarting would make a new member */
                log_debug("local target: restarting member %s/%s/%s after %s", m->ns, m->cluster,
                          m->name, m->last_exit ? m->last_exit : "exit");
                m->restarts++;
                int r = start_member(lt, m);
                if (r < 0) {
                        /* Could not even start: try again after the next backoff step. */
                        m->crashed = true;
                        int delay = m->backoff_ms ? m->backoff_ms : lt->backoff_base_ms;
                        m->restart_at_mono = now + delay;
                        m->backoff_ms = MIN(delay * 2, lt->backoff_max_ms);
                        (void)member_save(m);
                        if (ret >= 0)
                                ret = r;
                }
        }
        return ret;
}

/*
 * One look at the members under the shared lock: handle the exits that
 * happened, and say whether one did or a restart is due (true), else
 * build the poll set and the time to wait until the next restart is due.
 */
static bool wait_scan(local_target *lt, int64_t deadline, struct pollfd **pfds, size_t *ret_n,
                      int64_t *ret_wait)
{
        int64_t now = now_mono_ms();
        bool event = false;
        for (size_t i = 0; i < lt->n_members; i++) {
                local_member *m = lt->members[i];
                if (m->pidfd < 0)
                        continue;
                struct pollfd pfd = {.fd = m->pidfd, .events = POLLIN};
                if (!m->stopping && poll(&pfd, 1, 0) > 0) {
                        handle_exit(lt, m, false);
                        event = true;
                }
        }
        *pfds = xrealloc(*pfds, (lt->n_members + 1) * sizeof(struct pollfd));
        size_t n = 0;
        int64_t wait = deadline - now;
        for (size_t i = 0; i < lt->n_members; i++) {
                local_member *m = lt->members[i];
                if (m->pidfd >= 0 && !m->stopping) {
                        (*pfds)[n++] = (struct pollfd){.fd = m->pidfd, .events = POLLIN};
                } else if (m->pidfd < 0 && m->crashed && !m->stopped && m->command) {
                        if (m->restart_at_mono <= now) {
                                note_event(lt, m);
                                event = true;
                        } else {
                                wait = MIN(wait, m->restart_at_mono - now);
                        }
                }
        }
        if (lt->wake_fd >= 0)
                (*pfds)[n++] = (struct pollfd){.fd = lt->wake_fd, .events = POLLIN};
        *ret_n = n;
        *ret_wait = wait < 0 ? 0 : wait;
        return event;
}

static int local_wait_event(target *t, int timeout_ms)
{
        local_target *lt = LT(t);
        int64_t deadline = now_mono_ms() + (timeout_ms < 0 ? INT32_MAX : timeout_ms);
        _cleanup_free_ struct pollfd *pfds = NULL;
        for (;;) {
                size_t n = 0;
                int64_t wait = 0;
                if (wait_scan(lt, deadline, &pfds, &n, &wait))
                        return 1;
                if (now_mono_ms() >= deadline)
                        return 0;
                /*
                 * Outside the shared lock: another thread may close one of
                 * these descriptors meanwhile (the poll keeps its file), so
                 * what it returns is only a reason to look again.
                 */
                target_blocking_begin();
                int r = poll(pfds, n, (int)MIN(wait, INT32_MAX));
                if (r > 0 && lt->wake_fd >= 0 && pfds[n - 1].revents) {
                        uint64_t v;
                        (void)!read(lt->wake_fd, &v, sizeof(v));
                }
                target_blocking_end();
                if (r < 0 && errno != EINTR)
                        return 0;
                if (r < 0)
                        return 0; /* a signal: the caller looks at it */
        }
}

static int local_take_events(target *t, char ***ret_clusters, size_t *ret_n)
{
        local_target *lt = LT(t);
        *ret_clusters = lt->events;
        *ret_n = lt->n_events;
        lt->events = NULL;
        lt->n_events = 0;
        return 0;
}

static void local_free(target *t)
{
        local_target *lt = LT(t);
        for (size_t i = 0; i < lt->n_events; i++)
                free(lt->events[i]);
        free(lt->events);
        for (size_t i = 0; i < lt->n_members; i++)
                local_member_free(lt->members[i]);
        free(lt->members);
        for (size_t i = 0; i < lt->n_binaries; i++) {
                free(lt->binaries[i].version);
                free(lt->binaries[i].path);
        }
        free(lt->binaries);
        free(lt->state_dir);
        free(lt->etcd_dir);
        if (lt->wake_fd >= 0)
                close(lt->wake_fd);
        free(lt);
}

/*
 * gitcd's client identity: the operator/ folder of a member of the cluster
 * (each member's is issued from the cluster CA), the first in name order
 * that has one. None yet: no client TLS identity (NULLs).
 */
static int local_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                            char **ret_key)
{
        *ret_ca = *ret_cert = *ret_key = NULL;
        if (!render_client_tls(c))
                return 0;
        char **names = NULL;
        size_t n = 0;
        int r = local_list_members(t, c->namespace_, c->name, &names, &n);
        if (r < 0)
                return r;
        local_target *lt = LT(t);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *op = xasprintf("%s/%s/tls/%s", cdir, names[i], "operator");
                _cleanup_free_ char *cert = path_join(op, "tls.crt");
                if (!*ret_ca && path_exists(cert)) {
                        *ret_ca = path_join(op, "ca.crt");
                        *ret_cert = TAKE_PTR(cert);
                        *ret_key = path_join(op, "tls.key");
                }
        }
        strv_free(names);
        return 0;
}

static int local_tls_certs(target *t, const etcd_cluster *c, const membership_plan *p,
                           target_cert **ret_certs, size_t *ret_n)
{
        local_target *lt = LT(t);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        return local_tls_certificates(cdir, c, p, ret_certs, ret_n);
}

/* Renewal: the member's own folders, swapped whole (pki/auto.c); the process keeps running. */
static int local_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                           const char *member, int64_t now_ms)
{
        local_target *lt = LT(t);
        if (!member)
                return 0; /* every leaf lives in a member's folder */
        if (!target_name_is_component(c->namespace_) || !target_name_is_component(c->name))
                return target_fail(t, -EINVAL, "invalid cluster name \"%s/%s\"", c->namespace_,
                                   c->name);
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *tls_error = NULL;
        int r = local_tls_ensure(cdir, c, p, member, true, now_ms, &tls_error);
        if (r < 0)
                return target_fail(t, r, "cluster %s/%s: %s", c->namespace_, c->name,
                                   tls_error ? tls_error : "TLS material cannot be renewed");
        return r;
}

/* The etcd process of a member, 0 when it does not run (for tests and diagnostics). */
pid_t local_target_member_pid(target *t, const char *ns, const char *cluster, const char *member)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        if (get_member(lt, ns, cluster, member, &m) < 0)
                return 0;
        poll_exit(lt, m);
        return m->pid;
}

/*
 * spec.bootstrap.restore: etcd's tool restores the snapshot into data.restore/
 * beside the member's data folder, which is then renamed to data/. A crash
 * midway leaves data.restore/ (thrown away by the next try) and no data.
 */
static int local_restore_member(target *t, const etcd_cluster *c, const membership_plan *p,
                                size_t idx, const target_restore *rs)
{
        local_target *lt = LT(t);
        if (idx >= p->n || !p->members[idx].name || !p->members[idx].peer_url)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &p->members[idx];
        local_member *m = NULL;
        int r = get_or_create_member(lt, c, mp->name, &m);
        if (r < 0)
                return r;
        poll_exit(lt, m);
        if (m->pid || member_has_data(m))
                return target_fail(t, -EEXIST,
                                   "member %s has data already; a snapshot is never restored "
                                   "over it",
                                   m->name);
        _cleanup_free_ char *data = xasprintf("%s/data", m->dir);
        _cleanup_free_ char *tmp = xasprintf("%s/data.restore", m->dir);
        if ((r = target_restore_into(t, p, idx, rs, tmp)) < 0)
                return r;
        /* data/ may exist empty (created for a start that never happened) */
        (void)rm_rf(data);
        if (rename(tmp, data) < 0) {
                r = -errno;
                (void)rm_rf(tmp);
                return target_fail(t, r, "member %s: cannot rename %s to %s: %s", m->name, tmp,
                                   data, strerror(-r));
        }
        r = fsync_parent_dir(data);
        if (r < 0)
                return target_fail(t, r, "member %s: cannot sync %s: %s", m->name, m->dir,
                                   strerror(-r));
        return 0;
}

/*
 * The revision of a stopped member's data: etcd's tool reads
 * data/member/snap/db where it is (read-only; the member does not run). A
 * folder without member.json (put there by hand) is read too: its data is
 * what would start.
 */
static int local_data_revision(target *t, const etcd_cluster *c, const char *member,
                               const char *tool, int64_t *ret_revision)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        int r = get_member(lt, c->namespace_, c->name, member, &m);
        if (r < 0 && r != -ENOENT)
                return r;
        if (m) {
                poll_exit(lt, m);
                if (m->pid)
                        return target_fail(t, -EBUSY,
                                           "member %s runs (pid %ld): its data is being written",
                                           member, (long)m->pid);
        }
        _cleanup_free_ char *cdir = cluster_dir(lt, c->namespace_, c->name);
        _cleanup_free_ char *db = xasprintf("%s/%s/data/member/snap/db", cdir, member);
        if (!path_exists(db))
                return target_fail(t, -ENOENT, "member %s holds no data (no %s)", member, db);
        return target_db_revision(t, member, tool, db, ret_revision);
}

static const target_ops local_ops = {
    .name = "local",
    .caps = LOCAL_TARGET_CAPS,
    .place_member = local_place_member,
    .ensure_shared = local_ensure_shared,
    .ensure_member = local_ensure_member,
    .stop_member = local_stop_member,
    .remove_member = local_remove_member,
    .drop_kept_data = local_drop_kept_data,
    .member_status = local_member_status,
    .list_members = local_list_members,
    .tick = local_tick,
    .wait_event = local_wait_event,
    .take_events = local_take_events,
    .client_tls = local_client_tls,
    .tls_certificates = local_tls_certs,
    .renew_tls = local_renew_tls,
    .restore_member = local_restore_member,
    .data_revision = local_data_revision,
    .free = local_free,
};

static void adopt_member(local_target *lt, const char *ns, const char *cluster, const char *member,
                         void *userdata)
{
        (void)userdata;
        local_member *m = NULL;
        (void)get_member(lt, ns, cluster, member, &m);
}

/* Load every member recorded under state_dir, adopting the running ones. */
static void adopt_all(local_target *lt)
{
        for_each_member_dir(lt, adopt_member, NULL);
}

int local_target_new(const local_target_opts *opts, target **ret)
{
        if (!opts || isempty(opts->state_dir))
                return -EINVAL;
        int r = mkdir_p(opts->state_dir, 0700);
        if (r < 0)
                return r;
        /* Absolute, because members run in their own directory and get these paths as flags. */
        char *abs_state = realpath(opts->state_dir, NULL);
        if (!abs_state)
                return -errno;
        local_target *lt = XNEW(local_target);
        lt->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        lt->base.ops = &local_ops;
        lt->state_dir = abs_state;
        if (!isempty(opts->etcd_dir)) {
                lt->etcd_dir = xstrdup(opts->etcd_dir);
        } else if (!isempty(getenv("GITCD_ETCD_DIR"))) {
                lt->etcd_dir = xstrdup(getenv("GITCD_ETCD_DIR"));
        } else {
                const char *home = getenv("HOME");
                struct passwd *pw = isempty(home) ? getpwuid(getuid()) : NULL;
                if (pw && !isempty(pw->pw_dir))
                        home = pw->pw_dir;
                lt->etcd_dir = xasprintf("%s/.cache/gitcd/etcd", isempty(home) ? "/" : home);
        }
        lt->health_timeout_ms = opts->health_timeout_ms > 0 ? opts->health_timeout_ms : 2000;
        lt->backoff_base_ms = opts->backoff_base_ms > 0 ? opts->backoff_base_ms : 1000;
        lt->backoff_max_ms = opts->backoff_max_ms > 0 ? opts->backoff_max_ms : 30000;
        if (lt->backoff_max_ms < lt->backoff_base_ms)
                lt->backoff_max_ms = lt->backoff_base_ms;
        lt->stop_timeout_ms = opts->stop_timeout_ms > 0 ? opts->stop_timeout_ms : 10000;
        adopt_all(lt);
        *ret = &lt->base;
        return 0;
}
