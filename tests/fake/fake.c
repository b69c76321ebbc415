/*
 * The fake world (tests/fake/fake.h): an in-memory target and the etcd
 * membership its member processes form. One cluster per world.
 *
 * Decisions: every fact lives in the shared fake_world (fixed arrays, so
 * it can sit in a MAP_SHARED mapping and survive a killed child); the
 * target and the etcd side only read and write it. A process is "up"
 * (connected, counted for quorum) while it runs and its data is intact.
 * Health and the leader are recomputed from the world on every call, so
 * there is no hidden state to go stale.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "pki/pki.h"
#include "render/render.h"
#include "tests/fake/fake.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static fake_world *current;

fake_world *fake_world_new(void)
{
        void *p = mmap(NULL, sizeof(fake_world), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED)
                abort();
        fake_world *w = p;
        memset(w, 0, sizeof(*w));
        w->now_ms = 1000000;
        w->next_id = 0x8e9e05c52164694dULL;
        w->learner_sync_ms = 300;
        return w;
}

void fake_world_free(fake_world *w)
{
        if (!w)
                return;
        if (current == w)
                current = NULL;
        munmap(w, sizeof(*w));
}

void fake_world_make_current(fake_world *w)
{
        current = w;
}

int64_t fake_clock_ms(void)
{
        return current ? current->now_ms : 0;
}

static void copy(char *dst, size_t size, const char *src)
{
        size_t n = src ? strlen(src) : 0;
        if (n >= size)
                abort(); /* the fake's limits are the test's: never truncate */
        memcpy(dst, src ? src : "", n + 1);
}

/* ---- queries ------------------------------------------------------------- */

fake_proc *fake_proc_find(fake_world *w, const char *name)
{
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (w->procs[i].present && streq(w->procs[i].name, name))
                        return &w->procs[i];
        return NULL;
}

static fake_etcd_member *member_by_id(fake_world *w, uint64_t id)
{
        for (size_t i = 0; id && i < FAKE_MAX_MEMBERS; i++)
                if (w->members[i].used && w->members[i].id == id)
                        return &w->members[i];
        return NULL;
}

static fake_etcd_member *member_by_peer(fake_world *w, const char *peer)
{
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (w->members[i].used && streq(w->members[i].peer_url, peer))
                        return &w->members[i];
        return NULL;
}

const fake_etcd_member *fake_etcd_find(const fake_world *w, const char *name)
{
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (w->members[i].used && streq(w->members[i].name, name))
                        return &w->members[i];
        return NULL;
}

static bool cert_expired(const fake_world *w, const fake_proc *p)
{
        return w->cert_life_ms > 0 && p->cert_not_after_ms <= w->now_ms;
}

/* The running, intact process that is etcd member id (and that others can talk to). */
static fake_proc *proc_up(fake_world *w, uint64_t id)
{
        for (size_t i = 0; id && i < FAKE_MAX_MEMBERS; i++) {
                fake_proc *p = &w->procs[i];
                if (p->present && p->running && !p->lost && p->etcd_id == id && !cert_expired(w, p))
                        return p;
        }
        return NULL;
}

size_t fake_etcd_count(const fake_world *w, size_t *ret_learners)
{
        size_t n = 0, l = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (w->members[i].used) {
                        n++;
                        l += w->members[i].learner;
                }
        if (ret_learners)
                *ret_learners = l;
        return n;
}

size_t fake_procs_present(const fake_world *w)
{
        size_t n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                n += w->procs[i].present;
        return n;
}

size_t fake_procs_running(const fake_world *w)
{
        size_t n = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                n += w->procs[i].present && w->procs[i].running;
        return n;
}

/* Voters, voters up, and voters up for the whole health interval. */
static void voters(fake_world *w, int *ret_voters, int *ret_up, int *ret_healthy)
{
        int n = 0, up = 0, healthy = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                const fake_etcd_member *m = &w->members[i];
                if (!m->used || m->learner)
                        continue;
                n++;
                fake_proc *p = proc_up(w, m->id);
                if (p) {
                        up++;
                        if (p->running_since_ms <= w->now_ms - FAKE_HEALTH_MS)
                                healthy++;
                }
        }
        *ret_voters = n;
        *ret_up = up;
        if (ret_healthy)
                *ret_healthy = healthy;
}

/* Raft in one line: a quorum of voters up elects the lowest ID, and keeps a leader that is up. */
static void elect(fake_world *w)
{
        int n, up;
        voters(w, &n, &up, NULL);
        if (n == 0 || up < n / 2 + 1) {
                w->leader = 0;
                return;
        }
        const fake_etcd_member *l = member_by_id(w, w->leader);
        if (l && !l->learner && proc_up(w, l->id))
                return;
        uint64_t best = 0;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                const fake_etcd_member *m = &w->members[i];
                if (m->used && !m->learner && proc_up(w, m->id) && (!best || m->id < best))
                        best = m->id;
        }
        w->leader = best;
}

/* ---- processes ----------------------------------------------------------- */

static void proc_exit(fake_proc *p)
{
        p->running = false;
        p->crashed = true;
}

/* Form the cluster with every "name=peer" of an initial cluster, all unstarted. */
static void form(fake_world *w, const char *initial_cluster)
{
        copy(w->formed_with, sizeof(w->formed_with), initial_cluster);
        w->cluster_id = 0xcdf818194e3a8c32ULL;
        for (const char *e = initial_cluster; e && *e;) {
                const char *comma = strchr(e, ',');
                size_t len = comma ? (size_t)(comma - e) : strlen(e);
                const char *eq = memchr(e, '=', len);
                fake_etcd_member *m = NULL;
                for (size_t i = 0; eq && i < FAKE_MAX_MEMBERS && !m; i++)
                        if (!w->members[i].used)
                                m = &w->members[i];
                if (m) {
                        memset(m, 0, sizeof(*m));
                        m->used = true;
                        m->id = w->next_id;
                        w->next_id += 0x1111;
                        size_t ulen = len - (size_t)(eq + 1 - e);
                        size_t nlen = (size_t)(eq - e);
                        if (ulen >= sizeof(m->peer_url) || nlen >= sizeof(m->name))
                                abort();
                        /* etcd names the members of a static initial cluster from the start. */
                        memcpy(m->name, e, nlen);
                        m->name[nlen] = '\0';
                        memcpy(m->peer_url, eq + 1, ulen);
                        m->peer_url[ulen] = '\0';
                }
                e = comma ? comma + 1 : NULL;
        }
}

