/*
 * The node simulator: a kubelet (and scheduler) for tests, running the
 * Pods gitcd creates against the real kube-apiserver of kubeapi.c as local
 * processes. The behaviour is specified in kubeapi.h.
 *
 * It runs in a forked child (PR_SET_PDEATHSIG SIGKILL, tracked by the
 * harness) with its own kube client, so the test's clients and the
 * simulator never share a connection. The child polls instead of watching:
 * every NODESIM_TICK_MS it lists PersistentVolumeClaims and Pods of every
 * namespace, binds unscheduled Pods to its node, handles each Pod bound to
 * it, reaps exited processes and writes a Pod's status only when it
 * changed. Polling keeps the loop a plain level-based pass (the same pass
 * repeated is harmless) and costs two small lists per tick.
 *
 * Each Pod gets its own loopback address 127.0.0.x (x from 10 up, stable for
 * its namespace/name while the simulator lives), so every etcd keeps the
 * standard ports. The addresses are written to work_dir/addresses, which
 * nodesim_pod_address() reads in the parent; Pod DNS names go into the
 * hosts file (bind-mounted over /etc/hosts by kubeapi_private_hosts()),
 * always rewritten in place with one write, never renamed.
 *
 * Every etcd runs in its own process group with PR_SET_PDEATHSIG SIGKILL:
 * if the simulator dies, its processes die with it. On SIGTERM the
 * simulator stops them (SIGTERM, SIGKILL after 10 s) and exits.
 */
#include "tests/harness/kubeapi.h"

#include <curl/curl.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

#define NODESIM_TICK_MS  400
#define NODESIM_PROBE_MS 1000
/* How often a running Pod's Secret volumes are synced (the kubelet: about a minute). */
#define NODESIM_SECRET_SYNC_MS 5000
#define NODESIM_BACKOFF_MS     1000
#define NODESIM_BACKOFF_MAX_MS 10000
#define NODESIM_CRASH_WINDOW_S 60
#define NODESIM_CRASH_EXITS    3
#define NODESIM_STOP_MAX_S     10
#define NODESIM_FIRST_ADDRESS  10
#define NODESIM_LAST_ADDRESS   254
#define PVC_PROTECTION         "kubernetes.io/pvc-protection"
/* Shared by every simulator on the machine (tests run in parallel). */
#define NODESIM_LOCK_DIR "/tmp/gitcd-nodesim-addresses"

extern char **environ;

struct nodesim {
        pid_t pid;
        char *work_dir;
};

/* ---- the child's state ---- */

typedef struct sim_pod {
        char *ns, *name, *uid;
        int addr; /* last octet of 127.0.0.x */
        json_t *obj;
        char *pod_dir;
        pid_t pid; /* process group leader; 0 when not running */
        bool started_once;
        bool finished; /* restartPolicy Never: the container exited and stays so */
        int restarts;
        int64_t exits[NODESIM_CRASH_EXITS]; /* times (ms) of the latest exits */
        int64_t next_start_ms;
        int64_t started_ms; /* when the running process started */
        int backoff_ms;
        int last_exit_code;
        char *last_finished_at;
        char *start_time;  /* when the simulator took the Pod */
        char *started_at;  /* when the running process started */
        char *wait_reason; /* why the container is not running, NULL when it is */
        char *wait_message;
        bool ready;
        int64_t next_probe_ms;
        int64_t next_secret_sync_ms; /* the next refresh of its Secret volumes */
        char *ready_since;           /* lastTransitionTime of Ready/ContainersReady */
        bool deleting;
        bool term_sent;
        int64_t kill_at_ms;
        char *written; /* the status last written, as compact JSON */
} sim_pod;

typedef struct sim {
        char *node;
        char *work_dir;
        char *hosts_path;
        char *hosts_base; /* the hosts file as it was: the localhost lines */
        char *hosts_written;
        char *addresses_written;
        kube_client *kc;
        sim_pod **pods;
        size_t n_pods, alloc_pods;
        char **addr_keys; /* "ns/name" that 127.0.0.addr_octets[i] belongs to */
        int *addr_octets;
        int *addr_locks; /* the lock file descriptor of each address */
        size_t n_addrs, alloc_addrs;
        int next_octet;
        json_t *pvcs; /* items of the last successful PVC list, or NULL */
} sim;

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
        (void)sig;
        stop_requested = 1;
}

static int64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *rfc3339_now(void)
{
        char buf[32];
        time_t t = time(NULL);
        struct tm tm;

        gmtime_r(&t, &tm);
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
        return xstrdup(buf);
}

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

        /* Interrupted by SIGTERM: the loop then sees stop_requested. */
        nanosleep(&ts, NULL);
}

/* "a.b.c" lookup in nested JSON objects. */
static json_t *jget(const json_t *v, const char *path)
{
        char key[128];

        while (v && *path) {
                const char *dot = strchr(path, '.');
                size_t n = dot ? (size_t)(dot - path) : strlen(path);
                if (n >= sizeof(key))
                        return NULL;
                memcpy(key, path, n);
                key[n] = '\0';
                v = json_object_get(v, key);
                path += n + (dot ? 1 : 0);
        }
        return (json_t *)v;
}

static const char *jstr(const json_t *v, const char *path)
{
        return json_string_value(jget(v, path));
}

/* ---- addresses and the hosts file ---- */

/*
 * Whether 127.0.0.x can be ours: a lock file held for the simulator's
 * lifetime (simulators of tests running in parallel skip it; the kernel
 * drops the lock when the process dies) and etcd's ports free on it.
 */
static int claim_address(int x)
{
        _cleanup_free_ char *path = xasprintf(NODESIM_LOCK_DIR "/127.0.0.%d.lock", x);
        static const int ports[] = {2379, 2380, 2381};
        int fd;

        (void)mkdir(NODESIM_LOCK_DIR, 0777);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                close(fd);
                return -EBUSY;
        }
        for (size_t i = 0; i < ARRAY_SIZE(ports); i++) {
                struct sockaddr_in sin = {.sin_family = AF_INET,
                                          .sin_port = htons((uint16_t)ports[i]),
                                          .sin_addr.s_addr = htonl(0x7f000000u | (unsigned)x)};
                int one = 1, sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r;
                if (sock < 0)
                        continue;
                /* As etcd (Go) binds: SO_REUSEADDR, so TIME_WAIT does not count. */
                (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                r = bind(sock, (struct sockaddr *)&sin, sizeof(sin));
                close(sock);
                if (r < 0) {
                        close(fd);
                        return -EADDRINUSE;
                }
        }
        return fd;
}

