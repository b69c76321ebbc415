/*
 * The etcd-io dialect, operator.etcd.io/v1alpha1 (etcd-io/etcd-operator):
 * replicas (older: size), version, imageRegistry, storageSpec, tls,
 * etcdOptions and podTemplate.
 *
 * Design: etcdOptions is a list of raw etcd flags; the ones the model has a
 * field for (quota, compaction, snapshot count, timing) are mapped onto
 * that field so validation and transitions treat them like native options;
 * the rest become extra flags, refused by api/flags.c when gitcd sets them
 * itself or they break a cluster. Both tls shapes in the wild are read: the
 * released providerCfg.{autoCfg, certManagerCfg} form and the newer
 * {enabled, certManager.issuerRef}.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "util/xalloc.h"

static void set_str(char **dst, const char *v)
{
        free(*dst);
        *dst = xstrdup(v);
}

static bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        char *end = NULL;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || !end || *end || end == s || v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static void read_option(reader *r, const ynode *at, const char *path, const char *text)
{
        etcd_options *o = &r->c->options;
        if (!strneq(text, "--", 2)) {
                rd_error(r, at, "%s: \"%s\" is not an etcd flag (write --name=value)", path, text);
                return;
        }
        _cleanup_free_ char *flag = xstrdup(text + 2);
        char *eq = strchr(flag, '=');
        const char *value = "true";
        if (eq) {
                *eq = '\0';
                value = eq + 1;
        }
        int64_t v;
        const char *native = NULL;
        bool ok = true;
        if (streq(flag, "quota-backend-bytes")) {
                native = "spec.options.quotaBackendBytes";
                ok = quantity_parse(value, &v) == 0;
                if (ok) {
                        set_str(&o->quota_backend, value);
                        o->quota_backend_bytes = v;
                }
        } else if (streq(flag, "auto-compaction-mode")) {
                native = "spec.options.autoCompactionMode";
                ok = streq(value, "periodic") || streq(value, "revision");
                if (ok)
                        set_str(&o->auto_compaction_mode, value);
        } else if (streq(flag, "auto-compaction-retention")) {
                native = "spec.options.autoCompactionRetention";
                set_str(&o->auto_compaction_retention, value);
        } else if (streq(flag, "snapshot-count")) {
                native = "spec.options.snapshotCount";
                ok = parse_i64(value, 1, INT64_MAX, &v);
                if (ok)
                        o->snapshot_count = v;
        } else if (streq(flag, "heartbeat-interval")) {
                native = "spec.options.heartbeatInterval";
                ok = parse_i64(value, 1, INT32_MAX, &v);
                if (ok)
                        o->heartbeat_interval_ms = (int)v;
        } else if (streq(flag, "election-timeout")) {
                native = "spec.options.electionTimeout";
                ok = parse_i64(value, 1, INT32_MAX, &v);
                if (ok)
                        o->election_timeout_ms = (int)v;
        }
        if (!native) {
                apply_etcd_flag(r, at, path, flag, value);
                return;
        }
        rd_record(r, native, path, NULL, at);
        if (!ok)
                rd_error(r, at, "%s: \"%s\" is not a valid value for --%s", path, value, flag);
}

static void read_options(reader *r, const ynode *spec)
{
        const ynode *k = NULL;
        const ynode *seq = rd_get(spec, "etcdOptions", &k);
        if (!seq)
                return;
        if (seq->kind != YNODE_SEQ) {
                rd_type_error(r, seq, "spec.etcdOptions", "a sequence of strings");
                return;
        }
        rd_record(r, "spec.options", "spec.etcdOptions", k, seq);
        for (size_t i = 0; i < seq->n; i++) {
                const ynode *v = seq->values[i];
                _cleanup_free_ char *path = xasprintf("spec.etcdOptions[%zu]", i);
                if (v->kind != YNODE_SCALAR || !streq(ynode_type_name(v), "string")) {
                        rd_type_error(r, v, path, "a string");
                        continue;
                }
                read_option(r, v, path, v->str);
        }
}

static void read_storage(reader *r, const ynode *st)
{
        etcd_cluster *c = r->c;
        const char *P = "spec.storageSpec";
        static const char *const known[] = {"accessModes", "storageClassName", "volumeSizeRequest",
                                            NULL};
        static const char *const ignored[] = {"pvcName", "volumeSizeLimit", NULL};
        rd_keys(r, st, P, known, ignored);
        rd_string(r, st, P, "storageClassName", "spec.storage.storageClassName",
                  &c->storage.storage_class);
        if (!rd_quantity(r, st, P, "volumeSizeRequest", "spec.storage.size", &c->storage.size,
                         &c->storage.size_bytes) &&
            !rd_get(st, "volumeSizeRequest", NULL))
                rd_error(r, st, "spec.storageSpec.volumeSizeRequest is required");
        const ynode *am = rd_get(st, "accessModes", NULL);
        if (am && !(am->kind == YNODE_SCALAR && streq(am->str, "ReadWriteOnce")))
                rd_warning(r, am,
                           "spec.storageSpec.accessModes: only ReadWriteOnce is supported by "
                           "gitcd (each member has its own volume); the value is ignored");
}

/* The common certificate fields of providerCfg.{autoCfg,certManagerCfg}. */
static void read_cert_common(reader *r, const ynode *m, const char *path)
{
        etcd_cluster *c = r->c;
        _cleanup_free_ char *vd = NULL;
        if (rd_string(r, m, path, "validityDuration", "spec.tls.auto.validityDays", &vd)) {
                int64_t ms;
                if (duration_parse_ms(vd, &ms) < 0 || ms < 86400000LL)
                        rd_error(r, rd_get(m, "validityDuration", NULL),
                                 "%s.validityDuration: \"%s\" is not a duration of at least "
                                 "one day (for example 90d)",
                                 path, vd);
                else
                        c->tls.validity_days = (int)MIN(ms / 86400000LL, 3650);
        }
        rd_string(r, m, path, "caBundleSecret", "spec.tls.caBundleSecretRef",
                  &c->tls.ca_bundle_secret);
}

