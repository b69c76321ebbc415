/*
 * The push receiver end to end: `gitcd run` reading a real Git server over
 * HTTPS (git http-backend) with a webhook secret and a one-hour poll
 * interval, so that only a push can make it fetch after its first read.
 *
 * A commit that defines a cluster is pushed to the server; a GitHub push
 * event with a wrong signature is answered 401 and fetches nothing (the
 * source's fetch count and the audit log stay as they were, and the daemon
 * takes in nothing); the same event correctly signed is answered 202 and
 * the daemon takes the commit in and starts the cluster's first member on
 * real etcd. Then 20 signed pushes of one more commit, sent back to back,
 * make at most 3 fetches (coalesced). The endpoint's other answers (405,
 * 404, 400, 413 by Content-Length and chunked, a tag ignored), Gitea's,
 * GitLab's and the generic hook's headers (right and wrong) and
 * gitcd_webhook_requests_total are checked on the way; at the end the
 * daemon stops cleanly on SIGTERM. gitcd run does not start with a webhook
 * secret file others can read, nor with a webhook and nothing listening.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness/harness.h"
#include "tests/ops/ops-test.h"
#include "tests/ops/push-lab.h"
#include "util/hash.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static push_lab *lab;

static char *cluster_yaml(int deadline)
{
        return xasprintf("apiVersion: gitcd.io/v1alpha1\n"
                         "kind: EtcdCluster\n"
                         "metadata:\n"
                         "  name: alpha\n"
                         "  namespace: default\n"
                         "spec:\n"
                         "  replicas: 1\n"
                         "  version: \"3.5.16\"\n"
                         "  progressDeadlineSeconds: %d\n",
                         deadline);
}

/* Wait until the daemon made at least n fetches of the source; false after timeout_s. */
static bool wait_fetches(int n, int timeout_s)
{
        for (int64_t t0 = now_mono_ms(); now_mono_ms() - t0 < (int64_t)timeout_s * 1000;) {
                if (push_lab_fetches(lab) >= n)
                        return true;
                usleep(50 * 1000);
        }
        return false;
}

static double webhook_metric(const char *result)
{
        _cleanup_free_ char *m = push_lab_metrics(lab);
        _cleanup_free_ char *series =
            xasprintf("gitcd_webhook_requests_total{forge=\"github\",result=\"%s\"}", result);
        return ops_test_metric(m, series);
}

/* POST body to forge with header "NAME: VALUE" formatted from value; the status. */
static long post_signed(const char *forge, const char *name, const char *value, const char *body)
{
        _cleanup_free_ char *header = xasprintf("%s: %s", name, value);
        return push_lab_post(lab, forge, header, body, strlen(body), NULL);
}

/* Gitea's, GitLab's and the generic hook's own headers: a signed tag push is ignored. */
static void other_forges(void)
{
        _cleanup_free_ char *tea =
            xasprintf("{\"ref\":\"refs/tags/v1\",\"repository\":{\"clone_url\":\"%s\"}}", lab->url);
        _cleanup_free_ char *lab_body =
            xasprintf("{\"object_kind\":\"tag_push\",\"ref\":\"refs/tags/v1\","
                      "\"project\":{\"git_http_url\":\"%s\"}}",
                      lab->url);
        _cleanup_free_ char *gen =
            xasprintf("{\"repository\":\"%s\",\"ref\":\"refs/tags/v1\"}", lab->url);
        const size_t n = strlen(PUSH_LAB_SECRET);
        _cleanup_free_ char *tea_hex = hash_hmac_sha256_hex(PUSH_LAB_SECRET, n, tea, strlen(tea));
        _cleanup_free_ char *gen_hex = hash_hmac_sha256_hex(PUSH_LAB_SECRET, n, gen, strlen(gen));
        _cleanup_free_ char *gen_sig = xasprintf("sha256=%s", gen_hex);
        assert_int_equal(post_signed("gitea", "X-Gitea-Signature", tea_hex, tea), 200);
        assert_int_equal(post_signed("gitea", "X-Gitea-Signature", gen_hex, tea), 401);
        assert_int_equal(post_signed("gitlab", "X-Gitlab-Token", PUSH_LAB_SECRET, lab_body), 200);
        assert_int_equal(post_signed("gitlab", "X-Gitlab-Token", "guess", lab_body), 401);
        assert_int_equal(post_signed("generic", "X-Gitcd-Signature", gen_sig, gen), 200);
        assert_int_equal(post_signed("generic", "X-Hub-Signature-256", gen_sig, gen), 401);
}

