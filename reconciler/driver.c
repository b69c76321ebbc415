/*
 * The driver loop shared by `gitcd apply` and `gitcd run`; see driver.h.
 *
 * A revision is taken in whole: its commit is recorded, every valid
 * EtcdCluster in it is offered to the reconciler (which records accepted
 * specs and refuses forbidden transitions), and invalid documents are
 * audited as `spec.rejected`. Since an invalid document may be an existing
 * cluster that failed to parse, a revision with errors never orphans or
 * prunes anything.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "reconciler/driver.h"
#include "api/spec.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define MAX_PASSES_PER_STEP 64

struct driver {
        driver_opts opts;
        reconciler *rec;
        char **clusters; /* "ns/name" of the current revision */
        size_t n_clusters;
        char commit[41];
        bool have_revision;
        char *last_error;
        pass_result *last; /* last result per cluster, to report changes only */
};

static void set_error(driver *d, const char *fmt, ...) _printf_(2, 3);
static void set_error(driver *d, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        free(d->last_error);
        d->last_error = xvasprintf(fmt, ap);
        va_end(ap);
}

const char *driver_last_error(const driver *d)
{
        return d->last_error ? d->last_error : "";
}

int driver_new(const driver_opts *opts, driver **ret)
{
        if (!opts || !opts->db || !opts->target || !opts->src)
                return -EINVAL;
        driver *d = XNEW(driver);
        d->opts = *opts;
        reconciler_opts ro = {.db = opts->db,
                              .target = opts->target,
                              .state_dir = opts->state_dir,
                              .etcd_dir = opts->etcd_dir};
        int k = reconciler_new(&ro, &d->rec);
        if (k < 0) {
                free(d);
                return k;
        }
        *ret = d;
        return 0;
}

static void clusters_release(driver *d)
{
        for (size_t i = 0; i < d->n_clusters; i++)
                free(d->clusters[i]);
        free(d->clusters);
        free(d->last);
        d->clusters = NULL;
        d->last = NULL;
        d->n_clusters = 0;
}

void driver_free(driver *d)
{
        if (!d)
                return;
        clusters_release(d);
        reconciler_free(d->rec);
        free(d->last_error);
        free(d);
}

size_t driver_cluster_count(const driver *d)
{
        return d->n_clusters;
}

const char *driver_cluster_name(const driver *d, size_t i)
{
        return i < d->n_clusters ? d->clusters[i] : NULL;
}

static void record_revision(driver *d, const source_revision *rev)
{
        if (!rev->commit_id[0])
                return;
        state_revision sr = {
            .repository = rev->repository,
            .ref = rev->ref,
            .commit = (char *)rev->commit_id,
            .author_name = rev->author.name,
            .author_email = rev->author.email,
            .commit_time_ms = rev->committer.time * 1000,
            .message = rev->message,
            .fetched_ms = now_wall_ms(),
            .signature_verified = rev->signature_verified,
            .signature_key = rev->signer_fingerprint,
        };
        _cleanup_free_ char *committer =
            xasprintf("%s <%s>", rev->committer.name ? rev->committer.name : "",
                      rev->committer.email ? rev->committer.email : "");
        sr.committer = committer;
        if (state_revision_record(d->opts.db, &sr) < 0)
                log_warn("could not record revision %s: %s", rev->commit_id, state_last_error());
}

static void audit_event(driver *d, const char *cluster, const char *action, const char *reason,
                        const source_revision *rev, const char *outcome)
{
        _cleanup_free_ char *author =
            rev && rev->author.name
                ? xasprintf("%s <%s>", rev->author.name, rev->author.email ? rev->author.email : "")
                : NULL;
        state_audit_event ev = {
            .time_ms = now_wall_ms(),
            .cluster = (char *)cluster,
            .commit = rev && rev->commit_id[0] ? (char *)rev->commit_id : NULL,
            .author = author,
            .action = (char *)action,
            .reason = (char *)reason,
            .outcome = (char *)outcome,
        };
        (void)state_audit_append(d->opts.db, &ev, NULL);
}

