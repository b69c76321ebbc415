/*
 * The hosts target's preflight of machines, the half with effects (the
 * pure half, the script, its reader and the judgement, is
 * hosts-preflight.c): measuring a machine over the pooled SSH connection,
 * the target's memory of each machine's last preflight, placement's use of
 * it and the machine operations (target_machine_ops) that hand the
 * preflights out to be recorded.
 *
 * Decisions:
 * - The state store is the reconciler's: the target remembers each
 *   machine's last preflight (what the caller passed as known, or what it
 *   measured since) and hands out what it measured, once; the reconciler
 *   records it and judges MachineHealthy. So a verdict outlives a restart
 *   of gitcd without the target knowing the store.
 * - A preflight stands for the interval (PREFLIGHT_INTERVAL_MS unless the
 *   options set one): a free machine measured within it is not measured
 *   again before a member is placed on it (a failed verdict keeps it out
 *   until then; a machine that could not be measured is asked again at
 *   once), and a machine holding a member is measured again once it has
 *   passed, by the machine operation, never by placement.
 * - Free machines are measured only when a member is to be placed: the
 *   machine operation probes a machine it has no recent preflight of (the
 *   probe says whether it holds a member) at most once per interval, and
 *   a machine that does not answer is asked again an interval later (its
 *   member is Degraded's MachineUnreachable meanwhile).
 * - Entries are reached through pointers that stay put (an array of
 *   pointers), and each belongs to one cluster, whose operations the
 *   locked wrapper serialises: an entry held across an SSH step (the
 *   shared lock let go) is changed by no other thread meanwhile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/preflights.h"
#include "targets/hosts-internal.h"
#include "targets/hosts-preflight.h"
#include "targets/hosts-rtt.h"
#include "util/log.h"
#include "util/timeutil.h"

/* What the target remembers of one machine of one cluster. */
struct preflight_entry {
        char *cluster;         /* "namespace/name" */
        char *machine;         /* "address:port" */
        state_preflight *last; /* its last preflight (known or measured here), or NULL */
        int64_t looked_ms;     /* when it was last probed and found free (not measured then) */
        bool pending;          /* last was made here (or its member changed): not handed out yet */
};

static int64_t interval_of(const hosts_target *ht)
{
        return ht->o.preflight_interval_ms > 0 ? ht->o.preflight_interval_ms
                                               : PREFLIGHT_INTERVAL_MS;
}

static preflight_entry *entry_of(hosts_target *ht, const char *cluster, const char *machine)
{
        for (size_t i = 0; i < ht->n_preflights; i++)
                if (streq(ht->preflights[i]->cluster, cluster) &&
                    streq(ht->preflights[i]->machine, machine))
                        return ht->preflights[i];
        if (ht->n_preflights == ht->alloc_preflights) {
                ht->alloc_preflights = ht->alloc_preflights ? 2 * ht->alloc_preflights : 8;
                ht->preflights =
                    xrealloc(ht->preflights, ht->alloc_preflights * sizeof(preflight_entry *));
        }
        preflight_entry *e = XNEW(preflight_entry);
        e->cluster = xstrdup(cluster);
        e->machine = xstrdup(machine);
        ht->preflights[ht->n_preflights++] = e;
        return e;
}

static preflight_entry *entry_for(hosts_target *ht, const etcd_cluster *c, const host_spec *h)
{
        _cleanup_free_ char *cluster = xasprintf("%s/%s", c->namespace_, c->name);
        _cleanup_free_ char *machine = machine_key(h);
        return entry_of(ht, cluster, machine);
}

void ht_preflights_free(hosts_target *ht)
{
        for (size_t i = 0; i < ht->n_preflights; i++) {
                preflight_entry *e = ht->preflights[i];
                free(e->cluster);
                free(e->machine);
                state_preflight_free(e->last);
                free(e);
        }
        free(ht->preflights);
}

/*
 * Time the connects from machine h to every other machine of c at its
 * peer port (targets/hosts-rtt.h) into p. The RTT never fails a
 * preflight: a machine that could not run the script keeps no figure
 * (rtt_samples 0), said in the debug log.
 */
