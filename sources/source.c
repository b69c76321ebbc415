/*
 * Sources (see source.h): option checking, the plain-directory reader, and
 * the revision type. Git work is delegated to git.c.
 *
 * Design decision: source_open() checks everything that can be checked
 * without the network (missing files, conflicting options, SSH without
 * known_hosts, credentials over plain HTTP) so a misconfiguration is
 * reported once, up front, instead of at every poll. The options are copied:
 * the caller's strings need not outlive the call. A plain directory is read
 * with the same rules as a Git tree (YAML only, hidden entries ignored,
 * symlinks and oversized files skipped with a note) so switching a source
 * between a checkout and its repository never changes what is read.
 *
 * A refused revision is remembered for as long as the remote's ref names
 * the same object (and allowed_signers and the applied-heads file are
 * unchanged): a poll then costs one listing of the remote's refs and
 * returns the same refusal, marked as repeated, so the caller does not
 * audit it again.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sources/git.h"
#include "sources/heads.h"
#include "sources/revision.h"
#include "sources/source.h"
#include "sources/sshwire.h"
#include "sources/url.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define SSH_KEY_MAX_SIZE (64u * 1024u)

typedef enum source_kind { SOURCE_DIRECTORY, SOURCE_GIT } source_kind;

/* Enough of a file's stat to notice that it was replaced or edited. */
typedef struct file_stamp {
        bool exists;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
} file_stamp;

struct source {
        source_kind kind;
        source_opts opts; /* deep copy */
        source_url url;
        char *root;        /* directory sources: absolute path */
        char *mirror_path; /* Git sources */
        char *heads_path;  /* Git sources: the last applied commit per ref (heads.h) */
        char *subpath;     /* normalised: no leading or trailing '/', NULL for the root */
        char *error;
        /*
         * The last refused revision (without files), its message, and the
         * allowed_signers file as it was then: while the head stays the
         * same and the file unchanged, the refusal is repeated, not redone.
         */
        source_revision *refused;
        char *refused_error;
        char refused_head[41]; /* the object the ref named (a tag's, or the commit's) */
        file_stamp refused_signers, refused_heads;
        size_t read_total; /* bytes read by the current directory fetch */
        bool git_initialised;
        git_fetch_job *job; /* a fetch in flight (source_fetch_start), or NULL */
        char *job_error;    /* why the last source_fetch_start() failed, for source_fetch() */
        int job_r;          /* and its errno */
};

static void opts_copy(source_opts *dst, const source_opts *src)
{
        *dst = *src;
        dst->url_or_path = xstrdup_null(src->url_or_path);
        dst->ref = xstrdup_null(src->ref);
        dst->subpath = xstrdup_null(src->subpath);
        dst->cache_dir = xstrdup_null(src->cache_dir);
        dst->ssh_key_path = xstrdup_null(src->ssh_key_path);
        dst->ssh_key_passphrase_file = xstrdup_null(src->ssh_key_passphrase_file);
        dst->ssh_key_passphrase_env = xstrdup_null(src->ssh_key_passphrase_env);
        dst->known_hosts_path = xstrdup_null(src->known_hosts_path);
        dst->https_ca_file = xstrdup_null(src->https_ca_file);
        dst->https_token_file = xstrdup_null(src->https_token_file);
        dst->https_token_env = xstrdup_null(src->https_token_env);
        dst->https_username = xstrdup_null(src->https_username);
        dst->allowed_signers_path = xstrdup_null(src->allowed_signers_path);
        if (dst->max_file_size == 0)
                dst->max_file_size = SOURCE_DEFAULT_MAX_FILE_SIZE;
        if (dst->max_total_size == 0)
                dst->max_total_size = SOURCE_DEFAULT_MAX_TOTAL_SIZE;
        if (dst->fetch_timeout_s == 0)
                dst->fetch_timeout_s = SOURCE_DEFAULT_FETCH_TIMEOUT_S;
        if (dst->max_fetch_bytes == 0)
                dst->max_fetch_bytes = SOURCE_DEFAULT_MAX_FETCH_BYTES;
        if (dst->max_fetch_objects == 0)
                dst->max_fetch_objects = SOURCE_DEFAULT_MAX_FETCH_OBJECTS;
}

