/*
 * Whether anything still listens on a member's port (targets/health.h).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "targets/health.h"
#include "util/macro.h"
#include "util/xalloc.h"

bool target_port_accepts(const char *host, int port, int timeout_ms)
{
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        char service[16];
        snprintf(service, sizeof(service), "%d", port);
        if (getaddrinfo(host, service, &hints, &ai) != 0)
                return false;
        bool accepted = false;
        for (const struct addrinfo *a = ai; a && !accepted; a = a->ai_next) {
                int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        continue;
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                        accepted = true;
                } else if (errno == EINPROGRESS) {
                        struct pollfd p = {.fd = fd, .events = POLLOUT};
                        int err = 0;
                        socklen_t len = sizeof(err);
                        accepted = poll(&p, 1, timeout_ms) == 1 &&
                                   getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
                                   err == 0;
                }
                close(fd);
        }
        freeaddrinfo(ai);
        return accepted;
}
