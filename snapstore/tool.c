/*
 * etcd's tools for snapshot files (snapstore/tool.h).
 *
 * Design: a tool is taken for the exact version asked: from gitcd's folders
 * by version first, and from PATH only when it says it is that version, so
 * a snapshot is never read or restored by another minor's tool.
 */
#include <errno.h>
#include <jansson.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/model.h"
#include "snapstore/tool.h"
#include "util/process.h"
#include "util/xalloc.h"

char *etcd_default_dir(void)
{
        const char *env = getenv("GITCD_ETCD_DIR");
        if (!isempty(env))
                return xstrdup(env);
        const char *home = getenv("HOME");
        if (isempty(home)) {
                struct passwd *pw = getpwuid(getuid());
                home = pw ? pw->pw_dir : "/";
        }
        return xasprintf("%s/.cache/gitcd/etcd", home);
}

/*
 * <etcd_dir>/<version>/<name>, then the default folder's, then a <name> on
 * PATH whose `probe` output holds want (its version).
 */
static int find_binary(const char *etcd_dir, const char *version, const char *name,
                       const char *probe, const char *want, char **ret_path)
{
        _cleanup_free_ char *dflt = etcd_default_dir();
        const char *dirs[] = {etcd_dir, dflt};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                if (isempty(dirs[i]))
                        continue;
                char *p = xasprintf("%s/%s/%s", dirs[i], version, name);
                if (access(p, X_OK) == 0) {
                        *ret_path = p;
                        return 0;
                }
                free(p);
        }
        const char *env_path = getenv("PATH");
        _cleanup_free_ char *path = xstrdup(env_path ? env_path : "/usr/bin:/bin");
        char *save = NULL;
        for (char *d = strtok_r(path, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *cand = xasprintf("%s/%s", *d ? d : ".", name);
                if (access(cand, X_OK) != 0)
                        continue;
                char *argv[] = {cand, (char *)probe, NULL};
                _cleanup_free_ char *out = NULL;
                if (process_run_capture(argv, &out) < 0)
                        continue;
                if (strstr(out, want)) {
                        *ret_path = TAKE_PTR(cand);
                        return 0;
                }
        }
        return -ENOENT;
}

int snapshot_etcd_tool(const char *etcd_dir, const char *version, char **ret_path)
{
        semver v;
        if (!version || semver_parse(version, &v) < 0)
                return -EINVAL;
        const char *tool = v.major > 3 || (v.major == 3 && v.minor >= 5) ? "etcdutl" : "etcdctl";
        _cleanup_free_ char *want = xasprintf("version: %s\n", version);
        return find_binary(etcd_dir, version, tool, "version", want, ret_path);
}

int snapshot_etcd_binary(const char *etcd_dir, const char *version, char **ret_path)
{
        semver v;
        if (!version || semver_parse(version, &v) < 0)
                return -EINVAL;
        _cleanup_free_ char *want = xasprintf("etcd Version: %s\n", version);
        int r = find_binary(etcd_dir, version, "etcd", "--version", want, ret_path);
        if (r < 0 || (*ret_path)[0] == '/')
                return r;
        /* absolute: the throwaway etcd of a drill runs in a folder of its own */
        char cwd[4096];
        if (getcwd(cwd, sizeof(cwd))) {
                char *abs_path = xasprintf("%s/%s", cwd, *ret_path);
                free(*ret_path);
                *ret_path = abs_path;
        }
        return 0;
}

int snapshot_file_status(const char *tool, const char *path, snapshot_status *ret, char **ret_error)
{
        char *argv[] = {(char *)tool, "snapshot", "status", "-w", "json", (char *)path, NULL};
        _cleanup_free_ char *out = NULL;
        int r = process_run_capture(argv, &out);
        if (r < 0) {
                /* the tool's own words: first line */
                _cleanup_free_ char *first = xstrdup(out ? out : "");
                first[strcspn(first, "\n")] = '\0';
                *ret_error =
                    xasprintf("%s snapshot status refused it%s%s", tool, *first ? ": " : "", first);
                return r == -EIO ? -EBADMSG : r;
        }
        const char *brace = strchr(out, '{');
        json_t *j = brace ? json_loads(brace, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        if (!j || !json_is_integer(json_object_get(j, "revision"))) {
                json_decref(j);
                *ret_error = xasprintf("%s snapshot status printed no revision", tool);
                return -EBADMSG;
        }
        *ret = (snapshot_status){
            .hash = (uint32_t)json_integer_value(json_object_get(j, "hash")),
            .revision = json_integer_value(json_object_get(j, "revision")),
            .total_keys = json_integer_value(json_object_get(j, "totalKey")),
            .total_size = json_integer_value(json_object_get(j, "totalSize")),
        };
        json_decref(j);
        return 0;
}
