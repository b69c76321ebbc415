/*
 * The YAML loader and emitter (see api/yaml.h).
 *
 * Loading drives libyaml's event parser and builds a tree of ynode with
 * 1-based positions. A collection is attached to its parent only when its
 * end event arrives, so on any error the open frames and the finished
 * documents are disjoint trees that are simply freed. Aliases are resolved
 * by copying the anchored subtree; the copy counts every node and scalar
 * byte against the limits as it goes and checks the nesting depth of the
 * copy, so a "billion laughs" file stops after at most max_nodes copies.
 * The copied top node takes the alias position; nodes inside it keep the
 * position where they were written. A file may expand to at most
 * max_nodes nodes in total (over all its documents) and to at most 16
 * times max_file_bytes bytes of scalars. The files of one revision share
 * a yaml_budget (nodes, aliases and bytes of text, counted where the
 * limits are): many files each within its own limits stop once they cost
 * too much together.
 *
 * Merge keys (YAML 1.1 `<<`, common in hand-written manifests) are
 * supported: the value must be a mapping or a sequence of mappings; their
 * entries are copied into the enclosing mapping at the place of the `<<`
 * key, explicit keys win over merged ones and earlier mappings in a merge
 * sequence win over later ones. Only a plain `<<` is a merge key (a quoted
 * "<<" is an ordinary string). A mapping with two `<<` keys is a duplicate
 * key error like any other.
 *
 * Errors in one document that do not stop libyaml (duplicate keys,
 * non-scalar keys, unknown aliases, bad merge values) are all reported and
 * that document is dropped; the other documents are still returned.
 * Syntax errors and limit violations stop the parse.
 *
 * Typing follows the YAML 1.2 core schema; the explicit tags !!str, !!int,
 * !!float, !!bool and !!null are honoured, other tags are ignored. JSON has
 * no infinity or NaN, so ynode_to_json keeps ".inf" and ".nan" as their
 * text (ynode_type_name still says "number").
 *
 * Emitting goes through libyaml's emitter as well, with its scalar
 * analysis deciding the syntax; we only force double quotes where a plain
 * scalar would read back as null, a boolean or a number, and for the YAML
 * 1.1 booleans (yes, no, on, off, ...) and "<<" that other tools misread.
 * Strings with line breaks ask for literal block style.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "api/yaml.h"
#include "util/xalloc.h"

const yaml_limits yaml_default_limits = {
    .max_file_bytes = 4u << 20,
    .max_documents = 1000,
    .max_depth = 64,
    .max_nodes = 1000000,
};

const yaml_budget yaml_revision_budget = {
    .max_nodes = 20000000,
    .max_aliases = 1000000,
    .max_bytes = (size_t)1 << 30,
};

const yaml_limits yaml_config_limits = {
    .max_file_bytes = 4u << 20,
    .max_documents = 16,
    .max_depth = 64,
    .max_nodes = 100000,
};

#define TAG_PREFIX "tag:yaml.org,2002:"

/* ------------------------------------------------------------------ nodes */

static ynode *ynode_new(ynode_kind kind, int line, int col, const char *tag)
{
        ynode *n = XNEW(ynode);
        n->kind = kind;
        n->line = line;
        n->col = col;
        n->tag = xstrdup_null(tag);
        return n;
}

static void ynode_free(ynode *n)
{
        if (!n)
                return;
        for (size_t i = 0; i < n->n; i++) {
                if (n->keys)
                        ynode_free(n->keys[i]);
                ynode_free(n->values[i]);
        }
        free(n->keys);
        free(n->values);
        free(n->tag);
        free(n->str);
        free(n);
}

/* Append a value (and for mappings a key) to a collection. */
static void ynode_push(ynode *coll, ynode *key, ynode *value, size_t *alloc)
{
        size_t a = *alloc;
        coll->values = xgrow(coll->values, &a, coll->n + 1, sizeof(ynode *));
        if (coll->kind == YNODE_MAP) {
                /* keys grows in step with values: same count, same capacity. */
                if (a != *alloc || !coll->keys)
                        coll->keys = xrealloc(coll->keys, a * sizeof(ynode *));
                coll->keys[coll->n] = key;
        }
        coll->values[coll->n++] = value;
        *alloc = a;
}

/* --------------------------------------------- a small string hash map */

typedef struct strmap_entry {
        const char *s; /* NULL: empty slot */
        size_t len;
        size_t val;
} strmap_entry;

typedef struct strmap {
        strmap_entry *e;
        size_t cap; /* power of two */
        size_t n;
} strmap;

static size_t str_hash(const char *s, size_t len)
{
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char)s[i];
                h *= 1099511628211ULL;
        }
        return (size_t)(h ^ (h >> 29));
}

static strmap_entry *strmap_slot(const strmap *m, const char *s, size_t len)
{
        size_t i = str_hash(s, len) & (m->cap - 1);
        for (;;) {
                strmap_entry *e = &m->e[i];
                if (!e->s || (e->len == len && memcmp(e->s, s, len) == 0))
                        return e;
                i = (i + 1) & (m->cap - 1);
        }
}

static size_t *strmap_find(const strmap *m, const char *s, size_t len)
{
        if (m->cap == 0)
                return NULL;
        strmap_entry *e = strmap_slot(m, s, len);
        return e->s ? &e->val : NULL;
}

/* Insert or overwrite. The string must stay valid while the map lives. */
static void strmap_put(strmap *m, const char *s, size_t len, size_t val)
{
        if ((m->n + 1) * 2 > m->cap) {
                strmap old = *m;
                m->cap = old.cap ? old.cap * 2 : 16;
                m->e = xcalloc(m->cap, sizeof(strmap_entry));
                m->n = 0;
                for (size_t i = 0; i < old.cap; i++)
                        if (old.e[i].s)
                                *strmap_slot(m, old.e[i].s, old.e[i].len) = old.e[i], m->n++;
                free(old.e);
        }
        strmap_entry *e = strmap_slot(m, s, len);
        if (!e->s) {
                e->s = s;
                e->len = len;
                m->n++;
        }
        e->val = val;
}

