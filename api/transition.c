/*
 * Transition rules between the accepted spec of a cluster and a new one.
 *
 * Some changes cannot be applied to a running cluster safely: the storage
 * medium and TLS settings are fixed at creation (auth may be switched on
 * and off and its root credentials Secret changed; TLS may be switched on,
 * from plain http to tls.provider auto, and off again, one surface or both),
 * volumes only grow,
 * and etcd moves between versions as the version policy says (its table is
 * api/versions.c; a rollback of an unfinished upgrade is told apart by the
 * versions the members still run). This file is pure: it compares two models and explains
 * each refusal at the place the new value was written, with what to do
 * instead.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec.h"
#include "api/versions.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

typedef struct ctx {
        const etcd_cluster *next;
        diag_list *diags;
        int refused;
} ctx;

static void refuse(ctx *x, const char *path, const char *fmt, ...) _printf_(3, 4);
static void refuse(ctx *x, const char *path, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *msg = xvasprintf(fmt, ap);
        va_end(ap);
        int line = 0, col = 0;
        etcd_cluster_loc(x->next, path, &line, &col);
        diag_add(x->diags, DIAG_ERROR, x->next->file, line, col, "%s: %s", path, msg);
        x->refused++;
}

static const char *or_none(const char *s)
{
        return s ? s : "(none)";
}

#define FIXED_TLS                                                                                  \
        "TLS settings are fixed when a cluster is created, except that plain http may be "         \
        "switched to tls.provider auto and tls.provider auto back to plain http; create a new "    \
        "cluster with the new settings and restore a snapshot into it"
static void check_string(ctx *x, const char *path, const char *a, const char *b, const char *why)
{
        if (!streq_ptr(a, b))
                refuse(x, path, "%s → %s: %s", or_none(a), or_none(b), why);
}

static void check_issuer(ctx *x, const char *path, const issuer_ref *a, const issuer_ref *b)
{
        if (streq_ptr(a->name, b->name) && streq_ptr(a->kind, b->kind) &&
            streq_ptr(a->group, b->group))
                return;
        refuse(x, path, "%s %s → %s %s: %s", a->kind ? a->kind : "", or_none(a->name),
               b->kind ? b->kind : "", or_none(b->name), FIXED_TLS);
}

static void check_surface(ctx *x, const char *name, const tls_surface_spec *a,
                          const tls_surface_spec *b)
{
        _cleanup_free_ char *pe = xasprintf("spec.tls.%s.enabled", name);
        _cleanup_free_ char *ps = xasprintf("spec.tls.%s.secretRef", name);
        _cleanup_free_ char *pi = xasprintf("spec.tls.%s.issuerRef", name);
        if (a->enabled != b->enabled)
                refuse(x, pe, "%s → %s: %s", a->enabled ? "true" : "false",
                       b->enabled ? "true" : "false", FIXED_TLS);
        check_string(x, ps, a->secret, b->secret, FIXED_TLS);
        check_issuer(x, pi, &a->issuer, &b->issuer);
}

/*
 * TLS switched on for a running cluster: from plain http to tls.provider
 * auto, on one surface or both (reconciler/tlsswitch.c moves the members
 * step by step). A surface never goes back to plain, and every other
 * provider change stays refused.
 */
static bool switched_on_auto(const tls_spec *a, const tls_spec *b)
{
        if (b->provider != TLS_PROVIDER_AUTO)
                return false;
        bool on = a->provider != TLS_PROVIDER_NONE;
        bool ac = on && a->client.enabled, ap = on && a->peer.enabled;
        if (a->provider != TLS_PROVIDER_AUTO && (ac || ap))
                return false;
        return (!ac || b->client.enabled) && (!ap || b->peer.enabled) &&
               (ac != b->client.enabled || ap != b->peer.enabled);
}

/*
 * TLS switched off for a running cluster: from tls.provider auto to none,
 * or auto with fewer surfaces (reconciler/tlsswitch.c walks the switch on
 * back). No surface goes on in the same commit.
 */
static bool switched_off_auto(const tls_spec *a, const tls_spec *b)
{
        if (a->provider != TLS_PROVIDER_AUTO ||
            (b->provider != TLS_PROVIDER_NONE && b->provider != TLS_PROVIDER_AUTO))
                return false;
        bool bon = b->provider != TLS_PROVIDER_NONE;
        bool ac = a->client.enabled, ap = a->peer.enabled;
        bool bc = bon && b->client.enabled, bp = bon && b->peer.enabled;
        return (!bc || ac) && (!bp || ap) && (ac != bc || ap != bp);
}

/* Is the version older than 3.5 (unparseable: no, validation reports it)? */
static bool before_35(const char *version)
{
        semver v;
        return semver_parse(version, &v) == 0 && (v.major < 3 || (v.major == 3 && v.minor < 5));
}

