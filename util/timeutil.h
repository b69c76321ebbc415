/*
 * Clocks and durations. Code that decides on time takes the clock as a
 * parameter (see reconciler/); these are the real clocks it is fed.
 */
#pragma once

#include <stdint.h>

/* Monotonic milliseconds, for deadlines and measurements. */
int64_t now_mono_ms(void);
/* Wall-clock milliseconds since the epoch, for records people read. */
int64_t now_wall_ms(void);
/* Sleep for ms milliseconds (through signal interruptions); nothing for ms <= 0. */
void msleep(int64_t ms);
/*
 * Parse a duration such as "500ms", "30s", "2m", "1h30m", "7d", or a bare
 * number of seconds. -EINVAL for anything else.
 */
int parse_duration_ms(const char *s, int64_t *ret_ms);
/* Format epoch milliseconds as RFC 3339 UTC ("2026-11-22T12:00:00Z") into buf (>= 32 bytes). */
void format_rfc3339(int64_t wall_ms, char *buf, size_t size);
/* A short human age: "5s", "3m", "2h", "4d". */
void format_age(int64_t ms, char *buf, size_t size);
