/*
 * The improbable dialect, etcd.improbable.io/v1alpha1
 * (improbable-eng/etcd-cluster-operator): replicas, version, a
 * volumeClaimTemplate and a small pod template.
 *
 * Design: the backup kinds of that API group are separate documents naming
 * a cluster: EtcdBackupSchedule is joined onto the cluster it names as
 * spec.snapshots and a one-off EtcdBackup is refused (api/sidekinds.c);
 * EtcdRestore is skipped with a note (api/load.c).
 */
#include <stdint.h>

#include "api/internal.h"
#include "api/reader.h"
#include "api/spec.h"

void read_spec_improbable(reader *r, const ynode *spec)
{
        etcd_cluster *c = r->c;
        if (!spec)
                return;
        static const char *const known[] = {"replicas", "version", "storage", "podTemplate", NULL};
        rd_keys(r, spec, "spec", known, NULL);
        int64_t v;
        if (rd_int(r, spec, "spec", "replicas", NULL, INT32_MIN, INT32_MAX, &v))
                c->replicas = (int)v;
        rd_string(r, spec, "spec", "version", NULL, &c->version);

        const ynode *m = NULL, *t = NULL;
        if (rd_map(r, spec, "spec", "storage", NULL, &m)) {
                static const char *const ks[] = {"volumeClaimTemplate", NULL};
                rd_keys(r, m, "spec.storage", ks, NULL);
                if (rd_map(r, m, "spec.storage", "volumeClaimTemplate", NULL, &t))
                        read_pvc_spec(r, t, "spec.storage.volumeClaimTemplate");
        }
        if (rd_map(r, spec, "spec", "podTemplate", NULL, &m)) {
                const char *P = "spec.podTemplate";
                static const char *const kp[] = {"metadata", "resources", "affinity", NULL};
                rd_keys(r, m, P, kp, NULL);
                if (rd_map(r, m, P, "metadata", NULL, &t)) {
                        static const char *const km[] = {"annotations", NULL};
                        rd_keys(r, t, "spec.podTemplate.metadata", km, NULL);
                        rd_kv(r, t, "spec.podTemplate.metadata", "annotations", NULL, false,
                              &c->pod_annotations);
                }
                rd_json(r, m, P, "resources", "spec.resources", true, &c->resources);
                rd_json(r, m, P, "affinity", "spec.affinity", true, &c->affinity);
        }
}
