/*
 * Restore drills end to end through the gitcd binary on the local target:
 * real etcd 3.5.16, a real s3rver (tests/harness/s3rver.h) as the
 * destination, a real webhook receiver (tests/ops/ops-test.h) and the
 * daemon's /metrics. A cluster with spec.snapshots to S3 (verify left at
 * its default, every):
 *   - `gitcd run` takes the scheduled snapshot, drills it and records it
 *     verified by HashKV with its restore time; SnapshotsHealthy is True
 *     (SnapshotVerified) and /metrics counts the drill;
 *   - `gitcd snapshot verify` killed right after it started its throwaway
 *     etcd: that etcd dies with it, and the drill's folder and record are
 *     left for the next start to clean up;
 *   - a snapshot taken by hand while the daemon is down is damaged in
 *     s3rver's files after the upload; the daemon, started again, removes
 *     the killed drill's leftovers (its record closed unverified, the
 *     earlier proof kept), drills the damaged snapshot and records it
 *     verify-failed; a webhook snapshot.verify_failed is sent, /metrics
 *     counts it, SnapshotsHealthy turns False (VerifyFailed) naming the
 *     snapshot still proven, which stays the restore candidate of
 *     `gitcd snapshot list` and `gitcd recover --from-snapshot latest`.
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "snapshots/drill.h"
#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/harness/s3rver.h"
#include "tests/ops/ops-test.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define SERIES(name, extra) name "{namespace=\"default\",cluster=\"drilled\"" extra "}"

/* `gitcd snapshot list -o json default/drilled`, as an array, newest first. */
static json_t *records(e2e *e)
{
        char *out = NULL;
        const char *args[] = {"snapshot", "list", "-o", "json", "default/drilled", NULL};
        assert_int_equal(e2e_runv(e, &out, NULL, args), 0);
        json_t *all = json_array();
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                json_t *j = json_loads(line, 0, NULL);
                assert_non_null(j);
                json_array_append_new(all, j);
        }
        free(out);
        return all;
}

static json_t *record(json_t *recs, int64_t id)
{
        size_t i;
        json_t *r;
        json_array_foreach(recs, i, r)
        {
                if (json_integer_value(json_object_get(r, "id")) == id)
                        return r;
        }
        return NULL;
}

static const char *str(json_t *o, const char *key)
{
        return json_string_value(json_object_get(o, key));
}

/* Wait until snapshot id (0: the newest scheduled one) has a drill verdict; its record. */
static json_t *wait_verdict(e2e *e, int64_t id, const char *log, int timeout_s)
{
        for (int64_t t0 = now_mono_ms(); now_mono_ms() - t0 < timeout_s * 1000LL;) {
                json_t *recs = records(e);
                size_t i;
                json_t *r;
                json_array_foreach(recs, i, r)
                {
                        bool it = id ? json_integer_value(json_object_get(r, "id")) == id
                                     : streq_ptr(str(r, "trigger"), "schedule") &&
                                           streq_ptr(str(r, "result"), "succeeded");
                        if (it && str(r, "verify_result")) {
                                json_incref(r);
                                json_decref(recs);
                                return r;
                        }
                }
                json_decref(recs);
                usleep(500 * 1000);
        }
        char *text = e2e_read_log(e, log);
        fail_msg("no drill verdict for snapshot %lld:\n%s", (long long)id, text);
        return NULL;
}

/* Wait until SnapshotsHealthy has this status and reason; its message. */
static char *wait_condition(e2e *e, const char *status, const char *reason, const char *log)
{
        for (int64_t t0 = now_mono_ms(); now_mono_ms() - t0 < 60 * 1000;) {
                json_t *st = e2e_status(e, "drilled");
                size_t i;
                json_t *c;
                char *message = NULL;
                json_array_foreach(json_object_get(st, "conditions"), i, c)
                {
                        if (streq_ptr(str(c, "type"), "SnapshotsHealthy") &&
                            streq_ptr(str(c, "status"), status) &&
                            streq_ptr(str(c, "reason"), reason))
                                message = xstrdup(str(c, "message"));
                }
                json_decref(st);
                if (message)
                        return message;
                usleep(300 * 1000);
        }
        char *text = e2e_read_log(e, log);
        fail_msg("SnapshotsHealthy never became %s %s:\n%s", status, reason, text);
        return NULL;
}

