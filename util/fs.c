/*
 * File-system helpers; see util/fs.h. Paths are plain C strings; nothing
 * here logs.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static int read_fd(int fd, size_t max_size, char **ret_data, size_t *ret_len)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (S_ISREG(st.st_mode) && (size_t)st.st_size > max_size)
                return -EFBIG;
        strbuf sb = STRBUF_INIT;
        char chunk[65536];
        for (;;) {
                ssize_t r = read(fd, chunk, sizeof(chunk));
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        int e = -errno;
                        sb_release(&sb);
                        return e;
                }
                if (r == 0)
                        break;
                if (sb.len + (size_t)r > max_size) {
                        sb_release(&sb);
                        return -EFBIG;
                }
                sb_append_len(&sb, chunk, (size_t)r);
        }
        *ret_len = sb.len;
        *ret_data = sb_detach(&sb);
        return 0;
}

int read_file(const char *path, size_t max_size, char **ret_data, size_t *ret_len)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return read_fd(fd, max_size, ret_data, ret_len);
}

/* Whether gid is the group gitcd runs as or one of its supplementary groups. */
static bool in_own_group(gid_t gid)
{
        if (gid == getegid())
                return true;
        gid_t groups[256];
        int n = getgroups((int)ARRAY_SIZE(groups), groups);
        for (int i = 0; i < n; i++)
                if (groups[i] == gid)
                        return true;
        return false;
}

/* The name of gitcd's user for a chown command line, or its uid. */
static char *own_user_name(void)
{
        struct passwd pw, *found = NULL;
        char buf[1024];
        if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &found) == 0 && found)
                return xstrdup(found->pw_name);
        return xasprintf("%u", (unsigned)geteuid());
}

static int secret_stat_check(const struct stat *st, const char *path, const char *what,
                             char **ret_err)
{
        uid_t me = geteuid();
        mode_t perm = st->st_mode & 07777;
        bool ok;
        if (st->st_uid == me)
                ok = (perm & 077) == 0;
        else if (st->st_uid == 0)
                ok = (perm & 027) == 0 && (!(perm & 040) || in_own_group(st->st_gid));
        else
                ok = false;
        if (ok)
                return 0;
        _cleanup_free_ char *user = own_user_name();
        if (st->st_uid != me && st->st_uid != 0)
                *ret_err = xasprintf("the %s %s belongs to uid %u, not to gitcd's user %s: run "
                                     "`chown %s '%s' && chmod 600 '%s'`",
                                     what, path, (unsigned)st->st_uid, user, user, path, path);
        else if (st->st_uid == me)
                *ret_err = xasprintf("the %s %s can be read or changed by other users (mode "
                                     "%04o): run `chmod 600 '%s'`",
                                     what, path, (unsigned)perm, path);
        else
                *ret_err =
                    xasprintf("the %s %s belongs to root and can be read or changed by "
                              "users other than gitcd's (mode %04o, group %u): run "
                              "`chown %s '%s' && chmod 600 '%s'`",
                              what, path, (unsigned)perm, (unsigned)st->st_gid, user, path, path);
        return -EPERM;
}

int secret_file_check(const char *path, const char *what, char **ret_err)
{
        assert(path && what && ret_err);
        struct stat st = {0};
        if (stat(path, &st) < 0) {
                int k = -errno;
                *ret_err = xasprintf("cannot read the %s %s: %s", what, path, strerror(-k));
                return k;
        }
        return secret_stat_check(&st, path, what, ret_err);
}

int read_secret_file(const char *path, const char *what, size_t max_size, char **ret_data,
                     size_t *ret_len, char **ret_err)
{
        assert(path && what && ret_data && ret_len && ret_err);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st = {0};
        int k = 0;
        if (fd < 0 || fstat(fd, &st) < 0)
                k = errno > 0 ? -errno : -EIO;
        if (k >= 0 && (k = secret_stat_check(&st, path, what, ret_err)) < 0)
                return k;
        if (k >= 0)
                k = read_fd(fd, max_size, ret_data, ret_len); /* the file checked is the one read */
        if (k < 0)
                *ret_err = xasprintf("cannot read the %s %s: %s", what, path, strerror(-k));
        return k;
}

