/*
 * gitcd recover: ask for a disaster recovery of a cluster that lost quorum
 * for good, from a surviving member or a recorded snapshot.
 *
 * The command only records the request (state/recovery.h, audited with the
 * user who asked); the reconciler carries it out, exactly as it does for a
 * spec.recovery commit (reconciler/recovery.c), and refuses it there when
 * quorum is not lost, the member is unreachable or has no data, or the
 * snapshot is missing or corrupt. When a `gitcd run` holds the state, it
 * does the work and this command waits for the record's result; otherwise
 * this command takes the state's lock and runs the reconciler's passes for
 * the cluster itself, until the recovery ended and the cluster converged,
 * on the target the cluster runs on (runner_open_cluster_target). The
 * state database and the target's settings the command line leaves out
 * come from the daemon's configuration file (--config, or
 * /etc/gitcd/gitcd.yaml when present).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/request.h"
#include "cli/runner.h"
#include "reconciler/recovery.h"
#include "snapshots/schedule.h"
#include "state/recovery.h"
#include "state/restores.h"
#include "state/snapshots.h"
#include "api/spec.h"
#include "api/versions.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

/*
 * The source of the recovery: a snapshot id (latest: 0, chosen later) and
 * the bump, which goes only with a snapshot. 0, or -EINVAL with why printed.
 */
static int parse_source(const char *member, const char *snapshot, const char *bump_text,
                        int64_t *ret_snapshot_id, revision_bump *ret_bump)
{
        if (bump_text && member) {
                fprintf(stderr, "gitcd recover: --bump-revision goes with --from-snapshot: a "
                                "recovery from a member keeps that member's data and revision\n");
                return -EINVAL;
        }
        if (bump_text && revision_bump_parse(bump_text, ret_bump) < 0) {
                fprintf(stderr,
                        "gitcd recover: --bump-revision takes a number of revisions (0 to %lld; "
                        "0 or off: none) or auto, not \"%s\"\n",
                        (long long)GITCD_MAX_REVISION_BUMP, bump_text);
                return -EINVAL;
        }
        bool latest = snapshot && streq(snapshot, "latest");
        if (snapshot && !latest) {
                char *end = NULL;
                *ret_snapshot_id = strtoll(snapshot, &end, 10);
                if (!end || *end || *ret_snapshot_id <= 0) {
                        fprintf(stderr, "gitcd recover: --from-snapshot takes a snapshot id "
                                        "(gitcd snapshot list) or latest\n");
                        return -EINVAL;
                }
        }
        return 0;
}

static const char usage_text[] =
    "usage: gitcd recover NS/NAME (--from-member NAME | --from-snapshot ID|latest)\n"
    "                     [options]\n\n"
    "Recover a cluster that lost quorum for good (its missing members' data is\n"
    "gone). `gitcd status NS/NAME` shows each member's raft index and revision\n"
    "and proposes the safest source. gitcd refuses while quorum is not lost.\n\n";

static const char footer_text[] =
    "\nThe other members' data is kept aside (renamed; on Kubernetes the volume\n"
    "is kept) until the cluster is healthy again. Every recovery is audited\n"
    "with who asked, from what, and the revision recovered to (gitcd log);\n"
    "a bump is recorded with how it was sized (gitcd status).\n\n"
    "Exit status: 0 recovered (and converged, when this command did the work);\n"
    "1 refused, failed or not done in time; 64 bad usage.\n";

/*
 * --from-snapshot latest: the restore candidate of cluster (the newest
 * snapshot a restore drill proved, else the newest no drill found wanting;
 * never one that failed its drill), said aloud. A snapshot named by id
 * that failed its drill is taken, with a warning. -ENOENT when there is
 * no candidate.
 */
