/*
 * The reader of etcd's snapshot files (snapstore/bbolt.h) on small bbolt
 * files built here page by page, the way bbolt lays them out: a sound
 * file gives etcd's figures (the hash checked against a plain bitwise
 * CRC-32C of what etcd hashes), and each damage a remote copy could carry
 * is refused with a message naming it and its page: both meta checksums
 * bad, a page referenced twice, a page both used and free, a page freed
 * twice, keys out of order in a page and across a branch's children, a
 * page id past the end, a truncated file, a page neither used nor free, a
 * long freelist's count past its page,
 * wrong page types, an element past its page, a root key that is not a
 * bucket, buckets nested past the bound. One bad meta is not fatal: bbolt
 * uses the other, and so does the reader. The fuzz target's seeds that are
 * real snapshots of etcd 3.5.16 and 3.4.23 give the figures etcd's tools
 * print for them, and its damaged seeds are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snapstore/bbolt.h"
#include "util/xalloc.h"

#define PSZ   4096
#define PAGES 8

static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 0x100000001b3ull;
        return h;
}

/* bit by bit, independent of the reader's tables */
static uint32_t crc32c(uint32_t crc, const void *data, size_t n)
{
        const uint8_t *p = data;
        crc = ~crc;
        while (n--) {
                crc ^= *p++;
                for (int k = 0; k < 8; k++)
                        crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        }
        return ~crc;
}

/* where an element's key starts, from the element: a leaf's pos is its second field */
static uint32_t leaf_pos(const uint8_t *e)
{
        return (uint32_t)e[4] | (uint32_t)e[5] << 8 | (uint32_t)e[6] << 16 | (uint32_t)e[7] << 24;
}

static uint32_t branch_pos(const uint8_t *e)
{
        return (uint32_t)e[0] | (uint32_t)e[1] << 8 | (uint32_t)e[2] << 16 | (uint32_t)e[3] << 24;
}

static void header(uint8_t *p, uint64_t id, uint16_t flags, uint16_t count)
{
        put64(p, id);
        put16(p + 8, flags);
        put16(p + 10, count);
        put32(p + 12, 0);
}

static void meta(uint8_t *file, uint64_t id, uint64_t txid, uint64_t root, uint64_t freelist,
                 uint64_t high_water)
{
        uint8_t *p = file + id * PSZ, *m = p + 16;
        header(p, id, 0x04, 0);
        put32(m, 0xED0CDAED);
        put32(m + 4, 2);
        put32(m + 8, PSZ);
        put32(m + 12, 0);
        put64(m + 16, root);
        put64(m + 24, 0);
        put64(m + 32, freelist);
        put64(m + 40, high_water);
        put64(m + 48, txid);
        put64(m + 56, fnv1a64(m, 56));
}

typedef struct kv {
        const void *k;
        size_t kn;
        const void *v;
        size_t vn;
        uint32_t flags;
} kv;

/* A leaf page's elements and data at p (a page, or an inline bucket's page); its length. */
static size_t leaf(uint8_t *p, uint64_t id, const kv *kvs, uint16_t n)
{
        header(p, id, 0x02, n);
        size_t data = 16 + (size_t)n * 16;
        for (uint16_t i = 0; i < n; i++) {
                uint8_t *e = p + 16 + (size_t)i * 16;
                put32(e, kvs[i].flags);
                put32(e + 4, (uint32_t)(p + data - e));
                put32(e + 8, (uint32_t)kvs[i].kn);
                put32(e + 12, (uint32_t)kvs[i].vn);
                memcpy(p + data, kvs[i].k, kvs[i].kn);
                memcpy(p + data + kvs[i].kn, kvs[i].v, kvs[i].vn);
                data += kvs[i].kn + kvs[i].vn;
        }
        return data;
}

static void branch(uint8_t *p, uint64_t id, const uint8_t *const *keys, const uint64_t *children,
                   uint16_t n)
{
        header(p, id, 0x01, n);
        size_t data = 16 + (size_t)n * 16;
        for (uint16_t i = 0; i < n; i++) {
                uint8_t *e = p + 16 + (size_t)i * 16;
                put32(e, (uint32_t)(p + data - e));
                put32(e + 4, 17);
                put64(e + 8, children[i]);
                memcpy(p + data, keys[i], 17);
                data += 17;
        }
}

/* etcd's key of a revision: main, '_', sub; big-endian */
static void rev_key(uint8_t k[17], uint64_t main)
{
        for (int i = 0; i < 8; i++)
                k[i] = (uint8_t)(main >> (56 - 8 * i));
        k[8] = '_';
        memset(k + 9, 0, 8);
}

