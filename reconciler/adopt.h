/*
 * Adoption of a cluster that already runs where the target would place its
 * members (a target with adopt operations, target_adopt_ops: the hosts
 * target and the machines of spec.hosts; docs/hosts.md, "Adopting a
 * running cluster"). The reconciler asks before it would bootstrap a
 * cluster with no records: when etcd runs there, gitcd takes that cluster
 * over (member IDs and data kept) or refuses, and never creates a new
 * cluster over it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "api/model.h"
#include "state/state.h"
#include "targets/target.h"

/*
 * Adopt cluster ("ns/name") if etcd runs where t would place its members.
 * t is the target the cluster runs on; one without adopt operations never
 * adopts (0). 0: nothing runs there (bootstrap as usual); 1: adopted
 * (records, cluster ID, markers, members on gitcd's files; audited as
 * cluster.adopt and member.adopt); -EPERM: refused, nothing changed, why
 * in *msg; another -errno: a machine or etcd could not be read (never
 * bootstrap then), why in *msg. *msg (the caller's, freed when replaced)
 * also says what was adopted.
 */
int adopt_try(state_db *db, target *t, const char *cluster, const etcd_cluster *c,
              const char *commit, const char *author, int64_t (*wall_ms)(void), char **msg);
