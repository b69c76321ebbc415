/*
 * Loading a shared library on first use. Every library linked into gitcd is
 * mapped and relocated at each start, and the dynamic loader's share of a
 * short command (`gitcd snapshot save`, about 20 ms on loopback) was a third
 * of it: libarchive alone brought libxml2, ICU and libstdc++, libsystemd
 * libgcrypt and libcap. The few libraries that only one rare operation uses
 * (the incident bundle's tar.gz, the daemon's systemd notifications) are
 * loaded here when that operation first runs, and their functions called
 * through a table whose types come from the library's own header
 * (`__typeof__(fn) *`), so a changed signature still fails to compile.
 * Their packages stay run-time dependencies (debian/control names them,
 * since dpkg-shlibdeps cannot see a dlopen).
 */
#include <dlfcn.h>
#include <errno.h>

#include "util/dload.h"
#include "util/xalloc.h"

int dload(const char *soname, const char *const *names, size_t n, void **ret_fns, char **ret_error)
{
        void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *e = dlerror();
                *ret_error = xasprintf("cannot load %s: %s", soname, e ? e : "not found");
                return -ENOENT;
        }
        void *fns[n > 0 ? n : 1];
        for (size_t i = 0; i < n; i++) {
                (void)dlerror();
                fns[i] = dlsym(h, names[i]);
                if (!fns[i]) {
                        *ret_error = xasprintf("cannot load %s: it has no %s", soname, names[i]);
                        dlclose(h);
                        return -ENOENT;
                }
        }
        for (size_t i = 0; i < n; i++)
                ret_fns[i] = fns[i];
        return 0;
}
