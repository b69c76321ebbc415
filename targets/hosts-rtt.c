/*
 * The hosts target's peer round-trip time, the pure half
 * (targets/hosts-rtt.h): the script is built from validated hosts, port
 * numbers and ssh_quote()d words only, so nothing of a spec becomes
 * syntax; the reader takes the script's lines strictly (a line it does
 * not know is an error), since a machine's output is outside input.
 *
 * The figure the timeouts are derived from is the slowest peer's median
 * connect time, not the slowest connect: a lost SYN costs a second, and
 * one of them must not make an election timeout ten seconds long.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "targets/hosts-preflight.h"
#include "targets/hosts-rtt.h"
#include "targets/ssh.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

int rtt_host_valid(const char *host)
{
        size_t n = host ? strlen(host) : 0;
        if (n == 0 || n > 253 || host[0] == '-')
                return 0;
        for (size_t i = 0; i < n; i++) {
                char ch = host[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == ':'))
                        return 0;
        }
        return 1;
}

char *rtt_script(const rtt_peer *peers, size_t n, const char *connect)
{
        if (n > RTT_MAX_PEERS)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (!rtt_host_valid(peers[i].host) || peers[i].port < 1 || peers[i].port > 65535)
                        return NULL;
        _cleanup_free_ char *qc = connect ? ssh_quote(connect) : NULL;
        _cleanup_free_ char *probe =
            qc ? xasprintf("%s \"$1\" \"$2\" </dev/null >/dev/null 2>&1", qc)
               : xstrdup("{ exec 3<>\"/dev/tcp/$1/$2\"; } 2>/dev/null");
        /* one peer, in its own bash under timeout: $1 the host, $2 the port */
        _cleanup_free_ char *one =
            xasprintf("i=0; while [ $i -lt %d ]; do a=${EPOCHREALTIME/[.,]/}; "
                      "if %s; then b=${EPOCHREALTIME/[.,]/}; exec 3>&-; "
                      "echo \"rtt=$1:$2 $((b - a))\"; else echo \"fail=$1:$2\"; exit 0; fi; "
                      "i=$((i + 1)); done",
                      RTT_SAMPLES, probe);
        _cleanup_free_ char *qone = ssh_quote(one);
        strbuf in = STRBUF_INIT;
        sb_printf(&in, "if [ -z \"$EPOCHREALTIME\" ]; then echo 'error=bash 5 is needed "
                       "($EPOCHREALTIME)'; exit 0; fi; ");
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *qh = ssh_quote(peers[i].host);
                sb_printf(&in, "timeout %d bash -c %s gitcd-rtt %s %d || echo \"fail=\"%s\":%d\"; ",
                          RTT_PEER_TIMEOUT_S, qone, qh, peers[i].port, qh, peers[i].port);
        }
        sb_printf(&in, "true");
        _cleanup_free_ char *inner = sb_detach(&in);
        _cleanup_free_ char *qin = ssh_quote(inner);
        return xasprintf("echo 'gitcd-rtt 1'; if command -v bash >/dev/null 2>&1; then "
                         "bash -c %s gitcd-rtt; else echo 'error=bash is not installed'; fi; "
                         "echo end",
                         qin);
}

/* What the reader keeps of one peer while reading. */
typedef struct peer_acc {
        char *label; /* "host:port" as printed */
        int64_t *v;
        size_t n;
        bool failed;
} peer_acc;

static peer_acc *acc_of(peer_acc **accs, size_t *n, const char *label, bool *ret_full)
{
        for (size_t i = 0; i < *n; i++)
                if (streq((*accs)[i].label, label))
                        return &(*accs)[i];
        if (*n >= RTT_MAX_PEERS) {
                *ret_full = true;
                return NULL;
        }
        *accs = xrealloc(*accs, (*n + 1) * sizeof(**accs));
        peer_acc *a = &(*accs)[(*n)++];
        *a = (peer_acc){.label = xstrdup(label)};
        return a;
}

