/*
 * The etcd command line of one member. The same vector is the member Pod's
 * container `command` and what the local target executes, so a cluster
 * run by the tests on loopback starts exactly as it would on Kubernetes.
 *
 * Flags come in one fixed order, each as a single "--flag=value" word, and
 * only when their value is set (etcd's own default applies otherwise):
 *
 *   etcd
 *   --name --data-dir
 *   --listen-client-urls --advertise-client-urls
 *   --listen-peer-urls --initial-advertise-peer-urls
 *   --listen-metrics-urls
 *   --initial-cluster --initial-cluster-state --initial-cluster-token
 *   --quota-backend-bytes --auto-compaction-mode --auto-compaction-retention
 *   --snapshot-count --heartbeat-interval --election-timeout
 *   etcd's own corruption checks (spec.consistency.etcdChecks, on by default),
 *     as the member's minor spells them:
 *       3.4, 3.5.0-3.5.4  --experimental-initial-corrupt-check=true
 *                         --experimental-corrupt-check-time=<etcdCheckInterval>
 *       3.5.5 and later   the same and --experimental-compact-hash-check-enabled=true
 *       3.6 and later     --feature-gates=InitialCorruptCheck=true,CompactHashCheck=true
 *                         --corrupt-check-time=<etcdCheckInterval>
 *   the member stops serving gRPC while it is defragmented (its clients
 *     move to another member; docs/maintenance.md), on the versions that
 *     have it (api/flags.c's table: 3.5.14 and later):
 *       3.5               --experimental-stop-grpc-service-on-defrag=true
 *       3.6 and later     StopGRPCServiceOnDefrag=true in gitcd's --feature-gates
 *     unless the spec's extraFlags set it themselves (their value then stands)
 *   client TLS: --cert-file --key-file --trusted-ca-file --client-cert-auth=true
 *   peer TLS:   --peer-cert-file --peer-key-file --peer-trusted-ca-file
 *               --peer-client-cert-auth=true
 *   the user's extra flags, sorted by name ("--k=v", or "--k" for an empty value)
 *
 * Extra flags are sorted so that two specs listing them in a different
 * order render the same Pod (etcd does not care about flag order).
 *
 * render_member_config_hash() is the one definition of "outdated": sha256
 * over the version and this vector (each word NUL-terminated, so no
 * length limit and no ambiguity between words), then the TLS material
 * version the target placed in the plan entry, when there is one (so a
 * cluster without TLS keeps the hash it had before TLS counted). That
 * version covers only what a restart must pick up (the trusted CAs); the
 * target computes it (pki/auto.c), render only hashes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/flags.h"
#include "render/render-internal.h"
#include "render/render.h"
#include "util/hash.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define DEFRAG_STOP_GRPC_FLAG "experimental-stop-grpc-service-on-defrag"

typedef struct strv {
        char **v;
        size_t n;
        size_t alloc;
} strv;

static void strv_push(strv *s, char *owned)
{
        s->v = xgrow(s->v, &s->alloc, s->n + 2, sizeof(char *));
        s->v[s->n++] = owned;
        s->v[s->n] = NULL;
}

static void flag_str(strv *s, const char *flag, const char *value)
{
        if (!isempty(value))
                strv_push(s, xasprintf("--%s=%s", flag, value));
}

static void flag_int(strv *s, const char *flag, long long value)
{
        if (value > 0)
                strv_push(s, xasprintf("--%s=%lld", flag, value));
}

static void flag_tls_file(strv *s, const etcd_cluster *c, const member_plan *m, const char *flag,
                          const char *subdir, const char *file)
{
        char *path = render_tls_file(c, m, subdir, file);
        flag_str(s, flag, path);
        free(path);
}

static int cmp_kv(const void *a, const void *b)
{
        return strcmp((*(const kv *const *)a)->key, (*(const kv *const *)b)->key);
}

/* Whether the spec's extraFlags name a feature gate ("Gate=..." in its --feature-gates). */
static bool extra_gate_set(const etcd_cluster *c, const char *gate)
{
        const char *gates = kv_get(&c->options.extra_flags, "feature-gates");
        size_t n = strlen(gate);
        for (const char *p = gates; p && *p;) {
                p += strspn(p, " ,");
                if (strncmp(p, gate, n) == 0 && (p[n] == '=' || p[n] == ' '))
                        return true;
                p += strcspn(p, ",");
        }
        return false;
}

