/*
 * Diffs between two revisions (see revdiff.h).
 *
 * Design decisions:
 * - The second revision is planned (plan_compute) against records made from
 *   the first: each cluster the first defines validly becomes an accepted
 *   spec, as the driver would have recorded it (spec_to_json, compact and
 *   key-sorted). So "what changed" and "what it implies" come from the
 *   plan's one set of rules; nothing here decides a step.
 * - Both revisions also go through the intake on their own (no priors, no
 *   approvals) for the definitions themselves: a cluster the policy refuses
 *   still has a spec to diff, and a held one (waiting for approvals) too.
 * - The unified diff is of the normalized specs, indented JSON with sorted
 *   keys: dialect and formatting noise are gone, and the lines are the same
 *   whatever the file looked like. Values under secret-looking keys are
 *   replaced before the lines are made (plan_key_looks_secret), as the
 *   plan redacts them.
 * - The line diff is a longest common subsequence, quadratic in lines: a
 *   normalized spec is a few hundred lines. Beyond REVDIFF_MAX_CELLS the
 *   whole spec is shown as replaced rather than spending the memory.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan/revdiff.h"
#include "api/spec.h"
#include "intake/intake.h"
#include "targets/registry.h"
#include "util/escape.h"
#include "util/strbuf.h"
#include "util/strmap.h"
#include "util/xalloc.h"

#define REVDIFF_CONTEXT   3
#define REVDIFF_MAX_CELLS (16u * 1024u * 1024u)

static const char *const kind_names[] = {
    [REVDIFF_ADDED] = "added",     [REVDIFF_REMOVED] = "removed",     [REVDIFF_CHANGED] = "changed",
    [REVDIFF_REFUSED] = "refused", [REVDIFF_UNCHANGED] = "unchanged",
};

const char *revdiff_kind_name(revdiff_kind k)
{
        return k <= REVDIFF_UNCHANGED ? kind_names[k] : "?";
}

static void item_release(revdiff_item *it)
{
        free(it->name);
        for (size_t i = 0; i < it->n_lines; i++)
                free(it->lines[i]);
        free(it->lines);
        diag_list_release(&it->from_diags);
}

void revdiff_free(revdiff *d)
{
        if (!d)
                return;
        for (size_t i = 0; i < d->n; i++)
                item_release(&d->items[i]);
        free(d->items);
        plan_free(d->to_plan);
        diag_list_release(&d->from_diags);
        free(d);
}

bool revdiff_has_changes(const revdiff *d)
{
        return d->n_added + d->n_removed + d->n_changed > 0;
}

bool revdiff_has_errors(const revdiff *d)
{
        return d->n_refused > 0 || (d->to_plan && diag_has_errors(&d->to_plan->diags));
}

/* ---- the normalized specs of one revision -------------------------------- */

/* Each cluster a revision defines (valid, refused or held): its normalized JSON, by id. */
typedef struct spec_texts {
        strmap by_id;
        char **json; /* by by_id's index */
        size_t n;
} spec_texts;

static void spec_texts_release(spec_texts *t)
{
        for (size_t i = 0; i < t->n; i++)
                free(t->json[i]);
        free(t->json);
        strmap_release(&t->by_id);
}

static const char *spec_text(const spec_texts *t, const char *id)
{
        size_t i;
        return strmap_get(&t->by_id, id, &i) ? t->json[i] : NULL;
}

/* Replace every value under a secret-looking key, as the plan shows them. */
static void redact(json_t *j)
{
        const char *key;
        json_t *v;
        size_t i;
        if (json_is_object(j)) {
                json_object_foreach(j, key, v)
                {
                        if (plan_key_looks_secret(key))
                                json_object_set_new(j, key, json_string("(redacted)"));
                        else
                                redact(v);
                }
        } else if (json_is_array(j)) {
                json_array_foreach(j, i, v) redact(v);
        }
}

/*
 * Take rev in on its own (no priors, no approvals counted): the definitions,
 * and those it takes in (taken or held) as the records of an accepted spec.
 */
