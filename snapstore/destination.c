/*
 * The snapshot destination seam: one small operation table (put/get/delete/
 * stat/location) with three implementations, a folder on the gitcd host
 * (dest-local.c), S3 (dest-s3.c over s3.c) and a folder in a
 * PersistentVolumeClaim reached through a target's writer (dest-pvc.c). The snapshot pipeline and
 * restore only ever see this table, so they never ask which kind they hold.
 *
 * This file owns the two decisions every implementation shares: which keys
 * are acceptable (checked once here, before any operation runs), and where
 * S3 credentials come from on the gitcd host (a Secret folder under the
 * state folder, else the environment). Secret values are read into memory
 * and handed to the S3 client; they are never formatted into a message.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapstore/dest-internal.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/xalloc.h"

struct snapshot_dest {
        const snapshot_dest_ops *ops;
        void *impl;
};

#define KEY_MAX 1024

int(dest_fail)(char **ret_error, int r, const char *fmt, ...)
{
        assert(r < 0);
        if (ret_error) {
                va_list ap;
                va_start(ap, fmt);
                free(*ret_error);
                *ret_error = xvasprintf(fmt, ap);
                va_end(ap);
        }
        return r;
}

void dest_object_release(dest_object *o)
{
        if (!o)
                return;
        free(o->key);
        free(o->sha256_hex);
        *o = (dest_object){0};
}

static void free_secret(char *s)
{
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

void s3_credentials_release(s3_credentials *c)
{
        if (!c)
                return;
        free(c->access_key_id);
        free_secret(c->secret_access_key);
        free_secret(c->session_token);
        free(c->ca_file);
        *c = (s3_credentials){0};
}

bool snapshot_dest_key_valid(const char *key)
{
        if (isempty(key) || strlen(key) > KEY_MAX)
                return false;
        const char *c = key;
        for (;;) {
                const char *end = strchrnul(c, '/');
                if (end == c || c[0] == '.')
                        return false; /* empty component, ".", "..", hidden names */
                for (const char *p = c; p < end; p++)
                        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
                                return false;
                if (!*end)
                        return true;
                c = end + 1;
        }
}

snapshot_dest *snapshot_dest_new(const snapshot_dest_ops *ops, void *impl)
{
        assert(ops && ops->put_file && ops->get_file && ops->delete_key && ops->stat_key &&
               ops->location && ops->kind);
        snapshot_dest *d = XNEW(snapshot_dest);
        d->ops = ops;
        d->impl = impl;
        return d;
}

void snapshot_dest_free(snapshot_dest *d)
{
        if (!d)
                return;
        if (d->ops->free_impl)
                d->ops->free_impl(d->impl);
        free(d);
}

const char *snapshot_dest_kind(const snapshot_dest *d)
{
        return d->ops->kind;
}

char *snapshot_dest_location(const snapshot_dest *d, const char *key)
{
        assert(d && key);
        return d->ops->location(d->impl, key);
}

/* Every operation checks its key here, once, before the implementation sees it. */
static int bad_key(char **ret_error, const char *key)
{
        return dest_fail(ret_error, -EINVAL,
                         "invalid snapshot key \"%s\": a relative, '/'-separated key without "
                         "empty, hidden or \"..\" components",
                         key ? key : "");
}

/* Hand an implementation's message (or strerror) to the caller on failure. */
static int finish(int r, char **err, char **ret_error)
{
        if (r < 0 && ret_error) {
                free(*ret_error);
                *ret_error = *err ? TAKE_PTR(*err) : xstrdup(strerror(-r));
        }
        return r;
}

int snapshot_dest_put_file(snapshot_dest *d, const char *key, const char *path,
                           const char *sha256_hex, char **ret_error)
{
        assert(d && path);
        if (!snapshot_dest_key_valid(key))
                return bad_key(ret_error, key);
        if (sha256_hex && !hash_sha256_hex_valid(sha256_hex))
                return dest_fail(ret_error, -EINVAL,
                                 "SHA-256 \"%s\" is not 64 lowercase hex digits", sha256_hex);
        _cleanup_free_ char *err = NULL;
        int r = d->ops->put_file(d->impl, key, path, sha256_hex, &err);
        return finish(r, &err, ret_error);
}

