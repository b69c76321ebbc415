/*
 * Webhook notifications through the real binary and a real local receiver
 * (libmicrohttpd): a cluster converges and two sources define one cluster
 * while the receiver is down, gitcd is killed with the notifications still
 * queued, and after a restart the receiver (answering 503 twice before it
 * recovers) gets every one of them, signed with HMAC-SHA256; the
 * Slack-format webhook gets its own payload; severity and cluster filters
 * keep the others quiet; the webhook secret is in no payload, no log line
 * and not in the state store. Queued notifications follow the
 * configuration: a webhook or forge API moved by a reload gets the retries
 * at its new address (never the old host), and one removed is dropped with
 * an audit line.
 */
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

#include "ops/notify.h"
#include "state/notify-queue.h"
#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/ops/ops-test.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define SECRET "whsec-4f1b9c-never-in-a-payload"

static int64_t sql_count(e2e *e, const char *where)
{
        _cleanup_free_ char *cmd =
            xasprintf("sqlite3 %s/state.db \"SELECT count(*) FROM notifications WHERE %s\"",
                      e->state_dir, where);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        long long n = -1;
        assert_int_equal(fscanf(p, "%lld", &n), 1);
        pclose(p);
        return n;
}

static void check_signature(const ops_request *q)
{
        assert_non_null(q->signature);
        _cleanup_free_ char *hex =
            hash_hmac_sha256_hex(SECRET, strlen(SECRET), q->body, strlen(q->body));
        _cleanup_free_ char *want = xasprintf("sha256=%s", hex);
        assert_string_equal(q->signature, want);
        /* And a body changed on the way would not verify. */
        _cleanup_free_ char *other = hash_hmac_sha256_hex(SECRET, strlen(SECRET), "{}", 2);
        assert_string_not_equal(hex, other);
}

/* Every notification queued before the restart arrives, as each webhook asked for it. */
static void assert_queued_delivered(ops_receiver *rcv, int64_t queued)
{
        bool converged = false, conflict = false, slack = false;
        for (long id = 1; id <= queued; id++) {
                ops_request *q = ops_receiver_wait(rcv, id, 60);
                if (!q)
                        fail_msg("notification %ld queued before the restart never arrived", id);
                json_error_t jerr;
                json_t *body = json_loads(q->body, 0, &jerr);
                assert_non_null(body);
                if (streq(q->path, "/generic")) {
                        check_signature(q);
                        const char *ev = json_string_value(json_object_get(body, "event"));
                        assert_string_equal(q->event, ev);
                        if (streq(ev, "cluster.converged")) {
                                converged = true;
                                assert_string_equal(
                                    json_string_value(json_object_get(body, "severity")), "info");
                                assert_string_equal(
                                    json_string_value(json_object_get(body, "cluster")),
                                    "default/alpha");
                                assert_string_equal(
                                    json_string_value(json_object_get(body, "namespace")),
                                    "default");
                                assert_string_equal(
                                    json_string_value(json_object_get(body, "name")), "alpha");
                        } else {
                                assert_string_equal(ev, "cluster.conflict");
                                assert_string_equal(
                                    json_string_value(json_object_get(body, "severity")),
                                    "warning");
                                assert_string_equal(
                                    json_string_value(json_object_get(body, "cluster")),
                                    "default/dup");
                                conflict = true;
                        }
                } else {
                        assert_string_equal(q->path, "/slack");
                        assert_null(q->signature);
                        const char *t = json_string_value(json_object_get(body, "text"));
                        assert_non_null(t);
                        slack = slack || strstr(t, "default/alpha") != NULL;
                }
                json_decref(body);
                ops_request_free(q);
        }
        assert_true(converged && conflict && slack);
}

