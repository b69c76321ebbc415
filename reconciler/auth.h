/*
 * etcd authentication of a cluster (spec.auth): the step that brings
 * etcd's auth to what the spec asks (root user, root role, auth on; a
 * password change; auth off). The credentials it works with, and every
 * gitcd client of the cluster authenticates with, are files under the
 * state folder owned by etcd/credentials.h.
 *
 * With spec.auth.rootCredentialsSecretRef the key `password` of that Secret
 * (its `username`, when present, must be root) is the wanted password:
 * gitcd copies it into root-password whenever the two differ
 * (auth_secret_password reads it), so a new value in the Secret rotates
 * etcd's password the same way.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/credentials.h"
#include "reconciler/etcd-ops.h"
#include "state/state.h"

typedef struct auth_env {
        const etcd_membership_ops *etcd;
        void *etcd_userdata;
        etcd_conn_opts base; /* endpoints and client TLS; the credentials are added here */
        const char *state_dir;
        const char *cluster; /* "namespace/name" */
        bool want;           /* spec.auth.enabled */
        state_db *db;        /* audit */
        int64_t now_ms;
        const char *commit; /* behind the latched spec, for audit events; may be NULL */
        const char *author;
        /* spec.auth.rootCredentialsSecretRef: the password that Secret holds, which
         * becomes root-password; or why it could not be read (the step fails with it,
         * nothing changed). Both NULL without a Secret reference. */
        const char *secret_password;
        const char *secret_error;
} auth_env;

struct target;
struct etcd_cluster;
/*
 * The root password of spec.auth.rootCredentialsSecretRef: the key
 * `password` of that Secret in the cluster's namespace, read by the target
 * (target_ops.secret_folder, Kubernetes) or, for targets without Secrets,
 * from <state_dir>/secrets/<namespace>/<name>/password on gitcd's host (the
 * layout of a mounted Secret, as for S3 credentials). 0 with *ret NULL when
 * the spec names no Secret; -errno with *ret_error naming the Secret and
 * what is missing (never the password).
 */
int auth_secret_password(struct target *t, const struct etcd_cluster *c, const char *state_dir,
                         char **ret, char **ret_error);

/*
 * One step toward the spec on a converged cluster: enable auth (root user
 * with the password, root role granted, AuthEnable), change root's password
 * to root-password, or disable auth. Every call made is idempotent, so a
 * step cut short by a crash is simply taken again.
 * 0: nothing to do; 1: a step was taken (the credentials clients use may
 * have changed: reconnect); a negative errno or etcd_err with a sentence
 * in *msg (never a password). *msg is freed first and replaced when there is
 * something to say.
 */
int auth_pass(const auth_env *env, char **msg);
