/*
 * The registry of target kinds (targets/registry.h): the one table that
 * knows which kinds there are, and how each is opened from the settings
 * the command line and the configuration file give.
 *
 * Design: a kind's caps and adopt table are the ones its targets carry
 * (LOCAL_TARGET_CAPS and the others come from the implementation headers,
 * so the two cannot drift apart); opening a kind checks what only the
 * settings can get wrong (a known_hosts file that is not there, a secret
 * file others may read, a kubeconfig that does not load) and says what to
 * do, so the CLI prints the sentence as it is.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kubeconfig.h"
#include "targets/hosts.h"
#include "targets/kubernetes.h"
#include "targets/local.h"
#include "targets/registry.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static int open_local(const target_settings *s, target **ret, char **ret_error)
{
        local_target_opts lo = {.state_dir = s->state_dir, .etcd_dir = s->etcd_dir};
        int k = local_target_new(&lo, ret);
        if (k < 0)
                *ret_error = xasprintf("cannot set up the local target in %s: %s", s->state_dir,
                                       strerror(-k));
        return k;
}

/*
 * The kubernetes target: each cluster on the API server of its kubeconfig
 * context (targets/kubernetes-servers.c); the default context is the
 * settings' (else the kubeconfig's current one) in the kubeconfig of the
 * settings, else the in-cluster configuration inside a Pod, else
 * $KUBECONFIG or ~/.kube/config.
 */
static int open_kubernetes(const target_settings *s, target **ret, char **ret_error)
{
        kubernetes_servers_opts o = {.kubeconfig = s->kubeconfig,
                                     .context = s->kube_context,
                                     .state_dir = s->state_dir,
                                     .cluster_domain = s->cluster_domain,
                                     .snapshot_image = s->snapshot_image,
                                     .warn = s->warn,
                                     .warn_userdata = s->warn_userdata};
        return kubernetes_servers_new(&o, ret, ret_error);
}

static int kubernetes_check_context(const target_settings *s, const char *context, char **ret_error)
{
        return kubernetes_context_check(s->kubeconfig, context, ret_error);
}

static bool kubernetes_given(const target_settings *s)
{
        return s->kubeconfig || s->kube_context || s->cluster_domain || s->snapshot_image;
}

static void erase_freep(char **s)
{
        if (*s)
                explicit_bzero(*s, strlen(*s));
        free(*s);
}

/*
 * The hosts target: SSH with the settings' key (its passphrase read from
 * its file) or the ssh-agent, host keys checked strictly against the
 * settings' known_hosts or ~/.ssh/known_hosts. The cluster CAs of
 * tls.provider auto live in the state folder (<state dir>/hosts/).
 */
