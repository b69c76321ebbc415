/*
 * Fields that gitcd reads and validates but does not act on yet (today
 * one: spec.adopt together with a TLS provider).
 *
 * Design: this file is the one list of them. A field that is validated,
 * documented and then ignored is worse than an unknown field: a user who
 * names a Secret for etcd's root password would get a password gitcd made
 * up instead, one who writes `bootstrap.restore` an empty cluster instead
 * of their data. So the
 * commands that take a revision in (apply, run and plan) refuse a cluster
 * that uses one of these fields (spec_refuse_unsupported), and `validate`
 * warns (spec_check_unsupported). The change that implements a field
 * removes its entry from the table, in the same commit.
 *
 * "Uses" means asks for the feature: a block written explicitly off
 * (`snapshots.enabled: false`) asks for nothing and
 * is not refused. Every dialect maps onto the model, so one table covers
 * all of them (today only the native and cozystack dialects can express
 * these fields; both spell them as the native paths used here).
 *
 * The target-dependent rules live here too (spec_refuse_for_target), as
 * the second half of the same list: spec.hosts names the machines members
 * run on, which only the hosts target acts on, and the hosts target has
 * nowhere to run a cluster without them; a snapshot destination in a
 * PersistentVolumeClaim is written by a Pod only the Kubernetes target
 * runs, and so is a one-off snapshot a document (cozystack EtcdSnapshot)
 * asks for in a claim, its own or the cluster's. Any mismatch refuses the
 * cluster at intake, in apply, run and plan
 * alike, rather than letting a target ignore the inventory (members on the
 * gitcd host instead of the machines) or fail at the first placement or
 * snapshot.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "api/spec.h"
#include "util/xalloc.h"

static bool uses_snapshot_pvc(const etcd_cluster *c)
{
        return c->snapshots.enabled && c->snapshots.destination.kind == DEST_PVC;
}

/* The first one-off snapshot (EtcdSnapshot) going into a claim: its own or the cluster's. */
static const declared_snapshot *declared_pvc(const etcd_cluster *c)
{
        for (size_t i = 0; i < c->n_declared; i++) {
                const declared_snapshot *ds = &c->declared[i];
                destination_kind k = ds->destination.kind != DEST_NONE
                                         ? ds->destination.kind
                                         : c->snapshots.destination.kind;
                if (k == DEST_PVC)
                        return ds;
        }
        return NULL;
}

/* A message for each use of a PersistentVolumeClaim off the Kubernetes target. */
static void refuse_pvc(const etcd_cluster *c, diag_list *diags)
{
        int line, col;
        if (uses_snapshot_pvc(c)) {
                etcd_cluster_loc(c, "spec.snapshots.destination.pvc", &line, &col);
                diag_add(diags, DIAG_ERROR, c->file, line, col,
                         "spec.snapshots.destination.pvc (snapshots stored in a "
                         "PersistentVolumeClaim) needs --target kubernetes, which "
                         "writes them through a Pod mounting the claim; the cluster is "
                         "not taken in (use a local or s3 destination, or set "
                         "spec.snapshots.enabled: false)");
                return;
        }
        const declared_snapshot *ds = declared_pvc(c);
        assert(ds);
        if (ds->destination.kind == DEST_PVC)
                diag_add(diags, DIAG_ERROR, ds->file ? ds->file : c->file, ds->line, ds->col,
                         "%s: spec.destination.pvc (a snapshot stored in a "
                         "PersistentVolumeClaim) needs --target kubernetes, which writes it "
                         "through a Pod mounting the claim; cluster %s/%s is not taken in (use "
                         "an s3 destination, or remove the document)",
                         ds->object, c->namespace_, c->name);
        else
                diag_add(diags, DIAG_ERROR, ds->file ? ds->file : c->file, ds->line, ds->col,
                         "%s has no destination, so it takes cluster %s/%s's "
                         "spec.snapshots.destination.pvc (a PersistentVolumeClaim), which "
                         "needs --target kubernetes; the cluster is not taken in (give the "
                         "document an s3 destination, or remove it)",
                         ds->object, c->namespace_, c->name);
}

/*
 * spec.adopt of a cluster with TLS: coreos' static TLS is taken over with
 * tls.provider auto (its CA imported, spec.adopt.ca) or secrets (leaves the
 * user signed with it); cert-manager would issue from an Issuer gitcd
 * cannot check against the old CA, and the other operators' members serve
 * plain HTTP (etcd-io, improbable) or etcd's self-signed peer TLS (cozystack:
 * spec.tls.peer.selfSigned, which is no provider).
 */
static bool adopts_with_tls(const etcd_cluster *c)
{
        if (c->adopt.from == ADOPT_FROM_NONE || c->tls.provider == TLS_PROVIDER_NONE)
                return false;
        return c->adopt.from != ADOPT_FROM_COREOS || c->tls.provider == TLS_PROVIDER_CERT_MANAGER;
}

static const struct {
        const char *field; /* native path, as written in the native and cozystack dialects */
        const char *at;    /* the recorded location to point at (falls back to its parents) */
        const char *what;  /* what the field asks for */
        const char *fix;   /* how to get a cluster gitcd accepts today */
        bool (*used)(const etcd_cluster *c);
} unsupported[] = {
    {"spec.adopt with spec.tls", "spec.tls",
     "taking over a cluster with TLS other than coreos' with tls.provider auto or secrets",
     "coreos clusters are taken over with tls.provider auto and spec.adopt.ca, or secrets; the "
     "other operators' clusters with no tls.provider (cozystack's with "
     "spec.tls.peer.selfSigned); see docs/migration.md",
     adopts_with_tls},
    {NULL, NULL, NULL, NULL, NULL}, /* the end */
};

