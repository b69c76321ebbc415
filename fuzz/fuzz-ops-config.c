/*
 * Fuzz target for the daemon's configuration file (ops/config.c): the input
 * is the file's text. Loading ends with 0 and a configuration whose sources
 * each have a name, a url and a policy, and no diagnostics that are errors;
 * or with a negative errno and at least one error diagnostic. A policy that
 * loaded then judges a few clusters (globs and paths from the file against
 * a spec's), which must not crash either. Never a crash or a leak.
 */
#include <stdint.h>
#include <stdlib.h>

#include "api/spec.h"
#include "ops/config.h"

/* A cluster on machines with paths, an image and a gated flag, for the policy to judge. */
static const char spec[] = "apiVersion: gitcd.io/v1alpha1\nkind: EtcdCluster\n"
                           "metadata: {name: main, namespace: prod}\n"
                           "spec:\n  replicas: 3\n  version: \"3.5.16\"\n"
                           "  repository: registry.example.com/etcd\n"
                           "  options: {extraFlags: {enable-pprof: \"true\"}}\n"
                           "  hosts:\n    mode: staticPod\n    machines:\n"
                           "    - {address: 10.0.0.1, dataDir: /var/lib/etcd/main}\n"
                           "    - {address: 10.0.0.2, dataDir: /srv/etcd/../../etc}\n"
                           "    - {address: db.example.com, tlsDir: /etc/etcd2/pki}\n";

static void judge(const policy *p)
{
        cluster_set set = {0};
        diag_list d = DIAG_LIST_INIT;
        (void)spec_load_buffer("spec.yaml", spec, sizeof(spec) - 1, &set, &d);
        for (size_t i = 0; i < set.n; i++) {
                (void)policy_check(p, set.items[i], "hosts", true, true, i % 2, &d);
                (void)policy_signers_needed(p, policy_changes(set.items[i], NULL), NULL);
        }
        cluster_set_release(&set);
        diag_list_release(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        ops_config *cfg = NULL;
        diag_list diags = DIAG_LIST_INIT;
        int r = ops_config_load_buffer("fuzz.yaml", (const char *)data, size, &cfg, &diags);
        if (r < 0) {
                if (cfg || !diag_has_errors(&diags))
                        abort();
        } else {
                if (!cfg || !cfg->policy || diag_has_errors(&diags))
                        abort();
                for (size_t i = 0; i < cfg->n_sources; i++)
                        if (!cfg->sources[i].name || !cfg->sources[i].src.url_or_path ||
                            !cfg->sources[i].policy)
                                abort();
                judge(cfg->policy);
                for (size_t i = 0; i < cfg->n_sources; i++)
                        judge(cfg->sources[i].policy);
                ops_config_free(cfg);
        }
        diag_list_release(&diags);
        return 0;
}
