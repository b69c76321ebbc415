/*
 * The hosts target: members on named machines reached over SSH
 * (spec.hosts), one member per machine, run by kubelet from a static Pod
 * manifest or by systemd from a unit file. Effects only: it writes files,
 * starts, stops and probes; member records, TLS issuance and "outdated"
 * stay with the reconciler, state/ and pki/.
 *
 * On each machine, per cluster:
 *   <dataDir>/                      etcd's --data-dir
 *   <dataDir>/gitcd-member          the data identity marker: which member
 *                                   the data belongs to ("member=NAME",
 *                                   "id=RANDOM"); written when the member is
 *                                   placed, so it claims the machine
 *   <unitDir>/etcd-<ns>-<name>.service    (systemd) or
 *   <manifestDir>/etcd-<ns>-<name>.yaml   (staticPod): present while the
 *                                   member should run; each carries the
 *                                   member's config hash
 *
 * A unit file or manifest without the marker is a wiped data disk:
 * MEMBER_DATA_LOST, never restarted empty. Health is read from etcd itself
 * (GET <client URL>/health), not through SSH. Every SSH step has the
 * transport's timeouts; a machine that cannot be reached makes operations
 * on its member fail with -EHOSTUNREACH-like errors and its status
 * "starting" with the reason, while other machines go on.
 */
#pragma once

#include "targets/registry.h"
#include "targets/ssh.h"
#include "targets/target.h"

typedef struct hosts_target_opts {
        ssh_opts ssh; /* known_hosts (required), key file or agent, timeouts */
        /*
         * The command that drives systemd on the machines; default
         * "systemctl". Tests point it at a recorder because no systemd
         * runs there.
         */
        const char *systemctl;
        int client_port;       /* default 2379 */
        int peer_port;         /* default 2380 */
        int metrics_port;      /* default 2381 */
        int health_timeout_ms; /* per /health request; default 2000 */
        /*
         * How long a member's ports may stay open after its static Pod
         * manifest was removed (the kubelet looks at its folder every 20 s
         * and then stops the Pod) before remove_member gives up for this
         * pass, its data left where it is; default 60000.
         */
        int stop_timeout_ms;
        /*
         * Where the cluster CA and leaves of tls.provider auto live on the
         * gitcd host (<state_dir>/hosts/<namespace>/<name>); NULL: clusters
         * with TLS are refused.
         */
        const char *state_dir;
        /*
         * The preflight of a free machine before a member is placed on it
         * (targets/hosts-preflight.h): off unless preflight is set. A
         * machine that fails is not taken; when no free machine passes,
         * place_member fails with -EAGAIN naming every machine and its
         * measurements. preflight_dd: dd on the machines (NULL: "dd" from
         * PATH). The thresholds' 0 fields take the defaults; the free
         * space is judged against the cluster's backend quota (etcd's
         * 2 GiB when the spec sets none). A preflight stands for
         * preflight_interval_ms (0: PREFLIGHT_INTERVAL_MS, ten minutes):
         * placement reuses it, and a machine holding a member is measured
         * again after it (target_machine_ops, hosts-machines.c). A
         * preflight also times TCP connects from the machine to every
         * other machine's peer port (targets/hosts-rtt.h);
         * preflight_rtt_connect: a command given a host and a port that
         * connects instead of bash's /dev/tcp (tests; NULL: /dev/tcp).
         */
        bool preflight;
        const char *preflight_dd;
        const char *preflight_rtt_connect;
        int64_t preflight_sync_p99_max_us;
        int64_t preflight_offset_max_ms;
        int64_t preflight_interval_ms;
} hosts_target_opts;

/* What the hosts target can do beyond every target (TARGET_CAP_*). */
#define HOSTS_TARGET_CAPS TARGET_CAP_HOSTS_INVENTORY

/*
 * Errors of the operations (message in target_last_error()):
 *   place_member   -ENOSPC no free machine in spec.hosts.machines;
 *                  -EINVAL the cluster has no spec.hosts
 *   ensure_shared  -EOPNOTSUPP for TLS without state_dir, or a provider other
 *                  than auto
 *   any            the SSH transport's errors (targets/ssh.h)
 */
int hosts_target_new(const hosts_target_opts *opts, target **ret);

