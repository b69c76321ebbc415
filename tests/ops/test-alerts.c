/*
 * deploy/prometheus-rules.yaml: promtool (Debian's prometheus package)
 * checks it and runs its unit tests (tests/ops/alerts-test.yaml) when
 * installed; and every gitcd_ metric a rule names is in what the real
 * daemon serves on /metrics (with a TLS cluster, so certificates are
 * there, and a snapshot taken and drilled by hand so the snapshot and
 * restore drill metrics are).
 */
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/yaml.h"
#include "tests/e2e/e2e.h"
#include "tests/harness/harness.h"
#include "tests/ops/ops-test.h"
#include "util/fs.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static char *rules_path(void)
{
        return xasprintf("%s/deploy/prometheus-rules.yaml", getenv("GITCD_SOURCE_ROOT"));
}

/*
 * promtool: scripts/setup takes it out of Debian's prometheus package into
 * the cache (harness_cache_path) without installing the server; one on PATH is used otherwise. NULL when there is none.
 */
static char *promtool_path(void)
{
        char *p = harness_cache_path("promtool/promtool");
        if (!p)
                return NULL;
        if (access(p, X_OK) == 0)
                return p;
        free(p);
        if (system("command -v promtool >/dev/null 2>&1") == 0)
                return xstrdup("promtool");
        return NULL;
}

static void test_promtool(void **state)
{
        (void)state;
        _cleanup_free_ char *promtool = promtool_path();
        if (!promtool)
                skip();
        _cleanup_free_ char *rules = rules_path();
        _cleanup_free_ char *check = xasprintf("'%s' check rules %s", promtool, rules);
        assert_int_equal(system(check), 0);
        _cleanup_free_ char *unit = xasprintf("cd %s/tests/ops && '%s' test rules "
                                              "alerts-test.yaml",
                                              getenv("GITCD_SOURCE_ROOT"), promtool);
        assert_int_equal(system(unit), 0);
}

/* Every expr of every rule, through the project's YAML loader. */
static void collect_exprs(const ynode *root, strbuf *out)
{
        const ynode *groups = ynode_get(root, "groups");
        assert_non_null(groups);
        assert_int_equal(groups->kind, YNODE_SEQ);
        for (size_t i = 0; i < groups->n; i++) {
                const ynode *rules = ynode_get(groups->values[i], "rules");
                assert_non_null(rules);
                for (size_t j = 0; j < rules->n; j++) {
                        const ynode *expr = ynode_get(rules->values[j], "expr");
                        assert_non_null(expr);
                        assert_non_null(ynode_get(rules->values[j], "alert"));
                        sb_append(out, expr->str);
                        sb_appendc(out, '\n');
                }
        }
}

static void test_metric_names(void **state)
{
        (void)state;
        if (!e2e_have_version("3.5.16"))
                skip();
        _cleanup_free_ char *rules = rules_path();
        ydoc_list docs = {0};
        diag_list diags = DIAG_LIST_INIT;
        assert_int_equal(yaml_load_file(rules, NULL, &docs, &diags), 0);
        assert_int_equal(docs.n, 1);
        strbuf exprs = STRBUF_INIT;
        collect_exprs(docs.docs[0].root, &exprs);
        ydoc_list_release(&docs);
        diag_list_release(&diags);

        e2e *e = e2e_new();
        e2e_write_file(e, "a.yaml",
                       "apiVersion: gitcd.io/v1alpha1\n"
                       "kind: EtcdCluster\n"
                       "metadata:\n"
                       "  name: alpha\n"
                       "  namespace: default\n"
                       "spec:\n"
                       "  replicas: 1\n"
                       "  version: \"3.5.16\"\n"
                       "  tls:\n"
                       "    provider: auto\n");
        int port = harness_free_port();
        _cleanup_free_ char *listen = xasprintf("127.0.0.1:%d", port);
        const char *args[] = {"run", "--source", e->source, "--interval",
                              "1s",  "--listen", listen,    NULL};
        pid_t d = e2e_start(e, args, "daemon.log");
        assert_true(e2e_wait_ready(e, "alpha", 1, 60));
        _cleanup_free_ char *to = path_join(e->root, "copies");
        const char *save[] = {"snapshot", "save", "default/alpha", "--to", to, "--verify", NULL};
        char *err = NULL;
        int k = e2e_runv(e, NULL, &err, save);
        if (k != 0)
                fail_msg("snapshot save: exit %d: %s", k, err);
        free(err);
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/metrics", port);
        regex_t re;
        assert_int_equal(regcomp(&re, "gitcd_[a-z_]+", REG_EXTENDED), 0);
        regmatch_t m;
        /*
         * The daemon publishes what /metrics serves from its loop: a
         * snapshot another process took shows up within ten seconds.
         */
        char *body = NULL;
        char *missing = NULL;
        int checked = 0;
        for (int64_t t0 = now_mono_ms();;) {
                free(body);
                body = NULL;
                free(missing);
                missing = NULL;
                checked = 0;
                assert_int_equal(ops_test_get(url, NULL, &body), 200);
                for (const char *p = sb_str(&exprs); regexec(&re, p, 1, &m, 0) == 0; p += m.rm_eo) {
                        _cleanup_free_ char *name =
                            xstrndup(p + m.rm_so, (size_t)(m.rm_eo - m.rm_so));
                        _cleanup_free_ char *type = xasprintf("# TYPE %s ", name);
                        if (!strstr(body, type) && !missing)
                                missing = xstrdup(name);
                        checked++;
                }
                if (!missing || now_mono_ms() - t0 > 60 * 1000)
                        break;
                usleep(500 * 1000);
        }
        if (missing)
                fail_msg("the rules name %s, which /metrics does not serve", missing);
        regfree(&re);
        assert_true(checked >= 8);
        free(body);
        sb_release(&exprs);
        assert_int_equal(kill(d, SIGTERM), 0);
        assert_int_equal(e2e_wait_exit(d), 0);
        e2e_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_promtool),
            cmocka_unit_test(test_metric_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
