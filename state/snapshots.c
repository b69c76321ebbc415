/*
 * Snapshot records (state/snapshots.h): the SQL behind them.
 *
 * The table is written in two steps, begin (running) and finish (succeeded
 * or failed), and a trigger refuses to change the result of a finished
 * record, so a failed upload can never later be turned into a snapshot.
 * Retention only adds expired_ms, deleted_ms and delete_error to a
 * succeeded record.
 */
#include <assert.h>
#include <errno.h>

#include "state/internal.h"
#include "state/snapshots.h"
#include "util/hash.h"
#include "util/xalloc.h"

int state_snapshot_begin(state_db *db, const char *cluster, const char *trigger, int64_t slot_ms,
                         int64_t now_ms, int64_t *ret_id)
{
        const char *what = "recording a snapshot";
        int r = db_check_cluster_name(db, cluster, what);
        if (r < 0)
                return r;
        if (!streq_ptr(trigger, "manual") && !streq_ptr(trigger, "schedule"))
                return db_fail(db, -EINVAL, what, "a snapshot is taken by hand or on schedule");
        r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO snapshots (cluster, trigger, slot_ms, started_ms, result) "
                   "VALUES (?, ?, ?, ?, 'running')",
                   "ssii", cluster, trigger, slot_ms, now_ms);
        int64_t id = sqlite3_last_insert_rowid(db->sql);
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

int state_snapshot_finish(state_db *db, int64_t id, const state_snapshot *s, int64_t now_ms)
{
        const char *what = "finishing a snapshot record";
        assert(s);
        bool ok = streq_ptr(s->result, "succeeded");
        if (!ok && !streq_ptr(s->result, "failed"))
                return db_fail(db, -EINVAL, what, "a snapshot finishes as succeeded or failed");
        if (ok && (isempty(s->key) || !hash_sha256_hex_valid(s->sha256)))
                return db_fail(db, -EINVAL, what, "a succeeded snapshot needs its key and SHA-256");
        int r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what, "SELECT result FROM snapshots WHERE id = ?", &st, "i", id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no snapshot %lld", (long long)id);
        else if (r > 0 && !streq_ptr((const char *)sqlite3_column_text(st, 0), "running"))
                r = db_fail(db, -EALREADY, what, "snapshot %lld is already %s", (long long)id,
                            (const char *)sqlite3_column_text(st, 0));
        if (r >= 0)
                r = db_run(db, what,
                           "UPDATE snapshots SET result = ?, error = ?, finished_ms = ?, "
                           "member = ?, revision = ?, size = ?, db_size = ?, sha256 = ?, "
                           "compression = ?, etcd_version = ?, destination = ?, key = ?, "
                           "location = ?, duration_ms = ?, key_count = nullif(?, -1) "
                           "WHERE id = ?",
                           "ssisiiissssssiii", s->result, s->error, now_ms, s->member, s->revision,
                           s->size, s->db_size, s->sha256, s->compression, s->etcd_version,
                           s->destination, s->key, s->location, s->duration_ms,
                           ok && s->key_count >= 0 ? s->key_count : (int64_t)-1, id);
        return db_end(db, r < 0 ? r : 0);
}

/*
 * A record with its latest drill that reached a verdict, else its latest
 * finished one (d: NULL columns when it never had one): a drill that could
 * not run does not hide what an earlier one proved.
 */
#define SNAPSHOT_SELECT                                                                            \
        "SELECT s.id, s.cluster, s.trigger, s.slot_ms, s.started_ms, s.finished_ms, s.result, "    \
        "s.error, s.member, s.revision, s.size, s.db_size, s.sha256, s.compression, "              \
        "s.etcd_version, s.destination, s.key, s.location, s.duration_ms, s.expired_ms, "          \
        "s.deleted_ms, s.delete_error, s.declared_by, coalesce(s.key_count, -1), d.result, "       \
        "d.trigger, d.method, d.message, d.finished_ms, d.restore_ms, d.duration_ms "              \
        "FROM snapshots s LEFT JOIN snapshot_drills d ON d.id = (SELECT x.id FROM "                \
        "snapshot_drills x WHERE x.snapshot_id = s.id AND x.result <> 'running' "                  \
        "ORDER BY x.result = 'unverified', x.id DESC LIMIT 1) "

