/*
 * Defaults and the semantic rules of an EtcdCluster, shared by all five
 * dialects: replica counts, versions, storage, TLS provider requirements,
 * schedules, etcd timing, the etcd flags a spec may set (api/flags.c),
 * and the syntax of the values that reach a machine: host paths and
 * addresses, the image repository, issuer groups (api/syntax.c; control
 * characters and locations are refused where they are read, api/reader.c
 * and api/native.c).
 *
 * Design: rules run on the model, after defaults are filled, so one rule
 * covers every dialect; each message names the field as the user spelled
 * it (rd_name) and points at where it was written (the recorded location).
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/domains.h"
#include "api/flags.h"
#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "api/versions.h"
#include "util/xalloc.h"

#define QUOTA_SUGGESTED_MAX  (8LL << 30)
#define ETCD_MAX_ELECTION_MS 50000

static void default_issuer(issuer_ref *i)
{
        if (!i->name)
                return;
        if (!i->kind)
                i->kind = xstrdup("Issuer");
        if (!i->group)
                i->group = xstrdup("cert-manager.io");
}

static void copy_issuer(issuer_ref *dst, const issuer_ref *src)
{
        free(dst->name);
        free(dst->kind);
        free(dst->group);
        dst->name = xstrdup_null(src->name);
        dst->kind = xstrdup_null(src->kind);
        dst->group = xstrdup_null(src->group);
}

static void default_str(char **field, const char *inherited, const char *fallback)
{
        if (*field)
                return;
        *field = xstrdup(inherited ? inherited : fallback);
}

/* Each machine gets every field: its own, else the hosts-level one, else gitcd's default. */
static void default_hosts(etcd_cluster *c)
{
        hosts_spec *hs = &c->hosts;
        const host_spec *d = &hs->defaults;
        _cleanup_free_ char *data_dir =
            xasprintf("/var/lib/etcd/%s-%s", c->namespace_, c->name ? c->name : "");
        _cleanup_free_ char *tls_dir =
            xasprintf("/etc/etcd/%s-%s/pki", c->namespace_, c->name ? c->name : "");
        for (size_t i = 0; i < hs->n; i++) {
                host_spec *h = &hs->items[i];
                if (!h->address)
                        continue; /* reported by the reader */
                h->mode = d->mode;
                if (!h->ssh_port)
                        h->ssh_port = d->ssh_port ? d->ssh_port : 22;
                default_str(&h->ssh_user, d->ssh_user, "root");
                default_str(&h->advertise_address, NULL, h->address);
                default_str(&h->data_dir, d->data_dir, data_dir);
                default_str(&h->tls_dir, d->tls_dir, tls_dir);
                if (h->mode == HOST_MODE_STATIC_POD) {
                        default_str(&h->manifest_dir, d->manifest_dir, "/etc/kubernetes/manifests");
                } else {
                        default_str(&h->unit_dir, d->unit_dir, "/etc/systemd/system");
                        default_str(&h->etcd_binary, d->etcd_binary, "/usr/local/bin/etcd");
                }
        }
}

void spec_fill_defaults(etcd_cluster *c)
{
        if (!c->namespace_)
                c->namespace_ = xstrdup("default");
        if (!c->version)
                c->version = xstrdup(GITCD_DEFAULT_VERSION);
        if (semver_parse(c->version, &c->ver) < 0)
                memset(&c->ver, 0, sizeof(c->ver));
        if (!c->repository)
                c->repository = xstrdup(GITCD_DEFAULT_REPOSITORY);
        if (!c->storage.size) {
                c->storage.size = xstrdup(GITCD_DEFAULT_STORAGE_SIZE);
                (void)quantity_parse(c->storage.size, &c->storage.size_bytes);
        }
        tls_spec *t = &c->tls;
        if (t->provider == TLS_PROVIDER_NONE) {
                t->client.enabled = false;
                t->peer.enabled = false;
        }
        default_issuer(&t->client.issuer);
        default_issuer(&t->peer.issuer);
        if (t->provider == TLS_PROVIDER_CERT_MANAGER && t->client.enabled &&
            !t->operator_client_issuer.name && t->client.issuer.name)
                copy_issuer(&t->operator_client_issuer, &t->client.issuer);
        default_issuer(&t->operator_client_issuer);
        if (c->options.auto_compaction_retention && !c->options.auto_compaction_mode)
                c->options.auto_compaction_mode = xstrdup("periodic");
        if (c->restore.bump.mode == BUMP_UNSET)
                c->restore.bump = revision_bump_default(c);
        if (c->recovery.bump.mode == BUMP_UNSET)
                c->recovery.bump = revision_bump_default(c);
        default_hosts(c);
        /* metadata.name may be missing or invalid: that is reported, not defaulted from */
        if (c->adopt.from != ADOPT_FROM_NONE && !c->adopt.name)
                c->adopt.name = xstrdup_null(c->name);
        if (c->adopt.from != ADOPT_FROM_NONE && !c->adopt.namespace_)
                c->adopt.namespace_ = xstrdup_null(c->namespace_);
}

static void check_version(reader *r)
{
        etcd_cluster *c = r->c;
        const char *name = rd_name(r, "spec.version");
        const char *v = c->version;
        semver sv;
        if (semver_parse(v, &sv) < 0) {
                const char *s = v[0] == 'v' ? v + 1 : v;
                if (strpbrk(s, "-+") && strspn(s, "0123456789.") > 0)
                        rd_diag_at(r, DIAG_ERROR, "spec.version",
                                   "%s: \"%s\" has a pre-release or build suffix; gitcd runs "
                                   "etcd releases only (for example %s)",
                                   name, v, GITCD_DEFAULT_VERSION);
                else
                        rd_diag_at(r, DIAG_ERROR, "spec.version",
                                   "%s: \"%s\" is not a version; write MAJOR.MINOR.PATCH (for "
                                   "example %s)",
                                   name, v, GITCD_DEFAULT_VERSION);
                return;
        }
        if (!version_supported(&sv))
                rd_diag_at(r, DIAG_ERROR, "spec.version",
                           "%s: etcd %d.%d.%d is not supported; gitcd supports etcd %s", name,
                           sv.major, sv.minor, sv.patch, version_supported_list());
}

static void check_replicas(reader *r)
{
        etcd_cluster *c = r->c;
        const char *name = rd_name(r, "spec.replicas");
        if (c->replicas < 0 || c->replicas > GITCD_MAX_REPLICAS) {
                rd_diag_at(r, DIAG_ERROR, "spec.replicas",
                           "%s: %d is out of range (0 to %d; 0 pauses the cluster)", name,
                           c->replicas, GITCD_MAX_REPLICAS);
                return;
        }
        if (c->replicas > GITCD_MAX_RECOMMENDED_REPLICAS)
                rd_diag_at(r, DIAG_WARNING, "spec.replicas",
                           "%s: %d members is more than the recommended %d; every write waits "
                           "for a majority, so more members make writes slower",
                           name, c->replicas, GITCD_MAX_RECOMMENDED_REPLICAS);
        else if (c->replicas > 0 && c->replicas % 2 == 0)
                rd_diag_at(r, DIAG_WARNING, "spec.replicas",
                           "%s: an even count (%d) tolerates no more failures than %d members; "
                           "use an odd number",
                           name, c->replicas, c->replicas - 1);
}