static int address_for(sim *s, const char *ns, const char *name)
{
        _cleanup_free_ char *key = xasprintf("%s/%s", ns, name);
        int fd = -1, x;

        for (size_t i = 0; i < s->n_addrs; i++)
                if (streq(s->addr_keys[i], key))
                        return s->addr_octets[i];
        for (x = s->next_octet; x <= NODESIM_LAST_ADDRESS; x++) {
                fd = claim_address(x);
                if (fd >= 0)
                        break;
        }
        if (fd < 0)
                return -ENOSPC;
        s->next_octet = x + 1;
        s->addr_keys = xgrow(s->addr_keys, &s->alloc_addrs, s->n_addrs + 1, sizeof(char *));
        s->addr_octets = xrealloc(s->addr_octets, s->alloc_addrs * sizeof(int));
        s->addr_locks = xrealloc(s->addr_locks, s->alloc_addrs * sizeof(int));
        s->addr_keys[s->n_addrs] = TAKE_PTR(key);
        s->addr_octets[s->n_addrs] = x;
        s->addr_locks[s->n_addrs++] = fd;
        return x;
}

static void write_addresses(sim *s)
{
        _cleanup_free_ char *path = path_join(s->work_dir, "addresses");
        strbuf sb = STRBUF_INIT;

        for (size_t i = 0; i < s->n_pods; i++)
                sb_printf(&sb, "%s/%s 127.0.0.%d %d\n", s->pods[i]->ns, s->pods[i]->name,
                          s->pods[i]->addr, (int)s->pods[i]->pid);
        if (streq_ptr(s->addresses_written, sb_str(&sb))) {
                sb_release(&sb);
                return;
        }
        free(s->addresses_written);
        s->addresses_written = sb_detach(&sb);
        (void)write_file_atomic(path, s->addresses_written, strlen(s->addresses_written), 0644);
}

/* In place, in one write: the file is the source of the /etc/hosts bind mount. */
/*
 * Put own (this simulator's lines, each ending in " #nodesim=<node>") into
 * the hosts file in place of the lines it wrote before, keeping every
 * other line: two simulators (two API servers in one test) share the file.
 * Under flock, as both rewrite it; in place, as it backs a bind mount.
 */
static void write_hosts_text(const sim *s, const char *own)
{
        int fd = open(s->hosts_path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return;
        (void)flock(fd, LOCK_EX);
        strbuf cur = STRBUF_INIT, out = STRBUF_INIT;
        char buf[4096];
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                sb_append_len(&cur, buf, (size_t)n);
        _cleanup_free_ char *tag = xasprintf(" #nodesim=%s\n", s->node);
        const char *p = sb_str(&cur);
        while (*p) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
                size_t tl = strlen(tag);
                if (!(len >= tl && strncmp(p + len - tl, tag, tl) == 0))
                        sb_append_len(&out, p, len);
                p += len;
        }
        sb_append(&out, own);
        if (ftruncate(fd, 0) == 0)
                (void)!pwrite(fd, sb_str(&out), out.len, 0);
        sb_release(&cur);
        sb_release(&out);
        (void)flock(fd, LOCK_UN);
        close(fd);
}

static void write_hosts(sim *s)
{
        strbuf sb = STRBUF_INIT;

        if (!s->hosts_path)
                return;
        for (size_t i = 0; i < s->n_pods; i++) {
                const sim_pod *p = s->pods[i];
                const char *host = jstr(p->obj, "spec.hostname");
                const char *sub = jstr(p->obj, "spec.subdomain");
                if (isempty(host) || isempty(sub))
                        continue;
                sb_printf(&sb, "127.0.0.%d %s.%s.%s.svc.cluster.local %s.%s.%s.svc #nodesim=%s\n",
                          p->addr, host, sub, p->ns, host, sub, p->ns, s->node);
        }
        if (streq_ptr(s->hosts_written, sb_str(&sb))) {
                sb_release(&sb);
                return;
        }
        free(s->hosts_written);
        s->hosts_written = sb_detach(&sb);
        write_hosts_text(s, s->hosts_written);
}

/* ---- processes ---- */

static void pod_free(sim_pod *p)
{
        if (!p)
                return;
        free(p->ns);
        free(p->name);
        free(p->uid);
        json_decref(p->obj);
        free(p->pod_dir);
        free(p->last_finished_at);
        free(p->start_time);
        free(p->started_at);
        free(p->wait_reason);
        free(p->wait_message);
        free(p->ready_since);
        free(p->written);
        free(p);
}

static void set_waiting(sim_pod *p, const char *reason, const char *fmt, ...) _printf_(3, 4);
static void set_waiting(sim_pod *p, const char *reason, const char *fmt, ...)
{
        va_list ap;

        free(p->wait_reason);
        free(p->wait_message);
        p->wait_reason = xstrdup(reason);
        va_start(ap, fmt);
        p->wait_message = xvasprintf(fmt, ap);
        va_end(ap);
}

/* Stop one process group now: SIGTERM, SIGKILL after max_s seconds, reaped. */
static void stop_process(sim_pod *p, int max_s)
{
        if (p->pid <= 0)
                return;
        kill(-p->pid, SIGTERM);
        for (int i = 0; waitpid(p->pid, NULL, WNOHANG) == 0; i++) {
                if (i == max_s * 20)
                        kill(-p->pid, SIGKILL);
                usleep(50 * 1000);
        }
        kill(-p->pid, SIGKILL); /* anything the process left in its group */
        p->pid = 0;
}

static void pod_remove(sim *s, size_t i)
{
        sim_pod *p = s->pods[i];

        stop_process(p, NODESIM_STOP_MAX_S);
        if (p->pod_dir)
                (void)rm_rf(p->pod_dir);
        pod_free(p);
        s->pods[i] = s->pods[--s->n_pods];
}

/* The host folder of a mountPath, with the rest of value appended; NULL when none matches. */
static char *map_path(char **mount_paths, char **host_paths, size_t n, const char *value)
{
        size_t best = n, best_len = 0;

        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(mount_paths[i]);
                while (len > 1 && mount_paths[i][len - 1] == '/')
                        len--;
                if (strncmp(value, mount_paths[i], len) != 0 ||
                    (value[len] != '\0' && value[len] != '/'))
                        continue;
                if (best == n || len > best_len) {
                        best = i;
                        best_len = len;
                }
        }
        if (best == n)
                return NULL;
        return xasprintf("%s%s", host_paths[best], value + best_len);
}

/* Replace every "//0.0.0.0:" host of a URL list with the Pod's address. */
static char *listen_on(const char *arg, int addr)
{
        strbuf sb = STRBUF_INIT;
        const char *p = arg, *hit;

        while ((hit = strstr(p, "//0.0.0.0:"))) {
                sb_append_len(&sb, p, (size_t)(hit - p));
                sb_printf(&sb, "//127.0.0.%d:", addr);
                p = hit + strlen("//0.0.0.0:");
        }
        sb_append(&sb, p);
        return sb_detach(&sb);
}

