/*
 * sd_notify for `gitcd run` under systemd (packaging/gitcd.service,
 * Type=notify). The messages go through libsystemd's sd_notify(), which
 * reads $NOTIFY_SOCKET itself and returns 0 when it is unset: nothing here
 * needs to know whether systemd is there.
 *
 * READY=1 means "the daemon has opened its state, holds its lock and has
 * finished one full pass over the source", whether or not that pass could
 * fetch: a source that is down must not fail the unit's start, the daemon
 * keeps retrying and says so in its log (and in /readyz).
 *
 * The watchdog interval is read once ($WATCHDOG_USEC, checked against
 * $WATCHDOG_PID by sd_watchdog_enabled()); pings go out every half
 * interval, the rate sd_watchdog_enabled(3) recommends. A loop turn that
 * blocks longer than WatchdogSec= gets the daemon restarted: that is the
 * point of the watchdog.
 *
 * Members the local target starts never see $NOTIFY_SOCKET
 * (util/process.c drops it from their environment), so an etcd's own
 * READY=1 cannot be mistaken for gitcd's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "cli/notify-systemd.h"
#include "util/log.h"
#include "util/timeutil.h"

static bool ready_sent;
static bool watchdog_checked;
static int64_t watchdog_half_ms; /* 0: no watchdog */
static int64_t last_ping_ms;

static void notify(const char *state)
{
        int r = sd_notify(0, state);
        if (r < 0)
                log_warn("systemd: cannot send %s to $NOTIFY_SOCKET: %s", state, strerror(-r));
        else if (r > 0)
                log_debug("systemd: sent %s", state);
}

void service_notify_ready(void)
{
        if (ready_sent)
                return;
        ready_sent = true;
        notify("READY=1");
}

void service_notify_watchdog(void)
{
        if (!watchdog_checked) {
                watchdog_checked = true;
                uint64_t usec = 0;
                if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
                        watchdog_half_ms = (int64_t)(usec / 2000);
                        if (watchdog_half_ms < 1)
                                watchdog_half_ms = 1;
                        log_debug("systemd: watchdog every %lld ms", (long long)watchdog_half_ms);
                }
        }
        if (watchdog_half_ms == 0)
                return;
        int64_t now = now_mono_ms();
        if (last_ping_ms != 0 && now - last_ping_ms < watchdog_half_ms)
                return;
        last_ping_ms = now;
        notify("WATCHDOG=1");
}

void service_notify_stopping(void)
{
        notify("STOPPING=1");
}
