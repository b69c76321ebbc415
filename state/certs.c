/*
 * The leaf certificates of a cluster as the reconciler last observed them
 * (the target holds the certificates; this table is the record `gitcd
 * status` reads without asking the target). Replaced whole, and only when
 * it differs, so a converged pass writes nothing.
 */
#include <errno.h>
#include <string.h>

#include "state/internal.h"
#include "util/xalloc.h"

static void cert_free(state_cert *c)
{
        if (!c)
                return;
        free(c->member);
        free(c->surface);
        free(c->serial);
        free(c);
}

DEFINE_STATE_LIST_RELEASE(state_cert_list, cert_free)

int state_certs_list(state_db *db, const char *cluster, state_cert_list *ret_list)
{
        const char *what = "listing certificates";
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = db_prepare(db, what,
                           "SELECT member, surface, not_after_ms, serial FROM certificates "
                           "WHERE cluster = ? ORDER BY member, surface",
                           &st, "s", cluster);
        if (r < 0)
                return r;
        state_cert_list l = {0};
        size_t alloc = 0;
        while ((r = db_step(db, st, what)) > 0) {
                state_cert *c = XNEW(state_cert);
                c->member = db_col_text(st, 0);
                c->surface = db_col_text(st, 1);
                c->not_after_ms = sqlite3_column_int64(st, 2);
                c->serial = db_col_text(st, 3);
                l.items = xgrow(l.items, &alloc, l.n + 1, sizeof(*l.items));
                l.items[l.n++] = c;
        }
        if (r < 0) {
                state_cert_list_release(&l);
                return r;
        }
        *ret_list = l;
        return 0;
}

static bool same_set(const state_cert_list *have, const state_cert *v, size_t n)
{
        if (have->n != n)
                return false;
        for (size_t i = 0; i < n; i++) {
                bool found = false;
                for (size_t j = 0; j < have->n && !found; j++) {
                        const state_cert *h = have->items[j];
                        found = streq_ptr(h->member, v[i].member ? v[i].member : "") &&
                                streq_ptr(h->surface, v[i].surface) &&
                                streq_ptr(h->serial, v[i].serial) &&
                                h->not_after_ms == v[i].not_after_ms;
                }
                if (!found)
                        return false;
        }
        return true;
}

int state_certs_replace(state_db *db, const char *cluster, const state_cert *v, size_t n)
{
        const char *what = "recording certificates";
        /* The same set as recorded (most passes): no write transaction at all. */
        state_cert_list have = {0};
        int r = db_cluster_exists(db, cluster, what);
        if (r >= 0)
                r = state_certs_list(db, cluster, &have);
        if (r < 0)
                return r;
        bool unchanged = same_set(&have, v, n);
        state_cert_list_release(&have);
        if (unchanged)
                return 0;
        r = state_begin(db);
        if (r < 0)
                return r;
        r = db_cluster_exists(db, cluster, what);
        if (r >= 0)
                r = state_certs_list(db, cluster, &have);
        bool same = r >= 0 && same_set(&have, v, n);
        state_cert_list_release(&have);
        if (r >= 0 && !same) {
                r = db_run(db, what, "DELETE FROM certificates WHERE cluster = ?", "s", cluster);
                for (size_t i = 0; r >= 0 && i < n; i++) {
                        if (isempty(v[i].surface) || !v[i].serial) {
                                r = db_fail(db, -EINVAL, what,
                                            "a certificate needs a surface "
                                            "and a serial");
                                break;
                        }
                        r = db_run(db, what,
                                   "INSERT OR REPLACE INTO certificates (cluster, member, surface, "
                                   "not_after_ms, serial) VALUES (?, ?, ?, ?, ?)",
                                   "sssis", cluster, v[i].member ? v[i].member : "", v[i].surface,
                                   v[i].not_after_ms, v[i].serial);
                }
        }
        r = db_end(db, r);
        return r < 0 ? r : same ? 0 : 1;
}
