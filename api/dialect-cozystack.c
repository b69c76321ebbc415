/*
 * The cozystack dialect, etcd-operator.cozystack.io/v1alpha2
 * (cozystack/etcd-operator): the closest to gitcd's own API; replicas 0
 * pauses, storage can be in memory, TLS is configured per surface.
 *
 * Design: cozystack has no provider field; the provider follows from what
 * each surface names (Secret references -> secrets, certManager issuers ->
 * cert-manager). Mixing the two across surfaces is an error, because gitcd
 * runs one provider per cluster. EtcdSnapshot documents (one-off snapshots)
 * are refused with a diagnostic naming `gitcd snapshot save` (api/sidekinds.c).
 *
 * Role: cozystack runs these clusters as the datastores of its tenants'
 * Kubernetes control planes (Kamaji), so a cluster of this dialect is
 * kubernetes-control-plane and a restore bumps the revision by default;
 * the dialect has no field to say otherwise (docs/api.md).
 */
#include <stdint.h>
#include <stdlib.h>

#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"
#include "util/xalloc.h"

/* Reads one surface; sets *secrets / *certmanager when that style is used. */
static void read_surface(reader *r, const ynode *tls, const char *key, bool *secrets,
                         bool *certmanager)
{
        etcd_cluster *c = r->c;
        tls_spec *t = &c->tls;
        bool client = key[0] == 'c';
        _cleanup_free_ char *P = xasprintf("spec.tls.%s", key);
        _cleanup_free_ char *CM = xasprintf("spec.tls.%s.certManager", key);
        const ynode *m = NULL, *cm = NULL;
        if (!rd_map(r, tls, "spec.tls", key, NULL, &m))
                return;
        tls_surface_spec *s = client ? &t->client : &t->peer;
        s->enabled = true;
        if (client) {
                static const char *const k[] = {"serverSecretRef", "operatorClientSecretRef",
                                                "certManager", NULL};
                rd_keys(r, m, P, k, NULL);
                *secrets |=
                    rd_ref(r, m, P, "serverSecretRef", "spec.tls.client.secretRef", &s->secret);
                *secrets |= rd_ref(r, m, P, "operatorClientSecretRef",
                                   "spec.tls.operatorClient.secretRef", &t->operator_client_secret);
                if (rd_map(r, m, P, "certManager", NULL, &cm)) {
                        static const char *const kc[] = {"serverIssuerRef",
                                                         "operatorClientIssuerRef", NULL};
                        rd_keys(r, cm, CM, kc, NULL);
                        read_issuer(r, cm, CM, "serverIssuerRef", "spec.tls.client.issuerRef",
                                    &s->issuer);
                        read_issuer(r, cm, CM, "operatorClientIssuerRef",
                                    "spec.tls.operatorClient.issuerRef",
                                    &t->operator_client_issuer);
                        *certmanager = true;
                }
        } else {
                static const char *const k[] = {"secretRef", "certManager", NULL};
                rd_keys(r, m, P, k, NULL);
                *secrets |= rd_ref(r, m, P, "secretRef", "spec.tls.peer.secretRef", &s->secret);
                if (rd_map(r, m, P, "certManager", NULL, &cm)) {
                        static const char *const kc[] = {"issuerRef", NULL};
                        rd_keys(r, cm, CM, kc, NULL);
                        read_issuer(r, cm, CM, "issuerRef", "spec.tls.peer.issuerRef", &s->issuer);
                        *certmanager = true;
                }
        }
}

static void read_tls(reader *r, const ynode *tls)
{
        tls_spec *t = &r->c->tls;
        static const char *const known[] = {"client", "peer", NULL};
        rd_keys(r, tls, "spec.tls", known, NULL);
        bool secrets = false, certmanager = false;
        read_surface(r, tls, "client", &secrets, &certmanager);
        read_surface(r, tls, "peer", &secrets, &certmanager);
        rd_record(r, "spec.tls.provider", "spec.tls", NULL, tls);
        if (secrets && certmanager) {
                rd_error(r, tls,
                         "spec.tls: Secret references and certManager issuers are mixed; gitcd "
                         "uses one provider per cluster, so use either for every surface");
                r->tls_failed = true;
                return;
        }
        if (secrets)
                t->provider = TLS_PROVIDER_SECRETS;
        else if (certmanager)
                t->provider = TLS_PROVIDER_CERT_MANAGER;
        else if (t->client.enabled || t->peer.enabled)
                rd_error(r, tls,
                         "spec.tls: each surface needs Secret references or certManager "
                         "issuers");
}

void read_spec_cozystack(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        c->role = ROLE_KUBERNETES;
        if (!spec)
                return;
        static const char *const known[] = {"replicas",
                                            "version",
                                            "storage",
                                            "tls",
                                            "auth",
                                            "resources",
                                            "affinity",
                                            "topologySpreadConstraints",
                                            "additionalMetadata",
                                            "progressDeadlineSeconds",
                                            "bootstrap",
                                            NULL};
        rd_keys(r, spec, "spec", known, NULL);
        int64_t v;
        if (rd_int(r, spec, "spec", "replicas", NULL, INT32_MIN, INT32_MAX, &v))
                c->replicas = (int)v;
        rd_string(r, spec, "spec", "version", NULL, &c->version);
        const ynode *m = NULL;
        native_read_storage(r, spec);
        if (rd_map(r, spec, "spec", "tls", NULL, &m))
                read_tls(r, m);
        native_read_auth(r, spec);
        rd_json(r, spec, "spec", "resources", NULL, true, &c->resources);
        rd_json(r, spec, "spec", "affinity", NULL, true, &c->affinity);
        rd_json(r, spec, "spec", "topologySpreadConstraints", NULL, false,
                &c->topology_spread_constraints);
        native_read_additional_metadata(r, spec);
        if (rd_int(r, spec, "spec", "progressDeadlineSeconds", NULL, INT32_MIN, INT32_MAX, &v))
                c->progress_deadline_seconds = (int)v;
        const ynode *b = NULL, *restore = NULL, *src = NULL;
        if (rd_map(r, spec, "spec", "bootstrap", NULL, &b)) {
                static const char *const kb[] = {"restore", NULL};
                rd_keys(r, b, "spec.bootstrap", kb, NULL);
                if (rd_map(r, b, "spec.bootstrap", "restore", NULL, &restore)) {
                        static const char *const kr[] = {"source", NULL};
                        rd_keys(r, restore, "spec.bootstrap.restore", kr, NULL);
                        c->restore.enabled = true;
                        if (rd_map(r, restore, "spec.bootstrap.restore", "source", NULL, &src))
                                read_location(r, src, "spec.bootstrap.restore.source",
                                              "spec.bootstrap.restore.source", true,
                                              &c->restore.source);
                        else if (!rd_get(restore, "source", NULL))
                                rd_error(r, restore, "spec.bootstrap.restore.source is required");
                }
        }
}
