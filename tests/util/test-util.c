/*
 * Unit tests for util/: strings, diagnostics, durations and the file
 * helpers the CLI uses to expand paths.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "util/diag.h"
#include "util/fs.h"
#include "util/strbuf.h"
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

        diag_list m = DIAG_LIST_INIT;
        diag_add(&m, DIAG_ERROR, NULL, 1, 1, "x");
        diag_move(&l, &m);
        assert_int_equal(l.n, 5);
        assert_int_equal(m.n, 0);
        assert_string_equal(l.items[4].file, "<input>");
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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_strbuf),
            cmocka_unit_test(test_diag_format_and_sort),
            cmocka_unit_test(test_duration),
            cmocka_unit_test(test_fs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
