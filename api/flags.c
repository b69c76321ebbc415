/*
 * The one rule for which etcd flags a spec may add to a member's command
 * line (see api/flags.h): an allow-list, etcd's own flag table for each
 * minor gitcd runs.
 *
 * Where the table came from: etcd's flag registrations (fs.*Var calls in
 * etcdmain/config.go and embed/config.go, server/ from 3.5 on, and the
 * feature gates of server/features/etcd_features.go in 3.6), read at every
 * release tag from v3.4.0 to v3.4.45, v3.5.0 to v3.5.33 and v3.6.0 to
 * v3.6.14 by scripts/etcd-flag-table, which prints, for each flag, its Go
 * type and the first patch of each minor that has it (a flag a later patch
 * added, such as --experimental-stop-grpc-service-on-defrag in 3.5.14, is
 * refused for the patches before). No flag left a minor once in it. The
 * value types follow the Go types (Bool, Int, Uint, Duration, ...) and,
 * where etcd takes a set of words, the words etcd's source accepts.
 *
 * Every flag etcd has is in one of four classes:
 *   - allowed, its value checked against its type;
 *   - allowed only when the operator's policy says so (policy: pprof and
 *     distributed tracing), checked the same way here and decided by the
 *     policy (etcd_flag_needs_policy);
 *   - set by gitcd (field: the spec field that controls it), since a second
 *     value would fight gitcd's;
 *   - refused (why: how it breaks a cluster gitcd manages or weakens it).
 * A name the table does not have is refused as no flag of that version.
 *
 * Design: an allow-list because a flag gitcd has not looked at is a flag
 * whose effect nobody checked (etcd 3.4 to 3.6 added flags that turn
 * checks off and send data elsewhere); a new etcd minor gets its column
 * from the same script. Values are checked for their type so that a value
 * never carries more than it says (no spaces, quotes or control
 * characters in any of them) and a typo is a diagnostic, not a member that
 * does not start.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/flags.h"
#include "api/internal.h"
#include "api/spec.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

typedef enum flag_type {
        T_NONE,     /* set by gitcd or refused: no value is looked at */
        T_BOOL,     /* Go's strconv.ParseBool; "" (the bare flag) is true */
        T_INT,      /* a decimal integer (Go int: 64 bits) */
        T_UINT,     /* a decimal unsigned integer (Go uint, uint64: 64 bits) */
        T_UINT32,   /* a decimal unsigned integer below 2^32 */
        T_DURATION, /* Go's time.ParseDuration, not negative: "300ms", "1h30m", "0" */
        T_ENUM,     /* one of the words in values ("a|b|c") */
        T_LIST,     /* a comma-separated list of the words in values */
        T_STRING,   /* letters, digits and "._:/@+=,-", at most 256 */
        T_URLS,     /* a comma-separated list of http(s)://host[:port], or "*" */
        T_HOSTS,    /* a comma-separated list of host names or IP addresses, or "*" */
        T_ADDRESS,  /* host:port */
        T_FEATURES, /* a comma-separated list of Gate=true|false, Gate one of values */
} flag_type;

/* The first patch of each minor (3.4, 3.5, 3.6) that has the flag; -1: that minor has none. */
typedef struct since {
        int8_t patch[3];
} since;

/* clang-format off */
#define V456        {{0, 0, 0}}
#define V56         {{-1, 0, 0}}
#define V4          {{0, -1, -1}}
#define V6          {{-1, -1, 0}}
#define VP(a, b, c) {{a, b, c}}
/* clang-format on */

typedef struct flag_row {
        const char *name; /* a trailing '*' makes it a prefix (set by gitcd or refused only) */
        flag_type type;
        const char *values; /* T_ENUM, T_LIST, T_FEATURES: the words, '|' between them */
        since in;
        bool policy;       /* allowed only when the operator's policy allows it */
        const char *field; /* set by gitcd: the spec field to use instead */
        const char *why;   /* refused: the reason */
} flag_row;

