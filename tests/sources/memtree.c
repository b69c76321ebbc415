/*
 * The in-memory tree (see memtree.h). Ids are made up: a tree's id holds
 * 't' and its number, a blob's id 'b' and its index, so a walk can only
 * reach what the description holds, and a number that names no tree is an
 * error of open_tree, as a missing object would be in a repository.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sources/memtree.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

typedef struct mt_entry {
        unsigned tree;
        uint32_t mode;
        char *name;
        unsigned target; /* tree number or blob index */
} mt_entry;

struct memtree {
        mt_entry *entries;
        size_t n_entries;
        char **blobs;
        size_t *blob_lens;
        size_t n_blobs;
        bool named[MEMTREE_MAX_TREES];
        size_t *order; /* entry indices grouped by tree, in input order */
        size_t first[MEMTREE_MAX_TREES], count[MEMTREE_MAX_TREES];
};

static void make_id(uint8_t id[TREE_WALK_ID_SIZE], char kind, unsigned n)
{
        memset(id, 0, TREE_WALK_ID_SIZE);
        id[0] = (uint8_t)kind;
        memcpy(id + 1, &n, sizeof(n));
}

static bool read_id(const uint8_t id[TREE_WALK_ID_SIZE], char kind, unsigned *ret)
{
        if (id[0] != (uint8_t)kind)
                return false;
        memcpy(ret, id + 1, sizeof(*ret));
        return true;
}

void memtree_root(uint8_t ret_id[TREE_WALK_ID_SIZE])
{
        make_id(ret_id, 't', 0);
}

static bool parse_uint(const char **p, const char *end, unsigned base, unsigned long max,
                       unsigned long *ret)
{
        unsigned long v = 0;
        const char *s = *p;

        if (s >= end)
                return false;
        for (; s < end && *s != ' '; s++) {
                unsigned d;

                if (*s >= '0' && *s <= '9')
                        d = (unsigned)(*s - '0');
                else
                        return false;
                if (d >= base)
                        return false;
                v = v * base + d;
                if (v > max)
                        return false;
        }
        if (s == *p)
                return false;
        *ret = v;
        *p = s < end ? s + 1 : s;
        return true;
}

static void parse_line(memtree *t, const char *line, const char *end)
{
        const char *p = line, *name, *name_end;
        unsigned long tree, mode, target;
        mt_entry e;

        if (t->n_entries >= MEMTREE_MAX_ENTRIES)
                return;
        if (!parse_uint(&p, end, 10, MEMTREE_MAX_TREES - 1, &tree) ||
            !parse_uint(&p, end, 8, 0777777, &mode))
                return;
        name = p;
        name_end = memchr(p, ' ', (size_t)(end - p));
        if (!name_end)
                name_end = end;
        if (name_end == name)
                return;
        p = name_end < end ? name_end + 1 : end;
        e = (mt_entry){.tree = (unsigned)tree,
                       .mode = (uint32_t)mode,
                       .name = xstrndup(name, (size_t)(name_end - name))};
        if (mode == TREE_WALK_MODE_TREE) {
                if (!parse_uint(&p, end, 10, MEMTREE_MAX_TREES - 1, &target)) {
                        free(e.name);
                        return;
                }
                e.target = (unsigned)target;
                t->named[target] = true;
        } else {
                strbuf sb = STRBUF_INIT;

                for (const char *c = p; c < end; c++) {
                        if (c[0] == '\\' && c + 1 < end && c[1] == 'n') {
                                sb_appendc(&sb, '\n');
                                c++;
                        } else
                                sb_appendc(&sb, *c);
                }
                e.target = (unsigned)t->n_blobs;
                t->blobs = xrealloc(t->blobs, (t->n_blobs + 1) * sizeof(*t->blobs));
                t->blob_lens = xrealloc(t->blob_lens, (t->n_blobs + 1) * sizeof(*t->blob_lens));
                t->blob_lens[t->n_blobs] = sb.len;
                t->blobs[t->n_blobs++] = sb.len ? sb_detach(&sb) : xstrdup("");
                sb_release(&sb);
        }
        t->entries = xrealloc(t->entries, (t->n_entries + 1) * sizeof(*t->entries));
        t->entries[t->n_entries++] = e;
}