static int open_hosts(const target_settings *s, target **ret, char **ret_error)
{
        const char *home = getenv("HOME");
        _cleanup_free_ char *kh = s->known_hosts ? xstrdup(s->known_hosts)
                                  : home         ? xasprintf("%s/.ssh/known_hosts", home)
                                                 : NULL;
        if (!kh) {
                *ret_error = xstrdup("the hosts target needs --hosts-known-hosts FILE ($HOME is "
                                     "not set)");
                return -EINVAL;
        }
        if (!path_exists(kh)) {
                *ret_error = xasprintf(
                    "hosts target: no known_hosts file %s; list the machines' host keys there "
                    "(ssh-keyscan, checked out of band) or name one with --hosts-known-hosts "
                    "(host keys are never trusted on first use)",
                    kh);
                return -ENOENT;
        }
        if (s->ssh_passphrase_file && !s->ssh_key) {
                *ret_error = xstrdup("the hosts target's passphrase file needs its SSH key "
                                     "(--hosts-ssh-key, or sshKey under hosts: in the "
                                     "configuration)");
                return -EINVAL;
        }
        if (!s->ssh_key && isempty(getenv("SSH_AUTH_SOCK"))) {
                *ret_error = xstrdup("the hosts target needs --hosts-ssh-key FILE or an "
                                     "ssh-agent ($SSH_AUTH_SOCK is not set)");
                return -EINVAL;
        }
        if (s->ssh_key) {
                _cleanup_free_ char *err = NULL;
                int k = secret_file_check(s->ssh_key, "SSH key", &err);
                if (k < 0) {
                        *ret_error = xasprintf("hosts target: %s", err);
                        return k;
                }
        }
        _cleanup_(erase_freep) char *pass = NULL;
        if (s->ssh_passphrase_file) {
                size_t len = 0;
                _cleanup_free_ char *err = NULL;
                int k = read_secret_file(s->ssh_passphrase_file, "passphrase file", 4096, &pass,
                                         &len, &err);
                if (k < 0) {
                        *ret_error = xasprintf("hosts target: %s", err);
                        return k;
                }
                pass[strcspn(pass, "\r\n")] = 0;
        }
        hosts_target_opts o = {
            .ssh = {.known_hosts = kh, .key_file = s->ssh_key, .key_passphrase = pass},
            .client_port = s->client_port,
            .peer_port = s->peer_port,
            .metrics_port = s->metrics_port,
            .state_dir = s->state_dir,
            .preflight = s->preflight,
            .preflight_sync_p99_max_us = s->preflight_sync_p99_ms * 1000,
            .preflight_offset_max_ms = s->preflight_clock_offset_ms,
            .preflight_interval_ms = s->preflight_interval_ms,
        };
        int k = hosts_target_new(&o, ret);
        if (k < 0)
                *ret_error = xasprintf("cannot set up the hosts target: %s", strerror(-k));
        return k;
}

static bool hosts_given(const target_settings *s)
{
        return s->ssh_key || s->ssh_passphrase_file || s->known_hosts || s->client_port ||
               s->peer_port || s->metrics_port;
}

const target_kind target_kinds[TARGET_KIND_COUNT] = {
    {
        .name = "local",
        .summary = "etcd processes on this host",
        .caps = LOCAL_TARGET_CAPS,
        .open = open_local,
    },
    {
        .name = "kubernetes",
        .summary = "Pods through an API server",
        .caps = KUBERNETES_TARGET_CAPS,
        .open = open_kubernetes,
        .settings_given = kubernetes_given,
        .check_context = kubernetes_check_context,
        .options = "--kubeconfig, --context, --cluster-domain and --snapshot-image",
        .plan = &kubernetes_plan_ops,
    },
    {
        .name = "hosts",
        .summary = "the machines of spec.hosts over SSH (docs/hosts.md)",
        .caps = HOSTS_TARGET_CAPS,
        .open = open_hosts,
        .settings_given = hosts_given,
        .options = "--hosts-ssh-key, --hosts-passphrase-file, --hosts-known-hosts and "
                   "--hosts-ports",
        .adopt = &hosts_adopt_ops,
        .plan = &hosts_plan_ops,
    },
};

const target_kind *target_kind_find(const char *name)
{
        for (size_t i = 0; name && i < TARGET_KIND_COUNT; i++)
                if (streq(target_kinds[i].name, name))
                        return &target_kinds[i];
        return NULL;
}

const target_kind *target_kind_default(void)
{
        return &target_kinds[0];
}

const target_kind *target_kind_or_default(const char *name)
{
        return name ? target_kind_find(name) : target_kind_default();
}

size_t target_kind_index(const target_kind *k)
{
        assert(k >= target_kinds && k < target_kinds + TARGET_KIND_COUNT);
        return (size_t)(k - target_kinds);
}

char *target_kind_names(const char *sep, const char *last)
{
        strbuf sb = STRBUF_INIT;
        for (size_t i = 0; i < TARGET_KIND_COUNT; i++)
                sb_printf(&sb, "%s%s",
                          i == 0                       ? ""
                          : i + 1 == TARGET_KIND_COUNT ? last
                                                       : sep,
                          target_kinds[i].name);
        return sb_detach(&sb);
}
