/*
 * Ordered rollouts across clusters (see order.h).
 *
 * Design decision: the order is a property of one revision. An edge may
 * only point at a cluster the same revision defines, because "converged on
 * the same commit" has a meaning only inside one source; a name the state
 * store knows from elsewhere is refused with that reason, not silently
 * waited on forever. The gate is a pure function of facts the state store
 * holds (an upstream's desired and latched hashes, its phase, its
 * conditions' transition times, its terminal state and its verdicts), so
 * the daemon that acts, `gitcd plan` that predicts and `gitcd status` that
 * reports read the same sentence. The soak is measured from the latest of:
 * the upstream's desired spec changing, Available turning True,
 * Progressing turning False and Degraded turning False; any of these
 * moving again restarts it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "intake/order.h"
#include "util/strbuf.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

char *order_resolve(const etcd_cluster *c, const char *entry)
{
        if (strchr(entry, '/'))
                return xstrdup(entry);
        return xasprintf("%s/%s", c->namespace_ ? c->namespace_ : "default", entry);
}

static bool prior_known(const intake_input *in, const char *id)
{
        for (size_t i = 0; in->priors && i < in->n_priors; i++)
                if (streq(in->priors[i].id, id))
                        return true;
        return false;
}

/* A problem with c's entry j: refused (apply) or an error of the revision (validate). */
static void refuse(const intake_input *in, intake_result *r, intake_cluster *c, size_t j,
                   const char *fmt, ...) _printf_(5, 6);
static void refuse(const intake_input *in, intake_result *r, intake_cluster *c, size_t j,
                   const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        _cleanup_free_ char *at = xasprintf("spec.dependsOn[%zu]", j);
        int line, col;
        etcd_cluster_loc(c->spec, at, &line, &col);
        bool validate = in->mode == INTAKE_VALIDATE;
        diag_list *to = validate ? &r->diags : &c->diags;
        diag_add(to, DIAG_ERROR, c->spec->file, line, col, "%s: %s", at, msg);
        if (validate) {
                r->errors = true;
                return;
        }
        c->verdict = INTAKE_REFUSED;
        if (!c->why)
                c->why = xasprintf("%s: %s", at, msg);
}

/* Only a cluster with a spec that is not a duplicate takes part in the order. */
static bool in_graph(const intake_cluster *c)
{
        return c->spec && c->verdict != INTAKE_DUPLICATE;
}

/* Each entry's index in r->items, -1 when it names none (ret[i][j]). */
static ssize_t **edges_of(const intake_result *r, strmap *ids)
{
        ssize_t **e = xcalloc(r->n + 1, sizeof(ssize_t *));
        for (size_t i = 0; i < r->n; i++) {
                const intake_cluster *c = &r->items[i];
                if (!in_graph(c))
                        continue;
                e[i] = xcalloc(c->spec->n_depends_on + 1, sizeof(ssize_t));
                for (size_t j = 0; j < c->spec->n_depends_on; j++) {
                        _cleanup_free_ char *id = order_resolve(c->spec, c->spec->depends_on[j]);
                        size_t at;
                        e[i][j] =
                            strmap_get(ids, id, &at) && in_graph(&r->items[at]) ? (ssize_t)at : -1;
                }
        }
        return e;
}

static void edges_free(ssize_t **e, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(e[i]);
        free(e);
}

/* A cluster's name in a cycle's path: its name alone when every one shares its namespace. */
static const char *path_name(const intake_cluster *c, bool one_ns)
{
        return one_ns ? c->spec->name : c->id;
}

typedef struct cycle_walk {
        const intake_input *in;
        intake_result *r;
        ssize_t **edges;
        int *color; /* 0 unseen, 1 on the stack, 2 done */
        size_t *stack;
        size_t depth;
} cycle_walk;

/* The cycle the entry j of u closes back to v (on the stack): refused, with its path. */
static void cycle_found(cycle_walk *w, size_t u, size_t j, size_t v)
{
        size_t from = 0;
        while (w->stack[from] != v)
                from++;
        bool one_ns = true;
        for (size_t k = from; k < w->depth; k++)
                one_ns = one_ns && streq_ptr(w->r->items[w->stack[k]].spec->namespace_,
                                             w->r->items[v].spec->namespace_);
        strbuf path = STRBUF_INIT;
        for (size_t k = from; k < w->depth; k++)
                sb_printf(&path, "%s -> ", path_name(&w->r->items[w->stack[k]], one_ns));
        sb_append(&path, path_name(&w->r->items[v], one_ns));
        refuse(w->in, w->r, &w->r->items[u], j, "a dependency cycle: %s", sb_str(&path));
        /* apply: every cluster on it is refused, each at its own entry on the cycle */
        for (size_t k = from; w->in->mode == INTAKE_APPLY && k + 1 < w->depth; k++) {
                size_t at = w->stack[k], next = w->stack[k + 1];
                const etcd_cluster *s = w->r->items[at].spec;
                for (size_t e = 0; e < s->n_depends_on; e++)
                        if (w->edges[at][e] == (ssize_t)next) {
                                refuse(w->in, w->r, &w->r->items[at], e,
                                       "on the dependency cycle %s", sb_str(&path));
                                break;
                        }
        }
        sb_release(&path);
}

