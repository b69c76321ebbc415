/*
 * gitcd plan: show what taking in a source's revision would change,
 * without touching any etcd, target or state.
 *
 * Design decision: the state database is opened read-only (a missing one
 * means nothing was applied yet), and a Git source is mirrored into a
 * temporary cache removed on exit unless --cache-dir names one, so running
 * a plan in CI or beside a running daemon writes nothing of gitcd's.
 *
 * With --target kubernetes the plan also reads the API server (GET, LIST
 * and dry-run applies only: plan/drift.h) and reports, per cluster taken
 * in, how the live objects differ from what gitcd would apply. Without it
 * no target is contacted. With --target hosts the plan takes in only
 * clusters with spec.hosts (as apply would) and lists, per machine, the
 * files and commands apply writes and runs there, computed from the spec:
 * the machines are not contacted (the output says so).
 */
#include <assert.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/plan-source.h"
#include "cli/runner.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "plan/drift.h"
#include "plan/plan.h"
#include "plan/revdiff.h"
#include "reconciler/timeouts.h"
#include "state/preflights.h"
#include "targets/registry.h"
#include "api/spec.h"
#include "util/escape.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

static const char usage_text[] =
    "usage: gitcd plan --source SRC [--ref R] [--path P] [--state DB]\n"
    "                  [-o text|json] [--detailed-exitcode] [--since REV] [options]\n"
    "                  [--target kubernetes [--kubeconfig F] [--context C]]\n"
    "                  [--target hosts]\n\n"
    "Compare the EtcdClusters at SRC's revision with what the state store says\n"
    "gitcd has accepted, and show every cluster to create, change or delete,\n"
    "field by field, with the steps that will follow, and every rejected\n"
    "document or transition with its location. Nothing is touched: the state\n"
    "database is only read (a missing one means nothing was applied yet), no\n"
    "etcd member is contacted, and no target unless --target kubernetes asks\n"
    "for drift (below).\n\n";

static const char footer_text[] =
    "\n"
    "With --target kubernetes the plan also reads the API server (GET, LIST and\n"
    "dry-run applies only) and reports per cluster how the live objects differ\n"
    "from what the Kubernetes target would apply (with a state store: also the\n"
    "tls.provider auto Secrets issued in its folder and the recorded members'\n"
    "PVCs and Pods): missing, drift: <fields>, not managed by gitcd, would\n"
    "prune; and the live Pods and PVCs against spec.replicas and spec.version,\n"
    "with a warning when a zone or node of the Pods' nodes (GET nodes) holds\n"
    "enough members that losing it loses quorum (docs/kubernetes.md).\n\n"
    "With --target hosts the plan takes in only clusters with spec.hosts, as\n"
    "`gitcd apply --target hosts` would, and lists for each cluster to create\n"
    "or change, machine by machine, the files apply writes there and the\n"
    "commands it runs (with `sudo -n` for SSH users other than root). They\n"
    "are computed from the spec: no machine is contacted (docs/hosts.md).\n"
    "For a cluster gitcd has no records of it also says what apply reads\n"
    "first on each machine and how it adopts a cluster already running there\n"
    "(or refuses) instead of bootstrapping; the reading happens at apply.\n"
    "It also shows each machine's last preflight (disk latency, free space,\n"
    "clock offset, peer RTT and the verdict) as the state store recorded it,\n"
    "and each cluster's etcd heartbeat interval and election timeout: the\n"
    "spec's, derived from the measured peer RTT (with the measurement), or\n"
    "etcd's defaults.\n\n"
    "A Git source is mirrored into a temporary folder removed on exit, unless\n"
    "--cache-dir names a cache to reuse. --etcd-dir and the --hosts-* flags are\n"
    "accepted and ignored: only --target kubernetes contacts a target.\n\n"
    "The operator's policy (docs/operating.md) is applied as apply applies it:\n"
    "a cluster it refuses is rejected with the policy's line (file:line:col),\n"
    "and a change that waits for approvals is held (?) with how many trusted\n"
    "signers it has and needs, counted in the source's signed history.\n\n"
    "Exit status: 0 no errors (with --detailed-exitcode: and no changes or drift);\n"
    "1 errors, rejections, an object not managed by gitcd, or an unreadable API\n"
    "server; 2 changes or drift pending (only with --detailed-exitcode);\n"
    "64 bad usage.\n";

