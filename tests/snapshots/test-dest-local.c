/*
 * The local-folder snapshot destination through the public seam
 * (snapstore/destination.h): put/get/stat/delete, keys with folders, the
 * all-or-nothing put (a process killed before the rename leaves no object,
 * bytes without the SHA-256 given are refused),
 * symlinks inside the folder refused, bad keys refused, and where S3
 * credentials are looked up on the gitcd host.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapstore/destination.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* SHA-256 of "snapshot bytes\n" */
static const char SHA[] = "2f538aa0e3d3a5118907c76114746b7698b97287907957fd2cb051e036e20281";

static char *write_tmp(const char *dir, const char *name, const char *content)
{
        char *p = path_join(dir, name);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0600), 0);
        return p;
}

static char *slurp(const char *path)
{
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &data, &len) < 0)
                return NULL;
        return data;
}

static snapshot_dest *open_local(const char *folder)
{
        storage_location loc = {.kind = DEST_LOCAL, .path = (char *)folder};
        snapshot_dest *d = NULL;
        char *err = NULL;
        assert_int_equal(snapshot_dest_open(&loc, NULL, &d, &err), 0);
        assert_null(err);
        return d;
}

/* Names in a folder, hidden ones included, sorted by readdir order (count only). */
static size_t count_entries(const char *dir)
{
        DIR *d = opendir(dir);
        assert_non_null(d);
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void test_put_get_stat_delete(void **state)
{
        _cleanup_free_ char *tmp = harness_tmpdir("gitcd-dest");
        _cleanup_free_ char *folder = path_join(tmp, "snaps/not-yet-there");
        _cleanup_free_ char *src = write_tmp(tmp, "in.db", "snapshot bytes\n");
        _cleanup_(snapshot_dest_freep) snapshot_dest *d = open_local(folder);
        char *err = NULL;

        assert_string_equal(snapshot_dest_kind(d), "local");
        assert_int_equal(snapshot_dest_put_file(d, "prod/orders/s1.db", src, SHA, &err), 0);
        _cleanup_free_ char *where = snapshot_dest_location(d, "prod/orders/s1.db");
        _cleanup_free_ char *want = xasprintf("%s/prod/orders/s1.db", folder);
        assert_string_equal(where, want);
        _cleanup_free_ char *stored = slurp(want);
        assert_string_equal(stored, "snapshot bytes\n");
        struct stat st;
        assert_int_equal(stat(want, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(stat(folder, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
        /* Only the object: no temporary left beside it. */
        _cleanup_free_ char *sub = path_join(folder, "prod/orders");
        assert_int_equal(count_entries(sub), 1);

        dest_object o = {0};
        assert_int_equal(snapshot_dest_stat(d, "prod/orders/s1.db", &o, &err), 0);
        assert_string_equal(o.key, "prod/orders/s1.db");
        assert_int_equal(o.size, 15);
        assert_true(o.mtime_ms > 1600000000000LL);
        if (o.sha256_hex) /* only where the file system keeps user attributes */
                assert_string_equal(o.sha256_hex, SHA);
        dest_object_release(&o);

        _cleanup_free_ char *out = path_join(tmp, "restored.db");
        assert_int_equal(snapshot_dest_get_file(d, "prod/orders/s1.db", out, &err), 0);
        _cleanup_free_ char *got = slurp(out);
        assert_string_equal(got, "snapshot bytes\n");
        _cleanup_free_ char *part = xasprintf("%s.part", out);
        assert_false(path_exists(part));

        /* A second put replaces the object whole. */
        _cleanup_free_ char *src2 = write_tmp(tmp, "in2.db", "newer\n");
        assert_int_equal(snapshot_dest_put_file(d, "prod/orders/s1.db", src2, NULL, &err), 0);
        free(stored);
        stored = slurp(want);
        assert_string_equal(stored, "newer\n");

        assert_int_equal(snapshot_dest_delete(d, "prod/orders/s1.db", &err), 0);
        assert_false(path_exists(want));
        assert_int_equal(snapshot_dest_delete(d, "prod/orders/s1.db", &err), -ENOENT);
        assert_non_null(strstr(err, "s1.db"));
        free(err);
        err = NULL;
        assert_int_equal(snapshot_dest_stat(d, "prod/orders/s1.db", &o, &err), -ENOENT);
        free(err);
        err = NULL;
        assert_int_equal(snapshot_dest_get_file(d, "missing.db", out, &err), -ENOENT);
        free(err);
}

/*
 * The file put reads from is a temporary nobody fsynced: bytes that do not
 * have the SHA-256 the pipeline took on the way in are refused, and neither
 * an object nor a temporary is left.
 */
static void test_put_refuses_other_bytes(void **state)
{
        _cleanup_free_ char *tmp = harness_tmpdir("gitcd-dest");
        _cleanup_free_ char *folder = path_join(tmp, "snaps");
        _cleanup_free_ char *src = write_tmp(tmp, "in.db", "snapshot bytes, changed\n");
        _cleanup_(snapshot_dest_freep) snapshot_dest *d = open_local(folder);
        char *err = NULL;
        assert_int_equal(snapshot_dest_put_file(d, "prod/s1.db", src, SHA, &err), -EBADMSG);
        assert_non_null(strstr(err, SHA));
        assert_non_null(strstr(err, "in.db"));
        free(err);
        _cleanup_free_ char *want = path_join(folder, "prod/s1.db");
        assert_false(path_exists(want));
        _cleanup_free_ char *sub = path_join(folder, "prod");
        assert_int_equal(count_entries(sub), 0);
}

static void test_missing_source(void **state)
{
        _cleanup_free_ char *tmp = harness_tmpdir("gitcd-dest");
        _cleanup_(snapshot_dest_freep) snapshot_dest *d = open_local(tmp);
        char *err = NULL;
        assert_int_equal(snapshot_dest_put_file(d, "a.db", "/nonexistent/x.db", NULL, &err),
                         -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/x.db"));
        free(err);
}

static void test_bad_keys(void **state)
{
        static const char *const bad[] = {"",     "/abs.db", "a//b", "a/../b",   "..",
                                          ".hid", "a/.tmp",  "a/",   "new\nline"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_false(snapshot_dest_key_valid(bad[i]));
        assert_true(snapshot_dest_key_valid("prod/orders/2026-11-23T14:00Z-r42.db.zst"));

        _cleanup_free_ char *tmp = harness_tmpdir("gitcd-dest");
        _cleanup_free_ char *src = write_tmp(tmp, "in.db", "x");
        _cleanup_(snapshot_dest_freep) snapshot_dest *d = open_local(tmp);
        char *err = NULL;
        assert_int_equal(snapshot_dest_put_file(d, "../escape.db", src, NULL, &err), -EINVAL);
        assert_non_null(strstr(err, "../escape.db"));
        free(err);
        err = NULL;
        assert_int_equal(snapshot_dest_put_file(d, "ok.db", src, "ABC", &err), -EINVAL);
        free(err);
        _cleanup_free_ char *up = path_join(tmp, "../escape.db");
        assert_false(path_exists(up));
}

static void test_symlinks_never_followed(void **state)
{
        _cleanup_free_ char *tmp = harness_tmpdir("gitcd-dest");
        _cleanup_free_ char *folder = path_join(tmp, "snaps");
        _cleanup_free_ char *outside = path_join(tmp, "outside");
        assert_int_equal(mkdir(folder, 0700), 0);
        assert_int_equal(mkdir(outside, 0700), 0);
        _cleanup_free_ char *secret = write_tmp(outside, "secret.db", "not yours");
        _cleanup_free_ char *src = write_tmp(tmp, "in.db", "snapshot");
        /* A folder link and a file link planted inside the snapshot folder. */
        _cleanup_free_ char *dlink = path_join(folder, "prod");
        _cleanup_free_ char *flink = path_join(folder, "s.db");
        assert_int_equal(symlink(outside, dlink), 0);
        assert_int_equal(symlink(secret, flink), 0);

        _cleanup_(snapshot_dest_freep) snapshot_dest *d = open_local(folder);
        char *err = NULL;
        assert_int_equal(snapshot_dest_put_file(d, "prod/new.db", src, NULL, &err), -ELOOP);
        assert_non_null(strstr(err, "symlink"));
        free(err);
        err = NULL;
        _cleanup_free_ char *planted = path_join(outside, "new.db");
        assert_false(path_exists(planted));

        _cleanup_free_ char *out = path_join(tmp, "out.db");
        assert_int_equal(snapshot_dest_get_file(d, "s.db", out, &err), -ELOOP);
        free(err);
        err = NULL;
        assert_false(path_exists(out));
        dest_object o = {0};
        assert_int_equal(snapshot_dest_stat(d, "prod/secret.db", &o, &err), -ELOOP);
        free(err);
        err = NULL;
        assert_int_equal(snapshot_dest_delete(d, "prod/secret.db", &err), -ELOOP);
        free(err);
        err = NULL;
        assert_true(path_exists(secret));

        /* A file where a folder is expected. */
        _cleanup_free_ char *plain = write_tmp(folder, "plain", "x");
        assert_int_equal(snapshot_dest_put_file(d, "plain/s.db", src, NULL, &err), -ENOTDIR);
        assert_non_null(strstr(err, "is not a folder"));
        free(err);
        err = NULL;

        /* A put over a symlink replaces the link itself, never its target. */
        assert_int_equal(snapshot_dest_put_file(d, "s.db", src, NULL, &err), 0);
        _cleanup_free_ char *kept = slurp(secret);
        assert_string_equal(kept, "not yours");
        struct stat st;
        assert_int_equal(lstat(flink, &st), 0);
        assert_true(S_ISREG(st.st_mode));
}

/* A process killed after writing the temporary but before the rename leaves no object. */
static void test_killed_put_leaves_no_object(void **state)
{
        _cleanup_free_ char *tmp = harness_tmpdir("gitcd-dest");
        _cleanup_free_ char *folder = path_join(tmp, "snaps");
        _cleanup_free_ char *src = write_tmp(tmp, "in.db", "whole snapshot");
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("GITCD_FAILPOINT", "dest-local.before-rename", 1);
                snapshot_dest *d = open_local(folder);
                (void)snapshot_dest_put_file(d, "s.db", src, NULL, NULL);
                _exit(0);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        _cleanup_(snapshot_dest_freep) snapshot_dest *d = open_local(folder);
        dest_object o = {0};
        char *err = NULL;
        assert_int_equal(snapshot_dest_stat(d, "s.db", &o, &err), -ENOENT);
        free(err);
        /* The temporary is hidden and never a key. */
        assert_int_equal(count_entries(folder), 1);
        /* The next put succeeds beside the leftover. */
        assert_int_equal(snapshot_dest_put_file(d, "s.db", src, NULL, NULL), 0);
        assert_int_equal(snapshot_dest_stat(d, "s.db", &o, NULL), 0);
        assert_int_equal(o.size, 14);
        dest_object_release(&o);
}

static void test_restore_source(void **state)
{
        _cleanup_free_ char *tmp = harness_tmpdir("gitcd-dest");
        _cleanup_free_ char *src = write_tmp(tmp, "orders.db", "snap");
        storage_location loc = {.kind = DEST_LOCAL, .path = src};
        _cleanup_(snapshot_dest_freep) snapshot_dest *d = NULL;
        _cleanup_free_ char *key = NULL;
        char *err = NULL;
        assert_int_equal(snapshot_source_open(&loc, NULL, &d, &key, &err), 0);
        assert_string_equal(key, "orders.db");
        _cleanup_free_ char *out = path_join(tmp, "copy.db");
        assert_int_equal(snapshot_dest_get_file(d, key, out, &err), 0);
        _cleanup_free_ char *got = slurp(out);
        assert_string_equal(got, "snap");

        storage_location pvc = {.kind = DEST_PVC, .claim_name = (char *)"c"};
        snapshot_dest *x = NULL;
        assert_int_equal(snapshot_dest_open(&pvc, NULL, &x, &err), -EOPNOTSUPP);
        free(err);
        err = NULL;
        storage_location rel = {.kind = DEST_LOCAL, .path = (char *)"relative"};
        assert_int_equal(snapshot_dest_open(&rel, NULL, &x, &err), -EINVAL);
        free(err);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_put_get_stat_delete),
            cmocka_unit_test(test_put_refuses_other_bytes),
            cmocka_unit_test(test_missing_source),
            cmocka_unit_test(test_bad_keys),
            cmocka_unit_test(test_symlinks_never_followed),
            cmocka_unit_test(test_killed_put_leaves_no_object),
            cmocka_unit_test(test_restore_source),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