static void test_endpoint_answers(void **state)
{
        (void)state;
        _cleanup_free_ char *reply = NULL;
        /* not POST */
        _cleanup_free_ char *url = xasprintf("%s/github", lab->hooks);
        assert_int_equal(ops_test_get(url, NULL, NULL), 405);
        /* an unknown forge */
        assert_int_equal(push_lab_post(lab, "bitbucket", NULL, "{}", 2, NULL), 404);
        /* a repository no source reads */
        const char *other = "{\"ref\":\"refs/heads/main\",\"repository\":{\"clone_url\":"
                            "\"https://github.com/someone/else.git\"}}";
        assert_int_equal(push_lab_post(lab, "github", NULL, other, strlen(other), &reply), 404);
        free(reply);
        reply = NULL;
        /* not JSON */
        assert_int_equal(push_lab_post(lab, "github", NULL, "payload=x", 9, NULL), 400);
        /* over 1 MiB */
        size_t big = 2 * 1024 * 1024;
        char *huge = xmalloc(big);
        memset(huge, ' ', big);
        assert_int_equal(push_lab_post(lab, "github", NULL, huge, big, &reply), 413);
        free(huge);
        assert_non_null(strstr(reply, "1 MiB"));
        /* a signed tag push: ignored, nothing fetched */
        _cleanup_free_ char *tag = push_lab_github_payload(lab, "refs/tags/v1", "1234");
        _cleanup_free_ char *hex =
            hash_hmac_sha256_hex(PUSH_LAB_SECRET, strlen(PUSH_LAB_SECRET), tag, strlen(tag));
        _cleanup_free_ char *sig = xasprintf("X-Hub-Signature-256: sha256=%s", hex);
        assert_int_equal(push_lab_post(lab, "github", sig, tag, strlen(tag), NULL), 200);
        /* over 1 MiB, chunked: told once read */
        huge = xmalloc(big);
        memset(huge, ' ', big);
        assert_int_equal(push_lab_post_chunked(lab, "generic", huge, big), 413);
        free(huge);
        other_forges();
        assert_int_equal(webhook_metric("bad_method"), 1);
        assert_int_equal(webhook_metric("unknown"), 1);
        assert_int_equal(webhook_metric("malformed"), 1);
        assert_int_equal(webhook_metric("too_large"), 1);
        assert_int_equal(webhook_metric("ignored"), 1);
        assert_int_equal(push_lab_fetches(lab), 1);
}

static void test_bad_signature_then_push(void **state)
{
        (void)state;
        _cleanup_free_ char *yaml = cluster_yaml(120);
        _cleanup_free_ char *commit = push_lab_commit(lab, "clusters/alpha.yaml", yaml);
        assert_int_equal(push_lab_github_push(lab, "not-the-secret", commit), 401);
        assert_int_equal(push_lab_github_push(lab, "", commit), 401);
        assert_int_equal(webhook_metric("unauthorized"), 2);
        /* nothing was handed to the loop: no fetch, no audit, the cluster unknown */
        assert_int_equal(push_lab_fetches(lab), 1);
        assert_int_equal(push_lab_log_count(lab, "push:"), 0);
        assert_int_equal(e2e_audit_count(lab->e, "alpha", "spec.accepted"), 0);

        assert_int_equal(push_lab_github_push(lab, PUSH_LAB_SECRET, commit), 202);
        assert_int_equal(webhook_metric("accepted"), 1);
        /* the first step of the new cluster: its member runs */
        if (!e2e_wait_ready(lab->e, "alpha", 1, 300)) {
                _cleanup_free_ char *log = e2e_read_log(lab->e, "daemon.log");
                fail_msg("the pushed cluster did not start:\n%s", log);
        }
        assert_int_equal(push_lab_fetches(lab), 2);
        _cleanup_free_ char *out = NULL;
        assert_int_equal(
            e2e_run(lab->e, &out, "log", "-o", "json", "--action", "source.push", NULL), 0);
        assert_non_null(strstr(out, commit));
        assert_non_null(strstr(out, "\"forge\":\"github\""));
}