static void read_tls(reader *r, const ynode *tls)
{
        etcd_cluster *c = r->c;
        tls_spec *t = &c->tls;
        const char *P = "spec.tls";
        static const char *const known[] = {"enabled",     "provider",       "providerCfg",
                                            "certManager", "caBundleSecret", NULL};
        rd_keys(r, tls, P, known, NULL);
        bool enabled = true;
        rd_bool(r, tls, P, "enabled", "spec.tls.enabled", &enabled);
        static const char *const providers[] = {"auto", "cert-manager", NULL};
        int p = 0;
        rd_enum(r, tls, P, "provider", "spec.tls.provider", providers, &p);
        t->provider = !enabled ? TLS_PROVIDER_NONE
                      : p == 1 ? TLS_PROVIDER_CERT_MANAGER
                               : TLS_PROVIDER_AUTO;
        t->client.enabled = t->peer.enabled = enabled;
        issuer_ref iss = {0};

        const ynode *cfg = NULL, *m = NULL;
        if (rd_map(r, tls, P, "providerCfg", NULL, &cfg)) {
                static const char *const kc[] = {"autoCfg", "certManagerCfg", NULL};
                rd_keys(r, cfg, "spec.tls.providerCfg", kc, NULL);
                static const char *const common_ignored[] = {"commonName", "organizations",
                                                             "altNames", NULL};
                if (rd_map(r, cfg, "spec.tls.providerCfg", "autoCfg", NULL, &m)) {
                        static const char *const ka[] = {"validityDuration", "caBundleSecret",
                                                         NULL};
                        rd_keys(r, m, "spec.tls.providerCfg.autoCfg", ka, common_ignored);
                        read_cert_common(r, m, "spec.tls.providerCfg.autoCfg");
                }
                if (rd_map(r, cfg, "spec.tls.providerCfg", "certManagerCfg", NULL, &m)) {
                        const char *Q = "spec.tls.providerCfg.certManagerCfg";
                        static const char *const km[] = {"validityDuration", "caBundleSecret",
                                                         "issuerKind", "issuerName", NULL};
                        rd_keys(r, m, Q, km, common_ignored);
                        read_cert_common(r, m, Q);
                        rd_string(r, m, Q, "issuerName", "spec.tls.client.issuerRef", &iss.name);
                        static const char *const kinds[] = {"Issuer", "ClusterIssuer", NULL};
                        int k;
                        if (rd_enum(r, m, Q, "issuerKind", "spec.tls.client.issuerRef.kind", kinds,
                                    &k))
                                iss.kind = xstrdup(kinds[k]);
                }
        }
        if (rd_map(r, tls, P, "certManager", NULL, &m)) {
                static const char *const kc[] = {"issuerRef", NULL};
                rd_keys(r, m, "spec.tls.certManager", kc, NULL);
                read_issuer(r, m, "spec.tls.certManager", "issuerRef", "spec.tls.client.issuerRef",
                            &iss);
        }
        rd_string(r, tls, P, "caBundleSecret", "spec.tls.caBundleSecretRef", &t->ca_bundle_secret);

        if (iss.name && t->provider == TLS_PROVIDER_CERT_MANAGER) {
                /* One issuer for every surface, as etcd-io does. */
                t->client.issuer.name = xstrdup(iss.name);
                t->client.issuer.kind = xstrdup_null(iss.kind);
                t->peer.issuer.name = xstrdup(iss.name);
                t->peer.issuer.kind = xstrdup_null(iss.kind);
                rd_record(r, "spec.tls.peer.issuerRef", rd_name(r, "spec.tls.client.issuerRef"),
                          NULL, NULL);
        } else if (iss.name) {
                rd_diag_at(r, DIAG_ERROR, "spec.tls.client.issuerRef",
                           "%s is only used with provider: cert-manager",
                           rd_name(r, "spec.tls.client.issuerRef"));
        }
        free(iss.name);
        free(iss.kind);
        free(iss.group);
}

