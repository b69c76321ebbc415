/*
 * A map from strings to indexes (open addressing, FNV-1a), for looking a
 * name up among many in constant time: the cluster of a plan item, the
 * applied record of a cluster, a file already read. The map keeps its own
 * copies of the keys.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct strmap_slot {
        char *key; /* NULL: empty */
        size_t value;
} strmap_slot;

typedef struct strmap {
        strmap_slot *slots;
        size_t cap; /* a power of two, more than twice n; 0 before the first put */
        size_t n;
} strmap;

#define STRMAP_INIT                                                                                \
        {                                                                                          \
                NULL, 0, 0                                                                         \
        }

/* The value of key in ret_value (when not NULL); false when key is not in the map. */
bool strmap_get(const strmap *m, const char *key, size_t *ret_value);
/* Add key → value unless key is there already (its value is kept); true when added. */
bool strmap_put(strmap *m, const char *key, size_t value);
void strmap_release(strmap *m);
