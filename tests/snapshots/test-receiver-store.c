/*
 * The receiver's store mode (`gitcd snapshot receive --store-dir`,
 * snapstore/receiver.h) over real HTTPS on loopback, driven through the
 * `pvc` destination (snapstore/dest-pvc.c) with a writer that starts a
 * receiver on a folder standing for the claim mounted at subPath:
 *   - put, stat, get and delete of a key through the destination seam: the
 *     file is in the claim's folder at the key's path, byte for byte, with
 *     its SHA-256 in user.gitcd.sha256 where the file system takes it; stat
 *     names the size and the SHA-256 of the bytes on the volume (a file
 *     changed behind gitcd's back shows another hash); one writer is
 *     started for all of them and stopped when the destination is freed;
 *   - a writer that cannot start fails the operation with its message;
 *   - the target's writer (snapshot_pvc_writer_new) waits its turn while
 *     another writer of the cluster is in use, as long as it is told (not
 *     once told to stop), and then fails naming the holder;
 *   - a pvc location without a writer is refused (-EOPNOTSUPP), a restore
 *     source's subPath is split into the folder and the key;
 *   - hostile requests to the new verbs: a wrong or missing token (401),
 *     names that leave the folder or are hidden (400/404), another method
 *     (405), a folder, a link or a missing key (404), the restore verbs
 *     (404); a PUT with a wrong hash (422), more bytes than allowed (413)
 *     and a PUT cut short keep nothing, not even a temporary.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "api/spec.h"
#include "snapstore/destination.h"
#include "snapstore/receiver.h"
#include "snapshots/snapshot.h"
#include "targets/target.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

typedef struct lab {
        char *dir;        /* the test's folder */
        char *secret_dir; /* tls.crt, tls.key, token */
        char *claims;     /* one folder per claim, as the node simulator maps them */
        receiver_secret sec;
        int64_t max_bytes;
        receiver *r;
        char *url;
        int starts, stops;
        bool refuse_start;
} lab;

static int writer_start(void *userdata, const char *claim, const char *folder,
                        struct receiver_peer *ret_peer, char **ret_error)
{
        lab *l = userdata;
        if (l->refuse_start) {
                *ret_error = xstrdup("the writer Pod did not become ready");
                return -ETIMEDOUT;
        }
        assert_null(l->r);
        _cleanup_free_ char *claim_dir = path_join(l->claims, claim);
        _cleanup_free_ char *store = *folder ? path_join(claim_dir, folder) : xstrdup(claim_dir);
        assert_int_equal(mkdir_p(store, 0700), 0); /* the kubelet makes a missing subPath */
        _cleanup_free_ char *cert = path_join(l->secret_dir, "tls.crt");
        _cleanup_free_ char *key = path_join(l->secret_dir, "tls.key");
        _cleanup_free_ char *token = path_join(l->secret_dir, "token");
        receiver_opts o = {.store_dir = store,
                           .listen = "127.0.0.1:0",
                           .cert_file = cert,
                           .key_file = key,
                           .token_file = token,
                           .max_bytes = l->max_bytes};
        int k = receiver_start(&o, &l->r, ret_error);
        if (k < 0)
                return k;
        free(l->url);
        l->url = xasprintf("https://127.0.0.1:%d", receiver_port(l->r));
        *ret_peer = (receiver_peer){.url = l->url, .token = l->sec.token, .pin = l->sec.pin};
        l->starts++;
        return 0;
}

static void writer_stop(void *userdata)
{
        lab *l = userdata;
        receiver_stop(l->r);
        l->r = NULL;
        l->stops++;
}

static void lab_new(lab *l, int64_t max_bytes)
{
        *l = (lab){.max_bytes = max_bytes};
        l->dir = harness_tmpdir("receiver-store");
        l->secret_dir = path_join(l->dir, "secret");
        l->claims = path_join(l->dir, "claims");
        assert_int_equal(mkdir_p(l->secret_dir, 0700), 0);
        assert_int_equal(mkdir_p(l->claims, 0700), 0);
        assert_int_equal(receiver_secret_new(&l->sec), 0);
        const char *names[] = {"tls.crt", "tls.key", "token"};
        const char *values[] = {l->sec.cert_pem, l->sec.key_pem, l->sec.token};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *p = path_join(l->secret_dir, names[i]);
                assert_int_equal(write_file_atomic(p, values[i], strlen(values[i]), 0600), 0);
        }
}