/* A name for a temporary next to path that nobody can guess in advance. */
static char *temporary_name(const char *path)
{
        static unsigned counter;
        uint64_t r = 0;
        if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
                r = ((uint64_t)time(NULL) << 20) ^ (uint64_t)clock() ^ ++counter;
        return xasprintf("%s.tmp.%ld.%016llx", path, (long)getpid(), (unsigned long long)r);
}

int write_all(int fd, const void *data, size_t len)
{
        const char *p = data;
        while (len > 0) {
                ssize_t w = write(fd, p, len);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += w;
                len -= (size_t)w;
        }
        return 0;
}

int fsync_parent_dir(const char *path)
{
        _cleanup_free_ char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        if (!slash)
                strcpy(dir, ".");
        else if (slash == dir)
                dir[1] = '\0';
        else
                *slash = '\0';
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* Some file systems cannot sync a folder (EINVAL): nothing more can be done there. */
        if (fsync(fd) < 0 && errno != EINVAL)
                return -errno;
        return 0;
}

/*
 * The temporary is created new (O_EXCL: whatever sits at its name, a
 * symlink planted by someone who can write the folder included, is never
 * opened, truncated or followed), under a name that cannot be guessed,
 * then written, synced, renamed over path, and the folder synced so the
 * rename itself is durable.
 */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
        assert(path);
        _cleanup_free_ char *tmp = NULL;
        int fd = -1;
        for (int attempt = 0; fd < 0 && attempt < 16; attempt++) {
                free(tmp);
                tmp = temporary_name(path);
                fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd < 0 && errno != EEXIST)
                        return -errno;
        }
        if (fd < 0)
                return -EEXIST;
        int k = write_all(fd, data, len);
        if (k == 0 && fsync(fd) < 0)
                k = -errno;
        if (close(fd) < 0 && k == 0)
                k = -errno;
        if (k == 0 && rename(tmp, path) < 0)
                k = -errno;
        if (k < 0) {
                (void)unlink(tmp);
                return k;
        }
        return fsync_parent_dir(path);
}

int mkdir_p(const char *path, mode_t mode)
{
        _cleanup_free_ char *p = xstrdup(path);
        size_t len = strlen(p);
        while (len > 1 && p[len - 1] == '/')
                p[--len] = '\0';
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return path_is_dir(p) ? 0 : -ENOTDIR;
}

