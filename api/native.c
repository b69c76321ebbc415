/*
 * The native dialect, gitcd.io/v1alpha1: every field of the model has a
 * native spelling here (docs/api.md documents each one), and the other
 * dialects reuse its sub-readers (locations, issuers, etcd flags).
 *
 * Design: readers only check shape and types and store what was written;
 * defaults and cross-field rules live in api/validate.c so they apply the
 * same way to all five dialects.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/flags.h"
#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "util/xalloc.h"

void read_issuer(reader *r, const ynode *map, const char *parent, const char *key,
                 const char *native, issuer_ref *out)
{
        const ynode *m = NULL;
        if (!rd_map(r, map, parent, key, native, &m))
                return;
        _cleanup_free_ char *path = rd_join(parent, key);
        _cleanup_free_ char *nat_kind = rd_join(native, "kind");
        _cleanup_free_ char *nat_group = rd_join(native, "group");
        static const char *const known[] = {"name", "kind", "group", NULL};
        rd_keys(r, m, path, known, NULL);
        if (!rd_string(r, m, path, "name", native, &out->name) && !rd_get(m, "name", NULL))
                rd_error(r, m, "%s.name is required", path);
        static const char *const kinds[] = {"Issuer", "ClusterIssuer", NULL};
        int k;
        if (rd_enum(r, m, path, "kind", nat_kind, kinds, &k)) {
                free(out->kind);
                out->kind = xstrdup(kinds[k]);
        }
        rd_string(r, m, path, "group", nat_group, &out->group);
}

/* A path inside a volume: what spec_path_check allows after a '/', without that '/'. */
static bool relative_path_valid(const char *s)
{
        if (isempty(s) || s[0] == '/')
                return false;
        _cleanup_free_ char *abs = xasprintf("/%s", s);
        _cleanup_free_ char *why = NULL;
        return spec_path_check(abs, SPEC_PATH_FILE, &why) == 0;
}