static void test_webhooks(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        e2e_write_cluster(e, "a.yaml", "alpha", 1, "3.5.16");
        e2e_write_cluster(e, "dup.yaml", "dup", 1, "3.5.16");
        free(ops_test_write_cluster(e, "second/dup.yaml", "dup", 1));
        int port = harness_free_port();
        _cleanup_free_ char *secret = ops_test_write_secret(e, "hook.secret", SECRET "\n");
        _cleanup_free_ char *text = xasprintf("interval: 1s\n"
                                              "allowPlainHTTP: [127.0.0.1]\n"
                                              "sources:\n"
                                              "  - name: main\n"
                                              "    url: %s\n"
                                              "  - name: second\n"
                                              "    url: %s/second\n"
                                              "notifications:\n"
                                              "  webhooks:\n"
                                              "    - name: generic\n"
                                              "      url: http://127.0.0.1:%d/generic\n"
                                              "      secretFile: %s\n"
                                              "    - name: chat\n"
                                              "      url: http://127.0.0.1:%d/slack\n"
                                              "      format: slack\n"
                                              "    - name: critical-only\n"
                                              "      url: http://127.0.0.1:%d/critical\n"
                                              "      minSeverity: critical\n"
                                              "    - name: beta-only\n"
                                              "      url: http://127.0.0.1:%d/beta\n"
                                              "      clusters: [default/beta]\n",
                                              e->source, e->root, port, secret, port, port, port);
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml", text);
        const char *args[] = {"run", "--config", cfg, NULL};

        /* The receiver is down: the first attempt fails and the row stays queued. */
        pid_t d = e2e_start(e, args, "daemon1.log");
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        assert_true(ops_test_wait_log(e, "daemon1.log",
                                      "(cluster.converged) to webhook generic failed", 30));
        assert_true(
            ops_test_wait_log(e, "daemon1.log", "(cluster.converged) to webhook chat failed", 30));
        assert_true(ops_test_wait_log(e, "daemon1.log",
                                      "(cluster.conflict) to webhook generic failed", 30));
        /* Killed without a chance to clean up: the queue is in the state store. */
        assert_int_equal(kill(d, SIGKILL), 0);
        e2e_wait_exit(d);
        int64_t queued = sql_count(e, "1");
        assert_true(queued >= 4);
        assert_int_equal(sql_count(e, "delivered_ms IS NULL AND expired_ms IS NULL"), queued);
        /* Filters: critical-only wants none of these, beta-only no other cluster. */
        assert_int_equal(sql_count(e, "webhook IN ('critical-only', 'beta-only')"), 0);

        /* The receiver comes back, answering 503 twice first; gitcd restarts. */
        ops_receiver *rcv = ops_receiver_start(port, 2);
        d = e2e_start(e, args, "daemon2.log");
        assert_queued_delivered(rcv, queued);

        /* The 503s were retried, not dropped; filters kept the other webhooks quiet. */
        size_t n = 0;
        ops_request *all = ops_receiver_requests(rcv, &n);
        int refused = 0;
        for (size_t i = 0; i < n; i++) {
                refused += all[i].status == 503;
                assert_null(strstr(all[i].body, SECRET));
                assert_string_not_equal(all[i].path, "/critical");
                assert_string_not_equal(all[i].path, "/beta");
        }
        assert_int_equal(refused, 2);
        ops_request_list_free(all, n);
        assert_int_equal(sql_count(e, "webhook IN ('critical-only', 'beta-only')"), 0);

        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);

        /* The secret is in no log and nowhere in the state store. */
        _cleanup_free_ char *log1 = e2e_read_log(e, "daemon1.log");
        _cleanup_free_ char *log2 = e2e_read_log(e, "daemon2.log");
        assert_null(strstr(log1, SECRET));
        assert_null(strstr(log2, SECRET));
        _cleanup_free_ char *grep = xasprintf("grep -rqa '%s' %s", SECRET, e->state_dir);
        assert_int_not_equal(system(grep), 0);

        ops_receiver_stop(rcv);
        e2e_free(e);
}

static void git(const char *repo, const char *cmd)
{
        _cleanup_free_ char *c =
            xasprintf("git -C %s -c user.name=t -c user.email=t@example.com %s", repo, cmd);
        assert_int_equal(system(c), 0);
}