/* clang-format off */
#define ALLOW(n, t, vals, v)  {n, t, vals, v, false, NULL, NULL}
#define POLICY(n, t, vals, v) {n, t, vals, v, true, NULL, NULL}
#define OWNED(n, f)           {n, T_NONE, NULL, V456, false, f, NULL}
#define REFUSE(n, w)          {n, T_NONE, NULL, V456, false, NULL, w}
/* clang-format on */

#define MEMBERSHIP "spec.replicas (gitcd manages membership)"
#define LISTEN     "spec.tls (gitcd sets listen addresses)"
#define ADVERTISE  "spec.tls (gitcd sets advertised addresses)"
#define LOGS                                                                                       \
        "gitcd reads each member's log from its standard error, and a log file is a write to a "   \
        "path of the spec's choosing on the member's host"
#define LEARNERS "gitcd adds members one learner at a time and relies on etcd refusing a second"
#define V2       "the v2 API is deprecated, its keys are outside what gitcd checks, and etcd 3.6 has none"
#define SAN                                                                                        \
        "it stops etcd checking a peer's address against its certificate, so any holder of a "     \
        "certificate of the cluster's CA can join as any member"
#define AUTH             "etcd authentication belongs to spec.auth"
#define IGNORED          "etcd accepts it and ignores it (a flag of etcd 0.4)"
#define TRACING_RATE_MAX 1000000

#define CIPHERS                                                                                    \
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256|TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384|"         \
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256|TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384|"             \
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256|TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_"      \
        "SHA256|"                                                                                  \
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305|TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305|"             \
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA|TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA|"               \
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA|TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA|"                   \
        "TLS_AES_128_GCM_SHA256|TLS_AES_256_GCM_SHA384|TLS_CHACHA20_POLY1305_SHA256"
#define FEATURES                                                                                   \
        "StopGRPCServiceOnDefrag|TxnModeWriteWithSharedBuffer|InitialCorruptCheck|"                \
        "CompactHashCheck|LeaseCheckpoint|LeaseCheckpointPersist|SetMemberLocalAddr|AllAlpha|"     \
        "AllBeta"
#define LOG_LEVELS "debug|info|warn|error|panic|fatal"

/*
 * Sorted by name within each class; exact names before the prefixes that
 * would also match them (the first row that matches decides).
 */