/* The CA folders following the rotation phase (world ca_model; pki/auto.c's rotate_to). */
static void ca_follow(fake_world *w, int phase)
{
        if (!w->ca_model)
                return;
        if (!w->ca_signer)
                w->ca_signer = 1;
        if (phase == 1 && !w->ca_next && !w->ca_old)
                w->ca_next = w->ca_signer + 1;
        else if (phase == 2 && w->ca_next) {
                w->ca_old = w->ca_signer;
                w->ca_signer = w->ca_next;
                w->ca_next = 0;
                if (w->ca_not_after_ms)
                        w->ca_not_after_ms = w->now_ms + 3650LL * 24 * 3600 * 1000;
        } else if (phase == 3)
                w->ca_old = 0;
}

/* "1,2": the generations trusted (old, signer, next), the same in phases 1 and 2. */
static void ca_trust(const fake_world *w, char *buf, size_t size)
{
        int gens[3] = {w->ca_old, w->ca_signer, w->ca_next};
        size_t n = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < 3; i++)
                if (gens[i] && n < size)
                        n += (size_t)snprintf(buf + n, size - n, "%s%d", n ? "," : "", gens[i]);
}

static bool trusts_gen(const char *trusts, int gen)
{
        char g[16];
        snprintf(g, sizeof(g), "%d", gen);
        for (const char *p = trusts; p && *p;) {
                size_t len = strcspn(p, ",");
                if (len == strlen(g) && strncmp(p, g, len) == 0)
                        return true;
                p += len + (p[len] == ',');
        }
        return false;
}

/*
 * A snapshot restored while a cluster exists (a disaster recovery) starts
 * a new cluster (a new ID) of this member alone, in place of the old one.
 */
static void start_recovered(fake_world *w, fake_proc *p)
{
        memset(w->members, 0, sizeof(w->members));
        fake_etcd_member *m = &w->members[0];
        m->used = true;
        m->id = w->next_id;
        w->next_id += 0x1111;
        copy(m->peer_url, sizeof(m->peer_url), p->peer_url);
        copy(m->name, sizeof(m->name), p->name);
        copy(m->client_url, sizeof(m->client_url), p->client_url);
        w->cluster_id = w->cluster_id * 31 + 7;
        w->leader = 0;
        p->etcd_id = m->id;
        w->data_revision = p->restored_revision;
        p->restored = false;
        p->initialized = true;
}

/* A member with data rejoins with its identity; a member etcd removed shuts down. */
static void start_rejoin(fake_world *w, fake_proc *p)
{
        if (!member_by_id(w, p->etcd_id))
                return proc_exit(p);
        if (p->force) {
                /* --force-new-cluster: the membership becomes this member alone. */
                w->forced_starts++;
                for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                        if (w->members[i].used && w->members[i].id != p->etcd_id)
                                memset(&w->members[i], 0, sizeof(w->members[i]));
                member_by_id(w, p->etcd_id)->learner = false;
        }
        /* etcd publishes its client URLs at every start */
        fake_etcd_member *me = member_by_id(w, p->etcd_id);
        copy(me->client_url, sizeof(me->client_url), p->client_url);
}

/* Start the process: it joins etcd the way etcd does, or exits at once. */
static void proc_start(fake_world *w, fake_proc *p)
{
        p->starts++;
        p->stopped = false;
        p->crashed = false;
        p->running = true;
        p->running_since_ms = w->now_ms;
        if (w->cert_life_ms > 0 && !p->cert_serial) {
                p->cert_serial = 1;
                p->cert_not_after_ms = w->now_ms + w->cert_life_ms;
        }
        if (w->ca_model) {
                if (!p->cert_ca)
                        p->cert_ca = w->ca_signer;
                ca_trust(w, p->trusts, sizeof(p->trusts));
                for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                        if (w->procs[i].present && w->procs[i].cert_ca &&
                            !trusts_gen(p->trusts, w->procs[i].cert_ca))
                                w->ca_violations++;
        }
        if (p->broken || streq(p->name, w->never_starts) ||
            (w->bad_version[0] && streq(p->version, w->bad_version)))
                return proc_exit(p);
        if (p->has_data && p->restored)
                return start_recovered(w, p);
        /*
         * Restored before any cluster formed (spec.bootstrap.restore) and never
         * started: its data makes it a new cluster of one, whatever its flags.
         */
        bool restored = p->restored_revision && !p->initialized;
        if (p->has_data && !restored)
                return start_rejoin(w, p);
        fake_etcd_member *m = member_by_peer(w, p->peer_url);
        if (restored && strchr(p->restored_with, ',')) {
                /* Every member of a static initial cluster restored from one snapshot. */
                if (w->cluster_id == 0) {
                        form(w, p->restored_with);
                        w->cluster_id = 0x5e57023d1ca7a1c3ULL;
                        w->data_revision = p->restored_revision;
                        m = member_by_peer(w, p->peer_url);
                } else if (!streq(w->formed_with, p->restored_with)) {
                        return proc_exit(p); /* its restored cluster is not this one */
                }
                if (!m || m->client_url[0])
                        return proc_exit(p);
        } else if (restored) {
                if (w->cluster_id != 0 || m)
                        return proc_exit(p); /* its restored cluster is not this one */
                for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                        if (!w->members[i].used) {
                                m = &w->members[i];
                                break;
                        }
                if (!m)
                        abort();
                memset(m, 0, sizeof(*m));
                m->used = true;
                m->id = w->next_id;
                w->next_id += 0x1111;
                copy(m->peer_url, sizeof(m->peer_url), p->peer_url);
                w->cluster_id = 0x5e57023d1ca7a1c3ULL;
                w->data_revision = p->restored_revision;
        } else if (streq(p->initial_state, "new") && w->cluster_id == 0 && !m) {
                form(w, p->initial_cluster);
                m = member_by_peer(w, p->peer_url);
                if (!m)
                        return proc_exit(p); /* its own peer URL is not in its initial cluster */
        } else if (streq(p->initial_state, "new")) {
                /* A static bootstrap: the same initial cluster gives the same cluster ID. */
                if (!m || m->client_url[0] || !streq(w->formed_with, p->initial_cluster))
                        return proc_exit(p);
                if (w->data_revision)
                        w->diverged++; /* empty, into a cluster formed from a snapshot */
        } else if (!streq(p->initial_state, "existing") || !m || m->name[0]) {
                return proc_exit(p); /* a cluster ID or member mismatch: etcd exits */
        }
        copy(m->name, sizeof(m->name), p->name);
        copy(m->client_url, sizeof(m->client_url), p->client_url);
        p->etcd_id = m->id;
        p->has_data = true;
        p->initialized = true;
        if (streq(p->initial_state, "existing") && !restored) {
                /* a joining member gets the leader's data, whatever it holds */
                const fake_proc *lead = proc_up(w, w->leader);
                p->garble = lead ? lead->garble : 0;
                if (p->garble)
                        w->garbled_copies++;
        }
}