static void measure_rtt(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                        state_preflight *p)
{
        _cleanup_free_ rtt_peer *peers = xcalloc(c->hosts.n + 1, sizeof(*peers));
        size_t n = 0;
        for (size_t i = 0; i < c->hosts.n && n < RTT_MAX_PEERS; i++) {
                const host_spec *o = &c->hosts.items[i];
                if (o != h && !streq(o->address, h->address))
                        peers[n++] = (rtt_peer){o->advertise_address, ht->o.peer_port};
        }
        if (n == 0)
                return;
        _cleanup_free_ char *script = rtt_script(peers, n, ht->o.preflight_rtt_connect);
        _cleanup_free_ char *out = NULL, *why = NULL;
        if (!script) {
                log_debug("hosts target: peer RTT from %s for %s: a peer address is not a host "
                          "name or IP address",
                          h->address, p->cluster);
                return;
        }
        if (ht_exec_cmd(ht, h, script, NULL, 0, &out) < 0) {
                log_debug("hosts target: peer RTT from %s for %s: %s", h->address, p->cluster,
                          target_last_error(&ht->base));
                return;
        }
        rtt_result r = {0};
        if (rtt_parse(out, strlen(out), &r, &why) < 0) {
                log_debug("hosts target: peer RTT from %s for %s: %s", h->address, p->cluster, why);
                return;
        }
        p->rtt_samples = r.n_samples;
        p->rtt_peers = r.n_peers;
        p->rtt_failed = r.n_failed;
        p->rtt_slowest_us = r.slowest_us;
        p->rtt_max_us = r.max_us;
        log_debug("hosts target: peer RTT from %s for %s: slowest peer's median %lld us, max %lld "
                  "us (%lld connects to %lld peers, %lld not reached)%s%s",
                  h->address, p->cluster, (long long)r.slowest_us, (long long)r.max_us,
                  (long long)r.n_samples, (long long)r.n_peers, (long long)r.n_failed,
                  r.error ? ": " : "", r.error ? r.error : "");
        rtt_result_release(&r);
}

/*
 * Measure machine h for cluster c (targets/hosts-preflight.h): the clock
 * first (one short command, so its round trip bounds the offset), then
 * the script, both on the connection the pool lends. Always a preflight
 * (allocated): "passed", "failed" with the failed measurements, or
 * "unmeasured" with why the machine could not be measured. member: what
 * the machine holds now (NULL: free).
 */
static state_preflight *measure(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                                const char *member)
{
        state_preflight *p = XNEW(state_preflight);
        p->cluster = xasprintf("%s/%s", c->namespace_, c->name);
        p->machine = machine_key(h);
        p->member = xstrdup_null(member);
        p->quota_bytes =
            c->options.quota_backend_bytes > 0 ? c->options.quota_backend_bytes : 2LL << 30;
        _cleanup_free_ char *clock = NULL, *out = NULL, *why = NULL, *script = NULL;
        int64_t sent = now_wall_ms();
        int k = ht_exec_cmd(ht, h, PREFLIGHT_CLOCK_COMMAND, NULL, 0, &clock);
        int64_t got = now_wall_ms();
        p->time_ms = got;
        if (k >= 0 &&
            preflight_clock_offset(clock, sent, got, &p->offset_ms, &p->offset_bound_ms, &why) < 0)
                k = target_fail(&ht->base, -EPROTO, "%s: preflight: %s", h->address, why);
        if (k >= 0) {
                script = preflight_script(h->data_dir, ht->o.preflight_dd);
                k = ht_exec_cmd(ht, h, script, NULL, 0, &out);
        }
        preflight_result r = {0};
        if (k >= 0 && preflight_parse(out, strlen(out), &r, &why) < 0)
                k = target_fail(&ht->base, -EPROTO, "%s: preflight: %s", h->address, why);
        if (k < 0) {
                p->verdict = xstrdup("unmeasured");
                p->reason = xstrdup(target_last_error(&ht->base));
                log_debug("hosts target: preflight of %s for %s: not measured: %s", h->address,
                          p->cluster, p->reason);
                return p;
        }
        preflight_limits l = {
            .sync_p99_max_us = ht->o.preflight_sync_p99_max_us > 0 ? ht->o.preflight_sync_p99_max_us
                                                                   : PREFLIGHT_SYNC_P99_MAX_US,
            .offset_max_ms = ht->o.preflight_offset_max_ms > 0 ? ht->o.preflight_offset_max_ms
                                                               : PREFLIGHT_OFFSET_MAX_MS,
            .quota_bytes = p->quota_bytes,
        };
        char *reason = NULL;
        k = preflight_judge(&r, p->offset_ms, p->offset_bound_ms, &l, &reason);
        p->verdict = xstrdup(k ? "failed" : "passed");
        p->reason = k ? reason : NULL;
        p->kernel = TAKE_PTR(r.kernel);
        p->fstype = TAKE_PTR(r.fstype);
        p->free_bytes = r.free_bytes;
        p->n_sync = (int64_t)r.n_sync;
        p->sync_p50_us = r.sync_p50_us;
        p->sync_p99_us = r.sync_p99_us;
        p->sync_max_us = r.sync_max_us;
        measure_rtt(ht, c, h, p);
        log_debug("hosts target: preflight of %s for %s: fdatasync p50 %lld us p99 %lld us "
                  "max %lld us (%zu samples, %s, kernel %s), free %lld bytes, clock offset %lld "
                  "ms (±%lld): %s",
                  h->address, p->cluster, (long long)r.sync_p50_us, (long long)r.sync_p99_us,
                  (long long)r.sync_max_us, r.n_sync, p->fstype, p->kernel, (long long)r.free_bytes,
                  (long long)p->offset_ms, (long long)p->offset_bound_ms, k ? reason : "passed");
        preflight_result_release(&r);
        return p;
}