static void lab_free(lab *l)
{
        receiver_stop(l->r);
        receiver_secret_release(&l->sec);
        free(l->url);
        free(l->secret_dir);
        free(l->claims);
        free(l->dir);
}

static snapshot_dest *open_pvc(lab *l, pvc_writer *w, const char *claim, const char *sub)
{
        *w = (pvc_writer){.start = writer_start, .stop = writer_stop, .userdata = l};
        storage_location loc = {
            .kind = DEST_PVC, .claim_name = (char *)claim, .sub_path = (char *)sub};
        snapshot_dest_context ctx = {.pvc = w};
        snapshot_dest *d = NULL;
        char *err = NULL;
        if (snapshot_dest_open(&loc, &ctx, &d, &err) < 0)
                fail_msg("open: %s", err);
        return d;
}

static void write_bytes(const char *path, size_t n, unsigned seed)
{
        _cleanup_free_ char *buf = xmalloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
                buf[i] = (char)((i * 2654435761u + seed) >> 13);
        assert_int_equal(write_file_atomic(path, buf, n, 0600), 0);
}

static size_t count_entries(const char *dir)
{
        path_list files = {0}, dirs = {0};
        if (list_tree(dir, &files, &dirs) < 0)
                return 0;
        size_t n = files.n + dirs.n;
        path_list_release(&files);
        path_list_release(&dirs);
        return n;
}

