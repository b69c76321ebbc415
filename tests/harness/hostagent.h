/*
 * A host agent for the hosts target's tests: it plays kubelet for static
 * Pod manifest directories and systemd for unit directories, on the
 * loopback "machines" of tests/harness/sshd.h. It is a simulator because
 * neither a kubelet nor systemd can run in the test environment; the SSH
 * transport, the files gitcd writes and etcd are real.
 *
 * Every 100 ms it lists the watched directories: a file etcd-*.service or
 * etcd.service (its ExecStart= line, words in POSIX single quotes, a word
 * $NAME replaced by NAME's words; its process gets the variables of
 * Environment=NAME=VALUE lines and of the NAME=VALUE lines of its
 * EnvironmentFile=[-]PATH files, as etcd's environment) or etcd-*.yaml or kubeadm's etcd.yaml (a
 * Pod written as JSON after '#' comment lines; spec.containers[0].command,
 * with "etcd" mapped to the real binary) runs as one etcd process; a
 * changed file restarts it, a removed file stops it (SIGTERM; a changed
 * or removed manifest a second later, as a kubelet notices it on its own
 * schedule),
 * and a process that exits is started again after a second
 * (Restart=always, a kubelet's restart). It runs as a child process tracked by the harness,
 * in the way tests/harness/nodesim.c plays a node for Pods.
 *
 * systemctl is simulated too (hostagent_write_systemctl()), honest about
 * what the hosts target relies on: `stop U` and `disable --now U` mark U
 * inactive (<unit dir>/.U.inactive), the agent stops its process and does
 * not run it while marked, and they return once it stopped, as systemd's
 * do (the agent keeps <unit dir>/.U.running while it runs U's process; two
 * minutes at most, then they fail); `start U` and `restart U` remove the mark
 * (the agent starts it again; restart starts a new process even when U
 * runs) and, for a Type=notify unit, return only once its process said
 * READY=1 on the NOTIFY_SOCKET the agent gives it, as systemd's do (etcd
 * says it once it serves: for a member of a new cluster, once a quorum
 * runs; 90 s at most, systemd's default start timeout, then they fail),
 * or at once with --no-block; `is-active U` succeeds while U's file
 * exists unmarked; `cat U` prints U's file and its drop-ins
 * (the files U.d/NAME.conf in the unit dir), each after a "# PATH" line, as systemd's does
 * (the agent itself runs U's file only); `daemon-reload` and `enable` are
 * recorded only. A unit
 * file that appears unmarked runs at once, without `start` (enabled
 * units, as a machine boots them).
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

typedef struct hostagent hostagent;

/*
 * Watch dirs (NULL-terminated). etcd_bin replaces argv[0] "etcd" of Pod
 * manifests. Process output goes to <log_dir>/<the file's path, "/" as
 * "_">.log, one per machine. 0 or -errno.
 */
int hostagent_start(const char *const *dirs, const char *etcd_bin, const char *log_dir,
                    hostagent **ret);
/* Stop the agent and every process it runs. */
void hostagent_free(hostagent *a);
/*
 * Hold the agent (true) or let it go on (false): while held it acts on no
 * file, as a kubelet that has not looked at its folder yet; the processes
 * it runs go on running. For tests of what gitcd sees in that window,
 * which is otherwise only a second long.
 */
void hostagent_hold(hostagent *a, bool hold);

/*
 * Write the simulated systemctl (see above) for the units in unit_dir to
 * path (mode 0755); every call is appended to log. unit_dir NULL: one
 * script for every machine of the lab, each call acting on the unit folder
 * (<root>/etc/systemd/system) of the machine whose sshd it descends from
 * (tests/harness/sshd.h), also through sudo. 0 or -errno.
 */
int hostagent_write_systemctl(const char *path, const char *unit_dir, const char *log);
