/*
 * Syntax of the small value types an EtcdCluster is made of: Kubernetes
 * quantities, DNS-1123 names, label keys and values, cron schedules (checked,
 * and evaluated for api/cron.h from the same field table), the edit
 * distance used for "did you mean" suggestions, and the values that reach
 * a machine: host names and addresses, URLs, image repositories (the OCI
 * reference grammar) and paths (spec_path_check, with the system folders
 * a folder gitcd owns may never be).
 *
 * Design for the last: each value is checked for what it is, from a
 * conservative character set, rather than escaped for where it goes, so a
 * value that passes means the same in a command line, a unit file, a
 * manifest and a shell command; the writers escape all the same.
 *
 * Design: quantities are computed exactly with 128-bit integers (a
 * numerator and a power-of-ten denominator) and rounded up at the end, the
 * way Kubernetes rounds a quantity to whole bytes; no floating point, so
 * "0.1Gi" means the same on every machine.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "api/cron.h"
#include "api/internal.h"
#include "api/spec.h"
#include "util/xalloc.h"

typedef unsigned __int128 u128;

#define U128_LIMIT (((u128)1) << 120)

/*
 * Parse sign, digits, fraction and suffix; the value is
 * num / den, scaled by `scale` (1 for bytes, 1000 for millis).
 */
