/*
 * `tls.provider: auto`, for every target: gitcd is the cluster's CA. The
 * CA lives once per cluster under <cluster dir>/pki/ and outlives its
 * members; a target asks for each leaf it needs (a folder with tls.crt,
 * tls.key and ca.crt, as render/layout.h lays them out) and copies the
 * folder where its members read it (local: the member's tls_dir;
 * Kubernetes: a Secret).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "api/model.h"
#include "pki/pki.h"

typedef struct pki_auto pki_auto;

/*
 * Open the cluster CA in <cluster_dir>/pki, creating it on first use (see
 * pki_ca_open() for half-written CAs and members_depend). validity and
 * renewal come from the spec (tls.auto.validity, tls.auto.renewBefore).
 * Errors as pki_ca_open(), message in pki_last_error().
 */
int pki_auto_open(const char *cluster_dir, const etcd_cluster *c, bool members_depend,
                  pki_auto **ret);
void pki_auto_free(pki_auto *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(pki_auto *, pki_auto_free);

/*
 * The leaf lifetime and renewal window the spec asks for, in seconds,
 * with the defaults (90 days, 30 days) and a window of a third of the
 * lifetime when the spec's is not shorter than it.
 */
void pki_auto_lifetime(const etcd_cluster *c, int64_t *ret_seconds, int64_t *ret_renew_seconds);

/* The CA certificate, PEM. */
const char *pki_auto_ca_pem(const pki_auto *a);

/*
 * Make <dir> hold a usable leaf: signed by the cluster CA, valid at now_ms
 * and, when renew, not within the renewal window then, carrying every DNS
 * name and IP address asked for (the name check: a certificate naming
 * other hosts is reissued). Without renew a leaf in its window is kept
 * (the reconciler renews one member at a time). A server leaf is also good
 * for clients (etcd's peers are both). A new leaf replaces the folder in
 * one step (see auto.c). Returns 1 when it was (re)issued, 0 when it was
 * kept, or a negative errno.
 */
int pki_auto_leaf(pki_auto *a, const char *dir, const char *cn, const char *const *dns,
                  const char *const *ips, bool server, bool renew, int64_t now_ms);

/* Whether the cluster's members trust an auto CA (a trust version to read). */
bool pki_auto_trusted(const etcd_cluster *c);

/*
 * The version of the TLS material whose change needs a member restart:
 * the fingerprint (pki_bundle_fingerprint) of the CA bundle the members
 * trust for client and peer connections. For tls.provider auto both are
 * the cluster CA (opened, or created, as pki_auto_open()). Leaf
 * certificates are not part of it: etcd re-reads them on every new
 * connection, so a renewed leaf is a file swap, not a restart.
 * *ret is NULL when the cluster uses no auto TLS. Errors as pki_auto_open().
 */
int pki_auto_trust_version(const char *cluster_dir, const etcd_cluster *c, bool members_depend,
                           char **ret);

/* Does <dir> hold a leaf certificate (tls.crt)? For members_depend. */
bool pki_auto_leaf_exists(const char *dir);

/*
 * The leaves of tls.provider auto, the one table every target issues and
 * lists them by: a folder (TLS_SUBDIR_CLIENT, _PEER, _OPERATOR of
 * render/layout.h) per surface, a server certificate for the client and
 * peer surfaces, and gitcd's own client identity (CN root) whenever clients
 * speak TLS.
 */
#define PKI_AUTO_LEAVES 3
typedef struct pki_auto_leaf_kind {
        const char *sub; /* the folder under a member's (or the cluster's) tls folder */
        bool on;         /* the cluster has this surface */
        bool server;     /* a server certificate (DNS names and IPs); else gitcd's, CN root */
} pki_auto_leaf_kind;

/* Every folder a leaf may be in, whichever surfaces a cluster has on. */
extern const char *const pki_auto_leaf_dirs[PKI_AUTO_LEAVES];

/* The leaves of c, in that order; false when c issues none (not auto, or no TLS at all). */
bool pki_auto_leaves(const etcd_cluster *c, pki_auto_leaf_kind ret[PKI_AUTO_LEAVES]);
