/*
 * The hosts target's preflight of a machine, the pure half
 * (targets/hosts-preflight.h): the script is built from quoted words only
 * (ssh_quote), so a data directory never becomes syntax; the reader takes
 * the script's `key=value` lines strictly (a line it does not know is an
 * error, not skipped), since a machine's output is outside input.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "targets/hosts-preflight.h"
#include "targets/ssh.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static bool startswith(const char *s, const char *prefix)
{
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

char *preflight_script(const char *data_dir, const char *dd)
{
        _cleanup_free_ char *qd = ssh_quote(data_dir), *qdd = ssh_quote(dd ? dd : "dd");
        return xasprintf(
            "d=%s; mkdir -p -- \"$d\" || exit 1; f=\"$d/.gitcd-preflight.$$\"; "
            "echo 'gitcd-preflight 1'; echo \"kernel=$(uname -r)\"; "
            "echo \"fstype=$(stat -f -c %%T -- \"$d\")\"; "
            "echo \"free=$(df -B1 --output=avail -- \"$d\" | tail -n 1 | tr -d ' ')\"; "
            "i=0; while [ $i -lt 5 ]; do a=$(date +%%s%%N); "
            "timeout 2 %s if=/dev/zero of=\"$f\" bs=8k count=1 conv=notrunc 2>/dev/null; "
            "b=$(date +%%s%%N); echo \"base=$(( (b - a) / 1000 ))\"; i=$((i + 1)); done; "
            "end=$(( $(date +%%s) + %d )); i=0; "
            "while [ $i -lt %d ] && [ $(date +%%s) -lt $end ]; do "
            "a=$(date +%%s%%N); "
            "timeout 2 %s if=/dev/zero of=\"$f\" bs=8k count=1 oflag=dsync conv=notrunc "
            "2>/dev/null || { echo 'error=a synchronous write of 8 KiB failed or took over 2 s'; "
            "break; }; "
            "b=$(date +%%s%%N); echo \"sync=$(( (b - a) / 1000 ))\"; i=$((i + 1)); done; "
            "rm -f -- \"$f\"; echo end",
            qd, qdd, PREFLIGHT_BUDGET_S, PREFLIGHT_SAMPLES, qdd);
}

int preflight_count(const char *s, int64_t *ret)
{
        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        char *end = NULL;
        long long v = strtoll(s, &end, 10);
        if (errno || *end || v < 0)
                return -EINVAL;
        *ret = (int64_t)v;
        return 0;
}

int preflight_cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

/* The nearest-rank q-th percentile (q in 1..100) of sorted v[0..n), n > 0. */
static int64_t percentile(const int64_t *v, size_t n, unsigned q)
{
        size_t rank = (n * q + 99) / 100;
        return v[rank ? rank - 1 : 0];
}

int preflight_parse(const char *out, size_t len, preflight_result *ret, char **ret_why)
{
        preflight_result r = {0};
        int64_t *samples = NULL;
        size_t n = 0, n_base = 0;
        bool header = false, end = false, have_free = false;
        int line = 0, k = 0;
        _cleanup_free_ char *why = NULL;

        for (size_t i = 0; i < len && !why;) {
                const char *s = out + i, *nl = memchr(s, '\n', len - i);
                size_t l = nl ? (size_t)(nl - s) : len - i;
                i += l + 1;
                line++;
                if (memchr(s, '\0', l)) {
                        why = xasprintf("line %d: a NUL byte", line);
                        break;
                }
                _cleanup_free_ char *text = xstrndup(s, l);
                if (end) {
                        why = xasprintf("line %d: text after the end", line);
                } else if (!header) {
                        if (!streq(text, "gitcd-preflight 1"))
                                why = xasprintf("line %d: not a gitcd preflight (version 1)", line);
                        header = true;
                } else if (streq(text, "end")) {
                        end = true;
                } else if (startswith(text, "kernel=") && !r.kernel) {
                        r.kernel = xstrdup(text + 7);
                } else if (startswith(text, "fstype=") && !r.fstype) {
                        r.fstype = xstrdup(text + 7);
                } else if (startswith(text, "error=") && !r.error) {
                        r.error = xstrdup(text + 6);
                } else if (startswith(text, "free=") && !have_free) {
                        if (preflight_count(text + 5, &r.free_bytes) < 0)
                                why =
                                    xasprintf("line %d: free space is not a number of bytes", line);
                        have_free = true;
                } else if (startswith(text, "base=")) {
                        int64_t v;
                        if (preflight_count(text + 5, &v) < 0 || n_base >= PREFLIGHT_MAX_SAMPLES)
                                why = xasprintf("line %d: a baseline is not a number of "
                                                "microseconds",
                                                line);
                        else if (n_base++ == 0 || v < r.base_us)
                                r.base_us = v;
                } else if (startswith(text, "sync=")) {
                        int64_t v;
                        if (preflight_count(text + 5, &v) < 0)
                                why = xasprintf("line %d: a sync time is not a number of "
                                                "microseconds",
                                                line);
                        else if (n >= PREFLIGHT_MAX_SAMPLES)
                                why = xasprintf("line %d: more than %d sync samples", line,
                                                PREFLIGHT_MAX_SAMPLES);
                        else {
                                samples = xrealloc(samples, (n + 1) * sizeof(*samples));
                                samples[n++] = v;
                        }
                } else {
                        why = xasprintf("line %d: unexpected line", line);
                }
        }
        if (!why && !header)
                why = xstrdup("line 1: the machine printed nothing");
        else if (!why && !end)
                why = xasprintf("line %d: the output stops before its end", line);
        else if (!why && !have_free)
                why = xstrdup("no free space was printed");
        else if (!why && n == 0 && !r.error)
                why = xstrdup("no sync sample was printed");
        if (why) {
                free(samples);
                preflight_result_release(&r);
                *ret_why = TAKE_PTR(why);
                return -EINVAL;
        }
        for (size_t j = 0; j < n; j++)
                samples[j] = samples[j] > r.base_us ? samples[j] - r.base_us : 0;
        if (n > 0) {
                qsort(samples, n, sizeof(*samples), preflight_cmp_i64);
                r.sync_p50_us = percentile(samples, n, 50);
                r.sync_p99_us = percentile(samples, n, 99);
                r.sync_max_us = samples[n - 1];
        }
        r.n_sync = n;
        if (!r.kernel)
                r.kernel = xstrdup("");
        if (!r.fstype)
                r.fstype = xstrdup("");
        free(samples);
        *ret = r;
        return k;
}