static void strmap_release(strmap *m)
{
        free(m->e);
        *m = (strmap){0};
}

/* ------------------------------------------------------------ the loader */

typedef struct frame {
        ynode *node; /* the collection being built (not yet attached) */
        size_t alloc;
        char *anchor;     /* registered when the collection ends */
        bool want_value;  /* mapping: a key was added, its value is next */
        bool skip_value;  /* mapping: the pending key was a merge key */
        strmap keys;      /* mapping: key -> index, for duplicates */
        ynode *merge;     /* mapping: the value of `<<` */
        size_t merge_pos; /* where the merged entries go */
        int merge_line;
} frame;

typedef struct anchor {
        char *name;
        ynode *node;
} anchor;

typedef enum copy_err {
        COPY_OK,
        COPY_NODES,
        COPY_BYTES,
        COPY_DEPTH,
        COPY_BUDGET_NODES,
        COPY_BUDGET_ALIASES,
        COPY_BUDGET_BYTES,
} copy_err;

typedef struct yctx {
        const char *file;
        const char *buf;
        size_t len;
        yaml_limits lim;
        size_t max_bytes;    /* scalar bytes after expansion */
        yaml_budget *budget; /* the revision's, or NULL */
        diag_list *diags;

        size_t nodes; /* in this buffer, after expansion */
        size_t bytes;
        size_t doc_nodes_start;
        size_t ndocs;
        bool doc_error; /* a recoverable error in the current document */
        bool any_error;
        bool aliases_seen; /* to tell an alias expansion from a merely large file */
        bool fatal;

        frame *stack;
        size_t depth;
        size_t stack_alloc;
        ynode *root;
        bool in_doc;
        int doc_line;

        anchor *anchors;
        size_t n_anchors;
        size_t anchors_alloc;
        strmap anchor_index;

        /* Nodes dropped from the tree while an anchor may still point into them. */
        ynode **graveyard;
        size_t n_graveyard;
        size_t graveyard_alloc;
} yctx;

static void bury(yctx *c, ynode *n)
{
        if (!n)
                return;
        c->graveyard =
            xgrow(c->graveyard, &c->graveyard_alloc, c->n_graveyard + 1, sizeof(ynode *));
        c->graveyard[c->n_graveyard++] = n;
}

/* Free everything that belongs to the current document (not yet handed out). */
static void doc_reset(yctx *c)
{
        for (size_t i = 0; i < c->depth; i++) {
                ynode_free(c->stack[i].node);
                free(c->stack[i].anchor);
                strmap_release(&c->stack[i].keys);
                ynode_free(c->stack[i].merge);
        }
        c->depth = 0;
        ynode_free(c->root);
        c->root = NULL;
        for (size_t i = 0; i < c->n_anchors; i++)
                free(c->anchors[i].name);
        c->n_anchors = 0;
        strmap_release(&c->anchor_index);
        for (size_t i = 0; i < c->n_graveyard; i++)
                ynode_free(c->graveyard[i]);
        c->n_graveyard = 0;
        c->doc_error = false;
        c->in_doc = false;
}

static void ctx_release(yctx *c)
{
        doc_reset(c);
        free(c->stack);
        free(c->anchors);
        free(c->graveyard);
}

static void add_error(yctx *c, int line, int col, const char *fmt, ...) _printf_(4, 5);
static void add_error(yctx *c, int line, int col, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        diag_add(c->diags, DIAG_ERROR, c->file, line, col, "%s", msg);
        free(msg);
        c->any_error = true;
}

/* Position (1-based line, column in characters) of a byte offset in the buffer. */
static void offset_position(const char *buf, size_t len, size_t off, int *ret_line, int *ret_col)
{
        int line = 1, col = 1;
        if (off > len)
                off = len;
        for (size_t i = 0; i < off; i++) {
                unsigned char ch = (unsigned char)buf[i];
                if (ch == '\n') {
                        line++;
                        col = 1;
                } else if ((ch & 0xC0) != 0x80) {
                        col++;
                }
        }
        *ret_line = line;
        *ret_col = col;
}

static void limit_error(yctx *c, copy_err e, int line, int col)
{
        switch (e) {
        case COPY_NODES:
                if (!c->aliases_seen)
                        add_error(c, line, col, "file has more than %zu nodes (node limit)",
                                  c->lim.max_nodes);
                else if (c->doc_nodes_start > 0)
                        add_error(c, line, col,
                                  "the documents of this file expand to more than %zu nodes in "
                                  "total (alias expansion limit)",
                                  c->lim.max_nodes);
                else
                        add_error(c, line, col,
                                  "document expands to more than %zu nodes (alias expansion "
                                  "limit)",
                                  c->lim.max_nodes);
                break;
        case COPY_BYTES:
                add_error(c, line, col,
                          "document expands to more than %zu bytes of text (alias expansion "
                          "limit)",
                          c->max_bytes);
                break;
        case COPY_DEPTH:
                add_error(c, line, col, "nesting deeper than %zu levels (depth limit)",
                          c->lim.max_depth);
                break;
        case COPY_BUDGET_NODES:
                add_error(c, line, col,
                          "the YAML files of this revision hold more than %zu nodes in all, "
                          "after alias expansion (revision budget)",
                          c->budget->max_nodes);
                break;
        case COPY_BUDGET_ALIASES:
                add_error(c, line, col,
                          "the YAML files of this revision use more than %zu aliases in all "
                          "(revision budget)",
                          c->budget->max_aliases);
                break;
        case COPY_BUDGET_BYTES:
                add_error(c, line, col,
                          "the YAML files of this revision hold more than %zu bytes of text in "
                          "all, after alias expansion (revision budget)",
                          c->budget->max_bytes);
                break;
        case COPY_OK:
                break;
        }
        if (e >= COPY_BUDGET_NODES)
                c->budget->spent = true;
        c->fatal = true;
}