static bool uses_any(const etcd_cluster *c)
{
        for (size_t i = 0; unsupported[i].field; i++)
                if (unsupported[i].used(c))
                        return true;
        return false;
}

size_t spec_check_unsupported(const etcd_cluster *c, spec_unsupported_mode mode, diag_list *diags)
{
        assert(c);
        size_t n = 0;
        for (size_t i = 0; unsupported[i].field; i++) {
                if (!unsupported[i].used(c))
                        continue;
                int line, col;
                etcd_cluster_loc(c, unsupported[i].at, &line, &col);
                const char *then = mode == SPEC_UNSUPPORTED_WARN
                                       ? "gitcd apply, run and plan refuse this cluster"
                                   : mode == SPEC_UNSUPPORTED_CHANGE
                                       ? "the cluster is not changed (its last accepted spec "
                                         "stays in force)"
                                       : "the cluster is not created";
                diag_add(diags, mode == SPEC_UNSUPPORTED_WARN ? DIAG_WARNING : DIAG_ERROR, c->file,
                         line, col, "%s (%s) is not supported yet; %s (%s)", unsupported[i].field,
                         unsupported[i].what, then, unsupported[i].fix);
                n++;
        }
        return n;
}

int spec_refuse_unsupported(cluster_set *set, bool (*exists)(const char *id, void *userdata),
                            void *userdata, diag_list *diags)
{
        assert(set);
        size_t kept = 0;
        int r = 0;
        for (size_t i = 0; i < set->n; i++) {
                etcd_cluster *c = set->items[i];
                if (!uses_any(c)) {
                        set->items[kept++] = c;
                        continue;
                }
                _cleanup_free_ char *id = etcd_cluster_id(c);
                spec_unsupported_mode mode = exists && exists(id, userdata)
                                                 ? SPEC_UNSUPPORTED_CHANGE
                                                 : SPEC_UNSUPPORTED_CREATE;
                size_t n = spec_check_unsupported(c, mode, diags);
                assert(n > 0);
                (void)n;
                etcd_cluster_free(c);
                r = -EOPNOTSUPP;
        }
        set->n = kept;
        return r;
}

int spec_refuse_for_target(cluster_set *set, bool hosts_target, bool pvc_target, diag_list *diags)
{
        assert(set);
        size_t kept = 0;
        int r = 0;
        for (size_t i = 0; i < set->n; i++) {
                etcd_cluster *c = set->items[i];
                if (c->adopt.from != ADOPT_FROM_NONE && !pvc_target) {
                        /* the old operator's members are Pods: only the Kubernetes target adds
                           members beside them */
                        int l, k;
                        etcd_cluster_loc(c, "spec.adopt", &l, &k);
                        diag_add(diags, DIAG_ERROR, c->file, l, k,
                                 "spec.adopt (taking over a cluster another operator runs) needs "
                                 "--target kubernetes; the cluster is not taken in (remove "
                                 "spec.adopt, or run gitcd with --target kubernetes)");
                        etcd_cluster_free(c);
                        r = -EOPNOTSUPP;
                        continue;
                }
                bool pvc_refused = (uses_snapshot_pvc(c) || declared_pvc(c)) && !pvc_target;
                if (c->hosts.set == hosts_target && !pvc_refused) {
                        set->items[kept++] = c;
                        continue;
                }
                int line, col;
                if (c->hosts.set == hosts_target) {
                        refuse_pvc(c, diags);
                        etcd_cluster_free(c);
                        r = -EOPNOTSUPP;
                        continue;
                }
                etcd_cluster_loc(c, c->hosts.set ? "spec.hosts" : "metadata.name", &line, &col);
                if (c->hosts.set)
                        diag_add(diags, DIAG_ERROR, c->file, line, col,
                                 "spec.hosts (members on machines reached over SSH) needs "
                                 "--target hosts; the cluster is not taken in (run gitcd with "
                                 "--target hosts, or remove spec.hosts to run members on this "
                                 "target)");
                else
                        diag_add(diags, DIAG_ERROR, c->file, line, col,
                                 "--target hosts runs members on the machines of spec.hosts, and "
                                 "cluster %s/%s has none; the cluster is not taken in (add "
                                 "spec.hosts, or use --target local or kubernetes)",
                                 c->namespace_, c->name);
                etcd_cluster_free(c);
                r = -EOPNOTSUPP;
        }
        set->n = kept;
        return r;
}

int spec_refuse_peer_self_signed(cluster_set *set, bool can, diag_list *diags)
{
        assert(set);
        size_t kept = 0;
        int r = 0;
        for (size_t i = 0; i < set->n; i++) {
                etcd_cluster *c = set->items[i];
                if (can || !c->tls.peer.self_signed) {
                        set->items[kept++] = c;
                        continue;
                }
                int line, col;
                etcd_cluster_loc(c, "spec.tls.peer.selfSigned", &line, &col);
                diag_add(diags, DIAG_ERROR, c->file, line, col,
                         "spec.tls.peer.selfSigned (etcd's own self-signed peer certificates) "
                         "needs --target kubernetes or local; the cluster is not taken in "
                         "(remove it, or give the peer surface a provider's certificates)");
                etcd_cluster_free(c);
                r = -EOPNOTSUPP;
        }
        set->n = kept;
        return r;
}
