/*
 * The one rule for which etcd flags a spec may add to a member's command
 * line (spec.options.extraFlags, and etcd-io's etcdOptions that map onto
 * it).
 *
 * Two kinds of flag are refused. Flags gitcd sets itself (the member's
 * name, its data directory, its URLs, the initial cluster, TLS files, and
 * the flags spec.options has a field for): a second value would fight
 * gitcd's, so the message names the field that controls it. And flags that
 * break a cluster gitcd manages: one commit with `force-new-cluster: "true"`
 * would turn every member gitcd restarts into a one-member cluster, after
 * which the other members look lost and gitcd replaces them, data and all.
 *
 * Design: a deny-list, not an allow-list. etcd adds and renames flags from
 * release to release (3.4, 3.5, 3.6), and gitcd does not want to refuse a
 * harmless new one; what it must refuse is short and known. Names are
 * compared after lower-casing and turning '_' into '-', so a spelling etcd
 * would not accept anyway cannot slip past the rule either.
 */
#include <assert.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "api/flags.h"
#include "api/reader.h"
#include "util/xalloc.h"

/* A trailing '*' makes the entry a prefix. Exactly one of field and why is set. */
static const etcd_flag_rule rules[] = {
    /* set by gitcd */
    {"name", "metadata.name (gitcd names the members)", NULL},
    {"data-dir", "spec.storage", NULL},
    {"wal-dir", "spec.storage", NULL},
    {"initial-cluster*", "spec.replicas (gitcd manages membership)", NULL},
    {"discovery*", "spec.replicas (gitcd manages membership)", NULL},
    {"listen-*", "spec.tls (gitcd sets listen addresses)", NULL},
    {"advertise-client-urls", "spec.tls (gitcd sets advertised addresses)", NULL},
    {"initial-advertise-peer-urls", "spec.tls (gitcd sets advertised addresses)", NULL},
    {"cert-file", "spec.tls.client", NULL},
    {"key-file", "spec.tls.client", NULL},
    {"trusted-ca-file", "spec.tls.client", NULL},
    {"client-cert-auth", "spec.tls.client", NULL},
    {"client-crl-file", "spec.tls.client", NULL},
    {"auto-tls", "spec.tls.provider", NULL},
    {"peer-*", "spec.tls.peer", NULL},
    {"quota-backend-bytes", "spec.options.quotaBackendBytes", NULL},
    {"auto-compaction-mode", "spec.options.autoCompactionMode", NULL},
    {"auto-compaction-retention", "spec.options.autoCompactionRetention", NULL},
    {"snapshot-count", "spec.options.snapshotCount", NULL},
    {"heartbeat-interval", "spec.options.heartbeatInterval", NULL},
    {"election-timeout", "spec.options.electionTimeout", NULL},
    /* break a cluster gitcd manages */
    {"force-new-cluster", NULL,
     "it turns each member gitcd restarts into a one-member cluster that forgets the others, "
     "whose data would then be taken for lost"},
    {"config-file", NULL,
     "etcd then ignores every command-line flag, including the ones gitcd sets"},
    {"log-output*", NULL,
     "gitcd reads each member's log from its standard error, and a log file is a write to a "
     "path of the spec's choosing on the member's host"},
    {"unsafe-*", NULL,
     "it turns off a safety of etcd (unsafe-no-fsync loses acknowledged writes when a host "
     "crashes)"},
    {"max-learners", NULL,
     "gitcd adds members one learner at a time and relies on etcd refusing a second"},
    {"experimental-max-learners", NULL,
     "gitcd adds members one learner at a time and relies on etcd refusing a second"},
    {"enable-v2*", NULL,
     "the v2 API is deprecated, its keys are outside what gitcd checks, and etcd 3.6 has "
     "none"},
    {"experimental-enable-v2v3", NULL,
     "the v2 API is deprecated, its keys are outside what gitcd checks, and etcd 3.6 has "
     "none"},
    {"auth-token*", NULL, "etcd authentication belongs to spec.auth"},
    {"proxy*", NULL, "it makes etcd a proxy instead of a cluster member"},
};

static bool rule_matches(const char *pattern, const char *name)
{
        size_t n = strlen(pattern);
        assert(n > 0);
        if (pattern[n - 1] == '*')
                return strneq(name, pattern, n - 1);
        return streq(name, pattern);
}

const etcd_flag_rule *etcd_flag_refused(const char *flag)
{
        assert(flag);
        _cleanup_free_ char *name = xstrdup(flag);
        for (char *p = name; *p; p++)
                *p = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
        for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
                assert(!rules[i].field != !rules[i].why);
                if (rule_matches(rules[i].flag, name))
                        return &rules[i];
        }
        return NULL;
}

bool etcd_flag_needs_policy(const char *flag)
{
        assert(flag);
        static const char *const gated[] = {
            "enable-pprof",
            "experimental-enable-distributed-tracing*",
            "experimental-distributed-tracing-*",
        };
        _cleanup_free_ char *name = xstrdup(flag);
        for (char *p = name; *p; p++)
                *p = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
        for (size_t i = 0; i < ARRAY_SIZE(gated); i++)
                if (rule_matches(gated[i], name))
                        return true;
        return false;
}
