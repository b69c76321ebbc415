/*
 * Clocks, duration parsing and time formatting; see util/timeutil.h.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/macro.h"
#include "util/timeutil.h"

int64_t now_mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void msleep(int64_t ms)
{
        if (ms <= 0)
                return;
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

int64_t now_wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int parse_duration_ms(const char *s, int64_t *ret_ms)
{
        if (isempty(s))
                return -EINVAL;
        int64_t total = 0;
        const char *p = s;
        while (*p) {
                if (!isdigit((unsigned char)*p))
                        return -EINVAL;
                int64_t v = 0;
                while (isdigit((unsigned char)*p)) {
                        if (v > INT64_MAX / 10 - 10)
                                return -ERANGE;
                        v = v * 10 + (*p++ - '0');
                }
                int64_t unit;
                if (strneq(p, "ms", 2)) {
                        unit = 1;
                        p += 2;
                } else if (*p == 's') {
                        unit = 1000;
                        p++;
                } else if (*p == 'm') {
                        unit = 60 * 1000;
                        p++;
                } else if (*p == 'h') {
                        unit = 3600 * 1000;
                        p++;
                } else if (*p == 'd') {
                        unit = 86400 * 1000;
                        p++;
                } else if (*p == '\0' && p != s && total == 0) {
                        unit = 1000; /* bare seconds */
                } else
                        return -EINVAL;
                if (v > INT64_MAX / unit)
                        return -ERANGE;
                total += v * unit;
        }
        *ret_ms = total;
        return 0;
}

void format_rfc3339(int64_t wall_ms, char *buf, size_t size)
{
        time_t t = (time_t)(wall_ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void format_age(int64_t ms, char *buf, size_t size)
{
        int64_t s = ms / 1000;
        if (s < 0)
                s = 0;
        if (s < 120)
                snprintf(buf, size, "%llds", (long long)s);
        else if (s < 7200)
                snprintf(buf, size, "%lldm", (long long)(s / 60));
        else if (s < 2 * 86400)
                snprintf(buf, size, "%lldh", (long long)(s / 3600));
        else
                snprintf(buf, size, "%lldd", (long long)(s / 86400));
}
