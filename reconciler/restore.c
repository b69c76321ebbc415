/*
 * spec.bootstrap.restore in the reconciler (reconciler/restore.h).
 *
 * Design: the checks reuse the pipeline of `gitcd snapshot restore`
 * (snapstore/restore.h: fetch, etcd's sha256 trailer, etcd's tool), so a
 * snapshot the CLI refuses is refused here for the same reason and in the
 * same words. What the CLI learns from a record id, this file learns from
 * the store's record of the source's location (the snapshot gitcd took and
 * stored there), when there is one: the size, SHA-256 and etcd version it
 * was stored with. Without a record, the SHA-256 the destination keeps
 * with the object (S3 metadata, a local extended attribute) is checked.
 *
 * Writing etcd's data directory is the target's (target_ops.restore_member):
 * the data lives where the target keeps it. This file only decides when
 * (restore_due) and hands over a checked, uncompressed file and etcd's
 * tool for it (restore_find_tool, which a disaster recovery from a snapshot
 * uses too).
 */
#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reconciler/restore.h"
#include "snapstore/destination.h"
#include "snapstore/restore.h"
#include "snapshots/snapshot.h"
#include "snapstore/tool.h"
#include "state/restores.h"
#include "state/snapshots.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/xalloc.h"

void restore_prep_free(restore_prep *p)
{
        if (!p)
                return;
        if (p->work)
                (void)rm_rf(p->work);
        free(p->work);
        free(p->snapshot);
        free(p->tool);
        free(p->source);
        free(p->from_cluster);
        free(p);
}

/* The newest succeeded record of a snapshot stored at location, or NULL. */
static state_snapshot *record_at(state_db *db, const char *location)
{
        state_snapshot_list l = {0};
        state_snapshot *found = NULL;
        if (state_snapshot_list_for(db, NULL, 0, &l) < 0)
                return NULL;
        for (size_t i = 0; i < l.n && !found; i++)
                if (streq_ptr(l.items[i]->result, "succeeded") &&
                    streq_ptr(l.items[i]->location, location)) {
                        found = l.items[i];
                        l.items[i] = NULL;
                }
        for (size_t i = 0; i < l.n; i++)
                state_snapshot_free(l.items[i]);
        free(l.items);
        return found;
}

static char *state_dir_of(state_db *db)
{
        const char *p = state_path(db);
        _cleanup_free_ char *copy = xstrdup(p ? p : "./state.db");
        return xstrdup(dirname(copy));
}

/* source.snapshot: a snapshot gitcd recorded, fetched and checked against its record. */
static int fetch_recorded(state_db *db, const etcd_cluster *c, const char *state_dir,
                          const pvc_writer *pvc, const char *path, restore_prep *prep,
                          char **ret_etcd_version, bool *ret_refused, char **ret_error)
{
        _cleanup_(state_snapshot_freep) state_snapshot *rec = NULL;
        int r = state_snapshot_get(db, c->restore.snapshot_id, &rec);
        if (r == -ENOENT) {
                *ret_refused = true;
                *ret_error = xasprintf("snapshot %lld is missing: gitcd has no record of it "
                                       "(gitcd snapshot list)",
                                       (long long)c->restore.snapshot_id);
                return r;
        }
        if (r < 0) {
                *ret_error = xasprintf("cannot read snapshot %lld: %s",
                                       (long long)c->restore.snapshot_id, state_last_error());
                return r;
        }
        prep->source = xasprintf("snapshot %lld (%s)", (long long)rec->id,
                                 rec->location ? rec->location : "no location");
        r = snapshot_fetch(db, rec, state_dir, pvc, path, ret_error);
        if (r < 0) {
                /* missing, damaged or not a usable record: refused; the storage failing: not */
                *ret_refused = r == -ENOENT || r == -EBADMSG || r == -EINVAL;
                return r;
        }
        *ret_etcd_version = xstrdup_null(rec->etcd_version);
        prep->from_cluster = xstrdup_null(rec->cluster);
        prep->taken_ms = rec->started_ms;
        return 0;
}

