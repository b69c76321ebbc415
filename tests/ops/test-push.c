/*
 * The push receiver's judgement (ops/push.h), without a server: each
 * forge's signature scheme (GitHub's documented example among them), the
 * repository URL forms that name one repository, the refs a source
 * follows, the verdict of a request against configured sources (404, 401,
 * 200 ignored, 202 with the sources to fetch, a repository two sources
 * share), the inbox's coalescing, and the configuration's webhook key.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/config.h"
#include "ops/push.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static void test_url_normalize(void **state)
{
        (void)state;
        static const struct {
                const char *url, *want;
        } cases[] = {
            {"https://github.com/Acme/etcd-fleet.git", "github.com/acme/etcd-fleet"},
            {"https://github.com/acme/etcd-fleet", "github.com/acme/etcd-fleet"},
            {"https://github.com/acme/etcd-fleet/", "github.com/acme/etcd-fleet"},
            {"https://ci:tok@github.com:443/acme/etcd-fleet.git/", "github.com/acme/etcd-fleet"},
            {"git@github.com:acme/etcd-fleet.git", "github.com/acme/etcd-fleet"},
            {"ssh://git@github.com:22/acme/etcd-fleet.git", "github.com/acme/etcd-fleet"},
            {"git://github.com/acme/etcd-fleet.git", "github.com/acme/etcd-fleet"},
            {"https://gitlab.example.org/group/sub/project.git",
             "gitlab.example.org/group/sub/project"},
            {"https://[::1]:8443/o/r.git", "[::1]/o/r"},
            {"/srv/git/fleet.git", NULL},
            {"file:///srv/git/fleet.git", NULL},
            {"./fleet", NULL},
            {"https://github.com/", NULL},
            {"", NULL},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *got = push_url_normalize(cases[i].url);
                if (!cases[i].want) {
                        if (got)
                                fail_msg("%s: %s, want none", cases[i].url, got);
                        continue;
                }
                if (!got || !streq(got, cases[i].want))
                        fail_msg("%s: %s, want %s", cases[i].url, got ? got : "(none)",
                                 cases[i].want);
        }
        assert_true(
            push_url_same("git@gitea.local:ops/fleet.git", "https://gitea.local/ops/fleet"));
        assert_false(
            push_url_same("https://github.com/acme/fleet", "https://github.com/acme/fleet2"));
        assert_false(
            push_url_same("https://github.com/acme/fleet", "https://gitlab.com/acme/fleet"));
        assert_false(push_url_same("/srv/a", "/srv/a"));
}

static void test_ref_matches(void **state)
{
        (void)state;
        assert_true(push_ref_matches("main", "refs/heads/main"));
        assert_true(push_ref_matches("refs/heads/main", "refs/heads/main"));
        assert_false(push_ref_matches("main", "refs/heads/main2"));
        assert_false(push_ref_matches("main", "refs/heads/feature/main"));
        assert_false(push_ref_matches("refs/heads/main", "refs/tags/main"));
        assert_true(push_ref_matches("v1.2", "refs/tags/v1.2"));
        assert_true(push_ref_matches("refs/tags/v1.2", "refs/tags/v1.2"));
        assert_false(push_ref_matches("main", "refs/tags/v1.2"));
        /* no ref: the remote's HEAD, which a push does not name: any branch, no tag */
        assert_true(push_ref_matches(NULL, "refs/heads/anything"));
        assert_false(push_ref_matches(NULL, "refs/tags/v1"));
        assert_false(push_ref_matches("main", NULL));
        assert_false(push_ref_matches("main", "main"));
}

