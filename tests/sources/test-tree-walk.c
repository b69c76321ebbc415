/*
 * The tree walk's bounds, over in-memory trees (memtree.h): what is read
 * and noted from an ordinary tree, and a clear -EFBIG for too many entries,
 * a tree bomb, a tree that contains itself and folders nested too deep;
 * -EIO for a missing object. The same walk reads real repositories
 * (test-git-local.c has a tree bomb and a symlink flood built with git).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sources/revision.h"
#include "sources/tree-walk.h"
#include "tests/sources/memtree.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

/* Walk the description; returns the result, the revision and the message. */
static int walk(const char *text, const tree_walk_limits *lim, source_revision **ret_rev,
                char **ret_error)
{
        memtree *t = memtree_parse(text, strlen(text));
        uint8_t root[TREE_WALK_ID_SIZE];
        int r;

        *ret_rev = XNEW(source_revision);
        *ret_error = NULL;
        memtree_root(root);
        r = tree_walk(&memtree_ops, t, root, "", lim, *ret_rev, ret_error);
        memtree_free(t);
        return r;
}

static void test_ordinary_tree(void **state)
{
        tree_walk_limits lim = {.max_file_size = 16, .max_total_size = 1024};
        _cleanup_free_ char *err = NULL;
        source_revision *rev;

        assert_int_equal(walk("0 100644 b.yaml name: b\n"
                              "0 40000 sub 1\n"
                              "1 100644 a.yml name: a\n"
                              "1 100644 notes.txt not yaml\n"
                              "0 40000 .github 2\n"
                              "2 100644 ci.yml hidden\n"
                              "0 120000 link.yaml b.yaml\n"
                              "0 160000 mod.yaml x\n"
                              "0 100644 big.yaml 0123456789abcdefg\n"
                              "0 100755 run.yaml x: 1\n",
                              &lim, &rev, &err),
                         0);
        assert_null(err);
        assert_int_equal(rev->n_files, 3);
        assert_string_equal(rev->files[0].path, "b.yaml");
        assert_string_equal(rev->files[0].content, "name: b");
        assert_string_equal(rev->files[1].path, "run.yaml");
        assert_string_equal(rev->files[2].path, "sub/a.yml");
        assert_int_equal(rev->n_notes, 3);
        assert_string_equal(rev->notes[0].path, "big.yaml");
        assert_string_equal(rev->notes[0].reason, "larger than 16 bytes (17)");
        assert_string_equal(rev->notes[1].reason, "symbolic link (not followed)");
        assert_string_equal(rev->notes[2].reason, "submodule (not followed)");
        source_revision_free(rev);
}

static void test_too_many_entries(void **state)
{
        tree_walk_limits lim = {.max_entries = 1000};
        strbuf sb = STRBUF_INIT;
        _cleanup_free_ char *err = NULL;
        source_revision *rev;

        for (int i = 0; i < 1001; i++)
                sb_printf(&sb, "0 100644 .hidden%d x\n", i);
        assert_int_equal(walk(sb_str(&sb), &lim, &rev, &err), -EFBIG);
        assert_string_equal(err, "refusing to read the tree: more than 1000 entries (the last "
                                 "at /)");
        source_revision_free(rev);
        sb_release(&sb);
}

static void test_tree_bomb(void **state)
{
        tree_walk_limits lim = {0};
        strbuf sb = STRBUF_INIT;
        _cleanup_free_ char *err = NULL;
        source_revision *rev;

        for (int i = 0; i < 64; i++)
                sb_printf(&sb, "%d 40000 a %d\n%d 40000 b %d\n", i, i + 1, i, i + 1);
        sb_append(&sb, "64 100644 leaf.yaml x: 1\n");
        assert_int_equal(walk(sb_str(&sb), &lim, &rev, &err), -EFBIG);
        assert_non_null(strstr(err, "more than 10000 folders repeat a folder already read"));
        source_revision_free(rev);
        sb_release(&sb);
}

static void test_self_and_depth(void **state)
{
        tree_walk_limits lim = {0};
        strbuf sb = STRBUF_INIT;
        char *err = NULL;
        source_revision *rev;

        /* a tree that names itself: refused, not walked forever */
        assert_int_equal(walk("0 40000 again 0\n", &lim, &rev, &err), -EFBIG);
        source_revision_free(rev);
        free(err);

        for (int i = 0; i < 70; i++)
                sb_printf(&sb, "%d 40000 d %d\n", i, i + 1);
        assert_int_equal(walk(sb_str(&sb), &lim, &rev, &err), -EFBIG);
        assert_non_null(strstr(err, "folders nested deeper than 64 levels"));
        source_revision_free(rev);
        free(err);
        sb_release(&sb);
}

static void test_too_much_yaml(void **state)
{
        tree_walk_limits lim = {.max_file_size = 100, .max_total_size = 10};
        _cleanup_free_ char *err = NULL;
        source_revision *rev;

        assert_int_equal(walk("0 100644 a.yaml 123456\n0 100644 b.yaml 123456\n", &lim, &rev, &err),
                         -EFBIG);
        assert_string_equal(err, "the YAML files add up to more than 10 bytes");
        source_revision_free(rev);
}

static void test_missing_object(void **state)
{
        tree_walk_limits lim = {0};
        _cleanup_free_ char *err = NULL;
        source_revision *rev;

        assert_int_equal(walk("0 40000 clusters 1\n1 40000 gone 2\n", &lim, &rev, &err), -EIO);
        assert_string_equal(err, "cannot read folder clusters/gone: no such object");
        source_revision_free(rev);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ordinary_tree), cmocka_unit_test(test_too_many_entries),
            cmocka_unit_test(test_tree_bomb),     cmocka_unit_test(test_self_and_depth),
            cmocka_unit_test(test_too_much_yaml), cmocka_unit_test(test_missing_object),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
