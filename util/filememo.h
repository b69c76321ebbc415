/*
 * What was derived from files, kept while the files stay as they were: a
 * certificate's expiry, a CA bundle's fingerprint, parsed credentials. An
 * idle pass asks for these every time; reading and parsing them again each
 * time is most of its work when nothing changed.
 *
 * A file's identity (file_id) is what stat says of it: device, inode, size,
 * modification and change times, or that it is not there. Files are written
 * whole under a new name and renamed into place (util/fs.h), so a new file
 * is a new inode; a write in place changes the times. A value is kept with
 * the identities its files had *before* it was derived: a file that changed
 * meanwhile does not match at the next lookup, and the value is derived
 * again.
 *
 * One memo is shared by every thread (a mutex around each lookup). Values
 * are the caller's: kept with a reference of their own, handed out through
 * the memo's ref function, released with its unref. A memo holds at most
 * FILEMEMO_MAX entries and forgets every one when it would hold more.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "util/strmap.h"

#define FILEMEMO_MAX       16384
#define FILEMEMO_MAX_FILES 8

typedef struct file_id {
        bool exists;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        struct timespec ctime;
} file_id;

/* The identity of path now (exists false when stat fails). */
void file_id_of(const char *path, file_id *ret);
bool file_id_same(const file_id *a, const file_id *b);

typedef struct filememo_entry {
        size_t n;
        file_id ids[FILEMEMO_MAX_FILES];
        void *value;
} filememo_entry;

typedef struct filememo {
        pthread_mutex_t lock;
        void *(*ref)(void *value); /* a new reference (or copy) of value */
        void (*unref)(void *value);
        strmap index; /* key -> entries[i] */
        filememo_entry *entries;
        size_t n, alloc;
} filememo;

#define FILEMEMO_INIT(ref_fn, unref_fn)                                                            \
        {                                                                                          \
                PTHREAD_MUTEX_INITIALIZER, ref_fn, unref_fn, STRMAP_INIT, NULL, 0, 0               \
        }

/*
 * The identities of paths[0..n) now, into ids (n at most
 * FILEMEMO_MAX_FILES): taken before a value is derived from them.
 */
void filememo_ids(const char *const *paths, size_t n, file_id *ids);

/*
 * The value kept for key when each of paths[0..n) has the identity it had
 * when the value was kept: a reference in *ret, true. false (and *ret
 * NULL) when there is none or a file changed.
 */
bool filememo_get(filememo *m, const char *key, const char *const *paths, size_t n, void **ret);

/* Keep value for key (a reference of its own), derived from files of identities ids[0..n). */
void filememo_put(filememo *m, const char *key, const file_id *ids, size_t n, void *value);

/* Every entry forgotten (tests; a memo's last user before exit). */
void filememo_clear(filememo *m);

/* xstrdup and free as a memo's ref and unref: values that are strings. */
void *filememo_strdup(void *value);
void filememo_free(void *value);