static void members_release(state_member_list *m, size_t n)
{
        for (size_t i = 0; m && i < n; i++)
                state_member_list_release(&m[i]);
        free(m);
}

/* Read what the state store has accepted; -ENOENT (no database) is "nothing yet". */
static int read_applied(const char *path, state_cluster_list *ret, state_member_list **ret_members,
                        state_verdict_list *ret_verdicts, bool *ret_exists, state_db **ret_db)
{
        state_db *db = NULL;
        *ret_exists = false;
        *ret_members = NULL;
        *ret_db = NULL;
        if (!path_exists(path))
                return 0;
        int k = state_open(path, STATE_OPEN_READ_ONLY, &db);
        if (k == -ENOENT)
                return 0;
        if (k < 0) {
                fprintf(stderr, "gitcd plan: %s\n", state_last_error());
                return k;
        }
        k = state_cluster_list_all(db, ret);
        if (k < 0)
                fprintf(stderr, "gitcd plan: %s\n", state_last_error());
        /* Each cluster's members: the versions they run and the order they roll in. */
        if (k >= 0) {
                *ret_members = xcalloc(ret->n + 1, sizeof(state_member_list));
                for (size_t i = 0; i < ret->n; i++)
                        (void)state_member_list_for(db, ret->items[i]->name, false,
                                                    &(*ret_members)[i]);
                /* an upstream refused or held (spec.dependsOn); none in a store from before */
                if (state_verdict_list_get(db, NULL, ret_verdicts) < 0)
                        *ret_verdicts = (state_verdict_list){0};
        }
        /* kept open for the holds of each cluster (plan_input.db) */
        if (k >= 0)
                *ret_db = db;
        else
                state_close(db);
        *ret_exists = k >= 0;
        return k < 0 ? k : 0;
}

/*
 * A kind that runs members on the machines of spec.hosts (--target hosts):
 * for every cluster the plan creates or changes, what apply writes and runs
 * on each machine (target_plan_ops.machine_effects), as [{"cluster":
 * "ns/name", "action": "create", "machines": [{"address", "mode",
 * "effects": [...]}]}], from the definitions the plan took in.
 */
static json_t *machine_effects(const plan *p, const target_plan_ops *ops)
{
        json_t *out = json_array();
        for (size_t i = 0; i < p->n; i++) {
                const plan_item *it = &p->items[i];
                if (it->action != PLAN_CREATE && it->action != PLAN_UPDATE)
                        continue;
                const etcd_cluster *c = it->spec;
                if (!c || !c->hosts.set)
                        continue;
                json_t *machines = json_array();
                for (size_t m = 0; m < c->hosts.n; m++) {
                        char **l = ops->machine_effects(c, m);
                        json_t *e = json_array();
                        for (size_t k = 0; l[k]; k++)
                                json_array_append_new(e, json_string(l[k]));
                        strv_free(l);
                        json_t *mj =
                            json_pack("{s:s,s:s,s:o}", "address", c->hosts.items[m].address, "mode",
                                      host_mode_name(c->hosts.items[m].mode), "effects", e);
                        /* no records yet: apply may adopt what already runs there */
                        if (it->action == PLAN_CREATE && ops->machine_adoption) {
                                _cleanup_free_ char *a = ops->machine_adoption(c, m);
                                json_object_set_new(mj, "adoption", json_string(a));
                        }
                        json_array_append_new(machines, mj);
                }
                json_array_append_new(out, json_pack("{s:s,s:s,s:o}", "cluster", it->name, "action",
                                                     plan_action_name(it->action), "machines",
                                                     machines));
        }
        return out;
}

