/*
 * Signed commits and tags: commits signed by the real git with SSH keys of
 * every supported type (ed25519, ECDSA nistp256/384/521, RSA) made by the
 * real ssh-keygen, by an untrusted key, by a key restricted to another
 * namespace or expired, unsigned and tampered ones. Only a valid signature
 * by a trusted key passes, and every verdict is cross-checked with
 * `git verify-commit` / `git verify-tag` using the same allowed_signers file.
 * The signature is judged before the tree is read; a rollback to an older
 * signed commit and a tag ref pointing at another tag's signed object are
 * refused; a refused head is not judged again at every fetch.
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
#include "util/xalloc.h"

static char *repo, *cache, *keys, *allowed;

static const char *const trusted_keys[][2] = {
    /* file name, ssh-keygen arguments */
    {"ed25519", "-t ed25519"},       {"ecdsa256", "-t ecdsa -b 256"},
    {"ecdsa384", "-t ecdsa -b 384"}, {"ecdsa521", "-t ecdsa -b 521"},
    {"rsa", "-t rsa -b 2048"},
};

static char *pubkey(const char *name)
{
        return fix_sh_out("cat '%s/%s.pub'", keys, name);
}

static int group_setup(void **state)
{
        fix_init();
        repo = fix_tmpdir("signed");
        cache = fix_tmpdir("cache");
        keys = fix_tmpdir("keys");
        allowed = xasprintf("%s/allowed_signers", keys);
        for (size_t i = 0; i < ARRAY_SIZE(trusted_keys); i++)
                if (fix_sh("ssh-keygen -q %s -N '' -C %s -f '%s/%s'", trusted_keys[i][1],
                           trusted_keys[i][0], keys, trusted_keys[i][0]) != 0)
                        return -1;
        if (fix_sh("ssh-keygen -q -t ed25519 -N '' -f '%s/untrusted'", keys) != 0 ||
            fix_sh("ssh-keygen -q -t ed25519 -N '' -f '%s/filesonly'", keys) != 0 ||
            fix_sh("ssh-keygen -q -t ed25519 -N '' -f '%s/expired'", keys) != 0 ||
            fix_sh("ssh-keygen -q -t ed25519 -N '' -f '%s/future'", keys) != 0)
                return -1;
        /* allowed_signers: principals [options] key */
        {
                _cleanup_free_ char *a = pubkey("ed25519"), *b = pubkey("ecdsa256");
                _cleanup_free_ char *c = pubkey("ecdsa384"), *d = pubkey("ecdsa521");
                _cleanup_free_ char *e = pubkey("rsa"), *f = pubkey("filesonly");
                _cleanup_free_ char *g = pubkey("expired"), *h = pubkey("future");
                _cleanup_free_ char *text = NULL;

                text = xasprintf("# trusted signers\n"
                                 "ada@example.org,release@example.org %s\n"
                                 "ecdsa@example.org namespaces=\"git,file\" %s\n"
                                 "\n"
                                 "ecdsa384@example.org %s\n"
                                 "ecdsa521@example.org %s\n"
                                 "rsa@example.org %s\n"
                                 "files@example.org namespaces=\"file\" %s\n"
                                 "old@example.org valid-before=\"20200101\" %s\n"
                                 "new@example.org valid-after=\"20300101\" %s\n",
                                 a, b, c, d, e, f, g, h);
                fix_write(keys, "allowed_signers", text);
        }
        if (fix_sh("git init -q '%s'", repo) != 0)
                return -1;
        return 0;
}

static int group_teardown(void **state)
{
        free(repo);
        free(cache);
        free(keys);
        free(allowed);
        fix_cleanup();
        return 0;
}

/* Commit a change signed with key (NULL: unsigned); returns the commit id. */
static char *signed_commit(const char *key, const char *message)
{
        static unsigned n;
        _cleanup_free_ char *name = xasprintf("f%u.yaml", n++);

        fix_write(repo, name, "x: 1\n");
        if (!key)
                return fix_commit(repo, message);
        if (fix_sh("cd '%s' && git add -A && git -c gpg.format=ssh -c user.signingkey='%s/%s' "
                   "commit -q -S -m '%s'",
                   repo, keys, key, message) != 0)
                return NULL;
        return fix_sh_out("cd '%s' && git rev-parse HEAD", repo);
}

static bool git_verifies(const char *what, const char *id)
{
        return fix_sh_quiet("cd '%s' && git -c gpg.ssh.allowedSignersFile='%s' verify-%s %s "
                            ">/dev/null 2>&1",
                            repo, allowed, what, id) == 0;
}

