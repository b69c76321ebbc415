/*
 * The etcd flags a spec may add to a member's command line
 * (spec.options.extraFlags, and etcd-io's etcdOptions that map onto it),
 * by allow-list: etcd's own flag table for each minor gitcd runs (3.4, 3.5,
 * 3.6), with the type of each flag's value, less the flags gitcd sets
 * itself and the flags that weaken a cluster's safety (api/flags.c has the
 * table and says where it came from).
 *
 * Names are compared as etcd would spell them: lower case, '_' turned into
 * '-' (etcd_flag_normalize), so a spelling etcd does not accept cannot slip
 * past a rule either.
 */
#pragma once

#include <stdbool.h>

#include "api/model.h"

/* flag as etcd spells it: lower case, '_' -> '-'. Newly allocated. */
char *etcd_flag_normalize(const char *flag);

/*
 * Whether a spec may run etcd version v with --flag=value (value "" renders
 * "--flag" alone, which only a boolean flag takes). flag is a name without
 * "--", normalized or not; v NULL (or 0.0.0: the version did not parse)
 * checks the name against every minor. 0; or -EPERM when gitcd sets the
 * flag itself or refuses it, -ENOENT when the version has no such flag,
 * -EINVAL when the value is not of the flag's type; then *ret_why is a
 * newly allocated sentence that names the flag ("--x is not an etcd 3.4
 * flag"). Flags that need the operator's policy (etcd_flag_needs_policy)
 * pass here when their value is well typed: the policy decides on them.
 */
int etcd_flag_check(const char *flag, const char *value, const semver *v, char **ret_why);

/*
 * Flags a spec may set only when the operator's policy allows them: they
 * open a member to more than its clients (enable-pprof serves profiles on
 * the client URL; the distributed tracing flags send every request's
 * traces to an address the spec picks). Validation accepts them; the
 * operator's policy refuses them unless its configuration lists them.
 */
bool etcd_flag_needs_policy(const char *flag);

/*
 * Whether etcd version v has flag (a name without "--"), by the same table
 * etcd_flag_check() reads: its minor has the flag and v's patch is at or
 * after the first patch of that minor that has it. False for a version
 * outside the table's minors or that did not parse (0.0.0). render/ uses it
 * to decide the flags gitcd adds on the versions that have them.
 */
bool etcd_flag_in_version(const char *flag, const semver *v);
