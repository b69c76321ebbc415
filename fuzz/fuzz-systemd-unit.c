/*
 * Fuzz target for the reader of a systemd unit that runs etcd
 * (targets/hosts-unit.c): the input is a unit file as found on a machine
 * (etcd.service), then, after the first NUL byte, the environment file
 * every EnvironmentFile= of it reads. Each step ends with 0, or with
 * -EINVAL and at least one diagnostic and nothing filled in; a member read
 * has a non-empty name and data directory; never a crash or a leak.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "targets/hosts-adopt.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *text = (const char *)data;
        const char *nul = memchr(text, '\0', size);
        size_t unit_len = nul ? (size_t)(nul - text) : size;
        const char *env_text = nul ? nul + 1 : "";
        size_t env_len = nul ? size - unit_len - 1 : 0;

        hosts_unit u = {0};
        hosts_unit_context ctx = {.unit_name = "etcd@a.service", .hostname = "node-a"};
        diag_list d = DIAG_LIST_INIT;
        int k = hosts_unit_parse("etcd.service", text, unit_len, &ctx, &u, &d);
        if (k < 0) {
                if (k != -EINVAL || d.n == 0 || u.exec)
                        abort();
                diag_list_release(&d);
                return 0;
        }
        if (u.n_exec == 0 || !u.exec || d.n != 0)
                abort();
        char **env = NULL;
        size_t n_env = 0;
        for (size_t i = 0; k == 0 && i < u.n_env_files; i++) {
                size_t before = d.n;
                k = hosts_env_file_parse(u.env_files[i], env_text, env_len, &env, &n_env, &d);
                if (k < 0 && (k != -EINVAL || d.n == before))
                        abort();
        }
        if (k == 0) {
                hosts_running r = {0};
                k = hosts_running_from_unit("etcd.service", &u, env, n_env, &r, &d);
                if (k == 0) {
                        if (!r.name || !*r.name || !r.data_dir || !*r.data_dir || !r.file)
                                abort();
                } else if (k != -EINVAL || d.n == 0 || r.name || r.file) {
                        abort();
                }
                hosts_running_release(&r);
        }
        strv_free(env);
        hosts_unit_release(&u);
        diag_list_release(&d);
        return 0;
}