static void test_round_trip(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 0);
        pvc_writer w;
        snapshot_dest *d = open_pvc(&l, &w, "backups", "etcd/snapshots/");
        assert_string_equal(snapshot_dest_kind(d), "pvc");
        _cleanup_free_ char *where = snapshot_dest_location(d, "prod/orders/s-r1.db.gz");
        assert_string_equal(where, "pvc://backups/etcd/snapshots/prod/orders/s-r1.db.gz");
        assert_int_equal(l.starts, 0); /* opening touches nothing */

        _cleanup_free_ char *src = path_join(l.dir, "snap.db");
        write_bytes(src, (2u << 20) + 17, 1);
        char sha[65];
        assert_int_equal(hash_file_sha256_hex(src, sha, NULL), 0);
        const char *key = "prod/orders/s-r1.db.gz";
        char *err = NULL;
        if (snapshot_dest_put_file(d, key, src, sha, &err) < 0)
                fail_msg("put: %s", err);

        /* the file is in the claim's folder, at the key's path, whole */
        _cleanup_free_ char *stored =
            xasprintf("%s/backups/etcd/snapshots/prod/orders/s-r1.db.gz", l.claims);
        char got[65];
        assert_int_equal(hash_file_sha256_hex(stored, got, NULL), 0);
        assert_string_equal(got, sha);
        char attr[80] = "";
        ssize_t an = getxattr(stored, "user.gitcd.sha256", attr, sizeof(attr) - 1);
        if (an >= 0)
                assert_string_equal(attr, sha);
        else
                assert_int_equal(errno, ENOTSUP);
        struct stat st;
        assert_int_equal(stat(stored, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        _cleanup_free_ char *folder = xasprintf("%s/backups/etcd/snapshots/prod/orders", l.claims);
        assert_int_equal(count_entries(folder), 1); /* no temporary left */

        /* a sha that is not the file's is refused before anything is kept */
        const char *wrong = "0000000000000000000000000000000000000000000000000000000000000000";
        assert_int_equal(snapshot_dest_put_file(d, "prod/orders/other.db", src, wrong, &err),
                         -EBADMSG);
        free(err);
        err = NULL;
        assert_int_equal(count_entries(folder), 1);

        dest_object o = {0};
        if (snapshot_dest_stat(d, key, &o, &err) < 0)
                fail_msg("stat: %s", err);
        assert_int_equal(o.size, (2 << 20) + 17);
        assert_string_equal(o.sha256_hex, sha);
        int64_t now_ms = (int64_t)time(NULL) * 1000;
        assert_true(o.mtime_ms > now_ms - 600000 && o.mtime_ms < now_ms + 600000);
        dest_object_release(&o);

        _cleanup_free_ char *back = path_join(l.dir, "back.db");
        if (snapshot_dest_get_file(d, key, back, &err) < 0)
                fail_msg("get: %s", err);
        assert_int_equal(hash_file_sha256_hex(back, got, NULL), 0);
        assert_string_equal(got, sha);
        _cleanup_free_ char *part = xasprintf("%s.part", back);
        assert_false(path_exists(part));

        /* bytes changed on the volume show in the hash stat answers */
        write_bytes(stored, (2u << 20) + 17, 2);
        if (snapshot_dest_stat(d, key, &o, &err) < 0)
                fail_msg("stat: %s", err);
        assert_string_not_equal(o.sha256_hex, sha);
        dest_object_release(&o);

        /* absent keys */
        assert_int_equal(snapshot_dest_stat(d, "prod/orders/none.db", &o, &err), -ENOENT);
        free(err);
        err = NULL;
        _cleanup_free_ char *none = path_join(l.dir, "none.db");
        assert_int_equal(snapshot_dest_get_file(d, "prod/orders/none.db", none, &err), -ENOENT);
        free(err);
        err = NULL;
        assert_false(path_exists(none));
        _cleanup_free_ char *none_part = xasprintf("%s.part", none);
        assert_false(path_exists(none_part));

        /* delete: that key only, then it is gone */
        _cleanup_free_ char *neighbour = xasprintf("%s/keep.db", folder);
        write_bytes(neighbour, 10, 3);
        if (snapshot_dest_delete(d, key, &err) < 0)
                fail_msg("delete: %s", err);
        assert_false(path_exists(stored));
        assert_true(path_exists(neighbour));
        assert_int_equal(snapshot_dest_delete(d, key, &err), -ENOENT);
        free(err);
        err = NULL;
        /* a folder is never deleted, nor a bad key passed on */
        assert_int_equal(snapshot_dest_delete(d, "prod/orders", &err), -ENOENT);
        free(err);
        err = NULL;
        assert_true(path_exists(neighbour));
        assert_int_equal(snapshot_dest_delete(d, "prod/../orders/keep.db", &err), -EINVAL);
        free(err);
        err = NULL;

        assert_int_equal(l.starts, 1);
        assert_int_equal(l.stops, 0);
        snapshot_dest_free(d);
        assert_int_equal(l.stops, 1);
        lab_free(&l);
}

static void test_open(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 0);
        storage_location loc = {.kind = DEST_PVC, .claim_name = "backups", .sub_path = "x"};
        snapshot_dest *d = NULL;
        char *err = NULL;
        /* no writer: not on this target */
        assert_int_equal(snapshot_dest_open(&loc, NULL, &d, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err, "Kubernetes"));
        free(err);
        err = NULL;
        char *key = NULL;
        assert_int_equal(snapshot_source_open(&loc, NULL, &d, &key, &err), -EOPNOTSUPP);
        free(err);
        err = NULL;

        /* a restore source: folder and key; fetched through the same writer */
        pvc_writer w = {.start = writer_start, .stop = writer_stop, .userdata = &l};
        snapshot_dest_context ctx = {.pvc = &w};
        loc.sub_path = "etcd/prod/s-r5.db";
        if (snapshot_source_open(&loc, &ctx, &d, &key, &err) < 0)
                fail_msg("source: %s", err);
        assert_string_equal(key, "s-r5.db");
        _cleanup_free_ char *where = snapshot_dest_location(d, key);
        assert_string_equal(where, "pvc://backups/etcd/prod/s-r5.db");
        _cleanup_free_ char *file = xasprintf("%s/backups/etcd/prod/s-r5.db", l.claims);
        _cleanup_free_ char *fdir = xasprintf("%s/backups/etcd/prod", l.claims);
        assert_int_equal(mkdir_p(fdir, 0700), 0);
        write_bytes(file, 5000, 4);
        _cleanup_free_ char *to = path_join(l.dir, "restore.db");
        if (snapshot_dest_get_file(d, key, to, &err) < 0)
                fail_msg("get: %s", err);
        char a[65], b[65];
        assert_int_equal(hash_file_sha256_hex(file, a, NULL), 0);
        assert_int_equal(hash_file_sha256_hex(to, b, NULL), 0);
        assert_string_equal(a, b);
        snapshot_dest_free(d);
        free(key);
        key = NULL;

        const char *bad[] = {"", "etcd/", "etcd/.hidden", "../x.db"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                loc.sub_path = (char *)bad[i];
                assert_int_equal(snapshot_source_open(&loc, &ctx, &d, &key, &err), -EINVAL);
                free(err);
                err = NULL;
        }
        loc.sub_path = "../up";
        assert_int_equal(snapshot_dest_open(&loc, &ctx, &d, &err), -EINVAL);
        free(err);
        err = NULL;

        /* a writer that does not start fails the operation with its reason */
        l.refuse_start = true;
        loc.sub_path = "etcd";
        if (snapshot_dest_open(&loc, &ctx, &d, &err) < 0)
                fail_msg("open: %s", err);
        assert_int_equal(snapshot_dest_put_file(d, "k.db", file, NULL, &err), -ETIMEDOUT);
        assert_non_null(strstr(err, "did not become ready"));
        free(err);
        snapshot_dest_free(d);
        assert_int_equal(l.stops, 1); /* only the writer that started is stopped */
        lab_free(&l);
}

