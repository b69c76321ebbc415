/*
 * The applied-heads file (see heads.h).
 *
 * Design decisions: the file lives beside the mirror, not in the state
 * database, because sources/ owns it and needs no other module; it is
 * written with write_file_atomic(), so a crash leaves the old or the new
 * version, never half a line. Lines that do not parse are ignored when
 * reading and dropped at the next write: a damaged file weakens the
 * protection for that ref until the next applied commit, it never blocks.
 * Deleting the cache directory forgets the records (docs/security.md).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "sources/heads.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define HEADS_MAX_SIZE (4u * 1024u * 1024u)

static bool is_hex40(const char *s, size_t n)
{
        if (n != 40)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("0123456789abcdef", s[i]))
                        return false;
        return true;
}

/* Split "hex ref" into its parts; false for a line that is not one. */
static bool parse_line(const char *line, size_t len, const char **ret_ref, size_t *ret_ref_len)
{
        if (len < 42 || line[40] != ' ' || !is_hex40(line, 40))
                return false;
        *ret_ref = line + 41;
        *ret_ref_len = len - 41;
        return true;
}

static int read_heads(const char *path, char **ret, size_t *ret_len)
{
        int r = read_file(path, HEADS_MAX_SIZE, ret, ret_len);

        if (r == -ENOENT) {
                *ret = xstrdup("");
                *ret_len = 0;
                return 0;
        }
        return r;
}

int heads_get(const char *path, const char *ref, char ret_hex[41])
{
        _cleanup_free_ char *data = NULL;
        size_t len, ref_len = strlen(ref);
        int r;

        r = read_heads(path, &data, &len);
        if (r < 0)
                return r;
        for (const char *line = data; line < data + len;) {
                const char *nl = memchr(line, '\n', (size_t)(data + len - line));
                size_t n = nl ? (size_t)(nl - line) : (size_t)(data + len - line);
                const char *name;
                size_t name_len;

                if (parse_line(line, n, &name, &name_len) && name_len == ref_len &&
                    memcmp(name, ref, ref_len) == 0) {
                        memcpy(ret_hex, line, 40);
                        ret_hex[40] = '\0';
                        return 0;
                }
                line += n + 1;
        }
        return -ENOENT;
}

int heads_set(const char *path, const char *ref, const char *hex)
{
        _cleanup_free_ char *data = NULL;
        strbuf out = STRBUF_INIT;
        size_t len, ref_len = strlen(ref);
        int r;

        if (!is_hex40(hex, strlen(hex)) || strchr(ref, '\n'))
                return -EINVAL;
        r = read_heads(path, &data, &len);
        if (r < 0)
                return r;
        for (const char *line = data; line < data + len;) {
                const char *nl = memchr(line, '\n', (size_t)(data + len - line));
                size_t n = nl ? (size_t)(nl - line) : (size_t)(data + len - line);
                const char *name;
                size_t name_len;

                if (parse_line(line, n, &name, &name_len) &&
                    !(name_len == ref_len && memcmp(name, ref, ref_len) == 0)) {
                        sb_append_len(&out, line, n);
                        sb_appendc(&out, '\n');
                }
                line += n + 1;
        }
        sb_printf(&out, "%s %s\n", hex, ref);
        r = write_file_atomic(path, sb_str(&out), out.len, 0600);
        sb_release(&out);
        return r;
}
