/*
 * File-system helpers shared by the CLI, the state store and the local
 * target. All return 0 or a negative errno.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct path_list {
        char **paths;
        size_t n;
        size_t alloc;
} path_list;

/* Read a whole file; -EFBIG if it is larger than max_size bytes. The result is NUL-terminated. */
int read_file(const char *path, size_t max_size, char **ret_data, size_t *ret_len);
/*
 * Write all len bytes to fd, through short writes and signal
 * interruptions: 0, or -errno from write().
 */
int write_all(int fd, const void *data, size_t len);

/*
 * Files holding a secret gitcd reads (a token, a password, a private key,
 * S3 credentials) must be its own and nobody else's: they belong to
 * gitcd's user and give its group and others no access at all (chmod 600);
 * or, as Kubernetes mounts a Secret with fsGroup, they belong to root, may
 * be read (not written) by a group gitcd runs in, and give others nothing.
 * Anything else is -EPERM with *ret_err (newly allocated, no secret in it)
 * naming the file, its owner or mode, and the chmod/chown to run; what
 * names the file in it ("token file", "TLS key"). Other failures are
 * -errno with *ret_err as well.
 *
 * secret_file_check() looks at the file path names (following links) for
 * files another library opens (libssh2's key files); read_secret_file()
 * checks the file it opened and reads it, as read_file().
 */
int secret_file_check(const char *path, const char *what, char **ret_err);
int read_secret_file(const char *path, const char *what, size_t max_size, char **ret_data,
                     size_t *ret_len, char **ret_err);
/*
 * fsync the folder holding path, so that a rename into it survives a
 * crash. 0, or -errno; a file system that cannot sync a folder (EINVAL)
 * counts as done.
 */
int fsync_parent_dir(const char *path);

/*
 * Write data to path atomically: a new temporary beside it (O_EXCL |
 * O_NOFOLLOW, an unguessable name), fsync, rename over path, fsync of the
 * folder. Readers see the old content or the new, never a part; a symlink
 * at the temporary's name is never followed.
 */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* mkdir -p with the given mode for created directories. */
int mkdir_p(const char *path, mode_t mode);
/* rm -rf; a missing path is not an error. */
int rm_rf(const char *path);
bool path_exists(const char *path);
bool path_is_dir(const char *path);
char *path_join(const char *a, const char *b);
/*
 * Expand files and directories into the sorted list of files ending in one
 * of the given suffixes (e.g. ".yaml", ".yml"). Directories are walked
 * recursively; hidden entries (".git") are skipped; symlinks to files are
 * followed. A path named directly is always kept, whatever its suffix.
 * -ENOENT for a missing path (which is reported through ret_bad_path).
 */
int expand_paths(char *const *paths, size_t n, const char *const *suffixes, path_list *out,
                 const char **ret_bad_path);
/*
 * Take an exclusive lock on path (an open-file-description lock on a file
 * created 0600 when missing; a symlink is refused) without waiting, and
 * write this process's pid into it. On success *ret_fd holds the lock until
 * it is closed or the process exits (it is close-on-exec). -EAGAIN when
 * another holds it (the pid it wrote in *ret_holder, 0 when not written
 * yet), or another -errno.
 */
int lock_file_try(const char *path, int *ret_fd, pid_t *ret_holder);
void path_list_add(path_list *l, const char *path);
/*
 * The regular files and the folders under dir, as paths relative to it
 * (a folder before what it holds); symbolic links and other kinds of
 * file are left out. Appends to ret_files and ret_dirs.
 */
int list_tree(const char *dir, path_list *ret_files, path_list *ret_dirs);
void path_list_release(path_list *l);
