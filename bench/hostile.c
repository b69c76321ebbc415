/*
 * Benchmark: what hostile Git content costs gitcd, as the size grows.
 *
 *   - redaction: an author name built to slow the audit log's private key
 *     redaction (PEM blocks nested so that cutting one out makes the one
 *     around it a key block; and many blocks without an END line), from
 *     10 KB to 10 MB, redacted and escaped as the audit log stores it
 *     (state_redact_private_keys, str_escape), and the same name cut to
 *     the sources' bound first (str_cut, SOURCE_MAX_PERSON_BYTES), as a
 *     commit's author now is before anything reads it;
 *   - the YAML budget: a revision of 1,000 to 100,000 small alias-bomb
 *     files (each expands to about 5,000 nodes, far below the limit of one
 *     file), loaded the way the driver loads a revision
 *     (spec_load_buffers): the cost grows with the files until the
 *     revision's budget (20,000,000 nodes) is spent, then stays there.
 *
 * Each line shows the time (wall clock and CPU of this process) and its
 * ratio to the line before, beside the ratio of the sizes: linear work
 * has the same ratio. Prints figures; never fails on timing.
 *
 *   bench-hostile [MAX_MB]     (default 10: the largest author name, in MB)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "api/spec.h"
#include "sources/source.h"
#include "state/state.h"
#include "util/escape.h"
#include "util/http.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static double wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static double cpu_ms(void)
{
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

typedef struct timing {
        double wall_ms, cpu_ms;
} timing;

static void print_row(const char *what, size_t size, const char *unit, timing t, size_t prev_size,
                      timing prev)
{
        printf("  %-38s %7zu %-3s %10.3f ms wall %10.3f ms cpu", what, size, unit, t.wall_ms,
               t.cpu_ms);
        if (prev_size && prev.wall_ms >= 0.05)
                printf("   x%.1f size, x%.1f wall", (double)size / (double)prev_size,
                       t.wall_ms / prev.wall_ms);
        else if (prev_size)
                printf("   x%.1f size, (too fast to compare)", (double)size / (double)prev_size);
        printf("\n");
}

/* An author name of about `bytes` built to make redaction work hard. */
static char *nested_blocks(size_t bytes)
{
        size_t depth = bytes / 29 + 1;
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < depth; i++)
                sb_append(&sb, "-----BEGIN A");
        sb_append(&sb, "-----BEGIN PRIVATE KEY-----");
        for (size_t i = 0; i < depth; i++)
                sb_append(&sb, "-PRIVATE KEY-----");
        return sb_detach(&sb);
}

static char *blocks_without_end(size_t bytes)
{
        strbuf sb = STRBUF_INIT;
        while (sb.len < bytes)
                sb_append(&sb, "-----BEGIN PRIVATE KEY-----x");
        return sb_detach(&sb);
}

/* Redact and escape text as state_audit_append stores an author. */
static timing store_cost(const char *text, bool cut_first)
{
        double t0 = wall_ms(), c0 = cpu_ms();
        _cleanup_free_ char *cut = cut_first ? str_cut(text, SOURCE_MAX_PERSON_BYTES) : NULL;
        _cleanup_free_ char *redacted = state_redact_private_keys(cut ? cut : text);
        _cleanup_free_ char *escaped = str_escape(redacted);
        timing t = {wall_ms() - t0, cpu_ms() - c0};
        (void)escaped; /* the cost is what is measured */
        return t;
}

static void redaction(size_t max_mb)
{
        static const struct {
                const char *name;
                char *(*make)(size_t);
        } shapes[] = {{"nested blocks", nested_blocks},
                      {"blocks without an END line", blocks_without_end}};
        printf("Redaction of a hostile author name (as the audit log stores it):\n");
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                for (int cut = 0; cut < 2; cut++) {
                        size_t prev = 0;
                        timing prev_t = {0};
                        for (size_t kb = 10; kb <= max_mb * 1000; kb *= 10) {
                                _cleanup_free_ char *text = shapes[s].make(kb * 1000);
                                timing t = store_cost(text, cut);
                                _cleanup_free_ char *what =
                                    xasprintf("%s%s", shapes[s].name, cut ? ", cut first" : "");
                                print_row(what, kb, "KB", t, prev, prev_t);
                                prev = kb;
                                prev_t = t;
                        }
                }
        }
}

/* A small alias bomb: 7 levels of 3 copies, about 5,000 nodes after expansion. */
static char *small_bomb(void)
{
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, "a: &a [x, x, x]\n");
        const char *names = "abcdef";
        for (int i = 1; i < 6; i++) {
                sb_printf(&sb, "%c: &%c [*%c, *%c, *%c]\n", names[i], names[i], names[i - 1],
                          names[i - 1], names[i - 1]);
        }
        sb_append(&sb, "g: [*f, *f, *f]\n");
        return sb_detach(&sb);
}

static void alias_bombs(void)
{
        printf("\nA revision of small alias-bomb files (spec_load_buffers, one YAML budget):\n");
        _cleanup_free_ char *bomb = small_bomb();
        size_t prev = 0;
        timing prev_t = {0};
        for (size_t n = 1000; n <= 100000; n *= 10) {
                spec_buffer *bufs = xcalloc(n, sizeof(*bufs));
                char **names = xcalloc(n, sizeof(char *));
                for (size_t i = 0; i < n; i++) {
                        names[i] = xasprintf("bomb-%06zu.yaml", i);
                        bufs[i] =
                            (spec_buffer){.file = names[i], .data = bomb, .len = strlen(bomb)};
                }
                cluster_set set = {0};
                diag_list d = DIAG_LIST_INIT;
                double t0 = wall_ms(), c0 = cpu_ms();
                (void)spec_load_buffers(bufs, n, &set, &d);
                timing t = {wall_ms() - t0, cpu_ms() - c0};
                bool spent = false;
                for (size_t i = 0; i < d.n && !spent; i++)
                        spent = strstr(d.items[i].message, "revision budget") != NULL;
                print_row(spent ? "files (budget spent: stopped)" : "files", n, "", t, prev,
                          prev_t);
                prev = n;
                prev_t = t;
                diag_list_release(&d);
                cluster_set_release(&set);
                for (size_t i = 0; i < n; i++)
                        free(names[i]);
                free(names);
                free(bufs);
        }
}

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        size_t max_mb = 10;
        if (argc > 1) {
                long v = strtol(argv[1], NULL, 10);
                if (v < 1 || v > 100) {
                        fprintf(stderr, "usage: bench-hostile [MAX_MB (1..100)]\n");
                        return 64;
                }
                max_mb = (size_t)v;
        }
        redaction(max_mb);
        alias_bombs();
        return 0;
}
