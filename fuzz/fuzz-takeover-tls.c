/*
 * Fuzz target for a coreos takeover's TLS checks (targets/takeover-tls.c):
 * the PEM texts read from the old cluster's Secrets and from the Secret
 * the user names. The input is up to five texts separated by lines
 * "--8<--": the server, peer and operator Secrets' CAs, then the given CA
 * certificate and key. Each is judged for tls.provider auto (the given
 * pair) and secrets (the first three as the spec's Secrets' ca.crt). A
 * judgement ends with a refusal (-EPERM and a reason holding no key), or
 * with the CA (and for auto its key, which matches it); never a crash or
 * a leak.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "targets/takeover-tls.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void judge(const takeover_tls_facts *f, tls_provider p)
{
        etcd_cluster c = {.name = "kc", .namespace_ = "default"};
        c.tls.provider = p;
        c.tls.client.enabled = c.tls.peer.enabled = true;
        c.adopt.from = ADOPT_FROM_COREOS;
        pki_cert *ca = NULL;
        pki_key *key = NULL;
        char *why = NULL;
        int k = takeover_tls_judge(f, &c, &ca, &key, &why);
        if (k == -EPERM) {
                if (!why || ca || key || strstr(why, "PRIVATE KEY"))
                        abort();
                free(why);
                return;
        }
        if (k != 1 || why || !ca || (p == TLS_PROVIDER_AUTO) != (key != NULL))
                abort();
        if (key && !pki_key_matches(key, ca))
                abort();
        pki_cert_free(ca);
        pki_key_free(key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = xmalloc(size + 1);
        memcpy(text, data, size);
        text[size] = '\0';
        char *parts[5] = {NULL};
        size_t n = 0;
        for (char *p = text; p && n < 5;) {
                parts[n++] = p;
                char *cut = strstr(p, "\n--8<--\n");
                if (cut) {
                        *cut = '\0';
                        p = cut + 8;
                } else {
                        p = NULL;
                }
        }
        takeover_tls_facts f = {.client_tls = true, .peer_tls = true};
        static const char *const names[] = {"server-ca.crt", "peer-ca.crt", "etcd-client-ca.crt"};
        for (size_t i = 0; i < 3; i++) {
                f.old_ca[i] = (takeover_pem){names[i], parts[i]};
                f.spec_ca[i] = (takeover_pem){"ca.crt", parts[i]};
        }
        f.given_cert = (takeover_pem){"tls.crt", parts[3]};
        f.given_key = (takeover_pem){"tls.key", parts[4]};
        judge(&f, TLS_PROVIDER_AUTO);
        judge(&f, TLS_PROVIDER_SECRETS);
        free(text);
        return 0;
}
