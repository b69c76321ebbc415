/*
 * Ordered rollouts end to end on real etcd, through the real `gitcd
 * apply`, `gitcd status` and `gitcd plan` on the local target, the source
 * a Git repository with a commit per change: clusters
 * staging and prod of one member each, prod.dependsOn: [staging] with a
 * 5 s soak. One apply creates staging, then prod after the soak; one
 * change bumping both from 3.5.16 to the newest 3.5 in the cache upgrades
 * staging first and prod after the soak (the order read from the audit
 * log and the members' versions, the soak from the audit's own times as a
 * lower bound, never a window). Last, a change of both onto a version
 * whose etcd binary does not start: staging's upgrade fails for real
 * (UpgradeFailed), prod is held with the reason in `gitcd status` and
 * `gitcd plan` and keeps serving its version, untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define APPLY_TIMEOUT 180
#define BROKEN        "3.5.99" /* a version whose etcd exits at once */

/* One commit of the source folder (a Git repository: gitcd reads its head commit). */
static void commit(e2e *e, const char *message)
{
        _cleanup_free_ char *cmd =
            xasprintf("cd '%s' && { [ -d .git ] || git init -q -b main; } && git add -A && "
                      "git -c user.name=Ops -c user.email=ops@example.com commit -q -m '%s'",
                      e->source, message);
        assert_int_equal(system(cmd), 0);
}

static void write_both(e2e *e, const char *staging, const char *prod)
{
        e2e_write_cluster(e, "staging.yaml", "staging", 3, staging);
        _cleanup_free_ char *text =
            xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                      "  name: prod\n  namespace: default\nspec:\n  replicas: 1\n"
                      "  version: \"%s\"\n  dependsOn: [staging]\n  rollout:\n"
                      "    soakSeconds: 5\n",
                      prod);
        e2e_write_file(e, "prod.yaml", text);
        _cleanup_free_ char *message = xasprintf("staging %s, prod %s", staging, prod);
        commit(e, message);
}

/* A private etcd folder: the real versions, and BROKEN whose etcd exits at once. */
static char *etcd_dir(e2e *e, const char *const *versions, size_t n)
{
        char *dir = path_join(e->root, "etcd");
        _cleanup_free_ char *real = harness_etcd_dir();
        assert_int_equal(mkdir_p(dir, 0755), 0);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *from = path_join(real, versions[i]);
                _cleanup_free_ char *to = path_join(dir, versions[i]);
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

/* The one member of the cluster answers Status with version. */
static void assert_serving(e2e *e, const char *name, const char *version)
{
        etcd_client *c = e2e_client(e, name);
        etcd_endpoint_status *es = NULL;
        assert_int_equal(etcd_status(c, etcd_client_endpoint(c, 0), &es), 0);
        assert_string_equal(es->version, version);
        etcd_endpoint_status_free(es);
        etcd_client_free(c);
}

/* Every audit event, oldest first (gitcd log -o json lists the newest first). */
static json_t *audit_log(e2e *e)
{
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "log", "-o", "json", NULL), 0);
        json_t *events = json_array();
        for (char *line = out; line && *line;) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                json_t *ev = json_loads(line, 0, NULL);
                if (ev)
                        json_array_insert_new(events, 0, ev);
                line = nl ? nl + 1 : NULL;
        }
        free(out);
        return events;
}

/*
 * The index in events of the first (last) event of cluster and action
 * ("member.*": any action of that prefix) after `after`; -1.
 */
static int find_event(json_t *events, const char *cluster, const char *action, int after, bool last)
{
        int found = -1;
        for (size_t i = (size_t)(after + 1); i < json_array_size(events); i++) {
                json_t *ev = json_array_get(events, i);
                const char *a = json_string_value(json_object_get(ev, "action"));
                size_t len = strlen(action);
                bool match =
                    action[len - 1] == '*' ? a && strneq(a, action, len - 1) : streq_ptr(a, action);
                if (streq_ptr(json_string_value(json_object_get(ev, "cluster")), cluster) &&
                    match) {
                        found = (int)i;
                        if (!last)
                                break;
                }
        }
        return found;
}

/* An event's time in whole seconds ("2026-11-22T12:00:00Z", as gitcd log writes it). */
static int64_t event_s(json_t *events, int i)
{
        const char *t = json_string_value(json_object_get(json_array_get(events, i), "time"));
        assert_non_null(t);
        struct tm tm = {0};
        const char *end = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);
        assert_non_null(end);
        return (int64_t)timegm(&tm);
}

/*
 * staging's member restarted onto the new version, staging converged,
 * then prod released (at least the soak after), then prod's restart.
 */
