/*
 * SSH transport of the hosts target (libssh2): run a command, upload a
 * file atomically, read a file, on one machine. Host keys are checked
 * strictly against a known_hosts file (sources/known-hosts.c, the same
 * check the Git sources use): a missing or changed key refuses the
 * connection before anything is sent, never "trust on first use".
 * Credentials are a private key file or the keys of an ssh-agent.
 *
 * Every call has a deadline: connecting (TCP, handshake, authentication)
 * is bounded by connect_timeout_ms, each command by command_timeout_ms,
 * and a transfer (a file, a command's input) by command_timeout_ms without
 * progress, so a host that is down or stalls costs at most these timeouts
 * and never blocks the caller longer, while a large file still goes through. A connection whose call
 * timed out or failed at the transport level is closed (it may be in the
 * middle of a packet); the pool (ssh_pool) opens a new one on next use.
 *
 * Errors: 0 or a negative errno, with a message in ssh_last_error():
 *   -EACCES        host key unknown, changed or revoked; authentication refused
 *   -ETIMEDOUT     the deadline passed
 *   -ECONNREFUSED, -EHOSTUNREACH, -ENETUNREACH  the machine cannot be reached
 *   -EIO           the SSH or SFTP layer failed (message from libssh2)
 *   -ENOENT        (ssh_read_file) no such file
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/macro.h"

typedef struct ssh_opts {
        const char *known_hosts;    /* required: the known_hosts file to check host keys against */
        const char *key_file;       /* private key; NULL: use the ssh-agent ($SSH_AUTH_SOCK) */
        const char *key_passphrase; /* of key_file, or NULL; never logged */
        int connect_timeout_ms;     /* default 10000 */
        int command_timeout_ms;     /* default 60000 */
} ssh_opts;

typedef struct ssh_conn ssh_conn;

/*
 * Connect to user@host:port, check the host key and authenticate.
 * On failure *ret_error (when not NULL) gets the message.
 */
int ssh_connect(const ssh_opts *o, const char *host, int port, const char *user, ssh_conn **ret,
                char **ret_error);
void ssh_conn_free(ssh_conn *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ssh_conn *, ssh_conn_free);

/* The message of the last failed call on c ("" when none). */
const char *ssh_last_error(const ssh_conn *c);
/* False once a call failed at the transport level: the connection must be replaced. */
bool ssh_conn_usable(const ssh_conn *c);

/*
 * Run a shell command on the machine. stdin_data (may be NULL) is written
 * to its standard input, then closed. Output is collected whole (each
 * stream up to 16 MiB; more is an error). *ret_status is the exit status,
 * or -1 when the command was killed by a signal. The command is run by
 * the login shell of the user: quote arguments with ssh_quote().
 */
int ssh_exec(ssh_conn *c, const char *command, const void *stdin_data, size_t stdin_len,
             int *ret_status, char **ret_stdout, char **ret_stderr);

/*
 * ssh_exec() without input whose standard output is written to fd as it
 * arrives (at most max bytes; more is -EFBIG), for output too large to hold
 * (a file copied with `cat`); its standard error is collected. The command
 * deadline bounds a stall, not the whole transfer. A failed write to fd is
 * that write's -errno.
 */
int ssh_exec_to_fd(ssh_conn *c, const char *command, int fd, uint64_t max, int *ret_status,
                   char **ret_stderr);

/*
 * Write a file atomically: the data goes to a temporary file in the same
 * directory that nobody can guess and that is created exclusively, never
 * through a symbolic link ("<dir>/.<name>.gitcd-<random>"), is fsynced, and
 * renamed over path, so a reader sees the old or the new content, never a
 * part. The directory must exist. Mode is set on the temporary file before
 * any data is written, so key material is never readable by others, even
 * briefly.
 */
int ssh_upload(ssh_conn *c, const char *path, const void *data, size_t len, mode_t mode);

/* Read a whole file (at most max bytes; more is -EFBIG). -ENOENT when it does not exist. */
int ssh_read_file(ssh_conn *c, const char *path, size_t max, char **ret_data, size_t *ret_len);

/* A word quoted for a POSIX shell: 'it'\''s'. Newly allocated. */
char *ssh_quote(const char *word);

/*
 * One connection per machine, reused for the whole reconciler pass and
 * across passes while it stays usable. A machine that failed to connect in
 * this pass is not tried again before ssh_pool_new_pass(): a down host
 * costs one connect timeout per pass, whatever the number of calls.
 *
 * Threads: a connection is lent to one thread at a time (ssh_pool_get
 * until ssh_pool_put), since a libssh2 session must not be used by two at
 * once; another thread asking for the same machine waits, one asking for
 * another machine does not. Connecting happens outside the pool's own
 * lock, so a machine that does not answer holds up only the callers that
 * want that machine.
 */
typedef struct ssh_pool ssh_pool;

ssh_pool *ssh_pool_new(const ssh_opts *o);
/* Every connection must have been put back. */
void ssh_pool_free(ssh_pool *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(ssh_pool *, ssh_pool_free);
/* Forget this pass's failed connections (and drop idle connections that became unusable). */
void ssh_pool_new_pass(ssh_pool *p);
/*
 * Borrow the connection to user@host:port, opened when needed, until
 * ssh_pool_put(). The pool keeps ownership. On failure nothing is
 * borrowed and *ret_error (when not NULL) gets the message, newly
 * allocated.
 */
int ssh_pool_get(ssh_pool *p, const char *host, int port, const char *user, ssh_conn **ret,
                 char **ret_error);
/* Give a connection from ssh_pool_get() back. */
void ssh_pool_put(ssh_pool *p, ssh_conn *c);
