/*
 * The receiver of `gitcd snapshot receive` (snapstore/receiver.h) over real
 * HTTPS on loopback, with gitcd's own client:
 *   - a data directory is delivered whole (every file byte for byte), the
 *     staging folder is gone, and a second delivery is refused (-EEXIST)
 *     without sending anything;
 *   - a client pinning another key is refused before a byte is sent;
 *   - hostile requests, replayed one by one: a wrong or missing token (401),
 *     names that leave the staging folder or are hidden (400, nothing made
 *     outside it), a chunked body (411), more bytes than allowed (413), a
 *     body whose SHA-256 or length does not match (422: no file and no
 *     temporary kept), a folder that is a symbolic link (refused, nothing
 *     written through it), a commit of nothing (409);
 *   - a receiver started again empties what an earlier one staged;
 *   - idle and slow connections (more than the receiver has room for, as
 *     many as an attacker in the cluster might open) do not keep a delivery
 *     out, and one client address holds at most 4 connections that have
 *     not shown the token: the oldest is closed for a new one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "snapstore/receiver.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

typedef struct lab {
        char *dir;        /* the test's folder */
        char *secret_dir; /* tls.crt, tls.key, token */
        char *volume;     /* what the Pod would mount */
        char *data_dir;   /* volume/data */
        receiver_secret sec;
        receiver *r;
        char *url;
} lab;

static void lab_start(lab *l, int64_t max_bytes)
{
        receiver_opts o = {.data_dir = l->data_dir,
                           .listen = "127.0.0.1:0",
                           .cert_file = NULL,
                           .max_bytes = max_bytes};
        _cleanup_free_ char *cert = path_join(l->secret_dir, "tls.crt");
        _cleanup_free_ char *key = path_join(l->secret_dir, "tls.key");
        _cleanup_free_ char *token = path_join(l->secret_dir, "token");
        o.cert_file = cert;
        o.key_file = key;
        o.token_file = token;
        char *err = NULL;
        if (receiver_start(&o, &l->r, &err) < 0)
                fail_msg("receiver_start: %s", err);
        free(l->url);
        l->url = xasprintf("https://127.0.0.1:%d", receiver_port(l->r));
}

static void lab_new(lab *l, int64_t max_bytes)
{
        *l = (lab){0};
        l->dir = harness_tmpdir("receiver");
        l->secret_dir = path_join(l->dir, "secret");
        l->volume = path_join(l->dir, "volume");
        l->data_dir = path_join(l->volume, "data");
        assert_int_equal(mkdir_p(l->secret_dir, 0700), 0);
        assert_int_equal(mkdir_p(l->volume, 0700), 0);
        assert_int_equal(receiver_secret_new(&l->sec), 0);
        assert_int_equal(strlen(l->sec.token), 64);
        const char *names[] = {"tls.crt", "tls.key", "token"};
        const char *values[] = {l->sec.cert_pem, l->sec.key_pem, l->sec.token};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *p = path_join(l->secret_dir, names[i]);
                assert_int_equal(write_file_atomic(p, values[i], strlen(values[i]), 0600), 0);
        }
        lab_start(l, max_bytes);
}

static void lab_free(lab *l)
{
        receiver_stop(l->r);
        receiver_secret_release(&l->sec);
        free(l->url);
        free(l->secret_dir);
        free(l->volume);
        free(l->data_dir);
        free(l->dir);
}

static receiver_peer peer_of(const lab *l)
{
        return (receiver_peer){.url = l->url, .token = l->sec.token, .pin = l->sec.pin};
}

static void write_bytes(const char *path, size_t n, unsigned seed)
{
        _cleanup_free_ char *dir = xstrdup(path);
        *strrchr(dir, '/') = 0;
        assert_int_equal(mkdir_p(dir, 0700), 0);
        _cleanup_free_ char *buf = xmalloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
                buf[i] = (char)((i * 2654435761u + seed) >> 13);
        assert_int_equal(write_file_atomic(path, buf, n, 0600), 0);
}