static int pick_snapshot(state_db *db, const char *cluster, bool latest, int64_t *id)
{
        state_snapshot_list l = {0};
        int r = state_snapshot_list_for(db, cluster, 0, &l);
        if (r < 0) {
                fprintf(stderr, "gitcd recover: %s\n", state_last_error());
                return r;
        }
        const state_snapshot *s = NULL;
        if (latest) {
                s = snapshot_restore_candidate(&l);
                if (!s)
                        fprintf(stderr,
                                "gitcd recover: %s has no snapshot to restore: none succeeded "
                                "and is kept, or each failed its restore drill (gitcd snapshot "
                                "list %s; name one by id to restore it anyway)\n",
                                cluster, cluster);
        } else {
                for (size_t i = 0; i < l.n && !s; i++)
                        if (l.items[i]->id == *id)
                                s = l.items[i];
        }
        if (s && latest) {
                char when[40];
                format_rfc3339(s->finished_ms, when, sizeof(when));
                printf("latest: snapshot %lld of %s, revision %lld, taken %s, %s\n",
                       (long long)s->id, cluster, (long long)s->revision, when,
                       streq_ptr(s->verify_result, "verified")
                           ? "proven to restore by its drill"
                           : "not proven by a restore drill (none was)");
        } else if (s && streq_ptr(s->verify_result, "verify-failed")) {
                fprintf(stderr,
                        "gitcd recover: warning: snapshot %lld failed its restore drill: %s\n",
                        (long long)s->id, s->verify_message ? s->verify_message : "");
        }
        r = latest && !s ? -ENOENT : 0;
        if (s)
                *id = s->id;
        state_snapshot_list_release(&l);
        return r;
}

/*
 * The running or finished record (the id names it; cluster only for the
 * shape request_kind asks): 1 still running, 0 finished (printed), -errno.
 */
static int report(state_db *db, const char *cluster, int64_t id, bool *ret_ok)
{
        (void)cluster;
        state_recovery_list l = {0};
        int r = state_recovery_list_for(db, NULL, 0, &l);
        if (r < 0)
                return r;
        r = -ENOENT;
        for (size_t i = 0; i < l.n; i++) {
                const state_recovery *rec = l.items[i];
                if (rec->id != id)
                        continue;
                if (streq(rec->result, "running")) {
                        r = 1;
                        break;
                }
                *ret_ok = streq(rec->result, "succeeded");
                _cleanup_free_ char *bumped = NULL;
                state_restore_list rl = {0};
                if (*ret_ok && state_restore_list_for(db, rec->cluster, 0, &rl) >= 0)
                        for (size_t j = 0; j < rl.n && !bumped; j++)
                                if (rl.items[j]->recovery_id == id && rl.items[j]->bump > 0)
                                        bumped = xasprintf(", bumped by %lld to %lld",
                                                           (long long)rl.items[j]->bump,
                                                           (long long)rl.items[j]->revision);
                state_restore_list_release(&rl);
                if (*ret_ok)
                        printf("recovery %lld of %s from %s %s succeeded: revision %lld%s\n",
                               (long long)id, rec->cluster, rec->source_kind, rec->source,
                               (long long)rec->revision, bumped ? bumped : "");
                else
                        fprintf(stderr, "gitcd recover: recovery %lld %s: %s\n", (long long)id,
                                rec->result, rec->error ? rec->error : "");
                r = 0;
                break;
        }
        state_recovery_list_release(&l);
        return r;
}

/*
 * A bump the cluster's etcd cannot make is refused before anything is
 * recorded (the reconciler refuses it too, should the spec change since).
 * 0, or -EPROTO with the message printed.
 */
static int check_bump(state_db *db, const char *cluster, const revision_bump *bump)
{
        if (bump->mode != BUMP_AUTO && bump->amount == 0)
                return 0;
        state_cluster *sc = NULL;
        if (state_cluster_get(db, cluster, &sc) < 0)
                return 0; /* an unknown cluster: the request says so */
        etcd_cluster *c = spec_from_json_text(state_cluster_spec_json(sc), cluster);
        _cleanup_free_ char *first = NULL;
        int r = 0;
        if (c && !version_has_restore_bump(&c->ver, &first) && first) {
                fprintf(stderr,
                        "gitcd recover: --bump-revision: etcd %s cannot bump the revision of a "
                        "restore (its restore tool takes --bump-revision from %s on); use "
                        "--bump-revision 0, and restart every client that watches %s by hand "
                        "afterwards\n",
                        c->version, first, cluster);
                r = -EPROTO;
        }
        etcd_cluster_free(c);
        state_cluster_free(sc);
        return r;
}

static const request_kind recover_kind = {
    .prog = "gitcd recover",
    .noun = "recovery",
    .undone = "recover",
    .report = report,
};

