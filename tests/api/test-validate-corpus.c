/*
 * `gitcd validate` end to end: the real binary ($GITCD_BIN) runs on every
 * bad input in tests/api/bad/ (a file NN-what.yaml or a folder NN-what/)
 * and must print exactly NN-what.expected and exit 1; and on every example
 * in examples/ and the folder itself, where it must exit 0 and print exactly
 * tests/api/golden/<example>.expected (stdout, then stderr lines prefixed
 * with "stderr: ").
 *
 * The cases are discovered from the folders, so adding a file to the
 * corpus adds a test; tests/api/regen-expected.sh rewrites the expected
 * files (review the diff before keeping it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

typedef struct run_result {
        int status; /* exit status, or -1 when killed */
        char *out;
        char *err;
} run_result;

static char *slurp_fd(int fd)
{
        strbuf sb = STRBUF_INIT;
        char buf[4096];
        lseek(fd, 0, SEEK_SET);
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                sb_append_len(&sb, buf, (size_t)n);
        }
        return sb_detach(&sb);
}

/*
 * Run "$GITCD_BIN validate args..." in dir, capturing stdout and stderr
 * (merged: both into one file, res->err empty, as `2>&1` or a terminal).
 */
static void run_validate_into(const char *dir, const char *const *args, bool merged,
                              run_result *res)
{
        const char *bin = getenv("GITCD_BIN");
        assert_non_null(bin);
        char out_path[] = "/tmp/gitcd-spec-out-XXXXXX";
        char err_path[] = "/tmp/gitcd-spec-err-XXXXXX";
        int out = mkstemp(out_path), err = mkstemp(err_path);
        assert_true(out >= 0 && err >= 0);
        unlink(out_path);
        unlink(err_path);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (chdir(dir) < 0 || dup2(out, 1) < 0 || dup2(merged ? out : err, 2) < 0)
                        _exit(127);
                const char *argv[16] = {bin, "validate"};
                for (size_t i = 0; args[i] && i < 13; i++)
                        argv[i + 2] = args[i];
                execv(bin, (char *const *)argv);
                _exit(127);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        res->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        res->out = slurp_fd(out);
        res->err = slurp_fd(err);
        close(out);
        close(err);
}

static void run_validate_argv(const char *dir, const char *const *args, run_result *res)
{
        run_validate_into(dir, args, false, res);
}

static void run_validate(const char *dir, const char *arg, run_result *res)
{
        const char *args[] = {arg, NULL};
        run_validate_argv(dir, args, res);
}

static void free_result(run_result *res)
{
        free(res->out);
        free(res->err);
}

/* Usage errors exit 64, --help exits 0, missing paths are reported and the rest still read. */
static void test_cli(void **state)
{
        const char *root = getenv("GITCD_SOURCE_ROOT");
        run_result res = {0};
        const char *none[] = {NULL};
        run_validate_argv(root, none, &res);
        assert_int_equal(res.status, 64);
        assert_non_null(strstr(res.err, "no PATH given"));
        free_result(&res);

        const char *bogus[] = {"--bogus", "examples", NULL};
        run_validate_argv(root, bogus, &res);
        assert_int_equal(res.status, 64);
        free_result(&res);

        const char *help[] = {"--help", NULL};
        run_validate_argv(root, help, &res);
        assert_int_equal(res.status, 0);
        assert_non_null(strstr(res.out, "Usage: gitcd validate"));
        free_result(&res);

        const char *missing[] = {"no/such/dir", "examples/quickstart",
                                 "examples/quickstart/etcd.yaml", NULL};
        run_validate_argv(root, missing, &res);
        assert_int_equal(res.status, 1);
        assert_string_equal(res.out, "no/such/dir: error: no such file or directory\n");
        assert_string_equal(res.err, "1 error, 0 warnings\n");
        free_result(&res);

        /* A file named directly is checked strictly, even one a folder scan skips. */
        const char *named[] = {"examples/ci/github-actions.yml", NULL};
        run_validate_argv(root, named, &res);
        assert_int_equal(res.status, 1);
        assert_non_null(strstr(res.out, "examples/ci/github-actions.yml:14:1: error: document "
                                        "has no apiVersion\n"));
        free_result(&res);

        /*
         * stdout and stderr into one file: every diagnostic line ends before
         * the summary starts (the summary goes to stderr, after stdout is
         * flushed), also for a value that holds a newline
         */
        const char *merged[] = {"tests/api/bad/70-control-characters.yaml", NULL};
        run_validate_into(root, merged, true, &res);
        assert_int_equal(res.status, 1);
        run_result alone = {0};
        run_validate_argv(root, merged, &alone);
        _cleanup_free_ char *want = xasprintf("%s%s", alone.out, alone.err);
        assert_string_equal(res.out, want);
        assert_non_null(strstr(res.out, "'+' and '@'\n15 errors, 0 warnings\n"));
        free_result(&alone);
        free_result(&res);

        const char *quiet[] = {"-q", "examples/dialects/improbable.yaml", NULL};
        run_validate_argv(root, quiet, &res);
        assert_int_equal(res.status, 0);
        assert_string_equal(res.out, ""); /* notes and summary left out */
        assert_string_equal(res.err, "");
        free_result(&res);
}