/* A restored data directory as etcd's tool writes it. */
static char *make_source(const lab *l)
{
        char *src = path_join(l->dir, "src");
        const char *files[] = {"member/snap/db",
                               "member/snap/0000000000000001-0000000000000003.snap",
                               "member/wal/0000000000000000-0000000000000000.wal"};
        size_t sizes[] = {3u << 20, 4096, 64u << 10};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *p = path_join(src, files[i]);
                write_bytes(p, sizes[i], (unsigned)i);
        }
        return src;
}

static void assert_same_file(const char *a, const char *b)
{
        char ha[65], hb[65];
        assert_int_equal(hash_file_sha256_hex(a, ha, NULL), 0);
        assert_int_equal(hash_file_sha256_hex(b, hb, NULL), 0);
        assert_string_equal(ha, hb);
}

static size_t sink(char *data, size_t size, size_t nmemb, void *userdata)
{
        strbuf *sb = userdata;
        sb_append_len(sb, data, size * nmemb);
        return size * nmemb;
}

/*
 * A raw request: body (len bytes) with the given headers; the HTTP status
 * (0 when the connection failed). chunked: no Content-Length.
 */
static long raw(const lab *l, const char *method, const char *path, const char *token,
                const char *sha, const char *body, size_t len, bool chunked)
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
        if (chunked)
                h = curl_slist_append(h, "Transfer-Encoding: chunked");
        strbuf out = STRBUF_INIT;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L); /* send "..", as an attacker would */
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
        if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        }
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        sb_release(&out);
        return status;
}

static char *sha_of(const char *data, size_t len)
{
        _cleanup_free_ char *dir = harness_tmpdir("receiver-sha");
        _cleanup_free_ char *p = path_join(dir, "x");
        assert_int_equal(write_file_atomic(p, data, len, 0600), 0);
        char *hex = xmalloc(65);
        assert_int_equal(hash_file_sha256_hex(p, hex, NULL), 0);
        return hex;
}

/* Every entry under dir, as a sorted-free count (hidden temporaries included). */
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

static void test_delivery(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 0);
        _cleanup_free_ char *src = make_source(&l);
        receiver_peer p = peer_of(&l);
        char *err = NULL;
        if (receiver_deliver(&p, src, &err) < 0)
                fail_msg("deliver: %s", err);
        path_list files = {0}, dirs = {0};
        assert_int_equal(list_tree(src, &files, &dirs), 0);
        assert_int_equal(files.n, 3);
        for (size_t i = 0; i < files.n; i++) {
                _cleanup_free_ char *a = path_join(src, files.paths[i]);
                _cleanup_free_ char *b = path_join(l.data_dir, files.paths[i]);
                assert_same_file(a, b);
        }
        path_list_release(&files);
        path_list_release(&dirs);
        _cleanup_free_ char *stage = xasprintf("%s.receive", l.data_dir);
        assert_false(path_exists(stage));

        /* The volume holds data now: never again, and nothing is sent. */
        free(err);
        err = NULL;
        assert_int_equal(receiver_deliver(&p, src, &err), -EEXIST);
        free(err);
        err = NULL;

        /* A receiver started over it refuses too (what gitcd sees after a crash). */
        receiver_stop(l.r);
        lab_start(&l, 0);
        p = peer_of(&l);
        assert_int_equal(receiver_deliver(&p, src, &err), -EEXIST);
        free(err);
        lab_free(&l);
}

static void test_wrong_pin(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 0);
        _cleanup_free_ char *src = make_source(&l);
        receiver_secret other = {0};
        assert_int_equal(receiver_secret_new(&other), 0);
        receiver_peer p = peer_of(&l);
        p.pin = other.pin;
        char *err = NULL;
        assert_int_equal(receiver_deliver(&p, src, &err), -EPERM);
        assert_non_null(err);
        assert_null(strstr(err, l.sec.token));
        free(err);
        _cleanup_free_ char *stage = xasprintf("%s.receive", l.data_dir);
        assert_int_equal(count_entries(stage), 0);
        assert_false(path_exists(l.data_dir));
        receiver_secret_release(&other);
        lab_free(&l);
}

