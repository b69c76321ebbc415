/*
 * The membership lifecycle end to end, against real etcd 3.4.23 and
 * 3.5.16 on the local target, driven through the real `gitcd apply`:
 * 1 → 3 (learners: the cluster formed already); 3 members at once (static
 * bootstrap) on a new cluster, and one whose third member cannot start
 * (BootstrapFailed); 3 → 5 → 3 with a writer whose every acknowledged key is
 * read back; 3 → 0 → 3 keeping the cluster ID, the seed's member ID and the
 * data; kill -9 of a member (restarted, same ID); a member's data lost
 * (replaced, quorum kept); two of three members killed (QuorumLost, nothing
 * removed, recovery); two clusters side by side; an invalid revision and a
 * forbidden transition after a good one (rejected, last spec in force).
 */
#include <pthread.h>
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
#include "util/xalloc.h"

#define APPLY_TIMEOUT 90

/* Wait for the writer to get going (slow under load), then read back every acknowledged key. */
static void writer_check(harness_writer *w, e2e *e, const char *name)
{
        harness_writer_wait(w, 11);
        e2e_writer_check(w, e, name, 10);
        harness_writer_free(w);
}

/* ---- helpers ------------------------------------------------------------ */

static bool etcd_has_member(e2e *e, const char *name, const char *member, uint64_t *ret_id)
{
        etcd_members *l = e2e_members(e, name);
        bool found = false;
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->members[i].name, member)) {
                        found = true;
                        if (ret_id)
                                *ret_id = l->members[i].id;
                }
        etcd_members_free(l);
        return found;
}

static char *cluster_id(e2e *e, const char *name)
{
        json_t *st = e2e_status(e, name);
        char *id = xstrdup(json_string_value(json_object_get(st, "cluster_id")));
        json_decref(st);
        return id;
}

/* ---- the lifecycle ------------------------------------------------------ */

static void lifecycle(const char *version)
{
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        const char *cl = "life";

        /* 1 → 3 */
        e2e_write_cluster(e, "life.yaml", cl, 1, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 1);
        uint64_t seed_id = 0;
        char *seed = xasprintf("%s-0", cl);
        assert_true(etcd_has_member(e, cl, seed, &seed_id));
        e2e_write_cluster(e, "life.yaml", cl, 3, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);
        char *cid = cluster_id(e, cl);
        etcd_client *c = e2e_client(e, cl);
        assert_int_equal(etcd_put(c, "kept", "across pause", 12, NULL), 0);
        etcd_client_free(c);

        /* 3 → 5 → 3 with a writer; the newest members go first. */
        char *eps = e2e_endpoints(e, cl);
        harness_writer *w = harness_writer_start(&(harness_writer_opts){.endpoints = eps});
        e2e_write_cluster(e, "life.yaml", cl, 5, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 5);
        e2e_write_cluster(e, "life.yaml", cl, 3, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);
        for (int i = 0; i < 3; i++) {
                char *m = xasprintf("%s-%d", cl, i);
                assert_true(etcd_has_member(e, cl, m, NULL));
                free(m);
        }
        writer_check(w, e, cl);
        assert_true(e2e_audit_count(e, cl, "member.remove") >= 2);

        /* 3 → 0: one dormant member keeps the data, no process runs. */
        e2e_write_cluster(e, "life.yaml", cl, 0, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        for (int i = 0; i < 3; i++) {
                char *m = xasprintf("%s-%d", cl, i);
                assert_int_equal(e2e_member_pid(e, cl, m), 0);
                free(m);
        }
        json_t *st = e2e_status(e, cl);
        assert_string_equal(json_string_value(json_object_get(st, "phase")), "Paused");
        json_decref(st);

        /* 0 → 3: same cluster, same seed member, data intact. */
        e2e_write_cluster(e, "life.yaml", cl, 3, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);
        char *cid2 = cluster_id(e, cl);
        assert_string_equal(cid, cid2);
        uint64_t seed_id2 = 0;
        assert_true(etcd_has_member(e, cl, seed, &seed_id2));
        assert_true(seed_id == seed_id2);
        c = e2e_client(e, cl);
        etcd_kv_list *l = NULL;
        assert_int_equal(etcd_get(c, "kept", false, &l), 0);
        assert_int_equal(l->n, 1);
        assert_string_equal(l->kvs[0].value, "across pause");
        etcd_kv_list_free(l);
        etcd_client_free(c);

        free(cid);
        free(cid2);
        free(eps);
        free(seed);
        e2e_free(e);
}

static void test_lifecycle_35(void **state)
{
        (void)state;
        lifecycle("3.5.16");
}

static void test_lifecycle_34(void **state)
{
        (void)state;
        lifecycle("3.4.23");
}

/* ---- failures ----------------------------------------------------------- */

/* kill -9 of a member: restarted with its data, same member ID. */
static void assert_killed_member_restarted(e2e *e, const char *cl)
{
        uint64_t id_before = 0, id_after = 0;
        assert_true(etcd_has_member(e, cl, "fail-1", &id_before));
        pid_t pid = e2e_member_pid(e, cl, "fail-1");
        assert_true(pid > 0);
        kill(pid, SIGKILL);
        usleep(200 * 1000);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);
        assert_true(etcd_has_member(e, cl, "fail-1", &id_after));
        assert_true(id_before == id_after);
        pid_t pid2 = e2e_member_pid(e, cl, "fail-1");
        assert_true(pid2 > 0 && pid2 != pid);
        int removes = e2e_audit_count(e, cl, "member.remove");
        assert_int_equal(removes, 0);
}