/* Fetch the revision at ref with verification on; returns source_fetch's result. */
static int fetch_verified(const char *ref, source_revision **ret, char **ret_msg)
{
        source_opts o = {
            .url_or_path = repo,
            .cache_dir = cache,
            .ref = ref,
            .verify_signatures = true,
            .allowed_signers_path = allowed,
        };
        _cleanup_(source_freep) source *s = NULL;
        int r;

        r = source_open(&o, &s, NULL);
        assert_int_equal(r, 0);
        r = source_fetch(s, ret);
        *ret_msg = xstrdup(source_last_error(s));
        return r;
}

static void test_trusted_key_types(void **state)
{
        for (size_t i = 0; i < ARRAY_SIZE(trusted_keys); i++) {
                _cleanup_free_ char *id = signed_commit(trusted_keys[i][0], "signed");
                _cleanup_free_ char *msg = NULL, *fp = NULL;
                _cleanup_(source_revision_freep) source_revision *rev = NULL;
                int r;

                assert_non_null(id);
                r = fetch_verified(id, &rev, &msg);
                if (r != 0)
                        fail_msg("%s: %s", trusted_keys[i][0], msg);
                assert_true(rev->signature_checked);
                assert_true(rev->signature_verified);
                fp = fix_sh_out("ssh-keygen -lf '%s/%s.pub' | cut -d' ' -f2", keys,
                                trusted_keys[i][0]);
                assert_string_equal(rev->signer_fingerprint, fp);
                assert_non_null(rev->signer_identity);
                assert_non_null(strstr(rev->signature_reason, "good"));
                assert_true(git_verifies("commit", id));
        }
}

static void test_principals(void **state)
{
        _cleanup_free_ char *id = signed_commit("ed25519", "by ada");
        _cleanup_free_ char *msg = NULL;
        _cleanup_(source_revision_freep) source_revision *rev = NULL;

        assert_int_equal(fetch_verified(id, &rev, &msg), 0);
        assert_string_equal(rev->signer_identity, "ada@example.org,release@example.org");
}

/* A refused commit: -EPERM, the revision still filled, git agrees. */
static void expect_refused(const char *id, const char *reason_part)
{
        _cleanup_free_ char *msg = NULL;
        _cleanup_(source_revision_freep) source_revision *rev = NULL;

        assert_int_equal(fetch_verified(id, &rev, &msg), -EPERM);
        assert_non_null(rev);
        assert_string_equal(rev->commit_id, id);
        assert_int_equal(rev->n_files, 0); /* nothing is read from a refused commit */
        assert_non_null(rev->refusal);
        assert_true(rev->signature_checked);
        assert_false(rev->signature_verified);
        if (!strstr(rev->signature_reason, reason_part))
                fail_msg("reason \"%s\" lacks \"%s\"", rev->signature_reason, reason_part);
        assert_non_null(strstr(msg, "is not signed by a trusted key"));
        assert_non_null(strstr(msg, reason_part));
        assert_false(git_verifies("commit", id));
}

static void test_untrusted_key(void **state)
{
        _cleanup_free_ char *id = signed_commit("untrusted", "untrusted");
        _cleanup_free_ char *fp =
            fix_sh_out("ssh-keygen -lf '%s/untrusted.pub' | cut -d' ' -f2", keys);

        expect_refused(id, "which is not in the allowed signers");
        expect_refused(id, fp);
}

static void test_unsigned(void **state)
{
        _cleanup_free_ char *id = signed_commit(NULL, "unsigned");

        expect_refused(id, "the commit is not signed");
}

static void test_namespace_and_expiry(void **state)
{
        _cleanup_free_ char *a = signed_commit("filesonly", "wrong namespace");
        _cleanup_free_ char *b = signed_commit("expired", "expired key");
        _cleanup_free_ char *c = signed_commit("future", "not yet valid key");

        expect_refused(a, "namespace");
        expect_refused(b, "only valid before 20200101");
        expect_refused(c, "only valid after 20300101");
}

static void test_tampered(void **state)
{
        _cleanup_free_ char *id = signed_commit("ed25519", "original message");
        _cleanup_free_ char *forged = NULL;

        /* same signature header, different content */
        forged = fix_sh_out("cd '%s' && git cat-file commit %s | sed 's/original message/forged "
                            "message/' | git hash-object -t commit -w --stdin",
                            repo, id);
        assert_non_null(forged);
        assert_int_equal(strlen(forged), 40);
        assert_int_equal(fix_sh("cd '%s' && git branch forged %s", repo, forged), 0);
        expect_refused(forged, "invalid ssh-ed25519 signature");
}