/* Count one new node with `bytes` bytes of text against the limits and the budget. */
static copy_err count_node(yctx *c, size_t bytes)
{
        if (c->nodes >= c->lim.max_nodes)
                return COPY_NODES;
        if (bytes > c->max_bytes - c->bytes)
                return COPY_BYTES;
        yaml_budget *b = c->budget;
        if (b && b->nodes >= b->max_nodes)
                return COPY_BUDGET_NODES;
        if (b && bytes > b->max_bytes - b->bytes)
                return COPY_BUDGET_BYTES;
        c->nodes++;
        c->bytes += bytes;
        if (b) {
                b->nodes++;
                b->bytes += bytes;
        }
        return COPY_OK;
}

/* Deep copy; `depth` is the nesting depth the copy gets if it is a collection. */
static copy_err ynode_copy(yctx *c, const ynode *src, size_t depth, ynode **ret)
{
        copy_err e = count_node(c, src->kind == YNODE_SCALAR ? src->len : 0);
        if (e != COPY_OK)
                return e;
        if (src->kind != YNODE_SCALAR && depth > c->lim.max_depth)
                return COPY_DEPTH;
        ynode *n = ynode_new(src->kind, src->line, src->col, src->tag);
        if (src->kind == YNODE_SCALAR) {
                n->str = xmalloc(src->len + 1);
                memcpy(n->str, src->str, src->len + 1);
                n->len = src->len;
                n->quoted = src->quoted;
                *ret = n;
                return COPY_OK;
        }
        if (src->n > 0) {
                n->values = xcalloc(src->n, sizeof(ynode *));
                if (src->kind == YNODE_MAP)
                        n->keys = xcalloc(src->n, sizeof(ynode *));
        }
        for (size_t i = 0; i < src->n; i++) {
                /* n->n counts filled slots so that a partial copy frees cleanly. */
                ynode *k = NULL, *v = NULL;
                if (src->kind == YNODE_MAP && src->keys[i]) {
                        e = ynode_copy(c, src->keys[i], depth + 1, &k);
                        if (e != COPY_OK)
                                break;
                }
                if (src->values[i]) {
                        e = ynode_copy(c, src->values[i], depth + 1, &v);
                        if (e != COPY_OK) {
                                ynode_free(k);
                                break;
                        }
                }
                if (n->keys)
                        n->keys[i] = k;
                n->values[i] = v;
                n->n++;
        }
        if (e != COPY_OK) {
                ynode_free(n);
                return e;
        }
        *ret = n;
        return COPY_OK;
}

static void register_anchor(yctx *c, const char *name, ynode *node)
{
        if (!name)
                return;
        c->anchors = xgrow(c->anchors, &c->anchors_alloc, c->n_anchors + 1, sizeof(anchor));
        anchor *a = &c->anchors[c->n_anchors];
        a->name = xstrdup(name);
        a->node = node;
        strmap_put(&c->anchor_index, a->name, strlen(a->name), c->n_anchors);
        c->n_anchors++;
}

static bool is_merge_key(const ynode *k)
{
        return k->kind == YNODE_SCALAR && !k->quoted && k->len == 2 && streq(k->str, "<<") &&
               (!k->tag || streq(k->tag, TAG_PREFIX "merge"));
}

static const char *type_with_article(const ynode *n)
{
        return n->kind == YNODE_MAP                   ? "a mapping"
               : n->kind == YNODE_SEQ                 ? "a sequence"
               : streq(ynode_type_name(n), "integer") ? "an integer"
               : streq(ynode_type_name(n), "number")  ? "a number"
               : streq(ynode_type_name(n), "boolean") ? "a boolean"
               : streq(ynode_type_name(n), "null")    ? "null"
                                                      : "a string";
}

/* The byte at a 1-based line and column (in characters), or 0 past the end. */
static char char_at(const char *buf, size_t len, int line, int col)
{
        size_t i = 0;
        for (int l = 1; l < line && i < len; i++)
                if (buf[i] == '\n')
                        l++;
        for (int k = 1; i < len; i++) {
                if (((unsigned char)buf[i] & 0xC0) == 0x80)
                        continue;
                if (k++ == col)
                        return buf[i];
        }
        return 0;
}

/* A key for a message: control characters escaped, long keys shortened. */
static char *key_for_message(const ynode *k)
{
        strbuf sb = STRBUF_INIT;
        size_t max = 60;
        for (size_t i = 0; i < k->len && i < max; i++) {
                unsigned char ch = (unsigned char)k->str[i];
                if (ch < 0x20 || ch == 0x7F)
                        sb_printf(&sb, "\\x%02X", ch);
                else if (ch == '"' || ch == '\\')
                        sb_printf(&sb, "\\%c", ch);
                else
                        sb_appendc(&sb, (char)ch);
        }
        if (k->len > max) {
                /* Do not cut a UTF-8 sequence in half. */
                while (sb.len > 0 && ((unsigned char)sb.buf[sb.len - 1] & 0xC0) == 0x80)
                        sb.len--;
                if (sb.len > 0 && (unsigned char)sb.buf[sb.len - 1] >= 0xC0)
                        sb.len--;
                sb.buf[sb.len] = '\0';
                sb_append(&sb, "...");
        }
        return sb_detach(&sb);
}

