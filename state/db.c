/*
 * Opening the state database, migrating it, transactions, and the sqlite3
 * adapter: the one place where SQLite result codes become -errno plus a
 * message that names the database and what was being done.
 *
 * Settings, chosen for a reconciler that may be killed at any moment and
 * for readers (`gitcd log`, `gitcd status`) running while it writes:
 * WAL journal (readers never block the writer and see the last commit),
 * synchronous=FULL (a journal intent is durable before the change it
 * announces is made), a 5 s busy timeout, foreign keys on. Writes take the
 * lock up front (BEGIN IMMEDIATE), so a transaction never fails half-way
 * because another writer upgraded first; nested state_begin() calls become
 * savepoints. Opening runs PRAGMA quick_check so a corrupt file is reported
 * at open, not in the middle of a later operation; a short-lived command's
 * read-write open does not (state_set_short_lived(): the check reads the
 * whole file, which outweighed the rest of `gitcd snapshot save`), and its
 * close leaves the WAL uncheckpointed for the next opener.
 *
 * Statements are prepared once per connection and kept (an LRU cache of
 * DB_STMT_CACHE, keyed by the constant SQL text): a reconciler pass runs
 * the same few dozen queries every time, and parsing them again cost more
 * than running them.
 */
#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "state/internal.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define BUSY_TIMEOUT_MS 5000

/*
 * The WAL a short-lived command leaves (it does not checkpoint at close) is
 * read whole by the next opener when no daemon holds the store open (SQLite
 * rebuilds the WAL's index from it). A short-lived connection that leaves
 * this many pages (256 KiB) or more checkpoints them into the main file and
 * empties the WAL as it closes, once every few commands.
 */
#define SHORT_LIVED_WAL_PAGES 64

/*
 * Each writer connection's page cache, in KiB (SQLite's default is 2000):
 * the daemon has one connection per worker, each filling its own cache with
 * the pages of whichever clusters it passed, about 2 MB each; the file is in
 * the kernel's page cache anyway, and an idle pass cost no more CPU with a
 * quarter of the cache (docs/performance.md).
 */
#define STATE_CACHE_KB "512"

/*
 * Writers of this process take turns here, not in SQLite's busy handler
 * (which sleeps up to 100 ms between tries): the daemon's workers each
 * have a connection (reconciler/driver.c). Held by a write transaction
 * from BEGIN to COMMIT or ROLLBACK, and around one autocommit write.
 * Transactions are short and never wait on the network, so no one holds
 * it for long. Other processes still meet the busy timeout.
 */
static pthread_mutex_t writers = PTHREAD_MUTEX_INITIALIZER;

static __thread char last_error[1024];

static bool short_lived;

void state_set_short_lived(bool on)
{
        short_lived = on;
}

/* state_counters_get(): relaxed, every connection of the process. */
static _Atomic uint64_t n_statements, n_prepared, n_transactions, n_writes, n_changes;

void state_counters_get(state_counters *ret)
{
        *ret = (state_counters){
            .statements = atomic_load_explicit(&n_statements, memory_order_relaxed),
            .prepared = atomic_load_explicit(&n_prepared, memory_order_relaxed),
            .transactions = atomic_load_explicit(&n_transactions, memory_order_relaxed),
            .writes = atomic_load_explicit(&n_writes, memory_order_relaxed),
            .changes = atomic_load_explicit(&n_changes, memory_order_relaxed),
        };
}