static void test_signatures(void **state)
{
        (void)state;
        /* GitHub's documented example (docs.github.com, "Validating webhook deliveries") */
        const char *secret = "It's a Secret to Everybody", *body = "Hello, World!";
        const char *hex = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        _cleanup_free_ char *sig = xasprintf("sha256=%s", hex);
        assert_true(push_signature_ok(PUSH_GITHUB, secret, sig, body, strlen(body)));
        assert_true(push_signature_ok(PUSH_GENERIC, secret, sig, body, strlen(body)));
        assert_true(push_signature_ok(PUSH_GITEA, secret, hex, body, strlen(body)));
        _cleanup_free_ char *upper = xasprintf("sha256=%s", hex);
        for (char *p = upper + 7; *p; p++)
                *p = (char)(*p >= 'a' && *p <= 'f' ? *p - 32 : *p);
        assert_true(push_signature_ok(PUSH_GITHUB, secret, upper, body, strlen(body)));
        /* the wrong body, secret, prefix or length */
        assert_false(push_signature_ok(PUSH_GITHUB, secret, sig, "Hello, World?", 13));
        assert_false(push_signature_ok(PUSH_GITHUB, "another", sig, body, strlen(body)));
        assert_false(push_signature_ok(PUSH_GITHUB, secret, hex, body, strlen(body)));
        assert_false(push_signature_ok(PUSH_GITEA, secret, sig, body, strlen(body)));
        assert_false(push_signature_ok(PUSH_GITHUB, secret, "sha256=7571", body, strlen(body)));
        assert_false(push_signature_ok(PUSH_GITHUB, secret, "sha1=abc", body, strlen(body)));
        assert_false(push_signature_ok(PUSH_GITHUB, secret, NULL, body, strlen(body)));
        assert_false(push_signature_ok(PUSH_GITHUB, NULL, sig, body, strlen(body)));
        /* GitLab: the token itself */
        assert_true(push_signature_ok(PUSH_GITLAB, "s3cret-token", "s3cret-token", body, 1));
        assert_false(push_signature_ok(PUSH_GITLAB, "s3cret-token", "s3cret-toke", body, 1));
        assert_false(push_signature_ok(PUSH_GITLAB, "s3cret-token", "", body, 1));
}

static const push_source sources[] = {
    {.name = "fleet", .url = "git@github.com:acme/fleet.git", .ref = "main", .secret = "one"},
    {.name = "fleet-staging",
     .url = "https://github.com/acme/fleet",
     .ref = "staging",
     .secret = "two"},
    {.name = "fleet-mirror", .url = "https://github.com/acme/fleet", .ref = "main"},
    {.name = "lab",
     .url = "https://gitlab.example.org/ops/etcd.git",
     .ref = "main",
     .secret = "lab-token"},
    {.name = "tea", .url = "https://gitea.local/ops/etcd", .secret = "tea"},
    {.name = "local", .url = "/srv/git/fleet", .secret = "x"},
};

static char *github_push(const char *ref)
{
        return xasprintf("{\"ref\":\"%s\",\"before\":\"%s\",\"after\":\"%s\","
                         "\"repository\":{\"full_name\":\"acme/fleet\","
                         "\"html_url\":\"https://github.com/acme/fleet\","
                         "\"clone_url\":\"https://github.com/acme/fleet.git\","
                         "\"ssh_url\":\"git@github.com:acme/fleet.git\"}}",
                         ref, "1111111111111111111111111111111111111111",
                         "2222222222222222222222222222222222222222");
}

static push_outcome judge(push_forge forge, const char *secret, const char *event, const char *body,
                          push_verdict *v)
{
        _cleanup_free_ char *hex =
            secret ? hash_hmac_sha256_hex(secret, strlen(secret), body, strlen(body)) : NULL;
        _cleanup_free_ char *sig = !secret                ? NULL
                                   : forge == PUSH_GITLAB ? xstrdup(secret)
                                   : forge == PUSH_GITEA  ? xstrdup(hex)
                                                          : xasprintf("sha256=%s", hex);
        push_request req = {
            .forge = forge, .signature = sig, .event = event, .body = body, .len = strlen(body)};
        push_judge(&req, sources, ARRAY_SIZE(sources), v);
        assert_non_null(v->message);
        return v->outcome;
}