static void test_signed_tag(void **state)
{
        _cleanup_free_ char *signed_id = signed_commit("ecdsa521", "signed, tagged lightly");
        _cleanup_free_ char *id = signed_commit(NULL, "tagged but unsigned commit");
        _cleanup_free_ char *msg = NULL;
        source_revision *rev = NULL;

        assert_int_equal(fix_sh("cd '%s' && git -c gpg.format=ssh -c user.signingkey='%s/rsa' "
                                "tag -s v1 -m 'release 1' && git tag -a v2 -m unsigned && "
                                "git -c gpg.format=ssh -c user.signingkey='%s/untrusted' "
                                "tag -s v3 -m untrusted",
                                repo, keys, keys),
                         0);
        /* the annotated tag's signature is what counts for a tag ref */
        assert_int_equal(fetch_verified("v1", &rev, &msg), 0);
        assert_string_equal(rev->commit_id, id);
        assert_true(rev->signature_verified);
        assert_string_equal(rev->signer_identity, "rsa@example.org");
        assert_true(git_verifies("tag", "v1"));
        source_revision_free(rev);
        free(msg);

        /* a lightweight tag has no signature of its own: the commit's counts */
        assert_int_equal(fix_sh("cd '%s' && git tag light %s", repo, signed_id), 0);
        assert_int_equal(fetch_verified("light", &rev, &msg), 0);
        assert_string_equal(rev->commit_id, signed_id);
        assert_true(rev->signature_verified);
        source_revision_free(rev);
        free(msg);

        assert_int_equal(fetch_verified("v2", &rev, &msg), -EPERM);
        assert_non_null(strstr(rev->signature_reason, "the tag is not signed"));
        assert_false(git_verifies("tag", "v2"));
        source_revision_free(rev);
        free(msg);

        assert_int_equal(fetch_verified("v3", &rev, &msg), -EPERM);
        assert_non_null(strstr(rev->signature_reason, "not in the allowed signers"));
        assert_false(git_verifies("tag", "v3"));
        source_revision_free(rev);
        free(msg);
        msg = NULL;
}

/*
 * The signature is checked before the tree is read: an unsigned commit whose
 * tree would be refused for its size (or would take the walk forever) is
 * refused for its signature, without reading the tree.
 */
static void test_signature_before_tree(void **state)
{
        _cleanup_free_ char *blob = NULL, *tree = NULL, *id = NULL, *msg = NULL;
        _cleanup_(source_revision_freep) source_revision *rev = NULL;

        /* 64 levels of folders, each naming the next twice: 2^64 paths */
        blob = fix_sh_out("cd '%s' && printf 'x: 1\n' | git hash-object -w --stdin", repo);
        tree =
            fix_sh_out("cd '%s' && printf '100644 blob %s\tleaf.yaml\n' | git mktree", repo, blob);
        for (int i = 0; i < 64; i++) {
                char *next = fix_sh_out("cd '%s' && printf '040000 tree %s\ta\n040000 tree "
                                        "%s\tb\n' | git mktree",
                                        repo, tree, tree);

                free(tree);
                tree = next;
        }
        id = fix_sh_out("cd '%s' && git commit-tree %s -m bomb", repo, tree);
        assert_int_equal(fix_sh("cd '%s' && git branch bomb %s", repo, id), 0);

        assert_int_equal(fetch_verified("bomb", &rev, &msg), -EPERM);
        assert_string_equal(rev->commit_id, id);
        assert_int_equal(rev->n_files, 0);
        assert_non_null(strstr(rev->signature_reason, "the commit is not signed"));
}

/* Fetch ref with verification through a fresh source (as a new process would). */
static int fetch_opts(const char *ref, bool allow_rollback, bool mark, source_revision **ret,
                      char **ret_msg)
{
        source_opts o = {
            .url_or_path = repo,
            .cache_dir = cache,
            .ref = ref,
            .verify_signatures = true,
            .allowed_signers_path = allowed,
            .allow_rollback = allow_rollback,
        };
        _cleanup_(source_freep) source *s = NULL;
        int r;

        assert_int_equal(source_open(&o, &s, NULL), 0);
        r = source_fetch(s, ret);
        *ret_msg = xstrdup(source_last_error(s));
        if (r == 0 && mark)
                assert_int_equal(source_mark_applied(s, *ret), 0);
        return r;
}