static void machine_effects_print(json_t *effects, const char *kind, FILE *out)
{
        if (json_array_size(effects) == 0)
                return;
        fprintf(out,
                "\nOn the machines (from the spec; no machine was contacted), "
                "`gitcd apply --target %s` would:\n",
                kind);
        size_t i, m, k;
        json_t *cl, *mach, *line;
        json_array_foreach(effects, i, cl)
        {
                fprintf(out, "  %s (%s):\n", json_string_value(json_object_get(cl, "cluster")),
                        json_string_value(json_object_get(cl, "action")));
                json_array_foreach(json_object_get(cl, "machines"), m, mach)
                {
                        fprintf(out, "    %s (%s):\n",
                                json_string_value(json_object_get(mach, "address")),
                                json_string_value(json_object_get(mach, "mode")));
                        const char *adopt = json_string_value(json_object_get(mach, "adoption"));
                        if (adopt)
                                fprintf(out, "      - adoption: %s\n", adopt);
                        json_array_foreach(json_object_get(mach, "effects"), k, line)
                            fprintf(out, "      - %s\n", json_string_value(line));
                }
        }
}

/*
 * The last preflight of each machine of every cluster of the plan that
 * has spec.hosts, as the state store holds it (the hosts target's,
 * docs/hosts.md; no machine is contacted): [{"cluster", "machines":
 * [{"address", "preflight": {...} or null}]}]. NULL when the store holds
 * none of them (the preflight is off, or never ran).
 */
static json_t *machine_preflights(const plan *p, const state_preflight_list *known)
{
        json_t *out = json_array();
        bool any = false;
        for (size_t i = 0; i < p->n; i++) {
                const plan_item *it = &p->items[i];
                const etcd_cluster *c = it->spec;
                if (!c || !c->hosts.set)
                        continue;
                json_t *machines = json_array();
                for (size_t m = 0; m < c->hosts.n; m++) {
                        const host_spec *h = &c->hosts.items[m];
                        _cleanup_free_ char *key = xasprintf("%s:%d", h->address, h->ssh_port);
                        json_t *pf = json_null();
                        for (size_t k = 0; k < known->n; k++)
                                if (streq_ptr(known->items[k]->cluster, it->name) &&
                                    streq_ptr(known->items[k]->machine, key)) {
                                        json_decref(pf);
                                        pf = cli_preflight_json(known->items[k]);
                                        any = true;
                                }
                        json_array_append_new(machines, json_pack("{s:s,s:o}", "address",
                                                                  h->address, "preflight", pf));
                }
                json_array_append_new(
                    out, json_pack("{s:s,s:o}", "cluster", it->name, "machines", machines));
        }
        if (!any) {
                json_decref(out);
                return NULL;
        }
        return out;
}

/*
 * etcd's heartbeat and election timeouts of every cluster of the plan
 * that has spec.hosts (reconciler/timeouts.h): the spec's own, those
 * derived from the peer RTT the preflights measured (from the state
 * store, with the measurement they rest on), or etcd's defaults when
 * nothing was measured yet: [{"cluster", "from": "spec" | "derived" |
 * "default", "heartbeat_ms", "election_ms", "rtt_us"?, "measured"?}].
 */
