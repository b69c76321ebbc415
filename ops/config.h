/*
 * The daemon's own configuration file (`gitcd run --config FILE`, default
 * /etc/gitcd/gitcd.yaml when present): what the command-line flags hold,
 * plus several sources, the listen address, notifications and logging.
 * docs/operating.md describes every key.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "intake/policy.h"
#include "sources/source.h"
#include "util/diag.h"

#define OPS_CONFIG_DEFAULT_PATH "/etc/gitcd/gitcd.yaml"

typedef enum ops_forge {
        OPS_FORGE_NONE = 0,
        OPS_FORGE_GITHUB,
        OPS_FORGE_GITLAB,
        OPS_FORGE_GITEA
} ops_forge;

/* Commit statuses posted on the source's forge for each cluster's result. */
typedef struct ops_commit_status {
        ops_forge forge;        /* OPS_FORGE_NONE: none posted */
        const char *api;        /* API base URL (github: https://api.github.com) */
        const char *repository; /* "owner/name" (gitlab: the project's path or id) */
        const char *token_file; /* the API token */
        const char *context;    /* status name prefix; default "gitcd" */
} ops_commit_status;

/* The hosts target's SSH settings (hosts: in the file, --hosts-* flags). */
typedef struct ops_hosts {
        const char *ssh_key;           /* private key; NULL: the ssh-agent ($SSH_AUTH_SOCK) */
        const char *passphrase_file;   /* of ssh_key */
        const char *known_hosts;       /* checked strictly; NULL: ~/.ssh/known_hosts */
        int client_port;               /* 0: 2379 */
        int peer_port;                 /* 0: 2380 */
        int metrics_port;              /* 0: 2381 */
        bool preflight;                /* measure a free machine before placing a member on it */
        int64_t preflight_sync_p99_ms; /* fdatasync p99 above this fails; 0: 10 ms */
        int64_t preflight_clock_offset_ms; /* |clock offset| above this fails; 0: 500 ms */
        int64_t preflight_interval_ms;     /* how long a preflight stands; 0: 10 minutes */
} ops_hosts;

typedef struct ops_source {
        const char *name;         /* unique; "default" for the one source of the flags */
        source_opts src;          /* strings owned by the ops_config */
        int64_t interval_ms;      /* 0: the daemon's interval */
        const char *target;       /* a kind of targets/registry.h; NULL: the daemon's */
        ops_commit_status status; /* forge NONE: no commit statuses */
        /*
         * webhook.secretFile: the secret a forge's push webhook is signed
         * with (ops/push.h); NULL: a push never triggers this source.
         */
        const char *webhook_secret_file;
        /*
         * kubernetes: {kubeconfig, context}: the API server of this source's
         * clusters (a kubernetes target's). kubeconfig NULL: the daemon's;
         * kube_context NULL: the daemon's (the kubeconfig's current one), and
         * a cluster's spec.kubernetes.context comes first.
         * kube_context_line/col: where kube_context was written in the file.
         */
        const char *kubeconfig;
        const char *kube_context;
        int kube_context_line, kube_context_col;
        /*
         * What its commits may make gitcd do (intake/policy.h): its own
         * `policy:` over the top-level one, key by key; else the top-level
         * one. Owned by the ops_config; never NULL once loaded.
         */
        const policy *policy;
} ops_source;

typedef enum ops_severity { OPS_SEV_INFO = 0, OPS_SEV_WARNING, OPS_SEV_CRITICAL } ops_severity;

typedef enum ops_webhook_format { OPS_WEBHOOK_JSON = 0, OPS_WEBHOOK_SLACK } ops_webhook_format;

typedef struct ops_webhook {
        const char *name;
        const char *url;
        ops_webhook_format format;
        const char *secret_file; /* HMAC-SHA256 key (json format); NULL: unsigned */
        const char *ca_file;     /* for https:// receivers; NULL: the system's */
        ops_severity min_severity;
        const char **clusters; /* "ns/name" filters; none: every cluster */
        size_t n_clusters;
        int64_t max_age_ms; /* undelivered after this: expired */
} ops_webhook;

#define OPS_WORKERS_MAX 256

typedef struct ops_config {
        char *file; /* where it was read from; NULL for flags only */
        const char *state;
        const char *target;
        const char *kubeconfig;
        const char *kube_context;
        const char *cluster_domain;
        const char *snapshot_image; /* kubernetes.snapshotImage */
        ops_hosts hosts;
        const char *etcd_dir;
        const char *cache_dir;
        bool prune;
        int64_t interval_ms; /* 0: the default */
        /* gitcd run: how often a converged cluster is observed; 0: the default (30 s) */
        int64_t observe_interval_ms;
        int workers; /* gitcd run: clusters reconciled at once; 0: the default (8) */
        const char *log_level;

        const char *listen;        /* host:port; NULL: no HTTP endpoints */
        const char *tls_cert_file; /* both or neither */
        const char *tls_key_file;
        const char *token_file; /* bearer token required on every endpoint */

        ops_source *sources;
        size_t n_sources;
        ops_webhook *webhooks;
        size_t n_webhooks;
        /* The top-level `policy:` over gitcd's built-in one (never NULL once loaded). */
        policy *policy;
        /* allowPlainHTTP: hosts webhooks and forge APIs may reach over plain http:// */
        const char **plain_http_hosts;
        size_t n_plain_http_hosts;

        char **owned; /* every string above */
        size_t n_owned;
        policy **owned_policies; /* the sources' own policies */
        size_t n_owned_policies;
} ops_config;

/*
 * Read and validate a configuration file. Every problem is a diagnostic
 * (file:line:col) in diags, and the function returns -EINVAL; -ENOENT and
 * other -errno when the file cannot be read (also a diagnostic). A file
 * without sources is valid (it may hold only a policy for gitcd apply and
 * plan); gitcd run needs sources from it or --source.
 */
int ops_config_load(const char *path, ops_config **ret, diag_list *diags);
/* The same from a buffer (path names it in diagnostics). */
int ops_config_load_buffer(const char *path, const char *buf, size_t len, ops_config **ret,
                           diag_list *diags);
/* An empty configuration, to be filled from flags (the built-in policy). */
ops_config *ops_config_new(void);
/*
 * The policy for a source at url given on the command line: that of the
 * file's first source with this url, else the top-level one.
 */
const policy *ops_config_policy_for(const ops_config *cfg, const char *url);
/* Take a copy of p as cfg's policy, for every source (gitcd apply and plan). */
void ops_config_set_policy(ops_config *cfg, const policy *p);
/* A copy of s owned by cfg (NULL stays NULL). */
const char *ops_config_strdup(ops_config *cfg, const char *s);
void ops_config_free(ops_config *cfg);
DEFINE_TRIVIAL_CLEANUP_FUNC(ops_config *, ops_config_free);

/*
 * Whether url may be used for a webhook or a forge API: https://, or
 * http:// to a host allowPlainHTTP lists (matched without the port,
 * ignoring case).
 */
bool ops_config_allows_plain_http(const ops_config *c, const char *url);
/* The host of an http(s) URL, without userinfo, brackets or port; NULL when there is none. */
char *ops_url_host(const char *url);

const char *ops_severity_name(ops_severity s);
int ops_severity_from_string(const char *s, ops_severity *ret);
