/*
 * TLS material for the local target under `tls.provider: auto`: a CA per
 * cluster and each member's client/ peer/ operator/ certificate folders,
 * laid out as render/layout.h says (tls.crt, tls.key, ca.crt).
 */
#pragma once

#include "render/render.h"
#include "api/model.h"

/*
 * Make sure the cluster CA exists under <cluster_dir>/pki/ and that every
 * planned member's certificates exist, chain to it and are not within
 * renew_before_days of expiry; (re)issue what is missing or stale. Does
 * nothing unless the provider is auto and a TLS surface is on. Returns the
 * number of files (re)issued, or a negative errno with a message in
 * *ret_error (never containing key material).
 */
int local_tls_ensure(const char *cluster_dir, const etcd_cluster *c, const membership_plan *p,
                     char **ret_error);

/*
 * The TLS material version of the cluster's members (pki_auto_trust_version:
 * the CA they trust), opening or creating the CA under <cluster_dir>/pki/
 * the way local_tls_ensure() does. *ret is NULL without auto TLS.
 */
int local_tls_version(const char *cluster_dir, const etcd_cluster *c, char **ret, char **ret_error);