/* Fetch the source into path and check it against what was stored with it. */
static int fetch_source(state_db *db, const etcd_cluster *c, const char *state_dir,
                        const pvc_writer *pvc, const char *path, restore_prep *prep,
                        char **ret_etcd_version, bool *ret_refused, char **ret_error)
{
        const storage_location *src = &c->restore.source;
        snapshot_dest_context ctx = {
            .state_dir = state_dir, .namespace_ = c->namespace_, .pvc = pvc};
        _cleanup_(snapshot_dest_freep) snapshot_dest *dest = NULL;
        _cleanup_free_ char *key = NULL, *err = NULL;
        int r = snapshot_source_open(src, &ctx, &dest, &key, &err);
        if (r < 0) {
                *ret_refused = r == -EINVAL || r == -EOPNOTSUPP;
                *ret_error = xasprintf("cannot read the snapshot: %s", err ? err : strerror(-r));
                return r;
        }
        prep->source = snapshot_dest_location(dest, key);
        dest_object obj = {0};
        r = snapshot_dest_stat(dest, key, &obj, &err);
        if (r == -ENOENT) {
                *ret_refused = true;
                *ret_error = xasprintf("the snapshot %s is missing", prep->source);
                return r;
        }
        if (r < 0) {
                *ret_error = xasprintf("cannot read the snapshot %s: %s", prep->source,
                                       err ? err : strerror(-r));
                return r;
        }
        _cleanup_(state_snapshot_freep) state_snapshot *rec = record_at(db, prep->source);
        int64_t want_size = rec ? rec->size : -1;
        _cleanup_free_ char *want_sha =
            xstrdup_null(rec && rec->sha256 ? rec->sha256 : obj.sha256_hex);
        dest_object_release(&obj);
        free(err);
        err = NULL;
        r = snapshot_dest_get_file(dest, key, path, &err);
        if (r < 0) {
                *ret_refused = r == -ENOENT;
                *ret_error = r == -ENOENT ? xasprintf("the snapshot %s is missing", prep->source)
                                          : xasprintf("cannot fetch the snapshot %s: %s",
                                                      prep->source, err ? err : strerror(-r));
                return r;
        }
        struct stat st;
        if (stat(path, &st) < 0)
                return -errno;
        if (want_size >= 0 && st.st_size != want_size) {
                *ret_refused = true;
                *ret_error = xasprintf("the snapshot %s is damaged: it has %lld bytes, %lld were "
                                       "recorded (snapshot %lld)",
                                       prep->source, (long long)st.st_size, (long long)want_size,
                                       (long long)rec->id);
                return -EBADMSG;
        }
        if (want_sha) {
                char sha[65];
                r = hash_file_sha256_hex(path, sha, NULL);
                if (r < 0) {
                        *ret_error = xasprintf("cannot read %s: %s", path, strerror(-r));
                        return r;
                }
                if (!streq(sha, want_sha)) {
                        *ret_refused = true;
                        *ret_error = xasprintf("the snapshot %s is damaged: its SHA-256 is %s, "
                                               "%s was %s",
                                               prep->source, sha, want_sha,
                                               rec ? "recorded" : "stored with it");
                        return -EBADMSG;
                }
        }
        *ret_etcd_version = rec ? xstrdup_null(rec->etcd_version) : NULL;
        if (rec) {
                prep->from_cluster = xstrdup_null(rec->cluster);
                prep->taken_ms = rec->started_ms;
        }
        return 0;
}

int restore_find_tool(const etcd_cluster *c, const char *etcd_dir, char **ret_tool,
                      char **ret_error)
{
        assert(c && ret_tool && ret_error);
        int r = snapshot_etcd_tool(etcd_dir, c->version, ret_tool);
        if (r < 0)
                *ret_error =
                    xasprintf("no %s %s found to check and restore the snapshot with "
                              "(put it in <etcd dir>/%s/ next to etcd)",
                              c->ver.major == 3 && c->ver.minor < 5 ? "etcdctl" : "etcdutl",
                              c->version, c->version);
        return r;
}