/*
 * Stop serving gRPC while defragmenting (etcd reports NOT_SERVING on its
 * gRPC health, so a client with several endpoints moves to another member
 * instead of waiting on the one whose backend is locked). Only the
 * versions that have it (api/flags.c decides); 3.6 spells it as a feature
 * gate in gitcd's one --feature-gates (flags_checks_and_gates). The spec's
 * own value, when it sets one, is the one etcd gets.
 */
static bool defrag_stops_grpc(const etcd_cluster *c)
{
        if (!etcd_flag_in_version(DEFRAG_STOP_GRPC_FLAG, &c->ver))
                return false;
        if (c->ver.minor >= 6)
                return !extra_gate_set(c, "StopGRPCServiceOnDefrag");
        return !kv_get(&c->options.extra_flags, DEFRAG_STOP_GRPC_FLAG);
}

/*
 * etcd's corruption checks and the gRPC stop during defragmentation
 * (defrag_stops_grpc), spelled for the version's minor. The checks: the
 * check at start-up (a member whose data differs from its peers' refuses to
 * serve),
 * the leader's periodic check of the latest revision (a CORRUPT alarm) and,
 * from 3.5.5 (where etcd added it), the leader's cheap check of the hashes
 * its compactions record. 3.6 turns the experimental flags into feature
 * gates and a plain --corrupt-check-time. An unknown version (0.0.0, a spec
 * that did not parse) gets none.
 *
 * 3.6's gates are one --feature-gates: gitcd's (the checks, then
 * StopGRPCServiceOnDefrag), then the spec's own from extraFlags; gitcd_gates
 * says whether gitcd wrote one (the spec's then is not written again).
 * etcd's checks off leave the gRPC stop alone.
 */
static void flags_checks_and_gates(strv *s, const etcd_cluster *c, bool *ret_gitcd_gates)
{
        const semver *v = &c->ver;
        *ret_gitcd_gates = false;
        if (v->major != 3 || v->minor < 4)
                return;
        bool checks = c->consistency.etcd_checks;
        _cleanup_free_ char *every = duration_format_ms(c->consistency.etcd_check_interval_ms);
        if (v->minor >= 6) {
                strbuf gates = STRBUF_INIT;
                if (checks)
                        sb_append(&gates, "InitialCorruptCheck=true,CompactHashCheck=true");
                if (defrag_stops_grpc(c))
                        sb_printf(&gates, "%sStopGRPCServiceOnDefrag=true", gates.len ? "," : "");
                const char *more = kv_get(&c->options.extra_flags, "feature-gates");
                if (gates.len && !isempty(more))
                        sb_printf(&gates, ",%s", more);
                if (gates.len) {
                        flag_str(s, "feature-gates", sb_str(&gates));
                        *ret_gitcd_gates = true;
                }
                sb_release(&gates);
                if (checks)
                        flag_str(s, "corrupt-check-time", every);
                return;
        }
        if (checks) {
                flag_str(s, "experimental-initial-corrupt-check", "true");
                flag_str(s, "experimental-corrupt-check-time", every);
                if (v->minor == 5 && v->patch >= 5)
                        flag_str(s, "experimental-compact-hash-check-enabled", "true");
        }
        if (defrag_stops_grpc(c))
                flag_str(s, DEFRAG_STOP_GRPC_FLAG, "true");
}

