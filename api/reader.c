/*
 * The typed field reader shared by the five dialects; see api/reader.h.
 *
 * Design: type checking follows the YAML 1.2 core schema as api/yaml.c
 * classifies plain scalars (ynode_type_name), so "replicas: '3'" is a
 * string and an error, exactly as the Kubernetes API server would say.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

void rd_diag(reader *r, enum diag_severity sev, const ynode *at, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        int line = at ? at->line : r->c ? r->c->line : 0;
        int col = at ? at->col : r->c ? r->c->col : 0;
        diag_add(r->diags, sev, r->file, line, col, "%s", msg);
}

void rd_diag_at(reader *r, enum diag_severity sev, const char *native, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        int line = 0, col = 0;
        etcd_cluster_loc(r->c, native, &line, &col);
        diag_add(r->diags, sev, r->file, line, col, "%s", msg);
}

const char *rd_name(const reader *r, const char *native)
{
        const char *w = kv_get(&r->names, native);
        return w ? w : native;
}

void rd_record(reader *r, const char *native, const char *written, const ynode *key,
               const ynode *value)
{
        const ynode *at = value && value->kind == YNODE_SCALAR ? value : key ? key : value;
        if (at)
                etcd_cluster_set_loc(r->c, native, at->line, at->col);
        if (written && !streq(native, written))
                kv_set(&r->names, native, written);
}

char *rd_join(const char *parent, const char *key)
{
        if (isempty(parent))
                return xstrdup(key);
        return xasprintf("%s.%s", parent, key);
}

static bool in_list(const char *const *list, const char *s)
{
        for (size_t i = 0; list && list[i]; i++)
                if (streq(list[i], s))
                        return true;
        return false;
}

void rd_keys(reader *r, const ynode *map, const char *path, const char *const *known,
             const char *const *ignored)
{
        if (!map || map->kind != YNODE_MAP)
                return;
        for (size_t i = 0; i < map->n; i++) {
                const ynode *k = map->keys[i];
                const char *name = k->str ? k->str : "";
                if (in_list(known, name))
                        continue;
                if (in_list(ignored, name)) {
                        _cleanup_free_ char *p = rd_join(path, name);
                        rd_warning(r, k, "%s is not supported by gitcd and is ignored", p);
                        continue;
                }
                /* Suggest among everything the dialect knows here. */
                const char *all[128];
                size_t n = 0;
                for (size_t j = 0; known && known[j] && n < ARRAY_SIZE(all) - 1; j++)
                        all[n++] = known[j];
                for (size_t j = 0; ignored && ignored[j] && n < ARRAY_SIZE(all) - 1; j++)
                        all[n++] = ignored[j];
                all[n] = NULL;
                const char *best = closest_word(name, all);
                if (best)
                        rd_error(r, k, "unknown field \"%s\"; did you mean \"%s\"?", name, best);
                else if (isempty(path))
                        rd_error(r, k, "unknown field \"%s\"", name);
                else
                        rd_error(r, k, "unknown field \"%s\" in %s", name, path);
        }
}

const ynode *rd_get(const ynode *map, const char *key, const ynode **ret_key)
{
        if (!map || map->kind != YNODE_MAP)
                return NULL;
        for (size_t i = 0; i < map->n; i++) {
                if (map->keys[i]->str && streq(map->keys[i]->str, key)) {
                        if (ynode_is_null(map->values[i]))
                                return NULL;
                        if (ret_key)
                                *ret_key = map->keys[i];
                        return map->values[i];
                }
        }
        return NULL;
}

static const char *a_or_an(const char *type)
{
        return strchr("aeiou", type[0]) ? "an" : "a";
}

void rd_type_error(reader *r, const ynode *at, const char *path, const char *what)
{
        const char *got = ynode_type_name(at);
        rd_error(r, at, "%s: expected %s, got %s %s", path, what, a_or_an(got), got);
}

/* Look the field up, record it, and return it; *ret_path is the written path. */
static const ynode *field(reader *r, const ynode *map, const char *parent, const char *key,
                          const char *native, char **ret_path)
{
        const ynode *k = NULL;
        const ynode *v = rd_get(map, key, &k);
        if (!v)
                return NULL;
        char *path = rd_join(parent, key);
        rd_record(r, native ? native : path, path, k, v);
        *ret_path = path;
        return v;
}

bool rd_map(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
            const ynode **ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != YNODE_MAP) {
                rd_type_error(r, v, path, "a mapping");
                return false;
        }
        *ret = v;
        return true;
}

bool rd_string(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
               char **ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != YNODE_SCALAR || !streq(ynode_type_name(v), "string")) {
                rd_type_error(r, v, path, "a string");
                return false;
        }
        if (strlen(v->str) != v->len) {
                rd_error(r, v, "%s: the string contains a NUL byte", path);
                return false;
        }
        free(*ret);
        *ret = xstrdup(v->str);
        return true;
}

