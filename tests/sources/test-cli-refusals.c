/*
 * Refused revisions through the real gitcd binary, with a real signed
 * repository: `gitcd apply` refuses a rollback to an older signed commit
 * (audited as revision.rejected) and accepts it with --allow-rollback; a
 * `gitcd run` daemon polling a refused head audits it once, not at every
 * poll, and still takes in the next good commit; an unsigned commit whose
 * author name and message are megabytes built to slow the audit log's
 * redaction is refused at once, its author cut short with a marker. The
 * mark of a fetch's own process left in gitcd's environment by mistake is
 * dropped, not obeyed: gitcd runs as asked, and its fetches still work.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "sources/source.h"
#include "tests/sources/gitfix.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static const char *bin;
static char *dir, *repo, *key, *allowed;
static pid_t daemon_pid;

static void stop_daemon(void)
{
        if (daemon_pid > 0) {
                kill(daemon_pid, SIGTERM);
                waitpid(daemon_pid, NULL, 0);
                daemon_pid = 0;
        }
}

static int group_setup(void **state)
{
        bin = getenv("GITCD_BIN");
        if (!bin) {
                fprintf(stderr, "GITCD_BIN is not set\n");
                return -1;
        }
        fix_init();
        atexit(stop_daemon);
        dir = fix_tmpdir("cli");
        repo = xasprintf("%s/repo", dir);
        key = xasprintf("%s/key", dir);
        allowed = xasprintf("%s/allowed_signers", dir);
        if (fix_sh("ssh-keygen -q -t ed25519 -N '' -f '%s' && "
                   "echo \"ops@example.org $(cat '%s.pub')\" > '%s' && git init -q '%s'",
                   key, key, allowed, repo) != 0)
                return -1;
        return 0;
}

static int group_teardown(void **state)
{
        stop_daemon();
        free(dir);
        free(repo);
        free(key);
        free(allowed);
        fix_cleanup();
        return 0;
}

/* Commit a file change, signed with the trusted key or not; returns the id. */
static char *commit(bool sign, const char *file, const char *content)
{
        fix_write(repo, file, content);
        if (fix_sh("cd '%s' && git add -A && git -c gpg.format=ssh -c user.signingkey='%s' "
                   "commit -q %s -m 'change %s'",
                   repo, key, sign ? "-S" : "", file) != 0)
                return NULL;
        return fix_sh_out("cd '%s' && git rev-parse HEAD", repo);
}

/* Run `gitcd apply` on the repository with state in dir/<state>; returns the exit status. */
static int apply(const char *state_name, const char *extra)
{
        return fix_sh_quiet("'%s' apply --source '%s' --state '%s/%s/state.db' "
                            "--verify-signatures --allowed-signers '%s' %s >>'%s/apply.log' 2>&1",
                            bin, repo, dir, state_name, allowed, extra, dir);
}

/* How many audit events of action the state in dir/<state> holds. */
static int audit_count(const char *state_name, const char *action)
{
        _cleanup_free_ char *n =
            fix_sh_out("'%s' log --state '%s/%s/state.db' -o json --action %s | wc -l", bin, dir,
                       state_name, action);

        return n ? atoi(n) : -1;
}

/* GITCD_FETCH_CHILD=1 in gitcd's environment: ignored (only a started fetch process obeys it). */
static void test_stray_fetch_mark(void **state)
{
        _cleanup_free_ char *head = commit(true, "m.txt", "m\n");
        assert_non_null(head);
        _cleanup_free_ char *v = fix_sh_out("GITCD_FETCH_CHILD=1 '%s' --version </dev/null", bin);
        assert_non_null(v);
        assert_non_null(strstr(v, "gitcd "));
        assert_int_equal(fix_sh_quiet("GITCD_FETCH_CHILD=1 '%s' apply --source '%s' --state "
                                      "'%s/mark/state.db' --verify-signatures --allowed-signers "
                                      "'%s' </dev/null >>'%s/apply.log' 2>&1",
                                      bin, repo, dir, allowed, dir),
                         0);
}

static void test_rollback_refused(void **state)
{
        _cleanup_free_ char *old = commit(true, "a.txt", "1\n");
        _cleanup_free_ char *cur = commit(true, "a.txt", "2\n");
        _cleanup_free_ char *log = NULL;

        assert_non_null(old);
        assert_non_null(cur);
        assert_int_equal(apply("rb", ""), 0);

        /* the branch is reset to an older, validly signed commit */
        assert_int_equal(fix_sh("cd '%s' && git reset -q --hard %s", repo, old), 0);
        assert_int_equal(apply("rb", ""), 1);
        log = fix_sh_out("cat '%s/apply.log'", dir);
        if (!strstr(log, "does not descend from") || !strstr(log, "--allow-rollback"))
                fail_msg("unexpected output: %s", log);
        assert_int_equal(audit_count("rb", "revision.rejected"), 1);

        /* the operator says so explicitly */
        assert_int_equal(apply("rb", "--allow-rollback"), 0);
        /* and from there on, the older commit is the one later heads must descend from */
        assert_int_equal(apply("rb", ""), 0);
        assert_int_equal(audit_count("rb", "revision.rejected"), 1);
}