/* Add a finished node to the open collection (or make it the root). */
static void attach(yctx *c, ynode *node)
{
        if (c->depth == 0) {
                ynode_free(c->root); /* cannot happen: a document has one root */
                c->root = node;
                return;
        }
        frame *f = &c->stack[c->depth - 1];
        ynode *coll = f->node;
        if (coll->kind == YNODE_SEQ) {
                ynode_push(coll, NULL, node, &f->alloc);
                return;
        }
        if (f->want_value) {
                f->want_value = false;
                if (f->skip_value) {
                        f->skip_value = false;
                        bool ok = node->kind == YNODE_MAP;
                        if (node->kind == YNODE_SEQ) {
                                ok = true;
                                for (size_t i = 0; i < node->n; i++)
                                        ok = ok && node->values[i]->kind == YNODE_MAP;
                        }
                        if (!ok) {
                                add_error(c, node->line, node->col,
                                          "the value of a merge key \"<<\" must be a mapping or "
                                          "a sequence of mappings, not %s",
                                          type_with_article(node));
                                c->doc_error = true;
                                bury(c, node);
                                return;
                        }
                        f->merge = node;
                        f->merge_pos = coll->n;
                        return;
                }
                coll->values[coll->n - 1] = node;
                return;
        }
        f->want_value = true;
        if (node->kind != YNODE_SCALAR) {
                add_error(c, node->line, node->col,
                          "mapping keys must be scalars, not %s (a complex key)",
                          type_with_article(node));
                c->doc_error = true;
                ynode_push(coll, node, NULL, &f->alloc);
                return;
        }
        if (is_merge_key(node)) {
                if (f->merge_line > 0) {
                        /* The document is dropped; keep the key as an ordinary one. */
                        add_error(c, node->line, node->col,
                                  "duplicate key \"<<\" (first defined at line %d)", f->merge_line);
                        c->doc_error = true;
                        ynode_push(coll, node, NULL, &f->alloc);
                        return;
                }
                f->merge_line = node->line;
                f->skip_value = true;
                bury(c, node);
                return;
        }
        size_t *prev = strmap_find(&f->keys, node->str, node->len);
        if (prev) {
                char *shown = key_for_message(node);
                add_error(c, node->line, node->col,
                          "duplicate key \"%s\" (first defined at line %d)", shown,
                          coll->keys[*prev]->line);
                free(shown);
                c->doc_error = true;
        } else {
                strmap_put(&f->keys, node->str, node->len, coll->n);
        }
        ynode_push(coll, node, NULL, &f->alloc);
}

/* Copy the entries of the merge value into the mapping; explicit keys win. */
static void apply_merge(yctx *c, frame *f)
{
        ynode *coll = f->node;
        ynode *m = f->merge;
        size_t nsrc = m->kind == YNODE_MAP ? 1 : m->n;
        ynode **keys = NULL, **values = NULL;
        size_t n = 0, alloc = 0;
        strmap merged = {0};
        copy_err e = COPY_OK;

        for (size_t s = 0; s < nsrc && e == COPY_OK; s++) {
                const ynode *src = m->kind == YNODE_MAP ? m : m->values[s];
                for (size_t i = 0; i < src->n && e == COPY_OK; i++) {
                        const ynode *k = src->keys[i];
                        if (!k || k->kind != YNODE_SCALAR || !src->values[i])
                                continue;
                        if (strmap_find(&f->keys, k->str, k->len) ||
                            strmap_find(&merged, k->str, k->len))
                                continue;
                        ynode *kc = NULL, *vc = NULL;
                        e = ynode_copy(c, k, c->depth + 1, &kc);
                        if (e == COPY_OK) {
                                e = ynode_copy(c, src->values[i], c->depth + 1, &vc);
                                if (e != COPY_OK)
                                        ynode_free(kc);
                        }
                        if (e != COPY_OK)
                                break;
                        size_t a = alloc;
                        values = xgrow(values, &a, n + 1, sizeof(ynode *));
                        keys = xrealloc(keys, a * sizeof(ynode *));
                        alloc = a;
                        keys[n] = kc;
                        values[n] = vc;
                        strmap_put(&merged, kc->str, kc->len, n);
                        n++;
                }
        }
        strmap_release(&merged);
        if (e != COPY_OK) {
                for (size_t i = 0; i < n; i++) {
                        ynode_free(keys[i]);
                        ynode_free(values[i]);
                }
                free(keys);
                free(values);
                limit_error(c, e, f->merge->line, f->merge->col);
                return;
        }
        if (n > 0) {
                size_t total = coll->n + n;
                ynode **nk = xcalloc(total, sizeof(ynode *));
                ynode **nv = xcalloc(total, sizeof(ynode *));
                size_t p = f->merge_pos, rest = coll->n - p;
                if (p > 0) {
                        memcpy(nk, coll->keys, p * sizeof(ynode *));
                        memcpy(nv, coll->values, p * sizeof(ynode *));
                }
                memcpy(nk + p, keys, n * sizeof(ynode *));
                memcpy(nv + p, values, n * sizeof(ynode *));
                if (rest > 0) {
                        memcpy(nk + p + n, coll->keys + p, rest * sizeof(ynode *));
                        memcpy(nv + p + n, coll->values + p, rest * sizeof(ynode *));
                }
                free(coll->keys);
                free(coll->values);
                coll->keys = nk;
                coll->values = nv;
                coll->n = total;
                f->alloc = total;
        }
        free(keys);
        free(values);
}

static void mark_of(const yaml_mark_t *m, int *ret_line, int *ret_col)
{
        *ret_line = (int)MIN(m->line, (size_t)INT32_MAX - 1) + 1;
        *ret_col = (int)MIN(m->column, (size_t)INT32_MAX - 1) + 1;
}

static void parser_error(yctx *c, const yaml_parser_t *p)
{
        int line, col;
        switch (p->error) {
        case YAML_MEMORY_ERROR:
                add_error(c, 0, 0, "out of memory while parsing YAML");
                break;
        case YAML_READER_ERROR:
                offset_position(c->buf, c->len, p->problem_offset, &line, &col);
                if (p->problem_value != -1)
                        add_error(c, line, col, "%s (byte 0x%02X)", p->problem,
                                  (unsigned)p->problem_value & 0xFFu);
                else
                        add_error(c, line, col, "%s", p->problem);
                break;
        default:
                mark_of(&p->problem_mark, &line, &col);
                const char *hint = char_at(c->buf, c->len, line, col) == '\t'
                                       ? "; YAML does not allow tabs for indentation"
                                       : "";
                if (p->context)
                        add_error(c, line, col, "%s (%s)%s", p->problem ? p->problem : "error",
                                  p->context, hint);
                else
                        add_error(c, line, col, "%s%s", p->problem ? p->problem : "syntax error",
                                  hint);
                if (p->context && (p->context_mark.line != p->problem_mark.line ||
                                   p->context_mark.column != p->problem_mark.column)) {
                        int cl, cc;
                        mark_of(&p->context_mark, &cl, &cc);
                        diag_add(c->diags, DIAG_NOTE, c->file, cl, cc, "%s started here",
                                 strneq(p->context, "while ", 6) ? p->context + 6 : p->context);
                }
                break;
        }
        c->fatal = true;
}

