/*
 * The ports of the local target's members: every member gets its own client,
 * peer and metrics ports in PORT_RANGE_LOW..PORT_RANGE_HIGH, never one
 * recorded for another member of this state folder and never one something
 * else holds (tried by binding it).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>
#include "util/xalloc.h"
#include "targets/local-internal.h"

#define PORT_RANGE_LOW  20000
#define PORT_RANGE_HIGH 32000 /* below Linux's default ephemeral range */

/* --- ports ------------------------------------------------------------- */

static bool port_bindable(int port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return false;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        return ok;
}

typedef struct port_set {
        int *ports;
        size_t n;
        size_t alloc;
} port_set;

static void port_set_add(port_set *s, int port)
{
        if (port <= 0)
                return;
        s->ports = xgrow(s->ports, &s->alloc, s->n + 1, sizeof(int));
        s->ports[s->n++] = port;
}

static bool port_set_has(const port_set *s, int port)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->ports[i] == port)
                        return true;
        return false;
}

static void add_member_ports(local_target *lt, const char *ns, const char *cluster,
                             const char *member, void *userdata)
{
        port_set *used = userdata;
        local_member *m = lt_find_loaded(lt, ns, cluster, member);
        _cleanup_(local_member_freep) local_member *tmp = NULL;
        if (!m && lt_member_load(lt, ns, cluster, member, &tmp) == 0)
                m = tmp;
        if (!m)
                return;
        port_set_add(used, m->client_port);
        port_set_add(used, m->peer_port);
        port_set_add(used, m->metrics_port);
}

/* Every port recorded in a member.json under state_dir. */
static void collect_used_ports(local_target *lt, port_set *used)
{
        lt_for_each_member_dir(lt, add_member_ports, used);
}

static int pick_port(port_set *used, unsigned *cursor)
{
        unsigned span = PORT_RANGE_HIGH - PORT_RANGE_LOW;
        for (unsigned tries = 0; tries < span; tries++) {
                int port = PORT_RANGE_LOW + (int)((*cursor)++ % span);
                if (port_set_has(used, port) || !port_bindable(port))
                        continue;
                port_set_add(used, port);
                return port;
        }
        return -EADDRINUSE;
}

/* Allocate the member's three ports under a lock on the state directory, and record them. */
int lt_allocate_ports(local_target *lt, local_member *m)
{
        _cleanup_free_ char *lock_path = xasprintf("%s/ports.lock", lt->state_dir);
        _cleanup_close_ int lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock_fd < 0)
                return target_fail(&lt->base, -errno, "cannot open %s: %s", lock_path,
                                   strerror(errno));
        while (flock(lock_fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return target_fail(&lt->base, -errno, "cannot lock %s: %s", lock_path,
                                           strerror(errno));
        port_set used = {0};
        collect_used_ports(lt, &used);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned cursor = (unsigned)getpid() * 7919u + (unsigned)ts.tv_nsec;
        int ports[3];
        int r = 0;
        for (size_t i = 0; i < 3 && r >= 0; i++) {
                r = pick_port(&used, &cursor);
                ports[i] = r;
        }
        free(used.ports);
        if (r < 0)
                return target_fail(&lt->base, r, "no free 127.0.0.1 port in %d-%d", PORT_RANGE_LOW,
                                   PORT_RANGE_HIGH - 1);
        m->client_port = ports[0];
        m->peer_port = ports[1];
        m->metrics_port = ports[2];
        r = lt_member_save(m);
        if (r < 0)
                return target_fail(&lt->base, r, "member %s: cannot write member.json: %s", m->name,
                                   strerror(-r));
        return 0;
}
