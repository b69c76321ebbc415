/*
 * Restoring a snapshot into a data directory (snapstore/restore.h).
 *
 * Design: gitcd checks what it can itself first, with messages that name
 * the problem (the record's size and SHA-256, etcd's sha256 trailer), and
 * then hands the file to etcd's own restore tool for the target version,
 * which owns the data-directory format; gitcd never writes etcd's files.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "snapstore/destination.h"
#include "snapstore/restore.h"
#include "api/spec.h"
#include "util/process.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/xalloc.h"

#define CHUNK (256 * 1024)

etcd_cluster *snapshot_record_cluster(state_db *db, const state_snapshot *rec)
{
        state_cluster *sc = NULL;
        if (state_cluster_get(db, rec->cluster, &sc) < 0)
                return NULL;
        etcd_cluster *c = spec_from_json_text(state_cluster_spec_json(sc), rec->cluster);
        state_cluster_free(sc);
        if (c) {
                _cleanup_free_ char *id = snapshot_destination_id(&c->snapshots.destination);
                if (!streq_ptr(id, rec->destination)) {
                        etcd_cluster_free(c);
                        c = NULL;
                }
        }
        return c;
}

/* The storage location a record's destination id stands for, when it can be known now. */
static int record_location(state_db *db, const state_snapshot *rec, storage_location *tmp,
                           etcd_cluster **ret_c, const storage_location **ret_loc)
{
        *ret_c = snapshot_record_cluster(db, rec);
        if (*ret_c) {
                *ret_loc = &(*ret_c)->snapshots.destination;
                return 0;
        }
        if (rec->destination && strneq(rec->destination, "local:", 6)) {
                *tmp = (storage_location){.kind = DEST_LOCAL, .path = rec->destination + 6};
                *ret_loc = tmp;
                return 0;
        }
        return -EINVAL;
}

static int fetch(state_db *db, const state_snapshot *rec, const char *state_dir,
                 const char *secret_dir, const pvc_writer *pvc, const char *path, char **ret_error)
{
        assert(db && rec && path);
        if (!streq_ptr(rec->result, "succeeded") || isempty(rec->key)) {
                *ret_error =
                    xasprintf("snapshot %lld %s; only a succeeded snapshot can be restored",
                              (long long)rec->id,
                              streq_ptr(rec->result, "failed") ? "failed" : "is not finished");
                return -EINVAL;
        }
        if (rec->deleted_ms) {
                *ret_error =
                    xasprintf("snapshot %lld was deleted by retention", (long long)rec->id);
                return -ENOENT;
        }
        storage_location tmp;
        etcd_cluster *c = NULL;
        const storage_location *loc = NULL;
        if (record_location(db, rec, &tmp, &c, &loc) < 0) {
                *ret_error =
                    xasprintf("snapshot %lld is in %s, which is no longer the destination "
                              "of %s; fetch %s yourself and restore the file",
                              (long long)rec->id, rec->destination, rec->cluster, rec->location);
                return -EINVAL;
        }
        _cleanup_free_ char *ns = xstrndup(rec->cluster, strcspn(rec->cluster, "/"));
        snapshot_dest_context ctx = {
            .state_dir = state_dir, .namespace_ = ns, .secret_dir = secret_dir, .pvc = pvc};
        snapshot_dest *dest = NULL;
        int r = snapshot_dest_open(loc, &ctx, &dest, ret_error);
        if (r == -EOPNOTSUPP && loc->kind == DEST_PVC) {
                free(*ret_error);
                *ret_error = xasprintf(
                    "snapshot %lld is in %s, a PersistentVolumeClaim only the Kubernetes target "
                    "reads (through a writer Pod); copy the file out of the claim and restore it "
                    "as a file, or create the cluster with bootstrap.restore.snapshot: %lld",
                    (long long)rec->id, rec->location, (long long)rec->id);
        }
        if (r >= 0) {
                _cleanup_free_ char *err = NULL;
                r = snapshot_dest_get_file(dest, rec->key, path, &err);
                if (r == -ENOENT)
                        *ret_error = xasprintf("snapshot %lld is missing: %s is not there",
                                               (long long)rec->id, rec->location);
                else if (r < 0)
                        *ret_error = xasprintf("cannot fetch %s: %s", rec->location, err);
        }
        snapshot_dest_free(dest); /* stops the writer it started */
        etcd_cluster_free(c);
        if (r < 0)
                return r;
        char sha[65];
        int64_t size = 0;
        r = hash_file_sha256_hex(path, sha, &size);
        if (r < 0) {
                *ret_error = xasprintf("cannot read %s: %s", path, strerror(-r));
                return r;
        }
        if (size != rec->size) {
                *ret_error = xasprintf("snapshot %lld is damaged: %s has %lld bytes, %lld were "
                                       "recorded",
                                       (long long)rec->id, rec->location, (long long)size,
                                       (long long)rec->size);
                return -EBADMSG;
        }
        if (!streq_ptr(sha, rec->sha256)) {
                *ret_error = xasprintf("snapshot %lld is damaged: the SHA-256 of %s is %s, %s was "
                                       "recorded",
                                       (long long)rec->id, rec->location, sha, rec->sha256);
                return -EBADMSG;
        }
        return 0;
}