static void count(_Atomic uint64_t *c, uint64_t n)
{
        atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* A write transaction (or autocommit write) ended: it changed `changes` rows. */
static void count_write(int64_t changes)
{
        count(&n_transactions, 1);
        if (changes > 0) {
                count(&n_writes, 1);
                count(&n_changes, (uint64_t)changes);
        }
}

const char *state_last_error(void)
{
        return last_error;
}

int state_schema_version(void)
{
        return state_n_migrations;
}

const char *state_path(const state_db *db)
{
        return db ? db->path : NULL;
}

int(db_fail)(const state_db *db, int r, const char *what, const char *fmt, ...)
{
        char detail[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        if (what)
                snprintf(last_error, sizeof(last_error), "state %s: %s: %s", db ? db->path : "?",
                         what, detail);
        else
                snprintf(last_error, sizeof(last_error), "state %s: %s", db ? db->path : "?",
                         detail);
        log_debug("%s", last_error);
        return r;
}

static bool file_size_limited(void)
{
        struct rlimit rl;
        return getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
}

static int errno_from_sqlite(sqlite3 *sql, int rc)
{
        int sys = sql ? sqlite3_system_errno(sql) : 0;
        switch (rc & 0xff) {
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        case SQLITE_CANTOPEN:
                return sys > 0 ? -sys : -EACCES;
        case SQLITE_IOERR:
                if (sys == ENOSPC || sys == EFBIG || sys == EDQUOT || sys == EROFS)
                        return -sys;
                /* sqlite's saved errno is unreliable here; a write that stopped
                 * short under a file-size limit is the one common cause */
                if (rc == SQLITE_IOERR_WRITE && file_size_limited())
                        return -EFBIG;
                return -EIO;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_TOOBIG:
                return -E2BIG;
        case SQLITE_CONSTRAINT:
                if (rc == SQLITE_CONSTRAINT_TRIGGER)
                        return -EPERM;
                if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
                        return -ENOENT;
                if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY)
                        return -EEXIST;
                return -EINVAL;
        case SQLITE_MISMATCH:
        case SQLITE_RANGE:
                return -EINVAL;
        default:
                return -EIO;
        }
}

int db_error(const state_db *db, int rc, const char *what)
{
        int r = errno_from_sqlite(db ? db->sql : NULL, rc);
        const char *msg = db && db->sql ? sqlite3_errmsg(db->sql) : sqlite3_errstr(rc);
        switch (r) {
        case -ENOSPC:
                return db_fail(db, r, what, "no space left on device (nothing was written)");
        case -EFBIG:
                return db_fail(db, r, what, "file size limit exceeded (nothing was written)");
        case -EDQUOT:
                return db_fail(db, r, what, "disk quota exceeded (nothing was written)");
        case -EBUSY:
                return db_fail(db, r, what,
                               "the database stayed locked by another process for more than "
                               "%d s",
                               BUSY_TIMEOUT_MS / 1000);
        case -EROFS:
                return db_fail(db, r, what, "the database (or its folder) is read-only: %s", msg);
        case -EBADMSG:
                if ((rc & 0xff) == SQLITE_NOTADB)
                        return db_fail(db, r, what, "not a gitcd state database (%s)", msg);
                return db_fail(db, r, what,
                               "the database file is corrupt (%s); restore it from a backup", msg);
        case -EIO:
                return db_fail(db, r, what, "%s (the transaction was rolled back)", msg);
        default:
                return db_fail(db, r, what, "%s", msg);
        }
}

static int db_bindv(state_db *db, sqlite3_stmt *st, const char *what, const char *fmt, va_list ap)
{
        for (int i = 0; fmt && fmt[i]; i++) {
                int rc;
                switch (fmt[i]) {
                case 's': {
                        const char *s = va_arg(ap, const char *);
                        rc = s ? sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT)
                               : sqlite3_bind_null(st, i + 1);
                        break;
                }
                case 'i':
                        rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
                        break;
                case 'd':
                        rc = sqlite3_bind_int(st, i + 1, va_arg(ap, int));
                        break;
                case 'b':
                        rc = sqlite3_bind_int(st, i + 1, va_arg(ap, int) ? 1 : 0);
                        break;
                default:
                        return db_fail(db, -EINVAL, what, "bad bind format '%c'", fmt[i]);
                }
                if (rc != SQLITE_OK)
                        return db_error(db, rc, what);
        }
        return 0;
}

/*
 * Statements lent out by this thread from a connection's cache, most recent
 * last: a statement is prepared and released in one scope of one thread
 * (_cleanup_stmt_), so the release finds it here without a lock. Deeper
 * nesting than this prepares uncached statements.
 */
#define LENT_MAX 16
static __thread db_cached_stmt *lent[LENT_MAX];
static __thread size_t n_lent;

void db_stmt_release(sqlite3_stmt *st)
{
        for (size_t i = n_lent; i-- > 0;) {
                db_cached_stmt *c = lent[i];
                if (c->st != st)
                        continue;
                (void)sqlite3_reset(st);
                (void)sqlite3_clear_bindings(st);
                c->in_use = false;
                memmove(&lent[i], &lent[i + 1], (n_lent - i - 1) * sizeof(lent[0]));
                n_lent--;
                return;
        }
        sqlite3_finalize(st);
}