static json_t *find_pvc(const sim *s, const char *ns, const char *claim)
{
        size_t i;
        json_t *pvc;

        json_array_foreach(s->pvcs, i, pvc)
        {
                if (streq_ptr(jstr(pvc, "metadata.namespace"), ns) &&
                    streq_ptr(jstr(pvc, "metadata.name"), claim))
                        return pvc;
        }
        return NULL;
}

/* Does dir/..data/key hold exactly data? */
static bool same_content(const char *dir, const char *key, const char *data, size_t len)
{
        _cleanup_free_ char *path = xasprintf("%s/..data/%s", dir, key);
        _cleanup_free_ char *have = NULL;
        size_t have_len = 0;
        return read_file(path, 1 << 20, &have, &have_len) == 0 && have_len == len &&
               memcmp(have, data, len) == 0;
}

/*
 * A Secret volume the way the kubelet's atomic writer keeps it: the keys
 * in a folder ..<stamp>, the link ..data to it (replaced with one rename),
 * and each key a link to ..data/<key>; so a reader sees the old set or the
 * new one, never a mix (etcd reads tls.crt and tls.key separately). The
 * folder is rewritten only when the Secret's keys changed. refresh: a
 * running Pod's periodic sync, which keeps the old content when the
 * Secret cannot be read, as the kubelet does; otherwise a Pod that cannot
 * get its Secret waits.
 */
static int write_secret(sim *s, sim_pod *p, const json_t *vol, const char *dir, bool refresh)
{
        const char *name = jstr(vol, "secret.secretName");
        const json_t *dm = jget(vol, "secret.defaultMode");
        mode_t mode = json_is_integer(dm) ? (mode_t)json_integer_value(dm) : 0644;
        kube_gvr secrets = {"", "v1", "secrets", true};
        json_t *secret = NULL, *val;
        const char *key;
        int r;

        if (isempty(name))
                return -EINVAL;
        r = kube_get(s->kc, &secrets, p->ns, name, &secret);
        if (r < 0) {
                if (!refresh)
                        set_waiting(p, "ContainerCreating", "secret \"%s\" not found", name);
                return r;
        }
        const json_t *data = json_object_get(secret, "data");
        /* Unchanged (the same keys, the same bytes): nothing to do. */
        _cleanup_free_ char *current = xasprintf("%s/..data", dir);
        bool changed = access(current, F_OK) < 0;
        json_object_foreach((json_t *)data, key, val)
        {
                _cleanup_free_ char *d = NULL;
                size_t len = 0;
                if (changed || strchr(key, '/') || key[0] == '.')
                        continue;
                if (kube_base64_decode(json_string_value(val), &d, &len) < 0 ||
                    !same_content(dir, key, d, len))
                        changed = true;
        }
        if (!changed) {
                json_decref(secret);
                return 0;
        }

        static unsigned seq;
        _cleanup_free_ char *stamp = xasprintf("..%lld_%u", (long long)now_ms(), seq++);
        _cleanup_free_ char *stamp_dir = path_join(dir, stamp);
        char old[PATH_MAX] = "";
        ssize_t old_len = readlink(current, old, sizeof(old) - 1);
        if (old_len > 0)
                old[old_len] = '\0';
        else
                old[0] = '\0';
        r = mkdir_p(stamp_dir, 0755);
        json_object_foreach((json_t *)data, key, val)
        {
                _cleanup_free_ char *path = NULL, *d = NULL, *link = NULL, *target = NULL;
                size_t len = 0;
                int fd;

                if (r < 0 || strchr(key, '/') || key[0] == '.')
                        continue;
                if (kube_base64_decode(json_string_value(val), &d, &len) < 0)
                        continue;
                path = path_join(stamp_dir, key);
                fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
                if (fd < 0) {
                        r = -errno;
                        continue;
                }
                if (write(fd, d, len) != (ssize_t)len)
                        r = -EIO;
                (void)fchmod(fd, mode);
                close(fd);
                /* The key's own link, made once: it follows ..data. */
                link = path_join(dir, key);
                target = xasprintf("..data/%s", key);
                struct stat st;
                if (lstat(link, &st) == 0 && !S_ISLNK(st.st_mode))
                        (void)unlink(link);
                if (lstat(link, &st) < 0 && symlink(target, link) < 0)
                        r = -errno;
        }
        if (r >= 0) {
                _cleanup_free_ char *tmp = xasprintf("%s/..data_tmp", dir);
                (void)unlink(tmp);
                if (symlink(stamp, tmp) < 0 || rename(tmp, current) < 0)
                        r = -errno;
        }
        if (r >= 0 && old[0]) {
                _cleanup_free_ char *old_dir = path_join(dir, old);
                (void)rm_rf(old_dir);
        }
        json_decref(secret);
        if (r < 0 && !refresh)
                set_waiting(p, "CreateContainerError", "cannot write secret \"%s\": %s", name,
                            strerror(-r));
        return r;
}

/* The kubelet's sync of a running Pod's Secret volumes: new Secret content reaches it. */
static void refresh_secrets(sim *s, sim_pod *p)
{
        const json_t *spec = json_object_get(p->obj, "spec");
        size_t i;
        json_t *vol;
        json_array_foreach(json_object_get(spec, "volumes"), i, vol)
        {
                const char *vname = jstr(vol, "name");
                if (isempty(vname) || !json_object_get(vol, "secret"))
                        continue;
                _cleanup_free_ char *host = path_join(p->pod_dir, vname);
                (void)write_secret(s, p, vol, host, true);
        }
}

typedef struct launch {
        char **argv;
        size_t argc;
        char **mounts, **hosts;
        size_t n_mounts;
        char **env;
        size_t n_env;
        char *binary;
        char *log_path;
} launch;

static void launch_release(launch *l)
{
        for (size_t i = 0; i < l->argc; i++)
                free(l->argv[i]);
        free(l->argv);
        for (size_t i = 0; i < l->n_mounts; i++) {
                free(l->mounts[i]);
                free(l->hosts[i]);
        }
        free(l->mounts);
        free(l->hosts);
        for (size_t i = 0; i < l->n_env; i++)
                free(l->env[i]);
        free(l->env);
        free(l->binary);
        free(l->log_path);
}

static json_t *find_volume(const json_t *spec, const char *name)
{
        size_t i;
        json_t *v;

        json_array_foreach(json_object_get(spec, "volumes"), i, v)
        {
                if (streq_ptr(jstr(v, "name"), name))
                        return v;
        }
        return NULL;
}

/*
 * Prepare what the container needs: volumes as folders, the binary of the
 * image's version, the command line rewritten for the host. Sets the
 * waiting reason and returns negative when the Pod cannot start yet.
 */
