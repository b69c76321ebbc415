/*
 * `gitcd render` as a user runs it: the real binary (GITCD_BIN) on every
 * example under examples/, compared byte for byte with the reviewed
 * golden files in tests/render/golden/ (regenerate them with
 * tests/render/update-golden.sh and review the diff). The JSON output must
 * hold the same objects as the YAML, and every object must pass the
 * structural check. Also: --help, bad usage, invalid input renders nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "k8s-check.h"
#include "render-fixture.h"
#include "api/yaml.h"
#include "util/fs.h"
#include "util/macro.h"

extern char **environ;

typedef struct run_result {
        int status; /* exit status, or -1 when killed */
        char *out;
        size_t out_len;
        char *err;
} run_result;

static void run_result_release(run_result *r)
{
        free(r->out);
        free(r->err);
}

/* Run GITCD_BIN with args; stdout and stderr captured through temporary files. */
static void run_gitcd(const char *const *args, run_result *ret)
{
        const char *bin = getenv("GITCD_BIN");
        assert_non_null(bin);
        char out_path[] = "/tmp/gitcd-render-out-XXXXXX";
        char err_path[] = "/tmp/gitcd-render-err-XXXXXX";
        int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
        assert_true(out_fd >= 0 && err_fd >= 0);

        const char *argv[32] = {bin};
        size_t n = 1;
        for (; args[n - 1]; n++) {
                assert_true(n < ARRAY_SIZE(argv) - 1);
                argv[n] = args[n - 1];
        }
        argv[n] = NULL;

        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
        posix_spawn_file_actions_adddup2(&fa, err_fd, STDERR_FILENO);
        pid_t pid;
        int r = posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        assert_int_equal(r, 0);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                assert_int_equal(errno, EINTR);
        close(out_fd);
        close(err_fd);

        ret->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        size_t err_len;
        assert_int_equal(read_file(out_path, 64 << 20, &ret->out, &ret->out_len), 0);
        assert_int_equal(read_file(err_path, 1 << 20, &ret->err, &err_len), 0);
        unlink(out_path);
        unlink(err_path);
}

/* examples/quickstart/etcd.yaml -> quickstart; examples/dialects/coreos.yaml -> dialects-coreos. */
static char *golden_name(const char *examples_dir, const char *path)
{
        const char *rel = path + strlen(examples_dir) + 1;
        char *name = xstrdup(rel);
        char *dot = strrchr(name, '.');
        if (dot)
                *dot = '\0';
        size_t len = strlen(name);
        if (len > 5 && streq(name + len - 5, "/etcd"))
                name[len - 5] = '\0';
        for (char *p = name; *p; p++)
                if (*p == '/')
                        *p = '-';
        return name;
}

static char *source_path(const char *rel)
{
        const char *root = getenv("GITCD_SOURCE_ROOT");
        assert_non_null(root);
        return path_join(root, rel);
}

/* Every example file (examples/ci/ holds pipeline files, not clusters). */
static void list_examples(path_list *out)
{
        _cleanup_free_ char *dir = source_path("examples");
        static const char *const suffixes[] = {".yaml", ".yml", NULL};
        path_list all = {NULL, 0, 0};
        const char *bad = NULL;
        char *paths[] = {dir};
        assert_int_equal(expand_paths(paths, 1, suffixes, &all, &bad), 0);
        _cleanup_free_ char *ci = path_join(dir, "ci/");
        for (size_t i = 0; i < all.n; i++)
                if (!strneq(all.paths[i], ci, strlen(ci)))
                        path_list_add(out, all.paths[i]);
        path_list_release(&all);
}

static void report_first_difference(const char *golden, const char *want, size_t want_len,
                                    const char *got, size_t got_len)
{
        size_t line = 1, i = 0;
        for (; i < want_len && i < got_len && want[i] == got[i]; i++)
                if (want[i] == '\n')
                        line++;
        size_t ws = i, gs = i;
        while (ws > 0 && want[ws - 1] != '\n')
                ws--;
        gs = ws;
        int wl = (int)strcspn(want + ws, "\n"), gl = (int)strcspn(got + gs, "\n");
        print_error("%s differs at line %zu:\n  golden: %.*s\n  render: %.*s\n"
                    "(run tests/render/update-golden.sh and review the diff)\n",
                    golden, line, wl, want + ws, gl, got + gs);
}