static bool wait_for_audit(const char *state_name, const char *action, int n)
{
        for (int i = 0; i < 1200; i++) {
                struct timespec ts = {0, 100 * 1000000L};

                if (audit_count(state_name, action) >= n)
                        return true;
                nanosleep(&ts, NULL);
        }
        return false;
}

static void test_refused_head_audited_once(void **state)
{
        _cleanup_free_ char *bad = commit(false, "b.txt", "unsigned\n");
        _cleanup_free_ char *good = NULL, *log = xasprintf("%s/daemon.log", dir);
        _cleanup_free_ char *state_db = xasprintf("%s/daemon/state.db", dir);
        struct timespec polls = {3, 500 * 1000000L};

        assert_non_null(bad);
        daemon_pid = fork();
        if (daemon_pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execl(bin, "gitcd", "run", "--source", repo, "--state", state_db, "--interval",
                      "1s", "--verify-signatures", "--allowed-signers", allowed, (char *)NULL);
                _exit(127);
        }
        if (!wait_for_audit("daemon", "revision.rejected", 1))
                fail_msg("the daemon never refused the unsigned head");
        /* several polls of the same refused head (a longer wait only adds polls) */
        nanosleep(&polls, NULL);

        /* a good commit on top: taken in (its invalid document is audited as spec.rejected) */
        good = commit(true, "bad.yaml",
                      "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n"
                      "  name: broken\nspec: 12\n");
        assert_non_null(good);
        if (!wait_for_audit("daemon", "spec.rejected", 1))
                fail_msg("the daemon never took in the good commit");
        stop_daemon();
        assert_int_equal(audit_count("daemon", "revision.rejected"), 1);
}

/*
 * An unsigned commit made by hand (git hash-object): an author name of
 * 1.7 MB of PEM blocks nested so that the redaction of the audit log once
 * needed a pass per level, and a 2 MB message. gitcd refuses it, and the
 * audit log holds the name cut to SOURCE_MAX_PERSON_BYTES with a marker.
 * (Before, the refusal took longer than the test's time limit.)
 */
static void test_hostile_author_cut(void **state)
{
        _cleanup_free_ char *hostile = xasprintf("%s/hostile", dir);
        strbuf obj = STRBUF_INIT;
        const size_t depth = 50000;

        assert_int_equal(fix_sh("git init -q '%s' && cd '%s' && echo x > a.txt && git add a.txt "
                                "&& git commit -q -m first",
                                hostile, hostile),
                         0);
        _cleanup_free_ char *tree = fix_sh_out("cd '%s' && git rev-parse HEAD^{tree}", hostile);
        _cleanup_free_ char *parent = fix_sh_out("cd '%s' && git rev-parse HEAD", hostile);
        sb_printf(&obj, "tree %s\nparent %s\nauthor ", tree, parent);
        for (size_t i = 0; i < depth; i++)
                sb_append(&obj, "-----BEGIN A");
        sb_append(&obj, "-----BEGIN PRIVATE KEY-----");
        for (size_t i = 0; i < depth; i++)
                sb_append(&obj, "-PRIVATE KEY-----");
        sb_append(&obj, " <m@evil.example> 1700000000 +0000\n"
                        "committer M <m@evil.example> 1700000000 +0000\n\n");
        for (size_t i = 0; i < 2 * 1024 * 1024 / 64; i++)
                sb_append(&obj, "a message line that only makes the commit larger, and larger\n");
        fix_write(dir, "hostile.obj", sb_str(&obj));
        sb_release(&obj);
        assert_int_equal(fix_sh("cd '%s' && id=$(git hash-object -t commit -w '%s/hostile.obj') "
                                "&& git update-ref HEAD \"$id\"",
                                hostile, dir),
                         0);

        int k = fix_sh_quiet("'%s' apply --source '%s' --state '%s/hostile-state/state.db' "
                             "--verify-signatures --allowed-signers '%s' >>'%s/apply.log' 2>&1",
                             bin, hostile, dir, allowed, dir);
        assert_int_equal(k, 1);
        _cleanup_free_ char *line =
            fix_sh_out("'%s' log --state '%s/hostile-state/state.db' -o json --action "
                       "revision.rejected",
                       bin, dir);
        assert_non_null(line);
        json_t *ev = json_loads(line, 0, NULL);
        assert_non_null(ev);
        _cleanup_free_ char *author = xstrdup(json_string_value(json_object_get(ev, "author")));
        json_decref(ev);
        if (!strstr(author, " [cut: ") || strlen(author) > 2 * SOURCE_MAX_PERSON_BYTES)
                fail_msg("the author was not cut: %.200s... (%zu bytes)", author, strlen(author));
        assert_true(strneq(author, "-----BEGIN A-----BEGIN A", 24));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_stray_fetch_mark),
            cmocka_unit_test(test_rollback_refused),
            cmocka_unit_test(test_refused_head_audited_once),
            cmocka_unit_test(test_hostile_author_cut),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