/* Volume mount m of the Pod's container onto a folder of the host, made as a kubelet would. */
static int mount_volume(sim *s, sim_pod *p, launch *l, const json_t *spec, const json_t *m)
{
        const char *vname = jstr(m, "name"), *mount_path = jstr(m, "mountPath");
        const char *sub_path = jstr(m, "subPath");
        const json_t *vol = find_volume(spec, vname);
        _cleanup_free_ char *host = NULL;

        if (!vol || isempty(mount_path)) {
                set_waiting(p, "CreateContainerConfigError", "volumeMount \"%s\": no such volume",
                            vname ? vname : "");
                return -EINVAL;
        }
        if (json_object_get(vol, "persistentVolumeClaim")) {
                const char *claim = jstr(vol, "persistentVolumeClaim.claimName");
                if (isempty(claim) || !find_pvc(s, p->ns, claim)) {
                        set_waiting(p, "ContainerCreating",
                                    "persistentvolumeclaim \"%s\" not found", claim ? claim : "");
                        return -ENOENT;
                }
                host = xasprintf("%s/volumes/%s/%s", s->work_dir, p->ns, claim);
                if (mkdir_p(host, 0755) < 0)
                        return -EIO;
        } else if (json_object_get(vol, "emptyDir")) {
                host = path_join(p->pod_dir, vname);
                if (mkdir_p(host, 0755) < 0)
                        return -EIO;
        } else if (json_object_get(vol, "secret")) {
                host = path_join(p->pod_dir, vname);
                if (write_secret(s, p, vol, host, false) < 0)
                        return -ENOENT;
        } else {
                set_waiting(p, "CreateContainerConfigError",
                            "volume \"%s\": only persistentVolumeClaim, emptyDir and "
                            "secret volumes are simulated",
                            vname);
                return -EINVAL;
        }
        if (!isempty(sub_path)) {
                /* as a kubelet: a missing subPath folder is made */
                char *sub = path_join(host, sub_path);
                free(host);
                host = sub;
                if (mkdir_p(host, 0755) < 0)
                        return -EIO;
        }
        l->mounts[l->n_mounts] = xstrdup(mount_path);
        l->hosts[l->n_mounts++] = TAKE_PTR(host);
        return 0;
}

/* The environment: ours plus the container's literal values. */
static void launch_environment(launch *l, const json_t *ctr)
{
        size_t i;
        const json_t *a;
        size_t n_environ = 0;
        while (environ[n_environ])
                n_environ++;
        l->env =
            xcalloc(n_environ + json_array_size(json_object_get(ctr, "env")) + 1, sizeof(char *));
        for (i = 0; i < n_environ; i++)
                l->env[l->n_env++] = xstrdup(environ[i]);
        json_array_foreach(json_object_get(ctr, "env"), i, a)
        {
                const char *name = jstr(a, "name"), *value = jstr(a, "value");
                if (!isempty(name))
                        l->env[l->n_env++] = xasprintf("%s=%s", name, value ? value : "");
        }
}

static int prepare(sim *s, sim_pod *p, launch *l)
{
        const json_t *spec = json_object_get(p->obj, "spec");
        const json_t *ctr = json_array_get(json_object_get(spec, "containers"), 0);
        const char *image = jstr(ctr, "image");
        const char *colon = image ? strrchr(image, ':') : NULL;
        const json_t *m, *a;
        size_t i, n_mounts = json_array_size(json_object_get(ctr, "volumeMounts"));
        size_t n_args;

        if (!ctr) {
                set_waiting(p, "CreateContainerConfigError", "the Pod has no container");
                return -EINVAL;
        }
        const char *cmd0 = json_string_value(json_array_get(json_object_get(ctr, "command"), 0));
        const char *cmd_base = cmd0 && strrchr(cmd0, '/') ? strrchr(cmd0, '/') + 1 : cmd0;
        bool gitcd = streq_ptr(cmd_base, "gitcd");
        /* gitcd's own image runs the gitcd under test, whatever its tag. */
        if (gitcd && !isempty(getenv("GITCD_BIN")))
                l->binary = xstrdup(getenv("GITCD_BIN"));
        /* The version from the image tag: "quay.io/coreos/etcd:v3.5.16" -> 3.5.16. */
        if (!gitcd && colon && !strchr(colon, '/')) {
                const char *tag = colon + 1;
                _cleanup_free_ char *version = xstrdup(tag[0] == 'v' ? tag + 1 : tag);
                l->binary = harness_etcd_path(version, "etcd");
        }
        if (!l->binary) {
                set_waiting(p, "ErrImagePull",
                            gitcd ? "image \"%s\": $GITCD_BIN is not set"
                                  : "image \"%s\": no etcd binary for its tag in the test cache",
                            image ? image : "");
                return -ENOENT;
        }

        l->mounts = xcalloc(n_mounts + 1, sizeof(char *));
        l->hosts = xcalloc(n_mounts + 1, sizeof(char *));
        json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m)
        {
                int r = mount_volume(s, p, l, spec, m);
                if (r < 0)
                        return r;
        }

        n_args = json_array_size(json_object_get(ctr, "command")) +
                 json_array_size(json_object_get(ctr, "args"));
        if (n_args == 0) {
                set_waiting(p, "CreateContainerConfigError", "the container has no command");
                return -EINVAL;
        }
        l->argv = xcalloc(n_args + 1, sizeof(char *));
        for (int part = 0; part < 2; part++) {
                json_array_foreach(json_object_get(ctr, part ? "args" : "command"), i, a)
                {
                        const char *arg = json_string_value(a) ? json_string_value(a) : "";
                        const char *eq = strchr(arg, '=');
                        char *mapped = NULL;

                        if (l->argc == 0) {
                                const char *base = strrchr(arg, '/') ? strrchr(arg, '/') + 1 : arg;
                                if (!streq(base, "etcd") && !streq(base, "gitcd")) {
                                        set_waiting(p, "CreateContainerError",
                                                    "only the etcd and gitcd commands are "
                                                    "simulated, not \"%s\"",
                                                    arg);
                                        return -EINVAL;
                                }
                                l->argv[l->argc++] = xstrdup(l->binary);
                                continue;
                        }
                        if (eq && arg[0] == '-' && arg[1] == '-') {
                                _cleanup_free_ char *flag = xstrndup(arg, (size_t)(eq - arg));
                                _cleanup_free_ char *value = NULL;
                                value = map_path(l->mounts, l->hosts, l->n_mounts, eq + 1);
                                if (!value && strneq(arg, "--listen-", 9))
                                        value = listen_on(eq + 1, p->addr);
                                /* gitcd snapshot receive --listen=0.0.0.0:PORT */
                                if (!value && gitcd && streq(flag, "--listen") &&
                                    strneq(eq + 1, "0.0.0.0:", 8))
                                        value = xasprintf("127.0.0.%d:%s", p->addr, eq + 9);
                                if (value)
                                        mapped = xasprintf("%s=%s", flag, value);
                        }
                        l->argv[l->argc++] = mapped ? mapped : xstrdup(arg);
                }
        }

        launch_environment(l, ctr);
        l->log_path = xasprintf("%s/logs/%s_%s.log", s->work_dir, p->ns, p->name);
        return 0;
}

