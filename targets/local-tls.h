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
 * tls.auto.renewBefore of expiry; (re)issue what is missing or stale. Does
 * nothing unless the provider is auto and a TLS surface is on. Returns the
 * number of files (re)issued, or a negative errno with a message in
 * *ret_error (never containing key material).
 */
int local_tls_ensure(const char *cluster_dir, const etcd_cluster *c, const membership_plan *p,
                     char **ret_error);