static const flag_row rows[] = {
    /* set by gitcd */
    OWNED("name", "metadata.name (gitcd names the members)"),
    OWNED("data-dir", "spec.storage"),
    OWNED("wal-dir", "spec.storage"),
    OWNED("initial-cluster", MEMBERSHIP),
    OWNED("initial-cluster-state", MEMBERSHIP),
    OWNED("initial-cluster-token", MEMBERSHIP),
    OWNED("discovery*", MEMBERSHIP),
    OWNED("listen-*", LISTEN),
    OWNED("advertise-client-urls", ADVERTISE),
    OWNED("initial-advertise-peer-urls", ADVERTISE),
    OWNED("cert-file", "spec.tls.client"),
    OWNED("key-file", "spec.tls.client"),
    OWNED("trusted-ca-file", "spec.tls.client"),
    OWNED("client-cert-auth", "spec.tls.client"),
    OWNED("client-crl-file", "spec.tls.client"),
    OWNED("client-cert-file", "spec.tls.client"),
    OWNED("client-key-file", "spec.tls.client"),
    OWNED("client-cert-allowed-hostname", "spec.tls.client"),
    OWNED("auto-tls", "spec.tls.provider"),
    OWNED("peer-auto-tls", "spec.tls.peer.selfSigned"),
    OWNED("self-signed-cert-validity", "spec.tls.provider"),
    OWNED("quota-backend-bytes", "spec.options.quotaBackendBytes"),
    OWNED("auto-compaction-mode", "spec.options.autoCompactionMode"),
    OWNED("auto-compaction-retention", "spec.options.autoCompactionRetention"),
    OWNED("snapshot-count", "spec.options.snapshotCount"),
    OWNED("heartbeat-interval", "spec.options.heartbeatInterval"),
    OWNED("election-timeout", "spec.options.electionTimeout"),
    /* etcd's own corruption checks (render/command.c sets them per minor) */
    OWNED("corrupt-check-time", "spec.consistency.etcdCheckInterval"),
    OWNED("experimental-compact-hash-check-enabled", "spec.consistency.etcdChecks"),
    OWNED("experimental-corrupt-check-time", "spec.consistency.etcdCheckInterval"),
    OWNED("experimental-initial-corrupt-check", "spec.consistency.etcdChecks"),

    /* refused: they break a cluster gitcd manages or weaken it */
    REFUSE("force-new-cluster",
           "it turns each member gitcd restarts into a one-member cluster that forgets the "
           "others, whose data would then be taken for lost"),
    REFUSE("strict-reconfig-check",
           "it turns off etcd's own refusal of a membership change that would lose quorum, a "
           "check gitcd relies on"),
    REFUSE("experimental-peer-skip-client-san-verification", SAN),
    REFUSE("peer-skip-client-san-verification", SAN),
    REFUSE("config-file", "etcd then ignores every command-line flag, including the ones gitcd "
                          "sets"),
    REFUSE("version", "etcd then prints its version and exits instead of running"),
    REFUSE("log-output*", LOGS),
    REFUSE("enable-log-rotation", LOGS),
    REFUSE("log-rotation-config-json", LOGS),
    REFUSE("max-learners", LEARNERS),
    REFUSE("enable-v2*", V2),
    REFUSE("experimental-enable-v2v3", V2),
    REFUSE("v2-deprecation", V2),
    REFUSE("auth-token*", AUTH),
    REFUSE("bcrypt-cost", AUTH),
    REFUSE("proxy*", "it makes etcd a proxy instead of a cluster member"),
    REFUSE("socket-reuse-port", "it lets a second process bind the member's ports beside it"),
    REFUSE("unsafe-*", "it turns off a safety of etcd (unsafe-no-fsync loses acknowledged writes "
                       "when a host crashes)"),
    REFUSE("cluster-active-size", IGNORED),
    REFUSE("cluster-remove-delay", IGNORED),
    REFUSE("cluster-sync-interval", IGNORED),
    REFUSE("config", IGNORED),
    REFUSE("force", IGNORED),
    REFUSE("max-result-buffer", IGNORED),
    REFUSE("max-retry-attempts", IGNORED),
    REFUSE("peer-election-timeout", IGNORED),
    REFUSE("peer-heartbeat-interval", IGNORED),
    REFUSE("retry-interval", IGNORED),
    REFUSE("snapshot", IGNORED),
    REFUSE("v", IGNORED),
    REFUSE("vv", IGNORED),
    REFUSE("test.coverprofile", IGNORED),
    REFUSE("test.outputdir", IGNORED),
    /* every other peer-* flag is the peer surface's TLS, which gitcd sets */
    OWNED("peer-*", "spec.tls.peer"),

    /* allowed only when the operator's policy allows it */
    POLICY("enable-pprof", T_BOOL, NULL, V456),
    POLICY("enable-distributed-tracing", T_BOOL, NULL, V6),
    POLICY("distributed-tracing-address", T_ADDRESS, NULL, V6),
    POLICY("distributed-tracing-instance-id", T_STRING, NULL, V6),
    POLICY("distributed-tracing-sampling-rate", T_INT, NULL, V6),
    POLICY("distributed-tracing-service-name", T_STRING, NULL, V6),
    POLICY("experimental-enable-distributed-tracing", T_BOOL, NULL, V56),
    POLICY("experimental-distributed-tracing-address", T_ADDRESS, NULL, V56),
    POLICY("experimental-distributed-tracing-instance-id", T_STRING, NULL, V56),
    POLICY("experimental-distributed-tracing-sampling-rate", T_INT, NULL, VP(-1, 11, 0)),
    POLICY("experimental-distributed-tracing-service-name", T_STRING, NULL, V56),

    /* allowed */
    ALLOW("backend-batch-interval", T_DURATION, NULL, V456),
    ALLOW("backend-batch-limit", T_INT, NULL, V456),
    ALLOW("backend-bbolt-freelist-type", T_ENUM, "array|map", V56),
    ALLOW("bootstrap-defrag-threshold-megabytes", T_UINT, NULL, V6),
    ALLOW("cipher-suites", T_LIST, CIPHERS, V456),
    ALLOW("compact-hash-check-time", T_DURATION, NULL, V6),
    ALLOW("compaction-batch-limit", T_INT, NULL, V6),
    ALLOW("compaction-sleep-interval", T_DURATION, NULL, V6),
    ALLOW("cors", T_URLS, NULL, V456),
    ALLOW("debug", T_BOOL, NULL, V4),
    ALLOW("downgrade-check-time", T_DURATION, NULL, V6),
    ALLOW("enable-grpc-gateway", T_BOOL, NULL, V456),
    ALLOW("experimental-backend-bbolt-freelist-type", T_ENUM, "array|map", V4),
    ALLOW("experimental-bootstrap-defrag-threshold-megabytes", T_UINT, NULL, V56),
    ALLOW("experimental-compact-hash-check-time", T_DURATION, NULL, VP(-1, 5, 0)),
    ALLOW("experimental-compaction-batch-limit", T_INT, NULL, V456),
    ALLOW("experimental-compaction-sleep-interval", T_DURATION, NULL, VP(-1, 16, 0)),
    ALLOW("experimental-downgrade-check-time", T_DURATION, NULL, V56),
    ALLOW("experimental-enable-lease-checkpoint", T_BOOL, NULL, V456),
    ALLOW("experimental-enable-lease-checkpoint-persist", T_BOOL, NULL, VP(20, 2, 0)),
    ALLOW("experimental-memory-mlock", T_BOOL, NULL, V56),
    ALLOW("experimental-snapshot-catchup-entries", T_UINT, NULL, VP(-1, 14, 0)),
    ALLOW("experimental-stop-grpc-service-on-defrag", T_BOOL, NULL, VP(-1, 14, 0)),
    ALLOW("experimental-txn-mode-write-with-shared-buffer", T_BOOL, NULL, V56),
    ALLOW("experimental-warning-apply-duration", T_DURATION, NULL, VP(16, 0, 0)),
    ALLOW("experimental-warning-unary-request-duration", T_DURATION, NULL, V6),
    ALLOW("experimental-watch-progress-notify-interval", T_DURATION, NULL, VP(11, 0, 0)),
    ALLOW("feature-gates", T_FEATURES, FEATURES, V6),
    ALLOW("grpc-keepalive-interval", T_DURATION, NULL, V456),
    ALLOW("grpc-keepalive-min-time", T_DURATION, NULL, V456),
    ALLOW("grpc-keepalive-timeout", T_DURATION, NULL, V456),
    ALLOW("host-whitelist", T_HOSTS, NULL, V456),
    ALLOW("initial-election-tick-advance", T_BOOL, NULL, V456),
    ALLOW("log-format", T_ENUM, "json|console", V6),
    ALLOW("log-level", T_ENUM, LOG_LEVELS, V456),
    ALLOW("log-package-levels", T_STRING, NULL, V4),
    ALLOW("logger", T_ENUM, "zap|capnslog", V4),
    ALLOW("logger", T_ENUM, "zap", V56),
    ALLOW("max-concurrent-streams", T_UINT32, NULL, VP(20, 5, 0)),
    ALLOW("max-request-bytes", T_UINT, NULL, V456),
    ALLOW("max-snapshots", T_UINT, NULL, V456),
    ALLOW("max-txn-ops", T_UINT, NULL, V456),
    ALLOW("max-wals", T_UINT, NULL, V456),
    ALLOW("memory-mlock", T_BOOL, NULL, V6),
    ALLOW("metrics", T_ENUM, "basic|extensive", V456),
    ALLOW("next-cluster-version-compatible", T_BOOL, NULL, VP(31, -1, -1)),
    ALLOW("pre-vote", T_BOOL, NULL, V456),
    ALLOW("raft-read-timeout", T_DURATION, NULL, V56),
    ALLOW("raft-write-timeout", T_DURATION, NULL, V56),
    ALLOW("snapshot-catchup-entries", T_UINT, NULL, V6),
    ALLOW("socket-reuse-address", T_BOOL, NULL, V56),
    ALLOW("tls-max-version", T_ENUM, "TLS1.2|TLS1.3", VP(25, 8, 0)),
    ALLOW("tls-min-version", T_ENUM, "TLS1.2|TLS1.3", VP(25, 8, 0)),
    ALLOW("warning-apply-duration", T_DURATION, NULL, V6),
    ALLOW("warning-unary-request-duration", T_DURATION, NULL, V6),
    ALLOW("watch-progress-notify-interval", T_DURATION, NULL, V6),
};