int preflight_clock_offset(const char *out, int64_t sent_ms, int64_t got_ms, int64_t *ret_offset_ms,
                           int64_t *ret_bound_ms, char **ret_why)
{
        size_t n = out ? strlen(out) : 0;
        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
                n--;
        _cleanup_free_ char *text = xstrndup(out ? out : "", n);
        int64_t ns;
        if (preflight_count(text, &ns) < 0 || got_ms < sent_ms) {
                *ret_why = xstrdup("the machine's clock is not a number of nanoseconds");
                return -EINVAL;
        }
        int64_t mid = sent_ms + (got_ms - sent_ms) / 2;
        *ret_offset_ms = ns / 1000000 - mid;
        *ret_bound_ms = (got_ms - sent_ms + 1) / 2;
        return 0;
}

int preflight_judge(const preflight_result *r, int64_t offset_ms, int64_t bound_ms,
                    const preflight_limits *l, char **ret_reason)
{
        strbuf b = STRBUF_INIT;
        if (r->error)
                sb_printf(&b, "%s%s", b.len ? "; " : "", r->error);
        if (r->n_sync > 0 && r->sync_p99_us > l->sync_p99_max_us)
                sb_printf(&b,
                          "%sfdatasync p99 %.1f ms > %.1f ms (p50 %.1f ms, max %.1f ms, %zu "
                          "samples, %s)",
                          b.len ? "; " : "", (double)r->sync_p99_us / 1000,
                          (double)l->sync_p99_max_us / 1000, (double)r->sync_p50_us / 1000,
                          (double)r->sync_max_us / 1000, r->n_sync, r->fstype);
        if (l->quota_bytes > 0 && r->free_bytes < l->quota_bytes)
                sb_printf(&b, "%sfree space %lld bytes < the backend quota %lld bytes",
                          b.len ? "; " : "", (long long)r->free_bytes, (long long)l->quota_bytes);
        int64_t mag = offset_ms < 0 ? -offset_ms : offset_ms;
        if (mag - bound_ms > l->offset_max_ms)
                sb_printf(&b, "%sclock offset %+lld ms (±%lld ms) beyond ±%lld ms",
                          b.len ? "; " : "", (long long)offset_ms, (long long)bound_ms,
                          (long long)l->offset_max_ms);
        if (b.len == 0) {
                sb_release(&b);
                return 0;
        }
        *ret_reason = sb_detach(&b);
        return 1;
}

bool preflight_due(int64_t last_ms, int64_t now_ms, int64_t interval_ms)
{
        assert(interval_ms > 0);
        return last_ms <= 0 || last_ms > now_ms || now_ms - last_ms >= interval_ms;
}

void preflight_result_release(preflight_result *r)
{
        if (!r)
                return;
        free(r->kernel);
        free(r->fstype);
        free(r->error);
        *r = (preflight_result){0};
}