static int quantity_parse_scaled(const char *s, u128 scale, int64_t *ret)
{
        const char *p = s;
        u128 num = 0, den = 1;
        size_t digits = 0;

        if (!s || !*s)
                return -EINVAL;
        bool negative = false;
        if (*p == '+' || *p == '-')
                negative = *p++ == '-';
        if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
                return -EINVAL;
        while (isdigit((unsigned char)*p)) {
                if (++digits > 30)
                        return -ERANGE;
                num = num * 10 + (u128)(*p++ - '0');
        }
        if (*p == '.') {
                p++;
                if (!isdigit((unsigned char)*p))
                        return -EINVAL;
                while (isdigit((unsigned char)*p)) {
                        if (++digits > 30)
                                return -ERANGE;
                        num = num * 10 + (u128)(*p++ - '0');
                        den *= 10;
                }
        }

        static const struct {
                const char *suffix;
                int shift; /* power of two */
                int exp10; /* power of ten */
        } suffixes[] = {
            {"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0},
            {"Pi", 50, 0}, {"Ei", 60, 0}, {"n", 0, -9},  {"u", 0, -6},
            {"m", 0, -3},  {"k", 0, 3},   {"M", 0, 6},   {"G", 0, 9},
            {"T", 0, 12},  {"P", 0, 15},  {"E", 0, 18},  {"", 0, 0},
        };
        int shift = 0, exp10 = 0;
        bool found = false;
        if (*p == 'e' || *p == 'E') {
                /* Decimal exponent: e3, E-2. ("E" alone is exa, handled below.) */
                const char *q = p + 1;
                bool eneg = false;
                if (*q == '+' || *q == '-')
                        eneg = *q++ == '-';
                if (isdigit((unsigned char)*q)) {
                        int e = 0;
                        while (isdigit((unsigned char)*q)) {
                                e = e * 10 + (*q++ - '0');
                                if (e > 40)
                                        return -ERANGE;
                        }
                        if (*q != '\0')
                                return -EINVAL;
                        exp10 = eneg ? -e : e;
                        found = true;
                }
        }
        for (size_t i = 0; !found && i < ARRAY_SIZE(suffixes); i++) {
                if (streq(p, suffixes[i].suffix)) {
                        shift = suffixes[i].shift;
                        exp10 = suffixes[i].exp10;
                        found = true;
                }
        }
        if (!found)
                return -EINVAL;
        if (negative && num != 0)
                return -ERANGE;

        num *= scale;
        for (int i = 0; i < shift; i++) {
                num <<= 1;
                if (num >= U128_LIMIT)
                        return -ERANGE;
        }
        for (int i = 0; i < exp10; i++) {
                num *= 10;
                if (num >= U128_LIMIT)
                        return -ERANGE;
        }
        for (int i = 0; i > exp10; i--) {
                den *= 10;
                if (den >= U128_LIMIT)
                        return -ERANGE;
        }
        u128 v = (num + den - 1) / den;
        if (v > (u128)INT64_MAX)
                return -ERANGE;
        *ret = (int64_t)v;
        return 0;
}

int quantity_parse(const char *s, int64_t *ret_value)
{
        return quantity_parse_scaled(s, 1, ret_value);
}

int quantity_parse_millis(const char *s, int64_t *ret_millis)
{
        return quantity_parse_scaled(s, 1000, ret_millis);
}

static bool is_lower_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool label_span_valid(const char *s, size_t n)
{
        if (n == 0 || n > 63)
                return false;
        if (!is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_lower_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

bool dns1123_label_valid(const char *s)
{
        return s && label_span_valid(s, strlen(s));
}

bool dns1123_subdomain_valid(const char *s)
{
        if (!s)
                return false;
        size_t n = strlen(s);
        if (n == 0 || n > 253)
                return false;
        const char *p = s;
        for (;;) {
                const char *dot = strchr(p, '.');
                size_t len = dot ? (size_t)(dot - p) : strlen(p);
                if (!label_span_valid(p, len))
                        return false;
                if (!dot)
                        return true;
                p = dot + 1;
        }
}

static bool is_alnum(char c)
{
        return isalnum((unsigned char)c) && (unsigned char)c < 128;
}

static bool name_part_valid(const char *s, size_t n)
{
        if (n == 0 || n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

bool k8s_qualified_name_valid(const char *s)
{
        if (!s)
                return false;
        const char *slash = strchr(s, '/');
        if (!slash)
                return name_part_valid(s, strlen(s));
        _cleanup_free_ char *prefix = xstrndup(s, (size_t)(slash - s));
        return dns1123_subdomain_valid(prefix) && name_part_valid(slash + 1, strlen(slash + 1));
}

bool k8s_label_value_valid(const char *s)
{
        return s && (*s == '\0' || name_part_valid(s, strlen(s)));
}

size_t edit_distance(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        if (la > 64 || lb > 64)
                return SIZE_MAX;
        size_t row[65];
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag_prev = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t cost =
                            tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1])
                                ? 0
                                : 1;
                        size_t best = diag_prev + cost;
                        if (row[j] + 1 < best)
                                best = row[j] + 1;
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        row[j] = best;
                        diag_prev = up;
                }
        }
        return row[lb];
}

const char *closest_word(const char *word, const char *const *candidates)
{
        const char *best = NULL;
        size_t best_d = SIZE_MAX;
        size_t len = strlen(word);
        size_t limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
        for (size_t i = 0; candidates[i]; i++) {
                size_t d = edit_distance(word, candidates[i]);
                if (d < best_d) {
                        best_d = d;
                        best = candidates[i];
                }
        }
        return best_d <= limit ? best : NULL;
}

/* ---- cron ---- */

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const dow_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

typedef struct cron_field {
        const char *what;
        int min;
        int max;
        const char *const *names; /* names[i] means min + i */
        size_t n_names;
} cron_field;

static const cron_field cron_fields[5] = {
    {"minute", 0, 59, NULL, 0},          {"hour", 0, 23, NULL, 0},
    {"day of month", 1, 31, NULL, 0},    {"month", 1, 12, month_names, 12},
    {"day of week", 0, 7, dow_names, 7},
};

/* A number or a name at *pp; advances. -EINVAL when neither. */
static int cron_value(const cron_field *f, const char **pp, int *ret)
{
        const char *p = *pp;
        if (isdigit((unsigned char)*p)) {
                int v = 0;
                while (isdigit((unsigned char)*p)) {
                        v = v * 10 + (*p++ - '0');
                        if (v > 1000)
                                return -EINVAL;
                }
                *pp = p;
                *ret = v;
                return 0;
        }
        for (size_t i = 0; i < f->n_names; i++) {
                if (strncasecmp(p, f->names[i], 3) == 0) {
                        *pp = p + 3;
                        *ret = f->min + (int)i;
                        if (f->names == dow_names)
                                *ret = (int)i;
                        return 0;
                }
        }
        return -EINVAL;
}

/*
 * One list item ("*", "5", "1-5", "mon-fri", each optionally "/step").
 * 0; -EINVAL when malformed; -ERANGE when out of range (or backwards, with
 * *ret_backwards set).
 */
static int cron_check_item(const cron_field *f, const char *item, bool *ret_backwards)
{
        const char *p = item;
        if (*p == '*') {
                p++;
        } else {
                int lo, hi;
                if (cron_value(f, &p, &lo) < 0)
                        return -EINVAL;
                hi = lo;
                if (*p == '-') {
                        p++;
                        if (cron_value(f, &p, &hi) < 0)
                                return -EINVAL;
                }
                if (lo < f->min || lo > f->max || hi < f->min || hi > f->max)
                        return -ERANGE;
                if (hi < lo) {
                        *ret_backwards = true;
                        return -ERANGE;
                }
        }
        if (*p == '/') {
                p++;
                int step;
                if (!isdigit((unsigned char)*p) || cron_value(f, &p, &step) < 0 || step < 1 ||
                    step > f->max)
                        return -EINVAL;
        }
        return *p == '\0' ? 0 : -EINVAL;
}

static int cron_check_field(const cron_field *f, const char *text, char **ret_why)
{
        size_t n = strlen(text);
        if (n == 0 || text[0] == ',' || text[n - 1] == ',' || strstr(text, ",,")) {
                *ret_why = xasprintf("%s field \"%s\" is not valid", f->what, text);
                return -EINVAL;
        }
        _cleanup_free_ char *copy = xstrdup(text);
        char *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                bool backwards = false;
                int r = cron_check_item(f, item, &backwards);
                if (r == 0)
                        continue;
                if (backwards)
                        *ret_why = xasprintf("%s range \"%s\" runs backwards", f->what, item);
                else if (r == -ERANGE)
                        *ret_why = xasprintf("%s \"%s\" is out of range %d-%d", f->what, item,
                                             f->min, f->max);
                else
                        *ret_why = xasprintf("%s field \"%s\" is not valid", f->what, text);
                return -EINVAL;
        }
        return 0;
}

