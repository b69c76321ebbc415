/*
 * The S3 client and the S3 destination against a real s3rver on loopback:
 * put/get/stat/delete through the destination seam (credentials from a Secret
 * folder), a multipart upload with a small part size (refused before any part
 * when the file is not the bytes of the SHA-256 given), an upload cut midway by
 * killing the server (no object afterwards, a clear error), retries that
 * succeed once the server is back, path-style and virtual-hosted-style
 * addressing, HTTPS with a custom CA, wrong credentials, and a cross-check of
 * an uploaded object with Debian's s3cmd.
 *
 * s3rver accepts any signature from its own access key, so every test uses a
 * made-up secret and checks that it never appears in a message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapstore/destination.h"
#include "snapstore/s3.h"
#include "tests/harness/harness.h"
#include "tests/harness/s3rver.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define SECRET "never-show-this-secret-0123456789"

static harness_s3rver *server;
static char *tmp;
static s3_credentials creds = {.access_key_id = (char *)HARNESS_S3RVER_KEY,
                               .secret_access_key = (char *)SECRET};

static void assert_no_secret(const char *msg)
{
        if (msg)
                assert_null(strstr(msg, SECRET));
}

/* A file of n bytes whose content depends on seed. */
static char *make_file(const char *name, size_t n, unsigned seed)
{
        char *p = path_join(tmp, name);
        _cleanup_free_ char *data = xmalloc(n ? n : 1);
        uint32_t x = seed * 2654435761u + 1;
        for (size_t i = 0; i < n; i++) {
                x = x * 1103515245u + 12345u;
                data[i] = (char)(x >> 16);
        }
        assert_int_equal(write_file_atomic(p, data, n, 0600), 0);
        return p;
}

static bool same_content(const char *a, const char *b)
{
        char *da = NULL, *db = NULL;
        size_t la = 0, lb = 0;
        assert_int_equal(read_file(a, 64 << 20, &da, &la), 0);
        assert_int_equal(read_file(b, 64 << 20, &db, &lb), 0);
        bool same = la == lb && memcmp(da, db, la) == 0;
        free(da);
        free(db);
        return same;
}

static s3_client *client_for(const harness_s3rver *s, const s3_config *extra)
{
        s3_config cfg = extra ? *extra : (s3_config){0};
        if (!cfg.endpoint)
                cfg.endpoint = s->endpoint_ip;
        if (!extra || !extra->endpoint)
                cfg.path_style = true;
        cfg.bucket = s->bucket;
        cfg.credentials = &creds;
        if (!cfg.resolve)
                cfg.resolve = (const char *const *)s->resolve;
        if (!cfg.backoff_ms)
                cfg.backoff_ms = 20;
        s3_client *c = NULL;
        char *err = NULL;
        assert_int_equal(s3_client_new(&cfg, &c, &err), 0);
        return c;
}

static int setup(void **state)
{
        tmp = harness_tmpdir("gitcd-s3");
        return tmp ? 0 : -1;
}

static int start_server(void)
{
        if (server)
                return 0;
        _cleanup_free_ char *bin = harness_s3rver_path();
        if (!bin)
                return -ENOENT;
        harness_s3rver_opts o = {0};
        return harness_s3rver_start(&o, &server);
}

#define NEED_SERVER()                                                                              \
        do {                                                                                       \
                if (start_server() == -ENOENT)                                                     \
                        skip();                                                                    \
                assert_non_null(server);                                                           \
        } while (0)

static int teardown(void **state)
{
        harness_s3rver_free(server);
        server = NULL;
        return 0;
}

