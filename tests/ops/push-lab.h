/*
 * A lab for the push receiver, shared by tests/ops/test-push-e2e.c and
 * bench/push.c: a real smart-HTTP Git server over TLS
 * (tests/sources/git-https-server.py, git http-backend) serving a bare
 * repository, a work clone whose commits are pushed to it, and `gitcd run`
 * reading it with a webhook secret, a long poll interval (so only a push
 * makes it fetch, unless said otherwise) and --listen on a harness port.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "tests/e2e/e2e.h"

#define PUSH_LAB_SECRET "lab-webhook-secret"

typedef struct push_lab {
        e2e *e;
        char *dir;    /* e->root/lab */
        char *work;   /* the work clone */
        char *url;    /* https://localhost:PORT/fleet.git */
        char *hooks;  /* http://127.0.0.1:PORT/hooks */
        char *config; /* the daemon's configuration file */
        pid_t server; /* the Git server */
        pid_t daemon; /* gitcd run, once started */
} push_lab;

/*
 * Make the lab in a new e2e environment: the CA and certificate (openssl),
 * the repository with a first commit (a README), the Git server. NULL with
 * a message on stderr when something it needs is missing (python3,
 * git-http-backend): the caller skips.
 */
push_lab *push_lab_new(void);
/* SIGTERM to the daemon; its exit status (0 when it stopped cleanly, without a leak under ASan). */
int push_lab_stop_daemon(push_lab *l);
/* Stop the daemon and the server, remove everything. NULL: no-op. */
void push_lab_free(push_lab *l);
/*
 * Write the configuration (source "fleet" of l->url, branch main, the
 * webhook secret; interval as given, e.g. "1h") and start `gitcd run` with
 * its log in <root>/daemon.log. Returns once /healthz answers.
 */
void push_lab_start_daemon(push_lab *l, const char *interval);
/* Write rel with text in the work clone, commit, push to main; the new commit (newly allocated). */
char *push_lab_commit(push_lab *l, const char *rel, const char *text);
/* The body of a GitHub push event of commit to ref for l->url (newly allocated). */
char *push_lab_github_payload(const push_lab *l, const char *ref, const char *commit);
/*
 * POST body to <hooks>/<forge> with header "NAME: VALUE" (NULL: none) and
 * X-GitHub-Event: push; the HTTP status (0: no answer), the reply in
 * ret_body when not NULL.
 */
long push_lab_post(const push_lab *l, const char *forge, const char *header, const char *body,
                   size_t len, char **ret_body);
/* The same with a chunked body (no Content-Length, so the size is only known as it is read). */
long push_lab_post_chunked(const push_lab *l, const char *forge, const char *body, size_t len);
/* POST a GitHub push signed with secret (PUSH_LAB_SECRET: the right one); the status. */
long push_lab_github_push(const push_lab *l, const char *secret, const char *commit);
/* The daemon's /metrics (newly allocated). */
char *push_lab_metrics(const push_lab *l);
/* How many fetches of source fleet the daemon made (its fetch histogram's count). */
int push_lab_fetches(const push_lab *l);
/* How many times `needle` is in the daemon's log. */
int push_lab_log_count(const push_lab *l, const char *needle);
