/*
 * gitcd repair: a person's answer to a cluster frozen because its members
 * were found holding different data (docs/consistency.md): replace a member
 * of the minority from the majority, or compare every member again.
 *
 * The command only records the request (state/consistency.h, audited with
 * the user who asked); the reconciler judges and carries it out, exactly
 * as for a spec.repair commit (reconciler/consistency.c), and refuses it
 * there when the member is not in the minority, the majority is not a
 * quorum of the voters, or another change of the cluster runs. As `gitcd
 * recover` does, it waits for the `gitcd run` that holds the state, or
 * takes the state's lock and runs the reconciler's passes for the cluster
 * itself on the target the cluster runs on, until the repair ended and the
 * cluster converged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/request.h"
#include "cli/runner.h"
#include "reconciler/consistency.h"
#include "state/consistency.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd repair NS/NAME --replace MEMBER | --recheck [options]\n\n"
    "Repair a cluster frozen because its members hold different data (gitcd's\n"
    "check of every member's hash, or etcd's CORRUPT alarm). `gitcd status\n"
    "NS/NAME` names the minority and the command to run. Nothing voluntary\n"
    "happens to a frozen cluster until a repair proves every member agrees.\n\n";

static const char footer_text[] =
    "\nThe freeze lifts only when a check after the repair finds every member\n"
    "agreeing; gitcd then disarms etcd's CORRUPT alarms. Every repair is audited\n"
    "with who asked (gitcd log --action repair.succeeded). The same can be\n"
    "committed as spec.repair: {replace: MEMBER, token: T} (acted on once).\n\n"
    "Exit status: 0 repaired (and converged, when this command did the work);\n"
    "1 refused, failed or not done in time; 64 bad usage.\n";

/* The repair record id: 1 still running, 0 finished (printed), -errno. */
static int report(state_db *db, const char *cluster, int64_t id, bool *ret_ok)
{
        state_repair_list l = {0};
        int r = state_repair_list_for(db, cluster, 0, &l);
        if (r < 0)
                return r;
        r = -ENOENT;
        for (size_t i = 0; i < l.n; i++) {
                const state_repair *rep = l.items[i];
                if (rep->id != id)
                        continue;
                if (streq(rep->result, "running")) {
                        r = 1;
                        break;
                }
                *ret_ok = streq(rep->result, "succeeded");
                if (*ret_ok && rep->member)
                        printf("repair %lld of %s succeeded: %s replaced%s%s (its data "
                               "discarded), every member agrees\n",
                               (long long)id, rep->cluster, rep->member,
                               rep->replacement ? " by " : "",
                               rep->replacement ? rep->replacement : "");
                else if (*ret_ok)
                        printf("repair %lld of %s succeeded: every member agrees\n", (long long)id,
                               rep->cluster);
                else
                        fprintf(stderr, "gitcd repair: repair %lld %s: %s\n", (long long)id,
                                rep->result, rep->error ? rep->error : "");
                r = 0;
                break;
        }
        state_repair_list_release(&l);
        return r;
}

static const request_kind repair_kind = {
    .prog = "gitcd repair",
    .noun = "repair",
    .undone = "finish its repair",
    .blocked_fails = true,
    .report = report,
};

/* Record the repair, then see it through unless --no-wait. */
static int request(request_ctx *ctx, const char *cluster, const char *member, bool wait,
                   int64_t timeout_ms)
{
        _cleanup_free_ char *who = cli_who_asks("gitcd repair");
        int64_t id = 0;
        int r = consistency_repair_request(ctx->db, cluster, member, who, now_wall_ms(), &id);
        if (r < 0) {
                request_record_failed(&repair_kind, r);
                return EXIT_FAIL;
        }
        if (member)
                printf("repair %lld of %s (replace %s) requested by %s\n", (long long)id, cluster,
                       member, who);
        else
                printf("repair %lld of %s (recheck) requested by %s\n", (long long)id, cluster,
                       who);
        if (!wait)
                return EXIT_OK;
        return request_see_through(&repair_kind, ctx, cluster, id, timeout_ms);
}

int cmd_repair(int argc, char **argv)
{
        runner_flags f = {0};
        const char *member = NULL, *config = NULL;
        bool recheck = false, wait = true;
        int64_t timeout_ms = 10 * 60 * 1000;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_STRING,
             .name = "replace",
             .arg = "MEMBER",
             .dest = &member,
             .help = "replace MEMBER, a member of the minority, from the\n"
                     "majority: it is removed, its data discarded, and a\n"
                     "new member joins as a learner while a member of the\n"
                     "majority leads; refused when MEMBER is not in the\n"
                     "minority, when the majority is not a quorum of the\n"
                     "voters, or while another change of the cluster runs"},
            {.kind = CLI_OPT_SET,
             .name = "recheck",
             .dest = &recheck,
             .help = "compare every member's data again (after a repair by\n"
                     "hand, or for etcd's CORRUPT alarm)"},
            REQUEST_WAIT_ROWS(&wait, &timeout_ms),
            REQUEST_OPTION_ROWS(&config),
        };
        const cli_command cmd = {.prog = repair_kind.prog,
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .shared = &f};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind + 1 != argc || !state_cluster_name_valid(argv[optind]) || !member == !recheck) {
                fprintf(stderr, "gitcd repair: name one cluster (NS/NAME) and exactly one of "
                                "--replace MEMBER or --recheck\n");
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        if (member && (!*member || strchr(member, ',') || strlen(member) > 63)) {
                fprintf(stderr, "gitcd repair: --replace takes a member's name (gitcd status "
                                "lists them)\n");
                return EXIT_USAGE;
        }
        const char *cluster = argv[optind];
        request_ctx ctx;
        status = request_open(&repair_kind, config, &f, cluster, &ctx);
        if (status == EXIT_OK)
                status = request(&ctx, cluster, member, wait, timeout_ms);
        request_close(&ctx);
        return status;
}
