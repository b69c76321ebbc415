/*
 * Fuzz target for util/escape.h, which every untrusted string passes
 * through on its way to a terminal, a log or the audit log: for any bytes,
 * the escaped text is valid UTF-8 without a control character, escaping it
 * again changes nothing, and the audit log's private key redaction leaves
 * no PEM private key marker behind.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "state/state.h"
#include "util/escape.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        strbuf sb = STRBUF_INIT;
        sb_append_escaped(&sb, (const char *)data, size);
        const char *out = sb_str(&sb);
        if (strlen(out) != sb.len || str_needs_escape(out))
                abort();
        char *again = str_escape(out);
        if (strcmp(again, out) != 0)
                abort();
        free(again);
        sb_release(&sb);

        char *text = xmalloc(size + 1);
        memcpy(text, data, size);
        text[size] = '\0';
        char *redacted = state_redact_private_keys(text);
        if (state_text_has_private_key(redacted))
                abort();
        free(redacted);
        free(text);
        return 0;
}