static json_t *cluster_timeouts(const plan *p, state_db *db)
{
        json_t *out = json_array();
        for (size_t i = 0; i < p->n; i++) {
                const plan_item *it = &p->items[i];
                const etcd_cluster *c = it->spec;
                if (!c || !c->hosts.set)
                        continue;
                const etcd_options *o = &c->options;
                state_timeouts t;
                json_t *j;
                if (o->heartbeat_interval_ms || o->election_timeout_ms)
                        j = json_pack("{s:s,s:s,s:i,s:i}", "cluster", it->name, "from", "spec",
                                      "heartbeat_ms",
                                      o->heartbeat_interval_ms ? o->heartbeat_interval_ms
                                                               : TIMEOUTS_DEFAULT_HEARTBEAT_MS,
                                      "election_ms",
                                      o->election_timeout_ms ? o->election_timeout_ms
                                                             : TIMEOUTS_DEFAULT_ELECTION_MS);
                else if (db && state_timeouts_get(db, it->name, &t) > 0)
                        j = json_pack("{s:s,s:s,s:i,s:i,s:I,s:o}", "cluster", it->name, "from",
                                      "derived", "heartbeat_ms", t.heartbeat_ms, "election_ms",
                                      t.election_ms, "rtt_us", (json_int_t)t.rtt_us, "measured",
                                      cli_json_time(t.time_ms));
                else
                        j = json_pack("{s:s,s:s,s:i,s:i}", "cluster", it->name, "from", "default",
                                      "heartbeat_ms", TIMEOUTS_DEFAULT_HEARTBEAT_MS, "election_ms",
                                      TIMEOUTS_DEFAULT_ELECTION_MS);
                json_array_append_new(out, j);
        }
        return out;
}

static void cluster_timeouts_print(json_t *timeouts, FILE *out)
{
        fprintf(out, "\netcd's heartbeat interval and election timeout:\n");
        size_t i;
        json_t *t;
        json_array_foreach(timeouts, i, t)
        {
                const char *from = json_string_value(json_object_get(t, "from"));
                _cleanup_free_ char *name =
                    str_escape(json_string_value(json_object_get(t, "cluster")));
                int hb = (int)json_integer_value(json_object_get(t, "heartbeat_ms"));
                int el = (int)json_integer_value(json_object_get(t, "election_ms"));
                if (streq(from, "spec"))
                        fprintf(out, "  %s: %d ms, %d ms (set by the spec)\n", name, hb, el);
                else if (streq(from, "derived"))
                        fprintf(out,
                                "  %s: %d ms, %d ms (derived from the peer RTT: slowest link's "
                                "median %.1f ms, measured %s)\n",
                                name, hb, el,
                                (double)json_integer_value(json_object_get(t, "rtt_us")) / 1000,
                                json_string_value(json_object_get(t, "measured")));
                else
                        fprintf(out,
                                "  %s: %d ms, %d ms (etcd's defaults: no peer RTT measured "
                                "yet)\n",
                                name, hb, el);
        }
}

/* The same as text: each machine's last preflight, or "never measured". */
static void machine_preflights_print(const plan *p, const state_preflight_list *known, FILE *out)
{
        fprintf(out, "\nThe machines' last preflights (from the state store; no machine was "
                     "contacted):\n");
        for (size_t i = 0; i < p->n; i++) {
                const plan_item *it = &p->items[i];
                const etcd_cluster *c = it->spec;
                if (!c || !c->hosts.set)
                        continue;
                fprintf(out, "  %s:\n", it->name);
                for (size_t m = 0; m < c->hosts.n; m++) {
                        const host_spec *h = &c->hosts.items[m];
                        _cleanup_free_ char *key = xasprintf("%s:%d", h->address, h->ssh_port);
                        const state_preflight *pf = NULL;
                        for (size_t k = 0; k < known->n; k++)
                                if (streq_ptr(known->items[k]->cluster, it->name) &&
                                    streq_ptr(known->items[k]->machine, key))
                                        pf = known->items[k];
                        if (!pf) {
                                fprintf(out, "    %s: never measured\n", h->address);
                                continue;
                        }
                        _cleanup_free_ char *member = str_escape(pf->member ? pf->member : "free");
                        _cleanup_free_ char *text = cli_preflight_text(pf);
                        fprintf(out, "    %s (%s): %s\n", h->address, member, text);
                }
        }
}