static void read_pod_template(reader *r, const ynode *pt)
{
        etcd_cluster *c = r->c;
        static const char *const known[] = {"metadata", "spec", NULL};
        rd_keys(r, pt, "spec.podTemplate", known, NULL);
        const ynode *m = NULL;
        if (rd_map(r, pt, "spec.podTemplate", "metadata", NULL, &m)) {
                static const char *const km[] = {"labels", "annotations", NULL};
                rd_keys(r, m, "spec.podTemplate.metadata", km, NULL);
                rd_kv(r, m, "spec.podTemplate.metadata", "labels", NULL, true, &c->pod_labels);
                rd_kv(r, m, "spec.podTemplate.metadata", "annotations", NULL, false,
                      &c->pod_annotations);
        }
        if (rd_map(r, pt, "spec.podTemplate", "spec", NULL, &m)) {
                const char *Q = "spec.podTemplate.spec";
                static const char *const ks[] = {"affinity",    "nodeSelector",
                                                 "tolerations", "topologySpreadConstraints",
                                                 "resources",   NULL};
                static const char *const is[] = {"securityContext",    "priorityClassName",
                                                 "serviceAccountName", "imagePullSecrets",
                                                 "schedulerName",      NULL};
                rd_keys(r, m, Q, ks, is);
                rd_json(r, m, Q, "affinity", "spec.affinity", true, &c->affinity);
                rd_json(r, m, Q, "nodeSelector", "spec.nodeSelector", true, &c->node_selector);
                rd_json(r, m, Q, "tolerations", "spec.tolerations", false, &c->tolerations);
                rd_json(r, m, Q, "topologySpreadConstraints", "spec.topologySpreadConstraints",
                        false, &c->topology_spread_constraints);
                rd_json(r, m, Q, "resources", "spec.resources", true, &c->resources);
        }
}

void read_spec_etcdio(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        if (!spec)
                return;
        static const char *const known[] = {"replicas",      "size",        "version",
                                            "imageRegistry", "storageSpec", "tls",
                                            "etcdOptions",   "podTemplate", NULL};
        rd_keys(r, spec, "spec", known, NULL);
        int64_t v;
        if (rd_get(spec, "replicas", NULL) && rd_get(spec, "size", NULL))
                rd_error(r, rd_get(spec, "size", NULL),
                         "spec.size is the older spelling of spec.replicas; set only one");
        else if (rd_int(r, spec, "spec", "replicas", NULL, INT32_MIN, INT32_MAX, &v) ||
                 rd_int(r, spec, "spec", "size", "spec.replicas", INT32_MIN, INT32_MAX, &v))
                c->replicas = (int)v;
        rd_string(r, spec, "spec", "version", NULL, &c->version);
        rd_string(r, spec, "spec", "imageRegistry", "spec.repository", &c->repository);
        const ynode *m = NULL;
        if (rd_map(r, spec, "spec", "storageSpec", "spec.storage", &m))
                read_storage(r, m);
        if (rd_map(r, spec, "spec", "tls", NULL, &m))
                read_tls(r, m);
        read_options(r, spec);
        if (rd_map(r, spec, "spec", "podTemplate", NULL, &m))
                read_pod_template(r, m);
}
