/*
 * Unit tests for util/: strings, escaping of untrusted text, diagnostics,
 * durations and the file helpers the CLI uses to expand paths.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/diag.h"
#include "util/escape.h"
#include "util/filememo.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/strmap.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static void test_strbuf(void **state)
{
        (void)state;
        strbuf sb = STRBUF_INIT;
        assert_string_equal(sb_str(&sb), "");
        sb_append(&sb, "member");
        sb_printf(&sb, "-%d", 42);
        sb_appendc(&sb, '!');
        assert_string_equal(sb_str(&sb), "member-42!");
        assert_int_equal(sb.len, 10);
        char *s = sb_detach(&sb);
        assert_string_equal(s, "member-42!");
        assert_null(sb.buf);
        free(s);
        s = sb_detach(&sb);
        assert_string_equal(s, "");
        free(s);
}

static void test_diag_format_and_sort(void **state)
{
        (void)state;
        diag_list l = DIAG_LIST_INIT;
        diag_add(&l, DIAG_WARNING, "b.yaml", 3, 5, "even replica count %d", 4);
        diag_add(&l, DIAG_ERROR, "a.yaml", 10, 1, "unknown field \"replica\"");
        diag_add(&l, DIAG_ERROR, "a.yaml", 2, 7, "bad");
        diag_add(&l, DIAG_NOTE, "c.yaml", 0, 0, "skipped");
        assert_true(diag_has_errors(&l));
        assert_int_equal(diag_count(&l, DIAG_ERROR), 2);
        diag_sort(&l);
        char *s = diag_format(&l.items[0]);
        assert_string_equal(s, "a.yaml:2:7: error: bad");
        free(s);
        s = diag_format(&l.items[2]);
        assert_string_equal(s, "b.yaml:3:5: warning: even replica count 4");
        free(s);
        s = diag_format(&l.items[3]);
        assert_string_equal(s, "c.yaml: note: skipped");
        free(s);
        /* a file name or a quoted value from a commit stays on one line */
        diag_add(&l, DIAG_ERROR, "evil\n::error::x.yaml", 1, 1, "bad value \"\033[2J\"");
        s = diag_format(&l.items[4]);
        assert_string_equal(s, "evil\\n::error::x.yaml:1:1: error: bad value \"\\x1b[2J\"");
        free(s);

        diag_list m = DIAG_LIST_INIT;
        diag_add(&m, DIAG_ERROR, NULL, 1, 1, "x");
        diag_move(&l, &m);
        assert_int_equal(l.n, 6);
        assert_int_equal(m.n, 0);
        assert_string_equal(l.items[5].file, "<input>");
        diag_list_release(&l);
        diag_list_release(&m);
}

static void test_duration(void **state)
{
        (void)state;
        int64_t ms;
        assert_int_equal(parse_duration_ms("500ms", &ms), 0);
        assert_int_equal(ms, 500);
        assert_int_equal(parse_duration_ms("30s", &ms), 0);
        assert_int_equal(ms, 30000);
        assert_int_equal(parse_duration_ms("1h30m", &ms), 0);
        assert_int_equal(ms, 5400000);
        assert_int_equal(parse_duration_ms("7d", &ms), 0);
        assert_int_equal(ms, 7 * 86400000LL);
        assert_int_equal(parse_duration_ms("45", &ms), 0);
        assert_int_equal(ms, 45000);
        assert_int_equal(parse_duration_ms("", &ms), -EINVAL);
        assert_int_equal(parse_duration_ms("5x", &ms), -EINVAL);
        assert_int_equal(parse_duration_ms("s", &ms), -EINVAL);
        assert_int_equal(parse_duration_ms("1h5", &ms), -EINVAL);

        char buf[32];
        format_rfc3339(0, buf, sizeof(buf));
        assert_string_equal(buf, "1970-01-01T00:00:00Z");
        format_age(90 * 1000, buf, sizeof(buf));
        assert_string_equal(buf, "90s");
        format_age(3 * 3600 * 1000, buf, sizeof(buf));
        assert_string_equal(buf, "3h");
}

