/*
 * Process plumbing for the local target and etcd's tools (snapshots,
 * drills): start a detached process, run a short command for its output,
 * and recognise a process gitcd started: its command line, its user and
 * its executable must all be what gitcd would start (a command line alone
 * can be anybody's: any user may run etcd with a member's flags and would
 * otherwise be taken over).
 *
 * Design: fork + exec with every signal blocked around the fork; the child
 * resets signal dispositions, takes its own session (setsid), gets stdin
 * from /dev/null and stdout/stderr on a log file, closes every other
 * descriptor (close_range) and only then execs (a throwaway process first
 * lowers its priority and asks the kernel to kill it with its starter:
 * process_spawn). A CLOEXEC pipe reports a
 * failed exec back to the parent, so "started" means "etcd's binary is
 * running". Between fork and exec only async-signal-safe calls are made:
 * everything the child needs is prepared before the fork.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/process.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

extern char **environ;

/* Does /proc/<pid>/cmdline equal argv exactly? */
static bool cmdline_is(pid_t pid, char *const *argv)
{
        if (pid <= 0 || !argv)
                return false;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, 1024 * 1024, &data, &len) < 0)
                return false;
        size_t off = 0;
        for (size_t i = 0; argv[i]; i++) {
                size_t l = strlen(argv[i]);
                if (off + l + 1 > len || memcmp(data + off, argv[i], l) != 0 ||
                    data[off + l] != '\0')
                        return false;
                off += l + 1;
        }
        return off == len;
}

/* Does pid run as this process's user (its real and effective uid, from /proc/<pid>/status)? */
static bool runs_as_us(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, 64 * 1024, &data, &len) < 0)
                return false;
        const char *uid = strstr(data, "\nUid:");
        unsigned long real, effective;
        if (!uid || sscanf(uid + 5, "%lu %lu", &real, &effective) != 2)
                return false;
        return real == (unsigned long)geteuid() && effective == (unsigned long)geteuid();
}

/* Is /proc/<pid>/exe the file path names (the same inode on the same device)? */
static bool exe_is(pid_t pid, const char *path)
{
        char exe[64];
        snprintf(exe, sizeof(exe), "/proc/%ld/exe", (long)pid);
        struct stat a, b;
        return path && stat(exe, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
}

bool process_runs(pid_t pid, char *const *argv)
{
        if (pid <= 0 || !argv || !argv[0])
                return false;
        return cmdline_is(pid, argv) && runs_as_us(pid) && exe_is(pid, argv[0]);
}

/*
 * The process running exactly argv, found through /proc; 0 when none. The
 * command names the member's own data directory, so it identifies the
 * member: this finds a member whose pid file was never written (gitcd died
 * between fork and recording it) or was deleted.
 */
pid_t process_find(char *const *argv)
{
        if (!argv)
                return 0;
        DIR *d = opendir("/proc");
        if (!d)
                return 0;
        pid_t found = 0;
        struct dirent *e;
        while ((e = readdir(d)) && !found) {
                char *end = NULL;
                long v = strtol(e->d_name, &end, 10);
                if (*end || v <= 0 || v == (long)getpid())
                        continue;
                if (process_runs((pid_t)v, argv))
                        found = (pid_t)v;
        }
        closedir(d);
        return found;
}

/*
 * The environment etcd gets: an allow-list, not ours minus a deny-list.
 * gitcd's own environment may hold tokens, passphrases and an SSH agent
 * socket (SSH_AUTH_SOCK) for its Git sources; none of that reaches a
 * member. etcd gets what a program needs to run (PATH, HOME, locale, time
 * zone, temporary folder) and Go's runtime knobs; never ETCD_* (etcd reads
 * them as flags: its flags come only from the rendered command), nor
 * systemd's NOTIFY_SOCKET / WATCHDOG_* (etcd would send its own READY=1 to
 * gitcd's service manager).
 */
static bool env_allowed(const char *entry)
{
        static const char *const exact[] = {"PATH",       "HOME", "USER",    "LOGNAME",
                                            "LANG",       "TZ",   "TMPDIR",  "GOMAXPROCS",
                                            "GOMEMLIMIT", "GOGC", "GODEBUG", "GOTRACEBACK"};
        size_t name_len = strcspn(entry, "=");
        if (entry[name_len] != '=')
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
                if (strlen(exact[i]) == name_len && strneq(entry, exact[i], name_len))
                        return true;
        return strneq(entry, "LC_", 3);
}

static char **child_environment(void)
{
        size_t n = 0;
        while (environ && environ[n])
                n++;
        char **env = xcalloc(n + 1, sizeof(char *));
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (env_allowed(environ[i]))
                        env[k++] = xstrdup(environ[i]);
        return env;
}

/* In the child after fork: only async-signal-safe calls from here to exec. */
static _noreturn_ void exec_child(const process_spawn_opts *o, bool session, pid_t parent,
                                  int in_fd, int out_fd, int err_fd, int err_pipe, const char *path,
                                  char *const *argv, char *const *envp)
{
        const char *dir = o->dir;
        if (session)
                (void)setsid();
        if (o->die_with_parent) {
                /* the parent may have died before the prctl: then go at once */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(127);
        }
        if (o->nice)
                (void)setpriority(PRIO_PROCESS, 0, o->nice);
        /* Default dispositions first, then unblock (the parent blocked all around fork). */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (int sig = 1; sig < NSIG; sig++)
                (void)sigaction(sig, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Lift the four descriptors clear of 0-3 so the dup2s below cannot clobber them. */
        in_fd = fcntl(in_fd, F_DUPFD_CLOEXEC, 10);
        out_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 10);
        err_fd = fcntl(err_fd, F_DUPFD_CLOEXEC, 10);
        int e_fd = fcntl(err_pipe, F_DUPFD_CLOEXEC, 10);
        if (e_fd >= 0)
                err_pipe = e_fd;
        if (in_fd < 0 || out_fd < 0 || err_fd < 0 || e_fd < 0)
                goto fail;
        if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0 ||
            dup3(err_pipe, 3, O_CLOEXEC) < 0)
                goto fail;
        err_pipe = 3;
        close_range(4, ~0U, 0);
        if (dir)
                (void)chdir(dir);
        execve(path, argv, envp);
fail:;
        int e = errno;
        (void)!write(err_pipe, &e, sizeof(e));
        _exit(127);
}