#define MINOR_FIRST 4 /* column 0 is 3.4 */
#define N_MINORS    3

char *etcd_flag_normalize(const char *flag)
{
        assert(flag);
        char *name = xstrdup(flag);
        for (char *p = name; *p; p++)
                *p = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
        return name;
}

static bool row_matches(const flag_row *r, const char *name)
{
        size_t n = strlen(r->name);
        assert(n > 0);
        if (r->name[n - 1] == '*')
                return strneq(name, r->name, n - 1);
        return streq(name, r->name);
}

/* The first row for name that is not a version's own typed row; NULL when none. */
static const flag_row *rule_row(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                assert(!rows[i].field || !rows[i].why);
                if ((rows[i].field || rows[i].why) && row_matches(&rows[i], name))
                        return &rows[i];
        }
        return NULL;
}

/* The typed row of name for minor column m (-1: any); NULL when none. */
static const flag_row *typed_row(const char *name, int m)
{
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                const flag_row *r = &rows[i];
                if (r->field || r->why || !streq(r->name, name))
                        continue;
                if (m < 0 || r->in.patch[m] >= 0)
                        return r;
        }
        return NULL;
}

bool etcd_flag_needs_policy(const char *flag)
{
        _cleanup_free_ char *name = etcd_flag_normalize(flag);
        const flag_row *r = typed_row(name, -1);
        return r && r->policy && !rule_row(name);
}