/* An S3 bucket name, as S3 and the S3-compatible stores gitcd is used with take them. */
static bool bucket_valid(const char *s)
{
        size_t n = strlen(s);
        if (n < 3 || n > 255 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/*
 * An object key (or, prefix true, a key prefix, which may end in '/'):
 * parts of letters, digits and "._-+@=:," between single slashes, none of
 * them "." or "..", not starting with '/'.
 */
static bool object_key_valid(const char *s, bool prefix)
{
        size_t n = strlen(s);
        if (n == 0)
                return prefix;
        if (n > 1024 || s[0] == '/' || strstr(s, "//") || (!prefix && s[n - 1] == '/'))
                return false;
        if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+@=:,/") !=
            n)
                return false;
        for (const char *c = s;;) {
                size_t len = strcspn(c, "/");
                if ((len == 1 && c[0] == '.') || (len == 2 && strneq(c, "..", 2)))
                        return false;
                if (!c[len])
                        return true;
                c += len + 1;
        }
}

void read_location(reader *r, const ynode *map, const char *path, const char *native, bool restore,
                   storage_location *out)
{
        static const char *const known[] = {"pvc", "s3", "local", NULL};
        rd_keys(r, map, path, known, NULL);
        int n = 0;
        const ynode *m = NULL;
        _cleanup_free_ char *pvc = rd_join(path, "pvc");
        _cleanup_free_ char *s3 = rd_join(path, "s3");
        _cleanup_free_ char *local = rd_join(path, "local");
        _cleanup_free_ char *npvc = rd_join(native, "pvc");
        _cleanup_free_ char *ns3 = rd_join(native, "s3");
        _cleanup_free_ char *nlocal = rd_join(native, "local");

        if (rd_map(r, map, path, "pvc", npvc, &m)) {
                static const char *const k[] = {"claimName", "subPath", NULL};
                _cleanup_free_ char *n1 = rd_join(npvc, "claimName");
                _cleanup_free_ char *n2 = rd_join(npvc, "subPath");
                rd_keys(r, m, pvc, k, NULL);
                out->kind = DEST_PVC;
                if (!rd_string(r, m, pvc, "claimName", n1, &out->claim_name) &&
                    !rd_get(m, "claimName", NULL))
                        rd_error(r, m, "%s.claimName is required", pvc);
                else if (out->claim_name && !dns1123_subdomain_valid(out->claim_name))
                        rd_error(r, rd_get(m, "claimName", NULL),
                                 "%s.claimName: \"%s\" is not a valid Kubernetes object name "
                                 "(DNS-1123 subdomain)",
                                 pvc, out->claim_name);
                if (rd_string(r, m, pvc, "subPath", n2, &out->sub_path) &&
                    !relative_path_valid(out->sub_path))
                        rd_error(r, rd_get(m, "subPath", NULL),
                                 "%s.subPath: \"%s\" must be a relative path without \".\" or "
                                 "\"..\", \"//\" or a trailing '/', of letters, digits and "
                                 "\"/._-+@\"",
                                 pvc, out->sub_path);
                if (restore && !out->sub_path)
                        rd_error(r, m, "%s.subPath is required (the snapshot file to restore)",
                                 pvc);
                n++;
        }
        if (rd_map(r, map, path, "s3", ns3, &m)) {
                static const char *const k[] = {
                    "endpoint", "bucket", "key", "region", "forcePathStyle", "credentialsSecretRef",
                    NULL};
                rd_keys(r, m, s3, k, NULL);
                out->kind = DEST_S3;
                _cleanup_free_ char *n1 = rd_join(ns3, "endpoint");
                _cleanup_free_ char *n2 = rd_join(ns3, "bucket");
                _cleanup_free_ char *n3 = rd_join(ns3, "key");
                _cleanup_free_ char *n4 = rd_join(ns3, "region");
                _cleanup_free_ char *n5 = rd_join(ns3, "forcePathStyle");
                _cleanup_free_ char *n6 = rd_join(ns3, "credentialsSecretRef");
                if (rd_string(r, m, s3, "endpoint", n1, &out->s3.endpoint) &&
                    !http_url_valid(out->s3.endpoint, true))
                        rd_error(r, rd_get(m, "endpoint", NULL),
                                 "%s.endpoint: \"%s\" is not http(s)://host[:port][/path]", s3,
                                 out->s3.endpoint);
                if (!rd_string(r, m, s3, "bucket", n2, &out->s3.bucket) &&
                    !rd_get(m, "bucket", NULL))
                        rd_error(r, m, "%s.bucket is required", s3);
                else if (out->s3.bucket && !bucket_valid(out->s3.bucket))
                        rd_error(r, rd_get(m, "bucket", NULL),
                                 "%s.bucket: \"%s\" is not a bucket name (3 to 255 letters, "
                                 "digits, '.', '_' and '-', a letter or digit at each end)",
                                 s3, out->s3.bucket);
                if (!rd_string(r, m, s3, "key", n3, &out->s3.key) && restore &&
                    !rd_get(m, "key", NULL))
                        rd_error(r, m, "%s.key is required (the snapshot object to restore)", s3);
                else if (out->s3.key && !object_key_valid(out->s3.key, !restore))
                        rd_error(r, rd_get(m, "key", NULL),
                                 "%s.key: \"%s\" is not an object key%s (letters, digits and "
                                 "\"/._-+@=:,\", no \".\" or \"..\" part, no \"//\")",
                                 s3, out->s3.key, restore ? "" : " prefix");
                if (rd_string(r, m, s3, "region", n4, &out->s3.region) &&
                    (isempty(out->s3.region) || strlen(out->s3.region) > 64 ||
                     strspn(out->s3.region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
                         strlen(out->s3.region)))
                        rd_error(r, rd_get(m, "region", NULL),
                                 "%s.region: \"%s\" is not a region name (lower-case letters, "
                                 "digits and '-')",
                                 s3, out->s3.region);
                rd_bool(r, m, s3, "forcePathStyle", n5, &out->s3.force_path_style);
                /* optional: without it, gitcd's environment (AWS_ACCESS_KEY_ID, ...) */
                if (rd_ref(r, m, s3, "credentialsSecretRef", n6, &out->s3.credentials_secret) &&
                    !dns1123_subdomain_valid(out->s3.credentials_secret))
                        rd_error(r, rd_get(m, "credentialsSecretRef", NULL),
                                 "%s.credentialsSecretRef: \"%s\" is not a valid Kubernetes "
                                 "object name (DNS-1123 subdomain)",
                                 s3, out->s3.credentials_secret);
                n++;
        }
        if (rd_map(r, map, path, "local", nlocal, &m)) {
                static const char *const k[] = {"path", NULL};
                _cleanup_free_ char *n1 = rd_join(nlocal, "path");
                rd_keys(r, m, local, k, NULL);
                out->kind = DEST_LOCAL;
                _cleanup_free_ char *why = NULL;
                if (rd_string(r, m, local, "path", n1, &out->path)) {
                        /* snapshots: a folder gitcd writes and prunes; restore: a file it reads */
                        if (spec_path_check(out->path, restore ? SPEC_PATH_FILE : SPEC_PATH_OWNED,
                                            &why) < 0)
                                rd_error(r, rd_get(m, "path", NULL), "%s.path: \"%s\" %s", local,
                                         out->path, why);
                } else if (!rd_get(m, "path", NULL)) {
                        rd_error(r, m, "%s.path is required", local);
                }
                n++;
        }
        if (n == 0)
                rd_error(r, map, "%s needs one of pvc, s3 or local", path);
        else if (n > 1)
                rd_error(r, map, "%s: set only one of pvc, s3 or local", path);
}

/* ---- etcd flags ---- */

void apply_etcd_flag(reader *r, const ynode *at, const char *path, const char *flag,
                     const char *value)
{
        etcd_cluster *c = r->c;
        etcd_options *o = &c->options;
        if (isempty(flag) || flag[0] == '-' || strlen(flag) > 128 ||
            strspn(flag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
                strlen(flag)) {
                rd_error(r, at, "%s: \"%s\" is not an etcd flag name", path, flag);
                return;
        }
        /* kept as etcd spells it, which is what the member's command line says */
        _cleanup_free_ char *name = etcd_flag_normalize(flag);
        _cleanup_free_ char *native = xasprintf("spec.options.extraFlags.%s", name);
        if (kv_get(&o->extra_flags, name)) {
                rd_error(r, at,
                         "%s: --%s is set twice (flag names are compared as etcd spells them)",
                         path, name);
                return;
        }
        rd_record(r, native, path, NULL, at);
        kv_set(&o->extra_flags, name, value ? value : "");
}

/* ---- the native spec ---- */

static void read_tls_surface(reader *r, const ynode *tls, const char *key, tls_surface_spec *s,
                             int *ret_enabled)
{
        const ynode *m = NULL;
        _cleanup_free_ char *path = xasprintf("spec.tls.%s", key);
        if (!rd_map(r, tls, "spec.tls", key, NULL, &m))
                return;
        static const char *const known[] = {"enabled", "secretRef", "issuerRef", "selfSigned",
                                            NULL};
        static const char *const known_client[] = {"enabled", "secretRef", "issuerRef",
                                                   "allowPlainHTTP", NULL};
        bool client = streq(key, "client");
        rd_keys(r, m, path, client ? known_client : known, NULL);
        bool plain;
        if (client && rd_bool(r, m, path, "allowPlainHTTP", NULL, &plain))
                s->allow_plain = plain;
        _cleanup_free_ char *n_iss = rd_join(path, "issuerRef");
        bool self_signed;
        if (!client && rd_bool(r, m, path, "selfSigned", NULL, &self_signed))
                s->self_signed = self_signed;
        bool en;
        if (rd_bool(r, m, path, "enabled", NULL, &en))
                *ret_enabled = en;
        rd_ref(r, m, path, "secretRef", NULL, &s->secret);
        read_issuer(r, m, path, "issuerRef", n_iss, &s->issuer);
}

/*
 * One lifetime of tls.auto, as a duration ("90d", "12h", "60s") or, the
 * older form, whole days; not both. Seconds are the unit: 1s .. 3650d.
 */
static void read_tls_lifetime(reader *r, const ynode *m, const char *key, const char *days_key,
                              int64_t *ret_seconds)
{
        _cleanup_free_ char *path = xasprintf("spec.tls.auto.%s", key);
        _cleanup_free_ char *text = NULL;
        int64_t v;
        if (rd_get(m, key, NULL) && rd_get(m, days_key, NULL))
                rd_error(r, rd_get(m, days_key, NULL),
                         "spec.tls.auto.%s and spec.tls.auto.%s say the same thing: keep one", key,
                         days_key);
        if (rd_int(r, m, "spec.tls.auto", days_key, NULL, 1, TLS_MAX_DAYS, &v)) {
                /* Diagnostics about the lifetime point at the key as written. */
                _cleanup_free_ char *written = xasprintf("spec.tls.auto.%s", days_key);
                const ynode *k = NULL;
                const ynode *val = rd_get(m, days_key, &k);
                rd_record(r, path, written, k, val);
                *ret_seconds = v * TLS_DAY_SECONDS;
        }
        if (!rd_string(r, m, "spec.tls.auto", key, NULL, &text))
                return;
        int64_t ms;
        if (duration_parse_ms(text, &ms) < 0 || ms < 1000 ||
            ms / 1000 > (int64_t)TLS_MAX_DAYS * TLS_DAY_SECONDS)
                rd_error(r, rd_get(m, key, NULL),
                         "%s: \"%s\" is not a duration from 1s to %dd (for example 90d, 12h "
                         "or 60s)",
                         path, text, TLS_MAX_DAYS);
        else
                *ret_seconds = ms / 1000;
}

static void read_tls(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        const ynode *tls = NULL;
        if (!rd_map(r, spec, "spec", "tls", NULL, &tls))
                return;
        static const char *const known[] = {
            "provider", "client", "peer", "operatorClient", "auto", "caBundleSecretRef", NULL};
        rd_keys(r, tls, "spec.tls", known, NULL);
        static const char *const providers[] = {"none", "auto", "cert-manager", "secrets", NULL};
        int p;
        if (rd_enum(r, tls, "spec.tls", "provider", NULL, providers, &p))
                c->tls.provider = (tls_provider)p;
        else if (!rd_get(tls, "provider", NULL))
                rd_error(r, tls,
                         "spec.tls.provider is required (none, auto, cert-manager or "
                         "secrets)");
        int client = -1, peer = -1;
        read_tls_surface(r, tls, "client", &c->tls.client, &client);
        read_tls_surface(r, tls, "peer", &c->tls.peer, &peer);
        c->tls.client.enabled = c->tls.provider != TLS_PROVIDER_NONE && client != 0;
        c->tls.peer.enabled = c->tls.provider != TLS_PROVIDER_NONE && peer != 0;
        if (c->tls.provider == TLS_PROVIDER_NONE && (client == 1 || peer == 1))
                rd_diag_at(r, DIAG_ERROR, client == 1 ? "spec.tls.client" : "spec.tls.peer",
                           "spec.tls.%s.enabled is true but spec.tls.provider is none; choose a "
                           "provider (auto, cert-manager or secrets)",
                           client == 1 ? "client" : "peer");

        const ynode *m = NULL;
        if (rd_map(r, tls, "spec.tls", "operatorClient", NULL, &m)) {
                static const char *const k[] = {"secretRef", "issuerRef", NULL};
                rd_keys(r, m, "spec.tls.operatorClient", k, NULL);
                rd_ref(r, m, "spec.tls.operatorClient", "secretRef", NULL,
                       &c->tls.operator_client_secret);
                read_issuer(r, m, "spec.tls.operatorClient", "issuerRef",
                            "spec.tls.operatorClient.issuerRef", &c->tls.operator_client_issuer);
        }
        if (rd_map(r, tls, "spec.tls", "auto", NULL, &m)) {
                static const char *const k[] = {"validity",        "renewBefore", "validityDays",
                                                "renewBeforeDays", "rotateCA",    NULL};
                rd_keys(r, m, "spec.tls.auto", k, NULL);
                rd_string(r, m, "spec.tls.auto", "rotateCA", NULL, &c->tls.rotate_ca_token);
                read_tls_lifetime(r, m, "validity", "validityDays", &c->tls.validity_seconds);
                read_tls_lifetime(r, m, "renewBefore", "renewBeforeDays",
                                  &c->tls.renew_before_seconds);
        }
        rd_ref(r, tls, "spec.tls", "caBundleSecretRef", NULL, &c->tls.ca_bundle_secret);
}

static void read_options(reader *r, const ynode *spec)
{
        etcd_options *o = &r->c->options;
        const ynode *m = NULL;
        const char *P = "spec.options";
        if (!rd_map(r, spec, "spec", "options", NULL, &m))
                return;
        static const char *const known[] = {"quotaBackendBytes",
                                            "autoCompactionMode",
                                            "autoCompactionRetention",
                                            "snapshotCount",
                                            "heartbeatInterval",
                                            "electionTimeout",
                                            "extraFlags",
                                            NULL};
        rd_keys(r, m, P, known, NULL);
        rd_quantity(r, m, P, "quotaBackendBytes", NULL, &o->quota_backend, &o->quota_backend_bytes);
        static const char *const modes[] = {"periodic", "revision", NULL};
        int mode;
        if (rd_enum(r, m, P, "autoCompactionMode", NULL, modes, &mode)) {
                free(o->auto_compaction_mode);
                o->auto_compaction_mode = xstrdup(modes[mode]);
        }
        rd_scalar(r, m, P, "autoCompactionRetention", NULL, &o->auto_compaction_retention);
        int64_t v;
        if (rd_int(r, m, P, "snapshotCount", NULL, 1, INT64_MAX, &v))
                o->snapshot_count = v;
        if (rd_int(r, m, P, "heartbeatInterval", NULL, 1, INT32_MAX, &v))
                o->heartbeat_interval_ms = (int)v;
        if (rd_int(r, m, P, "electionTimeout", NULL, 1, INT32_MAX, &v))
                o->election_timeout_ms = (int)v;

        const ynode *flags = NULL;
        if (rd_map(r, m, P, "extraFlags", NULL, &flags)) {
                for (size_t i = 0; i < flags->n; i++) {
                        const ynode *k = flags->keys[i], *val = flags->values[i];
                        const char *name = k->str ? k->str : "";
                        _cleanup_free_ char *path = xasprintf("spec.options.extraFlags.%s", name);
                        if (strneq(name, "--", 2)) {
                                rd_error(r, k, "%s: write the flag name without \"--\"", path);
                                continue;
                        }
                        if (val->kind != YNODE_SCALAR) {
                                rd_type_error(r, val, path, "a string");
                                continue;
                        }
                        apply_etcd_flag(r, ynode_is_null(val) ? k : val, path, name,
                                        ynode_is_null(val) ? "" : val->str);
                }
        }
}

static void read_snapshots(reader *r, const ynode *spec)
{
        snapshot_spec *s = &r->c->snapshots;
        const ynode *m = NULL;
        const char *P = "spec.snapshots";
        if (!rd_map(r, spec, "spec", "snapshots", NULL, &m))
                return;
        static const char *const known[] = {"enabled",     "schedule", "retention", "destination",
                                            "compression", "verify",   NULL};
        rd_keys(r, m, P, known, NULL);
        s->enabled = true;
        if (!rd_bool(r, m, P, "enabled", NULL, &s->enabled) && rd_get(m, "enabled", NULL))
                s->enabled = false; /* reported; do not pile up follow-on errors */
        rd_string(r, m, P, "schedule", NULL, &s->schedule);
        /* every, off, or a cron expression (checked with the schedules, validate.c) */
        _cleanup_free_ char *verify = NULL;
        if (rd_string(r, m, P, "verify", NULL, &verify)) {
                if (streq(verify, "every"))
                        s->verify = VERIFY_EVERY;
                else if (streq(verify, "off"))
                        s->verify = VERIFY_OFF;
                else {
                        s->verify = VERIFY_SCHEDULE;
                        s->verify_schedule = TAKE_PTR(verify);
                }
        }
        static const char *const compressions[] = {"none", "gzip", NULL};
        int comp;
        if (rd_enum(r, m, P, "compression", NULL, compressions, &comp))
                s->compression = comp == 1 ? COMPRESSION_GZIP : COMPRESSION_NONE;
        const ynode *ret = NULL;
        if (rd_map(r, m, P, "retention", NULL, &ret)) {
                static const char *const k[] = {"count", "maxAge", NULL};
                rd_keys(r, ret, "spec.snapshots.retention", k, NULL);
                int64_t v;
                if (rd_int(r, ret, "spec.snapshots.retention", "count", NULL, INT32_MIN, INT32_MAX,
                           &v))
                        s->retention_count = (int)v;
                _cleanup_free_ char *age = NULL;
                if (rd_string(r, ret, "spec.snapshots.retention", "maxAge", NULL, &age)) {
                        int64_t ms;
                        if (duration_parse_ms(age, &ms) < 0 || ms <= 0)
                                rd_error(r, rd_get(ret, "maxAge", NULL),
                                         "spec.snapshots.retention.maxAge: \"%s\" is not a "
                                         "positive duration (for example 168h or 7d)",
                                         age);
                        else
                                s->retention_max_age_ms = ms;
                }
        }
        const ynode *dest = NULL;
        if (rd_map(r, m, P, "destination", NULL, &dest))
                read_location(r, dest, "spec.snapshots.destination", "spec.snapshots.destination",
                              false, &s->destination);
}

static void read_defrag(reader *r, const ynode *spec)
{
        defrag_spec *d = &r->c->defrag;
        const ynode *m = NULL;
        const char *P = "spec.defrag";
        if (!rd_map(r, spec, "spec", "defrag", NULL, &m))
                return;
        static const char *const known[] = {"enabled",        "schedule",
                                            "freeSpaceAbove", "quotaUsageAbovePercent",
                                            "disarmNoSpace",  NULL};
        rd_keys(r, m, P, known, NULL);
        d->enabled = true;
        if (!rd_bool(r, m, P, "enabled", NULL, &d->enabled) && rd_get(m, "enabled", NULL))
                d->enabled = false;
        rd_string(r, m, P, "schedule", NULL, &d->schedule);
        rd_quantity(r, m, P, "freeSpaceAbove", NULL, &d->free_space_above,
                    &d->free_space_above_bytes);
        int64_t v;
        if (rd_int(r, m, P, "quotaUsageAbovePercent", NULL, 1, 100, &v))
                d->quota_usage_above_percent = (int)v;
        (void)rd_bool(r, m, P, "disarmNoSpace", NULL, &d->disarm_nospace);
}

/*
 * bumpRevision of spec.bootstrap.restore and spec.recovery: a number of
 * revisions (0: none), auto or off. Not written: the role's default
 * (spec_fill_defaults).
 */
static void read_bump(reader *r, const ynode *m, const char *parent, revision_bump *out)
{
        _cleanup_free_ char *path = rd_join(parent, "bumpRevision");
        const ynode *v = rd_get(m, "bumpRevision", NULL);
        if (!v)
                return;
        const char *type = v->kind == YNODE_SCALAR ? ynode_type_name(v) : "";
        bool integer = streq(type, "integer");
        if (!integer && !streq(type, "string")) {
                rd_type_error(r, v, path, "a number of revisions, auto or off");
                return;
        }
        _cleanup_free_ char *text = NULL;
        if (!rd_scalar(r, m, parent, "bumpRevision", NULL, &text))
                return;
        int k = revision_bump_parse(text, out);
        if (k >= 0)
                return;
        if (integer || k == -ERANGE)
                rd_error(r, v, "%s: %s is out of range (0 to %lld revisions; 0 is no bump)", path,
                         text, (long long)GITCD_MAX_REVISION_BUMP);
        else
                rd_error(r, v,
                         "%s: \"%s\" is not a revision bump; write a number of revisions (0 or "
                         "off: none) or auto",
                         path, text);
}

static void read_bootstrap(reader *r, const ynode *spec)
{
        const ynode *b = NULL, *restore = NULL, *src = NULL;
        if (!rd_map(r, spec, "spec", "bootstrap", NULL, &b))
                return;
        static const char *const kb[] = {"mode", "restore", NULL};
        rd_keys(r, b, "spec.bootstrap", kb, NULL);
        static const char *const modes[] = {"static", "learners", NULL};
        int mode;
        if (rd_enum(r, b, "spec.bootstrap", "mode", NULL, modes, &mode))
                r->c->bootstrap_mode = (bootstrap_mode)mode;
        if (!rd_map(r, b, "spec.bootstrap", "restore", NULL, &restore))
                return;
        static const char *const kr[] = {"source", "bumpRevision", NULL};
        rd_keys(r, restore, "spec.bootstrap.restore", kr, NULL);
        r->c->restore.enabled = true;
        read_bump(r, restore, "spec.bootstrap.restore", &r->c->restore.bump);
        const char *P = "spec.bootstrap.restore.source";
        if (rd_map(r, restore, "spec.bootstrap.restore", "source", NULL, &src)) {
                if (rd_get(src, "snapshot", NULL)) {
                        /* a snapshot gitcd recorded (`gitcd snapshot list`), by its id */
                        static const char *const ks[] = {"snapshot", "pvc", "s3", "local", NULL};
                        rd_keys(r, src, P, ks, NULL);
                        if (rd_get(src, "pvc", NULL) || rd_get(src, "s3", NULL) ||
                            rd_get(src, "local", NULL))
                                rd_error(r, src, "%s: set only one of snapshot, pvc, s3 or local",
                                         P);
                        int64_t id;
                        if (rd_int(r, src, P, "snapshot", "spec.bootstrap.restore.source.snapshot",
                                   1, INT64_MAX, &id))
                                r->c->restore.snapshot_id = id;
                } else {
                        read_location(r, src, P, P, true, &r->c->restore.source);
                }
        } else if (!rd_get(restore, "source", NULL))
                rd_error(r, restore, "spec.bootstrap.restore.source is required");
}

/*
 * spec.hosts: the fields a machine shares with the hosts-level defaults
 * (all but address, advertiseAddress and mode), read the same way at both
 * levels.
 */
static void read_host_fields(reader *r, const ynode *m, const char *path, host_spec *h)
{
        const ynode *ssh = NULL;
        _cleanup_free_ char *ssh_path = rd_join(path, "ssh");
        if (rd_map(r, m, path, "ssh", NULL, &ssh)) {
                static const char *const k[] = {"port", "user", NULL};
                rd_keys(r, ssh, ssh_path, k, NULL);
                int64_t v;
                if (rd_int(r, ssh, ssh_path, "port", NULL, 1, 65535, &v))
                        h->ssh_port = (int)v;
                rd_string(r, ssh, ssh_path, "user", NULL, &h->ssh_user);
        }
        rd_string(r, m, path, "dataDir", NULL, &h->data_dir);
        rd_string(r, m, path, "manifestDir", NULL, &h->manifest_dir);
        rd_string(r, m, path, "unitDir", NULL, &h->unit_dir);
        rd_string(r, m, path, "etcdBinary", NULL, &h->etcd_binary);
        rd_string(r, m, path, "tlsDir", NULL, &h->tls_dir);
}

static void read_hosts(reader *r, const ynode *spec)
{
        hosts_spec *hs = &r->c->hosts;
        const ynode *m = NULL, *k = NULL;
        const char *P = "spec.hosts";
        if (!rd_map(r, spec, "spec", "hosts", NULL, &m))
                return;
        hs->set = true;
        static const char *const known[] = {"mode",      "ssh",        "dataDir", "manifestDir",
                                            "unitDir",   "etcdBinary", "tlsDir",  "machines",
                                            "placement", NULL};
        rd_keys(r, m, P, known, NULL);
        static const char *const modes[] = {"systemd", "staticPod", NULL};
        int mode;
        if (rd_enum(r, m, P, "mode", NULL, modes, &mode)) {
                hs->defaults.mode = (host_mode)mode;
                hs->mode_set = true;
        }
        read_host_fields(r, m, P, &hs->defaults);
        static const char *const placements[] = {"strict", "preferred", NULL};
        int placement;
        if (rd_enum(r, m, P, "placement", NULL, placements, &placement))
                hs->placement = (host_placement)placement;

        const ynode *seq = rd_get(m, "machines", &k);
        if (!seq)
                return;
        rd_record(r, "spec.hosts.machines", "spec.hosts.machines", k, seq);
        if (seq->kind != YNODE_SEQ) {
                rd_type_error(r, seq, "spec.hosts.machines", "a sequence of mappings");
                return;
        }
        hs->items = xcalloc(seq->n ? seq->n : 1, sizeof(host_spec));
        for (size_t i = 0; i < seq->n; i++) {
                const ynode *v = seq->values[i];
                _cleanup_free_ char *path = xasprintf("spec.hosts.machines[%zu]", i);
                host_spec *h = &hs->items[hs->n++];
                rd_record(r, path, path, NULL, v);
                if (v->kind != YNODE_MAP) {
                        rd_type_error(r, v, path, "a mapping");
                        continue;
                }
                static const char *const kh[] = {
                    "address", "advertiseAddress", "ssh",    "dataDir", "manifestDir",
                    "unitDir", "etcdBinary",       "tlsDir", "domains", NULL};
                rd_keys(r, v, path, kh, NULL);
                if (!rd_string(r, v, path, "address", NULL, &h->address) &&
                    !rd_get(v, "address", NULL))
                        rd_error(r, v, "%s.address is required", path);
                rd_string(r, v, path, "advertiseAddress", NULL, &h->advertise_address);
                rd_kv(r, v, path, "domains", NULL, true, &h->domains);
                read_host_fields(r, v, path, h);
        }
}

/*
 * spec.storage, spec.auth and spec.additionalMetadata in the native shape,
 * which cozystack's dialect shares field for field.
 */
void native_read_storage(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        const ynode *m = NULL;
        if (rd_map(r, spec, "spec", "storage", NULL, &m)) {
                static const char *const k[] = {"size", "medium", "storageClassName", NULL};
                rd_keys(r, m, "spec.storage", k, NULL);
                rd_quantity(r, m, "spec.storage", "size", NULL, &c->storage.size,
                            &c->storage.size_bytes);
                static const char *const media[] = {"Disk", "Memory", NULL};
                int med;
                if (rd_enum(r, m, "spec.storage", "medium", NULL, media, &med))
                        c->storage.medium = (storage_medium)med;
                rd_string(r, m, "spec.storage", "storageClassName", NULL,
                          &c->storage.storage_class);
        }
}

void native_read_auth(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        const ynode *m = NULL;
        if (rd_map(r, spec, "spec", "auth", NULL, &m)) {
                static const char *const k[] = {"enabled", "rootCredentialsSecretRef", NULL};
                rd_keys(r, m, "spec.auth", k, NULL);
                rd_bool(r, m, "spec.auth", "enabled", NULL, &c->auth.enabled);
                rd_ref(r, m, "spec.auth", "rootCredentialsSecretRef", NULL,
                       &c->auth.root_credentials_secret);
        }
}

void native_read_additional_metadata(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        const ynode *m = NULL;
        if (rd_map(r, spec, "spec", "additionalMetadata", NULL, &m)) {
                static const char *const k[] = {"labels", "annotations", NULL};
                rd_keys(r, m, "spec.additionalMetadata", k, NULL);
                rd_kv(r, m, "spec.additionalMetadata", "labels", NULL, true, &c->additional_labels);
                rd_kv(r, m, "spec.additionalMetadata", "annotations", NULL, false,
                      &c->additional_annotations);
        }
}

static void read_recovery(reader *r, const ynode *spec)
{
        recovery_spec *rc = &r->c->recovery;
        const ynode *m = NULL, *from = NULL;
        const char *P = "spec.recovery";
        if (!rd_map(r, spec, "spec", "recovery", NULL, &m))
                return;
        static const char *const known[] = {"from", "token", "bumpRevision", NULL};
        rd_keys(r, m, P, known, NULL);
        rd_string(r, m, P, "token", NULL, &rc->token);
        read_bump(r, m, P, &rc->bump);
        if (!rd_map(r, m, P, "from", NULL, &from)) {
                rc->from = RECOVERY_FROM_MEMBER; /* validation names what is missing */
                return;
        }
        static const char *const kf[] = {"member", "snapshot", NULL};
        rd_keys(r, from, "spec.recovery.from", kf, NULL);
        int64_t id = 0;
        bool member = rd_string(r, from, "spec.recovery.from", "member", NULL, &rc->member);
        bool snapshot = rd_int(r, from, "spec.recovery.from", "snapshot", NULL, 1, INT64_MAX, &id);
        if (member && snapshot)
                rd_diag_at(r, DIAG_ERROR, "spec.recovery.from",
                           "%s: name a member or a snapshot, not both",
                           rd_name(r, "spec.recovery.from"));
        rc->from = snapshot && !member ? RECOVERY_FROM_SNAPSHOT : RECOVERY_FROM_MEMBER;
        rc->snapshot_id = id;
}

/* A positive duration field ("5m", "2h"), in ms; false when absent or not a duration. */
static bool read_duration(reader *r, const ynode *m, const char *parent, const char *key,
                          const char *example, int64_t *ret_ms)
{
        _cleanup_free_ char *text = NULL;
        if (!rd_string(r, m, parent, key, NULL, &text))
                return false;
        int64_t ms;
        if (duration_parse_ms(text, &ms) < 0 || ms <= 0) {
                rd_error(r, rd_get(m, key, NULL),
                         "%s.%s: \"%s\" is not a positive duration (for example %s)", parent, key,
                         text, example);
                return false;
        }
        *ret_ms = ms;
        return true;
}

static void read_consistency(reader *r, const ynode *spec)
{
        consistency_spec *cs = &r->c->consistency;
        const ynode *m = NULL;
        const char *P = "spec.consistency";
        if (!rd_map(r, spec, "spec", "consistency", NULL, &m))
                return;
        static const char *const known[] = {"etcdChecks", "etcdCheckInterval", "checkInterval",
                                            "reason", NULL};
        rd_keys(r, m, P, known, NULL);
        (void)rd_bool(r, m, P, "etcdChecks", NULL, &cs->etcd_checks);
        (void)read_duration(r, m, P, "etcdCheckInterval", "4h", &cs->etcd_check_interval_ms);
        (void)read_duration(r, m, P, "checkInterval", "5m", &cs->check_interval_ms);
        rd_string(r, m, P, "reason", NULL, &cs->reason);
}

static void read_adopt(reader *r, const ynode *spec)
{
        adopt_spec *a = &r->c->adopt;
        const ynode *m = NULL;
        const char *P = "spec.adopt";
        if (!rd_map(r, spec, "spec", "adopt", NULL, &m))
                return;
        static const char *const known[] = {"from", "name", "namespace", "ca", NULL};
        rd_keys(r, m, P, known, NULL);
        static const char *const froms[] = {"coreos", "etcd-io", "improbable", "cozystack", NULL};
        int f;
        if (rd_enum(r, m, P, "from", NULL, froms, &f))
                a->from = (adopt_from)(f + 1);
        else if (!rd_get(m, "from", NULL))
                rd_error(r, m,
                         "%s.from is required: the operator that runs the cluster now "
                         "(coreos, etcd-io, improbable or cozystack)",
                         P);
        rd_string(r, m, P, "name", NULL, &a->name);
        rd_string(r, m, P, "namespace", NULL, &a->namespace_);
        const ynode *ca = NULL;
        if (rd_map(r, m, P, "ca", NULL, &ca)) {
                static const char *const ca_known[] = {"secret", NULL};
                rd_keys(r, ca, "spec.adopt.ca", ca_known, NULL);
                if (!rd_string(r, ca, "spec.adopt.ca", "secret", NULL, &a->ca_secret) &&
                    !rd_get(ca, "secret", NULL))
                        rd_error(r, ca,
                                 "spec.adopt.ca.secret is required: the Secret with the old "
                                 "cluster's CA certificate (tls.crt) and key (tls.key)");
        }
}

static void read_repair(reader *r, const ynode *spec)
{
        repair_spec *rp = &r->c->repair;
        const ynode *m = NULL;
        const char *P = "spec.repair";
        if (!rd_map(r, spec, "spec", "repair", NULL, &m))
                return;
        static const char *const known[] = {"replace", "recheck", "token", NULL};
        rd_keys(r, m, P, known, NULL);
        rp->set = true;
        rd_string(r, m, P, "replace", NULL, &rp->replace);
        (void)rd_bool(r, m, P, "recheck", NULL, &rp->recheck);
        rd_string(r, m, P, "token", NULL, &rp->token);
}

/*
 * spec.dependsOn: a sequence of strings, each recorded at its own place
 * ("spec.dependsOn[1]") so an unknown name or a cycle points at the entry.
 */
static void read_depends_on(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        const ynode *k = NULL;
        const ynode *seq = rd_get(spec, "dependsOn", &k);
        if (!seq)
                return;
        rd_record(r, "spec.dependsOn", "spec.dependsOn", k, seq);
        if (seq->kind != YNODE_SEQ) {
                rd_type_error(r, seq, "spec.dependsOn", "a sequence of cluster names");
                return;
        }
        c->depends_on = xcalloc(seq->n + 1, sizeof(char *));
        for (size_t i = 0; i < seq->n; i++) {
                const ynode *v = seq->values[i];
                _cleanup_free_ char *path = xasprintf("spec.dependsOn[%zu]", i);
                rd_record(r, path, path, NULL, v);
                if (v->kind != YNODE_SCALAR || !streq(ynode_type_name(v), "string") ||
                    strlen(v->str) != v->len) {
                        rd_type_error(r, v, path,
                                      "a cluster name (\"name\" or \"namespace/name\")");
                        continue;
                }
                c->depends_on[c->n_depends_on++] = xstrdup(v->str);
        }
}

static void read_rollout(reader *r, const ynode *spec)
{
        const ynode *m = NULL;
        if (!rd_map(r, spec, "spec", "rollout", NULL, &m))
                return;
        static const char *const known[] = {"soakSeconds", NULL};
        rd_keys(r, m, "spec.rollout", known, NULL);
        int64_t v;
        if (rd_int(r, m, "spec.rollout", "soakSeconds", NULL, INT32_MIN, INT32_MAX, &v))
                r->c->soak_seconds = (int)v;
}

/* spec.kubernetes.context: the kubeconfig context of the cluster's API server. */
static void read_kubernetes(reader *r, const ynode *spec)
{
        const ynode *m = NULL;
        if (!rd_map(r, spec, "spec", "kubernetes", NULL, &m))
                return;
        static const char *const known[] = {"context", NULL};
        rd_keys(r, m, "spec.kubernetes", known, NULL);
        rd_string(r, m, "spec.kubernetes", "context", NULL, &r->c->kube_context);
}

/*
 * spec.leadership: avoidSlowMembers (default true) and intervalSeconds, at
 * most one move per interval (10 s to a day; default 600).
 */
static void read_leadership(reader *r, const ynode *spec)
{
        leadership_spec *ls = &r->c->leadership;
        const ynode *m = NULL;
        const char *P = "spec.leadership";
        if (!rd_map(r, spec, "spec", "leadership", NULL, &m))
                return;
        static const char *const known[] = {"avoidSlowMembers", "intervalSeconds", NULL};
        rd_keys(r, m, P, known, NULL);
        bool avoid = true;
        if (rd_bool(r, m, P, "avoidSlowMembers", NULL, &avoid))
                ls->avoid_slow_off = !avoid;
        int64_t v;
        if (rd_int(r, m, P, "intervalSeconds", NULL, 10, 86400, &v))
                ls->interval_seconds = (int)v;
}

/*
 * spec.maintenance: windows (a cron schedule and a duration of 1 minute to
 * 7 days each; the schedules are checked with the others, validate.c) and
 * the emergency override token (its characters checked in validate.c).
 */
static void read_maintenance(reader *r, const ynode *spec)
{
        maintenance_spec *ms = &r->c->maintenance;
        const ynode *m = NULL, *k = NULL;
        const char *P = "spec.maintenance";
        if (!rd_map(r, spec, "spec", "maintenance", NULL, &m))
                return;
        static const char *const known[] = {"windows", "override", NULL};
        rd_keys(r, m, P, known, NULL);
        rd_string(r, m, P, "override", NULL, &ms->override);
        const ynode *seq = rd_get(m, "windows", &k);
        if (!seq)
                return;
        rd_record(r, "spec.maintenance.windows", "spec.maintenance.windows", k, seq);
        if (seq->kind != YNODE_SEQ) {
                rd_type_error(r, seq, "spec.maintenance.windows", "a sequence of mappings");
                return;
        }
        ms->windows = xcalloc(seq->n ? seq->n : 1, sizeof(maint_window));
        for (size_t i = 0; i < seq->n; i++) {
                const ynode *v = seq->values[i];
                _cleanup_free_ char *path = xasprintf("spec.maintenance.windows[%zu]", i);
                maint_window *w = &ms->windows[ms->n_windows++];
                rd_record(r, path, path, NULL, v);
                if (v->kind != YNODE_MAP) {
                        rd_type_error(r, v, path, "a mapping");
                        continue;
                }
                static const char *const kw[] = {"schedule", "duration", NULL};
                rd_keys(r, v, path, kw, NULL);
                if (!rd_string(r, v, path, "schedule", NULL, &w->schedule) &&
                    !rd_get(v, "schedule", NULL))
                        rd_error(r, v, "%s.schedule is required", path);
                if (!rd_string(r, v, path, "duration", NULL, &w->duration)) {
                        if (!rd_get(v, "duration", NULL))
                                rd_error(r, v, "%s.duration is required", path);
                        continue;
                }
                int64_t ms_ = 0;
                if (duration_parse_ms(w->duration, &ms_) < 0 || ms_ < 60 * 1000 ||
                    ms_ > 7 * 24 * 3600 * 1000LL)
                        rd_error(r, rd_get(v, "duration", NULL),
                                 "%s.duration: \"%s\" is not a duration from 1m to 7d (for "
                                 "example 4h)",
                                 path, w->duration);
                else
                        w->duration_ms = ms_;
        }
}

void read_spec_gitcd(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        if (!spec)
                return;
        static const char *const known[] = {"replicas",
                                            "version",
                                            "repository",
                                            "storage",
                                            "tls",
                                            "auth",
                                            "resources",
                                            "affinity",
                                            "topologySpreadConstraints",
                                            "nodeSelector",
                                            "tolerations",
                                            "additionalMetadata",
                                            "podTemplate",
                                            "options",
                                            "progressDeadlineSeconds",
                                            "snapshots",
                                            "defrag",
                                            "bootstrap",
                                            "hosts",
                                            "recovery",
                                            "role",
                                            "consistency",
                                            "repair",
                                            "adopt",
                                            "dependsOn",
                                            "rollout",
                                            "suspend",
                                            "maintenance",
                                            "kubernetes",
                                            "leadership",
                                            NULL};
        rd_keys(r, spec, "spec", known, NULL);
        static const char *const roles[] = {"general", "kubernetes-control-plane", NULL};
        int role;
        if (rd_enum(r, spec, "spec", "role", NULL, roles, &role))
                c->role = (cluster_role)role;

        int64_t v;
        if (rd_int(r, spec, "spec", "replicas", NULL, INT32_MIN, INT32_MAX, &v))
                c->replicas = (int)v;
        rd_string(r, spec, "spec", "version", NULL, &c->version);
        rd_string(r, spec, "spec", "repository", NULL, &c->repository);

        const ynode *m = NULL;
        native_read_storage(r, spec);
        read_tls(r, spec);
        native_read_auth(r, spec);
        rd_json(r, spec, "spec", "resources", NULL, true, &c->resources);
        rd_json(r, spec, "spec", "affinity", NULL, true, &c->affinity);
        rd_json(r, spec, "spec", "topologySpreadConstraints", NULL, false,
                &c->topology_spread_constraints);
        rd_json(r, spec, "spec", "nodeSelector", NULL, true, &c->node_selector);
        rd_json(r, spec, "spec", "tolerations", NULL, false, &c->tolerations);
        native_read_additional_metadata(r, spec);
        if (rd_map(r, spec, "spec", "podTemplate", NULL, &m)) {
                static const char *const k[] = {"metadata", NULL};
                const ynode *pm = NULL;
                rd_keys(r, m, "spec.podTemplate", k, NULL);
                if (rd_map(r, m, "spec.podTemplate", "metadata", NULL, &pm)) {
                        static const char *const km[] = {"labels", "annotations", NULL};
                        rd_keys(r, pm, "spec.podTemplate.metadata", km, NULL);
                        rd_kv(r, pm, "spec.podTemplate.metadata", "labels", NULL, true,
                              &c->pod_labels);
                        rd_kv(r, pm, "spec.podTemplate.metadata", "annotations", NULL, false,
                              &c->pod_annotations);
                }
        }
        read_options(r, spec);
        if (rd_int(r, spec, "spec", "progressDeadlineSeconds", NULL, INT32_MIN, INT32_MAX, &v))
                c->progress_deadline_seconds = (int)v;
        read_snapshots(r, spec);
        read_defrag(r, spec);
        (void)rd_bool(r, spec, "spec", "suspend", NULL, &c->suspend);
        read_maintenance(r, spec);
        read_leadership(r, spec);
        read_bootstrap(r, spec);
        read_recovery(r, spec);
        read_consistency(r, spec);
        read_repair(r, spec);
        read_adopt(r, spec);
        read_hosts(r, spec);
        read_depends_on(r, spec);
        read_rollout(r, spec);
        read_kubernetes(r, spec);
}
