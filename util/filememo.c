/*
 * util/filememo.h. Entries live in one array indexed by a strmap; the
 * strmap never removes, so a memo that grows past FILEMEMO_MAX starts over
 * empty rather than evicting one entry at a time.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/filememo.h"
#include "util/xalloc.h"

void file_id_of(const char *path, file_id *ret)
{
        struct stat st;
        if (stat(path, &st) < 0) {
                *ret = (file_id){.exists = false};
                return;
        }
        *ret = (file_id){.exists = true,
                         .dev = st.st_dev,
                         .ino = st.st_ino,
                         .size = st.st_size,
                         .mtime = st.st_mtim,
                         .ctime = st.st_ctim};
}

bool file_id_same(const file_id *a, const file_id *b)
{
        if (a->exists != b->exists)
                return false;
        if (!a->exists)
                return true;
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
               a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

void filememo_ids(const char *const *paths, size_t n, file_id *ids)
{
        assert(n <= FILEMEMO_MAX_FILES);
        for (size_t i = 0; i < n; i++)
                file_id_of(paths[i], &ids[i]);
}

bool filememo_get(filememo *m, const char *key, const char *const *paths, size_t n, void **ret)
{
        assert(n <= FILEMEMO_MAX_FILES);
        *ret = NULL;
        file_id now[FILEMEMO_MAX_FILES];
        filememo_ids(paths, n, now);
        pthread_mutex_lock(&m->lock);
        size_t i = 0;
        bool hit = strmap_get(&m->index, key, &i) && m->entries[i].n == n && m->entries[i].value;
        for (size_t j = 0; hit && j < n; j++)
                hit = file_id_same(&m->entries[i].ids[j], &now[j]);
        if (hit)
                *ret = m->ref(m->entries[i].value);
        pthread_mutex_unlock(&m->lock);
        return hit;
}

static void clear_locked(filememo *m)
{
        for (size_t i = 0; i < m->n; i++)
                if (m->entries[i].value)
                        m->unref(m->entries[i].value);
        free(m->entries);
        m->entries = NULL;
        m->n = m->alloc = 0;
        strmap_release(&m->index);
}

void filememo_put(filememo *m, const char *key, const file_id *ids, size_t n, void *value)
{
        assert(n <= FILEMEMO_MAX_FILES && value);
        void *own = m->ref(value);
        pthread_mutex_lock(&m->lock);
        size_t i = 0;
        if (!strmap_get(&m->index, key, &i)) {
                if (m->n >= FILEMEMO_MAX)
                        clear_locked(m);
                m->entries = xgrow(m->entries, &m->alloc, m->n + 1, sizeof(*m->entries));
                i = m->n++;
                m->entries[i] = (filememo_entry){0};
                (void)strmap_put(&m->index, key, i);
        }
        filememo_entry *e = &m->entries[i];
        void *old = e->value;
        e->n = n;
        memcpy(e->ids, ids, n * sizeof(*ids));
        e->value = own;
        pthread_mutex_unlock(&m->lock);
        if (old)
                m->unref(old);
}

void filememo_clear(filememo *m)
{
        pthread_mutex_lock(&m->lock);
        clear_locked(m);
        pthread_mutex_unlock(&m->lock);
}

void *filememo_strdup(void *value)
{
        return xstrdup(value);
}

void filememo_free(void *value)
{
        free(value);
}
