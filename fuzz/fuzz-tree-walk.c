/*
 * Fuzz target for the Git tree walk (sources/tree-walk.c): the input is an
 * in-memory tree description (tests/sources/memtree.h: entries of trees
 * that may name each other any number of times, blobs, symbolic links,
 * submodules, odd modes and names), walked with small limits so that every
 * bound is reached. The walk must end, with 0 and a consistent revision, or
 * with -EFBIG / -EIO and a message; never crash, leak or loop.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sources/revision.h"
#include "sources/tree-walk.h"
#include "tests/sources/memtree.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const tree_walk_limits lim = {
            .max_file_size = 256,
            .max_total_size = 4096,
            .max_entries = 20000,
            .max_repeated = 64,
        };
        memtree *t = memtree_parse((const char *)data, size);
        source_revision *rev = XNEW(source_revision);
        uint8_t root[TREE_WALK_ID_SIZE];
        char *err = NULL;
        size_t total = 0;
        int r;

        memtree_root(root);
        r = tree_walk(&memtree_ops, t, root, "", &lim, rev, &err);
        if (r < 0) {
                if ((r != -EFBIG && r != -EIO) || !err || !*err)
                        abort();
        } else {
                if (err)
                        abort();
                for (size_t i = 0; i < rev->n_files; i++) {
                        if (!source_name_is_yaml(strrchr(rev->files[i].path, '/')
                                                     ? strrchr(rev->files[i].path, '/') + 1
                                                     : rev->files[i].path))
                                abort();
                        if (rev->files[i].len > lim.max_file_size ||
                            rev->files[i].content[rev->files[i].len] != '\0')
                                abort();
                        if (i > 0 && strcmp(rev->files[i - 1].path, rev->files[i].path) > 0)
                                abort();
                        total += rev->files[i].len;
                }
                if (total > lim.max_total_size || rev->n_notes > SOURCE_MAX_NOTES + 1)
                        abort();
        }
        free(err);
        source_revision_free(rev);
        memtree_free(t);
        return 0;
}