/* A rollback of the branch is refused, and the refusal is notified once, as a warning. */
static void test_refusal(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        _cleanup_free_ char *repo = path_join(e->root, "repo");
        _cleanup_free_ char *init = xasprintf("git init -q -b main %s", repo);
        assert_int_equal(system(init), 0);
        free(ops_test_write_cluster(e, "repo/a.yaml", "alpha", 1));
        git(repo, "add -A");
        git(repo, "commit -q -m one");
        free(ops_test_write(e, "repo/README", "two\n"));
        git(repo, "add -A");
        git(repo, "commit -q -m two");
        int port = harness_free_port();
        ops_receiver *rcv = ops_receiver_start(port, 0);
        _cleanup_free_ char *text = xasprintf("interval: 1s\n"
                                              "allowPlainHTTP: [127.0.0.1]\n"
                                              "sources:\n"
                                              "  - name: main\n"
                                              "    url: file://%s\n"
                                              "    ref: main\n"
                                              "notifications:\n"
                                              "  webhooks:\n"
                                              "    - name: warnings\n"
                                              "      url: http://127.0.0.1:%d/w\n"
                                              "      minSeverity: warning\n",
                                              repo, port);
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml", text);
        const char *args[] = {"run", "--config", cfg, NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        git(repo, "reset -q --hard HEAD~1");
        ops_request *q = ops_receiver_wait(rcv, 1, 60);
        assert_non_null(q);
        json_error_t jerr;
        json_t *body = json_loads(q->body, 0, &jerr);
        assert_non_null(body);
        assert_string_equal(json_string_value(json_object_get(body, "event")), "revision.rejected");
        assert_string_equal(json_string_value(json_object_get(body, "severity")), "warning");
        assert_non_null(strstr(json_string_value(json_object_get(body, "message")), "refused"));
        json_decref(body);
        ops_request_free(q);
        /* Polled again and again, the same refusal is not notified twice. */
        assert_true(ops_test_wait_log(e, "daemon.log", "refused", 10));
        int64_t t0 = now_mono_ms();
        while (now_mono_ms() - t0 < 3000)
                usleep(100 * 1000);
        assert_int_equal(sql_count(e, "event = 'revision.rejected'"), 1);
        /* The info event (alpha converged) was filtered out. */
        assert_int_equal(sql_count(e, "1"), 1);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        ops_receiver_stop(rcv);
        e2e_free(e);
}

static char *head_of(const char *repo)
{
        _cleanup_free_ char *cmd = xasprintf("git -C %s rev-parse HEAD", repo);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char sha[64] = "";
        assert_non_null(fgets(sha, sizeof(sha), p));
        pclose(p);
        sha[strcspn(sha, "\n")] = 0;
        return xstrdup(sha);
}

static char *make_repo(e2e *e, const char *name, const char *cluster)
{
        char *repo = path_join(e->root, name);
        _cleanup_free_ char *init = xasprintf("git init -q -b main %s", repo);
        assert_int_equal(system(init), 0);
        _cleanup_free_ char *file = xasprintf("%s/c.yaml", name);
        free(ops_test_write_cluster(e, file, cluster, 1));
        git(repo, "add -A");
        git(repo, "commit -q -m add");
        return repo;
}

/* Commit statuses on a GitHub-style and a GitLab-style API (a local receiver plays both). */
static void test_commit_status(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        e2e *e = e2e_new();
        _cleanup_free_ char *hub = make_repo(e, "hub", "alpha");
        _cleanup_free_ char *lab = make_repo(e, "lab", "beta");
        _cleanup_free_ char *hub_sha = head_of(hub);
        _cleanup_free_ char *lab_sha = head_of(lab);
        _cleanup_free_ char *tok =
            ops_test_write_secret(e, "api.token", "ghp-token-never-in-a-body\n");
        int port = harness_free_port();
        ops_receiver *rcv = ops_receiver_start(port, 0);
        _cleanup_free_ char *text = xasprintf("interval: 1s\n"
                                              "allowPlainHTTP: [127.0.0.1]\n"
                                              "sources:\n"
                                              "  - name: hub\n"
                                              "    url: file://%s\n"
                                              "    commitStatus:\n"
                                              "      provider: github\n"
                                              "      api: http://127.0.0.1:%d\n"
                                              "      repository: acme/etcd\n"
                                              "      tokenFile: %s\n"
                                              "  - name: lab\n"
                                              "    url: file://%s\n"
                                              "    commitStatus:\n"
                                              "      provider: gitlab\n"
                                              "      api: http://127.0.0.1:%d/api/v4\n"
                                              "      repository: acme/etcd-lab\n"
                                              "      tokenFile: %s\n",
                                              hub, port, tok, lab, port, tok);
        _cleanup_free_ char *cfg = ops_test_write(e, "gitcd.yaml", text);
        const char *args[] = {"run", "--config", cfg, NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        assert_true(e2e_wait_ready(e, "beta", 1, 60));
        ops_request *a = ops_receiver_wait(rcv, 1, 60);
        ops_request *b = ops_receiver_wait(rcv, 2, 60);
        assert_non_null(a);
        assert_non_null(b);
        ops_request *gh = strstr(a->path, "/repos/") ? a : b;
        ops_request *gl = gh == a ? b : a;

        _cleanup_free_ char *gh_path = xasprintf("/repos/acme/etcd/statuses/%s", hub_sha);
        assert_string_equal(gh->path, gh_path);
        assert_string_equal(gh->authorization, "Bearer ghp-token-never-in-a-body");
        json_error_t jerr;
        json_t *o = json_loads(gh->body, 0, &jerr);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "state")), "success");
        assert_string_equal(json_string_value(json_object_get(o, "context")),
                            "gitcd/default/alpha");
        assert_string_equal(json_string_value(json_object_get(o, "description")), "applied");
        json_decref(o);

        _cleanup_free_ char *gl_path =
            xasprintf("/api/v4/projects/acme%%2Fetcd-lab/statuses/%s", lab_sha);
        /* libmicrohttpd hands the path over decoded. */
        _cleanup_free_ char *gl_decoded =
            xasprintf("/api/v4/projects/acme/etcd-lab/statuses/%s", lab_sha);
        assert_true(streq(gl->path, gl_path) || streq(gl->path, gl_decoded));
        assert_string_equal(gl->private_token, "ghp-token-never-in-a-body");
        assert_null(gl->authorization);
        o = json_loads(gl->body, 0, &jerr);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "state")), "success");
        assert_string_equal(json_string_value(json_object_get(o, "name")), "gitcd/default/beta");
        json_decref(o);
        assert_null(strstr(gh->body, "ghp-token"));
        assert_null(strstr(gl->body, "ghp-token"));

        ops_request_free(a);
        ops_request_free(b);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        _cleanup_free_ char *log = e2e_read_log(e, "daemon.log");
        assert_null(strstr(log, "ghp-token"));
        _cleanup_free_ char *grep = xasprintf("grep -rqa ghp-token %s", e->state_dir);
        assert_int_not_equal(system(grep), 0);
        ops_receiver_stop(rcv);
        e2e_free(e);
}

