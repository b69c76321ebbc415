/*
 * Real sshd machines on loopback (see sshd.h). Each machine is a separate
 * sshd process bound to its own 127.0.0.x address, so host keys and
 * known_hosts names ("[127.0.0.2]:port") differ per machine exactly as
 * they would for three servers. Ports come from harness_free_port(); a
 * port taken in the meantime makes sshd exit, and starting is retried on
 * another port a few times.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness/harness.h"
#include "tests/harness/sshd.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

bool sshd_available(void)
{
        return access(SSHD_PATH, X_OK) == 0 && access("/usr/bin/ssh-keygen", X_OK) == 0;
}

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

static bool port_open(const char *address, int port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || inet_pton(AF_INET, address, &a.sin_addr) != 1)
                return false;
        return connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
}

static pid_t spawn(const char *log, const char *hostname, char *const argv[])
{
        pid_t pid = fork();
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                setpgid(0, 0);
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (hostname &&
                    (unshare(CLONE_NEWUTS) < 0 || sethostname(hostname, strlen(hostname)) < 0))
                        _exit(126);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execv(argv[0], argv);
                _exit(127);
        }
        if (pid > 0)
                harness_track_pid(pid);
        return pid;
}

static int start_once(sshd_lab *l, sshd_machine *m)
{
        _cleanup_free_ char *cfg = xasprintf("%s/sshd_config", m->dir);
        _cleanup_free_ char *log = xasprintf("%s/sshd.log", m->dir);
        _cleanup_free_ char *text = xasprintf("Port %d\n"
                                              "ListenAddress %s\n"
                                              "HostKey %s/hostkey\n"
                                              "HostKey %s/hostkey_ecdsa\n"
                                              "HostKey %s/hostkey_rsa\n"
                                              "AuthorizedKeysFile %s/authorized_keys\n"
                                              "PidFile %s/sshd.pid\n"
                                              "StrictModes no\n"
                                              "UsePAM no\n"
                                              "PermitRootLogin yes\n"
                                              "PasswordAuthentication no\n"
                                              "KbdInteractiveAuthentication no\n"
                                              "PubkeyAuthentication yes\n"
                                              "Subsystem sftp internal-sftp\n"
                                              "MaxSessions 64\n"
                                              "MaxStartups 64\n"
                                              "LogLevel VERBOSE\n"
                                              "SetEnv PATH=%s/bin:/usr/local/sbin:/usr/local/"
                                              "bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
                                              "%s",
                                              m->port, m->address, m->dir, m->dir, m->dir, l->dir,
                                              m->dir, m->dir, m->config ? m->config : "");
        if (write_file_atomic(cfg, text, strlen(text), 0600) < 0)
                return -EIO;
        char *argv[] = {SSHD_PATH, "-D", "-e", "-f", cfg, NULL};
        m->pid = spawn(log, m->hostname, argv);
        if (m->pid < 0)
                return -errno;
        for (int i = 0; i < 400; i++) {
                if (port_open(m->address, m->port))
                        return 0;
                if (waitpid(m->pid, NULL, WNOHANG) == m->pid) {
                        harness_untrack_pid(m->pid);
                        m->pid = 0;
                        return -EADDRINUSE;
                }
                msleep(25);
        }
        return -ETIMEDOUT;
}

int sshd_machine_start(sshd_lab *l, size_t i)
{
        sshd_machine *m = &l->machines[i];
        if (m->pid > 0)
                return 0;
        int k = start_once(l, m);
        if (k < 0) {
                _cleanup_free_ char *log = xasprintf("%s/sshd.log", m->dir);
                fprintf(stderr, "sshd on %s:%d did not start (%s)\n", m->address, m->port,
                        strerror(-k));
                (void)sh("tail -20 '%s' >&2", log);
        }
        return k;
}

int sshd_machine_set_hostname(sshd_lab *l, size_t i, const char *hostname)
{
        /* whether this process may: the child cannot say why it failed */
        pid_t pid = fork();
        if (pid == 0)
                _exit(unshare(CLONE_NEWUTS) < 0 ? 1 : 0);
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return -EPERM;
        sshd_machine *m = &l->machines[i];
        (void)sshd_machine_stop(l, i);
        free(m->hostname);
        m->hostname = hostname ? xstrdup(hostname) : NULL;
        return sshd_machine_start(l, i);
}

int sshd_machine_set_config(sshd_lab *l, size_t i, const char *lines)
{
        sshd_machine *m = &l->machines[i];
        (void)sshd_machine_stop(l, i);
        free(m->config);
        m->config = lines ? xstrdup(lines) : NULL;
        return sshd_machine_start(l, i);
}

/* Kill the children of pid (sshd's sessions: each calls setsid(), so the group kill misses them). */
static void kill_children_of(pid_t pid)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d))) {
                char *end;
                long child = strtol(e->d_name, &end, 10);
                if (*end || child <= 0)
                        continue;
                _cleanup_free_ char *path = xasprintf("/proc/%ld/stat", child);
                _cleanup_free_ char *stat = NULL;
                size_t len;
                if (read_file(path, 4096, &stat, &len) < 0)
                        continue;
                /* "pid (comm) state ppid ...": comm may hold spaces, so parse after the last ')' */
                const char *rp = strrchr(stat, ')');
                char state;
                long ppid;
                if (rp && sscanf(rp + 1, " %c %ld", &state, &ppid) == 2 && ppid == pid)
                        (void)kill((pid_t)child, SIGKILL);
        }
        if (d)
                closedir(d);
}

