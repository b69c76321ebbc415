/*
 * spec.defrag end to end through the real binary on the local target: a
 * 3-member cluster whose database was fragmented gains
 * `defrag: {freeSpaceAbove: 64Ki}` in its spec; `gitcd apply` defragments
 * every member, the leader last after moving leadership away, and returns
 * only once the run is finished (a gitcd killed after the first member,
 * or in the middle of a member's defragmentation, resumes the same run); `gitcd status` shows the run (text and
 * JSON) and `gitcd log` the per-member events. No member is restarted: the
 * defrag fields are not part of any member's command line.
 *
 * Then `options.quotaBackendBytes: 16Mi` with `defrag.disarmNoSpace: true`:
 * writes fill the database until etcd raises NOSPACE for real, and the next
 * `gitcd apply` compacts, defragments and disarms it, so writes work again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define APPLY_TIMEOUT 120

static void write_spec(e2e *e, const char *extra)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: dfg\n"
                               "spec:\n"
                               "  replicas: 3\n"
                               "  version: \"3.5.16\"\n"
                               "%s",
                               extra);
        e2e_write_file(e, "dfg.yaml", text);
        free(text);
}

static void test_apply_defragments(void **unused)
{
        (void)unused;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        write_spec(e, "");
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_true(e2e_wait_ready(e, "dfg", 3, 30));

        /* fragment: 1 MiB written, deleted, compacted */
        etcd_client *c = e2e_client(e, "dfg");
        static char blob[4096];
        memset(blob, 'x', sizeof(blob));
        for (int i = 0; i < 256; i++) {
                char key[32];
                snprintf(key, sizeof(key), "frag/%04d", i);
                assert_int_equal(etcd_put(c, key, blob, sizeof(blob), NULL), 0);
        }
        int64_t rev = 0;
        assert_int_equal(etcd_delete(c, "frag/", true, NULL), 0);
        assert_int_equal(etcd_put(c, "kept", "yes", 3, &rev), 0);
        assert_int_equal(etcd_compact(c, rev, true), 0);
        pid_t pids[3];
        for (int i = 0; i < 3; i++) {
                char name[16];
                snprintf(name, sizeof(name), "dfg-%d", i);
                pids[i] = e2e_member_pid(e, "dfg", name);
                assert_true(pids[i] > 0);
        }

        write_spec(e, "  defrag:\n    freeSpaceAbove: 64Ki\n");
        /* killed once after the first member was recorded, once right after a Defragment */
        assert_int_equal(e2e_apply(e, "defrag.after-member", APPLY_TIMEOUT), 128 + 9);
        json_t *st = e2e_status(e, "dfg");
        json_t *run = json_object_get(st, "last_defrag");
        assert_string_equal(json_string_value(json_object_get(run, "result")), "running");
        assert_int_equal(strlen(json_string_value(json_object_get(run, "members_done"))),
                         strlen("dfg-0"));
        json_decref(st);
        assert_int_equal(e2e_apply(e, "defrag.after-etcd", APPLY_TIMEOUT), 128 + 9);
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);

        /* apply returned after the run: succeeded, all three, the old leader last */
        st = e2e_status(e, "dfg");
        assert_non_null(st);
        run = json_object_get(st, "last_defrag");
        assert_true(json_is_object(run));
        assert_string_equal(json_string_value(json_object_get(run, "result")), "succeeded");
        assert_string_equal(json_string_value(json_object_get(run, "trigger")), "free-space");
        const char *done = json_string_value(json_object_get(run, "members_done"));
        const char *moved = json_string_value(json_object_get(run, "leader_moved_from"));
        assert_non_null(done);
        assert_non_null(moved);
        assert_int_equal(strlen(done), strlen("dfg-0,dfg-1,dfg-2"));
        assert_string_equal(strrchr(done, ',') + 1, moved);
        json_decref(st);
        /* one run, resumed twice: three members recorded (the interrupted one done again) */
        assert_int_equal(e2e_audit_count(e, "dfg", "defrag.started"), 1);
        assert_int_equal(e2e_audit_count(e, "dfg", "defrag.member"), 3);
        assert_true(e2e_audit_count(e, "dfg", "defrag.leader-moved") >= 1);
        assert_int_equal(e2e_audit_count(e, "dfg", "defrag.finished"), 1);

        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", "default/dfg", NULL), 0);
        assert_non_null(strstr(out, "Defrag:    last run succeeded"));
        assert_non_null(strstr(out, "History:   kept until compacted"));
        free(out);

        /* no member restarted; the data is there */
        for (int i = 0; i < 3; i++) {
                char name[16];
                snprintf(name, sizeof(name), "dfg-%d", i);
                assert_int_equal(e2e_member_pid(e, "dfg", name), pids[i]);
        }
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, "kept", false, &l), 0);
        assert_int_equal(l->n, 1);
        etcd_kv_list_free(l);

        /* the next apply has nothing to do: the threshold run is not repeated within the hour */
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(e2e_audit_count(e, "dfg", "defrag.started"), 1);

        /* a 16 MiB quota (a rolling restart), then one key overwritten until etcd refuses */
        write_spec(e, "  options:\n    quotaBackendBytes: 16Mi\n"
                      "  defrag:\n    freeSpaceAbove: 64Ki\n    disarmNoSpace: true\n");
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_true(e2e_wait_ready(e, "dfg", 3, 30));
        size_t big_len = 256 << 10;
        char *big = xmalloc(big_len);
        memset(big, 'y', big_len);
        int k = 0;
        for (int i = 0; i < 400 && k != ETCD_ERR_NOSPACE; i++)
                k = etcd_put(c, "big", big, big_len, NULL);
        assert_int_equal(k, ETCD_ERR_NOSPACE);
        free(big);

        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(etcd_put(c, "after", "ok", 2, NULL), 0);
        st = e2e_status(e, "dfg");
        run = json_object_get(st, "last_defrag");
        assert_string_equal(json_string_value(json_object_get(run, "trigger")), "nospace");
        assert_string_equal(json_string_value(json_object_get(run, "result")), "succeeded");
        assert_true(json_is_true(json_object_get(run, "disarmed")));
        assert_true(json_integer_value(json_object_get(run, "compact_revision")) > 0);
        json_decref(st);
        assert_int_equal(e2e_audit_count(e, "dfg", "alarm.raised"), 1);
        assert_int_equal(e2e_audit_count(e, "dfg", "compaction"), 1);
        assert_int_equal(e2e_audit_count(e, "dfg", "alarm.disarmed"), 1);
        etcd_client_free(c);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_apply_defragments),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
