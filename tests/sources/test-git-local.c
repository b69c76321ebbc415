/*
 * Git sources over file:// and local paths, against repositories built with
 * the real git: reading trees, history (create, change, delete, rename),
 * incremental fetches into the mirror, refs (branch, tags, commit id),
 * subfolders, skipped entries (symlink, oversized file, submodule), plain
 * directories, two processes sharing one cache, and hostile trees (a tree
 * bomb, a flood of symbolic links) that are bounded; and fetches that
 * complete while other threads of the process allocate (the fetch's own
 * process starts clean, whatever lock those threads held).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sources/source.h"
#include "tests/sources/gitfix.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *work;  /* a working repository the tests commit to */
static char *cache; /* the cache directory */
static char *first_commit;

static int group_setup(void **state)
{
        fix_init();
        work = fix_tmpdir("work");
        cache = fix_tmpdir("cache");
        if (fix_sh("git init -q '%s'", work) != 0)
                return -1;
        fix_write(work, "clusters/a.yaml", "name: a\n");
        fix_write(work, "clusters/b.yml", "name: b\n");
        fix_write(work, "clusters/sub/c.yaml", "name: c\n");
        fix_write(work, "README.md", "not yaml\n");
        fix_write(work, ".github/workflow.yml", "hidden: true\n");
        first_commit = fix_commit(work, "first");
        return first_commit ? 0 : -1;
}

static int group_teardown(void **state)
{
        free(work);
        free(cache);
        free(first_commit);
        fix_cleanup();
        return 0;
}

/* Open and fetch; asserts success and returns the revision. */
static source_revision *fetch_ok(const source_opts *o)
{
        _cleanup_(source_freep) source *s = NULL;
        _cleanup_free_ char *err = NULL;
        source_revision *rev = NULL;
        int r;

        r = source_open(o, &s, &err);
        if (r < 0)
                fail_msg("source_open: %s", err);
        r = source_fetch(s, &rev);
        if (r < 0)
                fail_msg("source_fetch: %s", source_last_error(s));
        return rev;
}

/* Open and fetch expecting failure r; returns the message. */
static char *fetch_fails(const source_opts *o, int expected)
{
        _cleanup_(source_freep) source *s = NULL;
        _cleanup_free_ char *err = NULL;
        source_revision *rev = NULL;
        int r;

        r = source_open(o, &s, &err);
        if (r < 0) {
                assert_int_equal(r, expected);
                return TAKE_PTR(err);
        }
        r = source_fetch(s, &rev);
        assert_int_equal(r, expected);
        source_revision_free(rev);
        return xstrdup(source_last_error(s));
}

static const source_file *find_file(const source_revision *r, const char *path)
{
        for (size_t i = 0; i < r->n_files; i++)
                if (streq(r->files[i].path, path))
                        return &r->files[i];
        return NULL;
}

static const source_note *find_note(const source_revision *r, const char *path)
{
        for (size_t i = 0; i < r->n_notes; i++)
                if (streq(r->notes[i].path, path))
                        return &r->notes[i];
        return NULL;
}

static void test_file_url(void **state)
{
        _cleanup_free_ char *url = xasprintf("file://%s", work);
        source_opts o = {.url_or_path = url, .cache_dir = cache};
        _cleanup_(source_revision_freep) source_revision *rev = fetch_ok(&o);

        assert_string_equal(rev->commit_id, first_commit);
        assert_string_equal(rev->repository, url);
        assert_string_equal(rev->ref, "refs/heads/main");
        assert_string_equal(rev->author.name, "Ada Author");
        assert_string_equal(rev->author.email, "ada@example.org");
        assert_string_equal(rev->committer.name, "Cy Committer");
        assert_int_equal(rev->committer.time, 1700000000);
        assert_string_equal(rev->message, "first\n");
        assert_false(rev->signature_checked);
        /* sorted, YAML only, hidden folders ignored */
        assert_int_equal(rev->n_files, 3);
        assert_string_equal(rev->files[0].path, "clusters/a.yaml");
        assert_string_equal(rev->files[1].path, "clusters/b.yml");
        assert_string_equal(rev->files[2].path, "clusters/sub/c.yaml");
        assert_int_equal(rev->files[0].len, strlen("name: a\n"));
        assert_memory_equal(rev->files[0].content, "name: a\n", rev->files[0].len);
        assert_int_equal(rev->n_notes, 0);
        assert_true(rev->received_objects > 0);
}