static int read_specs(const revdiff_input *in, const source_revision *rev, spec_texts *ret_texts,
                      state_cluster_list *ret_accepted)
{
        intake_input ii = {.rev = rev,
                           .mode = INTAKE_APPLY,
                           .caps = in->caps,
                           .target = in->target ? in->target : target_kind_default()->name,
                           .policy = in->policy};
        intake_result taken;
        int k = spec_intake(&ii, &taken);
        if (k < 0)
                return k;
        *ret_texts = (spec_texts){.by_id = STRMAP_INIT};
        ret_texts->json = xcalloc(taken.n + 1, sizeof(char *));
        if (ret_accepted)
                *ret_accepted =
                    (state_cluster_list){.items = xcalloc(taken.n + 1, sizeof(state_cluster *))};
        for (size_t i = 0; i < taken.n; i++) {
                const intake_cluster *ic = &taken.items[i];
                if (!ic->spec || strmap_get(&ret_texts->by_id, ic->id, NULL))
                        continue;
                json_t *j = spec_to_json(ic->spec);
                char *compact = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
                redact(j);
                (void)strmap_put(&ret_texts->by_id, ic->id, ret_texts->n);
                ret_texts->json[ret_texts->n++] = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
                json_decref(j);
                if (!ret_accepted || (ic->verdict != INTAKE_TAKEN && ic->verdict != INTAKE_HELD)) {
                        free(compact);
                        continue;
                }
                /* As the driver records an accepted spec that has converged. */
                state_cluster *sc = XNEW(state_cluster);
                sc->name = xstrdup(ic->id);
                sc->desired_json = compact;
                sc->desired_hash = spec_hash(ic->spec);
                sc->observed_hash = xstrdup(sc->desired_hash);
                sc->desired_commit = rev->commit_id[0] ? xstrdup(rev->commit_id) : NULL;
                sc->desired_replicas = ic->spec->replicas;
                sc->desired_version = xstrdup_null(ic->spec->version);
                sc->phase = xstrdup("Running");
                ret_accepted->items[ret_accepted->n++] = sc;
        }
        intake_result_release(&taken);
        return 0;
}

/* ---- the unified diff of two texts --------------------------------------- */

typedef struct text_lines {
        char **v;
        size_t n;
} text_lines;

static text_lines split_lines(const char *s)
{
        text_lines t = {0};
        if (!s)
                return t;
        size_t cap = 16;
        t.v = xcalloc(cap, sizeof(char *));
        while (*s) {
                size_t len = strcspn(s, "\n");
                if (t.n + 1 >= cap) {
                        cap *= 2;
                        t.v = xrealloc(t.v, cap * sizeof(char *));
                }
                t.v[t.n++] = xstrndup(s, len);
                s += len + (s[len] == '\n');
        }
        return t;
}

static void text_lines_release(text_lines *t)
{
        for (size_t i = 0; i < t->n; i++)
                free(t->v[i]);
        free(t->v);
}

static void line_add(revdiff_item *it, char *line)
{
        it->lines = xrealloc(it->lines, (it->n_lines + 1) * sizeof(char *));
        it->lines[it->n_lines++] = line;
}

/* One edit of the script: ' ' keep, '-' only in a, '+' only in b; ai, bi the lines. */
typedef struct edit {
        char op;
        size_t ai, bi;
} edit;