/* A free cached statement for sql, or NULL. */
static db_cached_stmt *cache_find(state_db *db, const char *sql)
{
        for (size_t i = 0; i < db->n_cache; i++) {
                db_cached_stmt *c = &db->cache[i];
                if (c->key == sql && !c->in_use && streq(c->sql, sql))
                        return c;
        }
        return NULL;
}

/* Keep st for sql (it is not in the cache): a free slot, or the least recently used one. */
static db_cached_stmt *cache_put(state_db *db, const char *sql, sqlite3_stmt *st)
{
        db_cached_stmt *slot = NULL;
        if (db->n_cache < DB_STMT_CACHE)
                slot = &db->cache[db->n_cache++];
        else
                for (size_t i = 0; i < db->n_cache; i++) {
                        db_cached_stmt *c = &db->cache[i];
                        if (!c->in_use && (!slot || c->used < slot->used))
                                slot = c;
                }
        if (!slot)
                return NULL;
        if (slot->st) {
                sqlite3_finalize(slot->st);
                free(slot->sql);
        }
        *slot = (db_cached_stmt){.key = sql, .sql = xstrdup(sql), .st = st};
        return slot;
}

static void cache_clear(state_db *db)
{
        for (size_t i = 0; i < db->n_cache; i++) {
                assert(!db->cache[i].in_use);
                sqlite3_finalize(db->cache[i].st);
                free(db->cache[i].sql);
                db->cache[i] = (db_cached_stmt){0};
        }
        db->n_cache = 0;
}

/*
 * Every connection is opened SQLITE_OPEN_NOMUTEX: one thread at a time. Two
 * threads in a call on one connection at once would corrupt it; this is
 * checked on every prepare, step and exec, and ends the process with both
 * calls named rather than let SQLite run on a corrupt connection. Returns
 * whether this call took the connection (a call inside a call does not).
 */
static bool db_enter(state_db *db, const char *what)
{
        unsigned long me = (unsigned long)pthread_self(), was = 0;
        if (atomic_compare_exchange_strong(&db->user, &was, me)) {
                db->user_what = what;
                return true;
        }
        if (was == me)
                return false;
        log_error("state: two threads use one connection to %s at once (%s, and %s): stopping",
                  db->path ? db->path : "the state store", what ? what : "?",
                  db->user_what ? db->user_what : "?");
        abort();
}

static void db_leave(state_db *db, bool took)
{
        if (took)
                atomic_store(&db->user, 0);
}

static int db_preparev_held(state_db *db, const char *what, const char *sql,
                            sqlite3_stmt **ret_stmt, const char *fmt, va_list ap)
{
        bool lend = n_lent < LENT_MAX;
        db_cached_stmt *c = lend ? cache_find(db, sql) : NULL;
        sqlite3_stmt *st = c ? c->st : NULL;
        count(&n_statements, 1);
        if (!c) {
                count(&n_prepared, 1);
                int rc = sqlite3_prepare_v3(db->sql, sql, -1, lend ? SQLITE_PREPARE_PERSISTENT : 0,
                                            &st, NULL);
                if (rc != SQLITE_OK) {
                        int r = db_error(db, rc, what);
                        sqlite3_finalize(st);
                        return r;
                }
                c = lend && st ? cache_put(db, sql, st) : NULL;
        }
        if (c) {
                c->in_use = true;
                c->used = ++db->tick;
                lent[n_lent++] = c;
        }
        int r = db_bindv(db, st, what, fmt, ap);
        if (r < 0) {
                db_stmt_release(st);
                return r;
        }
        *ret_stmt = st;
        return 0;
}

static int db_preparev(state_db *db, const char *what, const char *sql, sqlite3_stmt **ret_stmt,
                       const char *fmt, va_list ap)
{
        bool took = db_enter(db, what);
        int r = db_preparev_held(db, what, sql, ret_stmt, fmt, ap);
        db_leave(db, took);
        return r;
}

int db_prepare(state_db *db, const char *what, const char *sql, sqlite3_stmt **ret_stmt,
               const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = db_preparev(db, what, sql, ret_stmt, fmt, ap);
        va_end(ap);
        return r;
}