static void test_local_bare_path(void **state)
{
        _cleanup_free_ char *bare = fix_tmpdir("bare.git");
        source_opts o = {.url_or_path = bare, .cache_dir = cache};
        _cleanup_(source_revision_freep) source_revision *rev = NULL;

        assert_int_equal(fix_sh("git clone -q --bare '%s' '%s'", work, bare), 0);
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, first_commit);
        assert_string_equal(rev->repository, bare);
        assert_int_equal(rev->n_files, 3);
}

static void test_history(void **state)
{
        _cleanup_free_ char *repo = fix_tmpdir("history");
        _cleanup_free_ char *c1 = NULL, *c2 = NULL, *c3 = NULL;
        source_opts o = {.url_or_path = repo, .cache_dir = cache};
        source_revision *rev;

        assert_int_equal(fix_sh("git init -q '%s'", repo), 0);
        fix_write(repo, "x.yaml", "v: 1\n");
        fix_write(repo, "y.yaml", "y: 1\n");
        c1 = fix_commit(repo, "create");
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, c1);
        assert_int_equal(rev->n_files, 2);
        source_revision_free(rev);

        /* change x, delete y */
        fix_write(repo, "x.yaml", "v: 2\n");
        assert_int_equal(fix_sh("cd '%s' && git rm -q y.yaml", repo), 0);
        c2 = fix_commit(repo, "change and delete");
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, c2);
        assert_int_equal(rev->n_files, 1);
        assert_string_equal(rev->files[0].path, "x.yaml");
        assert_string_equal(rev->files[0].content, "v: 2\n");
        assert_false(rev->fetch_skipped);
        source_revision_free(rev);

        /* rename x into a folder */
        assert_int_equal(fix_sh("cd '%s' && mkdir -p d && git mv x.yaml d/z.yaml", repo), 0);
        c3 = fix_commit(repo, "rename");
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, c3);
        assert_int_equal(rev->n_files, 1);
        assert_string_equal(rev->files[0].path, "d/z.yaml");
        assert_string_equal(rev->files[0].content, "v: 2\n");
        source_revision_free(rev);
}

static void test_incremental(void **state)
{
        _cleanup_free_ char *repo = fix_tmpdir("incr");
        _cleanup_free_ char *c1 = NULL, *c2 = NULL;
        source_opts o = {.url_or_path = repo, .cache_dir = cache};
        _cleanup_(source_freep) source *s = NULL;
        source_revision *rev = NULL;
        size_t packs;

        assert_int_equal(fix_sh("git init -q '%s'", repo), 0);
        fix_write(repo, "a.yaml", "a: 1\n");
        c1 = fix_commit(repo, "one");
        assert_int_equal(source_open(&o, &s, NULL), 0);
        assert_int_equal(source_fetch(s, &rev), 0);
        assert_string_equal(rev->commit_id, c1);
        assert_false(rev->fetch_skipped);
        source_revision_free(rev);
        packs = fix_count_packs(source_mirror_path(s));

        /* a poll with nothing new downloads nothing */
        assert_int_equal(source_fetch(s, &rev), 0);
        assert_string_equal(rev->commit_id, c1);
        assert_true(rev->fetch_skipped);
        assert_int_equal(rev->received_objects, 0);
        source_revision_free(rev);
        assert_int_equal(fix_count_packs(source_mirror_path(s)), packs);

        /* a new commit arrives with only the new objects (commit, tree, blob) */
        fix_write(repo, "b.yaml", "b: 1\n");
        c2 = fix_commit(repo, "two");
        assert_int_equal(source_fetch(s, &rev), 0);
        assert_string_equal(rev->commit_id, c2);
        assert_false(rev->fetch_skipped);
        assert_int_equal(rev->received_objects, 3);
        assert_int_equal(rev->n_files, 2);
        source_revision_free(rev);

        /* the mirror was reused, not re-cloned: the first commit is still there */
        assert_int_equal(fix_sh("git --git-dir='%s' cat-file -e %s", source_mirror_path(s), c1), 0);

        /* a mirror folder that is not a repository (an interrupted first fetch) is rebuilt */
        assert_int_equal(fix_sh("rm -rf '%s' && mkdir -p '%s/objects'", source_mirror_path(s),
                                source_mirror_path(s)),
                         0);
        assert_int_equal(source_fetch(s, &rev), 0);
        assert_string_equal(rev->commit_id, c2);
        source_revision_free(rev);
}

