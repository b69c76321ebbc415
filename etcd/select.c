/*
 * Endpoint order for cluster-wide calls (see select.h). The rotation from
 * the preferred endpoint is kept within each group, so the existing
 * fail-over rule ("after a fail-over the next call starts on the next
 * endpoint") holds unchanged among the endpoints that are up.
 */
#include "etcd/select.h"

size_t etcd_select_order(size_t n, size_t start, const int64_t *down_until, int64_t now,
                         size_t *order)
{
        size_t k = 0;
        for (size_t j = 0; j < n; j++) {
                size_t i = (start + j) % n;
                if (down_until[i] <= now)
                        order[k++] = i;
        }
        size_t up = k;
        for (size_t j = 0; j < n; j++) {
                size_t i = (start + j) % n;
                if (down_until[i] > now)
                        order[k++] = i;
        }
        return up;
}

bool etcd_select_probe_first(int64_t down_until, int64_t now)
{
        return down_until != 0 && down_until <= now;
}

int64_t etcd_select_attempt_deadline(etcd_call_kind kind, bool first, bool others_left, int64_t now,
                                     int64_t deadline, int first_try_ms)
{
        if (kind == ETCD_CALL_WRITE || !others_left)
                return 0;
        int64_t half = (deadline - now) / 2;
        if (half < 1)
                half = 1;
        if (kind == ETCD_CALL_SMALL_READ && first && first_try_ms > 0 && first_try_ms < half)
                return now + first_try_ms;
        return now + half;
}
