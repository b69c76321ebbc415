/*
 * Reading a systemd unit that runs etcd, and the environment files it
 * names, for adoption (see hosts-adopt.h); and writing gitcd's own unit
 * (hosts_unit_render), which the same reader reads back. Pure functions:
 * the SSH reads are in targets/hosts-adopt-machine.c, the writes in hosts.c.
 *
 * Writing: every word of ExecStart= is double-quoted with systemd's own
 * escapes (hosts_unit_word), Description= has its '%' doubled, and a
 * value with a control character is refused rather than escaped, so no
 * spec content can end a line or start one. POSIX single quotes are not
 * systemd quoting: systemd reads backslash escapes inside them and ends
 * the line at a newline; the units gitcd wrote that way before are still
 * read (adoption after a lost state store).
 *
 * Design: no library reads unit files for us (libsystemd does not expose
 * its parser), so this is a small reader of the part of systemd's syntax
 * that says how etcd is started, written from systemd.syntax(7),
 * systemd.service(5) and systemd.exec(5), and nothing more:
 *
 *   - lines, `#` and `;` comments, `[Section]` headers, `Key=Value`, and
 *     continuation lines (a trailing backslash; comment lines inside a
 *     continuation are skipped); only [Service] is read;
 *   - ExecStart= (one command; an empty assignment resets it; the `@`,
 *     `-`, `:`, `+`, `!` and `!!` prefixes), split into words as systemd
 *     does: double and single quotes, C escapes, `$VAR` alone as a word
 *     split at whitespace, `${VAR}` in place, `$$` for a dollar, no
 *     expansion after `:`;
 *   - Environment= (quoted assignments, several per line) and
 *     EnvironmentFile= (`-` for an optional file), whose variables
 *     override Environment='s, later files over earlier ones;
 *   - the specifiers distributions use (`%n`, `%N`, `%p`, `%i`, `%I`,
 *     `%H`, `%%`); any other one is refused rather than guessed;
 *   - User=, reported only.
 *
 * What etcd then makes of its arguments and environment is
 * hosts_running_from_flags()'s, shared with the static Pod reader.
 * Everything else in the file (drop-ins, other keys, other sections) is
 * ignored. Limits: 1 MiB of text, 4096 words or assignments, 64
 * environment files, 4 MiB of expanded command line; beyond them the
 * file is refused with a diagnostic, never truncated.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "targets/hosts-adopt.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define UNIT_MAX_BYTES   (1024u * 1024u)
#define UNIT_MAX_WORDS   4096u
#define UNIT_MAX_FILES   64u
#define UNIT_MAX_EXPANDS (4u * 1024u * 1024u)

void hosts_unit_release(hosts_unit *u)
{
        strv_free(u->exec);
        strv_free(u->environment);
        strv_free(u->env_files);
        free(u->env_file_optional);
        free(u->user);
        memset(u, 0, sizeof(*u));
}

/* A NULL-terminated list with n entries, one more appended (taking s). */
static void strv_push(char ***v, size_t *n, char *s)
{
        *v = xrealloc(*v, (*n + 2) * sizeof(char *));
        (*v)[(*n)++] = s;
        (*v)[*n] = NULL;
}

static void strv_reset(char ***v, size_t *n)
{
        strv_free(*v);
        *v = NULL;
        *n = 0;
}

static bool valid_env_name(const char *s, size_t n)
{
        if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
                        return false;
        return true;
}

/* The unit's name without its type suffix ("etcd" for "etcd.service"). */
static char *unit_prefix(const char *unit_name, bool instance)
{
        const char *dot = strrchr(unit_name, '.');
        size_t n = dot ? (size_t)(dot - unit_name) : strlen(unit_name);
        const char *at = memchr(unit_name, '@', n);
        if (!at)
                return instance ? xstrdup("") : xstrndup(unit_name, n);
        return instance ? xstrndup(at + 1, n - (size_t)(at + 1 - unit_name))
                        : xstrndup(unit_name, (size_t)(at - unit_name));
}

