/*
 * etcd authentication of a cluster (reconciler/auth.h).
 *
 * Design: the files under <state_dir>/auth/<namespace>/<name>/ are the
 * journal of what etcd's root password is, and etcd itself is asked
 * whether auth is on (AuthStatus), so nothing about auth is kept in the
 * state store and no password ever reaches it. Every etcd call of a step
 * is idempotent (an existing user gets its password set, an existing role
 * or grant is fine, enabling twice is fine), and a password is written to
 * root-password.next before etcd gets it, so a crash anywhere leaves
 * gitcd able to authenticate and to take the same step again:
 *
 *   enable:  .next := wanted; UserAdd root (exists: UserChangePassword);
 *            RoleAdd root; UserGrantRole root root; AuthEnable;
 *            .etcd := wanted; rm .next                (audit auth.enable)
 *   rotate:  .next := wanted; UserChangePassword root; .etcd := wanted;
 *            rm .next                        (audit auth.password-change)
 *   disable: AuthDisable                               (audit auth.disable)
 *
 * The AuthEnabled condition says where auth stands (True: on, with the
 * password gitcd holds). The cluster forms without auth and auth is
 * switched on by the first pass that finds it converged; disabling keeps
 * the root user and the files, so enabling again reuses them. gitcd never
 * switches off an auth it did not switch on (no files: nothing to do).
 */
#include <assert.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/spec.h"
#include "reconciler/auth.h"
#include "targets/target.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static char *new_password(void)
{
        unsigned char raw[24];
        if (RAND_bytes(raw, sizeof(raw)) != 1)
                return NULL;
        char *s = hex_encode_new(raw, sizeof(raw));
        explicit_bzero(raw, sizeof(raw));
        return s;
}

int auth_secret_password(target *t, const etcd_cluster *c, const char *state_dir, char **ret,
                         char **ret_error)
{
        assert(c && ret && ret_error);
        *ret = NULL;
        const char *name = c->auth.root_credentials_secret;
        if (isempty(name) || !c->auth.enabled)
                return 0;
        const char *ns = c->namespace_ ? c->namespace_ : "default";
        _cleanup_free_ char *dir = NULL;
        int k;
        if (t && t->ops->secret_folder) {
                k = t->ops->secret_folder(t, c, name, &dir);
                if (k < 0) {
                        *ret_error = xasprintf("root credentials Secret %s/%s: %s", ns, name,
                                               k == -ENOENT ? "not found" : target_last_error(t));
                        return k;
                }
        } else if (state_dir) {
                dir = xasprintf("%s/secrets/%s/%s", state_dir, ns, name);
        } else {
                *ret_error = xasprintf("root credentials Secret %s/%s: no state folder to find it "
                                       "in",
                                       ns, name);
                return -EINVAL;
        }
        char *user = NULL;
        _cleanup_free_ char *why = NULL;
        k = auth_password_read(dir, "username", &user, &why);
        if (k == -EPERM) {
                *ret_error = xasprintf("root credentials Secret %s/%s: %s", ns, name, why);
                return k;
        }
        if (k >= 0 && user && !streq(user, AUTH_ROOT)) {
                *ret_error = xasprintf("root credentials Secret %s/%s: its username is \"%s\"; "
                                       "gitcd sets root's password, so the key `username` must be "
                                       "root or absent",
                                       ns, name, user);
                auth_password_wipe(user);
                return -EINVAL;
        }
        auth_password_wipe(user);
        char *pw = NULL;
        k = auth_password_read(dir, "password", &pw, &why);
        if (k < 0 || !pw) {
                *ret_error =
                    k == -EPERM     ? xasprintf("root credentials Secret %s/%s: %s", ns, name, why)
                    : k == -ENODATA ? xasprintf("root credentials Secret %s/%s: its key `password` "
                                                "is empty",
                                                ns, name)
                    : k < 0
                        ? xasprintf("root credentials Secret %s/%s: cannot read %s/password: %s",
                                    ns, name, dir, strerror(-k))
                    : t && t->ops->secret_folder
                        ? xasprintf("root credentials Secret %s/%s has no key `password`", ns, name)
                        : xasprintf("root credentials Secret %s/%s: create %s/password (mode "
                                    "0600, the password on its first line)",
                                    ns, name, dir);
                return k < 0 ? k : -ENOKEY;
        }
        *ret = pw;
        return 0;
}

/* Steps done are audited; a failed one is retried, logged and reported by the pass. */
static void audit(const auth_env *env, const char *action, const char *reason)
{
        state_audit_event ev = {
            .time_ms = env->now_ms,
            .cluster = (char *)env->cluster,
            .commit = (char *)env->commit,
            .author = (char *)env->author,
            .action = (char *)action,
            .reason = (char *)reason,
            .outcome = "success",
        };
        if (state_audit_append(env->db, &ev, NULL) < 0)
                log_warn("%s: cannot record audit event %s: %s", env->cluster, action,
                         state_last_error());
}