static double scrape(int port, const char *series)
{
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/metrics", port);
        char *body = NULL;
        assert_int_equal(ops_test_get(url, NULL, &body), 200);
        double v = ops_test_metric(body, series);
        free(body);
        return v;
}

/*
 * A series' value once it reaches at least want (the daemon publishes what
 * /metrics shows from its loop, up to ten seconds after the fact).
 */
static double scrape_until(int port, const char *series, double want, int timeout_s)
{
        double v = scrape(port, series);
        for (int64_t t0 = now_mono_ms(); v < want && now_mono_ms() - t0 < timeout_s * 1000LL;) {
                usleep(200 * 1000);
                v = scrape(port, series);
        }
        return v;
}

static size_t entries(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' && !streq(de->d_name, SNAPSHOT_DRILL_LOCK))
                        n++;
        closedir(d);
        return n;
}

/* Whether a process's command line names path. */
static bool process_naming(const char *path)
{
        DIR *d = opendir("/proc");
        assert_non_null(d);
        bool found = false;
        struct dirent *de;
        while ((de = readdir(d)) && !found) {
                char *end = NULL;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0)
                        continue;
                char p[64];
                snprintf(p, sizeof(p), "/proc/%ld/cmdline", pid);
                char *cmd = NULL;
                size_t n = 0;
                if (read_file(p, 1 << 20, &cmd, &n) < 0)
                        continue;
                for (size_t off = 0; off < n && !found; off += strlen(cmd + off) + 1)
                        found = strstr(cmd + off, path) != NULL;
                free(cmd);
        }
        closedir(d);
        return found;
}

static int64_t sql_count(e2e *e, const char *query)
{
        _cleanup_free_ char *cmd = xasprintf("sqlite3 %s/state.db \"%s\"", e->state_dir, query);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        long long n = -1;
        assert_int_equal(fscanf(p, "%lld", &n), 1);
        pclose(p);
        return n;
}

/* A drill by hand killed once its throwaway etcd runs: that etcd goes too. */
static void kill_drill_by_hand(e2e *e, int64_t id1, const char *drills)
{
        _cleanup_free_ char *id1s = xasprintf("%lld", (long long)id1);
        const char *verify[] = {"snapshot", "verify", id1s, NULL};
        assert_int_equal(e2e_runv_failpoint(e, "drill.after-start", NULL, NULL, verify),
                         128 + SIGKILL);
        assert_int_equal(entries(drills), 1);
        bool gone = false;
        for (int64_t t0 = now_mono_ms(); !gone && now_mono_ms() - t0 < 10 * 1000;) {
                gone = !process_naming(drills);
                if (!gone)
                        usleep(100 * 1000);
        }
        assert_true(gone);
        assert_int_equal(sql_count(e, "SELECT count(*) FROM snapshot_drills WHERE result = "
                                      "'running'"),
                         1);
}

/* A snapshot by hand, damaged in the bucket after the upload: its id. */
static int64_t save_damaged(e2e *e, const harness_s3rver *s3, int64_t id1)
{
        etcd_client *c = e2e_client(e, "drilled");
        for (int i = 0; i < 20; i++) {
                char k[16];
                snprintf(k, sizeof(k), "k%d", i);
                assert_int_equal(etcd_put(c, k, "v", 1, NULL), 0);
        }
        etcd_client_free(c);
        char *out = NULL, *err = NULL;
        const char *save[] = {"snapshot", "save", "default/drilled", NULL};
        if (e2e_runv(e, &out, &err, save) != 0)
                fail_msg("snapshot save: %s", err);
        free(out);
        free(err);
        json_t *recs = records(e);
        json_t *s2 = json_array_get(recs, 0);
        int64_t id2 = json_integer_value(json_object_get(s2, "id"));
        assert_true(id2 > id1);
        assert_null(json_object_get(s2, "verify_result") ? str(s2, "verify_result") : NULL);
        _cleanup_free_ char *object =
            xasprintf("%s/%s/backups/%s._S3rver_object", s3->data_dir, s3->bucket, str(s2, "key"));
        char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(object, 1 << 26, &data, &len), 0);
        data[len / 2] ^= 0x01;
        assert_int_equal(write_file_atomic(object, data, len, 0600), 0);
        free(data);
        json_decref(recs);
        return id2;
}

