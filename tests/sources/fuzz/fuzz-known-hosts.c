/*
 * Fuzz target for known_hosts parsing and matching: the input is a
 * known_hosts file, checked for a fixed ed25519 host key against plain,
 * [host]:port and wildcard names. The result is 0 or -EACCES, and a refusal
 * always comes with a message naming the offered key's fingerprint. The
 * lines kept for a host (known_hosts_lines, which decide the host key type
 * asked for) are whole "<name> <type> <key>" lines, each naming the host
 * as OpenSSH does.
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

                char *lines =
                    known_hosts_lines((const char *)data, size, hosts[i].host, hosts[i].port);
                char *name = known_hosts_name(hosts[i].host, hosts[i].port);
                size_t name_len = strlen(name);
                for (const char *l = lines; *l;) {
                        const char *nl = strchr(l, '\n');
                        if (!nl || strncmp(l, name, name_len) != 0 || l[name_len] != ' ')
                                abort();
                        const char *type = l + name_len + 1;
                        const char *sp = memchr(type, ' ', (size_t)(nl - type));
                        if (!sp || sp == type || sp + 1 >= nl ||
                            memchr(sp + 1, ' ', (size_t)(nl - sp - 1)))
                                abort();
                        l = nl + 1;
                }
                free(name);
                free(lines);
        }
        free(key);
        return 0;
}
