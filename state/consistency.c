/*
 * The consistency row and the repair records (state/consistency.h): the
 * SQL behind them.
 *
 * The row is written whole (INSERT OR REPLACE), as the reconciler keeps it
 * in one piece; two partial unique indexes carry the repair rules no
 * caller may get wrong: one running repair per cluster, and one record per
 * (cluster, token), which makes a spec.repair commit act once even when
 * gitcd restarts and reads the same commit again.
 */
#include <assert.h>
#include <errno.h>

#include "state/consistency.h"
#include "state/internal.h"
#include "util/xalloc.h"

#define CONSISTENCY_COLUMNS                                                                        \
        "cluster, checked_ms, revision, compact_revision, verdict, hashes, minority, "             \
        "duration_ms, attempt_ms, attempt_error, due, frozen_ms, frozen_cause, frozen_message, "   \
        "held, lifted_ms"

int state_consistency_get(state_db *db, const char *cluster, state_consistency **ret)
{
        const char *what = "reading the consistency check";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT " CONSISTENCY_COLUMNS " FROM consistency WHERE cluster = ?",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT; /* the usual answer before the first check: no message */
        state_consistency *v = XNEW(state_consistency);
        v->cluster = db_col_text(st, 0);
        v->checked_ms = sqlite3_column_int64(st, 1);
        v->revision = sqlite3_column_int64(st, 2);
        v->compact_revision = sqlite3_column_int64(st, 3);
        v->verdict = db_col_text(st, 4);
        v->hashes = db_col_text(st, 5);
        v->minority = db_col_text(st, 6);
        v->duration_ms = sqlite3_column_int64(st, 7);
        v->attempt_ms = sqlite3_column_int64(st, 8);
        v->attempt_error = db_col_text(st, 9);
        v->due = sqlite3_column_int(st, 10) != 0;
        v->frozen_ms = sqlite3_column_int64(st, 11);
        v->frozen_cause = db_col_text(st, 12);
        v->frozen_message = db_col_text(st, 13);
        v->held = db_col_text(st, 14);
        v->lifted_ms = sqlite3_column_int64(st, 15);
        *ret = v;
        return 0;
}

int state_consistency_put(state_db *db, const state_consistency *v)
{
        const char *what = "recording the consistency check";
        assert(v);
        int r = db_check_cluster_name(db, v->cluster, what);
        if (r < 0)
                return r;
        r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT OR REPLACE INTO consistency (" CONSISTENCY_COLUMNS ") "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "siiisssiisbisssi", v->cluster, v->checked_ms, v->revision, v->compact_revision,
                   v->verdict, v->hashes, v->minority, v->duration_ms, v->attempt_ms,
                   v->attempt_error, (int)v->due, v->frozen_ms, v->frozen_cause, v->frozen_message,
                   v->held, v->lifted_ms);
        return db_end(db, r < 0 ? r : 0);
}

void state_consistency_free(state_consistency *v)
{
        if (!v)
                return;
        free(v->cluster);
        free(v->verdict);
        free(v->hashes);
        free(v->minority);
        free(v->attempt_error);
        free(v->frozen_cause);
        free(v->frozen_message);
        free(v->held);
        free(v);
}

/* ---- repairs ------------------------------------------------------------- */

int state_repair_request(state_db *db, const state_repair *req, int64_t now_ms, int64_t *ret_id)
{
        const char *what = "recording a repair request";
        assert(req);
        int r = db_check_cluster_name(db, req->cluster, what);
        if (r < 0)
                return r;
        bool replace = streq_ptr(req->kind, "replace");
        if (!replace && !streq_ptr(req->kind, "recheck"))
                return db_fail(db, -EINVAL, what, "a repair replaces a member or rechecks");
        if (replace == isempty(req->member))
                return db_fail(db, -EINVAL, what, "a replacement names one member, a recheck none");
        r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what,
                         "SELECT id, token IS NOT NULL AND token = ?2 FROM repairs WHERE "
                         "cluster = ?1 AND (result = 'running' OR token = ?2)",
                         &st, "ss", req->cluster, req->token);
        if (r > 0) {
                int64_t other = sqlite3_column_int64(st, 0);
                bool token = sqlite3_column_int(st, 1);
                r = token ? db_fail(db, -EALREADY, what,
                                    "%s: repair token already used (repair %lld)", req->cluster,
                                    (long long)other)
                          : db_fail(db, -EBUSY, what, "%s: repair %lld is still running",
                                    req->cluster, (long long)other);
        }
        int64_t id = 0;
        if (r >= 0) {
                r = db_run(db, what,
                           "INSERT INTO repairs (cluster, kind, member, token, requested_by, "
                           "commit_id, requested_ms, phase, result) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, 'requested', 'running')",
                           "ssssssi", req->cluster, req->kind, req->member, req->token,
                           req->requested_by, req->commit, now_ms);
                id = sqlite3_last_insert_rowid(db->sql);
        }
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