/* value with the specifiers resolved, or NULL with *ret_why. */
static char *resolve_specifiers(const char *value, const hosts_unit_context *ctx, char **ret_why)
{
        strbuf sb = STRBUF_INIT;
        for (const char *p = value; *p; p++) {
                if (*p != '%') {
                        sb_appendc(&sb, *p);
                        continue;
                }
                char *s = NULL;
                switch (p[1]) {
                case '%':
                        s = xstrdup("%");
                        break;
                case 'n':
                        s = xstrdup(ctx->unit_name);
                        break;
                case 'N': {
                        const char *dot = strrchr(ctx->unit_name, '.');
                        s = xstrndup(ctx->unit_name,
                                     dot ? (size_t)(dot - ctx->unit_name) : strlen(ctx->unit_name));
                        break;
                }
                case 'p':
                        s = unit_prefix(ctx->unit_name, false);
                        break;
                case 'i':
                case 'I':
                        s = unit_prefix(ctx->unit_name, true);
                        break;
                case 'H':
                        if (isempty(ctx->hostname)) {
                                *ret_why = xstrdup("the unit uses %H but the machine's host name "
                                                   "is not known");
                                sb_release(&sb);
                                return NULL;
                        }
                        s = xstrdup(ctx->hostname);
                        break;
                default:
                        if (p[1])
                                *ret_why = xasprintf("the specifier %%%c is not supported (only "
                                                     "%%n, %%N, %%p, %%i, %%I, %%H and %%%%)",
                                                     p[1]);
                        else
                                *ret_why = xstrdup("a lone % at the end of a value");
                        sb_release(&sb);
                        return NULL;
                }
                sb_append(&sb, s);
                free(s);
                p++;
        }
        return sb_detach(&sb);
}

