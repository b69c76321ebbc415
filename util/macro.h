/*
 * Small macros every gitcd file may use: cleanup attributes in the systemd
 * style, TAKE_PTR to hand ownership out of a scope, and array sizes.
 *
 * A function uses either cleanup attributes or a single `goto out` exit,
 * never both.
 */
#pragma once

#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_     __attribute__((noreturn))
#define _likely_(x)    __builtin_expect(!!(x), 1)
#define _unlikely_(x)  __builtin_expect(!!(x), 0)

static inline void freep(void *p)
{
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Declare `name##p(type **)` calling `func(*p)`, for _cleanup_(name##p). */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
        static inline void func##p(type *p)                                                        \
        {                                                                                          \
                if (*p)                                                                            \
                        func(*p);                                                                  \
        }

/* Return the pointer and clear the variable, so its cleanup does nothing. */
/* Take the descriptor out of a _cleanup_close_ variable (which then holds -1). */
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int take_fd_ = (fd);                                                               \
                (fd) = -1;                                                                         \
                take_fd_;                                                                          \
        })
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _ptr_ = (p);                                                         \
                (p) = NULL;                                                                        \
                _ptr_;                                                                             \
        })

#define streq(a, b)     (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
/* Equal strings, where NULL equals only NULL. */
static inline int streq_ptr(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}
/* A function, not a macro: `isempty(getenv("X"))` must call getenv() once. */
static inline int isempty(const char *s)
{
        return !s || !*s;
}

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
