/*
 * A snapshot destination in a folder on the gitcd host (`local.path`).
 *
 * Decisions:
 * - Every path below the folder is walked one component at a time with
 *   openat(O_NOFOLLOW | O_DIRECTORY) and the file itself opened O_NOFOLLOW:
 *   a symlink planted inside the folder is refused (ELOOP), never followed,
 *   so a key can only ever touch files under the folder. The folder named in
 *   the spec is opened normally (it is the user's choice, and may be a link).
 * - A put writes a hidden temporary (".NAME.tmp.PID.RANDOM", created O_EXCL,
 *   0600) beside the final name, fsyncs it, renames it over the name and
 *   fsyncs the folder: a snapshot is either absent or whole, even after a
 *   crash. Keys never start with '.', so a temporary never looks like one.
 *   These are the only two fsyncs of a snapshot stored here: the file put
 *   reads from is a temporary nobody fsynced, so put hashes what it copies
 *   and refuses (-EBADMSG) bytes whose SHA-256 is not the one given.
 * - Snapshot files hold every key of a cluster: files and folders are 0600/0700.
 * - The SHA-256 given to put is kept in the extended attribute
 *   "user.gitcd.sha256" when the file system supports user attributes, and
 *   silently not kept otherwise (the state store records it anyway).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "snapstore/dest-internal.h"
#include "util/failpoint.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/xalloc.h"

#define SHA256_XATTR "user.gitcd.sha256"

typedef struct local_dest {
        char *folder;
} local_dest;

/* Copy everything from in to out in chunks; -EIO-style errno from either side. */
/* Copy in to out; with sha, hashing the bytes written. */
static int copy_fd(int in, int out, hash_ctx *sha)
{
        _cleanup_free_ char *buf = xmalloc(1 << 20);
        for (;;) {
                ssize_t n = read(in, buf, 1 << 20);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                if (sha)
                        hash_update(sha, buf, (size_t)n);
                int r = write_all(out, buf, (size_t)n);
                if (r < 0)
                        return r;
        }
}

/*
 * Open the folder that holds key's last component, walking from the root
 * without following symlinks; with create, missing folders are made 0700.
 * *ret_name points into key at the last component.
 */
static int open_parent(const local_dest *l, const char *key, bool create, int *ret_fd,
                       const char **ret_name, char **ret_error)
{
        if (create) {
                int r = mkdir_p(l->folder, 0700);
                if (r < 0)
                        return dest_fail(ret_error, r, "cannot create snapshot folder %s: %s",
                                         l->folder, strerror(-r));
        }
        int fd = open(l->folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return dest_fail(ret_error, -errno, "snapshot folder %s: %s", l->folder,
                                 strerror(errno));
        _cleanup_free_ char *k = xstrdup(key);
        char *c = k;
        for (char *slash; (slash = strchr(c, '/')); c = slash + 1) {
                *slash = '\0';
                if (create && mkdirat(fd, c, 0700) < 0 && errno != EEXIST) {
                        int e = -errno;
                        close(fd);
                        return dest_fail(ret_error, e, "cannot create %s/%s: %s", l->folder, k,
                                         strerror(-e));
                }
                int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int e = -errno;
                /* Linux says ENOTDIR, not ELOOP, for a symlink opened O_DIRECTORY | O_NOFOLLOW. */
                struct stat st;
                if (next < 0 && e == -ENOTDIR && fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISLNK(st.st_mode))
                        e = -ELOOP;
                close(fd);
                if (next < 0) {
                        if (e == -ELOOP)
                                return dest_fail(ret_error, -ELOOP,
                                                 "%s/%s is a symlink (never followed inside the "
                                                 "snapshot folder)",
                                                 l->folder, k);
                        if (e == -ENOTDIR)
                                return dest_fail(ret_error, -ENOTDIR, "%s/%s is not a folder",
                                                 l->folder, k);
                        return dest_fail(ret_error, e, "%s/%s: %s", l->folder, k, strerror(-e));
                }
                fd = next;
                *slash = '/';
        }
        *ret_fd = fd;
        *ret_name = key + (c - k);
        return 0;
}

/* Open the file for key read-only; a symlink or a non-file is refused. */
static int open_key(const local_dest *l, const char *key, int *ret_fd, struct stat *ret_st,
                    char **ret_error)
{
        _cleanup_close_ int dfd = -1;
        const char *name = NULL;
        int r = open_parent(l, key, false, &dfd, &name, ret_error);
        if (r < 0)
                return r;
        assert(name);
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ELOOP)
                        return dest_fail(ret_error, -ELOOP,
                                         "%s/%s is a symlink (never followed inside the snapshot "
                                         "folder)",
                                         l->folder, key);
                return dest_fail(ret_error, -errno, "%s/%s: %s", l->folder, key, strerror(errno));
        }
        if (fstat(fd, ret_st) < 0)
                return dest_fail(ret_error, -errno, "%s/%s: %s", l->folder, key, strerror(errno));
        if (!S_ISREG(ret_st->st_mode))
                return dest_fail(ret_error, -EISDIR, "%s/%s is not a regular file", l->folder, key);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static char *temporary_name(const char *name)
{
        uint64_t r = 0;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
                r = (uint64_t)(uintptr_t)&r ^ (uint64_t)getpid() << 32;
        return xasprintf(".%s.tmp.%ld.%016llx", name, (long)getpid(), (unsigned long long)r);
}

