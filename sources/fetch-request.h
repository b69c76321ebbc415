/*
 * What the network part of a Git fetch is told when it runs in a process of
 * its own (sources/git.c): the source's options that the fetch reads, its
 * URL, the mirror to update and gitcd's log level. gitcd writes it and
 * reads it back itself, as one JSON object (jansson); the URL's password
 * travels in it, so it is only ever handed over in an anonymous file
 * (memfd), never on a command line or in the environment.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "sources/source.h"
#include "sources/url.h"

/* The largest request read back. */
#define FETCH_REQUEST_MAX_SIZE (1024u * 1024u)

typedef struct fetch_request {
        source_opts opts; /* only what a fetch reads; its strings point into root */
        source_url url;   /* owned */
        const char *mirror_path;
        int log_level;
        json_t *root;
} fetch_request;

/* The request as text (always succeeds). */
char *fetch_request_encode(const source_opts *opts, const source_url *url, const char *mirror_path,
                           int log_level);

/* Read it back: 0, or -EINVAL with *ret_error set (and *ret untouched). */
int fetch_request_decode(const char *text, size_t len, fetch_request *ret, char **ret_error);

void fetch_request_release(fetch_request *r);