static state_snapshot *snapshot_from_row(sqlite3_stmt *st)
{
        state_snapshot *s = XNEW(state_snapshot);
        s->id = sqlite3_column_int64(st, 0);
        s->cluster = db_col_text(st, 1);
        s->trigger = db_col_text(st, 2);
        s->slot_ms = sqlite3_column_int64(st, 3);
        s->started_ms = sqlite3_column_int64(st, 4);
        s->finished_ms = sqlite3_column_int64(st, 5);
        s->result = db_col_text(st, 6);
        s->error = db_col_text(st, 7);
        s->member = db_col_text(st, 8);
        s->revision = sqlite3_column_int64(st, 9);
        s->size = sqlite3_column_int64(st, 10);
        s->db_size = sqlite3_column_int64(st, 11);
        s->sha256 = db_col_text(st, 12);
        s->compression = db_col_text(st, 13);
        s->etcd_version = db_col_text(st, 14);
        s->destination = db_col_text(st, 15);
        s->key = db_col_text(st, 16);
        s->location = db_col_text(st, 17);
        s->duration_ms = sqlite3_column_int64(st, 18);
        s->expired_ms = sqlite3_column_int64(st, 19);
        s->deleted_ms = sqlite3_column_int64(st, 20);
        s->delete_error = db_col_text(st, 21);
        s->declared_by = db_col_text(st, 22);
        s->key_count = sqlite3_column_int64(st, 23);
        s->verify_result = db_col_text(st, 24);
        s->verify_trigger = db_col_text(st, 25);
        s->verify_method = db_col_text(st, 26);
        s->verify_message = db_col_text(st, 27);
        s->verify_ms = sqlite3_column_int64(st, 28);
        s->verify_restore_ms = sqlite3_column_int64(st, 29);
        s->verify_duration_ms = sqlite3_column_int64(st, 30);
        return s;
}

int state_snapshot_get(state_db *db, int64_t id, state_snapshot **ret)
{
        const char *what = "reading a snapshot record";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, SNAPSHOT_SELECT "WHERE s.id = ?", &st, "i", id);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no snapshot %lld", (long long)id);
        *ret = snapshot_from_row(st);
        return 0;
}

int state_snapshot_list_for(state_db *db, const char *cluster, size_t limit,
                            state_snapshot_list *ret_list)
{
        const char *what = "listing snapshots";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           SNAPSHOT_SELECT "WHERE ?1 IS NULL OR s.cluster = ?1 "
                                           "ORDER BY s.started_ms DESC, s.id DESC LIMIT ?2",
                           &st, "si", cluster, limit ? (int64_t)limit : (int64_t)-1);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_snapshot_list, snapshot_from_row,
                          state_snapshot_list_release, ret_list);
}

int state_snapshot_expire(state_db *db, int64_t id, int64_t now_ms)
{
        const char *what = "expiring a snapshot";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE snapshots SET expired_ms = coalesce(expired_ms, ?) "
                   "WHERE id = ? AND result = 'succeeded'",
                   "ii", now_ms, id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no succeeded snapshot %lld", (long long)id);
        return db_end(db, r < 0 ? r : 0);
}