static void kube_config_freep(kube_config **cfg)
{
        kube_config_free(*cfg);
}

/* The clusters a plan takes in (not rejected), as the plan holds them. */
static etcd_cluster **clusters_taken_in(const plan *p, size_t *ret_n)
{
        etcd_cluster **v = xcalloc(p->n + 1, sizeof(*v));
        size_t n = 0;
        for (size_t i = 0; i < p->n; i++)
                if (p->items[i].spec)
                        v[n++] = p->items[i].spec;
        *ret_n = n;
        return v;
}

/*
 * Compare the clusters with the live objects on the API server. Prints a
 * clear error and returns -errno when the server cannot be read.
 */
static void warn_nowhere(void *userdata, const char *message)
{
        (void)userdata, (void)message; /* kube_drift() said it once already */
}

static int kube_drift(const runner_flags *f, const target_kind *kind, const char *state_path,
                      bool have_state, const plan *p, drift_report **ret, kube_config **ret_cfg)
{
        kube_config *cfg = NULL;
        kube_client *kc = NULL;
        etcd_cluster **taken = NULL;
        char *err = NULL;
        state_db *db = NULL;
        target *t = NULL;
        int k = kube_config_resolve(f->kubeconfig, f->kube_context, &cfg, &err);
        if (k < 0) {
                fprintf(stderr, "gitcd plan: %s\n", err ? err : strerror(-k));
                goto out;
        }
        if (cfg->insecure_skip_tls_verify)
                fprintf(stderr, "gitcd plan: warning: TLS verification of %s is off (%s)\n",
                        cfg->server, cfg->source);
        k = kube_client_new(cfg, &kc, &err);
        if (k < 0) {
                fprintf(stderr, "gitcd plan: %s\n", err ? err : strerror(-k));
                goto out;
        }
        /*
         * With a state folder, what the target would apply for the recorded
         * members and the TLS material it issued there (the folder `gitcd run
         * --target kubernetes` uses: the state file's).
         */
        if (have_state && state_open(state_path, STATE_OPEN_READ_ONLY, &db) >= 0) {
                _cleanup_free_ char *copy = xstrdup(state_path), *why = NULL;
                target_settings ts = {.state_dir = dirname(copy),
                                      .kubeconfig = f->kubeconfig,
                                      .kube_context = f->kube_context,
                                      .cluster_domain = f->cluster_domain,
                                      .warn = warn_nowhere};
                if (kind->open(&ts, &t, &why) < 0) {
                        state_close(db);
                        db = NULL;
                }
        }
        size_t n_taken = 0;
        taken = clusters_taken_in(p, &n_taken);
        /* Drift is read from one API server: the clusters of another context are left out. */
        size_t kept = 0;
        for (size_t i = 0; i < n_taken; i++) {
                const etcd_cluster *c = taken[i];
                if (!c->kube_context || streq_ptr(c->kube_context, cfg->context)) {
                        taken[kept++] = taken[i];
                        continue;
                }
                _cleanup_free_ char *ctx = str_escape(c->kube_context);
                fprintf(stderr,
                        "gitcd plan: no drift shown for %s/%s: it runs on context \"%s\" (run "
                        "gitcd plan --context with it)\n",
                        c->namespace_, c->name, ctx);
        }
        n_taken = kept;
        drift_opts o = {
            .plan = kind->plan, .cluster_domain = f->cluster_domain, .target = t, .db = db};
        k = drift_compute(kc, taken, n_taken, &o, ret, &err);
        if (k < 0) {
                fprintf(stderr, "gitcd plan: Kubernetes API server %s: %s\n", cfg->server,
                        !isempty(err) ? err : strerror(-k));
                goto out;
        }
        *ret_cfg = TAKE_PTR(cfg);
out:
        free(taken);
        target_free(t);
        state_close(db);
        kube_client_free(kc);
        kube_config_free(cfg);
        free(err);
        return k;
}