/*
 * Fork and exec; returns the pid once exec succeeded, -errno of a failed
 * exec (reported through a CLOEXEC pipe) otherwise.
 */
static int spawn(const process_spawn_opts *o, bool session, int in_fd, int out_fd, int err_fd,
                 const char *path, char *const *argv, char *const *envp, pid_t *ret_pid)
{
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid == 0)
                exec_child(o, session, parent, in_fd, out_fd, err_fd, pipefd[1], path, argv, envp);
        int fork_errno = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return -fork_errno;
        }
        close(pipefd[1]);
        int child_errno = 0;
        ssize_t n;
        do
                n = read(pipefd[0], &child_errno, sizeof(child_errno));
        while (n < 0 && errno == EINTR);
        close(pipefd[0]);
        if (n > 0) {
                (void)waitpid(pid, NULL, 0);
                return -(child_errno ? child_errno : EIO);
        }
        *ret_pid = pid;
        return 0;
}

/*
 * Start argv as a detached process with stdout/stderr appended to log_path.
 * Returns the pid once exec succeeded; -errno of a failed exec otherwise.
 */
int process_spawn_detached(const char *dir, const char *log_path, char *const *argv, pid_t *ret_pid)
{
        process_spawn_opts o = {.dir = dir, .log_path = log_path};
        return process_spawn(&o, argv, ret_pid);
}

int process_spawn(const process_spawn_opts *o, char *const *argv, pid_t *ret_pid)
{
        const char *log_path = o->log_path;
        _cleanup_(strv_freep) char **envp = child_environment();
        _cleanup_close_ int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in_fd < 0)
                return -errno;
        _cleanup_close_ int out_fd = -1;
        if (log_path)
                out_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
        else
                out_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (out_fd < 0)
                return -errno;
        return spawn(o, true, in_fd, out_fd, out_fd, argv[0], argv, envp, ret_pid);
}

int process_spawn_helper(const char *path, char *const *argv, char *const *envp, int in_fd,
                         int out_fd, pid_t *ret_pid)
{
        process_spawn_opts o = {.die_with_parent = true};
        return spawn(&o, false, in_fd, out_fd, STDERR_FILENO, path, argv, envp, ret_pid);
}

/* Run argv and capture its stdout (bounded); for `etcd --version`. */
int process_run_capture(char *const *argv, char **ret_out)
{
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_(strv_freep) char **envp = child_environment();
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull < 0) {
                int e = -errno;
                close(pipefd[0]);
                close(pipefd[1]);
                return e;
        }
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pid_t pid = fork();
        if (pid == 0) {
                struct sigaction dfl = {.sa_handler = SIG_DFL};
                for (int sig = 1; sig < NSIG; sig++)
                        (void)sigaction(sig, &dfl, NULL);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                int in = fcntl(devnull, F_DUPFD_CLOEXEC, 10);
                int out = fcntl(pipefd[1], F_DUPFD_CLOEXEC, 10);
                if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
                        _exit(127);
                close_range(3, ~0U, 0);
                execve(argv[0], argv, envp);
                _exit(127);
        }
        int fork_errno = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                close(devnull);
                return -fork_errno;
        }
        close(pipefd[1]);
        close(devnull);
        strbuf sb = STRBUF_INIT;
        char buf[4096];
        for (;;) {
                ssize_t n = read(pipefd[0], buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if (sb.len < 65536)
                        sb_append_len(&sb, buf, (size_t)n);
        }
        close(pipefd[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                sb_release(&sb);
                return -EIO;
        }
        *ret_out = sb_detach(&sb);
        return 0;
}