bool rd_scalar(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
               char **ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != YNODE_SCALAR || strlen(v->str) != v->len) {
                rd_type_error(r, v, path, "a string");
                return false;
        }
        free(*ret);
        *ret = xstrdup(v->str);
        return true;
}

/* A core-schema integer: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+. */
static int parse_int(const char *s, int64_t *ret)
{
        const char *p = s;
        bool neg = false;
        int base = 10;
        if (*p == '-' || *p == '+')
                neg = *p++ == '-';
        if (p[0] == '0' && (p[1] == 'o' || p[1] == 'x') && p == s) {
                base = p[1] == 'o' ? 8 : 16;
                p += 2;
        }
        if (!*p)
                return -EINVAL;
        __int128 v = 0;
        for (; *p; p++) {
                int d;
                if (*p >= '0' && *p <= '9')
                        d = *p - '0';
                else if (base == 16 && isxdigit((unsigned char)*p))
                        d = tolower((unsigned char)*p) - 'a' + 10;
                else
                        return -EINVAL;
                if (d >= base)
                        return -EINVAL;
                v = v * base + d;
                if (v > ((__int128)1 << 63))
                        return -ERANGE;
        }
        if (neg)
                v = -v;
        if (v > INT64_MAX || v < INT64_MIN)
                return -ERANGE;
        *ret = (int64_t)v;
        return 0;
}

bool rd_int(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
            int64_t min, int64_t max, int64_t *ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != YNODE_SCALAR || !streq(ynode_type_name(v), "integer")) {
                rd_type_error(r, v, path, "an integer");
                return false;
        }
        int64_t x;
        if (parse_int(v->str, &x) < 0 || x < min || x > max) {
                if (min <= INT32_MIN)
                        rd_error(r, v, "%s: %s is out of range", path, v->str);
                else if (max >= INT32_MAX)
                        rd_error(r, v, "%s: %s is out of range (must be at least %lld)", path,
                                 v->str, (long long)min);
                else
                        rd_error(r, v, "%s: %s is out of range (%lld to %lld)", path, v->str,
                                 (long long)min, (long long)max);
                return false;
        }
        *ret = x;
        return true;
}

bool rd_bool(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
             bool *ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != YNODE_SCALAR || !streq(ynode_type_name(v), "boolean")) {
                rd_type_error(r, v, path, "a boolean");
                return false;
        }
        *ret = v->str[0] == 't' || v->str[0] == 'T';
        return true;
}

bool rd_quantity(reader *r, const ynode *map, const char *parent, const char *key,
                 const char *native, char **ret_text, int64_t *ret_bytes)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        const char *type = ynode_type_name(v);
        if (v->kind != YNODE_SCALAR ||
            (!streq(type, "string") && !streq(type, "integer") && !streq(type, "number"))) {
                rd_type_error(r, v, path, "a quantity such as \"10Gi\"");
                return false;
        }
        int64_t bytes;
        int q = quantity_parse(v->str, &bytes);
        if (q == -ERANGE && v->str[0] == '-') {
                rd_error(r, v, "%s: quantity \"%s\" must not be negative", path, v->str);
                return false;
        }
        if (q == -ERANGE) {
                rd_error(r, v, "%s: quantity \"%s\" is too large", path, v->str);
                return false;
        }
        if (q < 0) {
                rd_error(r, v,
                         "%s: \"%s\" is not a Kubernetes quantity (for example 10Gi, 500M or "
                         "1073741824)",
                         path, v->str);
                return false;
        }
        free(*ret_text);
        *ret_text = xstrdup(v->str);
        *ret_bytes = bytes;
        return true;
}

bool rd_enum(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
             const char *const *values, int *ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != YNODE_SCALAR || !streq(ynode_type_name(v), "string")) {
                rd_type_error(r, v, path, "a string");
                return false;
        }
        for (int i = 0; values[i]; i++) {
                if (streq(values[i], v->str)) {
                        *ret = i;
                        return true;
                }
        }
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; values[i]; i++)
                sb_printf(&sb, "%s%s", i ? ", " : "", values[i]);
        const char *best = closest_word(v->str, values);
        if (best)
                rd_error(r, v, "%s: \"%s\" is not one of %s; did you mean \"%s\"?", path, v->str,
                         sb_str(&sb), best);
        else
                rd_error(r, v, "%s: \"%s\" is not one of %s", path, v->str, sb_str(&sb));
        sb_release(&sb);
        return false;
}

