/*
 * Fuzz target for the reader of what the hosts target's peer RTT script
 * printed on a machine (targets/hosts-rtt.c): the input is that output.
 * Each read ends with 0 and consistent figures (the slowest median never
 * above the slowest connect, no more peers than the bound), or with
 * -EINVAL and a message and nothing filled in; never a crash or a leak.
 * A figure read is turned into timeouts too (reconciler/timeouts.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "reconciler/timeouts.h"
#include "targets/hosts-rtt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        rtt_result r = {0};
        char *why = NULL;
        int k = rtt_parse((const char *)data, size, &r, &why);
        if (k < 0) {
                if (k != -EINVAL || !why || r.error || r.n_samples)
                        abort();
                free(why);
                return 0;
        }
        if (why || r.slowest_us > r.max_us || r.n_peers + r.n_failed > RTT_MAX_PEERS ||
            r.n_samples > r.n_peers * RTT_MAX_SAMPLES_PER || (r.n_peers == 0 && r.n_samples))
                abort();
        int hb = 0, el = 0;
        timeouts_derive(r.slowest_us, &hb, &el);
        if (hb < TIMEOUTS_DEFAULT_HEARTBEAT_MS || el < 5 * hb || el > TIMEOUTS_MAX_ELECTION_MS)
                abort();
        rtt_result_release(&r);
        return 0;
}