static void cycle_visit(cycle_walk *w, size_t u)
{
        w->color[u] = 1;
        w->stack[w->depth++] = u;
        const etcd_cluster *s = w->r->items[u].spec;
        for (size_t j = 0; j < s->n_depends_on; j++) {
                ssize_t v = w->edges[u][j];
                if (v < 0)
                        continue;
                if (w->color[v] == 1)
                        cycle_found(w, u, j, (size_t)v);
                else if (w->color[v] == 0)
                        cycle_visit(w, (size_t)v);
        }
        w->depth--;
        w->color[u] = 2;
}

void order_check(const intake_input *in, intake_result *r)
{
        strmap ids = STRMAP_INIT;
        for (size_t i = 0; i < r->n; i++)
                (void)strmap_put(&ids, r->items[i].id, i);
        ssize_t **edges = edges_of(r, &ids);
        for (size_t i = 0; i < r->n; i++) {
                intake_cluster *c = &r->items[i];
                if (!in_graph(c))
                        continue;
                for (size_t j = 0; j < c->spec->n_depends_on; j++) {
                        if (edges[i][j] >= 0)
                                continue;
                        _cleanup_free_ char *id = order_resolve(c->spec, c->spec->depends_on[j]);
                        size_t at;
                        if (strmap_get(&ids, id, &at))
                                refuse(in, r, c, j, "%s is defined more than once", id);
                        else if (prior_known(in, id))
                                refuse(in, r, c, j,
                                       "%s is not defined by this source (another source's "
                                       "cluster, or one removed from it); a cluster can only "
                                       "depend on clusters of its own source, whose commits "
                                       "it shares",
                                       id);
                        else if (r->errors)
                                /* an invalid document may be that cluster */
                                refuse(in, r, c, j,
                                       "no valid cluster %s in this source (a document with "
                                       "errors may be it)",
                                       id);
                        else
                                refuse(in, r, c, j, "no cluster %s in this source", id);
                }
        }
        cycle_walk w = {.in = in,
                        .r = r,
                        .edges = edges,
                        .color = xcalloc(r->n + 1, sizeof(int)),
                        .stack = xcalloc(r->n + 1, sizeof(size_t))};
        for (size_t i = 0; i < r->n; i++)
                if (in_graph(&r->items[i]) && w.color[i] == 0)
                        cycle_visit(&w, i);
        free(w.color);
        free(w.stack);
        edges_free(edges, r->n);
        strmap_release(&ids);
}

/* The tier of u, memoized in t (-2: being computed, -3: not yet). */
static int tier_of(const intake_result *r, ssize_t **edges, int *t, size_t u)
{
        if (t[u] != -3)
                return t[u] == -2 ? -1 : t[u];
        const intake_cluster *c = &r->items[u];
        if (!in_graph(c) || c->verdict == INTAKE_REFUSED)
                return t[u] = -1;
        t[u] = -2;
        int tier = 0;
        for (size_t j = 0; j < c->spec->n_depends_on; j++) {
                int up = edges[u][j] < 0 ? -1 : tier_of(r, edges, t, (size_t)edges[u][j]);
                if (up < 0)
                        return t[u] = -1;
                tier = MAX(tier, up + 1);
        }
        return t[u] = tier;
}

int *order_tiers(const intake_result *r)
{
        strmap ids = STRMAP_INIT;
        for (size_t i = 0; i < r->n; i++)
                (void)strmap_put(&ids, r->items[i].id, i);
        ssize_t **edges = edges_of(r, &ids);
        int *t = xcalloc(r->n + 1, sizeof(int));
        for (size_t i = 0; i < r->n; i++)
                t[i] = -3;
        for (size_t i = 0; i < r->n; i++)
                (void)tier_of(r, edges, t, i);
        edges_free(edges, r->n);
        strmap_release(&ids);
        return t;
}

void order_gate_release(order_gate *g)
{
        if (!g)
                return;
        free(g->message);
        free(g->stored);
        *g = (order_gate){0};
}

/* "staging" for "default/staging": the name a person wrote. */
static const char *short_id(const char *id)
{
        const char *slash = strchr(id, '/');
        return slash && strneq(id, "default/", 8) ? slash + 1 : id;
}

/* One upstream that is not through yet: its clause in both forms. */
static void clause(strbuf *live, strbuf *stored, const char *fmt_live, const char *fmt_stored)
{
        sb_printf(live, "%s%s", live->len ? "; " : "", fmt_live);
        sb_printf(stored, "%s%s", stored->len ? "; " : "", fmt_stored);
}