static mode_t current_umask(void)
{
        mode_t m = umask(0);
        umask(m);
        return m;
}

static void write_text(const char *path, const char *text)
{
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644), 0);
}

static void test_fs(void **state)
{
        (void)state;
        char tmpl[] = "/tmp/gitcd-util-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *sub = path_join(tmpl, "a/b/c");
        assert_int_equal(mkdir_p(sub, 0755), 0);
        assert_true(path_is_dir(sub));

        char *f1 = path_join(tmpl, "a/b/c/z.yaml");
        char *f2 = path_join(tmpl, "a/x.yml");
        char *f3 = path_join(tmpl, "a/notes.txt");
        char *f4 = path_join(tmpl, "a/.hidden.yaml");
        write_text(f1, "a: 1\n");
        write_text(f2, "b: 2\n");
        write_text(f3, "text\n");
        write_text(f4, "c: 3\n");

        char *data;
        size_t len;
        assert_int_equal(read_file(f1, 1024, &data, &len), 0);
        assert_int_equal(len, 5);
        assert_string_equal(data, "a: 1\n");
        free(data);
        assert_int_equal(read_file(f1, 3, &data, &len), -EFBIG);
        assert_int_equal(read_file(tmpl, 1024, &data, &len), -EISDIR);

        const char *suffixes[] = {".yaml", ".yml", NULL};
        path_list l = {0};
        char *args[] = {tmpl, f3};
        assert_int_equal(expand_paths(args, 2, suffixes, &l, NULL), 0);
        assert_int_equal(l.n, 3);
        assert_string_equal(l.paths[0], f1); /* "a/b/..." sorts before "a/x.yml" */
        assert_string_equal(l.paths[1], f2);
        assert_string_equal(l.paths[2], f3); /* named directly: kept */
        path_list_release(&l);

        char *missing = path_join(tmpl, "nope");
        const char *bad = NULL;
        char *margs[] = {missing};
        assert_int_equal(expand_paths(margs, 1, suffixes, &l, &bad), -ENOENT);
        assert_ptr_equal(bad, missing);
        path_list_release(&l);

        /* An empty folder expands to nothing (and sorts no entries). */
        char *empty = path_join(tmpl, "empty");
        assert_int_equal(mkdir_p(empty, 0755), 0);
        char *eargs[] = {empty};
        assert_int_equal(expand_paths(eargs, 1, suffixes, &l, NULL), 0);
        assert_int_equal(l.n, 0);
        path_list_release(&l);
        free(empty);

        assert_int_equal(rm_rf(tmpl), 0);
        assert_false(path_exists(tmpl));
        assert_int_equal(rm_rf(tmpl), 0);
        free(sub);
        free(f1);
        free(f2);
        free(f3);
        free(f4);
        free(missing);
}

/* The entries of a folder other than "." and "..". */
static size_t count_entries(const char *dir)
{
        DIR *d = opendir(dir);
        assert_non_null(d);
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

/*
 * write_file_atomic never writes through a symlink planted where its
 * temporary goes (the name the earlier version used, <path>.tmp.<pid>,
 * was predictable): the victim is untouched, path ends up a regular file
 * with the whole content, and no temporary is left behind.
 */
/* write_all: everything arrives through a pipe that takes 64 KiB at a time; a bad fd is -EBADF. */
static void test_write_all(void **state)
{
        (void)state;
        int p[2];
        assert_int_equal(pipe(p), 0);
        size_t len = 1 << 20;
        char *data = xmalloc(len);
        for (size_t i = 0; i < len; i++)
                data[i] = (char)(i * 7 + i / 4096);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                close(p[0]);
                _exit(write_all(p[1], data, len) == 0 ? 0 : 1);
        }
        close(p[1]);
        char *got = xmalloc(len + 1);
        size_t have = 0;
        ssize_t n;
        while ((n = read(p[0], got + have, len + 1 - have)) > 0)
                have += (size_t)n;
        close(p[0]);
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(have, len);
        assert_memory_equal(got, data, len);
        assert_int_equal(write_all(-1, "x", 1), -EBADF);
        assert_int_equal(write_all(-1, "", 0), 0);
        free(got);
        free(data);
}