int state_repair_token_used(state_db *db, const char *cluster, const char *token)
{
        return db_has_row(db, "looking a repair token up",
                          "SELECT 1 FROM repairs WHERE cluster = ? AND token = ?", cluster, token);
}

#define REPAIR_COLUMNS                                                                             \
        "id, cluster, kind, member, token, requested_by, commit_id, requested_ms, phase, "         \
        "replacement, result, error, finished_ms"

static state_repair *repair_from_row(sqlite3_stmt *st)
{
        state_repair *v = XNEW(state_repair);
        v->id = sqlite3_column_int64(st, 0);
        v->cluster = db_col_text(st, 1);
        v->kind = db_col_text(st, 2);
        v->member = db_col_text(st, 3);
        v->token = db_col_text(st, 4);
        v->requested_by = db_col_text(st, 5);
        v->commit = db_col_text(st, 6);
        v->requested_ms = sqlite3_column_int64(st, 7);
        v->phase = db_col_text(st, 8);
        v->replacement = db_col_text(st, 9);
        v->result = db_col_text(st, 10);
        v->error = db_col_text(st, 11);
        v->finished_ms = sqlite3_column_int64(st, 12);
        return v;
}

int state_repair_running(state_db *db, const char *cluster, state_repair **ret)
{
        const char *what = "reading the running repair";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT " REPAIR_COLUMNS
                             " FROM repairs WHERE cluster = ? AND result = 'running'",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT; /* the usual answer: no message */
        *ret = repair_from_row(st);
        return 0;
}

int state_repair_update(state_db *db, const state_repair *rep)
{
        const char *what = "recording a repair's progress";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE repairs SET phase = ?, replacement = ? WHERE id = ? AND result = "
                   "'running'",
                   "ssi", rep->phase, rep->replacement, rep->id);
        if (r == 0)
                r = db_fail(db, -EALREADY, what, "no running repair %lld", (long long)rep->id);
        return db_end(db, r < 0 ? r : 0);
}

int state_repair_finish(state_db *db, int64_t id, const char *result, const char *error,
                        int64_t now_ms)
{
        const char *what = "finishing a repair";
        if (!streq_ptr(result, "succeeded") && !streq_ptr(result, "refused") &&
            !streq_ptr(result, "failed"))
                return db_fail(db, -EINVAL, what, "a repair ends succeeded, refused or failed");
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE repairs SET result = ?, error = ?, finished_ms = ? "
                   "WHERE id = ? AND result = 'running'",
                   "ssii", result, error, now_ms, id);
        if (r == 0)
                r = db_fail(db, -EALREADY, what, "no running repair %lld", (long long)id);
        return db_end(db, r < 0 ? r : 0);
}

int state_repair_list_for(state_db *db, const char *cluster, size_t limit,
                          state_repair_list *ret_list)
{
        const char *what = "listing repairs";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT " REPAIR_COLUMNS " FROM repairs "
                           "WHERE ?1 IS NULL OR cluster = ?1 ORDER BY id DESC LIMIT ?2",
                           &st, "si", cluster, limit ? (int64_t)limit : (int64_t)-1);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_repair_list, repair_from_row,
                          state_repair_list_release, ret_list);
}

void state_repair_free(state_repair *v)
{
        if (!v)
                return;
        free(v->cluster);
        free(v->kind);
        free(v->member);
        free(v->token);
        free(v->requested_by);
        free(v->commit);
        free(v->phase);
        free(v->replacement);
        free(v->result);
        free(v->error);
        free(v);
}

DEFINE_STATE_LIST_RELEASE(state_repair_list, state_repair_free)