static void failures(const char *version)
{
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        const char *cl = "fail";
        e2e_write_cluster(e, "fail.yaml", cl, 3, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);

        assert_killed_member_restarted(e, cl);

        /* Two of three killed while gitcd is not running: restarted, nothing removed. */
        kill(e2e_member_pid(e, cl, "fail-1"), SIGKILL);
        kill(e2e_member_pid(e, cl, "fail-2"), SIGKILL);
        usleep(200 * 1000);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);
        assert_int_equal(e2e_audit_count(e, cl, "member.remove"), 0);

        /*
         * Two of three gone and not coming back for now (frozen): QuorumLost, gitcd
         * removes nothing and deletes nothing; once they return the cluster recovers.
         */
        pid_t p1 = e2e_member_pid(e, cl, "fail-1"), p2 = e2e_member_pid(e, cl, "fail-2");
        kill(p1, SIGSTOP);
        kill(p2, SIGSTOP);
        assert_int_equal(e2e_apply(e, NULL, 6), 1);
        json_t *qs = e2e_status(e, cl);
        json_t *cond = json_array_get(json_object_get(qs, "conditions"), 0);
        assert_string_equal(json_string_value(json_object_get(cond, "type")), "Available");
        assert_string_equal(json_string_value(json_object_get(cond, "reason")), "QuorumLost");
        json_decref(qs);
        assert_int_equal(e2e_audit_count(e, cl, "member.remove"), 0);
        assert_int_equal(e2e_audit_count(e, cl, "member.delete"), 0);
        kill(p1, SIGCONT);
        kill(p2, SIGCONT);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);
        assert_int_equal(e2e_member_pid(e, cl, "fail-1"), p1);

        /* A member's data lost: replaced by a new member while quorum holds; writes go on. */
        char *eps = e2e_endpoints(e, cl);
        harness_writer *w = harness_writer_start(&(harness_writer_opts){.endpoints = eps});
        usleep(300 * 1000);
        pid_t pid = e2e_member_pid(e, cl, "fail-2");
        kill(pid, SIGKILL);
        char *dir = e2e_member_dir(e, cl, "fail-2");
        char *data = path_join(dir, "data");
        usleep(100 * 1000);
        assert_int_equal(rm_rf(data), 0);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, cl, 3);
        assert_false(etcd_has_member(e, cl, "fail-2", NULL));
        assert_true(etcd_has_member(e, cl, "fail-3", NULL));
        assert_int_equal(e2e_audit_count(e, cl, "member.remove"), 1);
        writer_check(w, e, cl);

        /* A second cluster beside it. */
        e2e_write_cluster(e, "other.yaml", "other", 1, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, "other", 1);
        e2e_assert_voters(e, cl, 3);

        /* An invalid revision after a good one: exit 1, the last spec stays in force. */
        json_t *st = e2e_status(e, "other");
        char *hash = xstrdup(json_string_value(json_object_get(st, "desired_hash")));
        json_decref(st);
        e2e_write_file(e, "other.yaml",
                       "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                       "  name: other\nspec:\n  replicas: three\n");
        assert_int_equal(e2e_apply(e, NULL, 30), 1);
        st = e2e_status(e, "other");
        assert_string_equal(json_string_value(json_object_get(st, "desired_hash")), hash);
        json_decref(st);
        e2e_assert_voters(e, "other", 1);
        e2e_assert_voters(e, cl, 3);
        assert_true(e2e_audit_count(e, "other", "cluster.orphaned") == 0);

        /* A forbidden transition (a major/minor skip downgrade): rejected and recorded. */
        e2e_write_cluster(e, "other.yaml", "other", 1,
                          streq(version, "3.5.16") ? "3.4.23" : "3.6.0");
        (void)e2e_apply(e, NULL, 30);
        assert_true(e2e_audit_count(e, "other", "spec.rejected") >= 1);
        st = e2e_status(e, "other");
        assert_string_equal(json_string_value(json_object_get(st, "desired_hash")), hash);
        json_decref(st);
        e2e_assert_voters(e, "other", 1);

        /* A rolling upgrade 3.4 → 3.5, one member at a time, same members. */
        if (streq(version, "3.4.23") && e2e_have_version("3.5.16")) {
                etcd_members *before = e2e_members(e, cl);
                e2e_write_cluster(e, "fail.yaml", cl, 3, "3.5.16");
                e2e_apply_ok(e, APPLY_TIMEOUT);
                e2e_assert_voters(e, cl, 3);
                etcd_members *after = e2e_members(e, cl);
                for (size_t i = 0; i < before->n; i++)
                        assert_non_null(etcd_members_find(after, before->members[i].id));
                etcd_client *uc = e2e_client(e, cl);
                for (size_t i = 0; i < etcd_client_endpoint_count(uc); i++) {
                        etcd_endpoint_status *es = NULL;
                        assert_int_equal(etcd_status(uc, etcd_client_endpoint(uc, i), &es), 0);
                        assert_string_equal(es->version, "3.5.16");
                        etcd_endpoint_status_free(es);
                }
                etcd_client_free(uc);
                etcd_members_free(before);
                etcd_members_free(after);
                assert_int_equal(e2e_audit_count(e, cl, "member.restart"), 3);
        }

        free(hash);
        free(eps);
        free(dir);
        free(data);
        e2e_free(e);
}

