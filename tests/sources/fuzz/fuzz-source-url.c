/*
 * Fuzz target for source locations: any string is classified and split,
 * and redacted. A password found in a URL must never appear in the forms
 * meant for libgit2 or for people.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/source.h"
#include "sources/url.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t occurrences(const char *hay, const char *needle)
{
        size_t n = 0;

        for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
                n++;
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1), *err = NULL, *redacted;
        source_url u;

        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        if (source_url_parse(s, &u, &err) == 0) {
                if (!u.fetch_url || !u.display)
                        abort();
                /* the userinfo form ":password@" of the input is gone from both forms */
                if (!isempty(u.password)) {
                        size_t n = strlen(u.password) + 3;
                        char *leak = malloc(n);

                        if (!leak)
                                abort();
                        snprintf(leak, n, ":%s@", u.password);
                        if (occurrences(u.display, leak) >= occurrences(s, leak) ||
                            occurrences(u.fetch_url, leak) >= occurrences(s, leak))
                                abort();
                        free(leak);
                }
                source_url_release(&u);
        } else {
                if (!err)
                        abort();
                free(err);
        }
        redacted = source_redact_url(s);
        free(redacted);
        free(s);
        return 0;
}