static void opts_release(source_opts *o)
{
        free((char *)o->url_or_path);
        free((char *)o->ref);
        free((char *)o->subpath);
        free((char *)o->cache_dir);
        free((char *)o->ssh_key_path);
        free((char *)o->ssh_key_passphrase_file);
        free((char *)o->ssh_key_passphrase_env);
        free((char *)o->known_hosts_path);
        free((char *)o->https_ca_file);
        free((char *)o->https_token_file);
        free((char *)o->https_token_env);
        free((char *)o->https_username);
        free((char *)o->allowed_signers_path);
}

void source_free(source *s)
{
        if (!s)
                return;
        opts_release(&s->opts);
        source_url_release(&s->url);
        free(s->root);
        free(s->mirror_path);
        free(s->heads_path);
        free(s->subpath);
        free(s->error);
        source_revision_free(s->refused);
        free(s->refused_error);
        git_adapter_fetch_abort(s->job);
        free(s->job_error);
        if (s->git_initialised)
                git_adapter_shutdown();
        free(s);
}

static int set_error(source *s, int r, const char *fmt, ...) _printf_(3, 4);
static int set_error(source *s, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        free(s->error);
        s->error = xvasprintf(fmt, ap);
        va_end(ap);
        return r;
}

/* "a//b/" -> "a/b"; "" or "/" -> NULL; -EINVAL for ".." or "." components. */
static int normalise_subpath(const char *in, char **ret)
{
        strbuf sb = STRBUF_INIT;

        for (const char *p = in; p && *p;) {
                size_t n = strcspn(p, "/");

                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
                        sb_release(&sb);
                        return -EINVAL;
                }
                if (n > 0) {
                        if (sb.len)
                                sb_appendc(&sb, '/');
                        sb_append_len(&sb, p, n);
                }
                p += n;
                while (*p == '/')
                        p++;
        }
        *ret = sb.len ? sb_detach(&sb) : NULL;
        sb_release(&sb);
        return 0;
}

static int check_readable(source *s, const char *what, const char *path)
{
        if (path && access(path, R_OK) < 0)
                return set_error(s, -errno == -ENOENT ? -ENOENT : -EACCES, "cannot read %s %s: %m",
                                 what, path);
        return 0;
}

/* A file holding a secret: readable, and gitcd's own (util/fs.h). */
static int check_secret(source *s, const char *what, const char *path)
{
        int r = check_readable(s, what, path);
        if (r < 0 || !path)
                return r;
        _cleanup_free_ char *err = NULL;
        r = secret_file_check(path, what, &err);
        if (r < 0)
                return set_error(s, r, "%s", err);
        return 0;
}

/* An encrypted key without a passphrase would only fail at every poll: say so now. */
static int check_private_key(source *s)
{
        const source_opts *o = &s->opts;
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r;

        r = read_file(o->ssh_key_path, SSH_KEY_MAX_SIZE, &text, &len);
        if (r < 0)
                return set_error(s, r, "cannot read SSH key %s: %s", o->ssh_key_path, strerror(-r));
        r = ssh_private_key_encrypted(text, len);
        explicit_bzero(text, len);
        if (r < 0)
                return set_error(s, -EINVAL, "%s is not an SSH private key (OpenSSH or PEM format)",
                                 o->ssh_key_path);
        if (r > 0 && !o->ssh_key_passphrase_file && !o->ssh_key_passphrase_env)
                return set_error(s, -EINVAL,
                                 "SSH key %s is protected by a passphrase: give it with "
                                 "ssh_key_passphrase_file or ssh_key_passphrase_env",
                                 o->ssh_key_path);
        return 0;
}