static void check_tls(ctx *x, const etcd_cluster *prev, const etcd_cluster *next)
{
        const tls_spec *a = &prev->tls, *b = &next->tls;
        /*
         * A member with CA-issued peer certificates and one with etcd's own
         * cannot talk (neither trusts the other's), nor one on plain http
         * and one on https: no rolling path, no switch.
         */
        if (a->peer.self_signed != b->peer.self_signed)
                refuse(x, "spec.tls.peer.selfSigned",
                       "%s → %s: etcd's self-signed peer certificates are fixed when a cluster "
                       "is created (members with them and members without them cannot talk to "
                       "each other); create a new cluster and restore a snapshot into it",
                       a->peer.self_signed ? "true" : "false",
                       b->peer.self_signed ? "true" : "false");
        bool on = switched_on_auto(a, b), off = !on && switched_off_auto(a, b);
        if (on || off) {
                const char *way = on ? "on" : "off";
                if (before_35(prev->version) || before_35(next->version))
                        refuse(x, "spec.tls.provider",
                               "%s → %s on a running cluster needs etcd 3.5 or later (the "
                               "cluster runs %s): etcd 3.4 cannot reliably serve gRPC in plain "
                               "http and https on one port, which the switch %s needs; upgrade "
                               "to 3.5 first",
                               tls_provider_name(a->provider), tls_provider_name(b->provider),
                               prev->version, way);
                /* Members added mid-way would be planned for one side of the switch only. */
                if (prev->replicas != next->replicas)
                        refuse(x, "spec.replicas",
                               "%d → %d in the commit that switches TLS %s: change the number "
                               "of members in a commit of its own, before or after",
                               prev->replicas, next->replicas, way);
                if (b->provider == TLS_PROVIDER_AUTO)
                        check_string(x, "spec.tls.caBundleSecretRef", a->ca_bundle_secret,
                                     b->ca_bundle_secret, FIXED_TLS);
                return;
        }
        if (a->provider != b->provider) {
                refuse(x, "spec.tls.provider", "%s → %s: %s", tls_provider_name(a->provider),
                       tls_provider_name(b->provider), FIXED_TLS);
                return;
        }
        check_surface(x, "client", &a->client, &b->client);
        check_surface(x, "peer", &a->peer, &b->peer);
        check_string(x, "spec.tls.operatorClient.secretRef", a->operator_client_secret,
                     b->operator_client_secret, FIXED_TLS);
        check_issuer(x, "spec.tls.operatorClient.issuerRef", &a->operator_client_issuer,
                     &b->operator_client_issuer);
        check_string(x, "spec.tls.caBundleSecretRef", a->ca_bundle_secret, b->ca_bundle_secret,
                     FIXED_TLS);
}

/*
 * The API server a cluster runs on: its members' Pods and volumes are
 * there, and a cluster named on another server would start empty there and
 * leave them behind. A cluster accepted without a context (before contexts
 * were named) may take one on: it names where the cluster already runs.
 */
static void check_kube_context(ctx *x, const etcd_cluster *prev, const etcd_cluster *next)
{
        if (!prev->kube_context || streq_ptr(prev->kube_context, next->kube_context))
                return;
        refuse(x, "spec.kubernetes.context",
               "%s → %s: a cluster stays on the API server it was created on (its Pods and "
               "volumes are there); to move it, create a new cluster on the other context and "
               "restore a snapshot into it",
               prev->kube_context, or_none(next->kube_context));
}

/* Fields fixed at creation, and volumes that only grow. */
static void check_fixed(ctx *x, const etcd_cluster *prev, const etcd_cluster *next)
{
        if (prev->storage.medium != next->storage.medium)
                refuse(x, "spec.storage.medium",
                       "%s → %s: the storage medium is fixed when a cluster is created; create a "
                       "new cluster and restore a snapshot into it",
                       prev->storage.medium == MEDIUM_MEMORY ? "Memory" : "Disk",
                       next->storage.medium == MEDIUM_MEMORY ? "Memory" : "Disk");
        else if (next->storage.size_bytes < prev->storage.size_bytes)
                refuse(x, "spec.storage.size",
                       "%s → %s shrinks the volumes; volumes can only grow (keep %s or more)",
                       prev->storage.size, next->storage.size, prev->storage.size);
        check_tls(x, prev, next);
        check_kube_context(x, prev, next);
}

/* The version policy (api/versions.c), with the versions members still run. */
static void check_version(ctx *x, const etcd_cluster *prev, const etcd_cluster *next,
                          const char *const *running, size_t n_running)
{
        semver a, b;
        if (semver_parse(prev->version, &a) < 0 || semver_parse(next->version, &b) < 0)
                return; /* validation reports unparseable versions */
        if (running && n_running == 0)
                return; /* no member ever held data (never formed): any version starts afresh */
        semver *run = xcalloc(n_running + 1, sizeof(semver));
        size_t n = 0;
        for (size_t i = 0; i < n_running; i++)
                if (running[i] && semver_parse(running[i], &run[n]) == 0)
                        n++;
        _cleanup_free_ char *why = NULL;
        if (version_check_move(&a, &b, run, n, &why) == VERSION_REFUSED)
                refuse(x, "spec.version", "%s", why);
        free(run);
}

int spec_check_transition_running(const etcd_cluster *prev, const etcd_cluster *next,
                                  const char *const *running, size_t n_running, diag_list *diags)
{
        ctx x = {.next = next, .diags = diags};
        check_fixed(&x, prev, next);
        check_version(&x, prev, next, running, n_running);
        return x.refused ? -EPERM : 0;
}

int spec_check_transition(const etcd_cluster *prev, const etcd_cluster *next, diag_list *diags)
{
        return spec_check_transition_running(prev, next, NULL, 0, diags);
}