static void start_process(sim *s, sim_pod *p)
{
        launch l = {0};
        pid_t pid;
        int fd;

        if (prepare(s, p, &l) < 0)
                goto out;
        fd = open(l.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
                set_waiting(p, "CreateContainerError", "cannot open %s: %s", l.log_path,
                            strerror(errno));
                goto out;
        }
        pid = fork();
        if (pid < 0) {
                set_waiting(p, "CreateContainerError", "fork: %s", strerror(errno));
                close(fd);
                goto out;
        }
        if (pid == 0) {
                sigset_t none;
                int devnull = open("/dev/null", O_RDONLY);

                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (devnull >= 0)
                        dup2(devnull, 0);
                dup2(fd, 1);
                dup2(fd, 2);
                /* Nothing of ours (API connections, address locks) leaks into etcd. */
                for (int i = 3; i < 1024; i++)
                        close(i);
                if (chdir(p->pod_dir) < 0)
                        _exit(126);
                execve(l.argv[0], l.argv, l.env);
                _exit(127);
        }
        /* Both sides set the group, so a signal sent right after fork finds it. */
        setpgid(pid, pid);
        close(fd);
        p->pid = pid;
        p->started_once = true;
        free(p->started_at);
        p->started_at = rfc3339_now();
        p->started_ms = now_ms();
        free(p->wait_reason);
        free(p->wait_message);
        p->wait_reason = p->wait_message = NULL;
        p->next_probe_ms = now_ms() + 200;
out:
        launch_release(&l);
}

/* ---- readiness ---- */

static size_t discard(char *data, size_t size, size_t nmemb, void *userdata)
{
        (void)data;
        (void)userdata;
        return size * nmemb;
}

/* The readinessProbe's httpGet against the Pod's address; no probe = ready when running. */
static bool probe(const sim_pod *p)
{
        const json_t *ctr = json_array_get(jget(p->obj, "spec.containers"), 0);
        const json_t *get = jget(ctr, "readinessProbe.httpGet");
        const json_t *port = json_object_get(get, "port");
        const char *path = jstr(get, "path");
        long port_no = 0, status = 0;
        _cleanup_free_ char *url = NULL;
        CURL *curl;
        CURLcode cc;

        if (!json_object_get(ctr, "readinessProbe"))
                return true;
        if (!get)
                return false;
        if (json_is_integer(port)) {
                port_no = (long)json_integer_value(port);
        } else if (json_is_string(port)) {
                size_t i;
                json_t *cp;
                json_array_foreach(json_object_get(ctr, "ports"), i, cp)
                {
                        if (streq_ptr(jstr(cp, "name"), json_string_value(port)))
                                port_no =
                                    (long)json_integer_value(json_object_get(cp, "containerPort"));
                }
        }
        if (port_no <= 0)
                return false;
        bool https = streq_ptr(jstr(get, "scheme"), "HTTPS");
        url = xasprintf("%s://127.0.0.%d:%ld%s%s", https ? "https" : "http", p->addr, port_no,
                        path && path[0] == '/' ? "" : "/", path ? path : "");
        curl = curl_easy_init();
        if (!curl)
                return false;
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 1000L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
        /* as a kubelet: an HTTPS probe checks no certificate */
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
        cc = curl_easy_perform(curl);
        if (cc == CURLE_OK)
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(curl);
        return status >= 200 && status < 400;
}

/* ---- status ---- */

static json_t *condition(const char *type, bool status, const char *since, const char *reason)
{
        json_t *c =
            json_pack("{s:s, s:s, s:n, s:s}", "type", type, "status", status ? "True" : "False",
                      "lastProbeTime", "lastTransitionTime", since);

        if (reason)
                json_object_set_new(c, "reason", json_string(reason));
        return c;
}

static json_t *pod_status(const sim_pod *p)
{
        const json_t *ctr = json_array_get(jget(p->obj, "spec.containers"), 0);
        bool running = p->pid > 0;
        json_t *st = json_object(), *cs, *state, *conds;
        _cleanup_free_ char *ip = xasprintf("127.0.0.%d", p->addr);

        const char *phase = !p->started_once         ? "Pending"
                            : !p->finished           ? "Running"
                            : p->last_exit_code == 0 ? "Succeeded"
                                                     : "Failed";
        json_object_set_new(st, "phase", json_string(phase));
        json_object_set_new(st, "hostIP", json_string("127.0.0.1"));
        if (p->started_once) {
                json_object_set_new(st, "podIP", json_string(ip));
                json_object_set_new(st, "podIPs", json_pack("[{s:s}]", "ip", ip));
        }
        json_object_set_new(st, "startTime", json_string(p->start_time));

        conds = json_array();
        json_array_append_new(conds, condition("Initialized", true, p->start_time, NULL));
        json_array_append_new(conds, condition("Ready", p->ready, p->ready_since,
                                               p->ready ? NULL : "ContainersNotReady"));
        json_array_append_new(conds, condition("ContainersReady", p->ready, p->ready_since,
                                               p->ready ? NULL : "ContainersNotReady"));
        json_array_append_new(conds, condition("PodScheduled", true, p->start_time, NULL));
        json_object_set_new(st, "conditions", conds);

        if (running)
                state = json_pack("{s:{s:s}}", "running", "startedAt", p->started_at);
        else if (p->finished)
                state = json_pack("{s:{s:i, s:s, s:s, s:s}}", "terminated", "exitCode",
                                  p->last_exit_code, "reason",
                                  p->last_exit_code == 0 ? "Completed" : "Error", "startedAt",
                                  p->started_at, "finishedAt", p->last_finished_at);
        else
                state = json_pack("{s:{s:s, s:s}}", "waiting", "reason",
                                  p->wait_reason ? p->wait_reason : "ContainerCreating", "message",
                                  p->wait_message ? p->wait_message : "");
        cs =
            json_pack("{s:s, s:b, s:i, s:s, s:s, s:b, s:o}", "name",
                      jstr(ctr, "name") ? jstr(ctr, "name") : "", "ready", p->ready, "restartCount",
                      p->restarts, "image", jstr(ctr, "image") ? jstr(ctr, "image") : "", "imageID",
                      "", "started", running, "state", state);
        if (p->last_finished_at)
                json_object_set_new(cs, "lastState",
                                    json_pack("{s:{s:i, s:s, s:s}}", "terminated", "exitCode",
                                              p->last_exit_code, "reason",
                                              p->last_exit_code == 0 ? "Completed" : "Error",
                                              "finishedAt", p->last_finished_at));
        json_object_set_new(st, "containerStatuses", json_pack("[o]", cs));
        return st;
}