int db_step(state_db *db, sqlite3_stmt *st, const char *what)
{
        bool turn = !db->read_only && db->depth == 0 && !sqlite3_stmt_readonly(st);
        int64_t before = 0;
        if (turn) {
                pthread_mutex_lock(&writers);
                before = sqlite3_total_changes64(db->sql);
        }
        bool took = db_enter(db, what);
        int rc = sqlite3_step(st);
        db_leave(db, took);
        if (turn) {
                /* a write statement outside a transaction is one of its own */
                count_write(sqlite3_total_changes64(db->sql) - before);
                pthread_mutex_unlock(&writers);
        }
        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        return db_error(db, sqlite3_extended_errcode(db->sql), what);
}

int db_query_row(state_db *db, const char *what, const char *sql, sqlite3_stmt **ret_stmt,
                 const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = db_preparev(db, what, sql, ret_stmt, fmt, ap);
        va_end(ap);
        return r < 0 ? r : db_step(db, *ret_stmt, what);
}

int db_has_row(state_db *db, const char *what, const char *sql, const char *a, const char *b)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, sql, &st, "ss", a, b);
        return r < 0 ? r : r > 0;
}

int db_run(state_db *db, const char *what, const char *sql, const char *fmt, ...)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        va_list ap;
        va_start(ap, fmt);
        int r = db_preparev(db, what, sql, &st, fmt, ap);
        va_end(ap);
        if (r < 0)
                return r;
        while ((r = db_step(db, st, what)) > 0)
                ;
        if (r < 0)
                return r;
        return sqlite3_changes(db->sql);
}

int db_exec(state_db *db, const char *what, const char *sql)
{
        count(&n_statements, 1);
        bool took = db_enter(db, what);
        int rc = sqlite3_exec(db->sql, sql, NULL, NULL, NULL);
        db_leave(db, took);
        if (rc != SQLITE_OK)
                return db_error(db, sqlite3_extended_errcode(db->sql), what);
        return 0;
}

char *db_col_text(sqlite3_stmt *st, int col)
{
        const unsigned char *s = sqlite3_column_text(st, col);
        return s ? xstrdup((const char *)s) : NULL;
}

/* ---- transactions ---- */

int state_begin(state_db *db)
{
        char sql[64];
        if (db->depth == 0)
                /* readers take a snapshot; writers take the write lock up front */
                snprintf(sql, sizeof(sql), db->read_only ? "BEGIN" : "BEGIN IMMEDIATE");
        else
                snprintf(sql, sizeof(sql), "SAVEPOINT s%d", db->depth);
        bool turn = db->depth == 0 && !db->read_only;
        if (turn)
                pthread_mutex_lock(&writers);
        int r = db_exec(db, "starting a transaction", sql);
        if (r < 0) {
                if (turn)
                        pthread_mutex_unlock(&writers);
                return r;
        }
        if (db->depth == 0)
                db->changes_at_begin = sqlite3_total_changes64(db->sql);
        db->depth++;
        return 0;
}

/* The outermost transaction of a writer ended (committed: count what it changed). */
static void writer_done(state_db *db, bool committed)
{
        if (db->read_only)
                return;
        count_write(committed ? sqlite3_total_changes64(db->sql) - db->changes_at_begin : 0);
        pthread_mutex_unlock(&writers);
}

int state_rollback(state_db *db)
{
        char sql[96];
        if (db->depth <= 0)
                return db_fail(db, -EINVAL, "rolling back", "no transaction is open");
        db->depth--;
        if (db->depth == 0) {
                /* sqlite may already have rolled back (e.g. after SQLITE_FULL) */
                if (sqlite3_get_autocommit(db->sql)) {
                        writer_done(db, false);
                        return 0;
                }
                snprintf(sql, sizeof(sql), "ROLLBACK");
        } else
                snprintf(sql, sizeof(sql), "ROLLBACK TO s%d; RELEASE s%d", db->depth, db->depth);
        int r = db_exec(db, "rolling back", sql);
        if (db->depth == 0)
                writer_done(db, false);
        return r;
}