/* The edit script of a -> b, longest common subsequence first. */
static edit *edit_script(const text_lines *a, const text_lines *b, size_t *ret_n)
{
        size_t n = a->n, m = b->n;
        edit *e = xcalloc(n + m + 1, sizeof(*e));
        size_t k = 0;
        if ((n + 1) * (m + 1) > REVDIFF_MAX_CELLS) {
                for (size_t i = 0; i < n; i++)
                        e[k++] = (edit){'-', i, 0};
                for (size_t j = 0; j < m; j++)
                        e[k++] = (edit){'+', n, j};
                *ret_n = k;
                return e;
        }
        /* lcs[i][j]: the longest common subsequence of a[i..] and b[j..] */
        unsigned *lcs = xcalloc((n + 1) * (m + 1), sizeof(unsigned));
#define L(i, j) lcs[(i) * (m + 1) + (j)]
        for (size_t i = n; i-- > 0;)
                for (size_t j = m; j-- > 0;)
                        L(i, j) = streq(a->v[i], b->v[j]) ? L(i + 1, j + 1) + 1
                                                          : MAX(L(i + 1, j), L(i, j + 1));
        size_t i = 0, j = 0;
        while (i < n || j < m) {
                if (i < n && j < m && streq(a->v[i], b->v[j]))
                        e[k++] = (edit){' ', i++, j++};
                else if (i < n && (j == m || L(i + 1, j) >= L(i, j + 1)))
                        e[k++] = (edit){'-', i++, j};
                else
                        e[k++] = (edit){'+', i, j++};
        }
#undef L
        free(lcs);
        *ret_n = k;
        return e;
}

/* The hunks of the script: changes with REVDIFF_CONTEXT lines around, "@@ -a,n +b,m @@" each. */
static void unified(revdiff_item *it, const text_lines *a, const text_lines *b)
{
        size_t n = 0;
        _cleanup_free_ edit *e = edit_script(a, b, &n);
        size_t i = 0;
        while (i < n) {
                if (e[i].op == ' ') {
                        i++;
                        continue;
                }
                /* A hunk: from CONTEXT lines before this change to CONTEXT after the last near it. */
                size_t start = i > REVDIFF_CONTEXT ? i - REVDIFF_CONTEXT : 0, end = i;
                for (size_t j = i; j < n; j++) {
                        if (e[j].op != ' ')
                                end = j;
                        else if (j - end > 2 * REVDIFF_CONTEXT)
                                break;
                }
                end = MIN(n, end + 1 + REVDIFF_CONTEXT);
                size_t na = 0, nb = 0;
                for (size_t j = start; j < end; j++) {
                        na += e[j].op != '+';
                        nb += e[j].op != '-';
                }
                size_t a0 = e[start].ai, b0 = e[start].bi;
                line_add(it, xasprintf("@@ -%zu,%zu +%zu,%zu @@", na ? a0 + 1 : a0, na,
                                       nb ? b0 + 1 : b0, nb));
                for (size_t j = start; j < end; j++) {
                        /* an edit names a line of the side it is from: that side has lines */
                        const text_lines *side = e[j].op == '+' ? b : a;
                        assert(side->v);
                        const char *text = side->v[e[j].op == '+' ? e[j].bi : e[j].ai];
                        line_add(it, xasprintf("%c%s", e[j].op, text));
                }
                i = end;
        }
}

static void diff_texts(revdiff_item *it, const char *from, const char *to)
{
        text_lines a = split_lines(from), b = split_lines(to);
        unified(it, &a, &b);
        text_lines_release(&a);
        text_lines_release(&b);
}

/* ---- the diff ------------------------------------------------------------ */

static revdiff_item *item_add(revdiff *d, const char *name, revdiff_kind kind)
{
        d->items = xrealloc(d->items, (d->n + 1) * sizeof(*d->items));
        revdiff_item *it = &d->items[d->n++];
        *it = (revdiff_item){.name = xstrdup(name), .kind = kind, .from_diags = DIAG_LIST_INIT};
        return it;
}

static revdiff_kind kind_of(const plan_item *pi, const char *from, const char *to)
{
        if (pi && pi->action == PLAN_REJECTED)
                return REVDIFF_REFUSED;
        if (!to)
                return from ? REVDIFF_REMOVED : REVDIFF_REFUSED;
        if (!from)
                return REVDIFF_ADDED;
        return streq(from, to) ? REVDIFF_UNCHANGED : REVDIFF_CHANGED;
}

static int cmp_item(const void *x, const void *y)
{
        return strcmp(((const revdiff_item *)x)->name, ((const revdiff_item *)y)->name);
}

