/*
 * A container's environment and command line as the kubelet makes them,
 * for the node simulator (nodesim.c): pure functions, no I/O, so a unit
 * test holds them to the kubelet's rules under the sanitizers.
 */
#pragma once

#include <stddef.h>

/*
 * The kubelet's $(VAR) expansion (k8s.io/kubernetes third_party/forked/
 * golang/expansion): "$(NAME)" becomes NAME's value when vars defines it and
 * stays as written when it does not; "$$" is one "$" (so "$$(NAME)" is the
 * text "$(NAME)"); any other "$" stays, and so does an unclosed "$(".
 * vars holds n "NAME=VALUE" strings; when a name is there twice, the later
 * one counts (as env after envFrom). Returns a new string.
 */
char *podenv_expand(const char *in, char *const *vars, size_t n);

/* The value of NAME in vars (the later definition wins), NULL when absent. */
const char *podenv_get(char *const *vars, size_t n, const char *name);