/* The whole seam, as the snapshot pipeline uses it, with a Secret folder for credentials. */
static void test_destination_roundtrip(void **state)
{
        NEED_SERVER();
        _cleanup_free_ char *state_dir = path_join(tmp, "state");
        _cleanup_free_ char *secret_dir = path_join(state_dir, "secrets/prod/s3-creds");
        assert_int_equal(mkdir_p(secret_dir, 0700), 0);
        _cleanup_free_ char *f1 = path_join(secret_dir, "accessKeyID");
        _cleanup_free_ char *f2 = path_join(secret_dir, "secretAccessKey");
        assert_int_equal(write_file_atomic(f1, "S3RVER\n", 7, 0600), 0);
        assert_int_equal(write_file_atomic(f2, SECRET "\n", strlen(SECRET) + 1, 0600), 0);

        storage_location loc = {.kind = DEST_S3};
        loc.s3.endpoint = server->endpoint_ip;
        loc.s3.bucket = server->bucket;
        loc.s3.key = (char *)"backups/orders/";
        loc.s3.force_path_style = true;
        loc.s3.credentials_secret = (char *)"s3-creds";
        snapshot_dest_context ctx = {.state_dir = state_dir, .namespace_ = "prod"};
        _cleanup_(snapshot_dest_freep) snapshot_dest *d = NULL;
        char *err = NULL;
        assert_int_equal(snapshot_dest_open(&loc, &ctx, &d, &err), 0);
        assert_string_equal(snapshot_dest_kind(d), "s3");

        _cleanup_free_ char *src = make_file("snap1.db", 100000, 1);
        static const char sha[] =
            "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        assert_int_equal(snapshot_dest_put_file(d, "2026/s1.db", src, sha, &err), 0);
        _cleanup_free_ char *where = snapshot_dest_location(d, "2026/s1.db");
        assert_string_equal(where, "s3://snaps/backups/orders/2026/s1.db");

        dest_object o = {0};
        assert_int_equal(snapshot_dest_stat(d, "2026/s1.db", &o, &err), 0);
        assert_int_equal(o.size, 100000);
        assert_string_equal(o.key, "2026/s1.db");
        assert_non_null(o.sha256_hex);
        assert_string_equal(o.sha256_hex, sha);
        assert_true(o.mtime_ms > 1600000000000LL);
        dest_object_release(&o);

        _cleanup_free_ char *out = path_join(tmp, "snap1.out");
        assert_int_equal(snapshot_dest_get_file(d, "2026/s1.db", out, &err), 0);
        assert_true(same_content(src, out));

        /* The restore side opens the same object by its full key. */
        storage_location restore = loc;
        restore.s3.key = (char *)"backups/orders/2026/s1.db";
        _cleanup_(snapshot_dest_freep) snapshot_dest *rd = NULL;
        _cleanup_free_ char *rkey = NULL;
        assert_int_equal(snapshot_source_open(&restore, &ctx, &rd, &rkey, &err), 0);
        assert_int_equal(snapshot_dest_stat(rd, rkey, &o, &err), 0);
        assert_int_equal(o.size, 100000);
        dest_object_release(&o);

        assert_int_equal(snapshot_dest_delete(d, "2026/s1.db", &err), 0);
        assert_int_equal(snapshot_dest_stat(d, "2026/s1.db", &o, &err), -ENOENT);
        assert_non_null(strstr(err, "s3://snaps/backups/orders/2026/s1.db"));
        assert_no_secret(err);
        free(err);
        err = NULL;
        assert_int_equal(snapshot_dest_delete(d, "2026/s1.db", &err), -ENOENT);
        free(err);
        err = NULL;
        assert_int_equal(snapshot_dest_get_file(d, "2026/s1.db", out, &err), -ENOENT);
        assert_no_secret(err);
        free(err);
        err = NULL;
        _cleanup_free_ char *part = xasprintf("%s.part", out);
        assert_false(path_exists(part));

        /* Without the Secret folder and without AWS_* variables: a clear refusal. */
        unsetenv("AWS_ACCESS_KEY_ID");
        unsetenv("AWS_SECRET_ACCESS_KEY");
        loc.s3.credentials_secret = (char *)"other";
        snapshot_dest *x = NULL;
        assert_int_equal(snapshot_dest_open(&loc, &ctx, &x, &err), -ENOKEY);
        assert_non_null(strstr(err, "secrets/prod/other"));
        assert_non_null(strstr(err, "AWS_ACCESS_KEY_ID"));
        free(err);
        err = NULL;
        /* ... and with them, the environment is used. */
        setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
        setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
        assert_int_equal(snapshot_dest_open(&loc, &ctx, &x, &err), 0);
        assert_int_equal(snapshot_dest_put_file(x, "env.db", src, NULL, &err), 0);
        assert_int_equal(snapshot_dest_delete(x, "env.db", &err), 0);
        snapshot_dest_free(x);
        unsetenv("AWS_ACCESS_KEY_ID");
        unsetenv("AWS_SECRET_ACCESS_KEY");
}

