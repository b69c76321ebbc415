/*
 * Adoption of a cluster that already runs on the machines of spec.hosts
 * (the hosts target; docs/hosts.md, "Adopting a running cluster"). The
 * reconciler asks before it would bootstrap a cluster with no records:
 * when the machines run etcd, gitcd takes that cluster over (member IDs and
 * data kept) or refuses, and never creates a new cluster over it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "api/model.h"
#include "state/state.h"
#include "targets/target.h"

/*
 * Adopt cluster ("ns/name") if its machines run etcd. t is a hosts target
 * of the adopter's own (never shared with other threads while this runs;
 * adoptions are serialized). 0: nothing runs there (bootstrap as usual);
 * 1: adopted (records, cluster ID, markers, members on gitcd's files;
 * audited as cluster.adopt and member.adopt); -EPERM: refused, nothing
 * changed, why in msg; another -errno: a machine or etcd could not be read
 * (never bootstrap then), why in msg.
 */
int adopt_try(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
              const char *commit, const char *author, int64_t (*wall_ms)(void), char *msg,
              size_t msgsize);