static void push_frame(yctx *c, ynode_kind kind, const yaml_mark_t *mark, const char *tag,
                       const char *anchor_name)
{
        int line, col;
        mark_of(mark, &line, &col);
        if (c->depth + 1 > c->lim.max_depth) {
                limit_error(c, COPY_DEPTH, line, col);
                return;
        }
        copy_err e = count_node(c, 0);
        if (e != COPY_OK) {
                limit_error(c, e, line, col);
                return;
        }
        c->stack = xgrow(c->stack, &c->stack_alloc, c->depth + 1, sizeof(frame));
        frame *f = &c->stack[c->depth++];
        *f = (frame){0};
        f->node = ynode_new(kind, line, col, tag);
        f->anchor = xstrdup_null(anchor_name);
}

static void pop_frame(yctx *c)
{
        frame *f = &c->stack[c->depth - 1];
        if (f->merge) {
                apply_merge(c, f);
                if (c->fatal)
                        return; /* doc_reset frees the frame */
                bury(c, f->merge);
                f->merge = NULL;
        }
        ynode *node = f->node;
        char *anchor_name = f->anchor;
        strmap_release(&f->keys);
        c->depth--;
        register_anchor(c, anchor_name, node);
        free(anchor_name);
        attach(c, node);
}

static void on_alias(yctx *c, const yaml_event_t *ev)
{
        int line, col;
        mark_of(&ev->start_mark, &line, &col);
        const char *name = (const char *)ev->data.alias.anchor;
        c->aliases_seen = true;
        size_t *idx = strmap_find(&c->anchor_index, name, strlen(name));
        if (!idx) {
                bool recursive = false;
                for (size_t i = 0; i < c->depth; i++)
                        recursive = recursive || streq_ptr(c->stack[i].anchor, name);
                if (recursive)
                        add_error(c, line, col,
                                  "alias \"*%s\" refers to a node that contains it (recursive "
                                  "alias)",
                                  name);
                else
                        add_error(c, line, col, "alias \"*%s\" refers to an undefined anchor",
                                  name);
                c->doc_error = true;
                ynode *placeholder = ynode_new(YNODE_SCALAR, line, col, NULL);
                placeholder->str = xstrdup("");
                attach(c, placeholder);
                return;
        }
        if (c->budget && c->budget->aliases >= c->budget->max_aliases) {
                limit_error(c, COPY_BUDGET_ALIASES, line, col);
                return;
        }
        if (c->budget)
                c->budget->aliases++;
        ynode *copy = NULL;
        copy_err e = ynode_copy(c, c->anchors[*idx].node, c->depth + 1, &copy);
        if (e != COPY_OK) {
                limit_error(c, e, line, col);
                return;
        }
        copy->line = line;
        copy->col = col;
        attach(c, copy);
}

static void on_scalar(yctx *c, const yaml_event_t *ev)
{
        int line, col;
        mark_of(&ev->start_mark, &line, &col);
        size_t len = ev->data.scalar.length;
        copy_err e = count_node(c, len);
        if (e != COPY_OK) {
                limit_error(c, e, line, col);
                return;
        }
        ynode *n = ynode_new(YNODE_SCALAR, line, col, (const char *)ev->data.scalar.tag);
        n->str = xmalloc(len + 1);
        memcpy(n->str, ev->data.scalar.value, len);
        n->str[len] = '\0';
        n->len = len;
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE &&
                    ev->data.scalar.style != YAML_ANY_SCALAR_STYLE;
        register_anchor(c, (const char *)ev->data.scalar.anchor, n);
        attach(c, n);
}

static void on_document_start(yctx *c, const yaml_event_t *ev)
{
        int line, col;
        mark_of(&ev->start_mark, &line, &col);
        if (c->ndocs >= c->lim.max_documents) {
                add_error(c, line, col, "more than %zu documents in one file (document limit)",
                          c->lim.max_documents);
                c->fatal = true;
                return;
        }
        c->ndocs++;
        c->in_doc = true;
        c->doc_line = line;
        c->doc_nodes_start = c->nodes;
}

static void on_document_end(yctx *c, ydoc_list *out)
{
        if (!c->doc_error) {
                ynode *root = TAKE_PTR(c->root);
                /* "---" with nothing after it: libyaml reports an empty plain scalar. */
                if (root && root->kind == YNODE_SCALAR && !root->quoted && !root->tag &&
                    root->len == 0) {
                        ynode_free(root);
                        root = NULL;
                }
                out->docs = xgrow(out->docs, &out->alloc, out->n + 1, sizeof(ydoc));
                ydoc *d = &out->docs[out->n++];
                d->file = xstrdup(c->file);
                d->index = (int)(c->ndocs - 1);
                d->line = c->doc_line;
                d->root = root;
        }
        doc_reset(c);
}

int yaml_parse(const char *file, const char *buf, size_t len, const yaml_limits *lim,
               ydoc_list *out, diag_list *diags)
{
        return yaml_parse_budget(file, buf, len, lim, NULL, out, diags);
}

