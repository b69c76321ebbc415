/*
 * Starting and recognising processes, for the local target and etcd's tools
 * (util/process.c).
 * All return 0 or a negative errno unless said otherwise.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/*
 * Start argv[0] (a path) with argv, detached: its own session and process
 * group, working directory dir (when not NULL), stdin /dev/null, stdout and
 * stderr appended to log_path (/dev/null when NULL), no other descriptor,
 * and our environment without ETCD_* / ETCDCTL_* variables (etcd would
 * read them as flags) nor systemd's NOTIFY_SOCKET / WATCHDOG_* (etcd would
 * notify gitcd's service manager). Returns once exec succeeded, with the pid of what is
 * our child; the errno of a failed exec (-ENOENT, -EACCES) otherwise.
 */
int process_spawn_detached(const char *dir, const char *log_path, char *const *argv,
                           pid_t *ret_pid);

/*
 * process_spawn_detached() for a throwaway process that must never outlive
 * the thread that started it: its niceness raised by nice (0: unchanged),
 * and, with die_with_parent, killed by the kernel (PR_SET_PDEATHSIG) when
 * that thread ends, also when gitcd is killed with SIGKILL.
 */
typedef struct process_spawn_opts {
        const char *dir;      /* working directory; NULL: ours */
        const char *log_path; /* stdout and stderr appended; NULL: /dev/null */
        int nice;
        bool die_with_parent;
} process_spawn_opts;
int process_spawn(const process_spawn_opts *o, char *const *argv, pid_t *ret_pid);

/*
 * Start a helper of gitcd's own: the program at path with argv and exactly
 * the environment envp, stdin read from in_fd, stdout written to out_fd,
 * stderr gitcd's, no other descriptor, in gitcd's session, and killed by
 * the kernel (PR_SET_PDEATHSIG) when the thread that started it ends.
 * Returns once exec succeeded, with the helper's pid.
 */
int process_spawn_helper(const char *path, char *const *argv, char *const *envp, int in_fd,
                         int out_fd, pid_t *ret_pid);

/* Run argv to completion and return its stdout+stderr (first 64 KiB). -EIO on non-zero exit. */
int process_run_capture(char *const *argv, char **ret_out);

/*
 * True when pid runs argv as gitcd would have started it: /proc/<pid>/cmdline
 * is exactly argv (a zombie's is empty: never), it runs as gitcd's user
 * (real and effective uid), and its executable (/proc/<pid>/exe) is the
 * file argv[0] names. Only such a process is adopted, watched or stopped.
 */
bool process_runs(pid_t pid, char *const *argv);

/* A process (not this one) that process_runs() argv; 0 when none. */
pid_t process_find(char *const *argv);
