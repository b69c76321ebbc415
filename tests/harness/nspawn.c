/*
 * Machines booting real systemd under systemd-nspawn (see nspawn.h).
 *
 * Each machine is an overlay of the cached root file system (the lower
 * layer is never written: every machine's changes, etcd's data included,
 * land in its own upper/), prepared before it boots: its own Ed25519
 * host key, the lab's client key for root, its address set by a oneshot
 * unit on nspawn's host0 veth, its host name. Everything runs in a network
 * and a mount namespace the test process made for itself, so the
 * addresses, the bridge and the overlay mounts vanish with the process,
 * however it ends.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness/harness.h"
#include "tests/harness/nspawn.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

#define NSPAWN_PATH "/usr/bin/systemd-nspawn"
#define BRIDGE      "gitcd-lab0"
#define NET         "10.213.0"

static int sh(const char *fmt, ...) _printf_(1, 2);
static int sh(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *cmd = xvasprintf(fmt, ap);
        va_end(ap);
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *nspawn_rootfs(void)
{
        return harness_cache_path("rootfs-bookworm");
}

bool nspawn_available(char **ret_why)
{
        _cleanup_free_ char *root = nspawn_rootfs();
        _cleanup_free_ char *init = root ? path_join(root, "lib/systemd/systemd") : NULL;
        _cleanup_free_ char *sshd = root ? path_join(root, "usr/sbin/sshd") : NULL;
        if (geteuid() != 0)
                *ret_why = xstrdup("not root: systemd-nspawn and the lab's namespaces need it");
        else if (access(NSPAWN_PATH, X_OK) != 0)
                *ret_why = xstrdup(NSPAWN_PATH " is not installed (Debian's systemd-container; "
                                               "scripts/setup installs it)");
        else if (!init || access(init, X_OK) != 0 || access(sshd, X_OK) != 0)
                *ret_why = xasprintf("no bookworm root file system with systemd and sshd at %s "
                                     "(scripts/setup makes it with debootstrap)",
                                     root ? root : "~/.cache/gitcd/rootfs-bookworm");
        else
                return true;
        return false;
}

/* The process's own network namespace (a bridge for the machines) and mount namespace. */
static int enter_namespaces(void)
{
        if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0) {
                int k = -errno;
                fprintf(stderr, "nspawn lab: unshare: %s\n", strerror(errno));
                return k;
        }
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        if (sh("ip link set lo up && ip link add " BRIDGE " type bridge && "
               "ip addr add " NET ".1/24 dev " BRIDGE " && ip link set " BRIDGE " up") != 0) {
                fprintf(stderr, "nspawn lab: cannot make the bridge " BRIDGE "\n");
                return -EIO;
        }
        return 0;
}

static int write_in(const char *root, const char *path, const char *text, mode_t mode)
{
        _cleanup_free_ char *p = path_join(root, path);
        _cleanup_free_ char *dir = xstrdup(p);
        *strrchr(dir, '/') = 0;
        int k = mkdir_p(dir, 0755);
        return k < 0 ? k : write_file_atomic(p, text, strlen(text), mode);
}