static bool label_valid(const char *s)
{
        const char *colon = strrchr(s, ':');
        if (!colon || colon == s)
                return false;
        _cleanup_free_ char *host = xstrndup(s, (size_t)(colon - s));
        int64_t port;
        return rtt_host_valid(host) && preflight_count(colon + 1, &port) == 0 && port >= 1 &&
               port <= 65535;
}

/* One line after the header: a sample, a failed peer or the script's complaint. */
static char *read_line(const char *text, int line, peer_acc **accs, size_t *n_accs, rtt_result *r)
{
        bool full = false;
        if (strneq(text, "error=", 6)) {
                if (r->error)
                        return xasprintf("line %d: a second error", line);
                r->error = xstrdup(text + 6);
                return NULL;
        }
        if (strneq(text, "fail=", 5)) {
                if (!label_valid(text + 5))
                        return xasprintf("line %d: not a peer address", line);
                peer_acc *a = acc_of(accs, n_accs, text + 5, &full);
                if (!a)
                        return xasprintf("line %d: more than %d peers", line, RTT_MAX_PEERS);
                a->failed = true;
                return NULL;
        }
        if (!strneq(text, "rtt=", 4))
                return xasprintf("line %d: unexpected line", line);
        const char *sp = strchr(text + 4, ' ');
        int64_t us;
        if (!sp || preflight_count(sp + 1, &us) < 0)
                return xasprintf("line %d: a connect time is not a number of microseconds", line);
        _cleanup_free_ char *label = xstrndup(text + 4, (size_t)(sp - text - 4));
        if (!label_valid(label))
                return xasprintf("line %d: not a peer address", line);
        peer_acc *a = acc_of(accs, n_accs, label, &full);
        if (!a)
                return xasprintf("line %d: more than %d peers", line, RTT_MAX_PEERS);
        if (a->n >= RTT_MAX_SAMPLES_PER)
                return xasprintf("line %d: more than %d samples of %s", line, RTT_MAX_SAMPLES_PER,
                                 label);
        a->v = xrealloc(a->v, (a->n + 1) * sizeof(*a->v));
        a->v[a->n++] = us;
        return NULL;
}

int rtt_parse(const char *out, size_t len, rtt_result *ret, char **ret_why)
{
        rtt_result r = {0};
        peer_acc *accs = NULL;
        size_t n_accs = 0;
        bool header = false, end = false;
        int line = 0;
        char *why = NULL;

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
                if (end)
                        why = xasprintf("line %d: text after the end", line);
                else if (!header) {
                        if (!streq(text, "gitcd-rtt 1"))
                                why = xasprintf("line %d: not a gitcd peer RTT (version 1)", line);
                        header = true;
                } else if (streq(text, "end"))
                        end = true;
                else
                        why = read_line(text, line, &accs, &n_accs, &r);
        }
        if (!why && !header)
                why = xstrdup("line 1: the machine printed nothing");
        else if (!why && !end)
                why = xasprintf("line %d: the output stops before its end", line);
        for (size_t j = 0; j < n_accs; j++) {
                peer_acc *a = &accs[j];
                if (!why && a->n > 0) {
                        qsort(a->v, a->n, sizeof(*a->v), preflight_cmp_i64);
                        int64_t median = a->v[(a->n - 1) / 2];
                        r.n_peers++;
                        r.n_samples += (int64_t)a->n;
                        r.slowest_us = MAX(r.slowest_us, median);
                        r.max_us = MAX(r.max_us, a->v[a->n - 1]);
                } else if (!why) {
                        r.n_failed++;
                }
                free(a->label);
                free(a->v);
        }
        free(accs);
        if (why) {
                rtt_result_release(&r);
                *ret_why = why;
                return -EINVAL;
        }
        *ret = r;
        return 0;
}

void rtt_result_release(rtt_result *r)
{
        if (!r)
                return;
        free(r->error);
        *r = (rtt_result){0};
}
