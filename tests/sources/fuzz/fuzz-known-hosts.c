/*
 * Fuzz target for known_hosts parsing and matching: the input is a
 * known_hosts file, checked for a fixed ed25519 host key against plain,
 * [host]:port and wildcard names. The result is 0 or -EACCES, and a refusal
 * always comes with a message naming the offered key's fingerprint.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sources/known-hosts.h"
#include "sources/sshwire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char key_b64[] =
            "AAAAC3NzaC1lZDI1NTE5AAAAICrFsnd/Tieu9ofadDkR6ayfhKhCrKbXgS/H+DWclmsT";
        static const struct {
                const char *host;
                int port;
        } hosts[] = {{"127.0.0.1", 22}, {"127.0.0.1", 2222}, {"git.example.org", 22}};
        uint8_t *key = NULL;
        size_t key_len;

        if (base64_decode(key_b64, strlen(key_b64), &key, &key_len) < 0)
                abort();
        for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
                char *msg = NULL;
                int r = known_hosts_check_buffer((const char *)data, size, hosts[i].host,
                                                 hosts[i].port, key, key_len, &msg);

                if (r != 0 && (r != -EACCES || !msg || !strstr(msg, "SHA256:")))
                        abort();
                free(msg);
        }
        free(key);
        return 0;
}
