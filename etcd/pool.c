/*
 * The process's etcd connections (etcd/pool.h).
 *
 * The idle connections are a list under one mutex, most recently used
 * first, each with its key (the endpoint and the TLS identity, spelled out
 * in one string) and that key's 64-bit hash, so a lookup compares integers
 * until it finds its match. A connection in a call is in no list: the caller
 * holds it alone, so libcurl's handle is never touched by two threads.
 * Closing a connection (which may write on its socket) happens outside the
 * lock.
 *
 * Idle connections are closed by the calls of the process (etcd_pool_take
 * and etcd_pool_give sweep at most once a second), so a process that makes
 * no call at all keeps what it had until its next one.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "etcd/pool.h"
#include "util/macro.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/* How often, at most, a call looks for connections past their idle time. */
#define SWEEP_EVERY_MS 1000

struct etcd_pool_conn {
        grpc_conn *conn;
        char *key;
        uint64_t hash;
        bool tls;           /* an https:// endpoint: the TLS idle time */
        int64_t idle_since; /* monotonic ms; while in the list */
        etcd_pool_conn *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static etcd_pool_conn *idle_list; /* most recently used first */
static size_t n_open, n_idle;
static int64_t last_sweep;
static _Atomic int64_t idle_ms_plain = ETCD_POOL_IDLE_MS_PLAIN;
static _Atomic int64_t idle_ms_tls = ETCD_POOL_IDLE_MS_TLS;
static _Atomic uint64_t closed_idle;

static uint64_t fnv1a(const char *s)
{
        uint64_t h = 14695981039346656037ull;
        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 1099511628211ull;
        }
        return h;
}

