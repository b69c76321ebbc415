/*
 * The health GET of the local and hosts targets (targets/health.h).
 */
#include <string.h>

#include "targets/health.h"
#include "util/macro.h"
#include "util/xalloc.h"

CURLcode target_health_perform(CURL *h, const char *url, strbuf *body)
{
        CURLcode cr = curl_easy_perform(h);
        if (cr != CURLE_SSL_CONNECT_ERROR || !strneq(url, "https://", 8))
                return cr;
        _cleanup_free_ char *plain = xasprintf("http://%s", url + 8);
        sb_reset(body);
        curl_easy_setopt(h, CURLOPT_URL, plain);
        return curl_easy_perform(h);
}
