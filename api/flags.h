/*
 * Which etcd flags a spec may set (api/flags.c).
 */
#pragma once

#include <stdbool.h>

/*
 * Whether flag (a name without "--", any case, '_' or '-') is one a spec may
 * set only when the operator's policy allows it (policy.etcdFlags):
 * profiling and tracing, which open an endpoint or send data elsewhere.
 */
bool etcd_flag_needs_policy(const char *flag);
