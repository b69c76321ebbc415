/*
 * cli_daemon_config and cli_state_path (cli/common.c), as the commands
 * beside the daemon use them: which configuration file is read (--config,
 * else the default path when it exists), what an unusable file does (an
 * error with its diagnostics; for the default file only, a warning when
 * --state is given), and the state path's precedence (--state, the file's
 * state, $GITCD_STATE_DIR, ./.gitcd). The default path is a parameter, so
 * nothing here reads or writes /etc.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *dir;

static const char good_text[] = "state: /srv/gitcd/state.db\n"
                                "sources:\n"
                                "  - name: platform\n"
                                "    url: /srv/git/platform.git\n";
static const char bad_text[] = "state: /srv/gitcd/state.db\n"
                               "workers: 0\n"
                               "stat: /x\n";

static char *write_config(const char *name, const char *text)
{
        char *path = path_join(dir, name);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
        return path;
}

/* cli_daemon_config with stderr captured in *ret_err. */
static int load(const char *flag, const char *default_path, bool state_given, ops_config **ret,
                char **ret_err)
{
        _cleanup_free_ char *path = path_join(dir, "stderr");
        fflush(stderr);
        int saved = dup(STDERR_FILENO);
        FILE *f = fopen(path, "w+");
        assert_non_null(f);
        dup2(fileno(f), STDERR_FILENO);
        *ret = (ops_config *)0x1; /* written on every return */
        int k = cli_daemon_config(flag, default_path, state_given, "gitcd test", ret);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        fclose(f);
        size_t len = 0;
        assert_int_equal(read_file(path, 1 << 20, ret_err, &len), 0);
        return k;
}

static int setup(void **state)
{
        (void)state;
        dir = harness_tmpdir("cli-config");
        return dir ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        free(dir);
        return 0;
}

static void test_which_file(void **state)
{
        (void)state;
        _cleanup_free_ char *good = write_config("good.yaml", good_text);
        _cleanup_free_ char *other = write_config("other.yaml", "state: /srv/other/state.db\n"
                                                                "sources:\n"
                                                                "  - name: a\n"
                                                                "    url: /srv/git/a.git\n");
        _cleanup_free_ char *absent = path_join(dir, "absent.yaml");
        ops_config *c = NULL;
        char *err = NULL;

        /* no --config, no default file: nothing read, quietly */
        assert_int_equal(load(NULL, absent, false, &c, &err), 0);
        assert_null(c);
        assert_string_equal(err, "");
        free(err);

        /* the default file when it exists */
        assert_int_equal(load(NULL, good, false, &c, &err), 0);
        assert_non_null(c);
        assert_string_equal(c->state, "/srv/gitcd/state.db");
        assert_string_equal(err, "");
        ops_config_free(c);
        free(err);

        /* --config wins over the default file */
        assert_int_equal(load(other, good, false, &c, &err), 0);
        assert_string_equal(c->state, "/srv/other/state.db");
        ops_config_free(c);
        free(err);

        /* a --config that does not exist is an error, even beside --state */
        assert_int_equal(load(absent, good, true, &c, &err), -ENOENT);
        assert_non_null(strstr(err, absent));
        assert_non_null(strstr(err, "cannot open"));
        free(err);
}

static void test_unusable_files(void **state)
{
        (void)state;
        _cleanup_free_ char *bad = write_config("bad.yaml", bad_text);
        _cleanup_free_ char *where = xasprintf("%s:3:1: error: unknown key 'stat'", bad);
        ops_config *c = NULL;
        char *err = NULL;

        /* named with --config: its diagnostics, every one, and an error */
        assert_int_equal(load(bad, NULL, false, &c, &err), -EINVAL);
        assert_non_null(strstr(err, where));
        assert_non_null(strstr(err, "workers must be"));
        free(err);
        assert_int_equal(load(bad, NULL, true, &c, &err), -EINVAL);
        assert_non_null(strstr(err, where));
        free(err);

        /* the default file: an error that names it and what to give instead */
        assert_int_equal(load(NULL, bad, false, &c, &err), -EINVAL);
        assert_non_null(strstr(err, where));
        assert_non_null(strstr(err, "gitcd test: "));
        assert_non_null(strstr(err, "--state PATH"));
        assert_non_null(strstr(err, "--config FILE"));
        free(err);

        /* ... forgiven beside --state: a warning, and no file */
        assert_int_equal(load(NULL, bad, true, &c, &err), 0);
        assert_null(c);
        assert_non_null(strstr(err, where));
        assert_non_null(strstr(err, "gitcd test: warning: "));
        free(err);

        /* a default file that cannot be read counts as unusable too */
        if (geteuid() != 0) {
                _cleanup_free_ char *locked = write_config("locked.yaml", good_text);
                assert_int_equal(chmod(locked, 0), 0);
                assert_int_equal(load(NULL, locked, false, &c, &err), -EACCES);
                assert_non_null(strstr(err, "--state PATH"));
                free(err);
        }
}

static void test_state_path(void **state)
{
        (void)state;
        ops_config file = {.state = "/srv/gitcd/state.db"};
        ops_config stateless = {0};
        setenv("GITCD_STATE_DIR", "/var/lib/env", 1);
        _cleanup_free_ char *flag = cli_state_path("/flag/state.db", &file);
        assert_string_equal(flag, "/flag/state.db");
        _cleanup_free_ char *from_file = cli_state_path(NULL, &file);
        assert_string_equal(from_file, "/srv/gitcd/state.db");
        _cleanup_free_ char *from_env = cli_state_path(NULL, &stateless);
        assert_string_equal(from_env, "/var/lib/env/state.db");
        _cleanup_free_ char *no_file = cli_state_path(NULL, NULL);
        assert_string_equal(no_file, "/var/lib/env/state.db");
        unsetenv("GITCD_STATE_DIR");
        _cleanup_free_ char *here = cli_state_path(NULL, NULL);
        assert_string_equal(here, "./.gitcd/state.db");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_which_file),
            cmocka_unit_test(test_unusable_files),
            cmocka_unit_test(test_state_path),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
