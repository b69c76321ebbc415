/*
 * Test fixtures (see gitfix.h). Everything runs the real tools through
 * /bin/sh; the environment is fixed once so that no user or system git
 * configuration can change what the tests see.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/sources/gitfix.h"
#include "util/fs.h"
#include "util/strbuf.h"
#include "util/xalloc.h"

static char *root;
static unsigned date_counter;

void fix_init(void)
{
        char tmpl[] = "/tmp/gitcd-sources-XXXXXX";
        _cleanup_free_ char *home = NULL;

        if (!mkdtemp(tmpl)) {
                perror("mkdtemp");
                abort();
        }
        root = xstrdup(tmpl);
        home = path_join(root, "home");
        mkdir_p(home, 0700);
        setenv("HOME", home, 1);
        setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
        setenv("GIT_AUTHOR_NAME", "Ada Author", 1);
        setenv("GIT_AUTHOR_EMAIL", "ada@example.org", 1);
        setenv("GIT_COMMITTER_NAME", "Cy Committer", 1);
        setenv("GIT_COMMITTER_EMAIL", "cy@example.org", 1);
        unsetenv("SSH_AUTH_SOCK");
        unsetenv("GIT_DIR");
        fix_sh("git config --global init.defaultBranch main && "
               "git config --global protocol.file.allow always && "
               "git config --global advice.detachedHead false");
}

char *fix_tmpdir(const char *name)
{
        char *d = xasprintf("%s/%s", root, name);

        rm_rf(d);
        mkdir_p(d, 0700);
        return d;
}

void fix_cleanup(void)
{
        if (root)
                rm_rf(root);
        free(root);
        root = NULL;
}

static int run(const char *cmd, char **ret_out)
{
        strbuf sb = STRBUF_INIT;
        char buf[4096];
        size_t n;
        FILE *p = popen(cmd, "r");
        int status;

        if (!p)
                return -1;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                sb_append_len(&sb, buf, n);
        status = pclose(p);
        if (ret_out) {
                while (sb.len > 0 && sb.buf[sb.len - 1] == '\n')
                        sb.buf[--sb.len] = '\0';
                *ret_out = sb_detach(&sb);
        }
        sb_release(&sb);
        if (status < 0 || !WIFEXITED(status))
                return -1;
        return WEXITSTATUS(status);
}

int fix_sh(const char *fmt, ...)
{
        va_list ap;
        _cleanup_free_ char *cmd = NULL, *out = NULL;
        int r;

        va_start(ap, fmt);
        cmd = xvasprintf(fmt, ap);
        va_end(ap);
        r = run(cmd, &out);
        if (r != 0)
                fprintf(stderr, "command failed (%d): %s\n%s\n", r, cmd, out ? out : "");
        return r;
}

int fix_sh_quiet(const char *fmt, ...)
{
        va_list ap;
        _cleanup_free_ char *cmd = NULL, *out = NULL;

        va_start(ap, fmt);
        cmd = xvasprintf(fmt, ap);
        va_end(ap);
        return run(cmd, &out);
}

char *fix_sh_out(const char *fmt, ...)
{
        va_list ap;
        _cleanup_free_ char *cmd = NULL;
        char *out = NULL;

        va_start(ap, fmt);
        cmd = xvasprintf(fmt, ap);
        va_end(ap);
        if (run(cmd, &out) != 0)
                fprintf(stderr, "command failed: %s\n", cmd);
        return out;
}

void fix_write(const char *dir, const char *rel, const char *content)
{
        _cleanup_free_ char *path = path_join(dir, rel);
        _cleanup_free_ char *parent = xstrdup(path);
        char *slash = strrchr(parent, '/');

        if (slash) {
                *slash = '\0';
                mkdir_p(parent, 0700);
        }
        if (write_file_atomic(path, content, strlen(content), 0644) < 0) {
                fprintf(stderr, "cannot write %s\n", path);
                abort();
        }
}

char *fix_commit(const char *repo, const char *message)
{
        _cleanup_free_ char *date = NULL;

        /* A distinct, fixed time per commit keeps ids stable and ordering clear. */
        date = xasprintf("@%u +0000", 1700000000u + 60u * date_counter++);
        setenv("GIT_AUTHOR_DATE", date, 1);
        setenv("GIT_COMMITTER_DATE", date, 1);
        if (fix_sh("cd '%s' && git add -A && git commit -q --allow-empty -m '%s'", repo, message) !=
            0)
                return NULL;
        return fix_sh_out("cd '%s' && git rev-parse HEAD", repo);
}

size_t fix_count_packs(const char *bare)
{
        _cleanup_free_ char *dir = xasprintf("%s/objects/pack", bare);
        DIR *d = opendir(dir);
        struct dirent *e;
        size_t n = 0;

        if (!d)
                return 0;
        while ((e = readdir(d))) {
                size_t l = strlen(e->d_name);

                if (l > 5 && streq(e->d_name + l - 5, ".pack"))
                        n++;
        }
        closedir(d);
        return n;
}
