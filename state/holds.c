/*
 * The holds on a cluster's steps (state/holds.h): the SQL behind them.
 *
 * One row per cluster in `holds`, made on the first write; a spent override
 * token is a row of `override_tokens` keyed by (cluster, token), so a token
 * is spent once however often the same commit is read again.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "state/holds.h"
#include "state/internal.h"
#include "util/xalloc.h"

void state_hold_free(state_hold *h)
{
        if (!h)
                return;
        free(h->cluster);
        free(h->suspended_by);
        free(h->suspend_reason);
        free(h->held);
        free(h);
}

int state_hold_get(state_db *db, const char *cluster, state_hold **ret)
{
        assert(ret);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, "reading a cluster's holds",
                             "SELECT cluster, suspended_by, suspended_ms, suspend_reason, held, "
                             "held_ms FROM holds WHERE cluster = ?",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        state_hold *h = XNEW(state_hold);
        h->cluster = db_col_text(st, 0);
        h->suspended_by = db_col_text(st, 1);
        h->suspended_ms = sqlite3_column_int64(st, 2);
        h->suspend_reason = db_col_text(st, 3);
        h->held = db_col_text(st, 4);
        h->held_ms = sqlite3_column_int64(st, 5);
        *ret = h;
        return 0;
}

int state_hold_suspend(state_db *db, const char *cluster, const char *by, const char *reason,
                       int64_t now_ms)
{
        const char *what = "recording a suspension";
        if (isempty(by))
                return db_fail(db, -EINVAL, what, "a suspension needs who asked for it");
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_cluster_exists(db, cluster, what);
        bool before = false;
        if (r >= 0) {
                _cleanup_stmt_ sqlite3_stmt *st = NULL;
                r = db_query_row(db, what,
                                 "SELECT 1 FROM holds WHERE cluster = ? AND suspended_by IS NOT "
                                 "NULL",
                                 &st, "s", cluster);
                before = r > 0;
        }
        if (r >= 0)
                r = db_run(db, what,
                           "INSERT INTO holds (cluster, suspended_by, suspended_ms, "
                           "suspend_reason) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (cluster) DO "
                           "UPDATE SET suspended_by = ?2, suspended_ms = CASE WHEN "
                           "suspended_by IS NULL THEN ?3 ELSE suspended_ms END, "
                           "suspend_reason = ?4",
                           "ssis", cluster, by, now_ms, reason);
        r = db_end(db, r < 0 ? r : 0);
        return r < 0 ? r : before ? 0 : 1;
}

int state_hold_resume(state_db *db, const char *cluster)
{
        const char *what = "lifting a suspension";
        int r = db_cluster_exists(db, cluster, what);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE holds SET suspended_by = NULL, suspended_ms = 0, suspend_reason = "
                   "NULL WHERE cluster = ? AND suspended_by IS NOT NULL",
                   "s", cluster);
        return r < 0 ? r : r > 0;
}

int state_hold_set_held(state_db *db, const char *cluster, const char *held, int64_t now_ms)
{
        if (!held) {
                int k = db_run(db, "recording a held state",
                               "UPDATE holds SET held = NULL, held_ms = ? WHERE cluster = ? AND "
                               "held IS NOT NULL",
                               "is", now_ms, cluster);
                return k < 0 ? k : k > 0;
        }
        int r = db_run(db, "recording a held state",
                       "INSERT INTO holds (cluster, held, held_ms) VALUES (?1, ?2, ?3) ON "
                       "CONFLICT (cluster) DO UPDATE SET held = ?2, held_ms = ?3 WHERE held IS "
                       "NOT ?2",
                       "ssi", cluster, held, now_ms);
        return r < 0 ? r : r > 0;
}

int state_override_spent(state_db *db, const char *cluster, const char *token,
                         int64_t *ret_spent_ms)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, "looking an override token up",
                             "SELECT spent_ms FROM override_tokens WHERE cluster = ? AND token = ?",
                             &st, "ss", cluster, token);
        if (r > 0 && ret_spent_ms)
                *ret_spent_ms = sqlite3_column_int64(st, 0);
        return r;
}

int state_override_spend(state_db *db, const char *cluster, const char *token, const char *commit,
                         int64_t now_ms)
{
        int r = db_run(db, "spending an override token",
                       "INSERT INTO override_tokens (cluster, token, spent_ms, commit_id) VALUES "
                       "(?, ?, ?, ?) ON CONFLICT (cluster, token) DO NOTHING",
                       "ssis", cluster, token, now_ms, commit);
        return r < 0 ? r : r > 0;
}
