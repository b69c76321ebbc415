/*
 * Declared one-off snapshots (snapshots/declared.h).
 *
 * Design: a document asks for one snapshot, so "taken" must survive
 * everything: the request row is keyed by the document's kind, namespace,
 * name and a hash of what it asks, and the transaction that begins the
 * snapshot record marks it taken (state_snapshot_begin_declared). A restart,
 * a crash mid-snapshot (the record is then closed as failed), or the same
 * document read again at every revision never takes a second one; editing
 * the document is a new request. The destination is kept with the request
 * in the normalized location form, since it is not part of the cluster's
 * spec.
 */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "api/spec.h"
#include "snapshots/declared.h"
#include "util/log.h"
#include "util/xalloc.h"

int snapshot_requests_record(state_db *db, const char *cluster, const etcd_cluster *c,
                             int64_t now_ms)
{
        assert(db && cluster && c);
        state_snapshot_request *reqs = xcalloc(c->n_declared + 1, sizeof(*reqs));
        for (size_t i = 0; i < c->n_declared; i++) {
                const declared_snapshot *ds = &c->declared[i];
                reqs[i].object = ds->object;
                reqs[i].identity = ds->identity;
                if (ds->destination.kind != DEST_NONE) {
                        json_t *j = spec_location_to_json(&ds->destination);
                        reqs[i].destination_json = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
                        json_decref(j);
                }
        }
        int r = state_snapshot_requests_sync(db, cluster, reqs, c->n_declared, now_ms);
        for (size_t i = 0; i < c->n_declared; i++)
                free(reqs[i].destination_json);
        free(reqs);
        if (r > 0)
                log_info("%s: %d declared snapshot%s to take", cluster, r, r == 1 ? "" : "s");
        return r;
}

int snapshot_declared_job(state_db *db, struct target *t, const state_snapshot_request *q,
                          const char *state_dir, snapshot_job **ret, char **ret_error)
{
        assert(db && q && ret);
        snapshot_job *job = NULL;
        int r =
            snapshot_job_from_state(db, t, q->cluster, "declared", 0, state_dir, &job, ret_error);
        if (r < 0)
                return r;
        job->request_id = q->id;
        job->declared_by = xstrdup(q->object);
        job->reason = xasprintf("snapshot declared by %s", q->object);
        if (q->destination_json) {
                json_t *j = json_loads(q->destination_json, 0, NULL);
                storage_location loc = {0};
                r = j ? spec_location_from_json(j, &loc) : -EINVAL;
                json_decref(j);
                if (r < 0) {
                        *ret_error =
                            xasprintf("%s: the recorded destination cannot be read", q->object);
                        snapshot_job_free(job);
                        return -EBADMSG;
                }
                snapshot_job_set_destination(job, t, &loc);
                storage_location_release(&loc);
        }
        *ret = job;
        return 0;
}