memtree *memtree_parse(const char *text, size_t len)
{
        memtree *t = XNEW(memtree);

        for (const char *line = text; line < text + len;) {
                const char *nl = memchr(line, '\n', (size_t)(text + len - line));
                const char *end = nl ? nl : text + len;

                parse_line(t, line, end);
                line = end + 1;
        }
        t->named[0] = true;
        /* Group the entries by tree once, so opening a tree costs nothing. */
        for (size_t i = 0; i < t->n_entries; i++)
                t->count[t->entries[i].tree]++;
        for (size_t n = 1; n < MEMTREE_MAX_TREES; n++)
                t->first[n] = t->first[n - 1] + t->count[n - 1];
        t->order = xcalloc(t->n_entries + 1, sizeof(*t->order));
        {
                size_t fill[MEMTREE_MAX_TREES] = {0};

                for (size_t i = 0; i < t->n_entries; i++) {
                        unsigned n = t->entries[i].tree;

                        t->order[t->first[n] + fill[n]++] = i;
                }
        }
        return t;
}

void memtree_free(memtree *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_entries; i++)
                free(t->entries[i].name);
        free(t->entries);
        for (size_t i = 0; i < t->n_blobs; i++)
                free(t->blobs[i]);
        free(t->blobs);
        free(t->blob_lens);
        free(t->order);
        free(t);
}

/* A tree handle is its number plus one (never NULL). */
static int mt_open_tree(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], void **ret_tree,
                        size_t *ret_n, char **ret_error)
{
        memtree *t = userdata;
        unsigned n;

        if (!read_id(id, 't', &n) || n >= MEMTREE_MAX_TREES || !t->named[n] ||
            (n != 0 && t->count[n] == 0)) {
                *ret_error = xstrdup("no such object");
                return -EIO;
        }
        *ret_tree = (void *)((uintptr_t)n + 1);
        *ret_n = t->count[n];
        return 0;
}

static void mt_entry_at(void *userdata, void *tree, size_t i, tree_walk_entry *ret)
{
        memtree *t = userdata;
        unsigned n = (unsigned)((uintptr_t)tree - 1);
        const mt_entry *e;

        assert(i < t->count[n]);
        e = &t->entries[t->order[t->first[n] + i]];
        ret->name = e->name;
        ret->mode = e->mode;
        make_id(ret->id, e->mode == TREE_WALK_MODE_TREE ? 't' : 'b', e->target);
}

static void mt_close_tree(void *userdata, void *tree)
{
        (void)userdata;
        (void)tree;
}

static int blob(memtree *t, const uint8_t id[TREE_WALK_ID_SIZE], unsigned *ret, char **ret_error)
{
        if (!read_id(id, 'b', ret) || *ret >= t->n_blobs) {
                *ret_error = xstrdup("no such object");
                return -EIO;
        }
        return 0;
}

static int mt_blob_size(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], size_t *ret_size,
                        char **ret_error)
{
        memtree *t = userdata;
        unsigned b;
        int r = blob(t, id, &b, ret_error);

        if (r < 0)
                return r;
        *ret_size = t->blob_lens[b];
        return 0;
}

static int mt_blob_read(void *userdata, const uint8_t id[TREE_WALK_ID_SIZE], char **ret_content,
                        size_t *ret_len, char **ret_error)
{
        memtree *t = userdata;
        unsigned b;
        int r = blob(t, id, &b, ret_error);
        char *c;

        if (r < 0)
                return r;
        c = xmalloc(t->blob_lens[b] + 1);
        memcpy(c, t->blobs[b], t->blob_lens[b]);
        c[t->blob_lens[b]] = '\0';
        *ret_content = c;
        *ret_len = t->blob_lens[b];
        return 0;
}

const tree_walk_ops memtree_ops = {
    .open_tree = mt_open_tree,
    .entry = mt_entry_at,
    .close_tree = mt_close_tree,
    .blob_size = mt_blob_size,
    .blob_read = mt_blob_read,
};