static void test_examples_match_golden(void **state)
{
        path_list examples = {NULL, 0, 0};
        list_examples(&examples);
        if (examples.n == 0)
                print_error("no examples found under examples/\n");
        assert_true(examples.n > 0);
        _cleanup_free_ char *examples_dir = source_path("examples");
        for (size_t i = 0; i < examples.n; i++) {
                const char *ex = examples.paths[i];
                _cleanup_free_ char *name = golden_name(examples_dir, ex);
                _cleanup_free_ char *rel = xasprintf("tests/render/golden/%s.yaml", name);
                _cleanup_free_ char *golden = source_path(rel);
                _cleanup_free_ char *want = NULL;
                size_t want_len = 0;
                if (read_file(golden, 64 << 20, &want, &want_len) < 0) {
                        print_error("%s: no golden file %s (run tests/render/update-golden.sh)\n",
                                    ex, rel);
                        fail();
                }
                run_result r = {0};
                run_gitcd((const char *[]){"render", ex, NULL}, &r);
                if (r.status != 0)
                        print_error("gitcd render %s exited %d:\n%s", ex, r.status, r.err);
                assert_int_equal(r.status, 0);
                bool same = r.out_len == want_len && memcmp(r.out, want, want_len) == 0;
                if (!same)
                        report_first_difference(rel, want, want_len, r.out, r.out_len);
                assert_true(same);
                run_result_release(&r);
        }
        path_list_release(&examples);
}

/* No golden file is left behind for an example that no longer exists. */
static void test_no_stale_golden(void **state)
{
        path_list examples = {NULL, 0, 0}, goldens = {NULL, 0, 0};
        list_examples(&examples);
        _cleanup_free_ char *examples_dir = source_path("examples");
        _cleanup_free_ char *golden_dir = source_path("tests/render/golden");
        static const char *const suffixes[] = {".yaml", NULL};
        const char *bad = NULL;
        char *paths[] = {golden_dir};
        assert_int_equal(expand_paths(paths, 1, suffixes, &goldens, &bad), 0);
        for (size_t g = 0; g < goldens.n; g++) {
                bool found = false;
                for (size_t i = 0; i < examples.n && !found; i++) {
                        _cleanup_free_ char *name = golden_name(examples_dir, examples.paths[i]);
                        _cleanup_free_ char *file = xasprintf("%s/%s.yaml", golden_dir, name);
                        found = streq(file, goldens.paths[g]);
                }
                if (!found)
                        print_error("%s matches no example\n", goldens.paths[g]);
                assert_true(found);
        }
        path_list_release(&examples);
        path_list_release(&goldens);
}

/* -o json holds exactly the objects of the YAML output, and each is well formed. */
static void test_json_matches_yaml(void **state)
{
        path_list examples = {NULL, 0, 0};
        list_examples(&examples);
        for (size_t i = 0; i < examples.n; i++) {
                const char *ex = examples.paths[i];
                run_result y = {0}, j = {0};
                run_gitcd((const char *[]){"render", "-o", "yaml", ex, NULL}, &y);
                run_gitcd((const char *[]){"render", "-o", "json", ex, NULL}, &j);
                assert_int_equal(y.status, 0);
                assert_int_equal(j.status, 0);

                json_error_t jerr;
                json_t *list = json_loadb(j.out, j.out_len, 0, &jerr);
                if (!list)
                        print_error("%s: -o json is not JSON: %s\n", ex, jerr.text);
                assert_non_null(list);
                assert_string_equal(jstr(list, "apiVersion"), "v1");
                assert_string_equal(jstr(list, "kind"), "List");
                json_t *items = jget(list, "items");
                assert_true(json_is_array(items));
                assert_true(j.out_len > 0 && j.out[j.out_len - 1] == '\n');

                ydoc_list docs = {NULL, 0, 0};
                diag_list diags = DIAG_LIST_INIT;
                assert_int_equal(yaml_parse(ex, y.out, y.out_len, NULL, &docs, &diags), 0);
                assert_int_equal(docs.n, json_array_size(items));
                for (size_t d = 0; d < docs.n; d++) {
                        json_t *doc = ynode_to_json(docs.docs[d].root);
                        if (!json_equal(doc, json_array_get(items, d)))
                                print_error("%s: object %zu differs between yaml and json\n", ex,
                                            d);
                        assert_true(json_equal(doc, json_array_get(items, d)));
                        json_decref(doc);
                }
                strbuf errs = STRBUF_INIT;
                k8s_check_set(items, &errs);
                if (errs.len)
                        print_error("%s:\n%s", ex, sb_str(&errs));
                assert_int_equal(errs.len, 0);
                sb_release(&errs);
                ydoc_list_release(&docs);
                diag_list_release(&diags);
                json_decref(list);
                run_result_release(&y);
                run_result_release(&j);
        }
        path_list_release(&examples);
}