int snapshot_dest_get_file(snapshot_dest *d, const char *key, const char *path, char **ret_error)
{
        assert(d && path);
        if (!snapshot_dest_key_valid(key))
                return bad_key(ret_error, key);
        _cleanup_free_ char *err = NULL;
        int r = d->ops->get_file(d->impl, key, path, &err);
        return finish(r, &err, ret_error);
}

int snapshot_dest_delete(snapshot_dest *d, const char *key, char **ret_error)
{
        assert(d);
        if (!snapshot_dest_key_valid(key))
                return bad_key(ret_error, key);
        _cleanup_free_ char *err = NULL;
        int r = d->ops->delete_key(d->impl, key, &err);
        return finish(r, &err, ret_error);
}

int snapshot_dest_stat(snapshot_dest *d, const char *key, dest_object *ret, char **ret_error)
{
        assert(d && ret);
        if (!snapshot_dest_key_valid(key))
                return bad_key(ret_error, key);
        _cleanup_free_ char *err = NULL;
        dest_object o = {0};
        int r = d->ops->stat_key(d->impl, key, &o, &err);
        if (r < 0) {
                dest_object_release(&o);
                return finish(r, &err, ret_error);
        }
        if (!o.key)
                o.key = xstrdup(key);
        *ret = o;
        return r;
}

int dest_commit_part(int fd, const char *part, const char *path)
{
        int r = 0;
        if (fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(part, path) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlink(part);
                return r;
        }
        return fsync_parent_dir(path);
}

/*
 * One value of a Secret folder: the file's content without trailing white
 * space. A file others may read is -EPERM with *ret_err (util/fs.h).
 */
static int read_secret_value(const char *dir, const char *name, char **ret, char **ret_err)
{
        _cleanup_free_ char *p = path_join(dir, name);
        char *data = NULL;
        size_t len = 0;
        _cleanup_free_ char *err = NULL;
        int r = read_secret_file(p, "credentials file", 64 * 1024, &data, &len, &err);
        if (r == -EPERM)
                *ret_err = TAKE_PTR(err);
        if (r < 0)
                return r;
        while (len > 0 && strchr(" \t\r\n", data[len - 1]))
                data[--len] = '\0';
        if (len == 0) {
                free(data);
                return -ENODATA;
        }
        *ret = data;
        return 0;
}

static int credentials_from_folder(const char *dir, const char *secret, s3_credentials *c,
                                   char **ret_error)
{
        static const char *const required[] = {"accessKeyID", "secretAccessKey"};
        char **slots[] = {&c->access_key_id, &c->secret_access_key};
        for (size_t i = 0; i < ARRAY_SIZE(required); i++) {
                _cleanup_free_ char *why = NULL;
                int r = read_secret_value(dir, required[i], slots[i], &why);
                if (r == -EPERM)
                        return dest_fail(ret_error, r, "S3 credentials Secret \"%s\": %s", secret,
                                         why);
                if (r == -ENOENT)
                        return dest_fail(ret_error, -ENOKEY,
                                         "S3 credentials Secret \"%s\" (%s) has no key %s", secret,
                                         dir, required[i]);
                if (r < 0)
                        return dest_fail(ret_error, r == -ENODATA ? -ENOKEY : r,
                                         "S3 credentials Secret \"%s\" (%s): %s %s", secret, dir,
                                         required[i], r == -ENODATA ? "is empty" : strerror(-r));
        }
        _cleanup_free_ char *why = NULL;
        int r = read_secret_value(dir, "sessionToken", &c->session_token, &why);
        if (r == -EPERM)
                return dest_fail(ret_error, r, "S3 credentials Secret \"%s\": %s", secret, why);
        if (r < 0 && r != -ENOENT && r != -ENODATA)
                return dest_fail(ret_error, r,
                                 "S3 credentials Secret \"%s\" (%s): sessionToken: %s", secret, dir,
                                 strerror(-r));
        _cleanup_free_ char *ca = path_join(dir, "ca.crt");
        if (path_exists(ca))
                c->ca_file = TAKE_PTR(ca);
        return 0;
}

