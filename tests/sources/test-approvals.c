/*
 * Approvals (source_signers()): the distinct trusted signers of the commits
 * back from the head while some files stayed byte-identical, over a real
 * repository whose commits the real git signs with keys the real
 * ssh-keygen made. A signer with two keys counts once, an untrusted
 * signature or an unsigned commit not at all; an edit of the file stops
 * the count (an edit of another file does not); the commit the accepted
 * spec came from and everything older never count; the walk is bounded;
 * a removal (no paths) counts while the whole source stayed as it is; a
 * plain directory has no signers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sources/source.h"
#include "tests/sources/gitfix.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static char *repo, *cache, *keys, *allowed;
static unsigned stamp;

static char *pubkey(const char *name)
{
        return fix_sh_out("cat '%s/%s.pub'", keys, name);
}

static int group_setup(void **state)
{
        (void)state;
        fix_init();
        repo = fix_tmpdir("approved");
        cache = fix_tmpdir("cache");
        keys = fix_tmpdir("keys");
        allowed = xasprintf("%s/allowed_signers", keys);
        static const char *const names[] = {"alice", "alice2", "bob", "mallory"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (fix_sh("ssh-keygen -q -t ed25519 -N '' -C %s -f '%s/%s'", names[i], keys,
                           names[i]) != 0)
                        return -1;
        _cleanup_free_ char *a = pubkey("alice"), *a2 = pubkey("alice2"), *b = pubkey("bob");
        /* alice has two keys on two lines: one signer */
        _cleanup_free_ char *text = xasprintf("alice@example.org %s\nalice@example.org %s\n"
                                              "bob@example.org %s\n",
                                              a, a2, b);
        fix_write(keys, "allowed_signers", text);
        return fix_sh("git init -q -b main '%s'", repo) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
        (void)state;
        free(repo);
        free(cache);
        free(keys);
        free(allowed);
        fix_cleanup();
        return 0;
}

/* Commit what is in the folder (or nothing), signed with key (NULL: unsigned); its id. */
static char *commit(const char *key, const char *message)
{
        _cleanup_free_ char *date = xasprintf("@%u +0000", 1700000000u + 60u * stamp++);
        setenv("GIT_AUTHOR_DATE", date, 1);
        setenv("GIT_COMMITTER_DATE", date, 1);
        int k = key ? fix_sh("cd '%s' && git add -A && git -c gpg.format=ssh -c "
                             "user.signingkey='%s/%s' commit -q --allow-empty -S -m '%s'",
                             repo, keys, key, message)
                    : fix_sh("cd '%s' && git add -A && git commit -q --allow-empty -m '%s'", repo,
                             message);
        assert_int_equal(k, 0);
        return fix_sh_out("cd '%s' && git rev-parse HEAD", repo);
}

typedef struct fetched {
        source *src;
        source_revision *rev;
} fetched;

/* The head, fetched with signatures verified (every head here is signed by a trusted key). */
static fetched fetch_head(void)
{
        source_opts o = {.url_or_path = repo,
                         .cache_dir = cache,
                         .verify_signatures = true,
                         .allowed_signers_path = allowed,
                         .allow_rollback = true};
        fetched f = {0};
        assert_int_equal(source_open(&o, &f.src, NULL), 0);
        int k = source_fetch(f.src, &f.rev);
        if (k < 0)
                fail_msg("fetch: %s", source_last_error(f.src));
        return f;
}

static void fetched_release(fetched *f)
{
        source_revision_free(f->rev);
        source_free(f->src);
}

/* The signers of paths (NULL: the whole source) since `since`, as "a,b". */
static char *signers(fetched *f, const char *path, const char *since, unsigned max,
                     source_signer_list *ret)
{
        const char *paths[] = {path};
        int k = source_signers(f->src, f->rev, path ? paths : NULL, path ? 1 : 0, since, max, ret);
        if (k < 0)
                fail_msg("signers: %s", source_last_error(f->src));
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < ret->n; i++)
                sb_printf(&sb, "%s%s", i ? "," : "", ret->names[i]);
        return sb_detach(&sb);
}

