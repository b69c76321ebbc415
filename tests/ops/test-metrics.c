/*
 * gitcd run --listen through the real binary: /healthz, /readyz before the
 * source can be read and after, a bearer token (401 without it), and
 * /metrics scraped during a real scale-up from 1 to 3 members, its values
 * checked against what etcd itself says (member list and status through
 * gitcd's etcd client) and against the audit log; the database sizes of a
 * cluster whose members serve clients over TLS (asked with gitcd's own
 * client certificate); the last successful snapshot against
 * `gitcd snapshot list`; /healthz, /readyz and /metrics still answer a
 * client with the token while 1,100 idle connections are held open.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "etcd/client.h"
#include "ops/http.h"
#include "ops/metrics.h"
#include "state/state.h"
#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/ops/ops-test.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define TOKEN "s3cret-scrape-token"

static double metric(const char *text, const char *name, const char *labels)
{
        _cleanup_free_ char *series = xasprintf("%s{%s}", name, labels);
        return ops_test_metric(text, series);
}

static void commit(const char *repo)
{
        _cleanup_free_ char *cmd =
            xasprintf("git -C %s add -A && git -C %s -c user.name=t -c user.email=t@example.com "
                      "commit -q -m change",
                      repo, repo);
        assert_int_equal(system(cmd), 0);
}

static char *scrape(const char *base)
{
        _cleanup_free_ char *url = xasprintf("%s/metrics", base);
        char *body = NULL;
        assert_int_equal(ops_test_get(url, TOKEN, &body), 200);
        return body;
}

/* A scrape once the collector asked all three members (the leader, each database). */
static char *scrape_all_members(const char *base, const char *cl)
{
        char *body;
        int64_t t0;
        body = NULL;
        t0 = now_mono_ms();
        for (bool all = false; !all && now_mono_ms() - t0 < 60000;) {
                free(body);
                body = scrape(base);
                all = metric(body, "gitcd_cluster_leader_present", cl) == 1;
                for (int i = 0; i < 3 && all; i++) {
                        _cleanup_free_ char *labels = xasprintf("%s,member=\"alpha-%d\"", cl, i);
                        all = metric(body, "gitcd_member_db_size_bytes", labels) > 0;
                }
                if (!all)
                        usleep(200 * 1000);
        }
        return body;
}

/* Scale up to 3, scraping all the way: one membership change at a time. */
static void scrape_scale_up(const char *base, const char *cl)
{
        int64_t t0;
        char *body;
        t0 = now_mono_ms();
        bool done = false;
        while (!done && now_mono_ms() - t0 < 120000) {
                body = scrape(base);
                double want = metric(body, "gitcd_cluster_members_desired", cl);
                double voters = metric(body, "gitcd_cluster_members_voters", cl);
                double learners = metric(body, "gitcd_cluster_members_learners", cl);
                /* One membership change at a time: never more than one learner. */
                assert_true(voters >= 1 && voters <= 3);
                assert_true(learners >= 0 && learners <= 1);
                done = want == 3 && voters == 3 &&
                       metric(body, "gitcd_cluster_members_running", cl) == 3 &&
                       metric(body, "gitcd_cluster_condition",
                              "namespace=\"default\",cluster=\"alpha\",type=\"Progressing\","
                              "status=\"False\"") == 1;
                free(body);
                usleep(200 * 1000);
        }
        assert_true(done);
}

/* Each member's database sizes in the scrape body are etcd's own (idle: nothing writes). */
static void assert_db_sizes(e2e *e, const char *body, const char *cl)
{
        etcd_client *c = e2e_client(e, "alpha");
        for (int i = 0; i < 3; i++) {
                _cleanup_free_ char *name = xasprintf("alpha-%d", i);
                _cleanup_free_ char *dir = e2e_member_dir(e, "alpha", name);
                _cleanup_free_ char *labels = xasprintf("%s,member=\"%s\"", cl, name);
                double size = metric(body, "gitcd_member_db_size_bytes", labels);
                assert_true(size > 0);
                /* etcd's own answer for the same member (idle: nothing writes). */
                json_t *st = e2e_status(e, "alpha");
                json_t *members = json_object_get(st, "members");
                const char *url = NULL;
                size_t j;
                json_t *m;
                json_array_foreach(
                    members, j, m) if (streq(json_string_value(json_object_get(m, "name")), name))
                    url = json_string_value(json_object_get(m, "client_url"));
                assert_non_null(url);
                etcd_endpoint_status *es = NULL;
                assert_int_equal(etcd_status(c, url, &es), 0);
                assert_true(size == (double)es->db_size);
                assert_true(metric(body, "gitcd_member_db_size_in_use_bytes", labels) ==
                            (double)es->db_size_in_use);
                etcd_endpoint_status_free(es);
                json_decref(st);
        }
        etcd_client_free(c);
}

