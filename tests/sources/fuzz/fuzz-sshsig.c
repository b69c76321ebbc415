/*
 * Fuzz target for SSH signature verification: the input is an
 * allowed_signers text, a NUL byte, then an armored signature (without a
 * NUL, the whole input is the signature and the signers list is empty). The
 * signed data is fixed ("fuzz payload\n", what the seed signatures sign), so
 * mutations of a valid seed exercise every parsing and verification path.
 * Every verdict must carry a reason; everything is released so
 * LeakSanitizer checks the error paths.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sources/sshsig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char payload[] = "fuzz payload\n";
        const uint8_t *nul = memchr(data, '\0', size);
        const char *signers = "", *sig = (const char *)data;
        size_t signers_len = 0, sig_len = size;
        sshsig_verdict v;

        if (nul) {
                signers = (const char *)data;
                signers_len = (size_t)(nul - data);
                sig = (const char *)nul + 1;
                sig_len = size - signers_len - 1;
        }
        sshsig_verify_buffer(sig, sig_len, payload, strlen(payload), signers, signers_len,
                             1700000000, &v);
        if (!v.reason || (v.verified && !v.identity))
                abort();
        sshsig_verdict_release(&v);
        return 0;
}