/* Count lines of s3rver's log that contain needle. */
static size_t log_count(const char *needle)
{
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(server->log_path, 64 << 20, &data, &len), 0);
        size_t n = 0;
        for (const char *p = data; (p = strstr(p, needle)); p++)
                n++;
        free(data);
        return n;
}

static void test_multipart_small_parts(void **state)
{
        NEED_SERVER();
        s3_config cfg = {.multipart_threshold = 64 * 1024, .part_size = 40 * 1024};
        _cleanup_(s3_client_freep) s3_client *c = client_for(server, &cfg);
        _cleanup_free_ char *src = make_file("multi.db", 300 * 1024 + 7, 2);
        size_t parts_before = log_count("Stored part ");
        char *err = NULL;
        /* a SHA-256 the file does not have: refused before any part is sent */
        static const char other[] =
            "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
        assert_int_equal(s3_put_file(c, "multi/m.db", src, other, &err), -EBADMSG);
        assert_non_null(strstr(err, other));
        free(err);
        err = NULL;
        assert_int_equal(log_count("Stored part "), parts_before);
        char sha[65];
        assert_int_equal(hash_file_sha256_hex(src, sha, NULL), 0);
        assert_int_equal(s3_put_file(c, "multi/m.db", src, sha, &err), 0);
        /* 300 KiB + 7 bytes in 40 KiB parts: 8 parts, the last one short. */
        assert_int_equal(log_count("Stored part ") - parts_before, 8);

        s3_object_info info = {0};
        assert_int_equal(s3_head(c, "multi/m.db", &info, &err), 0);
        assert_int_equal(info.size, 300 * 1024 + 7);
        assert_non_null(info.sha256_hex);
        assert_string_equal(info.sha256_hex, sha);
        s3_object_info_release(&info);
        _cleanup_free_ char *out = path_join(tmp, "multi.out");
        assert_int_equal(s3_get_file(c, "multi/m.db", out, &err), 0);
        assert_true(same_content(src, out));
        assert_int_equal(s3_delete(c, "multi/m.db", &err), 0);
}

typedef struct cut {
        int64_t kill_after;
        bool killed;
        int retries;
        bool restart_on_retry;
} cut;

static void kill_midway(void *userdata, int64_t sent, int64_t total)
{
        cut *k = userdata;
        if (!k->killed && sent >= k->kill_after) {
                k->killed = true;
                harness_s3rver_kill(server);
        }
}

static void on_retry(void *userdata, int attempt, const char *why)
{
        cut *k = userdata;
        k->retries++;
        assert_no_secret(why);
        if (k->restart_on_retry && server->pid == 0)
                assert_int_equal(harness_s3rver_restart(server), 0);
}