static void check_storage(reader *r)
{
        etcd_cluster *c = r->c;
        if (c->storage.size_bytes <= 0)
                rd_diag_at(r, DIAG_ERROR, "spec.storage.size", "%s: must be greater than zero",
                           rd_name(r, "spec.storage.size"));
        if (c->storage.medium == MEDIUM_MEMORY && c->replicas == 0)
                rd_diag_at(r, DIAG_ERROR, "spec.storage.medium",
                           "%s: Memory with %s: 0 is not allowed; a paused in-memory cluster "
                           "loses its data (use medium: Disk to pause)",
                           rd_name(r, "spec.storage.medium"), rd_name(r, "spec.replicas"));
}

static void surface_needs(reader *r, const char *surface, const tls_surface_spec *s)
{
        etcd_cluster *c = r->c;
        _cleanup_free_ char *p = xasprintf("spec.tls.%s", surface);
        _cleanup_free_ char *psec = xasprintf("spec.tls.%s.secretRef", surface);
        _cleanup_free_ char *piss = xasprintf("spec.tls.%s.issuerRef", surface);
        if (s->enabled && c->tls.provider == TLS_PROVIDER_SECRETS && !s->secret)
                rd_diag_at(r, DIAG_ERROR, p,
                           "%s: the secrets provider needs a Secret for the %s surface (%s)",
                           rd_name(r, "spec.tls.provider"), surface, rd_name(r, psec));
        if (s->enabled && c->tls.provider == TLS_PROVIDER_CERT_MANAGER && !s->issuer.name)
                rd_diag_at(r, DIAG_ERROR, p,
                           "%s: the cert-manager provider needs an issuerRef for the %s "
                           "surface (%s)",
                           rd_name(r, "spec.tls.provider"), surface, rd_name(r, piss));
        if (s->secret && (c->tls.provider != TLS_PROVIDER_SECRETS || !s->enabled))
                rd_diag_at(r, DIAG_ERROR, psec,
                           "%s is only used by the secrets provider on an enabled surface (the "
                           "provider is %s)",
                           rd_name(r, psec), tls_provider_name(c->tls.provider));
        if (s->issuer.name && (c->tls.provider != TLS_PROVIDER_CERT_MANAGER || !s->enabled))
                rd_diag_at(r, DIAG_ERROR, piss,
                           "%s is only used by the cert-manager provider on an enabled surface "
                           "(the provider is %s)",
                           rd_name(r, piss), tls_provider_name(c->tls.provider));
}

static void check_tls(reader *r)
{
        etcd_cluster *c = r->c;
        tls_spec *t = &c->tls;
        surface_needs(r, "client", &t->client);
        surface_needs(r, "peer", &t->peer);
        if (t->client.allow_plain && c->ver.major == 3 && c->ver.minor < 5)
                rd_diag_at(r, DIAG_ERROR, "spec.tls.client.allowPlainHTTP",
                           "%s needs etcd 3.5 or later: etcd %s cannot reliably serve gRPC in "
                           "plain http and https on one port",
                           rd_name(r, "spec.tls.client.allowPlainHTTP"), c->version);
        if (t->client.allow_plain && (t->provider == TLS_PROVIDER_NONE || !t->client.enabled))
                rd_diag_at(r, DIAG_ERROR, "spec.tls.client.allowPlainHTTP",
                           "%s: plain http besides https needs client TLS on (%s: true and a "
                           "provider other than none)",
                           rd_name(r, "spec.tls.client.allowPlainHTTP"),
                           rd_name(r, "spec.tls.client.enabled"));
        if (t->peer.self_signed && t->peer.enabled)
                rd_diag_at(r, DIAG_ERROR, "spec.tls.peer.selfSigned",
                           "%s: etcd's own self-signed peer certificates cannot go with the %s "
                           "provider's peer certificates; set %s: false to keep the provider for "
                           "clients only, or remove %s",
                           rd_name(r, "spec.tls.peer.selfSigned"), tls_provider_name(t->provider),
                           rd_name(r, "spec.tls.peer.enabled"),
                           rd_name(r, "spec.tls.peer.selfSigned"));
        const char *osec = "spec.tls.operatorClient.secretRef";
        const char *oiss = "spec.tls.operatorClient.issuerRef";
        if (t->provider == TLS_PROVIDER_SECRETS && t->client.enabled && !t->operator_client_secret)
                rd_diag_at(r, DIAG_ERROR, "spec.tls.client",
                           "%s: the secrets provider needs a client certificate Secret for gitcd "
                           "itself (%s)",
                           rd_name(r, "spec.tls.provider"), rd_name(r, osec));
        if (t->operator_client_secret &&
            (t->provider != TLS_PROVIDER_SECRETS || !t->client.enabled))
                rd_diag_at(r, DIAG_ERROR, osec,
                           "%s is only used by the secrets provider with client TLS (the "
                           "provider is %s)",
                           rd_name(r, osec), tls_provider_name(t->provider));
        if (t->operator_client_issuer.name &&
            (t->provider != TLS_PROVIDER_CERT_MANAGER || !t->client.enabled))
                rd_diag_at(r, DIAG_ERROR, oiss,
                           "%s is only used by the cert-manager provider with client TLS (the "
                           "provider is %s)",
                           rd_name(r, oiss), tls_provider_name(t->provider));
        if (t->provider == TLS_PROVIDER_AUTO && t->renew_before_seconds >= t->validity_seconds) {
                _cleanup_free_ char *rb = duration_format_s(t->renew_before_seconds);
                _cleanup_free_ char *va = duration_format_s(t->validity_seconds);
                rd_diag_at(r, DIAG_ERROR, "spec.tls.auto.renewBefore",
                           "%s: %s must be shorter than the certificate lifetime (%s: %s)",
                           rd_name(r, "spec.tls.auto.renewBefore"), rb,
                           rd_name(r, "spec.tls.auto.validity"), va);
        }
        if (t->rotate_ca_token && t->provider != TLS_PROVIDER_AUTO)
                rd_diag_at(r, DIAG_ERROR, "spec.tls.auto.rotateCA",
                           "%s rotates the CA gitcd keeps for tls.provider auto; the provider is "
                           "%s",
                           rd_name(r, "spec.tls.auto.rotateCA"), tls_provider_name(t->provider));
        if (t->ca_bundle_secret && t->provider == TLS_PROVIDER_NONE)
                rd_diag_at(r, DIAG_ERROR, "spec.tls.caBundleSecretRef",
                           "%s is set but the TLS provider is none",
                           rd_name(r, "spec.tls.caBundleSecretRef"));
}

