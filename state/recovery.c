/*
 * Recovery records (state/recovery.h): the SQL behind them.
 *
 * Two partial unique indexes carry the rules that matter for safety, so no
 * caller can get them wrong: one running recovery per cluster, and one
 * record per (cluster, token), which is what makes a spec.recovery commit
 * act once even when gitcd restarts and reads the same commit again.
 */
#include <assert.h>
#include <errno.h>

#include "state/internal.h"
#include "state/recovery.h"
#include "util/xalloc.h"

int state_recovery_request(state_db *db, const state_recovery *req, int64_t now_ms, int64_t *ret_id)
{
        const char *what = "recording a recovery request";
        assert(req);
        int r = db_check_cluster_name(db, req->cluster, what);
        if (r < 0)
                return r;
        if (!streq_ptr(req->source_kind, "member") && !streq_ptr(req->source_kind, "snapshot"))
                return db_fail(db, -EINVAL, what, "a recovery starts from a member or a snapshot");
        if (isempty(req->source))
                return db_fail(db, -EINVAL, what, "a recovery needs its source");
        r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what,
                         "SELECT id, token IS NOT NULL AND token = ?2 FROM recoveries WHERE "
                         "cluster = ?1 AND (result = 'running' OR token = ?2)",
                         &st, "ss", req->cluster, req->token);
        if (r > 0) {
                int64_t other = sqlite3_column_int64(st, 0);
                bool token = sqlite3_column_int(st, 1);
                r = token ? db_fail(db, -EALREADY, what,
                                    "%s: recovery token already used (recovery %lld)", req->cluster,
                                    (long long)other)
                          : db_fail(db, -EBUSY, what, "%s: recovery %lld is still running",
                                    req->cluster, (long long)other);
        }
        int64_t id = 0;
        if (r >= 0) {
                r = db_run(db, what,
                           "INSERT INTO recoveries (cluster, source_kind, source, token, "
                           "requested_by, commit_id, requested_ms, phase, result, bump_revision) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, 'requested', 'running', ?)",
                           "ssssssis", req->cluster, req->source_kind, req->source, req->token,
                           req->requested_by, req->commit, now_ms, req->bump_revision);
                id = sqlite3_last_insert_rowid(db->sql);
        }
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

int state_recovery_token_used(state_db *db, const char *cluster, const char *token)
{
        return db_has_row(db, "looking a recovery token up",
                          "SELECT 1 FROM recoveries WHERE cluster = ? AND token = ?", cluster,
                          token);
}

#define RECOVERY_COLUMNS                                                                           \
        "id, cluster, source_kind, source, token, requested_by, commit_id, requested_ms, phase, "  \
        "seed, aside, revision, raft_index, result, error, finished_ms, cleaned_ms, bump_revision"

static state_recovery *recovery_from_row(sqlite3_stmt *st)
{
        state_recovery *v = XNEW(state_recovery);
        v->id = sqlite3_column_int64(st, 0);
        v->cluster = db_col_text(st, 1);
        v->source_kind = db_col_text(st, 2);
        v->source = db_col_text(st, 3);
        v->token = db_col_text(st, 4);
        v->requested_by = db_col_text(st, 5);
        v->commit = db_col_text(st, 6);
        v->requested_ms = sqlite3_column_int64(st, 7);
        v->phase = db_col_text(st, 8);
        v->seed = db_col_text(st, 9);
        v->aside = db_col_text(st, 10);
        v->revision = sqlite3_column_int64(st, 11);
        v->raft_index = sqlite3_column_int64(st, 12);
        v->result = db_col_text(st, 13);
        v->error = db_col_text(st, 14);
        v->finished_ms = sqlite3_column_int64(st, 15);
        v->cleaned_ms = sqlite3_column_int64(st, 16);
        v->bump_revision = db_col_text(st, 17);
        return v;
}

int state_recovery_running(state_db *db, const char *cluster, state_recovery **ret)
{
        const char *what = "reading the running recovery";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT " RECOVERY_COLUMNS
                             " FROM recoveries WHERE cluster = ? AND result = 'running'",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT; /* the usual answer: no message */
        *ret = recovery_from_row(st);
        return 0;
}

