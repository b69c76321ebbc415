/*
 * The bounded walk over a Git tree (see tree-walk.h).
 *
 * Design decisions:
 * - Every tree id read is remembered in a hash set. Reading a tree again is
 *   legitimate (two identical folders share one tree) but each time counts
 *   against max_repeated; together with the cap on visited entries this
 *   turns a "tree bomb" (a small repository whose expansion is exponential)
 *   into a quick, clear refusal instead of hours of work.
 * - Hidden entries (names starting with '.') are skipped but still count as
 *   visited: a flat tree of millions of dot-files is bounded as well.
 * - The messages name the path inside the repository where a limit was
 *   hit, so the author of the commit can find it.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sources/revision.h"
#include "sources/tree-walk.h"
#include "util/xalloc.h"

typedef struct id_set {
        uint8_t (*slots)[TREE_WALK_ID_SIZE];
        bool *used;
        size_t n, cap; /* cap is a power of two */
} id_set;

static size_t id_hash(const uint8_t *id)
{
        uint64_t h = 1469598103934665603ull; /* FNV-1a: fuzzed ids are not uniform */

        for (size_t i = 0; i < TREE_WALK_ID_SIZE; i++)
                h = (h ^ id[i]) * 1099511628211ull;
        return (size_t)h;
}

static void id_set_release(id_set *s)
{
        free(s->slots);
        free(s->used);
}

static bool id_set_insert(id_set *s, const uint8_t *id);

static void id_set_grow(id_set *s)
{
        id_set old = *s;

        s->cap = old.cap ? old.cap * 2 : 64;
        s->n = 0;
        s->slots = xcalloc(s->cap, sizeof(*s->slots));
        s->used = xcalloc(s->cap, sizeof(*s->used));
        for (size_t i = 0; i < old.cap; i++)
                if (old.used[i])
                        (void)id_set_insert(s, old.slots[i]);
        id_set_release(&old);
}

/* Add id; false when it was already there. */
static bool id_set_insert(id_set *s, const uint8_t *id)
{
        size_t i;

        if ((s->n + 1) * 2 > s->cap)
                id_set_grow(s);
        for (i = id_hash(id) & (s->cap - 1); s->used[i]; i = (i + 1) & (s->cap - 1))
                if (memcmp(s->slots[i], id, TREE_WALK_ID_SIZE) == 0)
                        return false;
        memcpy(s->slots[i], id, TREE_WALK_ID_SIZE);
        s->used[i] = true;
        s->n++;
        return true;
}

typedef struct walk {
        const tree_walk_ops *ops;
        void *userdata;
        tree_walk_limits lim;
        source_revision *rev;
        id_set seen;
        size_t visited;
        size_t repeated;
        size_t total; /* bytes of YAML read */
        char *error;
} walk;

/* Name the path in an operation's error: "cannot read <what> <path>: <error>". */
static int op_failed(walk *w, int r, const char *what, const char *path)
{
        char *e = w->error;

        w->error = xasprintf("cannot read %s %s: %s", what, isempty(path) ? "/" : path,
                             e ? e : "unknown error");
        free(e);
        return r;
}

static char *join(const char *prefix, const char *name)
{
        return isempty(prefix) ? xstrdup(name) : xasprintf("%s/%s", prefix, name);
}

static int walk_blob(walk *w, const tree_walk_entry *e, const char *path)
{
        char *content;
        size_t size, len;
        int r;

        r = w->ops->blob_size(w->userdata, e->id, &size, &w->error);
        if (r < 0)
                return op_failed(w, r, "file", path);
        if (size > w->lim.max_file_size) {
                revision_add_note(w->rev, path, "larger than %zu bytes (%zu)", w->lim.max_file_size,
                                  size);
                return 0;
        }
        if (w->rev->n_files >= SOURCE_MAX_FILES) {
                w->error = xasprintf("more than %u YAML files", SOURCE_MAX_FILES);
                return -EFBIG;
        }
        if (size > w->lim.max_total_size - w->total) {
                w->error = xasprintf("the YAML files add up to more than %zu bytes",
                                     w->lim.max_total_size);
                return -EFBIG;
        }
        r = w->ops->blob_read(w->userdata, e->id, &content, &len, &w->error);
        if (r < 0)
                return op_failed(w, r, "file", path);
        if (len > w->lim.max_file_size || len > w->lim.max_total_size - w->total) {
                /* The object store said otherwise before: trust neither. */
                free(content);
                w->error = xasprintf("%s changed size while it was read", path);
                return -EIO;
        }
        w->total += len;
        revision_add_file(w->rev, path, content, len);
        return 0;
}