bool ht_preflight_refuses(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                          char **refused)
{
        if (!ht->o.preflight)
                return false;
        preflight_entry *e = entry_for(ht, c, h);
        /* a recent verdict stands; a machine that could not be measured is asked again */
        if (!e->last || streq(e->last->verdict, "unmeasured") ||
            preflight_due(e->last->time_ms, now_wall_ms(), interval_of(ht))) {
                state_preflight *p = measure(ht, c, h, NULL);
                state_preflight_free(e->last);
                e->last = p;
                e->pending = true;
        } else {
                log_debug("hosts target: preflight of %s for %s/%s: %s %lld s ago, not measured "
                          "again",
                          h->address, c->namespace_, c->name, e->last->verdict,
                          (long long)((now_wall_ms() - e->last->time_ms) / 1000));
        }
        if (streq(e->last->verdict, "passed"))
                return false;
        char *more = xasprintf("%s%s%s: %s", *refused ? *refused : "", *refused ? "; " : "",
                               h->address, e->last->reason ? e->last->reason : e->last->verdict);
        str_assign(refused, more);
        return true;
}

void ht_preflight_placed(hosts_target *ht, const etcd_cluster *c, const host_spec *h,
                         const char *member)
{
        if (!ht->o.preflight)
                return;
        preflight_entry *e = entry_for(ht, c, h);
        if (!e->last || streq_ptr(e->last->member, member))
                return;
        str_assign(&e->last->member, xstrdup(member));
        e->pending = true;
}

int ht_preflight_wait(hosts_target *ht, const char *member, const char *refused,
                      const char *why_not)
{
        return target_fail(
            &ht->base, -EAGAIN, "no free machine for member %s passed its preflight (%s)%s%s",
            member, refused, why_not ? "; some could not be asked: " : "", why_not ? why_not : "");
}

static int hosts_preflights(target *t, const etcd_cluster *c,
                            const struct state_preflight_list *known, int64_t now_ms,
                            struct state_preflight_list *ret)
{
        hosts_target *ht = HT(t);
        state_preflight_list out = {0};
        if (!ht->o.preflight || !c->hosts.set || c->hosts.n == 0) {
                *ret = out;
                return 0; /* off: nothing to judge */
        }
        ht_remember(ht, c);
        if (ht_check_machines(ht, c) < 0)
                return -EINVAL;
        _cleanup_free_ char *cluster = xasprintf("%s/%s", c->namespace_, c->name);
        /* what the store holds stands unless this target measured since */
        for (size_t i = 0; known && i < known->n; i++) {
                const state_preflight *k = known->items[i];
                if (!streq_ptr(k->cluster, cluster) || isempty(k->machine))
                        continue;
                preflight_entry *e = entry_of(ht, cluster, k->machine);
                if (e->last && e->last->time_ms >= k->time_ms)
                        continue;
                state_preflight_free(e->last);
                e->last = state_preflight_dup(k);
                e->pending = false;
        }
        int64_t interval = interval_of(ht);
        for (size_t i = 0; i < c->hosts.n; i++) {
                const host_spec *h = &c->hosts.items[i];
                preflight_entry *e = entry_for(ht, c, h);
                int64_t last = e->last ? e->last->time_ms : 0;
                if (!preflight_due(MAX(last, e->looked_ms), now_ms, interval))
                        continue;
                machine_view v;
                if (ht_probe(ht, c, h, &v) < 0) {
                        /* said by status (MachineUnreachable); asked again an interval on */
                        e->looked_ms = now_ms;
                        continue;
                }
                _cleanup_free_ char *member = xstrdup_null(v.claimed_by);
                ht_view_release(&v);
                if (!member) {
                        e->looked_ms = now_ms;
                        continue;
                }
                state_preflight *p = measure(ht, c, h, member);
                p->time_ms = now_ms;
                state_preflight_free(e->last);
                e->last = p;
                e->pending = true;
        }
        for (size_t i = 0; i < ht->n_preflights; i++) {
                preflight_entry *e = ht->preflights[i];
                if (!e->pending || !streq(e->cluster, cluster))
                        continue;
                out.items = xrealloc(out.items, (out.n + 1) * sizeof(state_preflight *));
                out.items[out.n++] = state_preflight_dup(e->last);
                e->pending = false;
        }
        *ret = out;
        return 1;
}

const target_machine_ops hosts_machine_ops = {
    .preflights = hosts_preflights,
};