int cron_check(const char *expr, char **ret_why)
{
        char *fields[6];
        size_t n = 0;
        _cleanup_free_ char *copy = xstrdup(expr ? expr : "");
        char *save = NULL;
        for (char *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
                if (n == 6)
                        break;
                fields[n++] = t;
        }
        if (n != 5) {
                *ret_why = xasprintf("a cron schedule has 5 fields (minute hour day-of-month "
                                     "month day-of-week), got %s%zu",
                                     n == 6 ? "more than " : "", n == 6 ? (size_t)5 : n);
                return -EINVAL;
        }
        for (size_t i = 0; i < 5; i++) {
                int r = cron_check_field(&cron_fields[i], fields[i], ret_why);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- cron evaluation (api/cron.h) ---- */

/* Set the bits of one valid field ("*", lists, ranges, steps, names); cron_check passed. */
static uint64_t cron_field_bits(const cron_field *f, const char *text, bool *ret_star)
{
        uint64_t bits = 0;
        *ret_star = text[0] == '*';
        _cleanup_free_ char *copy = xstrdup(text);
        char *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                const char *p = item;
                int lo = f->min, hi = f->max, step = 1;
                if (*p == '*') {
                        p++;
                } else {
                        (void)cron_value(f, &p, &lo);
                        hi = lo;
                        if (*p == '-') {
                                p++;
                                (void)cron_value(f, &p, &hi);
                        }
                }
                if (*p == '/') {
                        p++;
                        (void)cron_value(f, &p, &step);
                        if (item[0] != '*' && !strchr(item, '-'))
                                hi = f->max; /* "5/15": from 5 to the end, like cron */
                }
                /* cron_check() refused anything out of range; stay inside all the same. */
                if (lo < 0 || hi > 63 || step < 1 || step > 64)
                        continue;
                for (int v = lo; v <= hi; v += step)
                        bits |= UINT64_C(1) << v;
        }
        return bits;
}

int cron_parse(const char *expr, cron_expr *ret)
{
        _cleanup_free_ char *why = NULL;
        if (cron_check(expr, &why) < 0)
                return -EINVAL;
        char *fields[5];
        size_t n = 0;
        _cleanup_free_ char *copy = xstrdup(expr);
        char *save = NULL;
        for (char *t = strtok_r(copy, " \t", &save); t && n < 5; t = strtok_r(NULL, " \t", &save))
                fields[n++] = t;
        assert(n == 5);
        cron_expr e = {0};
        bool star;
        e.minutes = cron_field_bits(&cron_fields[0], fields[0], &star);
        e.hours = (uint32_t)cron_field_bits(&cron_fields[1], fields[1], &star);
        e.mdays = (uint32_t)cron_field_bits(&cron_fields[2], fields[2], &e.mday_star);
        e.months = (uint16_t)cron_field_bits(&cron_fields[3], fields[3], &star);
        uint64_t w = cron_field_bits(&cron_fields[4], fields[4], &e.wday_star);
        e.wdays = (uint8_t)((w | (w >> 7)) & 0x7f); /* 7 is Sunday */
        *ret = e;
        return 0;
}

static bool cron_day_ok(const cron_expr *e, const struct tm *tm)
{
        bool md = e->mdays & (UINT32_C(1) << tm->tm_mday);
        bool wd = e->wdays & (1u << tm->tm_wday);
        if (e->mday_star || e->wday_star)
                return md && wd;
        return md || wd;
}

bool cron_matches(const cron_expr *e, int64_t t_ms)
{
        time_t t = (time_t)(t_ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        return (e->months & (1u << (tm.tm_mon + 1))) && cron_day_ok(e, &tm) &&
               (e->hours & (UINT32_C(1) << tm.tm_hour)) &&
               (e->minutes & (UINT64_C(1) << tm.tm_min));
}

#define CRON_HORIZON_MS ((int64_t)5 * 366 * 24 * 3600 * 1000)

/* Floor to a whole minute (also for times before the epoch). */
static int64_t minute_floor(int64_t t_ms)
{
        int64_t m = t_ms / 60000;
        if (t_ms < 0 && t_ms % 60000)
                m--;
        return m * 60000;
}

int cron_next(const cron_expr *e, int64_t t_ms, int64_t *ret_ms)
{
        int64_t t = minute_floor(t_ms) + 60000, limit = t + CRON_HORIZON_MS;
        while (t <= limit) {
                time_t s = (time_t)(t / 1000);
                struct tm tm;
                gmtime_r(&s, &tm);
                tm.tm_sec = 0;
                if (!(e->months & (1u << (tm.tm_mon + 1)))) {
                        tm.tm_mon++, tm.tm_mday = 1, tm.tm_hour = 0, tm.tm_min = 0;
                        t = (int64_t)timegm(&tm) * 1000;
                } else if (!cron_day_ok(e, &tm)) {
                        tm.tm_mday++, tm.tm_hour = 0, tm.tm_min = 0;
                        t = (int64_t)timegm(&tm) * 1000;
                } else if (!(e->hours & (UINT32_C(1) << tm.tm_hour))) {
                        tm.tm_hour++, tm.tm_min = 0;
                        t = (int64_t)timegm(&tm) * 1000;
                } else if (!(e->minutes & (UINT64_C(1) << tm.tm_min))) {
                        t += 60000;
                } else {
                        *ret_ms = t;
                        return 0;
                }
        }
        return -ERANGE;
}

int cron_prev(const cron_expr *e, int64_t t_ms, int64_t *ret_ms)
{
        int64_t t = minute_floor(t_ms), limit = t - CRON_HORIZON_MS;
        while (t >= limit) {
                time_t s = (time_t)(t / 1000);
                struct tm tm;
                gmtime_r(&s, &tm);
                tm.tm_sec = 0, tm.tm_min = 0;
                if (!(e->months & (1u << (tm.tm_mon + 1)))) {
                        tm.tm_mday = 1, tm.tm_hour = 0;
                        t = (int64_t)timegm(&tm) * 1000 - 60000;
                } else if (!cron_day_ok(e, &tm)) {
                        tm.tm_hour = 0;
                        t = (int64_t)timegm(&tm) * 1000 - 60000;
                } else if (!(e->hours & (UINT32_C(1) << tm.tm_hour))) {
                        t = (int64_t)timegm(&tm) * 1000 - 60000;
                } else if (!(e->minutes & (UINT64_C(1) << (t / 60000 % 60 + 60) % 60))) {
                        t -= 60000;
                } else {
                        *ret_ms = t;
                        return 0;
                }
        }
        return -ERANGE;
}

int cron_due(const cron_expr *e, int64_t last_slot_ms, int64_t now_ms, int64_t *ret_slot_ms,
             int64_t *ret_next_ms)
{
        int64_t prev = 0, next = 0;
        int r = cron_prev(e, now_ms, &prev);
        if (r == -ERANGE)
                prev = 0; /* no slot in the past five years; maybe one ahead */
        else if (r < 0)
                return r;
        r = cron_next(e, now_ms, &next);
        if (r < 0 && prev == 0)
                return -ERANGE;
        if (ret_next_ms)
                *ret_next_ms = r < 0 ? 0 : next;
        if (prev > 0 && prev > last_slot_ms) {
                *ret_slot_ms = prev;
                return 1;
        }
        return 0;
}

int cron_interval(const cron_expr *e, int64_t now_ms, int64_t *ret_ms)
{
        int64_t prev, next;
        int r = cron_prev(e, now_ms, &prev);
        if (r < 0)
                r = cron_next(e, now_ms, &prev);
        if (r < 0)
                return r;
        r = cron_next(e, prev, &next);
        if (r < 0)
                return r;
        *ret_ms = next - prev;
        return 0;
}

/* ---- addresses, URLs, image references, paths ---- */

bool ip_address_valid(const char *s)
{
        unsigned char buf[sizeof(struct in6_addr)];
        if (isempty(s) || strlen(s) > 45)
                return false;
        return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static bool is_ipv4(const char *s)
{
        unsigned char buf[sizeof(struct in_addr)];
        return s && inet_pton(AF_INET, s, buf) == 1;
}

/* One label of a host name: letters (either case), digits, '-' inside, at most 63. */
static bool host_label_valid(const char *s, size_t n)
{
        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

bool host_name_valid(const char *s)
{
        if (isempty(s) || strlen(s) > 253)
                return false;
        bool all_digits = true;
        for (const char *p = s;;) {
                const char *dot = strchr(p, '.');
                size_t len = dot ? (size_t)(dot - p) : strlen(p);
                if (!host_label_valid(p, len))
                        return false;
                if (!dot) {
                        /* the last label of a name is never all digits: 1.2.3.999 is no name */
                        for (size_t i = 0; i < len; i++)
                                all_digits = all_digits && isdigit((unsigned char)p[i]);
                        return !all_digits;
                }
                p = dot + 1;
        }
}

bool host_address_valid(const char *s)
{
        return ip_address_valid(s) || host_name_valid(s);
}

bool advertise_address_valid(const char *s)
{
        return is_ipv4(s) || host_name_valid(s);
}

/* "host" or "host:port", host a name, an IPv4 address or a [bracketed] IPv6 address. */
bool host_port_valid(const char *s, bool port_required)
{
        if (isempty(s) || strlen(s) > 300)
                return false;
        _cleanup_free_ char *host = NULL;
        const char *port = NULL;
        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close)
                        return false;
                host = xstrndup(s + 1, (size_t)(close - s - 1));
                if (!strchr(host, ':') || !ip_address_valid(host))
                        return false;
                if (close[1] == ':')
                        port = close + 2;
                else if (close[1])
                        return false;
        } else {
                const char *colon = strchr(s, ':');
                host = colon ? xstrndup(s, (size_t)(colon - s)) : xstrdup(s);
                port = colon ? colon + 1 : NULL;
                if (!is_ipv4(host) && !host_name_valid(host))
                        return false;
        }
        if (!port)
                return !port_required;
        size_t n = strspn(port, "0123456789");
        if (n == 0 || n > 5 || port[n] || port[0] == '0')
                return false;
        long v = strtol(port, NULL, 10);
        return v >= 1 && v <= 65535;
}

bool http_url_valid(const char *s, bool allow_path)
{
        if (isempty(s) || strlen(s) > 2048)
                return false;
        const char *rest = NULL;
        if (strneq(s, "http://", 7))
                rest = s + 7;
        else if (strneq(s, "https://", 8))
                rest = s + 8;
        else
                return false;
        size_t n = strcspn(rest, "/");
        _cleanup_free_ char *hostport = xstrndup(rest, n);
        if (!host_port_valid(hostport, false))
                return false;
        const char *path = rest + n;
        if (!*path)
                return true;
        if (!allow_path)
                return false;
        /* a path of unreserved characters and '/': nothing a URL parser reads as more */
        return strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            "-._~/") == strlen(path);
}

/* path-component of the OCI distribution reference grammar: [a-z0-9]+ ([._]|__|-+ [a-z0-9]+)* */
static bool image_path_component_valid(const char *s, size_t n)
{
        size_t i = 0;
        if (n == 0)
                return false;
        for (;;) {
                size_t run = 0;
                while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
                        i++, run++;
                if (run == 0)
                        return false;
                if (i == n)
                        return true;
                if (s[i] == '.')
                        i++;
                else if (s[i] == '_')
                        i += i + 1 < n && s[i + 1] == '_' ? 2 : 1;
                else if (s[i] == '-')
                        while (i < n && s[i] == '-')
                                i++;
                else
                        return false;
                if (i == n)
                        return false; /* a separator ends the component */
        }
}

bool image_repository_valid(const char *s)
{
        if (isempty(s) || strlen(s) > 255)
                return false;
        const char *p = s;
        const char *slash = strchr(s, '/');
        if (slash) {
                /* the first component is a registry when it has '.' or ':' or is localhost */
                _cleanup_free_ char *first = xstrndup(s, (size_t)(slash - s));
                if (strpbrk(first, ".:") || streq(first, "localhost")) {
                        if (!host_port_valid(first, false))
                                return false;
                        p = slash + 1;
                }
        }
        for (;;) {
                const char *next = strchr(p, '/');
                size_t len = next ? (size_t)(next - p) : strlen(p);
                if (!image_path_component_valid(p, len))
                        return false;
                if (!next)
                        return true;
                p = next + 1;
        }
}

bool str_has_control(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return true;
        return false;
}

/*
 * Folders of the machine's own system, which gitcd never takes as a
 * folder of its own (nor one of their parents: a dataDir of /usr's parent
 * would be /): deleting one, or mounting it into a Pod, takes the machine
 * with it. "/home/" stands for every home folder directly under /home.
 */
static const char *const system_dirs[] = {
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/etc/cron.d",
    "/etc/default",
    "/etc/init.d",
    "/etc/kubernetes",
    "/etc/kubernetes/manifests",
    "/etc/pam.d",
    "/etc/pki",
    "/etc/security",
    "/etc/ssh",
    "/etc/ssl",
    "/etc/sudoers.d",
    "/etc/systemd",
    "/etc/systemd/system",
    "/home",
    "/home/",
    "/lib",
    "/lib/modules",
    "/lib/systemd",
    "/lib/systemd/system",
    "/lib32",
    "/lib64",
    "/libx32",
    "/lost+found",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/root/.ssh",
    "/run",
    "/sbin",
    "/snap",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/include",
    "/usr/lib",
    "/usr/lib/systemd",
    "/usr/lib/systemd/system",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libexec",
    "/usr/local",
    "/usr/local/bin",
    "/usr/local/etc",
    "/usr/local/lib",
    "/usr/local/sbin",
    "/usr/local/share",
    "/usr/sbin",
    "/usr/share",
    "/usr/src",
    "/var",
    "/var/backups",
    "/var/cache",
    "/var/lib",
    "/var/lib/apt",
    "/var/lib/containerd",
    "/var/lib/docker",
    "/var/lib/dpkg",
    "/var/lib/kubelet",
    "/var/lib/systemd",
    "/var/local",
    "/var/lock",
    "/var/log",
    "/var/mail",
    "/var/opt",
    "/var/run",
    "/var/spool",
    "/var/tmp",
    NULL,
};

const char *const *spec_system_dirs(void)
{
        return system_dirs;
}

/* The system folder path is, or lies under (path is one of its parents); NULL when none. */
static const char *system_dir_at(const char *path)
{
        size_t n = strlen(path);
        for (size_t i = 0; system_dirs[i]; i++) {
                const char *d = system_dirs[i];
                size_t dn = strlen(d);
                if (d[dn - 1] == '/') {
                        /* every folder directly under d */
                        if (strneq(path, d, dn) && path[dn] && !strchr(path + dn, '/'))
                                return d;
                        continue;
                }
                if (streq(path, d) || (dn > n && strneq(d, path, n) && d[n] == '/'))
                        return d;
        }
        return NULL;
}

int spec_path_check(const char *path, spec_path_kind kind, char **ret_why)
{
        assert(ret_why);
        if (isempty(path) || path[0] != '/') {
                *ret_why = xstrdup("must be an absolute path");
                return -EINVAL;
        }
        size_t n = strlen(path);
        if (n > SPEC_PATH_MAX) {
                *ret_why = xasprintf("is longer than %d characters", SPEC_PATH_MAX);
                return -EINVAL;
        }
        if (streq(path, "/")) {
                *ret_why = xstrdup("is the root folder");
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++) {
                char ch = path[i];
                if (!is_alnum(ch) && !strchr("/._-+@", ch)) {
                        *ret_why = xstrdup("may hold only letters, digits, '/', '.', '_', '-', "
                                           "'+' and '@'");
                        return -EINVAL;
                }
        }
        if (strstr(path, "//") || path[n - 1] == '/') {
                *ret_why = xstrdup("must be written without \"//\" or a trailing '/'");
                return -EINVAL;
        }
        for (const char *c = path + 1;;) {
                size_t len = strcspn(c, "/");
                if ((len == 1 && c[0] == '.') || (len == 2 && strneq(c, "..", 2))) {
                        *ret_why = xstrdup("must be written without \".\" or \"..\"");
                        return -EINVAL;
                }
                if (!c[len])
                        break;
                c += len + 1;
        }
        if (kind != SPEC_PATH_OWNED)
                return 0;
        const char *sys = system_dir_at(path);
        if (!sys)
                return 0;
        const char *owns = "gitcd takes the folder it is given as its own (it may delete it, or "
                           "mount it into a Pod)";
        if (sys[strlen(sys) - 1] == '/')
                *ret_why = xasprintf("is a home folder, and %s", owns);
        else if (streq(sys, path))
                *ret_why = xasprintf("is a system folder, and %s", owns);
        else
                *ret_why = xasprintf("holds the system folder %s, and %s", sys, owns);
        return -EINVAL;
}