int yaml_parse_budget(const char *file, const char *buf, size_t len, const yaml_limits *lim,
                      yaml_budget *budget, ydoc_list *out, diag_list *diags)
{
        yctx c = {
            .file = file ? file : "<input>",
            .buf = buf,
            .len = len,
            .lim = lim ? *lim : yaml_default_limits,
            .budget = budget,
            .diags = diags,
        };
        if (budget && budget->spent)
                return -EINVAL;
        c.max_bytes = c.lim.max_file_bytes > SIZE_MAX / 16 ? SIZE_MAX : c.lim.max_file_bytes * 16;

        if (len > c.lim.max_file_bytes) {
                int line, col;
                offset_position(buf, len, c.lim.max_file_bytes, &line, &col);
                add_error(&c, line, col, "file is larger than %zu bytes (size limit)",
                          c.lim.max_file_bytes);
                return -EINVAL;
        }

        yaml_parser_t parser;
        if (!yaml_parser_initialize(&parser)) {
                add_error(&c, 0, 0, "out of memory while parsing YAML");
                return -ENOMEM;
        }
        yaml_parser_set_input_string(&parser, (const unsigned char *)(buf ? buf : ""), len);

        bool done = false;
        while (!done && !c.fatal) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&parser, &ev)) {
                        parser_error(&c, &parser);
                        break;
                }
                switch (ev.type) {
                case YAML_STREAM_END_EVENT:
                        done = true;
                        break;
                case YAML_DOCUMENT_START_EVENT:
                        on_document_start(&c, &ev);
                        break;
                case YAML_DOCUMENT_END_EVENT:
                        on_document_end(&c, out);
                        break;
                case YAML_ALIAS_EVENT:
                        on_alias(&c, &ev);
                        break;
                case YAML_SCALAR_EVENT:
                        on_scalar(&c, &ev);
                        break;
                case YAML_SEQUENCE_START_EVENT:
                        push_frame(&c, YNODE_SEQ, &ev.start_mark,
                                   (const char *)ev.data.sequence_start.tag,
                                   (const char *)ev.data.sequence_start.anchor);
                        break;
                case YAML_MAPPING_START_EVENT:
                        push_frame(&c, YNODE_MAP, &ev.start_mark,
                                   (const char *)ev.data.mapping_start.tag,
                                   (const char *)ev.data.mapping_start.anchor);
                        break;
                case YAML_SEQUENCE_END_EVENT:
                case YAML_MAPPING_END_EVENT:
                        if (c.depth > 0)
                                pop_frame(&c);
                        break;
                default:
                        break;
                }
                yaml_event_delete(&ev);
        }
        bool failed = c.any_error;
        yaml_parser_delete(&parser);
        ctx_release(&c);
        return failed ? -EINVAL : 0;
}

int yaml_read_file(const char *path, const yaml_limits *lim, char **ret_buf, size_t *ret_len,
                   diag_list *diags)
{
        const yaml_limits *l = lim ? lim : &yaml_default_limits;
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f) {
                int r = -errno;
                diag_add(diags, DIAG_ERROR, path, 0, 0, "cannot open: %s", strerror(-r));
                return r;
        }
        /* Read one byte more than the limit, to know that the file is too large. */
        size_t want = l->max_file_bytes < SIZE_MAX ? l->max_file_bytes + 1 : SIZE_MAX;
        size_t alloc = MIN(want, (size_t)65536), len = 0;
        _cleanup_free_ char *buf = xmalloc(alloc);
        for (;;) {
                if (len == alloc) {
                        if (alloc >= want)
                                break;
                        alloc = MIN(want, alloc * 2);
                        buf = xrealloc(buf, alloc);
                }
                size_t k = fread(buf + len, 1, alloc - len, f);
                len += k;
                if (k == 0) {
                        if (ferror(f)) {
                                int r = errno > 0 ? -errno : -EIO;
                                diag_add(diags, DIAG_ERROR, path, 0, 0, "cannot read: %s",
                                         strerror(-r));
                                return r;
                        }
                        break;
                }
        }
        if (len > l->max_file_bytes) {
                int line, col;
                offset_position(buf, len, l->max_file_bytes, &line, &col);
                diag_add(diags, DIAG_ERROR, path, line, col,
                         "file is larger than %zu bytes (size limit)", l->max_file_bytes);
                return -EFBIG;
        }
        if (len == alloc)
                buf = xrealloc(buf, alloc + 1);
        buf[len] = '\0';
        *ret_buf = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int yaml_load_file(const char *path, const yaml_limits *lim, ydoc_list *out, diag_list *diags)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = yaml_read_file(path, lim, &buf, &len, diags);
        if (r < 0)
                return r;
        return yaml_parse(path, buf, len, lim ? lim : &yaml_default_limits, out, diags);
}

void ydoc_list_release(ydoc_list *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++) {
                free(l->docs[i].file);
                ynode_free(l->docs[i].root);
        }
        free(l->docs);
        *l = (ydoc_list){0};
}

/* ------------------------------------------------ accessors and typing */

ynode *ynode_get(const ynode *map, const char *key)
{
        if (!map || map->kind != YNODE_MAP || !key)
                return NULL;
        size_t len = strlen(key);
        for (size_t i = 0; i < map->n; i++) {
                const ynode *k = map->keys[i];
                if (k && k->kind == YNODE_SCALAR && k->len == len && memcmp(k->str, key, len) == 0)
                        return map->values[i];
        }
        return NULL;
}

typedef enum scalar_type { ST_STRING, ST_NULL, ST_BOOL, ST_INT, ST_FLOAT } scalar_type;

static bool is_digit_in(char ch, int base)
{
        switch (base) {
        case 8:
                return ch >= '0' && ch <= '7';
        case 16:
                return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                       (ch >= 'A' && ch <= 'F');
        default:
                return ch >= '0' && ch <= '9';
        }
}

/* Where the digits of an integer start, and their base; false when not an integer. */
static bool int_syntax(const char *s, size_t len, size_t *ret_start, int *ret_base)
{
        size_t i = 0;
        int base = 10;
        if (i < len && (s[i] == '+' || s[i] == '-'))
                i++;
        if (len - i > 2 && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'x')) {
                base = s[i + 1] == 'o' ? 8 : 16;
                i += 2;
        }
        if (i == len)
                return false;
        for (size_t j = i; j < len; j++)
                if (!is_digit_in(s[j], base))
                        return false;
        *ret_start = i;
        *ret_base = base;
        return true;
}

static bool one_of(const char *s, size_t len, const char *const *words)
{
        for (size_t i = 0; words[i]; i++)
                if (strlen(words[i]) == len && memcmp(words[i], s, len) == 0)
                        return true;
        return false;
}

