/*
 * The YAML fuzz target: any bytes go through the loader, every document
 * is converted to JSON, emitted as YAML again and parsed back, and the two
 * JSON values must be equal (the emitter's round-trip promise). The same
 * bytes then go through spec_load_buffer (dialect detection, validation)
 * and the intake over them as one source's files (spec.dependsOn's
 * references, cycles and tiers, intake/order.h). Everything is released, so LeakSanitizer checks the error paths too.
 *
 * Limits are smaller than the defaults so that one input stays fast and
 * the fuzzer reaches the limit paths; the logic is the same. Inputs that
 * hit a limit are not passed on to spec_load_buffer, which would expand
 * them up to the default limits on every run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/spec.h"
#include "api/yaml.h"
#include "intake/intake.h"
#include "intake/order.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const yaml_limits fuzz_limits = {
    .max_file_bytes = 1u << 20,
    .max_documents = 100,
    .max_depth = 64,
    .max_nodes = 20000,
};

static void check_round_trip(const ynode *root)
{
        json_t *j = ynode_to_json(root);
        if (!j)
                abort();
        strbuf sb = STRBUF_INIT;
        if (yaml_emit_json(j, true, &sb) < 0) {
                fprintf(stderr, "yaml_emit_json failed\n");
                abort();
        }
        /* The emitted text may be longer than the input (aliases are expanded). */
        yaml_limits lim = fuzz_limits;
        lim.max_file_bytes = (size_t)-1;
        lim.max_nodes = (size_t)-1;
        ydoc_list docs = {0};
        diag_list diags = DIAG_LIST_INIT;
        int r = yaml_parse("emitted.yaml", sb.buf, sb.len, &lim, &docs, &diags);
        if (r < 0 || docs.n != 1) {
                diag_print(&diags, stderr);
                fprintf(stderr, "emitted YAML does not parse back:\n%s", sb_str(&sb));
                abort();
        }
        json_t *back = ynode_to_json(docs.docs[0].root);
        if (!json_equal(j, back)) {
                fprintf(stderr, "round trip changed the value; emitted:\n%s", sb_str(&sb));
                abort();
        }
        json_decref(back);
        json_decref(j);
        ydoc_list_release(&docs);
        diag_list_release(&diags);
        sb_release(&sb);
}

static void walk(const ynode *n)
{
        if (!n)
                return;
        (void)ynode_type_name(n);
        (void)ynode_is_null(n);
        (void)ynode_get(n, "spec");
        for (size_t i = 0; i < n->n; i++) {
                if (n->keys)
                        walk(n->keys[i]);
                walk(n->values[i]);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        ydoc_list docs = {0};
        diag_list diags = DIAG_LIST_INIT;
        int r = yaml_parse("fuzz.yaml", (const char *)data, size, &fuzz_limits, &docs, &diags);
        if (r < 0 && !diag_has_errors(&diags)) {
                fprintf(stderr, "yaml_parse failed without a diagnostic\n");
                abort();
        }
        /*
         * spec_load_buffer parses with the default limits (a million nodes):
         * inputs that only stop at our smaller limits would make every run
         * slow, and the limit paths are already covered above.
         */
        bool over_limit = false;
        for (size_t i = 0; i < diags.n; i++) {
                free(diag_format(&diags.items[i]));
                over_limit = over_limit || strstr(diags.items[i].message, " limit)");
        }
        for (size_t i = 0; i < docs.n; i++) {
                walk(docs.docs[i].root);
                check_round_trip(docs.docs[i].root);
        }
        ydoc_list_release(&docs);
        diag_list_release(&diags);

        if (over_limit)
                return 0;
        cluster_set set = {0};
        diag_list sdiags = DIAG_LIST_INIT;
        (void)spec_load_buffer("fuzz.yaml", (const char *)data, size, &set, &sdiags);
        cluster_set_release(&set);
        diag_list_release(&sdiags);

        /* The documents as a source's files: validate's and apply's intake, and the tiers. */
        spec_buffer buf = {.file = "fuzz.yaml", .data = (const char *)data, .len = size};
        for (int mode = INTAKE_APPLY; mode <= INTAKE_VALIDATE; mode++) {
                intake_input in = {.files = &buf, .n_files = 1, .mode = (intake_mode)mode};
                intake_result res;
                if (spec_intake(&in, &res) < 0)
                        abort();
                free(order_tiers(&res));
                intake_result_release(&res);
        }
        return 0;
}