static void write_status(sim *s, sim_pod *p)
{
        json_t *st = pod_status(p), *patch;
        char *text = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS);
        _cleanup_free_ char *path = NULL;

        if (streq_ptr(text, p->written)) {
                free(text);
                json_decref(st);
                return;
        }
        path = xasprintf("/api/v1/namespaces/%s/pods/%s/status", p->ns, p->name);
        patch = json_pack("{s:o}", "status", st);
        free(p->written);
        p->written = NULL;
        if (kube_request(s->kc, "PATCH", path, "application/merge-patch+json", patch, "patch",
                         "pods/status", p->ns, NULL) == 0)
                p->written = text;
        else
                free(text);
        json_decref(patch);
}

static void set_ready(sim_pod *p, bool ready)
{
        if (ready == p->ready && p->ready_since)
                return;
        p->ready = ready;
        free(p->ready_since);
        p->ready_since = rfc3339_now();
}

/* ---- the loop ---- */

static int register_node(sim *s)
{
        json_t *node =
            json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind", "Node",
                      "metadata", "name", s->node, "labels", "kubernetes.io/hostname", s->node);
        _cleanup_free_ char *ts = rfc3339_now();
        _cleanup_free_ char *status_path = xasprintf("/api/v1/nodes/%s/status", s->node);
        json_t *status = json_pack(
            "{s:{s:[{s:s, s:s, s:s, s:s, s:s, s:s}], s:[{s:s, s:s}, {s:s, s:s}], "
            "s:{s:s, s:s}}}",
            "status", "conditions", "type", "Ready", "status", "True", "reason", "KubeletReady",
            "message", "simulated node", "lastHeartbeatTime", ts, "lastTransitionTime", ts,
            "addresses", "type", "InternalIP", "address", "127.0.0.1", "type", "Hostname",
            "address", s->node, "capacity", "cpu", "2", "pods", "110");
        int r;

        json_object_set_new(json_object_get(status, "status"), "allocatable",
                            json_deep_copy(jget(status, "status.capacity")));
        r = kube_request(s->kc, "POST", "/api/v1/nodes", NULL, node, "create", "nodes", NULL, NULL);
        if (r == -EEXIST)
                r = 0;
        if (r == 0)
                r = kube_request(s->kc, "PATCH", status_path, "application/merge-patch+json",
                                 status, "patch", "nodes/status", NULL, NULL);
        if (r < 0)
                fprintf(stderr, "nodesim: cannot register node %s: %s\n", s->node,
                        kube_client_last_error(s->kc));
        json_decref(node);
        json_decref(status);
        return r;
}

static void bind_pod(sim *s, const char *ns, const char *name)
{
        _cleanup_free_ char *path = xasprintf("/api/v1/namespaces/%s/pods/%s/binding", ns, name);
        json_t *b = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind",
                              "Binding", "metadata", "name", name, "target", "apiVersion", "v1",
                              "kind", "Node", "name", s->node);

        /* A conflict means someone bound it first; the next pass sees the result. */
        (void)kube_request(s->kc, "POST", path, NULL, b, "create", "pods/binding", ns, NULL);
        json_decref(b);
}

static sim_pod *find_pod(sim *s, const char *ns, const char *name, size_t *ret_index)
{
        for (size_t i = 0; i < s->n_pods; i++)
                if (streq(s->pods[i]->ns, ns) && streq(s->pods[i]->name, name)) {
                        *ret_index = i;
                        return s->pods[i];
                }
        return NULL;
}

static sim_pod *add_pod(sim *s, const json_t *obj)
{
        const char *ns = jstr(obj, "metadata.namespace"), *name = jstr(obj, "metadata.name");
        const char *uid = jstr(obj, "metadata.uid");
        int addr = address_for(s, ns, name);
        sim_pod *p;

        if (addr < 0)
                return NULL;
        p = XNEW(sim_pod);
        p->ns = xstrdup(ns);
        p->name = xstrdup(name);
        p->uid = xstrdup(uid ? uid : "");
        p->addr = addr;
        p->backoff_ms = NODESIM_BACKOFF_MS;
        p->start_time = rfc3339_now();
        p->pod_dir = xasprintf("%s/pods/%s/%s-%s", s->work_dir, ns, name, p->uid);
        (void)mkdir_p(p->pod_dir, 0755);
        set_ready(p, false);
        s->pods = xgrow(s->pods, &s->alloc_pods, s->n_pods + 1, sizeof(sim_pod *));
        s->pods[s->n_pods++] = p;
        return p;
}

/* The Pod is being deleted: stop the process, then delete the object for good. */
static bool handle_deletion(sim *s, sim_pod *p)
{
        _cleanup_free_ char *path = NULL;
        json_t *body;
        int r;

        if (p->pid > 0) {
                if (!p->term_sent) {
                        const json_t *g = jget(p->obj, "metadata.deletionGracePeriodSeconds");
                        json_int_t grace = json_is_integer(g) ? json_integer_value(g) : 30;
                        grace = MAX(0, MIN(grace, NODESIM_STOP_MAX_S));
                        kill(-p->pid, SIGTERM);
                        p->term_sent = true;
                        p->kill_at_ms = now_ms() + grace * 1000;
                } else if (now_ms() >= p->kill_at_ms) {
                        kill(-p->pid, SIGKILL);
                }
                return false;
        }
        path = xasprintf("/api/v1/namespaces/%s/pods/%s", p->ns, p->name);
        body = json_pack("{s:s, s:s, s:i, s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1",
                         "gracePeriodSeconds", 0, "preconditions", "uid", p->uid);
        r = kube_request(s->kc, "DELETE", path, NULL, body, "delete", "pods", p->ns, NULL);
        json_decref(body);
        /* Gone already, or replaced by a Pod with another uid: this one is done. */
        return r == 0 || r == -ENOENT || r == -EBUSY;
}

