/*
 * TLS material for the local target under `tls.provider: auto`: a CA per
 * cluster and each member's client/ peer/ operator/ certificate folders,
 * laid out as render/layout.h says (tls.crt, tls.key, ca.crt).
 */
#pragma once

#include "render/render.h"
#include "api/model.h"
#include "targets/target.h"

/*
 * Make sure the cluster CA exists under <cluster_dir>/pki/ and that the
 * planned members' certificates (only_member's alone, unless NULL) exist,
 * chain to it, are valid at now_ms and, when renew, not within
 * tls.auto.renewBefore of expiry; (re)issue what is missing or stale. Does
 * nothing unless the provider is auto and a TLS surface is on. Returns the
 * number of files (re)issued, or a negative errno with a message in
 * *ret_error (never containing key material).
 */
int local_tls_ensure(const char *cluster_dir, const etcd_cluster *c, const membership_plan *p,
                     const char *only_member, bool renew, int64_t now_ms, char **ret_error);

/*
 * The leaf certificates in the planned members' tls_dirs, and the cluster CA
 * of <cluster_dir>/pki (target_ops.tls_certificates).
 */
int local_tls_certificates(const char *cluster_dir, const etcd_cluster *c, const membership_plan *p,
                           target_cert **ret, size_t *ret_n);

/*
 * The TLS material version of the cluster's members (pki_auto_trust_version:
 * the CA they trust), opening or creating the CA under <cluster_dir>/pki/
 * the way local_tls_ensure() does. *ret is NULL without auto TLS.
 */
int local_tls_version(const char *cluster_dir, const etcd_cluster *c, char **ret, char **ret_error);