void fake_world_advance(fake_world *w, int64_t ms)
{
        w->now_ms += ms;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                fake_proc *p = &w->procs[i];
                if (p->present && p->crashed && !p->stopped && !p->lost) {
                        p->restarts++;
                        proc_start(w, p);
                }
        }
}

void fake_kill(fake_world *w, const char *name, bool broken)
{
        fake_proc *p = fake_proc_find(w, name);
        if (!p)
                return;
        p->broken = broken;
        if (p->running)
                proc_exit(p);
}

void fake_heal(fake_world *w, const char *name)
{
        fake_proc *p = fake_proc_find(w, name);
        if (p)
                p->broken = false;
}

void fake_lose_data(fake_world *w, const char *name)
{
        fake_proc *p = fake_proc_find(w, name);
        if (!p)
                return;
        p->lost = true;
        p->has_data = false;
        p->data_id[0] = '\0';
        if (p->running)
                proc_exit(p);
}

/* ---- the target ---------------------------------------------------------- */

typedef struct fake_target {
        target base;
        fake_world *w;
} fake_target;

static fake_world *W(target *t)
{
        return ((fake_target *)t)->w;
}

static int check_cluster(target *t, const char *ns, const char *cluster)
{
        fake_world *w = W(t);
        if (!w->cluster[0]) {
                copy(w->ns, sizeof(w->ns), ns);
                copy(w->cluster, sizeof(w->cluster), cluster);
        }
        if (!streq(w->ns, ns) || !streq(w->cluster, cluster))
                return target_fail(t, -EINVAL, "the fake target holds one cluster (%s/%s)", w->ns,
                                   w->cluster);
        return 0;
}

static fake_proc *proc_get(target *t, const char *name)
{
        fake_world *w = W(t);
        fake_proc *p = fake_proc_find(w, name);
        if (p)
                return p;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (!w->procs[i].present) {
                        p = &w->procs[i];
                        memset(p, 0, sizeof(*p));
                        p->present = true;
                        copy(p->name, sizeof(p->name), name);
                        return p;
                }
        abort();
}

static int fake_place_member(target *t, const etcd_cluster *c, member_plan *mp)
{
        if (!mp->name)
                return target_fail(t, -EINVAL, "member plan without a name");
        int k = check_cluster(t, c->namespace_, c->name);
        if (k < 0)
                return k;
        fake_proc *p = proc_get(t, mp->name);
        free(mp->peer_url);
        mp->peer_url = xasprintf("%s://%s.fake:2380", render_peer_scheme(c), mp->name);
        free(mp->client_url);
        mp->client_url =
            xasprintf("%s://%s.fake:2379", render_client_tls(c) ? "https" : "http", mp->name);
        free(mp->listen_peer_url);
        mp->listen_peer_url = xstrdup(mp->peer_url);
        free(mp->listen_client_url);
        mp->listen_client_url = xstrdup(mp->client_url);
        free(mp->listen_metrics_url);
        mp->listen_metrics_url = xasprintf("http://%s.fake:2381", mp->name);
        free(mp->data_dir);
        mp->data_dir = xasprintf("/fake/%s/data", mp->name);
        free(mp->tls_dir);
        mp->tls_dir = xasprintf("/fake/%s/tls", mp->name);
        fake_world *w = W(t);
        free(mp->tls_version);
        mp->tls_version = NULL;
        ca_follow(w, c->tls.ca_rotation_phase);
        if (w->ca_model) {
                char trust[16];
                ca_trust(w, trust, sizeof(trust));
                mp->tls_version = xasprintf("fake-ca:%s", trust);
        } else if (w->ca_pem[0]) {
                k = pki_bundle_fingerprint(w->ca_pem, strlen(w->ca_pem), &mp->tls_version);
                if (k < 0)
                        return target_fail(t, k, "CA bundle: %s", pki_last_error());
        }
        copy(p->peer_url, sizeof(p->peer_url), mp->peer_url);
        copy(p->client_url, sizeof(p->client_url), mp->client_url);
        return 0;
}

static int fake_ensure_shared(target *t, const etcd_cluster *c, const membership_plan *p)
{
        (void)p;
        int k = check_cluster(t, c->namespace_, c->name);
        if (k < 0)
                return k;
        W(t)->shared_syncs++;
        return 0;
}

/* FNV-1a over the command, arguments separated by NUL. */
static uint64_t command_hash(char **argv, size_t *ret_len)
{
        uint64_t h = 0xcbf29ce484222325ULL;
        size_t len = 0;
        for (size_t i = 0; argv && argv[i]; i++)
                for (const char *s = argv[i];; s++) {
                        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
                        len++;
                        if (!*s)
                                break;
                }
        *ret_len = len;
        return h;
}