int state_recovery_update(state_db *db, const state_recovery *rec)
{
        const char *what = "recording a recovery's progress";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE recoveries SET phase = ?, seed = ?, aside = ?, revision = ?, "
                   "raft_index = ? WHERE id = ? AND result = 'running'",
                   "sssiii", rec->phase, rec->seed, rec->aside, rec->revision, rec->raft_index,
                   rec->id);
        if (r == 0)
                r = db_fail(db, -EALREADY, what, "no running recovery %lld", (long long)rec->id);
        return db_end(db, r < 0 ? r : 0);
}

int state_recovery_finish(state_db *db, int64_t id, const char *result, const char *error,
                          int64_t now_ms)
{
        const char *what = "finishing a recovery";
        if (!streq_ptr(result, "succeeded") && !streq_ptr(result, "refused") &&
            !streq_ptr(result, "failed"))
                return db_fail(db, -EINVAL, what, "a recovery ends succeeded, refused or failed");
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE recoveries SET result = ?, error = ?, finished_ms = ? "
                   "WHERE id = ? AND result = 'running'",
                   "ssii", result, error, now_ms, id);
        if (r == 0)
                r = db_fail(db, -EALREADY, what, "no running recovery %lld", (long long)id);
        return db_end(db, r < 0 ? r : 0);
}

int state_recovery_set_cleaned(state_db *db, int64_t id, int64_t now_ms)
{
        const char *what = "recording a recovery's clean-up";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "UPDATE recoveries SET cleaned_ms = ? WHERE id = ?", "ii", now_ms, id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no recovery %lld", (long long)id);
        return db_end(db, r < 0 ? r : 0);
}

int state_recovery_list_for(state_db *db, const char *cluster, size_t limit,
                            state_recovery_list *ret_list)
{
        const char *what = "listing recoveries";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT " RECOVERY_COLUMNS " FROM recoveries "
                           "WHERE ?1 IS NULL OR cluster = ?1 ORDER BY id DESC LIMIT ?2",
                           &st, "si", cluster, limit ? (int64_t)limit : (int64_t)-1);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_recovery_list, recovery_from_row,
                          state_recovery_list_release, ret_list);
}

int state_recovery_assessment_put(state_db *db, const char *cluster, const char *json,
                                  int64_t now_ms)
{
        const char *what = "recording the quorum-loss assessment";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO recovery_assessments (cluster, observed_ms, json) VALUES (?, ?, ?) "
                   "ON CONFLICT (cluster) DO UPDATE SET observed_ms = excluded.observed_ms, "
                   "json = excluded.json",
                   "sis", cluster, now_ms, json);
        return db_end(db, r < 0 ? r : 0);
}

int state_recovery_assessment_get(state_db *db, const char *cluster, char **ret_json,
                                  int64_t *ret_observed_ms)
{
        const char *what = "reading the quorum-loss assessment";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT json, observed_ms FROM recovery_assessments WHERE cluster = ?",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        *ret_json = db_col_text(st, 0);
        if (ret_observed_ms)
                *ret_observed_ms = sqlite3_column_int64(st, 1);
        return 0;
}

int state_recovery_assessment_clear(state_db *db, const char *cluster)
{
        const char *what = "forgetting the quorum-loss assessment";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "DELETE FROM recovery_assessments WHERE cluster = ?", "s", cluster);
        return db_end(db, r < 0 ? r : 0);
}

void state_recovery_free(state_recovery *v)
{
        if (!v)
                return;
        free(v->cluster);
        free(v->source_kind);
        free(v->source);
        free(v->token);
        free(v->requested_by);
        free(v->commit);
        free(v->phase);
        free(v->seed);
        free(v->aside);
        free(v->result);
        free(v->error);
        free(v->bump_revision);
        free(v);
}

DEFINE_STATE_LIST_RELEASE(state_recovery_list, state_recovery_free)
