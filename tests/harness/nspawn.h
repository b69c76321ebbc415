/*
 * Machines that boot real systemd, for the hosts target's tests in systemd
 * mode: each is a Debian bookworm root file system (the one scripts/setup
 * makes with debootstrap, in the cache's rootfs-bookworm/) under an
 * overlay of its own, booted by `systemd-nspawn -b --register=no
 * --keep-unit`, so its PID 1 is systemd 252 and `systemctl` is systemd's
 * own: a Type=notify unit's start blocks until READY=1, a stop until the
 * process is gone, exactly as on a server. Inside each machine OpenSSH's
 * sshd (systemd's ssh.service) takes the lab's client key for root, with
 * a host key of the machine's own; the cache's etcd binary is bind-mounted
 * read-only at /usr/local/bin/etcd (a path the default policy allows).
 *
 * Networking: nspawn_lab_start() moves the calling process into a network
 * namespace of its own (and a mount namespace, so the overlays go with the
 * process): a bridge there holds 10.213.0.1/24, and machine i is
 * 10.213.0.(10 + i) on its veth (nspawn's --network-bridge). These
 * addresses exist only inside the test process and what it starts (gitcd
 * included), so tests running beside it never see them and can run the
 * same lab at once. Call it before the process starts a thread; loopback
 * is up again, so the rest of the harness (harness_free_port()) works.
 *
 * Needs root, systemd-nspawn (Debian's systemd-container) and the cached
 * root file system: nspawn_available() says which is missing, and a test
 * exits 77 (skipped) then.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct nspawn_machine {
        char *name;          /* nspawn's machine name, also its host name */
        char *address;       /* "10.213.0.10" */
        char *dir;           /* its upper/, work/, root/ (the overlay) and console.log */
        char *root;          /* the merged root: the machine's "/" seen from the test */
        char *host_key_line; /* "10.213.0.10 ssh-ed25519 AAAA...": its known_hosts line */
        pid_t pid;           /* systemd-nspawn; 0 when stopped */
} nspawn_machine;

typedef struct nspawn_lab {
        char *dir;
        char *client_key;  /* the private key every machine's root takes */
        char *known_hosts; /* every machine's Ed25519 host key, port 22 */
        nspawn_machine *machines;
        size_t n;
} nspawn_lab;

/* The cached root file system's folder (newly allocated; NULL without a home). */
char *nspawn_rootfs(void);
/* True when machines can boot here; otherwise false with why (newly allocated). */
bool nspawn_available(char **ret_why);

/*
 * Boot n machines with etcd_bin (a path on this host) as their
 * /usr/local/bin/etcd, and wait until each runs sshd and systemd says it
 * finished booting (`systemctl is-system-running --wait` over SSH), for
 * at most timeout_ms. 0 or a negative errno (message and the machine's
 * console tail on stderr).
 */
int nspawn_lab_start(size_t n, const char *etcd_bin, int timeout_ms, nspawn_lab **ret);
/* Power every machine off (SIGTERM to nspawn: a clean shutdown; SIGKILL after 30 s). */
void nspawn_lab_free(nspawn_lab *l);

/*
 * Run a shell command on machine i as root over SSH (the lab's key and
 * known_hosts); its standard output in *ret_out when ret_out is not NULL.
 * The command's exit status, or a negative errno.
 */
int nspawn_ssh(const nspawn_lab *l, size_t i, const char *command, char **ret_out);
