/*
 * Rolling upgrades end to end on real etcd, through the real `gitcd apply`
 * and `gitcd plan` on the local target: a 3-member cluster goes 3.4.23 →
 * 3.5.16 → the newest 3.5 Debian sid ships (scripts/setup fetches it), each
 * step under a writer whose every acknowledged key is read back, with at
 * most one leader change per member (raft term) and every member serving
 * the new version. On the way the version policy refuses a skipped minor
 * (3.4 → 3.6), 3.6 from a 3.5 older than 3.5.26 and a downgrade, each with
 * its reason. The minor upgrade takes a snapshot first (spec.snapshots).
 * Last, a version whose etcd binary does not start: the first
 * member rolled onto it crash-loops, the rollout stops with UpgradeFailed and
 * the two other members keep serving; setting the old version back (one spec
 * change) brings the member back.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CL            "up"
#define APPLY_TIMEOUT 120
#define BROKEN        "3.5.99" /* a version whose etcd exits at once */

static harness_writer *writer_start(e2e *e, const char *prefix)
{
        _cleanup_free_ char *eps = e2e_endpoints(e, CL);
        return harness_writer_start(&(harness_writer_opts){.endpoints = eps, .prefix = prefix});
}

/* Stop the writer; every acknowledged key is there, in order. */
static void writer_check(harness_writer *w, e2e *e)
{
        e2e_writer_check(w, e, CL, 10);
        harness_writer_free(w);
}

/* Every member answers Status with `version`; returns the highest raft term seen. */
static uint64_t assert_serving(e2e *e, const char *version, size_t want)
{
        etcd_client *c = e2e_client(e, CL);
        uint64_t term = 0;
        size_t n = 0;
        for (size_t i = 0; i < etcd_client_endpoint_count(c); i++) {
                etcd_endpoint_status *es = NULL;
                if (etcd_status(c, etcd_client_endpoint(c, i), &es) < 0)
                        continue;
                assert_string_equal(es->version, version);
                term = es->raft_term > term ? es->raft_term : term;
                n++;
                etcd_endpoint_status_free(es);
        }
        etcd_client_free(c);
        assert_int_equal(n, want);
        return term;
}

/* `gitcd plan` of the source as it is now: stdout and stderr together. */
static char *plan_text(e2e *e)
{
        char *out = NULL, *err = NULL;
        const char *args[] = {"plan", "--source", e->source, NULL};
        (void)e2e_runv(e, &out, &err, args);
        char *all = xasprintf("%s%s", out ? out : "", err ? err : "");
        free(out);
        free(err);
        return all;
}

static void assert_plan_says(e2e *e, const char *text)
{
        _cleanup_free_ char *p = plan_text(e);
        if (!strstr(p, text))
                fail_msg("gitcd plan does not say \"%s\":\n%s", text, p);
}

/* The cluster's spec: 3 members on version, snapshots kept in root/snaps (taken by upgrades). */
static void write_spec(e2e *e, const char *version)
{
        _cleanup_free_ char *snaps = path_join(e->root, "snaps");
        _cleanup_free_ char *y = xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                                           "metadata:\n  name: " CL "\n  namespace: default\n"
                                           "spec:\n  replicas: 3\n  version: \"%s\"\n"
                                           "  progressDeadlineSeconds: 120\n"
                                           "  snapshots:\n    schedule: \"0 0 1 1 *\"\n"
                                           "    destination:\n      local:\n        path: %s\n",
                                           version, snaps);
        e2e_write_file(e, "up.yaml", y);
}

/* A version the spec may not move to: plan and apply say why, nothing changes. */
static void refused(e2e *e, const char *version, const char *back, const char *why)
{
        int before = e2e_audit_count(e, CL, "spec.rejected");
        write_spec(e, version);
        assert_plan_says(e, why);
        (void)e2e_apply(e, NULL, 30);
        assert_true(e2e_audit_count(e, CL, "spec.rejected") > before);
        write_spec(e, back);
}

/* One rolling upgrade under a writer: no lost write, one leader change per member at most. */
static void upgrade(e2e *e, const char *from, const char *to, const char *prefix)
{
        uint64_t term0 = assert_serving(e, from, 3);
        int restarts = e2e_audit_count(e, CL, "member.restart");
        write_spec(e, to);
        assert_plan_says(e, "restart 3 members one at a time on ");
        harness_writer *w = writer_start(e, prefix);
        usleep(300 * 1000);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        writer_check(w, e);
        uint64_t term1 = assert_serving(e, to, 3);
        if (term1 - term0 > 3)
                fail_msg("%s → %s: raft term %llu → %llu, more than one election per member", from,
                         to, (unsigned long long)term0, (unsigned long long)term1);
        assert_int_equal(e2e_audit_count(e, CL, "member.restart") - restarts, 3);
}

