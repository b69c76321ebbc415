/*
 * The shared set-up of the hosts target's end-to-end tests: real sshd
 * "machines" on 127.0.0.2, .3, ... (tests/harness/sshd.h) with a host agent
 * playing kubelet on each machine's static Pod folder and systemd on its
 * unit folder, with the agent's systemctl on each machine's PATH
 * (tests/harness/hostagent.h), the members' ports of their own, and the
 * helpers every such test needs: a cluster file over a range of machines,
 * gitcd commands with the lab's SSH flags and its configuration file (the
 * writer whose every acknowledged key is read back at the end is
 * tests/harness/writer.h).
 *
 * The machines' folders (data, TLS, units, manifests) lie under the lab's
 * folder, not under /var/lib/etcd and /etc, and their etcd binary is the
 * test cache's: the lab's configuration file (config) holds the operator's
 * policy that allows them (and snapshot files on the gitcd host in the
 * lab's snapshots/), and apply, plan and run get it with --config.
 */
#pragma once

#include <stddef.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/hostagent.h"
#include "tests/harness/sshd.h"

typedef struct hosts_lab {
        sshd_lab *ssh;
        hostagent *agent;
        int client_port, peer_port, metrics_port;
        char *ports;         /* --hosts-ports C,P,M */
        char *config;        /* gitcd.yaml: a policy whose roots are the lab's folder */
        char *snapshots;     /* <lab>/snapshots: the policy's one local snapshot root */
        char *etcd_binaries; /* "<etcd cache>/<version: a star>/etcd": hosts.etcdBinaries */
} hosts_lab;

/*
 * Start n machines and the host agent (etcd `version` stands for "etcd" in
 * manifests). Exits 77 when sshd or that etcd version is not installed.
 * NULL on failure (message on stderr).
 */
hosts_lab *hosts_lab_start(size_t n, const char *version);
void hosts_lab_free(hosts_lab *l);

/* path under machine i's root prefix (newly allocated). */
char *hosts_lab_path(const hosts_lab *l, size_t i, const char *path);
/* <root>/etc/kubernetes/manifests and <root>/var/lib/etcd/<cluster> of machine i. */
char *hosts_lab_manifests(const hosts_lab *l, size_t i);
char *hosts_lab_data_dir(const hosts_lab *l, size_t i, const char *cluster);
/* <root>/etc/systemd/system of machine i, and where its systemctl records each call. */
char *hosts_lab_units(const hosts_lab *l, size_t i);
char *hosts_lab_systemctl_log(const hosts_lab *l, size_t i);

/* A cluster file <name>.yaml on machines [first, first + n) of the lab, static Pods. */
void hosts_lab_write_cluster(const hosts_lab *l, e2e *e, const char *name, const char *version,
                             int replicas, size_t first, size_t n);
/* The same in mode systemd: unitDir under the machine's root, etcdBinary the lab's etcd. */
void hosts_lab_write_cluster_systemd(const hosts_lab *l, e2e *e, const char *name,
                                     const char *version, int replicas, size_t first, size_t n);
/*
 * The same on the listed machines of the lab, in that order, with extra
 * (NULL or lines indented by two spaces, such as "  recovery:\n ...") added
 * to the spec.
 */
void hosts_lab_write_cluster_on(const hosts_lab *l, e2e *e, const char *name, const char *version,
                                int replicas, const size_t *machines, size_t n, const char *extra);
/*
 * The same with tls.provider auto, client and peer TLS on, and each
 * machine's tlsDir at <root>/etc/etcd/default-<name>/pki.
 */
void hosts_lab_write_cluster_tls(const hosts_lab *l, e2e *e, const char *name, const char *version,
                                 int replicas, size_t first, size_t n);
/* The same with tls.client.allowPlainHTTP: plain http served beside https. */
void hosts_lab_write_cluster_tls_allow_plain(const hosts_lab *l, e2e *e, const char *name,
                                             const char *version, int replicas, size_t first,
                                             size_t n);

/*
 * gitcd <cmd> --source S --target hosts <the lab's SSH flags> [--config
 * <the lab's file> for apply, plan and run] [extra1 extra2].
 */
int hosts_lab_cmd(const hosts_lab *l, e2e *e, const char *cmd, const char *known_hosts,
                  char **ret_out, char **ret_err, const char *extra1, const char *extra2);
/* hosts_lab_cmd with GITCD_FAILPOINT (util/failpoint.h); 128+signal when killed there. */
int hosts_lab_cmd_failpoint(const hosts_lab *l, e2e *e, const char *failpoint, const char *cmd,
                            const char *known_hosts, char **ret_out, char **ret_err,
                            const char *extra1, const char *extra2);
/* `gitcd apply --target hosts --timeout T`; fails the test with the status when it fails. */
void hosts_lab_apply_ok(const hosts_lab *l, e2e *e, const char *timeout);

/* The ID etcd lists for member name; fails the test (naming those listed) when none. */
uint64_t hosts_lab_member_id(const etcd_members *l, const char *name);

/*
 * After adoption of a 3-member cluster whose members ran as node_names[i]:
 * etcd lists the same cluster and member IDs as before, member i now named
 * <cluster>-i, and the audit log holds one cluster.adopt, three
 * member.adopt and no member.bootstrap. Fails the test otherwise.
 */
void hosts_lab_assert_adopted(e2e *e, const char *cluster, const etcd_members *before,
                              const etcd_members *after, const char *const *node_names);
