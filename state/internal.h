/*
 * Helpers shared by the files of state/ (not part of the API): the handle,
 * the sqlite3 adapter that turns result codes into -errno plus a message,
 * statement preparation with bound parameters, and transactions.
 *
 * Every statement is a constant SQL string with `?` parameters bound by
 * db_bind() from a small format ("s" text or NULL, "i" int64, "d" int,
 * "b" bool); no SQL is ever built from data.
 */
#pragma once

#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "state/state.h"
#include "util/macro.h"
#include "util/xalloc.h"

/*
 * A prepared statement kept for reuse (db.c): every statement is a constant
 * SQL string, so one connection prepares each once, not once per call.
 */
typedef struct db_cached_stmt {
        const char *key; /* the caller's SQL pointer, compared first */
        char *sql;       /* its text: a key reused for other text is not a hit */
        sqlite3_stmt *st;
        bool in_use;
        uint64_t used; /* for eviction: the least recently used goes */
} db_cached_stmt;

#define DB_STMT_CACHE 96

struct state_db {
        sqlite3 *sql;
        char *path;
        bool read_only;
        bool short_lived; /* state_set_short_lived(): no quick_check, no checkpoint at close */
        int wal_pages;    /* short-lived: the WAL's length after the last commit */
        int depth;        /* open state_begin() levels */
        int64_t changes_at_begin;   /* sqlite3_total_changes64() at the outermost begin */
        _Atomic unsigned long user; /* the thread in a call on it now (0: none): db_enter() */
        const char *user_what;      /* what that call does, for the report */
        db_cached_stmt cache[DB_STMT_CACHE];
        size_t n_cache;
        uint64_t tick;
};

/* The migrations (schema.c): migration i takes user_version i to i + 1. */
extern const char *const state_migrations[];
extern const int state_n_migrations;
#define STATE_APPLICATION_ID 0x67697463 /* "gitc" */

/* Set the thread's last error ("state PATH: what: detail"); returns r. */
int db_fail(const state_db *db, int r, const char *what, const char *fmt, ...) _printf_(4, 5);
/* Also a macro, so that the static analyzer (which does not follow variadic calls)
 * sees r come back. */
#define db_fail(db, r, ...)                                                                        \
        ({                                                                                         \
                int db_fail_r_ = (r);                                                              \
                (db_fail)((db), db_fail_r_, __VA_ARGS__);                                          \
                db_fail_r_;                                                                        \
        })
/* Convert a sqlite3 result code into -errno and set the last error. */
int db_error(const state_db *db, int rc, const char *what);

/*
 * Prepare sql and bind parameters per fmt. The statement comes from the
 * connection's cache when sql was prepared before (and is not in use right
 * now); release it with _cleanup_stmt_ (db_stmt_release), never finalize it.
 */
int db_prepare(state_db *db, const char *what, const char *sql, sqlite3_stmt **ret_stmt,
               const char *fmt, ...);
/* Step once: 1 for a row, 0 when done, or -errno. */
int db_step(state_db *db, sqlite3_stmt *st, const char *what);
/*
 * db_prepare() and db_step() once, for a lookup of one row: 1 with the row
 * in *ret_stmt, 0 when there is none, or -errno.
 */
int db_query_row(state_db *db, const char *what, const char *sql, sqlite3_stmt **ret_stmt,
                 const char *fmt, ...);

/*
 * Step st to its last row, turning each row into an item with from_row,
 * and hand the list (a state_*_list: items, n) to *ret_list: 0. On an
 * error the items read so far are released with release and the error
 * from db_step is returned; *ret_list is left alone.
 */
#define DB_COLLECT(db, st, what, list_type, from_row, release, ret_list)                           \
        ({                                                                                         \
                list_type l_ = {0};                                                                \
                size_t alloc_ = 0;                                                                 \
                int r_;                                                                            \
                while ((r_ = db_step((db), (st), (what))) > 0) {                                   \
                        l_.items = xgrow(l_.items, &alloc_, l_.n + 1, sizeof(*l_.items));          \
                        l_.items[l_.n++] = from_row(st);                                           \
                }                                                                                  \
                if (r_ < 0)                                                                        \
                        release(&l_);                                                              \
                else                                                                               \
                        *(ret_list) = l_;                                                          \
                r_ < 0 ? r_ : 0;                                                                   \
        })
/* Prepare, bind, run to completion; returns the number of rows changed or -errno. */
int db_run(state_db *db, const char *what, const char *sql, const char *fmt, ...);
/* Run a statement without parameters (PRAGMA, BEGIN, migrations). */
int db_exec(state_db *db, const char *what, const char *sql);

/* End a write begun with state_begin(): commit when r >= 0, else roll back. Returns r or -errno. */
int db_end(state_db *db, int r);

/* 0, or -EINVAL with the rule for cluster names when cluster breaks it (state_cluster_name_valid). */
int db_check_cluster_name(state_db *db, const char *cluster, const char *what);

/* Column helpers: a copy of the text (NULL for SQL NULL). */
char *db_col_text(sqlite3_stmt *st, int col);

/*
 * Done with a statement from db_prepare(): a cached one is reset for the
 * next caller (bindings cleared), any other finalized.
 */
void db_stmt_release(sqlite3_stmt *st);

static inline void sqlite3_finalizep(sqlite3_stmt **st)
{
        if (*st)
                db_stmt_release(*st);
}
#define _cleanup_stmt_ _cleanup_(sqlite3_finalizep)

/* 1 when sql, bound to the two texts a and b, returns a row; 0 when not; or -errno. */
int db_has_row(state_db *db, const char *what, const char *sql, const char *a, const char *b);

/* 0 when the cluster exists, else -ENOENT with a message (records.c). */
int db_cluster_exists(state_db *db, const char *cluster, const char *what);

/*
 * The release function of a result list type T_list whose items are freed
 * with free_fn: void T_list_release(T_list *l), NULL-safe, leaving l empty.
 */
#define DEFINE_STATE_LIST_RELEASE(list_type, free_fn)                                              \
        void list_type##_release(list_type *l)                                                     \
        {                                                                                          \
                if (!l)                                                                            \
                        return;                                                                    \
                for (size_t i = 0; i < l->n; i++)                                                  \
                        free_fn(l->items[i]);                                                      \
                free(l->items);                                                                    \
                l->items = NULL;                                                                   \
                l->n = 0;                                                                          \
        }