/*
 * Name the snapshot (latest: the restore candidate) and check the bump
 * before anything is recorded, record the recovery, then see it through
 * unless --no-wait.
 */
static int request(request_ctx *ctx, const char *cluster, const char *member, int64_t snapshot_id,
                   bool latest, const revision_bump *bump, bool wait, int64_t timeout_ms)
{
        if ((latest || snapshot_id) && pick_snapshot(ctx->db, cluster, latest, &snapshot_id) < 0)
                return EXIT_FAIL;
        if (bump && check_bump(ctx->db, cluster, bump) < 0)
                return EXIT_FAIL;
        _cleanup_free_ char *who = cli_who_asks("gitcd recover");
        int64_t id = 0;
        int r =
            recovery_request(ctx->db, cluster, member, snapshot_id, bump, who, now_wall_ms(), &id);
        if (r < 0) {
                request_record_failed(&recover_kind, r);
                return EXIT_FAIL;
        }
        if (member)
                printf("recovery %lld of %s from member %s requested by %s\n", (long long)id,
                       cluster, member, who);
        else
                printf("recovery %lld of %s from snapshot %lld requested by %s\n", (long long)id,
                       cluster, (long long)snapshot_id, who);
        if (!wait)
                return EXIT_OK;
        return request_see_through(&recover_kind, ctx, cluster, id, timeout_ms);
}

int cmd_recover(int argc, char **argv)
{
        runner_flags f = {0};
        const char *member = NULL, *snapshot = NULL, *config = NULL, *bump_text = NULL;
        bool wait = true;
        int64_t timeout_ms = 10 * 60 * 1000;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_STRING,
             .name = "from-member",
             .arg = "NAME",
             .dest = &member,
             .help = "restart NAME alone with --force-new-cluster (once;\n"
                     "never left in its flags), then grow the cluster back\n"
                     "with new members joining as learners"},
            {.kind = CLI_OPT_STRING,
             .name = "from-snapshot",
             .arg = "ID",
             .dest = &snapshot,
             .help = "restore snapshot ID (`gitcd snapshot list`) as the\n"
                     "seed of a new member, then grow back the same way;\n"
                     "latest: the restore candidate, the newest snapshot a\n"
                     "restore drill proved (else the newest no drill found\n"
                     "wanting; never one that failed its drill)"},
            {.kind = CLI_OPT_STRING,
             .name = "bump-revision",
             .arg = "N|auto|off",
             .dest = &bump_text,
             .help = "with --from-snapshot: raise the restored revision by\n"
                     "N and mark every revision up to it compacted, so\n"
                     "every watcher that saw a later revision gets\n"
                     "\"revision compacted\" and lists again (a Kubernetes\n"
                     "API server's informers); auto sizes it from the\n"
                     "cluster's write rate, at least 1000000000; 0 or off:\n"
                     "none. Default: the cluster's\n"
                     "spec.recovery.bumpRevision, else its role's (auto\n"
                     "for spec.role kubernetes-control-plane, else none).\n"
                     "etcd 3.4.27, 3.5.10 or later (refused before)"},
            REQUEST_WAIT_ROWS(&wait, &timeout_ms),
            REQUEST_OPTION_ROWS(&config),
        };
        const cli_command cmd = {.prog = recover_kind.prog,
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .shared = &f};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind + 1 != argc || !state_cluster_name_valid(argv[optind]) || !member == !snapshot) {
                fprintf(stderr, "gitcd recover: name one cluster (NS/NAME) and exactly one of "
                                "--from-member or --from-snapshot\n");
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        const char *cluster = argv[optind];
        revision_bump bump = {0};
        int64_t snapshot_id = 0;
        bool latest = snapshot && streq(snapshot, "latest");
        if (parse_source(member, snapshot, bump_text, &snapshot_id, &bump) < 0)
                return EXIT_USAGE;

        request_ctx ctx;
        status = request_open(&recover_kind, config, &f, cluster, &ctx);
        if (status == EXIT_OK)
                status = request(&ctx, cluster, member, snapshot_id, latest,
                                 bump_text ? &bump : NULL, wait, timeout_ms);
        request_close(&ctx);
        return status;
}
