/*
 * Maintenance run records (state/maintenance.h): the SQL behind them.
 *
 * Every update of a run goes through run_update(), which refuses a
 * finished run with -EALREADY before the schema's trigger would, so a
 * caller gets a clear message instead of a constraint failure.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "state/internal.h"
#include "state/maintenance.h"
#include "util/xalloc.h"

static bool trigger_valid(const char *t)
{
        return streq_ptr(t, "schedule") || streq_ptr(t, "free-space") || streq_ptr(t, "quota") ||
               streq_ptr(t, "nospace");
}

int state_maint_run_begin(state_db *db, const char *cluster, const char *trigger, int64_t slot_ms,
                          int64_t now_ms, int64_t *ret_id)
{
        const char *what = "recording a maintenance run";
        int r = db_check_cluster_name(db, cluster, what);
        if (r < 0)
                return r;
        if (!trigger_valid(trigger))
                return db_fail(db, -EINVAL, what, "\"%s\" is not a maintenance trigger",
                               trigger ? trigger : "");
        r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO maintenance_runs (cluster, trigger, slot_ms, started_ms, result) "
                   "VALUES (?, ?, ?, ?, 'running')",
                   "ssii", cluster, trigger, slot_ms, now_ms);
        int64_t id = sqlite3_last_insert_rowid(db->sql);
        r = db_end(db, r < 0 ? r : 0);
        if (r >= 0 && ret_id)
                *ret_id = id;
        return r;
}

/* Check that run id is running, then run sql (whose last parameter is the id). */
static int run_update(state_db *db, int64_t id, const char *what, const char *sql, const char *s,
                      int64_t i)
{
        int r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what, "SELECT result FROM maintenance_runs WHERE id = ?", &st, "i",
                         id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no maintenance run %lld", (long long)id);
        else if (r > 0 && !streq_ptr((const char *)sqlite3_column_text(st, 0), "running"))
                r = db_fail(db, -EALREADY, what, "maintenance run %lld is already %s",
                            (long long)id, (const char *)sqlite3_column_text(st, 0));
        if (r >= 0)
                r = s ? db_run(db, what, sql, "si", s, id) : db_run(db, what, sql, "ii", i, id);
        return db_end(db, r < 0 ? r : 0);
}

int state_maint_run_member_done(state_db *db, int64_t id, const char *member)
{
        if (isempty(member) || strchr(member, ','))
                return db_fail(db, -EINVAL, "recording a defragmented member",
                               "\"%s\" is not a member name", member ? member : "");
        return run_update(db, id, "recording a defragmented member",
                          "UPDATE maintenance_runs SET members_done = CASE members_done "
                          "WHEN '' THEN ?1 ELSE members_done || ',' || ?1 END WHERE id = ?2",
                          member, 0);
}

int state_maint_run_set_leader(state_db *db, int64_t id, const char *member)
{
        if (isempty(member))
                return db_fail(db, -EINVAL, "recording a leadership move", "no member name");
        return run_update(db, id, "recording a leadership move",
                          "UPDATE maintenance_runs SET leader = ? WHERE id = ?", member, 0);
}

int state_maint_run_set_compacted(state_db *db, int64_t id, int64_t revision)
{
        return run_update(db, id, "recording a compaction",
                          "UPDATE maintenance_runs SET compact_revision = ? WHERE id = ?", NULL,
                          revision);
}

int state_maint_run_set_disarmed(state_db *db, int64_t id)
{
        return run_update(db, id, "recording a disarmed alarm",
                          "UPDATE maintenance_runs SET disarmed = ? WHERE id = ?", NULL, 1);
}

int state_maint_run_finish(state_db *db, int64_t id, const char *error, int64_t now_ms)
{
        const char *what = "finishing a maintenance run";
        int r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what, "SELECT result FROM maintenance_runs WHERE id = ?", &st, "i",
                         id);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "no maintenance run %lld", (long long)id);
        else if (r > 0 && !streq_ptr((const char *)sqlite3_column_text(st, 0), "running"))
                r = db_fail(db, -EALREADY, what, "maintenance run %lld is already %s",
                            (long long)id, (const char *)sqlite3_column_text(st, 0));
        if (r >= 0)
                r = db_run(db, what,
                           "UPDATE maintenance_runs SET result = ?, error = ?, finished_ms = ? "
                           "WHERE id = ?",
                           "ssii", error ? "failed" : "succeeded", error, now_ms, id);
        return db_end(db, r < 0 ? r : 0);
}

static state_maint_run *run_from_row(sqlite3_stmt *st)
{
        state_maint_run *m = XNEW(state_maint_run);
        m->id = sqlite3_column_int64(st, 0);
        m->cluster = db_col_text(st, 1);
        m->trigger = db_col_text(st, 2);
        m->slot_ms = sqlite3_column_int64(st, 3);
        m->started_ms = sqlite3_column_int64(st, 4);
        m->finished_ms = sqlite3_column_int64(st, 5);
        m->result = db_col_text(st, 6);
        m->error = db_col_text(st, 7);
        m->members_done = db_col_text(st, 8);
        if (!m->members_done)
                m->members_done = xstrdup("");
        m->leader = db_col_text(st, 9);
        m->compact_revision = sqlite3_column_int64(st, 10);
        m->disarmed = sqlite3_column_int64(st, 11) != 0;
        return m;
}

int state_maint_run_list_for(state_db *db, const char *cluster, size_t limit,
                             state_maint_run_list *ret_list)
{
        const char *what = "listing maintenance runs";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT id, cluster, trigger, slot_ms, started_ms, finished_ms, result, "
                           "error, members_done, leader, compact_revision, disarmed "
                           "FROM maintenance_runs WHERE ?1 IS NULL OR cluster = ?1 "
                           "ORDER BY started_ms DESC, id DESC LIMIT ?2",
                           &st, "si", cluster, limit ? (int64_t)limit : (int64_t)-1);
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_maint_run_list, run_from_row,
                          state_maint_run_list_release, ret_list);
}

bool state_maint_run_has_done(const state_maint_run *run, const char *member)
{
        assert(run && member);
        size_t n = strlen(member);
        for (const char *p = run->members_done; p && *p;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                if (len == n && strneq(p, member, n))
                        return true;
                p = end ? end + 1 : NULL;
        }
        return false;
}

void state_maint_run_free(state_maint_run *m)
{
        if (!m)
                return;
        free(m->cluster);
        free(m->trigger);
        free(m->result);
        free(m->error);
        free(m->members_done);
        free(m->leader);
        free(m);
}

DEFINE_STATE_LIST_RELEASE(state_maint_run_list, state_maint_run_free)
