/*
 * Disaster recovery end to end on real etcd 3.5.16 (local target), through
 * the real `gitcd` binary, in one cluster's life:
 *
 *  1. three members under a writer (every acknowledged put and its
 *     revision recorded), a snapshot taken to a local folder on the way;
 *  2. two members killed and their data directories deleted for good:
 *     gitcd only waits (QuorumLost) and `gitcd status` proposes the
 *     survivor with the exact command; `gitcd recover --from-member` the
 *     survivor: every acknowledged write the survivor held (revision up to
 *     the one recovered to) is there, three healthy voters again, the
 *     survivor kept its member ID and runs without --force-new-cluster;
 *  3. every member's data lost, with `gitcd run` holding the state:
 *     `gitcd recover --from-snapshot` leaves the work to it and waits;
 *     every write up to the snapshot's revision is there, three healthy
 *     voters of a new cluster ID.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NAME     "demo"
#define VERSION  "3.5.16"
#define MAX_KEYS 100000

static uint64_t member_id(e2e *e, const char *member)
{
        etcd_members *l = e2e_members(e, NAME);
        uint64_t id = 0;
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->members[i].name, member))
                        id = l->members[i].id;
        etcd_members_free(l);
        return id;
}

/* The member's data is gone for good: its process killed, its data folder deleted. */
static void destroy(e2e *e, const char *member)
{
        pid_t pid = e2e_member_pid(e, NAME, member);
        if (pid > 0)
                kill(pid, SIGKILL);
        _cleanup_free_ char *dir = e2e_member_dir(e, NAME, member);
        _cleanup_free_ char *data = path_join(dir, "data");
        for (int i = 0; i < 100 && pid > 0 && kill(pid, 0) == 0; i++)
                usleep(20 * 1000);
        assert_int_equal(rm_rf(data), 0);
}

static json_t *last_recovery(e2e *e)
{
        json_t *st = e2e_status(e, NAME);
        json_t *r = json_incref(json_array_get(json_object_get(st, "recoveries"), 0));
        json_decref(st);
        assert_non_null(r);
        return r;
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
                found = found || strstr(data + i, word);
        free(data);
        return found;
}

/* gitcd does nothing by itself: an apply only waits, and says what it knows. */
static void assert_recovery_proposed(e2e *e)
{
        assert_int_not_equal(e2e_apply(e, NULL, 8), 0);
        json_t *st = e2e_status(e, NAME);
        assert_string_equal(json_string_value(json_object_get(st, "phase")), "QuorumLost");
        json_t *proposal = json_object_get(json_object_get(st, "quorum_loss"), "proposal");
        assert_non_null(proposal);
        assert_string_equal(json_string_value(json_object_get(proposal, "command")),
                            "gitcd recover default/" NAME " --from-member demo-0");
        json_decref(st);
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", "default/" NAME, NULL), 0);
        if (!strstr(out, "Run: gitcd recover default/" NAME " --from-member demo-0"))
                fail_msg("gitcd status proposes no recovery:\n%s", out);
        free(out);
}