bool rd_kv(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
           bool label_values, kv_list *ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != YNODE_MAP) {
                rd_type_error(r, v, path, "a mapping of strings");
                return false;
        }
        bool ok = true;
        kv_list l = {0};
        for (size_t i = 0; i < v->n; i++) {
                const ynode *k = v->keys[i], *val = v->values[i];
                if (!k->str || !k8s_qualified_name_valid(k->str)) {
                        rd_error(r, k,
                                 "%s: \"%s\" is not a valid key (a name of up to 63 "
                                 "characters [A-Za-z0-9-_.], with an optional DNS prefix "
                                 "and \"/\")",
                                 path, k->str ? k->str : "");
                        ok = false;
                        continue;
                }
                if (val->kind != YNODE_SCALAR || !streq(ynode_type_name(val), "string")) {
                        _cleanup_free_ char *p = rd_join(path, k->str);
                        rd_type_error(r, val, p, "a string (quote it)");
                        ok = false;
                        continue;
                }
                if (label_values && !k8s_label_value_valid(val->str)) {
                        _cleanup_free_ char *p = rd_join(path, k->str);
                        rd_error(r, val,
                                 "%s: \"%s\" is not a valid label value (up to 63 characters "
                                 "[A-Za-z0-9-_.], beginning and ending with a letter or digit)",
                                 p, val->str);
                        ok = false;
                        continue;
                }
                kv_set(&l, k->str, val->str);
        }
        if (!ok) {
                kv_list_release(&l);
                return false;
        }
        for (size_t i = 0; i < l.n; i++)
                kv_set(ret, l.items[i].key, l.items[i].value);
        kv_list_release(&l);
        return true;
}

bool rd_json(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
             bool object, json_t **ret)
{
        _cleanup_free_ char *path = NULL;
        const ynode *v = field(r, map, parent, key, native, &path);
        if (!v)
                return false;
        if (v->kind != (object ? YNODE_MAP : YNODE_SEQ)) {
                rd_type_error(r, v, path, object ? "a mapping" : "a sequence");
                return false;
        }
        json_t *j = ynode_to_json(v);
        if (!j) {
                rd_error(r, v, "%s: cannot be represented as JSON", path);
                return false;
        }
        json_decref(*ret);
        *ret = j;
        return true;
}

bool rd_ref(reader *r, const ynode *map, const char *parent, const char *key, const char *native,
            char **ret)
{
        const ynode *m = NULL;
        if (!rd_map(r, map, parent, key, native, &m))
                return false;
        _cleanup_free_ char *path = rd_join(parent, key);
        static const char *const known[] = {"name", NULL};
        rd_keys(r, m, path, known, NULL);
        char *name = NULL;
        if (!rd_string(r, m, path, "name", native ? native : path, &name)) {
                if (!rd_get(m, "name", NULL))
                        rd_error(r, m, "%s.name is required", path);
                return false;
        }
        /* Messages name the reference ("...secretRef"), not its name field. */
        kv_set(&r->names, native ? native : path, path);
        free(*ret);
        *ret = name;
        return true;
}

int duration_parse_ms(const char *s, int64_t *ret_ms)
{
        /* The spec wants a unit on every number: a bare "30" is not a duration there. */
        if (isempty(s) || s[strspn(s, "0123456789")] == '\0')
                return -EINVAL;
        return parse_duration_ms(s, ret_ms);
}

static void check_controls(reader *r, const ynode *n, const char *path, size_t *budget)
{
        if (!n || *budget == 0)
                return;
        if (n->kind == YNODE_SCALAR) {
                for (size_t i = 0; n->str && i < n->len; i++) {
                        unsigned char ch = (unsigned char)n->str[i];
                        if (ch >= 0x20 && ch != 0x7f)
                                continue;
                        (*budget)--;
                        rd_error(r, n,
                                 "%s: a control character (0x%02x) is not allowed in a spec: "
                                 "every value lies on one line",
                                 *path ? path : "the document", ch);
                        return;
                }
                return;
        }
        for (size_t i = 0; i < n->n; i++) {
                _cleanup_free_ char *child = NULL;
                if (n->kind == YNODE_MAP) {
                        const ynode *k = n->keys[i];
                        const char *key = k && k->str ? k->str : "";
                        child = rd_join(path, key);
                        if (k && k->kind == YNODE_SCALAR && k->str &&
                            str_has_control(k->str, k->len)) {
                                (*budget)--;
                                rd_error(r, k,
                                         "%s: a key with a control character is not allowed in "
                                         "a spec",
                                         *path ? path : "the document");
                                continue;
                        }
                } else {
                        child = xasprintf("%s[%zu]", path, i);
                }
                check_controls(r, n->values[i], child, budget);
        }
}

void rd_check_controls(reader *r, const ynode *root)
{
        size_t budget = 20; /* the first twenty say enough */
        check_controls(r, root, "", &budget);
}