int state_commit(state_db *db)
{
        char sql[64];
        if (db->depth <= 0)
                return db_fail(db, -EINVAL, "committing", "no transaction is open");
        if (db->depth == 1)
                snprintf(sql, sizeof(sql), "COMMIT");
        else
                snprintf(sql, sizeof(sql), "RELEASE s%d", db->depth - 1);
        int r = db_exec(db, "committing", sql);
        if (r < 0) {
                /* keep the commit's message: the rollback's would hide it */
                char saved[sizeof(last_error)];
                memcpy(saved, last_error, sizeof(saved));
                (void)state_rollback(db);
                memcpy(last_error, saved, sizeof(saved));
                return r;
        }
        db->depth--;
        if (db->depth == 0)
                writer_done(db, true);
        return 0;
}

int db_end(state_db *db, int r)
{
        if (r >= 0) {
                int k = state_commit(db);
                return k < 0 ? k : r;
        }
        char saved[sizeof(last_error)];
        memcpy(saved, last_error, sizeof(saved));
        (void)state_rollback(db);
        memcpy(last_error, saved, sizeof(saved));
        return r;
}

/* ---- opening ---- */

static int pragma_int(state_db *db, const char *what, const char *sql, int64_t *ret)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what, sql, &st, NULL);
        if (r < 0)
                return r;
        *ret = r > 0 ? sqlite3_column_int64(st, 0) : 0;
        return 0;
}

int state_check_integrity(state_db *db)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        const char *what = "checking integrity";
        int r = db_query_row(db, what, "PRAGMA integrity_check", &st, NULL);
        if (r < 0)
                return r;
        const char *res = r > 0 ? (const char *)sqlite3_column_text(st, 0) : NULL;
        if (!res || !streq(res, "ok"))
                return db_fail(db, -EBADMSG, what,
                               "the database file is corrupt (%s); restore it from a backup",
                               res ? res : "no result");
        return 0;
}

static int quick_check(state_db *db)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        const char *what = "opening";
        int r = db_query_row(db, what, "PRAGMA quick_check(1)", &st, NULL);
        if (r < 0)
                return r;
        const char *res = r > 0 ? (const char *)sqlite3_column_text(st, 0) : NULL;
        if (!res || !streq(res, "ok"))
                return db_fail(db, -EBADMSG, what,
                               "the database file is corrupt (%s); restore it from a backup",
                               res ? res : "no result");
        return 0;
}

/* Apply migrations until user_version reaches target, each in its own transaction. */
static int migrate(state_db *db, int target)
{
        for (;;) {
                int r = state_begin(db);
                if (r < 0)
                        return r;
                int64_t v;
                r = pragma_int(db, "migrating", "PRAGMA user_version", &v);
                if (r < 0 || v >= target)
                        return db_end(db, r);
                r = db_exec(db, "migrating", state_migrations[v]);
                if (r >= 0) {
                        char sql[64];
                        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", (int)v + 1);
                        r = db_exec(db, "migrating", sql);
                }
                r = db_end(db, r);
                if (r < 0)
                        return r;
                log_debug("state %s: migrated schema to version %d", db->path, (int)v + 1);
        }
}

static int check_identity(state_db *db, int64_t *ret_version)
{
        int64_t version, app_id, tables;
        int r = pragma_int(db, "opening", "PRAGMA user_version", &version);
        if (r < 0)
                return r;
        r = pragma_int(db, "opening", "PRAGMA application_id", &app_id);
        if (r < 0)
                return r;
        r = pragma_int(db, "opening", "SELECT count(*) FROM sqlite_master", &tables);
        if (r < 0)
                return r;
        if ((version > 0 && app_id != STATE_APPLICATION_ID) || (version == 0 && tables > 0))
                return db_fail(db, -EBADMSG, "opening",
                               "not a gitcd state database (an SQLite database of another "
                               "program)");
        if (version > state_n_migrations)
                return db_fail(db, -EPROTO, "opening",
                               "schema version %d is newer than this gitcd understands (%d); "
                               "use a newer gitcd",
                               (int)version, state_n_migrations);
        *ret_version = version;
        return 0;
}

static int open_sqlite(state_db *db, int flags)
{
        int rc = sqlite3_open_v2(db->path, &db->sql, flags, NULL);
        if (rc != SQLITE_OK) {
                int r = db_error(db, rc, "opening");
                if (r == -ENOENT || r == -EACCES) {
                        _cleanup_free_ char *copy = xstrdup(db->path);
                        const char *dir = dirname(copy);
                        if (r == -EACCES || access(dir, W_OK) < 0)
                                r = db_fail(db, r, "opening", "%s (check the permissions of %s)",
                                            strerror(-r), dir);
                }
                return r;
        }
        sqlite3_extended_result_codes(db->sql, 1);
        sqlite3_busy_timeout(db->sql, BUSY_TIMEOUT_MS);
        return 0;
}