static int fake_ensure_member(target *t, const etcd_cluster *c, const membership_plan *plan,
                              size_t idx)
{
        fake_world *w = W(t);
        if (idx >= plan->n)
                return target_fail(t, -EINVAL, "member index %zu out of range", idx);
        const member_plan *mp = &plan->members[idx];
        int k = check_cluster(t, c->namespace_, c->name);
        if (k < 0)
                return k;
        char **argv = render_member_command(c, plan, idx);
        size_t len = 0;
        uint64_t h = command_hash(argv, &len);
        bool force = false;
        for (size_t i = 0; argv && argv[i]; i++)
                force = force || streq(argv[i], "--force-new-cluster=true");
        strv_free(argv);

        fake_proc *p = proc_get(t, mp->name);
        if (mp->data_identity && !streq(p->data_id, mp->data_identity))
                return target_fail(t, -ESTALE,
                                   "member %s: its data directory is %s; it cannot rejoin "
                                   "with the same identity and must be replaced",
                                   mp->name, p->data_id[0] ? "another one" : "gone");
        if (!p->data_id[0])
                snprintf(p->data_id, sizeof(p->data_id), "fake-data-%d", ++w->data_ids);
        bool same = p->command_hash == h && p->command_len == len &&
                    streq(p->config_hash, mp->config_hash ? mp->config_hash : "");
        if (p->running && same)
                return 0;
        if (!p->running && p->crashed && !p->stopped && same)
                return 0; /* waiting out its backoff: the supervision restarts it */
        p->running = false;
        p->lost = false;
        p->command_hash = h;
        p->command_len = len;
        copy(p->config_hash, sizeof(p->config_hash), mp->config_hash);
        copy(p->peer_url, sizeof(p->peer_url), mp->peer_url);
        copy(p->client_url, sizeof(p->client_url), mp->client_url);
        copy(p->listen_client, sizeof(p->listen_client), mp->listen_client_url);
        copy(p->listen_peer, sizeof(p->listen_peer), mp->listen_peer_url);
        copy(p->initial_state, sizeof(p->initial_state), mp->initial_cluster_state);
        p->force = force;
        copy(p->initial_cluster, sizeof(p->initial_cluster), mp->initial_cluster);
        copy(p->version, sizeof(p->version), c->version);
        proc_start(w, p);
        return 0;
}

/*
 * The snapshot file's revision is what the test wrote as its first 8 bytes
 * (decimal; 1 when they are no number). Restored while the world has a
 * cluster (a disaster recovery), the member's first start replaces that
 * cluster with a new one of itself alone; restored before any cluster
 * formed (spec.bootstrap.restore), it forms the cluster.
 */
static int fake_restore_member(target *t, const etcd_cluster *c, const membership_plan *plan,
                               size_t idx, const target_restore *rs)
{
        fake_world *w = W(t);
        if (idx >= plan->n || !rs || !rs->snapshot || !rs->tool)
                return target_fail(t, -EINVAL, "bad restore request");
        int k = check_cluster(t, c->namespace_, c->name);
        if (k < 0)
                return k;
        const member_plan *mp = &plan->members[idx];
        fake_proc *p = proc_get(t, mp->name);
        if (p->running || p->has_data || p->initialized)
                return target_fail(t, -EEXIST, "member %s has data already", mp->name);
        FILE *f = fopen(rs->snapshot, "re");
        if (!f)
                return target_fail(t, -errno, "cannot read %s", rs->snapshot);
        char head[9] = "";
        size_t n = fread(head, 1, 8, f);
        fclose(f);
        head[n] = '\0';
        long long rev = strtoll(head, NULL, 10);
        p->restored_revision = rev > 0 ? rev : 1;
        p->restored_bump = rs->bump_revision;
        /* A member of a static initial cluster joins the cluster its peers formed from the
         * same snapshot; any other restore into a world with a cluster replaces it. */
        const char *with = target_restore_initial_cluster(mp);
        p->restored = w->cluster_id != 0 && !with;
        if (with)
                copy(p->restored_with, sizeof(p->restored_with), with);
        else
                snprintf(p->restored_with, sizeof(p->restored_with), "%s=%s", mp->name,
                         mp->peer_url);
        p->has_data = true;
        copy(p->peer_url, sizeof(p->peer_url), mp->peer_url);
        w->restores++;
        return 0;
}

/* The revision a stopped member's data holds, as etcd's tool would read it. */
static int fake_data_revision(target *t, const etcd_cluster *c, const char *member,
                              const char *tool, int64_t *ret_revision)
{
        if (!tool)
                return target_fail(t, -EINVAL, "no tool");
        int k = check_cluster(t, c->namespace_, c->name);
        if (k < 0)
                return k;
        fake_proc *p = fake_proc_find(W(t), member);
        if (p && p->running)
                return target_fail(t, -EBUSY, "member %s runs", member);
        if (!p || !p->has_data || p->lost)
                return target_fail(t, -ENOENT, "member %s holds no data", member);
        p->revision_reads++;
        if (p->foreign_revision)
                *ret_revision = p->foreign_revision;
        else if (p->restored_revision && !p->initialized)
                *ret_revision = p->restored_revision + p->restored_bump;
        else
                *ret_revision = MAX(MAX(p->revision, 1), W(t)->data_revision + p->restored_bump);
        return 0;
}

static int fake_stop_member(target *t, const etcd_cluster *c, const char *member)
{
        (void)c;
        fake_proc *p = fake_proc_find(W(t), member);
        if (!p)
                return 0;
        p->running = false;
        p->crashed = false;
        p->stopped = true;
        return 0;
}

static int fake_remove_member(target *t, const etcd_cluster *c, const char *member, bool keep_data)
{
        (void)c;
        fake_world *w = W(t);
        fake_proc *p = fake_proc_find(w, member);
        if (p && keep_data && p->has_data && !fake_kept(w, member))
                for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                        if (!w->kept[i][0]) {
                                copy(w->kept[i], sizeof(w->kept[i]), member);
                                break;
                        }
        if (p)
                memset(p, 0, sizeof(*p));
        return 0;
}

bool fake_kept(const fake_world *w, const char *name)
{
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (w->kept[i][0] && streq(w->kept[i], name))
                        return true;
        return false;
}

