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

/*
 * Which host key to ask a server for. An SSH client offers the host key
 * algorithms it implements in an order, and the server picks the first it
 * has a key for; libssh2's order starts with ECDSA, so a host listed in
 * known_hosts with its Ed25519 key only (`ssh-keyscan -t ed25519`) would
 * show its ECDSA key and be refused. OpenSSH's client puts the types
 * known_hosts lists for the host first; so does gitcd, from these.
 *
 * known_hosts_lines() (text in memory): the lines that apply to host:port
 * (without a marker: @revoked and @cert-authority lines say nothing about
 * which key to ask for), rewritten as "<name> <type> <key>\n" with the
 * plain name (hashed names too), the preferred type first: Ed25519, ECDSA
 * (nistp256, 384, 521), RSA, DSA, then any other. "" when none.
 *
 * known_hosts_algorithms(): the host key algorithms to offer host:port,
 * for libssh2_session_method_pref(LIBSSH2_METHOD_HOSTKEY): those of the
 * types the file lists for it, in that order (an RSA key: rsa-sha2-512,
 * rsa-sha2-256, ssh-rsa), then the other algorithms of supported (what the
 * SSH library implements, in its order), certificate ones left out;
 * only algorithms in supported. NULL when the file lists no key for the
 * host or cannot be read: the library's own order then.
 */
char *known_hosts_lines(const char *text, size_t text_len, const char *host, int port);
char *known_hosts_algorithms(const char *path, const char *host, int port,
                             const char *const *supported, size_t n_supported);