static int credentials_from_env(const char *secret, const char *dir, s3_credentials *c,
                                char **ret_error)
{
        const char *id = getenv("AWS_ACCESS_KEY_ID");
        const char *key = getenv("AWS_SECRET_ACCESS_KEY");
        if (isempty(id) || isempty(key)) {
                if (dir)
                        return dest_fail(ret_error, -ENOKEY,
                                         "no S3 credentials for Secret \"%s\": create %s/ with "
                                         "files accessKeyID and secretAccessKey (mode 0600), or "
                                         "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                                         secret ? secret : "", dir);
                return dest_fail(ret_error, -ENOKEY,
                                 "no S3 credentials: set AWS_ACCESS_KEY_ID and "
                                 "AWS_SECRET_ACCESS_KEY");
        }
        c->access_key_id = xstrdup(id);
        c->secret_access_key = xstrdup(key);
        c->session_token =
            isempty(getenv("AWS_SESSION_TOKEN")) ? NULL : xstrdup(getenv("AWS_SESSION_TOKEN"));
        return 0;
}

static void copy_credentials(const s3_credentials *from, s3_credentials *to)
{
        to->access_key_id = xstrdup_null(from->access_key_id);
        to->secret_access_key = xstrdup_null(from->secret_access_key);
        to->session_token = xstrdup_null(from->session_token);
        to->ca_file = xstrdup_null(from->ca_file);
}

static int resolve_credentials(const s3_location *s3, const snapshot_dest_context *ctx,
                               s3_credentials *c, char **ret_error)
{
        if (ctx && ctx->credentials) {
                copy_credentials(ctx->credentials, c);
        } else if (ctx && ctx->secret_dir && s3->credentials_secret) {
                int r =
                    credentials_from_folder(ctx->secret_dir, s3->credentials_secret, c, ret_error);
                if (r < 0) {
                        s3_credentials_release(c);
                        return r;
                }
        } else {
                _cleanup_free_ char *dir = NULL;
                if (ctx && ctx->state_dir && s3->credentials_secret)
                        dir = xasprintf("%s/secrets/%s/%s", ctx->state_dir,
                                        ctx->namespace_ ? ctx->namespace_ : "default",
                                        s3->credentials_secret);
                int r = dir && path_is_dir(dir)
                            ? credentials_from_folder(dir, s3->credentials_secret, c, ret_error)
                            : credentials_from_env(s3->credentials_secret, dir, c, ret_error);
                if (r < 0) {
                        s3_credentials_release(c);
                        return r;
                }
        }
        if (!c->ca_file && !isempty(getenv("AWS_CA_BUNDLE")))
                c->ca_file = xstrdup(getenv("AWS_CA_BUNDLE"));
        if (isempty(c->access_key_id) || isempty(c->secret_access_key)) {
                s3_credentials_release(c);
                return dest_fail(ret_error, -ENOKEY,
                                 "S3 credentials lack an access key ID or a secret access key");
        }
        return 0;
}

static int open_s3(const storage_location *loc, const snapshot_dest_context *ctx,
                   const char *prefix, snapshot_dest **ret, char **ret_error)
{
        if (isempty(loc->s3.bucket))
                return dest_fail(ret_error, -EINVAL, "s3 location without a bucket");
        s3_credentials c = {0};
        int r = resolve_credentials(&loc->s3, ctx, &c, ret_error);
        if (r < 0)
                return r;
        r = dest_s3_new(&loc->s3, prefix, ctx ? ctx->s3_tuning : NULL, &c, ret, ret_error);
        s3_credentials_release(&c);
        return r;
}

int snapshot_dest_open(const storage_location *loc, const snapshot_dest_context *ctx,
                       snapshot_dest **ret, char **ret_error)
{
        assert(loc && ret);
        switch (loc->kind) {
        case DEST_LOCAL:
                if (isempty(loc->path) || loc->path[0] != '/')
                        return dest_fail(ret_error, -EINVAL,
                                         "local snapshot folder must be an absolute path");
                *ret = dest_local_new(loc->path);
                return 0;
        case DEST_S3:
                return open_s3(loc, ctx, loc->s3.key, ret, ret_error);
        case DEST_PVC:
                if (!ctx || !ctx->pvc)
                        return dest_fail(ret_error, -EOPNOTSUPP,
                                         "a PVC location is stored by the Kubernetes target, not "
                                         "on the gitcd host");
                return dest_pvc_new(loc->claim_name, loc->sub_path, ctx->pvc, ret, ret_error);
        case DEST_NONE:
                break;
        }
        return dest_fail(ret_error, -EINVAL, "no snapshot location given");
}

int snapshot_source_open(const storage_location *loc, const snapshot_dest_context *ctx,
                         snapshot_dest **ret, char **ret_key, char **ret_error)
{
        assert(loc && ret && ret_key);
        switch (loc->kind) {
        case DEST_LOCAL: {
                if (isempty(loc->path) || loc->path[0] != '/')
                        return dest_fail(ret_error, -EINVAL,
                                         "local snapshot file must be an absolute path");
                const char *slash = strrchr(loc->path, '/');
                if (!snapshot_dest_key_valid(slash + 1))
                        return dest_fail(ret_error, -EINVAL,
                                         "local snapshot \"%s\" does not name a file", loc->path);
                _cleanup_free_ char *dir =
                    slash == loc->path ? xstrdup("/") : xstrndup(loc->path, slash - loc->path);
                *ret = dest_local_new(dir);
                *ret_key = xstrdup(slash + 1);
                return 0;
        }
        case DEST_S3: {
                if (!snapshot_dest_key_valid(loc->s3.key))
                        return dest_fail(ret_error, -EINVAL,
                                         "s3 restore source needs the snapshot's object key "
                                         "(got \"%s\")",
                                         loc->s3.key ? loc->s3.key : "");
                snapshot_dest *d = NULL;
                int r = open_s3(loc, ctx, NULL, &d, ret_error);
                if (r < 0)
                        return r;
                *ret = d;
                *ret_key = xstrdup(loc->s3.key);
                return 0;
        }
        case DEST_PVC: {
                if (!ctx || !ctx->pvc)
                        return dest_fail(ret_error, -EOPNOTSUPP,
                                         "a PVC location is read by the Kubernetes target, not on "
                                         "the gitcd host");
                const char *path = loc->sub_path ? loc->sub_path : "";
                const char *slash = strrchr(path, '/');
                const char *key = slash ? slash + 1 : path;
                if (!snapshot_dest_key_valid(key))
                        return dest_fail(ret_error, -EINVAL,
                                         "pvc restore source needs the snapshot file's subPath "
                                         "in the claim (got \"%s\")",
                                         path);
                _cleanup_free_ char *dir = slash ? xstrndup(path, slash - path) : xstrdup("");
                snapshot_dest *d = NULL;
                int r = dest_pvc_new(loc->claim_name, dir, ctx->pvc, &d, ret_error);
                if (r < 0)
                        return r;
                *ret = d;
                *ret_key = xstrdup(key);
                return 0;
        }
        case DEST_NONE:
                break;
        }
        return dest_fail(ret_error, -EINVAL, "no snapshot location given");
}

char *snapshot_destination_id(const storage_location *loc)
{
        switch (loc->kind) {
        case DEST_LOCAL:
                return xasprintf("local:%s", loc->path ? loc->path : "");
        case DEST_S3:
                return xasprintf("s3:%s/%s/%s", loc->s3.endpoint ? loc->s3.endpoint : "aws",
                                 loc->s3.bucket ? loc->s3.bucket : "",
                                 loc->s3.key ? loc->s3.key : "");
        case DEST_PVC:
                return xasprintf("pvc:%s/%s", loc->claim_name ? loc->claim_name : "",
                                 loc->sub_path ? loc->sub_path : "");
        case DEST_NONE:
                break;
        }
        return xstrdup("none");
}