static size_t sink(char *data, size_t size, size_t nmemb, void *userdata)
{
        (void)data;
        (void)userdata;
        return size * nmemb;
}

typedef struct feed {
        const char *data;
        size_t len, at, cut; /* cut: abort after this many bytes (0: never) */
} feed;

static size_t feed_read(char *buf, size_t size, size_t nitems, void *userdata)
{
        feed *f = userdata;
        if (f->cut && f->at >= f->cut)
                return CURL_READFUNC_ABORT;
        size_t n = size * nitems;
        if (n > f->len - f->at)
                n = f->len - f->at;
        if (f->cut && n > f->cut - f->at)
                n = f->cut - f->at;
        memcpy(buf, f->data + f->at, n);
        f->at += n;
        return n;
}

/* A raw request; the HTTP status (0 when the connection failed or was cut). */
static long raw(const lab *l, const char *method, const char *path, const char *token,
                const char *sha, const char *body, size_t len, size_t cut)
{
        CURL *c = curl_easy_init();
        assert_non_null(c);
        _cleanup_free_ char *url = xasprintf("%s%s", l->url, path);
        struct curl_slist *h = NULL;
        _cleanup_free_ char *auth = token ? xasprintf("Authorization: Bearer %s", token) : NULL;
        _cleanup_free_ char *shah = sha ? xasprintf(RECEIVER_HEADER_SHA256 ": %s", sha) : NULL;
        if (auth)
                h = curl_slist_append(h, auth);
        if (shah)
                h = curl_slist_append(h, shah);
        feed f = {.data = body, .len = len, .cut = cut};
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
        if (streq(method, "HEAD"))
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (body) {
                curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(c, CURLOPT_READFUNCTION, feed_read);
                curl_easy_setopt(c, CURLOPT_READDATA, &f);
                curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
        }
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        return status;
}

static char *sha_of(const lab *l, const char *data, size_t len)
{
        _cleanup_free_ char *p = path_join(l->dir, "sha-input");
        assert_int_equal(write_file_atomic(p, data, len, 0600), 0);
        char *hex = xmalloc(65);
        assert_int_equal(hash_file_sha256_hex(p, hex, NULL), 0);
        return hex;
}