/* One C escape after a backslash at *p (advanced past it) into sb; false when invalid. */
static bool cunescape_one(const char **pp, strbuf *sb)
{
        const char *p = *pp;
        char c = 0;
        switch (*p) {
        case 'a':
                c = '\a';
                break;
        case 'b':
                c = '\b';
                break;
        case 'f':
                c = '\f';
                break;
        case 'n':
                c = '\n';
                break;
        case 'r':
                c = '\r';
                break;
        case 't':
                c = '\t';
                break;
        case 'v':
                c = '\v';
                break;
        case 's':
                c = ' ';
                break;
        case '\\':
        case '"':
        case '\'':
                c = *p;
                break;
        default:
                break;
        }
        if (c) {
                sb_appendc(sb, c);
                *pp = p + 1;
                return true;
        }
        if (*p == 'x' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
                char hex[3] = {p[1], p[2], 0};
                unsigned v = (unsigned)strtoul(hex, NULL, 16);
                if (v == 0)
                        return false;
                sb_appendc(sb, (char)v);
                *pp = p + 3;
                return true;
        }
        if (p[0] >= '0' && p[0] <= '3' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' &&
            p[2] <= '7') {
                unsigned v = (unsigned)((p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0'));
                if (v == 0)
                        return false;
                sb_appendc(sb, (char)v);
                *pp = p + 3;
                return true;
        }
        return false;
}

/*
 * Split value into words as systemd's ExecStart= and Environment= do:
 * whitespace between words, "..." and '...' quotes, C escapes in and out
 * of them. Each word in *ret (appended, *n counted); *ret_quoted[i] says
 * whether word i had quotes (`"$VAR"` then stays one word). -EINVAL with
 * *ret_why for an unterminated quote or a bad escape.
 */
static int split_words(const char *value, char ***ret, size_t *n, char **ret_why)
{
        strbuf w = STRBUF_INIT;
        bool in_word = false;
        const char *p = value;
        int k = 0;
        for (;;) {
                if (!*p || isspace((unsigned char)*p)) {
                        if (in_word) {
                                if (*n >= UNIT_MAX_WORDS) {
                                        *ret_why = xasprintf("more than %u words", UNIT_MAX_WORDS);
                                        k = -EINVAL;
                                        break;
                                }
                                strv_push(ret, n, xstrdup(sb_str(&w)));
                                sb_reset(&w);
                                in_word = false;
                        }
                        if (!*p)
                                break;
                        p++;
                        continue;
                }
                in_word = true;
                if (*p == '"' || *p == '\'') {
                        char quote = *p++;
                        while (*p && *p != quote) {
                                if (*p == '\\') {
                                        p++;
                                        if (!cunescape_one(&p, &w)) {
                                                *ret_why = xstrdup("a bad escape in quotes");
                                                k = -EINVAL;
                                                goto out;
                                        }
                                        continue;
                                }
                                sb_appendc(&w, *p++);
                        }
                        if (!*p) {
                                *ret_why = xasprintf("a %c quote is not closed", quote);
                                k = -EINVAL;
                                break;
                        }
                        p++;
                        continue;
                }
                if (*p == '\\') {
                        p++;
                        if (!cunescape_one(&p, &w)) {
                                *ret_why = xstrdup("a bad escape");
                                k = -EINVAL;
                                break;
                        }
                        continue;
                }
                sb_appendc(&w, *p++);
        }
out:
        sb_release(&w);
        return k;
}

static int unit_error(diag_list *d, const char *origin, int line, char *why)
{
        diag_add(d, DIAG_ERROR, origin, line, 0, "%s", why);
        free(why);
        return -EINVAL;
}

/* The ExecStart= value (specifiers resolved) into u. */
static int take_exec(hosts_unit *u, const char *value, char **ret_why)
{
        strv_reset(&u->exec, &u->n_exec);
        u->exec_expand = true;
        u->exec_argv0 = false;
        const char *p = value;
        for (;; p++) {
                if (*p == '@')
                        u->exec_argv0 = true;
                else if (*p == ':')
                        u->exec_expand = false;
                else if (*p != '-' && *p != '+' && *p != '!')
                        break;
        }
        if (!*p)
                return 0;
        int k = split_words(p, &u->exec, &u->n_exec, ret_why);
        if (k < 0)
                return k;
        if (u->n_exec == 0 || (u->exec_argv0 && u->n_exec < 2)) {
                *ret_why = xstrdup("ExecStart= names no command");
                return -EINVAL;
        }
        return 0;
}

/*
 * The next logical line of [*p, end) into *logical: continuation lines
 * joined with a space, comments inside a continuation dropped, a comment
 * line never continued (systemd reads it as a whole). Returns the number
 * of its first line; *line counts the lines read.
 */
static int next_logical_line(const char **p, const char *end, int *line, strbuf *logical)
{
        sb_reset(logical);
        int first_line = *line + 1;
        bool cont = false;
        do {
                const char *nl = memchr(*p, '\n', (size_t)(end - *p));
                const char *e = nl ? nl : end;
                (*line)++;
                const char *s = *p;
                *p = nl ? nl + 1 : end;
                while (s < e && isspace((unsigned char)*s))
                        s++;
                size_t n = (size_t)(e - s);
                while (n > 0 && isspace((unsigned char)s[n - 1]))
                        n--;
                if (cont && n > 0 && (*s == '#' || *s == ';'))
                        continue; /* a comment inside a continuation */
                /* a comment line never continues (systemd reads it as a whole) */
                bool comment = !cont && n > 0 && (*s == '#' || *s == ';');
                cont = !comment && n > 0 && s[n - 1] == '\\';
                sb_append_len(logical, s, cont ? n - 1 : n);
                if (cont)
                        sb_appendc(logical, ' ');
        } while (cont && *p < end);
        return first_line;
}

/* Where a unit's lines are read from, for the diagnostics. */
typedef struct unit_reader {
        const char *origin;
        diag_list *diags;
        int first_line; /* of the logical line being read */
        int n_exec_lines;
} unit_reader;

/* ExecStart=: one (an empty value resets it). 0 or -errno with the diagnostic added. */
static int read_exec(unit_reader *ur, hosts_unit *u, const char *value)
{
        if (!*value) {
                ur->n_exec_lines = 0;
                strv_reset(&u->exec, &u->n_exec);
                return 0;
        }
        if (++ur->n_exec_lines > 1)
                return unit_error(ur->diags, ur->origin, ur->first_line,
                                  xstrdup("more than one ExecStart= (a oneshot "
                                          "service does not run etcd)"));
        char *why = NULL;
        int k = take_exec(u, value, &why);
        if (k < 0)
                k = unit_error(ur->diags, ur->origin, ur->first_line,
                               xasprintf("ExecStart=: %s", why));
        free(why);
        return k;
}

/* Environment=: NAME=VALUE words (an empty value resets them). */
static int read_environment(unit_reader *ur, hosts_unit *u, const char *value)
{
        if (!*value) {
                strv_reset(&u->environment, &u->n_environment);
                return 0;
        }
        char *why = NULL;
        size_t before = u->n_environment;
        int k = split_words(value, &u->environment, &u->n_environment, &why);
        for (size_t i = before; k >= 0 && i < u->n_environment; i++) {
                const char *a = u->environment[i], *aeq = strchr(a, '=');
                if (!aeq || !valid_env_name(a, (size_t)(aeq - a))) {
                        why = xasprintf("\"%s\" is not NAME=VALUE", a);
                        k = -EINVAL;
                }
        }
        if (k < 0)
                k = unit_error(ur->diags, ur->origin, ur->first_line,
                               xasprintf("Environment=: %s", why));
        free(why);
        return k;
}

/* EnvironmentFile=: an absolute path, optional with a leading - (an empty value resets them). */
static int read_environment_file(unit_reader *ur, hosts_unit *u, const char *value)
{
        if (!*value) {
                strv_reset(&u->env_files, &u->n_env_files);
                return 0;
        }
        bool optional = value[0] == '-';
        const char *path = value + optional;
        if (path[0] != '/')
                return unit_error(ur->diags, ur->origin, ur->first_line,
                                  xasprintf("EnvironmentFile=%s is not an absolute "
                                            "path",
                                            value));
        if (u->n_env_files >= UNIT_MAX_FILES)
                return unit_error(ur->diags, ur->origin, ur->first_line,
                                  xasprintf("more than %u EnvironmentFile= lines", UNIT_MAX_FILES));
        u->env_file_optional = xrealloc(u->env_file_optional, (u->n_env_files + 1) * sizeof(bool));
        u->env_file_optional[u->n_env_files] = optional;
        strv_push(&u->env_files, &u->n_env_files, xstrdup(path));
        return 0;
}

/* A Key=Value line of [Service]: the keys gitcd reads, the others passed over. */
static int read_service_line(unit_reader *ur, hosts_unit *u, const char *l, const char *eq,
                             const hosts_unit_context *ctx)
{
        size_t klen = (size_t)(eq - l);
        while (klen > 0 && isspace((unsigned char)l[klen - 1]))
                klen--;
        const char *raw = eq + 1;
        while (isspace((unsigned char)*raw))
                raw++;
        bool is_exec = klen == 9 && strneq(l, "ExecStart", 9);
        bool is_env = klen == 11 && strneq(l, "Environment", 11);
        bool is_file = klen == 15 && strneq(l, "EnvironmentFile", 15);
        bool is_user = klen == 4 && strneq(l, "User", 4);
        if (!is_exec && !is_env && !is_file && !is_user)
                return 0;
        char *why = NULL;
        _cleanup_free_ char *value = resolve_specifiers(raw, ctx, &why);
        if (!value)
                return unit_error(ur->diags, ur->origin, ur->first_line, why);
        if (is_exec)
                return read_exec(ur, u, value);
        if (is_env)
                return read_environment(ur, u, value);
        if (is_file)
                return read_environment_file(ur, u, value);
        str_assign(&u->user, *value ? xstrdup(value) : NULL);
        return 0;
}

int hosts_unit_parse(const char *origin, const char *text, size_t len,
                     const hosts_unit_context *ctx, hosts_unit *ret, diag_list *diags)
{
        if (len > UNIT_MAX_BYTES)
                return unit_error(diags, origin, 0,
                                  xasprintf("the unit is larger than %u bytes", UNIT_MAX_BYTES));
        if (memchr(text, '\0', len))
                return unit_error(diags, origin, 0, xstrdup("the unit holds a NUL byte"));
        hosts_unit u = {0};
        unit_reader ur = {.origin = origin, .diags = diags};
        int k = 0;
        bool in_service = false;
        const char *p = text, *end = text + len;
        int line = 0;
        strbuf logical = STRBUF_INIT;
        while (p < end && k >= 0) {
                ur.first_line = next_logical_line(&p, end, &line, &logical);
                const char *l = sb_str(&logical);
                if (!*l || *l == '#' || *l == ';')
                        continue;
                if (*l == '[') {
                        const char *close = strchr(l, ']');
                        if (!close || close[1]) {
                                k = unit_error(diags, origin, ur.first_line,
                                               xstrdup("a section header without its ]"));
                                break;
                        }
                        in_service = (size_t)(close - l) == 8 && strneq(l, "[Service", 8);
                        continue;
                }
                const char *eq = strchr(l, '=');
                if (!eq) {
                        k = unit_error(diags, origin, ur.first_line,
                                       xstrdup("a line that is neither a section nor Key=Value"));
                        break;
                }
                if (in_service)
                        k = read_service_line(&ur, &u, l, eq, ctx);
        }
        sb_release(&logical);
        if (k >= 0 && u.n_exec == 0)
                k = unit_error(diags, origin, 0,
                               xstrdup("the unit has no ExecStart= in [Service]"));
        if (k < 0) {
                hosts_unit_release(&u);
                return k;
        }
        hosts_unit_release(ret);
        *ret = u;
        return 0;
}

int hosts_env_file_parse(const char *origin, const char *text, size_t len, char ***env,
                         size_t *n_env, diag_list *diags)
{
        if (len > UNIT_MAX_BYTES)
                return unit_error(diags, origin, 0,
                                  xasprintf("the file is larger than %u bytes", UNIT_MAX_BYTES));
        if (memchr(text, '\0', len))
                return unit_error(diags, origin, 0, xstrdup("the file holds a NUL byte"));
        const char *p = text, *end = text + len;
        int line = 0;
        strbuf key = STRBUF_INIT, val = STRBUF_INIT;
        int k = 0;
        while (p < end) {
                line++;
                int first_line = line;
                while (p < end && *p != '\n' && isspace((unsigned char)*p))
                        p++;
                if (p < end && (*p == '#' || *p == ';' || *p == '\n')) {
                        const char *nl = memchr(p, '\n', (size_t)(end - p));
                        p = nl ? nl + 1 : end;
                        continue;
                }
                if (p >= end)
                        break;
                if ((size_t)(end - p) > 7 && strneq(p, "export", 6) &&
                    (p[6] == ' ' || p[6] == '\t')) {
                        p += 7;
                        while (p < end && (*p == ' ' || *p == '\t'))
                                p++;
                }
                sb_reset(&key);
                while (p < end && *p != '=' && *p != '\n')
                        sb_appendc(&key, *p++);
                while (key.len > 0 && isspace((unsigned char)key.buf[key.len - 1]))
                        key.len--, key.buf[key.len] = 0;
                bool has_eq = p < end && *p == '=';
                if (has_eq)
                        p++;
                while (p < end && (*p == ' ' || *p == '\t'))
                        p++;
                /* the value: quotes and backslashes as systemd's reader takes them */
                sb_reset(&val);
                size_t trail = 0; /* unquoted trailing whitespace, dropped at the end */
                while (p < end && *p != '\n') {
                        if (*p == '\'') {
                                const char *q = memchr(p + 1, '\'', (size_t)(end - p - 1));
                                if (!q) {
                                        k = unit_error(diags, origin, first_line,
                                                       xstrdup("a ' quote is not closed"));
                                        goto out;
                                }
                                for (const char *c = p + 1; c < q; c++)
                                        line += *c == '\n';
                                sb_append_len(&val, p + 1, (size_t)(q - p - 1));
                                p = q + 1;
                                trail = 0;
                        } else if (*p == '"') {
                                p++;
                                while (p < end && *p != '"') {
                                        if (*p == '\\' && p + 1 < end) {
                                                p++;
                                                if (*p == '\n') {
                                                        line++;
                                                        p++;
                                                        continue;
                                                }
                                                if (!strchr("\"\\`$", *p))
                                                        sb_appendc(&val, '\\');
                                        }
                                        line += *p == '\n';
                                        sb_appendc(&val, *p++);
                                }
                                if (p >= end) {
                                        k = unit_error(diags, origin, first_line,
                                                       xstrdup("a \" quote is not closed"));
                                        goto out;
                                }
                                p++;
                                trail = 0;
                        } else if (*p == '\\' && p + 1 < end) {
                                p++;
                                if (*p == '\n')
                                        line++;
                                else
                                        sb_appendc(&val, *p);
                                p++;
                                trail = 0;
                        } else {
                                trail = isspace((unsigned char)*p) ? trail + 1 : 0;
                                sb_appendc(&val, *p++);
                        }
                }
                if (p < end)
                        p++;
                val.len -= trail;
                if (val.buf)
                        val.buf[val.len] = 0;
                /* systemd ignores assignments it cannot use; so does etcd's view of them */
                if (!has_eq || !valid_env_name(sb_str(&key), key.len))
                        continue;
                if (*n_env >= UNIT_MAX_WORDS) {
                        k = unit_error(diags, origin, first_line,
                                       xasprintf("more than %u variables", UNIT_MAX_WORDS));
                        goto out;
                }
                strv_push(env, n_env, xasprintf("%s=%s", sb_str(&key), sb_str(&val)));
        }
out:
        sb_release(&key);
        sb_release(&val);
        return k;
}

/* The value of name in env ("K=V", the last one wins), or NULL. */
static const char *lookup(char *const *env, size_t n, const char *name, size_t nlen)
{
        const char *v = NULL;
        for (size_t i = 0; i < n; i++)
                if (strneq(env[i], name, nlen) && env[i][nlen] == '=')
                        v = env[i] + nlen + 1;
        return v;
}

/*
 * One ExecStart= word with its variables replaced: a word that is just
 * $NAME becomes the value's whitespace-separated words (none when unset
 * or empty), ${NAME} and $NAME inside a word the value, $$ a dollar.
 */
static int expand_word(const char *w, char *const *env, size_t n_env, char ***out, size_t *n_out,
                       size_t *budget, char **ret_why)
{
        size_t nlen = 0;
        if (w[0] == '$' && w[1] && w[1] != '{' && w[1] != '$') {
                nlen = strlen(w + 1);
                if (!valid_env_name(w + 1, nlen))
                        nlen = 0;
        }
        if (nlen) {
                const char *v = lookup(env, n_env, w + 1, nlen);
                size_t vl = v ? strlen(v) : 0;
                if (vl > *budget)
                        goto too_long;
                *budget -= vl;
                for (const char *p = v; p && *p;) {
                        while (*p && isspace((unsigned char)*p))
                                p++;
                        size_t l = 0;
                        while (p[l] && !isspace((unsigned char)p[l]))
                                l++;
                        if (!l)
                                break;
                        if (*n_out >= UNIT_MAX_WORDS)
                                goto too_long;
                        strv_push(out, n_out, xstrndup(p, l));
                        p += l;
                }
                return 0;
        }
        strbuf sb = STRBUF_INIT;
        for (const char *p = w; *p;) {
                if (p[0] != '$') {
                        sb_appendc(&sb, *p++);
                        continue;
                }
                if (p[1] == '$') {
                        sb_appendc(&sb, '$');
                        p += 2;
                        continue;
                }
                const char *name = p + 1 + (p[1] == '{');
                size_t l = 0;
                while (name[l] && (isalnum((unsigned char)name[l]) || name[l] == '_'))
                        l++;
                if (p[1] == '{' && name[l] != '}') {
                        sb_release(&sb);
                        *ret_why = xasprintf("\"%s\": a ${ without its closing }", w);
                        return -EINVAL;
                }
                if (!valid_env_name(name, l)) {
                        sb_appendc(&sb, *p++); /* a lone $ stays */
                        continue;
                }
                const char *v = lookup(env, n_env, name, l);
                size_t vl = v ? strlen(v) : 0;
                if (vl > *budget) {
                        sb_release(&sb);
                        goto too_long;
                }
                *budget -= vl;
                if (v)
                        sb_append(&sb, v);
                p = name + l + (p[1] == '{');
        }
        if (*n_out >= UNIT_MAX_WORDS) {
                sb_release(&sb);
                goto too_long;
        }
        strv_push(out, n_out, sb_detach(&sb));
        return 0;
too_long:
        *ret_why = xasprintf("the command line is longer than %u words or %u bytes once its "
                             "variables are replaced",
                             UNIT_MAX_WORDS, UNIT_MAX_EXPANDS);
        return -EINVAL;
}

int hosts_unit_command(const hosts_unit *u, char *const *env, size_t n_env, char ***ret,
                       char **ret_why)
{
        assert(u && ret && ret_why);
        char **argv = NULL, *why = NULL;
        size_t n_argv = 0, budget = UNIT_MAX_EXPANDS;
        int k = 0;
        for (size_t i = u->exec_argv0 ? 1 : 0; k >= 0 && i < u->n_exec; i++) {
                if (u->exec_expand)
                        k = expand_word(u->exec[i], env, n_env, &argv, &n_argv, &budget, &why);
                else
                        strv_push(&argv, &n_argv, xstrdup(u->exec[i]));
        }
        if (k < 0) {
                strv_free(argv);
                *ret_why = why;
                return k;
        }
        if (!argv)
                argv = xcalloc(1, sizeof(char *));
        *ret = argv;
        return 0;
}

int hosts_running_from_unit(const char *origin, const hosts_unit *u, char *const *file_env,
                            size_t n_file_env, hosts_running *r, diag_list *diags)
{
        /* the process's environment: Environment=, then the files' (which win) */
        char **env = NULL;
        size_t n_env = 0;
        for (size_t i = 0; i < u->n_environment; i++)
                strv_push(&env, &n_env, xstrdup(u->environment[i]));
        for (size_t i = 0; i < n_file_env; i++)
                strv_push(&env, &n_env, xstrdup(file_env[i]));
        char **argv = NULL, *why = NULL;
        int k = hosts_unit_command(u, env, n_env, &argv, &why);
        /* argv[0] is the program (with @, the name it is given); the flags follow */
        hosts_running out = {0};
        size_t n_argv = 0;
        while (argv && argv[n_argv])
                n_argv++;
        if (k >= 0)
                k = hosts_running_from_flags(n_argv ? argv + 1 : NULL, n_argv ? n_argv - 1 : 0, env,
                                             n_env, "default", &out, &why);
        strv_free(argv);
        strv_free(env);
        if (k < 0)
                return unit_error(diags, origin, 0, why);
        out.file = xstrdup(origin);
        hosts_running_release(r);
        *r = out;
        return 0;
}

static bool has_control(const char *s)
{
        for (const char *p = s; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                        return true;
        return false;
}

char *hosts_unit_word(const char *word)
{
        assert(word);
        if (has_control(word))
                return NULL;
        strbuf sb = STRBUF_INIT;
        sb_appendc(&sb, '"');
        for (const char *p = word; *p; p++) {
                if (*p == '\\' || *p == '"' || *p == '\'')
                        sb_appendc(&sb, '\\');
                else if (*p == '%' || *p == '$')
                        sb_appendc(&sb, *p);
                sb_appendc(&sb, *p);
        }
        sb_appendc(&sb, '"');
        return sb_detach(&sb);
}

/* A value systemd takes as it is but for its specifiers: '%' doubled. NULL with a control character. */
static char *unit_text_value(const char *value)
{
        if (has_control(value))
                return NULL;
        strbuf sb = STRBUF_INIT;
        for (const char *p = value; *p; p++) {
                if (*p == '%')
                        sb_appendc(&sb, '%');
                sb_appendc(&sb, *p);
        }
        return sb_detach(&sb);
}

int hosts_unit_render(const hosts_unit_meta *m, char *const *argv, char **ret_text, char **ret_why)
{
        assert(m && m->member && m->cluster && argv && ret_text && ret_why);
        const char *hash = m->config_hash ? m->config_hash : "";
        /*
         * systemd refuses a program path with quotes or a backslash and
         * replaces no variable in it: such a path is not written at all
         */
        if (!argv[0] || argv[0][0] != '/' || strpbrk(argv[0], "\\'\"$")) {
                *ret_why = xasprintf("the program \"%s\" is not an absolute path without quotes, "
                                     "'\\' or '$'",
                                     argv[0] ? argv[0] : "");
                return -EINVAL;
        }
        /* comment lines end at the newline; a value with one would start a line of its own */
        if (has_control(m->member) || has_control(hash) || has_control(m->cluster)) {
                *ret_why = xstrdup("the member, cluster or configuration hash holds a control "
                                   "character");
                return -EINVAL;
        }
        _cleanup_free_ char *description =
            xasprintf("etcd member %s of %s (managed by gitcd)", m->member, m->cluster);
        _cleanup_free_ char *desc = unit_text_value(description);
        assert(desc); /* checked above */
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, HOSTS_MEMBER_PREFIX "%s\n" HOSTS_HASH_PREFIX "%s\n", m->member, hash);
        sb_printf(&sb,
                  "[Unit]\nDescription=%s\n"
                  "After=network-online.target\nWants=network-online.target\n\n"
                  "[Service]\nType=notify\nExecStart=",
                  desc);
        for (size_t i = 0; argv[i]; i++) {
                _cleanup_free_ char *q = hosts_unit_word(argv[i]);
                if (!q) {
                        sb_release(&sb);
                        *ret_why =
                            xasprintf("word %zu of the command holds a control character", i);
                        return -EINVAL;
                }
                sb_printf(&sb, "%s%s", i ? " " : "", q);
        }
        sb_append(&sb, "\nRestart=always\nRestartSec=5\nLimitNOFILE=65536\n\n"
                       "[Install]\nWantedBy=multi-user.target\n");
        *ret_text = sb_detach(&sb);
        return 0;
}