/* A cluster no longer in the source: reported once; with prune, its members stop. */
static void report_orphan(driver *d, const char *cluster, const source_revision *rev)
{
        state_cluster *sc = NULL;
        _cleanup_free_ char *phase = NULL;
        if (state_cluster_get(d->opts.db, cluster, &sc) == 0)
                phase = xstrdup_null(sc->phase);
        state_cluster_free(sc);
        if (d->opts.prune) {
                if (phase && streq(phase, "Pruned"))
                        return;
                log_info("%s: removed from the source; pruning (members stopped, data kept)",
                         cluster);
                (void)reconciler_prune(d->rec, cluster);
                return;
        }
        if (phase && (streq(phase, "Orphaned") || streq(phase, "Pruned")))
                return;
        log_warn("%s: removed from the source; left running (orphaned; --prune stops it)", cluster);
        (void)state_cluster_set_phase(d->opts.db, cluster, "Orphaned", now_wall_ms());
        audit_event(d, cluster, "cluster.orphaned", "removed from the source; members keep running",
                    rev, "success");
}

/* Whether a cluster was taken in before (for spec_refuse_unsupported's message). */
static bool cluster_exists(const char *id, void *userdata)
{
        driver *d = userdata;
        state_cluster *sc = NULL;
        bool found = state_cluster_get(d->opts.db, id, &sc) == 0;
        state_cluster_free(sc);
        return found;
}

int driver_sync(driver *d, diag_list *diags)
{
        _cleanup_(source_revision_freep) source_revision *rev = NULL;
        int k = source_fetch(d->opts.src, &rev);
        if (k == -EPERM && rev) {
                /* A head refused before and unchanged since: already recorded and audited. */
                if (rev->refusal_repeated)
                        return -EPERM;
                record_revision(d, rev);
                if (!d->have_revision || !streq(d->commit, rev->commit_id)) {
                        _cleanup_free_ char *why =
                            xasprintf("commit %s refused: %s", rev->commit_id,
                                      rev->refusal            ? rev->refusal
                                      : rev->signature_reason ? rev->signature_reason
                                                              : "signature not verified");
                        audit_event(d, NULL, "revision.rejected", why, rev, "rejected");
                        log_error("%s; the last good revision stays in force", why);
                        set_error(d, "%s", why);
                }
                return -EPERM;
        }
        if (k < 0) {
                set_error(d, "%s", source_last_error(d->opts.src));
                return k;
        }
        bool same = d->have_revision && rev->commit_id[0] && streq(d->commit, rev->commit_id);
        if (same)
                return 0;
        record_revision(d, rev);
        /* Later heads of this ref must descend from it (rollback protection). */
        if (source_mark_applied(d->opts.src, rev) < 0)
                log_warn("%s", source_last_error(d->opts.src));

        cluster_set set = {0};
        diag_list local = DIAG_LIST_INIT;
        bool errors = false;
        for (size_t i = 0; i < rev->n_files; i++)
                if (spec_load_buffer(rev->files[i].path, rev->files[i].content, rev->files[i].len,
                                     &set, &local) < 0)
                        errors = true;
        if (spec_check_duplicates(&set, &local) < 0)
                errors = true;
        if (spec_refuse_unsupported(&set, cluster_exists, d, &local) < 0)
                errors = true;
        if (spec_refuse_for_target(&set, d->opts.target->ops->caps & TARGET_CAP_HOSTS_INVENTORY,
                                   &local) < 0)
                errors = true;
        for (size_t i = 0; i < rev->n_notes; i++)
                diag_add(&local, DIAG_NOTE, rev->notes[i].path, 0, 0, "skipped: %s",
                         rev->notes[i].reason);
        if (errors) {
                strbuf why = STRBUF_INIT;
                for (size_t i = 0; i < local.n; i++)
                        if (local.items[i].severity == DIAG_ERROR) {
                                _cleanup_free_ char *line = diag_format(&local.items[i]);
                                if (why.len)
                                        sb_append(&why, "; ");
                                sb_append(&why, line);
                        }
                audit_event(d, NULL, "spec.rejected", sb_str(&why), rev, "rejected");
                sb_release(&why);
        }
        diag_move(diags, &local);

        reconcile_origin origin = {.commit = rev->commit_id[0] ? rev->commit_id : NULL};
        _cleanup_free_ char *author =
            rev->author.name
                ? xasprintf("%s <%s>", rev->author.name, rev->author.email ? rev->author.email : "")
                : NULL;
        origin.author = author;

        /* A cluster with a duplicate definition is not offered at all. */
        clusters_release(d);
        d->clusters = xcalloc(set.n + 1, sizeof(char *));
        d->last = xcalloc(set.n + 1, sizeof(pass_result));
        for (size_t i = 0; i < set.n; i++) {
                _cleanup_free_ char *id = etcd_cluster_id(set.items[i]);
                bool dup = false;
                for (size_t j = 0; j < set.n; j++)
                        if (j != i) {
                                _cleanup_free_ char *other = etcd_cluster_id(set.items[j]);
                                dup = dup || streq(id, other);
                        }
                if (dup)
                        continue;
                if (d->opts.claim &&
                    !d->opts.claim(id, DRIVER_CLAIM_DEFINE, d->opts.claim_userdata))
                        continue;
                k = reconciler_offer(d->rec, set.items[i], &origin);
                if (k < 0) {
                        log_error("%s: cannot record the desired spec: %s", id, state_last_error());
                        continue;
                }
                d->clusters[d->n_clusters++] = xstrdup(id);
        }

        if (!errors) {
                char **orphans = NULL;
                size_t n = 0;
                if (reconciler_orphans(d->rec, &set, &orphans, &n) >= 0) {
                        for (size_t i = 0; i < n; i++) {
                                if (!d->opts.claim || d->opts.claim(orphans[i], DRIVER_CLAIM_ORPHAN,
                                                                    d->opts.claim_userdata))
                                        report_orphan(d, orphans[i], rev);
                                free(orphans[i]);
                        }
                        free(orphans);
                }
        }
        cluster_set_release(&set);
        snprintf(d->commit, sizeof(d->commit), "%s", rev->commit_id);
        d->have_revision = true;
        return errors ? -EINVAL : 1;
}