static void test_judge_github(void **state)
{
        (void)state;
        push_verdict v;
        _cleanup_free_ char *main_push = github_push("refs/heads/main");
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", main_push, &v), PUSH_QUEUED);
        assert_int_equal(push_outcome_status(v.outcome), 202);
        assert_int_equal(v.n_sources, 1);
        assert_string_equal(v.sources[0], "fleet");
        assert_string_equal(v.commit, "2222222222222222222222222222222222222222");
        assert_string_equal(v.ref, "refs/heads/main");
        push_verdict_release(&v);
        /* the staging source's secret signs only for the staging source */
        assert_int_equal(judge(PUSH_GITHUB, "two", "push", main_push, &v), PUSH_IGNORED);
        assert_int_equal(push_outcome_status(v.outcome), 200);
        push_verdict_release(&v);
        _cleanup_free_ char *staging = github_push("refs/heads/staging");
        assert_int_equal(judge(PUSH_GITHUB, "two", "push", staging, &v), PUSH_QUEUED);
        assert_int_equal(v.n_sources, 1);
        assert_string_equal(v.sources[0], "fleet-staging");
        push_verdict_release(&v);
        /* another branch, a tag: signed, ignored, nothing fetched */
        _cleanup_free_ char *other = github_push("refs/heads/feature");
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", other, &v), PUSH_IGNORED);
        assert_int_equal(v.n_sources, 0);
        push_verdict_release(&v);
        _cleanup_free_ char *tag = github_push("refs/tags/v1.0");
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", tag, &v), PUSH_IGNORED);
        push_verdict_release(&v);
        /* a bad or missing signature */
        assert_int_equal(judge(PUSH_GITHUB, "wrong", "push", main_push, &v), PUSH_UNAUTHORIZED);
        assert_int_equal(push_outcome_status(v.outcome), 401);
        assert_null(v.sources);
        push_verdict_release(&v);
        assert_int_equal(judge(PUSH_GITHUB, NULL, "push", main_push, &v), PUSH_UNAUTHORIZED);
        assert_string_equal(v.message, "missing X-Hub-Signature-256");
        push_verdict_release(&v);
        /* the ping GitHub sends when the hook is made, and other events */
        assert_int_equal(judge(PUSH_GITHUB, "one", "ping", main_push, &v), PUSH_IGNORED);
        push_verdict_release(&v);
        /* a deleted branch */
        _cleanup_free_ char *deleted =
            xasprintf("{\"ref\":\"refs/heads/main\",\"after\":\"%040d\","
                      "\"repository\":{\"clone_url\":\"https://github.com/acme/fleet.git\"}}",
                      0);
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", deleted, &v), PUSH_IGNORED);
        push_verdict_release(&v);
}

static void test_judge_unknown_and_malformed(void **state)
{
        (void)state;
        push_verdict v;
        const char *other = "{\"ref\":\"refs/heads/main\",\"repository\":{\"clone_url\":"
                            "\"https://github.com/someone/else.git\"}}";
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", other, &v), PUSH_UNKNOWN);
        assert_int_equal(push_outcome_status(v.outcome), 404);
        push_verdict_release(&v);
        /* a local folder source is never matched, whatever the payload says */
        const char *local = "{\"repository\":\"/srv/git/fleet\",\"ref\":\"refs/heads/main\"}";
        assert_int_equal(judge(PUSH_GENERIC, "x", NULL, local, &v), PUSH_UNKNOWN);
        push_verdict_release(&v);
        static const char *const bad[] = {
            "",
            "not json",
            "[1,2]",
            "{\"ref\":\"refs/heads/main\"}",
            "{\"ref\":\"refs/heads/main\",\"repository\":{\"clone_url\":1}}",
            "payload=%7B%22ref%22%3A%22refs%2Fheads%2Fmain%22%7D",
            "{\"ref\":1,\"ref\":2}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                push_outcome o = judge(PUSH_GITHUB, "one", "push", bad[i], &v);
                if (o != PUSH_MALFORMED)
                        fail_msg("'%s': %s, want malformed", bad[i], push_outcome_name(o));
                assert_int_equal(push_outcome_status(o), 400);
                push_verdict_release(&v);
        }
        /* signed, with a ref that is no Git ref: never reaches a log line */
        const char *ctl = "{\"ref\":\"refs/heads/main\\u001b[2J\",\"repository\":"
                          "{\"clone_url\":\"https://github.com/acme/fleet\"}}";
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", ctl, &v), PUSH_MALFORMED);
        push_verdict_release(&v);
        /* an "after" that is no commit id is left out */
        const char *odd = "{\"ref\":\"refs/heads/main\",\"after\":\"\\u001b[2J\","
                          "\"repository\":{\"clone_url\":\"https://github.com/acme/fleet\"}}";
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", odd, &v), PUSH_QUEUED);
        assert_null(v.commit);
        push_verdict_release(&v);
        /* signed, but no ref */
        const char *noref = "{\"repository\":{\"clone_url\":\"https://github.com/acme/fleet\"}}";
        assert_int_equal(judge(PUSH_GITHUB, "one", "push", noref, &v), PUSH_MALFORMED);
        push_verdict_release(&v);
}