static void test_upload_cut_midway(void **state)
{
        NEED_SERVER();
        cut k = {.kill_after = 100 * 1024};
        s3_config cfg = {.multipart_threshold = 64 * 1024,
                         .part_size = 64 * 1024,
                         .max_attempts = 3,
                         .on_progress = kill_midway,
                         .on_retry = on_retry,
                         .userdata = &k};
        _cleanup_(s3_client_freep) s3_client *c = client_for(server, &cfg);
        _cleanup_free_ char *src = make_file("cut.db", 1024 * 1024, 3);
        char *err = NULL;
        int r = s3_put_file(c, "cut/c.db", src, NULL, &err);
        assert_true(k.killed);
        assert_true(r == -ECONNREFUSED || r == -EIO);
        assert_non_null(err);
        assert_non_null(strstr(err, "s3://snaps/cut/c.db"));
        assert_non_null(strstr(err, "UploadPart 2 of 16"));
        assert_non_null(strstr(err, "after 3 attempts"));
        assert_non_null(strstr(err, "no object was created"));
        assert_no_secret(err);
        free(err);
        err = NULL;
        assert_true(k.retries >= 2); /* the part's, then the abort's */

        /* The server comes back with its data: the object does not exist. */
        assert_int_equal(harness_s3rver_restart(server), 0);
        s3_object_info info = {0};
        assert_int_equal(s3_head(c, "cut/c.db", &info, &err), -ENOENT);
        free(err);
}

/*
 * A single PUT cut the same way fails with a clear error. (Whether a half
 * object is left is the server's business: S3 stores an object only when its
 * PUT completed, but s3rver streams the body into place and keeps the part it
 * got, so no absence is asserted here; the multipart case above is the one
 * gitcd controls.)
 */
static void test_single_put_cut_midway(void **state)
{
        NEED_SERVER();
        cut k = {.kill_after = 2 * 1024 * 1024};
        s3_config cfg = {.max_attempts = 2, .on_progress = kill_midway, .userdata = &k};
        _cleanup_(s3_client_freep) s3_client *c = client_for(server, &cfg);
        _cleanup_free_ char *src = make_file("cut1.db", 8 * 1024 * 1024, 9);
        char *err = NULL;
        int r = s3_put_file(c, "cut/single.db", src, NULL, &err);
        assert_true(k.killed);
        assert_true(r == -ECONNREFUSED || r == -EIO);
        assert_non_null(strstr(err, "s3://snaps/cut/single.db: upload of"));
        assert_non_null(strstr(err, "after 2 attempts"));
        assert_no_secret(err);
        free(err);
        assert_int_equal(harness_s3rver_restart(server), 0);
}

static void test_retries_until_server_is_back(void **state)
{
        NEED_SERVER();
        cut k = {.restart_on_retry = true};
        s3_config cfg = {.max_attempts = 4, .on_retry = on_retry, .userdata = &k};
        _cleanup_(s3_client_freep) s3_client *c = client_for(server, &cfg);
        _cleanup_free_ char *src = make_file("retry.db", 5000, 4);
        harness_s3rver_kill(server);
        char *err = NULL;
        assert_int_equal(s3_put_file(c, "retry/r.db", src, NULL, &err), 0);
        assert_int_equal(k.retries, 1);
        _cleanup_free_ char *out = path_join(tmp, "retry.out");
        assert_int_equal(s3_get_file(c, "retry/r.db", out, &err), 0);
        assert_true(same_content(src, out));

        /* Down for good: bounded, then a clear error. */
        k.restart_on_retry = false;
        k.retries = 0;
        harness_s3rver_kill(server);
        s3_object_info info = {0};
        assert_int_equal(s3_head(c, "retry/r.db", &info, &err), -ECONNREFUSED);
        assert_int_equal(k.retries, 3);
        assert_non_null(strstr(err, "after 4 attempts"));
        assert_non_null(strstr(err, server->endpoint_ip + strlen("http://")));
        assert_no_secret(err);
        free(err);
        assert_int_equal(harness_s3rver_restart(server), 0);
}

