/*
 * The receiver's PUT checks (receiver_check_put, snapstore/receiver.h): the
 * input's first byte says which of the four request fields are absent
 * (bit i: field i is NULL) and which room to give (bit 4: no limit, else
 * 4096 bytes); the rest is the key, Content-Length, Transfer-Encoding and
 * X-Gitcd-Sha256, separated by NUL bytes. Whatever is accepted must be a
 * key that stays inside the staging folder (no empty, "." or ".."
 * component, no leading "/", no control character), a size within the
 * room, and 64 lowercase hex digits; a refusal is a 4xx with a reason.
 *
 * Bit 5 set: the checks of store mode's HEAD, GET and DELETE
 * (receiver_check_key) instead, with the key and the method (the second
 * field; absent: "GET"). Whatever is accepted is one of the three methods
 * with a key as above.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapstore/receiver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_key(const char *key)
{
        if (!*key || key[0] == '/')
                abort();
        for (const char *c = key;;) {
                const char *end = strchrnul(c, '/');
                size_t n = (size_t)(end - c);
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        abort();
                for (const char *p = c; p < end; p++)
                        if ((unsigned char)*p < 0x20)
                                abort();
                if (!*end)
                        break;
                c = end + 1;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size == 0)
                return 0;
        unsigned flags = data[0];
        char *buf = malloc(size + 4);
        if (!buf)
                return 0;
        memcpy(buf, data + 1, size - 1);
        memset(buf + size - 1, 0, 5);
        const char *field[4];
        const char *p = buf;
        for (int i = 0; i < 4; i++) {
                field[i] = (flags & (1u << i)) ? NULL : p;
                p += strlen(p);
                if (p < buf + size - 1)
                        p++;
        }
        if (flags & 32) {
                const char *method = field[1] ? field[1] : "GET", *why = NULL;
                unsigned status = field[0] ? receiver_check_key(method, field[0], &why) : 0;
                if (!field[0]) {
                        free(buf);
                        return 0;
                }
                if (status == 0) {
                        check_key(field[0]);
                        if (strcmp(method, "HEAD") && strcmp(method, "GET") &&
                            strcmp(method, "DELETE"))
                                abort();
                } else if (status < 400 || status > 499 || !why || !*why) {
                        abort();
                }
                free(buf);
                return 0;
        }
        int64_t room = (flags & 16) ? -1 : 4096, got = -1;
        const char *why = NULL;
        unsigned status =
            receiver_check_put(field[0], field[1], field[2], field[3], room, &got, &why);
        if (status == 0) {
                check_key(field[0]);
                if (got < 0 || (room >= 0 && got > room) || !field[1] || field[2] || !field[3] ||
                    strlen(field[3]) != 64 || strspn(field[3], "0123456789abcdef") != 64)
                        abort();
        } else if (status < 400 || status > 499 || !why || !*why) {
                abort();
        }
        free(buf);
        return 0;
}
