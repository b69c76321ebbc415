/* The Kubernetes lab of the e2e tests (kube-lab.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "api/yaml.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/kube-lab.h"
#include "tests/harness/harness.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define NODE "node-1"

kube_lab *kube_lab_start(const char *ns, const char *version)
{
        if (!e2e_have_version(version))
                return NULL;
        _cleanup_free_ char *bin = kubeapi_find_binary();
        if (!bin) {
                fprintf(stderr, "no kube-apiserver (scripts/setup builds it): skipped\n");
                return NULL;
        }
        kube_lab *l = XNEW(kube_lab);
        l->root = harness_tmpdir("gitcd-e2e-kube-lab");
        if (kubeapi_private_hosts(l->root, &l->hosts) < 0) {
                fprintf(stderr, "no private mount namespace (needs root): skipped\n");
                kube_lab_free(l);
                return NULL;
        }
        if (kubeapi_start(&l->api) < 0) {
                fprintf(stderr, "the kube-apiserver did not start: skipped\n");
                kube_lab_free(l);
                return NULL;
        }
        l->admin = kubeapi_client(l->api, "admin");
        assert_int_equal(kubeapi_create_namespace(l->api, ns), 0);
        assert_int_equal(kubeapi_create_namespace(l->api, "gitcd"), 0);
        kube_lab_apply_yaml_file(l, "deploy/rbac.yaml");
        _cleanup_free_ char *work = path_join(l->root, "node");
        assert_int_equal(nodesim_start(l->api, NODE, work, l->hosts, &l->sim), 0);
        return l;
}

void kube_lab_free(kube_lab *l)
{
        if (!l)
                return;
        nodesim_free(l->sim);
        kube_client_free(l->admin);
        kubeapi_free(l->api);
        free(l->hosts);
        if (l->root)
                (void)rm_rf(l->root);
        free(l->root);
        free(l);
}

void kube_lab_apply_yaml_file(kube_lab *l, const char *rel)
{
        const char *src = getenv("GITCD_SOURCE_ROOT");
        _cleanup_free_ char *path = path_join(src ? src : ".", rel);
        ydoc_list docs = {0};
        diag_list diags = {0};
        assert_int_equal(yaml_load_file(path, NULL, &docs, &diags), 0);
        for (size_t i = 0; i < docs.n; i++) {
                json_t *obj = ynode_to_json(docs.docs[i].root);
                if (json_is_object(obj) && kube_apply(l->admin, obj, "e2e", false, false, NULL) < 0)
                        fail_msg("%s: %s", rel, kube_client_last_error(l->admin));
                json_decref(obj);
        }
        ydoc_list_release(&docs);
        diag_list_release(&diags);
}

size_t kube_lab_count(kube_lab *l, const kube_gvr *gvr, const char *ns, const char *selector)
{
        json_t *items = NULL;
        if (kube_list(l->admin, gvr, ns, selector, &items, NULL) < 0)
                fail_msg("list %s: %s", gvr->resource, kube_client_last_error(l->admin));
        size_t n = json_array_size(items);
        json_decref(items);
        return n;
}