static int check_git_opts(source *s)
{
        const source_opts *o = &s->opts;
        int r;

        if (isempty(o->cache_dir))
                return set_error(s, -EINVAL, "a Git source needs a cache directory");
        if (o->verify_signatures && isempty(o->allowed_signers_path))
                return set_error(s, -EINVAL, "verifying signatures needs an allowed_signers file");
        if ((r = check_readable(s, "allowed_signers file", o->allowed_signers_path)) < 0)
                return r;
        if (o->ssh_key_passphrase_file && o->ssh_key_passphrase_env)
                return set_error(s, -EINVAL,
                                 "give the SSH key passphrase as a file or as an "
                                 "environment variable, not both");
        if (o->https_token_file && o->https_token_env)
                return set_error(s, -EINVAL,
                                 "give the HTTPS token as a file or as an "
                                 "environment variable, not both");

        if (s->url.kind == SOURCE_URL_SSH) {
                if (isempty(o->known_hosts_path))
                        return set_error(s, -EINVAL,
                                         "an SSH source needs a known_hosts file: host keys are "
                                         "always checked");
                if ((r = check_readable(s, "known_hosts file", o->known_hosts_path)) < 0)
                        return r;
                if (!o->use_ssh_agent && isempty(o->ssh_key_path))
                        return set_error(s, -EINVAL,
                                         "an SSH source needs a private key file or the SSH "
                                         "agent");
                if (o->use_ssh_agent) {
                        const char *sock =
                            getenv("SSH_AUTH_SOCK"); /* read once: isempty() reads twice */

                        if (isempty(sock))
                                return set_error(s, -EINVAL,
                                                 "the SSH agent is requested but SSH_AUTH_SOCK is "
                                                 "not set");
                }
                if ((r = check_readable(s, "SSH key", o->use_ssh_agent ? NULL : o->ssh_key_path)) <
                    0)
                        return r;
                if ((r = check_secret(s, "passphrase file", o->ssh_key_passphrase_file)) < 0)
                        return r;
                if (!o->use_ssh_agent && (r = check_private_key(s)) < 0)
                        return r;
                /* what it holds first (a public key given by mistake), then who may read it */
                if ((r = check_secret(s, "SSH key", o->use_ssh_agent ? NULL : o->ssh_key_path)) < 0)
                        return r;
                if (o->ssh_key_passphrase_env && !getenv(o->ssh_key_passphrase_env))
                        return set_error(s, -EINVAL, "environment variable %s is not set",
                                         o->ssh_key_passphrase_env);
        }
        if (s->url.kind == SOURCE_URL_HTTP &&
            (o->https_token_file || o->https_token_env || s->url.password))
                return set_error(s, -EINVAL,
                                 "refusing to send credentials over plain http:// (use "
                                 "https://)");
        if (s->url.kind == SOURCE_URL_HTTPS) {
                if ((r = check_readable(s, "CA file", o->https_ca_file)) < 0)
                        return r;
                if ((r = check_secret(s, "token file", o->https_token_file)) < 0)
                        return r;
                if (o->https_token_env && !getenv(o->https_token_env))
                        return set_error(s, -EINVAL, "environment variable %s is not set",
                                         o->https_token_env);
        }
        return 0;
}

/* <sha256(url)[0:32]> followed by suffix. */
static char *mirror_name(const char *url, const char *suffix)
{
        uint8_t md[HASH_SHA256_LEN];
        char hex[33];

        hash_sha256(url, strlen(url), md);
        hex_encode(md, 16, hex);
        return xasprintf("%s%s", hex, suffix);
}