static void test_write_file_atomic(void **state)
{
        (void)state;
        char tmpl[] = "/tmp/gitcd-atomic-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *dir = path_join(tmpl, "dir");
        assert_int_equal(mkdir_p(dir, 0755), 0);
        char *victim = path_join(tmpl, "victim");
        write_text(victim, "precious\n");
        char *path = path_join(dir, "state.json");
        char *planted = xasprintf("%s.tmp.%ld", path, (long)getpid());
        assert_int_equal(symlink(victim, planted), 0);

        /* Large enough to need several write() calls on a pipe-sized buffer. */
        size_t len = 1 << 20;
        char *data = xmalloc(len);
        for (size_t i = 0; i < len; i++)
                data[i] = (char)('a' + i % 26);
        assert_int_equal(write_file_atomic(path, data, len, 0600), 0);

        char *got = NULL;
        size_t got_len = 0;
        assert_int_equal(read_file(victim, 1 << 10, &got, &got_len), 0);
        assert_string_equal(got, "precious\n");
        free(got);
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0600 & ~current_umask());
        assert_int_equal(read_file(path, 2 << 20, &got, &got_len), 0);
        assert_int_equal(got_len, len);
        assert_memory_equal(got, data, len);
        free(got);
        /* The planted link is still there, and nothing else was left beside path. */
        assert_int_equal(lstat(planted, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(count_entries(dir), 2);

        /* Replacing keeps it whole too. */
        write_text(path, "second\n");
        assert_int_equal(read_file(path, 1 << 10, &got, &got_len), 0);
        assert_string_equal(got, "second\n");
        free(got);
        assert_int_equal(count_entries(dir), 2);

        /* A folder that cannot be written: an error, nothing created. */
        char *missing = path_join(tmpl, "no/such/file");
        assert_int_equal(write_file_atomic(missing, "x", 1, 0644), -ENOENT);

        free(missing);
        free(data);
        free(planted);
        free(path);
        free(victim);
        free(dir);
        assert_int_equal(rm_rf(tmpl), 0);
}

/* lock_file_try: one holder at a time (another process asks: a child), its pid reported. */
static void test_lock_file(void **state)
{
        (void)state;
        char tmpl[] = "/tmp/gitcd-lock-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *path = path_join(tmpl, "gitcd.lock");
        int fd = -1;
        pid_t holder = -1;
        assert_int_equal(lock_file_try(path, &fd, &holder), 0);
        assert_true(fd >= 0);
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(path, 64, &text, &len), 0);
        assert_int_equal(atol(text), (long)getpid());
        free(text);

        /* Reading the file (another descriptor, opened and closed) keeps the lock. */
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                int cfd = -1;
                pid_t h = 0;
                int k = lock_file_try(path, &cfd, &h);
                _exit(k == -EAGAIN && h == getppid() ? 0 : 1);
        }
        int st = 0;
        assert_int_equal(waitpid(child, &st, 0), child);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

        /* Released on close: a child gets it now. */
        close(fd);
        child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                int cfd = -1;
                _exit(lock_file_try(path, &cfd, NULL) == 0 ? 0 : 1);
        }
        assert_int_equal(waitpid(child, &st, 0), child);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

        /* A symlink at the lock's name is refused. */
        char *link = path_join(tmpl, "link.lock");
        assert_int_equal(symlink(path, link), 0);
        assert_int_equal(lock_file_try(link, &fd, NULL), -ELOOP);
        free(link);
        free(path);
        assert_int_equal(rm_rf(tmpl), 0);
}

static void check_escape(const char *in, const char *want)
{
        _cleanup_free_ char *got = str_escape(in);
        assert_string_equal(got, want);
        assert_int_equal(str_needs_escape(in), !streq(in, want));
        /* escaping is idempotent: a second layer changes nothing */
        _cleanup_free_ char *again = str_escape(got);
        assert_string_equal(again, got);
        assert_false(str_needs_escape(got));
}