/*
 * Rollback protection: once a commit of a ref is applied, an older signed
 * commit (a valid signature, replayed) is refused as the ref's head, also
 * by a new process; --allow-rollback accepts it; moving forward again is
 * accepted.
 */
static void test_rollback(void **state)
{
        _cleanup_free_ char *old = NULL, *cur = NULL, *next = NULL;
        source_revision *rev = NULL;
        char *msg = NULL;

        assert_int_equal(fix_sh("cd '%s' && git checkout -q -b release", repo), 0);
        old = signed_commit("ed25519", "release 1");
        cur = signed_commit("ed25519", "release 2");
        assert_int_equal(fetch_opts("release", false, true, &rev, &msg), 0);
        assert_string_equal(rev->commit_id, cur);
        source_revision_free(rev);
        free(msg);

        /* someone with push access resets the branch to the older signed commit */
        assert_int_equal(fix_sh("cd '%s' && git reset -q --hard %s", repo, old), 0);
        assert_int_equal(fetch_opts("release", false, true, &rev, &msg), -EPERM);
        assert_string_equal(rev->commit_id, old);
        assert_true(rev->signature_verified); /* the signature is fine: the history is not */
        assert_int_equal(rev->n_files, 0);
        if (!strstr(rev->refusal, "does not descend from") || !strstr(rev->refusal, cur) ||
            !strstr(rev->refusal, "--allow-rollback"))
                fail_msg("unexpected refusal: %s", rev->refusal);
        assert_non_null(strstr(msg, "refused"));
        source_revision_free(rev);
        free(msg);

        /*
         * A daemon polling the same source repeats its refusal until the
         * operator accepts the rollback with another gitcd: then it judges
         * the head again and takes it.
         */
        {
                source_opts o = {
                    .url_or_path = repo,
                    .cache_dir = cache,
                    .ref = "release",
                    .verify_signatures = true,
                    .allowed_signers_path = allowed,
                };
                _cleanup_(source_freep) source *daemon = NULL;

                assert_int_equal(source_open(&o, &daemon, NULL), 0);
                assert_int_equal(source_fetch(daemon, &rev), -EPERM);
                source_revision_free(rev);
                assert_int_equal(source_fetch(daemon, &rev), -EPERM);
                assert_true(rev->refusal_repeated);
                source_revision_free(rev);

                /* the operator accepts it explicitly */
                assert_int_equal(fetch_opts("release", true, true, &rev, &msg), 0);
                assert_string_equal(rev->commit_id, old);
                assert_true(rev->n_files > 0);
                source_revision_free(rev);
                free(msg);

                assert_int_equal(source_fetch(daemon, &rev), 0);
                assert_string_equal(rev->commit_id, old);
                source_revision_free(rev);
        }

        /* accepting it again changes nothing */
        assert_int_equal(fetch_opts("release", true, true, &rev, &msg), 0);
        assert_string_equal(rev->commit_id, old);
        assert_true(rev->n_files > 0);
        source_revision_free(rev);
        free(msg);

        /* from there, moving forward is accepted again */
        next = signed_commit("ed25519", "release 3");
        assert_int_equal(fetch_opts("release", false, true, &rev, &msg), 0);
        assert_string_equal(rev->commit_id, next);
        source_revision_free(rev);
        free(msg);
        assert_int_equal(fix_sh("cd '%s' && git checkout -q -", repo), 0);
}

