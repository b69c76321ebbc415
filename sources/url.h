/*
 * Where a source lives: classify and split a location string the way git
 * does (URL, scp-like user@host:path, or local path) and derive the two
 * credential-free forms gitcd uses: the URL handed to libgit2 and the one
 * shown to people.
 */
#pragma once

typedef enum source_url_kind {
        SOURCE_URL_LOCAL, /* a local path (a directory or a repository) */
        SOURCE_URL_FILE,  /* file:// */
        SOURCE_URL_SSH,   /* ssh:// or scp-like */
        SOURCE_URL_HTTPS,
        SOURCE_URL_HTTP,
} source_url_kind;

typedef struct source_url {
        source_url_kind kind;
        char *user;      /* from the URL, or NULL */
        char *password;  /* from the URL (never shown), or NULL */
        char *host;      /* without brackets for IPv6 */
        int port;        /* 0 when not given */
        char *path;      /* local path, or the path part of the URL */
        char *fetch_url; /* for libgit2: no password (and no user for http/https) */
        char *display;   /* for people: the same, never with credentials */
} source_url;

/* -EINVAL with *ret_error for unsupported schemes or malformed URLs. */
int source_url_parse(const char *s, source_url *ret, char **ret_error);
void source_url_release(source_url *u);