static ops_config *config_of(const char *text)
{
        ops_config *c = NULL;
        diag_list d = DIAG_LIST_INIT;
        if (ops_config_load_buffer("gitcd.yaml", text, strlen(text), &c, &d) < 0) {
                _cleanup_free_ char *first = d.n ? diag_format(&d.items[0]) : NULL;
                fail_msg("config: %s", first ? first : "?");
        }
        diag_list_release(&d);
        return c;
}

/* The configuration with webhook "hook" and the commit statuses of source "main" at port. */
static ops_config *hooks_at(int port, const char *repository, const char *tok)
{
        _cleanup_free_ char *text = xasprintf("allowPlainHTTP: [127.0.0.1]\n"
                                              "sources:\n"
                                              "  - name: main\n"
                                              "    url: /srv/repo\n"
                                              "    commitStatus:\n"
                                              "      provider: github\n"
                                              "      api: http://127.0.0.1:%d\n"
                                              "      repository: %s\n"
                                              "      tokenFile: %s\n"
                                              "notifications:\n"
                                              "  webhooks:\n"
                                              "    - name: hook\n"
                                              "      url: http://127.0.0.1:%d/in\n",
                                              port, repository, tok, port);
        return config_of(text);
}

static size_t requests_seen(ops_receiver *r)
{
        size_t n = 0;
        ops_request *l = ops_receiver_requests(r, &n);
        ops_request_list_free(l, n);
        return n;
}

