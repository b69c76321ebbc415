/*
 * Fuzz target for the reader of the etcd a machine already runs
 * (targets/hosts-adopt.c, hosts_running_parse_manifest): the input is the
 * text of a static Pod manifest as found on a machine (kubeadm's
 * etcd.yaml). Reading ends with 0 and a member with a non-empty name and
 * data directory, or with -EINVAL and at least one diagnostic and nothing
 * filled in; never a crash or a leak.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "targets/hosts-adopt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        hosts_running r = {0};
        diag_list d = DIAG_LIST_INIT;
        int k = hosts_running_parse_manifest("etcd.yaml", (const char *)data, size, &r, &d);
        if (k == 0) {
                if (!r.name || !*r.name || !r.data_dir || !*r.data_dir || !r.file)
                        abort();
        } else if (k != -EINVAL || d.n == 0 || r.name || r.file) {
                abort();
        }
        hosts_running_release(&r);
        diag_list_release(&d);
        return 0;
}
