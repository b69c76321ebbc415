/*
 * A snapshot destination in a PersistentVolumeClaim (`pvc` locations):
 * keys are files under the location's subPath in the claim, laid out as in
 * a local folder. gitcd cannot open the volume itself, so every operation
 * goes through a writer: `gitcd snapshot receive --store-dir` in a Pod that
 * mounts the claim at subPath (snapstore/receiver.h, store mode), started by
 * the target on the first operation and stopped when the destination is
 * freed (pvc_writer, snapstore/destination.h).
 *
 * Decisions:
 * - The writer does the all-or-nothing work on the volume (hidden
 *   temporary, size and SHA-256 checked, fsync, rename, folder fsync); this
 *   file checks that what the writer answers is what gitcd holds: a put
 *   succeeds only when the writer names the SHA-256 gitcd sent, a get only
 *   when the bytes that arrived hash to what the writer computed on the
 *   volume. A get lands in `path.part`, fsynced and renamed.
 * - One writer per destination, started lazily: opening touches nothing,
 *   and a destination used for one snapshot (or one retention pass, or one
 *   fetch) starts one Pod.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snapstore/dest-internal.h"
#include "snapstore/receiver.h"
#include "util/xalloc.h"

typedef struct pvc_dest {
        pvc_writer writer;
        char *claim;
        char *folder; /* the folder in the claim keys go under ("" for its root) */
        bool started;
        receiver_peer peer;
} pvc_dest;

static int writer_up(pvc_dest *d, char **ret_error)
{
        if (d->started)
                return 0;
        receiver_peer peer = {0};
        int r = d->writer.start(d->writer.userdata, d->claim, d->folder, &peer, ret_error);
        if (r < 0)
                return r;
        assert(peer.url && peer.token && peer.pin);
        d->peer = peer;
        d->started = true;
        return 0;
}

static int pvc_put(void *impl, const char *key, const char *path, const char *sha256_hex,
                   char **ret_error)
{
        pvc_dest *d = impl;
        int r = writer_up(d, ret_error);
        return r < 0 ? r : receiver_put(&d->peer, key, path, sha256_hex, ret_error);
}

static int pvc_get(void *impl, const char *key, const char *path, char **ret_error)
{
        pvc_dest *d = impl;
        int r = writer_up(d, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *part = xasprintf("%s.part", path);
        (void)unlink(part);
        int fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return dest_fail(ret_error, -errno, "cannot create %s: %s", part, strerror(errno));
        r = receiver_fetch(&d->peer, key, fd, ret_error);
        if (r < 0) {
                close(fd);
                (void)unlink(part);
                return r;
        }
        r = dest_commit_part(fd, part, path);
        if (r < 0)
                return dest_fail(ret_error, r, "cannot store %s: %s", path, strerror(-r));
        return 0;
}

static int pvc_delete(void *impl, const char *key, char **ret_error)
{
        pvc_dest *d = impl;
        int r = writer_up(d, ret_error);
        return r < 0 ? r : receiver_remove(&d->peer, key, ret_error);
}

static int pvc_stat(void *impl, const char *key, dest_object *ret, char **ret_error)
{
        pvc_dest *d = impl;
        int r = writer_up(d, ret_error);
        if (r < 0)
                return r;
        char sha[65];
        int64_t size = 0, mtime = 0;
        r = receiver_stat(&d->peer, key, &size, &mtime, sha, ret_error);
        if (r < 0)
                return r;
        ret->key = xstrdup(key);
        ret->size = size;
        ret->mtime_ms = mtime;
        ret->sha256_hex = xstrdup(sha);
        return 0;
}

static char *pvc_location(const void *impl, const char *key)
{
        const pvc_dest *d = impl;
        return xasprintf("pvc://%s/%s%s%s", d->claim, d->folder, *d->folder ? "/" : "", key);
}

static void pvc_free(void *impl)
{
        pvc_dest *d = impl;
        if (d->started)
                d->writer.stop(d->writer.userdata);
        free(d->claim);
        free(d->folder);
        free(d);
}

static const snapshot_dest_ops pvc_ops = {
    .kind = "pvc",
    .put_file = pvc_put,
    .get_file = pvc_get,
    .delete_key = pvc_delete,
    .stat_key = pvc_stat,
    .location = pvc_location,
    .free_impl = pvc_free,
};

int dest_pvc_new(const char *claim, const char *folder, const pvc_writer *writer,
                 snapshot_dest **ret, char **ret_error)
{
        assert(writer && writer->start && writer->stop && ret);
        if (isempty(claim))
                return dest_fail(ret_error, -EINVAL, "pvc location without a claimName");
        _cleanup_free_ char *f = xstrdup(folder ? folder : "");
        size_t n = strlen(f);
        while (n > 0 && f[n - 1] == '/')
                f[--n] = '\0';
        if (n > 0 && !snapshot_dest_key_valid(f))
                return dest_fail(ret_error, -EINVAL,
                                 "pvc subPath \"%s\" must be relative, without empty, hidden or "
                                 "\"..\" components",
                                 folder);
        pvc_dest *d = XNEW(pvc_dest);
        d->writer = *writer;
        d->claim = xstrdup(claim);
        d->folder = TAKE_PTR(f);
        *ret = snapshot_dest_new(&pvc_ops, d);
        return 0;
}