static void test_failures_35(void **state)
{
        (void)state;
        failures("3.5.16");
}

static void test_failures_34(void **state)
{
        (void)state;
        failures("3.4.23");
}

/*
 * The progress deadline: a cluster that cannot converge (its etcd version is
 * not installed) becomes BootstrapFailed once progressDeadlineSeconds pass,
 * stays terminal on the next apply, and a spec change starts it afresh.
 */
static void test_deadline(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16") || e2e_have_version("3.6.0"))
                skip();
        e2e *e = e2e_new();
        e2e_write_file(e, "d.yaml",
                       "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                       "  name: late\nspec:\n  replicas: 1\n  version: \"3.6.0\"\n"
                       "  progressDeadlineSeconds: 2\n");
        assert_int_equal(e2e_apply(e, NULL, 20), 1);
        json_t *st = e2e_status(e, "late");
        json_t *conds = json_object_get(st, "conditions");
        bool failed = false;
        size_t i;
        json_t *cnd;
        json_array_foreach(conds, i, cnd)
        {
                if (streq(json_string_value(json_object_get(cnd, "type")), "Progressing"))
                        failed = streq(json_string_value(json_object_get(cnd, "reason")),
                                       "BootstrapFailed") &&
                                 streq(json_string_value(json_object_get(cnd, "status")), "False");
        }
        json_decref(st);
        assert_true(failed);
        assert_int_equal(e2e_audit_count(e, "late", "deadline.exceeded"), 1);
        /* Terminal until the spec changes: the next apply fails at once, no new event. */
        assert_int_equal(e2e_apply(e, NULL, 20), 1);
        assert_int_equal(e2e_audit_count(e, "late", "deadline.exceeded"), 1);
        /* A new spec starts afresh and converges. */
        e2e_write_cluster(e, "d.yaml", "late", 1, "3.5.16");
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, "late", 1);
        e2e_free(e);
}