typedef struct built {
        uint8_t *file;
        size_t len;
        uint8_t keys[5][17];
        uint32_t hash; /* what etcd's status computes */
} built;

static const char VALUES[5][8] = {"one", "two", "three", "four", "five"};
static const uint8_t CI[8] = {0, 0, 0, 0, 0, 0, 0, 42};

/*
 * Pages: 0 and 1 meta (txid 10 and 9), 2 the freelist (page 7 free), 3 the
 * root bucket: "key" (a bucket at branch page 4 over leaves 5: revisions
 * 1-3, and 6: 4-5) and "meta" (an inline bucket: consistent_index).
 */
static void build(built *b)
{
        b->len = PAGES * PSZ;
        b->file = xcalloc(1, b->len);
        meta(b->file, 0, 10, 3, 2, PAGES);
        meta(b->file, 1, 9, 3, 2, PAGES);
        uint8_t *fl = b->file + 2 * PSZ;
        header(fl, 2, 0x10, 1);
        put64(fl + 16, 7);
        header(b->file + 7 * PSZ, 7, 0x02, 0);

        uint8_t key_bucket[16] = {0};
        put64(key_bucket, 4);
        uint8_t inline_meta[16 + 128] = {0};
        kv ci = {"consistent_index", 16, CI, sizeof(CI), 0};
        size_t inl = 16 + leaf(inline_meta + 16, 0, &ci, 1);
        kv root[] = {{"key", 3, key_bucket, 16, 1}, {"meta", 4, inline_meta, inl, 1}};
        leaf(b->file + 3 * PSZ, 3, root, 2);

        for (int i = 0; i < 5; i++)
                rev_key(b->keys[i], (uint64_t)i + 1);
        const uint8_t *bkeys[] = {b->keys[0], b->keys[3]};
        uint64_t children[] = {5, 6};
        branch(b->file + 4 * PSZ, 4, bkeys, children, 2);
        kv l5[3], l6[2];
        for (int i = 0; i < 5; i++) {
                kv e = {b->keys[i], 17, VALUES[i], strlen(VALUES[i]), 0};
                if (i < 3)
                        l5[i] = e;
                else
                        l6[i - 3] = e;
        }
        leaf(b->file + 5 * PSZ, 5, l5, 3);
        leaf(b->file + 6 * PSZ, 6, l6, 2);

        uint32_t h = crc32c(0, "key", 3);
        for (int i = 0; i < 5; i++) {
                h = crc32c(h, b->keys[i], 17);
                h = crc32c(h, VALUES[i], strlen(VALUES[i]));
        }
        h = crc32c(h, "meta", 4);
        h = crc32c(h, "consistent_index", 16);
        b->hash = crc32c(h, CI, sizeof(CI));
}

static void refused(const built *b, size_t len, const char *want)
{
        snapshot_status st = {0};
        char *why = NULL;
        int r = bbolt_check(b->file, len, &st, &why);
        if (r != -EBADMSG || !why || !strstr(why, want))
                fail_msg("want \"%s\", got %d: %s", want, r, why ? why : "(no message)");
        free(why);
        free(b->file);
}

static void test_sound_file(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        snapshot_status st = {0};
        char *why = NULL;
        assert_int_equal(bbolt_check(b.file, b.len, &st, &why), 0);
        assert_null(why);
        assert_int_equal(st.revision, 5);
        assert_int_equal(st.total_keys, 6);
        assert_int_equal(st.total_size, PAGES * PSZ);
        assert_int_equal(st.hash, b.hash);
        /* etcd's 32-byte sha256 trailer after the last page is not read */
        uint8_t *longer = xcalloc(1, b.len + 32);
        memcpy(longer, b.file, b.len);
        assert_int_equal(bbolt_check(longer, b.len + 32, &st, &why), 0);
        free(longer);
        free(b.file);
}

static void test_one_bad_meta_uses_the_other(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        b.file[16 + 48] ^= 0xff; /* meta 0's txid, its checksum left */
        snapshot_status st = {0};
        char *why = NULL;
        assert_int_equal(bbolt_check(b.file, b.len, &st, &why), 0);
        assert_int_equal(st.revision, 5);
        free(b.file);
}

static void test_both_meta_checksums_bad(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        b.file[16 + 48] ^= 0xff;
        b.file[PSZ + 16 + 48] ^= 0xff;
        refused(&b, b.len,
                "both meta pages are invalid (meta 0: checksum mismatch; meta 1: "
                "checksum mismatch)");
}