static const char *const null_words[] = {"", "~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"true", "True", "TRUE", NULL};
static const char *const false_words[] = {"false", "False", "FALSE", NULL};
static const char *const inf_words[] = {".inf", ".Inf", ".INF", NULL};
static const char *const nan_words[] = {".nan", ".NaN", ".NAN", NULL};

static bool float_syntax(const char *s, size_t len)
{
        size_t i = 0;
        if (one_of(s, len, nan_words))
                return true;
        if (i < len && (s[i] == '+' || s[i] == '-'))
                i++;
        if (one_of(s + i, len - i, inf_words))
                return true;
        size_t digits = 0;
        while (i < len && is_digit_in(s[i], 10))
                i++, digits++;
        if (i < len && s[i] == '.') {
                i++;
                while (i < len && is_digit_in(s[i], 10))
                        i++, digits++;
        }
        if (digits == 0)
                return false;
        if (i < len && (s[i] == 'e' || s[i] == 'E')) {
                i++;
                if (i < len && (s[i] == '+' || s[i] == '-'))
                        i++;
                size_t exp = 0;
                while (i < len && is_digit_in(s[i], 10))
                        i++, exp++;
                if (exp == 0)
                        return false;
        }
        return i == len;
}

/* The YAML 1.2 core schema for a plain scalar's text. */
static scalar_type resolve_plain(const char *s, size_t len)
{
        size_t start;
        int base;
        if (one_of(s, len, null_words))
                return ST_NULL;
        if (one_of(s, len, true_words) || one_of(s, len, false_words))
                return ST_BOOL;
        if (int_syntax(s, len, &start, &base))
                return ST_INT;
        if (float_syntax(s, len))
                return ST_FLOAT;
        return ST_STRING;
}

static scalar_type scalar_type_of(const ynode *n)
{
        if (n->tag) {
                scalar_type t = resolve_plain(n->str, n->len);
                if (streq(n->tag, TAG_PREFIX "null"))
                        return t == ST_NULL ? ST_NULL : ST_STRING;
                if (streq(n->tag, TAG_PREFIX "bool"))
                        return t == ST_BOOL ? ST_BOOL : ST_STRING;
                if (streq(n->tag, TAG_PREFIX "int"))
                        return t == ST_INT ? ST_INT : ST_STRING;
                if (streq(n->tag, TAG_PREFIX "float"))
                        return t == ST_INT || t == ST_FLOAT ? ST_FLOAT : ST_STRING;
                if (streq(n->tag, TAG_PREFIX "str") || streq(n->tag, "!"))
                        return ST_STRING;
                /* Other tags are not interpreted: the scalar resolves as if untagged. */
        }
        if (n->quoted)
                return ST_STRING;
        return resolve_plain(n->str, n->len);
}

bool ynode_is_null(const ynode *n)
{
        return n && n->kind == YNODE_SCALAR && scalar_type_of(n) == ST_NULL;
}

const char *ynode_type_name(const ynode *n)
{
        if (!n)
                return "null";
        switch (n->kind) {
        case YNODE_MAP:
                return "mapping";
        case YNODE_SEQ:
                return "sequence";
        case YNODE_SCALAR:
                break;
        }
        switch (scalar_type_of(n)) {
        case ST_NULL:
                return "null";
        case ST_BOOL:
                return "boolean";
        case ST_INT:
                return "integer";
        case ST_FLOAT:
                return "number";
        case ST_STRING:
                break;
        }
        return "string";
}

/* A JSON string; bytes that are not UTF-8 (only possible from odd escapes) become U+FFFD. */
static json_t *json_text(const char *s, size_t len)
{
        json_t *j = json_stringn(s, len);
        if (j)
                return j;
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (ch < 0x80)
                        sb_appendc(&sb, (char)ch);
                else
                        sb_append(&sb, "\xEF\xBF\xBD");
        }
        j = json_stringn(sb.buf ? sb.buf : "", sb.len);
        sb_release(&sb);
        return j;
}

static json_t *int_to_json(const ynode *n)
{
        size_t start;
        int base;
        if (!int_syntax(n->str, n->len, &start, &base))
                return json_text(n->str, n->len);
        bool neg = n->str[0] == '-';
        unsigned long long v = 0;
        bool overflow = false;
        for (size_t i = start; i < n->len; i++) {
                char ch = n->str[i];
                unsigned d = ch <= '9' ? (unsigned)(ch - '0') : (unsigned)((ch | 0x20) - 'a' + 10);
                if (v > (ULLONG_MAX - d) / (unsigned)base) {
                        overflow = true;
                        break;
                }
                v = v * (unsigned)base + d;
        }
        unsigned long long max = neg ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
        if (!overflow && v <= max) {
                json_int_t j = neg ? (v == max ? LLONG_MIN : -(json_int_t)v) : (json_int_t)v;
                return json_integer(j);
        }
        if (base == 10) {
                json_t *r = json_real(strtod(n->str, NULL));
                if (r)
                        return r;
        }
        return json_text(n->str, n->len);
}

static json_t *float_to_json(const ynode *n)
{
        if (!one_of(n->str, n->len, nan_words)) {
                const char *s = n->str;
                if (*s == '+' || *s == '-')
                        s++;
                if (!one_of(s, n->len - (size_t)(s - n->str), inf_words)) {
                        json_t *r = json_real(strtod(n->str, NULL));
                        if (r)
                                return r;
                }
        }
        /* JSON has no infinity or NaN: keep the text. */
        return json_text(n->str, n->len);
}

