/*
 * Quiet passes (reconciler/quiet.h). Decision: the digest is a SHA-256
 * over a length-prefixed text of what the pass observed, not a field-wise
 * comparison kept in memory: a few hundred bytes per pass to hash, 32 per
 * cluster to keep, and a field added to what is fed here cannot be
 * compared wrongly. A field the upkeep depends on must be fed here.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reconciler/quiet.h"
#include "util/hash.h"

static void put_str(quiet_digest *d, const char *s)
{
        if (!s) {
                sb_append(&d->sb, "-;");
                return;
        }
        sb_printf(&d->sb, "%zu:", strlen(s));
        sb_append(&d->sb, s);
        sb_appendc(&d->sb, ';');
}

static void put_int(quiet_digest *d, int64_t v)
{
        sb_printf(&d->sb, "%" PRId64 ";", v);
}

void quiet_digest_cluster(quiet_digest *d, const char *latched_hash, const state_cluster *sc)
{
        sb_append(&d->sb, "cluster;");
        put_str(d, latched_hash);
        put_str(d, sc ? sc->cluster_id : NULL);
        put_str(d, sc ? sc->leader : NULL);
        put_str(d, sc ? sc->version : NULL);
        put_int(d, sc ? sc->progress_deadline_ms : 0);
}

void quiet_digest_member(quiet_digest *d, const state_member *rec, const target_member_status *ts,
                         const char *want_hash)
{
        sb_append(&d->sb, "member;");
        if (rec) {
                put_str(d, rec->name);
                put_int(d, rec->ordinal);
                put_str(d, rec->member_id);
                put_str(d, rec->peer_url);
                put_str(d, rec->client_url);
                put_int(d, rec->learner);
                put_str(d, rec->version);
                put_int(d, rec->seed);
                put_int(d, rec->dormant);
                put_int(d, rec->initialized);
                put_str(d, rec->state);
                put_str(d, rec->initial_cluster);
                put_str(d, rec->initial_cluster_state);
                put_str(d, rec->config_hash);
                put_str(d, rec->data_identity);
                put_str(d, rec->runtime_json);
                put_int(d, rec->removed_ms);
        }
        put_int(d, ts ? (int64_t)ts->state : -1);
        put_int(d, ts ? ts->restarts : -1);
        put_str(d, ts ? ts->config_hash : NULL);
        put_str(d, ts ? ts->data_identity : NULL);
        put_str(d, want_hash);
}

void quiet_digest_etcd(quiet_digest *d, const etcd_members *l, uint64_t leader)
{
        sb_append(&d->sb, "etcd;");
        if (!l) {
                sb_append(&d->sb, "none;");
                return;
        }
        put_int(d, (int64_t)l->cluster_id);
        put_int(d, (int64_t)leader);
        for (size_t i = 0; i < l->n; i++) {
                const etcd_member *m = &l->members[i];
                put_int(d, (int64_t)m->id);
                put_str(d, m->name);
                put_int(d, m->is_learner);
                for (size_t j = 0; j < m->n_peer_urls; j++)
                        put_str(d, m->peer_urls[j]);
                sb_appendc(&d->sb, '|');
                for (size_t j = 0; j < m->n_client_urls; j++)
                        put_str(d, m->client_urls[j]);
                sb_appendc(&d->sb, '|');
        }
}

void quiet_digest_end(quiet_digest *d, unsigned char ret[QUIET_DIGEST_LEN])
{
        _Static_assert(QUIET_DIGEST_LEN == HASH_SHA256_LEN, "the digest is a SHA-256");
        hash_sha256(d->sb.buf, d->sb.len, ret);
        sb_release(&d->sb);
}

bool quiet_may_skip(const quiet_track *q, const unsigned char digest[QUIET_DIGEST_LEN],
                    int64_t now_ms)
{
        return q->armed && now_ms - q->full_pass_ms < QUIET_FULL_PASS_MS &&
               memcmp(q->digest, digest, QUIET_DIGEST_LEN) == 0;
}

void quiet_pass_end(quiet_track *q, bool quiet, bool converged,
                    const unsigned char digest[QUIET_DIGEST_LEN], int64_t now_ms)
{
        if (!converged) {
                q->armed = false;
                return;
        }
        if (quiet)
                return;
        q->armed = true;
        memcpy(q->digest, digest, QUIET_DIGEST_LEN);
        q->full_pass_ms = now_ms;
}
