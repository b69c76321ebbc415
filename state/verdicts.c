/*
 * The intake's verdicts (state/verdicts.h): the SQL behind them, one row
 * per (source, cluster).
 */
#include <errno.h>
#include <stdlib.h>

#include "state/internal.h"
#include "state/verdicts.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

int state_verdict_set(state_db *db, const char *source, const char *cluster, const char *verdict,
                      const char *message, const char *commit, int64_t now_ms)
{
        const char *what = "recording a cluster's intake verdict";
        int r = db_check_cluster_name(db, cluster, what);
        if (r < 0)
                return r;
        if (isempty(source) || isempty(verdict) || !message)
                return db_fail(db, -EINVAL, what, "a verdict needs its source, kind and message");
        r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what,
                         "SELECT 1 FROM intake_verdicts WHERE source = ?1 AND cluster = ?2 AND "
                         "verdict = ?3 AND message = ?4 AND commit_id IS ?5",
                         &st, "sssss", source, cluster, verdict, message, commit);
        if (r == 0) {
                r = db_run(db, what,
                           "INSERT INTO intake_verdicts (source, cluster, verdict, message, "
                           "commit_id, time_ms) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source, "
                           "cluster) DO UPDATE SET verdict = excluded.verdict, message = "
                           "excluded.message, commit_id = excluded.commit_id, time_ms = "
                           "excluded.time_ms",
                           "sssssi", source, cluster, verdict, message, commit, now_ms);
                if (r >= 0)
                        r = 1;
        } else if (r > 0) {
                r = 0; /* recorded already */
        }
        return db_end(db, r);
}

int state_verdict_clear(state_db *db, const char *source, const char *cluster)
{
        const char *what = "forgetting a cluster's intake verdict";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what, "DELETE FROM intake_verdicts WHERE source = ? AND cluster = ?", "ss",
                   source, cluster);
        return db_end(db, r < 0 ? r : 0);
}

int state_verdict_retain(state_db *db, const char *source, const char *const *keep, size_t n)
{
        state_verdict_list l = {0};
        int r = state_verdict_list_get(db, NULL, &l);
        if (r < 0)
                return r;
        r = 0;
        for (size_t i = 0; i < l.n && r >= 0; i++) {
                const state_verdict *v = l.items[i];
                if (!streq(v->source, source))
                        continue;
                bool kept = false;
                for (size_t j = 0; j < n && !kept; j++)
                        kept = streq(keep[j], v->cluster);
                if (!kept)
                        r = state_verdict_clear(db, source, v->cluster);
        }
        state_verdict_list_release(&l);
        return r < 0 ? r : 0;
}

static state_verdict *verdict_from_row(sqlite3_stmt *st)
{
        state_verdict *v = XNEW(state_verdict);
        v->source = db_col_text(st, 0);
        v->cluster = db_col_text(st, 1);
        v->verdict = db_col_text(st, 2);
        v->message = db_col_text(st, 3);
        v->commit = db_col_text(st, 4);
        v->time_ms = sqlite3_column_int64(st, 5);
        return v;
}

int state_verdict_list_get(state_db *db, const char *cluster, state_verdict_list *ret)
{
        const char *what = "reading intake verdicts";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = cluster ? db_prepare(db, what,
                                     "SELECT source, cluster, verdict, message, commit_id, "
                                     "time_ms FROM intake_verdicts WHERE cluster = ? ORDER BY "
                                     "source",
                                     &st, "s", cluster)
                        : db_prepare(db, what,
                                     "SELECT source, cluster, verdict, message, commit_id, "
                                     "time_ms FROM intake_verdicts ORDER BY cluster, source",
                                     &st, "");
        if (r < 0)
                return r;
        return DB_COLLECT(db, st, what, state_verdict_list, verdict_from_row,
                          state_verdict_list_release, ret);
}

void state_verdict_free(state_verdict *v)
{
        if (!v)
                return;
        free(v->source);
        free(v->cluster);
        free(v->verdict);
        free(v->message);
        free(v->commit);
        free(v);
}

DEFINE_STATE_LIST_RELEASE(state_verdict_list, state_verdict_free)