static void test_flood_coalesces(void **state)
{
        (void)state;
        int before = push_lab_fetches(lab);
        _cleanup_free_ char *yaml = cluster_yaml(121);
        _cleanup_free_ char *commit = push_lab_commit(lab, "clusters/alpha.yaml", yaml);
        for (int i = 0; i < 20; i++)
                assert_int_equal(push_lab_github_push(lab, PUSH_LAB_SECRET, commit), 202);
        /* the new commit is taken in (its spec accepted) */
        int64_t t0 = now_mono_ms();
        while (e2e_audit_count(lab->e, "alpha", "spec.accepted") < 2) {
                if (now_mono_ms() - t0 > 300000) {
                        _cleanup_free_ char *log = e2e_read_log(lab->e, "daemon.log");
                        fail_msg("the flood's commit was not taken in:\n%s", log);
                }
                usleep(100 * 1000);
        }
        /* a "fetch again" asked for during the fetch has had the time to run */
        assert_true(wait_fetches(before + 1, 60));
        sleep(3);
        int fetches = push_lab_fetches(lab) - before;
        fprintf(stderr, "20 pushes: %d fetch(es)\n", fetches);
        assert_true(fetches >= 1 && fetches <= 3);
        assert_int_equal(webhook_metric("accepted"), 21);
}

/* SIGTERM: the daemon stops cleanly (under the sanitizers: nothing leaked, no error). */
static void test_daemon_stops(void **state)
{
        (void)state;
        int status = push_lab_stop_daemon(lab);
        if (status != 0) {
                _cleanup_free_ char *log = e2e_read_log(lab->e, "daemon.log");
                fail_msg("gitcd run exited with %d:\n%s", status, log);
        }
}

/* A secret file others can read, and a webhook with nothing listening: gitcd run does not start. */
static void test_refusals(void **state)
{
        (void)state;
        _cleanup_free_ char *secret = ops_test_write(lab->e, "open.secret", "s3cret\n");
        _cleanup_free_ char *text = xasprintf("listen: 127.0.0.1:%d\n"
                                              "sources:\n"
                                              "  - name: fleet\n"
                                              "    url: %s\n"
                                              "    webhook: {secretFile: %s}\n",
                                              harness_free_port(), lab->url, secret);
        _cleanup_free_ char *open_cfg = ops_test_write(lab->e, "open.yaml", text);
        char *err = NULL;
        const char *args[] = {"run", "--config", open_cfg, NULL};
        assert_int_equal(e2e_runv(lab->e, NULL, &err, args), 1);
        if (!strstr(err, "webhook secret file") || !strstr(err, "chmod 600"))
                fail_msg("unexpected message: %s", err);
        free(err);
        err = NULL;
        _cleanup_free_ char *quiet = xasprintf("sources:\n"
                                               "  - name: fleet\n"
                                               "    url: %s\n"
                                               "    webhook: {secretFile: %s}\n",
                                               lab->url, secret);
        _cleanup_free_ char *quiet_cfg = ops_test_write(lab->e, "quiet.yaml", quiet);
        const char *args2[] = {"run", "--config", quiet_cfg, NULL};
        assert_int_equal(e2e_runv(lab->e, NULL, &err, args2), 1);
        if (!strstr(err, "source fleet has a webhook, but nothing receives pushes"))
                fail_msg("unexpected message: %s", err);
        free(err);
}

static int setup(void **state)
{
        (void)state;
        lab = push_lab_new();
        if (!lab)
                exit(77);
        push_lab_start_daemon(lab, "1h");
        /* the first read, at the start */
        if (!wait_fetches(1, 120))
                return -1;
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        push_lab_free(lab);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_endpoint_answers), cmocka_unit_test(test_bad_signature_then_push),
            cmocka_unit_test(test_flood_coalesces),  cmocka_unit_test(test_daemon_stops),
            cmocka_unit_test(test_refusals),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