/*
 * What gitcd plan says of the hosts target (target_plan_ops, from the spec
 * alone; plan itself contacts no machine): hosts_machine_effects, what
 * apply does on machine i of c, one line each: the SSH login, the data
 * identity marker, the unit file or manifest, the systemctl commands, each
 * saying when it goes through `sudo -n` (NULL-terminated, newly allocated,
 * strv_free); hosts_machine_adoption, for a cluster gitcd has no records
 * of, what apply reads on machine i first and what adoption would do there
 * (newly allocated).
 */
extern const target_plan_ops hosts_plan_ops;
char **hosts_machine_effects(const etcd_cluster *c, size_t i);
char *hosts_machine_adoption(const etcd_cluster *c, size_t i);

/*
 * The shell command run on machine h for cmd: cmd itself when the SSH
 * user is root, else `sudo -n sh -c '<cmd>'` (sudo never prompts: without
 * password-less sudo the command fails at once). Newly allocated.
 */
char *hosts_command(const host_spec *h, const char *cmd);
/*
 * For an SSH user other than root (SFTP cannot write the machine's
 * folders): the command that writes its standard input to path
 * atomically, through hosts_command(): a temporary file in the same folder
 * made by mktemp (created exclusively, never through a link, under a name
 * nobody can guess) under umask 077, chmod mode, fsync (`sync FILE`),
 * rename; removed when a step fails.
 */
char *hosts_install_command(const host_spec *h, const char *path, mode_t mode);
/* The same shell text without the sudo around it, to follow other commands in one. */
char *hosts_install_script(const char *path, mode_t mode);

/*
 * Adoption: the hosts target's target_adopt_ops (hosts-adopt-ops.c), over
 * the reads and writes below (targets/hosts-adopt.h holds the rules).
 */
extern const target_adopt_ops hosts_adopt_ops;

/*
 * The machine reads and writes of adoption, for hosts_adopt_ops.
 *
 * hosts_adopt_read: what machine i runs: gitcd's own member file when
 * present, else kubeadm's <manifestDir>/etcd.yaml (staticPod) or, when
 * systemd says it is active, <unitDir>/etcd.service and the environment
 * files it names (systemd). *ret NULL when neither runs. -EPERM for a
 * file that cannot be read, with the reason in *ret_why.
 *
 * hosts_adopt_claim: write the data identity marker of member on machine
 * i unless it holds one already; its id in *ret_identity. -EEXIST when the
 * marker names another member.
 *
 * hosts_adopt_retire: remove kubeadm's etcd.yaml from machine i (kubelet
 * stops that Pod), or `systemctl disable --now etcd.service` there and
 * wait until the etcd of member stopped listening (-EBUSY when it does
 * not).
 *
 * hosts_adopt_import_ca: for running members with TLS (after
 * hosts_adopt_check_tls() said 1): read each machine's --trusted-ca-file
 * and --peer-trusted-ca-file and the ca.key beside it over SSH, check that
 * every machine trusts the same CA and that each key found belongs to it,
 * then make it the cluster's auto CA on the gitcd host (<state
 * dir>/hosts/<ns>/<name>/pki, written atomically, key mode 0600) unless
 * that CA is there already, and issue gitcd's client identity and the
 * running members' leaves from it. 1 when done, 0 without running
 * members; -EPERM with the reason in *ret_why, changing nothing, when the
 * CAs differ, a key does not match, no machine holds the key, or the gitcd
 * host keeps another CA for the cluster.
 */
typedef struct hosts_running hosts_running;
int hosts_adopt_read(target *t, const etcd_cluster *c, size_t i, hosts_running **ret,
                     char **ret_why);
int hosts_adopt_claim(target *t, const etcd_cluster *c, size_t i, const char *member,
                      char **ret_identity);
int hosts_adopt_retire(target *t, const etcd_cluster *c, size_t i, const char *member);
int hosts_adopt_import_ca(target *t, const etcd_cluster *c, hosts_running *const *running,
                          char **ret_why);
/* 1 when etcd at client_url answers /health healthy, else 0 (hosts target only). */
int hosts_member_healthy(target *t, const etcd_cluster *c, const char *client_url);
/* The members' peer port (--hosts-ports). */
int hosts_target_peer_port(const target *t);
