/*
 * The fleet of fake worlds (tests/fake/fleet.h).
 *
 * Design: a table of entries (one world and one fake target each) keyed
 * by cluster name, under one mutex: the target operations arrive under the
 * caller's target lock, but etcd calls come from any worker thread. A
 * world is touched only by the pass of its own cluster (one thread at a
 * time), so the worlds themselves need no lock. Every forwarded call first
 * sets the world's clock to the fleet's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/fake/fleet.h"
#include "targets/locked.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

typedef struct entry {
        char *name;
        fake_world *w;
        target *t;
        bool hang;
        int hung; /* calls blocked right now */
        bool target_hang;
        int target_hung; /* target operations blocked right now */
        struct entry *next;
} entry;

#define BUCKETS 16384

struct fake_fleet {
        pthread_mutex_t lock;
        pthread_cond_t released;
        entry *buckets[BUCKETS];
        size_t n;
};

typedef struct fleet_target {
        target base;
        fake_fleet *f;
} fleet_target;

/* One etcd connection: the fake's, and the entry it belongs to. */
typedef struct fleet_conn {
        entry *e;
        fake_fleet *f;
        etcd_conn *inner;
} fleet_conn;

static _Atomic int64_t offset_ms = 1000000;

int64_t fake_fleet_clock_ms(void)
{
        return now_mono_ms() + atomic_load(&offset_ms);
}

void fake_fleet_advance(int64_t ms)
{
        atomic_fetch_add(&offset_ms, ms);
}

static size_t bucket(const char *s)
{
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ULL;
        return h % BUCKETS;
}

static entry *find_locked(fake_fleet *f, const char *name)
{
        for (entry *e = f->buckets[bucket(name)]; e; e = e->next)
                if (streq(e->name, name))
                        return e;
        return NULL;
}

/* The entry of a cluster; made on first sight when make. */
static entry *lookup(fake_fleet *f, const char *name, bool make)
{
        pthread_mutex_lock(&f->lock);
        entry *e = find_locked(f, name);
        if (!e && make) {
                e = XNEW(entry);
                e->name = xstrdup(name);
                e->w = fake_world_new();
                (void)fake_target_new(e->w, &e->t);
                size_t b = bucket(name);
                e->next = f->buckets[b];
                f->buckets[b] = e;
                f->n++;
        }
        pthread_mutex_unlock(&f->lock);
        if (e) {
                int64_t now = fake_fleet_clock_ms();
                if (now > e->w->now_ms)
                        e->w->now_ms = now;
        }
        return e;
}

fake_world *fake_fleet_world(fake_fleet *f, const char *cluster)
{
        pthread_mutex_lock(&f->lock);
        entry *e = find_locked(f, cluster);
        pthread_mutex_unlock(&f->lock);
        return e ? e->w : NULL;
}

void fake_fleet_hang(fake_fleet *f, const char *cluster, bool hang)
{
        pthread_mutex_lock(&f->lock);
        entry *e = find_locked(f, cluster);
        if (e)
                e->hang = hang;
        pthread_cond_broadcast(&f->released);
        pthread_mutex_unlock(&f->lock);
}

bool fake_fleet_hung(fake_fleet *f, const char *cluster)
{
        pthread_mutex_lock(&f->lock);
        entry *e = find_locked(f, cluster);
        bool hung = e && e->hung > 0;
        pthread_mutex_unlock(&f->lock);
        return hung;
}

void fake_fleet_hang_target(fake_fleet *f, const char *cluster, bool hang)
{
        entry *e = lookup(f, cluster, true);
        pthread_mutex_lock(&f->lock);
        e->target_hang = hang;
        pthread_cond_broadcast(&f->released);
        pthread_mutex_unlock(&f->lock);
}

bool fake_fleet_target_hung(fake_fleet *f, const char *cluster)
{
        pthread_mutex_lock(&f->lock);
        entry *e = find_locked(f, cluster);
        bool hung = e && e->target_hung > 0;
        pthread_mutex_unlock(&f->lock);
        return hung;
}

/* A target operation of a hung cluster waits here, outside the shared lock, until released. */
static void target_gate(fake_fleet *f, entry *e)
{
        pthread_mutex_lock(&f->lock);
        bool hang = e->target_hang;
        pthread_mutex_unlock(&f->lock);
        if (!hang)
                return;
        target_blocking_begin();
        pthread_mutex_lock(&f->lock);
        e->target_hung++;
        while (e->target_hang)
                pthread_cond_wait(&f->released, &f->lock);
        e->target_hung--;
        pthread_mutex_unlock(&f->lock);
        target_blocking_end();
}