typedef struct step_ctx {
        const auth_env *env;
        etcd_conn *conn;
        char **msg; /* the caller's message, replaced */
} step_ctx;

/* A failed etcd call: the message names the call; etcd's errors never hold a password. */
static int failed(step_ctx *s, const char *what, int k)
{
        str_assign(s->msg, xasprintf("%s: %s", what, s->env->etcd->last_error(s->conn)));
        return k;
}

static int say(step_ctx *s, int k, const char *fmt, ...) _printf_(3, 4);
static int say(step_ctx *s, int k, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        str_assign(s->msg, xvasprintf(fmt, ap));
        va_end(ap);
        return k;
}

/* Root exists with password, holds the root role. */
static int ensure_root(step_ctx *s, const char *password)
{
        const etcd_membership_ops *e = s->env->etcd;
        int k = e->user_add(s->conn, AUTH_ROOT, password);
        if (k == ETCD_ERR_USER_EXISTS)
                k = e->user_change_password(s->conn, AUTH_ROOT, password);
        if (k < 0)
                return failed(s, "creating etcd user root", k);
        FAILPOINT("auth.after-user");
        k = e->role_add(s->conn, AUTH_ROOT);
        if (k < 0 && k != ETCD_ERR_ROLE_EXISTS)
                return failed(s, "creating etcd role root", k);
        k = e->user_grant_role(s->conn, AUTH_ROOT, AUTH_ROOT);
        if (k < 0)
                return failed(s, "granting role root to user root", k);
        return 0;
}

/* root-password.etcd := password; the change is done. */
static int commit(step_ctx *s, const char *dir, const char *password)
{
        int k = auth_password_write(dir, "root-password.etcd", password);
        if (k >= 0)
                k = auth_password_remove(dir, "root-password.next");
        if (k < 0)
                return say(s, k, "cannot record the root password in %s: %s", dir, strerror(-k));
        return 0;
}

static bool refused(int k)
{
        return k == ETCD_ERR_AUTH_FAILED || k == ETCD_ERR_UNAUTHENTICATED ||
               k == ETCD_ERR_PERMISSION_DENIED;
}

/* With etcd's auth state known: one step toward the spec (auth_pass). */
static int act(step_ctx *s, const char *dir, bool on, const char *wanted, const char *next,
               const char *applied)
{
        const auth_env *env = s->env;
        int k;
        if (!env->want) {
                if (!on)
                        return 0;
                k = env->etcd->auth_disable(s->conn);
                if (k < 0)
                        return failed(s, "disabling etcd auth", k);
                say(s, 1, "etcd auth disabled");
                log_info("%s: etcd auth disabled", env->cluster);
                audit(env, "auth.disable", "spec.auth.enabled is false");
                return 1;
        }

        /* auth_pass reads or generates the wanted password whenever auth is wanted. */
        assert(wanted);
        /* A change cut short finishes first; then the password the operator wants. */
        const char *goal = next ? next : wanted;
        if (on && !next && applied && streq(applied, wanted))
                return 0;
        if (!next) {
                k = auth_password_write(dir, "root-password.next", goal);
                if (k < 0)
                        return say(s, k, "cannot write %s/root-password.next: %s", dir,
                                   strerror(-k));
        }
        FAILPOINT("auth.after-next");
        if (!on) {
                k = ensure_root(s, goal);
                if (k < 0)
                        return k;
                FAILPOINT("auth.before-enable");
                k = env->etcd->auth_enable(s->conn);
                if (k < 0)
                        return failed(s, "enabling etcd auth", k);
                FAILPOINT("auth.after-enable");
                k = commit(s, dir, goal);
                if (k < 0)
                        return k;
                say(s, 1, "etcd auth enabled (user root)");
                log_info("%s: etcd auth enabled; gitcd authenticates as root", env->cluster);
                audit(env, "auth.enable", "spec.auth.enabled is true");
                return 1;
        }
        k = env->etcd->user_change_password(s->conn, AUTH_ROOT, goal);
        if (k < 0)
                return failed(s, "changing the password of etcd user root", k);
        FAILPOINT("auth.after-change");
        k = commit(s, dir, goal);
        if (k < 0)
                return k;
        say(s, 1, "password of etcd user root changed");
        log_info("%s: password of etcd user root changed", env->cluster);
        audit(env, "auth.password-change", "root-password changed");
        return 1;
}

/*
 * The AuthEnabled condition, for clusters whose auth gitcd handles: True when
 * etcd's auth is on with the password gitcd holds; False with the reason.
 */