static void handle_pod(sim *s, const json_t *obj)
{
        const char *ns = jstr(obj, "metadata.namespace"), *name = jstr(obj, "metadata.name");
        const char *uid = jstr(obj, "metadata.uid"), *node = jstr(obj, "spec.nodeName");
        sim_pod *p;
        size_t idx;

        if (isempty(ns) || isempty(name))
                return;
        if (isempty(node)) {
                if (!jget(obj, "metadata.deletionTimestamp"))
                        bind_pod(s, ns, name);
                return;
        }
        if (!streq(node, s->node))
                return;
        p = find_pod(s, ns, name, &idx);
        if (p && !streq_ptr(p->uid, uid)) {
                /* The same name, a new Pod: the old one is gone. */
                pod_remove(s, idx);
                p = NULL;
        }
        if (!p) {
                p = add_pod(s, obj);
                if (!p)
                        return;
                idx = s->n_pods - 1;
        }
        json_decref(p->obj);
        p->obj = json_deep_copy(obj);

        if (jget(obj, "metadata.deletionTimestamp")) {
                p->deleting = true;
                set_ready(p, false);
                if (handle_deletion(s, p))
                        pod_remove(s, idx);
                return;
        }
        if (p->pid <= 0 && !p->finished && now_ms() >= p->next_start_ms)
                start_process(s, p);
        if (p->pid > 0 && now_ms() >= p->next_secret_sync_ms) {
                refresh_secrets(s, p);
                p->next_secret_sync_ms = now_ms() + NODESIM_SECRET_SYNC_MS;
        }
        if (p->pid > 0 && now_ms() >= p->next_probe_ms) {
                set_ready(p, probe(p));
                p->next_probe_ms = now_ms() + NODESIM_PROBE_MS;
        } else if (p->pid <= 0) {
                set_ready(p, false);
        }
        write_status(s, p);
}

/* A process exited: restart it later with a back-off; three quick exits are a crash loop. */
static void on_exit_status(sim_pod *p, int status)
{
        int64_t now = now_ms();
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        int quick = 0;

        kill(-p->pid, SIGKILL); /* anything left in its group */
        p->pid = 0;
        if (p->deleting)
                return;
        if (streq_ptr(jstr(p->obj, "spec.restartPolicy"), "Never")) {
                p->finished = true;
                p->last_exit_code = code;
                free(p->last_finished_at);
                p->last_finished_at = rfc3339_now();
                return;
        }
        p->restarts++;
        p->last_exit_code = code;
        /* A process that ran for a while starts the back-off afresh, as a kubelet does. */
        if (now - p->started_ms > NODESIM_CRASH_WINDOW_S * 1000)
                p->backoff_ms = NODESIM_BACKOFF_MS;
        free(p->last_finished_at);
        p->last_finished_at = rfc3339_now();
        memmove(p->exits + 1, p->exits, sizeof(p->exits) - sizeof(p->exits[0]));
        p->exits[0] = now;
        for (size_t i = 0; i < NODESIM_CRASH_EXITS; i++)
                if (p->exits[i] && now - p->exits[i] <= NODESIM_CRASH_WINDOW_S * 1000)
                        quick++;
        p->next_start_ms = now + p->backoff_ms;
        if (quick >= NODESIM_CRASH_EXITS)
                set_waiting(p, "CrashLoopBackOff",
                            "back-off %d s restarting failed container (exit code %d)",
                            p->backoff_ms / 1000, code);
        else
                set_waiting(p, "Error", "exited with code %d; restarting in %d s", code,
                            p->backoff_ms / 1000);
        p->backoff_ms = MIN(p->backoff_ms * 2, NODESIM_BACKOFF_MAX_MS);
}

static void reap(sim *s)
{
        int status;
        pid_t pid;

        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                for (size_t i = 0; i < s->n_pods; i++)
                        if (s->pods[i]->pid == pid) {
                                on_exit_status(s->pods[i], status);
                                set_ready(s->pods[i], false);
                        }
        }
}

static bool claim_in_use(const sim *s, const char *ns, const char *claim)
{
        for (size_t i = 0; i < s->n_pods; i++) {
                size_t j;
                json_t *v;
                if (!streq(s->pods[i]->ns, ns))
                        continue;
                json_array_foreach(jget(s->pods[i]->obj, "spec.volumes"), j, v)
                {
                        if (streq_ptr(jstr(v, "persistentVolumeClaim.claimName"), claim))
                                return true;
                }
        }
        return false;
}

/* The controller-manager's part: let a deleted PVC go once no Pod uses it. */
static void release_pvcs(sim *s)
{
        size_t i;
        json_t *pvc;

        json_array_foreach(s->pvcs, i, pvc)
        {
                const char *ns = jstr(pvc, "metadata.namespace");
                const char *name = jstr(pvc, "metadata.name");
                const json_t *fins = jget(pvc, "metadata.finalizers");
                json_t *keep, *patch, *f;
                bool protected = false;
                size_t j;

                if (!jget(pvc, "metadata.deletionTimestamp") || claim_in_use(s, ns, name))
                        continue;
                keep = json_array();
                json_array_foreach(fins, j, f)
                {
                        if (streq_ptr(json_string_value(f), PVC_PROTECTION))
                        protected = true;
                        else json_array_append(keep, f);
                }
                if (protected) {
                        _cleanup_free_ char *path =
                            xasprintf("/api/v1/namespaces/%s/persistentvolumeclaims/%s", ns, name);
                        patch = json_pack("{s:{s:o}}", "metadata", "finalizers", keep);
                        (void)kube_request(s->kc, "PATCH", path, "application/merge-patch+json",
                                           patch, "patch", "persistentvolumeclaims", ns, NULL);
                        json_decref(patch);
                } else {
                        json_decref(keep);
                }
        }
}

/* Remove volumes/<ns>/<claim> folders whose PVC object is gone. */
static void remove_orphan_volumes(sim *s)
{
        _cleanup_free_ char *root = path_join(s->work_dir, "volumes");
        DIR *d = opendir(root), *nd;
        struct dirent *e, *ce;

        if (!d)
                return;
        while ((e = readdir(d))) {
                _cleanup_free_ char *ns_dir = NULL;
                if (e->d_name[0] == '.')
                        continue;
                ns_dir = path_join(root, e->d_name);
                nd = opendir(ns_dir);
                if (!nd)
                        continue;
                while ((ce = readdir(nd))) {
                        if (ce->d_name[0] == '.' || find_pvc(s, e->d_name, ce->d_name) ||
                            claim_in_use(s, e->d_name, ce->d_name))
                                continue;
                        _cleanup_free_ char *claim_dir = path_join(ns_dir, ce->d_name);
                        (void)rm_rf(claim_dir);
                }
                closedir(nd);
        }
        closedir(d);
}