int restore_prepare(state_db *db, target *t, const etcd_cluster *c, const char *etcd_dir,
                    restore_prep **ret, bool *ret_refused, char **ret_error)
{
        assert(db && t && c && ret && ret_refused && ret_error);
        *ret_refused = false;
        if (!c->restore.enabled) {
                *ret_error = xstrdup("spec.bootstrap.restore is not set");
                return -EINVAL;
        }
        if (!t->ops->restore_member) {
                *ret_refused = true;
                *ret_error = xasprintf("the %s target cannot restore a snapshot yet: create the "
                                       "cluster with the local target, or without "
                                       "spec.bootstrap.restore",
                                       t->ops->name);
                return -EOPNOTSUPP;
        }
        if (c->storage.medium == MEDIUM_MEMORY && (t->ops->caps & TARGET_CAP_MEMORY_MEDIUM)) {
                *ret_refused = true;
                *ret_error = xasprintf("spec.storage.medium Memory keeps a member's data in "
                                       "memory on the %s target: there is no volume to restore "
                                       "the snapshot into before the member starts; use the "
                                       "default medium",
                                       t->ops->name);
                return -EOPNOTSUPP;
        }
        if (!c->restore.snapshot_id && c->restore.source.kind == DEST_PVC &&
            !(t->ops->caps & TARGET_CAP_PVC_WRITER)) {
                *ret_refused = true;
                *ret_error = xasprintf("spec.bootstrap.restore.source.pvc needs the Kubernetes "
                                       "target; the %s target reads a local or s3 source",
                                       t->ops->name);
                return -EOPNOTSUPP;
        }
        _cleanup_free_ char *state_dir = state_dir_of(db);
        _cleanup_(restore_prep_freep) restore_prep *prep = XNEW(restore_prep);
        /* One folder per cluster: what a crash left there is thrown away first. */
        prep->work = xasprintf("%s/restore-tmp/%s/%s", state_dir, c->namespace_, c->name);
        (void)rm_rf(prep->work);
        int r = mkdir_p(prep->work, 0700);
        if (r < 0) {
                *ret_error = xasprintf("cannot create %s: %s", prep->work, strerror(-r));
                return r;
        }
        _cleanup_free_ char *fetched = path_join(prep->work, "fetched");
        _cleanup_free_ char *from_version = NULL;
        /* a snapshot in a PersistentVolumeClaim is read through the target's writer Pod */
        pvc_writer *pvc = snapshot_pvc_writer_new(t, c);
        r = c->restore.snapshot_id ? fetch_recorded(db, c, state_dir, pvc, fetched, prep,
                                                    &from_version, ret_refused, ret_error)
                                   : fetch_source(db, c, state_dir, pvc, fetched, prep,
                                                  &from_version, ret_refused, ret_error);
        snapshot_pvc_writer_free(pvc);
        if (r < 0)
                return r;

        semver from;
        if (from_version && semver_parse(from_version, &from) == 0 &&
            (from.major > c->ver.major ||
             (from.major == c->ver.major && from.minor > c->ver.minor))) {
                *ret_refused = true;
                *ret_error =
                    xasprintf("the snapshot %s was taken from etcd %s, newer than "
                              "spec.version %s; restore it with %d.%d or later",
                              prep->source, from_version, c->version, from.major, from.minor);
                return -EPROTO;
        }

        /* An uncompressed snapshot is checked where it is and restored from there. */
        bool gz = snapshot_is_gzip(fetched);
        prep->snapshot = gz ? path_join(prep->work, "snapshot.db") : xstrdup(fetched);
        r = snapshot_unpack(fetched, gz ? prep->snapshot : NULL, &prep->size, ret_error);
        if (gz)
                (void)unlink(fetched);
        if (r < 0) {
                *ret_refused = r == -EBADMSG;
                if (r == -EBADMSG) {
                        char *why = *ret_error;
                        *ret_error = xasprintf("the snapshot %s is damaged: %s", prep->source, why);
                        free(why);
                }
                return r;
        }
        if (c->storage.size_bytes > 0 && prep->size > c->storage.size_bytes) {
                *ret_refused = true;
                *ret_error = xasprintf("the snapshot %s holds %lld bytes, more than "
                                       "spec.storage.size %s (%lld bytes)",
                                       prep->source, (long long)prep->size, c->storage.size,
                                       (long long)c->storage.size_bytes);
                return -EFBIG;
        }
        r = restore_find_tool(c, etcd_dir, &prep->tool, ret_error);
        if (r < 0)
                return r;
        snapshot_status st;
        _cleanup_free_ char *why = NULL;
        r = snapshot_file_status(prep->tool, prep->snapshot, &st, &why);
        if (r < 0) {
                *ret_refused = r == -EBADMSG;
                *ret_error = xasprintf("the snapshot %s is damaged: %s", prep->source, why);
                return r;
        }
        prep->revision = st.revision;
        prep->keys = st.total_keys;
        *ret = TAKE_PTR(prep);
        return 0;
}

bool restore_due(target *t, const etcd_cluster *c, const state_member *rec, bool bootstrapped)
{
        if (!c->restore.enabled)
                return false;
        bool static_member = !rec->seed && !rec->initialized &&
                             streq_ptr(rec->initial_cluster_state, "new") && rec->initial_cluster &&
                             strchr(rec->initial_cluster, ',');
        if (!static_member && (!rec->seed || bootstrapped))
                return false;
        target_member_status ts = {0};
        if (t->ops->member_status(t, c, rec->name, &ts) < 0)
                return false;
        bool absent = ts.state == MEMBER_ABSENT;
        target_member_status_release(&ts);
        return absent;
}

int restore_into(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx,
                 const restore_prep *prep, int64_t bump, char **ret_error)
{
        assert(t && c && p && prep && idx < p->n && bump >= 0);
        if (!t->ops->restore_member) {
                *ret_error = xasprintf("the %s target cannot restore a snapshot", t->ops->name);
                return -EOPNOTSUPP;
        }
        target_restore rs = {.snapshot = prep->snapshot, .tool = prep->tool, .bump_revision = bump};
        int r = t->ops->restore_member(t, c, p, idx, &rs);
        if (r < 0)
                *ret_error = xstrdup(target_last_error(t));
        return r;
}

