/*
 * The process's marks of etcd endpoints not serving (etcd/marks.h).
 *
 * Entries are allocated one by one (their address is what clients hold) in
 * a list under one mutex, which only etcd_marks_ref/unref and the lookup by
 * URL take: a process talks to a few clusters of a few members. What every
 * call reads and writes (the marks, the holds, the calls in flight) are
 * atomics in the entry, so the common path takes no lock.
 */
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/marks.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

struct etcd_mark {
        char *url;
        unsigned refs; /* under the lock */
        etcd_mark *next;
        _Atomic int64_t down_until; /* health: 0 none */
        atomic_uint holds;          /* Defragment calls of this process in flight */
        atomic_uint in_flight;      /* calls of this process in flight */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static etcd_mark *marks;

/* Under the lock. */
static etcd_mark *find(const char *url)
{
        for (etcd_mark *m = marks; m; m = m->next)
                if (strcmp(m->url, url) == 0)
                        return m;
        return NULL;
}

etcd_mark *etcd_marks_ref(const char *url)
{
        pthread_mutex_lock(&lock);
        etcd_mark *m = find(url);
        if (!m) {
                m = XNEW(etcd_mark);
                m->url = xstrdup(url);
                m->next = marks;
                marks = m;
        }
        m->refs++;
        pthread_mutex_unlock(&lock);
        return m;
}

void etcd_marks_unref(etcd_mark *m)
{
        if (!m)
                return;
        pthread_mutex_lock(&lock);
        assert(m->refs > 0);
        if (--m->refs == 0) {
                etcd_mark **p = &marks;
                while (*p != m)
                        p = &(*p)->next;
                *p = m->next;
                free(m->url);
                free(m);
        }
        pthread_mutex_unlock(&lock);
}

int64_t etcd_mark_until(const etcd_mark *m)
{
        return atomic_load(&m->holds) > 0 ? INT64_MAX : atomic_load(&m->down_until);
}

int64_t etcd_marks_until(const char *url)
{
        pthread_mutex_lock(&lock);
        const etcd_mark *m = find(url);
        int64_t until = m ? etcd_mark_until(m) : 0;
        pthread_mutex_unlock(&lock);
        return until;
}

void etcd_mark_down(etcd_mark *m, int64_t until_ms)
{
        assert(until_ms > 0);
        int64_t old = atomic_load(&m->down_until);
        while (until_ms > old && !atomic_compare_exchange_weak(&m->down_until, &old, until_ms))
                ;
}

void etcd_mark_up(etcd_mark *m)
{
        atomic_store(&m->down_until, 0);
}

void etcd_mark_hold(etcd_mark *m)
{
        atomic_fetch_add(&m->holds, 1);
}

void etcd_mark_release(etcd_mark *m, bool served)
{
        assert(atomic_load(&m->holds) > 0);
        /* the health mark first: nobody sees the member up in between */
        if (served)
                atomic_store(&m->down_until, 0);
        else
                etcd_mark_down(m, 1); /* a time long past, which is not "never marked" */
        atomic_fetch_sub(&m->holds, 1);
}

void etcd_mark_enter(etcd_mark *m)
{
        atomic_fetch_add(&m->in_flight, 1);
}

bool etcd_mark_enter_unless_held(etcd_mark *m)
{
        atomic_fetch_add(&m->in_flight, 1);
        if (atomic_load(&m->holds) == 0)
                return true;
        atomic_fetch_sub(&m->in_flight, 1);
        return false;
}

void etcd_mark_leave(etcd_mark *m)
{
        assert(atomic_load(&m->in_flight) > 0);
        atomic_fetch_sub(&m->in_flight, 1);
}

bool etcd_mark_drain(const etcd_mark *m, int64_t deadline)
{
        while (atomic_load(&m->in_flight) > 0) {
                if (now_mono_ms() >= deadline)
                        return false;
                msleep(1);
        }
        return true;
}
