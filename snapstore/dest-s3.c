/*
 * A snapshot destination in an S3 bucket (`s3` locations): keys live under
 * the location's key prefix ("backups/prod" + "s.db" = "backups/prod/s.db").
 * All the S3 work is in s3.c; this file maps the destination operations onto
 * it and owns the prefix rule: a prefix follows the key rules (relative, no
 * ".." or hidden components), with or without a trailing '/'.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snapstore/dest-internal.h"
#include "snapstore/s3.h"
#include "util/xalloc.h"

typedef struct s3_dest {
        s3_client *client;
        char *bucket;
        char *prefix; /* "" or "some/prefix/" */
} s3_dest;

static char *full_key(const s3_dest *d, const char *key)
{
        return xasprintf("%s%s", d->prefix, key);
}

static int s3d_put(void *impl, const char *key, const char *path, const char *sha256_hex,
                   char **ret_error)
{
        s3_dest *d = impl;
        _cleanup_free_ char *k = full_key(d, key);
        return s3_put_file(d->client, k, path, sha256_hex, ret_error);
}

static int s3d_get(void *impl, const char *key, const char *path, char **ret_error)
{
        s3_dest *d = impl;
        _cleanup_free_ char *k = full_key(d, key);
        return s3_get_file(d->client, k, path, ret_error);
}

static int s3d_delete(void *impl, const char *key, char **ret_error)
{
        s3_dest *d = impl;
        _cleanup_free_ char *k = full_key(d, key);
        return s3_delete(d->client, k, ret_error);
}

static int s3d_stat(void *impl, const char *key, dest_object *ret, char **ret_error)
{
        s3_dest *d = impl;
        _cleanup_free_ char *k = full_key(d, key);
        s3_object_info info = {0};
        int r = s3_head(d->client, k, &info, ret_error);
        if (r < 0)
                return r;
        ret->key = xstrdup(key);
        ret->size = info.size;
        ret->mtime_ms = info.mtime_ms;
        ret->sha256_hex = TAKE_PTR(info.sha256_hex);
        s3_object_info_release(&info);
        return 0;
}

static char *s3d_location(const void *impl, const char *key)
{
        const s3_dest *d = impl;
        return xasprintf("s3://%s/%s%s", d->bucket, d->prefix, key);
}

static void s3d_free(void *impl)
{
        s3_dest *d = impl;
        s3_client_free(d->client);
        free(d->bucket);
        free(d->prefix);
        free(d);
}

static const snapshot_dest_ops s3_ops = {
    .kind = "s3",
    .put_file = s3d_put,
    .get_file = s3d_get,
    .delete_key = s3d_delete,
    .stat_key = s3d_stat,
    .location = s3d_location,
    .free_impl = s3d_free,
};

int dest_s3_new(const s3_location *loc, const char *prefix, const s3_config *tuning,
                s3_credentials *creds, snapshot_dest **ret, char **ret_error)
{
        assert(loc && creds && ret);
        _cleanup_free_ char *p = xstrdup(isempty(prefix) ? "" : prefix);
        size_t n = strlen(p);
        while (n > 0 && p[n - 1] == '/')
                p[--n] = '\0';
        if (n > 0 && !snapshot_dest_key_valid(p))
                return dest_fail(ret_error, -EINVAL,
                                 "S3 key prefix \"%s\" must be relative, without empty, hidden "
                                 "or \"..\" components",
                                 prefix);
        s3_config cfg = tuning ? *tuning : (s3_config){0};
        cfg.endpoint = loc->endpoint;
        cfg.bucket = loc->bucket;
        cfg.region = loc->region;
        cfg.path_style = loc->force_path_style;
        cfg.credentials = creds;
        s3_client *client = NULL;
        int r = s3_client_new(&cfg, &client, ret_error);
        if (r < 0)
                return r;
        s3_dest *d = XNEW(s3_dest);
        d->client = client;
        d->bucket = xstrdup(loc->bucket);
        d->prefix = n > 0 ? xasprintf("%s/", p) : xstrdup("");
        *ret = snapshot_dest_new(&s3_ops, d);
        return 0;
}
