/*
 * Whether anything still listens on a member's port (the local and hosts
 * targets; a member's health is etcd_member_health(), etcd/health.h).
 */
#pragma once

#include <stdbool.h>

/*
 * Whether a TCP connection to host:port is accepted within timeout_ms: a
 * stopped member's ports refuse (or, filtered, time out) once its process
 * is gone.
 */
bool target_port_accepts(const char *host, int port, int timeout_ms);
