/*
 * etcd's snapshot file read in-process (snapstore/bbolt.h): bbolt's check
 * (`tx.Check()`) and etcd's `snapshot status` figures, in one walk.
 *
 * The layout (bbolt's internal/common page.go and meta.go; little-endian,
 * as etcd's amd64 and arm64 builds write it):
 *   page header, 16 bytes: id u64, flags u16, count u16, overflow u32;
 *     flags: branch 0x01, leaf 0x02, meta 0x04, freelist 0x10; a page
 *     spans 1 + overflow pages of the meta's page size.
 *   meta (pages 0 and 1, after the header), 64 bytes: magic u32
 *     (0xED0CDAED), version u32 (2), pageSize u32, flags u32, root bucket
 *     {root pgid u64, sequence u64}, freelist pgid u64 (all ones: none
 *     written), pgid u64 (the high-water mark), txid u64, checksum u64 (the
 *     FNV-1a 64 of the 56 bytes before it).
 *   branch element, 16 bytes: pos u32, ksize u32, pgid u64; leaf element:
 *     flags u32 (0x01: the value is a bucket), pos u32, ksize u32, vsize
 *     u32; pos counts from the element itself, the value follows the key.
 *   bucket value: {root pgid u64, sequence u64}, then, when root is 0, the
 *     bucket inline: a page header and its leaf elements.
 *   freelist page: count page ids (u64); a count of 0xFFFF means the first
 *     u64 holds the count.
 *
 * Design decisions:
 *   - One in-order walk does both jobs, since etcd's figures come from
 *     iterating the buckets in key order: the root bucket's keys must be
 *     buckets, each name and then every key and value of that bucket feed a
 *     CRC-32C (values of nested buckets are nil to etcd: only their key);
 *     every such key counts; the last key of the bucket "key" gives the
 *     revision (its first 8 bytes, big-endian); the total size is the
 *     high-water mark times the page size (bbolt's tx.Size()).
 *   - The first problem found refuses the file; bbolt's check lists them
 *     all, but a snapshot with one is refused either way.
 *   - Each page is marked reached once in a map the size of the high-water
 *     mark, so a hostile file cannot make the walk loop; depth (branch
 *     levels and nested buckets) is bounded by BBOLT_MAX_DEPTH, so it
 *     cannot exhaust the stack either.
 *   - A branch page with no elements, and a page whose header names
 *     another id than where it is, are refused: bbolt never writes either.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapstore/bbolt.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define PAGE_HEADER  16
#define ELEMENT_SIZE 16
#define META_SIZE    64
#define META_SUMMED  56
#define MAGIC        0xED0CDAEDu
#define VERSION      2u

#define FLAG_BRANCH   0x01
#define FLAG_LEAF     0x02
#define FLAG_META     0x04
#define FLAG_FREELIST 0x10
#define LEAF_BUCKET   0x01

#define NO_FREELIST UINT64_MAX

enum { UNSEEN = 0, REACHED = 1, FREE = 2 };

static uint16_t le16(const uint8_t *p)
{
        return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
        return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static uint64_t be64(const uint8_t *p)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | p[i];
        return v;
}

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < n; i++) {
                h ^= p[i];
                h *= 0x100000001b3ull;
        }
        return h;
}

/* CRC-32C (Castagnoli), Go's hash/crc32 with crc32.Castagnoli; slicing by 8. */
static uint32_t crc_table[8][256];

