/*
 * Helpers shared by the state tests: a fresh database in a temporary
 * folder, and running the real gitcd binary ($GITCD_BIN) with its output
 * captured, so the commands are tested as users run them.
 */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state/state.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

typedef struct run_result {
        int status; /* exit status, or 128 + signal */
        char *out;
        char *err;
} run_result;

static inline void run_result_release(run_result *r)
{
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
}

/* A new database path inside a fresh temporary folder (removed at exit). */
static inline char *test_db_path(void)
{
        _cleanup_free_ char *dir = harness_tmpdir("gitcd-state");
        if (!dir)
                abort();
        return path_join(dir, "state.db");
}

static inline char *slurp_fd(int fd)
{
        char *data = NULL;
        size_t len = 0;
        (void)lseek(fd, 0, SEEK_SET);
        for (;;) {
                data = xrealloc(data, len + 4097);
                ssize_t n = read(fd, data + len, 4096);
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        data[len] = '\0';
        return data;
}

/*
 * Run $GITCD_BIN with argv (NULL-terminated, without the program name),
 * with an optional environment override `env_kv` ("NAME=value" or NULL).
 */
static inline int run_gitcd_env(const char *env_kv, char *const *args, run_result *ret)
{
        const char *bin = getenv("GITCD_BIN");
        if (isempty(bin))
                return -ENOENT;
        char out_tmpl[] = "/tmp/gitcd-out-XXXXXX", err_tmpl[] = "/tmp/gitcd-err-XXXXXX";
        int out = mkstemp(out_tmpl), err = mkstemp(err_tmpl);
        if (out < 0 || err < 0)
                abort();
        unlink(out_tmpl);
        unlink(err_tmpl);
        size_t n = 0;
        while (args[n])
                n++;
        char **argv = xcalloc(n + 2, sizeof(char *));
        argv[0] = (char *)bin;
        for (size_t i = 0; i < n; i++)
                argv[i + 1] = args[i];
        pid_t pid = fork();
        if (pid < 0)
                abort();
        if (pid == 0) {
                dup2(out, STDOUT_FILENO);
                dup2(err, STDERR_FILENO);
                int devnull = open("/dev/null", O_RDONLY);
                if (devnull >= 0)
                        dup2(devnull, STDIN_FILENO);
                if (env_kv)
                        putenv((char *)env_kv);
                execv(bin, argv);
                _exit(127);
        }
        harness_track_pid(pid);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        harness_untrack_pid(pid);
        free(argv);
        ret->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        ret->out = slurp_fd(out);
        ret->err = slurp_fd(err);
        close(out);
        close(err);
        return 0;
}

static inline int run_gitcd(char *const *args, run_result *ret)
{
        return run_gitcd_env(NULL, args, ret);
}

/* Count lines of text. */
static inline size_t count_lines(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                if (*s == '\n')
                        n++;
        return n;
}