int driver_step(driver *d, driver_summary *ret)
{
        driver_summary sum = {.clusters = (int)d->n_clusters, .wait_ms = 1000};
        for (size_t i = 0; i < d->n_clusters; i++) {
                pass_result res = {0};
                int k = 0;
                if (d->opts.claim &&
                    !d->opts.claim(d->clusters[i], DRIVER_CLAIM_PASS, d->opts.claim_userdata))
                        continue;
                for (int n = 0; n < MAX_PASSES_PER_STEP; n++) {
                        int64_t t0 = now_mono_ms();
                        k = reconciler_pass(d->rec, d->clusters[i], &res);
                        if (k >= 0 && d->opts.pass_done)
                                d->opts.pass_done(d->clusters[i], &res, now_mono_ms() - t0,
                                                  d->opts.pass_done_userdata);
                        if (k < 0 || res.outcome != PASS_PROGRESSED)
                                break;
                        if (d->opts.progress)
                                d->opts.progress(d->clusters[i], &res, d->opts.userdata);
                }
                if (k < 0) {
                        log_error("%s: pass failed: %s", d->clusters[i], res.message);
                        res.outcome = PASS_WAITING;
                        res.poll_ms = 1000;
                }
                pass_result *last = &d->last[i];
                if (d->opts.progress &&
                    (last->outcome != res.outcome || !streq(last->message, res.message)))
                        d->opts.progress(d->clusters[i], &res, d->opts.userdata);
                *last = res;
                switch (res.outcome) {
                case PASS_CONVERGED:
                        sum.converged++;
                        break;
                case PASS_FAILED:
                case PASS_BLOCKED:
                        sum.failed++;
                        break;
                default:
                        sum.waiting++;
                        if (res.poll_ms > 0 && res.poll_ms < sum.wait_ms)
                                sum.wait_ms = res.poll_ms;
                        if (res.outcome == PASS_PROGRESSED)
                                sum.wait_ms = 0;
                }
        }
        *ret = sum;
        return 0;
}
