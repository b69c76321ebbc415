/*
 * Where gitcd finds a Kubernetes API server and how it authenticates: a
 * kubeconfig file (clusters, users, contexts, current-context) or the
 * in-cluster service account.
 *
 * The result is one flat kube_config: the server URL, the CA, the client
 * certificate and key (each either a file path or decoded PEM bytes), a
 * bearer token or a token file, and the namespace of the chosen context.
 * Relative paths in a kubeconfig are resolved against the file's folder.
 * A token file is kept as a path, not read here, because projected
 * service-account tokens rotate: the client re-reads it on a 401.
 *
 * Errors name the file, the context and the missing piece. Tokens and keys
 * never appear in an error message.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The folder holding token, ca.crt and namespace inside a pod. */
#define KUBE_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct kube_config {
        char *source;    /* the kubeconfig path, or "in-cluster" */
        char *context;   /* the context used; NULL in-cluster */
        char *server;    /* "https://host:port" without a trailing slash */
        char *namespace; /* context namespace, or "default" */

        /* Each credential is a file path or in-memory PEM bytes (from *-data), or neither. */
        char *ca_file;
        char *ca_data;
        size_t ca_len;
        char *cert_file;
        char *cert_data;
        size_t cert_len;
        char *key_file;
        char *key_data; /* secret */
        size_t key_len;

        char *token;      /* secret; NULL when token_file is used or no token */
        char *token_file; /* read when the client starts and again after a 401 */
        /* TLS verification off. Allowed, but the caller should print a warning. */
        bool insecure_skip_tls_verify;
} kube_config;

/*
 * The kubeconfig path gitcd uses when none is given: the first entry of
 * $KUBECONFIG (a ':'-separated list; only the first file is read, no
 * merging), else ~/.kube/config. NULL when neither can be determined.
 */
char *kube_config_default_path(void);

/*
 * Load a kubeconfig file. path NULL = kube_config_default_path(); context
 * NULL = the file's current-context. On failure *ret_error (when not NULL)
 * gets a sentence for a person, e.g.
 *   context "x" not found in /home/u/.kube/config (contexts: a, b)
 * Expected errors: -ENOENT (file, context, cluster or user missing),
 * -EINVAL (malformed file or field).
 */
int kube_config_load(const char *path, const char *context, kube_config **ret_config,
                     char **ret_error);

/*
 * The same with the file's text in memory (for the fuzz target); path only
 * names it in messages and anchors relative paths.
 */
int kube_config_load_buffer(const char *path, const char *buf, size_t len, const char *context,
                            kube_config **ret_config, char **ret_error);

/*
 * The in-cluster configuration: KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT, base/token, base/ca.crt, base/namespace.
 * base NULL = KUBE_SERVICEACCOUNT_DIR. Expected errors: -ENOENT (not
 * running in a pod: a variable or the token file is missing).
 */
int kube_config_in_cluster(const char *base, kube_config **ret_config, char **ret_error);

/*
 * What gitcd uses when run with --kubeconfig PATH and --context NAME (both
 * may be NULL): the file when a path or a context is given; else the
 * in-cluster configuration when KUBERNETES_SERVICE_HOST is set (gitcd runs
 * in a Pod); else kube_config_default_path().
 */
int kube_config_resolve(const char *path, const char *context, kube_config **ret_config,
                        char **ret_error);

/* The bearer token: the inline token, or the token file read now (trimmed). NULL = none. */
int kube_config_read_token(const kube_config *cfg, char **ret_token, char **ret_error);

void kube_config_free(kube_config *cfg);

/*
 * Decode base64 (whitespace ignored, padding required) into a NUL-terminated
 * buffer. -EINVAL for anything that is not base64.
 */
int kube_base64_decode(const char *in, char **ret_data, size_t *ret_len);
/* Standard base64 with padding, no line breaks (Secret data). Newly allocated. */
char *kube_base64_encode(const void *data, size_t len);