static int fake_drop_kept_data(target *t, const etcd_cluster *c, const char *member)
{
        (void)c;
        fake_world *w = W(t);
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                if (w->kept[i][0] && streq(w->kept[i], member)) {
                        w->kept[i][0] = '\0';
                        w->kept_dropped++;
                }
        return 0;
}

static int fake_member_status(target *t, const etcd_cluster *c, const char *member,
                              target_member_status *ret)
{
        (void)c;
        fake_world *w = W(t);
        elect(w);
        fake_proc *p = fake_proc_find(w, member);
        member_runtime_state s;
        if (p && p->silent)
                return target_fail(t, -EHOSTUNREACH, "%s: its machine does not answer", member);
        if (!p)
                s = MEMBER_ABSENT;
        else if (p->running)
                s = w->leader && member_by_id(w, p->etcd_id) ? MEMBER_READY : MEMBER_STARTING;
        else if (p->crashed)
                s = p->restarts >= 5 ? MEMBER_CRASH_LOOP : MEMBER_CRASHED;
        else if (!p->has_data)
                s = MEMBER_ABSENT;
        else
                s = MEMBER_STOPPED;
        *ret = (target_member_status){
            .state = s,
            .restarts = p ? p->restarts : 0,
            .config_hash = p && p->config_hash[0] ? xstrdup(p->config_hash) : NULL,
            .data_identity = p && p->data_id[0] ? xstrdup(p->data_id) : NULL,
            .state_since_ms = w->now_ms,
            .detail = xstrdup(member_runtime_state_name(s)),
        };
        return 0;
}

static int fake_list_members(target *t, const char *ns, const char *cluster, char ***ret_names,
                             size_t *ret_n)
{
        fake_world *w = W(t);
        char **names = xcalloc(FAKE_MAX_MEMBERS + 1, sizeof(char *));
        size_t n = 0;
        if (streq(w->ns, ns) && streq(w->cluster, cluster))
                for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                        if (w->procs[i].present)
                                names[n++] = xstrdup(w->procs[i].name);
        *ret_names = names;
        *ret_n = n;
        return 0;
}

static int fake_tick(target *t)
{
        (void)t;
        return 0;
}

static int fake_wait_event(target *t, int timeout_ms)
{
        (void)t;
        (void)timeout_ms;
        return 0;
}

static int fake_client_tls(target *t, const etcd_cluster *c, char **ret_ca, char **ret_cert,
                           char **ret_key)
{
        (void)t;
        (void)c;
        *ret_ca = *ret_cert = *ret_key = NULL;
        return 0;
}

static int fake_tls_certificates(target *t, const etcd_cluster *c, const membership_plan *p,
                                 target_cert **ret, size_t *ret_n)
{
        fake_world *w = W(t);
        (void)c;
        target_cert *v = xcalloc(p->n + 1, sizeof(*v));
        size_t n = 0;
        for (size_t i = 0; w->cert_life_ms > 0 && i < p->n; i++) {
                fake_proc *fp = fake_proc_find(w, p->members[i].name);
                if (!fp || !fp->cert_serial)
                        continue;
                v[n++] = (target_cert){.member = xstrdup(fp->name),
                                       .surface = xstrdup("peer"),
                                       .not_after_ms = fp->cert_not_after_ms,
                                       .serial = xasprintf("%X", fp->cert_serial)};
        }
        if (w->ca_model && w->ca_not_after_ms)
                v[n++] = (target_cert){.surface = xstrdup(TARGET_CERT_CA),
                                       .not_after_ms = w->ca_not_after_ms,
                                       .serial = xasprintf("CA%d", w->ca_signer),
                                       .imported = w->ca_imported};
        *ret = v;
        *ret_n = n;
        return 0;
}

/* A renewal swaps the files: the process keeps running (and is reachable again). */
static int fake_renew_tls(target *t, const etcd_cluster *c, const membership_plan *p,
                          const char *member, int64_t now_ms)
{
        (void)c;
        (void)p;
        fake_world *w = W(t);
        if (w->fail_renew && member && streq(member, w->fail_renew)) {
                w->fail_renew = NULL;
                return target_fail(t, -EIO, "member %s: cannot write its certificates", member);
        }
        fake_proc *fp = member ? fake_proc_find(w, member) : NULL;
        ca_follow(w, c->tls.ca_rotation_phase);
        if (w->ca_model && fp && fp->cert_ca && fp->cert_ca != w->ca_signer) {
                /* Signed by a CA that no longer signs: reissued from the signer. */
                for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++)
                        if (w->procs[i].present && w->procs[i].running &&
                            !trusts_gen(w->procs[i].trusts, w->ca_signer))
                                w->ca_violations++;
                fp->cert_ca = w->ca_signer;
                fp->cert_serial++;
                w->ca_reissues++;
                return 1;
        }
        int64_t renew_ms = (int64_t)c->tls.renew_before_seconds * 1000;
        if (!fp || !fp->cert_serial || fp->cert_not_after_ms - renew_ms > now_ms)
                return 0;
        fp->cert_serial++;
        fp->cert_not_after_ms = now_ms + w->cert_life_ms;
        w->renewals++;
        return 1;
}

static void fake_free(target *t)
{
        free(t);
}

static const target_ops fake_target_ops = {
    .name = "fake",
    .place_member = fake_place_member,
    .ensure_shared = fake_ensure_shared,
    .ensure_member = fake_ensure_member,
    .stop_member = fake_stop_member,
    .remove_member = fake_remove_member,
    .drop_kept_data = fake_drop_kept_data,
    .member_status = fake_member_status,
    .list_members = fake_list_members,
    .tick = fake_tick,
    .wait_event = fake_wait_event,
    .client_tls = fake_client_tls,
    .tls_certificates = fake_tls_certificates,
    .renew_tls = fake_renew_tls,
    .restore_member = fake_restore_member,
    .data_revision = fake_data_revision,
    .free = fake_free,
};

int fake_target_new(fake_world *w, target **ret)
{
        fake_target *ft = XNEW(fake_target);
        ft->base.ops = &fake_target_ops;
        ft->w = w;
        *ret = &ft->base;
        return 0;
}

/* ---- etcd's membership API ----------------------------------------------- */

