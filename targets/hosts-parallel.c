/*
 * The hosts target's work on several machines at once (ht_each, declared
 * in hosts-internal.h): a static bootstrap prepares and starts its members
 * each on a thread of its own, so that the machines' round trips overlap
 * instead of adding up.
 *
 * Design: a worker is the calling operation continued on another thread.
 * The calling thread lets go of the locked wrapper's shared lock
 * (target_forward_begin, which hands back the lock it held) and each
 * worker takes that same lock as its own held lock (target_forward_end),
 * so inside fn everything behaves as in a forwarded operation: the
 * target's tables (the probe cache, the message) are touched with the
 * lock held, and ssh_step lets it go around every SSH round trip, which
 * is where the workers run side by side. The calling thread keeps the
 * cluster's lock (it is a plain mutex of the wrapper, not a thread's),
 * so no other operation of the cluster starts meanwhile, and it takes the
 * shared lock back once every worker has ended. Outside a wrapper (one
 * thread, the tests of the inner target) a mutex of the call's own plays
 * the shared lock's part between the workers.
 *
 * A thread that cannot be made runs its share on the calling thread: the
 * result is the same, only slower.
 */

#include <pthread.h>
#include <stdlib.h>

#include "targets/locked.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

typedef struct each_job {
        hosts_target *ht;
        void (*fn)(hosts_target *ht, void *arg, size_t i);
        void *arg;
        size_t i;
        void *lock; /* the shared lock every worker holds around its work */
        pthread_t thread;
        bool started;
} each_job;

static void *each_run(void *p)
{
        each_job *j = p;
        target_forward_end(j->lock); /* takes it, as this thread's held shared lock */
        j->fn(j->ht, j->arg, j->i);
        (void)target_forward_begin(); /* lets it go */
        return NULL;
}

void ht_each(hosts_target *ht, size_t n, bool side_by_side,
             void (*fn)(hosts_target *ht, void *arg, size_t i), void *arg)
{
        if (!side_by_side || n < 2) {
                for (size_t i = 0; i < n; i++)
                        fn(ht, arg, i);
                return;
        }
        pthread_mutex_t own = PTHREAD_MUTEX_INITIALIZER;
        void *held = target_forward_begin();
        _cleanup_free_ each_job *jobs = xcalloc(n, sizeof(*jobs));
        for (size_t i = 0; i < n; i++) {
                jobs[i] =
                    (each_job){.ht = ht, .fn = fn, .arg = arg, .i = i, .lock = held ? held : &own};
                jobs[i].started = pthread_create(&jobs[i].thread, NULL, each_run, &jobs[i]) == 0;
        }
        for (size_t i = 0; i < n; i++) {
                if (jobs[i].started)
                        (void)pthread_join(jobs[i].thread, NULL);
                else
                        (void)each_run(&jobs[i]);
        }
        target_forward_end(held);
        pthread_mutex_destroy(&own);
}
