/*
 * The in-process reader of etcd's snapshot files (snapstore/bbolt.h)
 * against etcd's own tool, on real snapshots of real etcd 3.4.23, 3.5.16
 * and the newest 3.5 installed (what Debian sid ships): a member with a
 * few thousand keys of several sizes (values past a page make overflow
 * pages), keys deleted, a compaction, a lease, a user and a role (etcd's
 * "key", "meta", "lease", "auth", "authUsers", "authRoles", "members", ...
 * buckets), streamed to a file with etcd's sha256 trailer. The reader's
 * hash, revision, total keys and total size must be exactly what
 * `etcdutl snapshot status -w json` (etcdctl for 3.4) prints for the file.
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
#include <time.h>

#include <cmocka.h>

#include "etcd/client.h"
#include "snapstore/bbolt.h"
#include "snapstore/tool.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/process.h"
#include "util/xalloc.h"

/* Fill one member's keyspace the way a cluster's life does, then compare. */
static void compare_with_tool(const char *version)
{
        harness_opts o = {.version = version, .members = 1};
        harness_cluster *hc = NULL;
        assert_int_equal(harness_cluster_start(&o, &hc), 0);
        etcd_client_opts co = {.endpoints = hc->endpoints};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&co, &c), 0);

        static char value[9000];
        memset(value, 'v', sizeof(value));
        int64_t rev = 0, mid = 0;
        for (int i = 0; i < 3000; i++) {
                char key[40];
                snprintf(key, sizeof(key), "app/%c/%05d", 'a' + i % 7, i);
                /* mostly small values, every 100th larger than a page */
                size_t n = i % 100 == 0 ? sizeof(value) : (size_t)(i % 200);
                assert_int_equal(etcd_put(c, key, value, n, &rev), 0);
                if (i == 1500)
                        mid = rev;
        }
        int64_t deleted = 0;
        assert_int_equal(etcd_delete(c, "app/c/", true, &deleted), 0);
        assert_true(deleted > 0);
        assert_int_equal(etcd_compact(c, mid, true), 0);
        assert_int_equal(etcd_user_add(c, "alice", "s3cret-pw"), 0);
        assert_int_equal(etcd_role_add(c, "reader"), 0);
        /* a lease with a key on it (etcdctl: the client has no lease calls) */
        char *ep = xasprintf("--endpoints=%s", hc->members[0].client_url);
        char *grant[] = {hc->etcdctl_bin, ep, "lease", "grant", "600", NULL};
        char *out = NULL;
        assert_int_equal(process_run_capture(grant, &out), 0);
        char lease[32] = "";
        assert_int_equal(sscanf(out, "lease %31s granted", lease), 1);
        free(out);
        char *lease_arg = xasprintf("--lease=%s", lease);
        char *put[] = {hc->etcdctl_bin, ep, "put", lease_arg, "leased/key", "x", NULL};
        out = NULL;
        assert_int_equal(process_run_capture(put, &out), 0);
        free(out);
        free(lease_arg);
        free(ep);

        char *dir = harness_tmpdir("bbolt-etcd");
        char *file = path_join(dir, "snap.db");
        etcd_snapshot_info info = {0};
        assert_int_equal(etcd_snapshot_save(c, hc->members[0].client_url, file, &info), 0);
        etcd_client_free(c);

        snapshot_status mine = {0}, tool = {0};
        char *why = NULL;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int r = bbolt_check_file(file, &mine, &why);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r < 0)
                fail_msg("etcd %s: the reader refused a real snapshot: %s", version, why);
        const char *tool_bin = hc->etcdutl_bin ? hc->etcdutl_bin : hc->etcdctl_bin;
        assert_int_equal(snapshot_file_status(tool_bin, file, &tool, &why), 0);
        printf("etcd %s: read in %.2f ms: hash %u revision %lld keys %lld size %lld (tool: %u %lld "
               "%lld %lld)\n",
               version,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
               mine.hash, (long long)mine.revision, (long long)mine.total_keys,
               (long long)mine.total_size, tool.hash, (long long)tool.revision,
               (long long)tool.total_keys, (long long)tool.total_size);
        assert_int_equal(mine.hash, tool.hash);
        assert_int_equal(mine.revision, tool.revision);
        assert_int_equal(mine.total_keys, tool.total_keys);
        assert_int_equal(mine.total_size, tool.total_size);
        assert_true(mine.revision >= rev); /* the lease's put came after */
        struct stat st;
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_size, mine.total_size + 32); /* etcd's sha256 trailer */

        (void)rm_rf(dir);
        free(file);
        free(dir);
        harness_cluster_free(hc);
}

static void test_etcd_3_4(void **unused)
{
        (void)unused;
        if (!harness_have_etcd("3.4.23"))
                skip();
        compare_with_tool("3.4.23");
}

static void test_etcd_3_5(void **unused)
{
        (void)unused;
        compare_with_tool("3.5.16");
}

static void test_etcd_newest(void **unused)
{
        (void)unused;
        char *newest = harness_etcd_newest("3.5");
        if (!newest || strcmp(newest, "3.5.16") == 0) {
                free(newest);
                skip();
        }
        compare_with_tool(newest);
        free(newest);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_etcd_3_4),
            cmocka_unit_test(test_etcd_3_5),
            cmocka_unit_test(test_etcd_newest),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