struct etcd_conn {
        fake_world *w;
        char **endpoints;
        char *user; /* credentials, as the real client holds them */
        char *password;
        char *fallback_password;
        char *error;
};

static int fail(etcd_conn *c, int err, const char *fmt, ...) _printf_(3, 4);
static int fail(etcd_conn *c, int err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        free(c->error);
        c->error = xvasprintf(fmt, ap);
        va_end(ap);
        return err;
}

static int ok(etcd_conn *c)
{
        free(c->error);
        c->error = NULL;
        return 0;
}

static int fe_connect(void *userdata, const etcd_conn_opts *o, etcd_conn **ret)
{
        if (isempty(o->endpoints))
                return -EINVAL;
        etcd_conn *c = XNEW(etcd_conn);
        c->w = userdata;
        size_t n = 1;
        for (const char *s = o->endpoints; *s; s++)
                n += *s == ',';
        c->endpoints = xcalloc(n + 1, sizeof(char *));
        const char *s = o->endpoints;
        for (size_t i = 0; i < n; i++) {
                const char *e = strchr(s, ',');
                size_t l = e ? (size_t)(e - s) : strlen(s);
                c->endpoints[i] = xstrndup(s, l);
                s += l + (e ? 1 : 0);
        }
        c->user = xstrdup_null(o->user);
        c->password = xstrdup_null(o->password);
        c->fallback_password = xstrdup_null(o->fallback_password);
        *ret = c;
        return 0;
}

static void fe_disconnect(etcd_conn *c)
{
        if (!c)
                return;
        c->w->disconnects++;
        free(c->user);
        free(c->password);
        free(c->fallback_password);
        for (size_t i = 0; c->endpoints[i]; i++)
                free(c->endpoints[i]);
        free(c->endpoints);
        free(c->error);
        free(c);
}

/*
 * Does the running member m answer at endpoint? At the client URL it
 * published, and at each URL it listens on: a member serving clients on
 * both schemes (TLS being switched on) answers http and https alike.
 */
static fake_proc *answers_at(fake_world *w, const fake_etcd_member *m, const char *endpoint)
{
        fake_proc *p = m->used ? proc_up(w, m->id) : NULL;
        if (!p)
                return NULL;
        if (streq(m->client_url, endpoint))
                return p;
        size_t n = strlen(endpoint);
        for (const char *l = p->listen_client; *l;) {
                size_t len = strcspn(l, ",");
                if (len == n && strncmp(l, endpoint, n) == 0)
                        return p;
                l += len + (l[len] == ',');
        }
        return NULL;
}

/* Some endpoint is a member that runs and answers. */
static int reach(etcd_conn *c)
{
        fake_world *w = c->w;
        elect(w);
        for (size_t i = 0; c->endpoints[i]; i++)
                for (size_t j = 0; j < FAKE_MAX_MEMBERS; j++) {
                        const fake_etcd_member *m = &w->members[j];
                        if (answers_at(w, m, c->endpoints[i]))
                                return 0;
                }
        return fail(c, ETCD_ERR_UNREACHABLE, "cannot connect to any etcd endpoint");
}

static int need_leader(etcd_conn *c)
{
        int k = reach(c);
        if (k < 0)
                return k;
        if (!c->w->leader)
                return fail(c, ETCD_ERR_TIMEOUT, "etcdserver: request timed out (no leader)");
        return 0;
}

/* With auth on, the call needs root's password (the connection's, or its fallback). */
static int authed(etcd_conn *c)
{
        fake_world *w = c->w;
        if (!w->auth.enabled)
                return 0;
        w->auth_refusals++;
        if (!c->user)
                return fail(c, ETCD_ERR_UNAUTHENTICATED, "etcdserver: user name is empty");
        bool good = streq(c->user, "root") && w->auth.root_user &&
                    (streq_ptr(c->password, w->auth.root_password) ||
                     streq_ptr(c->fallback_password, w->auth.root_password));
        if (!good)
                return fail(c, ETCD_ERR_AUTH_FAILED,
                            "etcdserver: authentication failed, invalid user ID or password");
        w->auth_refusals--;
        return 0;
}

/* need_leader, then the credentials. */
static int need_root(etcd_conn *c)
{
        int k = need_leader(c);
        return k < 0 ? k : authed(c);
}

/* The member list as the member m (running as p) sees it. */
static etcd_members *list_as(fake_world *w, const fake_proc *p)
{
        etcd_members *l = XNEW(etcd_members);
        l->cluster_id = w->cluster_id;
        l->members = xcalloc(FAKE_MAX_MEMBERS, sizeof(etcd_member));
        for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                const fake_etcd_member *m = &w->members[i];
                if (!m->used || (p && p->alone && m->id != p->etcd_id))
                        continue;
                etcd_member *e = &l->members[l->n++];
                e->id = m->id;
                e->name = xstrdup(m->name);
                e->is_learner = m->learner;
                e->peer_urls = xcalloc(1, sizeof(char *));
                e->peer_urls[0] = xstrdup(m->peer_url);
                e->n_peer_urls = 1;
                if (m->client_url[0]) {
                        e->client_urls = xcalloc(1, sizeof(char *));
                        e->client_urls[0] = xstrdup(m->client_url);
                        e->n_client_urls = 1;
                }
        }
        return l;
}

/* The running member behind a client URL, or NULL. */
static fake_proc *proc_at(fake_world *w, const char *endpoint)
{
        for (size_t j = 0; j < FAKE_MAX_MEMBERS; j++) {
                const fake_etcd_member *m = &w->members[j];
                fake_proc *p = answers_at(w, m, endpoint);
                if (p)
                        return p;
        }
        return NULL;
}

/* The list from the first endpoint that answers, as that member sees it. */
static int fe_member_list(etcd_conn *c, etcd_members **ret)
{
        int k = reach(c);
        if (k < 0)
                return k;
        fake_proc *p = NULL;
        for (size_t i = 0; !p && c->endpoints[i]; i++)
                p = proc_at(c->w, c->endpoints[i]);
        *ret = list_as(c->w, p);
        return ok(c);
}