static void test_page_referenced_twice(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put64(b.file + 4 * PSZ + 16 + 16 + 8, 5); /* the branch's second child: page 5 again */
        refused(&b, b.len, "page 5: referenced twice (again from page 4)");
}

static void test_page_used_and_free(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put64(b.file + 2 * PSZ + 16, 6);
        refused(&b, b.len, "page 6: in use and in the freelist");
}

static void test_page_freed_twice(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put16(b.file + 2 * PSZ + 10, 2);
        put64(b.file + 2 * PSZ + 24, 7);
        refused(&b, b.len, "page 7: freed twice");
}

static void test_keys_out_of_order_in_a_page(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        /* leaf 5's second key made revision 0: before the first */
        uint8_t *e = b.file + 5 * PSZ + 16 + 16;
        memset(e + leaf_pos(e), 0, 8);
        refused(&b, b.len, "page 5: key 1 is not after the key before it");
}

static void test_keys_out_of_order_across_children(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        /* leaf 6 starts at revision 4 but its parent's key says 9 */
        uint8_t *e = b.file + 4 * PSZ + 16 + 16;
        e[branch_pos(e) + 7] = 9;
        refused(&b, b.len, "page 6: key 0 sorts before the key of its parent");
}

static void test_key_past_the_next_parent_key(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        /* leaf 5's last key made revision 4: not below the next child's key */
        uint8_t *e = b.file + 5 * PSZ + 16 + 32;
        e[leaf_pos(e) + 7] = 4;
        refused(&b, b.len, "page 5: key 2 is not before the next key of its parent");
}

static void test_page_past_the_end(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put64(b.file + 4 * PSZ + 16 + 16 + 8, 99);
        refused(&b, b.len, "page 99 (referenced from page 4): past the high-water mark 8");
}

static void test_truncated_file(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        refused(&b, 6 * PSZ + 100, "the file is truncated");
}

static void test_truncated_before_the_metas(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        refused(&b, 40, "both meta pages are invalid (meta 0: past the end of the file");
}

static void test_page_neither_used_nor_free(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put16(b.file + 2 * PSZ + 10, 0); /* the freelist forgets page 7 */
        refused(&b, b.len, "page 7: neither reachable nor in the freelist");
}

static void test_no_freelist_written(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        /* bbolt's NoFreelistSync: every page not reached is free, page 2 included */
        meta(b.file, 0, 10, 3, UINT64_MAX, PAGES);
        meta(b.file, 1, 9, 3, UINT64_MAX, PAGES);
        snapshot_status st = {0};
        char *why = NULL;
        assert_int_equal(bbolt_check(b.file, b.len, &st, &why), 0);
        assert_int_equal(st.hash, b.hash);
        free(b.file);
}

static void test_long_freelist(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        /* a count of 0xFFFF: the real count is the first id's place, as bbolt writes a long list */
        uint8_t *fl = b.file + 2 * PSZ;
        put16(fl + 10, 0xFFFF);
        put64(fl + 16, 1);
        put64(fl + 24, 7);
        snapshot_status st = {0};
        char *why = NULL;
        assert_int_equal(bbolt_check(b.file, b.len, &st, &why), 0);
        /* a count the page cannot hold */
        put64(fl + 16, 100000);
        refused(&b, b.len, "page 2: 100000 free page ids do not fit in the freelist page");
}

static void test_wrong_page_types(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put16(b.file + 5 * PSZ + 8, 0x10);
        refused(&b, b.len, "page 5: flags 0x10 where a branch or leaf page belongs");
        build(&b);
        put16(b.file + 2 * PSZ + 8, 0x02);
        refused(&b, b.len, "page 2: the meta's freelist page has flags 0x2");
        build(&b);
        put64(b.file + 4 * PSZ + 16 + 8, 1); /* a branch pointing at meta page 1 */
        refused(&b, b.len, "page 1: referenced twice");
}

static void test_element_past_its_page(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put32(b.file + 6 * PSZ + 16 + 12, 100000); /* vsize */
        refused(&b, b.len, "page 6: element 0's key and value run past the page");
        build(&b);
        put16(b.file + 6 * PSZ + 10, 300); /* count */
        refused(&b, b.len, "page 6: 300 elements do not fit in the page");
}

static void test_root_key_not_a_bucket(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        put32(b.file + 3 * PSZ + 16 + 16, 0); /* "meta" loses its bucket flag */
        refused(&b, b.len, "page 3: key 1 of the root bucket is not a bucket");
}