int sshd_machine_stop(sshd_lab *l, size_t i)
{
        sshd_machine *m = &l->machines[i];
        if (m->pid <= 0)
                return 0;
        kill_children_of(m->pid); /* established sessions die with the machine */
        (void)kill(-m->pid, SIGTERM);
        (void)kill(m->pid, SIGTERM);
        while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(m->pid);
        m->pid = 0;
        return 0;
}

static char *key_line(const char *address, int port, const char *pub)
{
        _cleanup_free_ char *text = NULL;
        size_t len;
        if (read_file(pub, 1 << 16, &text, &len) < 0)
                return NULL;
        /* "ssh-ed25519 AAAA... comment" -> the first two fields */
        char *sp = strchr(text, ' ');
        char *end = sp ? strpbrk(sp + 1, " \n") : NULL;
        if (end)
                *end = '\0';
        return xasprintf("[%s]:%d %s\n", address, port, text);
}

int sshd_lab_start(size_t n, sshd_lab **ret)
{
        sshd_lab *l = XNEW(sshd_lab);
        l->dir = harness_tmpdir("gitcd-sshd");
        if (!l->dir) {
                free(l);
                return -EIO;
        }
        mkdir("/run/sshd", 0755); /* sshd's privilege separation folder */
        if (sh("cd '%s' && ssh-keygen -q -t ed25519 -N '' -f client && "
               "cp client.pub authorized_keys && ssh-keygen -q -t ed25519 -N '' -f otherkey",
               l->dir) != 0) {
                sshd_lab_free(l);
                return -EIO;
        }
        /* sshd reads authorized_keys as the user logging in: let every local account
         * (the non-root test accounts of scripts/setup) through the lab's folder to it,
         * without listing it; the client key stays 0600 */
        _cleanup_free_ char *ak = xasprintf("%s/authorized_keys", l->dir);
        if (chmod(l->dir, 0711) < 0 || chmod(ak, 0644) < 0) {
                int k = -errno;
                sshd_lab_free(l);
                return k;
        }
        l->client_key = xasprintf("%s/client", l->dir);
        l->known_hosts = xasprintf("%s/known_hosts", l->dir);
        l->machines = xcalloc(n, sizeof(sshd_machine));
        l->n = n;
        strbuf kh = STRBUF_INIT;
        int k = 0;
        for (size_t i = 0; i < n && k == 0; i++) {
                sshd_machine *m = &l->machines[i];
                m->address = xasprintf("127.0.0.%zu", i + 2);
                m->dir = xasprintf("%s/machine%zu", l->dir, i);
                m->root = xasprintf("%s/root", m->dir);
                _cleanup_free_ char *bin = xasprintf("%s/bin", m->dir);
                /* the stock set of host keys (a distribution's sshd makes these three) */
                if (mkdir_p(m->root, 0755) < 0 || mkdir_p(bin, 0755) < 0 ||
                    sh("cd '%s' && ssh-keygen -q -t ed25519 -N '' -f hostkey && "
                       "ssh-keygen -q -t ecdsa -N '' -f hostkey_ecdsa && "
                       "ssh-keygen -q -t rsa -N '' -f hostkey_rsa",
                       m->dir) != 0) {
                        k = -EIO;
                        break;
                }
                for (int attempt = 0; attempt < 5; attempt++) {
                        m->port = harness_free_port();
                        k = start_once(l, m);
                        if (k != -EADDRINUSE)
                                break;
                }
                if (k < 0) {
                        (void)sshd_machine_start(l, i); /* prints the log */
                        break;
                }
                _cleanup_free_ char *pub = xasprintf("%s/hostkey.pub", m->dir);
                _cleanup_free_ char *ecdsa = xasprintf("%s/hostkey_ecdsa.pub", m->dir);
                _cleanup_free_ char *rsa = xasprintf("%s/hostkey_rsa.pub", m->dir);
                m->host_key_line = key_line(m->address, m->port, pub);
                m->ecdsa_key_line = key_line(m->address, m->port, ecdsa);
                m->rsa_key_line = key_line(m->address, m->port, rsa);
                if (!m->host_key_line || !m->ecdsa_key_line || !m->rsa_key_line) {
                        k = -EIO;
                        break;
                }
                sb_append(&kh, m->host_key_line);
        }
        if (k == 0 && write_file_atomic(l->known_hosts, sb_str(&kh), kh.len, 0600) < 0)
                k = -EIO;
        sb_release(&kh);
        if (k < 0) {
                sshd_lab_free(l);
                return k;
        }
        *ret = l;
        return 0;
}

char *sshd_lab_known_hosts_with_wrong_key(sshd_lab *l, size_t i)
{
        strbuf kh = STRBUF_INIT;
        _cleanup_free_ char *pub = xasprintf("%s/otherkey.pub", l->dir);
        for (size_t j = 0; j < l->n; j++) {
                if (j != i) {
                        sb_append(&kh, l->machines[j].host_key_line);
                        continue;
                }
                _cleanup_free_ char *line =
                    key_line(l->machines[j].address, l->machines[j].port, pub);
                sb_append(&kh, line);
        }
        char *path = xasprintf("%s/known_hosts.wrong%zu", l->dir, i);
        (void)write_file_atomic(path, sb_str(&kh), kh.len, 0600);
        sb_release(&kh);
        return path;
}

void sshd_lab_free(sshd_lab *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++) {
                sshd_machine *m = &l->machines[i];
                (void)sshd_machine_stop(l, i);
                free(m->address);
                free(m->dir);
                free(m->root);
                free(m->host_key_line);
                free(m->ecdsa_key_line);
                free(m->rsa_key_line);
                free(m->hostname);
                free(m->config);
        }
        free(l->machines);
        free(l->client_key);
        free(l->known_hosts);
        free(l->dir);
        free(l);
}
