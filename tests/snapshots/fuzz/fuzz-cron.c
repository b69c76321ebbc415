/*
 * The cron fuzz target: any bytes as a schedule. cron_parse() must agree
 * with cron_check() (the validator), and for a valid schedule the
 * evaluator must be consistent at a few fixed times: cron_next() is a
 * whole minute after t that matches, cron_prev() one at or before t that
 * matches, and a scheduled snapshot is due at a slot only once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/cron.h"
#include "api/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 256)
                return 0;
        char *expr = malloc(size + 1);
        if (!expr)
                return 0;
        memcpy(expr, data, size);
        expr[size] = '\0';
        char *why = NULL;
        int checked = cron_check(expr, &why);
        free(why);
        cron_expr e;
        int parsed = cron_parse(expr, &e);
        free(expr);
        if ((checked == 0) != (parsed == 0))
                abort();
        if (parsed < 0)
                return 0;
        static const int64_t times[] = {0, 1795000000000LL, 1795000059999LL, 1830297600000LL};
        for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
                int64_t t = times[i], next = 0, prev = 0, slot = 0;
                if (cron_next(&e, t, &next) == 0 &&
                    (next <= t || next % 60000 != 0 || !cron_matches(&e, next)))
                        abort();
                if (cron_prev(&e, t, &prev) == 0 &&
                    (prev > t || prev % 60000 != 0 || !cron_matches(&e, prev)))
                        abort();
                if (cron_due(&e, 0, t, &slot, NULL) == 1 && cron_due(&e, slot, t, &slot, NULL) != 0)
                        abort();
        }
        return 0;
}
