/*
 * The audit log: who changed what, when, why, and what came of it.
 *
 * Append-only, enforced by the database itself (triggers in schema.c): an
 * UPDATE always fails, and a DELETE fails unless state_audit_prune() has
 * granted it inside its own transaction. Nothing secret may enter: before
 * and after summaries must be JSON, and the value of every key that looks
 * secret (password, token, secret, credential, a name ending in "key") is
 * replaced by "[redacted]" at any depth.
 *
 * The design decision to know: much of an event comes from a Git commit
 * (author, message, spec), and whoever can push must not be able to
 * suppress the log. So content is never a reason to refuse an event: a PEM
 * private key block anywhere is cut out and replaced by "[redacted]", and
 * control characters are escaped (util/escape.h), then the event is
 * stored. An append that fails all the same (a full disk, a broken
 * database, a caller's invalid JSON) is counted twice, apart from the
 * audit table: in the audit_failures row that `gitcd status` shows, and in
 * a per-process counter that makes the command exit non-zero.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "state/internal.h"
#include "util/escape.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define REDACTED "[redacted]"

bool state_key_looks_secret(const char *key)
{
        static const char *const words[] = {"password", "passwd",  "passphrase",
                                            "token",    "secret",  "credential",
                                            "apikey",   "api_key", "private"};
        if (isempty(key))
                return false;
        _cleanup_free_ char *lower = xstrdup(key);
        for (char *p = lower; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (strstr(lower, words[i]))
                        return true;
        size_t n = strlen(lower);
        return n >= 3 && streq(lower + n - 3, "key");
}

/*
 * The first needle at or after p, or NULL. A plain loop: libc's search
 * functions are linear, but the sanitizers' wrappers of them check the
 * whole rest of the text at each call, which would make every scan below
 * quadratic in the ASan build that the tests run in.
 */
static const char *find(const char *p, const char *needle)
{
        for (; *p; p++) {
                if (*p != needle[0])
                        continue;
                size_t i = 1;
                while (needle[i] && p[i] == needle[i])
                        i++;
                if (!needle[i])
                        return p;
        }
        return NULL;
}

bool state_text_has_private_key(const char *text)
{
        for (const char *p = text ? find(text, "-----BEGIN ") : NULL; p;
             p = find(p + 1, "-----BEGIN ")) {
                const char *end = find(p + 11, "-----");
                if (!end)
                        return false;
                size_t n = (size_t)(end - p);
                const char *k = memmem(p, n, "PRIVATE KEY", 11);
                if (k)
                        return true;
        }
        return false;
}

/* Body characters of a PEM block: base64, and the line breaks between. */
static bool pem_body_char(char ch)
{
        return isalnum((unsigned char)ch) || ch == '+' || ch == '/' || ch == '=' || ch == '\n' ||
               ch == '\r' || ch == '\t' || ch == ' ';
}

/*
 * The next "-----END " at or after from, remembered between calls so that
 * a text of many blocks without an END line is searched once, not once per
 * block.
 */
typedef struct end_finder {
        const char *from; /* the search that found at (or nothing) started here */
        const char *at;   /* NULL: no END line at or after from */
} end_finder;

static const char *find_end_line(end_finder *f, const char *from)
{
        if (f->from && from >= f->from && (!f->at || from <= f->at))
                return f->at;
        f->from = from;
        f->at = find(from, "-----END ");
        return f->at;
}

/*
 * Where the private key block whose label ends at label_end ends: after
 * its END line when there is one, else after the base64 body that follows
 * the BEGIN line.
 */
static const char *pem_block_end(end_finder *f, const char *label_end)
{
        const char *after_begin = label_end + 5;
        const char *end = find_end_line(f, after_begin);
        if (end) {
                const char *close = find(end + 9, "-----");
                return close ? close + 5 : end + strlen(end);
        }
        const char *q = after_begin;
        while (*q && pem_body_char(*q))
                q++;
        while (q > after_begin && isspace((unsigned char)q[-1]))
                q--; /* the blank before what follows is not part of the key */
        return q;
}

static bool has_private_label(const char *from, const char *to)
{
        return to > from && memmem(from, (size_t)(to - from), "PRIVATE KEY", 11);
}

/* A "-----BEGIN " that is no key block (yet): where it is, in the text and the output. */
typedef struct open_begin {
        const char *at;
        const char *label_end; /* the first "-----" after its BEGIN */
        size_t out;            /* its offset in the output */
} open_begin;