json_t *ynode_to_json(const ynode *n)
{
        if (!n)
                return json_null();
        switch (n->kind) {
        case YNODE_MAP: {
                json_t *o = json_object();
                for (size_t i = 0; i < n->n; i++) {
                        const ynode *k = n->keys[i];
                        if (!k || k->kind != YNODE_SCALAR)
                                continue;
                        /* json_text: keys must be UTF-8 for jansson too. */
                        json_t *key = json_text(k->str, k->len);
                        json_object_setn_new(o, json_string_value(key), json_string_length(key),
                                             ynode_to_json(n->values[i]));
                        json_decref(key);
                }
                return o;
        }
        case YNODE_SEQ: {
                json_t *a = json_array();
                for (size_t i = 0; i < n->n; i++)
                        json_array_append_new(a, ynode_to_json(n->values[i]));
                return a;
        }
        case YNODE_SCALAR:
                break;
        }
        switch (scalar_type_of(n)) {
        case ST_NULL:
                return json_null();
        case ST_BOOL:
                return json_boolean(n->str[0] == 't' || n->str[0] == 'T');
        case ST_INT:
                return int_to_json(n);
        case ST_FLOAT:
                return float_to_json(n);
        case ST_STRING:
                break;
        }
        return json_text(n->str, n->len);
}

/* ----------------------------------------------------------- the emitter */

static int emit_write(void *data, unsigned char *buffer, size_t size)
{
        sb_append_len(data, buffer, size);
        return 1;
}

/* Plain text that some YAML reader would take for something else than a string. */
static bool plain_is_ambiguous(const char *s, size_t len)
{
        /* YAML 1.1 booleans and the merge key: still read that way by many tools. */
        static const char *const yaml11[] = {"y",   "Y",   "yes", "Yes", "YES", "n",  "N",
                                             "no",  "No",  "NO",  "on",  "On",  "ON", "off",
                                             "Off", "OFF", "<<",  "=",   NULL};
        return resolve_plain(s, len) != ST_STRING || one_of(s, len, yaml11);
}

static int emit_event(yaml_emitter_t *e, yaml_event_t *ev, int ok)
{
        if (!ok)
                return -ENOMEM;
        /* On failure the event stays queued in the emitter, which frees it. */
        if (!yaml_emitter_emit(e, ev))
                return -EINVAL;
        return 0;
}

static int emit_scalar(yaml_emitter_t *e, const char *s, size_t len, yaml_scalar_style_t style)
{
        yaml_event_t ev;
        if (len > INT_MAX)
                return -E2BIG;
        return emit_event(
            e, &ev,
            yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)len, 1, 1, style));
}

static int emit_string(yaml_emitter_t *e, const char *s, size_t len)
{
        yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;
        if (plain_is_ambiguous(s, len))
                style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        else if (memchr(s, '\n', len))
                style = YAML_LITERAL_SCALAR_STYLE; /* libyaml falls back when it cannot */
        return emit_scalar(e, s, len, style);
}

/* The shortest text that reads back as the same double, always with a '.' or an exponent. */
static void format_real(double v, char *buf, size_t size)
{
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(buf, size, "%.*g", prec, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        if (!strpbrk(buf, ".eE"))
                strncat(buf, ".0", size - strlen(buf) - 1);
}

static int emit_value(yaml_emitter_t *e, const json_t *v)
{
        yaml_event_t ev;
        char num[64];
        int r;

        switch (json_typeof(v)) {
        case JSON_OBJECT: {
                r = emit_event(e, &ev,
                               yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                                   YAML_BLOCK_MAPPING_STYLE));
                if (r < 0)
                        return r;
                const char *key;
                size_t key_len;
                json_t *item;
                json_object_keylen_foreach((json_t *)v, key, key_len, item)
                {
                        r = emit_string(e, key, key_len);
                        if (r < 0)
                                return r;
                        r = emit_value(e, item);
                        if (r < 0)
                                return r;
                }
                return emit_event(e, &ev, yaml_mapping_end_event_initialize(&ev));
        }
        case JSON_ARRAY: {
                r = emit_event(e, &ev,
                               yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                                    YAML_BLOCK_SEQUENCE_STYLE));
                if (r < 0)
                        return r;
                for (size_t i = 0; i < json_array_size(v); i++) {
                        r = emit_value(e, json_array_get(v, i));
                        if (r < 0)
                                return r;
                }
                return emit_event(e, &ev, yaml_sequence_end_event_initialize(&ev));
        }
        case JSON_STRING:
                return emit_string(e, json_string_value(v), json_string_length(v));
        case JSON_INTEGER:
                snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return emit_scalar(e, num, strlen(num), YAML_PLAIN_SCALAR_STYLE);
        case JSON_REAL:
                format_real(json_real_value(v), num, sizeof(num));
                return emit_scalar(e, num, strlen(num), YAML_PLAIN_SCALAR_STYLE);
        case JSON_TRUE:
                return emit_scalar(e, "true", 4, YAML_PLAIN_SCALAR_STYLE);
        case JSON_FALSE:
                return emit_scalar(e, "false", 5, YAML_PLAIN_SCALAR_STYLE);
        case JSON_NULL:
                break;
        }
        return emit_scalar(e, "null", 4, YAML_PLAIN_SCALAR_STYLE);
}

int yaml_emit_json(const json_t *value, bool document_start, strbuf *out)
{
        yaml_emitter_t e;
        yaml_event_t ev;
        strbuf text = STRBUF_INIT;
        int r;

        if (!value)
                return -EINVAL;
        if (!yaml_emitter_initialize(&e))
                return -ENOMEM;
        yaml_emitter_set_output(&e, emit_write, &text);
        yaml_emitter_set_encoding(&e, YAML_UTF8_ENCODING);
        yaml_emitter_set_indent(&e, 2);
        yaml_emitter_set_width(&e, -1);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_break(&e, YAML_LN_BREAK);

        r = emit_event(&e, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
        if (r < 0)
                goto out;
        r = emit_event(
            &e, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, !document_start));
        if (r < 0)
                goto out;
        r = emit_value(&e, value);
        if (r < 0)
                goto out;
        r = emit_event(&e, &ev, yaml_document_end_event_initialize(&ev, 1));
        if (r < 0)
                goto out;
        r = emit_event(&e, &ev, yaml_stream_end_event_initialize(&ev));
        if (r < 0)
                goto out;
        if (!yaml_emitter_flush(&e)) {
                r = -EIO;
                goto out;
        }
        sb_append_len(out, text.buf ? text.buf : "", text.len);
out:
        yaml_emitter_delete(&e);
        sb_release(&text);
        return r;
}