/* The machine's own files, written into its overlay before it boots. */
static int prepare(const nspawn_lab *l, nspawn_machine *m)
{
        _cleanup_free_ char *pub = NULL, *hostpub = NULL;
        _cleanup_free_ char *client_pub = xasprintf("%s.pub", l->client_key);
        size_t len;
        int k = read_file(client_pub, 1 << 16, &pub, &len);
        if (k < 0)
                return k;
        /* a host key of its own (the cached root's keys are removed by scripts/setup) */
        if (sh("rm -f '%s'/etc/ssh/ssh_host_* && ssh-keygen -q -t ed25519 -N '' -C '%s' "
               "-f '%s/etc/ssh/ssh_host_ed25519_key'",
               m->root, m->name, m->root) != 0)
                return -EIO;
        _cleanup_free_ char *keyfile = xasprintf("%s/etc/ssh/ssh_host_ed25519_key.pub", m->root);
        if ((k = read_file(keyfile, 1 << 16, &hostpub, &len)) < 0)
                return k;
        char *sp = strchr(hostpub, ' ');
        char *end = sp ? strpbrk(sp + 1, " \n") : NULL;
        if (end)
                *end = 0;
        m->host_key_line = xasprintf("%s %s\n", m->address, hostpub);
        _cleanup_free_ char *hostname = xasprintf("%s\n", m->name);
        _cleanup_free_ char *net =
            xasprintf("# the lab machine's address on nspawn's veth (tests/harness/nspawn.c)\n"
                      "[Unit]\nDescription=lab network\nDefaultDependencies=no\n"
                      "Before=network-online.target ssh.service\n\n"
                      "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
                      "ExecStart=/usr/sbin/ip link set host0 up\n"
                      "ExecStart=/usr/sbin/ip addr add %s/24 dev host0\n\n"
                      "[Install]\nWantedBy=multi-user.target\n",
                      m->address);
        _cleanup_free_ char *wants =
            path_join(m->root, "etc/systemd/system/multi-user.target.wants");
        _cleanup_free_ char *link = path_join(wants, "gitcd-lab-net.service");
        if ((k = write_in(m->root, "root/.ssh/authorized_keys", pub, 0600)) < 0 ||
            (k = write_in(m->root, "etc/ssh/sshd_config.d/gitcd-lab.conf",
                          "HostKey /etc/ssh/ssh_host_ed25519_key\nUseDNS no\n", 0644)) < 0 ||
            (k = write_in(m->root, "etc/hostname", hostname, 0644)) < 0 ||
            (k = write_in(m->root, "etc/systemd/system/gitcd-lab-net.service", net, 0644)) < 0 ||
            (k = mkdir_p(wants, 0755)) < 0)
                return k;
        if (symlink("/etc/systemd/system/gitcd-lab-net.service", link) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_free_ char *ssh_dir = path_join(m->root, "root/.ssh");
        return chmod(ssh_dir, 0700) < 0 ? -errno : 0;
}

/*
 * The hierarchies a machine's systemd manages: the named v1 hierarchy
 * "systemd" and the unified one of a hybrid host, or the one cgroup2 of a
 * unified host (a hybrid host's /sys/fs/cgroup is a tmpfs without
 * cgroup.procs, so it is passed over).
 */
static const char *const cgroup_roots[] = {"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified",
                                           "/sys/fs/cgroup", NULL};

static char *cgroup_dir(const char *root, const nspawn_machine *m)
{
        return xasprintf("%s/gitcd-nspawn-%s", root, m->name);
}

/*
 * Move the calling process (nspawn, about to exec) into a cgroup of the
 * machine's own in each systemd hierarchy. nspawn --keep-unit runs the
 * machine in the cgroup it was started in: without this every machine's
 * systemd would manage the same system.slice/<unit> folders, and one
 * machine's stop of a unit would break another's start of the same unit
 * (status 219/CGROUP).
 */
static void enter_own_cgroup(const nspawn_machine *m)
{
        for (size_t i = 0; cgroup_roots[i]; i++) {
                _cleanup_free_ char *procs = path_join(cgroup_roots[i], "cgroup.procs");
                if (access(procs, W_OK) != 0)
                        continue;
                _cleanup_free_ char *dir = cgroup_dir(cgroup_roots[i], m);
                _cleanup_free_ char *own = path_join(dir, "cgroup.procs");
                _cleanup_free_ char *pid = xasprintf("%ld\n", (long)getpid());
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        continue;
                int fd = open(own, O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                        (void)!write(fd, pid, strlen(pid));
                        close(fd);
                }
        }
}

/* Remove what the machine left of its cgroups (the deepest folders first). */
static void remove_own_cgroup(const nspawn_machine *m)
{
        for (size_t i = 0; cgroup_roots[i]; i++) {
                _cleanup_free_ char *dir = cgroup_dir(cgroup_roots[i], m);
                if (path_exists(dir))
                        (void)sh("find '%s' -depth -type d -exec rmdir {} + 2>/dev/null", dir);
        }
}

static int boot(nspawn_machine *m, const char *etcd_bin)
{
        _cleanup_free_ char *log = path_join(m->dir, "console.log");
        _cleanup_free_ char *bind = xasprintf("--bind-ro=%s:/usr/local/bin/etcd", etcd_bin);
        _cleanup_free_ char *machine = xasprintf("--machine=%s", m->name);
        _cleanup_free_ char *dir = xasprintf("--directory=%s", m->root);
        char *argv[] = {(char *)NSPAWN_PATH,
                        (char *)"--quiet",
                        (char *)"--boot",
                        (char *)"--register=no",
                        (char *)"--keep-unit",
                        dir,
                        machine,
                        (char *)"--network-bridge=" BRIDGE,
                        bind,
                        NULL};
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                if (null >= 0)
                        dup2(null, 0);
                enter_own_cgroup(m);
                execv(argv[0], argv);
                _exit(127);
        }
        harness_track_pid(pid);
        m->pid = pid;
        return 0;
}

int nspawn_ssh(const nspawn_lab *l, size_t i, const char *command, char **ret_out)
{
        _cleanup_free_ char *cmd =
            xasprintf("ssh -q -o BatchMode=yes -o ConnectTimeout=5 -o UserKnownHostsFile='%s' "
                      "-o StrictHostKeyChecking=yes -i '%s' root@%s '%s' </dev/null",
                      l->known_hosts, l->client_key, l->machines[i].address, command);
        FILE *p = popen(cmd, "r");
        if (!p)
                return -errno;
        strbuf out = STRBUF_INIT;
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                sb_append_len(&out, buf, n);
        int st = pclose(p);
        if (ret_out)
                *ret_out = sb_detach(&out);
        sb_release(&out);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -EIO;
}

static void console_tail(const nspawn_machine *m)
{
        (void)sh("echo '--- %s (%s): console, last lines'; tail -n 30 '%s/console.log' >&2",
                 m->name, m->address, m->dir);
}