/*
 * Every block state_text_has_private_key() finds becomes "[redacted]", in
 * one pass over the text: linear in its length, whatever it holds.
 *
 * The subtle part: cutting a block out joins the text around it. A BEGIN
 * line whose label ran into the block ("-----BEGIN A" right before it)
 * gets a new label, which goes on after the cut up to the next "-----"
 * ("PRIVATE KEY-----" after the block makes it a key block). The scan
 * keeps such BEGIN lines on a stack, each one's label running into the
 * next BEGIN; when a block is cut, the top of the stack is judged by what
 * its label gained after the cut (what came before was judged when it
 * was pushed) and, when that makes it a key block, it is cut too, from its
 * own BEGIN, and so on down the stack. "[redacted]" holds no '-', so no
 * marker or label end forms across it: the output holds no key block.
 */
static char *redact_pass(const char *text)
{
        strbuf sb = STRBUF_INIT;
        end_finder ends = {0};
        open_begin *stack = NULL;
        size_t n_stack = 0, alloc = 0;
        const char *copied = text; /* everything before is in sb */
        const char *p = find(text, "-----BEGIN ");
        while (p) {
                const char *label_end = find(p + 11, "-----");
                if (!label_end)
                        break; /* no label ends: no BEGIN from here on is a key block */
                if (n_stack && stack[n_stack - 1].label_end + 5 <= p)
                        n_stack = 0; /* the chain is broken: nothing below can change */
                if (!has_private_label(p, label_end)) {
                        stack = xgrow(stack, &alloc, n_stack + 1, sizeof(*stack));
                        stack[n_stack++] =
                            (open_begin){p, label_end, sb.len + (size_t)(p - copied)};
                        p = find(p + 1, "-----BEGIN ");
                        continue;
                }
                const char *start = p;
                size_t out = sb.len + (size_t)(p - copied);
                const char *end = pem_block_end(&ends, label_end);
                while (n_stack && stack[n_stack - 1].label_end + 5 > start) {
                        open_begin *q = &stack[n_stack - 1];
                        const char *next = find(end, "-----");
                        if (!next)
                                break; /* a label that never ends makes no key block */
                        if (!has_private_label(end, next)) {
                                q->label_end = next; /* still no key block; open past the cut */
                                break;
                        }
                        start = q->at;
                        out = q->out;
                        end = pem_block_end(&ends, next);
                        n_stack--;
                }
                if (start >= copied) {
                        sb_append_len(&sb, copied, (size_t)(start - copied));
                } else {
                        /* a BEGIN line kept before an earlier cut is cut after all */
                        assert(sb.buf && out <= sb.len);
                        sb.len = out;
                        sb.buf[out] = '\0';
                }
                sb_append(&sb, REDACTED);
                copied = end;
                p = find(end, "-----BEGIN ");
        }
        sb_append(&sb, copied);
        free(stack);
        return sb_detach(&sb);
}

char *state_redact_private_keys(const char *text)
{
        if (!text)
                return NULL;
        char *s = redact_pass(text);
        if (state_text_has_private_key(s)) {
                /* cannot happen (see redact_pass); should it, nothing of the text is kept */
                assert(!"a private key block survived the redaction");
                free(s);
                s = xstrdup(REDACTED);
        }
        return s;
}

static void scrub(json_t *j)
{
        if (json_is_object(j)) {
                const char *key;
                json_t *value;
                json_object_foreach(j, key, value)
                {
                        if (state_key_looks_secret(key) && !json_is_null(value))
                                json_object_set_new(j, key, json_string(REDACTED));
                        else
                                scrub(value);
                }
        } else if (json_is_array(j)) {
                size_t i;
                json_t *value;
                json_array_foreach(j, i, value) scrub(value);
        } else if (json_is_string(j) && state_text_has_private_key(json_string_value(j))) {
                _cleanup_free_ char *clean = state_redact_private_keys(json_string_value(j));
                json_string_set(j, clean);
        }
}

char *state_scrub_json(const char *json)
{
        if (!json)
                return NULL;
        json_t *j = json_loads(json, JSON_DECODE_ANY, NULL);
        if (!j)
                return NULL;
        scrub(j);
        char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (s && state_text_has_private_key(s)) {
                /* only an object key can still hold one: keep no part of the summary */
                free(s);
                s = xstrdup("\"" REDACTED "\"");
        }
        return s;
}

/* A text field as stored: private keys cut out, control characters escaped. */
static char *clean_text(const char *text)
{
        _cleanup_free_ char *redacted = state_redact_private_keys(text);
        return str_escape(redacted);
}