static void tick(sim *s)
{
        kube_gvr pods_gvr = {"", "v1", "pods", true};
        kube_gvr pvcs_gvr = {"", "v1", "persistentvolumeclaims", true};
        json_t *pvcs = NULL, *pods = NULL, *obj;
        size_t i;

        reap(s);
        if (kube_list(s->kc, &pvcs_gvr, NULL, NULL, &pvcs, NULL) == 0) {
                json_decref(s->pvcs);
                s->pvcs = pvcs;
        }
        if (kube_list(s->kc, &pods_gvr, NULL, NULL, &pods, NULL) < 0)
                return; /* the apiserver may be paused: keep everything as it is */

        json_array_foreach(pods, i, obj) handle_pod(s, obj);
        /* Pods of ours that are gone from the list: stop them. */
        for (i = 0; i < s->n_pods;) {
                bool listed = false;
                size_t j;
                json_array_foreach(pods, j, obj)
                {
                        if (streq_ptr(jstr(obj, "metadata.namespace"), s->pods[i]->ns) &&
                            streq_ptr(jstr(obj, "metadata.name"), s->pods[i]->name) &&
                            streq_ptr(jstr(obj, "metadata.uid"), s->pods[i]->uid))
                                listed = true;
                }
                if (listed)
                        i++;
                else
                        pod_remove(s, i);
        }
        json_decref(pods);
        if (s->pvcs) {
                release_pvcs(s);
                remove_orphan_volumes(s);
        }
        write_addresses(s);
        write_hosts(s);
}

static void sim_release(sim *s)
{
        /* Every process at once, then wait: SIGKILL after NODESIM_STOP_MAX_S. */
        for (size_t i = 0; i < s->n_pods; i++)
                if (s->pods[i]->pid > 0)
                        kill(-s->pods[i]->pid, SIGTERM);
        while (s->n_pods > 0)
                pod_remove(s, s->n_pods - 1);
        if (s->hosts_path)
                write_hosts_text(s, "");
        for (size_t i = 0; i < s->n_addrs; i++) {
                free(s->addr_keys[i]);
                close(s->addr_locks[i]);
        }
        free(s->addr_keys);
        free(s->addr_octets);
        free(s->addr_locks);
        free(s->pods);
        json_decref(s->pvcs);
        kube_client_free(s->kc);
        free(s->node);
        free(s->work_dir);
        free(s->hosts_path);
        free(s->hosts_base);
        free(s->hosts_written);
        free(s->addresses_written);
}

/* kubeapi_client() without its cmocka failure: this is a forked child, not the test. */
static int new_client(const kubeapi *k, kube_client **ret)
{
        kube_config *cfg = NULL;
        char *err = NULL;
        int r = kube_config_load(kubeapi_kubeconfig(k), "admin", &cfg, &err);

        if (r == 0)
                r = kube_client_new(cfg, ret, &err);
        if (r < 0)
                fprintf(stderr, "nodesim: %s\n", err ? err : strerror(-r));
        free(err);
        kube_config_free(cfg);
        return r;
}

/* The child: register the node, report through fd, loop until SIGTERM. */
_noreturn_ static void child_main(const kubeapi *k, const char *node, const char *work_dir,
                                  const char *hosts_path, int fd)
{
        struct sigaction sa = {.sa_handler = on_stop};
        sim s = {0};
        int r;

        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        s.next_octet = NODESIM_FIRST_ADDRESS;
        s.node = xstrdup(node);
        s.work_dir = xstrdup(work_dir);
        s.hosts_path = xstrdup_null(hosts_path);
        if (hosts_path) {
                size_t len;
                if (read_file(hosts_path, 1 << 20, &s.hosts_base, &len) < 0)
                        s.hosts_base = xstrdup("127.0.0.1 localhost\n::1 localhost\n");
        }
        r = new_client(k, &s.kc);
        if (r == 0)
                r = register_node(&s);
        (void)!write(fd, &r, sizeof(r));
        close(fd);
        while (r == 0 && !stop_requested) {
                tick(&s);
                if (!stop_requested)
                        sleep_ms(NODESIM_TICK_MS);
        }
        sim_release(&s);
        exit(r == 0 ? 0 : 1);
}

/* ---- the parent's side ---- */

int nodesim_start(const kubeapi *k, const char *node, const char *work_dir, const char *hosts_path,
                  nodesim **ret)
{
        _cleanup_free_ char *logs = path_join(work_dir, "logs");
        nodesim *s;
        int fds[2], r = 0;
        pid_t parent = getpid(), pid;
        struct pollfd pfd;
        ssize_t n;

        if (isempty(node) || isempty(work_dir))
                return -EINVAL;
        r = mkdir_p(logs, 0755);
        if (r < 0)
                return r;
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
                r = -errno;
                close(fds[0]);
                close(fds[1]);
                return r;
        }
        if (pid == 0) {
                close(fds[0]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                child_main(k, node, work_dir, hosts_path, fds[1]);
        }
        close(fds[1]);
        harness_track_pid(pid);
        s = XNEW(nodesim);
        s->pid = pid;
        s->work_dir = xstrdup(work_dir);

        /* The child reports whether it could register the node. */
        pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
        if (poll(&pfd, 1, 60 * 1000) <= 0)
                r = -ETIMEDOUT;
        else if ((n = read(fds[0], &r, sizeof(r))) != (ssize_t)sizeof(r))
                r = -ECHILD;
        close(fds[0]);
        if (r < 0) {
                nodesim_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

void nodesim_free(nodesim *s)
{
        if (!s)
                return;
        if (s->pid > 0) {
                int status = 0;
                kill(s->pid, SIGTERM);
                /* It stops its processes within NODESIM_STOP_MAX_S; then SIGKILL. */
                for (int i = 0; waitpid(s->pid, &status, WNOHANG) == 0; i++) {
                        if (i == (NODESIM_STOP_MAX_S + 20) * 10)
                                kill(s->pid, SIGKILL);
                        usleep(100 * 1000);
                }
                harness_untrack_pid(s->pid);
                /* A sanitizer report in the child ends in a failing status: say so. */
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        fprintf(stderr, "nodesim: the simulator ended with status 0x%x\n",
                                (unsigned)status);
        }
        free(s->work_dir);
        free(s);
}

/* The "ns/pod ADDRESS PID" line of the child's addresses file, NULL when none. */
static char *pod_line(const nodesim *s, const char *ns, const char *pod)
{
        _cleanup_free_ char *path = path_join(s->work_dir, "addresses"), *data = NULL;
        _cleanup_free_ char *key = xasprintf("%s/%s ", ns, pod);
        size_t len;
        char *line, *save = NULL;

        if (read_file(path, 1 << 20, &data, &len) < 0)
                return NULL;
        for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                if (strneq(line, key, strlen(key)))
                        return xstrdup(line + strlen(key));
        return NULL;
}

char *nodesim_pod_address(const nodesim *s, const char *ns, const char *pod)
{
        char *line = pod_line(s, ns, pod), *sp;

        if (line && (sp = strchr(line, ' ')))
                *sp = '\0';
        return line;
}

pid_t nodesim_pod_pid(const nodesim *s, const char *ns, const char *pod)
{
        _cleanup_free_ char *line = pod_line(s, ns, pod);
        const char *sp = line ? strchr(line, ' ') : NULL;

        return sp ? (pid_t)atoi(sp + 1) : 0;
}
