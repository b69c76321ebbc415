/*
 * The membership plan of a cluster as gitcd runs it: the one builder the
 * reconciler uses for every plan it hands to a target (a member to start,
 * the shared objects of all members, the addresses of a new member,
 * gitcd's own client identity).
 *
 * Each entry takes its name, ordinal and role from the member record, its
 * addresses and folders from the target (place_member), and the initial
 * cluster and state the member was first started with from the record,
 * so an unchanged member always renders the same command.
 */
#pragma once

#include <stddef.h>

#include "render/render.h"
#include "state/state.h"
#include "targets/target.h"

/*
 * Append one member to p: addresses and folders from the target, started
 * with initial_cluster (NULL: "") and initial_state (NULL: "existing").
 * 0, or the target's error (target_last_error()) with p unchanged.
 */
int membership_plan_append(membership_plan *p, target *t, const etcd_cluster *c, const char *name,
                           int ordinal, bool learner, const char *initial_cluster,
                           const char *initial_state);

/*
 * The plan of n recorded members, in the order given. 0, or the target's
 * error. Free with membership_plan_free(). A member whose record still
 * says http where the spec asks for TLS is planned half way
 * (membership_tls_switching()).
 */
/*
 * TLS switched on for a running cluster (reconciler/tlsswitch.c): the
 * spec asks for https on a surface, the member's record (rec_peer_url,
 * rec_client_url) still says http. Until gitcd moves the record, the
 * member keeps its plain peer listener and peer URL (its peers still dial
 * http) and serves clients on both schemes on the one port (etcd tells
 * them apart per connection); it gets every TLS file and flag the spec
 * asks for, so it can already dial the peers that switched. Clients stay
 * on both schemes until the member's peer side moved too, so that one
 * restart per member does both.
 *
 * TLS switched off (c->tls.off_client / off_peer, set by tlsswitch_prepare()
 * on the reconciler's copy of the spec, which keeps those surfaces on): the
 * member keeps every TLS file and flag, serves clients on both schemes
 * while the client surface goes off, and its peer URL and listener are
 * plain once its record's peer URL is http (it still dials the peers that
 * listen TLS with its peer certificate).
 *
 * Rewrites mp's URLs; true when it changed any (the caller computes the
 * config hash again).
 */
bool membership_tls_switching(member_plan *mp, const char *rec_peer_url, const char *rec_client_url,
                              const etcd_cluster *c);

int membership_plan_for_records(target *t, const etcd_cluster *c, state_member *const *recs,
                                size_t n, membership_plan **ret_plan);

/*
 * "It ran before and its data is gone": the one rule. recorded is the
 * member record's data identity (NULL: it never ran, nothing to lose); s
 * the target's status, whose data_identity is what it observes now. When
 * they differ, s becomes MEMBER_DATA_LOST with a detail saying why, and
 * true is returned; the member must be replaced, never started empty.
 */
bool membership_check_identity(const char *recorded, target_member_status *s);

/*
 * The plan of a static initial cluster: n members with ordinals
 * first_ordinal.., each started "new" with the same --initial-cluster
 * listing all n (and the cluster's one token). 0, or the target's error.
 * Free with membership_plan_free().
 */
int membership_plan_static(target *t, const etcd_cluster *c, int first_ordinal, int n,
                           membership_plan **ret_plan);
