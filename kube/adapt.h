/*
 * Fitting rendered objects to the API server at hand. Render emits the
 * current API versions (policy/v1 PodDisruptionBudget); an older server
 * (1.20 serves PodDisruptionBudget only as policy/v1beta1) gets the
 * version it prefers, found by discovery. The object's fields are the
 * same in both versions for everything gitcd renders.
 */
#pragma once

#include <jansson.h>

#include "kube/client.h"

/*
 * Rewrite obj's apiVersion, in place, to the version of its group the
 * server prefers for its kind. Kinds whose group the server does not offer
 * at all are -ENOENT with a message in kube_client_last_error()-style
 * *ret_error (e.g. cert-manager.io Certificates without cert-manager
 * installed). Objects of the core group are left as they are.
 */
int kube_adapt_object(kube_client *c, json_t *obj, char **ret_error);