static void test_judge_gitlab_gitea_generic(void **state)
{
        (void)state;
        push_verdict v;
        const char *lab = "{\"object_kind\":\"push\",\"ref\":\"refs/heads/main\","
                          "\"checkout_sha\":\"3333333333333333333333333333333333333333\","
                          "\"project\":{\"path_with_namespace\":\"ops/etcd\","
                          "\"git_ssh_url\":\"git@gitlab.example.org:ops/etcd.git\","
                          "\"git_http_url\":\"https://gitlab.example.org/ops/etcd.git\","
                          "\"web_url\":\"https://gitlab.example.org/ops/etcd\"}}";
        assert_int_equal(judge(PUSH_GITLAB, "lab-token", "Push Hook", lab, &v), PUSH_QUEUED);
        assert_string_equal(v.sources[0], "lab");
        assert_string_equal(v.commit, "3333333333333333333333333333333333333333");
        push_verdict_release(&v);
        assert_int_equal(judge(PUSH_GITLAB, "lab-tokem", "Push Hook", lab, &v), PUSH_UNAUTHORIZED);
        push_verdict_release(&v);
        assert_int_equal(judge(PUSH_GITLAB, "lab-token", "Merge Request Hook", lab, &v),
                         PUSH_IGNORED);
        push_verdict_release(&v);

        const char *tea = "{\"ref\":\"refs/heads/dev\",\"after\":\"4444\","
                          "\"repository\":{\"clone_url\":\"https://gitea.local/ops/etcd.git\","
                          "\"ssh_url\":\"git@gitea.local:ops/etcd.git\"}}";
        /* a source without ref follows the remote's HEAD: any branch fetches */
        assert_int_equal(judge(PUSH_GITEA, "tea", "push", tea, &v), PUSH_QUEUED);
        assert_string_equal(v.sources[0], "tea");
        push_verdict_release(&v);
        /* ... its default branch, when the payload names it */
        const char *tea_head = "{\"ref\":\"refs/heads/dev\",\"repository\":{\"clone_url\":"
                               "\"https://gitea.local/ops/etcd.git\",\"default_branch\":\"main\"}}";
        assert_int_equal(judge(PUSH_GITEA, "tea", "push", tea_head, &v), PUSH_IGNORED);
        push_verdict_release(&v);
        const char *tea_main = "{\"ref\":\"refs/heads/main\",\"repository\":{\"clone_url\":"
                               "\"https://gitea.local/ops/etcd.git\",\"default_branch\":\"main\"}}";
        assert_int_equal(judge(PUSH_GITEA, "tea", "push", tea_main, &v), PUSH_QUEUED);
        push_verdict_release(&v);

        const char *gen = "{\"repository\":\"https://github.com/acme/fleet.git\","
                          "\"ref\":\"refs/heads/main\"}";
        assert_int_equal(judge(PUSH_GENERIC, "one", NULL, gen, &v), PUSH_QUEUED);
        assert_string_equal(v.sources[0], "fleet");
        assert_null(v.commit);
        push_verdict_release(&v);
        /* fleet-mirror has no secret: a push never reaches it */
        assert_int_equal(judge(PUSH_GENERIC, "", NULL, gen, &v), PUSH_UNAUTHORIZED);
        push_verdict_release(&v);
}

static void test_forge_paths(void **state)
{
        (void)state;
        push_forge f;
        assert_int_equal(push_forge_from_path("/hooks/github", &f), 0);
        assert_int_equal(f, PUSH_GITHUB);
        assert_int_equal(push_forge_from_path("/hooks/generic", &f), 0);
        assert_int_equal(f, PUSH_GENERIC);
        assert_int_equal(push_forge_from_path("/hooks/bitbucket", &f), -ENOENT);
        assert_int_equal(push_forge_from_path("/hooks/github/", &f), -ENOENT);
        assert_int_equal(push_forge_from_path("/metrics", &f), -ENOENT);
}