static void test_refs(void **state)
{
        _cleanup_free_ char *repo = fix_tmpdir("refs");
        _cleanup_free_ char *c1 = NULL, *c2 = NULL, *c3 = NULL, *msg = NULL;
        source_opts o = {.url_or_path = repo, .cache_dir = cache};
        source_revision *rev;

        assert_int_equal(fix_sh("git init -q '%s'", repo), 0);
        fix_write(repo, "a.yaml", "a: 1\n");
        c1 = fix_commit(repo, "one");
        assert_int_equal(fix_sh("cd '%s' && git tag -a v1 -m 'release 1' && git tag v0 HEAD", repo),
                         0);
        fix_write(repo, "a.yaml", "a: 2\n");
        c2 = fix_commit(repo, "two");
        assert_int_equal(fix_sh("cd '%s' && git checkout -q -b feature", repo), 0);
        fix_write(repo, "f.yaml", "f: 1\n");
        c3 = fix_commit(repo, "feature");
        assert_int_equal(fix_sh("cd '%s' && git checkout -q main", repo), 0);

        rev = fetch_ok(&o); /* default: the remote's HEAD (main) */
        assert_string_equal(rev->commit_id, c2);
        source_revision_free(rev);

        o.ref = "feature";
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, c3);
        assert_string_equal(rev->ref, "refs/heads/feature");
        assert_int_equal(rev->n_files, 2);
        source_revision_free(rev);

        o.ref = "v1"; /* annotated tag */
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, c1);
        assert_string_equal(rev->ref, "refs/tags/v1");
        assert_string_equal(rev->files[0].content, "a: 1\n");
        source_revision_free(rev);

        o.ref = "v0"; /* lightweight tag */
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, c1);
        source_revision_free(rev);

        o.ref = c1; /* commit id, already in the mirror: no network */
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, c1);
        assert_true(rev->fetch_skipped);
        assert_null(rev->ref);
        source_revision_free(rev);

        o.ref = "nope";
        msg = fetch_fails(&o, -ENOENT);
        assert_non_null(strstr(msg, "ref \"nope\" not found"));
        free(msg);

        o.ref = "0123456789012345678901234567890123456789";
        msg = fetch_fails(&o, -ENOENT);
        assert_non_null(strstr(msg, "commit 0123456789012345678901234567890123456789 not found"));
        free(msg);
        msg = NULL;
}

static void test_subpath(void **state)
{
        source_opts o = {.url_or_path = work, .cache_dir = cache, .subpath = "/clusters/sub/"};
        _cleanup_(source_revision_freep) source_revision *rev = fetch_ok(&o);
        char *msg;

        assert_int_equal(rev->n_files, 1);
        assert_string_equal(rev->files[0].path, "clusters/sub/c.yaml");

        o.subpath = "missing";
        msg = fetch_fails(&o, -ENOENT);
        assert_non_null(strstr(msg, "path \"missing\" does not exist in commit"));
        free(msg);

        o.subpath = "README.md";
        msg = fetch_fails(&o, -ENOTDIR);
        assert_non_null(strstr(msg, "is not a folder"));
        free(msg);

        o.subpath = "clusters/../..";
        msg = fetch_fails(&o, -EINVAL);
        assert_non_null(strstr(msg, "must not contain"));
        free(msg);
}