static int open_source(source *s, const source_opts *opts)
{
        _cleanup_free_ char *err = NULL;
        int r;

        if (!opts || isempty(opts->url_or_path))
                return set_error(s, -EINVAL, "no source location given");
        opts_copy(&s->opts, opts);
        r = source_url_parse(opts->url_or_path, &s->url, &err);
        if (r < 0)
                return set_error(s, r, "%s", err);
        if (normalise_subpath(opts->subpath, &s->subpath) < 0)
                return set_error(s, -EINVAL, "path \"%s\" must not contain \".\" or \"..\"",
                                 opts->subpath);

        _cleanup_free_ char *load_error = NULL;
        r = git_adapter_init(&load_error);
        if (r < 0)
                return set_error(s, r, "%s", load_error);
        s->git_initialised = true;

        if (s->url.kind == SOURCE_URL_LOCAL) {
                _cleanup_free_ char *abs = realpath(s->url.path, NULL);

                if (!abs)
                        return set_error(s, -errno, "cannot open %s: %m", s->url.path);
                if (!path_is_dir(abs))
                        return set_error(s, -ENOTDIR, "%s is not a directory", abs);
                if (opts->plain_directory || !git_adapter_is_repository(abs)) {
                        s->kind = SOURCE_DIRECTORY;
                        if (opts->ref)
                                return set_error(s, -EINVAL,
                                                 "%s is a plain directory: a ref needs a Git "
                                                 "repository",
                                                 abs);
                        if (opts->verify_signatures)
                                return set_error(s, -EINVAL,
                                                 "%s is a plain directory: verifying signatures "
                                                 "needs a Git repository",
                                                 abs);
                        s->root = TAKE_PTR(abs);
                        return 0;
                }
                free(s->url.fetch_url);
                free(s->url.display);
                s->url.fetch_url = xstrdup(abs);
                s->url.display = xstrdup(abs);
        }
        s->kind = SOURCE_GIT;
        r = check_git_opts(s);
        if (r < 0)
                return r;
        {
                _cleanup_free_ char *name = mirror_name(s->url.display, ".git");
                _cleanup_free_ char *heads = mirror_name(s->url.display, ".heads");

                s->mirror_path = path_join(opts->cache_dir, name);
                s->heads_path = path_join(opts->cache_dir, heads);
        }
        return 0;
}

