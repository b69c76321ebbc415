/*
 * Fuzz target for the push receiver's judgement (ops/push.c): a forge's
 * webhook request, headers and body, against a fixed set of sources. The
 * input is three lines and a body: the forge (github, gitlab, gitea,
 * generic), the signature header's value (empty: absent; "SIGN": the
 * correct signature of the body under the sources' secret, computed here,
 * so that the fuzzer reaches what a signed request asks for), the event
 * header's value (empty: absent), then the body as sent. The verdict must
 * be one of push.h's, with a message; sources to fetch only when queued,
 * each one of the table's with a secret; never a crash or a leak. The
 * body's text also goes through push_url_normalize and push_ref_matches.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/push.h"
#include "util/hash.h"
#include "util/macro.h"
#include "util/xalloc.h"

#define SECRET "fuzz-secret"

static const push_source sources[] = {
    {.name = "fleet", .url = "https://github.com/acme/fleet.git", .ref = "main", .secret = SECRET},
    {.name = "staging",
     .url = "git@github.com:acme/fleet.git",
     .ref = "staging",
     .secret = "other"},
    {.name = "nosecret", .url = "https://github.com/acme/fleet", .ref = "main"},
    {.name = "lab", .url = "https://gitlab.example.org/ops/etcd.git", .secret = SECRET},
    {.name = "tea",
     .url = "ssh://git@gitea.local:2222/ops/etcd.git",
     .ref = "refs/tags/v1",
     .secret = SECRET},
};

/* The next line of data (newly allocated, without its newline); advances *data and *size. */
static char *line(const uint8_t **data, size_t *size)
{
        const uint8_t *nl = memchr(*data, '\n', *size);
        size_t n = nl ? (size_t)(nl - *data) : *size;
        char *s = xstrndup((const char *)*data, n);
        *data += nl ? n + 1 : n;
        *size -= nl ? n + 1 : n;
        return s;
}

static void check(const push_verdict *v)
{
        if (v->outcome >= PUSH_OUTCOME_COUNT || !v->message)
                abort();
        if ((v->outcome == PUSH_QUEUED) != (v->n_sources > 0))
                abort();
        for (size_t i = 0; i < v->n_sources; i++) {
                bool known = false;
                for (size_t j = 0; j < ARRAY_SIZE(sources); j++)
                        known =
                            known || (sources[j].secret && streq(sources[j].name, v->sources[i]));
                if (!known)
                        abort();
        }
        (void)push_outcome_status(v->outcome);
        (void)push_outcome_name(v->outcome);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *forge_name = line(&data, &size);
        _cleanup_free_ char *sig = line(&data, &size);
        _cleanup_free_ char *event = line(&data, &size);
        _cleanup_free_ char *path = xasprintf("/hooks/%s", forge_name);
        push_forge forge = PUSH_GENERIC;
        (void)push_forge_from_path(path, &forge);
        if (streq(sig, "SIGN")) {
                _cleanup_free_ char *hex = hash_hmac_sha256_hex(SECRET, strlen(SECRET), data, size);
                free(sig);
                sig = forge == PUSH_GITLAB  ? xstrdup(SECRET)
                      : forge == PUSH_GITEA ? xstrdup(hex)
                                            : xasprintf("sha256=%s", hex);
        }
        push_request req = {.forge = forge,
                            .signature = *sig ? sig : NULL,
                            .event = *event ? event : NULL,
                            .body = (const char *)data,
                            .len = size};
        push_verdict v;
        push_judge(&req, sources, ARRAY_SIZE(sources), &v);
        check(&v);
        push_verdict_release(&v);

        _cleanup_free_ char *text = xstrndup((const char *)data, size);
        free(push_url_normalize(text));
        (void)push_url_same(text, sources[0].url);
        (void)push_ref_matches(text, "refs/heads/main");
        (void)push_ref_matches("main", text);
        (void)push_signature_ok(forge, SECRET, text, (const char *)data, size);
        return 0;
}
