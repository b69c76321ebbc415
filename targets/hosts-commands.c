/*
 * The hosts target's commands on a machine: every command goes through
 * ssh_step (the wrapper's shared lock let go, a pooled connection lent to one
 * thread), runs through `sudo -n` for a user other than root, and writes
 * files by an atomic upload; a failed command's message names the machine.
 * Design: targets/hosts.c.
 */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include "targets/locked.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

char *hosts_command(const host_spec *h, const char *cmd)
{
        if (streq(h->ssh_user, "root"))
                return xstrdup(cmd);
        _cleanup_free_ char *q = ssh_quote(cmd);
        return xasprintf("sudo -n sh -c %s", q);
}

char *hosts_install_command(const host_spec *h, const char *path, mode_t mode)
{
        _cleanup_free_ char *cmd = hosts_install_script(path, mode);
        return hosts_command(h, cmd);
}

char *hosts_install_script(const char *path, mode_t mode)
{
        const char *slash = strrchr(path, '/');
        assert(slash);
        _cleanup_free_ char *dir = xstrndup(path, (size_t)(slash - path));
        /* mktemp creates it exclusively (O_EXCL, mode 0600) under a name nobody can guess */
        _cleanup_free_ char *tmpl = xasprintf("%s/.%s.gitcd-XXXXXXXXXX", dir, slash + 1);
        _cleanup_free_ char *qt = ssh_quote(tmpl), *qp = ssh_quote(path);
        return xasprintf(
            "umask 077 && t=$(mktemp %s) && { cat > \"$t\" && chmod %04o \"$t\" && sync \"$t\" "
            "&& mv -f -- \"$t\" %s || { rm -f -- \"$t\"; exit 1; }; }",
            qt, (unsigned)(mode & 07777), qp);
}

/*
 * One SSH step on machine h, on the connection the pool lends this thread:
 * a command (cmd, with in on its standard input) or, with path, an SFTP
 * upload of in. Runs with the target's shared lock let go
 * (targets/locked.h): it touches nothing of the target's but the pool,
 * which has its own lock, so a slow or unreachable machine holds up only
 * the callers that want that machine. *ret_error: the transport's message
 * when the result is negative.
 */
static int ssh_step(hosts_target *ht, const host_spec *h, const char *cmd, const char *path,
                    const void *in, size_t in_len, mode_t mode, int *ret_status, char **ret_out,
                    char **ret_stderr, char **ret_error)
{
        ssh_conn *c = NULL;
        target_blocking_begin();
        int k = ssh_pool_get(ht->pool, h->address, h->ssh_port, h->ssh_user, &c, ret_error);
        if (k >= 0) {
                k = path ? ssh_upload(c, path, in, in_len, mode)
                         : ssh_exec(c, cmd, in, in_len, ret_status, ret_out, ret_stderr);
                if (k < 0)
                        *ret_error = xstrdup(ssh_last_error(c));
                ssh_pool_put(ht->pool, c);
        }
        target_blocking_end();
        return k;
}

/* Its text without trailing blanks (the newline sudo or the command ended with). */
static char *message_of(const char *err)
{
        size_t n = err ? strlen(err) : 0;
        while (n > 0 && strchr(" \t\r\n", err[n - 1]))
                n--;
        return n ? xstrndup(err, n) : xstrdup("no message");
}

/*
 * A failed command's message. Through sudo a non-zero exit is the
 * command's or sudo's own refusal, and sudo's stderr cannot tell which:
 * sudo writes warnings on every run ("sudo: unable to resolve host ...",
 * on a machine whose own name does not resolve) and its messages are
 * translated. So the machine is asked once more, `sudo -n sh -c true`
 * (the same form, nothing to fail but sudo): when that fails too, sudo
 * refused (its message says why: no password-less sudo, or no sudo at
 * all); else the command failed, with its own message.
 */
int ht_command_failed(hosts_target *ht, const host_spec *h, const char *cmd, int status,
                      const char *err)
{
        _cleanup_free_ char *msg = message_of(err);
        if (!streq(h->ssh_user, "root")) {
                _cleanup_free_ char *serr = NULL, *transport = NULL;
                int sstatus = -1;
                int k = ssh_step(ht, h, "sudo -n sh -c true", NULL, NULL, 0, 0, &sstatus, NULL,
                                 &serr, &transport);
                if (k >= 0 && sstatus != 0) {
                        _cleanup_free_ char *why = message_of(serr);
                        return target_fail(&ht->base, -EACCES,
                                           "%s: `sudo -n` refused for user %s (%s); gitcd needs "
                                           "password-less sudo there (docs/hosts.md)",
                                           h->address, h->ssh_user, why);
                }
        }
        return target_fail(&ht->base, -EIO, "%s: `%s` failed (exit %d): %s", h->address, cmd,
                           status, msg);
}

/* Forget the probes of machine h (NULL: of every machine). */
void ht_forget_probes(hosts_target *ht, const host_spec *h)
{
        _cleanup_free_ char *key = h ? machine_key(h) : NULL;
        size_t kept = 0;
        for (size_t i = 0; i < ht->n_cache; i++) {
                probe_cache *e = &ht->cache[i];
                if (key && !streq(e->machine, key)) {
                        ht->cache[kept++] = *e;
                        continue;
                }
                free(e->machine);
                free(e->command);
                free(e->out);
        }
        ht->n_cache = kept;
}

int ht_run_input(hosts_target *ht, const host_spec *h, const char *cmd, const void *in,
                 size_t in_len, char **ret_out)
{
        ht_forget_probes(ht, h);
        return ht_exec_cmd(ht, h, cmd, in, in_len, ret_out);
}

int ht_exec_cmd(hosts_target *ht, const host_spec *h, const char *cmd, const void *in,
                size_t in_len, char **ret_out)
{
        _cleanup_free_ char *out = NULL, *err = NULL, *transport = NULL;
        _cleanup_free_ char *full = hosts_command(h, cmd);
        int status = -1;
        int k = ssh_step(ht, h, full, NULL, in, in_len, 0, &status, &out, &err, &transport);
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, transport);
        if (status != 0)
                return ht_command_failed(ht, h, cmd, status, err);
        if (ret_out)
                *ret_out = TAKE_PTR(out);
        return 0;
}

/*
 * Write a file on machine h atomically. As root through SFTP
 * (ssh_upload); as another user SFTP cannot write the machine's folders,
 * so the content goes on the standard input of `sudo -n sh -c` that
 * writes a temporary file under umask 077, sets the mode, fsyncs and
 * renames it (hosts_install_command): the same guarantees.
 */
int ht_upload(hosts_target *ht, const host_spec *h, const char *path, const void *data, size_t len,
              mode_t mode)
{
        ht_forget_probes(ht, h);
        _cleanup_free_ char *transport = NULL;
        if (streq(h->ssh_user, "root")) {
                int k = ssh_step(ht, h, NULL, path, data, len, mode, NULL, NULL, NULL, &transport);
                if (k < 0)
                        return target_fail(&ht->base, k, "%s: %s", h->address, transport);
                return 0;
        }
        _cleanup_free_ char *cmd = hosts_install_command(h, path, mode);
        _cleanup_free_ char *err = NULL;
        int status = -1;
        int k = ssh_step(ht, h, cmd, NULL, data, len, mode, &status, NULL, &err, &transport);
        if (k < 0)
                return target_fail(&ht->base, k, "%s: %s", h->address, transport);
        if (status != 0)
                return ht_command_failed(ht, h, "writing", status, err);
        return 0;
}