static void test_help_and_usage(void **state)
{
        run_result r = {0};
        run_gitcd((const char *[]){"render", "--help", NULL}, &r);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "usage: gitcd render [-o yaml|json] [--cluster-domain"));
        assert_non_null(strstr(r.out, "--cluster-domain"));
        run_result_release(&r);

        const char *const *bad[] = {
            (const char *[]){"render", NULL},
            (const char *[]){"render", "-o", "xml", "x.yaml", NULL},
            (const char *[]){"render", "--cluster-domain", "Bad_Domain", "x.yaml", NULL},
            (const char *[]){"render", "--no-such-flag", "x.yaml", NULL},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                run_gitcd(bad[i], &r);
                assert_int_equal(r.status, 64);
                assert_int_equal(r.out_len, 0);
                assert_true(strlen(r.err) > 0);
                run_result_release(&r);
        }
}

static char *write_temp_dir(const char *good, const char *bad)
{
        char tmpl[] = "/tmp/gitcd-render-test-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *a = path_join(tmpl, "a-good.yaml");
        assert_int_equal(write_file_atomic(a, good, strlen(good), 0644), 0);
        if (bad) {
                _cleanup_free_ char *b = path_join(tmpl, "b-bad.yaml");
                assert_int_equal(write_file_atomic(b, bad, strlen(bad), 0644), 0);
        }
        return xstrdup(tmpl);
}

static const char good_cluster[] = "apiVersion: gitcd.io/v1alpha1\n"
                                   "kind: EtcdCluster\n"
                                   "metadata:\n"
                                   "  name: alpha\n"
                                   "  namespace: team-a\n"
                                   "spec:\n"
                                   "  replicas: 3\n"
                                   "  version: 3.5.16\n";

static void test_invalid_input_renders_nothing(void **state)
{
        static const char bad_cluster[] = "apiVersion: gitcd.io/v1alpha1\n"
                                          "kind: EtcdCluster\n"
                                          "metadata:\n"
                                          "  name: beta\n"
                                          "spec:\n"
                                          "  replicas: -2\n";
        _cleanup_free_ char *dir = write_temp_dir(good_cluster, bad_cluster);
        run_result r = {0};
        run_gitcd((const char *[]){"render", dir, NULL}, &r);
        assert_int_equal(r.status, 1);
        assert_int_equal(r.out_len, 0);
        assert_non_null(strstr(r.err, "b-bad.yaml:6:"));
        assert_non_null(strstr(r.err, "error:"));
        run_result_release(&r);

        _cleanup_free_ char *missing = path_join(dir, "does-not-exist.yaml");
        run_gitcd((const char *[]){"render", missing, NULL}, &r);
        assert_int_equal(r.status, 1);
        assert_int_equal(r.out_len, 0);
        run_result_release(&r);
        assert_int_equal(rm_rf(dir), 0);
}

static bool pod_has_arg(json_t *pod, const char *arg)
{
        size_t i;
        json_t *v;
        json_array_foreach(jget(pod, "spec.containers.0.command"), i,
                           v) if (streq(json_string_value(v), arg)) return true;
        return false;
}

static void test_cluster_domain_and_paused(void **state)
{
        static const char paused[] = "apiVersion: gitcd.io/v1alpha1\n"
                                     "kind: EtcdCluster\n"
                                     "metadata:\n"
                                     "  name: gamma\n"
                                     "spec:\n"
                                     "  replicas: 0\n";
        _cleanup_free_ char *dir = write_temp_dir(good_cluster, paused);
        run_result r = {0};
        run_gitcd(
            (const char *[]){"render", "-o", "json", "--cluster-domain", "corp.example", dir, NULL},
            &r);
        assert_int_equal(r.status, 0);
        json_t *list = json_loadb(r.out, r.out_len, 0, NULL);
        assert_non_null(list);
        json_t *items = jget(list, "items");
        json_t *pod = find_object(items, "Pod", "alpha-2");
        assert_non_null(pod);
        assert_true(pod_has_arg(pod, "--initial-advertise-peer-urls="
                                     "http://alpha-2.alpha-headless.team-a.svc.corp.example:2380"));
        /* The paused cluster: Services and the dormant member's volume, no Pod, and a note. */
        assert_non_null(find_object(items, "Service", "gamma"));
        assert_non_null(find_object(items, "PersistentVolumeClaim", "data-gamma-0"));
        assert_null(find_object(items, "Pod", "gamma-0"));
        assert_null(find_object(items, "PodDisruptionBudget", "gamma"));
        assert_non_null(strstr(r.err, "note:"));
        assert_non_null(strstr(r.err, "paused"));
        json_decref(list);
        run_result_release(&r);
        assert_int_equal(rm_rf(dir), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_examples_match_golden),
            cmocka_unit_test(test_no_stale_golden),
            cmocka_unit_test(test_json_matches_yaml),
            cmocka_unit_test(test_help_and_usage),
            cmocka_unit_test(test_invalid_input_renders_nothing),
            cmocka_unit_test(test_cluster_domain_and_paused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
