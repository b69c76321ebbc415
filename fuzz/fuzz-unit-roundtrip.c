/*
 * Fuzz target for gitcd's own systemd unit (targets/hosts-unit.c): an
 * arbitrary command goes through the writer (hosts_unit_render) and back
 * through gitcd's unit reader (hosts_unit_parse, hosts_unit_command), with
 * no systemd inside; tests/hosts/test-unit-systemd.c holds the writer to
 * real systemd for a fixed corpus.
 *
 * The input is NUL-separated: the member name, the cluster, then the
 * command's words (at most 1000; none: "/usr/local/bin/etcd"). A value
 * with a control character, or a program that is not an absolute path
 * free of quotes, '\' and '$', must be refused (-EINVAL, a reason, no
 * text); anything else must come back from the reader as exactly the
 * words written, and the comment lines must name the member. Never a
 * crash or a leak.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "targets/hosts-adopt.h"
#include "util/xalloc.h"

#define MAX_WORDS 1000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool has_control(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *buf = xmalloc(size + 1);
        memcpy(buf, data, size);
        buf[size] = '\0';
        /* the parts between NUL bytes (the last one ends at size) */
        char *parts[MAX_WORDS + 2];
        size_t n = 0;
        for (char *p = buf; n < MAX_WORDS + 2;) {
                parts[n++] = p;
                char *nul = memchr(p, '\0', (size_t)(buf + size - p));
                if (!nul || nul == buf + size)
                        break;
                p = nul + 1;
        }
        const char *member = n > 0 ? parts[0] : "";
        const char *cluster = n > 1 ? parts[1] : "";
        char *fallback[] = {"/usr/local/bin/etcd", NULL};
        char **argv = fallback;
        size_t n_argv = 1;
        if (n > 2) {
                n_argv = n - 2;
                argv = xcalloc(n_argv + 1, sizeof(char *));
                for (size_t i = 0; i < n_argv; i++)
                        argv[i] = parts[i + 2];
        }

        bool bad = has_control(member) || has_control(cluster) || argv[0][0] != '/' ||
                   strpbrk(argv[0], "\\'\"$");
        for (size_t i = 0; i < n_argv; i++)
                bad = bad || has_control(argv[i]);

        hosts_unit_meta m = {.member = member, .config_hash = "0123abcd", .cluster = cluster};
        char *text = NULL, *why = NULL;
        int k = hosts_unit_render(&m, argv, &text, &why);
        if (bad) {
                if (k != -EINVAL || text || !why)
                        abort();
                free(why);
                goto out;
        }
        if (k != 0 || !text || why)
                abort();
        size_t ml = strlen(HOSTS_MEMBER_PREFIX);
        if (!strneq(text, HOSTS_MEMBER_PREFIX, ml) || !strneq(text + ml, member, strlen(member)) ||
            text[ml + strlen(member)] != '\n')
                abort();

        hosts_unit u = {0};
        diag_list d = DIAG_LIST_INIT;
        hosts_unit_context ctx = {.unit_name = "etcd-default-demo.service", .hostname = "h"};
        if (hosts_unit_parse("unit", text, strlen(text), &ctx, &u, &d) != 0)
                abort();
        char **got = NULL, *rwhy = NULL;
        if (hosts_unit_command(&u, NULL, 0, &got, &rwhy) != 0)
                abort();
        for (size_t i = 0; i < n_argv; i++)
                if (!got[i] || strcmp(got[i], argv[i]) != 0)
                        abort();
        if (got[n_argv])
                abort();
        strv_free(got);
        hosts_unit_release(&u);
        diag_list_release(&d);
        free(text);
out:
        if (argv != fallback)
                free(argv);
        free(buf);
        return 0;
}