/* Wait until machine i answers over SSH and systemd finished booting it. */
static int wait_booted(const nspawn_lab *l, size_t i, int64_t until)
{
        int k = -ETIMEDOUT;
        _cleanup_free_ char *out = NULL;
        while (now_mono_ms() < until) {
                free(out);
                out = NULL;
                k = nspawn_ssh(l, i, "systemctl is-system-running --wait", &out);
                /* "degraded" is a booted machine too: some unit of the minimal root failed */
                if (k >= 0 && out && (strneq(out, "running", 7) || strneq(out, "degraded", 8)))
                        return 0;
                if (l->machines[i].pid > 0 &&
                    waitpid(l->machines[i].pid, NULL, WNOHANG) == l->machines[i].pid) {
                        harness_untrack_pid(l->machines[i].pid);
                        l->machines[i].pid = 0;
                        fprintf(stderr, "nspawn lab: %s exited while booting\n",
                                l->machines[i].name);
                        console_tail(&l->machines[i]);
                        return -ECHILD;
                }
                msleep(200);
        }
        fprintf(stderr,
                "nspawn lab: %s did not finish booting in time (the last `systemctl "
                "is-system-running --wait` over SSH: status %d, \"%s\")\n",
                l->machines[i].name, k, out ? out : "");
        console_tail(&l->machines[i]);
        return -ETIMEDOUT;
}

int nspawn_lab_start(size_t n, const char *etcd_bin, int timeout_ms, nspawn_lab **ret)
{
        assert(n > 0 && n < 200 && etcd_bin && ret);
        _cleanup_free_ char *why = NULL, *lower = nspawn_rootfs();
        if (!nspawn_available(&why)) {
                fprintf(stderr, "nspawn lab: %s\n", why);
                return -EOPNOTSUPP;
        }
        _cleanup_free_ char *etcd = realpath(etcd_bin, NULL);
        if (!etcd)
                return -errno;
        int k = enter_namespaces();
        if (k < 0)
                return k;
        nspawn_lab *l = XNEW(nspawn_lab);
        l->dir = harness_tmpdir("gitcd-nspawn");
        if (!l->dir) {
                free(l);
                return -EIO;
        }
        l->client_key = path_join(l->dir, "client");
        l->known_hosts = path_join(l->dir, "known_hosts");
        l->machines = xcalloc(n, sizeof(nspawn_machine));
        l->n = n;
        if (sh("ssh-keygen -q -t ed25519 -N '' -f '%s'", l->client_key) != 0) {
                nspawn_lab_free(l);
                return -EIO;
        }
        strbuf kh = STRBUF_INIT;
        for (size_t i = 0; i < n && k == 0; i++) {
                nspawn_machine *m = &l->machines[i];
                m->name = xasprintf("gcd%ldm%zu", (long)getpid(), i);
                m->address = xasprintf(NET ".%zu", 10 + i);
                m->dir = xasprintf("%s/%s", l->dir, m->name);
                m->root = path_join(m->dir, "root");
                _cleanup_free_ char *upper = path_join(m->dir, "upper");
                _cleanup_free_ char *work = path_join(m->dir, "work");
                _cleanup_free_ char *opts =
                    xasprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
                if (mkdir_p(upper, 0755) < 0 || mkdir_p(work, 0755) < 0 ||
                    mkdir_p(m->root, 0755) < 0 ||
                    mount("overlay", m->root, "overlay", 0, opts) < 0) {
                        k = -errno;
                        fprintf(stderr, "nspawn lab: overlay for %s: %s\n", m->name,
                                strerror(errno));
                        break;
                }
                if ((k = prepare(l, m)) < 0 || (k = boot(m, etcd)) < 0)
                        break;
                sb_append(&kh, m->host_key_line);
        }
        if (k == 0 && write_file_atomic(l->known_hosts, sb_str(&kh), kh.len, 0600) < 0)
                k = -EIO;
        sb_release(&kh);
        int64_t until = now_mono_ms() + timeout_ms;
        for (size_t i = 0; i < n && k == 0; i++)
                k = wait_booted(l, i, until);
        if (k < 0) {
                nspawn_lab_free(l);
                return k;
        }
        *ret = l;
        return 0;
}

void nspawn_lab_free(nspawn_lab *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                if (l->machines[i].pid > 0)
                        kill(l->machines[i].pid, SIGTERM); /* nspawn powers the machine off */
        for (size_t i = 0; i < l->n; i++) {
                nspawn_machine *m = &l->machines[i];
                for (int t = 0; m->pid > 0 && t < 300; t++) {
                        if (waitpid(m->pid, NULL, WNOHANG) == m->pid) {
                                harness_untrack_pid(m->pid);
                                m->pid = 0;
                        } else
                                msleep(100);
                }
                if (m->pid > 0) {
                        kill(m->pid, SIGKILL);
                        (void)waitpid(m->pid, NULL, 0);
                        harness_untrack_pid(m->pid);
                }
                if (m->root)
                        (void)umount2(m->root, MNT_DETACH);
                if (m->name)
                        remove_own_cgroup(m);
                free(m->name);
                free(m->address);
                free(m->dir);
                free(m->root);
                free(m->host_key_line);
        }
        free(l->machines);
        free(l->client_key);
        free(l->known_hosts);
        free(l->dir);
        free(l);
}
