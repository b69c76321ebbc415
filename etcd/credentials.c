/*
 * A cluster's etcd root credentials on gitcd's host (etcd/credentials.h).
 *
 * Design: the files are the journal of what etcd's root password is (the
 * auth step writes root-password.next before etcd gets a password, and
 * root-password.etcd once it has it), so whoever makes a client of the
 * cluster reads them here and nowhere else: the reconciler, snapshots,
 * `gitcd etcd`. Every password read is wiped when it is freed.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd/credentials.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define PASSWORD_MAX 4096

char *auth_credentials_dir(const char *state_dir, const char *cluster)
{
        _cleanup_free_ char *sub = xasprintf("auth/%s", cluster);
        return path_join(state_dir, sub);
}

void auth_password_wipe(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

int auth_password_read(const char *dir, const char *name, char **ret, char **ret_why)
{
        _cleanup_free_ char *path = path_join(dir, name);
        _cleanup_free_ char *why = NULL;
        char *data = NULL;
        size_t len = 0;
        int k = read_secret_file(path, "password file", PASSWORD_MAX, &data, &len, &why);
        if (k == -ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (k == -EPERM && ret_why)
                *ret_why = TAKE_PTR(why);
        if (k < 0)
                return k;
        data[strcspn(data, "\r\n")] = '\0';
        if (!data[0]) {
                auth_password_wipe(data);
                return -ENODATA;
        }
        *ret = data;
        return 0;
}

int auth_password_write(const char *dir, const char *name, const char *password)
{
        int k = mkdir_p(dir, 0700);
        if (k < 0)
                return k;
        _cleanup_free_ char *path = path_join(dir, name);
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, "%s\n", password);
        k = write_file_atomic(path, sb_str(&sb), sb.len, 0600);
        explicit_bzero(sb.buf, sb.len);
        sb_release(&sb);
        return k;
}

int auth_password_remove(const char *dir, const char *name)
{
        _cleanup_free_ char *path = path_join(dir, name);
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return fsync_parent_dir(path);
}

int auth_credentials(const char *state_dir, const char *cluster, auth_creds *ret)
{
        assert(cluster && ret);
        *ret = (auth_creds){0};
        if (!state_dir)
                return 0;
        _cleanup_free_ char *dir = auth_credentials_dir(state_dir, cluster);
        char *applied = NULL, *next = NULL;
        int k = auth_password_read(dir, "root-password.etcd", &applied, NULL);
        if (k >= 0)
                k = auth_password_read(dir, "root-password.next", &next, NULL);
        if (k < 0) {
                auth_password_wipe(applied);
                return k;
        }
        if (!applied && !next)
                return 0;
        ret->user = xstrdup(AUTH_ROOT);
        if (applied) {
                ret->password = applied;
                ret->fallback_password = next;
        } else {
                ret->password = next;
        }
        return 0;
}

void auth_creds_release(auth_creds *a)
{
        if (!a)
                return;
        free(a->user);
        auth_password_wipe(a->password);
        auth_password_wipe(a->fallback_password);
        *a = (auth_creds){0};
}