static void test_skipped_entries(void **state)
{
        _cleanup_free_ char *repo = fix_tmpdir("skips");
        _cleanup_free_ char *big = xmalloc(300), *c = NULL;
        source_opts o = {.url_or_path = repo, .cache_dir = cache, .max_file_size = 200};
        _cleanup_(source_revision_freep) source_revision *rev = NULL;
        const source_note *n;
        char *msg;

        memset(big, 'x', 299);
        big[299] = '\0';
        assert_int_equal(fix_sh("git init -q '%s'", repo), 0);
        fix_write(repo, "ok.yaml", "ok: true\n");
        fix_write(repo, "big.yaml", big);
        assert_int_equal(fix_sh("cd '%s' && ln -s /etc/passwd link.yaml", repo), 0);
        c = fix_commit(repo, "odd entries");
        assert_non_null(c);
        /* a submodule entry (gitlink) pointing at some commit */
        assert_int_equal(fix_sh("cd '%s' && git update-index --add --cacheinfo "
                                "160000,%s,vendor/sub && git commit -q -m submodule",
                                repo, first_commit),
                         0);

        rev = fetch_ok(&o);
        assert_int_equal(rev->n_files, 1);
        assert_string_equal(rev->files[0].path, "ok.yaml");
        assert_int_equal(rev->n_notes, 3);
        n = find_note(rev, "big.yaml");
        assert_non_null(n);
        assert_non_null(strstr(n->reason, "larger than 200 bytes"));
        n = find_note(rev, "link.yaml");
        assert_non_null(n);
        assert_string_equal(n->reason, "symbolic link (not followed)");
        n = find_note(rev, "vendor/sub");
        assert_non_null(n);
        assert_string_equal(n->reason, "submodule (not followed)");

        /* folders nested too deep are an error too (a hostile tree must not exhaust the stack) */
        {
                _cleanup_free_ char *deep = fix_tmpdir("deep");
                source_opts d = {.url_or_path = deep, .cache_dir = cache};

                assert_int_equal(fix_sh("git init -q '%s' && cd '%s' && mkdir -p $(printf "
                                        "'d/%%.0s' $(seq 70)) && touch $(printf 'd/%%.0s' "
                                        "$(seq 70))x.yaml",
                                        deep, deep),
                                 0);
                free(fix_commit(deep, "deep"));
                msg = fetch_fails(&d, -EFBIG);
                assert_non_null(strstr(msg, "nested deeper than 64 levels"));
                free(msg);
                d.plain_directory = true;
                msg = fetch_fails(&d, -EFBIG);
                assert_non_null(strstr(msg, "nested deeper than 64 levels"));
                free(msg);
        }

        /* more than max_total_size bytes of YAML altogether is an error, not a partial read */
        o.max_total_size = 5;
        msg = fetch_fails(&o, -EFBIG);
        assert_non_null(strstr(msg, "add up to more than 5 bytes"));
        free(msg);
}

static void test_plain_directory(void **state)
{
        _cleanup_free_ char *dir = fix_tmpdir("plain");
        source_opts o = {.url_or_path = dir};
        source_revision *rev;
        char *msg;

        fix_write(dir, "z.yaml", "z: 1\n");
        fix_write(dir, "a/b.yml", "b: 1\n");
        fix_write(dir, ".hidden/h.yaml", "h: 1\n");
        fix_write(dir, "notes.txt", "x\n");
        assert_int_equal(fix_sh("cd '%s' && ln -s z.yaml l.yaml", dir), 0);
        rev = fetch_ok(&o);
        assert_string_equal(rev->commit_id, "");
        assert_string_equal(rev->repository, dir);
        assert_int_equal(rev->n_files, 2);
        assert_string_equal(rev->files[0].path, "a/b.yml");
        assert_string_equal(rev->files[1].path, "z.yaml");
        assert_non_null(find_note(rev, "l.yaml"));
        source_revision_free(rev);

        /* a checkout read as a plain directory sees uncommitted files */
        fix_write(work, "clusters/new.yaml", "new: 1\n");
        o.url_or_path = work;
        o.plain_directory = true;
        rev = fetch_ok(&o);
        assert_non_null(find_file(rev, "clusters/new.yaml"));
        source_revision_free(rev);
        /* ...while the Git source does not */
        o.plain_directory = false;
        o.cache_dir = cache;
        rev = fetch_ok(&o);
        assert_null(find_file(rev, "clusters/new.yaml"));
        source_revision_free(rev);
        fix_sh("rm -f '%s/clusters/new.yaml'", work);

        /* the same total limit as for Git */
        o.url_or_path = dir;
        o.max_total_size = 8;
        msg = fetch_fails(&o, -EFBIG);
        assert_non_null(strstr(msg, "add up to more than 8 bytes"));
        free(msg);
        o.max_total_size = 0;

        /* a ref makes no sense for a plain directory */
        o.url_or_path = dir;
        o.ref = "main";
        msg = fetch_fails(&o, -EINVAL);
        assert_non_null(strstr(msg, "a ref needs a Git repository"));
        free(msg);
}