static void test_virtual_hosted_style(void **state)
{
        NEED_SERVER();
        s3_config vcfg = {.endpoint = server->endpoint_host, .path_style = false};
        _cleanup_(s3_client_freep) s3_client *v = client_for(server, &vcfg);
        _cleanup_free_ char *src = make_file("vhost.db", 12345, 5);
        char *err = NULL;
        assert_int_equal(s3_put_file(v, "vhost/with space+plus.db", src, NULL, &err), 0);
        /* The same object, seen path-style on the IP address. */
        _cleanup_(s3_client_freep) s3_client *p = client_for(server, NULL);
        s3_object_info info = {0};
        assert_int_equal(s3_head(p, "vhost/with space+plus.db", &info, &err), 0);
        assert_int_equal(info.size, 12345);
        s3_object_info_release(&info);
        _cleanup_free_ char *out = path_join(tmp, "vhost.out");
        assert_int_equal(s3_get_file(v, "vhost/with space+plus.db", out, &err), 0);
        assert_true(same_content(src, out));
        assert_int_equal(s3_delete(v, "vhost/with space+plus.db", &err), 0);
        assert_int_equal(s3_head(p, "vhost/with space+plus.db", &info, &err), -ENOENT);
        free(err);
}

static void test_wrong_credentials(void **state)
{
        NEED_SERVER();
        s3_credentials bad = {.access_key_id = (char *)"NOT-A-KEY",
                              .secret_access_key = (char *)SECRET};
        s3_config cfg = {.endpoint = server->endpoint_ip,
                         .bucket = server->bucket,
                         .path_style = true,
                         .credentials = &bad};
        _cleanup_(s3_client_freep) s3_client *c = NULL;
        char *err = NULL;
        assert_int_equal(s3_client_new(&cfg, &c, &err), 0);
        _cleanup_free_ char *src = make_file("bad.db", 10, 6);
        assert_int_equal(s3_put_file(c, "bad.db", src, NULL, &err), -EACCES);
        assert_non_null(strstr(err, "403"));
        assert_non_null(strstr(err, "InvalidAccessKeyId"));
        assert_no_secret(err);
        free(err);
}

static void test_https_with_custom_ca(void **state)
{
        _cleanup_free_ char *bin = harness_s3rver_path();
        if (!bin)
                skip();
        harness_s3rver *tls = NULL;
        harness_s3rver_opts o = {.tls = true};
        assert_int_equal(harness_s3rver_start(&o, &tls), 0);
        s3_credentials with_ca = creds;
        with_ca.ca_file = tls->ca_file;
        s3_config cfg = {.endpoint = tls->endpoint_host,
                         .bucket = tls->bucket,
                         .credentials = &with_ca,
                         .resolve = (const char *const *)tls->resolve};
        s3_client *c = NULL;
        char *err = NULL;
        _cleanup_free_ char *src = make_file("tls.db", 70000, 7);
        _cleanup_free_ char *out = path_join(tmp, "tls.out");
        /* Virtual-hosted over HTTPS: the certificate names *.s3.gitcd.test. */
        assert_int_equal(s3_client_new(&cfg, &c, &err), 0);
        assert_int_equal(s3_put_file(c, "tls/t.db", src, NULL, &err), 0);
        assert_int_equal(s3_get_file(c, "tls/t.db", out, &err), 0);
        assert_true(same_content(src, out));
        s3_client_free(c);

        /* Through the destination seam: the CA bundle comes from the Secret folder's ca.crt. */
        _cleanup_free_ char *state_dir = path_join(tmp, "state-tls");
        _cleanup_free_ char *secret_dir = path_join(state_dir, "secrets/default/tls-creds");
        assert_int_equal(mkdir_p(secret_dir, 0700), 0);
        _cleanup_free_ char *f1 = path_join(secret_dir, "accessKeyID");
        _cleanup_free_ char *f2 = path_join(secret_dir, "secretAccessKey");
        _cleanup_free_ char *f3 = path_join(secret_dir, "ca.crt");
        char *pem = NULL;
        size_t pem_len = 0;
        assert_int_equal(read_file(tls->ca_file, 1 << 20, &pem, &pem_len), 0);
        assert_int_equal(write_file_atomic(f1, "S3RVER", 6, 0600), 0);
        assert_int_equal(write_file_atomic(f2, SECRET, strlen(SECRET), 0600), 0);
        assert_int_equal(write_file_atomic(f3, pem, pem_len, 0644), 0);
        free(pem);
        storage_location loc = {.kind = DEST_S3};
        loc.s3.endpoint = tls->endpoint_ip;
        loc.s3.bucket = tls->bucket;
        loc.s3.force_path_style = true;
        loc.s3.credentials_secret = (char *)"tls-creds";
        snapshot_dest_context ctx = {.state_dir = state_dir};
        snapshot_dest *d = NULL;
        assert_int_equal(snapshot_dest_open(&loc, &ctx, &d, &err), 0);
        assert_int_equal(snapshot_dest_put_file(d, "seam.db", src, NULL, &err), 0);
        dest_object obj = {0};
        assert_int_equal(snapshot_dest_stat(d, "seam.db", &obj, &err), 0);
        assert_int_equal(obj.size, 70000);
        dest_object_release(&obj);
        snapshot_dest_free(d);

        /* Without the CA: refused at once, and the message says why. */
        cfg.credentials = &creds;
        cfg.max_attempts = 3;
        assert_int_equal(s3_client_new(&cfg, &c, &err), 0);
        assert_int_equal(s3_put_file(c, "tls/u.db", src, NULL, &err), -EPROTO);
        assert_non_null(strstr(err, "TLS"));
        assert_null(strstr(err, "attempts"));
        assert_no_secret(err);
        free(err);
        s3_client_free(c);
        harness_s3rver_free(tls);
}