void restore_bump(state_db *db, const revision_bump *want, const char *asked_by,
                  const char *from_cluster, int64_t snapshot_revision, int64_t taken_ms,
                  int64_t seen_revision, int64_t now_ms, bump_decision *ret)
{
        bump_inputs in = {.want = *want,
                          .asked_by = asked_by,
                          .snapshot_revision = snapshot_revision,
                          .snapshot_ms = taken_ms,
                          .now_ms = now_ms,
                          .seen_revision = seen_revision};
        state_snapshot_list l = {0};
        /*
         * The two newest succeeded snapshots of that cluster: its recent write
         * rate; and the highest revision gitcd knows it reached: any of its
         * snapshots, and its newest restore (its data starts there; a restore
         * from an older snapshot must go past it too).
         */
        if (from_cluster && state_snapshot_list_for(db, from_cluster, 0, &l) >= 0) {
                int found = 0;
                for (size_t i = 0; i < l.n; i++) {
                        const state_snapshot *s = l.items[i];
                        if (!streq_ptr(s->result, "succeeded") || s->revision <= 0)
                                continue;
                        in.seen_revision = MAX(in.seen_revision, s->revision);
                        if (found == 0) {
                                in.newer_revision = s->revision;
                                in.newer_ms = s->started_ms;
                        } else if (found == 1) {
                                in.older_revision = s->revision;
                                in.older_ms = s->started_ms;
                        }
                        found++;
                }
        }
        state_snapshot_list_release(&l);
        state_restore *last = NULL;
        if (from_cluster && state_restore_latest(db, from_cluster, &last) == 0)
                in.seen_revision = MAX(in.seen_revision, last->revision);
        state_restore_free(last);
        bump_decide(&in, ret);
}

const char *restore_bump_asker(const etcd_cluster *c)
{
        for (size_t i = 0; i < c->n_locs; i++)
                if (streq(c->locs[i].path, "spec.bootstrap.restore.bumpRevision"))
                        return "spec.bootstrap.restore.bumpRevision";
        return c->role == ROLE_KUBERNETES ? "the default of spec.role kubernetes-control-plane"
                                          : "the default of spec.role general";
}

int restore_check_data(state_db *db, target *t, const etcd_cluster *c, const char *cluster,
                       const state_member *rec, const char *etcd_dir, char **ret_error)
{
        assert(db && t && c && cluster && rec && ret_error);
        _cleanup_(state_restore_freep) state_restore *last = NULL;
        int k = state_restore_latest(db, cluster, &last);
        if (k == -ENOENT)
                return 0;
        if (k < 0) {
                *ret_error =
                    xasprintf("cannot read the cluster's restores: %s", state_last_error());
                return k;
        }
        /* a member that ran in the restored cluster: its data identity says whether it is its */
        if (rec->initialized || !state_restore_is_for(last, rec->name))
                return 0;
        target_member_status ts = {0};
        k = t->ops->member_status(t, c, rec->name, &ts);
        member_runtime_state state = ts.state;
        target_member_status_release(&ts);
        if (k < 0) {
                *ret_error = xasprintf("cannot tell whether member %s has data: %s", rec->name,
                                       target_last_error(t));
                return k;
        }
        if (state != MEMBER_STOPPED && state != MEMBER_CRASHED && state != MEMBER_CRASH_LOOP)
                return 0; /* no data to check (absent), or running already */
        if (!t->ops->data_revision) {
                *ret_error = xasprintf("member %s holds data the %s target cannot read the "
                                       "revision of, and restore %lld (%s) was for it: it is not "
                                       "started on data that may be from before that restore; "
                                       "remove its data and gitcd restores it",
                                       rec->name, t->ops->name, (long long)last->id, last->source);
                return -ESTALE;
        }
        _cleanup_free_ char *tool = NULL;
        k = restore_find_tool(c, etcd_dir, &tool, ret_error);
        if (k < 0)
                return k;
        int64_t revision = 0;
        k = t->ops->data_revision(t, c, rec->name, tool, &revision);
        if (k == -ENOENT)
                return 0;
        if (k < 0) {
                *ret_error = xasprintf("cannot read the revision of member %s's data: %s",
                                       rec->name, target_last_error(t));
                return k;
        }
        if (revision >= last->revision)
                return 0;
        *ret_error = xasprintf(
            "member %s holds data at revision %lld, older than the restore it was made for "
            "(restore %lld of %s: revision %lld%s): it would rejoin with data from before the "
            "restore, so it is not started; move its data away and gitcd restores it",
            rec->name, (long long)revision, (long long)last->id, last->source,
            (long long)last->revision, last->bump ? ", bumped" : "");
        return -ESTALE;
}
