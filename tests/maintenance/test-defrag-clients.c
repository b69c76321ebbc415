/*
 * What a client feels while gitcd defragments, through the real binary on
 * the local target with the newest etcd 3.5 in the cache (which has
 * --experimental-stop-grpc-service-on-defrag):
 *
 *   - every member gitcd starts runs with the flag on its command line;
 *   - a 3-member cluster whose database was fragmented gains
 *     `defrag: {freeSpaceAbove: 64Ki}`; while `gitcd apply` defragments
 *     it, a writer puts keys through all three endpoints, and afterwards
 *     every acknowledged write is there (none lost; failed puts are
 *     retried under the same key and printed);
 *   - the audit log has one defrag.member event per member, each member
 *     once, and the leader each event recorded (the one the member
 *     reported right before its Defragment) is never the member itself:
 *     no member was defragmented while it led.
 *
 * Lean on purpose: a few MiB of data and one apply; the 1 GB case and the
 * latency figures are bench/defrag.c. The ordering and pause rules are
 * tests/maintenance/test-due.c.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/harness/writer.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define APPLY_TIMEOUT 120
#define STOP_GRPC     "--experimental-stop-grpc-service-on-defrag=true"

static void write_spec(e2e *e, const char *version, const char *extra)
{
        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                               "kind: EtcdCluster\n"
                               "metadata:\n"
                               "  name: dfc\n"
                               "spec:\n"
                               "  replicas: 3\n"
                               "  version: \"%s\"\n"
                               "%s",
                               version, extra);
        e2e_write_file(e, "dfc.yaml", text);
        free(text);
}

static bool cmdline_has(pid_t pid, const char *word)
{
        _cleanup_free_ char *p = xasprintf("/proc/%ld/cmdline", (long)pid);
        char *data = NULL;
        size_t len = 0;
        if (read_file(p, 1 << 16, &data, &len) < 0)
                return false;
        bool found = false;
        for (size_t i = 0; i < len; i += strlen(data + i) + 1)
                found = found || streq(data + i, word);
        free(data);
        return found;
}

/* The member ID (16 hex digits, as the audit writes it) of each member, by name. */
static void member_ids(e2e *e, char ids[3][17])
{
        etcd_members *l = e2e_members(e, "dfc");
        assert_non_null(l);
        assert_int_equal(l->n, 3);
        for (size_t i = 0; i < l->n; i++) {
                int k = l->members[i].name[strlen(l->members[i].name) - 1] - '0';
                assert_true(k >= 0 && k < 3);
                etcd_member_id_format(l->members[i].id, ids[k]);
        }
        etcd_members_free(l);
}

static void test_defrag_clients(void **unused)
{
        (void)unused;
        _cleanup_free_ char *version = harness_etcd_newest("3.5");
        if (!version)
                skip();
        e2e *e = e2e_new();
        write_spec(e, version, "");
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_true(e2e_wait_ready(e, "dfc", 3, 30));
        for (int i = 0; i < 3; i++) {
                char name[16];
                snprintf(name, sizeof(name), "dfc-%d", i);
                pid_t pid = e2e_member_pid(e, "dfc", name);
                assert_true(pid > 0);
                assert_true(cmdline_has(pid, STOP_GRPC));
        }

        /* fragment: 4 MiB written, deleted, compacted */
        etcd_client *c = e2e_client(e, "dfc");
        static char blob[8192];
        memset(blob, 'x', sizeof(blob));
        for (int i = 0; i < 512; i++) {
                char key[32];
                snprintf(key, sizeof(key), "frag/%04d", i);
                assert_int_equal(etcd_put(c, key, blob, sizeof(blob), NULL), 0);
        }
        int64_t rev = 0;
        assert_int_equal(etcd_delete(c, "frag/", true, NULL), 0);
        assert_int_equal(etcd_put(c, "kept", "yes", 3, &rev), 0);
        assert_int_equal(etcd_compact(c, rev, true), 0);

        /* a client with all three endpoints writes through the whole run */
        _cleanup_free_ char *endpoints = e2e_endpoints(e, "dfc");
        harness_writer_opts wo = {.endpoints = endpoints, .interval_ms = 5};
        harness_writer *w = harness_writer_start(&wo);
        harness_writer_wait(w, 20);
        write_spec(e, version, "  defrag:\n    freeSpaceAbove: 64Ki\n");
        assert_int_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        int before = w->acked;
        harness_writer_wait(w, before + 20);
        harness_writer_stop(w);
        print_message("writer: %d puts acknowledged, %d failed and retried\n", w->acked, w->failed);
        e2e_writer_check(w, e, "dfc", 40);
        harness_writer_free(w);

        /* each member once, none while it led */
        char ids[3][17];
        member_ids(e, ids);
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "log", "-o", "json", "--cluster", "default/dfc",
                                 "--action", "defrag.member", NULL),
                         0);
        int seen[3] = {0};
        int events = 0;
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_error_t err;
                json_t *ev = json_loads(line, 0, &err);
                assert_non_null(ev);
                json_t *after = json_object_get(ev, "after");
                const char *member = json_string_value(json_object_get(after, "member"));
                const char *leader = json_string_value(json_object_get(after, "leader"));
                assert_non_null(member);
                assert_non_null(leader);
                int k = member[strlen(member) - 1] - '0';
                assert_true(k >= 0 && k < 3);
                seen[k]++;
                assert_string_not_equal(leader, ids[k]);
                events++;
                json_decref(ev);
        }
        free(out);
        assert_int_equal(events, 3);
        for (int i = 0; i < 3; i++)
                assert_int_equal(seen[i], 1);
        assert_int_equal(e2e_audit_count(e, "dfc", "defrag.finished"), 1);

        etcd_client_free(c);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defrag_clients),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