/*
 * Queued notifications are sent where the configuration in force says:
 * the old receiver (failing) sees retries until a reload moves the webhook
 * and the forge API to another port, then the new one gets both rows, the
 * commit status at the new repository's path, and the old one nothing
 * more; a webhook removed by a reload drops what is queued for it, with an
 * audit line.
 */
static void test_destination_follows_reload(void **state)
{
        (void)state;
        e2e *e = e2e_new();
        _cleanup_free_ char *tok = ops_test_write_secret(e, "api.token", "tok-of-the-new-forge\n");
        _cleanup_free_ char *path = path_join(e->state_dir, "state.db");
        state_db *db = NULL;
        assert_int_equal(state_open(path, STATE_OPEN_READ_WRITE, &db), 0);
        int old_port = harness_free_port(), new_port = harness_free_port();
        ops_receiver *old_rcv = ops_receiver_start(old_port, 1000000); /* always 503 */
        ops_receiver *new_rcv = ops_receiver_start(new_port, 0);
        ops_config *c1 = hooks_at(old_port, "acme/etcd", tok);
        ops_notifier *n = NULL;
        assert_int_equal(ops_notifier_start(path, c1, &n), 0);
        const char *sha = "0123456789abcdef0123456789abcdef01234567";
        ops_event ev = {.severity = OPS_SEV_CRITICAL,
                        .event = "cluster.failed",
                        .cluster = "default/alpha",
                        .message = "it broke"};
        assert_int_equal(ops_notify(n, db, &ev), 1);
        assert_int_equal(ops_notify_commit_status(n, db, "main", sha, "default/alpha",
                                                  OPS_COMMIT_FAILED, "it broke"),
                         1);
        int64_t t0 = now_mono_ms();
        while (requests_seen(old_rcv) < 2 && now_mono_ms() - t0 < 30000)
                usleep(50 * 1000);
        assert_true(requests_seen(old_rcv) >= 2);

        ops_config *c2 = hooks_at(new_port, "acme/etcd-moved", tok);
        ops_notifier_configure(n, c2);
        size_t old_after = requests_seen(old_rcv);
        ops_request *a = ops_receiver_wait(new_rcv, 1, 60);
        ops_request *b = ops_receiver_wait(new_rcv, 2, 60);
        assert_non_null(a);
        assert_non_null(b);
        ops_request *status = strstr(a->path, "/repos/") ? a : b;
        ops_request *hook = status == a ? b : a;
        _cleanup_free_ char *want = xasprintf("/repos/acme/etcd-moved/statuses/%s", sha);
        assert_string_equal(status->path, want);
        assert_string_equal(status->authorization, "Bearer tok-of-the-new-forge");
        assert_string_equal(hook->path, "/in");
        ops_request_free(a);
        ops_request_free(b);
        /* at most an attempt that was in flight during the reload reached the old one */
        assert_true(requests_seen(old_rcv) <= old_after + 2);

        /* the webhook removed while a row waits for it: dropped, audited */
        ops_receiver_stop(new_rcv);
        assert_int_equal(ops_notify(n, db, &ev), 1);
        _cleanup_free_ char *text = xasprintf("sources:\n  - {name: main, url: /srv/repo}\n");
        ops_config *c3 = config_of(text);
        ops_notifier_configure(n, c3);
        state_audit_filter f = {.action = "notification.dropped"};
        state_audit_list l = {0};
        t0 = now_mono_ms();
        for (;;) {
                assert_int_equal(state_audit_query(db, &f, &l), 0);
                if (l.n > 0 || now_mono_ms() - t0 > 30000)
                        break;
                state_audit_list_release(&l);
                usleep(50 * 1000);
        }
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0]->cluster, "default/alpha");
        assert_non_null(strstr(l.items[0]->reason, "the webhook is no longer configured"));
        state_audit_list_release(&l);
        int64_t pending = -1;
        assert_int_equal(state_notify_pending(db, &pending), 0);
        assert_int_equal(pending, 0);

        ops_notifier_stop(n);
        ops_config_free(c1);
        ops_config_free(c2);
        ops_config_free(c3);
        ops_receiver_stop(old_rcv);
        state_close(db);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_commit_status),
            cmocka_unit_test(test_refusal),
            cmocka_unit_test(test_webhooks),
            cmocka_unit_test(test_destination_follows_reload),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