static void count(revdiff *d)
{
        for (size_t i = 0; i < d->n; i++) {
                int *c[] = {[REVDIFF_ADDED] = &d->n_added,
                            [REVDIFF_REMOVED] = &d->n_removed,
                            [REVDIFF_CHANGED] = &d->n_changed,
                            [REVDIFF_REFUSED] = &d->n_refused,
                            [REVDIFF_UNCHANGED] = &d->n_unchanged};
                (*c[d->items[i].kind])++;
        }
}

/* `from` planned alone: its refusals, attributed to the clusters they concern. */
static int from_refusals(const revdiff_input *in, plan **ret)
{
        plan_input pin = {
            .rev = in->from, .caps = in->caps, .target = in->target, .policy = in->policy};
        return plan_compute(&pin, ret);
}

static void take_from_diags(revdiff *d, const plan *from)
{
        for (size_t i = 0; i < d->n; i++)
                for (size_t j = 0; j < from->n; j++)
                        if (from->items[j].action == PLAN_REJECTED &&
                            streq(from->items[j].name, d->items[i].name))
                                for (size_t k = 0; k < from->items[j].diags.n; k++) {
                                        const diag *g = &from->items[j].diags.items[k];
                                        diag_add(&d->items[i].from_diags, g->severity, g->file,
                                                 g->line, g->col, "%s", g->message);
                                }
        for (size_t k = 0; k < from->diags.n; k++) {
                const diag *g = &from->diags.items[k];
                diag_add(&d->from_diags, g->severity, g->file, g->line, g->col, "%s", g->message);
        }
}

int revdiff_compute(const revdiff_input *in, revdiff **ret)
{
        if (!in || !in->from || !in->to || !ret)
                return -EINVAL;
        spec_texts from_texts, to_texts;
        state_cluster_list accepted;
        int k = read_specs(in, in->from, &from_texts, &accepted);
        if (k < 0)
                return k;
        k = read_specs(in, in->to, &to_texts, NULL);
        if (k < 0) {
                spec_texts_release(&from_texts);
                state_cluster_list_release(&accepted);
                return k;
        }
        revdiff *d = XNEW(revdiff);
        d->from_diags = (diag_list)DIAG_LIST_INIT;
        plan_input pin = {.rev = in->to,
                          .applied = &accepted,
                          .prune = in->prune,
                          .caps = in->caps,
                          .target = in->target,
                          .policy = in->policy,
                          .src = in->src};
        plan *from_plan = NULL;
        k = plan_compute(&pin, &d->to_plan);
        if (k >= 0)
                k = from_refusals(in, &from_plan);
        if (k < 0)
                goto out;

        /* Every cluster the plan of `to` names, then those only `from` refused. */
        for (size_t i = 0; i < d->to_plan->n; i++) {
                const plan_item *pi = &d->to_plan->items[i];
                const char *a = spec_text(&from_texts, pi->name);
                const char *b = spec_text(&to_texts, pi->name);
                revdiff_item *it = item_add(d, pi->name, kind_of(pi, a, b));
                it->plan = pi;
                if (b || a)
                        diff_texts(it, a, b);
        }
        for (size_t j = 0; j < from_plan->n; j++) {
                const plan_item *pi = &from_plan->items[j];
                bool known = false;
                for (size_t i = 0; i < d->n && !known; i++)
                        known = streq(d->items[i].name, pi->name);
                if (!known && pi->action == PLAN_REJECTED) {
                        /* Refused by `from`, gone from `to`: removed, nothing had been taken in. */
                        revdiff_item *it = item_add(d, pi->name, REVDIFF_REMOVED);
                        diff_texts(it, spec_text(&from_texts, pi->name), NULL);
                }
        }
        if (d->n > 1)
                qsort(d->items, d->n, sizeof(*d->items), cmp_item);
        take_from_diags(d, from_plan);
        count(d);
out:
        plan_free(from_plan);
        spec_texts_release(&from_texts);
        spec_texts_release(&to_texts);
        state_cluster_list_release(&accepted);
        if (k < 0) {
                revdiff_free(d);
                return k;
        }
        *ret = d;
        return 0;
}

/* ---- printing ------------------------------------------------------------ */

