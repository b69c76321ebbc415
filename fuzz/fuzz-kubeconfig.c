/*
 * Fuzz target for the kubeconfig reader (kube/kubeconfig.c): the input is a
 * kubeconfig file's text, loaded with its current context and with a
 * context named "fuzz". Loading ends with 0 and a usable configuration (an
 * http(s) server without a trailing slash, a namespace) or with a negative
 * errno and a message; never a crash or a leak. The file's folder does not
 * exist, so relative credential paths never reach a real file.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *text, size_t size, const char *context)
{
        kube_config *cfg = NULL;
        char *err = NULL;
        int r = kube_config_load_buffer("/nonexistent-fuzz/kubeconfig", text, size, context, &cfg,
                                        &err);

        if (r < 0) {
                if (!err || !*err || cfg)
                        abort();
        } else {
                size_t n;

                if (r != 0 || !cfg || !cfg->server || !cfg->namespace || err)
                        abort();
                n = strlen(cfg->server);
                if ((strncmp(cfg->server, "https://", 8) != 0 &&
                     strncmp(cfg->server, "http://", 7) != 0) ||
                    (n > 0 && cfg->server[n - 1] == '/'))
                        abort();
                if ((cfg->cert_file || cfg->cert_data) != (cfg->key_file || cfg->key_data))
                        abort();
        }
        free(err);
        kube_config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        check((const char *)data, size, NULL);
        check((const char *)data, size, "fuzz");
        return 0;
}