/* ---- value types ---- */

static bool word_in(const char *word, size_t n, const char *words)
{
        for (const char *w = words;;) {
                size_t len = strcspn(w, "|");
                if (len == n && strneq(w, word, n))
                        return true;
                if (!w[len])
                        return false;
                w += len + 1;
        }
}

static bool decimal(const char *s, bool sign, uint64_t max)
{
        const char *p = s;
        bool negative = false;
        if (sign && (*p == '-' || *p == '+'))
                negative = *p++ == '-';
        size_t n = strspn(p, "0123456789");
        if (n == 0 || p[n] || n > 20)
                return false;
        errno = 0;
        unsigned long long v = strtoull(p, NULL, 10);
        if (errno == ERANGE)
                return false;
        return negative ? v <= (uint64_t)INT64_MAX + 1 : v <= max;
}

/* Go's time.ParseDuration, less the sign: "0", or numbers each with a unit. */
static bool go_duration(const char *s)
{
        static const char *const units[] = {"ns", "us", "µs", "μs", "ms", "s", "m", "h"};
        if (streq(s, "0"))
                return true;
        const char *p = s;
        if (!*p)
                return false;
        while (*p) {
                size_t whole = strspn(p, "0123456789");
                p += whole;
                size_t frac = 0;
                if (*p == '.') {
                        p++;
                        frac = strspn(p, "0123456789");
                        p += frac;
                }
                if (whole == 0 && frac == 0)
                        return false;
                if (whole > 20 || frac > 20)
                        return false;
                size_t best = 0;
                for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
                        size_t n = strlen(units[i]);
                        if (strneq(p, units[i], n) && n > best &&
                            /* "m" is not the start of "ms" */
                            !(n == 1 && p[0] == 'm' && p[1] == 's'))
                                best = n;
                }
                if (best == 0)
                        return false;
                p += best;
        }
        return true;
}

static bool go_bool(const char *s)
{
        static const char *const words[] = {"",  "1", "t", "T",     "TRUE",  "true",  "True",
                                            "0", "f", "F", "FALSE", "false", "False", NULL};
        for (size_t i = 0; words[i]; i++)
                if (streq(s, words[i]))
                        return true;
        return false;
}