static void test_signers(void **state)
{
        (void)state;
        fix_write(repo, "clusters/a.yaml", "a: 1\n");
        fix_write(repo, "clusters/b.yaml", "b: 1\n");
        _cleanup_free_ char *c1 = commit("alice", "add a and b");
        fix_write(repo, "clusters/a.yaml", "a: 2\n");
        _cleanup_free_ char *c2 = commit("alice", "change a");
        _cleanup_free_ char *c3 = commit("bob", "approve");
        _cleanup_free_ char *c4 = commit("mallory", "approve too");
        _cleanup_free_ char *c5 = commit(NULL, "unsigned");
        _cleanup_free_ char *c6 = commit("alice2", "approve again");
        assert_non_null(c6);

        fetched f = fetch_head();
        source_signer_list l = {0};
        /* a.yaml as at c2: c6 (alice by her second key), c5, c4 (not trusted), c3 (bob), c2 */
        char *who = signers(&f, "clusters/a.yaml", NULL, 0, &l);
        assert_string_equal(who, "alice@example.org,bob@example.org");
        assert_int_equal(l.walked, 5);
        assert_false(l.bounded);
        source_signer_list_release(&l);
        free(who);

        /* b.yaml unchanged since c1: back to the first commit, the same two */
        who = signers(&f, "clusters/b.yaml", NULL, 0, &l);
        assert_string_equal(who, "alice@example.org,bob@example.org");
        assert_int_equal(l.walked, 6);
        source_signer_list_release(&l);
        free(who);

        /* what the accepted spec's commit signed was accepted already: c3 and older do not count */
        who = signers(&f, "clusters/b.yaml", c3, 0, &l);
        assert_string_equal(who, "alice@example.org");
        assert_int_equal(l.walked, 3);
        source_signer_list_release(&l);
        free(who);

        /* bounded: the two newest commits only */
        who = signers(&f, "clusters/b.yaml", NULL, 2, &l);
        assert_string_equal(who, "alice@example.org");
        assert_int_equal(l.walked, 2);
        assert_true(l.bounded);
        source_signer_list_release(&l);
        free(who);

        /* a file absent at the head counts while it stays absent */
        who = signers(&f, "clusters/gone.yaml", NULL, 0, &l);
        assert_string_equal(who, "alice@example.org,bob@example.org");
        source_signer_list_release(&l);
        free(who);

        /* the whole source: as for a.yaml (c2 was the last change of the tree) */
        who = signers(&f, NULL, NULL, 0, &l);
        assert_string_equal(who, "alice@example.org,bob@example.org");
        assert_int_equal(l.walked, 5);
        source_signer_list_release(&l);
        free(who);
        fetched_release(&f);

        /* bob edits b.yaml: the count starts again for b, not for a */
        fix_write(repo, "clusters/b.yaml", "b: 2\n");
        _cleanup_free_ char *c7 = commit("bob", "change b");
        f = fetch_head();
        who = signers(&f, "clusters/b.yaml", NULL, 0, &l);
        assert_string_equal(who, "bob@example.org");
        assert_int_equal(l.walked, 1);
        source_signer_list_release(&l);
        free(who);
        who = signers(&f, "clusters/a.yaml", NULL, 0, &l);
        assert_string_equal(who, "bob@example.org,alice@example.org");
        source_signer_list_release(&l);
        free(who);
        /* ... and for the whole source */
        who = signers(&f, NULL, NULL, 0, &l);
        assert_string_equal(who, "bob@example.org");
        source_signer_list_release(&l);
        free(who);
        fetched_release(&f);
}

static void test_without_history(void **state)
{
        (void)state;
        /* a plain directory has no commits: no signers, no error */
        _cleanup_free_ char *dir = fix_tmpdir("plain");
        fix_write(dir, "a.yaml", "a: 1\n");
        source_opts o = {.url_or_path = dir};
        _cleanup_(source_freep) source *s = NULL;
        assert_int_equal(source_open(&o, &s, NULL), 0);
        _cleanup_(source_revision_freep) source_revision *rev = NULL;
        assert_int_equal(source_fetch(s, &rev), 0);
        source_signer_list l = {.n = 99};
        const char *paths[] = {"a.yaml"};
        assert_int_equal(source_signers(s, rev, paths, 1, NULL, 0, &l), 0);
        assert_int_equal(l.n, 0);
        source_signer_list_release(&l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_signers),
            cmocka_unit_test(test_without_history),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