static int local_put(void *impl, const char *key, const char *path, const char *sha256_hex,
                     char **ret_error)
{
        local_dest *l = impl;
        _cleanup_close_ int in = open(path, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return dest_fail(ret_error, -errno, "cannot read %s: %s", path, strerror(errno));
        struct stat st;
        if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
                return dest_fail(ret_error, -EINVAL, "%s is not a regular file", path);

        _cleanup_close_ int dfd = -1;
        const char *name;
        int r = open_parent(l, key, true, &dfd, &name, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *tmp = NULL;
        int out = -1, e = EEXIST;
        for (int attempt = 0; out < 0 && e == EEXIST && attempt < 16; attempt++) {
                free(tmp);
                tmp = temporary_name(name);
                out = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                e = out < 0 ? errno : 0;
        }
        if (out < 0)
                return dest_fail(ret_error, -e, "cannot create a temporary in %s: %s", l->folder,
                                 strerror(e));
        hash_ctx *sha = hash_sha256_new();
        r = copy_fd(in, out, sha);
        char copied[HASH_SHA256_HEX];
        hash_final_hex(sha, copied);
        hash_free(sha);
        /* the caller's file is a temporary nobody fsynced: what reaches the
         * folder must be the bytes the SHA-256 was taken of */
        if (r == 0 && sha256_hex && !streq(copied, sha256_hex)) {
                (void)close(out);
                (void)unlinkat(dfd, tmp, 0);
                return dest_fail(ret_error, -EBADMSG,
                                 "cannot store %s as %s/%s: it read back with SHA-256 %s, not %s",
                                 path, l->folder, key, copied, sha256_hex);
        }
        if (r == 0 && sha256_hex &&
            fsetxattr(out, SHA256_XATTR, sha256_hex, strlen(sha256_hex), 0) < 0 &&
            errno != ENOTSUP && errno != EOPNOTSUPP && errno != EPERM)
                r = -errno;
        if (r == 0 && fsync(out) < 0)
                r = -errno;
        if (close(out) < 0 && r == 0)
                r = -errno;
        if (r == 0)
                FAILPOINT("dest-local.before-rename");
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dfd, tmp, 0);
                return dest_fail(ret_error, r, "cannot store %s as %s/%s: %s", path, l->folder, key,
                                 strerror(-r));
        }
        if (fsync(dfd) < 0 && errno != EINVAL)
                return dest_fail(ret_error, -errno, "cannot sync %s: %s", l->folder,
                                 strerror(errno));
        return 0;
}

static int local_get(void *impl, const char *key, const char *path, char **ret_error)
{
        local_dest *l = impl;
        _cleanup_close_ int in = -1;
        struct stat st;
        int r = open_key(l, key, &in, &st, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *part = xasprintf("%s.part", path);
        int out = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return dest_fail(ret_error, -errno, "cannot write %s: %s", part, strerror(errno));
        r = copy_fd(in, out, NULL);
        if (r < 0) {
                close(out);
                (void)unlink(part);
                return dest_fail(ret_error, r, "cannot copy %s/%s to %s: %s", l->folder, key, part,
                                 strerror(-r));
        }
        r = dest_commit_part(out, part, path);
        if (r < 0)
                return dest_fail(ret_error, r, "cannot write %s: %s", path, strerror(-r));
        return 0;
}

static int local_delete(void *impl, const char *key, char **ret_error)
{
        local_dest *l = impl;
        _cleanup_close_ int dfd = -1;
        const char *name;
        int r = open_parent(l, key, false, &dfd, &name, ret_error);
        if (r < 0)
                return r;
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return dest_fail(ret_error, -errno, "%s/%s: %s", l->folder, key, strerror(errno));
        if (!S_ISREG(st.st_mode))
                return dest_fail(ret_error, -EISDIR,
                                 "%s/%s is not a snapshot file; not deleting it", l->folder, key);
        if (unlinkat(dfd, name, 0) < 0)
                return dest_fail(ret_error, -errno, "cannot delete %s/%s: %s", l->folder, key,
                                 strerror(errno));
        if (fsync(dfd) < 0 && errno != EINVAL)
                return dest_fail(ret_error, -errno, "cannot sync %s: %s", l->folder,
                                 strerror(errno));
        return 0;
}

static int local_stat(void *impl, const char *key, dest_object *ret, char **ret_error)
{
        local_dest *l = impl;
        _cleanup_close_ int fd = -1;
        struct stat st = {0};
        int r = open_key(l, key, &fd, &st, ret_error);
        if (r < 0)
                return r;
        char sha[65];
        ssize_t n = fgetxattr(fd, SHA256_XATTR, sha, sizeof(sha) - 1);
        ret->key = xstrdup(key);
        ret->size = st.st_size;
        ret->mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        if (n == 64) {
                sha[64] = '\0';
                ret->sha256_hex = xstrdup(sha);
        }
        return 0;
}

static char *local_location(const void *impl, const char *key)
{
        const local_dest *l = impl;
        return path_join(l->folder, key);
}

static void local_free(void *impl)
{
        local_dest *l = impl;
        free(l->folder);
        free(l);
}

static const snapshot_dest_ops local_ops = {
    .kind = "local",
    .put_file = local_put,
    .get_file = local_get,
    .delete_key = local_delete,
    .stat_key = local_stat,
    .location = local_location,
    .free_impl = local_free,
};

snapshot_dest *dest_local_new(const char *folder)
{
        assert(folder && folder[0] == '/');
        local_dest *l = XNEW(local_dest);
        l->folder = xstrdup(folder);
        size_t n = strlen(l->folder);
        while (n > 1 && l->folder[n - 1] == '/')
                l->folder[--n] = '\0';
        return snapshot_dest_new(&local_ops, l);
}