/* Each comma-separated item of s passes ok (no empty item). */
static bool each_item(const char *s, bool (*ok)(const char *item, const char *values),
                      const char *values)
{
        if (!*s)
                return false;
        for (const char *p = s;;) {
                size_t len = strcspn(p, ",");
                _cleanup_free_ char *item = xstrndup(p, len);
                if (!len || !ok(item, values))
                        return false;
                if (!p[len])
                        return true;
                p += len + 1;
        }
}

static bool item_word(const char *item, const char *values)
{
        return word_in(item, strlen(item), values);
}

static bool item_url(const char *item, const char *values)
{
        (void)values;
        return streq(item, "*") || http_url_valid(item, false);
}

static bool item_host(const char *item, const char *values)
{
        (void)values;
        return streq(item, "*") || host_address_valid(item);
}

static bool item_feature(const char *item, const char *values)
{
        const char *eq = strchr(item, '=');
        if (!eq || !word_in(item, (size_t)(eq - item), values))
                return false;
        /* featuregate reads the value with strconv.ParseBool */
        return eq[1] && go_bool(eq + 1);
}

static bool safe_string(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 256)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) || (unsigned char)s[i] >= 0x80)
                        if (!strchr("._:/@+=,-", s[i]))
                                return false;
        return true;
}

/* What a value of the row's type looks like, for the message. */
static char *type_words(const flag_row *r)
{
        switch (r->type) {
        case T_BOOL:
                return xstrdup("true or false");
        case T_INT:
                return xstrdup("an integer");
        case T_UINT:
                return xstrdup("a whole number");
        case T_UINT32:
                return xstrdup("a whole number below 4294967296");
        case T_DURATION:
                return xstrdup("a duration such as 500ms, 30s or 1h30m");
        case T_ENUM:
        case T_LIST:
        case T_FEATURES: {
                strbuf sb = STRBUF_INIT;
                sb_append(&sb, r->type == T_ENUM   ? "one of "
                               : r->type == T_LIST ? "a comma-separated list of "
                                                   : "a comma-separated list of NAME=true|false, "
                                                     "NAME one of ");
                for (const char *w = r->values;;) {
                        size_t len = strcspn(w, "|");
                        sb_append_len(&sb, w, len);
                        if (!w[len])
                                break;
                        sb_append(&sb, ", ");
                        w += len + 1;
                }
                return sb_detach(&sb);
        }
        case T_STRING:
                return xstrdup("at most 256 letters, digits and \"._:/@+=,-\"");
        case T_URLS:
                return xstrdup("a comma-separated list of http(s)://host[:port], or *");
        case T_HOSTS:
                return xstrdup("a comma-separated list of host names or IP addresses, or *");
        case T_ADDRESS:
                return xstrdup("host:port");
        case T_NONE:
                break;
        }
        return xstrdup("nothing");
}

static bool value_ok(const flag_row *r, const char *v)
{
        if (r->type == T_BOOL)
                return go_bool(v);
        if (!*v)
                return false; /* "--flag" alone: etcd wants a value */
        switch (r->type) {
        case T_INT:
                return decimal(v, true, (uint64_t)INT64_MAX) &&
                       (!strstr(r->name, "sampling-rate") ||
                        (v[0] != '-' && strtoull(v, NULL, 10) <= TRACING_RATE_MAX));
        case T_UINT:
                return decimal(v, false, UINT64_MAX);
        case T_UINT32:
                return decimal(v, false, UINT32_MAX);
        case T_DURATION:
                return go_duration(v);
        case T_ENUM:
                return word_in(v, strlen(v), r->values);
        case T_LIST:
                return each_item(v, item_word, r->values);
        case T_STRING:
                return safe_string(v);
        case T_URLS:
                return each_item(v, item_url, NULL);
        case T_HOSTS:
                return each_item(v, item_host, NULL);
        case T_ADDRESS:
                return host_port_valid(v, true);
        case T_FEATURES:
                return each_item(v, item_feature, r->values);
        case T_BOOL:
        case T_NONE:
                break;
        }
        return false;
}

