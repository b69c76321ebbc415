/*
 * Real sshd "machines" for the hosts target's tests: one OpenSSH sshd per
 * loopback address (127.0.0.2, 127.0.0.3, ...), each with its own host
 * keys (the stock set a distribution's sshd makes: Ed25519, ECDSA and
 * RSA), sshd_config and log, and a root prefix: a folder that stands for
 * the machine's "/" (tests write the machine's paths under it in the
 * spec's inventory, since every "machine" shares this host's file system).
 * Logins are as the current user, or any other local account (the
 * non-root test accounts scripts/setup creates), with the client key the
 * harness makes; the machines share one known_hosts file listing each
 * machine's Ed25519 key only, as `ssh-keyscan -t ed25519` (docs/hosts.md)
 * writes it, so every test connects the way an operator who followed the
 * docs does. A machine's commands find programs in <dir>/bin first (sshd's
 * SetEnv PATH): a test puts there what the machine has and this host has
 * not, such as a systemctl (hostagent_write_systemctl()).
 *
 * sshd runs in its own process group and is tracked by the harness
 * registry (harness.h), so a failing test leaves no sshd behind. The code
 * follows the sshd set-up of tests/sources/test-ssh.c, shared here.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#define SSHD_PATH "/usr/sbin/sshd"

typedef struct sshd_machine {
        char *address; /* "127.0.0.2" */
        int port;
        char *dir;            /* the machine's sshd files: hostkey, sshd_config, sshd.log, bin/ */
        char *root;           /* the machine's root prefix */
        char *host_key_line;  /* "[127.0.0.2]:PORT ssh-ed25519 AAAA...": its known_hosts line */
        char *ecdsa_key_line; /* the same for its ECDSA key */
        char *rsa_key_line;   /* and for its RSA key */
        pid_t pid;            /* 0 when stopped */
        char *hostname;       /* its own host name (sshd_machine_set_hostname), NULL: this host's */
        char *config; /* lines added to its sshd_config (sshd_machine_set_config), or NULL */
} sshd_machine;

typedef struct sshd_lab {
        char *dir;         /* everything below; removed with the harness's folders */
        char *client_key;  /* private key accepted by every machine */
        char *known_hosts; /* lists every machine's host key */
        sshd_machine *machines;
        size_t n;
} sshd_lab;

/* True when sshd and ssh-keygen are installed (tests exit 77 otherwise). */
bool sshd_available(void);

/* Start n machines on 127.0.0.2 .. 127.0.0.(n+1). 0 or a negative errno (message on stderr). */
int sshd_lab_start(size_t n, sshd_lab **ret);
void sshd_lab_free(sshd_lab *l); /* stops every sshd */

/*
 * Stop machine i's sshd and its established sessions (the machine is
 * "down"); start it again on the same port.
 */
int sshd_machine_stop(sshd_lab *l, size_t i);
int sshd_machine_start(sshd_lab *l, size_t i);

/*
 * Give machine i its own host name (NULL: this host's again), as its
 * commands see it (uname, gethostname): its sshd is started again in a
 * UTS namespace of its own. Needs CAP_SYS_ADMIN: -EPERM otherwise.
 */
int sshd_machine_set_hostname(sshd_lab *l, size_t i, const char *hostname);

/* Restart machine i with lines added to its sshd_config (NULL: none). */
int sshd_machine_set_config(sshd_lab *l, size_t i, const char *lines);

/* Write a known_hosts file where machine i carries another key than its own; returns its path. */
char *sshd_lab_known_hosts_with_wrong_key(sshd_lab *l, size_t i);