static void test_hostile(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 1 << 20);
        const char *tok = l.sec.token;
        const char body[] = "hello";
        _cleanup_free_ char *sha = sha_of(body, 5);
        _cleanup_free_ char *stage = xasprintf("%s.receive", l.data_dir);

        /* the probe needs nothing; everything else the token */
        assert_int_equal(raw(&l, "GET", "/healthz", NULL, NULL, NULL, 0, false), 200);
        assert_int_equal(raw(&l, "GET", "/state", NULL, NULL, NULL, 0, false), 401);
        assert_int_equal(raw(&l, "GET", "/state", "nope", NULL, NULL, 0, false), 401);
        _cleanup_free_ char *longer = xasprintf("%sx", tok);
        assert_int_equal(raw(&l, "GET", "/state", longer, NULL, NULL, 0, false), 401);
        assert_int_equal(raw(&l, "PUT", "/files/member/x", NULL, sha, body, 5, false), 401);
        assert_int_equal(raw(&l, "GET", "/state", tok, NULL, NULL, 0, false), 200);
        assert_int_equal(raw(&l, "DELETE", "/files/member/x", tok, NULL, NULL, 0, false), 404);

        /* names: replayed one by one, each refused, nothing made anywhere */
        const char *bad[] = {"/files/../escape",
                             "/files/%2e%2e/escape",
                             "/files/member/../../escape",
                             "/files/member/%2E%2E/%2e%2e/escape",
                             "/files/.hidden",
                             "/files/member/.x.part",
                             "/files//abs",
                             "/files/",
                             "/files/a//b",
                             "/files/a/",
                             "/files/a%00b",
                             "/files/a%0ab",
                             "/files/a\\b",
                             "/files/./a"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                long st = raw(&l, "PUT", bad[i], tok, sha, body, 5, false);
                if (st != 400 && st != 404)
                        fail_msg("PUT %s: %ld, expected a refusal", bad[i], st);
        }
        _cleanup_free_ char *escape = path_join(l.volume, "escape");
        assert_false(path_exists(escape));
        assert_int_equal(count_entries(stage), 0);
        assert_int_equal(count_entries(l.volume), 0); /* not even the staging folder */

        /* headers */
        assert_int_equal(raw(&l, "PUT", "/files/member/x", tok, NULL, body, 5, false), 400);
        assert_int_equal(raw(&l, "PUT", "/files/member/x", tok, "ABC", body, 5, false), 400);
        _cleanup_free_ char *upper = xstrdup(sha);
        for (char *c = upper; *c; c++)
                if (*c >= 'a' && *c <= 'f')
                        *c = (char)(*c - 32);
        assert_int_equal(raw(&l, "PUT", "/files/member/x", tok, upper, body, 5, false), 400);
        assert_int_equal(raw(&l, "PUT", "/files/member/x", tok, sha, body, 5, true), 411);

        /* a body that is not what was announced: nothing kept, not even a temporary */
        _cleanup_free_ char *other = sha_of("hellp", 5);
        assert_int_equal(raw(&l, "PUT", "/files/member/snap/db", tok, other, body, 5, false), 422);
        _cleanup_free_ char *snapdir = xasprintf("%s/member/snap", stage);
        assert_int_equal(count_entries(snapdir), 0);

        /* a folder that is a symbolic link is never written through */
        _cleanup_free_ char *outside = path_join(l.dir, "outside");
        assert_int_equal(mkdir_p(outside, 0700), 0);
        _cleanup_free_ char *link = path_join(stage, "linked");
        assert_int_equal(symlink(outside, link), 0);
        assert_int_equal(raw(&l, "PUT", "/files/linked/x", tok, sha, body, 5, false), 409);
        assert_int_equal(count_entries(outside), 0);

        /* more than the receiver takes: refused before a byte is stored */
        _cleanup_free_ char *big = xmalloc((1 << 20) + 1);
        memset(big, 'a', (1 << 20) + 1);
        _cleanup_free_ char *big_sha = sha_of(big, (1 << 20) + 1);
        assert_int_equal(
            raw(&l, "PUT", "/files/member/big", tok, big_sha, big, (1 << 20) + 1, false), 413);
        _cleanup_free_ char *bigp = xasprintf("%s/member/big", stage);
        assert_false(path_exists(bigp));
        /* a refused file gives its budget back: a whole MiB still fits */
        _cleanup_free_ char *mib_sha = sha_of(big, 1 << 20);
        assert_int_equal(raw(&l, "PUT", "/files/member/mib", tok, mib_sha, big, 1 << 20, false),
                         201);
        assert_int_equal(raw(&l, "PUT", "/files/member/one", tok, sha, body, 5, false), 413);

        /* nothing with a write-ahead log was staged: no commit */
        assert_int_equal(raw(&l, "POST", "/commit", tok, NULL, NULL, 0, false), 409);
        assert_false(path_exists(l.data_dir));

        /* a receiver stopped without a commit leaves nothing staged */
        assert_true(path_exists(stage));
        receiver_stop(l.r);
        assert_false(path_exists(stage));
        lab_start(&l, 1 << 20);
        assert_int_equal(count_entries(stage), 0);
        assert_int_equal(count_entries(outside), 0);
        lab_free(&l);
}