#define C_RESET   "\033[0m"
#define C_GREEN   "\033[32m"
#define C_YELLOW  "\033[33m"
#define C_RED     "\033[31m"
#define C_BOLDRED "\033[1;31m"
#define C_DIM     "\033[2m"
#define C_CYAN    "\033[36m"

/* "abcdef123456 (refs/heads/main)", or the directory. */
static char *rev_label(const source_revision *r)
{
        if (!r->commit_id[0])
                return xstrdup("the directory");
        return r->ref ? xasprintf("%.12s (%s)", r->commit_id, r->ref)
                      : xasprintf("%.12s", r->commit_id);
}

/* A value for people: strings bare, the rest as compact JSON; absent is "(none)". */
static char *value_text(const json_t *v, bool redacted)
{
        if (!v)
                return xstrdup("(none)");
        if (redacted)
                return xstrdup("(redacted)");
        if (json_is_string(v))
                return xstrdup(json_string_value(v));
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        return s ? s : xstrdup("?");
}

static void print_diags(const diag_list *l, const char *prefix, FILE *out)
{
        for (size_t i = 0; i < l->n; i++) {
                _cleanup_free_ char *line = diag_format(&l->items[i]);
                fprintf(out, "    %s%s\n", prefix, line);
        }
}

static void print_lines(const revdiff_item *it, bool color, FILE *out)
{
        for (size_t i = 0; i < it->n_lines; i++) {
                const char *l = it->lines[i];
                const char *on = !color        ? ""
                                 : l[0] == '+' ? C_GREEN
                                 : l[0] == '-' ? C_RED
                                 : l[0] == '@' ? C_CYAN
                                               : "";
                /* spec values come from the commit: escaped (util/escape.h) */
                _cleanup_free_ char *text = str_escape(l);
                fprintf(out, "    %s%s%s\n", on, text, *on ? C_RESET : "");
        }
}

static void print_item(const revdiff_item *it, const revdiff_print_opts *o, FILE *out)
{
        static const char marks[] = {[REVDIFF_ADDED] = '+',
                                     [REVDIFF_REMOVED] = '-',
                                     [REVDIFF_CHANGED] = '~',
                                     [REVDIFF_REFUSED] = '!',
                                     [REVDIFF_UNCHANGED] = '='};
        static const char *const colors[] = {
            [REVDIFF_ADDED] = C_GREEN,    [REVDIFF_REMOVED] = C_RED,
            [REVDIFF_CHANGED] = C_YELLOW, [REVDIFF_REFUSED] = C_BOLDRED,
            [REVDIFF_UNCHANGED] = C_DIM,
        };
        const plan_item *pi = it->plan;
        _cleanup_free_ char *name = str_escape(it->name);
        _cleanup_free_ char *file = pi ? str_escape(pi->file) : NULL;
        fprintf(out, "%s%c %s %s%s", o->color ? colors[it->kind] : "", marks[it->kind],
                revdiff_kind_name(it->kind), name, o->color ? C_RESET : "");
        if (file && it->kind != REVDIFF_REMOVED)
                fprintf(out, "  (%s:%d)", file, pi->line);
        fputc('\n', out);
        for (size_t i = 0; pi && i < pi->n_changes; i++) {
                const plan_change *c = &pi->changes[i];
                _cleanup_free_ char *from = value_text(c->from, c->redacted);
                _cleanup_free_ char *to = value_text(c->to, c->redacted);
                _cleanup_free_ char *path = str_escape(c->path);
                fprintf(out, "    %s: %s → %s\n", path, from, to);
        }
        if (pi && it->kind == REVDIFF_REFUSED)
                print_diags(&pi->diags, "refused: ", out);
        if (it->from_diags.n > 0 && it->kind != REVDIFF_REFUSED)
                print_diags(&it->from_diags, "refused before: ", out);
        for (size_t i = 0; pi && i < pi->n_notes; i++) {
                _cleanup_free_ char *note = str_escape(pi->notes[i]);
                fprintf(out, "    %s\n", note);
        }
        if (o->steps && pi && pi->n_steps > 0 && it->kind != REVDIFF_REFUSED) {
                fprintf(out, "    Steps:\n");
                for (size_t i = 0; i < pi->n_steps; i++)
                        fprintf(out, "      %zu. %s\n", i + 1, pi->steps[i]);
        }
        if (o->lines)
                print_lines(it, o->color, out);
}

