/*
 * The S3 answer fuzz target: any bytes are searched for the tags the S3
 * client reads from a server's XML answers (Code, Message, UploadId) with
 * s3_xml_value(), over the whole input and over every shorter length the
 * input's first byte gives, so a tag cut by the length is exercised too.
 * A found value is never longer than the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapstore/s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *xml, size_t len, const char *tag)
{
        char *v = s3_xml_value(xml, len, tag);
        if (v && strlen(v) > len)
                abort();
        free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char *const tags[] = {"Code", "Message", "UploadId"};
        /* Not NUL-terminated on purpose: the length bounds every read. */
        char *xml = malloc(size ? size : 1);
        if (!xml)
                return 0;
        memcpy(xml, data, size);
        size_t cut = size > 0 ? data[0] % (size + 1) : 0;
        for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
                check(xml, size, tags[i]);
                check(xml, cut, tags[i]);
        }
        free(xml);
        return 0;
}