/* The snapshot.verify_failed webhook: critical, naming the cluster and the damage. */
static void assert_verify_failed_webhook(e2e *e, ops_receiver *hook)
{
        ops_request *q = NULL;
        for (int64_t t0 = now_mono_ms(); !q && now_mono_ms() - t0 < 60 * 1000;) {
                size_t n = 0;
                ops_request *all = ops_receiver_requests(hook, &n);
                for (size_t i = 0; i < n && !q; i++)
                        if (streq_ptr(all[i].event, "snapshot.verify_failed")) {
                                q = XNEW(ops_request);
                                q->body = xstrdup(all[i].body);
                        }
                ops_request_list_free(all, n);
                if (!q)
                        usleep(200 * 1000);
        }
        if (!q) {
                char *log = e2e_read_log(e, "daemon2.log");
                fail_msg("no snapshot.verify_failed webhook:\n%s", log);
        }
        json_t *body = json_loads(q->body, 0, NULL);
        assert_string_equal(str(body, "severity"), "critical");
        assert_string_equal(str(body, "cluster"), "default/drilled");
        assert_non_null(strstr(str(body, "message"), "is damaged"));
        json_decref(body);
        ops_request_free(q);
}

static void test_drills_under_run(void **unused)
{
        (void)unused;
        _cleanup_free_ char *bin = harness_s3rver_path();
        if (!bin)
                skip();
        harness_s3rver *s3 = NULL;
        assert_int_equal(harness_s3rver_start(NULL, &s3), 0);
        e2e *e = e2e_new();
        /* the credentials Secret, as a folder on the gitcd host */
        _cleanup_free_ char *secret = path_join(e->state_dir, "secrets/default/s3creds");
        assert_int_equal(mkdir_p(secret, 0700), 0);
        _cleanup_free_ char *kid = path_join(secret, "accessKeyID");
        _cleanup_free_ char *key = path_join(secret, "secretAccessKey");
        assert_int_equal(write_file_atomic(kid, HARNESS_S3RVER_KEY, 6, 0600), 0);
        assert_int_equal(write_file_atomic(key, HARNESS_S3RVER_KEY, 6, 0600), 0);
        /* one scheduled snapshot at once, the next one far away */
        _cleanup_free_ char *yaml =
            xasprintf("apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                      "metadata:\n  name: drilled\nspec:\n  replicas: 1\n"
                      "  version: \"3.5.16\"\n"
                      "  snapshots:\n    schedule: \"0 0 1 1 *\"\n"
                      "    destination:\n      s3:\n        endpoint: %s\n"
                      "        bucket: %s\n        key: backups\n"
                      "        forcePathStyle: true\n"
                      "        credentialsSecretRef:\n          name: s3creds\n",
                      s3->endpoint_ip, s3->bucket);
        e2e_write_file(e, "drilled.yaml", yaml);
        int hook_port = harness_free_port(), port = harness_free_port();
        _cleanup_free_ char *text = xasprintf("interval: 1s\n"
                                              "listen: 127.0.0.1:%d\n"
                                              "allowPlainHTTP: [127.0.0.1]\n"
                                              "sources:\n"
                                              "  - name: main\n"
                                              "    url: %s\n"
                                              "notifications:\n"
                                              "  webhooks:\n"
                                              "    - name: ops\n"
                                              "      url: http://127.0.0.1:%d/hook\n"
                                              "      minSeverity: warning\n",
                                              port, e->source, hook_port);
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml", text);
        ops_receiver *hook = ops_receiver_start(hook_port, 0);
        const char *run[] = {"run", "--config", cfg, NULL};

        /* the scheduled snapshot, drilled after it was stored */
        pid_t d = e2e_start(e, run, "daemon1.log");
        assert_true(e2e_wait_ready(e, "drilled", 1, 60));
        json_t *s1 = wait_verdict(e, 0, "daemon1.log", 120);
        if (!streq(str(s1, "verify_result"), "verified"))
                fail_msg("the scheduled snapshot's drill: %s: %s", str(s1, "verify_result"),
                         str(s1, "verify_message"));
        assert_string_equal(str(s1, "verify_method"), "hashkv");
        assert_string_equal(str(s1, "verify_trigger"), "snapshot");
        assert_true(json_integer_value(json_object_get(s1, "verify_restore_ms")) > 0);
        assert_true(json_integer_value(json_object_get(s1, "verify_restore_bytes_per_second")) > 0);
        int64_t id1 = json_integer_value(json_object_get(s1, "id"));
        free(wait_condition(e, "True", "SnapshotVerified", "daemon1.log"));
        assert_true(scrape_until(port,
                                 SERIES("gitcd_snapshot_verify_total", ",result=\"verified\""), 1,
                                 60) >= 1);
        assert_true(scrape_until(port, SERIES("gitcd_snapshot_last_verified_timestamp_seconds", ""),
                                 1, 60) > 0);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);

        /* a drill by hand killed once its throwaway etcd runs: that etcd goes too */
        _cleanup_free_ char *drills = path_join(e->state_dir, SNAPSHOT_DRILL_DIR);
        kill_drill_by_hand(e, id1, drills);

        /* a snapshot by hand, damaged in the bucket after the upload */
        int64_t id2 = save_damaged(e, s3, id1);

        /* the daemon again: leftovers removed, the damaged snapshot drilled and failed */
        d = e2e_start(e, run, "daemon2.log");
        json_t *v2 = wait_verdict(e, id2, "daemon2.log", 120);
        assert_string_equal(str(v2, "verify_result"), "verify-failed");
        assert_non_null(strstr(str(v2, "verify_message"), "is damaged: the SHA-256"));
        json_decref(v2);
        assert_int_equal(entries(drills), 0);
        assert_int_equal(sql_count(e, "SELECT count(*) FROM snapshot_drills WHERE result = "
                                      "'unverified' AND message = 'gitcd stopped while it ran'"),
                         1);
        assert_verify_failed_webhook(e, hook);
        /* the metric and the condition, which names the snapshot still proven */
        assert_true(scrape_until(port,
                                 SERIES("gitcd_snapshot_verify_total", ",result=\"verify-failed\""),
                                 1, 60) == 1);
        char *msg = wait_condition(e, "False", "VerifyFailed", "daemon2.log");
        _cleanup_free_ char *names =
            xasprintf("the restore candidate is snapshot %lld", (long long)id1);
        assert_non_null(strstr(msg, names));
        free(msg);
        /* the restore candidate: the proven one (its killed drill hid nothing) */
        json_t *recs = records(e);
        assert_string_equal(str(record(recs, id1), "verify_result"), "verified");
        assert_true(json_is_true(json_object_get(record(recs, id1), "restore_candidate")));
        assert_true(json_is_false(json_object_get(record(recs, id2), "restore_candidate")));
        json_decref(recs);
        const char *latest[] = {"recover", "default/drilled", "--from-snapshot",
                                "latest",  "--no-wait",       NULL};
        char *out = NULL;
        assert_int_equal(e2e_runv(e, &out, NULL, latest), 0);
        _cleanup_free_ char *said =
            xasprintf("latest: snapshot %lld of default/drilled", (long long)id1);
        assert_non_null(strstr(out, said));
        free(out);

        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        json_decref(s1);
        ops_receiver_stop(hook);
        e2e_free(e);
        harness_s3rver_free(s3);
}

int main(void)
{
        if (!e2e_have_version("3.5.16")) {
                fprintf(stderr, "etcd 3.5.16 not installed; skipping\n");
                return 77;
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_drills_under_run),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
