/*
 * The hosts target's preflights of machines (state/preflights.h): the SQL
 * behind them, one row per (cluster, machine) in machine_preflights.
 */
#include <errno.h>
#include <stdlib.h>

#include "state/internal.h"
#include "state/preflights.h"
#include "util/xalloc.h"

#define COLUMNS                                                                                    \
        "cluster, machine, member, time_ms, verdict, reason, kernel, fstype, free_bytes, "         \
        "quota_bytes, "                                                                            \
        "n_sync, sync_p50_us, sync_p99_us, sync_max_us, offset_ms, offset_bound_ms, rtt_samples, " \
        "rtt_peers, rtt_failed, rtt_slowest_us, rtt_max_us"

int state_preflight_set(state_db *db, const state_preflight *p)
{
        const char *what = "recording a machine's preflight";
        int r = db_check_cluster_name(db, p->cluster, what);
        if (r < 0)
                return r;
        if (isempty(p->machine) || isempty(p->verdict))
                return db_fail(db, -EINVAL, what, "a preflight needs its machine and verdict");
        r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int same = db_query_row(db, what,
                                "SELECT 1 FROM machine_preflights WHERE cluster = ?1 AND machine "
                                "= ?2 AND verdict = ?3 AND reason IS ?4",
                                &st, "ssss", p->cluster, p->machine, p->verdict, p->reason);
        if (same < 0)
                return db_end(db, same);
        r = db_run(db, what,
                   "INSERT OR REPLACE INTO machine_preflights (" COLUMNS
                   ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "sssissssiiiiiiiiiiiii", p->cluster, p->machine, p->member, p->time_ms,
                   p->verdict, p->reason, p->kernel, p->fstype, p->free_bytes, p->quota_bytes,
                   p->n_sync, p->sync_p50_us, p->sync_p99_us, p->sync_max_us, p->offset_ms,
                   p->offset_bound_ms, p->rtt_samples, p->rtt_peers, p->rtt_failed,
                   p->rtt_slowest_us, p->rtt_max_us);
        if (r >= 0)
                r = same > 0 ? 0 : 1;
        return db_end(db, r);
}

static state_preflight *preflight_from_row(sqlite3_stmt *st)
{
        state_preflight *p = XNEW(state_preflight);
        p->cluster = db_col_text(st, 0);
        p->machine = db_col_text(st, 1);
        p->member = db_col_text(st, 2);
        p->time_ms = sqlite3_column_int64(st, 3);
        p->verdict = db_col_text(st, 4);
        p->reason = db_col_text(st, 5);
        p->kernel = db_col_text(st, 6);
        p->fstype = db_col_text(st, 7);
        p->free_bytes = sqlite3_column_int64(st, 8);
        p->quota_bytes = sqlite3_column_int64(st, 9);
        p->n_sync = sqlite3_column_int64(st, 10);
        p->sync_p50_us = sqlite3_column_int64(st, 11);
        p->sync_p99_us = sqlite3_column_int64(st, 12);
        p->sync_max_us = sqlite3_column_int64(st, 13);
        p->offset_ms = sqlite3_column_int64(st, 14);
        p->offset_bound_ms = sqlite3_column_int64(st, 15);
        p->rtt_samples = sqlite3_column_int64(st, 16);
        p->rtt_peers = sqlite3_column_int64(st, 17);
        p->rtt_failed = sqlite3_column_int64(st, 18);
        p->rtt_slowest_us = sqlite3_column_int64(st, 19);
        p->rtt_max_us = sqlite3_column_int64(st, 20);
        return p;
}

int state_preflight_get(state_db *db, const char *cluster, const char *machine,
                        state_preflight **ret)
{
        const char *what = "reading a machine's preflight";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT " COLUMNS
                             " FROM machine_preflights WHERE cluster = ? AND machine = ?",
                             &st, "ss", cluster, machine);
        if (r <= 0)
                return r;
        *ret = preflight_from_row(st);
        return 1;
}

int state_preflight_list_get(state_db *db, const char *cluster, state_preflight_list *ret)
{
        const char *what = "reading machines' preflights";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = cluster ? db_prepare(db, what,
                                     "SELECT " COLUMNS " FROM machine_preflights WHERE cluster = "
                                     "? ORDER BY machine",
                                     &st, "s", cluster)
                        : db_prepare(db, what,
                                     "SELECT " COLUMNS
                                     " FROM machine_preflights ORDER BY cluster, machine",
                                     &st, "");
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_preflight_list, preflight_from_row,
                          state_preflight_list_release, ret);
}

int state_preflight_clear(state_db *db, const char *cluster)
{
        const char *what = "forgetting a cluster's preflights";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "DELETE FROM machine_preflights WHERE cluster = ?", "s", cluster);
        return db_end(db, r < 0 ? r : 0);
}

state_preflight *state_preflight_dup(const state_preflight *p)
{
        state_preflight *d = XNEW(state_preflight);
        *d = *p;
        d->cluster = xstrdup_null(p->cluster);
        d->machine = xstrdup_null(p->machine);
        d->member = xstrdup_null(p->member);
        d->verdict = xstrdup_null(p->verdict);
        d->reason = xstrdup_null(p->reason);
        d->kernel = xstrdup_null(p->kernel);
        d->fstype = xstrdup_null(p->fstype);
        return d;
}

void state_preflight_free(state_preflight *p)
{
        if (!p)
                return;
        free(p->cluster);
        free(p->machine);
        free(p->member);
        free(p->verdict);
        free(p->reason);
        free(p->kernel);
        free(p->fstype);
        free(p);
}

DEFINE_STATE_LIST_RELEASE(state_preflight_list, state_preflight_free)

int state_timeouts_set(state_db *db, const char *cluster, const state_timeouts *t)
{
        const char *what = "recording a cluster's derived timeouts";
        int r = db_check_cluster_name(db, cluster, what);
        if (r < 0)
                return r;
        if (t->heartbeat_ms <= 0 || t->election_ms <= 0)
                return db_fail(db, -EINVAL, what, "derived timeouts must be positive");
        r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT OR REPLACE INTO derived_timeouts (cluster, heartbeat_ms, election_ms, "
                   "rtt_us, time_ms) VALUES (?, ?, ?, ?, ?)",
                   "siiii", cluster, (int64_t)t->heartbeat_ms, (int64_t)t->election_ms, t->rtt_us,
                   t->time_ms);
        return db_end(db, r < 0 ? r : 0);
}

int state_timeouts_get(state_db *db, const char *cluster, state_timeouts *ret)
{
        const char *what = "reading a cluster's derived timeouts";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT heartbeat_ms, election_ms, rtt_us, time_ms FROM "
                             "derived_timeouts WHERE cluster = ?",
                             &st, "s", cluster);
        if (r <= 0)
                return r;
        *ret = (state_timeouts){
            .heartbeat_ms = (int)sqlite3_column_int64(st, 0),
            .election_ms = (int)sqlite3_column_int64(st, 1),
            .rtt_us = sqlite3_column_int64(st, 2),
            .time_ms = sqlite3_column_int64(st, 3),
        };
        return 1;
}

int state_timeouts_clear(state_db *db, const char *cluster)
{
        const char *what = "forgetting a cluster's derived timeouts";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "DELETE FROM derived_timeouts WHERE cluster = ?", "s", cluster);
        return db_end(db, r < 0 ? r : 0);
}
