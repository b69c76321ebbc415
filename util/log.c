/*
 * stderr logger: "gitcd: <level>: message". Timestamps are added when
 * GITCD_LOG_TIME=1 (the daemon's documented configuration sets it).
 *
 * Every message is one line: the formatted text goes through str_escape()
 * (util/escape.h), so a Git path, an author name or a message from etcd or
 * Kubernetes inside it can neither break the line nor drive the terminal.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "util/escape.h"
#include "util/log.h"
#include "util/strbuf.h"

static int current_level = -1;

static const char *const level_names[] = {"debug", "info", "warn", "error", "quiet"};

int log_level_from_string(const char *s, enum log_level *ret_level)
{
        for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
                if (s && streq(s, level_names[i])) {
                        *ret_level = (enum log_level)i;
                        return 0;
                }
        return -EINVAL;
}

static bool explicit_level;

void log_set_level(enum log_level level)
{
        current_level = (int)level;
        explicit_level = true;
}

bool log_level_is_explicit(void)
{
        return explicit_level || getenv("GITCD_LOG_LEVEL") != NULL;
}

enum log_level log_get_level(void)
{
        if (current_level < 0) {
                enum log_level l = LOG_INFO;
                (void)log_level_from_string(getenv("GITCD_LOG_LEVEL"), &l);
                current_level = (int)l;
        }
        return (enum log_level)current_level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
        if (level < log_get_level())
                return;
        char stamp[32] = "";
        const char *t = getenv("GITCD_LOG_TIME");
        if (t && streq(t, "1")) {
                struct timespec ts;
                struct tm tm;
                clock_gettime(CLOCK_REALTIME, &ts);
                gmtime_r(&ts.tv_sec, &tm);
                strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ ", &tm);
        }
        va_list ap;
        va_start(ap, fmt);
        strbuf msg = STRBUF_INIT;
        sb_vprintf(&msg, fmt, ap);
        va_end(ap);
        strbuf line = STRBUF_INIT;
        sb_printf(&line, "%sgitcd: %s: ", stamp, level_names[level]);
        sb_append_escaped(&line, msg.buf ? msg.buf : "", msg.len);
        sb_appendc(&line, '\n');
        fputs(sb_str(&line), stderr);
        sb_release(&line);
        sb_release(&msg);
}