int state_snapshot_deleted(state_db *db, int64_t id, const char *error, int64_t now_ms)
{
        const char *what = "recording a snapshot's deletion";
        int r = state_begin(db);
        if (r < 0)
                return r;
        if (error)
                r = db_run(db, what, "UPDATE snapshots SET delete_error = ? WHERE id = ?", "si",
                           error, id);
        else
                r = db_run(db, what,
                           "UPDATE snapshots SET deleted_ms = ?, delete_error = NULL WHERE id = ?",
                           "ii", now_ms, id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no snapshot %lld", (long long)id);
        return db_end(db, r < 0 ? r : 0);
}

int state_snapshot_abandon_running(state_db *db, const char *cluster, const char *why,
                                   int64_t now_ms)
{
        const char *what = "closing interrupted snapshots";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE snapshots SET result = 'failed', error = ?1, finished_ms = ?2 "
                   "WHERE result = 'running' AND (?3 IS NULL OR cluster = ?3)",
                   "sis", why, now_ms, cluster);
        return db_end(db, r);
}

void state_snapshot_free(state_snapshot *s)
{
        if (!s)
                return;
        free(s->cluster);
        free(s->trigger);
        free(s->result);
        free(s->error);
        free(s->member);
        free(s->sha256);
        free(s->compression);
        free(s->etcd_version);
        free(s->destination);
        free(s->key);
        free(s->location);
        free(s->delete_error);
        free(s->declared_by);
        free(s->verify_result);
        free(s->verify_trigger);
        free(s->verify_method);
        free(s->verify_message);
        free(s);
}

DEFINE_STATE_LIST_RELEASE(state_snapshot_list, state_snapshot_free)

/* ---- declared one-off snapshots ---- */

int state_snapshot_requests_sync(state_db *db, const char *cluster,
                                 const state_snapshot_request *reqs, size_t n, int64_t now_ms)
{
        const char *what = "recording declared snapshots";
        int r = db_check_cluster_name(db, cluster, what);
        if (r < 0)
                return r;
        r = state_begin(db);
        if (r < 0)
                return r;
        int added = 0;
        /* every pending request is withdrawn, then the listed ones come back */
        r = db_run(db, what,
                   "UPDATE snapshot_requests SET withdrawn_ms = ? "
                   "WHERE cluster = ? AND snapshot_id IS NULL AND withdrawn_ms IS NULL",
                   "is", now_ms, cluster);
        for (size_t i = 0; i < n && r >= 0; i++) {
                const state_snapshot_request *q = &reqs[i];
                if (isempty(q->object) || isempty(q->identity)) {
                        r = db_fail(db, -EINVAL, what, "a request needs its object and identity");
                        break;
                }
                r = db_run(db, what,
                           "INSERT INTO snapshot_requests "
                           "(cluster, object, identity, destination_json, seen_ms) "
                           "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                           "ssssi", cluster, q->object, q->identity, q->destination_json, now_ms);
                if (r > 0) {
                        added++;
                        continue;
                }
                if (r >= 0)
                        r = db_run(db, what,
                                   "UPDATE snapshot_requests SET withdrawn_ms = NULL "
                                   "WHERE cluster = ? AND object = ? AND identity = ? "
                                   "AND snapshot_id IS NULL",
                                   "sss", cluster, q->object, q->identity);
        }
        r = db_end(db, r < 0 ? r : 0);
        return r < 0 ? r : added;
}

static state_snapshot_request *request_from_row(sqlite3_stmt *st)
{
        state_snapshot_request *q = XNEW(state_snapshot_request);
        q->id = sqlite3_column_int64(st, 0);
        q->cluster = db_col_text(st, 1);
        q->object = db_col_text(st, 2);
        q->identity = db_col_text(st, 3);
        q->destination_json = db_col_text(st, 4);
        q->seen_ms = sqlite3_column_int64(st, 5);
        q->withdrawn_ms = sqlite3_column_int64(st, 6);
        q->snapshot_id = sqlite3_column_int64(st, 7);
        return q;
}

int state_snapshot_requests_list(state_db *db, const char *cluster, bool pending_only,
                                 state_snapshot_request_list *ret_list)
{
        const char *what = "listing declared snapshots";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT id, cluster, object, identity, destination_json, seen_ms, "
                           "withdrawn_ms, snapshot_id FROM snapshot_requests "
                           "WHERE (?1 IS NULL OR cluster = ?1) AND (?2 = 0 OR "
                           "(snapshot_id IS NULL AND withdrawn_ms IS NULL)) ORDER BY id",
                           &st, "si", cluster, (int64_t)pending_only);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_snapshot_request_list, request_from_row,
                          state_snapshot_request_list_release, ret_list);
}

