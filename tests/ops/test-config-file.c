/*
 * The daemon's configuration file as ops_config_load_buffer() reads it,
 * without starting anything: webhook and forge API URLs are https:// unless
 * allowPlainHTTP lists the host (file:line:col errors otherwise), and the
 * allowance takes host names and addresses, not URLs or ports.
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
#include "util/strbuf.h"
#include "util/xalloc.h"

/* Load text; the diagnostics, one per line, in *ret_diags. */
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

static void test_plain_http_refused(void **state)
{
        (void)state;
        ops_config *c = NULL;
        char *diags = NULL;
        const char *text = "sources:\n"
                           "  - name: a\n"
                           "    url: /srv/repo\n"
                           "    commitStatus:\n"
                           "      provider: gitea\n"
                           "      api: http://gitea.internal:3000/api/v1\n"
                           "      repository: ops/etcd\n"
                           "      tokenFile: /etc/gitcd/gitea.token\n"
                           "notifications:\n"
                           "  webhooks:\n"
                           "    - name: chat\n"
                           "      url: http://hooks.example.org/in\n"
                           "    - name: safe\n"
                           "      url: https://hooks.example.org/in\n";
        assert_int_equal(load(text, &c, &diags), -EINVAL);
        assert_string_equal(
            diags, "gitcd.yaml:6:12: error: api: plain http:// would send notifications and tokens "
                   "unencrypted; use https://, or list gitea.internal under allowPlainHTTP to "
                   "allow it for that host\n"
                   "gitcd.yaml:12:12: error: url: plain http:// would send notifications and "
                   "tokens unencrypted; use https://, or list hooks.example.org under "
                   "allowPlainHTTP to allow it for that host\n");
        free(diags);
}

static void test_plain_http_allowed(void **state)
{
        (void)state;
        ops_config *c = NULL;
        char *diags = NULL;
        const char *text = "allowPlainHTTP: [gitea.internal, 127.0.0.1, '[::1]', fd00::5]\n"
                           "sources:\n"
                           "  - name: a\n"
                           "    url: /srv/repo\n"
                           "    commitStatus:\n"
                           "      provider: gitea\n"
                           "      api: http://GITEA.internal:3000/api/v1\n"
                           "      repository: ops/etcd\n"
                           "      tokenFile: /etc/gitcd/gitea.token\n"
                           "notifications:\n"
                           "  webhooks:\n"
                           "    - {name: a, url: 'http://127.0.0.1:9000/in'}\n"
                           "    - {name: b, url: 'http://[::1]:80/in'}\n"
                           "    - {name: c, url: 'http://user@[fd00::5]/in'}\n"
                           "    - {name: d, url: 'https://elsewhere.example/in'}\n";
        if (load(text, &c, &diags) != 0)
                fail_msg("%s", diags);
        free(diags);
        assert_int_equal(c->n_plain_http_hosts, 4);
        assert_string_equal(c->plain_http_hosts[2], "::1");
        assert_true(ops_config_allows_plain_http(c, "http://127.0.0.1/x"));
        assert_true(ops_config_allows_plain_http(c, "https://anything.example/"));
        assert_false(ops_config_allows_plain_http(c, "http://127.0.0.2/x"));
        assert_false(ops_config_allows_plain_http(c, "http://gitea.internal.evil.example/"));
        assert_false(ops_config_allows_plain_http(c, "http://x@evil.example/?gitea.internal"));
        ops_config_free(c);
}

static void test_allowance_takes_hosts(void **state)
{
        (void)state;
        ops_config *c = NULL;
        char *diags = NULL;
        const char *text = "allowPlainHTTP:\n"
                           "  - http://hooks.example.org\n"
                           "  - hooks.example.org:8080\n"
                           "  - ''\n"
                           "sources:\n"
                           "  - {name: a, url: /srv/repo}\n";
        assert_int_equal(load(text, &c, &diags), -EINVAL);
        assert_non_null(strstr(diags, "gitcd.yaml:2:5: error: allowPlainHTTP takes host names or "
                                      "addresses"));
        assert_non_null(strstr(diags, "gitcd.yaml:3:5: error: allowPlainHTTP takes host names"));
        assert_non_null(strstr(diags, "gitcd.yaml:4:5: error: a host must be a non-empty string"));
        free(diags);
        text = "allowPlainHTTP: hooks.example.org\nsources:\n  - {name: a, url: /srv/repo}\n";
        assert_int_equal(load(text, &c, &diags), -EINVAL);
        assert_non_null(strstr(diags, "gitcd.yaml:1:17: error: allowPlainHTTP must be a sequence"));
        free(diags);
}

/* A source's kubernetes: its kubeconfig and context, where the context was written; bad keys refused. */
static void test_source_kubernetes(void **state)
{
        (void)state;
        ops_config *c = NULL;
        char *d = NULL;
        assert_int_equal(load("kubernetes:\n"
                              "  context: east\n"
                              "sources:\n"
                              "- name: west\n"
                              "  url: /srv/west\n"
                              "  kubernetes:\n"
                              "    kubeconfig: /etc/gitcd/west.kubeconfig\n"
                              "    context: \"admin@west\"\n"
                              "- name: plain\n"
                              "  url: /srv/plain\n",
                              &c, &d),
                         0);
        assert_string_equal(c->kube_context, "east");
        assert_string_equal(c->sources[0].kubeconfig, "/etc/gitcd/west.kubeconfig");
        assert_string_equal(c->sources[0].kube_context, "admin@west");
        assert_int_equal(c->sources[0].kube_context_line, 8);
        assert_int_equal(c->sources[0].kube_context_col, 14);
        assert_null(c->sources[1].kubeconfig);
        assert_null(c->sources[1].kube_context);
        ops_config_free(c);
        free(d);

        assert_int_equal(load("sources:\n"
                              "- name: a\n"
                              "  url: /srv/a\n"
                              "  kubernetes:\n"
                              "    clusterDomain: x.local\n"
                              "    context: \"a\\tb\"\n",
                              &c, &d),
                         -EINVAL);
        assert_non_null(strstr(d, "gitcd.yaml:5:5: error: unknown key 'clusterDomain' in a "
                                  "source's kubernetes"));
        assert_non_null(strstr(d, "gitcd.yaml:6:14: error: context: control characters"));
        free(d);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_plain_http_refused),
            cmocka_unit_test(test_source_kubernetes),
            cmocka_unit_test(test_plain_http_allowed),
            cmocka_unit_test(test_allowance_takes_hosts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