static void test_bad_options(void **state)
{
        source_opts o = {.url_or_path = "/nonexistent/place"};
        char *msg = fetch_fails(&o, -ENOENT);

        assert_non_null(strstr(msg, "/nonexistent/place"));
        free(msg);

        o.url_or_path = work; /* a repository without a cache directory */
        msg = fetch_fails(&o, -EINVAL);
        assert_non_null(strstr(msg, "cache directory"));
        free(msg);

        o.url_or_path = "ftp://example.org/repo.git";
        msg = fetch_fails(&o, -EINVAL);
        assert_non_null(strstr(msg, "unsupported URL scheme"));
        free(msg);

        o.url_or_path = "ssh://git@example.org/repo.git";
        o.cache_dir = cache;
        o.ssh_key_path = "/nonexistent/key";
        msg = fetch_fails(&o, -EINVAL);
        assert_non_null(strstr(msg, "known_hosts"));
        free(msg);

        o.url_or_path = "http://user:secret@example.org/repo.git";
        msg = fetch_fails(&o, -EINVAL);
        assert_non_null(strstr(msg, "plain http://"));
        assert_null(strstr(msg, "secret"));
        free(msg);
}

/* Two processes fetching into one cache at once both succeed (the lock serialises them). */
static void test_shared_cache(void **state)
{
        _cleanup_free_ char *shared = fix_tmpdir("shared-cache");
        source_opts o = {.url_or_path = work, .cache_dir = shared};
        pid_t pids[2];

        for (size_t i = 0; i < 2; i++) {
                pids[i] = fork();
                assert_true(pids[i] >= 0);
                if (pids[i] == 0) {
                        source *s = NULL;
                        source_revision *rev = NULL;
                        int ok = source_open(&o, &s, NULL) == 0 && source_fetch(s, &rev) == 0 &&
                                 streq(rev->commit_id, first_commit);

                        source_revision_free(rev);
                        source_free(s);
                        _exit(ok ? 0 : 1);
                }
        }
        for (size_t i = 0; i < 2; i++) {
                int status;

                assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                assert_true(WIFEXITED(status));
                assert_int_equal(WEXITSTATUS(status), 0);
        }
}

/* Make branch name point at a commit of tree (built with git mktree) in work. */
static void branch_with_tree(const char *name, const char *tree)
{
        _cleanup_free_ char *id =
            fix_sh_out("cd '%s' && git commit-tree %s -m '%s'", work, tree, name);

        assert_non_null(id);
        assert_int_equal(fix_sh("cd '%s' && git branch -f '%s' %s", work, name, id), 0);
}

/*
 * A tree bomb: 64 levels of folders, each naming the next twice (2^64 paths
 * in a repository of 65 small trees). Refused quickly with a clear error.
 */
static void test_tree_bomb(void **state)
{
        _cleanup_free_ char *blob = NULL, *tree = NULL, *msg = NULL;
        source_opts o = {.url_or_path = work, .cache_dir = cache, .ref = "bomb"};

        blob = fix_sh_out("cd '%s' && printf 'x: 1\n' | git hash-object -w --stdin", work);
        tree =
            fix_sh_out("cd '%s' && printf '100644 blob %s\tleaf.yaml\n' | git mktree", work, blob);
        for (int i = 0; i < 64; i++) {
                char *next = fix_sh_out("cd '%s' && printf '040000 tree %s\ta\n040000 tree "
                                        "%s\tb\n' | git mktree",
                                        work, tree, tree);

                free(tree);
                tree = next;
        }
        branch_with_tree("bomb", tree);
        msg = fetch_fails(&o, -EFBIG);
        if (!strstr(msg, "refusing to read the tree: more than 10000 folders repeat a folder "
                         "already read"))
                fail_msg("unexpected message: %s", msg);
}