static void check_options(reader *r)
{
        etcd_cluster *c = r->c;
        etcd_options *o = &c->options;
        if (o->quota_backend && o->quota_backend_bytes <= 0)
                rd_diag_at(r, DIAG_ERROR, "spec.options.quotaBackendBytes",
                           "%s: must be greater than zero",
                           rd_name(r, "spec.options.quotaBackendBytes"));
        else if (o->quota_backend_bytes > QUOTA_SUGGESTED_MAX)
                rd_diag_at(r, DIAG_WARNING, "spec.options.quotaBackendBytes",
                           "%s: %s is above etcd's suggested maximum of 8Gi",
                           rd_name(r, "spec.options.quotaBackendBytes"), o->quota_backend);

        const char *ret = o->auto_compaction_retention;
        if (ret) {
                const char *rn = rd_name(r, "spec.options.autoCompactionRetention");
                int64_t v;
                bool digits = ret[0] && strspn(ret, "0123456789") == strlen(ret);
                if (streq(o->auto_compaction_mode, "revision") && !digits)
                        rd_diag_at(r, DIAG_ERROR, "spec.options.autoCompactionRetention",
                                   "%s: \"%s\" must be a number of revisions in revision mode", rn,
                                   ret);
                else if (!digits && (duration_parse_ms(ret, &v) < 0 || v <= 0))
                        rd_diag_at(r, DIAG_ERROR, "spec.options.autoCompactionRetention",
                                   "%s: \"%s\" is not a duration (for example 1h or 30m) or a "
                                   "number of hours",
                                   rn, ret);
        }

        int hb = o->heartbeat_interval_ms ? o->heartbeat_interval_ms : 100;
        int el = o->election_timeout_ms ? o->election_timeout_ms : 1000;
        const char *hbn = rd_name(r, "spec.options.heartbeatInterval");
        const char *eln = rd_name(r, "spec.options.electionTimeout");
        if ((o->heartbeat_interval_ms || o->election_timeout_ms) && (int64_t)el < 5LL * hb)
                rd_diag_at(r, DIAG_ERROR,
                           o->election_timeout_ms ? "spec.options.electionTimeout"
                                                  : "spec.options.heartbeatInterval",
                           "%s: %d ms is less than 5 × %s (%d ms); etcd requires the election "
                           "timeout to be at least five heartbeats",
                           eln, el, hbn, hb);
        else if (el > ETCD_MAX_ELECTION_MS)
                rd_diag_at(r, DIAG_ERROR, "spec.options.electionTimeout",
                           "%s: %d ms is above etcd's maximum of %d ms", eln, el,
                           ETCD_MAX_ELECTION_MS);

        for (size_t i = 0; i < o->extra_flags.n; i++) {
                const kv *f = &o->extra_flags.items[i];
                _cleanup_free_ char *why = NULL;
                if (etcd_flag_check(f->key, f->value, c->ver.major ? &c->ver : NULL, &why) == 0)
                        continue;
                _cleanup_free_ char *native = xasprintf("spec.options.extraFlags.%s", f->key);
                rd_diag_at(r, DIAG_ERROR, native, "%s: %s", rd_name(r, native), why);
        }
}

static bool written(const etcd_cluster *c, const char *native)
{
        for (size_t i = 0; i < c->n_locs; i++)
                if (streq(c->locs[i].path, native))
                        return true;
        return false;
}

static void check_cron(reader *r, const char *native, const char *expr)
{
        _cleanup_free_ char *why = NULL;
        if (cron_check(expr, &why) < 0)
                rd_diag_at(r, DIAG_ERROR, native, "%s: \"%s\": %s", rd_name(r, native), expr, why);
}

static void check_schedules(reader *r)
{
        etcd_cluster *c = r->c;
        snapshot_spec *s = &c->snapshots;
        if (s->schedule)
                check_cron(r, "spec.snapshots.schedule", s->schedule);
        _cleanup_free_ char *why = NULL;
        if (s->verify == VERIFY_SCHEDULE && cron_check(s->verify_schedule, &why) < 0)
                rd_diag_at(r, DIAG_ERROR, "spec.snapshots.verify",
                           "%s: \"%s\" is not every, off or a cron expression: %s",
                           rd_name(r, "spec.snapshots.verify"), s->verify_schedule, why);
        if (s->enabled && !s->schedule && !written(c, "spec.snapshots.schedule"))
                rd_diag_at(r, DIAG_ERROR, "spec.snapshots", "%s.schedule is required",
                           rd_name(r, "spec.snapshots"));
        if (s->enabled && s->destination.kind == DEST_NONE &&
            !written(c, "spec.snapshots.destination"))
                rd_diag_at(r, DIAG_ERROR, "spec.snapshots", "%s.destination is required",
                           rd_name(r, "spec.snapshots"));
        if (s->retention_count < 1)
                rd_diag_at(r, DIAG_ERROR, "spec.snapshots.retention.count",
                           "%s: %d must be at least 1",
                           rd_name(r, "spec.snapshots.retention.count"), s->retention_count);

        defrag_spec *d = &c->defrag;
        if (d->schedule)
                check_cron(r, "spec.defrag.schedule", d->schedule);
        if (d->free_space_above && d->free_space_above_bytes <= 0)
                rd_diag_at(r, DIAG_ERROR, "spec.defrag.freeSpaceAbove",
                           "%s: must be greater than zero",
                           rd_name(r, "spec.defrag.freeSpaceAbove"));
        if (d->enabled && !d->schedule && !d->free_space_above && !d->quota_usage_above_percent &&
            !d->disarm_nospace && !written(c, "spec.defrag.schedule") &&
            !written(c, "spec.defrag.freeSpaceAbove") &&
            !written(c, "spec.defrag.quotaUsageAbovePercent"))
                rd_diag_at(r, DIAG_ERROR, "spec.defrag",
                           "%s needs a schedule, freeSpaceAbove, quotaUsageAbovePercent or "
                           "disarmNoSpace",
                           rd_name(r, "spec.defrag"));
}

/*
 * spec.maintenance: each window's schedule a cron expression; the override
 * token short and of safe characters, as it is shown, audited and stored.
 */