static void test_recovery(void **unused)
{
        (void)unused;
        if (!e2e_have_version(VERSION))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "demo.yaml", NAME, 3, VERSION);
        assert_int_equal(e2e_apply(e, NULL, 90), 0);
        e2e_assert_voters(e, NAME, 3);
        uint64_t id0 = member_id(e, "demo-0");

        /* 1. A writer; a snapshot on the way. */
        _cleanup_free_ char *eps = e2e_endpoints(e, NAME);
        harness_writer *w = harness_writer_start(&(harness_writer_opts){
            .endpoints = eps, .max = MAX_KEYS, .interval_ms = 5, .call_timeout_ms = 2000});
        harness_writer_wait(w, 50);
        _cleanup_free_ char *backups = path_join(e->root, "backups");
        char *out = NULL;
        int k = e2e_run(e, &out, "snapshot", "save", "default/" NAME, "--to", backups, NULL);
        if (k != 0)
                fail_msg("snapshot save exited %d: %s", k, out);
        free(out);
        json_t *st = e2e_status(e, NAME);
        json_decref(st);
        out = NULL;
        assert_int_equal(e2e_run(e, &out, "snapshot", "list", "default/" NAME, "-o", "json", NULL),
                         0);
        json_t *snap = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
        free(out);
        assert_non_null(snap);
        int64_t snap_id = json_integer_value(json_object_get(snap, "id"));
        int64_t snap_rev = json_integer_value(json_object_get(snap, "revision"));
        json_decref(snap);
        assert_true(snap_id > 0 && snap_rev > 0);
        harness_writer_wait(w, w->acked + 50);

        /* 2. Two members' data deleted for good while the writer writes. */
        destroy(e, "demo-1");
        destroy(e, "demo-2");
        int acked_at_loss = w->acked;
        /* gitcd does nothing by itself: an apply only waits, and says what it knows. */
        assert_recovery_proposed(e);

        out = NULL;
        char *err = NULL;
        const char *const rec[] = {
            "recover", "default/" NAME, "--from-member", "demo-0", "--timeout", "120s", NULL};
        k = e2e_runv(e, &out, &err, rec);
        if (k != 0)
                fail_msg("gitcd recover exited %d:\n%s\n%s", k, out, err);
        free(out);
        free(err);
        harness_writer_stop(w);
        e2e_assert_voters(e, NAME, 3);
        assert_int_equal(member_id(e, "demo-0"), id0);
        assert_false(cmdline_has(e2e_member_pid(e, NAME, "demo-0"), "--force-new-cluster"));
        json_t *r = last_recovery(e);
        assert_string_equal(json_string_value(json_object_get(r, "result")), "succeeded");
        int64_t rev = json_integer_value(json_object_get(r, "revision"));
        json_decref(r);
        /* The survivor held at least what the snapshot held, before the loss. */
        assert_true(rev >= snap_rev);
        int kept = e2e_writer_kept(w, e, NAME, rev);
        assert_true(kept >= 50 && kept <= acked_at_loss);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.succeeded"), 1);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.cleaned"), 1);

        /* 3. Every member's data lost: the snapshot becomes the seed of a new cluster ID. */
        st = e2e_status(e, NAME);
        _cleanup_free_ char *old_cluster =
            xstrdup(json_string_value(json_object_get(st, "cluster_id")));
        json_t *members = json_object_get(st, "members");
        for (size_t i = 0; i < json_array_size(members); i++)
                destroy(e, json_string_value(json_object_get(json_array_get(members, i), "name")));
        json_decref(st);
        /* This time a `gitcd run` holds the state: it does the work, recover waits for it. */
        pid_t daemon = e2e_start_daemon(e, NULL);
        for (int i = 0; i < 100 && e2e_lock_pid(e) != daemon; i++)
                usleep(50 * 1000);
        assert_int_equal(e2e_lock_pid(e), daemon);
        _cleanup_free_ char *id = xasprintf("%lld", (long long)snap_id);
        const char *const rec2[] = {
            "recover", "default/" NAME, "--from-snapshot", id, "--timeout", "120s", NULL};
        out = err = NULL;
        k = e2e_runv(e, &out, &err, rec2);
        if (k != 0)
                fail_msg("gitcd recover --from-snapshot exited %d:\n%s\n%s", k, out, err);
        if (!strstr(out, "carries the recovery out"))
                fail_msg("gitcd recover did not leave the work to gitcd run:\n%s", out);
        free(out);
        free(err);
        if (!e2e_wait_ready(e, NAME, 3, 120)) {
                _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
                fail_msg("not grown back to 3 members; gitcd run said:\n%s", log);
        }
        e2e_assert_voters(e, NAME, 3);
        r = last_recovery(e);
        assert_string_equal(json_string_value(json_object_get(r, "result")), "succeeded");
        assert_int_equal(json_integer_value(json_object_get(r, "revision")), snap_rev);
        json_decref(r);
        kept = e2e_writer_kept(w, e, NAME, snap_rev);
        assert_true(kept >= 50);
        st = e2e_status(e, NAME);
        assert_string_not_equal(json_string_value(json_object_get(st, "cluster_id")), old_cluster);
        json_decref(st);
        assert_int_equal(e2e_audit_count(e, NAME, "recovery.succeeded"), 2);
        out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", "default/" NAME, NULL), 0);
        assert_non_null(strstr(out, "Recoveries:"));
        assert_null(strstr(out, "Quorum lost"));
        free(out);

        harness_writer_free(w);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_recovery),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