static void assert_order(e2e *e, int from)
{
        json_t *ev = audit_log(e);
        int st_restart = find_event(ev, "default/staging", "member.restart", from, true);
        int wait = find_event(ev, "default/prod", "rollout.wait", from, false);
        int release = find_event(ev, "default/prod", "rollout.release", from, false);
        int pr_restart = find_event(ev, "default/prod", "member.restart", from, false);
        assert_true(st_restart > from && wait > from);
        assert_true(wait < st_restart && st_restart < release && release < pr_restart);
        /* the wait and the release are of the one commit that changed both */
        const char *c1 = json_string_value(json_object_get(json_array_get(ev, wait), "commit"));
        const char *c2 = json_string_value(json_object_get(json_array_get(ev, release), "commit"));
        assert_non_null(c1);
        assert_string_equal(c1, c2);
        /*
         * the soak: released no sooner than 5 s after staging's member came
         * back (whole seconds: floor(b) - floor(a) > (b - a) - 1 >= 4)
         */
        assert_true(event_s(ev, release) - event_s(ev, st_restart) >= 5);
        json_decref(ev);
}

static void test_order(void **state)
{
        (void)state;
        _cleanup_free_ char *newest = harness_etcd_newest("3.5");
        if (!e2e_have_version("3.5.16") || !newest || streq(newest, "3.5.16")) {
                print_message("skipped: needs etcd 3.5.16 and a newer 3.5 in the etcd cache\n");
                skip();
        }
        e2e *e = e2e_new();
        const char *versions[] = {"3.5.16", newest};
        _cleanup_free_ char *dir = etcd_dir(e, versions, 2);
        _cleanup_free_ char *saved = xstrdup_null(getenv("GITCD_ETCD_DIR"));
        setenv("GITCD_ETCD_DIR", dir, 1);

        /* created in order: prod only after staging converged and soaked */
        int64_t t0 = now_mono_ms();
        write_both(e, "3.5.16", "3.5.16");
        e2e_apply_ok(e, APPLY_TIMEOUT);
        assert_serving(e, "staging", "3.5.16");
        assert_serving(e, "prod", "3.5.16");
        json_t *ev = audit_log(e);
        int release = find_event(ev, "default/prod", "rollout.release", -1, false);
        int created = find_event(ev, "default/staging", "member.*", -1, false);
        assert_true(created >= 0 && release > created);
        assert_true(find_event(ev, "default/prod", "member.start-seed", -1, false) > release);
        int from = (int)json_array_size(ev) - 1;
        json_decref(ev);
        print_message("created in order in %lld ms\n", (long long)(now_mono_ms() - t0));

        /* one change of both: staging upgraded first, prod after the soak */
        t0 = now_mono_ms();
        write_both(e, newest, newest);
        e2e_apply_ok(e, APPLY_TIMEOUT);
        assert_serving(e, "staging", newest);
        assert_serving(e, "prod", newest);
        assert_order(e, from);
        print_message("upgraded in order in %lld ms\n", (long long)(now_mono_ms() - t0));

        /* staging's upgrade fails for real: prod held with the reason, untouched */
        t0 = now_mono_ms();
        int restarts = e2e_audit_count(e, "prod", "member.restart");
        write_both(e, BROKEN, BROKEN);
        assert_int_not_equal(e2e_apply(e, NULL, APPLY_TIMEOUT), 0);
        assert_int_equal(e2e_audit_count(e, "staging", "upgrade.failed"), 1);
        char *out = NULL;
        assert_int_equal(e2e_run(e, &out, "status", "default/prod", NULL), 0);
        if (!strstr(out, "DependencyFailed: held: staging UpgradeFailed: member staging-"))
                fail_msg("gitcd status does not say why prod is held:\n%s", out);
        free(out);
        out = NULL;
        (void)e2e_run(e, &out, "plan", "--source", e->source, NULL);
        if (!strstr(out, "default/prod: held: staging UpgradeFailed: member staging-"))
                fail_msg("gitcd plan does not say why prod is held:\n%s", out);
        free(out);
        assert_serving(e, "prod", newest);
        assert_int_equal(e2e_audit_count(e, "prod", "member.restart"), restarts);
        /* a wait per change, and this one's move from waiting to held: once each */
        assert_int_equal(e2e_audit_count(e, "prod", "rollout.wait"), 4);
        print_message("held in %lld ms\n", (long long)(now_mono_ms() - t0));

        if (saved)
                setenv("GITCD_ETCD_DIR", saved, 1);
        else
                unsetenv("GITCD_ETCD_DIR");
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_order),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