static void set_condition(const auth_env *env, int k, bool was_on, const char *msg)
{
        bool on = k > 0 ? env->want : was_on;
        const char *status = k >= 0 && on ? "True" : "False";
        const char *reason = k < 0 && refused(k) ? "PasswordRefused"
                             : k < 0             ? "AuthFailed"
                             : k > 0             ? (env->want ? "Enabled" : "Disabled")
                             : on                ? "Enabled"
                                                 : "Disabled";
        const char *message = k != 0 ? msg
                              : on   ? "etcd auth is on; gitcd authenticates as root"
                                     : "etcd auth is off";
        if (state_cluster_set_condition(env->db, env->cluster, "AuthEnabled", status, reason,
                                        message, env->now_ms) < 0)
                log_warn("%s: cannot record the AuthEnabled condition: %s", env->cluster,
                         state_last_error());
}

int auth_pass(const auth_env *env, char **msg)
{
        assert(env && env->etcd && env->cluster && msg);
        str_assign(msg, NULL);
        step_ctx s = {.env = env, .msg = msg};
        if (!env->state_dir)
                return env->want ? say(&s, -EINVAL,
                                       "spec.auth needs a state folder to keep the root password")
                                 : 0;
        if (!env->etcd->auth_status)
                return env->want ? say(&s, -EOPNOTSUPP, "this etcd connection cannot do auth") : 0;
        _cleanup_free_ char *dir = auth_credentials_dir(env->state_dir, env->cluster);
        char *wanted = NULL, *next = NULL, *applied = NULL;
        bool on = false;
        _cleanup_free_ char *why = NULL;
        int k = auth_password_read(dir, "root-password", &wanted, &why);
        if (k >= 0)
                k = auth_password_read(dir, "root-password.next", &next, &why);
        if (k >= 0)
                k = auth_password_read(dir, "root-password.etcd", &applied, &why);
        if (k < 0) {
                k = say(&s, k, "cannot read the root password files in %s: %s", dir,
                        why             ? why
                        : k == -ENODATA ? "a file is empty"
                                        : strerror(-k));
                goto out;
        }
        if (env->want && env->secret_error) {
                k = say(&s, -ENOKEY, "%s", env->secret_error);
                set_condition(env, k, false, *msg ? *msg : "");
                goto out;
        }
        if (env->want && env->secret_password && !streq_ptr(wanted, env->secret_password)) {
                k = auth_password_write(dir, "root-password", env->secret_password);
                if (k < 0) {
                        k = say(&s, k, "cannot write the root password into %s: %s", dir,
                                strerror(-k));
                        goto out;
                }
                auth_password_wipe(wanted);
                wanted = xstrdup(env->secret_password);
                log_info("%s: root's password from spec.auth.rootCredentialsSecretRef is new: it "
                         "becomes %s/root-password",
                         env->cluster, dir);
        }
        if (!env->want && !applied && !next) {
                k = 0; /* gitcd never set a password here: auth is not gitcd's to switch off */
                goto out;
        }
        if (env->want && !wanted) {
                wanted = new_password();
                k = wanted ? auth_password_write(dir, "root-password", wanted) : -EIO;
                if (k < 0) {
                        k = say(&s, k, "cannot write a new root password into %s: %s", dir,
                                strerror(-k));
                        goto out;
                }
                log_info("%s: generated the etcd root password into %s/root-password", env->cluster,
                         dir);
        }

        /*
         * The passwords etcd may have, likeliest first: the recorded one, a change
         * in flight, else the wanted one (a password given for a cluster whose
         * auth was switched on elsewhere).
         */
        const char *first = applied ? applied : next ? next : wanted;
        const char *second = applied && next ? next : wanted;
        etcd_conn_opts o = env->base;
        o.user = AUTH_ROOT;
        o.password = first;
        o.fallback_password = second && !streq(second, first) ? second : NULL;
        k = env->etcd->connect(env->etcd_userdata, &o, &s.conn);
        if (k < 0) {
                k = say(&s, k, "cannot connect to etcd for auth");
                goto out;
        }
        k = env->etcd->auth_status(s.conn, &on);
        if (k < 0)
                k = failed(&s, "reading etcd's auth status", k);
        else
                k = act(&s, dir, on, wanted, next, applied);
        if (refused(k)) {
                /* none of the passwords opens etcd: a change in flight never happened */
                (void)auth_password_remove(dir, "root-password.next");
                say(&s, k,
                    "etcd refuses root's password (was auth switched on or the password "
                    "changed outside gitcd?): write etcd's current root password into "
                    "%s/root-password",
                    dir);
        }
        set_condition(env, k, on, *msg ? *msg : "");
out:
        if (s.conn)
                env->etcd->disconnect(s.conn);
        auth_password_wipe(wanted);
        auth_password_wipe(next);
        auth_password_wipe(applied);
        return k;
}
