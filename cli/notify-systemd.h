/*
 * Telling systemd how the daemon is doing (sd_notify(3)): READY=1 once the
 * first full pass is over, WATCHDOG=1 while the loop turns, STOPPING=1 when
 * a SIGTERM is being honoured. Every function is a no-op when the process
 * was not started by systemd with Type=notify ($NOTIFY_SOCKET unset), so
 * `gitcd run` behaves the same from a shell.
 */
#pragma once

/* Send READY=1, once per process; later calls do nothing. */
void service_notify_ready(void);
/*
 * Send WATCHDOG=1 when systemd asked for pings ($WATCHDOG_USEC) and half
 * of that interval has passed since the last one. Cheap: call it on every
 * turn of the daemon loop.
 */
void service_notify_watchdog(void);
/* Send STOPPING=1: the daemon is shutting down on request. */
void service_notify_stopping(void);
