/*
 * The operations journal: an intent row written (and made durable) before
 * every membership or object change, finished afterwards.
 *
 *     begin ──▶ pending ──▶ done
 *                  │  ├───▶ failed      (the call returned an error)
 *                  │  └───▶ abandoned   (a restart found it still pending)
 *
 * A finished operation never changes again (a trigger refuses it). After a
 * crash, state_op_list_pending() says what was in flight; the reconciler
 * observes the world to learn whether it happened, then abandons the rows.
 * The journal is a hint for that pass, not the source of truth.
 */
#include <errno.h>
#include <jansson.h>

#include "state/internal.h"
#include "util/xalloc.h"

static const char *const op_state_names[] = {
    [STATE_OP_PENDING] = "pending",
    [STATE_OP_DONE] = "done",
    [STATE_OP_FAILED] = "failed",
    [STATE_OP_ABANDONED] = "abandoned",
};

const char *state_op_state_to_string(state_op_state s)
{
        if ((size_t)s >= ARRAY_SIZE(op_state_names))
                return "unknown";
        return op_state_names[s];
}

static state_op_state op_state_from_string(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(op_state_names); i++)
                if (streq_ptr(s, op_state_names[i]))
                        return (state_op_state)i;
        return STATE_OP_PENDING;
}

int state_op_begin(state_db *db, const char *cluster, const char *kind, const char *subject,
                   const char *payload_json, int64_t now_ms, int64_t *ret_id)
{
        const char *what = "journaling an operation";
        if (isempty(cluster) || isempty(kind))
                return db_fail(db, -EINVAL, what, "an operation needs a cluster and a kind");
        if (payload_json) {
                json_t *j = json_loads(payload_json, JSON_DECODE_ANY, NULL);
                json_decref(j);
                if (!j)
                        return db_fail(db, -EINVAL, what, "the payload of %s is not JSON", kind);
        }
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO operations (cluster, kind, subject, payload, state, started_ms) "
                   "VALUES (?, ?, ?, ?, 'pending', ?)",
                   "ssssi", cluster, kind, subject, payload_json, now_ms);
        int64_t id = sqlite3_last_insert_rowid(db->sql);
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

int state_op_finish(state_db *db, int64_t id, state_op_state to, const char *error, int64_t now_ms)
{
        const char *what = "finishing an operation";
        if (to == STATE_OP_PENDING || (size_t)to >= ARRAY_SIZE(op_state_names))
                return db_fail(db, -EINVAL, what,
                               "an operation finishes as done, failed or "
                               "abandoned");
        int r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what, "SELECT state FROM operations WHERE id = ?", &st, "i", id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no operation %lld", (long long)id);
        else if (r > 0 && !streq_ptr((const char *)sqlite3_column_text(st, 0), "pending"))
                r = db_fail(db, -EALREADY, what, "operation %lld is already %s", (long long)id,
                            (const char *)sqlite3_column_text(st, 0));
        if (r >= 0)
                r = db_run(db, what,
                           "UPDATE operations SET state = ?, finished_ms = ?, error = ? "
                           "WHERE id = ?",
                           "sisi", state_op_state_to_string(to), now_ms, error, id);
        return db_end(db, r < 0 ? r : 0);
}

#define OP_COLUMNS "id, cluster, kind, subject, payload, state, started_ms, finished_ms, error"

static state_op *op_from_row(sqlite3_stmt *st)
{
        state_op *op = XNEW(state_op);
        op->id = sqlite3_column_int64(st, 0);
        op->cluster = db_col_text(st, 1);
        op->kind = db_col_text(st, 2);
        op->subject = db_col_text(st, 3);
        op->payload_json = db_col_text(st, 4);
        op->state = op_state_from_string((const char *)sqlite3_column_text(st, 5));
        op->started_ms = sqlite3_column_int64(st, 6);
        op->finished_ms = sqlite3_column_int64(st, 7);
        op->error = db_col_text(st, 8);
        return op;
}

int state_op_get(state_db *db, int64_t id, state_op **ret_op)
{
        const char *what = "reading an operation";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, "SELECT " OP_COLUMNS " FROM operations WHERE id = ?", &st,
                             "i", id);
        if (r < 0)
                return r;
        if (r == 0)
                return db_fail(db, -ENOENT, what, "no operation %lld", (long long)id);
        *ret_op = op_from_row(st);
        return 0;
}

int state_op_list_pending(state_db *db, const char *cluster, state_op_list *ret_list)
{
        const char *what = "listing pending operations";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT " OP_COLUMNS " FROM operations WHERE state = 'pending' "
                           "AND (?1 IS NULL OR cluster = ?1) ORDER BY id",
                           &st, "s", cluster);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_op_list, op_from_row, state_op_list_release,
                          ret_list);
}

int state_op_abandon_pending(state_db *db, const char *cluster, const char *why, int64_t now_ms)
{
        const char *what = "abandoning pending operations";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE operations SET state = 'abandoned', finished_ms = ?1, error = ?2 "
                   "WHERE state = 'pending' AND (?3 IS NULL OR cluster = ?3)",
                   "iss", now_ms, why, cluster);
        return db_end(db, r);
}

void state_op_free(state_op *op)
{
        if (!op)
                return;
        free(op->cluster);
        free(op->kind);
        free(op->subject);
        free(op->payload_json);
        free(op->error);
        free(op);
}

DEFINE_STATE_LIST_RELEASE(state_op_list, state_op_free)