static void test_hostile(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 1 << 20);
        receiver_peer peer;
        char *err = NULL;
        assert_int_equal(writer_start(&l, "claim", "snaps", &peer, &err), 0);
        _cleanup_free_ char *store = xasprintf("%s/claim/snaps", l.claims);
        const char *tok = l.sec.token;
        _cleanup_free_ char *kept = path_join(store, "a/kept.db");
        _cleanup_free_ char *adir = path_join(store, "a");
        assert_int_equal(mkdir_p(adir, 0700), 0);
        write_bytes(kept, 100, 5);
        _cleanup_free_ char *outside = path_join(l.claims, "claim/outside.db");
        write_bytes(outside, 100, 6);

        /* the token, on every new verb */
        const char *verbs[] = {"HEAD", "GET", "DELETE"};
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(raw(&l, verbs[i], "/files/a/kept.db", NULL, NULL, NULL, 0, 0),
                                 401);
                assert_int_equal(raw(&l, verbs[i], "/files/a/kept.db", "nope", NULL, NULL, 0, 0),
                                 401);
        }
        assert_true(path_exists(kept));
        assert_int_equal(raw(&l, "HEAD", "/files/a/kept.db", tok, NULL, NULL, 0, 0), 200);
        assert_int_equal(raw(&l, "GET", "/files/a/kept.db", tok, NULL, NULL, 0, 0), 200);

        /* names that leave the folder or are hidden: refused, nothing read or removed */
        const char *bad[] = {"/files/../outside.db",
                             "/files/%2e%2e/outside.db",
                             "/files/a/../../outside.db",
                             "/files/a/%2E%2E/%2e%2e/outside.db",
                             "/files/.hidden",
                             "/files/a/.kept.db.part",
                             "/files//abs",
                             "/files/",
                             "/files/a//kept.db",
                             "/files/a/",
                             "/files/a%00b",
                             "/files/a%0ab",
                             "/files/a\\b",
                             "/files/./a/kept.db"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                for (size_t v = 0; v < 3; v++) {
                        long st = raw(&l, verbs[v], bad[i], tok, NULL, NULL, 0, 0);
                        if (st != 400 && st != 404)
                                fail_msg("%s %s: %ld, expected a refusal", verbs[v], bad[i], st);
                }
        assert_true(path_exists(outside));
        assert_true(path_exists(kept));

        /* another method; the restore verbs are not served here */
        assert_int_equal(raw(&l, "POST", "/files/a/kept.db", tok, NULL, NULL, 0, 0), 405);
        assert_int_equal(raw(&l, "GET", "/state", tok, NULL, NULL, 0, 0), 404);
        assert_int_equal(raw(&l, "POST", "/commit", tok, NULL, NULL, 0, 0), 404);

        /* a folder, a link, a missing key: 404, and nothing goes */
        assert_int_equal(raw(&l, "DELETE", "/files/a", tok, NULL, NULL, 0, 0), 404);
        assert_int_equal(raw(&l, "GET", "/files/a", tok, NULL, NULL, 0, 0), 404);
        _cleanup_free_ char *link_file = path_join(store, "a/link.db");
        assert_int_equal(symlink(outside, link_file), 0);
        _cleanup_free_ char *link_dir = path_join(store, "up");
        _cleanup_free_ char *claim_dir = path_join(l.claims, "claim");
        assert_int_equal(symlink(claim_dir, link_dir), 0);
        assert_int_equal(raw(&l, "GET", "/files/a/link.db", tok, NULL, NULL, 0, 0), 404);
        assert_int_equal(raw(&l, "DELETE", "/files/a/link.db", tok, NULL, NULL, 0, 0), 404);
        assert_int_equal(raw(&l, "GET", "/files/up/outside.db", tok, NULL, NULL, 0, 0), 404);
        assert_int_equal(raw(&l, "DELETE", "/files/up/outside.db", tok, NULL, NULL, 0, 0), 404);
        assert_int_equal(raw(&l, "HEAD", "/files/a/none.db", tok, NULL, NULL, 0, 0), 404);
        assert_true(path_exists(outside));
        assert_true(path_exists(link_file));

        /* PUT: a wrong hash, too many bytes, a body cut short keep nothing */
        const char body[] = "hello";
        _cleanup_free_ char *other = sha_of(&l, "hellp", 5);
        assert_int_equal(raw(&l, "PUT", "/files/b/x.db", tok, other, body, 5, 0), 422);
        _cleanup_free_ char *bdir = path_join(store, "b");
        assert_int_equal(count_entries(bdir), 0);
        _cleanup_free_ char *big = xmalloc((1 << 20) + 1);
        memset(big, 'a', (1 << 20) + 1);
        _cleanup_free_ char *big_sha = sha_of(&l, big, (1 << 20) + 1);
        assert_int_equal(raw(&l, "PUT", "/files/b/big.db", tok, big_sha, big, (1 << 20) + 1, 0),
                         413);
        assert_int_equal(count_entries(bdir), 0);
        _cleanup_free_ char *half_sha = sha_of(&l, big, 1 << 19);
        assert_int_equal(raw(&l, "PUT", "/files/b/cut.db", tok, half_sha, big, 1 << 19, 1 << 18),
                         0);
        /* the receiver notices the connection is gone and removes the temporary */
        for (int i = 0; i < 200 && count_entries(bdir) > 0; i++)
                usleep(20 * 1000);
        assert_int_equal(count_entries(bdir), 0);
        /* a PUT over a link is refused, nothing written through it */
        _cleanup_free_ char *sha5 = sha_of(&l, body, 5);
        assert_int_equal(raw(&l, "PUT", "/files/up/outside.db", tok, sha5, body, 5, 0), 409);
        char a[65];
        assert_int_equal(hash_file_sha256_hex(outside, a, NULL), 0);
        assert_string_not_equal(a, sha5);

        /* the store folder is never emptied by a receiver starting or stopping */
        writer_stop(&l);
        assert_int_equal(writer_start(&l, "claim", "snaps", &peer, &err), 0);
        assert_true(path_exists(kept));
        lab_free(&l);
}