size_t fake_fleet_worlds(fake_fleet *f, size_t *ret_resident_bytes)
{
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t pages = (sizeof(fake_world) + page - 1) / page;
        unsigned char *vec = xcalloc(pages, 1);
        size_t resident = 0;
        pthread_mutex_lock(&f->lock);
        for (size_t b = 0; b < BUCKETS; b++)
                for (entry *e = f->buckets[b]; e; e = e->next)
                        if (mincore(e->w, sizeof(fake_world), vec) == 0)
                                for (size_t i = 0; i < pages; i++)
                                        resident += (vec[i] & 1) ? page : 0;
        size_t n = f->n;
        pthread_mutex_unlock(&f->lock);
        free(vec);
        if (ret_resident_bytes)
                *ret_resident_bytes = resident;
        return n;
}

/* ---- the target: forwarded to the cluster's fake target ------------------ */

static fake_fleet *F(target *t)
{
        return ((fleet_target *)t)->f;
}

/* Forward a call to the cluster's target; its message becomes the fleet's. */
#define FORWARD(t, name, call)                                                                     \
        ({                                                                                         \
                entry *e_ = lookup(F(t), (name), true);                                            \
                target_gate(F(t), e_);                                                             \
                int r_ = e_->t->ops->call;                                                         \
                if (r_ < 0)                                                                        \
                        (void)target_fail((t), r_, "%s", target_last_error(e_->t));                \
                r_;                                                                                \
        })

static int fl_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        return FORWARD(t, c->name, place_member(e_->t, c, mp));
}

static int fl_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        return FORWARD(t, c->name, ensure_shared(e_->t, c, p));
}

static int fl_ensure_member(target *t, const etcd_cluster *c, const membership_plan *p, size_t idx)
{
        return FORWARD(t, c->name, ensure_member(e_->t, c, p, idx));
}

static int fl_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        return FORWARD(t, c->name, stop_member(e_->t, c, member));
}

static int fl_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        return FORWARD(t, c->name, remove_member(e_->t, c, member, keep_data));
}

static int fl_member_status(target *t, const etcd_cluster *c, const char *member,
                            target_member_status *ret_status)
{
        return FORWARD(t, c->name, member_status(e_->t, c, member, ret_status));
}

static int fl_list_members(target *t, const char *namespace_, const char *cluster,
                           char ***ret_names, size_t *ret_n)
{
        return FORWARD(t, cluster, list_members(e_->t, namespace_, cluster, ret_names, ret_n));
}

static int fl_tick(target *t)
{
        (void)t;
        return 0;
}

static int fl_wait_event(target *t, int timeout_ms)
{
        (void)t;
        (void)timeout_ms;
        return 0;
}

static int fl_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                         char **ret_key)
{
        return FORWARD(t, c->name, client_tls(e_->t, c, ret_ca, ret_cert, ret_key));
}

static int fl_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                               target_cert **ret_certs, size_t *ret_n)
{
        return FORWARD(t, c->name, tls_certificates(e_->t, c, p, ret_certs, ret_n));
}

static int fl_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                        const char *member, int64_t now_ms)
{
        return FORWARD(t, c->name, renew_tls(e_->t, c, p, member, now_ms));
}

static void fl_free(target *t)
{
        free(t);
}

static const target_ops fleet_target_ops = {
    .name = "fake",
    .place_member = fl_place_member,
    .ensure_shared = fl_ensure_shared,
    .ensure_member = fl_ensure_member,
    .stop_member = fl_stop_member,
    .remove_member = fl_remove_member,
    .member_status = fl_member_status,
    .list_members = fl_list_members,
    .tick = fl_tick,
    .wait_event = fl_wait_event,
    .client_tls = fl_client_tls,
    .tls_certificates = fl_tls_certificates,
    .renew_tls = fl_renew_tls,
    .free = fl_free,
};

int fake_fleet_new(fake_fleet **ret, target **ret_target)
{
        fake_fleet *f = XNEW(fake_fleet);
        pthread_mutex_init(&f->lock, NULL);
        pthread_cond_init(&f->released, NULL);
        fleet_target *ft = XNEW(fleet_target);
        ft->base.ops = &fleet_target_ops;
        ft->f = f;
        *ret = f;
        *ret_target = &ft->base;
        return 0;
}