/*
 * A flood of symbolic links named *.yaml: each would be a note; only the
 * first SOURCE_MAX_NOTES are listed, then one note sums up the rest.
 */
static void test_symlink_flood(void **state)
{
        _cleanup_free_ char *tree = NULL;
        _cleanup_(source_revision_freep) source_revision *rev = NULL;
        source_opts o = {.url_or_path = work, .cache_dir = cache, .ref = "links"};
        const unsigned n = SOURCE_MAX_NOTES + 500;

        tree = fix_sh_out("cd '%s' && t=$(printf target | git hash-object -w --stdin) && "
                          "seq -w 1 %u | sed \"s/^/120000 blob $t\t/; s/$/.yaml/\" | "
                          "git mktree",
                          work, n);
        assert_non_null(tree);
        branch_with_tree("links", tree);
        rev = fetch_ok(&o);
        assert_int_equal(rev->n_files, 0);
        assert_int_equal(rev->n_notes, SOURCE_MAX_NOTES + 1);
        assert_string_equal(rev->notes[0].reason, "symbolic link (not followed)");
        assert_string_equal(rev->notes[SOURCE_MAX_NOTES].reason,
                            "500 more skipped entries (only the first 1000 are listed)");
}

/* Other threads of the daemon at work: allocating. */
static atomic_bool busy_stop;

static void *busy_thread(void *arg)
{
        (void)arg;
        unsigned n = 1;
        while (!atomic_load(&busy_stop)) {
                /* many size classes, kept a while: the allocator's shared lists are taken often */
                void *p[64];
                for (size_t i = 0; i < ARRAY_SIZE(p); i++)
                        p[i] = xmalloc((n++ * 7919u) % 65536u + 1u);
                for (size_t i = 0; i < ARRAY_SIZE(p); i++)
                        free(p[i]);
        }
        return NULL;
}

/*
 * A fetch started while other threads allocate: the fetch runs in a
 * process of its own, which must not inherit a lock another thread held
 * at that moment (an allocator's, a library's). Each fetch below has a
 * budget of 60 s; a fetch of a local repository takes milliseconds, so
 * one that spends it hung.
 */
static void test_fetch_beside_threads(void **state)
{
        _cleanup_free_ char *url = xasprintf("file://%s", work);
        source_opts o = {.url_or_path = url, .cache_dir = cache, .fetch_timeout_s = 60};
        _cleanup_(source_freep) source *s = NULL;
        pthread_t t[3];

        assert_int_equal(source_open(&o, &s, NULL), 0);
        atomic_store(&busy_stop, false);
        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                assert_int_equal(pthread_create(&t[i], NULL, busy_thread, NULL), 0);
        for (int i = 0; i < 40; i++) {
                source_revision *rev = NULL;
                int r = source_fetch(s, &rev);
                if (r < 0)
                        fail_msg("fetch %d: %s", i, source_last_error(s));
                assert_string_equal(rev->commit_id, first_commit);
                source_revision_free(rev);
        }
        atomic_store(&busy_stop, true);
        for (size_t i = 0; i < ARRAY_SIZE(t); i++)
                assert_int_equal(pthread_join(t[i], NULL), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_file_url),
            cmocka_unit_test(test_local_bare_path),
            cmocka_unit_test(test_history),
            cmocka_unit_test(test_incremental),
            cmocka_unit_test(test_refs),
            cmocka_unit_test(test_subpath),
            cmocka_unit_test(test_skipped_entries),
            cmocka_unit_test(test_plain_directory),
            cmocka_unit_test(test_bad_options),
            cmocka_unit_test(test_shared_cache),
            cmocka_unit_test(test_tree_bomb),
            cmocka_unit_test(test_symlink_flood),
            cmocka_unit_test(test_fetch_beside_threads),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
