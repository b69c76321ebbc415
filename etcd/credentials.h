/*
 * The one owner of a cluster's etcd root credentials on gitcd's host: the
 * files every gitcd client of a cluster with spec.auth authenticates with,
 * and the reads and writes the auth step (reconciler/auth.h) makes on
 * them. No password reaches the state store, a log line or a message.
 *
 * Credentials live in the cluster's folder under the state folder,
 * <state_dir>/auth/<namespace>/<name>/ (0700, files 0600):
 *   root-password          the password the operator wants root to have.
 *                          gitcd generates it when it is missing; replacing
 *                          it (atomically: write aside, rename) rotates the
 *                          password.
 *   root-password.etcd     the password etcd's root user has: what every
 *                          gitcd client of the cluster authenticates with.
 *                          Written by gitcd only.
 *   root-password.next     written before a password is set in etcd and
 *                          removed once root-password.etcd holds it: while it
 *                          exists etcd has one of the two, and clients try
 *                          both (etcd_client_opts.fallback_password).
 * gitcd authenticates as root: only root may change membership, defragment,
 * take snapshots or move the leader, so a user of its own would need the
 * root role and be a second root password to keep.
 */
#pragma once

#define AUTH_ROOT "root"

/* What a client of the cluster authenticates with; all NULL when gitcd holds none. */
typedef struct auth_creds {
        char *user;
        char *password;
        char *fallback_password; /* a password change in flight: etcd has one of the two */
} auth_creds;

/*
 * The credentials every gitcd etcd client of cluster ("namespace/name") uses.
 * 0 (fields NULL when none are recorded, or state_dir is NULL), or -errno
 * when a file exists but cannot be read.
 */
int auth_credentials(const char *state_dir, const char *cluster, auth_creds *ret);
void auth_creds_release(auth_creds *a);

/* The folder of cluster's credentials, <state_dir>/auth/<namespace>/<name>. Newly allocated. */
char *auth_credentials_dir(const char *state_dir, const char *cluster);

/*
 * A password file of dir: its first line; *ret NULL when the file is
 * missing. -ENODATA when that line is empty; -EPERM for a file others may
 * read, with why in *ret_why when given (util/fs.h read_secret_file).
 * Free *ret with auth_password_wipe().
 */
int auth_password_read(const char *dir, const char *name, char **ret, char **ret_why);
/* Write password as file name of dir (made 0700), atomically, mode 0600. 0 or -errno. */
int auth_password_write(const char *dir, const char *name, const char *password);
/* Remove file name of dir (absent is fine) and make that durable. 0 or -errno. */
int auth_password_remove(const char *dir, const char *name);
/* Overwrite and free a password; NULL is a no-op. */
void auth_password_wipe(char *s);