static char *read_expected(const char *path)
{
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, 1 << 20, &data, &len) < 0) {
                print_error("missing expected file %s\n", path);
                fail();
        }
        return data;
}

static void compare(const char *what, const char *expected, const char *got)
{
        if (!streq(expected, got)) {
                print_error("%s: output differs\n--- expected\n%s--- got\n%s---\n", what, expected,
                            got);
                fail();
        }
}

typedef struct corpus_case {
        char *dir;      /* where to run */
        char *arg;      /* what to validate, relative to dir */
        char *expected; /* expected-output file */
        int status;     /* expected exit status */
        bool with_stderr;
} corpus_case;

static void run_case(void **state)
{
        const corpus_case *cc = *state;
        run_result res = {0};
        run_validate(cc->dir, cc->arg, &res);
        _cleanup_free_ char *expected = read_expected(cc->expected);
        strbuf got = STRBUF_INIT;
        sb_append(&got, res.out);
        if (cc->with_stderr) {
                char *save = NULL;
                for (char *l = strtok_r(res.err, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
                        sb_printf(&got, "stderr: %s\n", l);
        }
        if (res.status != cc->status)
                print_error("%s: exit status %d, expected %d\n", cc->arg, res.status, cc->status);
        compare(cc->arg, expected, sb_str(&got));
        assert_int_equal(res.status, cc->status);
        sb_release(&got);
        free(res.out);
        free(res.err);
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool has_suffix(const char *s, const char *suffix)
{
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && streq(s + n - m, suffix);
}

int main(void)
{
        const char *root = getenv("GITCD_SOURCE_ROOT");
        if (!root) {
                fprintf(stderr, "GITCD_SOURCE_ROOT is not set\n");
                return 1;
        }
        _cleanup_free_ char *bad = path_join(root, "tests/api/bad");
        _cleanup_free_ char *golden = path_join(root, "tests/api/golden");

        /* Bad corpus: every NN-what.yaml file and NN-what/ folder. */
        char *names[512];
        size_t n = 0;
        DIR *d = opendir(bad);
        if (!d) {
                fprintf(stderr, "cannot open %s\n", bad);
                return 1;
        }
        struct dirent *de;
        while ((de = readdir(d)) && n < ARRAY_SIZE(names)) {
                if (de->d_name[0] == '.' || has_suffix(de->d_name, ".expected"))
                        continue;
                names[n++] = xstrdup(de->d_name);
        }
        closedir(d);
        qsort(names, n, sizeof(char *), name_cmp);

        static const char *const examples[] = {
            "examples/quickstart/etcd.yaml",
            "examples/full/etcd.yaml",
            "examples/dialects/coreos.yaml",
            "examples/dialects/etcd-io.yaml",
            "examples/dialects/improbable.yaml",
            "examples/dialects/cozystack.yaml",
            "examples/dialects",
            /* the whole folder: the CI workflows in examples/ci are skipped with a note */
            "examples",
        };
        size_t total = n + ARRAY_SIZE(examples) + 1;
        struct CMUnitTest *tests = xcalloc(total, sizeof(*tests));
        corpus_case *cases = xcalloc(total, sizeof(*cases));
        for (size_t i = 0; i < n; i++) {
                char *stem = xstrdup(names[i]);
                if (has_suffix(stem, ".yaml"))
                        stem[strlen(stem) - 5] = '\0';
                cases[i].dir = xstrdup(bad);
                cases[i].arg = names[i];
                cases[i].expected = xasprintf("%s/%s.expected", bad, stem);
                cases[i].status = 1;
                tests[i].name = names[i];
                free(stem);
        }
        for (size_t i = 0; i < ARRAY_SIZE(examples); i++) {
                corpus_case *cc = &cases[n + i];
                char *flat = xstrdup(examples[i]);
                for (char *p = flat; *p; p++)
                        if (*p == '/')
                                *p = '-';
                if (has_suffix(flat, ".yaml"))
                        flat[strlen(flat) - 5] = '\0';
                cc->dir = xstrdup(root);
                cc->arg = xstrdup(examples[i]);
                cc->expected = xasprintf("%s/%s.expected", golden, flat);
                cc->status = 0;
                cc->with_stderr = true;
                tests[n + i].name = cc->arg;
                free(flat);
        }
        for (size_t i = 0; i + 1 < total; i++) {
                tests[i].test_func = run_case;
                tests[i].initial_state = &cases[i];
        }
        tests[total - 1].name = "cli";
        tests[total - 1].test_func = test_cli;
        int failed = _cmocka_run_group_tests("validate-corpus", tests, total, NULL, NULL);
        for (size_t i = 0; i < total; i++) {
                free(cases[i].dir);
                free(cases[i].arg);
                free(cases[i].expected);
        }
        free(cases);
        free(tests);
        return failed;
}