static int wakes;
static void count_wake(void *cls)
{
        (void)cls;
        wakes++;
}

static void test_inbox_coalesces(void **state)
{
        (void)state;
        push_inbox *in = push_inbox_new(count_wake, NULL);
        wakes = 0;
        for (int i = 0; i < 20; i++) {
                _cleanup_free_ char *commit = xasprintf("%040d", i);
                push_inbox_put(in, "fleet", PUSH_GITHUB, "refs/heads/main", commit);
        }
        push_inbox_put(in, "lab", PUSH_GITLAB, "refs/heads/main", NULL);
        assert_int_equal(wakes, 21);
        push_item *items = NULL;
        size_t n = 0;
        push_inbox_take(in, &items, &n);
        assert_int_equal(n, 2);
        assert_string_equal(items[0].source, "fleet");
        assert_int_equal(items[0].count, 20);
        _cleanup_free_ char *last = xasprintf("%040d", 19);
        assert_string_equal(items[0].commit, last);
        assert_string_equal(items[1].source, "lab");
        assert_null(items[1].commit);
        push_items_free(items, n);
        push_inbox_take(in, &items, &n);
        assert_int_equal(n, 0);
        push_items_free(items, n);
        push_inbox_free(in);
        push_inbox_free(NULL);
}

static int load(const char *text, ops_config **ret, char **ret_diags)
{
        diag_list d = DIAG_LIST_INIT;
        int k = ops_config_load_buffer("gitcd.yaml", text, strlen(text), ret, &d);
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < d.n; i++) {
                _cleanup_free_ char *line = diag_format(&d.items[i]);
                sb_printf(&sb, "%s\n", line);
        }
        diag_list_release(&d);
        *ret_diags = sb_detach(&sb);
        return k;
}

static void test_config_webhook(void **state)
{
        (void)state;
        ops_config *c = NULL;
        char *diags = NULL;
        assert_int_equal(load("sources:\n"
                              "  - name: a\n"
                              "    url: https://github.com/acme/fleet.git\n"
                              "    ref: main\n"
                              "    webhook: {secretFile: /etc/gitcd/hook.secret}\n",
                              &c, &diags),
                         0);
        assert_string_equal(diags, "");
        assert_string_equal(c->sources[0].webhook_secret_file, "/etc/gitcd/hook.secret");
        ops_config_free(c);
        free(diags);
        c = NULL;
        assert_int_equal(load("sources:\n"
                              "  - name: a\n"
                              "    url: /srv/git/fleet\n"
                              "    webhook: {secretFile: /s}\n"
                              "  - name: b\n"
                              "    url: https://github.com/acme/fleet.git\n"
                              "    ref: 0123456789abcdef0123456789abcdef01234567\n"
                              "    webhook: {secretFile: /s}\n"
                              "  - name: c\n"
                              "    url: https://github.com/acme/fleet.git\n"
                              "    webhook: {secret: hunter2}\n"
                              "  - name: d\n"
                              "    url: https://github.com/acme/fleet.git\n"
                              "    webhook: /s\n",
                              &c, &diags),
                         -EINVAL);
        assert_string_equal(
            diags, "gitcd.yaml:4:14: error: webhook: source a reads /srv/git/fleet, not a remote "
                   "repository; no forge pushes to it\n"
                   "gitcd.yaml:8:14: error: webhook: source b is pinned to commit "
                   "0123456789abcdef0123456789abcdef01234567; a push never changes it\n"
                   "gitcd.yaml:11:15: error: secrets are not kept in this file; use secretFile\n"
                   "gitcd.yaml:11:14: error: webhook needs a secretFile\n"
                   "gitcd.yaml:14:14: error: webhook must be a mapping, not string\n");
        free(diags);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_url_normalize),
            cmocka_unit_test(test_ref_matches),
            cmocka_unit_test(test_signatures),
            cmocka_unit_test(test_judge_github),
            cmocka_unit_test(test_judge_unknown_and_malformed),
            cmocka_unit_test(test_judge_gitlab_gitea_generic),
            cmocka_unit_test(test_forge_paths),
            cmocka_unit_test(test_inbox_coalesces),
            cmocka_unit_test(test_config_webhook),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