static int fe_member_list_at(etcd_conn *c, const char *endpoint, etcd_members **ret)
{
        elect(c->w);
        fake_proc *p = proc_at(c->w, endpoint);
        if (!p)
                return fail(c, ETCD_ERR_UNREACHABLE, "%s: cannot connect", endpoint);
        *ret = list_as(c->w, p);
        return ok(c);
}

static int fe_leader(etcd_conn *c, uint64_t *ret)
{
        int k = reach(c);
        if (k < 0)
                return k;
        *ret = c->w->leader;
        return ok(c);
}

static int fe_add_learner(etcd_conn *c, const char *peer_url, uint64_t *ret_id)
{
        fake_world *w = c->w;
        int k = need_root(c);
        if (k < 0)
                return k;
        if (w->fail_next_add) {
                k = w->fail_next_add;
                w->fail_next_add = 0;
                return fail(c, k, "etcdserver: injected MemberAdd failure");
        }
        if (member_by_peer(w, peer_url))
                return fail(c, ETCD_ERR_PEER_URL_EXISTS, "etcdserver: Peer URLs already exists");
        size_t learners = 0;
        (void)fake_etcd_count(w, &learners);
        if (learners >= 1)
                return fail(c, ETCD_ERR_TOO_MANY_LEARNERS, "etcdserver: too many learner members");
        int n, up, healthy;
        voters(w, &n, &up, &healthy);
        if (healthy < n)
                return fail(c, ETCD_ERR_UNHEALTHY, "etcdserver: unhealthy cluster");
        fake_etcd_member *m = NULL;
        for (size_t i = 0; i < FAKE_MAX_MEMBERS && !m; i++)
                if (!w->members[i].used)
                        m = &w->members[i];
        if (!m)
                abort();
        memset(m, 0, sizeof(*m));
        m->used = true;
        m->id = w->next_id;
        w->next_id += 0x1111;
        m->learner = true;
        copy(m->peer_url, sizeof(m->peer_url), peer_url);
        w->adds++;
        *ret_id = m->id;
        return ok(c);
}

static int fe_update_peer(etcd_conn *c, uint64_t id, const char *peer_url)
{
        fake_world *w = c->w;
        int k = need_root(c);
        if (k < 0)
                return k;
        fake_etcd_member *m = member_by_id(w, id);
        if (!m)
                return fail(c, ETCD_ERR_MEMBER_NOT_FOUND, "etcdserver: member not found");
        const fake_etcd_member *other = member_by_peer(w, peer_url);
        if (other && other != m)
                return fail(c, ETCD_ERR_PEER_URL_EXISTS, "etcdserver: Peer URLs already exists");
        copy(m->peer_url, sizeof(m->peer_url), peer_url);
        w->peer_updates++;
        return ok(c);
}

static int fe_promote(etcd_conn *c, uint64_t id)
{
        fake_world *w = c->w;
        int k = need_root(c);
        if (k < 0)
                return k;
        fake_etcd_member *m = member_by_id(w, id);
        if (!m)
                return fail(c, ETCD_ERR_MEMBER_NOT_FOUND, "etcdserver: member not found");
        if (!m->learner)
                return fail(c, ETCD_ERR_MEMBER_NOT_LEARNER,
                            "etcdserver: can only promote a learner member");
        fake_proc *p = proc_up(w, id);
        if (!p || p->running_since_ms + w->learner_sync_ms > w->now_ms)
                return fail(c, ETCD_ERR_MEMBER_NOT_IN_SYNC,
                            "etcdserver: can only promote a learner member which is in sync "
                            "with leader");
        m->learner = false;
        w->promotes++;
        return ok(c);
}

static int fe_remove(etcd_conn *c, uint64_t id)
{
        fake_world *w = c->w;
        int k = need_root(c);
        if (k < 0)
                return k;
        fake_etcd_member *m = member_by_id(w, id);
        if (!m)
                return fail(c, ETCD_ERR_MEMBER_NOT_FOUND, "etcdserver: member not found");
        if (!m->learner) {
                int n = 0, started = 0;
                for (size_t i = 0; i < FAKE_MAX_MEMBERS; i++) {
                        const fake_etcd_member *o = &w->members[i];
                        if (!o->used || o->learner)
                                continue;
                        n++;
                        if (o->id != id && o->name[0])
                                started++;
                }
                if (started < (n - 1) / 2 + 1)
                        return fail(c, ETCD_ERR_NOT_ENOUGH_STARTED,
                                    "etcdserver: re-configuration failed due to not enough "
                                    "started members");
                if (proc_up(w, id)) {
                        int up, healthy;
                        voters(w, &n, &up, &healthy);
                        if (healthy - 1 < 1 + (n - 1) / 2)
                                return fail(c, ETCD_ERR_UNHEALTHY, "etcdserver: unhealthy cluster");
                }
        }
        fake_proc *p = proc_up(w, id);
        if (p)
                proc_exit(p); /* etcd shuts down a member removed from the cluster */
        memset(m, 0, sizeof(*m));
        w->removes++;
        elect(w);
        return ok(c);
}

static int fe_move_leader(etcd_conn *c, uint64_t to)
{
        fake_world *w = c->w;
        int k = reach(c);
        if (k < 0)
                return k;
        if (!w->leader)
                return fail(c, ETCD_ERR_NO_LEADER, "etcdserver: no leader");
        const fake_etcd_member *m = member_by_id(w, to);
        if (!m || m->learner || !proc_up(w, to))
                return fail(c, ETCD_ERR_BAD_LEADER_TRANSFEREE, "etcdserver: bad leader transferee");
        if (w->leader != to)
                w->leader_moves++;
        w->leader = to;
        return ok(c);
}