/* ---- static bootstrap ---------------------------------------------------- */

/* The reason and message of a condition in `gitcd status -o json` (newly allocated). */
static void condition_of(e2e *e, const char *name, const char *type, char **ret_reason,
                         char **ret_message)
{
        json_t *st = e2e_status(e, name);
        size_t i;
        json_t *cnd;
        *ret_reason = *ret_message = NULL;
        json_array_foreach(json_object_get(st, "conditions"), i, cnd)
        {
                if (!streq(json_string_value(json_object_get(cnd, "type")), type))
                        continue;
                *ret_reason = xstrdup(json_string_value(json_object_get(cnd, "reason")));
                *ret_message = xstrdup(json_string_value(json_object_get(cnd, "message")));
        }
        json_decref(st);
        assert_non_null(*ret_reason);
}

/*
 * A new 3-member cluster forms with every member at once (one static
 * initial cluster: no MemberAdd, no promotion). Then a second one whose
 * gitcd is killed right after recording its members, and whose third
 * member cannot start (a file where its data folder goes): the other two
 * start from the records, and once the deadline passes the cluster is
 * BootstrapFailed, naming the member; nothing was added or removed. The
 * deadline leaves the two good members time to start on a loaded machine
 * under the sanitizers (at 5 s, bad-1 was once still starting when it
 * passed).
 */
static void static_bootstrap(const char *version)
{
        if (!e2e_have_version(version))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "stat.yaml", "stat", 3, version);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        e2e_assert_voters(e, "stat", 3);
        assert_int_equal(e2e_audit_count(e, "stat", "member.bootstrap"), 1);
        assert_int_equal(e2e_audit_count(e, "stat", "member.add-learner"), 0);
        assert_int_equal(e2e_audit_count(e, "stat", "member.promote"), 0);
        char *cid = cluster_id(e, "stat");
        assert_true(cid && cid[0]);
        free(cid);

        char *text = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                               "  name: bad\n  namespace: default\nspec:\n  replicas: 3\n"
                               "  version: \"%s\"\n  progressDeadlineSeconds: 15\n",
                               version);
        e2e_write_file(e, "bad.yaml", text);
        free(text);
        assert_int_equal(e2e_apply(e, "bootstrap.after-records", 60), 128 + SIGKILL);
        char *dir = e2e_member_dir(e, "bad", "bad-2");
        assert_int_equal(mkdir_p(dir, 0700), 0);
        char *data = path_join(dir, "data");
        assert_int_equal(write_file_atomic(data, "not a folder", 12, 0600), 0);
        assert_int_equal(e2e_apply(e, NULL, 60), 1);
        char *reason = NULL, *message = NULL;
        condition_of(e, "bad", "Progressing", &reason, &message);
        assert_string_equal(reason, "BootstrapFailed");
        if (!strstr(message, "bad-2"))
                fail_msg("BootstrapFailed does not name bad-2: %s", message);
        assert_int_equal(e2e_audit_count(e, "bad", "member.add-learner"), 0);
        assert_int_equal(e2e_audit_count(e, "bad", "member.remove"), 0);
        assert_true(e2e_member_pid(e, "bad", "bad-0") > 0);
        assert_true(e2e_member_pid(e, "bad", "bad-1") > 0);
        /* The first cluster was never touched. */
        e2e_assert_voters(e, "stat", 3);
        free(reason);
        free(message);
        free(data);
        free(dir);
        e2e_free(e);
}

static void test_static_35(void **state)
{
        (void)state;
        static_bootstrap("3.5.16");
}

static void test_static_34(void **state)
{
        (void)state;
        static_bootstrap("3.4.23");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_lifecycle_35), cmocka_unit_test(test_lifecycle_34),
            cmocka_unit_test(test_failures_35),  cmocka_unit_test(test_failures_34),
            cmocka_unit_test(test_deadline),     cmocka_unit_test(test_static_35),
            cmocka_unit_test(test_static_34),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