/* The minors that have name, "3.5 and 3.6"; NULL when none. */
static char *minors_of(const char *name)
{
        bool has[N_MINORS] = {false};
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                if (!rows[i].field && !rows[i].why && streq(rows[i].name, name))
                        for (int m = 0; m < N_MINORS; m++)
                                has[m] = has[m] || rows[i].in.patch[m] >= 0;
        strbuf sb = STRBUF_INIT;
        int n = 0, total = 0;
        for (int m = 0; m < N_MINORS; m++)
                total += has[m];
        for (int m = 0; m < N_MINORS; m++) {
                if (!has[m])
                        continue;
                if (n)
                        sb_append(&sb, n == total - 1 ? " and " : ", ");
                sb_printf(&sb, "3.%d", MINOR_FIRST + m);
                n++;
        }
        if (!n) {
                sb_release(&sb);
                return NULL;
        }
        return sb_detach(&sb);
}

/* The known flag names closest to name, for "did you mean". */
static const char *suggest(const char *name)
{
        const char *names[ARRAY_SIZE(rows) + 1];
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                if (!strchr(rows[i].name, '*'))
                        names[n++] = rows[i].name;
        names[n] = NULL;
        return closest_word(name, names);
}

int etcd_flag_check(const char *flag, const char *value, const semver *v, char **ret_why)
{
        assert(flag && ret_why);
        _cleanup_free_ char *name = etcd_flag_normalize(flag);
        const flag_row *rule = rule_row(name);
        if (rule && rule->field) {
                *ret_why = xasprintf("--%s is set by gitcd; use %s instead", name, rule->field);
                return -EPERM;
        }
        if (rule) {
                *ret_why = xasprintf("--%s is refused: %s", name, rule->why);
                return -EPERM;
        }
        int m = -1;
        if (v && v->major == 3 && v->minor >= MINOR_FIRST && v->minor < MINOR_FIRST + N_MINORS)
                m = v->minor - MINOR_FIRST;
        const flag_row *r = typed_row(name, m);
        if (!r) {
                _cleanup_free_ char *minors = minors_of(name);
                const char *best = minors ? NULL : suggest(name);
                if (minors && v)
                        *ret_why = xasprintf("--%s is not an etcd %d.%d flag (etcd %s %s it)", name,
                                             v->major, v->minor, minors,
                                             strchr(minors, ' ') ? "have" : "has");
                else if (m >= 0 && best)
                        *ret_why = xasprintf("--%s is not an etcd %d.%d flag; did you mean --%s?",
                                             name, v->major, v->minor, best);
                else if (m >= 0)
                        *ret_why =
                            xasprintf("--%s is not an etcd %d.%d flag", name, v->major, v->minor);
                else if (best)
                        *ret_why =
                            xasprintf("--%s is not an etcd flag; did you mean --%s?", name, best);
                else
                        *ret_why = xasprintf("--%s is not an etcd flag", name);
                return -ENOENT;
        }
        if (m >= 0 && v->patch < r->in.patch[m]) {
                *ret_why = xasprintf("--%s is an etcd flag from %d.%d.%d on, not of etcd "
                                     "%d.%d.%d",
                                     name, v->major, v->minor, r->in.patch[m], v->major, v->minor,
                                     v->patch);
                return -ENOENT;
        }
        const char *val = value ? value : "";
        if (!value_ok(r, val)) {
                _cleanup_free_ char *want = type_words(r);
                if (!*val)
                        *ret_why = xasprintf("--%s needs a value: %s", name, want);
                else
                        *ret_why = xasprintf("\"%s\" is not a value of --%s: expected %s", val,
                                             name, want);
                return -EINVAL;
        }
        return 0;
}

bool etcd_flag_in_version(const char *flag, const semver *v)
{
        assert(flag);
        if (!v || v->major != 3 || v->minor < MINOR_FIRST || v->minor >= MINOR_FIRST + N_MINORS)
                return false;
        _cleanup_free_ char *name = etcd_flag_normalize(flag);
        int m = v->minor - MINOR_FIRST;
        const flag_row *r = typed_row(name, m);
        return r && v->patch >= r->in.patch[m];
}

const char *etcd_flag_row_name(size_t i)
{
        return i < ARRAY_SIZE(rows) ? rows[i].name : NULL;
}
