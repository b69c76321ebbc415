/*
 * The TLS half of a takeover's survey (spec.adopt with spec.tls, coreos),
 * the pure part: from what the old cluster's Secrets and Pods say and what
 * the spec asks for, whether gitcd can join the old members keeping their
 * CA, and which CA (with its key, for tls.provider auto) that is. No I/O:
 * the Secrets are read and the CA imported in
 * targets/kubernetes-takeover-tls.c.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "api/model.h"
#include "pki/pki.h"

/* One PEM text read from a Secret's key, and where ("Secret default/old-peer-tls key peer-ca.crt"). */
typedef struct takeover_pem {
        const char *what;
        const char *pem; /* NULL: the key (or the Secret) is missing */
} takeover_pem;

#define TAKEOVER_TLS_OLD_CAS 3

typedef struct takeover_tls_facts {
        /* the old members serve TLS on the client port / between peers (from their Pods' flags) */
        bool client_tls;
        bool peer_tls;
        /*
         * The CAs the old cluster trusts: the server Secret's server-ca.crt
         * (the CA of the server certificates and of the client certificates
         * members accept), the peer Secret's peer-ca.crt and the operator
         * Secret's etcd-client-ca.crt; what is NULL for one the cluster does
         * not have (no peer TLS: no peer Secret).
         */
        takeover_pem old_ca[TAKEOVER_TLS_OLD_CAS];
        /* tls.provider auto: spec.adopt.ca's Secret, tls.crt and tls.key */
        takeover_pem given_cert;
        takeover_pem given_key;
        /* tls.provider secrets: the ca.crt of each Secret the spec names (what NULL: unused) */
        takeover_pem spec_ca[3];
} takeover_tls_facts;

/*
 * Judge f against c: 0 when c has no TLS and neither has the old cluster;
 * 1 when gitcd can take it over keeping its CA, with that CA in *ret_ca
 * and, for tls.provider auto, its key in *ret_key (NULL for secrets);
 * -EPERM with why in *ret_why (for a person: what differs and what to do)
 * when
 *   - the surfaces differ (client or peer TLS on one side only: switching
 *     TLS mid-move is not supported);
 *   - an old CA is missing, is no certificate or no CA, or the old CAs are
 *     not one CA (which one differs is said);
 *   - auto: the given certificate is not that CA, or the key is not its key;
 *   - secrets: a Secret the spec names carries another CA.
 * Key material never reaches *ret_why.
 */
int takeover_tls_judge(const takeover_tls_facts *f, const etcd_cluster *c, pki_cert **ret_ca,
                       pki_key **ret_key, char **ret_why);