int rm_rf(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *child = path_join(path, de->d_name);
                int k = rm_rf(child);
                if (k < 0 && r == 0)
                        r = k;
        }
        closedir(d);
        if (rmdir(path) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

bool path_exists(const char *path)
{
        return access(path, F_OK) == 0;
}

bool path_is_dir(const char *path)
{
        struct stat st;
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *path_join(const char *a, const char *b)
{
        size_t la = strlen(a);
        if (la > 0 && a[la - 1] == '/')
                return xasprintf("%s%s", a, b);
        return xasprintf("%s/%s", a, b);
}

void path_list_add(path_list *l, const char *path)
{
        l->paths = xgrow(l->paths, &l->alloc, l->n + 1, sizeof(char *));
        l->paths[l->n++] = xstrdup(path);
}

void path_list_release(path_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->paths[i]);
        free(l->paths);
        l->paths = NULL;
        l->n = l->alloc = 0;
}

static bool has_suffix(const char *name, const char *const *suffixes)
{
        size_t ln = strlen(name);
        for (size_t i = 0; suffixes && suffixes[i]; i++) {
                size_t ls = strlen(suffixes[i]);
                if (ln > ls && streq(name + ln - ls, suffixes[i]))
                        return true;
        }
        return false;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk(const char *dir, const char *const *suffixes, path_list *out, int depth)
{
        if (depth > 64)
                return -ELOOP;
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        path_list names = {0};
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        path_list_add(&names, de->d_name);
        closedir(d);
        if (names.n > 1) /* an empty folder has no array at all: qsort(NULL) is undefined */
                qsort(names.paths, names.n, sizeof(char *), cmp_str);
        int r = 0;
        for (size_t i = 0; i < names.n && r == 0; i++) {
                _cleanup_free_ char *child = path_join(dir, names.paths[i]);
                struct stat st;
                if (stat(child, &st) < 0)
                        continue; /* dangling link */
                if (S_ISDIR(st.st_mode))
                        r = walk(child, suffixes, out, depth + 1);
                else if (S_ISREG(st.st_mode) && has_suffix(names.paths[i], suffixes))
                        path_list_add(out, child);
        }
        path_list_release(&names);
        return r;
}

int expand_paths(char *const *paths, size_t n, const char *const *suffixes, path_list *out,
                 const char **ret_bad_path)
{
        for (size_t i = 0; i < n; i++) {
                struct stat st;
                if (stat(paths[i], &st) < 0) {
                        if (ret_bad_path)
                                *ret_bad_path = paths[i];
                        return -errno;
                }
                if (S_ISDIR(st.st_mode)) {
                        int r = walk(paths[i], suffixes, out, 0);
                        if (r < 0) {
                                if (ret_bad_path)
                                        *ret_bad_path = paths[i];
                                return r;
                        }
                } else
                        path_list_add(out, paths[i]);
        }
        return 0;
}

/* The pid written in a lock file, 0 when unreadable. */
static pid_t lock_file_pid(int fd)
{
        char buf[32] = {0};
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
                return 0;
        long v = strtol(buf, NULL, 10);
        return v > 0 && v < INT32_MAX ? (pid_t)v : 0;
}

/*
 * An open-file-description lock (F_OFD_SETLK), not a classic POSIX record
 * lock: it belongs to this open file, so closing some other descriptor of
 * the same file elsewhere in the process cannot drop it, and with
 * O_CLOEXEC no exec'd child keeps it. Such locks do not report their
 * holder, so the holder writes its pid into the file.
 */
int lock_file_try(const char *path, int *ret_fd, pid_t *ret_holder)
{
        assert(path && ret_fd);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        int k;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
                k = errno == EAGAIN || errno == EACCES ? -EAGAIN : -errno;
                if (k == -EAGAIN && ret_holder)
                        *ret_holder = lock_file_pid(fd);
                goto fail;
        }
        char pid[32];
        int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
                k = errno ? -errno : -EIO;
                goto fail;
        }
        *ret_fd = fd;
        return 0;
fail:
        close(fd);
        return k;
}

static int list_tree_at(const char *dir, const char *rel, path_list *files, path_list *dirs)
{
        _cleanup_free_ char *here = rel ? path_join(dir, rel) : xstrdup(dir);
        DIR *d = opendir(here);
        if (!d)
                return -errno;
        int r = 0;
        struct dirent *e;
        while (r >= 0 && (e = readdir(d))) {
                if (streq(e->d_name, ".") || streq(e->d_name, ".."))
                        continue;
                _cleanup_free_ char *sub = rel ? path_join(rel, e->d_name) : xstrdup(e->d_name);
                _cleanup_free_ char *full = path_join(dir, sub);
                struct stat st;
                if (lstat(full, &st) < 0) {
                        r = -errno;
                } else if (S_ISDIR(st.st_mode)) {
                        path_list_add(dirs, sub);
                        r = list_tree_at(dir, sub, files, dirs);
                } else if (S_ISREG(st.st_mode)) {
                        path_list_add(files, sub);
                }
        }
        closedir(d);
        return r;
}

int list_tree(const char *dir, path_list *ret_files, path_list *ret_dirs)
{
        assert(dir && ret_files && ret_dirs);
        return list_tree_at(dir, NULL, ret_files, ret_dirs);
}