/* A private etcd folder: the real versions, and BROKEN whose etcd exits at once. */
static char *etcd_dir(e2e *e, const char *const *versions, size_t n)
{
        char *dir = path_join(e->root, "etcd");
        _cleanup_free_ char *real = harness_etcd_dir();
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *from = path_join(real, versions[i]);
                _cleanup_free_ char *to = path_join(dir, versions[i]);
                assert_int_equal(mkdir_p(dir, 0755), 0);
                assert_int_equal(symlink(from, to), 0);
        }
        _cleanup_free_ char *bdir = path_join(dir, BROKEN);
        assert_int_equal(mkdir_p(bdir, 0755), 0);
        _cleanup_free_ char *bin = path_join(bdir, "etcd");
        static const char script[] =
            "#!/bin/sh\necho 'etcd " BROKEN ": broken build' >&2\nexit 1\n";
        assert_int_equal(write_file_atomic(bin, script, strlen(script), 0755), 0);
        return dir;
}

static void test_upgrades(void **state)
{
        (void)state;
        _cleanup_free_ char *newest = harness_etcd_newest("3.5");
        if (!e2e_have_version("3.4.23") || !e2e_have_version("3.5.16") || !newest ||
            streq(newest, "3.5.16")) {
                print_message("skipped: needs etcd 3.4.23, 3.5.16 and a newer 3.5 (sid's, "
                              "fetched by scripts/setup) in %s\n",
                              "the etcd cache");
                skip();
        }
        e2e *e = e2e_new();
        /* the snapshots the spec keeps in root/snaps: a folder on the gitcd host */
        e2e_set_policy(e, "localSnapshotRoots: [%s]", e->root);
        const char *versions[] = {"3.4.23", "3.5.16", newest};
        _cleanup_free_ char *dir = etcd_dir(e, versions, 3);
        _cleanup_free_ char *saved = xstrdup_null(getenv("GITCD_ETCD_DIR"));
        setenv("GITCD_ETCD_DIR", dir, 1);

        write_spec(e, "3.4.23");
        e2e_apply_ok(e, APPLY_TIMEOUT);
        assert_serving(e, "3.4.23", 3);

        /* A skipped minor is refused. */
        refused(e, "3.6.0", "3.4.23", "3.4.23 → 3.6.0 skips minor 3.5; upgrade to 3.5.x first");

        upgrade(e, "3.4.23", "3.5.16", "a/");
        /* A minor upgrade with spec.snapshots: one snapshot before the first member rolled. */
        assert_int_equal(e2e_audit_count(e, CL, "upgrade.snapshot"), 1);
        assert_true(e2e_audit_count(e, CL, "snapshot.save") >= 1);

        /* 3.6 needs 3.5.26 or later on every member first (etcd's upgrade guide). */
        refused(e, "3.6.0", "3.5.16", "3.5.26 or later before 3.6");

        upgrade(e, "3.5.16", newest, "b/");
        assert_int_equal(e2e_audit_count(e, CL, "upgrade.snapshot"), 1); /* a patch: none */

        /* Back to 3.4 once the upgrade finished: a downgrade etcd does not support. */
        refused(e, "3.4.23", newest, "is a downgrade etcd does not support");
        /* From sid's 3.5 (≥ 3.5.26), 3.6 would be allowed: plan shows the roll. */
        write_spec(e, "3.6.0");
        assert_plan_says(e, "restart 3 members one at a time on 3.6.0 in this order: ");
        write_spec(e, newest);

        /* A version that does not start: UpgradeFailed, the others untouched. */
        write_spec(e, BROKEN);
        assert_int_not_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(e2e_audit_count(e, CL, "upgrade.failed"), 1);
        json_t *st = e2e_status(e, CL);
        bool failed = false;
        size_t i;
        json_t *cnd;
        json_array_foreach(json_object_get(st, "conditions"), i, cnd)
        {
                if (streq(json_string_value(json_object_get(cnd, "type")), "Progressing"))
                        failed = streq(json_string_value(json_object_get(cnd, "reason")),
                                       "UpgradeFailed");
        }
        json_decref(st);
        assert_true(failed);
        assert_serving(e, newest, 2);

        /* One spec change rolls it back. */
        write_spec(e, newest);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        assert_serving(e, newest, 3);

        if (saved)
                setenv("GITCD_ETCD_DIR", saved, 1);
        else
                unsetenv("GITCD_ETCD_DIR");
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_upgrades),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