static void test_escape(void **state)
{
        (void)state;
        check_escape("plain text, ünïcödé ✓ 🙂", "plain text, ünïcödé ✓ 🙂");
        check_escape("", "");
        check_escape("Eve\033[31m\nforged", "Eve\\x1b[31m\\nforged");
        check_escape("a\tb\rc\x7f\x01", "a\\tb\\rc\\x7f\\x01");
        check_escape("back\\slash \\n stays", "back\\slash \\n stays");
        /* C1 controls (CSI is U+009B) and bytes that are not UTF-8 */
        check_escape("x\xc2\x9b"
                     "31m",
                     "x\\u009b31m");
        check_escape("bad \xff\xc3 utf8 \xe2\x82", "bad \\xff\\xc3 utf8 \\xe2\\x82");
        check_escape("overlong \xc0\xaf", "overlong \\xc0\\xaf");
        check_escape("surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80");
        assert_null(str_escape(NULL));
        assert_false(str_needs_escape(NULL));
        /* with a length: a NUL inside is escaped too */
        strbuf sb = STRBUF_INIT;
        sb_append_escaped(&sb, "a\0b", 3);
        assert_string_equal(sb_str(&sb), "a\\x00b");
        sb_release(&sb);
}

/* Untrusted text cut to a bound: at a character boundary, with a marker that says how long. */
static void test_cut(void **state)
{
        (void)state;
        _cleanup_free_ char *same = str_cut("short", 5);
        assert_string_equal(same, "short");
        _cleanup_free_ char *cut = str_cut("0123456789", 4);
        assert_string_equal(cut, "0123 [cut: 10 bytes in all]");
        /* "é" is two bytes: never half of it */
        _cleanup_free_ char *utf8 = str_cut("ab\xc3\xa9"
                                            "cd",
                                            3);
        assert_string_equal(utf8, "ab [cut: 6 bytes in all]");
        _cleanup_free_ char *emoji = str_cut("\xf0\x9f\x99\x82!", 3);
        assert_string_equal(emoji, " [cut: 5 bytes in all]");
        assert_null(str_cut(NULL, 3));
}

/* A file for the secret checks: text, mode, owner. */
static char *secret_at(const char *dir, const char *name, mode_t mode)
{
        char *path = path_join(dir, name);
        assert_int_equal(write_file_atomic(path, "s3cret\n", 7, 0600), 0);
        assert_int_equal(chmod(path, mode), 0);
        return path;
}

/*
 * Files holding secrets: gitcd's own with no access for others, or root's
 * readable by a group gitcd runs in (a Kubernetes Secret with fsGroup);
 * anything else is refused with the command that fixes it.
 */