static void test_metrics(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        _cleanup_free_ char *base = xasprintf("http://127.0.0.1:%d", port);
        _cleanup_free_ char *tok = ops_test_write_secret(e, "token", TOKEN "\n");
        /* A repository without the branch yet: the daemon is alive but not ready. */
        _cleanup_free_ char *repo = path_join(e->root, "repo");
        _cleanup_free_ char *init = xasprintf("git init -q -b main %s", repo);
        assert_int_equal(system(init), 0);
        _cleanup_free_ char *src = xasprintf("file://%s", repo);
        const char *args[] = {"run",        "--source", src,        "--ref", "main",
                              "--interval", "1s",       "--listen", listen,  "--listen-token-file",
                              tok,          NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        _cleanup_free_ char *healthz = xasprintf("%s/healthz", base);
        _cleanup_free_ char *readyz = xasprintf("%s/readyz", base);
        int64_t t0 = now_mono_ms();
        while (ops_test_get(healthz, TOKEN, NULL) != 200 && now_mono_ms() - t0 < 30000)
                usleep(50 * 1000);
        assert_int_equal(ops_test_get(healthz, TOKEN, NULL), 200);
        char *body = NULL;
        assert_int_equal(ops_test_get(readyz, TOKEN, &body), 503);
        assert_non_null(strstr(body, "source was not read"));
        free(body);
        /* The failed fetches are counted (a fetch every second; generous for a loaded machine
         * under the sanitizers, where 30 s once passed without one counted). */
        double errors = 0;
        t0 = now_mono_ms();
        while (errors < 1 && now_mono_ms() - t0 < 120000) {
                body = scrape(base);
                assert_true(ops_test_metric(body, "gitcd_ready") == 0);
                errors =
                    ops_test_metric(body, "gitcd_source_fetch_errors_total{source=\"default\"}");
                free(body);
                usleep(50 * 1000);
        }
        assert_true(errors >= 1);

        /* Without the token, or with a wrong one: 401, and nothing leaks. */
        _cleanup_free_ char *murl = xasprintf("%s/metrics", base);
        assert_int_equal(ops_test_get(murl, NULL, &body), 401);
        assert_null(strstr(body, "gitcd_"));
        free(body);
        assert_int_equal(ops_test_get(murl, "wrong", NULL), 401);
        assert_int_equal(ops_test_get(readyz, NULL, NULL), 401);

        /* The branch appears: ready once it was read. */
        free(ops_test_write_cluster(e, "repo/alpha.yaml", "alpha", 1));
        commit(repo);
        t0 = now_mono_ms();
        while (ops_test_get(readyz, TOKEN, NULL) != 200 && now_mono_ms() - t0 < 30000)
                usleep(100 * 1000);
        assert_int_equal(ops_test_get(readyz, TOKEN, NULL), 200);
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));

        /* What the loop published catches up with the first member (within a second). */
        const char *cl = "namespace=\"default\",cluster=\"alpha\"";
        t0 = now_mono_ms();
        for (double v = -1; v != 1 && now_mono_ms() - t0 < 30000;) {
                body = scrape(base);
                v = metric(body, "gitcd_cluster_members_voters", cl);
                free(body);
                if (v != 1)
                        usleep(100 * 1000);
        }

        /* Scale up to 3, scraping all the way. */
        free(ops_test_write_cluster(e, "repo/alpha.yaml", "alpha", 3));
        commit(repo);
        scrape_scale_up(base, cl);
        assert_true(e2e_wait_ready(e, "alpha", 3, 60));

        /*
         * Against etcd: the member list, the leader, and each member's
         * database. The members' own answers come from the collector thread,
         * which asks them once the loop published them: wait for all three.
         */
        body = scrape_all_members(base, cl);
        etcd_members *ml = e2e_members(e, "alpha");
        int voters = 0, learners = 0;
        for (size_t i = 0; i < ml->n; i++) {
                if (ml->members[i].is_learner)
                        learners++;
                else
                        voters++;
        }
        etcd_members_free(ml);
        assert_int_equal(voters, 3);
        assert_true(metric(body, "gitcd_cluster_members_voters", cl) == voters);
        assert_true(metric(body, "gitcd_cluster_members_learners", cl) == learners);
        assert_true(metric(body, "gitcd_cluster_leader_present", cl) == 1);
        assert_db_sizes(e, body, cl);
        /* Steps against the audit log: two learners added, two promoted. */
        _cleanup_free_ char *add = xasprintf("%s,kind=\"add-learner\",result=\"progressed\"", cl);
        _cleanup_free_ char *pro = xasprintf("%s,kind=\"promote\",result=\"progressed\"", cl);
        assert_true(metric(body, "gitcd_steps_total", add) ==
                    e2e_audit_count(e, "alpha", "member.add-learner"));
        assert_true(metric(body, "gitcd_steps_total", pro) ==
                    e2e_audit_count(e, "alpha", "member.promote"));
        assert_true(metric(body, "gitcd_steps_total", add) == 2);
        assert_true(metric(body, "gitcd_reconcile_pass_duration_seconds_count", cl) >= 1);
        assert_true(ops_test_metric(body, "gitcd_ready") == 1);
        assert_true(ops_test_metric(
                        body, "gitcd_source_last_read_timestamp_seconds{source=\"default\"}") > 0);
        assert_null(strstr(body, TOKEN));
        free(body);

        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