/* A TLS file's part of the key: its path and what it is on disk now. */
static void key_file(strbuf *sb, const char *what, const char *path)
{
        sb_printf(sb, "\n%s=", what);
        if (!path)
                return;
        sb_append(sb, path);
        struct stat st;
        if (stat(path, &st) == 0)
                sb_printf(sb, "@%llu:%llu:%lld:%lld.%09ld", (unsigned long long)st.st_dev,
                          (unsigned long long)st.st_ino, (long long)st.st_size,
                          (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
}

static char *conn_key(const char *url, const grpc_tls_opts *tls)
{
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, url);
        key_file(&sb, "ca", tls ? tls->cacert : NULL);
        key_file(&sb, "cert", tls ? tls->cert : NULL);
        key_file(&sb, "key", tls ? tls->key : NULL);
        return sb_detach(&sb);
}

static void pool_conn_free(etcd_pool_conn *pc)
{
        grpc_conn_free(pc->conn);
        free(pc->key);
        free(pc);
}

/* Under the lock: unlink the connections idle since before now - idle time; a list to free. */
static etcd_pool_conn *expired_locked(int64_t now, bool all)
{
        int64_t limit_plain = now - atomic_load(&idle_ms_plain);
        int64_t limit_tls = now - atomic_load(&idle_ms_tls);
        etcd_pool_conn *out = NULL;
        etcd_pool_conn **p = &idle_list;
        while (*p) {
                etcd_pool_conn *pc = *p;
                if (all || pc->idle_since <= (pc->tls ? limit_tls : limit_plain)) {
                        *p = pc->next;
                        pc->next = out;
                        out = pc;
                        n_idle--;
                        n_open--;
                } else {
                        p = &pc->next;
                }
        }
        last_sweep = now;
        return out;
}

static size_t free_list(etcd_pool_conn *l, bool count)
{
        size_t n = 0;
        while (l) {
                etcd_pool_conn *next = l->next;
                pool_conn_free(l);
                l = next;
                n++;
        }
        if (count)
                atomic_fetch_add(&closed_idle, n);
        return n;
}

/* Under the lock: the expired connections when a sweep is due, else NULL. */
static etcd_pool_conn *maybe_sweep_locked(int64_t now)
{
        if (now - last_sweep < SWEEP_EVERY_MS)
                return NULL;
        return expired_locked(now, false);
}

int etcd_pool_take(const char *url, const grpc_tls_opts *tls, etcd_pool_conn **ret_conn)
{
        char *key = conn_key(url, tls);
        uint64_t hash = fnv1a(key);
        int64_t now = now_mono_ms();
        etcd_pool_conn *found = NULL;

        pthread_mutex_lock(&lock);
        etcd_pool_conn *expired = maybe_sweep_locked(now);
        for (etcd_pool_conn **p = &idle_list; *p; p = &(*p)->next) {
                etcd_pool_conn *pc = *p;
                if (pc->hash == hash && streq(pc->key, key)) {
                        *p = pc->next;
                        n_idle--;
                        found = pc;
                        break;
                }
        }
        if (!found)
                n_open++; /* counted now, so that stats never show fewer than exist */
        pthread_mutex_unlock(&lock);
        free_list(expired, true);

        if (found) {
                free(key);
                found->next = NULL;
                *ret_conn = found;
                return 0;
        }
        grpc_conn *conn = NULL;
        int r = grpc_conn_new(url, tls, &conn);
        if (r < 0) {
                free(key);
                pthread_mutex_lock(&lock);
                n_open--;
                pthread_mutex_unlock(&lock);
                return r;
        }
        etcd_pool_conn *pc = XNEW(etcd_pool_conn);
        *pc = (etcd_pool_conn){
            .conn = conn, .key = key, .hash = hash, .tls = strneq(url, "https://", 8)};
        *ret_conn = pc;
        return 0;
}

grpc_conn *etcd_pool_conn_grpc(etcd_pool_conn *pc)
{
        return pc->conn;
}

void etcd_pool_give(etcd_pool_conn *pc, bool keep)
{
        if (!pc)
                return;
        int64_t now = now_mono_ms();
        pthread_mutex_lock(&lock);
        if (keep) {
                pc->idle_since = now;
                pc->next = idle_list;
                idle_list = pc;
                n_idle++;
        } else {
                n_open--;
        }
        etcd_pool_conn *expired = maybe_sweep_locked(now);
        pthread_mutex_unlock(&lock);
        if (!keep)
                pool_conn_free(pc);
        free_list(expired, true);
}

size_t etcd_pool_sweep(void)
{
        pthread_mutex_lock(&lock);
        etcd_pool_conn *expired = expired_locked(now_mono_ms(), false);
        pthread_mutex_unlock(&lock);
        return free_list(expired, true);
}

size_t etcd_pool_close_idle(void)
{
        pthread_mutex_lock(&lock);
        etcd_pool_conn *all = expired_locked(now_mono_ms(), true);
        pthread_mutex_unlock(&lock);
        return free_list(all, false);
}

size_t etcd_pool_close_url(const char *url)
{
        size_t len = strlen(url);
        etcd_pool_conn *out = NULL;
        pthread_mutex_lock(&lock);
        etcd_pool_conn **p = &idle_list;
        while (*p) {
                etcd_pool_conn *pc = *p;
                /* a key is the URL, then a newline and the TLS identity */
                if (strneq(pc->key, url, len) && pc->key[len] == '\n') {
                        *p = pc->next;
                        pc->next = out;
                        out = pc;
                        n_idle--;
                        n_open--;
                } else {
                        p = &pc->next;
                }
        }
        pthread_mutex_unlock(&lock);
        return free_list(out, false);
}

int64_t etcd_pool_idle_ms(bool tls)
{
        return atomic_load(tls ? &idle_ms_tls : &idle_ms_plain);
}

void etcd_pool_set_idle_ms(int64_t ms)
{
        assert(ms >= 0);
        atomic_store(&idle_ms_plain, ms > 0 ? ms : ETCD_POOL_IDLE_MS_PLAIN);
        atomic_store(&idle_ms_tls, ms > 0 ? ms : ETCD_POOL_IDLE_MS_TLS);
}

void etcd_pool_stats_get(etcd_pool_stats *ret_stats)
{
        pthread_mutex_lock(&lock);
        *ret_stats = (etcd_pool_stats){
            .opened = grpc_connections_opened(),
            .closed_idle = atomic_load(&closed_idle),
            .open = n_open,
            .idle = n_idle,
        };
        pthread_mutex_unlock(&lock);
}
