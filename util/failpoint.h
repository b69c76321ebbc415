/*
 * Failpoints for crash-safety tests: FAILPOINT("add-learner.after-etcd")
 * kills the process with SIGKILL when the environment variable
 * GITCD_FAILPOINT names that point. Nothing else happens otherwise (one
 * getenv per call). Tests use them to kill gitcd at each step boundary and
 * check that a restart converges without stray members or lost writes.
 */
#pragma once

void failpoint(const char *name);

#define FAILPOINT(name) failpoint(name)
