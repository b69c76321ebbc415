/*
 * The hosts target's operations for an incident bundle (target_debug_ops):
 * what a member's machine says about it, read over the SSH pool with one
 * command each, never writing there. Every command bounds its own output
 * on the machine (tail -c), so a large journal never crosses the network
 * whole, and runs under the pool's command deadline like every other.
 *
 * The log: systemd mode asks journalctl for the member's unit; staticPod
 * mode reads the newest file kubelet keeps for the Pod's etcd container
 * under /var/log/pods (<namespace>_<pod>_<uid>/etcd/N.log; the Pod is the
 * member's name followed by the node's). A machine without journalctl or
 * without a journal for the unit says so in the text instead of failing.
 *
 * The machine's facts: the kernel's lines about disk errors (dmesg, where
 * the SSH user may read it) and the machine's clock against gitcd's host,
 * as the difference between its `date` and the middle of the round trip.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"
#include "util/timeutil.h"
#include "util/xalloc.h"
#include "targets/hosts-internal.h"

/* The machine member runs on: 0 and *ret_h, or -ENOENT with the target's error. */
static int member_machine(hosts_target *ht, const etcd_cluster *c, const char *member,
                          const host_spec **ret_h)
{
        if (c->hosts.set)
                ht_remember(ht, c);
        _cleanup_(ht_view_release) machine_view v = {0};
        int idx;
        int k = ht_locate(ht, c, member, &idx, &v);
        if (idx < 0)
                return k < 0 ? k
                             : target_fail(&ht->base, -ENOENT,
                                           "member %s: no machine of %s/%s holds it", member,
                                           c->namespace_, c->name);
        *ret_h = &c->hosts.items[idx];
        return 0;
}

static int hosts_member_logs(target *t, const etcd_cluster *c, const char *member, size_t max_bytes,
                             char **ret_text, char **ret_source)
{
        hosts_target *ht = HT(t);
        const host_spec *h = NULL;
        int k = member_machine(ht, c, member, &h);
        if (k < 0)
                return k;
        _cleanup_free_ char *cmd = NULL, *source = NULL;
        if (h->mode == HOST_MODE_STATIC_POD) {
                /* it goes into a glob, unquoted: a DNS label (as api/ makes them) or nothing */
                if (strspn(member, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(member))
                        return target_fail(t, -EINVAL, "member %s: not a DNS label", member);
                cmd = xasprintf("f=$(ls -t /var/log/pods/kube-system_%s-*_*/etcd/*.log "
                                "2>/dev/null | head -n 1); "
                                "if [ -n \"$f\" ]; then echo \"== $f\"; tail -c %zu -- \"$f\"; "
                                "else echo '== no log file under /var/log/pods for the Pod'; fi",
                                member, max_bytes);
                source = xasprintf("the static Pod's log under /var/log/pods on %s", h->address);
        } else {
                _cleanup_free_ char *unit = unit_name(c);
                _cleanup_free_ char *qu = ssh_quote(unit);
                cmd = xasprintf("if command -v journalctl >/dev/null 2>&1; then "
                                "journalctl -u %s -n 2000 --no-pager 2>&1 | tail -c %zu; "
                                "else echo '== journalctl is not on this machine'; fi",
                                qu, max_bytes);
                source = xasprintf("journalctl -u %s on %s", unit, h->address);
        }
        _cleanup_free_ char *out = NULL;
        k = run(ht, h, cmd, &out);
        if (k < 0)
                return k;
        size_t len = out ? strlen(out) : 0;
        *ret_text = target_text_tail(out ? out : "", len, max_bytes);
        *ret_source = TAKE_PTR(source);
        return 0;
}

/* The kernel's lines that tell of a failing disk or file system. */
#define DISK_ERROR_PATTERN                                                                         \
        "I/O error|blk_update_request|critical medium error|Buffer I/O|EXT4-fs error|"             \
        "XFS .*(error|corruption)|BTRFS .*error|nvme.*(timeout|error)|ata[0-9.]+: "                \
        ".*(failed|error)"

static int hosts_machine_facts(target *t, const etcd_cluster *c, const char *member,
                               size_t max_bytes, char **ret_text)
{
        hosts_target *ht = HT(t);
        const host_spec *h = NULL;
        int k = member_machine(ht, c, member, &h);
        if (k < 0)
                return k;
        strbuf sb = STRBUF_INIT;
        sb_printf(&sb, "machine: %s\n", h->address);

        /* the clock: the machine's time against the middle of the round trip */
        _cleanup_free_ char *out = NULL;
        int64_t before = now_wall_ms();
        k = run(ht, h, "date -u +%s%N", &out);
        int64_t after = now_wall_ms();
        long long ns = 0;
        if (k >= 0 && out && sscanf(out, "%lld", &ns) == 1 && ns > 0) {
                int64_t remote_ms = (int64_t)(ns / 1000000);
                int64_t mid = before + (after - before) / 2;
                sb_printf(&sb,
                          "clock offset: %+lld ms against gitcd's host (the machine's clock "
                          "minus gitcd's; round trip %lld ms, so within +/- %lld ms)\n",
                          (long long)(remote_ms - mid), (long long)(after - before),
                          (long long)((after - before) / 2 + 1));
        } else
                sb_printf(&sb, "clock offset: unknown (date on the machine: %s)\n",
                          k < 0 ? target_last_error(t) : "no answer in nanoseconds");

        /* the kernel's disk errors, where the SSH user may read its ring buffer */
        free(out);
        out = NULL;
        _cleanup_free_ char *cmd =
            xasprintf("if dmesg >/dev/null 2>&1; then echo '== dmesg lines about disk errors:'; "
                      "dmesg 2>/dev/null | grep -iE '%s' | tail -c %zu; "
                      "else echo '== dmesg: not readable by this user'; fi",
                      DISK_ERROR_PATTERN, max_bytes);
        k = run(ht, h, cmd, &out);
        if (k < 0)
                sb_printf(&sb, "dmesg: %s\n", target_last_error(t));
        else
                sb_append(&sb, out ? out : "");
        size_t len = sb.len;
        _cleanup_free_ char *text = sb_detach(&sb);
        *ret_text = target_text_tail(text, len, max_bytes);
        return 0;
}

const target_debug_ops hosts_debug_ops = {
    .member_logs = hosts_member_logs,
    .machine_facts = hosts_machine_facts,
};
