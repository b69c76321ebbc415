/*
 * Restore records (state/restores.h): the SQL behind them.
 *
 * "Recorded once" is the unique indexes' rule (one bootstrap restore per
 * cluster, one restore per recovery): a second record is never inserted,
 * the first is handed back, inside one transaction, so two passes can never
 * restore members of one cluster with different bumps.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "state/internal.h"
#include "state/restores.h"
#include "util/xalloc.h"

#define RESTORE_COLUMNS                                                                            \
        "id, cluster, origin, recovery_id, source, snapshot_revision, bump, sizing, revision, "    \
        "members, recorded_ms"

static state_restore *restore_from_row(sqlite3_stmt *st)
{
        state_restore *v = XNEW(state_restore);
        v->id = sqlite3_column_int64(st, 0);
        v->cluster = db_col_text(st, 1);
        v->origin = db_col_text(st, 2);
        v->recovery_id = sqlite3_column_int64(st, 3);
        v->source = db_col_text(st, 4);
        v->snapshot_revision = sqlite3_column_int64(st, 5);
        v->bump = sqlite3_column_int64(st, 6);
        v->sizing = db_col_text(st, 7);
        v->revision = sqlite3_column_int64(st, 8);
        v->members = db_col_text(st, 9);
        v->recorded_ms = sqlite3_column_int64(st, 10);
        return v;
}

/* The record a second request for the same restore finds: the bootstrap's, or the recovery's. */
static int find_same(state_db *db, const state_restore *rec, state_restore **ret)
{
        const char *what = "reading a restore record";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT " RESTORE_COLUMNS " FROM restores WHERE "
                           "(?2 = 0 AND cluster = ?1 AND origin = 'bootstrap') OR "
                           "(?2 <> 0 AND recovery_id = ?2)",
                           &st, "si", rec->cluster, rec->recovery_id);
        if (r < 0)
                return r;
        r = db_step(db, st, what);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;
        *ret = restore_from_row(st);
        return 0;
}

int state_restore_record(state_db *db, const state_restore *rec, int64_t now_ms,
                         state_restore **ret)
{
        const char *what = "recording a restore";
        assert(rec && ret);
        bool recovery = streq_ptr(rec->origin, "recovery");
        int r = db_check_cluster_name(db, rec->cluster, what);
        if (r < 0)
                return r;
        if ((!recovery && !streq_ptr(rec->origin, "bootstrap")) ||
            recovery != (rec->recovery_id > 0))
                return db_fail(db, -EINVAL, what,
                               "a restore is a bootstrap's or a recovery's (with its id)");
        if (isempty(rec->source) || isempty(rec->members) || rec->bump < 0 ||
            rec->snapshot_revision < 0 || rec->revision != rec->snapshot_revision + rec->bump)
                return db_fail(db, -EINVAL, what, "an incomplete restore record");
        r = state_begin(db);
        if (r < 0)
                return r;
        state_restore *found = NULL;
        r = find_same(db, rec, &found);
        if (r == 0) {
                r = db_end(db, 0);
                if (r < 0) {
                        state_restore_free(found);
                        return r;
                }
                *ret = found;
                return 1;
        }
        if (r != -ENOENT)
                return db_end(db, r);
        r = db_run(db, what,
                   "INSERT INTO restores (cluster, origin, recovery_id, source, snapshot_revision, "
                   "bump, sizing, revision, members, recorded_ms) "
                   "VALUES (?, ?, NULLIF(?, 0), ?, ?, ?, ?, ?, ?, ?)",
                   "ssisiisisi", rec->cluster, rec->origin, rec->recovery_id, rec->source,
                   rec->snapshot_revision, rec->bump, rec->sizing, rec->revision, rec->members,
                   now_ms);
        if (r >= 0)
                r = find_same(db, rec, &found);
        r = db_end(db, r < 0 ? r : 0);
        if (r < 0) {
                state_restore_free(found);
                return r;
        }
        *ret = found;
        return 0;
}

int state_restore_latest(state_db *db, const char *cluster, state_restore **ret)
{
        const char *what = "reading the latest restore";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT " RESTORE_COLUMNS
                             " FROM restores WHERE cluster = ? ORDER BY id DESC LIMIT 1",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT; /* the usual answer: no message */
        *ret = restore_from_row(st);
        return 0;
}

int state_restore_list_for(state_db *db, const char *cluster, size_t limit,
                           state_restore_list *ret_list)
{
        const char *what = "listing restores";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT " RESTORE_COLUMNS " FROM restores "
                           "WHERE ?1 IS NULL OR cluster = ?1 ORDER BY id DESC LIMIT ?2",
                           &st, "si", cluster, limit ? (int64_t)limit : (int64_t)-1);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_restore_list, restore_from_row,
                          state_restore_list_release, ret_list);
}

bool state_restore_is_for(const state_restore *rec, const char *member)
{
        size_t n = member ? strlen(member) : 0;
        for (const char *p = rec && n ? rec->members : NULL; p && *p;) {
                size_t len = strcspn(p, ",");
                if (len == n && strneq(p, member, n))
                        return true;
                p = p[len] ? p + len + 1 : NULL;
        }
        return false;
}

void state_restore_free(state_restore *v)
{
        if (!v)
                return;
        free(v->cluster);
        free(v->origin);
        free(v->source);
        free(v->sizing);
        free(v->members);
        free(v);
}

DEFINE_STATE_LIST_RELEASE(state_restore_list, state_restore_free)