static void test_secret_files(void **state)
{
        (void)state;
        char tmpl[] = "/tmp/gitcd-secret-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        assert_int_equal(chmod(tmpl, 0755), 0);
        char *data = NULL, *err = NULL;
        size_t len = 0;

        _cleanup_free_ char *good = secret_at(tmpl, "good", 0600);
        assert_int_equal(read_secret_file(good, "token file", 1024, &data, &len, &err), 0);
        assert_string_equal(data, "s3cret\n");
        free(data);
        assert_int_equal(secret_file_check(good, "token file", &err), 0);
        _cleanup_free_ char *ro = secret_at(tmpl, "ro", 0400);
        assert_int_equal(secret_file_check(ro, "token file", &err), 0);

        static const mode_t bad_modes[] = {0644, 0640, 0604, 0620, 0660};
        for (size_t i = 0; i < ARRAY_SIZE(bad_modes); i++) {
                _cleanup_free_ char *bad = secret_at(tmpl, "bad", bad_modes[i]);
                data = NULL;
                assert_int_equal(read_secret_file(bad, "token file", 1024, &data, &len, &err),
                                 -EPERM);
                assert_null(data);
                _cleanup_free_ char *want = xasprintf("the token file %s can be read or changed "
                                                      "by other users (mode %04o): run `chmod "
                                                      "600 '%s'`",
                                                      bad, (unsigned)bad_modes[i], bad);
                assert_string_equal(err, want);
                free(err);
                err = NULL;
                assert_int_equal(secret_file_check(bad, "TLS key", &err), -EPERM);
                assert_non_null(strstr(err, "the TLS key "));
                free(err);
                err = NULL;
        }
        _cleanup_free_ char *missing = path_join(tmpl, "missing");
        assert_int_equal(read_secret_file(missing, "token file", 1024, &data, &len, &err), -ENOENT);
        assert_non_null(strstr(err, "cannot read the token file"));
        free(err);
        err = NULL;

        if (geteuid() != 0) {
                assert_int_equal(rm_rf(tmpl), 0);
                return; /* the rest needs other users */
        }
        struct passwd *pw = getpwnam("gitcd-test");
        if (!pw) {
                assert_int_equal(rm_rf(tmpl), 0);
                return;
        }
        /* another user's file, even 0600 */
        _cleanup_free_ char *theirs = secret_at(tmpl, "theirs", 0600);
        assert_int_equal(chown(theirs, pw->pw_uid, pw->pw_gid), 0);
        assert_int_equal(secret_file_check(theirs, "SSH key", &err), -EPERM);
        _cleanup_free_ char *want = xasprintf(
            "the SSH key %s belongs to uid %u, not to gitcd's user root: run `chown root '%s' && "
            "chmod 600 '%s'`",
            theirs, (unsigned)pw->pw_uid, theirs, theirs);
        assert_string_equal(err, want);
        free(err);
        err = NULL;

        /* gitcd running as another user: root's file readable by gitcd's group only passes */
        _cleanup_free_ char *mounted = secret_at(tmpl, "mounted", 0440);
        assert_int_equal(chown(mounted, 0, pw->pw_gid), 0);
        _cleanup_free_ char *other_group = secret_at(tmpl, "other-group", 0440);
        _cleanup_free_ char *world = secret_at(tmpl, "world", 0444);
        assert_int_equal(chown(world, 0, pw->pw_gid), 0);
        _cleanup_free_ char *group_w = secret_at(tmpl, "group-w", 0460);
        assert_int_equal(chown(group_w, 0, pw->pw_gid), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                char *e = NULL;
                if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
                        _exit(10);
                if (secret_file_check(mounted, "token file", &e) != 0)
                        _exit(11);
                if (secret_file_check(other_group, "token file", &e) != -EPERM ||
                    !strstr(e, "belongs to root and can be read or changed by users other than "
                               "gitcd's (mode 0440, group 0): run `chown gitcd-test"))
                        _exit(12);
                if (secret_file_check(world, "token file", &e) != -EPERM)
                        _exit(13);
                if (secret_file_check(group_w, "token file", &e) != -EPERM)
                        _exit(14);
                _exit(0);
        }
        int st = 0;
        assert_int_equal(waitpid(child, &st, 0), child);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        assert_int_equal(rm_rf(tmpl), 0);
}

/* The map keeps the first value of a key, finds every key after it grew, and nothing else. */
static void test_strmap(void **state)
{
        (void)state;
        strmap m = STRMAP_INIT;
        size_t v = 99;
        assert_false(strmap_get(&m, "a", &v));
        assert_int_equal(v, 99);
        char key[32];
        for (size_t i = 0; i < 5000; i++) {
                snprintf(key, sizeof(key), "team-%02zu/c-%05zu", i % 20, i);
                assert_true(strmap_put(&m, key, i));
        }
        assert_false(strmap_put(&m, "team-03/c-00003", 7)); /* already there: kept */
        assert_int_equal(m.n, 5000);
        for (size_t i = 0; i < 5000; i++) {
                snprintf(key, sizeof(key), "team-%02zu/c-%05zu", i % 20, i);
                assert_true(strmap_get(&m, key, &v));
                assert_int_equal(v, i);
        }
        assert_false(strmap_get(&m, "team-00/c-05000", NULL));
        assert_false(strmap_get(&m, "", NULL));
        assert_true(strmap_put(&m, "", 1));
        assert_true(strmap_get(&m, "", &v));
        assert_int_equal(v, 1);
        strmap_release(&m);
        assert_false(strmap_get(&m, "team-00/c-00000", NULL));
}