/* --tls-cert/--tls-key: the endpoints answer over https only. */
static void test_tls(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        e2e_write_file(e, "README", "no clusters here\n");
        _cleanup_free_ char *gen = xasprintf(
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
            "-subj /CN=localhost -keyout %s/tls.key -out %s/tls.crt 2>/dev/null",
            e->root, e->root);
        assert_int_equal(system(gen), 0);
        _cleanup_free_ char *crt = path_join(e->root, "tls.crt");
        _cleanup_free_ char *key = path_join(e->root, "tls.key");
        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        const char *args[] = {"run",        "--source", e->source,   "--listen", listen,
                              "--tls-cert", crt,        "--tls-key", key,        NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        _cleanup_free_ char *https = xasprintf("https://127.0.0.1:%d/healthz", port);
        _cleanup_free_ char *http = xasprintf("http://127.0.0.1:%d/healthz", port);
        int64_t t0 = now_mono_ms();
        while (ops_test_get(https, NULL, NULL) != 200 && now_mono_ms() - t0 < 30000)
                usleep(50 * 1000);
        assert_int_equal(ops_test_get(https, NULL, NULL), 200);
        assert_int_not_equal(ops_test_get(http, NULL, NULL), 200);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

/* A cluster with TLS: each member's certificates and when they expire, as openssl reads them. */
static void test_certificates(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_file(e, "t.yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: sec\n"
                       "  namespace: default\n"
                       "spec:\n"
                       "  replicas: 1\n"
                       "  version: \"3.5.16\"\n"
                       "  progressDeadlineSeconds: 120\n"
                       "  tls:\n"
                       "    provider: auto\n");
        assert_int_equal(e2e_apply(e, NULL, 120), 0);
        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        const char *args[] = {"run", "--source", e->source, "--listen", listen, NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        _cleanup_free_ char *base = xasprintf("http://127.0.0.1:%d", port);
        _cleanup_free_ char *url = xasprintf("%s/metrics", base);
        /* /metrics answers as soon as the daemon listens; the certificates' series come with
         * its first pass over the cluster, which a loaded machine delays. */
        static const char *const first =
            "gitcd_certificate_not_after_timestamp_seconds{namespace=\"default\",cluster=\"sec\","
            "member=\"sec-0\",surface=\"client\"}";
        char *body = NULL;
        int64_t t0 = now_mono_ms();
        while ((ops_test_get(url, NULL, &body) != 200 || ops_test_metric(body, first) <= 0) &&
               now_mono_ms() - t0 < 90000) {
                free(body);
                body = NULL;
                usleep(100 * 1000);
        }
        assert_non_null(body);
        _cleanup_free_ char *dir = e2e_member_dir(e, "sec", "sec-0");
        static const char *const surfaces[] = {"client", "peer"};
        for (size_t i = 0; i < ARRAY_SIZE(surfaces); i++) {
                _cleanup_free_ char *labels =
                    xasprintf("namespace=\"default\",cluster=\"sec\",member=\"sec-0\","
                              "surface=\"%s\"",
                              surfaces[i]);
                double not_after =
                    metric(body, "gitcd_certificate_not_after_timestamp_seconds", labels);
                assert_true(not_after > 0);
                long left = (long)(not_after - (double)now_wall_ms() / 1000.0);
                /* openssl agrees: valid a minute before that time, expired a minute after. */
                _cleanup_free_ char *ok =
                    xasprintf("openssl x509 -noout -checkend %ld -in %s/tls/%s/tls.crt >/dev/null",
                              left - 60, dir, surfaces[i]);
                _cleanup_free_ char *gone =
                    xasprintf("openssl x509 -noout -checkend %ld -in %s/tls/%s/tls.crt >/dev/null",
                              left + 60, dir, surfaces[i]);
                assert_int_equal(system(ok), 0);
                assert_int_not_equal(system(gone), 0);
        }
        free(body);

        /*
         * The members serve clients over https only: their database sizes
         * are asked with gitcd's client identity once the daemon's first
         * pass resolved it, and agree with the member's own answer to that
         * identity (the operator certificate the local target issued).
         */
        const char *labels = "namespace=\"default\",cluster=\"sec\",member=\"sec-0\"";
        double size = -1, in_use = -1;
        t0 = now_mono_ms();
        while (size < 0 && now_mono_ms() - t0 < 60000) {
                body = NULL;
                if (ops_test_get(url, NULL, &body) == 200) {
                        size = metric(body, "gitcd_member_db_size_bytes", labels);
                        in_use = metric(body, "gitcd_member_db_size_in_use_bytes", labels);
                }
                free(body);
                if (size < 0)
                        usleep(100 * 1000);
        }
        assert_true(size > 0);
        assert_true(in_use > 0);
        json_t *st = e2e_status(e, "sec");
        const char *client_url = json_string_value(
            json_object_get(json_array_get(json_object_get(st, "members"), 0), "client_url"));
        assert_non_null(client_url);
        assert_true(strneq(client_url, "https://", 8));
        _cleanup_free_ char *op = path_join(dir, "tls/operator");
        _cleanup_free_ char *ca = path_join(op, "ca.crt");
        _cleanup_free_ char *crt = path_join(op, "tls.crt");
        _cleanup_free_ char *key = path_join(op, "tls.key");
        etcd_client_opts o = {.endpoints = client_url,
                              .cacert = ca,
                              .cert = crt,
                              .key = key,
                              .call_timeout_ms = 5000,
                              .dial_timeout_ms = 1000};
        etcd_client *c = NULL;
        assert_int_equal(etcd_client_new(&o, &c), 0);
        etcd_endpoint_status *es = NULL;
        if (etcd_status(c, client_url, &es) < 0)
                fail_msg("status over TLS: %s", etcd_client_last_error(c));
        assert_true(size == (double)es->db_size);
        assert_true(in_use == (double)es->db_size_in_use);
        etcd_endpoint_status_free(es);
        etcd_client_free(c);
        json_decref(st);
        /* The leader is asked from the member too. */
        body = NULL;
        assert_int_equal(ops_test_get(url, NULL, &body), 200);
        assert_true(metric(body, "gitcd_cluster_leader_present",
                           "namespace=\"default\",cluster=\"sec\"") == 1);
        free(body);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

/* The records of `gitcd snapshot list -o json default/NAME`, one object per line. */
static json_t *snapshot_records(e2e *e, const char *name)
{
        _cleanup_free_ char *id = xasprintf("default/%s", name);
        char *out = NULL;
        const char *args[] = {"snapshot", "list", "-o", "json", id, NULL};
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

/*
 * The last successful snapshot of a cluster, taken by hand next to the
 * daemon: its time and size on /metrics are those `gitcd snapshot list`
 * shows, and a newer one replaces them.
 */
static void test_snapshots(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "snap.yaml", "snap", 1, "3.5.16");
        assert_int_equal(e2e_apply(e, NULL, 120), 0);
        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        const char *args[] = {"run", "--source", e->source, "--listen", listen, NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/metrics", port);
        char *body = NULL;
        int64_t t0 = now_mono_ms();
        while (ops_test_get(url, NULL, &body) != 200 && now_mono_ms() - t0 < 30000) {
                free(body);
                body = NULL;
                usleep(50 * 1000);
        }
        assert_non_null(body);
        const char *cl = "namespace=\"default\",cluster=\"snap\"";
        /* No snapshot yet: no series. */
        assert_true(metric(body, "gitcd_snapshot_last_success_timestamp_seconds", cl) == -1);
        free(body);

        _cleanup_free_ char *to = path_join(e->root, "copies");
        etcd_client *c = e2e_client(e, "snap");
        for (int round = 0; round < 2; round++) {
                /* Different contents each time, so the sizes differ. */
                for (int i = 0; i < 20 * (round + 1); i++) {
                        _cleanup_free_ char *k = xasprintf("r%d-k%d", round, i);
                        assert_int_equal(etcd_put(c, k, "0123456789abcdef", 16, NULL), 0);
                }
                const char *save[] = {"snapshot", "save", "default/snap", "--to", to, NULL};
                char *out = NULL, *err = NULL;
                int k = e2e_runv(e, &out, &err, save);
                if (k != 0)
                        fail_msg("snapshot save: exit %d: %s", k, err);
                free(out);
                free(err);

                json_t *recs = snapshot_records(e, "snap");
                assert_int_equal(json_array_size(recs), round + 1);
                /* Newest first. */
                json_t *newest = json_array_get(recs, 0);
                assert_string_equal(json_string_value(json_object_get(newest, "result")),
                                    "succeeded");
                /* taken by another process: the daemon's loop publishes it within seconds */
                const char *finished = json_string_value(json_object_get(newest, "finished"));
                char shown[40] = "";
                double when = -1, size = -1;
                body = NULL;
                int64_t t1 = now_mono_ms();
                while (!streq(shown, finished) && now_mono_ms() - t1 < 30000) {
                        free(body);
                        body = NULL;
                        assert_int_equal(ops_test_get(url, NULL, &body), 200);
                        when = metric(body, "gitcd_snapshot_last_success_timestamp_seconds", cl);
                        size = metric(body, "gitcd_snapshot_last_success_size_bytes", cl);
                        format_rfc3339((int64_t)(when * 1000.0), shown, sizeof(shown));
                        if (!streq(shown, finished))
                                usleep(200 * 1000);
                }
                assert_true(when > 0);
                assert_string_equal(shown, finished);
                assert_true(size > 0);
                assert_true(size == (double)json_integer_value(json_object_get(newest, "size")));
                assert_true(metric(body, "gitcd_snapshot_failures_total", cl) == 0);
                free(body);
                json_decref(recs);
        }
        etcd_client_free(c);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

/*
 * An audit event the store could not write shows in /metrics
 * (gitcd_audit_append_failures_total), read from the store when the
 * daemon's loop publishes, never at scrape time.
 */
static void test_audit_failures(void **state)
{
        (void)state;
        char tmpl[] = "/tmp/gitcd-metrics-audit-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *path = path_join(tmpl, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);

        strbuf out = STRBUF_INIT;
        assert_int_equal(ops_metrics_publish(db, true), 0);
        ops_metrics_render(&out);
        assert_true(ops_test_metric(sb_str(&out), "gitcd_audit_append_failures_total") == 0);
        sb_release(&out);

        /* the database refuses the insert (standing in for a full disk) */
        sqlite3 *raw;
        assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
        assert_int_equal(sqlite3_exec(raw,
                                      "CREATE TRIGGER broken BEFORE INSERT ON audit BEGIN "
                                      "SELECT RAISE(ABORT, 'disk full'); END",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(raw);
        state_audit_event ev = {.time_ms = 1, .cluster = "default/a", .action = "member.add"};
        assert_true(state_audit_append(db, &ev, NULL) < 0);
        assert_true(state_audit_append(db, &ev, NULL) < 0);
        /* what the store says shows once it was published: a scrape reads only memory */
        ops_metrics_render(&out);
        assert_true(ops_test_metric(sb_str(&out), "gitcd_audit_append_failures_total") == 0);
        sb_release(&out);
        assert_int_equal(ops_metrics_publish(db, true), 0);
        ops_metrics_render(&out);
        assert_true(ops_test_metric(sb_str(&out), "gitcd_audit_append_failures_total") == 2);
        sb_release(&out);
        state_close(db);
        assert_int_equal(rm_rf(tmpl), 0);
}

/*
 * /readyz and /metrics answer from memory: once the loop published, the
 * state store may be gone altogether (here: its folder deleted) and the
 * endpoints still show what it said; no request opens it (they used to
 * open it, and take its write lock, on every request).
 */
static void test_from_memory(void **state)
{
        (void)state;
        ops_metrics_reset();
        char tmpl[] = "/tmp/gitcd-metrics-memory-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *path = path_join(tmpl, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        sqlite3 *raw;
        assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
        assert_int_equal(sqlite3_exec(raw,
                                      "CREATE TRIGGER broken BEFORE INSERT ON audit BEGIN "
                                      "SELECT RAISE(ABORT, 'disk full'); END",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
        sqlite3_close(raw);
        state_audit_event ev = {.time_ms = 1, .cluster = "default/a", .action = "member.add"};
        assert_true(state_audit_append(db, &ev, NULL) < 0);
        const char *names[] = {"default"};
        ops_metrics_set_sources(names, 1);
        ops_metrics_fetch("default", true, 5);
        _cleanup_free_ char *why = ops_metrics_not_ready();
        assert_string_equal(why, "the state store was not read yet\n");
        assert_int_equal(ops_metrics_publish(db, true), 0);
        state_close(db);
        assert_int_equal(rm_rf(tmpl), 0);

        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        ops_http_opts o = {.listen = listen};
        ops_http *h = NULL;
        char *err = NULL;
        if (ops_http_start(&o, &h, &err) < 0)
                fail_msg("ops_http_start: %s", err);
        _cleanup_free_ char *readyz = xasprintf("http://127.0.0.1:%d/readyz", port);
        _cleanup_free_ char *metrics = xasprintf("http://127.0.0.1:%d/metrics", port);
        char *body = NULL;
        assert_int_equal(ops_test_get(readyz, NULL, &body), 200);
        free(body);
        body = NULL;
        assert_int_equal(ops_test_get(metrics, NULL, &body), 200);
        assert_true(ops_test_metric(body, "gitcd_ready") == 1);
        assert_true(ops_test_metric(body, "gitcd_audit_append_failures_total") == 1);
        free(body);
        assert_false(path_exists(tmpl)); /* nothing opened it again */
        ops_http_stop(h);
        ops_metrics_reset();
}

/*
 * gitcd_cluster_info: the kubeconfig context of a Kubernetes cluster's API
 * server, from the spec in force, its value escaped as a label's (a context
 * name may hold quotes and backslashes); none for a cluster that names none.
 */
static void test_cluster_info(void **state)
{
        (void)state;
        ops_metrics_reset();
        _cleanup_free_ char *tmpl = harness_tmpdir("gitcd-metrics-info");
        assert_non_null(tmpl);
        _cleanup_free_ char *path = path_join(tmpl, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        const char *west =
            "{\"apiVersion\":\"gitcd.io/v1alpha1\",\"kind\":\"EtcdCluster\",\"metadata\":"
            "{\"name\":\"w\",\"namespace\":\"default\"},\"spec\":{\"replicas\":1,"
            "\"version\":\"3.5.16\",\"kubernetes\":{\"context\":\"we\\\"st\\\\\"}}}";
        const char *plain = "{\"apiVersion\":\"gitcd.io/v1alpha1\",\"kind\":\"EtcdCluster\","
                            "\"metadata\":{\"name\":\"p\",\"namespace\":\"default\"},"
                            "\"spec\":{\"replicas\":1,\"version\":\"3.5.16\"}}";
        assert_true(state_cluster_set_desired(db, "default/w", west, "h1", NULL, 1) >= 0);
        assert_true(state_cluster_set_desired(db, "default/p", plain, "h2", NULL, 1) >= 0);
        assert_int_equal(ops_metrics_publish(db, true), 0);
        state_close(db);
        assert_int_equal(rm_rf(tmpl), 0);

        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        ops_http_opts o = {.listen = listen};
        ops_http *h = NULL;
        char *err = NULL;
        if (ops_http_start(&o, &h, &err) < 0)
                fail_msg("ops_http_start: %s", err);
        _cleanup_free_ char *metrics = xasprintf("http://127.0.0.1:%d/metrics", port);
        char *body = NULL;
        assert_int_equal(ops_test_get(metrics, NULL, &body), 200);
        assert_true(ops_test_metric(body, "gitcd_cluster_info{namespace=\"default\",cluster=\"w\","
                                          "kube_context=\"we\\\"st\\\\\"}") == 1);
        assert_null(strstr(body, "gitcd_cluster_info{namespace=\"default\",cluster=\"p\""));
        free(body);
        ops_http_stop(h);
        ops_metrics_reset();
}

/* A TCP connection to 127.0.0.1:port that says nothing; -1 when refused. */
static int open_idle(int port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                close(fd);
                fd = -1;
        }
        return fd;
}

/*
 * 1,100 idle connections to --listen (more descriptors than a process has
 * by default): the endpoint used to accept every one of them and then
 * none, so /healthz failed even with the token. It now keeps a bounded
 * number of connections that showed no token, closing the oldest for a
 * new one: a client with the token is answered.
 */
static void test_idle_connections(void **state)
{
        (void)state;
        struct rlimit rl;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_max < 1300)
                skip();
        rl.rlim_cur = rl.rlim_max;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
        e2e *e = e2e_new();
        e2e_write_file(e, "README", "no clusters here\n");
        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        _cleanup_free_ char *tok = ops_test_write_secret(e, "token", TOKEN "\n");
        const char *args[] = {"run", "--source", e->source, "--interval",
                              "1s",  "--listen", listen,    "--listen-token-file",
                              tok,   NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        _cleanup_free_ char *base = xasprintf("http://127.0.0.1:%d", port);
        _cleanup_free_ char *healthz = xasprintf("%s/healthz", base);
        _cleanup_free_ char *readyz = xasprintf("%s/readyz", base);
        _cleanup_free_ char *metrics = xasprintf("%s/metrics", base);
        int64_t t0 = now_mono_ms();
        while (ops_test_get(readyz, TOKEN, NULL) != 200 && now_mono_ms() - t0 < 30000)
                usleep(50 * 1000);
        assert_int_equal(ops_test_get(readyz, TOKEN, NULL), 200);

        enum { IDLE = 1100 };
        int *fds = xcalloc(IDLE, sizeof(int));
        for (size_t i = 0; i < IDLE; i++)
                fds[i] = open_idle(port); /* the backlog takes what is not accepted yet */
        for (int round = 0; round < 3; round++) {
                long h = 0;
                t0 = now_mono_ms();
                while ((h = ops_test_get(healthz, TOKEN, NULL)) != 200 &&
                       now_mono_ms() - t0 < 30000)
                        usleep(100 * 1000);
                assert_int_equal(h, 200);
                assert_int_equal(ops_test_get(readyz, TOKEN, NULL), 200);
                char *body = NULL;
                assert_int_equal(ops_test_get(metrics, TOKEN, &body), 200);
                assert_true(ops_test_metric(body, "gitcd_ready") == 1);
                free(body);
        }
        for (size_t i = 0; i < IDLE; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(fds);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_audit_failures), cmocka_unit_test(test_from_memory),
            cmocka_unit_test(test_cluster_info),   cmocka_unit_test(test_certificates),
            cmocka_unit_test(test_snapshots),      cmocka_unit_test(test_tls),
            cmocka_unit_test(test_metrics),        cmocka_unit_test(test_idle_connections),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