static void test_nesting_bounded(void **unused)
{
        (void)unused;
        built b;
        build(&b);
        /* "meta" holds inline buckets nested 70 deep, each in the one before: a level is
         * a bucket header, a leaf page header and one element "n" whose value is the next
         * level; the last is an empty leaf */
        enum { LEVELS = 70, LEVEL = 16 + 16 + 16 + 1 };
        static uint8_t chain[(LEVELS - 1) * LEVEL + 32];
        memset(chain, 0, sizeof(chain));
        size_t len = sizeof(chain);
        for (int i = 0; i < LEVELS - 1; i++) {
                uint8_t *lvl = chain + (size_t)i * LEVEL, *e = lvl + 32;
                header(lvl + 16, 0, 0x02, 1);
                put32(e, 1);
                put32(e + 4, 16);
                put32(e + 8, 1);
                put32(e + 12, (uint32_t)(len - (size_t)(i + 1) * LEVEL));
                lvl[48] = 'n';
        }
        header(chain + (size_t)(LEVELS - 1) * LEVEL + 16, 0, 0x02, 0);
        kv root[] = {{"meta", 4, chain, len, 1}};
        memset(b.file + 3 * PSZ, 0, PSZ);
        leaf(b.file + 3 * PSZ, 3, root, 1);
        /* pages 4 to 6 are now free */
        put16(b.file + 2 * PSZ + 10, 4);
        for (int i = 0; i < 4; i++)
                put64(b.file + 2 * PSZ + 16 + 8 * i, (uint64_t)(i == 3 ? 7 : 4 + i));
        refused(&b, b.len, "inline bucket on page 3: buckets and branches nested deeper than 64");
}

/*
 * The fuzz seeds that are real snapshots (etcd 3.5.16 and 3.4.23, five keys
 * put, one deleted): the figures etcdutl and etcdctl print for them; the
 * damaged seeds refused (etcdutl 3.5.16 panics on two of them).
 */
static void seed(const char *name, int want, const snapshot_status *want_st, const char *want_why)
{
        const char *root = getenv("GITCD_SOURCE_ROOT");
        if (!root)
                skip();
        char *path = xasprintf("%s/fuzz/corpus/bbolt/%s", root, name);
        snapshot_status st = {0};
        char *why = NULL;
        int r = bbolt_check_file(path, &st, &why);
        if (r != want || (want_why && (!why || !strstr(why, want_why))))
                fail_msg("%s: got %d: %s", name, r, why ? why : "");
        if (want_st) {
                assert_int_equal(st.hash, want_st->hash);
                assert_int_equal(st.revision, want_st->revision);
                assert_int_equal(st.total_keys, want_st->total_keys);
                assert_int_equal(st.total_size, want_st->total_size);
        }
        free(why);
        free(path);
}

static void test_real_seeds(void **unused)
{
        (void)unused;
        snapshot_status v35 = {2424774261u, 8, 13, 20480}, v34 = {1235480577u, 8, 11, 20480};
        seed("etcd-3.5.16-five-keys.db", 0, &v35, NULL);
        seed("etcd-3.4.23-five-keys.db", 0, &v34, NULL);
        seed("truncated.db", -EBADMSG, NULL, "the file is truncated");
        seed("both-meta-checksums-bad.db", -EBADMSG, NULL,
             "meta 0: checksum mismatch; meta 1: checksum mismatch");
        seed("root-past-the-end.db", -EBADMSG, NULL, "page 1000 (referenced from page 0)");
        seed("meta-only.db", -EBADMSG, NULL, "the file is truncated");
        seed("empty.db", -EBADMSG, NULL, "the file is empty");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sound_file),
            cmocka_unit_test(test_one_bad_meta_uses_the_other),
            cmocka_unit_test(test_both_meta_checksums_bad),
            cmocka_unit_test(test_page_referenced_twice),
            cmocka_unit_test(test_page_used_and_free),
            cmocka_unit_test(test_page_freed_twice),
            cmocka_unit_test(test_keys_out_of_order_in_a_page),
            cmocka_unit_test(test_keys_out_of_order_across_children),
            cmocka_unit_test(test_key_past_the_next_parent_key),
            cmocka_unit_test(test_page_past_the_end),
            cmocka_unit_test(test_truncated_file),
            cmocka_unit_test(test_truncated_before_the_metas),
            cmocka_unit_test(test_page_neither_used_nor_free),
            cmocka_unit_test(test_no_freelist_written),
            cmocka_unit_test(test_long_freelist),
            cmocka_unit_test(test_wrong_page_types),
            cmocka_unit_test(test_element_past_its_page),
            cmocka_unit_test(test_root_key_not_a_bucket),
            cmocka_unit_test(test_nesting_bounded),
            cmocka_unit_test(test_real_seeds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