static unsigned failed_in_process;

unsigned state_audit_failures_in_process(void)
{
        return __atomic_load_n(&failed_in_process, __ATOMIC_RELAXED);
}

/*
 * Count a failed append, in the process and, when the database can still
 * be written, in audit_failures. Returns r, keeping the append's message.
 */
static int audit_failed(state_db *db, const state_audit_event *ev, int r)
{
        assert(db);
        assert(r < 0);
        __atomic_add_fetch(&failed_in_process, 1, __ATOMIC_RELAXED);
        _cleanup_free_ char *error = xstrdup(state_last_error());
        /* SQLite may have rolled back the caller's transaction already
         * (after SQLITE_FULL): then nothing may run inside it */
        bool txn_gone = db->depth > 0 && sqlite3_get_autocommit(db->sql);
        if (!db->read_only && !txn_gone) {
                int64_t when = ev && ev->time_ms > 0 ? ev->time_ms : now_wall_ms();
                int k = db_run(db, "counting a failed audit event",
                               "INSERT INTO audit_failures (id, count, last_ms, last_action, "
                               "last_error) VALUES (1, 1, ?1, ?2, ?3) ON CONFLICT (id) DO UPDATE "
                               "SET count = count + 1, last_ms = ?1, last_action = ?2, "
                               "last_error = ?3",
                               "iss", when, ev ? ev->action : NULL, error);
                if (k < 0)
                        log_debug("%s", state_last_error());
        }
        /* put the append's message back (db_fail adds the "state PATH: " again) */
        _cleanup_free_ char *prefix = xasprintf("state %s: ", db->path);
        size_t skip = strneq(error, prefix, strlen(prefix)) ? strlen(prefix) : 0;
        return db_fail(db, r, NULL, "%s", error + skip);
}

int state_audit_append(state_db *db, const state_audit_event *ev, int64_t *ret_id)
{
        const char *what = "writing an audit event";
        if (!ev || isempty(ev->action))
                return audit_failed(db, ev,
                                    db_fail(db, -EINVAL, what, "an audit event needs an action"));
        _cleanup_free_ char *action = clean_text(ev->action);
        _cleanup_free_ char *before = NULL;
        _cleanup_free_ char *after = NULL;
        if (ev->before_json && !(before = state_scrub_json(ev->before_json)))
                return audit_failed(
                    db, ev, db_fail(db, -EINVAL, what, "the 'before' of %s is not JSON", action));
        if (ev->after_json && !(after = state_scrub_json(ev->after_json)))
                return audit_failed(
                    db, ev, db_fail(db, -EINVAL, what, "the 'after' of %s is not JSON", action));
        _cleanup_free_ char *cluster = clean_text(ev->cluster);
        _cleanup_free_ char *commit = clean_text(ev->commit);
        _cleanup_free_ char *author = clean_text(ev->author);
        _cleanup_free_ char *reason = clean_text(ev->reason);
        _cleanup_free_ char *outcome = clean_text(ev->outcome);
        int r = state_begin(db);
        if (r < 0)
                return audit_failed(db, ev, r);
        r = db_run(db, what,
                   "INSERT INTO audit (time_ms, cluster, commit_id, author, action, reason, "
                   "before, after, outcome, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "issssssssi", ev->time_ms, cluster, commit, author, action, reason, before,
                   after, outcome, ev->duration_ms);
        int64_t id = sqlite3_last_insert_rowid(db->sql);
        r = db_end(db, r < 0 ? r : 0);
        if (r < 0)
                return audit_failed(db, ev, r);
        if (ret_id)
                *ret_id = id;
        return r;
}

int state_audit_failures_get(state_db *db, state_audit_failures *ret)
{
        const char *what = "reading the count of failed audit events";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_query_row(db, what,
                             "SELECT count, last_ms, last_action, last_error FROM audit_failures "
                             "WHERE id = 1",
                             &st, NULL);
        if (r < 0)
                return r;
        state_audit_failures f = {0};
        if (r > 0) {
                f.count = sqlite3_column_int64(st, 0);
                f.last_ms = sqlite3_column_int64(st, 1);
                f.last_action = db_col_text(st, 2);
                f.last_error = db_col_text(st, 3);
        }
        *ret = f;
        return 0;
}

void state_audit_failures_release(state_audit_failures *f)
{
        if (!f)
                return;
        free(f->last_action);
        free(f->last_error);
        *f = (state_audit_failures){0};
}

