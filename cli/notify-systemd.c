/*
 * sd_notify for `gitcd run` under systemd (packaging/gitcd.service,
 * Type=notify). The messages go through libsystemd's sd_notify(), which
 * reads $NOTIFY_SOCKET itself and returns 0 when it is unset: nothing here
 * needs to know whether systemd is there. libsystemd (with libgcrypt and
 * libcap behind it) is loaded only when $NOTIFY_SOCKET is set, on the
 * first message (util/dload.h): every other start of gitcd, a command's
 * included, does not map it.
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
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "cli/notify-systemd.h"
#include "util/dload.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/timeutil.h"

static bool ready_sent;
static bool watchdog_checked;
static int64_t watchdog_half_ms; /* 0: no watchdog */
static int64_t last_ping_ms;

/* libsystemd's two functions, typed by sd-daemon.h; NULL without $NOTIFY_SOCKET */
static struct {
        __typeof__(sd_notify) *notify;
        __typeof__(sd_watchdog_enabled) *watchdog_enabled;
} sd;
static pthread_once_t sd_once = PTHREAD_ONCE_INIT;

static void sd_load(void)
{
        if (!getenv("NOTIFY_SOCKET"))
                return; /* sd_notify() would do nothing: not under systemd's Type=notify */
        static const char *const names[] = {"sd_notify", "sd_watchdog_enabled"};
        void *fns[ARRAY_SIZE(names)];
        _cleanup_free_ char *error = NULL;
        if (dload("libsystemd.so.0", names, ARRAY_SIZE(names), fns, &error) < 0) {
                log_error("systemd: $NOTIFY_SOCKET is set but %s: the service manager will "
                          "not hear from gitcd",
                          error);
                return;
        }
        sd.notify = (__typeof__(sd_notify) *)fns[0];
        sd.watchdog_enabled = (__typeof__(sd_watchdog_enabled) *)fns[1];
}

static void notify(const char *state)
{
        pthread_once(&sd_once, sd_load);
        int r = sd.notify ? sd.notify(0, state) : 0;
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
                pthread_once(&sd_once, sd_load);
                if (sd.watchdog_enabled && sd.watchdog_enabled(0, &usec) > 0 && usec > 0) {
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