int snapshot_fetch(state_db *db, const state_snapshot *rec, const char *state_dir,
                   const pvc_writer *pvc, const char *path, char **ret_error)
{
        return fetch(db, rec, state_dir, NULL, pvc, path, ret_error);
}

int snapshot_fetch_secret(state_db *db, const state_snapshot *rec, const char *state_dir,
                          const char *secret_dir, const pvc_writer *pvc, const char *path,
                          char **ret_error)
{
        return fetch(db, rec, state_dir, secret_dir, pvc, path, ret_error);
}

int snapshot_unpack(const char *in, const char *out, int64_t *ret_size, char **ret_error)
{
        gzFile gz = gzopen(in, "rb"); /* reads a plain file as is, too */
        if (!gz) {
                int r = errno ? -errno : -ENOMEM;
                *ret_error = xasprintf("cannot open %s: %s", in, strerror(-r));
                return r;
        }
        _cleanup_close_ int fd =
            out ? open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
        if (out && fd < 0) {
                int r = -errno;
                gzclose(gz);
                *ret_error = xasprintf("cannot create %s: %s", out, strerror(-r));
                return r;
        }
        gzbuffer(gz, CHUNK);
        hash_ctx *sha = hash_sha256_new();
        _cleanup_free_ uint8_t *buf = xmalloc(CHUNK + 32);
        uint8_t tail[32];
        size_t tail_len = 0;
        int64_t size = 0;
        int r = 0;
        for (;;) {
                int n = gzread(gz, buf + tail_len, CHUNK);
                if (n < 0) {
                        int zerr = 0;
                        *ret_error = xasprintf("%s is damaged: %s", in, gzerror(gz, &zerr));
                        r = -EBADMSG;
                        break;
                }
                if (n == 0)
                        break;
                if (out && write(fd, buf + tail_len, (size_t)n) != n) {
                        r = errno ? -errno : -EIO;
                        *ret_error = xasprintf("cannot write %s: %s", out, strerror(-r));
                        break;
                }
                size += n;
                /* hash everything but the last 32 bytes seen so far */
                memcpy(buf, tail, tail_len);
                size_t have = tail_len + (size_t)n;
                size_t hash = have > 32 ? have - 32 : 0;
                hash_update(sha, buf, hash);
                tail_len = have - hash;
                memmove(tail, buf + hash, tail_len);
        }
        gzclose(gz);
        uint8_t md[HASH_SHA256_LEN];
        hash_final(sha, md);
        hash_free(sha);
        if (r == 0 && out && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && (size % 512 != 32 || tail_len != 32)) {
                *ret_error = xasprintf("%s has no sha256 trailer from etcd (%lld bytes): not an "
                                       "etcd snapshot, or cut short",
                                       in, (long long)size);
                r = -EBADMSG;
        } else if (r == 0 && memcmp(md, tail, 32) != 0) {
                *ret_error = xasprintf("%s is damaged: etcd's sha256 over its %lld bytes of data "
                                       "does not match",
                                       in, (long long)(size - 32));
                r = -EBADMSG;
        }
        if (r < 0) {
                if (out)
                        unlink(out);
                return r;
        }
        *ret_size = size;
        return 0;
}

bool snapshot_is_gzip(const char *path)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        unsigned char magic[2];
        return fd >= 0 && read(fd, magic, 2) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

int snapshot_restore_dir(const snapshot_restore_opts *o, char **ret_error)
{
        assert(o && o->tool && o->snapshot && o->data_dir && o->name && o->peer_url);
        assert(o->bump_revision >= 0);
        if (path_exists(o->data_dir)) {
                *ret_error = xasprintf("%s exists; restore into a new folder", o->data_dir);
                return -EEXIST;
        }
        _cleanup_free_ char *cluster = isempty(o->initial_cluster)
                                           ? xasprintf("%s=%s", o->name, o->peer_url)
                                           : xstrdup(o->initial_cluster);
        char *argv[] = {(char *)o->tool,
                        "snapshot",
                        "restore",
                        (char *)o->snapshot,
                        "--data-dir",
                        (char *)o->data_dir,
                        "--name",
                        (char *)o->name,
                        "--initial-cluster",
                        cluster,
                        "--initial-advertise-peer-urls",
                        (char *)o->peer_url,
                        "--initial-cluster-token",
                        (char *)(o->token ? o->token : "etcd-cluster"),
                        NULL,
                        NULL,
                        NULL,
                        NULL};
        /* etcd takes the two together or neither (a bump without the mark is refused) */
        char bump[24];
        if (o->bump_revision > 0) {
                snprintf(bump, sizeof(bump), "%lld", (long long)o->bump_revision);
                size_t n = ARRAY_SIZE(argv) - 4;
                argv[n] = "--bump-revision";
                argv[n + 1] = bump;
                argv[n + 2] = "--mark-compacted";
        }
        _cleanup_free_ char *out = NULL;
        int r = process_run_capture(argv, &out);
        if (r < 0) {
                *ret_error = xasprintf("%s snapshot restore failed: %s", o->tool,
                                       out && *out ? out : strerror(-r));
                size_t n = strlen(*ret_error);
                while (n && (*ret_error)[n - 1] == '\n')
                        (*ret_error)[--n] = '\0';
                (void)rm_rf(o->data_dir);
                return -EIO;
        }
        return 0;
}
