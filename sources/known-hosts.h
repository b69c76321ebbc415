/*
 * Strict host-key checking against an OpenSSH known_hosts file: plain and
 * `[host]:port` names, patterns with * and ?, negated patterns, hashed names
 * (|1|salt|hash) and @revoked lines. There is no "trust on first use": a
 * host that is missing from the file is refused.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * Check the raw public-key blob a server offered for host:port.
 *   0        the key is listed for that host
 *   -EACCES  refused; *ret_message says why and shows the offered key's
 *            SHA256 fingerprint (unknown host, changed key, revoked key)
 *   -ENOENT, -EIO  the file cannot be read (*ret_message says so)
 */
int known_hosts_check(const char *path, const char *host, int port, const uint8_t *key,
                      size_t key_len, char **ret_message);

/* The same with the file's text in memory (-EACCES or 0 only). */
int known_hosts_check_buffer(const char *text, size_t text_len, const char *host, int port,
                             const uint8_t *key, size_t key_len, char **ret_message);

/* How OpenSSH names the host in known_hosts: "host" for port 22, else "[host]:port". */
char *known_hosts_name(const char *host, int port);
