/*
 * The takeover record (state/takeovers.h): the SQL behind it. One row per
 * cluster in `takeovers`, inserted once; later writes only fill in what
 * was not known yet, so a pass repeated after a crash changes nothing.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "state/internal.h"
#include "state/takeovers.h"
#include "util/xalloc.h"

void state_takeover_free(state_takeover *t)
{
        if (!t)
                return;
        free(t->cluster);
        free(t->source);
        free(t->cluster_id);
        free(t->members_json);
        free(t->objects_json);
        free(t->service);
        free(t->service_selector_before);
        free(t);
}

int state_takeover_get(state_db *db, const char *cluster, state_takeover **ret)
{
        assert(ret);
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, "reading a takeover",
                             "SELECT cluster, source, cluster_id, members, objects, service, "
                             "service_selector_before, started_ms, finished_ms FROM takeovers "
                             "WHERE cluster = ?",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        state_takeover *t = XNEW(state_takeover);
        t->cluster = db_col_text(st, 0);
        t->source = db_col_text(st, 1);
        t->cluster_id = db_col_text(st, 2);
        t->members_json = db_col_text(st, 3);
        t->objects_json = db_col_text(st, 4);
        t->service = db_col_text(st, 5);
        t->service_selector_before = db_col_text(st, 6);
        t->started_ms = sqlite3_column_int64(st, 7);
        t->finished_ms = sqlite3_column_int64(st, 8);
        *ret = t;
        return 0;
}

int state_takeover_begin(state_db *db, const state_takeover *t)
{
        const char *what = "recording a takeover";
        assert(t && t->cluster);
        int r = db_cluster_exists(db, t->cluster, what);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "INSERT INTO takeovers (cluster, source, cluster_id, members, objects, service, "
                   "started_ms) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (cluster) DO NOTHING",
                   "ssssssi", t->cluster, t->source, t->cluster_id, t->members_json,
                   t->objects_json, t->service, t->started_ms);
        return r < 0 ? r : r > 0;
}

int state_takeover_set_service_before(state_db *db, const char *cluster, const char *selector)
{
        int r = db_run(db, "recording the old client Service",
                       "UPDATE takeovers SET service_selector_before = ? WHERE cluster = ? AND "
                       "service_selector_before IS NULL",
                       "ss", selector, cluster);
        return r < 0 ? r : r > 0;
}

int state_takeover_finish(state_db *db, const char *cluster, int64_t now_ms)
{
        int r = db_run(db, "recording a takeover finished",
                       "UPDATE takeovers SET finished_ms = ? WHERE cluster = ? AND finished_ms = 0",
                       "is", now_ms, cluster);
        return r < 0 ? r : r > 0;
}
