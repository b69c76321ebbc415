/*
 * Cron schedules (`spec.snapshots.schedule`, `spec.defrag.schedule`): the
 * parsed form and the evaluator. The syntax has one owner, api/syntax.c:
 * cron_check() says why an expression is invalid, cron_parse() turns a
 * valid one into sets of allowed values, using the same field table.
 *
 * Semantics are those of Vixie cron: a time matches when its minute, hour
 * and month are allowed and, when both day fields are restricted, either
 * the day of month or the day of week is allowed (when one of them is "*",
 * the other decides). Day of week 7 is Sunday, like 0. Times are UTC:
 * gitcd has no time zone setting.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct cron_expr {
        uint64_t minutes; /* bit m: minute m allowed (0-59) */
        uint32_t hours;   /* bit h (0-23) */
        uint32_t mdays;   /* bit d (1-31) */
        uint16_t months;  /* bit m (1-12) */
        uint8_t wdays;    /* bit d (0-6, Sunday 0) */
        bool mday_star;   /* the day-of-month field was "*" (or "*" with a step) */
        bool wday_star;
} cron_expr;

/* Parse a 5-field expression. 0, or -EINVAL (cron_check() says why). */
int cron_parse(const char *expr, cron_expr *ret);
/* Whether the minute starting at t_ms (UTC, milliseconds since the epoch) matches. */
bool cron_matches(const cron_expr *e, int64_t t_ms);
/*
 * The first matching minute strictly after t_ms, in milliseconds since the
 * epoch (a whole minute). -ERANGE when none within five years (e.g. 30 feb).
 */
int cron_next(const cron_expr *e, int64_t t_ms, int64_t *ret_ms);
/* The last matching minute at or before t_ms. -ERANGE when none within five years. */
int cron_prev(const cron_expr *e, int64_t t_ms, int64_t *ret_ms);

/*
 * Whether a schedule is due at now_ms (what spec.snapshots.schedule,
 * spec.snapshots.verify and spec.defrag.schedule share). The due slot is
 * the latest cron time at or before now; it is due when no attempt was
 * made for it or a later one (last_slot_ms). However many slots passed
 * while gitcd was down, only the latest is due: a missed schedule is
 * caught up once. last_slot_ms 0 (no attempt yet): due at once. Returns 1
 * with *ret_slot_ms set when due, else 0; *ret_next_ms (when not NULL) is
 * the next time to look again. -ERANGE for a schedule that never matches.
 */
int cron_due(const cron_expr *e, int64_t last_slot_ms, int64_t now_ms, int64_t *ret_slot_ms,
             int64_t *ret_next_ms);

/* The interval of the schedule around now: from the latest slot to the one after it. */
int cron_interval(const cron_expr *e, int64_t now_ms, int64_t *ret_ms);