int order_gate_decide(const char *commit, int soak_seconds, const order_upstream *ups, size_t n,
                      int64_t now_ms, order_gate *ret)
{
        if (!ret || (n && !ups) || soak_seconds < 0)
                return -EINVAL;
        char at[8];
        snprintf(at, sizeof(at), "%.7s", commit ? commit : "");
        const char *on = commit ? at : "the same revision";
        int64_t soak_ms = (int64_t)soak_seconds * 1000;
        strbuf wl = STRBUF_INIT, ws = STRBUF_INIT, fl = STRBUF_INIT;
        int64_t until = 0;
        for (size_t i = 0; i < n; i++) {
                const order_upstream *u = &ups[i];
                const char *name = short_id(u->id);
                if (u->failed_reason) {
                        sb_printf(&fl, "%s%s %s: %s", fl.len ? "; " : "", name, u->failed_reason,
                                  u->failed_message ? u->failed_message : "");
                        continue;
                }
                _cleanup_free_ char *a = NULL, *b = NULL;
                if (u->held) {
                        a = xasprintf("waits for %s, whose own change is held: %s", name, u->held);
                        clause(&wl, &ws, a, a);
                        continue;
                }
                if (!u->at_commit || !u->converged || u->unhealthy || u->healthy_since_ms <= 0) {
                        const char *what = u->at_commit && u->unhealthy ? u->unhealthy : NULL;
                        a = xasprintf("waits for %s to converge on %s and soak %d s%s%s%s", name,
                                      on, soak_seconds, what ? " (now: " : "", what ? what : "",
                                      what ? ")" : "");
                        clause(&wl, &ws, a, a);
                        continue;
                }
                int64_t end = u->healthy_since_ms + soak_ms;
                if (now_ms >= end)
                        continue;
                int64_t left_s = (end - now_ms + 999) / 1000;
                char when[40];
                format_rfc3339(end, when, sizeof(when));
                a = xasprintf("waits for %s to converge on %s and soak %d s (%lld s left)", name,
                              on, soak_seconds, (long long)left_s);
                b = xasprintf("waits for %s to converge on %s and soak %d s (until %s)", name, on,
                              soak_seconds, when);
                clause(&wl, &ws, a, b);
                until = until ? MIN(until, end) : end;
        }
        order_gate g = {.kind = ORDER_RELEASE};
        if (fl.len) {
                g.kind = ORDER_HOLD;
                g.reason = ORDER_REASON_FAILED;
                g.message = xasprintf("held: %s", sb_str(&fl));
                g.stored = xstrdup(g.message);
        } else if (wl.len) {
                g.kind = ORDER_WAIT;
                g.reason = ORDER_REASON_WAITING;
                g.message = xstrdup(sb_str(&wl));
                g.stored = xstrdup(sb_str(&ws));
                g.until_ms = until;
        }
        sb_release(&wl);
        sb_release(&ws);
        sb_release(&fl);
        *ret = g;
        return 0;
}

static const state_condition *condition(const state_cluster *sc, const char *type)
{
        for (size_t i = 0; i < sc->n_conditions; i++)
                if (streq_ptr(sc->conditions[i].type, type))
                        return &sc->conditions[i];
        return NULL;
}

/* Since when the condition has had status (0: it has not, or is not known). */
static int64_t since(const state_cluster *sc, const char *type, const char *status)
{
        const state_condition *c = condition(sc, type);
        return c && streq_ptr(c->status, status) ? MAX(c->last_transition_ms, 1) : 0;
}

void order_upstream_from_state(const char *id, const state_cluster *sc, const state_verdict_list *v,
                               const char *commit, const char *spec_hash, order_upstream *ret)
{
        order_upstream u = {.id = id};
        for (size_t i = 0; v && i < v->n; i++) {
                const state_verdict *x = v->items[i];
                if (!streq_ptr(x->cluster, id))
                        continue;
                if (streq_ptr(x->verdict, "refused")) {
                        u.failed_reason = "refused";
                        u.failed_message = x->message;
                } else if (!u.failed_reason) {
                        u.held = x->message;
                }
        }
        if (!sc) {
                *ret = u;
                return;
        }
        u.at_commit = spec_hash ? streq_ptr(sc->desired_hash, spec_hash)
                                : streq_ptr(sc->desired_commit, commit);
        const state_condition *deg = condition(sc, "Degraded");
        bool degraded = deg && streq_ptr(deg->status, "True");
        if (!u.failed_reason && sc->terminal_reason) {
                u.failed_reason = sc->terminal_reason;
                u.failed_message = sc->terminal_message;
        } else if (!u.failed_reason && degraded && streq_ptr(deg->reason, "SpecRejected")) {
                u.failed_reason = deg->reason;
                u.failed_message = deg->message;
        }
        if (u.failed_reason) {
                *ret = u;
                return;
        }
        u.converged = sc->observed_hash && streq_ptr(sc->observed_hash, sc->desired_hash) &&
                      streq_ptr(sc->phase, "Running");
        if (degraded)
                u.unhealthy = deg->reason ? deg->reason : "Degraded";
        int64_t a = since(sc, "Available", "True");
        int64_t p = since(sc, "Progressing", "False");
        int64_t d = since(sc, "Degraded", "False");
        if (u.converged && a && p && d)
                u.healthy_since_ms = MAX(MAX(a, p), MAX(d, sc->desired_ms));
        *ret = u;
}