static int walk_tree(walk *w, const uint8_t *id, const char *prefix, unsigned depth)
{
        void *tree = NULL;
        size_t n;
        int r;

        if (depth > SOURCE_MAX_DEPTH) {
                w->error = xasprintf("folders nested deeper than %u levels at %s", SOURCE_MAX_DEPTH,
                                     prefix);
                return -EFBIG;
        }
        if (!id_set_insert(&w->seen, id) && ++w->repeated > w->lim.max_repeated) {
                w->error = xasprintf("refusing to read the tree: more than %zu folders repeat a "
                                     "folder already read (the last at %s); a repository "
                                     "built to make reading it explode",
                                     w->lim.max_repeated, isempty(prefix) ? "/" : prefix);
                return -EFBIG;
        }
        r = w->ops->open_tree(w->userdata, id, &tree, &n, &w->error);
        if (r < 0)
                return op_failed(w, r, "folder", prefix);
        for (size_t i = 0; i < n && r >= 0; i++) {
                tree_walk_entry e;
                _cleanup_free_ char *path = NULL;

                if (++w->visited > w->lim.max_entries) {
                        w->error = xasprintf("refusing to read the tree: more than %zu entries "
                                             "(the last at %s)",
                                             w->lim.max_entries, isempty(prefix) ? "/" : prefix);
                        r = -EFBIG;
                        break;
                }
                w->ops->entry(w->userdata, tree, i, &e);
                if (isempty(e.name) || e.name[0] == '.')
                        continue; /* .git*, .github and other hidden entries */
                path = join(prefix, e.name);
                switch (e.mode) {
                case TREE_WALK_MODE_TREE:
                        r = walk_tree(w, e.id, path, depth + 1);
                        break;
                case TREE_WALK_MODE_COMMIT:
                        revision_add_note(w->rev, path, "submodule (not followed)");
                        break;
                default:
                        if (!source_name_is_yaml(e.name))
                                break;
                        if (e.mode == TREE_WALK_MODE_LINK)
                                revision_add_note(w->rev, path, "symbolic link (not followed)");
                        else if (e.mode == TREE_WALK_MODE_BLOB ||
                                 e.mode == TREE_WALK_MODE_EXECUTABLE)
                                r = walk_blob(w, &e, path);
                        else
                                revision_add_note(w->rev, path, "unknown entry mode %06o",
                                                  (unsigned)e.mode);
                }
        }
        w->ops->close_tree(w->userdata, tree);
        return r;
}

int tree_walk(const tree_walk_ops *ops, void *userdata, const uint8_t root[TREE_WALK_ID_SIZE],
              const char *prefix, const tree_walk_limits *limits, source_revision *rev,
              char **ret_error)
{
        walk w = {.ops = ops, .userdata = userdata, .lim = *limits, .rev = rev};
        int r;

        assert(ops && limits && rev);
        if (w.lim.max_entries == 0)
                w.lim.max_entries = SOURCE_MAX_ENTRIES;
        if (w.lim.max_repeated == 0)
                w.lim.max_repeated = SOURCE_MAX_REPEATED_TREES;
        if (w.lim.max_total_size == 0)
                w.lim.max_total_size = SOURCE_DEFAULT_MAX_TOTAL_SIZE;
        if (w.lim.max_file_size == 0)
                w.lim.max_file_size = SOURCE_DEFAULT_MAX_FILE_SIZE;
        r = walk_tree(&w, root, prefix ? prefix : "", 0);
        id_set_release(&w.seen);
        if (r < 0) {
                *ret_error = w.error ? w.error : xstrdup("cannot read the tree");
                return r;
        }
        free(w.error);
        revision_sort(rev);
        return 0;
}
