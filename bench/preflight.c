/*
 * What the hosts target's preflight costs a machine (targets/hosts-preflight.h):
 * the script run here with sh, as a machine runs it after SSH hands it over,
 * on a directory of this host (argument 1; default a temporary folder) a few
 * times (argument 2; default 5). Prints each run's wall time and its
 * measurements (fdatasync p50/p99/max less dd's start-up, samples, free
 * space, file system), and the mean wall time: the cost a preflight adds to
 * one placement per free machine measured, SSH's round trips aside. It does
 * not measure placement over SSH itself. Never fails on timing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "targets/hosts-preflight.h"
#include "util/http.h"
#include "util/timeutil.h"
#include "util/xalloc.h"

int main(int argc, char **argv)
{
        /* libcurl, OpenSSL and libssh2 set up before any thread starts (util/http.h) */
        http_global_init();
        const char *base = getenv("TMPDIR");
        char *tmpl = xasprintf("%s/gitcd-bench-preflight-XXXXXX", base && *base ? base : "/tmp");
        const char *dir = argc > 1 ? argv[1] : mkdtemp(tmpl);
        int runs = argc > 2 ? atoi(argv[2]) : 5;
        if (!dir || runs < 1) {
                fprintf(stderr, "usage: bench-preflight [DIR [RUNS]]\n");
                return 2;
        }
        char *script = preflight_script(dir, NULL);
        char *path = xasprintf("%s.bench.sh", tmpl);
        FILE *f = fopen(path, "w");
        if (!f || fputs(script, f) < 0 || fclose(f) != 0) {
                perror(path);
                return 1;
        }
        char *cmd = xasprintf("sh '%s'", path);
        int64_t total = 0;
        printf("preflight of %s, %d runs\n", dir, runs);
        for (int i = 0; i < runs; i++) {
                int64_t t0 = now_mono_ms();
                FILE *p = popen(cmd, "r");
                static char buf[65536];
                size_t n = p ? fread(buf, 1, sizeof(buf), p) : 0;
                if (!p || pclose(p) != 0) {
                        fprintf(stderr, "the script failed\n");
                        return 1;
                }
                int64_t ms = now_mono_ms() - t0;
                total += ms;
                preflight_result r = {0};
                char *why = NULL;
                if (preflight_parse(buf, n, &r, &why) < 0) {
                        fprintf(stderr, "%s\n", why);
                        return 1;
                }
                printf("run %d: %lld ms wall; fdatasync p50 %.2f ms p99 %.2f ms max %.2f ms "
                       "(%zu samples, dd start-up %.2f ms taken off); free %lld MiB; %s\n",
                       i + 1, (long long)ms, r.sync_p50_us / 1000.0, r.sync_p99_us / 1000.0,
                       r.sync_max_us / 1000.0, r.n_sync, r.base_us / 1000.0,
                       (long long)(r.free_bytes >> 20), r.fstype);
                preflight_result_release(&r);
        }
        printf("mean cost per machine: %lld ms (plus one SSH round trip for the clock)\n",
               (long long)(total / runs));
        unlink(path);
        if (argc <= 1)
                rmdir(dir);
        free(cmd);
        free(path);
        free(tmpl);
        free(script);
        return 0;
}