char **render_member_command(const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        if (idx >= p->n)
                return NULL;
        const member_plan *m = &p->members[idx];
        const etcd_options *o = &c->options;
        strv s = {NULL, 0, 0};

        strv_push(&s, xstrdup("etcd"));
        flag_str(&s, "name", m->name);
        flag_str(&s, "data-dir", m->data_dir);
        flag_str(&s, "listen-client-urls", m->listen_client_url);
        flag_str(&s, "advertise-client-urls", m->client_url);
        flag_str(&s, "listen-peer-urls", m->listen_peer_url);
        flag_str(&s, "initial-advertise-peer-urls", m->peer_url);
        flag_str(&s, "listen-metrics-urls", m->listen_metrics_url);
        flag_str(&s, "initial-cluster", m->initial_cluster);
        flag_str(&s, "initial-cluster-state", m->initial_cluster_state);
        flag_str(&s, "initial-cluster-token", p->cluster_token);
        if (m->force_new_cluster)
                flag_str(&s, "force-new-cluster", "true");
        flag_int(&s, "quota-backend-bytes", o->quota_backend_bytes);
        flag_str(&s, "auto-compaction-mode", o->auto_compaction_mode);
        flag_str(&s, "auto-compaction-retention", o->auto_compaction_retention);
        flag_int(&s, "snapshot-count", o->snapshot_count);
        flag_int(&s, "heartbeat-interval", o->heartbeat_interval_ms);
        flag_int(&s, "election-timeout", o->election_timeout_ms);
        bool merged_gates;
        flags_checks_and_gates(&s, c, &merged_gates);
        if (render_client_tls(c)) {
                flag_tls_file(&s, c, m, "cert-file", TLS_SUBDIR_CLIENT, "tls.crt");
                flag_tls_file(&s, c, m, "key-file", TLS_SUBDIR_CLIENT, "tls.key");
                flag_tls_file(&s, c, m, "trusted-ca-file", TLS_SUBDIR_CLIENT, "ca.crt");
                flag_str(&s, "client-cert-auth", "true");
        }
        if (render_peer_tls(c)) {
                flag_tls_file(&s, c, m, "peer-cert-file", TLS_SUBDIR_PEER, "tls.crt");
                flag_tls_file(&s, c, m, "peer-key-file", TLS_SUBDIR_PEER, "tls.key");
                flag_tls_file(&s, c, m, "peer-trusted-ca-file", TLS_SUBDIR_PEER, "ca.crt");
                flag_str(&s, "peer-client-cert-auth", "true");
        }
        if (render_peer_self_signed(c))
                flag_str(&s, "peer-auto-tls", "true");

        size_t n = o->extra_flags.n;
        const kv **extra = xcalloc(n ? n : 1, sizeof(kv *));
        for (size_t i = 0; i < n; i++)
                extra[i] = &o->extra_flags.items[i];
        qsort(extra, n, sizeof(kv *), cmp_kv);
        for (size_t i = 0; i < n; i++) {
                if (merged_gates && streq(extra[i]->key, "feature-gates"))
                        continue; /* in gitcd's own --feature-gates */
                if (isempty(extra[i]->value))
                        strv_push(&s, xasprintf("--%s", extra[i]->key));
                else
                        strv_push(&s, xasprintf("--%s=%s", extra[i]->key, extra[i]->value));
        }
        free(extra);
        return s.v;
}

char *render_member_config_hash(const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        char **argv = render_member_command(c, p, idx);
        if (!argv)
                return NULL;
        hash_ctx *h = hash_sha256_new();
        const char *version = c->version ? c->version : "";
        hash_update(h, version, strlen(version) + 1);
        for (size_t i = 0; argv[i]; i++)
                hash_update(h, argv[i], strlen(argv[i]) + 1);
        const char *tls = p->members[idx].tls_version;
        if (!isempty(tls)) {
                /* After the command's NULL: cannot collide with a command word. */
                hash_update(h, "", 1);
                hash_update(h, tls, strlen(tls) + 1);
        }
        char *hex = xmalloc(HASH_SHA256_HEX);
        hash_final_hex(h, hex);
        hash_free(h);
        strv_free(argv);
        return hex;
}