int state_snapshot_begin_declared(state_db *db, int64_t request_id, int64_t now_ms, int64_t *ret_id)
{
        const char *what = "recording a declared snapshot";
        int r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_free_ char *cluster = NULL, *object = NULL;
        r = db_query_row(db, what,
                         "SELECT cluster, object, snapshot_id IS NULL AND withdrawn_ms IS NULL "
                         "FROM snapshot_requests WHERE id = ?",
                         &st, "i", request_id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no declared snapshot %lld", (long long)request_id);
        else if (r > 0 && !sqlite3_column_int(st, 2))
                r = db_fail(db, -EALREADY, what, "declared snapshot %lld was taken or withdrawn",
                            (long long)request_id);
        if (r > 0) {
                cluster = db_col_text(st, 0);
                object = db_col_text(st, 1);
        }
        int64_t id = 0;
        if (r >= 0)
                r = db_run(db, what,
                           "INSERT INTO snapshots (cluster, trigger, slot_ms, started_ms, result, "
                           "declared_by) VALUES (?, 'declared', 0, ?, 'running', ?)",
                           "sis", cluster, now_ms, object);
        if (r >= 0) {
                id = sqlite3_last_insert_rowid(db->sql);
                r = db_run(db, what, "UPDATE snapshot_requests SET snapshot_id = ? WHERE id = ?",
                           "ii", id, request_id);
        }
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

void state_snapshot_request_free(state_snapshot_request *q)
{
        if (!q)
                return;
        free(q->cluster);
        free(q->object);
        free(q->identity);
        free(q->destination_json);
        free(q);
}

DEFINE_STATE_LIST_RELEASE(state_snapshot_request_list, state_snapshot_request_free)

/* ---- restore drills ---- */

int state_snapshot_drill_begin(state_db *db, int64_t snapshot_id, const char *trigger,
                               int64_t slot_ms, int64_t now_ms, int64_t *ret_id)
{
        const char *what = "recording a restore drill";
        if (!streq_ptr(trigger, "snapshot") && !streq_ptr(trigger, "schedule") &&
            !streq_ptr(trigger, "manual"))
                return db_fail(db, -EINVAL, what,
                               "a drill runs after a snapshot, on schedule or by hand");
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO snapshot_drills (snapshot_id, cluster, trigger, slot_ms, "
                   "started_ms, result) SELECT id, cluster, ?, ?, ?, 'running' FROM snapshots "
                   "WHERE id = ? AND result = 'succeeded'",
                   "siii", trigger, slot_ms, now_ms, snapshot_id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no succeeded snapshot %lld",
                            (long long)snapshot_id);
        int64_t id = sqlite3_last_insert_rowid(db->sql);
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

int state_snapshot_drill_finish(state_db *db, int64_t id, const state_snapshot_drill *d,
                                int64_t now_ms)
{
        const char *what = "finishing a restore drill";
        assert(d);
        if (!streq_ptr(d->result, "verified") && !streq_ptr(d->result, "verify-failed") &&
            !streq_ptr(d->result, "unverified"))
                return db_fail(db, -EINVAL, what,
                               "a drill finishes as verified, verify-failed or unverified");
        int r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what, "SELECT result FROM snapshot_drills WHERE id = ?", &st, "i", id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no drill %lld", (long long)id);
        else if (r > 0 && !streq_ptr((const char *)sqlite3_column_text(st, 0), "running"))
                r = db_fail(db, -EALREADY, what, "drill %lld is already %s", (long long)id,
                            (const char *)sqlite3_column_text(st, 0));
        if (r >= 0)
                r = db_run(db, what,
                           "UPDATE snapshot_drills SET result = ?, method = ?, message = ?, "
                           "finished_ms = ?, revision = ?, key_count = nullif(?, -1), "
                           "restore_ms = ?, duration_ms = ? WHERE id = ?",
                           "sssiiiiii", d->result, d->method, d->message, now_ms, d->revision,
                           d->key_count >= 0 ? d->key_count : (int64_t)-1, d->restore_ms,
                           d->duration_ms, id);
        return db_end(db, r < 0 ? r : 0);
}

static state_snapshot_drill *drill_from_row(sqlite3_stmt *st)
{
        state_snapshot_drill *d = XNEW(state_snapshot_drill);
        d->id = sqlite3_column_int64(st, 0);
        d->snapshot_id = sqlite3_column_int64(st, 1);
        d->cluster = db_col_text(st, 2);
        d->trigger = db_col_text(st, 3);
        d->slot_ms = sqlite3_column_int64(st, 4);
        d->started_ms = sqlite3_column_int64(st, 5);
        d->finished_ms = sqlite3_column_int64(st, 6);
        d->result = db_col_text(st, 7);
        d->method = db_col_text(st, 8);
        d->message = db_col_text(st, 9);
        d->revision = sqlite3_column_int64(st, 10);
        d->key_count = sqlite3_column_int64(st, 11);
        d->restore_ms = sqlite3_column_int64(st, 12);
        d->duration_ms = sqlite3_column_int64(st, 13);
        return d;
}

#define DRILL_SELECT                                                                               \
        "SELECT id, snapshot_id, cluster, trigger, slot_ms, started_ms, finished_ms, result, "     \
        "method, message, revision, coalesce(key_count, -1), restore_ms, duration_ms "             \
        "FROM snapshot_drills "

int state_snapshot_drill_get(state_db *db, int64_t id, state_snapshot_drill **ret)
{
        const char *what = "reading a restore drill";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, DRILL_SELECT "WHERE id = ?", &st, "i", id);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no drill %lld", (long long)id);
        *ret = drill_from_row(st);
        return 0;
}

int state_snapshot_drill_list_for(state_db *db, const char *cluster, size_t limit,
                                  state_snapshot_drill_list *ret_list)
{
        const char *what = "listing restore drills";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           DRILL_SELECT "WHERE ?1 IS NULL OR cluster = ?1 ORDER BY id DESC "
                                        "LIMIT ?2",
                           &st, "si", cluster, limit ? (int64_t)limit : (int64_t)-1);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_snapshot_drill_list, drill_from_row,
                          state_snapshot_drill_list_release, ret_list);
}

int state_snapshot_drill_abandon_running(state_db *db, const char *why, int64_t now_ms)
{
        const char *what = "closing interrupted restore drills";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE snapshot_drills SET result = 'unverified', message = ?, "
                   "finished_ms = ?, duration_ms = ? - started_ms WHERE result = 'running'",
                   "sii", why, now_ms, now_ms);
        return db_end(db, r);
}

int state_snapshot_drill_last_slot(state_db *db, const char *cluster, int64_t *ret_slot_ms)
{
        const char *what = "reading the last scheduled drill";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT coalesce(max(slot_ms), 0) FROM snapshot_drills "
                             "WHERE cluster = ? AND trigger = 'schedule'",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        *ret_slot_ms = r > 0 ? sqlite3_column_int64(st, 0) : 0;
        return 0;
}

void state_snapshot_drill_free(state_snapshot_drill *d)
{
        if (!d)
                return;
        free(d->cluster);
        free(d->trigger);
        free(d->result);
        free(d->method);
        free(d->message);
        free(d);
}

DEFINE_STATE_LIST_RELEASE(state_snapshot_drill_list, state_snapshot_drill_free)