int source_open(const source_opts *opts, source **ret, char **ret_error)
{
        source *s = XNEW(source);
        int r;

        r = open_source(s, opts);
        if (r < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(s->error);
                source_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

const char *source_last_error(const source *s)
{
        return s && s->error ? s->error : "";
}

const char *source_display_url(const source *s)
{
        return s->kind == SOURCE_DIRECTORY ? s->root : s->url.display;
}

void source_signer_list_release(source_signer_list *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n; i++)
                free(r->names[i]);
        free(r->names);
        *r = (source_signer_list){0};
}

int source_signers(source *s, const source_revision *rev, const char *const *paths, size_t n_paths,
                   const char *since_commit, unsigned max_commits, source_signer_list *ret)
{
        assert(s && rev && ret);
        *ret = (source_signer_list){0};
        if (s->kind != SOURCE_GIT || !s->opts.verify_signatures || !rev->commit_id[0])
                return 0;
        char *err = NULL;
        int r = git_adapter_signers(
            s->mirror_path, &s->opts, s->subpath, rev->commit_id, paths, n_paths, since_commit,
            max_commits ? max_commits : SOURCE_SIGNERS_MAX_COMMITS, ret, &err);
        if (r < 0) {
                set_error(s, r, "%s", err ? err : strerror(-r));
                free(err);
        }
        return r;
}

const char *source_mirror_path(const source *s)
{
        return s->mirror_path;
}

static int read_dir(source *s, source_revision *rev, const char *dir, const char *rel,
                    unsigned depth);

static int read_dir_entry(source *s, source_revision *rev, const char *dir, const char *rel,
                          const char *name, unsigned depth)
{
        _cleanup_free_ char *full = path_join(dir, name);
        _cleanup_free_ char *path = isempty(rel) ? xstrdup(name) : xasprintf("%s/%s", rel, name);
        struct stat st;
        char *data;
        size_t len;
        int r;

        if (name[0] == '.')
                return 0;
        if (lstat(full, &st) < 0)
                return set_error(s, -errno, "cannot read %s: %m", full);
        if (S_ISDIR(st.st_mode))
                return read_dir(s, rev, full, path, depth + 1);
        if (!source_name_is_yaml(name))
                return 0;
        if (S_ISLNK(st.st_mode)) {
                revision_add_note(rev, path, "symbolic link (not followed)");
                return 0;
        }
        if (!S_ISREG(st.st_mode)) {
                revision_add_note(rev, path, "not a regular file");
                return 0;
        }
        if ((size_t)st.st_size > s->opts.max_file_size) {
                revision_add_note(rev, path, "larger than %zu bytes (%lld)", s->opts.max_file_size,
                                  (long long)st.st_size);
                return 0;
        }
        if (rev->n_files >= SOURCE_MAX_FILES)
                return set_error(s, -EFBIG, "more than %u YAML files under %s", SOURCE_MAX_FILES,
                                 s->root);
        if ((size_t)st.st_size > s->opts.max_total_size - s->read_total)
                return set_error(s, -EFBIG, "the YAML files under %s add up to more than %zu bytes",
                                 s->root, s->opts.max_total_size);
        r = read_file(full, s->opts.max_file_size, &data, &len);
        if (r < 0)
                return set_error(s, r, "cannot read %s: %s", full, strerror(-r));
        s->read_total += len;
        revision_add_file(rev, path, data, len);
        return 0;
}

/* Walk a directory with the same rules as a Git tree (see the top of this file). */
static int read_dir(source *s, source_revision *rev, const char *dir, const char *rel,
                    unsigned depth)
{
        struct dirent **entries = NULL;
        int n, r = 0;

        if (depth > SOURCE_MAX_DEPTH)
                return set_error(s, -EFBIG, "folders nested deeper than %u levels at %s",
                                 SOURCE_MAX_DEPTH, dir);
        n = scandir(dir, &entries, NULL, alphasort);
        if (n < 0)
                return set_error(s, -errno, "cannot read folder %s: %m", dir);
        for (int i = 0; i < n; i++) {
                if (r >= 0)
                        r = read_dir_entry(s, rev, dir, rel, entries[i]->d_name, depth);
                free(entries[i]);
        }
        free(entries);
        return r;
}

static int fetch_directory(source *s, source_revision *rev)
{
        _cleanup_free_ char *dir = s->subpath ? path_join(s->root, s->subpath) : xstrdup(s->root);
        struct stat st;

        if (stat(dir, &st) < 0)
                return set_error(s, -errno == -ENOENT ? -ENOENT : -EIO, "cannot open %s: %m", dir);
        if (!S_ISDIR(st.st_mode))
                return set_error(s, -ENOTDIR, "%s is not a folder", dir);
        rev->repository = xstrdup(s->root);
        rev->fetch_skipped = true;
        s->read_total = 0;
        rev->message = xstrdup("");
        return read_dir(s, rev, dir, s->subpath ? s->subpath : "", 0);
}

static void forget_refusal(source *s)
{
        source_revision_free(TAKE_PTR(s->refused));
        free(TAKE_PTR(s->refused_error));
}

static file_stamp stamp(const char *path)
{
        struct stat st;

        if (!path || stat(path, &st) < 0)
                return (file_stamp){0};
        return (file_stamp){true, st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

static bool same_stamp(file_stamp a, file_stamp b)
{
        return a.exists == b.exists && a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
               a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec;
}

/*
 * Whether the remembered refusal still holds as far as files go: the
 * allowed_signers file and the applied-heads file are the ones it was
 * judged with (an operator may have edited the first, or accepted a
 * rollback with another gitcd and so changed the second).
 */
static bool refusal_still_judged(const source *s)
{
        return same_stamp(stamp(s->opts.allowed_signers_path), s->refused_signers) &&
               same_stamp(stamp(s->heads_path), s->refused_heads);
}

static void fetch_request(source *s, git_fetch_request *req)
{
        *req = (git_fetch_request){
            .opts = &s->opts,
            .url = &s->url,
            .mirror_path = s->mirror_path,
            .subpath = s->subpath,
            .heads_path = s->heads_path,
        };
}

static int fetch_start(source *s, bool block)
{
        git_fetch_request req;
        char *err = NULL;
        int r;

        if (s->kind == SOURCE_DIRECTORY || s->job || s->job_error)
                return 0;
        r = mkdir_p(s->opts.cache_dir, 0700);
        if (r < 0) {
                s->job_error = xasprintf("cannot create cache directory %s: %s", s->opts.cache_dir,
                                         strerror(-r));
                s->job_r = r;
                return 0;
        }
        fetch_request(s, &req);
        r = git_adapter_fetch_start(&req, block, &s->job, &err);
        if (r == -EAGAIN) {
                free(err);
                return r;
        }
        if (r < 0) {
                s->job_error = xasprintf("%s: %s", s->url.display, err ? err : "failed");
                s->job_r = r;
                free(err);
        }
        return 0;
}

int source_fetch_start(source *s)
{
        return fetch_start(s, false);
}

int source_fetch_poll(source *s)
{
        if (!s->job)
                return 0;
        return git_adapter_fetch_poll(s->job, false);
}

int source_fetch(source *s, source_revision **ret)
{
        _cleanup_(source_revision_freep) source_revision *rev = XNEW(source_revision);
        _cleanup_free_ char *err = NULL;
        char head[41] = "";
        git_fetch_request req;
        int r;

        free(s->error);
        s->error = NULL;
        if (s->kind == SOURCE_DIRECTORY) {
                r = fetch_directory(s, rev);
                if (r < 0)
                        return r;
                revision_sort(rev);
                *ret = TAKE_PTR(rev);
                return 0;
        }

        fetch_request(s, &req);
        if (!s->job && !s->job_error) {
                /* Nothing started: start now and wait (apply, plan). */
                r = fetch_start(s, true);
                assert(r == 0);
        }
        if (s->job_error) {
                r = s->job_r;
                set_error(s, r, "%s", s->job_error);
                free(TAKE_PTR(s->job_error));
                return r;
        }
        r = git_adapter_fetch_poll(s->job, true);
        assert(r == 0);
        rev->repository = xstrdup(s->url.display);
        if (s->refused && !refusal_still_judged(s))
                forget_refusal(s);
        req.refused_head = s->refused ? s->refused_head : NULL;
        r = git_adapter_fetch_finish(TAKE_PTR(s->job), &req, rev, head, &err);
        if (r == 1) {
                /* Still the head refused before: the same verdict, not evaluated again. */
                source_revision *again = revision_copy_header(s->refused);

                again->refusal_repeated = true;
                again->fetch_skipped = rev->fetch_skipped;
                set_error(s, -EPERM, "%s", s->refused_error);
                *ret = again;
                return -EPERM;
        }
        if (r == -EPERM) {
                forget_refusal(s);
                s->refused = revision_copy_header(rev);
                s->refused_error = xstrdup(err);
                memcpy(s->refused_head, head, sizeof(head));
                s->refused_signers = stamp(s->opts.allowed_signers_path);
                s->refused_heads = stamp(s->heads_path);
                set_error(s, r, "%s", err);
                *ret = TAKE_PTR(rev);
                return r;
        }
        if (r < 0)
                return set_error(s, r, "%s: %s", s->url.display, err ? err : "failed");
        forget_refusal(s);
        *ret = TAKE_PTR(rev);
        return 0;
}

int source_read_at(source *s, const char *spec, source_revision **ret)
{
        _cleanup_(source_revision_freep) source_revision *rev = XNEW(source_revision);
        _cleanup_free_ char *err = NULL;
        git_fetch_request req;

        assert(s && spec && ret);
        free(s->error);
        s->error = NULL;
        if (s->kind == SOURCE_DIRECTORY)
                return set_error(s, -EOPNOTSUPP,
                                 "%s is read as a plain directory: it has no revisions to name",
                                 s->root);
        fetch_request(s, &req);
        rev->repository = xstrdup(s->url.display);
        int r = git_adapter_read_at(&req, spec, rev, &err);
        if (r < 0)
                return set_error(s, r, "%s", err ? err : strerror(-r));
        revision_sort(rev);
        *ret = TAKE_PTR(rev);
        return 0;
}

int source_mark_applied(source *s, const source_revision *rev)
{
        int r;

        if (s->kind != SOURCE_GIT || !rev->ref || !rev->commit_id[0])
                return 0;
        r = heads_set(s->heads_path, rev->ref, rev->commit_id);
        if (r < 0)
                return set_error(s, r, "cannot record the applied commit in %s: %s", s->heads_path,
                                 strerror(-r));
        return 0;
}
