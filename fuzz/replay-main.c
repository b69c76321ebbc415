/*
 * A main() for fuzz targets in normal builds: runs the target once on
 * every file named on the command line and on every file in the named
 * directories (not recursive), so the unit suite replays the seed corpus
 * under the plain and the sanitizer builds. A crash fails the test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/fs.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(path, 64u << 20, &data, &len);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return r;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)data, len);
        return 0;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
        path_list files = {0};
        int ret = 0;
        for (int i = 1; i < argc; i++) {
                if (!path_is_dir(argv[i])) {
                        path_list_add(&files, argv[i]);
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d) {
                        fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
                        ret = 1;
                        continue;
                }
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char *p = path_join(argv[i], de->d_name);
                        if (!path_is_dir(p))
                                path_list_add(&files, p);
                        free(p);
                }
                closedir(d);
        }
        if (files.n > 0) /* qsort(NULL, 0) is undefined */
                qsort(files.paths, files.n, sizeof(char *), cmp_str);
        for (size_t i = 0; i < files.n; i++)
                if (run_file(files.paths[i]) < 0)
                        ret = 1;
        printf("replayed %zu inputs\n", files.n);
        path_list_release(&files);
        return ret;
}