static void check_maintenance(reader *r)
{
        const maintenance_spec *ms = &r->c->maintenance;
        for (size_t i = 0; i < ms->n_windows; i++) {
                if (!ms->windows[i].schedule)
                        continue;
                _cleanup_free_ char *path = xasprintf("spec.maintenance.windows[%zu].schedule", i);
                check_cron(r, path, ms->windows[i].schedule);
        }
        const char *t = ms->override;
        if (t &&
            (isempty(t) || strlen(t) > 64 ||
             t[strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")]))
                rd_diag_at(r, DIAG_ERROR, "spec.maintenance.override",
                           "%s: \"%s\" is not a token: 1 to 64 letters, digits, '.', '_' or '-'",
                           rd_name(r, "spec.maintenance.override"), t);
}

/* spec.recovery: a source and a token, both short single-line words a person can type. */
static void check_recovery(reader *r)
{
        const recovery_spec *rc = &r->c->recovery;
        if (rc->from == RECOVERY_NONE)
                return;
        if (rc->from == RECOVERY_FROM_MEMBER && isempty(rc->member))
                rd_diag_at(r, DIAG_ERROR, "spec.recovery",
                           "%s.from needs a member (the survivor) or a snapshot (its id)",
                           rd_name(r, "spec.recovery"));
        else if (rc->from == RECOVERY_FROM_MEMBER && !dns1123_label_valid(rc->member))
                rd_diag_at(r, DIAG_ERROR, "spec.recovery.from.member",
                           "%s: \"%s\" is not a member name",
                           rd_name(r, "spec.recovery.from.member"), rc->member);
        if (isempty(rc->token))
                rd_diag_at(r, DIAG_ERROR, "spec.recovery",
                           "%s.token is required: the recovery runs once per token",
                           rd_name(r, "spec.recovery"));
        else if (strlen(rc->token) > 128 || strpbrk(rc->token, "\n\r\t"))
                rd_diag_at(r, DIAG_ERROR, "spec.recovery.token",
                           "%s: at most 128 characters on one line",
                           rd_name(r, "spec.recovery.token"));
}

/*
 * bumpRevision of one restore (native: its path): a bump etcd's restore tool
 * of spec.version cannot make is refused when written, and when it is the
 * role's default the restore goes without one, with a warning saying so.
 */
static void check_one_bump(reader *r, const char *native, const revision_bump *b, bool restores)
{
        etcd_cluster *c = r->c;
        _cleanup_free_ char *first = NULL;
        if (!restores || version_has_restore_bump(&c->ver, &first) || !first)
                return;
        bool bumps = b->mode == BUMP_AUTO || (b->mode == BUMP_FIXED && b->amount > 0);
        if (written(c, native) && bumps)
                rd_diag_at(r, DIAG_ERROR, native,
                           "%s: etcd %s cannot bump the revision of a restore (its restore "
                           "tool takes --bump-revision and --mark-compacted from %s on); use "
                           "%s %s or later, or %s: 0",
                           rd_name(r, native), c->version, first, rd_name(r, "spec.version"), first,
                           rd_name(r, native));
        else if (!written(c, native) && c->role == ROLE_KUBERNETES) {
                _cleanup_free_ char *at = xstrdup(native);
                at[strlen(at) - strlen(".bumpRevision")] = '\0';
                rd_diag_at(r, DIAG_WARNING, at,
                           "%s: etcd %s cannot bump the revision of a restore (from %s on), so "
                           "this restore keeps the snapshot's revision: the Kubernetes API "
                           "server's watchers and informers must be restarted by hand after it "
                           "(use %s %s or later)",
                           rd_name(r, at), c->version, first, rd_name(r, "spec.version"), first);
        }
}

/* Free text a person wrote for the audit log: one line, at most max characters. */
static bool one_line(const char *s, size_t max)
{
        return strlen(s) <= max && !strpbrk(s, "\n\r\t");
}

/*
 * The feature gates of etcd's own corruption checks on 3.6, which gitcd
 * sets from spec.consistency (render/command.c): --feature-gates carries
 * other gates too, so only these two are refused there. The flags of 3.4
 * and 3.5 are set by gitcd in the flag table (api/flags.c).
 */
static const char *const consistency_gates[] = {"InitialCorruptCheck", "CompactHashCheck"};

static void check_consistency_flags(reader *r)
{
        const etcd_options *o = &r->c->options;
        if (r->c->ver.major == 3 && r->c->ver.minor < 6)
                return; /* no feature gates: the flag table refuses --feature-gates */
        for (size_t i = 0; i < o->extra_flags.n; i++) {
                const kv *f = &o->extra_flags.items[i];
                _cleanup_free_ char *name = xstrdup(f->key);
                for (char *p = name; *p; p++)
                        *p = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
                if (!streq(name, "feature-gates") || !f->value)
                        continue;
                _cleanup_free_ char *native = xasprintf("spec.options.extraFlags.%s", f->key);
                for (size_t j = 0; j < ARRAY_SIZE(consistency_gates); j++) {
                        const char *g = consistency_gates[j];
                        size_t n = strlen(g);
                        for (const char *p = f->value; p && *p;
                             p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
                                p += strspn(p, " ");
                                if (strncasecmp(p, g, n) == 0 && (p[n] == '=' || p[n] == ' '))
                                        rd_diag_at(r, DIAG_ERROR, native,
                                                   "%s: the feature gate %s is set by gitcd; use "
                                                   "spec.consistency instead",
                                                   rd_name(r, native), g);
                        }
                }
        }
}

/*
 * spec.bootstrap.restore.bumpRevision and spec.recovery.bumpRevision: what
 * the version's restore tool can do, and a bump only where a snapshot is
 * restored (a recovery from a member keeps its data and its revision).
 */
static void check_bumps(reader *r)
{
        etcd_cluster *c = r->c;
        const char *rb = "spec.recovery.bumpRevision";
        if (c->recovery.from == RECOVERY_FROM_MEMBER && written(c, rb))
                rd_diag_at(r, DIAG_ERROR, rb,
                           "%s bumps the revision of a recovery from a snapshot; a recovery "
                           "from a member keeps that member's data and revision (remove it, or "
                           "recover from a snapshot)",
                           rd_name(r, rb));
        check_one_bump(r, "spec.bootstrap.restore.bumpRevision", &c->restore.bump,
                       c->restore.enabled);
        check_one_bump(r, rb, &c->recovery.bump, c->recovery.from == RECOVERY_FROM_SNAPSHOT);
}

/*
 * spec.consistency: turning etcd's own checks off needs a reason (it is
 * audited with the spec); a reason or an interval for checks that are off
 * would be a field that does nothing, so both are refused then.
 */
static void check_consistency(reader *r)
{
        const etcd_cluster *c = r->c;
        const consistency_spec *cs = &c->consistency;
        const char *P = "spec.consistency";
        if (!cs->etcd_checks && isempty(cs->reason))
                rd_diag_at(r, DIAG_ERROR, "spec.consistency.etcdChecks",
                           "%s.reason is required when etcdChecks is false: say why etcd's own "
                           "corruption checks are off",
                           rd_name(r, P));
        if (cs->etcd_checks && cs->reason)
                rd_diag_at(r, DIAG_ERROR, "spec.consistency.reason",
                           "%s: a reason is only for etcdChecks: false (etcd's checks are on)",
                           rd_name(r, "spec.consistency.reason"));
        else if (cs->reason && !one_line(cs->reason, 256))
                rd_diag_at(r, DIAG_ERROR, "spec.consistency.reason",
                           "%s: at most 256 characters on one line",
                           rd_name(r, "spec.consistency.reason"));
        if (!cs->etcd_checks && written(c, "spec.consistency.etcdCheckInterval"))
                rd_diag_at(r, DIAG_ERROR, "spec.consistency.etcdCheckInterval",
                           "%s: etcd's checks are off (etcdChecks: false); remove it or turn "
                           "them on",
                           rd_name(r, "spec.consistency.etcdCheckInterval"));
        static const struct {
                const char *field;
                int64_t min_ms, max_ms;
                const char *range;
        } bounds[] = {
            {"spec.consistency.checkInterval", 1000, INT64_C(7) * 86400 * 1000, "1s to 168h"},
            {"spec.consistency.etcdCheckInterval", 1000, INT64_C(7) * 86400 * 1000, "1s to 168h"},
        };
        const int64_t values[] = {cs->check_interval_ms, cs->etcd_check_interval_ms};
        for (size_t i = 0; i < ARRAY_SIZE(bounds); i++)
                if (values[i] < bounds[i].min_ms || values[i] > bounds[i].max_ms)
                        rd_diag_at(r, DIAG_ERROR, bounds[i].field, "%s: must be from %s",
                                   rd_name(r, bounds[i].field), bounds[i].range);
        check_consistency_flags(r);
}

/* spec.repair: one member to replace, or a recheck; and a token, as spec.recovery has. */
static void check_repair(reader *r)
{
        const repair_spec *rp = &r->c->repair;
        if (!rp->set)
                return;
        if (!rp->replace == !rp->recheck)
                rd_diag_at(r, DIAG_ERROR, "spec.repair",
                           "%s needs exactly one of replace (a member of the minority) or "
                           "recheck: true",
                           rd_name(r, "spec.repair"));
        else if (rp->replace && !dns1123_label_valid(rp->replace))
                rd_diag_at(r, DIAG_ERROR, "spec.repair.replace", "%s: \"%s\" is not a member name",
                           rd_name(r, "spec.repair.replace"), rp->replace);
        if (isempty(rp->token))
                rd_diag_at(r, DIAG_ERROR, "spec.repair",
                           "%s.token is required: the repair runs once per token",
                           rd_name(r, "spec.repair"));
        else if (!one_line(rp->token, 128))
                rd_diag_at(r, DIAG_ERROR, "spec.repair.token",
                           "%s: at most 128 characters on one line",
                           rd_name(r, "spec.repair.token"));
}

/*
 * spec.adopt.ca: the old cluster's CA, imported as the cluster's auto CA,
 * so it goes with tls.provider auto only, and tls.provider auto with
 * spec.adopt needs it (a CA gitcd made would be one the old members do not
 * trust: its members could not join). With tls.provider secrets the user's
 * Secrets carry leaves of the old CA and no key is needed. Only coreos
 * clusters are taken over with TLS (api/unsupported.c refuses the others).
 */
static void check_adopt_ca(reader *r)
{
        const etcd_cluster *c = r->c;
        const adopt_spec *a = &c->adopt;
        if (a->ca_secret && !dns1123_subdomain_valid(a->ca_secret))
                rd_diag_at(r, DIAG_ERROR, "spec.adopt.ca.secret", "%s: \"%s\" is not a Secret name",
                           rd_name(r, "spec.adopt.ca.secret"), a->ca_secret);
        if (a->ca_secret && c->tls.provider != TLS_PROVIDER_AUTO)
                rd_diag_at(r, DIAG_ERROR, "spec.adopt.ca",
                           "%s imports the old cluster's CA as the one tls.provider auto issues "
                           "from; with tls.provider %s it has nothing to act on (set "
                           "spec.tls.provider: auto, or remove spec.adopt.ca%s)",
                           rd_name(r, "spec.adopt.ca"), tls_provider_name(c->tls.provider),
                           c->tls.provider == TLS_PROVIDER_SECRETS
                               ? ": tls.provider secrets takes Secrets signed by the old CA"
                               : "");
        else if (!a->ca_secret && c->tls.provider == TLS_PROVIDER_AUTO &&
                 a->from == ADOPT_FROM_COREOS)
                rd_diag_at(r, DIAG_ERROR, "spec.tls.provider",
                           "%s: auto with spec.adopt needs spec.adopt.ca.secret, the Secret with "
                           "the old cluster's CA certificate and key: a CA gitcd made would be "
                           "one the old members do not trust (see docs/migration.md)",
                           rd_name(r, "spec.tls.provider"));
}

/*
 * spec.adopt: the old cluster is found by its operator's names, so they
 * must be object names; spec.hosts adopts machines in place without it,
 * and a cluster that also restores or recovers would not keep the old
 * cluster's data.
 */
static void check_adopt(reader *r)
{
        const etcd_cluster *c = r->c;
        const adopt_spec *a = &c->adopt;
        if (a->from == ADOPT_FROM_NONE)
                return;
        if (a->name && !dns1123_label_valid(a->name))
                rd_diag_at(r, DIAG_ERROR, "spec.adopt.name", "%s: \"%s\" is not a cluster name",
                           rd_name(r, "spec.adopt.name"), a->name);
        if (a->namespace_ && !dns1123_label_valid(a->namespace_))
                rd_diag_at(r, DIAG_ERROR, "spec.adopt.namespace",
                           "%s: \"%s\" is not a namespace name", rd_name(r, "spec.adopt.namespace"),
                           a->namespace_);
        if (a->namespace_ && c->namespace_ && !streq(a->namespace_, c->namespace_))
                rd_diag_at(r, DIAG_ERROR, "spec.adopt.namespace",
                           "%s: the old cluster must run in the namespace of this one (%s): "
                           "members join it by the names of one namespace",
                           rd_name(r, "spec.adopt.namespace"), c->namespace_);
        if (c->hosts.set)
                rd_diag_at(r, DIAG_ERROR, "spec.adopt",
                           "%s takes over a cluster on Kubernetes; with spec.hosts gitcd adopts "
                           "what runs on the machines by itself (remove spec.adopt)",
                           rd_name(r, "spec.adopt"));
        /*
         * The legacy aenix (cozystack) members speak https to their peers with
         * etcd's own certificates (--peer-auto-tls): only a member with the
         * same can join (a CA-issued one trusts no self-signed certificate,
         * and is not trusted); the other operators' peers speak plain http.
         */
        bool auto_peers = a->from == ADOPT_FROM_COZYSTACK;
        if (auto_peers && !c->tls.peer.self_signed)
                rd_diag_at(r, DIAG_ERROR, "spec.adopt.from",
                           "%s: cozystack's members speak https to their peers with the "
                           "certificates etcd makes for itself (--peer-auto-tls), and only a "
                           "member with the same can join them: add spec.tls: {provider: none, "
                           "peer: {selfSigned: true}}",
                           rd_name(r, "spec.adopt.from"));
        if (!auto_peers && c->tls.peer.self_signed)
                rd_diag_at(r, DIAG_ERROR, "spec.tls.peer.selfSigned",
                           "%s: %s's members speak plain http to their peers and would not "
                           "trust a self-signed peer certificate: remove %s",
                           rd_name(r, "spec.tls.peer.selfSigned"), adopt_from_name(a->from),
                           rd_name(r, "spec.tls.peer.selfSigned"));
        if (c->restore.enabled || c->recovery.from != RECOVERY_NONE)
                rd_diag_at(r, DIAG_ERROR, "spec.adopt",
                           "%s keeps the running cluster's data; it cannot go with "
                           "spec.bootstrap.restore or spec.recovery",
                           rd_name(r, "spec.adopt"));
        check_adopt_ca(r);
}

static void check_object_name(reader *r, const char *native, const char *name)
{
        if (name && !dns1123_subdomain_valid(name))
                rd_diag_at(r, DIAG_ERROR, native,
                           "%s: \"%s\" is not a valid Kubernetes object name (DNS-1123 "
                           "subdomain)",
                           rd_name(r, native), name);
}

/* Every name that refers to another Kubernetes object must be a valid object name. */
static void check_object_names(reader *r)
{
        etcd_cluster *c = r->c;
        tls_spec *t = &c->tls;
        check_object_name(r, "spec.storage.storageClassName", c->storage.storage_class);
        check_object_name(r, "spec.tls.client.secretRef", t->client.secret);
        check_object_name(r, "spec.tls.peer.secretRef", t->peer.secret);
        check_object_name(r, "spec.tls.operatorClient.secretRef", t->operator_client_secret);
        check_object_name(r, "spec.tls.caBundleSecretRef", t->ca_bundle_secret);
        check_object_name(r, "spec.tls.client.issuerRef", t->client.issuer.name);
        /* One issuer written once for both surfaces (etcd-io) is reported once. */
        if (!streq_ptr(t->peer.issuer.name, t->client.issuer.name) ||
            !streq(rd_name(r, "spec.tls.peer.issuerRef"), rd_name(r, "spec.tls.client.issuerRef")))
                check_object_name(r, "spec.tls.peer.issuerRef", t->peer.issuer.name);
        if (!streq_ptr(t->operator_client_issuer.name, t->client.issuer.name))
                check_object_name(r, "spec.tls.operatorClient.issuerRef",
                                  t->operator_client_issuer.name);
        check_object_name(r, "spec.auth.rootCredentialsSecretRef", c->auth.root_credentials_secret);
        /* locations' claim and Secret names: read_location (api/native.c), in every kind */
}

/* The image a member runs is <repository>:v<version>; the repository by the OCI grammar. */
static void check_repository(reader *r)
{
        const char *repo = r->c->repository;
        if (repo && !image_repository_valid(repo))
                rd_diag_at(r, DIAG_ERROR, "spec.repository",
                           "%s: \"%s\" is not an image repository ([registry[:port]/]path, "
                           "each path part lower-case letters and digits with '.', '_' or '-' "
                           "between them; gitcd adds the tag v<version>)",
                           rd_name(r, "spec.repository"), repo);
}

static void check_issuer_group(reader *r, const char *native, const issuer_ref *i)
{
        _cleanup_free_ char *group = xasprintf("%s.group", native);
        if (i->group && !dns1123_subdomain_valid(i->group))
                rd_diag_at(r, DIAG_ERROR, group,
                           "%s: \"%s\" is not an API group (DNS-1123 subdomain)", rd_name(r, group),
                           i->group);
}

/* Keys under gitcd.io/ are gitcd's own: render sets them and drops the user's. */
static void check_reserved_keys(reader *r, const char *native, const kv_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                if (strneq(l->items[i].key, "gitcd.io/", 9))
                        rd_diag_at(r, DIAG_WARNING, native,
                                   "%s: \"%s\" is reserved for gitcd and is ignored",
                                   rd_name(r, native), l->items[i].key);
}

/*
 * The native path where a machine's field was decided: its own entry when
 * written there, else the hosts-level default (for messages and locations).
 */
static char *host_field(const etcd_cluster *c, size_t i, const char *field)
{
        char *own = xasprintf("spec.hosts.machines[%zu].%s", i, field);
        if (written(c, own))
                return own;
        free(own);
        return xasprintf("spec.hosts.%s", field);
}

/*
 * A path of spec.hosts, where it was written: at the hosts level (checked
 * whether or not a machine inherits it: a field is used or refused, never
 * ignored) or on a machine.
 */
static void check_host_path(reader *r, const char *native, const char *value, spec_path_kind kind)
{
        _cleanup_free_ char *why = NULL;
        if (!value || !written(r->c, native) || spec_path_check(value, kind, &why) == 0)
                return;
        rd_diag_at(r, DIAG_ERROR, native, "%s: \"%s\" %s", rd_name(r, native), value, why);
}

static void check_host_paths(reader *r, const char *prefix, const host_spec *h)
{
        static const struct {
                const char *field;
                size_t offset;
                spec_path_kind kind;
        } paths[] = {
            {"dataDir", offsetof(host_spec, data_dir), SPEC_PATH_OWNED},
            {"tlsDir", offsetof(host_spec, tls_dir), SPEC_PATH_OWNED},
            {"manifestDir", offsetof(host_spec, manifest_dir), SPEC_PATH_FOLDER},
            {"unitDir", offsetof(host_spec, unit_dir), SPEC_PATH_FOLDER},
            {"etcdBinary", offsetof(host_spec, etcd_binary), SPEC_PATH_FILE},
        };
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
                _cleanup_free_ char *native = xasprintf("%s.%s", prefix, paths[i].field);
                const char *value = *(char *const *)((const char *)h + paths[i].offset);
                check_host_path(r, native, value, paths[i].kind);
        }
}

/* A POSIX user name as useradd accepts it. */
static bool user_name_valid(const char *s)
{
        if (isempty(s) || strlen(s) > 32 || !strchr("abcdefghijklmnopqrstuvwxyz_", s[0]))
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(s);
}

static void check_hosts(reader *r)
{
        etcd_cluster *c = r->c;
        const hosts_spec *hs = &c->hosts;
        if (!hs->set)
                return;
        if (!hs->mode_set && !written(c, "spec.hosts.mode"))
                rd_diag_at(r, DIAG_ERROR, "spec.hosts",
                           "spec.hosts.mode is required (systemd or staticPod)");
        if (hs->n == 0) {
                rd_diag_at(r, DIAG_ERROR, "spec.hosts",
                           "spec.hosts.machines is required: list the machines members run on");
                return;
        }
        if ((size_t)c->replicas > hs->n)
                rd_diag_at(r, DIAG_ERROR, "spec.replicas",
                           "%s: %d members need %d machines (one member per machine) but "
                           "spec.hosts.machines lists %zu",
                           rd_name(r, "spec.replicas"), c->replicas, c->replicas, hs->n);
        static const char *const systemd_only[] = {"unitDir", "etcdBinary"};
        static const char *const pod_only[] = {"manifestDir"};
        bool pod = hs->defaults.mode == HOST_MODE_STATIC_POD;
        const char *const *wrong = pod ? systemd_only : pod_only;
        size_t n_wrong = pod ? ARRAY_SIZE(systemd_only) : ARRAY_SIZE(pod_only);
        for (size_t w = 0; w < n_wrong && hs->mode_set; w++) {
                _cleanup_free_ char *top = xasprintf("spec.hosts.%s", wrong[w]);
                if (written(c, top))
                        rd_diag_at(r, DIAG_ERROR, top, "%s applies to mode %s only", top,
                                   pod ? "systemd" : "staticPod");
                for (size_t i = 0; i < hs->n; i++) {
                        _cleanup_free_ char *own =
                            xasprintf("spec.hosts.machines[%zu].%s", i, wrong[w]);
                        if (written(c, own))
                                rd_diag_at(r, DIAG_ERROR, own, "%s applies to mode %s only", own,
                                           pod ? "systemd" : "staticPod");
                }
        }
        check_host_paths(r, "spec.hosts", &hs->defaults);
        if (hs->defaults.ssh_user && !user_name_valid(hs->defaults.ssh_user))
                rd_diag_at(r, DIAG_ERROR, "spec.hosts.ssh.user",
                           "spec.hosts.ssh.user: \"%s\" is not a user name", hs->defaults.ssh_user);
        for (size_t i = 0; i < hs->n; i++) {
                const host_spec *h = &hs->items[i];
                if (!h->address)
                        continue;
                _cleanup_free_ char *at = xasprintf("spec.hosts.machines[%zu]", i);
                if (!host_address_valid(h->address))
                        rd_diag_at(r, DIAG_ERROR, at,
                                   "%s.address: \"%s\" is not a host name or IP address", at,
                                   h->address);
                if (!streq(h->advertise_address, h->address) &&
                    !advertise_address_valid(h->advertise_address)) {
                        _cleanup_free_ char *f = host_field(c, i, "advertiseAddress");
                        rd_diag_at(r, DIAG_ERROR, f,
                                   "%s: \"%s\" is not a host name or IPv4 address", f,
                                   h->advertise_address);
                } else if (streq(h->advertise_address, h->address) &&
                           host_address_valid(h->address) && !advertise_address_valid(h->address)) {
                        rd_diag_at(r, DIAG_ERROR, at,
                                   "%s.address: %s is an IPv6 address, which gitcd cannot write "
                                   "into etcd's URLs yet; set %s.advertiseAddress to a host name "
                                   "or IPv4 address of the machine",
                                   at, h->address, at);
                }
                _cleanup_free_ char *own_user = xasprintf("%s.ssh.user", at);
                if (written(c, own_user) && !user_name_valid(h->ssh_user))
                        rd_diag_at(r, DIAG_ERROR, own_user, "%s: \"%s\" is not a user name",
                                   own_user, h->ssh_user);
                check_host_paths(r, at, h);
                for (size_t j = 0; j < i; j++) {
                        const host_spec *o = &hs->items[j];
                        if (!o->address)
                                continue;
                        if (streq(o->address, h->address) && o->ssh_port == h->ssh_port)
                                rd_diag_at(r, DIAG_ERROR, at,
                                           "%s: %s port %d is already listed as "
                                           "spec.hosts.machines[%zu]; one member per machine",
                                           at, h->address, h->ssh_port, j);
                        else if (streq(o->advertise_address, h->advertise_address))
                                rd_diag_at(r, DIAG_ERROR, at,
                                           "%s: advertise address %s is already used by "
                                           "spec.hosts.machines[%zu]",
                                           at, h->advertise_address, j);
                }
        }
}

/*
 * spec.kubernetes.context names a context of a kubeconfig: any text
 * kubectl takes ("arn:aws:eks:...:cluster/x", "admin@prod"), but not empty,
 * not over GITCD_MAX_KUBE_CONTEXT bytes and without control characters, so
 * it prints on one line wherever it is shown. Whether the kubeconfig has it
 * is the intake's (intake/intake.h: the source's kubeconfig).
 */
static void check_kube_context(reader *r)
{
        const char *k = r->c->kube_context;
        if (!k)
                return;
        const char *at = "spec.kubernetes.context";
        bool control = false;
        for (const unsigned char *p = (const unsigned char *)k; *p; p++)
                control |= *p < 0x20 || *p == 0x7f;
        if (!*k)
                rd_diag_at(r, DIAG_ERROR, at,
                           "%s: empty; name a context of the kubeconfig or "
                           "leave the field out",
                           rd_name(r, at));
        else if (strlen(k) > GITCD_MAX_KUBE_CONTEXT)
                rd_diag_at(r, DIAG_ERROR, at, "%s: longer than %d bytes", rd_name(r, at),
                           GITCD_MAX_KUBE_CONTEXT);
        else if (control)
                rd_diag_at(r, DIAG_ERROR, at,
                           "%s: control characters are not allowed in a "
                           "context name",
                           rd_name(r, at));
}

/*
 * spec.dependsOn's entries each name a cluster ("name" or "namespace/name"),
 * once, not the cluster itself; spec.rollout.soakSeconds 0..86400. Whether
 * the named clusters exist, in the same source and without a cycle, is the
 * intake's (intake/order.h): it needs every file of the source.
 */
static void check_order(reader *r)
{
        etcd_cluster *c = r->c;
        if (c->soak_seconds < 0 || c->soak_seconds > GITCD_MAX_SOAK_SECONDS)
                rd_diag_at(r, DIAG_ERROR, "spec.rollout.soakSeconds",
                           "%s: %d is out of range (0 to %d seconds)",
                           rd_name(r, "spec.rollout.soakSeconds"), c->soak_seconds,
                           GITCD_MAX_SOAK_SECONDS);
        const char *own_ns = c->namespace_ ? c->namespace_ : "default";
        for (size_t i = 0; i < c->n_depends_on; i++) {
                const char *e = c->depends_on[i];
                _cleanup_free_ char *at = xasprintf("spec.dependsOn[%zu]", i);
                const char *slash = strchr(e, '/');
                _cleanup_free_ char *ns = slash ? xstrndup(e, (size_t)(slash - e)) : NULL;
                const char *name = slash ? slash + 1 : e;
                if ((ns && !dns1123_label_valid(ns)) || !dns1123_subdomain_valid(name)) {
                        rd_diag_at(r, DIAG_ERROR, at,
                                   "%s: \"%s\" is not a cluster name (\"name\" or "
                                   "\"namespace/name\", DNS names)",
                                   at, e);
                        continue;
                }
                if (streq(name, c->name ? c->name : "") && streq(ns ? ns : own_ns, own_ns)) {
                        rd_diag_at(r, DIAG_ERROR, at, "%s: a cluster cannot depend on itself", at);
                        continue;
                }
                for (size_t j = 0; j < i; j++) {
                        const char *o = c->depends_on[j];
                        const char *os = strchr(o, '/');
                        _cleanup_free_ char *ons = os ? xstrndup(o, (size_t)(os - o)) : NULL;
                        if (streq(os ? os + 1 : o, name) &&
                            streq(ons ? ons : own_ns, ns ? ns : own_ns)) {
                                rd_diag_at(r, DIAG_ERROR, at,
                                           "%s: %s is already listed as spec.dependsOn[%zu]", at, e,
                                           j);
                                break;
                        }
                }
        }
}

/*
 * Failure domains (api/domains.h): values are not empty, a key some
 * machines name and others do not is pointed out, and the placement gitcd
 * makes for the cluster's members is judged: losing one domain value must
 * not lose quorum. Strict placement refuses the spec, preferred warns.
 */
static void check_host_domains(reader *r)
{
        const etcd_cluster *c = r->c;
        const hosts_spec *hs = &c->hosts;
        if (!hosts_have_domains(hs)) {
                if (written(c, "spec.hosts.placement"))
                        rd_diag_at(r, DIAG_WARNING, "spec.hosts.placement",
                                   "spec.hosts.placement: no machine names domains, so there is "
                                   "nothing to judge: members go on the machines in list order");
                return;
        }
        for (size_t i = 0; i < hs->n; i++) {
                const kv_list *d = &hs->items[i].domains;
                _cleanup_free_ char *at = xasprintf("spec.hosts.machines[%zu].domains", i);
                for (size_t j = 0; j < d->n; j++)
                        if (isempty(d->items[j].value))
                                rd_diag_at(r, DIAG_ERROR, at, "%s.%s: a domain needs a value", at,
                                           d->items[j].key);
                for (size_t o = 0; o < hs->n; o++)
                        for (size_t j = 0; j < hs->items[o].domains.n; j++) {
                                const char *key = hs->items[o].domains.items[j].key;
                                bool told = false; /* once per key */
                                for (size_t p = 0; p < o && !told; p++)
                                        told = kv_get(&hs->items[p].domains, key) != NULL;
                                for (size_t q = 0; q < j && !told; q++)
                                        told = streq(hs->items[o].domains.items[q].key, key);
                                if (told || kv_get(d, key))
                                        continue;
                                _cleanup_free_ char *m = xasprintf("spec.hosts.machines[%zu]", i);
                                rd_diag_at(r, DIAG_WARNING, m,
                                           "%s (%s) names no %s while spec.hosts.machines[%zu] "
                                           "does: it is counted in a %s of its own",
                                           m, hs->items[i].address ? hs->items[i].address : "", key,
                                           o, key);
                        }
        }
        if (c->replicas < 3 || (size_t)c->replicas > hs->n)
                return;
        size_t n = (size_t)c->replicas;
        _cleanup_free_ size_t *placement = xcalloc(n, sizeof(size_t));
        domains_place(hs, n, placement);
        domain_risk *risks = NULL;
        size_t n_risks = domains_risks(hs, placement, n, &risks);
        if (!n_risks)
                return;
        char **names = xcalloc(n, sizeof(char *));
        for (size_t k = 0; k < n; k++)
                names[k] = spec_member_name(c, (int)k);
        bool strict = hs->placement == HOST_PLACEMENT_STRICT;
        for (size_t i = 0; i < n_risks; i++) {
                _cleanup_free_ char *why = domain_risk_message(&risks[i], names);
                rd_diag_at(r, strict ? DIAG_ERROR : DIAG_WARNING, "spec.hosts.machines",
                           "spec.hosts.placement %s: %s%s", host_placement_name(hs->placement), why,
                           strict ? " (spec.hosts.placement: preferred places the members anyway)"
                                  : "");
        }
        for (size_t k = 0; k < n; k++)
                free(names[k]);
        free(names);
        domain_risks_free(risks, n_risks);
}

void spec_validate(reader *r)
{
        etcd_cluster *c = r->c;
        check_replicas(r);
        check_version(r);
        check_storage(r);
        if (!r->tls_failed)
                check_tls(r);
        if (c->auth.enabled && !c->tls.client.enabled)
                rd_diag_at(r, DIAG_WARNING, "spec.auth.enabled",
                           "%s: without client TLS the root password crosses the network in "
                           "clear text",
                           rd_name(r, "spec.auth.enabled"));
        if (c->auth.root_credentials_secret && !c->auth.enabled)
                rd_diag_at(r, DIAG_ERROR, "spec.auth.rootCredentialsSecretRef",
                           "%s is set but %s is false",
                           rd_name(r, "spec.auth.rootCredentialsSecretRef"),
                           rd_name(r, "spec.auth.enabled"));
        if (c->progress_deadline_seconds <= 0)
                rd_diag_at(r, DIAG_ERROR, "spec.progressDeadlineSeconds",
                           "%s: %d must be greater than zero",
                           rd_name(r, "spec.progressDeadlineSeconds"),
                           c->progress_deadline_seconds);
        check_options(r);
        check_schedules(r);
        check_maintenance(r);
        check_recovery(r);
        check_bumps(r);
        check_consistency(r);
        check_repair(r);
        check_adopt(r);
        check_object_names(r);
        check_repository(r);
        check_issuer_group(r, "spec.tls.client.issuerRef", &c->tls.client.issuer);
        if (!streq_ptr(c->tls.peer.issuer.group, c->tls.client.issuer.group))
                check_issuer_group(r, "spec.tls.peer.issuerRef", &c->tls.peer.issuer);
        if (!streq_ptr(c->tls.operator_client_issuer.group, c->tls.client.issuer.group))
                check_issuer_group(r, "spec.tls.operatorClient.issuerRef",
                                   &c->tls.operator_client_issuer);
        check_reserved_keys(r, "spec.additionalMetadata.labels", &c->additional_labels);
        check_reserved_keys(r, "spec.additionalMetadata.annotations", &c->additional_annotations);
        check_reserved_keys(r, "spec.podTemplate.metadata.labels", &c->pod_labels);
        check_reserved_keys(r, "spec.podTemplate.metadata.annotations", &c->pod_annotations);
        check_hosts(r);
        check_order(r);
        check_kube_context(r);
        if (c->hosts.set)
                check_host_domains(r);
}
