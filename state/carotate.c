/*
 * CA rotation records (state/carotate.h): the SQL behind them. A unique
 * index on (cluster, token) makes a token act once; a partial unique index
 * allows one running rotation per cluster.
 */
#include <errno.h>

#include "state/carotate.h"
#include "state/internal.h"
#include "util/xalloc.h"

int state_ca_rotation_start(state_db *db, const char *cluster, const char *token, bool skipped,
                            int64_t now_ms)
{
        const char *what = "recording a CA rotation";
        int r = db_check_cluster_name(db, cluster, what);
        if (r < 0)
                return r;
        if (isempty(token))
                return db_fail(db, -EINVAL, what, "a CA rotation needs its token");
        r = state_begin(db);
        if (r < 0)
                return r;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        r = db_query_row(db, what,
                         "SELECT token = ?2 FROM ca_rotations WHERE cluster = ?1 AND "
                         "(result = 'running' OR token = ?2)",
                         &st, "ss", cluster, token);
        if (r > 0)
                r = sqlite3_column_int(st, 0)
                        ? db_fail(db, -EALREADY, what, "%s: rotateCA token %s already used",
                                  cluster, token)
                        : db_fail(db, -EBUSY, what, "%s: a CA rotation is still running", cluster);
        if (r >= 0)
                r = db_run(db, what,
                           "INSERT INTO ca_rotations (cluster, token, phase, started_ms, phase_ms, "
                           "finished_ms, result) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           "ssiiiis", cluster, token, (int64_t)(skipped ? 0 : 1), now_ms, now_ms,
                           skipped ? now_ms : (int64_t)0, skipped ? "skipped" : "running");
        return db_end(db, r < 0 ? r : 0);
}

int state_ca_rotation_running(state_db *db, const char *cluster, state_ca_rotation **ret)
{
        const char *what = "reading the running CA rotation";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT cluster, token, phase, members_done, started_ms, phase_ms, "
                             "finished_ms, result FROM ca_rotations WHERE cluster = ? AND "
                             "result = 'running'",
                             &st, "s", cluster);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT; /* the usual answer: no message */
        state_ca_rotation *v = XNEW(state_ca_rotation);
        v->cluster = db_col_text(st, 0);
        v->token = db_col_text(st, 1);
        v->phase = sqlite3_column_int(st, 2);
        v->members_done = db_col_text(st, 3);
        v->started_ms = sqlite3_column_int64(st, 4);
        v->phase_ms = sqlite3_column_int64(st, 5);
        v->finished_ms = sqlite3_column_int64(st, 6);
        v->result = db_col_text(st, 7);
        if (!v->members_done)
                v->members_done = xstrdup("");
        *ret = v;
        return 0;
}

int state_ca_rotation_token_used(state_db *db, const char *cluster, const char *token)
{
        return db_has_row(db, "looking a rotateCA token up",
                          "SELECT 1 FROM ca_rotations WHERE cluster = ? AND token = ?", cluster,
                          token);
}

int state_ca_rotation_set_done(state_db *db, const char *cluster, const char *members_done)
{
        const char *what = "recording a CA rotation's progress";
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE ca_rotations SET members_done = ? WHERE cluster = ? AND "
                   "result = 'running'",
                   "ss", members_done ? members_done : "", cluster);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "%s: no CA rotation is running", cluster);
        return db_end(db, r < 0 ? r : 0);
}

int state_ca_rotation_advance(state_db *db, const char *cluster, int phase, int64_t now_ms)
{
        const char *what = "recording a CA rotation's phase";
        if (phase < 0 || phase > 3)
                return db_fail(db, -EINVAL, what, "no CA rotation phase %d", phase);
        int r = state_begin(db);
        if (r < 0)
                return r;
        r = db_run(db, what,
                   "UPDATE ca_rotations SET phase = ?, members_done = '', phase_ms = ?, "
                   "finished_ms = ?, result = ? WHERE cluster = ? AND result = 'running'",
                   "iiiss", (int64_t)phase, now_ms, phase == 0 ? now_ms : (int64_t)0,
                   phase == 0 ? "succeeded" : "running", cluster);
        if (r == 0)
                r = db_fail(db, -ENOENT, what, "%s: no CA rotation is running", cluster);
        return db_end(db, r < 0 ? r : 0);
}

void state_ca_rotation_free(state_ca_rotation *r)
{
        if (!r)
                return;
        free(r->cluster);
        free(r->token);
        free(r->members_done);
        free(r->result);
        free(r);
}
