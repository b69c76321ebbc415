/*
 * The local target's etcd processes: the binary for a version, a member
 * started detached (util/process.h) and stopped by signal, a process taken
 * over only when it is ours (process_runs), exits seen through pidfds
 * (wait_event polls them; waitid reaps our children), restarts with
 * backoff and the crash-loop window. Design: targets/local.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include "targets/locked.h"
#include "util/process.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/local-internal.h"

#define CRASH_LOOP_WINDOW_MS (5 * 60 * 1000)
#define BACKOFF_RESET_MS     (60 * 1000)

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

int lt_count_recent_exits(const local_member *m)
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
        target_event_set_add(&lt->events, xasprintf("%s/%s", m->ns, m->cluster));
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
        lt_watch_exit(lt, m, false);
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
        (void)lt_member_save(m);
        note_event(lt, m);
}

/* Non-blocking: has the member's process exited? Handles the exit when it has. */
void lt_poll_exit(local_target *lt, local_member *m)
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
void lt_adopt(local_target *lt, local_member *m)
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
                        lt_watch_exit(lt, m, true);
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

/* The etcd binary for a version: <etcd_dir>/<version>/etcd, else a matching `etcd` on PATH. */
int lt_resolve_etcd(local_target *lt, const char *version, const char **ret_path)
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
int lt_start_member(local_target *lt, local_member *m)
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
        lt_watch_exit(lt, m, true);
        if (lt->wake_fd >= 0) {
                uint64_t one = 1; /* a thread in wait_event looks again */
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
                r = lt_member_save(m);
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
int lt_stop_process(local_target *lt, local_member *m)
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
        lt_watch_exit(lt, m, false);
        if (!wait_pidfd(m->pidfd, lt->stop_timeout_ms)) {
                log_debug("local target: member %s did not stop within %d ms; killing", m->name,
                          lt->stop_timeout_ms);
                (void)pidfd_send_signal(m->pidfd, SIGKILL, NULL, 0);
                if (!wait_pidfd(m->pidfd, 10000)) {
                        m->stopping = false;
                        lt_watch_exit(lt, m, true);
                        return target_fail(&lt->base, -ETIMEDOUT,
                                           "member %s: process %ld does not exit after SIGKILL",
                                           m->name, (long)m->pid);
                }
        }
        m->stopping = false;
        handle_exit(lt, m, true);
        return 0;
}

void lt_watch_exit(local_target *lt, local_member *m, bool watch)
{
        if (m->pidfd < 0)
                return;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = m->pidfd};
        (void)epoll_ctl(lt->epoll_fd, watch ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, m->pidfd, &ev);
}

/*
 * lt_poll_exit for every member at once: a tick comes with every pass and a
 * wait for events with every turn of the daemon's loop, so a system call per
 * member each time would grow with the square of the clusters. One call says
 * which pidfds of the epoll set are readable (it is level-triggered: a
 * readiness not handled here is reported again); a readable fd is matched to
 * its member under the shared lock, where no pidfd is opened or closed, and
 * one that matches no member is taken out of the set rather than reported
 * for ever. True when a member's process had exited.
 */
static bool take_exits(local_target *lt)
{
        bool exited = false;
        struct epoll_event evs[64];
        int n;
        do {
                n = epoll_wait(lt->epoll_fd, evs, (int)ARRAY_SIZE(evs), 0);
                for (int k = 0; k < n; k++) {
                        int fd = evs[k].data.fd;
                        if (fd == lt->wake_fd) {
                                uint64_t v;
                                (void)!read(lt->wake_fd, &v, sizeof(v));
                                continue;
                        }
                        local_member *m = NULL;
                        for (size_t i = 0; i < lt->n_members && !m; i++)
                                if (lt->members[i]->pidfd == fd && !lt->members[i]->stopping)
                                        m = lt->members[i];
                        if (!m) {
                                (void)epoll_ctl(lt->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
                                continue;
                        }
                        handle_exit(lt, m, false);
                        exited = true;
                }
        } while (n == (int)ARRAY_SIZE(evs));
        return exited;
}

int local_tick(target *t)
{
        local_target *lt = LT(t);
        int ret = 0;
        int64_t now = now_mono_ms();
        (void)take_exits(lt);
        for (size_t i = 0; i < lt->n_members; i++) {
                local_member *m = lt->members[i];
                if (m->stopping || !m->crashed || m->stopped || m->pid || !m->command ||
                    m->restart_at_mono > now)
                        continue;
                _cleanup_free_ char *identity = lt_data_identity(m);
                if (!identity)
                        continue; /* its data was wiped: restarting would make a new member */
                log_debug("local target: restarting member %s/%s/%s after %s", m->ns, m->cluster,
                          m->name, m->last_exit ? m->last_exit : "exit");
                m->restarts++;
                int r = lt_start_member(lt, m);
                if (r < 0) {
                        /* Could not even start: try again after the next backoff step. */
                        m->crashed = true;
                        int delay = m->backoff_ms ? m->backoff_ms : lt->backoff_base_ms;
                        m->restart_at_mono = now + delay;
                        m->backoff_ms = MIN(delay * 2, lt->backoff_max_ms);
                        (void)lt_member_save(m);
                        if (ret >= 0)
                                ret = r;
                }
        }
        return ret;
}

/*
 * One look at the members under the shared lock: handle the exits that
 * happened, and say whether one did or a restart is due (true), else the
 * time to wait until the next restart is due.
 */
static bool wait_scan(local_target *lt, int64_t deadline, int64_t *ret_wait)
{
        int64_t now = now_mono_ms();
        bool event = take_exits(lt);
        int64_t wait = deadline - now;
        for (size_t i = 0; i < lt->n_members; i++) {
                local_member *m = lt->members[i];
                if (m->pidfd < 0 && m->crashed && !m->stopped && m->command) {
                        if (m->restart_at_mono <= now) {
                                note_event(lt, m);
                                event = true;
                        } else {
                                wait = MIN(wait, m->restart_at_mono - now);
                        }
                }
        }
        *ret_wait = wait < 0 ? 0 : wait;
        return event;
}

int local_wait_event(target *t, int timeout_ms)
{
        local_target *lt = LT(t);
        int64_t deadline = now_mono_ms() + (timeout_ms < 0 ? INT32_MAX : timeout_ms);
        for (;;) {
                int64_t wait = 0;
                if (wait_scan(lt, deadline, &wait))
                        return 1;
                if (now_mono_ms() >= deadline || target_wake_take())
                        return 0;
                /*
                 * Outside the shared lock: another thread may start or stop a
                 * member meanwhile, so what the wait returns is only a reason
                 * to look again (wait_scan, under the lock, says what happened;
                 * the epoll set reports a readiness not handled again).
                 */
                target_blocking_begin();
                struct epoll_event ev;
                int r = epoll_wait(lt->epoll_fd, &ev, 1, (int)MIN(wait, INT32_MAX));
                target_blocking_end();
                if (r < 0)
                        return 0; /* a signal: the caller looks at it */
        }
}

int local_take_events(target *t, char ***ret_clusters, size_t *ret_n)
{
        local_target *lt = LT(t);
        target_event_set_take(&lt->events, ret_clusters, ret_n);
        return 0;
}

/* The etcd process of a member, 0 when it does not run (for tests and diagnostics). */
pid_t local_target_member_pid(target *t, const char *ns, const char *cluster, const char *member)
{
        local_target *lt = LT(t);
        local_member *m = NULL;
        if (lt_get_member(lt, ns, cluster, member, &m) < 0)
                return 0;
        lt_poll_exit(lt, m);
        return m->pid;
}
