/*
 * Fuzz target for the reader of etcd's snapshot files (snapstore/bbolt.c):
 * the input is the file. Each read ends with 0 and figures the file can
 * hold (a total size within the input, whole pages of it, no negative
 * count), or with -EBADMSG and a message and nothing filled in; never a
 * crash, a read outside the input or a leak.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapstore/bbolt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* an exact copy, so that the sanitizers see a read past the input */
        uint8_t *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        snapshot_status st = {.revision = -7};
        char *why = NULL;
        int r = bbolt_check(copy, size, &st, &why);
        free(copy);
        if (r < 0) {
                if (r != -EBADMSG || !why || !*why || st.revision != -7)
                        abort();
                free(why);
                return 0;
        }
        if (why || st.total_size <= 0 || (uint64_t)st.total_size > size || st.total_size % 512 ||
            st.total_keys < 0)
                abort();
        return 0;
}