/*
 * util/filememo: a value kept while its files stay as they were; a file
 * replaced, written in place, created or removed since makes it read
 * again; a value derived while a file changed is not taken for the new one.
 */
static void test_filememo(void **state)
{
        (void)state;
        char tmpl[] = "/tmp/gitcd-filememo-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *a = path_join(tmpl, "a"), *b = path_join(tmpl, "b");
        const char *paths[] = {a, b};
        filememo m = FILEMEMO_INIT(filememo_strdup, filememo_free);
        char *v = NULL;
        file_id ids[2];

        assert_int_equal(write_file_atomic(a, "one", 3, 0644), 0);
        filememo_ids(paths, 2, ids); /* b is not there: that is part of the identity */
        assert_false(filememo_get(&m, "k", paths, 2, (void **)&v));
        assert_null(v);
        filememo_put(&m, "k", ids, 2, "from one");
        assert_true(filememo_get(&m, "k", paths, 2, (void **)&v));
        assert_string_equal(v, "from one");
        free(v);
        assert_false(filememo_get(&m, "other", paths, 2, (void **)&v));
        assert_false(filememo_get(&m, "k", paths, 1, (void **)&v)); /* other files */

        /* b created: read again */
        assert_int_equal(write_file_atomic(b, "x", 1, 0644), 0);
        assert_false(filememo_get(&m, "k", paths, 2, (void **)&v));
        filememo_ids(paths, 2, ids);
        filememo_put(&m, "k", ids, 2, "from one and x");
        assert_true(filememo_get(&m, "k", paths, 2, (void **)&v));
        assert_string_equal(v, "from one and x");
        free(v);

        /* a replaced (a new file renamed in place), then written in place, then removed */
        assert_int_equal(write_file_atomic(a, "two", 3, 0644), 0);
        assert_false(filememo_get(&m, "k", paths, 2, (void **)&v));
        filememo_ids(paths, 2, ids);
        filememo_put(&m, "k", ids, 2, "from two");
        FILE *f = fopen(a, "a");
        assert_non_null(f);
        fputs("more", f);
        fclose(f);
        assert_false(filememo_get(&m, "k", paths, 2, (void **)&v));
        /* identities taken before a change that came while the value was derived: not kept */
        filememo_ids(paths, 2, ids);
        assert_int_equal(unlink(a), 0);
        filememo_put(&m, "k", ids, 2, "from the file before it went");
        assert_false(filememo_get(&m, "k", paths, 2, (void **)&v));
        assert_null(v);

        filememo_clear(&m);
        assert_false(filememo_get(&m, "k", paths, 2, (void **)&v));
        /* a memo past its bound starts over empty, and still works */
        filememo_ids(paths, 2, ids);
        for (int i = 0; i <= FILEMEMO_MAX; i++) {
                char key[32];
                snprintf(key, sizeof(key), "k%d", i);
                filememo_put(&m, key, ids, 2, key);
        }
        assert_false(filememo_get(&m, "k0", paths, 2, (void **)&v));
        assert_true(filememo_get(&m, "k16384", paths, 2, (void **)&v));
        assert_string_equal(v, "k16384");
        free(v);
        filememo_clear(&m);
        assert_int_equal(rm_rf(tmpl), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_strbuf),       cmocka_unit_test(test_strmap),
            cmocka_unit_test(test_escape),       cmocka_unit_test(test_cut),
            cmocka_unit_test(test_secret_files), cmocka_unit_test(test_diag_format_and_sort),
            cmocka_unit_test(test_duration),     cmocka_unit_test(test_fs),
            cmocka_unit_test(test_write_all),    cmocka_unit_test(test_write_file_atomic),
            cmocka_unit_test(test_lock_file),    cmocka_unit_test(test_filememo),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