int state_audit_query(state_db *db, const state_audit_filter *filter, state_audit_list *ret_list)
{
        const char *what = "reading the audit log";
        static const state_audit_filter none = {0};
        if (!filter)
                filter = &none;
        _cleanup_free_ char *prefix = NULL;
        if (filter->commit_prefix) {
                if (!state_commit_prefix_valid(filter->commit_prefix))
                        return db_fail(db, -EINVAL, what,
                                       "a commit is given as at least 4 hex digits, not \"%s\"",
                                       filter->commit_prefix);
                prefix = xstrdup(filter->commit_prefix);
                for (char *p = prefix; *p; p++)
                        *p = (char)tolower((unsigned char)*p);
        }
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT id, time_ms, cluster, commit_id, author, action, reason, "
                           "before, after, outcome, duration_ms FROM audit "
                           "WHERE (?1 IS NULL OR cluster = ?1) AND time_ms >= ?2 "
                           "AND (?3 IS NULL OR substr(commit_id, 1, length(?3)) = ?3) "
                           "AND (?4 IS NULL OR action = ?4) AND id > ?6 "
                           "ORDER BY time_ms DESC, id DESC LIMIT ?5",
                           &st, "sissii", filter->cluster, filter->since_ms, prefix, filter->action,
                           filter->limit ? (int64_t)filter->limit : (int64_t)-1, filter->after_id);
        if (r < 0)
                return r;
        state_audit_list l = {0};
        size_t alloc = 0;
        while ((r = db_step(db, st, what)) > 0) {
                state_audit_event *ev = XNEW(state_audit_event);
                ev->id = sqlite3_column_int64(st, 0);
                ev->time_ms = sqlite3_column_int64(st, 1);
                ev->cluster = db_col_text(st, 2);
                ev->commit = db_col_text(st, 3);
                ev->author = db_col_text(st, 4);
                ev->action = db_col_text(st, 5);
                ev->reason = db_col_text(st, 6);
                ev->before_json = db_col_text(st, 7);
                ev->after_json = db_col_text(st, 8);
                ev->outcome = db_col_text(st, 9);
                ev->duration_ms = sqlite3_column_int64(st, 10);
                l.items = xgrow(l.items, &alloc, l.n + 1, sizeof(*l.items));
                l.items[l.n++] = ev;
        }
        if (r < 0) {
                state_audit_list_release(&l);
                return r;
        }
        *ret_list = l;
        return 0;
}

/* Run delete_sql (a constant) under the retention grant grant_sql inserts; returns the count. */
static int prune_granted(state_db *db, const char *grant_sql, const char *delete_sql, int64_t arg)
{
        const char *what = "pruning the audit log";
        int r = db_run(db, what, grant_sql, "i", arg);
        if (r < 0)
                return r;
        int deleted = db_run(db, what, delete_sql, "i", arg);
        if (deleted < 0)
                return deleted;
        r = db_run(db, what, "DELETE FROM audit_retention", NULL);
        return r < 0 ? r : deleted;
}

int state_audit_prune(state_db *db, int64_t max_age_ms, size_t max_rows, int64_t now_ms)
{
        int r = state_begin(db);
        if (r < 0)
                return r;
        int total = 0;
        if (max_age_ms > 0) {
                r = prune_granted(db,
                                  "INSERT INTO audit_retention (upto) "
                                  "SELECT coalesce(max(id), 0) FROM audit WHERE time_ms < ?",
                                  "DELETE FROM audit WHERE time_ms < ?", now_ms - max_age_ms);
                if (r > 0)
                        total += r;
        }
        if (r >= 0 && max_rows > 0) {
                r = prune_granted(db,
                                  "INSERT INTO audit_retention (upto) SELECT coalesce(("
                                  "SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?), 0)",
                                  "DELETE FROM audit WHERE id <= coalesce(("
                                  "SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?), 0)",
                                  (int64_t)max_rows);
                if (r > 0)
                        total += r;
        }
        return db_end(db, r < 0 ? r : total);
}

void state_audit_event_free(state_audit_event *ev)
{
        if (!ev)
                return;
        free(ev->cluster);
        free(ev->commit);
        free(ev->author);
        free(ev->action);
        free(ev->reason);
        free(ev->before_json);
        free(ev->after_json);
        free(ev->outcome);
        free(ev);
}

DEFINE_STATE_LIST_RELEASE(state_audit_list, state_audit_event_free)