/* The command line of gitcd plan. */
typedef struct plan_args {
        runner_flags f;
        int json; /* the index of -o's value in plan_formats: 1 for json */
        bool detailed, verbose, plain;
        const char *since; /* --since REV */
} plan_args;

static const char *const plan_formats[] = {"text", "json", NULL};

/* The options into a: -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, plan_args *a)
{
        runner_flags *f = &a->f;
        const cli_opt opts[] = {
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FORMAT",
             .dest = &a->json,
             .choices = plan_formats,
             .help = "text (default) or json",
             .bad = "-o takes text or json"},
            {.kind = CLI_OPT_SET,
             .name = "detailed-exitcode",
             .dest = &a->detailed,
             .help = "exit 2 when there are changes (0 when none)"},
            {.kind = CLI_OPT_SET,
             .name = "verbose",
             .short_name = 'v',
             .dest = &a->verbose,
             .help = "also list unchanged clusters"},
            {.kind = CLI_OPT_SET,
             .name = "plain-directory",
             .dest = &a->plain,
             .help = "read SRC as files on disk even when it is a\n"
                     "Git checkout (the working tree as it is)"},
            {.kind = CLI_OPT_STRING,
             .name = "since",
             .arg = "REV",
             .dest = &a->since,
             .help = "above the plan, per cluster what changed from\n"
                     "REV (a commit, branch or tag of SRC) to the\n"
                     "revision planned, as `gitcd diff --summary`"},
            {.kind = CLI_OPT_TEXT,
             .name = "--prune",
             .help = "plan removed clusters as stopped (data kept),\n"
                     "as `gitcd apply --prune` would"},
            {.kind = CLI_OPT_STRING,
             .name = "config",
             .arg = "FILE",
             .dest = &f->config,
             .help = "the configuration file whose policy bounds what\n"
                     "SRC may do, as for apply (default:\n" OPS_CONFIG_DEFAULT_PATH
                     " when present, else\n"
                     "gitcd's built-in policy)"},
            {.kind = CLI_OPT_HELP, .help = "show this help"},
            CLI_RUNNER_ROWS(f),
        };
        const cli_command cmd = {.prog = "gitcd plan",
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 25};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind < argc) {
                fprintf(stderr, "gitcd plan: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (isempty(f->src.url_or_path)) {
                fprintf(stderr, "gitcd plan: --source is required\n");
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }
        if (f->src.verify_signatures && isempty(f->src.allowed_signers_path)) {
                fprintf(stderr, "gitcd plan: --verify-signatures needs --allowed-signers FILE\n");
                return EXIT_USAGE;
        }
        if (a->since && a->plain) {
                fprintf(stderr, "gitcd plan: --since needs a Git source, not --plain-directory\n");
                return EXIT_USAGE;
        }
        return -1;
}

/* What gitcd plan shows: the plan, the state it compared with, drift and machine effects. */
typedef struct plan_view {
        plan *p;
        source_revision *rev;
        const char *state_path;
        bool have_state;
        drift_report *drift; /* or NULL */
        kube_config *kcfg;   /* with drift */
        const char *kind;    /* the target kind's name */
        json_t *effects;     /* or NULL */
        /* the machines' last preflights (machine_preflights), or NULL; from known */
        json_t *preflights;
        const state_preflight_list *known;
        json_t *timeouts; /* cluster_timeouts(), with preflights */
        revdiff *since;   /* --since: what changed from since_rev, or NULL */
        source_revision *since_rev;
} plan_view;

