/*
 * Plan test fixtures (see plan-fixture.h). Everything a test makes lives
 * under one temporary root removed by pf_cleanup(); git runs with a fixed
 * author, committer and date so runs are reproducible.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "sources/source.h"
#include "api/spec.h"
#include "state/state.h"
#include "tests/plan/plan-fixture.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *root;

void pf_init(void)
{
        char tmpl[] = "/tmp/gitcd-plan-test-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        root = xstrdup(tmpl);
        _cleanup_free_ char *home = pf_path("home");
        assert_int_equal(mkdir_p(home, 0700), 0);
        setenv("HOME", home, 1);
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        setenv("GIT_AUTHOR_NAME", "Ada Operator", 1);
        setenv("GIT_AUTHOR_EMAIL", "ada@example.com", 1);
        setenv("GIT_COMMITTER_NAME", "Ada Operator", 1);
        setenv("GIT_COMMITTER_EMAIL", "ada@example.com", 1);
        setenv("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z", 1);
        setenv("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z", 1);
        setenv("NO_COLOR", "1", 1);
        _cleanup_free_ char *tmp = pf_path("tmp");
        assert_int_equal(mkdir_p(tmp, 0700), 0);
        setenv("TMPDIR", tmp, 1);
}

void pf_cleanup(void)
{
        if (root)
                (void)rm_rf(root);
        free(root);
        root = NULL;
}

char *pf_path(const char *rel)
{
        return path_join(root, rel);
}

int pf_sh(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *cmd = xvasprintf(fmt, ap);
        va_end(ap);
        _cleanup_free_ char *full = xasprintf("cd '%s' && { %s\n}", root, cmd);
        int st = system(full);
        return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void pf_write(const char *dir, const char *rel, const char *content)
{
        _cleanup_free_ char *path = path_join(dir, rel);
        _cleanup_free_ char *copy = xstrdup(path);
        char *slash = strrchr(copy, '/');
        *slash = '\0';
        assert_int_equal(mkdir_p(copy, 0755), 0);
        assert_int_equal(write_file_atomic(path, content, strlen(content), 0644), 0);
}

static char *slurp(const char *path)
{
        char *data = NULL;
        size_t len = 0;
        if (read_file(path, 64u << 20, &data, &len) < 0)
                return xstrdup("");
        return data;
}

char *pf_commit(const char *repo, const char *message)
{
        _cleanup_free_ char *out = pf_path("commit.out");
        assert_int_equal(pf_sh("cd '%s' && git add -A && git commit -q -m '%s' && "
                               "git rev-parse HEAD > '%s'",
                               repo, message, out),
                         0);
        char *id = slurp(out);
        id[strcspn(id, "\n")] = '\0';
        return id;
}

void pf_state_from_revision(const char *db_path, const char *src, const char *ref,
                            const char *subpath, bool latched)
{
        _cleanup_free_ char *cache = pf_path("seed-cache");
        source_opts so = {.url_or_path = src, .ref = ref, .subpath = subpath, .cache_dir = cache};
        source *s = NULL;
        char *err = NULL;
        assert_int_equal(source_open(&so, &s, &err), 0);
        source_revision *rev = NULL;
        assert_int_equal(source_fetch(s, &rev), 0);

        cluster_set set = {0};
        diag_list diags = DIAG_LIST_INIT;
        for (size_t i = 0; i < rev->n_files; i++)
                assert_int_equal(spec_load_buffer(rev->files[i].path, rev->files[i].content,
                                                  rev->files[i].len, &set, &diags),
                                 0);
        state_db *db = NULL;
        assert_int_equal(state_open(db_path, STATE_OPEN_READ_WRITE, &db), 0);
        for (size_t i = 0; i < set.n; i++) {
                _cleanup_free_ char *id = etcd_cluster_id(set.items[i]);
                _cleanup_free_ char *hash = spec_hash(set.items[i]);
                json_t *j = spec_to_json(set.items[i]);
                _cleanup_free_ char *json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
                json_decref(j);
                const char *commit = rev->commit_id[0] ? rev->commit_id : NULL;
                assert_true(state_cluster_set_desired(db, id, json, hash, commit, 1000) >= 0);
                if (latched)
                        assert_int_equal(state_cluster_latch(db, id, json, hash, 0, 1000), 0);
        }
        state_close(db);
        diag_list_release(&diags);
        cluster_set_release(&set);
        source_revision_free(rev);
        source_free(s);
        (void)rm_rf(cache);
}

void pf_state_set_phase(const char *db_path, const char *cluster, const char *phase)
{
        state_db *db = NULL;
        assert_int_equal(state_open(db_path, STATE_OPEN_READ_WRITE, &db), 0);
        assert_int_equal(state_cluster_set_phase(db, cluster, phase, 2000), 0);
        state_close(db);
}

static int run_gitcd(char **ret_out, char **ret_err, const char *args)
{
        const char *bin = getenv("GITCD_BIN");
        assert_non_null(bin);
        _cleanup_free_ char *out = pf_path("gitcd.out");
        _cleanup_free_ char *err = pf_path("gitcd.err");
        int st = pf_sh("'%s' %s > '%s' 2> '%s'", bin, args, out, err);
        if (ret_out)
                *ret_out = slurp(out);
        if (ret_err)
                *ret_err = slurp(err);
        return st;
}

int pf_plan(char **ret_out, char **ret_err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *args = xvasprintf(fmt, ap);
        va_end(ap);
        _cleanup_free_ char *cmd = xasprintf("plan %s", args);
        return run_gitcd(ret_out, ret_err, cmd);
}

int pf_gitcd(char **ret_out, char **ret_err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *args = xvasprintf(fmt, ap);
        va_end(ap);
        return run_gitcd(ret_out, ret_err, args);
}
