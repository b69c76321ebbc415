/*
 * Fuzz target for the daemon's configuration file (ops/config.c): the input
 * is the file's text. Loading ends with 0 and a configuration with at least
 * one source, each with a name and a url, and no diagnostics that are
 * errors; or with a negative errno and at least one error diagnostic. Never
 * a crash or a leak.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ops/config.h"

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
                if (!cfg || cfg->n_sources == 0 || diag_has_errors(&diags))
                        abort();
                for (size_t i = 0; i < cfg->n_sources; i++)
                        if (!cfg->sources[i].name || !cfg->sources[i].src.url_or_path)
                                abort();
                ops_config_free(cfg);
        }
        diag_list_release(&diags);
        return 0;
}