/* Status answers without a leader, from the member alone: its version, raft index, revision. */
static int fe_status_at(etcd_conn *c, const char *endpoint, etcd_endpoint_status **ret)
{
        fake_world *w = c->w;
        elect(w);
        fake_proc *p = proc_at(w, endpoint);
        if (!p)
                return fail(c, ETCD_ERR_UNREACHABLE, "%s: cannot connect", endpoint);
        uint64_t head = w->raft_index ? w->raft_index : 1000;
        etcd_endpoint_status *st = XNEW(etcd_endpoint_status);
        st->endpoint = xstrdup(endpoint);
        st->version = xstrdup(p->version[0] ? p->version : "3.5.16");
        st->leader = w->leader;
        st->member_id = p->etcd_id;
        st->cluster_id = w->cluster_id;
        /* A member's own raft index (quorum-loss hook), else the leader's less its lag. */
        st->raft_index = p->raft_index        ? p->raft_index
                         : head > p->raft_lag ? head - p->raft_lag
                                              : 0;
        st->revision =
            p->revision ? p->revision : (w->kv_revision ? w->kv_revision : 100) - p->kv_lag;
        st->raft_applied_index = st->raft_index;
        const fake_etcd_member *m = member_by_id(w, p->etcd_id);
        st->is_learner = m && m->learner;
        *ret = st;
        return ok(c);
}

/* HashKV of one member: the cluster's hash at revision, xor the member's garble. */
static int fe_hash_kv_at(etcd_conn *c, const char *endpoint, int64_t revision, int timeout_ms,
                         uint32_t *ret_hash, int64_t *ret_compact_revision)
{
        fake_world *w = c->w;
        elect(w);
        fake_proc *p = proc_at(w, endpoint);
        if (!p)
                return fail(c, ETCD_ERR_UNREACHABLE, "%s: cannot connect", endpoint);
        int64_t head = (w->kv_revision ? w->kv_revision : 100) - p->kv_lag;
        if (revision > head)
                return fail(c, ETCD_ERR_FUTURE_REV,
                            "etcdserver: mvcc: required revision is a future revision");
        if (revision > 0 && revision < w->compact_revision)
                return fail(c, ETCD_ERR_COMPACTED,
                            "etcdserver: mvcc: required revision has been compacted");
        w->hashes++;
        *ret_hash = (uint32_t)(0x9e3779b9u * (uint32_t)(revision ? revision : head)) ^ p->garble;
        *ret_compact_revision = w->compact_revision;
        return ok(c);
}

static int fe_corrupt_disarm(etcd_conn *c, size_t *ret_n)
{
        int k = reach(c);
        if (k < 0)
                return k;
        *ret_n = c->w->corrupt_alarm ? 1 : 0;
        c->w->corrupt_alarm = false;
        return ok(c);
}

static int fe_auth_status(etcd_conn *c, bool *ret_enabled)
{
        int k = need_leader(c);
        if (k >= 0 && c->user) /* the real client authenticates first when it has a user */
                k = authed(c);
        if (k < 0)
                return k;
        *ret_enabled = c->w->auth.enabled;
        return ok(c);
}

static int fe_user_add(etcd_conn *c, const char *user, const char *password)
{
        int k = need_root(c);
        if (k < 0)
                return k;
        assert(streq(user, "root") && strlen(password) < sizeof(c->w->auth.root_password));
        if (c->w->auth.root_user)
                return fail(c, ETCD_ERR_USER_EXISTS, "etcdserver: user name already exists");
        c->w->auth.root_user = true;
        snprintf(c->w->auth.root_password, sizeof(c->w->auth.root_password), "%s", password);
        return ok(c);
}

static int fe_user_change_password(etcd_conn *c, const char *user, const char *password)
{
        int k = need_root(c);
        if (k < 0)
                return k;
        assert(streq(user, "root") && strlen(password) < sizeof(c->w->auth.root_password));
        if (!c->w->auth.root_user)
                return fail(c, ETCD_ERR_USER_NOT_FOUND, "etcdserver: user name not found");
        snprintf(c->w->auth.root_password, sizeof(c->w->auth.root_password), "%s", password);
        return ok(c);
}

static int fe_role_add(etcd_conn *c, const char *role)
{
        int k = need_root(c);
        if (k < 0)
                return k;
        assert(streq(role, "root"));
        if (c->w->auth.root_role)
                return fail(c, ETCD_ERR_ROLE_EXISTS, "etcdserver: role name already exists");
        c->w->auth.root_role = true;
        return ok(c);
}

static int fe_user_grant_role(etcd_conn *c, const char *user, const char *role)
{
        int k = need_root(c);
        if (k < 0)
                return k;
        assert(streq(user, "root") && streq(role, "root"));
        if (!c->w->auth.root_user)
                return fail(c, ETCD_ERR_USER_NOT_FOUND, "etcdserver: user name not found");
        if (!c->w->auth.root_role)
                return fail(c, ETCD_ERR_ROLE_NOT_FOUND, "etcdserver: role name not found");
        c->w->auth.root_granted = true;
        return ok(c);
}

static int fe_auth_enable(etcd_conn *c)
{
        int k = need_leader(c);
        if (k < 0)
                return k;
        if (!c->w->auth.root_user)
                return fail(c, ETCD_ERR_ROOT_USER_MISSING, "etcdserver: root user does not exist");
        if (!c->w->auth.root_granted)
                return fail(c, ETCD_ERR_ROOT_ROLE_MISSING,
                            "etcdserver: root user does not have root role");
        c->w->auth.enabled = true;
        return ok(c);
}

static int fe_auth_disable(etcd_conn *c)
{
        int k = need_root(c);
        if (k < 0)
                return k;
        c->w->auth.enabled = false;
        return ok(c);
}

static const char *fe_last_error(const etcd_conn *c)
{
        return c->error ? c->error : "";
}

const etcd_membership_ops fake_etcd_ops = {
    .connect = fe_connect,
    .disconnect = fe_disconnect,
    .member_list = fe_member_list,
    .member_list_at = fe_member_list_at,
    .leader = fe_leader,
    .add_learner = fe_add_learner,
    .update_peer = fe_update_peer,
    .promote = fe_promote,
    .remove = fe_remove,
    .move_leader = fe_move_leader,
    .status_at = fe_status_at,
    .hash_kv_at = fe_hash_kv_at,
    .corrupt_disarm = fe_corrupt_disarm,
    .auth_status = fe_auth_status,
    .user_add = fe_user_add,
    .user_change_password = fe_user_change_password,
    .role_add = fe_role_add,
    .user_grant_role = fe_user_grant_role,
    .auth_enable = fe_auth_enable,
    .auth_disable = fe_auth_disable,
    .last_error = fe_last_error,
};
