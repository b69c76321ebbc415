/*
 * util/strmap.h. Linear probing in a table kept at most half full, so a
 * lookup touches a slot or two; the table doubles (and every key is placed
 * again) when it would be fuller. Nothing is ever removed, so no tombstones.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/strmap.h"
#include "util/xalloc.h"

static uint64_t hash(const char *s)
{
        uint64_t h = 0xcbf29ce484222325ULL;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
        /* FNV's low bits depend only on the keys' low bits: mix the high ones in (murmur3). */
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        return h;
}

/* The slot that holds key, or the empty slot where it goes. */
static strmap_slot *slot_for(strmap_slot *slots, size_t cap, const char *key)
{
        assert(cap > 0 && (cap & (cap - 1)) == 0);
        size_t i = (size_t)hash(key) & (cap - 1);
        while (slots[i].key && strcmp(slots[i].key, key) != 0)
                i = (i + 1) & (cap - 1);
        return &slots[i];
}

bool strmap_get(const strmap *m, const char *key, size_t *ret_value)
{
        if (m->n == 0)
                return false;
        const strmap_slot *s = slot_for(m->slots, m->cap, key);
        if (!s->key)
                return false;
        if (ret_value)
                *ret_value = s->value;
        return true;
}

static void grow(strmap *m)
{
        size_t cap = m->cap ? m->cap * 2 : 16;
        strmap_slot *slots = xcalloc(cap, sizeof(*slots));
        for (size_t i = 0; i < m->cap; i++)
                if (m->slots[i].key)
                        *slot_for(slots, cap, m->slots[i].key) = m->slots[i];
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
}

bool strmap_put(strmap *m, const char *key, size_t value)
{
        if ((m->n + 1) * 2 > m->cap)
                grow(m);
        strmap_slot *s = slot_for(m->slots, m->cap, key);
        if (s->key)
                return false;
        s->key = xstrdup(key);
        s->value = value;
        m->n++;
        return true;
}

void strmap_release(strmap *m)
{
        for (size_t i = 0; i < m->cap; i++)
                free(m->slots[i].key);
        free(m->slots);
        memset(m, 0, sizeof(*m));
}