static void crc_init(void)
{
        for (uint32_t i = 0; i < 256; i++) {
                uint32_t c = i;
                for (int k = 0; k < 8; k++)
                        c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
                crc_table[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; i++)
                for (int t = 1; t < 8; t++)
                        crc_table[t][i] =
                            (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t n)
{
        crc = ~crc;
        while (n >= 8) {
                uint32_t lo = crc ^ le32(p), hi = le32(p + 4);
                crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
                      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
                      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
                      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
                p += 8;
                n -= 8;
        }
        while (n--)
                crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        return ~crc;
}

typedef struct walk {
        const uint8_t *data;
        size_t len;
        uint64_t page_size, high_water;
        uint8_t *mark; /* per page below the high-water mark: UNSEEN, REACHED, FREE */
        char *error;
        /* etcd's figures */
        uint32_t crc;
        int64_t keys, revision;
} walk;

/* A page's bytes: from the file (id), or inline in a bucket's value. */
typedef struct node {
        const uint8_t *p;
        uint64_t len;
        uint64_t id; /* for messages: the page, or the page holding the inline bucket */
        bool is_inline;
} node;

/* A byte string: a key, or where a bound is open (ptr NULL). */
typedef struct bytes {
        const uint8_t *p;
        uint64_t n;
} bytes;

_printf_(2, 3) static void set_error(walk *w, const char *fmt, ...)
{
        if (!w->error) {
                va_list ap;
                va_start(ap, fmt);
                w->error = xvasprintf(fmt, ap);
                va_end(ap);
        }
}

/* The first problem found, and -EBADMSG (a constant the analyzer sees through). */
#define fail(w, ...) (set_error((w), __VA_ARGS__), -EBADMSG)

static int cmp(bytes a, bytes b)
{
        uint64_t n = a.n < b.n ? a.n : b.n;
        int c = n ? memcmp(a.p, b.p, n) : 0;
        if (c)
                return c;
        return a.n < b.n ? -1 : a.n > b.n;
}

static const char *where(const node *nd)
{
        return nd->is_inline ? "inline bucket on page" : "page";
}

/*
 * Page id's span, checked: within the high-water mark and the file, its
 * header naming it; every page of it marked reached once.
 */
static int reach_page(walk *w, uint64_t id, uint64_t from, node *ret)
{
        if (id >= w->high_water)
                return fail(w,
                            "page %llu (referenced from page %llu): past the high-water mark %llu",
                            (unsigned long long)id, (unsigned long long)from,
                            (unsigned long long)w->high_water);
        const uint8_t *p = w->data + id * w->page_size; /* high_water * page_size <= len */
        if (le64(p) != id)
                return fail(w, "page %llu: its header says page %llu", (unsigned long long)id,
                            (unsigned long long)le64(p));
        uint64_t overflow = le32(p + 12);
        if (overflow >= w->high_water - id)
                return fail(w, "page %llu: %llu overflow pages run past the high-water mark %llu",
                            (unsigned long long)id, (unsigned long long)overflow,
                            (unsigned long long)w->high_water);
        for (uint64_t i = id; i <= id + overflow; i++) {
                if (w->mark[i] == REACHED)
                        return fail(w, "page %llu: referenced twice (again from page %llu)",
                                    (unsigned long long)i, (unsigned long long)from);
                if (w->mark[i] == FREE)
                        return fail(w, "page %llu: in use and in the freelist",
                                    (unsigned long long)i);
                w->mark[i] = REACHED;
        }
        *ret = (node){.p = p, .len = (overflow + 1) * w->page_size, .id = id};
        return 0;
}

/* Element i's key (and for a leaf, its value and flags), bounds-checked. */
static int element(walk *w, const node *nd, bool leaf, uint16_t i, bytes *ret_key, bytes *ret_value,
                   uint32_t *ret_flags)
{
        uint64_t at = PAGE_HEADER + (uint64_t)i * ELEMENT_SIZE;
        const uint8_t *e = nd->p + at;
        uint64_t pos = le32(e + (leaf ? 4 : 0)), ksize = le32(e + (leaf ? 8 : 4));
        uint64_t vsize = leaf ? le32(e + 12) : 0;
        if (pos + ksize + vsize > nd->len - at)
                return fail(w, "%s %llu: element %u's key and value run past the page", where(nd),
                            (unsigned long long)nd->id, i);
        *ret_key = (bytes){e + pos, ksize};
        if (leaf) {
                *ret_value = (bytes){e + pos + ksize, vsize};
                *ret_flags = le32(e);
        }
        return 0;
}

static int walk_tree(walk *w, const node *nd, int depth, int level, bool is_key_bucket, bytes min,
                     bytes max, bytes *ret_last);

/* Key order within a page and against the ancestors' bounds (bbolt's verifyKeyOrder). */
static int check_order(walk *w, const node *nd, uint16_t i, bytes key, bytes running, bytes max)
{
        if (running.p && (i == 0 ? cmp(running, key) > 0 : cmp(running, key) >= 0))
                return fail(w, "%s %llu: key %u %s", where(nd), (unsigned long long)nd->id, i,
                            i == 0 ? "sorts before the key of its parent"
                                   : "is not after the key before it");
        if (max.p && cmp(key, max) >= 0)
                return fail(w, "%s %llu: key %u is not before the next key of its parent",
                            where(nd), (unsigned long long)nd->id, i);
        return 0;
}

/*
 * One leaf element seen in key order. level 0: a key of the root bucket
 * (a bucket etcd hashes by name); level 1: a key of such a bucket (hashed
 * with its value, counted); deeper: only checked.
 */
static int visit_leaf(walk *w, const node *nd, uint16_t i, int depth, int level, bool is_key_bucket,
                      bytes key, bytes value, uint32_t flags)
{
        bool bucket = flags & LEAF_BUCKET;
        if (level == 0 && !bucket)
                return fail(w, "page %llu: key %u of the root bucket is not a bucket",
                            (unsigned long long)nd->id, i);
        if (level <= 1)
                w->crc = crc32c_update(w->crc, key.p, key.n);
        if (level == 1) {
                if (!bucket)
                        w->crc = crc32c_update(w->crc, value.p, value.n);
                w->keys++;
                if (is_key_bucket) {
                        if (key.n < 17)
                                return fail(w,
                                            "%s %llu: key %u of bucket \"key\" is not a revision",
                                            where(nd), (unsigned long long)nd->id, i);
                        w->revision = (int64_t)be64(key.p);
                }
        }
        if (!bucket)
                return 0;
        if (value.n < 16)
                return fail(w, "%s %llu: bucket %u's value is shorter than a bucket header",
                            where(nd), (unsigned long long)nd->id, i);
        bool child_is_key = level == 0 && key.n == 3 && memcmp(key.p, "key", 3) == 0;
        uint64_t root = le64(value.p);
        bytes none = {0};
        if (root != 0) {
                node child = {0};
                int r = reach_page(w, root, nd->id, &child);
                if (r < 0)
                        return r;
                return walk_tree(w, &child, depth + 1, level + 1, child_is_key, none, none, NULL);
        }
        node in = {.p = value.p + 16, .len = value.n - 16, .id = nd->id, .is_inline = true};
        if (in.len < PAGE_HEADER || le16(in.p + 8) != FLAG_LEAF)
                return fail(w, "page %llu: inline bucket %u is not a leaf page",
                            (unsigned long long)nd->id, i);
        return walk_tree(w, &in, depth + 1, level + 1, child_is_key, none, none, NULL);
}

/*
 * A bucket's tree from nd, in key order: keys in [min, max) (a bound with
 * NULL p is open), *ret_last the largest key in it (may be NULL).
 */
static int walk_tree(walk *w, const node *nd, int depth, int level, bool is_key_bucket, bytes min,
                     bytes max, bytes *ret_last)
{
        if (depth > BBOLT_MAX_DEPTH)
                return fail(w, "%s %llu: buckets and branches nested deeper than %d", where(nd),
                            (unsigned long long)nd->id, BBOLT_MAX_DEPTH);
        uint16_t flags = le16(nd->p + 8), count = le16(nd->p + 10);
        if (flags != FLAG_BRANCH && flags != FLAG_LEAF)
                return fail(w, "%s %llu: flags 0x%x where a branch or leaf page belongs", where(nd),
                            (unsigned long long)nd->id, flags);
        if ((uint64_t)count * ELEMENT_SIZE > nd->len - PAGE_HEADER)
                return fail(w, "%s %llu: %u elements do not fit in the page", where(nd),
                            (unsigned long long)nd->id, count);
        bool leaf = flags == FLAG_LEAF;
        if (!leaf && count == 0)
                return fail(w, "page %llu: a branch page with no elements",
                            (unsigned long long)nd->id);
        bytes running = min, last = {0};
        for (uint16_t i = 0; i < count; i++) {
                bytes key = {0}, value = {0};
                uint32_t eflags = 0;
                int r = element(w, nd, leaf, i, &key, &value, &eflags);
                if (r < 0)
                        return r;
                r = check_order(w, nd, i, key, running, max);
                if (r < 0)
                        return r;
                if (leaf) {
                        r = visit_leaf(w, nd, i, depth, level, is_key_bucket, key, value, eflags);
                        running = last = key;
                } else {
                        bytes next = max;
                        if (i + 1 < count) {
                                bytes v = {0};
                                uint32_t f = 0;
                                r = element(w, nd, false, i + 1, &next, &v, &f);
                                if (r < 0)
                                        return r;
                        }
                        node child = {0};
                        r = reach_page(w,
                                       le64(nd->p + PAGE_HEADER + (uint64_t)i * ELEMENT_SIZE + 8),
                                       nd->id, &child);
                        if (r < 0)
                                return r;
                        bytes sub = {0};
                        r = walk_tree(w, &child, depth + 1, level, is_key_bucket, key, next, &sub);
                        running = last = sub.p ? sub : key;
                }
                if (r < 0)
                        return r;
        }
        if (ret_last)
                *ret_last = last;
        return 0;
}

/* Why meta page m (at off, page size psz) is not valid, or NULL. */
static const char *meta_problem(const uint8_t *data, size_t len, uint64_t off, uint64_t psz,
                                uint64_t id)
{
        if (off > len || len - off < PAGE_HEADER + META_SIZE)
                return "past the end of the file";
        const uint8_t *p = data + off, *m = p + PAGE_HEADER;
        if (le32(m) != MAGIC)
                return "not a bbolt meta page (bad magic)";
        if (le32(m + 4) != VERSION)
                return "bbolt format version is not 2";
        if (le64(m + META_SUMMED) != fnv1a64(m, META_SUMMED))
                return "checksum mismatch";
        if (le32(m + 8) != psz)
                return "its page size differs";
        if (le64(p) != id || le16(p + 8) != FLAG_META)
                return "its page header is not a meta page's";
        return NULL;
}

static bool page_size_ok(uint64_t psz)
{
        return psz >= 512 && psz <= 65536 && (psz & (psz - 1)) == 0;
}

/*
 * The page size (meta 0's; when meta 0 is damaged, the one at which a
 * valid meta 1 sits one page in) and the meta bbolt would use.
 */
static int pick_meta(walk *w, const uint8_t **ret_meta)
{
        uint64_t psz = 0;
        if (w->len >= PAGE_HEADER + META_SIZE)
                psz = le32(w->data + PAGE_HEADER + 8);
        if (!page_size_ok(psz))
                psz = 0;
        const char *why0 = psz ? meta_problem(w->data, w->len, 0, psz, 0)
                           : w->len < PAGE_HEADER + META_SIZE
                               ? "past the end of the file"
                               : "its page size is not a power of two from 512 to 65536";
        const char *why1 = psz ? meta_problem(w->data, w->len, psz, psz, 1) : "not found";
        if (why0 && why1) {
                for (uint64_t s = 512; s <= 65536; s <<= 1)
                        if (s != psz && !meta_problem(w->data, w->len, s, s, 1)) {
                                psz = s;
                                why1 = NULL;
                                break;
                        }
        }
        if (why0 && why1)
                return fail(w, "both meta pages are invalid (meta 0: %s; meta 1: %s)", why0, why1);
        const uint8_t *m0 = w->data + PAGE_HEADER, *m1 = w->data + psz + PAGE_HEADER;
        const uint8_t *m = why0 ? m1 : why1 ? m0 : le64(m1 + 48) > le64(m0 + 48) ? m1 : m0;
        w->page_size = psz;
        *ret_meta = m;
        return 0;
}

/* The freelist's page ids marked free (a page freed twice refused). */
static int read_freelist(walk *w, uint64_t id)
{
        node fl = {0};
        int r = reach_page(w, id, id, &fl);
        if (r < 0)
                return r;
        if (le16(fl.p + 8) != FLAG_FREELIST)
                return fail(w, "page %llu: the meta's freelist page has flags 0x%x",
                            (unsigned long long)id, le16(fl.p + 8));
        uint64_t count = le16(fl.p + 10), first = 0;
        if (count == 0xFFFF) {
                if (fl.len < PAGE_HEADER + 8)
                        return fail(w, "page %llu: freelist count past the page",
                                    (unsigned long long)id);
                count = le64(fl.p + PAGE_HEADER);
                first = 1;
        }
        if (count > (fl.len - PAGE_HEADER) / 8 - first)
                return fail(w, "page %llu: %llu free page ids do not fit in the freelist page",
                            (unsigned long long)id, (unsigned long long)count);
        for (uint64_t i = 0; i < count; i++) {
                uint64_t f = le64(fl.p + PAGE_HEADER + (first + i) * 8);
                if (f >= w->high_water)
                        return fail(w, "page %llu: free page %llu is past the high-water mark %llu",
                                    (unsigned long long)id, (unsigned long long)f,
                                    (unsigned long long)w->high_water);
                if (w->mark[f] == FREE)
                        return fail(w, "page %llu: freed twice (freelist page %llu)",
                                    (unsigned long long)f, (unsigned long long)id);
                if (w->mark[f] == REACHED)
                        return fail(w, "page %llu: in use and in the freelist",
                                    (unsigned long long)f);
                w->mark[f] = FREE;
        }
        return 0;
}

int bbolt_check(const uint8_t *data, size_t len, snapshot_status *ret, char **ret_error)
{
        assert(data || len == 0);
        static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
        pthread_once(&crc_once, crc_init);
        walk w = {.data = data, .len = len};
        const uint8_t *m = NULL;
        int r = pick_meta(&w, &m);
        if (r < 0)
                goto out;
        uint64_t root = le64(m + 16), freelist = le64(m + 32);
        w.high_water = le64(m + 40);
        if (w.high_water < 2 || w.high_water > len / w.page_size) {
                r = fail(&w,
                         "the file is truncated or the meta is wrong: its high-water mark is page "
                         "%llu (%llu bytes of %llu-byte pages), the file has %zu bytes",
                         (unsigned long long)w.high_water,
                         (unsigned long long)(w.high_water * w.page_size),
                         (unsigned long long)w.page_size, len);
                goto out;
        }
        w.mark = xcalloc(w.high_water, 1);
        w.mark[0] = w.mark[1] = REACHED; /* the meta pages */
        if (freelist != NO_FREELIST) {
                r = read_freelist(&w, freelist);
                if (r < 0)
                        goto out;
        }
        node rootp = {0};
        r = reach_page(&w, root, 0, &rootp);
        if (r < 0)
                goto out;
        bytes none = {0};
        r = walk_tree(&w, &rootp, 0, 0, false, none, none, NULL);
        if (r < 0)
                goto out;
        /* with a freelist written, every page is in use or free; without one, bbolt takes
         * every page not reached as free */
        for (uint64_t i = 0; freelist != NO_FREELIST && i < w.high_water; i++)
                if (w.mark[i] == UNSEEN) {
                        r = fail(&w, "page %llu: neither reachable nor in the freelist",
                                 (unsigned long long)i);
                        goto out;
                }
        *ret = (snapshot_status){
            .hash = w.crc,
            .revision = w.revision,
            .total_keys = w.keys,
            .total_size = (int64_t)(w.high_water * w.page_size),
        };
out:
        free(w.mark);
        if (r < 0)
                *ret_error = TAKE_PTR(w.error);
        free(w.error);
        return r;
}

int bbolt_check_file(const char *path, snapshot_status *ret, char **ret_error)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                *ret_error = xasprintf("cannot open %s: %s", path, strerror(e));
                return -e;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int e = errno;
                *ret_error = xasprintf("cannot read %s: %s", path, strerror(e));
                return -e;
        }
        if (st.st_size == 0) {
                *ret_error = xstrdup("the file is empty");
                return -EBADMSG;
        }
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
                int e = errno;
                *ret_error = xasprintf("cannot map %s: %s", path, strerror(e));
                return -e;
        }
        int r = bbolt_check(map, (size_t)st.st_size, ret, ret_error);
        munmap(map, (size_t)st.st_size);
        return r;
}