/* A data directory with a write-ahead log is never replaced; one without is. */
static void test_existing_data(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 0);
        _cleanup_free_ char *src = make_source(&l);
        /* what an etcd that was starting leaves: member/snap/db, no log */
        _cleanup_free_ char *left = path_join(l.data_dir, "member/snap/db");
        write_bytes(left, 100, 9);
        receiver_peer p = peer_of(&l);
        char *err = NULL;
        if (receiver_deliver(&p, src, &err) < 0)
                fail_msg("deliver: %s", err);
        _cleanup_free_ char *want = path_join(src, "member/snap/db");
        assert_same_file(want, left);
        lab_free(&l);
}

/* A TCP connection to the receiver that says nothing (-1 when it could not connect). */
static int open_idle(int port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                close(fd);
                fd = -1;
        }
        return fd;
}

/* Whether the receiver closed fd within timeout_ms (its end of the stream arrived). */
static bool closed_by_peer(int fd, int timeout_ms)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) <= 0)
                return false;
        char c;
        return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/*
 * 56 connections that never show the token (48 silent, 8 that sent the
 * first bytes of a TLS handshake and stopped): the receiver used to take 8
 * connections and keep each for 120 s, so a delivery waited in vain.
 * Now the delivery goes through at once, and the oldest idle connections
 * are closed to make room.
 */
static void test_idle_connections(void **state)
{
        (void)state;
        lab l;
        lab_new(&l, 0);
        int port = receiver_port(l.r);
        int fds[56];
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
                fds[i] = open_idle(port);
                assert_true(fds[i] >= 0);
                if (i >= 48)
                        assert_int_equal(write(fds[i], "\x16\x03\x01\x02", 4), 4);
        }
        _cleanup_free_ char *src = make_source(&l);
        receiver_peer p = peer_of(&l);
        char *err = NULL;
        if (receiver_deliver(&p, src, &err) < 0)
                fail_msg("deliver beside idle connections: %s", err);
        _cleanup_free_ char *db = path_join(l.data_dir, "member/snap/db");
        assert_true(path_exists(db));
        /* all from one address: at most 4 of them are kept, the oldest went first */
        assert_true(closed_by_peer(fds[0], 10000));
        size_t open = 0;
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                open += !closed_by_peer(fds[i], 0);
        assert_true(open <= 4);
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                close(fds[i]);

        /* one more than 4 from an address: the oldest of them is closed */
        int five[5];
        for (size_t i = 0; i < 5; i++) {
                five[i] = open_idle(port);
                assert_true(five[i] >= 0);
                usleep(20 * 1000); /* accepted in this order */
        }
        assert_true(closed_by_peer(five[0], 10000));
        for (size_t i = 1; i < 5; i++)
                assert_false(closed_by_peer(five[i], 200));
        for (size_t i = 0; i < 5; i++)
                close(five[i]);
        free(err);
        lab_free(&l);
}

int main(void)
{
        curl_global_init(CURL_GLOBAL_DEFAULT);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_delivery),         cmocka_unit_test(test_wrong_pin),
            cmocka_unit_test(test_hostile),          cmocka_unit_test(test_existing_data),
            cmocka_unit_test(test_idle_connections),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