void revdiff_print_text(const revdiff *d, const source_revision *from, const source_revision *to,
                        const revdiff_print_opts *o, FILE *out)
{
        _cleanup_free_ char *a = rev_label(from), *b = rev_label(to);
        _cleanup_free_ char *repo = str_escape(to->repository ? to->repository : "?");
        fprintf(out, "Changes from %s to %s of %s:\n", a, b, repo);
        bool listed = false;
        for (size_t i = 0; i < d->n; i++) {
                const revdiff_item *it = &d->items[i];
                if (it->kind == REVDIFF_UNCHANGED && !o->verbose)
                        continue;
                if (!listed)
                        fputc('\n', out);
                print_item(it, o, out);
                listed = true;
        }
        if (d->to_plan->diags.n > 0) {
                fputc('\n', out);
                diag_print(&d->to_plan->diags, out);
                listed = true;
        }
        if (listed)
                fputc('\n', out);
        else
                fprintf(out, "No changes: the two revisions define the same clusters.\n");
        fprintf(out, "Diff: %d added, %d changed, %d removed, %d refused.\n", d->n_added,
                d->n_changed, d->n_removed, d->n_refused);
}

static json_t *rev_json(const source_revision *r)
{
        return json_pack("{s:o,s:o,s:o}", "repository",
                         r->repository ? json_string(r->repository) : json_null(), "ref",
                         r->ref ? json_string(r->ref) : json_null(), "commit",
                         r->commit_id[0] ? json_string(r->commit_id) : json_null());
}

/* The plan's JSON of the cluster named name, a copy, or a bare object. */
static json_t *plan_cluster_json(json_t *clusters, const char *name)
{
        size_t i;
        json_t *c;
        json_array_foreach(clusters, i, c)
        {
                if (streq(json_string_value(json_object_get(c, "name")), name)) {
                        json_t *copy = json_deep_copy(c);
                        json_object_del(copy, "action");
                        return copy;
                }
        }
        return json_pack("{s:s,s:n,s:i,s:[],s:[],s:[],s:[]}", "name", name, "file", "line", 0,
                         "changes", "steps", "notes", "diagnostics");
}

json_t *revdiff_to_json(const revdiff *d, const source_revision *from, const source_revision *to)
{
        json_t *p = plan_to_json(d->to_plan, to);
        json_t *plan_clusters = json_object_get(p, "clusters");
        json_t *clusters = json_array();
        for (size_t i = 0; i < d->n; i++) {
                const revdiff_item *it = &d->items[i];
                json_t *c = plan_cluster_json(plan_clusters, it->name);
                json_object_set_new(c, "change", json_string(revdiff_kind_name(it->kind)));
                json_t *lines = json_array();
                for (size_t l = 0; l < it->n_lines; l++)
                        json_array_append_new(lines, json_string(it->lines[l]));
                json_object_set_new(c, "diff", lines);
                json_t *fd = json_array();
                for (size_t g = 0; g < it->from_diags.n; g++) {
                        _cleanup_free_ char *text = diag_format(&it->from_diags.items[g]);
                        json_array_append_new(fd, json_string(text));
                }
                json_object_set_new(c, "fromDiagnostics", fd);
                json_array_append_new(clusters, c);
        }
        json_t *summary = json_pack("{s:i,s:i,s:i,s:i,s:i,s:b}", "added", d->n_added, "changed",
                                    d->n_changed, "removed", d->n_removed, "refused", d->n_refused,
                                    "unchanged", d->n_unchanged, "changes", revdiff_has_changes(d));
        json_t *out = json_pack("{s:o,s:o,s:o,s:O,s:o}", "from", rev_json(from), "to", rev_json(to),
                                "clusters", clusters, "diagnostics",
                                json_object_get(p, "diagnostics"), "summary", summary);
        json_decref(p);
        return out;
}