/* A tag ref pointing at another tag's signed object is refused. */
static void test_tag_name_mismatch(void **state)
{
        _cleanup_free_ char *id = signed_commit(NULL, "for a moved tag");
        source_revision *rev = NULL;
        char *msg = NULL;

        assert_int_equal(fix_sh("cd '%s' && git -c gpg.format=ssh -c user.signingkey='%s/ed25519' "
                                "tag -s r1 -m 'release r1' && "
                                "git update-ref refs/tags/r9 $(git rev-parse r1)",
                                repo, keys),
                         0);
        assert_int_equal(fetch_verified("r1", &rev, &msg), 0);
        source_revision_free(rev);
        free(msg);

        assert_int_equal(fetch_verified("r9", &rev, &msg), -EPERM);
        if (!strstr(rev->refusal, "named \"r1\", not \"r9\""))
                fail_msg("unexpected refusal: %s", rev->refusal);
        assert_false(rev->signature_verified);
        assert_int_equal(rev->n_files, 0);
        source_revision_free(rev);
        free(msg);

        /*
         * The same source, polling: once r9 is a signed tag of its own (on the
         * same commit), it is judged again and accepted; the refusal was of
         * the object the ref named, not of the commit.
         */
        {
                source_opts o = {
                    .url_or_path = repo,
                    .cache_dir = cache,
                    .ref = "r9",
                    .verify_signatures = true,
                    .allowed_signers_path = allowed,
                };
                _cleanup_(source_freep) source *s = NULL;

                assert_int_equal(source_open(&o, &s, NULL), 0);
                assert_int_equal(source_fetch(s, &rev), -EPERM);
                source_revision_free(rev);
                assert_int_equal(source_fetch(s, &rev), -EPERM);
                assert_true(rev->refusal_repeated);
                source_revision_free(rev);
                assert_int_equal(fix_sh("cd '%s' && git tag -d r9 >/dev/null && "
                                        "git -c gpg.format=ssh -c user.signingkey='%s/ed25519' "
                                        "tag -s r9 -m 'release r9' r1^{commit}",
                                        repo, keys),
                                 0);
                assert_int_equal(source_fetch(s, &rev), 0);
                assert_string_equal(rev->commit_id, id);
                assert_true(rev->signature_verified);
                source_revision_free(rev);
        }
}

/*
 * A refused head is judged once per source: later fetches while it stays
 * the head repeat the refusal (marked as such) without evaluating it again,
 * until allowed_signers changes.
 */
static void test_refusal_not_repeated(void **state)
{
        _cleanup_free_ char *id = NULL;
        source_opts o = {
            .url_or_path = repo,
            .cache_dir = cache,
            .ref = "unsigned-head",
            .verify_signatures = true,
            .allowed_signers_path = allowed,
        };
        _cleanup_(source_freep) source *s = NULL;
        source_revision *rev = NULL;

        assert_int_equal(fix_sh("cd '%s' && git checkout -q -b unsigned-head", repo), 0);
        id = signed_commit(NULL, "unsigned head");
        assert_int_equal(fix_sh("cd '%s' && git checkout -q -", repo), 0);
        assert_int_equal(source_open(&o, &s, NULL), 0);

        assert_int_equal(source_fetch(s, &rev), -EPERM);
        assert_false(rev->refusal_repeated);
        assert_string_equal(rev->commit_id, id);
        source_revision_free(rev);

        for (int i = 0; i < 3; i++) {
                assert_int_equal(source_fetch(s, &rev), -EPERM);
                assert_true(rev->refusal_repeated);
                assert_true(rev->fetch_skipped);
                assert_string_equal(rev->commit_id, id);
                assert_non_null(strstr(rev->refusal, "the commit is not signed"));
                assert_non_null(strstr(source_last_error(s), "is not signed by a trusted key"));
                source_revision_free(rev);
        }

        /* the operator edits allowed_signers: the head is judged again */
        assert_int_equal(fix_sh("cp '%s' '%s.new' && echo '# edited' >> '%s.new' && "
                                "mv '%s.new' '%s'",
                                allowed, allowed, allowed, allowed, allowed),
                         0);
        assert_int_equal(source_fetch(s, &rev), -EPERM);
        assert_false(rev->refusal_repeated);
        source_revision_free(rev);
}

static void test_missing_allowed_signers(void **state)
{
        source_opts o = {
            .url_or_path = repo,
            .cache_dir = cache,
            .verify_signatures = true,
        };
        source *s = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(source_open(&o, &s, &err), -EINVAL);
        assert_non_null(strstr(err, "allowed_signers"));
        free(err);
        o.allowed_signers_path = "/nonexistent/allowed_signers";
        assert_int_equal(source_open(&o, &s, &err), -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/allowed_signers"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_trusted_key_types),
            cmocka_unit_test(test_principals),
            cmocka_unit_test(test_untrusted_key),
            cmocka_unit_test(test_unsigned),
            cmocka_unit_test(test_namespace_and_expiry),
            cmocka_unit_test(test_tampered),
            cmocka_unit_test(test_signed_tag),
            cmocka_unit_test(test_signature_before_tree),
            cmocka_unit_test(test_rollback),
            cmocka_unit_test(test_tag_name_mismatch),
            cmocka_unit_test(test_refusal_not_repeated),
            cmocka_unit_test(test_missing_allowed_signers),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