static void print_json(const plan_view *v)
{
        json_t *j = plan_to_json(v->p, v->rev);
        json_object_set_new(j, "state",
                            json_pack("{s:s,s:b}", "path", v->state_path, "exists", v->have_state));
        if (v->drift) {
                assert(v->kcfg); /* kube_drift() returns both or neither */
                json_object_set_new(j, v->kind,
                                    drift_to_json(v->drift, v->kcfg->server, v->kcfg->context));
                json_object_set_new(json_object_get(j, "summary"), "drift",
                                    json_boolean(drift_has_changes(v->drift)));
        }
        if (v->effects)
                json_object_set(j, v->kind, v->effects);
        if (v->preflights)
                json_object_set(j, "preflights", v->preflights);
        if (v->preflights && v->timeouts)
                json_object_set(j, "timeouts", v->timeouts);
        if (v->since)
                json_object_set_new(j, "since", revdiff_to_json(v->since, v->since_rev, v->rev));
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(j);
}

static void print_text(const plan_view *v, bool verbose)
{
        if (!v->have_state)
                printf("No state database at %s: nothing applied yet.\n", v->state_path);
        plan_print_opts po = {.color = cli_color(), .verbose = verbose, .show_diag = true};
        if (v->since) {
                revdiff_print_opts ro = {.color = po.color, .verbose = verbose};
                revdiff_print_text(v->since, v->since_rev, v->rev, &ro, stdout);
                fputc('\n', stdout);
        }
        plan_print_text(v->p, v->rev, &po, stdout);
        if (v->drift)
                drift_print_text(v->drift, v->kcfg ? v->kcfg->server : NULL, po.color, stdout);
        if (v->effects)
                machine_effects_print(v->effects, v->kind, stdout);
        if (v->preflights)
                machine_preflights_print(v->p, v->known, stdout);
        if (v->preflights && v->timeouts)
                cluster_timeouts_print(v->timeouts, stdout);
}

typedef struct plan_kube {
        const target_kind *kind;
        const char *kubeconfig;
} plan_kube;

/* Whether the kubeconfig of --kubeconfig (or the default one) has context (intake_kube.check). */
static int plan_kube_check(void *userdata, const char *context, char **ret_error)
{
        const plan_kube *pk = userdata;
        target_settings s = {.kubeconfig = pk->kubeconfig};
        return pk->kind->check_context(&s, context, ret_error);
}

/* --since: what changed from a.since to rev, as gitcd diff says it. 0, or -errno printed. */
static int since_diff(const plan_args *a, const target_kind *kind, const policy *pol, source *src,
                      source_revision *rev, source_revision **ret_rev, revdiff **ret)
{
        _cleanup_(source_revision_freep) source_revision *from = NULL;
        int k = cli_read_revision(src, rev, a->since, "gitcd plan", &from);
        if (k < 0)
                return k;
        revdiff_input in = {.from = from,
                            .to = rev,
                            .prune = a->f.prune,
                            .caps = kind->caps,
                            .target = kind->name,
                            .policy = pol,
                            .src = src};
        k = revdiff_compute(&in, ret);
        if (k < 0) {
                fprintf(stderr, "gitcd plan: %s\n", strerror(-k));
                return k;
        }
        *ret_rev = TAKE_PTR(from);
        return 0;
}

