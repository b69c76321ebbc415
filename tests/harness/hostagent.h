/*
 * A host agent for the hosts target's tests: it plays kubelet for static
 * Pod manifest directories and systemd for unit directories, on the
 * loopback "machines" of tests/harness/sshd.h. It is a simulator because
 * neither a kubelet nor systemd can run in the test environment; the SSH
 * transport, the files gitcd writes and etcd are real.
 *
 * Every 100 ms it lists the watched directories: a file etcd-*.service
 * (its ExecStart= line, words in POSIX single quotes) or etcd-*.yaml or kubeadm's etcd.yaml (a
 * Pod written as JSON after '#' comment lines; spec.containers[0].command,
 * with "etcd" mapped to the real binary) runs as one etcd process; a
 * changed file restarts it, a removed file stops it (SIGTERM; a changed
 * or removed manifest a second later, as a kubelet notices it on its own
 * schedule),
 * and a process that exits is started again after a second
 * (Restart=always, a kubelet's restart). It runs as a child process tracked by the harness,
 * in the way tests/harness/nodesim.c plays a node for Pods.
 */
#pragma once

#include <sys/types.h>

typedef struct hostagent hostagent;

/*
 * Watch dirs (NULL-terminated). etcd_bin replaces argv[0] "etcd" of Pod
 * manifests. Process output goes to <log_dir>/<file>.log. 0 or -errno.
 */
int hostagent_start(const char *const *dirs, const char *etcd_bin, const char *log_dir,
                    hostagent **ret);
/* Stop the agent and every process it runs. */
void hostagent_free(hostagent *a);
