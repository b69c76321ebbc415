/*
 * A shared library gitcd needs only for one rare operation, loaded when that
 * operation first runs instead of at every start (see util/dload.c).
 */
#pragma once

#include <stddef.h>

/*
 * Load soname (dlopen, RTLD_NOW | RTLD_LOCAL; a library already loaded is
 * found again) and resolve names[0..n) into ret_fns[0..n), all or none.
 * Returns 0, or -ENOENT (the library is missing, or lacks one of the names)
 * with *ret_error saying which, for the caller's message. Thread-safe; the
 * library stays loaded until exit.
 */
int dload(const char *soname, const char *const *names, size_t n, void **ret_fns, char **ret_error);