int cmd_plan(int argc, char **argv)
{
        plan_args a = {0};
        int status = parse_args(argc, argv, &a);
        if (status >= 0)
                return status;
        runner_flags *f = &a.f;
        if (!log_level_is_explicit())
                log_set_level(LOG_WARN);

        _cleanup_free_ char *state_path = cli_state_path(f->state, NULL);
        state_cluster_list applied = {0};
        state_member_list *members = NULL;
        _cleanup_(state_verdict_list_release) state_verdict_list verdicts = {0};
        bool have_state = false;
        state_db *db = NULL; /* closed once the plan is computed */
        if (read_applied(state_path, &applied, &members, &verdicts, &have_state, &db) < 0)
                return EXIT_FAIL;
        _cleanup_(policy_freep) policy *pol = NULL;
        status = cli_plan_policy(f, "gitcd plan", &pol);
        if (status >= 0) {
                state_close(db);
                return status;
        }

        /* Freed in the reverse order: the source, then its temporary cache. */
        _cleanup_(source_revision_freep) source_revision *rev = NULL;
        _cleanup_(cli_tmpdir_removep) char *tmp = NULL;
        _cleanup_(source_freep) source *src = NULL;
        if (cli_source_fetch(f, a.plain, "gitcd plan", false, &tmp, &src, &rev) < 0) {
                state_close(db);
                members_release(members, applied.n);
                state_cluster_list_release(&applied);
                return EXIT_FAIL;
        }
        if (f->target && !target_kind_find(f->target)) {
                runner_unknown_target("gitcd plan", f->target);
                state_close(db);
                members_release(members, applied.n);
                state_cluster_list_release(&applied);
                return EXIT_USAGE;
        }
        const target_kind *kind = target_kind_or_default(f->target);
        const target_plan_ops *pops = kind->plan;
        _cleanup_(source_revision_freep) source_revision *since_rev = NULL;
        _cleanup_(revdiff_freep) revdiff *since = NULL;
        if (a.since && since_diff(&a, kind, pol, src, rev, &since_rev, &since) < 0) {
                members_release(members, applied.n);
                state_cluster_list_release(&applied);
                return EXIT_FAIL;
        }
        /* The contexts of the kubeconfig apply would read: checked, as apply checks them. */
        plan_kube pk = {.kind = kind, .kubeconfig = f->kubeconfig};
        intake_kube kube = {.check = plan_kube_check, .userdata = &pk};
        plan_input in = {.rev = rev,
                         .kube = kind->check_context ? &kube : NULL,
                         .applied = have_state ? &applied : NULL,
                         .members = members,
                         .prune = f->prune,
                         .caps = kind->caps,
                         .target = kind->name,
                         .policy = pol,
                         .src = src,
                         .verdicts = &verdicts,
                         .db = db,
                         .now_ms = now_wall_ms()};
        _cleanup_(plan_freep) plan *p = NULL;
        int k = plan_compute(&in, &p);
        /* the machines' last preflights, for a kind that runs members on machines */
        _cleanup_(state_preflight_list_release) state_preflight_list known = {0};
        if (db && pops && pops->machine_effects && state_preflight_list_get(db, NULL, &known) < 0)
                known = (state_preflight_list){0}; /* a store from before preflights were kept */
        json_t *timeouts = pops && pops->machine_effects && k >= 0 ? cluster_timeouts(p, db) : NULL;
        state_close(db);
        members_release(members, applied.n);
        state_cluster_list_release(&applied);
        if (k < 0) {
                fprintf(stderr, "gitcd plan: %s\n", strerror(-k));
                return EXIT_FAIL;
        }

        _cleanup_(drift_report_freep) drift_report *drift = NULL;
        _cleanup_(kube_config_freep) kube_config *kcfg = NULL;
        if (pops && pops->kube_objects &&
            kube_drift(f, kind, state_path, have_state, p, &drift, &kcfg) < 0)
                return EXIT_FAIL;
        plan_view v = {.p = p,
                       .rev = rev,
                       .state_path = state_path,
                       .have_state = have_state,
                       .drift = drift,
                       .kcfg = kcfg,
                       .kind = kind->name,
                       .effects = pops && pops->machine_effects ? machine_effects(p, pops) : NULL,
                       .preflights = machine_preflights(p, &known),
                       .known = &known,
                       .timeouts = timeouts,
                       .since = since,
                       .since_rev = since_rev};
        if (a.json)
                print_json(&v);
        else
                print_text(&v, a.verbose);
        json_decref(v.effects);
        json_decref(v.preflights);
        json_decref(timeouts);
        fflush(stdout);
        if (plan_has_errors(p) || (drift && drift_has_errors(drift)))
                return EXIT_FAIL;
        if (a.detailed && (plan_has_changes(p) || (drift && drift_has_changes(drift))))
                return EXIT_CHANGES;
        return EXIT_OK;
}