/*
 * A target whose cluster has another writer in use for the first
 * `busy_calls` starts (writer_start: -EAGAIN at once, naming the holder).
 */
static int busy_calls, start_calls;

static int busy_start(target *t, const etcd_cluster *c, const char *claim, const char *folder,
                      void **ret_handle, receiver_peer *ret_peer)
{
        (void)c, (void)claim, (void)folder;
        if (start_calls++ < busy_calls)
                return target_fail(t, -EAGAIN,
                                   "another snapshot writer of default/wb is in use by gitcd "
                                   "pid 4242");
        *ret_peer = (receiver_peer){.url = "https://127.0.0.1:1", .token = "t", .pin = "p"};
        *ret_handle = &start_calls;
        return 0;
}

static int busy_stop(target *t, const etcd_cluster *c, void *handle)
{
        (void)t, (void)c;
        assert_ptr_equal(handle, &start_calls);
        return 0;
}

static const target_ops busy_ops = {.name = "busy",
                                    .caps = TARGET_CAP_PVC_WRITER,
                                    .writer_start = busy_start,
                                    .writer_stop = busy_stop};

/*
 * The target's writer (snapshot_pvc_writer_new) waits, trying again, while
 * another writer of the cluster is in use, at most as long as it is told:
 * it starts when the other ends in time, and fails naming the holder and
 * the wait when not (at once without a wait).
 */
static void test_writer_waits_its_turn(void **unused)
{
        (void)unused;
        const char *yaml = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                           "metadata: {name: wb, namespace: default}\n"
                           "spec: {replicas: 1, version: \"3.5.16\"}\n";
        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(spec_load_buffer("wb.yaml", yaml, strlen(yaml), &set, &diags), 0);
        diag_list_release(&diags);
        target t = {.ops = &busy_ops};
        pvc_writer *w = snapshot_pvc_writer_new(&t, set.items[0]);
        assert_non_null(w);
        receiver_peer peer = {0};
        char *err = NULL;

        /* the other writer ends after a second: this one runs then */
        start_calls = 0;
        busy_calls = 1;
        snapshot_pvc_writer_set_wait(w, 10 * 1000, NULL);
        int64_t t0 = now_mono_ms();
        assert_int_equal(w->start(w->userdata, "claim", "", &peer, &err), 0);
        assert_int_equal(start_calls, 2);
        assert_true(now_mono_ms() - t0 >= 900);
        w->stop(w->userdata);

        /* no wait: refused at once, naming the holder */
        start_calls = 0;
        busy_calls = 1000;
        snapshot_pvc_writer_set_wait(w, 0, NULL);
        assert_int_equal(w->start(w->userdata, "claim", "", &peer, &err), -EAGAIN);
        assert_int_equal(start_calls, 1);
        assert_non_null(strstr(err, "in use by gitcd pid 4242"));
        free(err);
        err = NULL;

        /* a bounded wait that runs out: the holder and the wait are named */
        start_calls = 0;
        snapshot_pvc_writer_set_wait(w, 1500, NULL);
        t0 = now_mono_ms();
        assert_int_equal(w->start(w->userdata, "claim", "", &peer, &err), -EAGAIN);
        assert_true(now_mono_ms() - t0 >= 1500);
        assert_true(start_calls >= 2);
        assert_non_null(strstr(err, "in use by gitcd pid 4242"));
        assert_non_null(strstr(err, "waited 1 s"));
        free(err);
        err = NULL;

        /* gitcd stopping: the wait ends at once */
        atomic_bool stop = true;
        start_calls = 0;
        snapshot_pvc_writer_set_wait(w, 10 * 1000, &stop);
        t0 = now_mono_ms();
        assert_int_equal(w->start(w->userdata, "claim", "", &peer, &err), -EAGAIN);
        assert_true(now_mono_ms() - t0 < 900);
        assert_int_equal(start_calls, 1);
        free(err);

        snapshot_pvc_writer_free(w);
        free(t.last_error);
        cluster_set_release(&set);
}

int main(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip),
            cmocka_unit_test(test_open),
            cmocka_unit_test(test_hostile),
            cmocka_unit_test(test_writer_waits_its_turn),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