/* Switch to WAL; journal_mode answers with the mode in effect. */
static int set_wal(state_db *db)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, "opening", "PRAGMA journal_mode = WAL", &st, NULL);
        if (r < 0)
                return r;
        r = db_step(db, st, "opening");
        if (r < 0)
                return r;
        const char *mode = r > 0 ? (const char *)sqlite3_column_text(st, 0) : NULL;
        if (!mode || strcasecmp(mode, "wal") != 0)
                return db_fail(db, -EROFS, "opening",
                               "cannot switch the database to WAL mode (is its folder "
                               "writable?)");
        return 0;
}

/*
 * sqlite3_wal_hook of a short-lived connection: how long the WAL is after a
 * commit, for state_close(); past SQLite's default of 1,000 pages (a long
 * `gitcd apply`) the same passive checkpoint as its own hook's.
 */
static int count_wal_pages(void *userdata, sqlite3 *sql, const char *name, int pages)
{
        state_db *db = userdata;
        db->wal_pages = pages;
        if (pages >= 1000)
                (void)sqlite3_wal_checkpoint_v2(sql, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return SQLITE_OK;
}

static int open_read_write(state_db *db, int target)
{
        _cleanup_free_ char *copy = xstrdup(db->path);
        const char *dir = dirname(copy);
        int r = mkdir_p(dir, 0750);
        if (r < 0)
                return db_fail(db, r, "opening", "cannot create the folder %s: %s", dir,
                               strerror(-r));
        if (!path_exists(db->path) && access(dir, W_OK) < 0)
                return db_fail(db, -errno, "opening", "cannot create the database: %s (folder %s)",
                               strerror(errno), dir);
        r = open_sqlite(db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
        if (r < 0)
                return r;
        /* sqlite falls back to read-only quietly when the file is not writable */
        if (sqlite3_db_readonly(db->sql, "main") == 1)
                return db_fail(db, -EROFS, "opening",
                               "the database file is read-only for this user (check the "
                               "permissions of it and of %s)",
                               dir);
        int64_t version;
        r = check_identity(db, &version);
        if (r < 0)
                return r;
        r = set_wal(db);
        if (r < 0)
                return r;
        /* keep -wal and -shm after the last close, so that users who may read
         * but not write the folder can still run `gitcd log` */
        int persist = 1;
        (void)sqlite3_file_control(db->sql, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        /* cache_size: see STATE_CACHE_KB */
        r = db_exec(db, "opening",
                    "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
                    "PRAGMA journal_size_limit = 1048576; "
                    "PRAGMA cache_size = -" STATE_CACHE_KB);
        if (r < 0)
                return r;
        if (!db->short_lived) {
                r = quick_check(db);
                if (r < 0)
                        return r;
        } else {
                /* instead of the automatic checkpoint: state_close() decides */
                sqlite3_wal_hook(db->sql, count_wal_pages, db);
        }
        /* a current schema needs no write transaction (migrations only go up) */
        return version >= target ? 0 : migrate(db, target);
}

/* "file:" URI for path with ?immutable=1; '%', '?' and '#' are escaped. */
static char *immutable_uri(const char *path)
{
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, "file:");
        for (const char *p = path; *p; p++)
                if (*p == '%' || *p == '?' || *p == '#')
                        sb_printf(&sb, "%%%02X", (unsigned char)*p);
                else
                        sb_appendc(&sb, *p);
        sb_append(&sb, "?immutable=1");
        return sb_detach(&sb);
}

/*
 * A database without its -wal file, in a folder this user may not write
 * (e.g. a copy): SQLite cannot create the WAL index, so read the file as
 * immutable. No -wal means no writer has changes outside the main file.
 * gitcd's writers keep their -wal (PERSIST_WAL), so this path is not taken
 * next to a running gitcd; if another writer started meanwhile, the worst
 * case is a read error, never a change to the file.
 */
static int reopen_immutable(state_db *db)
{
        _cleanup_free_ char *wal = xasprintf("%s-wal", db->path);
        _cleanup_free_ char *copy = xstrdup(db->path);
        if (path_exists(wal) || access(dirname(copy), W_OK) == 0)
                return -EAGAIN;
        cache_clear(db);
        sqlite3_close_v2(db->sql);
        db->sql = NULL;
        _cleanup_free_ char *uri = immutable_uri(db->path);
        int rc = sqlite3_open_v2(
            uri, &db->sql, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK)
                return db_error(db, rc, "opening");
        sqlite3_extended_result_codes(db->sql, 1);
        sqlite3_busy_timeout(db->sql, BUSY_TIMEOUT_MS);
        log_debug("state %s: read as immutable (read-only folder, no -wal)", db->path);
        return 0;
}

static int open_read_only(state_db *db)
{
        if (!path_exists(db->path))
                return db_fail(db, -ENOENT, NULL, "no state at %s (nothing has been applied yet)",
                               db->path);
        int r = open_sqlite(db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
        if (r < 0)
                return r;
        int64_t version;
        r = check_identity(db, &version);
        if (r == -EROFS || r == -EACCES || r == -EIO) {
                char saved[sizeof(last_error)];
                memcpy(saved, last_error, sizeof(saved));
                int k = reopen_immutable(db);
                if (k == -EAGAIN) {
                        memcpy(last_error, saved, sizeof(saved));
                        return r;
                }
                if (k < 0)
                        return k;
                r = check_identity(db, &version);
        }
        if (r < 0)
                return r;
        if (version < state_n_migrations)
                return db_fail(db, -EPROTO, "opening",
                               "schema version %d is older than this gitcd's (%d); it is "
                               "upgraded the next time gitcd writes to it",
                               (int)version, state_n_migrations);
        r = db_exec(db, "opening", "PRAGMA foreign_keys = ON");
        if (r < 0)
                return r;
        return quick_check(db);
}

/*
 * SQLite's memory statistics take a process-wide mutex around every
 * allocation, and a pass allocates for every row it reads: the daemon's
 * workers met there. gitcd never reads the statistics. Set before SQLite
 * initializes; if it already did (another library), nothing changes.
 */
static void sqlite_setup(void)
{
        (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static int open_common(const char *path, state_open_mode mode, int target, state_db **ret_db)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, sqlite_setup);
        last_error[0] = '\0';
        if (isempty(path)) {
                snprintf(last_error, sizeof(last_error), "state: no database path given");
                return -EINVAL;
        }
        state_db *db = XNEW(state_db);
        db->path = xstrdup(path);
        db->read_only = mode == STATE_OPEN_READ_ONLY;
        db->short_lived = short_lived;
        int r = db->read_only ? open_read_only(db) : open_read_write(db, target);
        if (r < 0) {
                state_close(db);
                return r;
        }
        *ret_db = db;
        return 0;
}

int state_open(const char *path, state_open_mode mode, state_db **ret_db)
{
        return open_common(path, mode, state_n_migrations, ret_db);
}

int state_open_at_version(const char *path, int version, state_db **ret_db)
{
        if (version < 1 || version > state_n_migrations) {
                snprintf(last_error, sizeof(last_error), "state: no schema version %d", version);
                return -EINVAL;
        }
        return open_common(path, STATE_OPEN_READ_WRITE, version, ret_db);
}

void state_close(state_db *db)
{
        if (!db)
                return;
        cache_clear(db);
        if (db->sql) {
                if (db->depth > 0 && !sqlite3_get_autocommit(db->sql))
                        sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
                /* committed is durable in the WAL; the next opener appends to it, or,
                 * once it is long, finds it empty (never waiting: a reader that holds
                 * it, the daemon's, say, leaves it to the daemon's checkpoints) */
                if (db->short_lived && !db->read_only) {
                        if (db->wal_pages >= SHORT_LIVED_WAL_PAGES) {
                                sqlite3_busy_timeout(db->sql, 0);
                                (void)sqlite3_wal_checkpoint_v2(
                                    db->sql, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
                        }
                        (void)sqlite3_db_config(db->sql, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
                }
                sqlite3_close_v2(db->sql);
        }
        if (db->depth > 0)
                writer_done(db, false);
        free(db->path);
        free(db);
}