/* Debian's s3cmd lists and downloads what we uploaded. */
static void test_cross_check_with_s3cmd(void **state)
{
        NEED_SERVER();
        if (access("/usr/bin/s3cmd", X_OK) != 0)
                skip();
        _cleanup_(s3_client_freep) s3_client *c = client_for(server, NULL);
        _cleanup_free_ char *src = make_file("cross.db", 200000, 8);
        char *err = NULL;
        assert_int_equal(s3_put_file(c, "cross/x.db", src, NULL, &err), 0);

        _cleanup_free_ char *cfg = path_join(tmp, "s3cmd.cfg");
        _cleanup_free_ char *host = xasprintf("127.0.0.1:%d", server->port);
        _cleanup_free_ char *text =
            xasprintf("[default]\naccess_key = S3RVER\nsecret_key = S3RVER\n"
                      "host_base = %s\nhost_bucket = %s\nuse_https = False\n"
                      "signature_v2 = False\nbucket_location = us-east-1\n",
                      host, host);
        assert_int_equal(write_file_atomic(cfg, text, strlen(text), 0600), 0);
        _cleanup_free_ char *listing = path_join(tmp, "s3cmd.ls");
        _cleanup_free_ char *got = path_join(tmp, "cross.s3cmd");
        _cleanup_free_ char *ls =
            xasprintf("s3cmd -c %s ls s3://snaps/cross/ > %s 2>&1", cfg, listing);
        assert_int_equal(system(ls), 0);
        char *out = NULL;
        size_t len = 0;
        assert_int_equal(read_file(listing, 1 << 20, &out, &len), 0);
        assert_non_null(strstr(out, "200000"));
        assert_non_null(strstr(out, "s3://snaps/cross/x.db"));
        free(out);
        _cleanup_free_ char *get = xasprintf("s3cmd -c %s get --force s3://snaps/cross/x.db %s "
                                             ">/dev/null 2>&1",
                                             cfg, got);
        assert_int_equal(system(get), 0);
        assert_true(same_content(src, got));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_destination_roundtrip),
            cmocka_unit_test(test_multipart_small_parts),
            cmocka_unit_test(test_upload_cut_midway),
            cmocka_unit_test(test_single_put_cut_midway),
            cmocka_unit_test(test_retries_until_server_is_back),
            cmocka_unit_test(test_virtual_hosted_style),
            cmocka_unit_test(test_wrong_credentials),
            cmocka_unit_test(test_https_with_custom_ca),
            cmocka_unit_test(test_cross_check_with_s3cmd),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