void fake_fleet_free(fake_fleet *f)
{
        if (!f)
                return;
        for (size_t b = 0; b < BUCKETS; b++)
                for (entry *e = f->buckets[b]; e;) {
                        entry *next = e->next;
                        target_free(e->t);
                        fake_world_free(e->w);
                        free(e->name);
                        free(e);
                        e = next;
                }
        pthread_mutex_destroy(&f->lock);
        pthread_cond_destroy(&f->released);
        free(f);
}

/* ---- etcd: forwarded to the world of the cluster the endpoints name ------- */

/* "http://<cluster>-<ordinal>.fake:2379" → "<cluster>"; NULL when it is not a fake URL. */
static char *cluster_of_endpoint(const char *endpoints)
{
        const char *s = strstr(endpoints, "://");
        s = s ? s + 3 : endpoints;
        const char *end = strstr(s, ".fake");
        if (!end)
                return NULL;
        const char *dash = end;
        while (dash > s && dash[-1] != '-')
                dash--;
        if (dash <= s + 1)
                return NULL;
        return xstrndup(s, (size_t)(dash - 1 - s));
}

/* A hung cluster's call blocks here until released; then the world's clock is set. */
static etcd_conn *enter(etcd_conn *conn)
{
        fleet_conn *fc = (fleet_conn *)conn;
        pthread_mutex_lock(&fc->f->lock);
        fc->e->hung++;
        while (fc->e->hang)
                pthread_cond_wait(&fc->f->released, &fc->f->lock);
        fc->e->hung--;
        pthread_mutex_unlock(&fc->f->lock);
        int64_t now = fake_fleet_clock_ms();
        if (now > fc->e->w->now_ms)
                fc->e->w->now_ms = now;
        return fc->inner;
}

static int fl_connect(void *userdata, const etcd_conn_opts *o, etcd_conn **ret)
{
        fake_fleet *f = userdata;
        _cleanup_free_ char *name =
            isempty(o->endpoints) ? NULL : cluster_of_endpoint(o->endpoints);
        entry *e = name ? lookup(f, name, false) : NULL;
        if (!e)
                return -EINVAL;
        etcd_conn *inner = NULL;
        int k = fake_etcd_ops.connect(e->w, o, &inner);
        if (k < 0)
                return k;
        fleet_conn *fc = XNEW(fleet_conn);
        *fc = (fleet_conn){.e = e, .f = f, .inner = inner};
        *ret = (etcd_conn *)fc;
        return 0;
}

static void fl_disconnect(etcd_conn *conn)
{
        if (!conn)
                return;
        fleet_conn *fc = (fleet_conn *)conn;
        fake_etcd_ops.disconnect(fc->inner);
        free(fc);
}

static int fl_member_list(etcd_conn *conn, etcd_members **ret_list)
{
        return fake_etcd_ops.member_list(enter(conn), ret_list);
}

static int fl_member_list_at(etcd_conn *conn, const char *endpoint, etcd_members **ret_list)
{
        return fake_etcd_ops.member_list_at(enter(conn), endpoint, ret_list);
}

static int fl_leader(etcd_conn *conn, uint64_t *ret_leader)
{
        return fake_etcd_ops.leader(enter(conn), ret_leader);
}

static int fl_add_learner(etcd_conn *conn, const char *peer_url, uint64_t *ret_id)
{
        return fake_etcd_ops.add_learner(enter(conn), peer_url, ret_id);
}

static int fl_update_peer(etcd_conn *conn, uint64_t id, const char *peer_url)
{
        return fake_etcd_ops.update_peer(enter(conn), id, peer_url);
}

static int fl_promote(etcd_conn *conn, uint64_t id)
{
        return fake_etcd_ops.promote(enter(conn), id);
}

static int fl_remove(etcd_conn *conn, uint64_t id)
{
        return fake_etcd_ops.remove(enter(conn), id);
}

static int fl_move_leader(etcd_conn *conn, uint64_t to_id)
{
        return fake_etcd_ops.move_leader(enter(conn), to_id);
}

static const char *fl_last_error(const etcd_conn *conn)
{
        return fake_etcd_ops.last_error(((const fleet_conn *)conn)->inner);
}

const etcd_membership_ops fake_fleet_etcd_ops = {
    .connect = fl_connect,
    .disconnect = fl_disconnect,
    .member_list = fl_member_list,
    .member_list_at = fl_member_list_at,
    .leader = fl_leader,
    .add_learner = fl_add_learner,
    .update_peer = fl_update_peer,
    .promote = fl_promote,
    .remove = fl_remove,
    .move_leader = fl_move_leader,
    .last_error = fl_last_error,
};
