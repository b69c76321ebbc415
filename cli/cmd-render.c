/*
 * gitcd render: print the Kubernetes objects for EtcdCluster files.
 *
 * Thin by design: load and validate with spec_load_paths(), build each
 * cluster's steady-state membership plan, render, print. Input with any
 * error renders nothing (exit 1), so a partial manifest never reaches
 * `kubectl apply`. Output is deterministic byte for byte: YAML documents
 * separated by "---" (the default), or one v1 List in JSON; both are
 * accepted by `kubectl apply -f -`.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "render/render.h"
#include "api/spec.h"
#include "api/yaml.h"
#include "util/diag.h"
#include "util/macro.h"
#include "util/strbuf.h"

enum output_format { OUTPUT_YAML, OUTPUT_JSON };

static const char usage_text[] =
    "usage: gitcd render [-o yaml|json] [--cluster-domain DOMAIN] PATH...\n"
    "\n"
    "Print the Kubernetes objects that run the EtcdClusters defined in PATH (files,\n"
    "or directories searched recursively for *.yaml and *.yml): per cluster the\n"
    "headless and client Services, the PodDisruptionBudget, cert-manager\n"
    "Certificates (tls provider cert-manager), then each member's\n"
    "PersistentVolumeClaim and Pod, for the steady state of a fresh cluster.\n"
    "A paused cluster (replicas 0) gets its Services and the dormant member's\n"
    "volume only. Problems go to stderr; with any error nothing is printed.\n"
    "\n"
    "Options:\n";

static const char footer_text[] =
    "\n"
    "Exit status: 0 rendered, 1 invalid input, 64 bad command line.\n";

/* --cluster-domain D: a DNS name into *(const char **)dest; -EINVAL. */
static int parse_domain(const char *arg, void *dest)
{
        if (!dns1123_subdomain_valid(arg))
                return -EINVAL;
        *(const char **)dest = arg;
        return 0;
}

static const char *const output_formats[] = {"yaml", "json", NULL};

static void note_paused(const etcd_cluster *c, diag_list *diags)
{
        if (c->replicas > 0)
                return;
        diag_add(diags, DIAG_NOTE, c->file, c->line, c->col,
                 "cluster \"%s/%s\" is paused (replicas: 0): rendering its Services "
                 "and the "
                 "dormant member's volume, no Pods",
                 c->namespace_, c->name);
}

/* Render every cluster into one array of objects, in input order. */
static json_t *render_all(const cluster_set *set, const char *domain)
{
        json_t *items = json_array();
        for (size_t i = 0; i < set->n; i++) {
                const etcd_cluster *c = set->items[i];
                _cleanup_(membership_plan_freep) membership_plan *p =
                    membership_plan_steady(c, domain);
                json_t *objs = render_cluster(c, p);
                json_array_extend(items, objs);
                json_decref(objs);
        }
        return items;
}

static int format_output(const json_t *items, enum output_format fmt, strbuf *out)
{
        if (fmt == OUTPUT_JSON) {
                json_t *list = json_pack("{s:s, s:s, s:O}", "apiVersion", "v1", "kind", "List",
                                         "items", items);
                char *s = json_dumps(list, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                json_decref(list);
                if (!s)
                        return -ENOMEM;
                sb_append(out, s);
                sb_appendc(out, '\n');
                free(s);
                return 0;
        }
        size_t i;
        json_t *o;
        json_array_foreach(items, i, o)
        {
                int r = yaml_emit_json(o, true, out);
                if (r < 0)
                        return r;
        }
        return 0;
}

int cmd_render(int argc, char **argv)
{
        int fmt = OUTPUT_YAML;
        const char *domain = "cluster.local";
        const cli_opt opts[] = {
            {.kind = CLI_OPT_CHOICE,
             .name = "output",
             .short_name = 'o',
             .arg = "FORMAT",
             .dest = &fmt,
             .choices = output_formats,
             .help = "yaml (default): \"---\"-separated documents;\n"
                     "json: one {\"kind\": \"List\"} object",
             .bad = "unknown output format \"%s\" (use yaml or json)"},
            {.kind = CLI_OPT_CUSTOM,
             .name = "cluster-domain",
             .arg = "D",
             .dest = &domain,
             .parse = parse_domain,
             .help = "the cluster's DNS domain (default cluster.local)",
             .bad = "--cluster-domain \"%s\" is not a DNS name (such as cluster.local)"},
            {.kind = CLI_OPT_HELP, .help = "show this help"},
        };
        const cli_command cmd = {.prog = "gitcd render",
                                 .usage = usage_text,
                                 .footer = footer_text,
                                 .opts = opts,
                                 .n_opts = ARRAY_SIZE(opts),
                                 .width = 24,
                                 .align_long = true,
                                 .quiet_getopt = true};
        int status = cli_parse(&cmd, argc, argv);
        if (status >= 0)
                return status;
        if (optind >= argc) {
                fprintf(stderr, "gitcd render: no PATH given\n");
                cli_help(&cmd, stderr);
                return EXIT_USAGE;
        }

        cluster_set set = {NULL, 0, 0};
        diag_list diags = DIAG_LIST_INIT;
        strbuf out = STRBUF_INIT;
        json_t *items = NULL;
        int ret = EXIT_FAIL;

        int r = spec_load_paths(argv + optind, (size_t)(argc - optind), &set, &diags);
        if (r < 0 || diag_has_errors(&diags))
                goto out;
        for (size_t i = 0; i < set.n; i++)
                note_paused(set.items[i], &diags);
        items = render_all(&set, domain);
        r = format_output(items, fmt, &out);
        if (r < 0) {
                fprintf(stderr, "gitcd render: cannot format the output: %s\n", strerror(-r));
                goto out;
        }
        if (fwrite(out.buf ? out.buf : "", 1, out.len, stdout) != out.len || fflush(stdout) != 0) {
                fprintf(stderr, "gitcd render: cannot write the output: %s\n", strerror(errno));
                goto out;
        }
        ret = EXIT_OK;
out:
        diag_sort(&diags);
        diag_print(&diags, stderr);
        json_decref(items);
        sb_release(&out);
        diag_list_release(&diags);
        cluster_set_release(&set);
        return ret;
}
